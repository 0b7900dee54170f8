// The few NVML declarations pystrobe uses, as NVIDIA's public nvml.h defines
// them (API 11 and later). No NVIDIA header is needed to build: the library is
// opened at run time (nvml_library.h), so the layouts are asserted here.
#ifndef PYSTROBE_DAEMON_GPU_NVML_API_H_
#define PYSTROBE_DAEMON_GPU_NVML_API_H_

#include <cstddef>

extern "C" {

typedef int nvmlReturn_t;  // an enum in nvml.h: int-sized
inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;

typedef struct nvmlDevice_st* nvmlDevice_t;

typedef struct {
  unsigned int gpu;     // percent of the last sample period a kernel ran
  unsigned int memory;  // percent of it the memory was read or written
} nvmlUtilization_t;

typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

// nvmlProcessInfo_t of API 11+, taken by nvmlDeviceGetComputeRunningProcesses_v3.
typedef struct {
  unsigned int pid;                  // in the host's (the driver's) PID namespace
  unsigned long long usedGpuMemory;  // NVML_VALUE_NOT_AVAILABLE when unknown
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_v3_t;

typedef struct {
  unsigned int pid;
  unsigned long long timeStamp;  // CPU timestamp in microseconds
  unsigned int smUtil;           // percent
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

}  // extern "C"

inline constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE = ~0ull;
// NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned int kNvmlDeviceNameBufferSize = 96;

static_assert(sizeof(nvmlUtilization_t) == 8);
static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(sizeof(nvmlProcessInfo_v3_t) == 24 &&
              offsetof(nvmlProcessInfo_v3_t, usedGpuMemory) == 8);
static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32 &&
              offsetof(nvmlProcessUtilizationSample_t, smUtil) == 16);

#endif  // PYSTROBE_DAEMON_GPU_NVML_API_H_
