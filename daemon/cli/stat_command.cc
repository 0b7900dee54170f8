#include "daemon/cli/stat_command.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "daemon/accounting/memory_timeline.h"
#include "daemon/accounting/process_counters.h"
#include "daemon/accounting/sample_tally.h"
#include "daemon/accounting/stat_analysis.h"
#include "daemon/accounting/stat_report.h"
#include "daemon/accounting/verdict.h"
#include "daemon/cli/accounting_options.h"
#include "daemon/cli/allocation_route.h"
#include "daemon/cli/command_lifecycle.h"
#include "daemon/cli/exit_status.h"
#include "daemon/cli/record_summary.h"
#include "daemon/cli/remote_accounting.h"
#include "daemon/cli/target_launcher.h"
#include "daemon/gpu/gpu_sampler.h"
#include "daemon/loader/bpf_sampler.h"
#include "daemon/loader/capabilities.h"
#include "daemon/loader/cpu_clock_events.h"
#include "daemon/loader/libbpf_errors.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/process_files.h"
#include "daemon/recording/profile_builder.h"
#include "daemon/recording/recorder.h"
#include "daemon/recording/recording_profile.h"
#include "daemon/recording/sampling_session.h"
#include "daemon/service/signals.h"

namespace pystrobe {
namespace {

// The file `name` runs: itself if it has a slash, else found on PATH.
std::string ResolveExecutable(const std::string& name) {
  std::error_code ignored;
  if (name.find('/') != std::string::npos) {
    return std::filesystem::canonical(name, ignored).string();
  }
  const char* path = getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    std::filesystem::path candidate = std::filesystem::path(std::string(dir)) / name;
    if (access(candidate.c_str(), X_OK) == 0) {
      return std::filesystem::canonical(candidate, ignored).string();
    }
  }
  return "";
}

}  // namespace

