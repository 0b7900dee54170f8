#include "daemon/python/line_table.h"

#include <algorithm>
#include <limits>

namespace pystrobe {
namespace {

constexpr int32_t kNoLine = -1;
constexpr int32_t kEndOfCode = std::numeric_limits<int32_t>::max();

// Appends [start, end) -> line unless it is empty (CPython skips those).
void AddRange(std::vector<LineRange>& ranges, int64_t start, int64_t end, int32_t line) {
  if (end <= start || start >= kEndOfCode) return;
  ranges.push_back({static_cast<int32_t>(start),
                    static_cast<int32_t>(std::min<int64_t>(end, kEndOfCode)), line});
}

// co_lnotab (2.7 to 3.9): the line of an address is first_line plus the line
// deltas of every pair whose cumulative address is <= it; the last line runs
// to the end of the code. Line deltas are signed bytes from 3.6 on, unsigned
// before (2.7 never moves a line backwards within a pair).
void DecodeLnotab(absl::Span<const uint8_t> table, int32_t first_line, bool signed_lines,
                  std::vector<LineRange>& ranges) {
  int64_t address = 0;
  int64_t range_start = 0;
  int32_t line = first_line;
  for (size_t i = 0; i + 1 < table.size(); i += 2) {
    address += table[i];
    AddRange(ranges, range_start, address, line);
    if (address > range_start) range_start = address;
    line += signed_lines ? static_cast<int8_t>(table[i + 1]) : table[i + 1];
  }
  AddRange(ranges, range_start, kEndOfCode, line);
}

// co_linetable in 3.10: (unsigned byte delta, signed line delta) pairs, a
// line delta of -128 meaning "no line" without moving the running line.
void DecodeLinetable310(absl::Span<const uint8_t> table, int32_t first_line,
                        std::vector<LineRange>& ranges) {
  int64_t start = 0;
  int32_t computed_line = first_line;
  for (size_t i = 0; i + 1 < table.size(); i += 2) {
    const int64_t end = start + table[i];
    const int8_t line_delta = static_cast<int8_t>(table[i + 1]);
    int32_t line = kNoLine;
    if (line_delta != -128) {
      computed_line += line_delta;
      line = computed_line;
    }
    AddRange(ranges, start, end, line);
    start = end;
  }
}

// Varints of the 3.11+ location table: 6 bits per byte, bit 6 = more follow.
// Returns false when the table ends inside one.
bool ReadVarint(absl::Span<const uint8_t> table, size_t& at, uint32_t& value) {
  value = 0;
  for (unsigned shift = 0; at < table.size() && shift < 32; shift += 6) {
    const uint8_t byte = table[at++];
    value |= static_cast<uint32_t>(byte & 63) << shift;
    if ((byte & 64) == 0) return true;
  }
  return false;
}

bool ReadSignedVarint(absl::Span<const uint8_t> table, size_t& at, int32_t& value) {
  uint32_t raw = 0;
  if (!ReadVarint(table, at, raw)) return false;
  value = (raw & 1) ? -static_cast<int32_t>(raw >> 1) : static_cast<int32_t>(raw >> 1);
  return true;
}

// The location table (3.11+, Objects/locations.md): each entry starts with a
// byte 1cccclll: code c, covering l+1 code units (2 bytes each). Codes:
// 15 no location; 14 long form and 13 no columns, both starting with a signed
// varint line delta; 10-12 one-line forms with line delta c-10; 0-9 short
// forms on the same line.
void DecodeLocationTable(absl::Span<const uint8_t> table, int32_t first_line,
                         std::vector<LineRange>& ranges) {
  int64_t start = 0;
  int32_t computed_line = first_line;
  size_t at = 0;
  while (at < table.size()) {
    const uint8_t head = table[at];
    if ((head & 0x80) == 0) return;  // not at an entry: damaged table
    const int code = (head >> 3) & 15;
    int32_t line_delta = 0;
    if (code == 13 || code == 14) {
      size_t varint_at = at + 1;
      if (!ReadSignedVarint(table, varint_at, line_delta)) return;
    } else if (code >= 10 && code <= 12) {
      line_delta = code - 10;
    }
    computed_line += line_delta;
    const int64_t end = start + ((head & 7) + 1) * 2;
    AddRange(ranges, start, end, code == 15 ? kNoLine : computed_line);
    start = end;
    // The next entry is the next byte with its top bit set.
    do {
      ++at;
    } while (at < table.size() && (table[at] & 0x80) == 0);
  }
}

}  // namespace

LineTableFormat LineTableFormatFor(const PythonVersion& version) {
  if (version.major == 2) return LineTableFormat::kLnotabUnsigned;
  if (version.major == 3 && version.minor <= 9) return LineTableFormat::kLnotab;
  if (version.major == 3 && version.minor == 10) return LineTableFormat::kLinetable310;
  return LineTableFormat::kLocationTable;
}

LineTable LineTable::Decode(LineTableFormat format, absl::Span<const uint8_t> table,
                            int32_t first_line) {
  LineTable result;
  result.first_line_ = first_line;
  switch (format) {
    case LineTableFormat::kLnotabUnsigned:
      DecodeLnotab(table, first_line, /*signed_lines=*/false, result.ranges_);
      break;
    case LineTableFormat::kLnotab:
      DecodeLnotab(table, first_line, /*signed_lines=*/true, result.ranges_);
      break;
    case LineTableFormat::kLinetable310:
      DecodeLinetable310(table, first_line, result.ranges_);
      break;
    case LineTableFormat::kLocationTable:
      DecodeLocationTable(table, first_line, result.ranges_);
      break;
  }
  return result;
}

int32_t LineTable::LineForOffset(int32_t byte_offset) const {
  if (byte_offset < 0) return first_line_;
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), byte_offset,
                             [](int32_t offset, const LineRange& r) { return offset < r.end; });
  if (it == ranges_.end() || it->start > byte_offset) return kNoLine;
  return it->line;
}

}  // namespace pystrobe
