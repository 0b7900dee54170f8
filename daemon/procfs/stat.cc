#include "daemon/procfs/stat.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/procfs/small_file.h"

namespace pystrobe::procfs {

std::optional<StatLine> StatLine::Parse(absl::string_view line) {
  size_t close = line.rfind(')');
  if (close == absl::string_view::npos) return std::nullopt;
  StatLine stat;
  size_t open = line.find('(');
  if (open != absl::string_view::npos && open < close) {
    stat.comm_ = std::string(line.substr(open + 1, close - open - 1));
  }
  absl::string_view rest = line.substr(close + 1);
  rest = rest.substr(0, rest.find('\n'));
  for (absl::string_view field : absl::StrSplit(rest, ' ', absl::SkipEmpty())) {
    stat.after_comm_.emplace_back(field);
  }
  return stat;
}

char StatLine::state() const {
  if (after_comm_.empty() || after_comm_[0].size() != 1) return '?';
  char state = after_comm_[0][0];
  return (state >= 'A' && state <= 'Z') || (state >= 'a' && state <= 'z') ? state : '?';
}

std::optional<uint64_t> StatLine::Number(int number) const {
  size_t index = static_cast<size_t>(number - 3);
  if (number < 3 || index >= after_comm_.size()) return std::nullopt;
  uint64_t value = 0;
  if (!absl::SimpleAtoi(after_comm_[index], &value)) return std::nullopt;
  return value;
}

absl::StatusOr<StatLine> ReadStat(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSmallFile(path);
  if (!text.ok()) return text.status();
  std::optional<StatLine> stat = StatLine::Parse(*text);
  if (!stat) return absl::InvalidArgumentError(absl::StrCat(path, ": not a stat line"));
  return *std::move(stat);
}

}  // namespace pystrobe::procfs
