// A binary's unwind table: the rows the kernel's native walk reads
// (pystrobe_unwind_row, bpf/pystrobe_abi.h), built from the binary's
// .eh_frame, its .debug_frame, or those of its separate debug file.
#ifndef PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_H_
#define PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/elf/elf_file.h"

namespace pystrobe {

struct UnwindTable {
  // Sorted by addr, no two neighbours alike; a gap between functions is an
  // INVALID row (but for alignment padding, which belongs to the function
  // before it), the first row is at a page's start (INVALID up to the first
  // function) and the last row is INVALID (past the last function).
  std::vector<pystrobe_unwind_row> rows;
  // pages[i]: index of the row in effect at the start of page first_page + i;
  // one entry past the last page (see PYSTROBE_UNWIND_PAGE_SHIFT).
  std::vector<uint32_t> pages;
  uint32_t first_page = 0;

  // The NT_GNU_BUILD_ID in lowercase hex; empty when the file has none.
  std::string build_id;
  // The PT_LOAD segments, to turn a mapping into a bias (LoadBias).
  std::vector<ElfLoadSegment> load_segments;
  // Where the rows came from: ".eh_frame", ".debug_frame", or those of a
  // debug file ("/usr/lib/debug/...: .debug_frame").
  std::vector<std::string> sources;
  size_t fdes = 0;
  size_t fdes_skipped = 0;
  absl::Duration build_time;

  // The row in effect at `address` (link-time), searched as the kernel does
  // (page index, then binary search); nullptr outside every row.
  const pystrobe_unwind_row* Find(uint64_t address) const;
  // Bytes the kernel holds for this table: packed rows and page entries.
  size_t KernelBytes() const {
    return rows.size() * sizeof(pystrobe_unwind_packed_row) + pages.size() * 4;
  }
};

struct UnwindTableOptions {
  // Directories searched for a separate debug file, by build id
  // (DIR/.build-id/ab/cdef.debug) and by .gnu_debuglink (DIR/<binary's
  // dir>/NAME); the binary's own directory and its .debug/ are searched for
  // the debuglink name too.
  std::vector<std::string> debug_directories = {"/usr/lib/debug"};
  // Read .debug_frame (the binary's or its debug file's) for functions
  // .eh_frame does not cover.
  bool use_debug_frame = true;
};

// Builds the table of the ELF file at `path`. NotFound when the file has no
// call frame information at all (a mapping of it is then unwound by nothing,
// and its frames end the stack as [unknown]).
absl::StatusOr<UnwindTable> BuildUnwindTable(const std::string& path,
                                             const UnwindTableOptions& options = {});

// Whether the ELF file at `path` (opened as `file`) has call frame
// information a table could be built from: its headers and a few stats, no
// section read.
bool HasCallFrameInformation(const std::string& path, const ElfFile& file,
                             const UnwindTableOptions& options = {});

// Fills table.pages and table.first_page from table.rows.
void IndexUnwindTablePages(UnwindTable& table);

// What to add to a link-time address of the file to get the address in a
// process that maps the file's bytes from `file_offset` at `start`.
// nullopt when no PT_LOAD segment holds that offset.
std::optional<uint64_t> LoadBias(const std::vector<ElfLoadSegment>& segments, uint64_t start,
                                 uint64_t file_offset);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_H_
