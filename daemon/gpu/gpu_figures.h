// What the GPUs did over a window, per device and per process (host pid):
// the figures `stat`, `top` and the daemon's metrics show.
#ifndef PYSTROBE_DAEMON_GPU_GPU_FIGURES_H_
#define PYSTROBE_DAEMON_GPU_GPU_FIGURES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace pystrobe {

struct GpuDeviceFigures {
  unsigned index = 0;
  std::string name;
  // Mean share of the window in which a kernel ran (NVML's "GPU" rate), 0..1.
  double utilization = 0;
  uint64_t memory_used_bytes = 0;  // at the last poll
  uint64_t memory_used_peak_bytes = 0;
  uint64_t memory_total_bytes = 0;
};

struct GpuProcessDevice {
  unsigned index = 0;
  double utilization = 0;  // the process's SM share of the window on this device, 0..1
  uint64_t memory_bytes = 0;
  uint64_t memory_peak_bytes = 0;
};

struct GpuProcessFigures {
  // Devices kept busy by the process's kernels, summed over devices (2.0: two
  // GPUs busy all the window), as CPU time is counted in cores.
  double utilization = 0;
  uint64_t memory_bytes = 0;       // at the last poll, summed over devices
  uint64_t memory_peak_bytes = 0;  // the largest sum seen at one poll
  // A device did not report per-process utilization: its whole utilization
  // was charged to each process on it.
  bool utilization_from_device = false;
  std::vector<GpuProcessDevice> devices;  // by index

  // The share of the time its devices were busy with it, 0..1.
  double busy_share() const {
    return devices.empty() ? 0 : utilization / static_cast<double>(devices.size());
  }
};

struct GpuWindow {
  double seconds = 0;
  uint64_t polls = 0;
  std::vector<GpuDeviceFigures> devices;
  absl::flat_hash_map<uint32_t, GpuProcessFigures> processes;  // host pid ->
  uint64_t processes_left_out = 0;  // beyond the per-device limit, counted
  uint64_t poll_errors = 0;         // NVML calls that failed

  const GpuProcessFigures* Of(uint32_t pid) const {
    auto it = processes.find(pid);
    return it == processes.end() ? nullptr : &it->second;
  }
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_GPU_GPU_FIGURES_H_
