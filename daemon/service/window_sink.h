// Where the daemon's windows go: each window's profile is handed to every
// sink in turn (the profile directory, a profile store, ...).
#ifndef PYSTROBE_DAEMON_SERVICE_WINDOW_SINK_H_
#define PYSTROBE_DAEMON_SERVICE_WINDOW_SINK_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "model/profile.h"

namespace pystrobe {

// One window: its symbolized profile (start_time, duration and labels set),
// and when it was cut.
struct ProfileWindow {
  uint64_t sequence = 0;  // 1 for the daemon's first window
  absl::Time start;
  absl::Time end;
  Profile profile;
  // Resident growth over the window, in bytes (memory: true), else none.
  std::optional<Profile> memory;
  // True for the last window, written on the way out: a sink should finish
  // quickly (SIGTERM gives the daemon 2 s in all).
  bool final = false;
};

class WindowSink {
 public:
  virtual ~WindowSink() = default;
  // A short name for logs and metric labels ("profile_dir", "push").
  virtual std::string name() const = 0;
  // Takes a window. Called on the window loop's thread, so it must not block
  // for long: a sink that talks to the network should queue and return.
  // An error is logged and counted; the window goes on to the other sinks.
  virtual absl::Status Consume(const ProfileWindow& window) = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_WINDOW_SINK_H_
