#include "daemon/service/loop_wakeups.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pystrobe {
namespace {

absl::Status Errno(const char* what) {
  return absl::InternalError(absl::StrCat(what, ": ", strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoopWakeups>> LoopWakeups::Create() {
  int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) return Errno("epoll_create1");
  int event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd < 0) {
    absl::Status error = Errno("eventfd");
    close(epoll_fd);
    return error;
  }
  epoll_event event = {};
  event.events = EPOLLIN;
  event.data.fd = event_fd;
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, event_fd, &event) != 0) {
    absl::Status error = Errno("epoll_ctl(eventfd)");
    close(event_fd);
    close(epoll_fd);
    return error;
  }
  return std::unique_ptr<LoopWakeups>(new LoopWakeups(epoll_fd, event_fd));
}

LoopWakeups::~LoopWakeups() {
  close(event_fd_);
  close(epoll_fd_);
}

absl::Status LoopWakeups::Watch(int fd) {
  if (watched_fd_ >= 0) {
    // The old fd may be closed already (its sampler gone): the kernel then
    // dropped it from the set itself.
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, watched_fd_, nullptr);
    watched_fd_ = -1;
  }
  if (fd < 0) return absl::OkStatus();
  epoll_event event = {};
  event.events = EPOLLIN;
  event.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) return Errno("epoll_ctl(ring buffer)");
  watched_fd_ = fd;
  return absl::OkStatus();
}

void LoopWakeups::Wake() const {
  uint64_t one = 1;
  // Nonblocking: a counter already at its maximum wakes the loop anyway.
  ssize_t ignored = write(event_fd_, &one, sizeof(one));
  (void)ignored;
}

void LoopWakeups::Wait(absl::Duration timeout) {
  int64_t ms =
      std::max<int64_t>(0, absl::ToInt64Milliseconds(absl::Ceil(timeout, absl::Milliseconds(1))));
  epoll_event events[2];
  int ready = epoll_wait(epoll_fd_, events, 2, static_cast<int>(std::min<int64_t>(ms, INT32_MAX)));
  for (int i = 0; i < ready; ++i) {
    if (events[i].data.fd == event_fd_) {
      uint64_t count = 0;
      ssize_t ignored = read(event_fd_, &count, sizeof(count));
      (void)ignored;
    }
  }
}

}  // namespace pystrobe
