// The daemon's GPU series, from NVML through a GpuSampler: per device and per
// process (host pid, as every pystrobe series; a container's process carries
// pid_in_namespace and container_id as its other series do). Gauges over the
// last kGpuMetricsWindow; NVML lists only processes that hold a GPU context,
// at most kMaxProcessesPerDevice a device, which bounds the series.
#ifndef PYSTROBE_DAEMON_SERVICE_GPU_METRICS_H_
#define PYSTROBE_DAEMON_SERVICE_GPU_METRICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "daemon/gpu/gpu_sampler.h"
#include "daemon/service/process_metrics.h"
#include "prometheus/metric_family.h"

namespace pystrobe {

inline constexpr absl::Duration kGpuMetricsWindow = absl::Seconds(5);

class GpuMetrics {
 public:
  // `sampler` null: no NVML (pystrobe_gpu_nvml_available 0, nothing else).
  GpuMetrics(std::unique_ptr<GpuSampler> sampler, ProcessMetrics::PlacementLookup placement,
             std::map<std::string, std::string> static_labels);

  // Takes the sampler's window when kGpuMetricsWindow has passed since the last.
  void Update(absl::Time now);
  std::vector<prometheus::MetricFamily> Families() const;
  bool available() const { return sampler_ != nullptr; }

 private:
  struct Process {
    std::string comm;
    ProcessPlacement placement;
  };

  std::unique_ptr<GpuSampler> sampler_;
  ProcessMetrics::PlacementLookup placement_;
  std::map<std::string, std::string> static_labels_;
  absl::Time last_update_ = absl::InfinitePast();
  GpuWindow window_;
  absl::flat_hash_map<uint32_t, Process> processes_;  // those in window_
  uint64_t poll_errors_ = 0;                          // since the start
  uint64_t processes_left_out_ = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_GPU_METRICS_H_
