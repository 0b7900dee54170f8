// CPython line tables: instruction offset -> source line, with the semantics
// of the interpreter's own PyCode_Addr2Line for each format.
#ifndef PYSTROBE_DAEMON_PYTHON_LINE_TABLE_H_
#define PYSTROBE_DAEMON_PYTHON_LINE_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "daemon/python/python_offsets.h"

namespace pystrobe {

enum class LineTableFormat {
  kLnotabUnsigned,  // 2.7: co_lnotab, (byte delta, unsigned line delta) pairs
  kLnotab,          // 3.6 to 3.9: co_lnotab, (byte delta, signed line delta) pairs
  kLinetable310,    // 3.10: co_linetable, (byte delta, line delta or -128 for none) pairs
  kLocationTable,   // 3.11+: co_linetable, the location table (PEP 626/657 entries)
};

LineTableFormat LineTableFormatFor(const PythonVersion& version);

// A half-open range of bytecode byte offsets sharing one line; line is -1
// where the interpreter has no line (artificial instructions).
struct LineRange {
  int32_t start = 0;
  int32_t end = 0;
  int32_t line = -1;
};

// A decoded line table. Offsets are always BYTE offsets from the first
// instruction (3.10's f_lasti and 3.11+'s instruction pointers are converted
// by the walker; see bpf/pystrobe_abi.h).
class LineTable {
 public:
  LineTable() = default;

  // Decodes `table`; a malformed or truncated table keeps the ranges read
  // before the damage (lookups past them give -1).
  static LineTable Decode(LineTableFormat format, absl::Span<const uint8_t> table,
                          int32_t first_line);

  // The line of the instruction at `byte_offset`, as PyCode_Addr2Line gives
  // it: first_line for negative offsets, -1 where there is none.
  int32_t LineForOffset(int32_t byte_offset) const;

  const std::vector<LineRange>& ranges() const { return ranges_; }

 private:
  int32_t first_line_ = 0;
  std::vector<LineRange> ranges_;  // sorted, contiguous, non-empty
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_PYTHON_LINE_TABLE_H_
