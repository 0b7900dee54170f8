#include "daemon/procfs/maps.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace pystrobe::procfs {
namespace {

// Splits off the text up to the next space and skips the spaces after it.
absl::string_view NextField(absl::string_view& line) {
  size_t space = line.find(' ');
  absl::string_view field = line.substr(0, space);
  line = space == absl::string_view::npos ? absl::string_view()
                                          : absl::StripLeadingAsciiWhitespace(line.substr(space));
  return field;
}

}  // namespace

std::optional<MapsLine> ParseMapsLine(absl::string_view line) {
  MapsLine out;
  absl::string_view range = NextField(line);
  out.perms = NextField(line);
  absl::string_view offset = NextField(line);
  absl::string_view dev = NextField(line);
  absl::string_view inode = NextField(line);
  out.path = line;
  size_t dash = range.find('-');
  size_t colon = dev.find(':');
  if (out.perms.empty() || dash == absl::string_view::npos || colon == absl::string_view::npos ||
      !absl::SimpleHexAtoi(range.substr(0, dash), &out.start) ||
      !absl::SimpleHexAtoi(range.substr(dash + 1), &out.end) ||
      !absl::SimpleHexAtoi(offset, &out.offset) ||
      !absl::SimpleHexAtoi(dev.substr(0, colon), &out.dev_major) ||
      !absl::SimpleHexAtoi(dev.substr(colon + 1), &out.dev_minor) ||
      !absl::SimpleAtoi(inode, &out.inode)) {
    return std::nullopt;
  }
  return out;
}

std::vector<MapsLine> ParseMaps(absl::string_view text) {
  std::vector<MapsLine> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (std::optional<MapsLine> parsed = ParseMapsLine(line)) lines.push_back(*parsed);
  }
  return lines;
}

}  // namespace pystrobe::procfs
