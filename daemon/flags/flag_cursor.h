#ifndef PYSTROBE_DAEMON_FLAGS_FLAG_CURSOR_H_
#define PYSTROBE_DAEMON_FLAGS_FLAG_CURSOR_H_

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace pystrobe {

// Walks a command's arguments for FlagTable::Parse: a flag's value is the
// next argument or the part after '=' ("--rate=99"), so every command takes
// values the same way.
class FlagCursor {
 public:
  explicit FlagCursor(const std::vector<std::string>& args) : args_(args) {}

  bool Done() const { return index_ >= args_.size(); }

  // The next argument; of "--flag=value", "--flag" (the value is kept for
  // Value()).
  std::string Next() {
    std::string arg = args_[index_++];
    inline_value_.reset();
    if (size_t equals = arg.find('='); arg.starts_with("--") && equals != std::string::npos) {
      inline_value_ = arg.substr(equals + 1);
      arg.resize(equals);
    }
    return arg;
  }

  // The value of `flag`, the argument Next() returned last; missing, the
  // error reads "FLAG needs a VALUE_NAME" ("--socket needs a PATH").
  absl::StatusOr<std::string> Value(absl::string_view flag,
                                    absl::string_view value_name = "value") {
    if (inline_value_) return *std::exchange(inline_value_, std::nullopt);
    if (Done()) return absl::InvalidArgumentError(absl::StrCat(flag, " needs a ", value_name));
    return args_[index_++];
  }

  // Whether the last flag came as "--flag=value" and its value is unread: a
  // switch given a value is an error.
  bool HadInlineValue() const { return inline_value_.has_value(); }

  // Everything not read yet (the command after "--").
  std::vector<std::string> Rest() {
    std::vector<std::string> rest(args_.begin() + index_, args_.end());
    index_ = args_.size();
    return rest;
  }

 private:
  const std::vector<std::string>& args_;
  size_t index_ = 0;
  std::optional<std::string> inline_value_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_FLAGS_FLAG_CURSOR_H_
