#include "daemon/python/elf_symbol_cache.h"

#include "absl/strings/str_join.h"

namespace pystrobe {

ElfSymbolCache& ElfSymbolCache::Shared() {
  static ElfSymbolCache* cache = new ElfSymbolCache();
  return *cache;
}

absl::flat_hash_map<std::string, ElfSymbol> ElfSymbolCache::FindSymbols(
    const ElfFile& file, absl::Span<const absl::string_view> names) {
  Key key{file.identity(), absl::StrJoin(names, "\n")};
  {
    absl::MutexLock lock(&mu_);
    if (auto it = found_.find(key); it != found_.end()) {
      ++hits_;
      return it->second;
    }
  }
  // Scanned without the lock: two threads may scan the same binary once each.
  absl::flat_hash_map<std::string, ElfSymbol> found = file.FindSymbols(names);
  absl::MutexLock lock(&mu_);
  if (found_.size() >= kMaxBinaries) found_.clear();
  found_.try_emplace(std::move(key), found);
  return found;
}

size_t ElfSymbolCache::size() const {
  absl::MutexLock lock(&mu_);
  return found_.size();
}

uint64_t ElfSymbolCache::hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}

}  // namespace pystrobe
