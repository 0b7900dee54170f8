#ifndef PYSTROBE_DAEMON_PROCFS_STAT_H_
#define PYSTROBE_DAEMON_PROCFS_STAT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pystrobe::procfs {

// One /proc/PID/stat (or task/TID/stat) line. The command name is in
// parentheses and may itself hold spaces and ')': the fields resume after the
// last ')'.
class StatLine {
 public:
  // Null when the line has no ')' (not a stat line).
  static std::optional<StatLine> Parse(absl::string_view line);

  // The command name, between the first '(' and the last ')'.
  const std::string& comm() const { return comm_; }
  // Field 3, the state letter (R, S, D, Z...); '?' when absent or not a letter.
  char state() const;
  // Field `number` as proc(5) numbers them (14 utime, 22 starttime...), from
  // 3 on; null when the line is shorter or the field is not a count (a
  // negative one such as tpgid's -1 included).
  std::optional<uint64_t> Number(int number) const;
  // How many fields the line has, counting pid and comm.
  int field_count() const { return static_cast<int>(after_comm_.size()) + 2; }

 private:
  std::string comm_;
  std::vector<std::string> after_comm_;  // field 3 first
};

// Reads and parses a stat file. NotFound when the process is gone (see
// ReadSmallFile); InvalidArgument, naming the path, when it is not a stat line.
absl::StatusOr<StatLine> ReadStat(const std::string& path);

}  // namespace pystrobe::procfs

#endif  // PYSTROBE_DAEMON_PROCFS_STAT_H_
