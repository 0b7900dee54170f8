// What wakes the daemon's loop, so that an always-on service sleeps while
// nothing happens: the ring buffer's records that ask for it (process
// events, a new process's first sample, a buffer filling up), a control
// request, a signal; otherwise the loop's next timer.
#ifndef PYSTROBE_DAEMON_SERVICE_LOOP_WAKEUPS_H_
#define PYSTROBE_DAEMON_SERVICE_LOOP_WAKEUPS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pystrobe {

class LoopWakeups {
 public:
  static absl::StatusOr<std::unique_ptr<LoopWakeups>> Create();
  ~LoopWakeups();
  LoopWakeups(const LoopWakeups&) = delete;
  LoopWakeups& operator=(const LoopWakeups&) = delete;

  // Also wakes when `fd` is readable (the ring buffer's epoll fd), instead of
  // the fd watched before; -1 watches none. The fd stays its owner's.
  absl::Status Watch(int fd);
  // Wakes the loop's Wait, or its next one: from any thread, and from a
  // signal handler (it only write()s to an eventfd).
  void Wake() const;
  // Returns when something woke the loop or `timeout` passed.
  void Wait(absl::Duration timeout);

 private:
  LoopWakeups(int epoll_fd, int event_fd) : epoll_fd_(epoll_fd), event_fd_(event_fd) {}

  const int epoll_fd_;
  const int event_fd_;
  int watched_fd_ = -1;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_LOOP_WAKEUPS_H_
