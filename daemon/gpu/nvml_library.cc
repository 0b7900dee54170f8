#include "daemon/gpu/nvml_library.h"

#include <dlfcn.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace pystrobe {

struct NvmlLibrary::EntryPoints {
  nvmlReturn_t (*init)();
  nvmlReturn_t (*shutdown)();
  nvmlReturn_t (*device_count)(unsigned int*);
  nvmlReturn_t (*device_by_index)(unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*);
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*compute_processes)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v3_t*);
  nvmlReturn_t (*process_utilization)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned int*,
                                      unsigned long long);
  const char* (*error_string)(nvmlReturn_t);  // optional
};

namespace {

template <typename Function>
bool Resolve(void* handle, const char* symbol, Function& out) {
  out = reinterpret_cast<Function>(dlsym(handle, symbol));
  return out != nullptr;
}

}  // namespace

std::string NvmlLibrary::DefaultPath() {
  const char* override_path = getenv("PYSTROBE_NVML_LIBRARY");
  return override_path != nullptr && *override_path != '\0' ? override_path : "libnvidia-ml.so.1";
}

bool NvmlLibrary::SeesAGpu() {
  absl::StatusOr<std::unique_ptr<NvmlLibrary>> nvml = Load(DefaultPath());
  if (!nvml.ok()) return false;
  absl::StatusOr<unsigned> count = (*nvml)->DeviceCount();
  return count.ok() && *count > 0;
}

absl::StatusOr<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Load(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::NotFoundError(absl::StrCat("no NVML: ", why ? why : path));
  }
  auto entry = std::make_unique<EntryPoints>();
  const char* missing = nullptr;
  if (!Resolve(handle, "nvmlInit_v2", entry->init)) missing = "nvmlInit_v2";
  if (!Resolve(handle, "nvmlShutdown", entry->shutdown)) missing = "nvmlShutdown";
  if (!Resolve(handle, "nvmlDeviceGetCount_v2", entry->device_count)) {
    missing = "nvmlDeviceGetCount_v2";
  }
  if (!Resolve(handle, "nvmlDeviceGetHandleByIndex_v2", entry->device_by_index)) {
    missing = "nvmlDeviceGetHandleByIndex_v2";
  }
  if (!Resolve(handle, "nvmlDeviceGetName", entry->name)) missing = "nvmlDeviceGetName";
  if (!Resolve(handle, "nvmlDeviceGetUtilizationRates", entry->utilization)) {
    missing = "nvmlDeviceGetUtilizationRates";
  }
  if (!Resolve(handle, "nvmlDeviceGetMemoryInfo", entry->memory)) {
    missing = "nvmlDeviceGetMemoryInfo";
  }
  if (!Resolve(handle, "nvmlDeviceGetComputeRunningProcesses_v3", entry->compute_processes)) {
    missing = "nvmlDeviceGetComputeRunningProcesses_v3 (a driver older than 510)";
  }
  if (!Resolve(handle, "nvmlDeviceGetProcessUtilization", entry->process_utilization)) {
    missing = "nvmlDeviceGetProcessUtilization";
  }
  Resolve(handle, "nvmlErrorString", entry->error_string);
  if (missing != nullptr) {
    dlclose(handle);
    return absl::FailedPreconditionError(absl::StrCat(path, " has no ", missing));
  }
  if (nvmlReturn_t code = entry->init(); code != NVML_SUCCESS) {
    std::string why = entry->error_string ? entry->error_string(code) : absl::StrCat("code ", code);
    dlclose(handle);
    return absl::UnavailableError(absl::StrCat("nvmlInit_v2: ", why));
  }
  return std::unique_ptr<NvmlLibrary>(new NvmlLibrary(handle, std::move(entry)));
}

NvmlLibrary::NvmlLibrary(void* handle, std::unique_ptr<EntryPoints> entry)
    : handle_(handle), entry_(std::move(entry)) {}

NvmlLibrary::~NvmlLibrary() {
  entry_->shutdown();
  dlclose(handle_);
}

absl::Status NvmlLibrary::Check(nvmlReturn_t code, const char* what) const {
  if (code == NVML_SUCCESS) return absl::OkStatus();
  std::string why = entry_->error_string ? entry_->error_string(code) : absl::StrCat("code ", code);
  std::string message = absl::StrCat(what, ": ", why);
  if (code == NVML_ERROR_NOT_SUPPORTED) return absl::UnimplementedError(message);
  if (code == NVML_ERROR_NOT_FOUND) return absl::NotFoundError(message);
  return absl::InternalError(message);
}

