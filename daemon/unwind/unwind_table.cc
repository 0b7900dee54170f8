#include "daemon/unwind/unwind_table.h"

#include <elf.h>

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "daemon/elf/debug_file.h"
#include "daemon/elf/elf_file.h"
#include "daemon/unwind/dwarf_cfi.h"

namespace pystrobe {
namespace {

absl::Status ReadSection(const ElfFile& file, absl::string_view name, bool is_eh_frame,
                         std::vector<FdeRows>& fdes, UnwindTable& table, const std::string& label) {
  const ElfSection* section = file.FindSection(name);
  std::vector<uint8_t> bytes = file.SectionBytes(section);
  if (bytes.empty()) return absl::OkStatus();
  CfiStats stats;
  size_t before = fdes.size();
  absl::Status status = ReadCfi(
      CfiSection{bytes, section->address, is_eh_frame},
      [&](FdeRows&& fde) { fdes.push_back(std::move(fde)); }, &stats);
  if (!status.ok()) return status;
  table.fdes += stats.fdes;
  table.fdes_skipped += stats.fdes_skipped;
  if (fdes.size() > before) table.sources.push_back(absl::StrCat(label, name));
  return absl::OkStatus();
}

// The separate debug file of `path`, by build id, then by debuglink: its
// build id is checked when it is opened, so no CRC is computed here.
std::optional<std::string> DebugFileOf(const std::string& path, const ElfFile& file,
                                       const UnwindTableOptions& options) {
  return FindDebugFile(path, file, DebugFileSearch{.directories = options.debug_directories});
}

// Functions are aligned to at most 16 bytes by GCC and Clang on x86-64.
constexpr uint64_t kPaddingBytes = 16;

pystrobe_unwind_row InvalidRow(uint64_t address) {
  pystrobe_unwind_row row{};
  row.addr = static_cast<uint32_t>(address);
  row.cfa_rule = PYSTROBE_UNWIND_CFA_INVALID;
  return row;
}

bool SameRule(const pystrobe_unwind_row& a, const pystrobe_unwind_row& b) {
  return a.cfa_rule == b.cfa_rule && a.cfa_offset == b.cfa_offset && a.rbp_rule == b.rbp_rule &&
         a.rbp_offset == b.rbp_offset;
}

// Lays the FDEs (eh_frame's first, then debug_frame's) out as one sorted
// table: an FDE overlapping one already placed is left out.
void LayOut(std::vector<FdeRows>& fdes, size_t eh_frame_fdes, UnwindTable& table) {
  std::vector<size_t> order(fdes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (fdes[a].start != fdes[b].start) return fdes[a].start < fdes[b].start;
    return (a < eh_frame_fdes) > (b < eh_frame_fdes);
  });
  uint64_t covered_to = 0;
  auto push = [&](const pystrobe_unwind_row& row) {
    if (!table.rows.empty() && table.rows.back().addr == row.addr) table.rows.pop_back();
    if (!table.rows.empty() && SameRule(table.rows.back(), row)) return;
    table.rows.push_back(row);
  };
  for (size_t index : order) {
    const FdeRows& fde = fdes[index];
    if (fde.rows.empty() || fde.start < covered_to) continue;
    if (table.rows.empty()) {
      // INVALID from the page's start: the kernel's page search needs a row
      // at or below every address of the table's first page.
      uint64_t page_start = fde.start & ~((uint64_t{1} << PYSTROBE_UNWIND_PAGE_SHIFT) - 1);
      if (page_start < fde.start) push(InvalidRow(page_start));
    } else if (fde.start - covered_to >= kPaddingBytes) {
      push(InvalidRow(covered_to));
    }
    // A shorter gap is the padding that aligns the next function: never
    // executed, so the rule before it may as well cover it (one row fewer
    // per function: 11% of libtorch_cpu's rows).
    for (const pystrobe_unwind_row& row : fde.rows) push(row);
    covered_to = fde.end;
  }
  if (!table.rows.empty()) push(InvalidRow(covered_to));
}

}  // namespace

