#include "daemon/symbolizer/module_symbols.h"

#include <cxxabi.h>
#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/symbolizer/elf_identity.h"
#include "daemon/symbolizer/proc_maps.h"

// BCC's headers stay in this file: they pull in BCC's own copies of kernel and
// libbpf declarations, which clash with libbpf's bpf/ headers used elsewhere.
#include <bcc/bcc_elf.h>
#include <bcc/bcc_syms.h>

namespace pystrobe {
namespace {

// Symbols as BCC reports them, names appended to one pool: .symtab and .dynsym
// (and the debug file) repeat most names, so the pool is rebuilt after
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

  void Add(const char* name, uint64_t start, uint64_t size) {
    if (start == 0 || name[0] == '\0') return;
    std::unique_ptr<char, decltype(&free)> demangled(nullptr, &free);
    if (strncmp(name, "_Z", 2) == 0) {
      demangled.reset(abi::__cxa_demangle(name, nullptr, nullptr, nullptr));
      if (demangled != nullptr) name = demangled.get();
    }
    size_t length = strlen(name);
    if (names.size() + length + 1 > std::numeric_limits<uint32_t>::max()) return;
    symbols.push_back({start, std::min<uint64_t>(size, std::numeric_limits<uint32_t>::max()),
                       static_cast<uint32_t>(names.size()), static_cast<uint32_t>(length)});
    names.append(name, length + 1);
  }

  static int AddSymbol(const char* name, uint64_t start, uint64_t size, void* self) {
    static_cast<SymbolCollector*>(self)->Add(name, start, size);
    return 0;
  }

  // One entry per start address: the widest symbol, and among aliases of one
  // size the shortest name ("qsort" rather than "__GI_qsort"). Symbols without
  // a size (assembler labels) cover nothing and are dropped.
  std::shared_ptr<const ModuleSymbols> Build() {
    std::erase_if(symbols, [](const Raw& s) { return s.size == 0; });
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

bcc_symbol_option SymbolOption() {
  return {
      .use_debug_file = 1,
      .check_debug_file_crc = 1,
      .lazy_symbolize = 0,
      .use_symbol_type = (1 << STT_FUNC) | (1 << STT_GNU_IFUNC),
  };
}

// The vDSO image as this process maps it (the same image in every process of
// this kernel).
absl::StatusOr<ElfIdentity> ReadVdsoIdentity() {
  absl::StatusOr<std::vector<ExecutableMapping>> mappings =
      ReadExecutableMappings(static_cast<uint32_t>(getpid()));
  if (!mappings.ok()) return mappings.status();
  for (const ExecutableMapping& mapping : *mappings) {
    if (!mapping.is_vdso()) continue;
    return ReadElfIdentityInMemory(reinterpret_cast<const void*>(mapping.start),
                                   mapping.end - mapping.start);
  }
  return absl::NotFoundError("no vDSO mapped");
}

}  // namespace

absl::StatusOr<std::shared_ptr<const ModuleSymbols>> ModuleSymbols::Load(const std::string& path) {
  SymbolCollector collector;
  absl::StatusOr<ElfIdentity> identity = ReadElfIdentity(path);
  if (!identity.ok()) {
    return absl::NotFoundError(absl::StrCat("cannot read ELF program headers of ", path, ": ",
                                            identity.status().message()));
  }
  collector.segments = std::move(identity->code_segments);
  collector.build_id = std::move(identity->build_id);
  bcc_symbol_option option = SymbolOption();
  if (bcc_elf_foreach_sym(path.c_str(), &SymbolCollector::AddSymbol, &option, &collector) < 0) {
    return absl::NotFoundError(absl::StrCat("cannot read ELF symbols of ", path));
  }
  return collector.Build();
}

std::shared_ptr<const ModuleSymbols> ModuleSymbols::LoadVdso() {
  SymbolCollector collector;
  bcc_elf_foreach_vdso_sym(&SymbolCollector::AddSymbol, &collector);
  // The vDSO is mapped whole from offset 0: its "file offset" is the address
  // minus the mapping's start, and its segments come from the image itself.
  if (absl::StatusOr<ElfIdentity> identity = ReadVdsoIdentity(); identity.ok()) {
    collector.segments = std::move(identity->code_segments);
    collector.build_id = std::move(identity->build_id);
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
