#include "daemon/gpu/gpu_sampler.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"

namespace pystrobe {

absl::StatusOr<std::unique_ptr<GpuSampler>> GpuSampler::Open(absl::Duration interval) {
  absl::StatusOr<std::unique_ptr<NvmlLibrary>> nvml = NvmlLibrary::Load(NvmlLibrary::DefaultPath());
  if (!nvml.ok()) return nvml.status();
  return Over(std::move(*nvml), interval);
}

absl::StatusOr<std::unique_ptr<GpuSampler>> GpuSampler::Over(std::unique_ptr<NvmlLibrary> nvml,
                                                             absl::Duration interval) {
  absl::StatusOr<unsigned> count = nvml->DeviceCount();
  if (!count.ok()) return count.status();
  if (*count == 0) return absl::NotFoundError("NVML sees no GPU");
  std::vector<Device> devices;
  for (unsigned index = 0; index < std::min(*count, kMaxDevices); ++index) {
    absl::StatusOr<nvmlDevice_t> handle = nvml->Device(index);
    if (!handle.ok()) continue;  // a lost or inaccessible GPU: the others still count
    absl::StatusOr<std::string> name = nvml->Name(*handle);
    devices.push_back({.index = index, .handle = *handle, .name = name.ok() ? *name : "?"});
  }
  if (devices.empty()) return absl::UnavailableError("NVML could open none of its GPUs");
  return std::unique_ptr<GpuSampler>(new GpuSampler(std::move(nvml), std::move(devices), interval));
}

GpuSampler::GpuSampler(std::unique_ptr<NvmlLibrary> nvml, std::vector<Device> devices,
                       absl::Duration interval)
    : nvml_(std::move(nvml)),
      devices_(std::move(devices)),
      interval_(interval),
      window_start_(absl::Now()),
      device_sums_(devices_.size()) {
  // Per-process samples from before the first poll belong to no window.
  uint64_t now_us = static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()));
  for (Device& device : devices_) device.last_timestamp_us = now_us;
}

GpuSampler::~GpuSampler() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GpuSampler::Start() {
  PollNow();
  thread_ = std::thread([this] { Run(); });
}

void GpuSampler::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (
      !wake_.wait_for(lock, absl::ToChronoNanoseconds(interval_), [this] { return stopping_; })) {
    lock.unlock();
    PollNow();
    lock.lock();
  }
}

void GpuSampler::PollNow() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++polls_;
  for (size_t i = 0; i < devices_.size(); ++i) PollDevice(devices_[i]);
  // A process's memory at this poll, over every device it uses.
  for (auto& [pid, sums] : process_sums_) {
    if (sums.last_poll != polls_) continue;
    uint64_t total = 0;
    for (const auto& [index, device] : sums.devices) {
      if (device.last_poll == polls_) total += device.memory_bytes;
    }
    sums.memory_peak_bytes = std::max(sums.memory_peak_bytes, total);
  }
}

void GpuSampler::PollDevice(Device& device) {
  DeviceSums& sums = device_sums_[&device - devices_.data()];
  absl::StatusOr<nvmlUtilization_t> utilization = nvml_->Utilization(device.handle);
  double device_busy = 0;
  if (utilization.ok()) {
    device_busy = std::min(utilization->gpu, 100u) / 100.0;
    sums.utilization_sum += device_busy;
  } else {
    ++poll_errors_;
  }
  if (absl::StatusOr<nvmlMemory_t> memory = nvml_->Memory(device.handle); memory.ok()) {
    sums.memory_used = memory->used;
    sums.memory_peak = std::max<uint64_t>(sums.memory_peak, memory->used);
    sums.memory_total = memory->total;
  } else {
    ++poll_errors_;
  }
  absl::StatusOr<std::vector<NvmlProcess>> processes =
      nvml_->ComputeProcesses(device.handle, kMaxProcessesPerDevice, &processes_left_out_);
  if (!processes.ok()) {
    ++poll_errors_;
    return;
  }
  // The SM share of each process since the previous poll: the mean of the
  // driver's samples newer than the last one seen; a running process with no
  // sample ran no kernel.
  absl::flat_hash_map<uint32_t, std::pair<double, int>> shares;
  if (device.process_utilization) {
    absl::StatusOr<std::vector<NvmlProcessUtilization>> samples = nvml_->ProcessUtilization(
        device.handle, device.last_timestamp_us, 4 * kMaxProcessesPerDevice);
    if (samples.ok()) {
      for (const NvmlProcessUtilization& sample : *samples) {
        auto& [sum, n] = shares[sample.pid];
        sum += sample.sm_percent / 100.0;
        ++n;
        device.last_timestamp_us = std::max(device.last_timestamp_us, sample.timestamp_us);
      }
    } else if (samples.status().code() == absl::StatusCode::kUnimplemented) {
      device.process_utilization = false;
    } else {
      ++poll_errors_;
    }
  }
  for (const NvmlProcess& process : *processes) {
    ProcessSums& p = process_sums_[process.pid];
    ProcessDeviceSums& d = p.devices[device.index];
    if (device.process_utilization) {
      auto share = shares.find(process.pid);
      if (share != shares.end()) d.utilization_sum += share->second.first / share->second.second;
    } else {
      d.utilization_sum += device_busy;
      p.utilization_from_device = true;
    }
    d.memory_bytes = process.memory_bytes;
    d.memory_peak_bytes = std::max(d.memory_peak_bytes, process.memory_bytes);
    d.last_poll = polls_;
    p.last_poll = polls_;
  }
}

GpuWindow GpuSampler::TakeWindow() {
  std::lock_guard<std::mutex> lock(mutex_);
  absl::Time now = absl::Now();
  GpuWindow window;
  window.seconds = absl::ToDoubleSeconds(now - window_start_);
  window.polls = polls_;
  double polls = std::max<double>(1, static_cast<double>(polls_));
  for (size_t i = 0; i < devices_.size(); ++i) {
    const DeviceSums& sums = device_sums_[i];
    window.devices.push_back({.index = devices_[i].index,
                              .name = devices_[i].name,
                              .utilization = sums.utilization_sum / polls,
                              .memory_used_bytes = sums.memory_used,
                              .memory_used_peak_bytes = sums.memory_peak,
                              .memory_total_bytes = sums.memory_total});
  }
  for (const auto& [pid, sums] : process_sums_) {
    GpuProcessFigures& figures = window.processes[pid];
    figures.memory_peak_bytes = sums.memory_peak_bytes;
    figures.utilization_from_device = sums.utilization_from_device;
    for (const auto& [index, device] : sums.devices) {
      GpuProcessDevice out{.index = index,
                           .utilization = device.utilization_sum / polls,
                           .memory_bytes = device.memory_bytes,
                           .memory_peak_bytes = device.memory_peak_bytes};
      figures.utilization += out.utilization;
      if (device.last_poll == polls_) figures.memory_bytes += device.memory_bytes;
      figures.devices.push_back(out);
    }
    std::sort(
        figures.devices.begin(), figures.devices.end(),
        [](const GpuProcessDevice& a, const GpuProcessDevice& b) { return a.index < b.index; });
  }
  window.processes_left_out = processes_left_out_;
  window.poll_errors = poll_errors_;
  // Start anew; a device's memory stays what it was until the next poll.
  window_start_ = now;
  polls_ = 0;
  for (DeviceSums& sums : device_sums_) {
    sums.utilization_sum = 0;
    sums.memory_peak = sums.memory_used;
  }
  process_sums_.clear();
  processes_left_out_ = 0;
  poll_errors_ = 0;
  return window;
}

}  // namespace pystrobe