int RunStatCommand(const std::vector<std::string>& args) {
  absl::StatusOr<StatOptions> parsed = ParseStatOptions(args);
  if (!parsed.ok()) {
    return UsageError("stat", parsed.status());
  }
  const StatOptions& options = *parsed;
  if (options.help) {
    fputs(StatUsage(), stdout);
    return kExitOk;
  }
  if (options.pid && !ProcessIsAlive(*options.pid)) {
    return UsageError("stat", absl::StrCat("no process with pid ", *options.pid));
  }
  if (std::optional<int> status = MaybeStatThroughDaemon(options, options.daemon_client)) {
    return *status;
  }
  if (absl::Status caps = CheckProfilingCapabilities(CapabilitySet::OfThisProcess()); !caps.ok()) {
    return Fail("stat", caps);
  }
  LibbpfLog::Capture(options.verbose);

  // 1. The target: a command held at the door, or a running process.
  // With --allocations, a command is started with the allocation sampler
  // preloaded where it can be (as record's).
  absl::StatusOr<HeldCommand> held =
      HoldCommand(options.command, options.allocations, options.alloc_sample_bytes);
  if (!held.ok()) return Fail("stat", held.status());
  const AllocationRoute& allocation_route = held->allocation_route;
  std::optional<LaunchedCommand>& command = held->launched;
  uint32_t pid = command ? static_cast<uint32_t>(command->pid()) : *options.pid;

  // 2. Open, configure and load: only the target is looked at. Off-CPU
  // stacks too: io, sleep, GIL and run-queue verdicts are explained by where
  // the threads waited. GC time of every CPython found: its interpreter gets
  // the probes.
  // GPUs, where NVML is: polled in the background over the same window. A
  // CUDA wait is found by its symbol anywhere in the native stack (the spin
  // is deep in the driver), so with a GPU CPython's whole native stacks are
  // read, not only their leaf.
  std::unique_ptr<GpuSampler> gpus = OpenGpuSampler("stat", options.verbose);
  absl::StatusOr<std::unique_ptr<SamplingSession>> session = SamplingSession::Open({
      .sampler = {.filter_pids = true,
                  .offcpu = options.offcpu_stacks,
                  .python_native_stacks = gpus != nullptr,
                  // ... walked with unwind tables: the driver and libcudart
                  // keep no frame pointers.
                  .native_unwind_bytes = gpus != nullptr ? kDefaultNativeUnwindBytes : 0,
                  .memory_growth = true,
                  .allocations = options.allocations,
                  .alloc_sample_bytes = options.alloc_sample_bytes},
      .target_pids = {pid},
      .rate_hz = options.rate_hz,
      .recorder = {.mean_period_ns = MeanPeriodNs(options.rate_hz)},
      .accounting = BpfSampler::AccountingOptions{.syscalls = options.syscalls},
      .python = SamplingSessionConfig::PythonDiscovery::kOnWithGcProbes,
      .native_unwind_python_only = true,
  });
  if (!session.ok()) return Fail("stat", session.status());
  Recorder& recorder = (*session)->recorder();

  // 3. Attach: counters, samples, and the executable's own GC probes from its
  // first collection (an interpreter in a libpython gets them when discovery
  // finds it).
  SampleTally tally;
  Signals::Install();
  if (absl::Status s = (*session)->Start(&tally); !s.ok()) {
    return Fail("stat", s);
  }
  if (options.allocations) {
    // A running process is walked whole from its first sampled allocation.
    if (!command) recorder.processes().Track(pid);
    if (absl::Status s = AttachAllocationRoute((*session)->sampler(), allocation_route, {pid},
                                               /*all=*/false, options.alloc_sample_bytes);
        !s.ok()) {
      return Fail("stat", s);
    }
  }
  // A kernel thread has no executable, and a process may have exited or be
  // out of reach: then there is no GC to measure, and the rest goes on.
  std::string binary = command ? ResolveExecutable(options.command[0])
                               : procfs::ReadLink(procfs::PidPath(pid, "exe")).value_or("");
  bool gc_measured = false;
  if (!binary.empty()) {
    absl::Status gc = (*session)->sampler().AttachPythonGcProbes(binary);
    gc_measured = gc.ok();
    if (!gc.ok() && gc.code() != absl::StatusCode::kNotFound && options.verbose) {
      fprintf(stderr, "pystrobe stat: no GC time: %s\n", std::string(gc.message()).c_str());
    }
  }
  absl::Time start = absl::Now();
  // Resident memory over the run, from the counters the kernel keeps.
  AccountingReader reader((*session)->sampler().accounting_maps());
  MemoryTimeline timeline(MonotonicNowNs());
  // The growth stacks as they were when the peak was last raised: what grew
  // memory up to the peak.
  StackAggregator growth_to_peak;
  uint64_t peak_ns_seen = 0;
  auto observe_memory = [&reader, &timeline, &recorder, &growth_to_peak, &peak_ns_seen,
                         pid](bool force) {
    std::vector<ProcessCounters> seen = reader.Processes(pid);
    if (seen.empty()) return;
    const ProcessCounters& oldest = *std::min_element(
        seen.begin(), seen.end(),
        [](const ProcessCounters& a, const ProcessCounters& b) { return a.start_ns < b.start_ns; });
    timeline.Observe(oldest.memory, MonotonicNowNs(), force);
    if (oldest.memory.peak_ns != peak_ns_seen) {
      peak_ns_seen = oldest.memory.peak_ns;
      growth_to_peak = recorder.memory_stacks();
    }
  };
  if (gpus != nullptr) gpus->Start();
  if (command) {
    if (absl::Status s = command->Release(); !s.ok()) {
      return s.code() == absl::StatusCode::kNotFound ? UsageError("stat", s) : Fail("stat", s);
    }
  } else if (options.duration) {
    // Everything is attached (with --allocations, after their cost was said):
    // the window starts now. A caller that judges the report by its own
    // clocks starts them here.
    fprintf(stderr, "pystrobe: measuring pid %u for %.1f s; Ctrl-C to stop\n", pid,
            absl::ToDoubleSeconds(*options.duration));
  } else {
    fprintf(stderr, "pystrobe: measuring pid %u until it exits; Ctrl-C to stop\n", pid);
  }

  // 4. Until the command exits, the duration ends, the process ends, or a signal.
  if (absl::Status s = PollUntilEnd(
          **session,
          {.duration = options.duration, .command = command ? &*command : nullptr, .pids = {pid}},
          start, [&observe_memory] { observe_memory(false); });
      !s.ok()) {
    fprintf(stderr, "pystrobe stat: %s; reporting what was counted\n",
            std::string(s.message()).c_str());
  }
  absl::Duration elapsed = absl::Now() - start;
  std::optional<GpuWindow> gpu_window;
  if (gpus != nullptr) {
    gpus->PollNow();  // the end of the window
    gpu_window = gpus->TakeWindow();
    gpus.reset();
  }
  if (absl::Status s = (*session)->Finish(); !s.ok()) {
    fprintf(stderr, "pystrobe stat: %s\n", std::string(s.message()).c_str());
  }
  SamplerCounters counters = (*session)->sampler().ReadCounters();
  if (command) StopCommand(*command);

  // 5. The process's figures: the entry of the targeted process (a reused
  // pid is not a target, so there is one; the oldest otherwise).
  observe_memory(true);
  std::vector<ProcessCounters> processes = reader.Processes(pid);
  if (processes.empty()) {
    return Fail("stat", absl::NotFoundError(absl::StrCat("nothing was counted for process ", pid)));
  }
  const ProcessCounters& process = *std::min_element(
      processes.begin(), processes.end(),
      [](const ProcessCounters& a, const ProcessCounters& b) { return a.start_ns < b.start_ns; });

  StatReport report;
  report.pid = pid;
  report.comm = process.comm;
  report.duration_seconds = absl::ToDoubleSeconds(elapsed);
  report.figures = FiguresFrom(process.raw);
  report.gc_measured = gc_measured || (*session)->python_discovery()->GcMeasured(pid);
  report.syscalls = options.syscalls;
  report.threads = process.threads;
  report.exited = process.exited || (command && command->exited());
  report.drops = reader.Drops();
  report.memory = process.memory;
  report.peak_seconds = timeline.SecondsOf(process.memory.peak_ns);
  report.memory_timeline = timeline.points();
  report.oom_killed = process.oom_killed;
  if (gpu_window) {
    report.gpu_measured = true;
    report.gpu_devices = gpu_window->devices;
    // NVML's pids are the host's, as the kernel's: a container's process matches.
    if (const GpuProcessFigures* mine = gpu_window->Of(pid)) report.gpu = *mine;
  }

  Profile oncpu, offcpu;
  ProfileBuilder builder(recorder, (*session)->kernel_symbols(), ProfileBuilderOptions{});
  builder.AddTo(recorder.stacks(), oncpu);
  // Off-CPU stacks weigh their time: kept as microseconds.
  builder.AddTo(recorder.offcpu_stacks(), {.per_nanosecond = 1e-3}, offcpu);
  MeasureGpuWait(oncpu, offcpu, report);

  DecideStatVerdict(tally.Of(pid), options.rate_hz, report);
  PickStatStacks(
      oncpu, offcpu,
      options.offcpu_stacks ? "" : "off-CPU stacks were not followed (--no-offcpu-stacks)", report);
  // What grew memory up to the peak, in bytes (after the verdict: a
  // memory-bound one names it).
  Profile growth;
  builder.AddBytesTo(growth_to_peak, growth);
  report.memory_growth_sampled = true;
  PickMemoryGrowthStacks(growth, report);
  if (options.allocations) {
    // Sampled allocations: every one, and those held when the process's
    // in-use view was taken (a Python one's when its finalization began).
    AllocationFigures allocations = {
        .in_process = allocation_route.in_process(),
        .sample_bytes = options.alloc_sample_bytes,
        .samples = counters.allocations_sent,
        .frees = counters.frees_sent,
        .untracked = counters.allocations_untracked,
        .records_lost = counters.dropped[PYSTROBE_DROP_RINGBUF_FULL],
        .in_use_moment = InUseMomentWords(recorder.InUseByMoment()),
        .sites = {},
    };
    Profile allocated, in_use;
    builder.AddBytesTo(recorder.allocation_stacks(), allocated);
    builder.AddBytesTo(recorder.InUseStacks(), in_use);
    PickAllocationSites(allocated, in_use, pid, allocations);
    report.allocations = std::move(allocations);
  }

  std::string text = options.json ? StatReportJson(report) : StatReportText(report);
  fputs(text.c_str(), stdout);
  fflush(stdout);
  // As `time` does: the command's own status, so that scripts see its failure.
  if (command) return command->ShellExitCode().value_or(kExitOk);
  return kExitOk;
}

}  // namespace pystrobe
