// The daemon's last few windows, kept in memory for its HTTP pages (`/`
// lists them, `/profile?window=N` shows one): a window sink like the profile
// directory, read from the HTTP server's threads.
#ifndef PYSTROBE_DAEMON_SERVICE_RECENT_WINDOWS_H_
#define PYSTROBE_DAEMON_SERVICE_RECENT_WINDOWS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "daemon/service/window_sink.h"

namespace pystrobe {

class RecentWindows : public WindowSink {
 public:
  // Windows are whole symbolized profiles (a few MiB for a busy host), so
  // only the last few are kept; older ones are in the profile directory.
  static constexpr size_t kDefaultCapacity = 6;

  explicit RecentWindows(size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  std::string name() const override { return "recent_windows"; }
  // Keeps a copy of `window`, dropping the oldest beyond the capacity.
  absl::Status Consume(const ProfileWindow& window) override;

  // Newest first.
  std::vector<std::shared_ptr<const ProfileWindow>> Windows() const;
  // The window with this sequence number, or null when it is not kept.
  std::shared_ptr<const ProfileWindow> Find(uint64_t sequence) const;

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::deque<std::shared_ptr<const ProfileWindow>> windows_ ABSL_GUARDED_BY(mu_);  // oldest first
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_RECENT_WINDOWS_H_
