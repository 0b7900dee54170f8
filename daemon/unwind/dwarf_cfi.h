// A reader of DWARF call frame information (.eh_frame and .debug_frame) for
// x86-64 that keeps only what a stack walk needs: how to find the canonical
// frame address, where the caller's rbp was saved, and whether the return
// address is defined. Every other register is read and forgotten.
#ifndef PYSTROBE_DAEMON_UNWIND_DWARF_CFI_H_
#define PYSTROBE_DAEMON_UNWIND_DWARF_CFI_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "bpf/pystrobe_abi.h"

namespace pystrobe {

// One section of call frame information as the file holds it.
struct CfiSection {
  absl::Span<const uint8_t> bytes;
  // The section's link-time address (sh_addr): pc-relative pointers in
  // .eh_frame are relative to it. Unused for .debug_frame.
  uint64_t address = 0;
  bool is_eh_frame = true;
};

// The rule rows of one FDE, [start, end) in link-time addresses; row.addr is
// the full address truncated to 32 bits (the caller checks the range).
struct FdeRows {
  uint64_t start = 0;
  uint64_t end = 0;
  // Sorted, the first at `start`; neighbours with equal rules merged.
  std::vector<pystrobe_unwind_row> rows;
};

struct CfiStats {
  size_t cies = 0;
  size_t fdes = 0;
  // FDEs left out: unreadable, or past 4 GiB.
  size_t fdes_skipped = 0;
};

// Calls `on_fde` for each FDE of `section`, in section order. Fails only
// when the section's framing is broken before any FDE could be read; a bad
// FDE or CIE later on is skipped and counted.
absl::Status ReadCfi(const CfiSection& section, const std::function<void(FdeRows&&)>& on_fde,
                     CfiStats* stats);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_UNWIND_DWARF_CFI_H_
