// Starts the command of `pystrobe record -- CMD ARGS...` held at the door:
// the child exists (so its pid can go into the kernel filter) but runs
// nothing of CMD until Release(), so not one of its samples is missed.
#ifndef PYSTROBE_DAEMON_CLI_TARGET_LAUNCHER_H_
#define PYSTROBE_DAEMON_CLI_TARGET_LAUNCHER_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pystrobe {

class LaunchedCommand {
 public:
  // Forks a child that waits for Release() before it execs `argv` (PATH is
  // searched), with `environment` ("NAME=value" entries) set over ours.
  static absl::StatusOr<LaunchedCommand> Start(const std::vector<std::string>& argv,
                                               const std::vector<std::string>& environment = {});

  LaunchedCommand(LaunchedCommand&& other) noexcept;
  LaunchedCommand& operator=(LaunchedCommand&&) = delete;
  LaunchedCommand(const LaunchedCommand&) = delete;
  // Kills and reaps a child that was never released.
  ~LaunchedCommand();

  pid_t pid() const { return pid_; }

  // Lets the child exec. NotFound/PermissionDenied if the exec failed.
  absl::Status Release();

  // The child's wait status once it has exited; nullopt while it runs.
  std::optional<int> TryReap();
  // Waits for the child to exit (after a kill, say) and keeps its status.
  int Wait();
  // True once the child has exited and been reaped.
  bool exited() const { return wait_status_.has_value(); }
  // What a shell (and `time`) would exit with after the child: its exit
  // status, or 128 + the signal that killed it. nullopt while it runs.
  std::optional<int> ShellExitCode() const;

 private:
  LaunchedCommand(pid_t pid, int release_fd, int exec_error_fd)
      : pid_(pid), release_fd_(release_fd), exec_error_fd_(exec_error_fd) {}

  pid_t pid_;
  int release_fd_;     // parent's end: closing it lets the child go
  int exec_error_fd_;  // child's errno from a failed exec; EOF if exec worked
  bool released_ = false;
  std::optional<int> wait_status_;
  std::string command_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_TARGET_LAUNCHER_H_
