#ifndef PYSTROBE_DAEMON_SYMBOLIZER_MODULE_SYMBOL_CACHE_H_
#define PYSTROBE_DAEMON_SYMBOLIZER_MODULE_SYMBOL_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "daemon/symbolizer/module_symbols.h"
#include "daemon/symbolizer/proc_maps.h"

namespace pystrobe {

// Symbol tables of the files processes map, loaded once per file and shared
// by every process that maps it: 500 Python processes cost one python3.11 and
// one libc table, not 500.
//
// Files are keyed by (dev, inode) from the maps line, which the mapping keeps
// alive, so a file replaced by a package upgrade (new inode) gets a new entry.
// What the key cannot tell is an inode number reused after the old file was
// freed while its table was still cached: a hit is checked against the size,
// mtime and ctime the file had at load whenever the process's path still
// reaches that inode, and reloaded when they differ.
//
// Tables stay cached while unused, least recently used first out once the
// total exceeds max_bytes. A table a ProcessSymbols holds (shared_ptr) is
// pinned: it is never evicted, and the total may exceed the bound when the
// pinned tables alone do.
//
// Thread-safe (one mutex; loads run under it).
class ModuleSymbolCache {
 public:
  struct Options {
    size_t max_bytes = size_t{64} << 20;
  };
  struct Stats {
    uint64_t loads = 0;          // Tables read from files.
    uint64_t hits = 0;           // Lookups served from the cache.
    uint64_t load_failures = 0;  // Files that could not be read (not cached).
    uint64_t evictions = 0;
    uint64_t reloads = 0;  // Hits found stale (reused inode, rewritten file).
    size_t modules = 0;    // Tables cached now.
    size_t bytes = 0;      // Their MemoryBytes().
  };

  ModuleSymbolCache() : ModuleSymbolCache(Options()) {}
  explicit ModuleSymbolCache(Options options) : options_(options) {}

  // The table of the file `mapping` maps in pid, loaded now if not cached;
  // nullptr when the file cannot be read. The file is opened as pid sees it:
  // /proc/PID/root/<path>, or /proc/PID/map_files/<start>-<end> once deleted
  // (which needs CAP_SYS_ADMIN).
  std::shared_ptr<const ModuleSymbols> Get(uint32_t pid, const ExecutableMapping& mapping);

  Stats stats() const;

 private:
  struct Key {
    uint64_t dev;
    uint64_t inode;
    bool operator==(const Key&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& key) {
      return H::combine(std::move(h), key.dev, key.inode);
    }
  };
  // What the file looked like at load; all zero when unknown.
  struct FileStamp {
    int64_t size = 0;
    int64_t mtime_ns = 0;
    int64_t ctime_ns = 0;
    bool operator==(const FileStamp&) const = default;
  };
  struct Entry {
    std::shared_ptr<const ModuleSymbols> symbols;
    FileStamp stamp;
    size_t bytes = 0;
    std::list<Key>::iterator lru_position;
  };

  std::shared_ptr<const ModuleSymbols> LoadLocked(uint32_t pid, const ExecutableMapping& mapping,
                                                  const Key& key);
  void EraseLocked(absl::flat_hash_map<Key, Entry>::iterator it);
  void EvictLocked();

  const Options options_;
  mutable std::mutex mutex_;
  absl::flat_hash_map<Key, Entry> entries_;
  std::list<Key> lru_;  // Front: most recently used.
  Stats stats_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SYMBOLIZER_MODULE_SYMBOL_CACHE_H_
