#include "daemon/symbolizer/module_symbol_cache.h"

#include <sys/stat.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/elf/elf_file.h"
#include "daemon/procfs/paths.h"

namespace pystrobe {
namespace {

int64_t Nanoseconds(const struct timespec& time) {
  return int64_t{time.tv_sec} * 1000000000 + time.tv_nsec;
}

// The path under which pid's file can be opened from pystrobe's mount
// namespace.
std::string PathInProcess(uint32_t pid, const ExecutableMapping& mapping) {
  if (mapping.deleted) {
    return procfs::MapFilesPath(pid, mapping.start, mapping.end);
  }
  return procfs::MappedFilePath(pid, mapping.path);
}

}  // namespace

std::shared_ptr<const ModuleSymbols> ModuleSymbolCache::Get(uint32_t pid,
                                                            const ExecutableMapping& mapping) {
  // The vDSO has no inode; one kernel, one image.
  Key key = mapping.is_vdso() ? Key{0, 0} : Key{mapping.dev, mapping.inode};
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    struct stat st;
    std::optional<FileStamp> now;
    if (!mapping.is_vdso() && it->second.stamp != FileStamp() &&
        stat(PathInProcess(pid, mapping).c_str(), &st) == 0 && st.st_ino == mapping.inode) {
      now = FileStamp{st.st_size, Nanoseconds(st.st_mtim), Nanoseconds(st.st_ctim)};
    }
    if (!now.has_value() || *now == it->second.stamp) {
      ++stats_.hits;
      lru_.splice(lru_.begin(), lru_, it->second.lru_position);
      return it->second.symbols;
    }
    ++stats_.reloads;
    EraseLocked(it);
  }
  return LoadLocked(pid, mapping, key);
}

std::shared_ptr<const ModuleSymbols> ModuleSymbolCache::LoadLocked(uint32_t pid,
                                                                   const ExecutableMapping& mapping,
                                                                   const Key& key) {
  Entry entry;
  if (mapping.is_vdso()) {
    entry.symbols = ModuleSymbols::LoadVdso();
  } else {
    std::string path = PathInProcess(pid, mapping);
    struct stat in_process;
    if (stat(path.c_str(), &in_process) != 0 || in_process.st_ino != mapping.inode) {
      // Gone, or replaced at that path since it was mapped: the symbols of
      // another file would be wrong names, not missing ones.
      ++stats_.load_failures;
      return nullptr;
    }
    entry.stamp = {in_process.st_size, Nanoseconds(in_process.st_mtim),
                   Nanoseconds(in_process.st_ctim)};
    // When pystrobe sees the same file at the same path (no container), open
    // it there: .gnu_debuglink files are looked up next to the path and under
    // /usr/lib/debug/<directory>, which a /proc/PID/root path would miss.
    struct stat here;
    if (!mapping.deleted && stat(mapping.path.c_str(), &here) == 0 &&
        here.st_dev == in_process.st_dev && here.st_ino == in_process.st_ino) {
      path = mapping.path;
    }
    absl::StatusOr<std::shared_ptr<const ModuleSymbols>> symbols = ModuleSymbols::Load(path);
    if (!symbols.ok()) {
      ++stats_.load_failures;
      return nullptr;
    }
    entry.symbols = *std::move(symbols);
  }
  ++stats_.loads;
  entry.bytes = entry.symbols->MemoryBytes();
  lru_.push_front(key);
  entry.lru_position = lru_.begin();
  stats_.bytes += entry.bytes;
  std::shared_ptr<const ModuleSymbols> symbols = entry.symbols;
  entries_.emplace(key, std::move(entry));
  stats_.modules = entries_.size();
  EvictLocked();
  return symbols;
}

void ModuleSymbolCache::EraseLocked(absl::flat_hash_map<Key, Entry>::iterator it) {
  stats_.bytes -= it->second.bytes;
  lru_.erase(it->second.lru_position);
  entries_.erase(it);
  stats_.modules = entries_.size();
}

void ModuleSymbolCache::EvictLocked() {
  // Oldest first, skipping tables a ProcessSymbols still holds.
  for (auto key = lru_.end(); stats_.bytes > options_.max_bytes && key != lru_.begin();) {
    --key;
    auto it = entries_.find(*key);
    if (it->second.symbols.use_count() > 1) continue;
    key = std::next(key);  // EraseLocked invalidates the current position.
    EraseLocked(it);
    ++stats_.evictions;
  }
}

ModuleSymbolCache::Stats ModuleSymbolCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace pystrobe
