#include "daemon/cli/top_command.h"

#include <poll.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "daemon/accounting/process_counters.h"
#include "daemon/accounting/thread_view.h"
#include "daemon/accounting/top_screen.h"
#include "daemon/cli/accounting_options.h"
#include "daemon/cli/command_lifecycle.h"
#include "daemon/cli/exit_status.h"
#include "daemon/cli/raw_keys.h"
#include "daemon/cli/remote_accounting.h"
#include "daemon/loader/bpf_sampler.h"
#include "daemon/loader/capabilities.h"
#include "daemon/loader/cpu_clock_events.h"
#include "daemon/loader/libbpf_errors.h"
#include "daemon/recording/profile_builder.h"
#include "daemon/recording/recorder.h"
#include "daemon/recording/sampling_session.h"
#include "daemon/service/signals.h"

namespace pystrobe {
namespace {}  // namespace

int RunTopCommand(const std::vector<std::string>& command_args) {
  // --socket PATH and --no-daemon: whether to ask a running daemon.
  std::vector<std::string> args = command_args;
  absl::StatusOr<DaemonClientFlags> daemon_flags = TakeDaemonClientFlags(args);
  if (!daemon_flags.ok()) {
    return UsageError("top", daemon_flags.status());
  }
  absl::StatusOr<TopOptions> parsed = ParseTopOptions(args);
  if (!parsed.ok()) {
    return UsageError("top", parsed.status());
  }
  TopOptions options = *parsed;
  if (options.help) {
    fputs(TopUsage(), stdout);
    return kExitOk;
  }
  if (options.pid && kill(static_cast<pid_t>(*options.pid), 0) != 0 && errno != EPERM) {
    return UsageError("top", absl::StrCat("no process with pid ", *options.pid));
  }
  if (std::optional<int> status = MaybeTopThroughDaemon(options, *daemon_flags)) return *status;
  if (absl::Status caps = CheckProfilingCapabilities(CapabilitySet::OfThisProcess()); !caps.ok()) {
    return Fail("top", caps);
  }
  LibbpfLog::Capture(options.verbose);

  // Every process, or one; GC time of every CPython process found: its
  // interpreter gets the probes.
  std::vector<uint32_t> targets;
  if (options.pid) targets.push_back(*options.pid);
  absl::StatusOr<std::unique_ptr<SamplingSession>> session = SamplingSession::Open({
      .sampler = {.filter_pids = options.pid.has_value()},
      .target_pids = targets,
      .rate_hz = options.rate_hz,
      .recorder = {.mean_period_ns = MeanPeriodNs(options.rate_hz)},
      .accounting = BpfSampler::AccountingOptions{},
      .python = SamplingSessionConfig::PythonDiscovery::kOnWithGcProbes,
  });
  if (!session.ok()) return Fail("top", session.status());
  Recorder& recorder = (*session)->recorder();
  Signals::Install();
  if (absl::Status s = (*session)->Start(); !s.ok()) return Fail("top", s);

  // GPUs, where NVML is: polled in the background, a window per screen.
  std::unique_ptr<GpuSampler> gpus = OpenGpuSampler("top", options.verbose);
  if (gpus != nullptr) gpus->Start();

  AccountingReader reader((*session)->sampler().accounting_maps());
  absl::StatusOr<std::vector<int>> cpus = OnlineCpus();
  RawKeys keys;
  StackAggregator stacks_at_last_screen;
  // Counters at the last screen, by process (pid, start) or by tid.
  absl::flat_hash_map<std::pair<uint32_t, uint64_t>, pystrobe_task_counters> before;
  ResidentGrowth rss_growth;
  absl::Time last = absl::Now();
  bool tty = isatty(STDOUT_FILENO);
  while (!Signals::StopRequested()) {
    absl::Time next = last + options.interval;
    bool redraw = false;
    while (absl::Now() < next && !Signals::StopRequested() && !redraw) {
      // A failed read loses this screen's samples, not the counters.
      (*session)->Poll(std::min(SamplingSession::kPollInterval, next - absl::Now())).IgnoreError();
      if (std::optional<char> key = keys.Read()) {
        if (*key == 'q') {
          Signals::RequestStop(SIGTERM);
        } else if (std::optional<TopSort> sort = TopSortForKey(*key)) {
          options.sort = *sort;
        }
      }
    }
    if (Signals::StopRequested()) break;
    absl::Time now = absl::Now();
    TopScreen screen;
    screen.interval_seconds = absl::ToDoubleSeconds(now - last);
    last = now;
    screen.cpus = cpus.ok() ? static_cast<int>(cpus->size()) : 1;
    screen.sort = options.sort;
    screen.max_rows = options.rows;
    screen.clear = tty && !options.once;

    std::optional<GpuWindow> gpu_window;
    if (gpus != nullptr) {
      gpu_window = gpus->TakeWindow();
      screen.gpu = true;
      screen.gpu_devices = gpu_window->devices;
    }
    // NVML's pids are the host's, as the kernel's.
    auto gpu_of = [&gpu_window](uint32_t pid) -> std::optional<GpuProcessFigures> {
      if (!gpu_window) return std::nullopt;
      const GpuProcessFigures* figures = gpu_window->Of(pid);
      return figures ? std::optional<GpuProcessFigures>(*figures) : std::nullopt;
    };
    // A free-threaded CPython's GIL column says it has none.
    auto free_threaded = [&recorder](uint32_t pid) {
      return recorder.processes().RunsFreeThreadedPython(pid);
    };
    std::vector<std::pair<uint32_t, uint64_t>> exited;
    if (options.pid) {
      PerThreadView view = ReadPerThreadView(reader, *options.pid);
      screen.title = PerThreadTitle(*options.pid, view);
      if (view.resident_bytes) {
        screen.resident_bytes = view.resident_bytes;
        absl::StrAppend(&screen.title, ProcessRssTitle(*view.resident_bytes,
                                                       rss_growth.Observe({*options.pid, 0},
                                                                          screen.interval_seconds,
                                                                          *view.resident_bytes)));
      }
      if (std::optional<GpuProcessFigures> gpu = gpu_of(*options.pid)) {
        absl::StrAppend(&screen.title,
                        absl::StrFormat(", GPU %.1f%%, GPU memory %d MiB", 100 * gpu->utilization,
                                        gpu->memory_bytes >> 20));
      }
      for (const ThreadCounters& thread : view.threads) {
        pystrobe_task_counters& seen = before[{thread.tid, 0}];
        TopRow row;
        row.pid = thread.pid;
        row.tid = thread.tid;
        row.comm = thread.comm;
        row.free_threaded = free_threaded(thread.pid);
        row.figures = FiguresFrom(CountersSince(thread.raw, seen));
        seen = thread.raw;
        screen.rows.push_back(std::move(row));
      }
    } else {
      screen.title = "all processes";
      for (const ProcessCounters& process : reader.Processes()) {
        pystrobe_task_counters& seen = before[{process.pid, process.start_ns}];
        TopRow row;
        row.pid = process.pid;
        row.comm = process.comm;
        row.exited = process.exited;
        row.free_threaded = free_threaded(process.pid);
        row.figures = FiguresFrom(CountersSince(process.raw, seen));
        row.gpu = gpu_of(process.pid);
        row.rss_known = process.memory.known();
        row.rss_bytes = process.memory.resident_bytes();
        rss_growth.Observe({process.pid, process.start_ns}, screen.interval_seconds, row);
        seen = process.raw;
        screen.rows.push_back(std::move(row));
        if (process.exited) exited.push_back({process.pid, process.start_ns});
      }
    }
    // A process shown with its final figures is gone from the next screen.
    for (const auto& [pid, start] : exited) {
      reader.Forget(pid, start).IgnoreError();
      before.erase(std::make_pair(pid, start));
      rss_growth.Forget({pid, start});
    }

    StackAggregator delta = recorder.stacks().Since(stacks_at_last_screen);
    stacks_at_last_screen = recorder.stacks();
    Profile profile;
    ProfileBuilder builder(recorder, nullptr,
                           ProfileBuilderOptions{.python_lines = PythonLineMode::kFunction});
    builder.AddTo(delta, profile);
    screen.functions = HottestFunctions(profile, screen.function_samples);

    std::string text = RenderTopScreen(std::move(screen));
    fputs(text.c_str(), stdout);
    fflush(stdout);
    if (options.once) break;
    if (options.pid && kill(static_cast<pid_t>(*options.pid), 0) != 0 && errno != EPERM) break;
  }
  return kExitOk;  // the session detaches when it goes
}

}  // namespace pystrobe
