// How pystrobe's commands end: their exit statuses, and the one way they
// report the error that ends them.
#ifndef PYSTROBE_DAEMON_CLI_EXIT_STATUS_H_
#define PYSTROBE_DAEMON_CLI_EXIT_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pystrobe {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;  // bad flags, or a target that does not exist

// Prints "pystrobe COMMAND: MESSAGE" to stderr and returns kExitFailure.
int Fail(absl::string_view command, absl::string_view message);
int Fail(absl::string_view command, const absl::Status& status);
// The same, for bad flags or a target that does not exist: returns kExitUsage.
int UsageError(absl::string_view command, absl::string_view message);
int UsageError(absl::string_view command, const absl::Status& status);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_EXIT_STATUS_H_
