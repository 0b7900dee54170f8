#include "daemon/flags/flag_table.h"

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace pystrobe::flag_usage {

std::string Row(const std::vector<std::string>& names, absl::string_view value_name,
                absl::string_view help, bool help_only, size_t column) {
  std::string left = "  ";
  if (help_only) {
    absl::StrAppend(&left, absl::StrJoin(names, ", "));
  } else {
    // Long names line up whether or not a short one comes first.
    if (names.size() == 1 && !names[0].starts_with("--")) {
      absl::StrAppend(&left, names[0]);
    } else {
      if (names.size() == 1) left += "    ";
      absl::StrAppend(&left, absl::StrJoin(names, ", "));
    }
    if (!value_name.empty()) absl::StrAppend(&left, " ", value_name);
  }
  std::string out;
  const std::string indent(column, ' ');
  bool first = true;
  for (absl::string_view line : absl::StrSplit(help, '\n')) {
    if (first) {
      // Two spaces at least between a flag and its help, else a line of its own.
      if (left.size() + 2 <= column) {
        out = left + std::string(column - left.size(), ' ');
      } else {
        absl::StrAppend(&out, left, "\n", indent);
      }
      first = false;
    } else {
      absl::StrAppend(&out, indent);
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

}  // namespace pystrobe::flag_usage
