// Polls NVML from a background thread at a fixed interval and accumulates
// per-device and per-process figures until TakeWindow(). Its cost is bounded:
// a handful of NVML calls per device per poll (default every 500 ms), at most
// kMaxDevices devices and kMaxProcessesPerDevice processes each (more are
// counted, not read).
#ifndef PYSTROBE_DAEMON_GPU_GPU_SAMPLER_H_
#define PYSTROBE_DAEMON_GPU_GPU_SAMPLER_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/gpu/gpu_figures.h"
#include "daemon/gpu/nvml_library.h"

namespace pystrobe {

inline constexpr unsigned kMaxDevices = 16;
inline constexpr size_t kMaxProcessesPerDevice = 256;
inline constexpr absl::Duration kDefaultGpuPollInterval = absl::Milliseconds(500);

class GpuSampler {
 public:
  // Opens NVML (NvmlLibrary::DefaultPath()) and reads its devices. kNotFound
  // when there is no NVML: the caller shows no GPU figures.
  static absl::StatusOr<std::unique_ptr<GpuSampler>> Open(
      absl::Duration interval = kDefaultGpuPollInterval);
  // Over a library already loaded (tests).
  static absl::StatusOr<std::unique_ptr<GpuSampler>> Over(std::unique_ptr<NvmlLibrary> nvml,
                                                          absl::Duration interval);
  ~GpuSampler();  // stops the thread
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  // Polls once now, then every interval on a thread of its own.
  void Start();
  // One poll on the caller's thread (tests, and the last poll of a window).
  void PollNow();
  // The figures since the previous TakeWindow() (or Start), then starts anew.
  GpuWindow TakeWindow();
  size_t device_count() const { return devices_.size(); }

 private:
  struct Device {
    unsigned index = 0;
    nvmlDevice_t handle = nullptr;
    std::string name;
    uint64_t last_timestamp_us = 0;   // newest per-process sample seen
    bool process_utilization = true;  // the device reports it
  };
  struct ProcessDeviceSums {
    double utilization_sum = 0;  // per poll, 0..1
    uint64_t memory_bytes = 0;
    uint64_t memory_peak_bytes = 0;
    uint64_t last_poll = 0;  // seen on this device at this poll
  };
  struct ProcessSums {
    absl::flat_hash_map<unsigned, ProcessDeviceSums> devices;
    uint64_t memory_peak_bytes = 0;
    bool utilization_from_device = false;
    uint64_t last_poll = 0;  // seen at this poll
  };
  struct DeviceSums {
    double utilization_sum = 0;
    uint64_t memory_used = 0, memory_peak = 0, memory_total = 0;
  };

  GpuSampler(std::unique_ptr<NvmlLibrary> nvml, std::vector<Device> devices,
             absl::Duration interval);
  void PollDevice(Device& device);
  void Run();

  std::unique_ptr<NvmlLibrary> nvml_;
  std::vector<Device> devices_;
  absl::Duration interval_;

  std::mutex mutex_;  // guards everything below, and the NVML calls
  std::condition_variable wake_;
  bool stopping_ = false;
  absl::Time window_start_;
  uint64_t polls_ = 0;
  std::vector<DeviceSums> device_sums_;
  absl::flat_hash_map<uint32_t, ProcessSums> process_sums_;
  uint64_t processes_left_out_ = 0;
  uint64_t poll_errors_ = 0;
  std::thread thread_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_GPU_GPU_SAMPLER_H_
