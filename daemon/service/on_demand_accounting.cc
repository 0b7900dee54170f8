#include "daemon/service/on_demand_accounting.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <variant>

#include "absl/strings/str_cat.h"
#include "daemon/accounting/memory_timeline.h"
#include "daemon/accounting/stat_analysis.h"
#include "daemon/accounting/stat_report.h"
#include "daemon/accounting/thread_view.h"
#include "daemon/accounting/top_screen.h"
#include "daemon/loader/cpu_clock_events.h"
#include "daemon/recording/process_table.h"
#include "daemon/recording/profile_builder.h"

namespace pystrobe {
namespace {

constexpr size_t kCounterFields = sizeof(pystrobe_task_counters) / sizeof(uint64_t);

// The oldest entry of `processes` (a reused pid is a newer one), or null.
const ProcessCounters* Oldest(const std::vector<ProcessCounters>& processes) {
  if (processes.empty()) return nullptr;
  return &*std::min_element(
      processes.begin(), processes.end(),
      [](const ProcessCounters& a, const ProcessCounters& b) { return a.start_ns < b.start_ns; });
}

std::vector<uint64_t> Fields(const pystrobe_task_counters& raw) {
  std::vector<uint64_t> out(kCounterFields);
  std::memcpy(out.data(), &raw, sizeof(raw));
  return out;
}

bool Done(const std::shared_ptr<RecordJob>& job) {
  return job == nullptr || job->WaitDone(absl::ZeroDuration());
}

// The stacks of a recording with [on-cpu]/[off-cpu] roots: the off-CPU
// ones without their root, in microseconds.
Profile OffCpuPart(const Profile& both) {
  Profile out;
  for (const ProfileStack& stack : both.stacks()) {
    if (stack.frames.empty() || stack.frames.front().name != "[off-cpu]") continue;
    out.Add(std::vector<Frame>(stack.frames.begin() + 1, stack.frames.end()), stack.count);
  }
  return out;
}

}  // namespace

std::shared_ptr<RecordJob> OnDemandAccounting::StartRecording(RecordRequest request,
                                                              absl::Time now) {
  auto job = std::make_shared<RecordJob>(std::move(request));
  recordings_->Begin(job, now);
  return job;
}

void OnDemandAccounting::Begin(std::shared_ptr<RecordJob> job, absl::Time now) {
  if (job->type() == ControlMessageType::kStat) return BeginStat(std::move(job), now);
  if (job->type() == ControlMessageType::kTop) return BeginTop(std::move(job), now);
  job->CompleteWithAnswer(absl::InvalidArgumentError("not a stat or top request"));
}

void OnDemandAccounting::BeginStat(std::shared_ptr<RecordJob> job, absl::Time now) {
  uint32_t pid = job->stat_request().pid;
  if (!ProcessIsAlive(pid)) {
    job->CompleteWithAnswer(absl::NotFoundError(absl::StrCat("no process with pid ", pid)));
    return;
  }
  std::vector<ProcessCounters> entries = reader_->Processes(pid);
  // Counted already, or a target that has not run since the daemon began
  // to look (asleep, or newer than the last scan for name patterns).
  bool targeted = caps_.all_processes || !entries.empty() || (caps_.targets && caps_.targets(pid));
  if (!targeted) {
    job->CompleteWithAnswer(absl::FailedPreconditionError(
        absl::StrCat("the daemon does not target process ", pid,
                     " (its configuration restricts targets): run stat with --no-daemon")));
    return;
  }
  auto stat = std::make_unique<Stat>();
  stat->job = std::move(job);
  stat->start = now;
  if (const ProcessCounters* entry = Oldest(entries)) {
    stat->start_ns = entry->start_ns;
    stat->before = entry->raw;
  }
  stat->gpus = OpenGpus();
  stat->timeline.emplace(MonotonicNowNs());
  if (caps_.memory) stat->memory_baseline = recordings_->recorder().memory_stacks();
  ObserveMemory(*stat, /*force=*/true);
  RecordRequest oncpu;
  oncpu.pids = {pid};
  stat->oncpu = StartRecording(oncpu, now);
  if (caps_.offcpu) {
    RecordRequest offcpu = oncpu;
    offcpu.offcpu = true;
    stat->offcpu = StartRecording(offcpu, now);
  }
  stats_.push_back(std::move(stat));
}

void OnDemandAccounting::BeginTop(std::shared_ptr<RecordJob> job, absl::Time now) {
  const TopRequest& request = job->top_request();
  if (request.pid && !ProcessIsAlive(*request.pid)) {
    job->CompleteWithAnswer(
        absl::NotFoundError(absl::StrCat("no process with pid ", *request.pid)));
    return;
  }
  auto top = std::make_unique<Top>();
  top->job = std::move(job);
  top->start = now;
  top->gpus = OpenGpus();
  if (request.pid) {
    for (const ThreadCounters& thread : reader_->Threads(*request.pid)) {
      top->before[{thread.tid, 0}] = thread.raw;
    }
  } else {
    for (const ProcessCounters& process : reader_->Processes()) {
      top->before[{process.pid, process.start_ns}] = process.raw;
    }
  }
  RecordRequest stacks;
  stacks.function_lines = true;
  if (request.pid) {
    stacks.pids = {*request.pid};
  } else {
    stacks.all = true;
  }
  top->stacks = StartRecording(std::move(stacks), now);
  if (!caps_.all_processes) {
    top->job->AddInfo(
        "the daemon counts only its configured targets: other processes are not shown");
  }
  tops_.push_back(std::move(top));
}

void OnDemandAccounting::Observe(const RingRecord& record) {
  if (stats_.empty()) return;
  const auto* sample = std::get_if<SampleRecord>(&record);
  if (sample == nullptr) return;
  for (std::unique_ptr<Stat>& stat : stats_) {
    if (!stat->stopped && sample->pid == stat->job->stat_request().pid) {
      stat->tally.Observe(record);
    }
  }
}

void OnDemandAccounting::OnProcesses(const std::vector<ProcessCounters>& processes) {
  for (const ProcessCounters& process : processes) {
    if (!process.exited) continue;
    for (std::unique_ptr<Stat>& stat : stats_) {
      if (!stat->stopped && process.pid == stat->job->stat_request().pid &&
          (stat->start_ns == 0 || stat->start_ns == process.start_ns)) {
        stat->final_seen = process;
      }
    }
    for (std::unique_ptr<Top>& top : tops_) {
      if (!top->stopped) top->exited[{process.pid, process.start_ns}] = process;
    }
  }
}

void OnDemandAccounting::StopStat(Stat& stat, absl::Time now) {
  stat.stopped = true;
  stat.end = now;
  uint32_t pid = stat.job->stat_request().pid;
  std::vector<ProcessCounters> entries = reader_->Processes(pid);
  const ProcessCounters* entry = nullptr;
  for (const ProcessCounters& candidate : entries) {
    if (stat.start_ns != 0 && candidate.start_ns == stat.start_ns) entry = &candidate;
  }
  if (entry == nullptr && stat.start_ns == 0) entry = Oldest(entries);
  if (entry != nullptr) {
    stat.at_end = *entry;
    stat.counted = true;
  } else if (stat.final_seen) {
    stat.at_end = *stat.final_seen;
    stat.counted = true;
  }
  if (stat.oncpu) stat.oncpu->RequestStop();
  if (stat.offcpu) stat.offcpu->RequestStop();
  if (stat.gpus) {
    stat.gpus->PollNow();  // the end of the window
    stat.gpu_window = stat.gpus->TakeWindow();
    stat.gpus.reset();
  }
}

void OnDemandAccounting::StopTop(Top& top, absl::Time now) {
  top.stopped = true;
  top.end = now;
  const TopRequest& request = top.job->top_request();
  TopSnapshot& s = top.snapshot;
  s.interval_seconds = absl::ToDoubleSeconds(now - top.start);
  absl::StatusOr<std::vector<int>> cpus = OnlineCpus();
  s.cpus = cpus.ok() ? static_cast<uint32_t>(cpus->size()) : 1;
  auto since = [&top](ProcessKey key, const pystrobe_task_counters& raw) {
    auto it = top.before.find(key);
    return it == top.before.end() ? raw : CountersSince(raw, it->second);
  };
  // A free-threaded CPython's GIL column says it has none.
  const ProcessTable& processes = recordings_->recorder().processes();
  if (request.pid) {
    PerThreadView view = ReadPerThreadView(*reader_, *request.pid);
    s.title = PerThreadTitle(*request.pid, view);
    s.process_rss_known = view.resident_bytes.has_value();
    s.process_rss_bytes = view.resident_bytes.value_or(0);
    for (const ThreadCounters& thread : view.threads) {
      s.rows.push_back(TopSnapshotRow{.pid = thread.pid,
                                      .tid = thread.tid,
                                      .comm = thread.comm,
                                      .free_threaded = processes.RunsFreeThreadedPython(thread.pid),
                                      .counters = Fields(since({thread.tid, 0}, thread.raw))});
    }
  } else {
    s.title = "all processes";
    for (const ProcessCounters& process : reader_->Processes()) {
      top.exited.erase(ProcessKey{process.pid, process.start_ns});
      s.rows.push_back(
          TopSnapshotRow{.pid = process.pid,
                         .comm = process.comm,
                         .exited = process.exited,
                         .free_threaded = processes.RunsFreeThreadedPython(process.pid),
                         .counters = Fields(since({process.pid, process.start_ns}, process.raw)),
                         .rss_known = process.memory.known(),
                         .rss_bytes = process.memory.resident_bytes()});
    }
    // Exited during the interval and already let go by the session.
    for (const auto& [key, process] : top.exited) {
      s.rows.push_back(TopSnapshotRow{.pid = process.pid,
                                      .comm = process.comm,
                                      .exited = true,
                                      .counters = Fields(since(key, process.raw)),
                                      .rss_known = process.memory.known(),
                                      .rss_bytes = process.memory.resident_bytes()});
    }
  }
  top.before.clear();
  top.exited.clear();
  if (top.stacks) top.stacks->RequestStop();
  if (top.gpus) {
    top.gpus->PollNow();  // the end of the interval
    GpuWindow window = top.gpus->TakeWindow();
    top.gpus.reset();
    s.gpu = true;
    for (const GpuDeviceFigures& d : window.devices) {
      s.gpu_devices.push_back({.index = d.index,
                               .name = d.name,
                               .utilization = d.utilization,
                               .memory_used_bytes = d.memory_used_bytes,
                               .memory_total_bytes = d.memory_total_bytes});
    }
    for (const auto& [pid, figures] : window.processes) {
      s.gpu_processes.push_back(
          {.pid = pid, .utilization = figures.utilization, .memory_bytes = figures.memory_bytes});
    }
  }
}

std::unique_ptr<GpuSampler> OnDemandAccounting::OpenGpus() const {
  if (!caps_.gpus) return nullptr;
  absl::StatusOr<std::unique_ptr<GpuSampler>> gpus = GpuSampler::Open();
  if (!gpus.ok()) return nullptr;
  (*gpus)->Start();
  return std::move(*gpus);
}

void OnDemandAccounting::ObserveMemory(Stat& stat, bool force) {
  uint32_t pid = stat.job->stat_request().pid;
  for (const ProcessCounters& entry : reader_->Processes(pid)) {
    if (stat.start_ns == 0 || entry.start_ns == stat.start_ns) {
      stat.timeline->Observe(entry.memory, MonotonicNowNs(), force);
      return;
    }
  }
}

void OnDemandAccounting::AddMemoryGrowth(Stat& stat, const StackAggregator& stacks) {
  uint32_t pid = stat.job->stat_request().pid;
  const ProcessTable& processes = recordings_->recorder().processes();
  StackAggregator gained = stacks.Since(stat.memory_baseline);
  for (const auto& [stack, weight] : gained.weights()) {
    if (processes.image(stack.image).pid == pid) stat.memory_grown.Add(stack, weight);
  }
}

void OnDemandAccounting::OnWindowTaken(const WindowStacks& stacks) {
  if (!caps_.memory) return;
  for (std::unique_ptr<Stat>& stat : stats_) {
    if (stat->stopped) continue;
    AddMemoryGrowth(*stat, stacks.memory);
    stat->memory_baseline = StackAggregator();
  }
}

void OnDemandAccounting::PickMemoryGrowth(Stat& stat, StatReport& report) {
  if (!caps_.memory) return;
  Recorder& recorder = recordings_->recorder();
  AddMemoryGrowth(stat, recorder.memory_stacks());
  ProfileBuilder builder(recorder, recordings_->kernel(), ProfileBuilderOptions{});
  Profile growth;
  builder.AddBytesTo(stat.memory_grown, growth);
  report.memory_growth_sampled = true;
  report.memory_growth_to_peak = false;
  PickMemoryGrowthStacks(growth, report);
}

void OnDemandAccounting::StopDue(absl::Time now) {
  for (std::unique_ptr<Stat>& stat : stats_) {
    if (stat->stopped) continue;
    ObserveMemory(*stat, /*force=*/false);
    uint32_t pid = stat->job->stat_request().pid;
    if (stat->job->stop_requested() || now - stat->start >= stat->job->stat_request().duration ||
        stat->final_seen || !ProcessIsAlive(pid)) {
      StopStat(*stat, now);
    }
  }
  for (std::unique_ptr<Top>& top : tops_) {
    if (top->stopped) continue;
    if (top->job->stop_requested() || now - top->start >= top->job->top_request().interval) {
      StopTop(*top, now);
    }
  }
}

void OnDemandAccounting::AnswerStat(Stat& stat) {
  if (stat.job->abandoned()) return stat.job->CompleteWithAnswer(absl::CancelledError("gone"));
  const StatRequest& request = stat.job->stat_request();
  if (!stat.counted) {
    return stat.job->CompleteWithAnswer(
        absl::NotFoundError(absl::StrCat("nothing was counted for process ", request.pid)));
  }
  StatReport report;
  report.pid = request.pid;
  report.comm = stat.at_end.comm;
  report.duration_seconds = absl::ToDoubleSeconds(stat.end - stat.start);
  report.figures = FiguresFrom(CountersSince(stat.at_end.raw, stat.before));
  report.gc_measured = caps_.gc_measured && caps_.gc_measured(request.pid);
  report.syscalls = false;
  report.threads = stat.at_end.threads;
  report.exited = stat.at_end.exited || !ProcessIsAlive(request.pid);
  report.drops = reader_->Drops();
  report.memory = stat.at_end.memory;
  report.oom_killed = stat.at_end.oom_killed;
  stat.timeline->Observe(stat.at_end.memory, MonotonicNowNs(), /*force=*/true);
  report.memory_timeline = stat.timeline->points();
  report.peak_seconds = stat.timeline->SecondsOf(stat.at_end.memory.peak_ns);
  if (stat.gpu_window) {
    report.gpu_measured = true;
    report.gpu_devices = stat.gpu_window->devices;
    if (const GpuProcessFigures* mine = stat.gpu_window->Of(request.pid)) report.gpu = *mine;
  }

  Profile oncpu;
  if (stat.oncpu && stat.oncpu->result().ok()) oncpu = *stat.oncpu->result();
  Profile offcpu;
  if (stat.offcpu && stat.offcpu->result().ok()) offcpu = OffCpuPart(*stat.offcpu->result());
  MeasureGpuWait(oncpu, offcpu, report);
  DecideStatVerdict(stat.tally.Of(request.pid), caps_.rate_hz, report);
  // After the verdict: a memory-bound one names what grew memory.
  PickMemoryGrowth(stat, report);
  PickStatStacks(oncpu, offcpu,
                 stat.offcpu ? ""
                             : "off-CPU stacks need off_cpu: true in the daemon's configuration "
                               "(or stat with --no-daemon)",
                 report);
  stat.job->CompleteWithAnswer(request.json ? StatReportJson(report) : StatReportText(report));
}

void OnDemandAccounting::AnswerTop(Top& top) {
  if (top.job->abandoned()) return top.job->CompleteWithAnswer(absl::CancelledError("gone"));
  if (top.stacks && top.stacks->result().ok()) {
    uint64_t total = 0;
    for (TopFunction& fn : HottestFunctions(*top.stacks->result(), total)) {
      if (top.snapshot.functions.size() >= 10) break;
      top.snapshot.functions.push_back({std::move(fn.name), fn.samples});
    }
    top.snapshot.function_samples = total;
  }
  top.job->CompleteWithAnswer(EncodeTopSnapshot(top.snapshot));
}

void OnDemandAccounting::AnswerDone() {
  for (auto it = stats_.begin(); it != stats_.end();) {
    Stat& stat = **it;
    if (stat.stopped && Done(stat.oncpu) && Done(stat.offcpu)) {
      AnswerStat(stat);
      it = stats_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = tops_.begin(); it != tops_.end();) {
    Top& top = **it;
    if (top.stopped && Done(top.stacks)) {
      AnswerTop(top);
      it = tops_.erase(it);
    } else {
      ++it;
    }
  }
}

void OnDemandAccounting::FinishAll(absl::Time now) {
  for (std::unique_ptr<Stat>& stat : stats_) {
    if (!stat->stopped) StopStat(*stat, now);
    stat->job->AddInfo("the daemon's session ended (reload or stop): the window is cut short");
  }
  for (std::unique_ptr<Top>& top : tops_) {
    if (!top->stopped) StopTop(*top, now);
  }
  // Their recordings complete with what they have (and so do the clients'
  // own recordings).
  recordings_->FinishAll(now);
  for (std::unique_ptr<Stat>& stat : stats_) {
    if (Done(stat->oncpu) && Done(stat->offcpu)) {
      AnswerStat(*stat);
    } else {
      stat->job->CompleteWithAnswer(absl::UnavailableError("the daemon is stopping"));
    }
  }
  for (std::unique_ptr<Top>& top : tops_) {
    if (Done(top->stacks)) {
      AnswerTop(*top);
    } else {
      top->job->CompleteWithAnswer(absl::UnavailableError("the daemon is stopping"));
    }
  }
  stats_.clear();
  tops_.clear();
}

}  // namespace pystrobe
