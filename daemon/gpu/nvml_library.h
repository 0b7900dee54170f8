// NVML (libnvidia-ml.so.1) opened with dlopen at run time: pystrobe builds,
// runs and passes its tests where there is no NVIDIA driver. Load() fails
// with kNotFound when the library is absent, which callers treat as "no GPU"
// (one debug line, no figures), not as an error.
#ifndef PYSTROBE_DAEMON_GPU_NVML_LIBRARY_H_
#define PYSTROBE_DAEMON_GPU_NVML_LIBRARY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/gpu/nvml_api.h"

namespace pystrobe {

// What one device says at one instant.
struct NvmlProcess {
  uint32_t pid = 0;  // host pid
  uint64_t memory_bytes = 0;
  bool memory_known = false;
};
struct NvmlProcessUtilization {
  uint32_t pid = 0;
  uint64_t timestamp_us = 0;
  unsigned sm_percent = 0;
};

class NvmlLibrary {
 public:
  // The library pystrobe opens: $PYSTROBE_NVML_LIBRARY when set (tests point
  // it at a fake NVML), else "libnvidia-ml.so.1" through the loader's path.
  static std::string DefaultPath();
  // NVML (DefaultPath()) opens and sees at least one GPU: a GPU host.
  static bool SeesAGpu();
  // Opens `path`, resolves the entry points and calls nvmlInit_v2.
  static absl::StatusOr<std::unique_ptr<NvmlLibrary>> Load(const std::string& path);
  ~NvmlLibrary();  // nvmlShutdown, dlclose
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  absl::StatusOr<unsigned> DeviceCount();
  absl::StatusOr<nvmlDevice_t> Device(unsigned index);
  absl::StatusOr<std::string> Name(nvmlDevice_t device);
  absl::StatusOr<nvmlUtilization_t> Utilization(nvmlDevice_t device);
  absl::StatusOr<nvmlMemory_t> Memory(nvmlDevice_t device);
  // At most `limit` processes; more are left out and counted in `*left_out`.
  absl::StatusOr<std::vector<NvmlProcess>> ComputeProcesses(nvmlDevice_t device, size_t limit,
                                                            uint64_t* left_out);
  // Samples newer than `since_us` (0: all the driver keeps). kUnimplemented
  // where the device does not report per-process utilization.
  absl::StatusOr<std::vector<NvmlProcessUtilization>> ProcessUtilization(nvmlDevice_t device,
                                                                         uint64_t since_us,
                                                                         size_t limit);

 private:
  struct EntryPoints;
  NvmlLibrary(void* handle, std::unique_ptr<EntryPoints> entry);
  absl::Status Check(nvmlReturn_t code, const char* what) const;

  void* handle_;
  std::unique_ptr<EntryPoints> entry_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_GPU_NVML_LIBRARY_H_
