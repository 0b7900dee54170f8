#include "daemon/service/profiling_session.h"

#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/accounting/stat_analysis.h"
#include "daemon/loader/cpu_clock_events.h"
#include "daemon/recording/profile_builder.h"
#include "daemon/service/oom_report.h"

namespace pystrobe {
namespace {

constexpr absl::Duration kMapReadInterval = absl::Seconds(5);
// Above this share of limits.memory the window is cut early and new
// processes are refused until memory is back under it.
constexpr double kMemoryPressureShare = 0.8;

WindowOptions WindowOptionsFrom(const DaemonConfig& config) {
  MemoryBudget budget = BudgetFor(config.limits.memory_bytes);
  return WindowOptions{.window = config.window,
                       .rate_hz = config.rate_hz,
                       .offcpu = config.off_cpu,
                       .memory = config.memory,
                       .static_labels = config.labels,
                       .max_native_names = budget.max_native_names,
                       .max_python_codes = budget.max_python_codes,
                       .native_stacks = config.python.walk && config.python.native_stacks};
}

ProcessMetricsOptions ProcessMetricsOptionsFrom(const DaemonConfig& config) {
  return ProcessMetricsOptions{.max_series = static_cast<size_t>(config.limits.metric_series),
                               // Long enough for a few scrapes to see the final figures.
                               .exited_grace = std::max(2 * config.window, absl::Seconds(30)),
                               .static_labels = config.labels};
}

}  // namespace

bool NeedsNewSession(const DaemonConfig& a, const DaemonConfig& b) {
  return a.rate_hz != b.rate_hz || a.targets != b.targets || a.python != b.python ||
         a.off_cpu != b.off_cpu || a.gpu != b.gpu || a.memory != b.memory;
}

MemoryBudget BudgetFor(uint64_t memory_bytes) {
  // A quarter of the limit each for the window's stacks (about 2 KiB per
  // distinct stack with its frames) and the name caches (about 200 bytes a
  // native name, 1 KiB a code object with its line table); the rest is for
  // the symbol tables of live processes, BCC's and libbpf's own.
  uint64_t quarter = memory_bytes / 4;
  return MemoryBudget{.max_stacks = static_cast<size_t>(quarter / 2048),
                      .max_native_names = static_cast<size_t>(quarter / 2 / 200),
                      .max_python_codes = static_cast<size_t>(quarter / 2 / 1024)};
}

ProfilingSession::ProfilingSession(const DaemonConfig& config, ContainerLabels* labels)
    : config_(config),
      labels_(labels),
      process_metrics_(ProcessMetricsOptionsFrom(config), ReadProcessPlacement) {}

ProfilingSession::~ProfilingSession() {
  if (sampling_ != nullptr) sampling_->Finish().IgnoreError();
  // Clients waiting on a recording, stat or top get what it has.
  if (on_demand_accounting_ != nullptr) on_demand_accounting_->FinishAll(absl::Now());
  if (on_demand_ != nullptr) on_demand_->FinishAll(absl::Now());
}

absl::StatusOr<std::unique_ptr<ProfilingSession>> ProfilingSession::Start(
    const DaemonConfig& config, std::vector<WindowSink*> sinks, ContainerLabels* labels,
    uint64_t next_sequence) {
  std::unique_ptr<ProfilingSession> session(new ProfilingSession(config, labels));
  MemoryBudget budget = BudgetFor(config.limits.memory_bytes);
  // GPUs, where NVML is; an NVML that is there but unusable is said once.
  // With a GPU, CPython's whole native stacks are read: a CUDA wait is found
  // by its symbol below the driver's own frames.
  absl::StatusOr<std::unique_ptr<GpuSampler>> gpus =
      config.gpu ? GpuSampler::Open() : absl::NotFoundError("gpu: false");
  if (!gpus.ok() && gpus.status().code() != absl::StatusCode::kNotFound) {
    fprintf(stderr, "pystrobe daemon: no GPU figures: %s\n",
            std::string(gpus.status().message()).c_str());
  }
  absl::StatusOr<std::unique_ptr<SamplingSession>> sampling = SamplingSession::Open({
      .sampler = {.filter_pids = FiltersProcesses(config.targets),
                  .filter_cgroups = FiltersCgroups(config.targets),
                  // Without the walk, no process is handed to the kernel as CPython.
                  .python_max_frames = config.python.max_depth,
                  .offcpu = config.off_cpu,
                  .python_native_stacks = gpus.ok() || config.python.native_stacks,
                  // Tables for CPython processes only: the rest of the host
                  // keeps its frame-pointer stacks.
                  .native_unwind_bytes = config.python.walk && config.python.native_stacks
                                             ? uint64_t(config.python.native_table_mib) << 20
                                             : 0,
                  .memory_growth = config.memory,
                  .oom_kill_stacks = true},
      .target_pids = {},  // the target selector adds them
      .rate_hz = config.rate_hz,
      .recorder = {.threads = true,
                   .max_stacks = budget.max_stacks,
                   .mean_period_ns = MeanPeriodNs(config.rate_hz)},
      .accounting = BpfSampler::AccountingOptions{},
      // GC time of every CPython process found: its interpreter gets the probes.
      .python = config.python.walk ? SamplingSessionConfig::PythonDiscovery::kOnWithGcProbes
                                   : SamplingSessionConfig::PythonDiscovery::kOff,
      .native_unwind_python_only = true,
  });
  if (!sampling.ok()) return sampling.status();
  session->sampling_ = std::move(*sampling);
  SamplingSession& sampling_session = *session->sampling_;
  BpfSampler& bpf = sampling_session.sampler();
  if (!sampling_session.kernel_symbols_status().ok()) {
    fprintf(stderr, "pystrobe daemon: warning: kernel frames stay unnamed: %s\n",
            std::string(sampling_session.kernel_symbols_status().message()).c_str());
  }
  session->targets_ = std::make_unique<TargetSelector>(
      config.targets, &bpf, labels != nullptr ? labels->resolver() : nullptr);
  if (absl::Status s = session->targets_->Start(); !s.ok()) return s;
  session->accounting_ = std::make_unique<AccountingReader>(bpf.accounting_maps());
  session->gpu_metrics_ = std::make_unique<GpuMetrics>(gpus.ok() ? std::move(*gpus) : nullptr,
                                                       ReadProcessPlacement, config.labels);
  Recorder* recorder = &sampling_session.recorder();
  const KernelSymbolizer* kernel_symbols = sampling_session.kernel_symbols();
  KernelPythonDiscovery* python_discovery = sampling_session.python_discovery();
  recorder->processes().set_max_live_images(static_cast<size_t>(config.limits.tracked_processes));

  absl::Time now = absl::Now();
  session->window_loop_ =
      std::make_unique<WindowLoop>(recorder, kernel_symbols, labels, std::move(sinks),
                                   WindowOptionsFrom(config), now, next_sequence);
  session->on_demand_ =
      std::make_unique<OnDemandRecordings>(recorder, kernel_symbols,
                                           RecordCapabilities{.rate_hz = config.rate_hz,
                                                              .offcpu = config.off_cpu,
                                                              .all_processes = config.targets.all});
  session->on_demand_accounting_ = std::make_unique<OnDemandAccounting>(
      session->accounting_.get(), session->on_demand_.get(),
      AccountingCapabilities{.rate_hz = config.rate_hz,
                             .offcpu = config.off_cpu,
                             .all_processes = config.targets.all,
                             .targets = [selector = session->targets_.get()](
                                            uint32_t pid) { return selector->Includes(pid); },
                             .gc_measured =
                                 [discovery = python_discovery](uint32_t pid) {
                                   return discovery != nullptr && discovery->GcMeasured(pid);
                                 },
                             .gpus = session->gpu_metrics_->available(),
                             .memory = config.memory});
  OnDemandRecordings* on_demand = session->on_demand_.get();
  OnDemandAccounting* on_demand_accounting = session->on_demand_accounting_.get();
  session->window_loop_->set_window_observer(
      [on_demand, on_demand_accounting](const WindowStacks& stacks) {
        on_demand->OnWindowTaken(stacks);
        on_demand_accounting->OnWindowTaken(stacks);
      });
  if (absl::Status s = sampling_session.Start(on_demand_accounting); !s.ok()) {
    return s;
  }
  return session;
}

absl::Status ProfilingSession::Drain() { return sampling_->Drain(); }

int ProfilingSession::ring_buffer_fd() const { return sampling_->sampler().ring_buffer_fd(); }

absl::Time ProfilingSession::next_cut() const { return window_loop_->next_cut(); }

bool ProfilingSession::serving_requests() const {
  return on_demand_->active() > 0 || on_demand_accounting_->active() > 0;
}

void ProfilingSession::Tick(absl::Time now) {
  targets_->Refresh(now);
  for (const std::string& warning : targets_->TakeWarnings()) {
    fprintf(stderr, "pystrobe daemon: warning: %s\n", warning.c_str());
  }
  std::vector<ProcessCounters> processes = accounting_->Processes();
  process_metrics_.Update(processes, now);
  absl::flat_hash_set<uint32_t> exited;
  for (const ProcessCounters& process : processes) {
    if (process.exited) exited.insert(process.pid);
  }
  for (const OomVictim& victim : process_metrics_.TakeOomVictims()) {
    fprintf(stderr, "pystrobe daemon: the OOM killer chose %s (%u), resident %.1f MiB\n",
            victim.comm.c_str(), victim.pid, victim.memory.resident_bytes() / 1048576.0);
    OomReport report{.victim = victim};
    // With memory: true, what grew the victim's memory in this window.
    if (config_.memory) {
      Profile profile;
      ProfileBuilder builder(sampling_->recorder(), sampling_->kernel_symbols(), {});
      builder.AddBytesTo(sampling_->recorder().memory_stacks(), profile);
      StatReport growth;
      growth.pid = victim.pid;
      PickMemoryGrowthStacks(profile, growth);
      report.growth = std::move(growth.memory_growth_stacks);
    }
    pending_oom_reports_.Add(std::move(report), now);
  }
  WriteOomReports(pending_oom_reports_.TakeDue(now, exited));
  gpu_metrics_->Update(now);
  on_demand_accounting_->OnProcesses(processes);
  // Their final figures are read: the kernel's map may let them go.
  for (const ProcessCounters& process : processes) {
    if (process.exited) accounting_->Forget(process.pid, process.start_ns).IgnoreError();
  }
  if (now >= next_map_read_) {
    next_map_read_ = now + kMapReadInterval;
    map_fill_ = sampling_->sampler().ReadMapFill();
  }

  // limits.memory: near it, write the window now (its stacks are most of
  // what grows) and take no new processes until back under it.
  SelfUsage usage = ReadSelfUsage();
  double limit = static_cast<double>(config_.limits.memory_bytes);
  ProcessTable& table = sampling_->recorder().processes();
  if (usage.resident_bytes > kMemoryPressureShare * limit) {
    if (sampling_->recorder().stacks().size() + sampling_->recorder().offcpu_stacks().size() > 0) {
      ++memory_pressure_cuts_;
      WriteOomReports(pending_oom_reports_.TakeDue(now, {}, /*all=*/true));
      window_loop_->Cut(now);
      malloc_trim(0);
    }
    table.set_max_live_images(
        std::min(table.live_image_count(), static_cast<size_t>(config_.limits.tracked_processes)));
  } else {
    table.set_max_live_images(static_cast<size_t>(config_.limits.tracked_processes));
  }
}

std::vector<KilledThreadStack> ProfilingSession::KilledThreadStacks(uint32_t pid) {
  std::vector<KilledThread> killed = sampling_->recorder().TakeKilledThreads(pid);
  std::sort(killed.begin(), killed.end(),
            [](const KilledThread& a, const KilledThread& b) { return a.tid < b.tid; });
  // Named as the windows' stacks are.
  ProfileBuilder builder(sampling_->recorder(), sampling_->kernel_symbols(),
                         {.native = config_.python.walk && config_.python.native_stacks});
  std::vector<KilledThreadStack> threads;
  for (KilledThread& thread : killed) {
    StackAggregator one;
    one.Add(std::move(thread.stack), {1, 0});
    Profile profile;
    builder.AddTo(one, profile);
    KilledThreadStack named{.tid = thread.tid, .name = std::move(thread.name)};
    for (const ProfileStack& stack : profile.stacks()) {
      for (const Frame& frame : stack.frames) {
        if (frame.kind != FrameKind::kProcess) named.frames.push_back(frame.name);
      }
    }
    threads.push_back(std::move(named));
  }
  return threads;
}

void ProfilingSession::WriteOomReports(std::vector<OomReport> reports) {
  for (OomReport& report : reports) {
    report.threads = KilledThreadStacks(report.victim.pid);
    if (absl::Status s = WriteOomReport(config_.exporters.profile_dir, report); !s.ok()) {
      fprintf(stderr, "pystrobe daemon: %s\n", std::string(s.message()).c_str());
    }
  }
}

void ProfilingSession::MaybeCut(absl::Time now, bool force) {
  if (force || window_loop_->Due(now)) {
    // A cut lets exited processes' names go: reports still waiting are
    // written with what has come.
    WriteOomReports(pending_oom_reports_.TakeDue(now, {}, /*all=*/true));
    window_loop_->Cut(now);
    malloc_trim(0);
  }
}

void ProfilingSession::Finish(absl::Time now) {
  if (absl::Status s = sampling_->Finish(); !s.ok()) {
    fprintf(stderr, "pystrobe daemon: %s\n", std::string(s.message()).c_str());
  }
  WriteOomReports(pending_oom_reports_.TakeDue(now, {}, /*all=*/true));
  window_loop_->Cut(now, /*final=*/true);
  on_demand_accounting_->FinishAll(now);
  on_demand_->FinishAll(now);
}

void ProfilingSession::BeginRecording(std::shared_ptr<RecordJob> job, absl::Time now) {
  if (job->type() == ControlMessageType::kRecord) {
    on_demand_->Begin(std::move(job), now);
  } else {
    on_demand_accounting_->Begin(std::move(job), now);
  }
}

void ProfilingSession::ServeRecordings(absl::Time now) {
  // A stat or top that is over stops its recordings, which complete here;
  // then it answers.
  on_demand_accounting_->StopDue(now);
  on_demand_->Poll(now);
  on_demand_accounting_->AnswerDone();
}

void ProfilingSession::Apply(const DaemonConfig& config) {
  config_ = config;
  window_loop_->set_options(WindowOptionsFrom(config));
  process_metrics_.set_options(ProcessMetricsOptionsFrom(config));
  sampling_->recorder().processes().set_max_live_images(
      static_cast<size_t>(config.limits.tracked_processes));
}

void ProfilingSession::FillHealth(DaemonHealth& health) {
  health.sampler = sampling_->sampler().ReadCounters();
  health.accounting = accounting_->Drops();
  health.maps = map_fill_;
  const Recorder& recorder = sampling_->recorder();
  health.malformed_records = recorder.malformed_records();
  health.samples_over_stack_limit = recorder.samples_over_stack_limit();
  health.samples_of_refused_processes = recorder.samples_of_refused_processes();
  health.native_name_evictions = sampling_->recorder().native_names().evictions();
  health.python_code_evictions = recorder.python_codes().evictions();
  health.python_code_read_errors = recorder.python_codes().read_errors();
  health.python_codes_from_copies = recorder.python_codes().read_from_copies();
  health.python_code_copies_dropped = recorder.python_code_copies().dropped();
  health.images_evicted = recorder.processes().images_evicted();
  health.native_names = sampling_->recorder().native_names().size();
  health.python_codes = recorder.python_codes().size();
  health.process_images = recorder.processes().image_count();
  health.live_processes = recorder.processes().live_image_count();
  health.python_processes = recorder.processes().python_processes();
  health.python_not_read = recorder.processes().python_not_read_count();
  health.window_stacks = recorder.stacks().size() + recorder.offcpu_stacks().size();
  if (const NativeUnwindTracker* native = sampling_->native_unwind()) {
    health.unwind_tables = sampling_->unwind_maps()->tables_loaded();
    health.unwind_table_bytes = sampling_->unwind_maps()->bytes_used();
    health.unwind_table_budget_bytes = sampling_->unwind_maps()->bytes_total();
    health.unwind_tables_evicted = native->stats().tables_evicted;
    health.unwind_table_build_seconds = absl::ToDoubleSeconds(native->builder_stats().build_cpu);
  }
  health.windows = window_loop_->windows();
  health.sink_errors = window_loop_->sink_errors();
  health.memory_pressure_cuts = memory_pressure_cuts_;
}

}  // namespace pystrobe
