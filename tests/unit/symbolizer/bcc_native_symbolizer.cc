#include "tests/unit/symbolizer/bcc_native_symbolizer.h"

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "daemon/procfs/paths.h"
#include "daemon/symbolizer/proc_maps.h"

// BCC's headers stay in this file: they pull in BCC's own copies of kernel and
// libbpf declarations, which clash with libbpf's bpf/ headers used elsewhere.
#include <bcc/bcc_elf.h>
#include <bcc/bcc_syms.h>

namespace pystrobe {
namespace {

class DeletedFileSymbols;

// An executable mapping of a file (or the vDSO) in the target, with what
// names its frames when BCC cannot.
struct Mapping : ExecutableMapping {
  std::string module;  // Basename of the file, e.g. "libc.so.6".
  // Set for deleted files, which BCC cannot open; shared by their mappings.
  std::shared_ptr<const DeletedFileSymbols> deleted_symbols;
};

std::string Demangle(const char* name) {
  if (strncmp(name, "_Z", 2) == 0) {
    std::unique_ptr<char, decltype(&free)> demangled(
        abi::__cxa_demangle(name, nullptr, nullptr, nullptr), &free);
    if (demangled != nullptr) return demangled.get();
  }
  return name;
}

// The function symbols of a file that was deleted (or replaced, as package
// upgrades do) after the process mapped it. BCC opens modules by path and
// finds nothing there, but /proc/PID/map_files still opens the mapped file.
// Loaded whole at once, so nothing needs the file afterwards.
class DeletedFileSymbols {
 public:
  static std::shared_ptr<const DeletedFileSymbols> Load(uint32_t pid, const Mapping& mapping) {
    std::string map_file = procfs::MapFilesPath(pid, mapping.start, mapping.end);
    int fd = open(map_file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return nullptr;
    std::string path = procfs::SelfFdPath(fd);
    auto symbols = std::make_shared<DeletedFileSymbols>();
    bcc_symbol_option option = {
        .use_debug_file = 1,  // Found by build id; the debuglink's directory is gone.
        .check_debug_file_crc = 1,
        .lazy_symbolize = 0,
        .use_symbol_type = (1 << STT_FUNC) | (1 << STT_GNU_IFUNC),
    };
    bcc_elf_foreach_load_section(path.c_str(), &AddSegment, symbols.get());
    bcc_elf_foreach_sym(path.c_str(), &AddSymbol, &option, symbols.get());
    close(fd);
    std::sort(symbols->symbols_.begin(), symbols->symbols_.end(),
              [](const Symbol& a, const Symbol& b) { return a.start < b.start; });
    return symbols;
  }

  // addr is in `mapping`, one of this file's mappings.
  std::optional<std::string> Resolve(uint64_t addr, const Mapping& mapping) const {
    uint64_t file_offset = addr - mapping.start + mapping.file_offset;
    for (const Segment& segment : segments_) {
      if (file_offset < segment.file_offset || file_offset >= segment.file_offset + segment.size) {
        continue;
      }
      uint64_t vaddr = file_offset - segment.file_offset + segment.vaddr;
      auto it = std::upper_bound(symbols_.begin(), symbols_.end(), vaddr,
                                 [](uint64_t a, const Symbol& s) { return a < s.start; });
      // Symbols may nest or alias; the closest start that covers vaddr wins.
      while (it != symbols_.begin()) {
        --it;
        if (vaddr < it->start + it->size) return Demangle(it->name.c_str());
        if (vaddr - it->start > kMaxFunctionSize) break;
      }
      return std::nullopt;
    }
    return std::nullopt;
  }

 private:
  struct Segment {
    uint64_t vaddr;
    uint64_t size;
    uint64_t file_offset;
  };
  struct Symbol {
    uint64_t start;
    uint64_t size;
    std::string name;
  };
  // Bounds the backwards scan for a covering symbol.
  static constexpr uint64_t kMaxFunctionSize = 1 << 20;

  static int AddSegment(uint64_t vaddr, uint64_t size, uint64_t file_offset, void* self) {
    static_cast<DeletedFileSymbols*>(self)->segments_.push_back({vaddr, size, file_offset});
    return 0;
  }
  static int AddSymbol(const char* name, uint64_t start, uint64_t size, void* self) {
    static_cast<DeletedFileSymbols*>(self)->symbols_.push_back({start, size, name});
    return 0;
  }

  std::vector<Segment> segments_;
  std::vector<Symbol> symbols_;
};

absl::string_view Basename(absl::string_view path) {
  size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

absl::StatusOr<std::vector<Mapping>> ReadMappings(uint32_t pid) {
  absl::StatusOr<std::vector<ExecutableMapping>> executable = ReadExecutableMappings(pid);
  if (!executable.ok()) return executable.status();
  std::vector<Mapping> mappings;
  mappings.reserve(executable->size());
  for (ExecutableMapping& where : *executable) {
    std::string module(Basename(where.path));
    mappings.push_back(Mapping{std::move(where), std::move(module), nullptr});
  }
  return mappings;
}

// Owns one BCC symbol cache (a ProcSyms), which holds an fd per module.
class BccSymbolCache {
 public:
  BccSymbolCache(uint32_t pid, const BccNativeSymbolizer::Options& options) : pid_(pid) {
    bcc_symbol_option option = {
        .use_debug_file = 1,
        .check_debug_file_crc = 1,
        .lazy_symbolize = options.lazy_names ? 1 : 0,
        .use_symbol_type = (1 << STT_FUNC) | (1 << STT_GNU_IFUNC),
    };
    cache_ = bcc_symcache_new(static_cast<int>(pid), &option);
  }
  BccSymbolCache(const BccSymbolCache&) = delete;
  BccSymbolCache& operator=(const BccSymbolCache&) = delete;
  ~BccSymbolCache() {
    if (cache_ != nullptr) bcc_free_symcache(cache_, static_cast<int>(pid_));
  }

  bool ok() const { return cache_ != nullptr; }

  // The (demangled) function covering addr, if BCC knows one.
  std::optional<std::string> Resolve(uint64_t addr) {
    bcc_symbol symbol = {};
    if (bcc_symcache_resolve(cache_, addr, &symbol) != 0 || symbol.name == nullptr) {
      return std::nullopt;
    }
    std::string name = symbol.demangle_name != nullptr ? symbol.demangle_name : symbol.name;
    bcc_symbol_free_demangle_name(&symbol);
    return name;
  }

 private:
  uint32_t pid_;
  void* cache_ = nullptr;
};

class BccProcessSymbols final : public ProcessSymbols {
 public:
  static absl::StatusOr<std::unique_ptr<BccProcessSymbols>> Create(
      uint32_t pid, const BccNativeSymbolizer::Options& options) {
    absl::StatusOr<ImageIdentity> identity = ReadImageIdentity(pid);
    if (!identity.ok()) return identity.status();
    auto symbols =
        std::unique_ptr<BccProcessSymbols>(new BccProcessSymbols(pid, *identity, options));
    if (absl::Status status = symbols->Snapshot(); !status.ok()) return status;
    return symbols;
  }

  std::string Symbolize(uint64_t addr) override {
    if (std::optional<std::string> name = cache_->Resolve(addr)) return *std::move(name);
    const Mapping* mapping = FindMapping(addr);
    if (mapping == nullptr && MaybeRefresh()) {
      if (std::optional<std::string> name = cache_->Resolve(addr)) return *std::move(name);
      mapping = FindMapping(addr);
    }
    if (mapping == nullptr) return "[unknown]";
    if (mapping->deleted_symbols != nullptr) {
      std::optional<std::string> name = mapping->deleted_symbols->Resolve(addr, *mapping);
      if (name.has_value()) return *std::move(name);
    }
    return absl::StrFormat("%s+0x%x", mapping->module,
                           addr - mapping->start + mapping->file_offset);
  }

 private:
  BccProcessSymbols(uint32_t pid, ImageIdentity identity,
                    const BccNativeSymbolizer::Options& options)
      : pid_(pid), identity_(identity), options_(options) {}

  // (Re)reads the maps and builds a new BCC cache; keeps the old state unless
  // the new one is complete and of the same image.
  absl::Status Snapshot() {
    absl::StatusOr<std::vector<Mapping>> mappings = ReadMappings(pid_);
    if (!mappings.ok()) return mappings.status();
    auto cache = std::make_unique<BccSymbolCache>(pid_, options_);
    if (!cache->ok()) return absl::InternalError(absl::StrCat("bcc_symcache_new(", pid_, ")"));
    if (options_.load_eagerly) {
      // A lookup in a module makes BCC load that module's whole table.
      for (const Mapping& mapping : *mappings) cache->Resolve(mapping.start);
    }
    LoadDeletedFiles(*mappings);
    // An exec during the snapshot would mix two images. A process that exited
    // meanwhile is kept: what was loaded is still the best we will get.
    absl::StatusOr<ImageIdentity> identity = ReadImageIdentity(pid_);
    if (identity.ok() && *identity != identity_) {
      return absl::AbortedError(absl::StrCat("process ", pid_, " exec'd during the snapshot"));
    }
    std::sort(mappings->begin(), mappings->end(),
              [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
    mappings_ = *std::move(mappings);
    cache_ = std::move(cache);
    return absl::OkStatus();
  }

  // Deleted files are always loaded now: map_files is gone with the process.
  void LoadDeletedFiles(std::vector<Mapping>& mappings) {
    std::map<std::string, std::shared_ptr<const DeletedFileSymbols>> loaded;
    for (Mapping& mapping : mappings) {
      if (!mapping.deleted) continue;
      auto [it, inserted] = loaded.try_emplace(mapping.path);
      if (inserted) it->second = DeletedFileSymbols::Load(pid_, mapping);
      mapping.deleted_symbols = it->second;
    }
  }

  // Refreshes for libraries loaded after the snapshot, but only while the
  // process still runs this image: after exit or exec the maps describe
  // nothing, or another image, and the old snapshot is all there is.
  bool MaybeRefresh() {
    absl::Time now = absl::Now();
    if (now - last_refresh_ < options_.min_refresh_interval) return false;
    last_refresh_ = now;
    absl::StatusOr<ImageIdentity> identity = ReadImageIdentity(pid_);
    if (!identity.ok() || *identity != identity_) return false;
    return Snapshot().ok();
  }

  const Mapping* FindMapping(uint64_t addr) const { return MappingAt(mappings_, addr); }

  uint32_t pid_;
  ImageIdentity identity_;
  BccNativeSymbolizer::Options options_;
  std::vector<Mapping> mappings_;  // Sorted by start.
  std::unique_ptr<BccSymbolCache> cache_;
  absl::Time last_refresh_ = absl::InfinitePast();
};

}  // namespace

absl::StatusOr<std::unique_ptr<ProcessSymbols>> BccNativeSymbolizer::ForProcess(uint32_t pid) {
  absl::StatusOr<std::unique_ptr<BccProcessSymbols>> symbols =
      BccProcessSymbols::Create(pid, options_);
  if (!symbols.ok()) return symbols.status();
  return std::unique_ptr<ProcessSymbols>(*std::move(symbols));
}

}  // namespace pystrobe
