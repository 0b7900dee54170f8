#include "daemon/cli/target_exits.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "daemon/recording/process_table.h"

namespace pystrobe {
namespace {

int PidfdOpen(uint32_t pid) {
  return static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0u));
}

}  // namespace

TargetExits::TargetExits(const std::vector<uint32_t>& pids) : watched_(pids.size()) {
  for (uint32_t pid : pids) {
    int fd = PidfdOpen(pid);
    if (fd >= 0) {
      open_pidfds_.push_back(fd);
      continue;
    }
    if (errno == ESRCH) continue;  // already gone: ended
    const int error = errno;
    if (!ProcessIsAlive(pid)) continue;
    fprintf(stderr,
            "pystrobe: warning: pidfd_open(%u) refused (%s): whether it still runs is read "
            "from /proc/%u/stat after every poll instead\n",
            pid, strerror(error), pid);
    checked_.push_back(pid);
  }
}

TargetExits::~TargetExits() {
  for (int fd : open_pidfds_) close(fd);
}

void TargetExits::Wait(int fd, absl::Duration timeout) {
  poll_set_.clear();
  if (fd >= 0) poll_set_.push_back({.fd = fd, .events = POLLIN, .revents = 0});
  const size_t first_pidfd = poll_set_.size();
  for (int pidfd : open_pidfds_) poll_set_.push_back({.fd = pidfd, .events = POLLIN, .revents = 0});
  int ready = poll(poll_set_.data(), poll_set_.size(),
                   static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  if (ready > 0) {
    // A pidfd is readable (or hung up) once its process has exited, zombie or reaped.
    std::vector<int> running;
    running.reserve(open_pidfds_.size());
    for (size_t i = first_pidfd; i < poll_set_.size(); ++i) {
      if (poll_set_[i].revents != 0) {
        close(poll_set_[i].fd);
      } else {
        running.push_back(poll_set_[i].fd);
      }
    }
    open_pidfds_.swap(running);
  }
  CheckFallbacks();
}

void TargetExits::CheckFallbacks() {
  if (checked_.empty()) return;
  checked_.erase(std::remove_if(checked_.begin(), checked_.end(),
                                [](uint32_t pid) { return !ProcessIsAlive(pid); }),
                 checked_.end());
}

}  // namespace pystrobe
