#include "daemon/service/gpu_metrics.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/process_files.h"
#include "daemon/service/metrics_snapshot.h"

namespace pystrobe {

using Labels = std::vector<prometheus::ClientMetric::Label>;

GpuMetrics::GpuMetrics(std::unique_ptr<GpuSampler> sampler,
                       ProcessMetrics::PlacementLookup placement,
                       std::map<std::string, std::string> static_labels)
    : sampler_(std::move(sampler)),
      placement_(std::move(placement)),
      static_labels_(std::move(static_labels)) {
  if (sampler_ != nullptr) sampler_->Start();
}

void GpuMetrics::Update(absl::Time now) {
  if (sampler_ == nullptr || now - last_update_ < kGpuMetricsWindow) return;
  last_update_ = now;
  window_ = sampler_->TakeWindow();
  poll_errors_ += window_.poll_errors;
  processes_left_out_ += window_.processes_left_out;
  // Placement is read once per process, while it lives; gone ones go.
  absl::flat_hash_map<uint32_t, Process> kept;
  for (const auto& [pid, figures] : window_.processes) {
    auto it = processes_.find(pid);
    if (it != processes_.end()) {
      kept.emplace(pid, std::move(it->second));
    } else {
      kept.emplace(pid, Process{.comm = procfs::ReadComm(procfs::PidPath(pid, "comm")),
                                .placement = placement_(pid)});
    }
  }
  processes_ = std::move(kept);
}

std::vector<prometheus::MetricFamily> GpuMetrics::Families() const {
  Labels statics;
  for (const auto& [name, value] : static_labels_) statics.push_back({name, value});
  auto with_statics = [&statics](Labels labels) {
    labels.insert(labels.end(), statics.begin(), statics.end());
    return labels;
  };
  std::vector<prometheus::MetricFamily> families;
  families.push_back(GaugeFamily("pystrobe_gpu_nvml_available",
                                 "1 when NVML (libnvidia-ml.so.1) was opened and sees a GPU."));
  AddSample(families.back(), sampler_ != nullptr ? 1 : 0, statics);
  if (sampler_ == nullptr) return families;

  prometheus::MetricFamily utilization = GaugeFamily(
      "pystrobe_gpu_utilization_ratio",
      "Share of the last window in which a kernel ran on the GPU (NVML's utilization rate).");
  prometheus::MetricFamily used =
      GaugeFamily("pystrobe_gpu_memory_used_bytes", "GPU memory in use, at the last poll.");
  prometheus::MetricFamily total =
      GaugeFamily("pystrobe_gpu_memory_total_bytes", "GPU memory installed.");
  for (const GpuDeviceFigures& d : window_.devices) {
    Labels labels = with_statics({{"gpu", absl::StrCat(d.index)}, {"name", d.name}});
    AddSample(utilization, d.utilization, labels);
    AddSample(used, static_cast<double>(d.memory_used_bytes), labels);
    AddSample(total, static_cast<double>(d.memory_total_bytes), labels);
  }
  families.push_back(std::move(utilization));
  families.push_back(std::move(used));
  families.push_back(std::move(total));

  prometheus::MetricFamily process_utilization = GaugeFamily(
      "pystrobe_process_gpu_utilization_ratio",
      "GPUs kept busy by the process's kernels over the last window, summed over its devices.");
  prometheus::MetricFamily process_memory = GaugeFamily(
      "pystrobe_process_gpu_memory_bytes", "GPU memory the process holds, over its devices.");
  for (const auto& [pid, figures] : window_.processes) {
    auto it = processes_.find(pid);
    const Process* process = it != processes_.end() ? &it->second : nullptr;
    ProcessPlacement placement = process ? process->placement : ProcessPlacement();
    Labels labels = with_statics(
        {{"pid", absl::StrCat(pid)},
         {"comm", process ? process->comm : ""},
         {"cgroup", placement.cgroup_path},
         {"container_id", placement.container_id},
         {"pid_in_namespace",
          placement.pid_in_namespace != 0 ? absl::StrCat(placement.pid_in_namespace) : ""}});
    AddSample(process_utilization, figures.utilization, labels);
    AddSample(process_memory, static_cast<double>(figures.memory_bytes), labels);
  }
  families.push_back(std::move(process_utilization));
  families.push_back(std::move(process_memory));

  families.push_back(CounterFamily("pystrobe_gpu_poll_errors_total", "NVML calls that failed."));
  AddSample(families.back(), static_cast<double>(poll_errors_), statics);
  families.push_back(
      CounterFamily("pystrobe_gpu_processes_left_out_total",
                    "Processes NVML listed beyond the per-device limit, not read (256 a device)."));
  AddSample(families.back(), static_cast<double>(processes_left_out_), statics);
  return families;
}

}  // namespace pystrobe