absl::StatusOr<unsigned> NvmlLibrary::DeviceCount() {
  unsigned int count = 0;
  if (absl::Status s = Check(entry_->device_count(&count), "nvmlDeviceGetCount_v2"); !s.ok()) {
    return s;
  }
  return count;
}

absl::StatusOr<nvmlDevice_t> NvmlLibrary::Device(unsigned index) {
  nvmlDevice_t device = nullptr;
  if (absl::Status s =
          Check(entry_->device_by_index(index, &device), "nvmlDeviceGetHandleByIndex_v2");
      !s.ok()) {
    return s;
  }
  return device;
}

absl::StatusOr<std::string> NvmlLibrary::Name(nvmlDevice_t device) {
  char name[kNvmlDeviceNameBufferSize] = {};
  if (absl::Status s = Check(entry_->name(device, name, sizeof(name)), "nvmlDeviceGetName");
      !s.ok()) {
    return s;
  }
  name[sizeof(name) - 1] = '\0';
  return std::string(name);
}

absl::StatusOr<nvmlUtilization_t> NvmlLibrary::Utilization(nvmlDevice_t device) {
  nvmlUtilization_t utilization = {};
  if (absl::Status s =
          Check(entry_->utilization(device, &utilization), "nvmlDeviceGetUtilizationRates");
      !s.ok()) {
    return s;
  }
  return utilization;
}

absl::StatusOr<nvmlMemory_t> NvmlLibrary::Memory(nvmlDevice_t device) {
  nvmlMemory_t memory = {};
  if (absl::Status s = Check(entry_->memory(device, &memory), "nvmlDeviceGetMemoryInfo"); !s.ok()) {
    return s;
  }
  return memory;
}

absl::StatusOr<std::vector<NvmlProcess>> NvmlLibrary::ComputeProcesses(nvmlDevice_t device,
                                                                       size_t limit,
                                                                       uint64_t* left_out) {
  // The list can grow between the two calls: ask once more with the new size.
  std::vector<nvmlProcessInfo_v3_t> infos(16);
  unsigned int count = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    count = static_cast<unsigned int>(infos.size());
    nvmlReturn_t code = entry_->compute_processes(device, &count, infos.data());
    if (code == NVML_ERROR_INSUFFICIENT_SIZE && count > infos.size()) {
      infos.resize(count + 8);
      continue;
    }
    if (absl::Status s = Check(code, "nvmlDeviceGetComputeRunningProcesses_v3"); !s.ok()) {
      return s;
    }
    break;
  }
  count = std::min<unsigned int>(count, static_cast<unsigned int>(infos.size()));
  std::vector<NvmlProcess> out;
  for (unsigned int i = 0; i < count; ++i) {
    if (out.size() >= limit) {
      if (left_out != nullptr) ++*left_out;
      continue;
    }
    bool known = infos[i].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE;
    out.push_back({.pid = infos[i].pid,
                   .memory_bytes = known ? infos[i].usedGpuMemory : 0,
                   .memory_known = known});
  }
  return out;
}

absl::StatusOr<std::vector<NvmlProcessUtilization>> NvmlLibrary::ProcessUtilization(
    nvmlDevice_t device, uint64_t since_us, size_t limit) {
  // The first call sizes the buffer; NOT_FOUND means no sample since `since_us`.
  unsigned int count = 0;
  nvmlReturn_t code = entry_->process_utilization(device, nullptr, &count, since_us);
  if (code == NVML_ERROR_NOT_FOUND) return std::vector<NvmlProcessUtilization>{};
  if (code != NVML_SUCCESS && code != NVML_ERROR_INSUFFICIENT_SIZE) {
    return Check(code, "nvmlDeviceGetProcessUtilization");
  }
  std::vector<nvmlProcessUtilizationSample_t> samples(std::min<size_t>(count + 8, limit));
  count = static_cast<unsigned int>(samples.size());
  code = entry_->process_utilization(device, samples.data(), &count, since_us);
  if (code == NVML_ERROR_NOT_FOUND) return std::vector<NvmlProcessUtilization>{};
  if (absl::Status s = Check(code, "nvmlDeviceGetProcessUtilization"); !s.ok()) return s;
  std::vector<NvmlProcessUtilization> out;
  for (unsigned int i = 0; i < std::min<size_t>(count, samples.size()); ++i) {
    out.push_back({.pid = samples[i].pid,
                   .timestamp_us = samples[i].timeStamp,
                   .sm_percent = std::min(samples[i].smUtil, 100u)});
  }
  return out;
}

}  // namespace pystrobe
