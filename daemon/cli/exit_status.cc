#include "daemon/cli/exit_status.h"

#include <cstdio>

namespace pystrobe {

namespace {

int Report(absl::string_view command, absl::string_view message, int exit_status) {
  fprintf(stderr, "pystrobe %.*s: %.*s\n", static_cast<int>(command.size()), command.data(),
          static_cast<int>(message.size()), message.data());
  return exit_status;
}

}  // namespace

int Fail(absl::string_view command, absl::string_view message) {
  return Report(command, message, kExitFailure);
}

int Fail(absl::string_view command, const absl::Status& status) {
  return Fail(command, status.message());
}

int UsageError(absl::string_view command, absl::string_view message) {
  return Report(command, message, kExitUsage);
}

int UsageError(absl::string_view command, const absl::Status& status) {
  return UsageError(command, status.message());
}

}  // namespace pystrobe
