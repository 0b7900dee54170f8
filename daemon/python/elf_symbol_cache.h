// The symbols CPython discovery looked for in each binary, remembered by the
// binary's identity. A host starts the same programs over and over (a
// compiler per source file, a shell per line of a script); without this,
// each new process had its executable's and libraries' whole symbol tables
// scanned again, which was most of an always-on daemon's CPU on a busy build
// machine.
#ifndef PYSTROBE_DAEMON_PYTHON_ELF_SYMBOL_CACHE_H_
#define PYSTROBE_DAEMON_PYTHON_ELF_SYMBOL_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "daemon/elf/elf_file.h"

namespace pystrobe {

class ElfSymbolCache {
 public:
  // Remembers this many binaries at most; past that it starts afresh (a host
  // rarely runs so many distinct binaries, and then only the scans repeat).
  static constexpr size_t kMaxBinaries = 4096;

  // The one cache of this process.
  static ElfSymbolCache& Shared();

  // file.FindSymbols(names), from memory when the same binary (by identity)
  // was asked for the same names before.
  absl::flat_hash_map<std::string, ElfSymbol> FindSymbols(
      const ElfFile& file, absl::Span<const absl::string_view> names);

  size_t size() const;
  uint64_t hits() const;

 private:
  struct Key {
    FileIdentity binary;
    std::string names;  // the names asked for, joined

    friend bool operator==(const Key&, const Key&) = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& key) {
      return H::combine(std::move(h), key.binary, key.names);
    }
  };

  mutable absl::Mutex mu_;
  absl::flat_hash_map<Key, absl::flat_hash_map<std::string, ElfSymbol>> found_ ABSL_GUARDED_BY(mu_);
  uint64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_PYTHON_ELF_SYMBOL_CACHE_H_
