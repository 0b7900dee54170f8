#include "daemon/symbolizer/module_symbols.h"

#include <cxxabi.h>
#include <elf.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/elf/debug_file.h"
#include "daemon/elf/elf_file.h"

namespace pystrobe {
namespace {

// What is symbolized: functions, and the resolvers of indirect functions
// (memcpy's ifunc), which perf names the same way.
bool IsFunctionSymbol(const ElfSymbolEntry& symbol) {
  return (symbol.type == STT_FUNC || symbol.type == STT_GNU_IFUNC) && symbol.value != 0 &&
         !symbol.name.empty();
}

absl::Status ForEachFunctionSymbolIn(
    const ElfFile& file,
    absl::FunctionRef<void(absl::string_view name, uint64_t start, uint64_t size)> visit) {
  return file.ForEachSymbol([&](const ElfSymbolEntry& symbol) {
    if (IsFunctionSymbol(symbol)) visit(symbol.name, symbol.value, symbol.size);
  });
}

// Symbols as the file lists them, names appended to one pool: .symtab and
// .dynsym (and the debug file) repeat most names, so the pool is rebuilt after
// deduplication.
struct SymbolCollector {
  struct Raw {
    uint64_t start;
    uint64_t size;
    uint32_t name;
    uint32_t name_size;
  };
  std::vector<Raw> symbols;
  std::string names;
  std::vector<ModuleSymbols::Segment> segments;
  std::string build_id;

  // `name` is NUL-terminated at name.size() (ElfSymbolEntry::name).
  void Add(absl::string_view name, uint64_t start, uint64_t size) {
    // Symbols without a size (assembler labels) cover nothing.
    if (size == 0) return;
    std::unique_ptr<char, decltype(&free)> demangled(nullptr, &free);
    if (absl::StartsWith(name, "_Z")) {
      demangled.reset(abi::__cxa_demangle(name.data(), nullptr, nullptr, nullptr));
      if (demangled != nullptr) name = demangled.get();
    }
    if (names.size() + name.size() + 1 > std::numeric_limits<uint32_t>::max()) return;
    symbols.push_back({start, std::min<uint64_t>(size, std::numeric_limits<uint32_t>::max()),
                       static_cast<uint32_t>(names.size()), static_cast<uint32_t>(name.size())});
    names.append(name.data(), name.size());
    names.push_back('\0');
  }

  void TakeIdentity(const ElfFile& file) {
    for (const ElfLoadSegment& segment : file.load_segments()) {
      if (segment.executable) segments.push_back({segment.vaddr, segment.mem_size, segment.offset});
    }
    build_id = file.build_id();
  }

  // One entry per start address: the widest symbol, and among aliases of one
  // size the shortest name ("qsort" rather than "__GI_qsort").
  std::shared_ptr<const ModuleSymbols> Build() {
    std::sort(symbols.begin(), symbols.end(), [this](const Raw& a, const Raw& b) {
      if (a.start != b.start) return a.start < b.start;
      if (a.size != b.size) return a.size > b.size;
      if (a.name_size != b.name_size) return a.name_size < b.name_size;
      return strcmp(&names[a.name], &names[b.name]) < 0;
    });
    std::vector<ModuleSymbols::Symbol> table;
    std::string pool;
    uint64_t reach = 0;
    for (size_t i = 0; i < symbols.size(); ++i) {
      const Raw& raw = symbols[i];
      if (i > 0 && raw.start == symbols[i - 1].start) continue;
      reach = std::max(reach, raw.start + raw.size);
      table.push_back(
          {raw.start, reach, static_cast<uint32_t>(raw.size), static_cast<uint32_t>(pool.size())});
      pool.append(&names[raw.name], raw.name_size + 1);
    }
    table.shrink_to_fit();
    pool.shrink_to_fit();
    segments.shrink_to_fit();
    build_id.shrink_to_fit();
    return std::make_shared<const ModuleSymbols>(std::move(segments), std::move(table),
                                                 std::move(pool), std::move(build_id));
  }
};

// 32-bit processes' libraries are named too: symbols need no 64-bit layout.
constexpr ElfOpenOptions kAnyClass = {.allow_32bit = true};

}  // namespace

absl::Status ForEachFunctionSymbol(
    const ElfFile& file,
    absl::FunctionRef<void(absl::string_view name, uint64_t start, uint64_t size)> visit) {
  // The debug file first, as the search finds it. Its tables are a bonus: one
  // that cannot be read leaves the file's own.
  const DebugFileSearch search = {.check_debuglink_crc = true};
  if (std::optional<std::string> debug_path = FindDebugFile(file.name(), file, search)) {
    if (absl::StatusOr<ElfFile> debug_file = ElfFile::Open(*debug_path, kAnyClass);
        debug_file.ok()) {
      ForEachFunctionSymbolIn(*debug_file, visit).IgnoreError();
    }
  }
  return ForEachFunctionSymbolIn(file, visit);
}

absl::StatusOr<std::shared_ptr<const ModuleSymbols>> ModuleSymbols::Load(const std::string& path) {
  absl::StatusOr<ElfFile> file = ElfFile::Open(path, kAnyClass);
  if (!file.ok()) return absl::NotFoundError(file.status().message());
  SymbolCollector collector;
  collector.TakeIdentity(*file);
  absl::Status status =
      ForEachFunctionSymbol(*file, [&](absl::string_view name, uint64_t start, uint64_t size) {
        collector.Add(name, start, size);
      });
  if (!status.ok()) return status;
  return collector.Build();
}

std::shared_ptr<const ModuleSymbols> ModuleSymbols::LoadVdso() {
  SymbolCollector collector;
  // The vDSO is mapped whole from offset 0: its "file offset" is the address
  // minus the mapping's start, and its segments come from the image itself.
  // It has no debug file.
  if (absl::StatusOr<ElfFile> image = ElfFile::InMemory(VdsoImage(), "[vdso]"); image.ok()) {
    collector.TakeIdentity(*image);
    ForEachFunctionSymbolIn(*image, [&](absl::string_view name, uint64_t start, uint64_t size) {
      collector.Add(name, start, size);
    }).IgnoreError();
  }
  if (collector.segments.empty()) {
    // Linked at 0, as every x86-64 kernel links it.
    collector.segments.push_back({0, std::numeric_limits<uint64_t>::max(), 0});
  }
  return collector.Build();
}

std::optional<absl::string_view> ModuleSymbols::FunctionAt(uint64_t file_offset) const {
  for (const Segment& segment : segments_) {
    if (file_offset < segment.file_offset || file_offset - segment.file_offset >= segment.size) {
      continue;
    }
    uint64_t vaddr = file_offset - segment.file_offset + segment.vaddr;
    auto it = std::upper_bound(symbols_.begin(), symbols_.end(), vaddr,
                               [](uint64_t a, const Symbol& s) { return a < s.start; });
    while (it != symbols_.begin()) {
      --it;
      if (vaddr - it->start < it->size) return absl::string_view(&names_[it->name]);
      if (it->reach <= vaddr) break;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

size_t ModuleSymbols::MemoryBytes() const {
  return sizeof(*this) + segments_.capacity() * sizeof(Segment) +
         symbols_.capacity() * sizeof(Symbol) + names_.capacity() + build_id_.capacity();
}

}  // namespace pystrobe
