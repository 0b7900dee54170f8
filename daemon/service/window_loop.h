// Cuts the recording into windows: at each cut the recorder's stacks are
// taken (sampling goes on into a fresh aggregation; no sample is lost in
// between, as the cut happens between two polls of the ring buffer), built
// into one symbolized Profile with its labels, handed to every sink, and
// then the exited processes that window used are forgotten. Processes, code
// objects and names of live processes carry over from window to window.
#ifndef PYSTROBE_DAEMON_SERVICE_WINDOW_LOOP_H_
#define PYSTROBE_DAEMON_SERVICE_WINDOW_LOOP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "daemon/recording/recorder.h"
#include "daemon/service/container_labels.h"
#include "daemon/service/window_sink.h"
#include "daemon/symbolizer/kernel_symbolizer.h"

namespace pystrobe {

struct WindowOptions {
  absl::Duration window = absl::Seconds(60);
  int rate_hz = 19;
  bool offcpu = false;
  // Each window also has a resident-growth profile (ProfileWindow::memory).
  bool memory = false;
  std::map<std::string, std::string> static_labels;
  // Cache bounds applied after each window (see Recorder::EvictAfterWindow).
  size_t max_native_names = 200000;
  size_t max_python_codes = 50000;
  // CPython stacks with their native frames (python.native_stacks).
  bool native_stacks = false;
};

class WindowLoop {
 public:
  // Everything must outlive the loop; `kernel` and `labels` may be null.
  WindowLoop(Recorder* recorder, const KernelSymbolizer* kernel, ContainerLabels* labels,
             std::vector<WindowSink*> sinks, WindowOptions options, absl::Time start,
             uint64_t next_sequence = 1);

  // Whether the window that began at window_start() is over.
  bool Due(absl::Time now) const { return now >= next_cut(); }
  absl::Time next_cut() const { return window_start_ + options_.window; }
  // Ends the window now (`final`: the daemon is stopping) and starts the next.
  void Cut(absl::Time now, bool final = false);

  // Called at each cut with the window's stacks, after the sinks and before
  // exited processes are forgotten (on-demand recordings take their part).
  void set_window_observer(std::function<void(const WindowStacks&)> observer) {
    observer_ = std::move(observer);
  }

  // Takes effect from the next window (the window length from the current).
  void set_options(WindowOptions options) { options_ = std::move(options); }
  const WindowOptions& options() const { return options_; }
  absl::Time window_start() const { return window_start_; }
  uint64_t next_sequence() const { return next_sequence_; }
  uint64_t windows() const { return windows_; }
  const std::map<std::string, uint64_t>& sink_errors() const { return sink_errors_; }

 private:
  // The window's CPU profile, and (`memory`) its resident-growth profile.
  Profile Build(const WindowStacks& stacks, absl::Time now, bool memory = false);

  Recorder* recorder_;
  const KernelSymbolizer* kernel_;
  ContainerLabels* labels_;
  std::vector<WindowSink*> sinks_;
  WindowOptions options_;
  absl::Time window_start_;
  uint64_t next_sequence_;
  uint64_t windows_ = 0;
  std::map<std::string, uint64_t> sink_errors_;
  std::function<void(const WindowStacks&)> observer_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_WINDOW_LOOP_H_