void IndexUnwindTablePages(UnwindTable& table) {
  table.pages.clear();
  if (table.rows.empty()) return;
  uint32_t first = table.rows.front().addr >> PYSTROBE_UNWIND_PAGE_SHIFT;
  uint32_t last = table.rows.back().addr >> PYSTROBE_UNWIND_PAGE_SHIFT;
  table.first_page = first;
  table.pages.reserve(last - first + 2);
  size_t row = 0;
  for (uint64_t page = first; page <= uint64_t{last} + 1; ++page) {
    uint64_t page_start = page << PYSTROBE_UNWIND_PAGE_SHIFT;
    while (row + 1 < table.rows.size() && table.rows[row + 1].addr <= page_start) ++row;
    table.pages.push_back(static_cast<uint32_t>(row));
  }
}

bool HasCallFrameInformation(const std::string& path, const ElfFile& file,
                             const UnwindTableOptions& options) {
  // A section of one terminator (4 bytes: libtorch.so's, libicudata's)
  // holds no FDE; the smallest CIE and FDE together take more than 16.
  for (absl::string_view name : {".eh_frame", ".debug_frame"}) {
    const ElfSection* section = file.FindSection(name);
    if (section != nullptr && section->size > 16) return true;
  }
  return options.use_debug_frame && DebugFileOf(path, file, options).has_value();
}

const pystrobe_unwind_row* UnwindTable::Find(uint64_t address) const {
  if (rows.empty() || address < rows.front().addr || address > UINT32_MAX) return nullptr;
  uint64_t page = (address >> PYSTROBE_UNWIND_PAGE_SHIFT) - first_page;
  if (page + 1 >= pages.size()) return nullptr;
  // The answer lies in [lo, hi]: rows[lo].addr <= address by construction.
  uint32_t lo = pages[page], hi = pages[page + 1];
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo + 1) / 2;
    if (rows[mid].addr <= address) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return &rows[lo];
}

absl::StatusOr<UnwindTable> BuildUnwindTable(const std::string& path,
                                             const UnwindTableOptions& options) {
  absl::Time started = absl::Now();
  absl::StatusOr<ElfFile> file = ElfFile::Open(path);
  if (!file.ok()) return file.status();
  if (file->machine() != EM_X86_64) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an x86-64 ELF64 file"));
  }

  UnwindTable table;
  table.build_id = file->build_id();
  table.load_segments = file->load_segments();
  std::vector<FdeRows> fdes;
  absl::Status status = ReadSection(*file, ".eh_frame", true, fdes, table, "");
  if (!status.ok()) return absl::DataLossError(absl::StrCat(path, ": ", status.message()));
  size_t eh_frame_fdes = fdes.size();
  if (options.use_debug_frame) {
    status = ReadSection(*file, ".debug_frame", false, fdes, table, "");
    if (!status.ok()) return absl::DataLossError(absl::StrCat(path, ": ", status.message()));
    if (fdes.size() == eh_frame_fdes) {
      if (std::optional<std::string> debug_path = DebugFileOf(path, *file, options)) {
        absl::StatusOr<ElfFile> debug_file = ElfFile::Open(*debug_path);
        // A debug file of another build would unwind with wrong rules.
        if (debug_file.ok() && (debug_file->build_id().empty() || table.build_id.empty() ||
                                debug_file->build_id() == table.build_id)) {
          ReadSection(*debug_file, ".debug_frame", false, fdes, table, *debug_path + ": ")
              .IgnoreError();
        }
      }
    }
  }
  if (fdes.empty()) {
    return absl::NotFoundError(absl::StrCat(path, ": no call frame information"));
  }
  LayOut(fdes, eh_frame_fdes, table);
  IndexUnwindTablePages(table);
  table.build_time = absl::Now() - started;
  return table;
}

std::optional<uint64_t> LoadBias(const std::vector<ElfLoadSegment>& segments, uint64_t start,
                                 uint64_t file_offset) {
  for (const ElfLoadSegment& segment : segments) {
    // Mappings start on a page; the segment's first page may begin before
    // p_offset.
    uint64_t page_offset = segment.offset & ~uint64_t{0xfff};
    if (file_offset >= page_offset && file_offset < segment.offset + segment.file_size) {
      return start - file_offset + segment.offset - segment.vaddr;
    }
  }
  return std::nullopt;
}

}  // namespace pystrobe
