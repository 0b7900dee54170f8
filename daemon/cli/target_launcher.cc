#include "daemon/cli/target_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace pystrobe {

absl::StatusOr<LaunchedCommand> LaunchedCommand::Start(
    const std::vector<std::string>& argv, const std::vector<std::string>& environment) {
  if (argv.empty()) return absl::InvalidArgumentError("no command to run");
  int release_pipe[2];
  int error_pipe[2];
  if (pipe2(release_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  if (pipe2(error_pipe, O_CLOEXEC) != 0) {
    int err = errno;
    close(release_pipe[0]);
    close(release_pipe[1]);
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(err)));
  }
  // Build argv before fork: the child may only call async-signal-safe functions.
  std::vector<char*> exec_argv;
  for (const std::string& arg : argv) exec_argv.push_back(const_cast<char*>(arg.c_str()));
  exec_argv.push_back(nullptr);
  // Ours, less the names `environment` sets, then those.
  std::vector<char*> exec_env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    absl::string_view name = absl::string_view(*entry).substr(0, std::strcspn(*entry, "="));
    bool replaced = false;
    for (const std::string& set : environment) {
      if (absl::StartsWith(set, name) && set.size() > name.size() && set[name.size()] == '=') {
        replaced = true;
      }
    }
    if (!replaced) exec_env.push_back(*entry);
  }
  for (const std::string& set : environment) exec_env.push_back(const_cast<char*>(set.c_str()));
  exec_env.push_back(nullptr);

  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    for (int fd : {release_pipe[0], release_pipe[1], error_pipe[0], error_pipe[1]}) close(fd);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(err)));
  }
  if (pid == 0) {
    close(release_pipe[1]);
    close(error_pipe[0]);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);  // pystrobe ignores it; an ignored signal survives exec
    char go;
    // Returns 0 (EOF) when the parent releases us or dies.
    while (read(release_pipe[0], &go, 1) < 0 && errno == EINTR) {
    }
    execvpe(exec_argv[0], exec_argv.data(), exec_env.data());
    int err = errno;
    ssize_t ignored = write(error_pipe[1], &err, sizeof(err));
    (void)ignored;
    _exit(127);
  }
  close(release_pipe[0]);
  close(error_pipe[1]);
  LaunchedCommand command(pid, release_pipe[1], error_pipe[0]);
  command.command_ = argv.front();
  return command;
}

LaunchedCommand::LaunchedCommand(LaunchedCommand&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      release_fd_(std::exchange(other.release_fd_, -1)),
      exec_error_fd_(std::exchange(other.exec_error_fd_, -1)),
      released_(other.released_),
      wait_status_(other.wait_status_),
      command_(std::move(other.command_)) {}

LaunchedCommand::~LaunchedCommand() {
  if (release_fd_ >= 0) close(release_fd_);
  if (exec_error_fd_ >= 0) close(exec_error_fd_);
  if (pid_ > 0 && !released_ && !exited()) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

absl::Status LaunchedCommand::Release() {
  released_ = true;
  close(release_fd_);
  release_fd_ = -1;
  int err = 0;
  ssize_t n;
  while ((n = read(exec_error_fd_, &err, sizeof(err))) < 0 && errno == EINTR) {
  }
  close(exec_error_fd_);
  exec_error_fd_ = -1;
  if (n == sizeof(err)) {
    int status = 0;
    waitpid(pid_, &status, 0);
    wait_status_ = status;
    std::string message = absl::StrCat("cannot run '", command_, "': ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
    return absl::InternalError(message);
  }
  return absl::OkStatus();
}

int LaunchedCommand::Wait() {
  while (!wait_status_) {
    int status = 0;
    pid_t reaped = waitpid(pid_, &status, 0);
    if (reaped == pid_) {
      wait_status_ = status;
    } else if (reaped < 0 && errno != EINTR) {
      // Not our child any more (reaped elsewhere): nothing to report but a failure.
      wait_status_ = W_EXITCODE(1, 0);
    }
  }
  return *wait_status_;
}

std::optional<int> LaunchedCommand::ShellExitCode() const {
  if (!wait_status_) return std::nullopt;
  if (WIFSIGNALED(*wait_status_)) return 128 + WTERMSIG(*wait_status_);
  if (WIFEXITED(*wait_status_)) return WEXITSTATUS(*wait_status_);
  return 1;  // stopped or continued: not an end, never reaped as one
}

std::optional<int> LaunchedCommand::TryReap() {
  if (wait_status_) return wait_status_;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) wait_status_ = status;
  return wait_status_;
}

}  // namespace pystrobe
