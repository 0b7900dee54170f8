#include "tests/unit/symbolizer/bcc_symbols.h"

#include <elf.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

// BCC's headers stay in this file: they pull in BCC's own copies of kernel and
// libbpf declarations, which clash with libbpf's bpf/ headers used elsewhere.
#include <bcc/bcc_elf.h>
#include <bcc/bcc_syms.h>

namespace pystrobe {
namespace {

int AddSymbol(const char* name, uint64_t start, uint64_t size, void* out) {
  static_cast<std::vector<BccSymbol>*>(out)->push_back({name, start, size});
  return 0;
}

}  // namespace

absl::StatusOr<std::vector<BccSymbol>> BccFunctionSymbols(const std::string& path) {
  bcc_symbol_option option = {
      .use_debug_file = 1,
      .check_debug_file_crc = 1,
      .lazy_symbolize = 0,
      .use_symbol_type = (1 << STT_FUNC) | (1 << STT_GNU_IFUNC),
  };
  std::vector<BccSymbol> symbols;
  if (bcc_elf_foreach_sym(path.c_str(), &AddSymbol, &option, &symbols) < 0) {
    return absl::NotFoundError(absl::StrCat("bcc_elf_foreach_sym(", path, ") failed"));
  }
  return symbols;
}

}  // namespace pystrobe
