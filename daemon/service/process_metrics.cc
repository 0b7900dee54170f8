#include "daemon/service/process_metrics.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/containers/process_container_info.h"
#include "daemon/service/metrics_snapshot.h"

namespace pystrobe {
namespace {

// Each update keeps this share of a process's score: about the last ten
// updates count.
constexpr double kScoreDecay = 0.9;

// `after - before` for every field, as counters only grow.
TaskFigures Delta(const TaskFigures& after, const TaskFigures& before) {
  auto d = [](auto a, auto b) { return a > b ? a - b : decltype(a){0}; };
  TaskFigures out;
  out.cpu_user_seconds = d(after.cpu_user_seconds, before.cpu_user_seconds);
  out.cpu_system_seconds = d(after.cpu_system_seconds, before.cpu_system_seconds);
  out.runqueue_seconds = d(after.runqueue_seconds, before.runqueue_seconds);
  out.offcpu_io_seconds = d(after.offcpu_io_seconds, before.offcpu_io_seconds);
  out.offcpu_sleep_seconds = d(after.offcpu_sleep_seconds, before.offcpu_sleep_seconds);
  out.gil_wait_seconds = d(after.gil_wait_seconds, before.gil_wait_seconds);
  out.voluntary_switches = d(after.voluntary_switches, before.voluntary_switches);
  out.involuntary_switches = d(after.involuntary_switches, before.involuntary_switches);
  out.minor_faults = d(after.minor_faults, before.minor_faults);
  out.major_faults = d(after.major_faults, before.major_faults);
  out.read_calls = d(after.read_calls, before.read_calls);
  out.read_bytes = d(after.read_bytes, before.read_bytes);
  out.write_calls = d(after.write_calls, before.write_calls);
  out.write_bytes = d(after.write_bytes, before.write_bytes);
  out.block_io_bytes = d(after.block_io_bytes, before.block_io_bytes);
  out.gc_seconds = d(after.gc_seconds, before.gc_seconds);
  return out;
}

void Accumulate(TaskFigures& sum, const TaskFigures& delta) {
  sum.cpu_user_seconds += delta.cpu_user_seconds;
  sum.cpu_system_seconds += delta.cpu_system_seconds;
  sum.runqueue_seconds += delta.runqueue_seconds;
  sum.offcpu_io_seconds += delta.offcpu_io_seconds;
  sum.offcpu_sleep_seconds += delta.offcpu_sleep_seconds;
  sum.gil_wait_seconds += delta.gil_wait_seconds;
  sum.voluntary_switches += delta.voluntary_switches;
  sum.involuntary_switches += delta.involuntary_switches;
  sum.minor_faults += delta.minor_faults;
  sum.major_faults += delta.major_faults;
  sum.read_calls += delta.read_calls;
  sum.read_bytes += delta.read_bytes;
  sum.write_calls += delta.write_calls;
  sum.write_bytes += delta.write_bytes;
  sum.block_io_bytes += delta.block_io_bytes;
  sum.gc_seconds += delta.gc_seconds;
}

using Labels = std::vector<prometheus::ClientMetric::Label>;

// One exported metric: its family and how to read it from TaskFigures.
struct ProcessMetric {
  const char* name;
  const char* help;
  const char* reason;  // a value of the "reason" label, or null
  double (*value)(const TaskFigures&);
};

const ProcessMetric kMetrics[] = {
    {"pystrobe_process_cpu_user_seconds_total", "CPU time in user mode.", nullptr,
     [](const TaskFigures& f) { return f.cpu_user_seconds; }},
    {"pystrobe_process_cpu_system_seconds_total", "CPU time in the kernel.", nullptr,
     [](const TaskFigures& f) { return f.cpu_system_seconds; }},
    {"pystrobe_process_runqueue_seconds_total", "Time runnable but waiting for a CPU.", nullptr,
     [](const TaskFigures& f) { return f.runqueue_seconds; }},
    {"pystrobe_process_offcpu_seconds_total",
     "Time off CPU asleep, by reason: io (uninterruptible) or sleep (the rest, GIL wait included).",
     "io", [](const TaskFigures& f) { return f.offcpu_io_seconds; }},
    {"pystrobe_process_offcpu_seconds_total", nullptr, "sleep",
     [](const TaskFigures& f) { return f.offcpu_sleep_seconds; }},
    {"pystrobe_process_gil_wait_seconds_total", "Time asleep waiting to take CPython's GIL.",
     nullptr, [](const TaskFigures& f) { return f.gil_wait_seconds; }},
    {"pystrobe_process_read_bytes_total", "Bytes read through read-family syscalls (rchar).",
     nullptr, [](const TaskFigures& f) { return static_cast<double>(f.read_bytes); }},
    {"pystrobe_process_write_bytes_total", "Bytes written through write-family syscalls (wchar).",
     nullptr, [](const TaskFigures& f) { return static_cast<double>(f.write_bytes); }},
    {"pystrobe_process_read_calls_total", "Read-family syscalls (syscr).", nullptr,
     [](const TaskFigures& f) { return static_cast<double>(f.read_calls); }},
    {"pystrobe_process_write_calls_total", "Write-family syscalls (syscw).", nullptr,
     [](const TaskFigures& f) { return static_cast<double>(f.write_calls); }},
    {"pystrobe_process_block_io_bytes_total", "Bytes of block IO queued.", nullptr,
     [](const TaskFigures& f) { return static_cast<double>(f.block_io_bytes); }},
    {"pystrobe_process_minor_page_faults_total", "Minor page faults.", nullptr,
     [](const TaskFigures& f) { return static_cast<double>(f.minor_faults); }},
    {"pystrobe_process_major_page_faults_total", "Major page faults (the page was read in).",
     nullptr, [](const TaskFigures& f) { return static_cast<double>(f.major_faults); }},
    {"pystrobe_process_context_switches_total",
     "Context switches, by reason: voluntary (the task slept) or involuntary (preempted).",
     "voluntary", [](const TaskFigures& f) { return static_cast<double>(f.voluntary_switches); }},
    {"pystrobe_process_context_switches_total", nullptr, "involuntary",
     [](const TaskFigures& f) { return static_cast<double>(f.involuntary_switches); }},
    {"pystrobe_process_gc_seconds_total",
     "Time in CPython's garbage collector (its USDT probes, or uprobes on the collector).", nullptr,
     [](const TaskFigures& f) { return f.gc_seconds; }},
};

// Resident memory gauges: their family and how to read them.
struct MemoryMetric {
  const char* name;
  const char* help;
  const char* memory;  // a value of the "memory" label, or null
  uint64_t (*value)(const ResidentMemory&);
};

const MemoryMetric kMemoryMetrics[] = {
    {"pystrobe_process_resident_bytes",
     "Resident memory (the kernel's RSS counters), by kind: anon, file (mapped files) or shmem.",
     "anon", [](const ResidentMemory& m) { return m.anon_bytes; }},
    {"pystrobe_process_resident_bytes", nullptr, "file",
     [](const ResidentMemory& m) { return m.file_bytes; }},
    {"pystrobe_process_resident_bytes", nullptr, "shmem",
     [](const ResidentMemory& m) { return m.shmem_bytes; }},
    {"pystrobe_process_swap_bytes", "Anonymous memory swapped out.", nullptr,
     [](const ResidentMemory& m) { return m.swap_bytes; }},
    {"pystrobe_process_resident_peak_bytes",
     "The highest resident memory of the process's life (VmHWM).", nullptr,
     [](const ResidentMemory& m) { return m.peak_bytes; }},
};

// A process series' labels: who and where it is, `extra`=`value` when
// `value` is not null, then the static labels.
Labels SeriesLabels(std::string pid, std::string comm, const ProcessPlacement& placement,
                    const char* extra, const char* value, const Labels& statics) {
  Labels out = {
      {"pid", std::move(pid)},
      {"comm", std::move(comm)},
      {"cgroup", placement.cgroup_path},
      {"container_id", placement.container_id},
      {"pid_in_namespace",
       placement.pid_in_namespace != 0 ? absl::StrCat(placement.pid_in_namespace) : std::string()}};
  if (value != nullptr) out.push_back({extra, value});
  out.insert(out.end(), statics.begin(), statics.end());
  return out;
}

}  // namespace

ProcessPlacement ReadProcessPlacement(uint32_t pid) {
  absl::StatusOr<ProcessContainerInfo> info = ReadProcessContainerInfo(static_cast<int32_t>(pid));
  if (!info.ok()) return {};
  ProcessPlacement placement;
  placement.cgroup_path = info->cgroup_path;
  placement.container_id = info->container.id;
  if (info->pid_namespace.in_child_namespace()) {
    placement.pid_in_namespace = static_cast<uint32_t>(info->pid_namespace.ns_pid);
  }
  return placement;
}

void ProcessMetrics::Update(const std::vector<ProcessCounters>& processes, absl::Time now) {
  for (auto& [key, tracked] : processes_) tracked.seen = false;
  for (const ProcessCounters& process : processes) {
    auto [it, inserted] = processes_.try_emplace(Key{process.pid, process.start_ns});
    Tracked& tracked = it->second;
    if (inserted) {
      tracked.pid = process.pid;
      if (!process.exited && placement_) tracked.placement = placement_(process.pid);
    }
    tracked.comm = process.comm;
    tracked.seen = true;
    if (process.memory.known()) tracked.memory = process.memory;
    if (process.oom_killed && !tracked.oom_killed) {
      tracked.oom_killed = true;
      ++oom_kills_[{tracked.placement.cgroup_path, tracked.placement.container_id, tracked.comm}];
      new_oom_victims_.push_back(OomVictim{.pid = tracked.pid,
                                           .comm = tracked.comm,
                                           .placement = tracked.placement,
                                           .memory = tracked.memory,
                                           .seen = now});
    }
    TaskFigures figures = FiguresFrom(process.raw);
    TaskFigures delta = Delta(figures, tracked.figures);
    tracked.figures = figures;
    tracked.score = tracked.score * kScoreDecay + delta.cpu_seconds();
    Accumulate(tracked.pending, delta);
    if (process.exited && !tracked.exited_at) tracked.exited_at = now;
  }
  // A process no longer in the kernel's map was forgotten there: it is gone.
  for (auto& [key, tracked] : processes_) {
    if (!tracked.seen && !tracked.exited_at) tracked.exited_at = now;
  }
  // The busiest lately; exited ones only while they still have a series.
  std::vector<Tracked*> candidates;
  for (auto& [key, tracked] : processes_) {
    if (!tracked.exited_at || tracked.selected) candidates.push_back(&tracked);
  }
  size_t keep = std::min(options_.max_series, candidates.size());
  std::partial_sort(candidates.begin(), candidates.begin() + keep, candidates.end(),
                    [](const Tracked* a, const Tracked* b) {
                      return a->score != b->score ? a->score > b->score : a->pid < b->pid;
                    });
  for (auto& [key, tracked] : processes_) tracked.selected = false;
  for (size_t i = 0; i < keep; ++i) candidates[i]->selected = true;
  // What the others counted since the last update goes to "other".
  for (auto& [key, tracked] : processes_) {
    if (!tracked.selected) Accumulate(other_, tracked.pending);
    tracked.pending = TaskFigures();
  }
  for (auto it = processes_.begin(); it != processes_.end();) {
    // Without a series, an exited process has nothing more to show: what it
    // counted is in "other" already.
    bool expired = it->second.exited_at &&
                   (!it->second.selected || now - *it->second.exited_at >= options_.exited_grace);
    if (expired) {
      if (it->second.selected) ++expired_;
      processes_.erase(it++);
    } else {
      ++it;
    }
  }
}

size_t ProcessMetrics::series() const {
  size_t count = 0;
  for (const auto& [key, tracked] : processes_) count += tracked.selected;
  return count;
}

std::vector<prometheus::MetricFamily> ProcessMetrics::Families() const {
  Labels statics;
  for (const auto& [name, value] : options_.static_labels) statics.push_back({name, value});

  std::vector<const Tracked*> selected;
  for (const auto& [key, tracked] : processes_) {
    if (tracked.selected) selected.push_back(&tracked);
  }
  std::sort(selected.begin(), selected.end(),
            [](const Tracked* a, const Tracked* b) { return a->pid < b->pid; });

  std::vector<prometheus::MetricFamily> families;
  for (const ProcessMetric& metric : kMetrics) {
    if (metric.help != nullptr) families.push_back(CounterFamily(metric.name, metric.help));
    prometheus::MetricFamily& family = families.back();
    auto labels = [&](std::string pid, std::string comm, const ProcessPlacement& placement) {
      return SeriesLabels(std::move(pid), std::move(comm), placement, "reason", metric.reason,
                          statics);
    };
    for (const Tracked* tracked : selected) {
      AddSample(family, metric.value(tracked->figures),
                labels(absl::StrCat(tracked->pid), tracked->comm, tracked->placement));
    }
    AddSample(family, metric.value(other_), labels("other", "", ProcessPlacement()));
  }
  // Live processes without a series: their memory, summed.
  ResidentMemory other_memory;
  for (const auto& [key, tracked] : processes_) {
    if (tracked.selected || tracked.exited_at) continue;
    other_memory.anon_bytes += tracked.memory.anon_bytes;
    other_memory.file_bytes += tracked.memory.file_bytes;
    other_memory.shmem_bytes += tracked.memory.shmem_bytes;
    other_memory.swap_bytes += tracked.memory.swap_bytes;
    other_memory.peak_bytes += tracked.memory.peak_bytes;
  }
  for (const MemoryMetric& metric : kMemoryMetrics) {
    if (metric.help != nullptr) families.push_back(GaugeFamily(metric.name, metric.help));
    prometheus::MetricFamily& family = families.back();
    auto labels = [&](std::string pid, std::string comm, const ProcessPlacement& placement) {
      return SeriesLabels(std::move(pid), std::move(comm), placement, "memory", metric.memory,
                          statics);
    };
    for (const Tracked* tracked : selected) {
      if (!tracked->memory.known()) continue;
      AddSample(family, static_cast<double>(metric.value(tracked->memory)),
                labels(absl::StrCat(tracked->pid), tracked->comm, tracked->placement));
    }
    AddSample(family, static_cast<double>(metric.value(other_memory)),
              labels("other", "", ProcessPlacement()));
  }
  prometheus::MetricFamily oom_family = CounterFamily(
      "pystrobe_oom_kills_total", "Processes the kernel's OOM killer chose (oom:mark_victim).");
  for (const auto& [key, count] : oom_kills_) {
    const auto& [cgroup, container_id, comm] = key;
    Labels labels = {{"cgroup", cgroup}, {"container_id", container_id}, {"comm", comm}};
    labels.insert(labels.end(), statics.begin(), statics.end());
    AddSample(oom_family, static_cast<double>(count), labels);
  }
  families.push_back(std::move(oom_family));
  prometheus::MetricFamily tracked_family =
      GaugeFamily("pystrobe_processes_tracked", "Processes with per-process figures held.");
  AddSample(tracked_family, static_cast<double>(processes_.size()), statics);
  families.push_back(std::move(tracked_family));
  prometheus::MetricFamily series_family = GaugeFamily(
      "pystrobe_process_series", "Processes exported as their own series (limits.metric_series).");
  AddSample(series_family, static_cast<double>(selected.size()), statics);
  families.push_back(std::move(series_family));
  return families;
}

}  // namespace pystrobe
