// When the processes a recording was pointed at (`--pid`) have all ended,
// known without asking /proc after every poll: a pidfd per target, polled
// beside the ring buffer's fd, becomes readable when its process exits and
// costs nothing until then.
#ifndef PYSTROBE_DAEMON_CLI_TARGET_EXITS_H_
#define PYSTROBE_DAEMON_CLI_TARGET_EXITS_H_

#include <poll.h>

#include <cstdint>
#include <vector>

#include "absl/time/time.h"

namespace pystrobe {

class TargetExits {
 public:
  // Opens a pidfd for each of `pids`. A process already gone counts as
  // ended; one whose pidfd the kernel refuses (no pidfd_open before 5.3, a
  // seccomp filter) is checked through /proc after each wait instead, and a
  // line on stderr says so.
  explicit TargetExits(const std::vector<uint32_t>& pids);
  ~TargetExits();
  TargetExits(const TargetExits&) = delete;
  TargetExits& operator=(const TargetExits&) = delete;

  // Waits up to `timeout` for `fd` (-1: none) to become readable or a target
  // to end; a signal ends the wait early. What ended is remembered.
  void Wait(int fd, absl::Duration timeout);
  // True once every target has ended (false when there were none).
  bool AllEnded() const { return watched_ > 0 && open_pidfds_.empty() && checked_.empty(); }
  // Targets checked through /proc because pidfd_open was refused.
  size_t fallback_count() const { return checked_.size(); }

 private:
  void CheckFallbacks();

  size_t watched_ = 0;
  std::vector<int> open_pidfds_;   // of targets still running
  std::vector<uint32_t> checked_;  // running targets without a pidfd
  std::vector<pollfd> poll_set_;   // scratch, reused by every Wait
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_TARGET_EXITS_H_
