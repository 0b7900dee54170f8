// BCC's reading of ELF symbol tables (bcc_elf_foreach_sym), a test-time
// reference for daemon/elf and ModuleSymbols: the product read symbols
// through it until daemon/elf took over, and perf names frames the same way.
#ifndef PYSTROBE_TESTS_UNIT_SYMBOLIZER_BCC_SYMBOLS_H_
#define PYSTROBE_TESTS_UNIT_SYMBOLIZER_BCC_SYMBOLS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pystrobe {

struct BccSymbol {
  std::string name;  // As the file has it (mangled).
  uint64_t start = 0;
  uint64_t size = 0;

  friend bool operator==(const BccSymbol&, const BccSymbol&) = default;
  friend auto operator<=>(const BccSymbol&, const BccSymbol&) = default;
};

// What bcc_elf_foreach_sym reports for `path` with the options the product
// used: STT_FUNC and STT_GNU_IFUNC symbols, the separate debug file's
// (found by build id, or by .gnu_debuglink with its CRC checked) included.
absl::StatusOr<std::vector<BccSymbol>> BccFunctionSymbols(const std::string& path);

}  // namespace pystrobe

#endif  // PYSTROBE_TESTS_UNIT_SYMBOLIZER_BCC_SYMBOLS_H_
