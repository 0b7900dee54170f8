#include "daemon/stat_command.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "daemon/accounting/accounting_options.h"
#include "daemon/accounting/process_counters.h"
#include "daemon/accounting/sample_tally.h"
#include "daemon/accounting/stat_report.h"
#include "daemon/accounting/verdict.h"
#include "daemon/bpf_sampler.h"
#include "daemon/capabilities.h"
#include "daemon/cpu_clock_events.h"
#include "daemon/kernel_python_discovery.h"
#include "daemon/libbpf_errors.h"
#include "daemon/profile_builder.h"
#include "daemon/record_command.h"
#include "daemon/recorder.h"
#include "daemon/symbolizer/bcc_native_symbolizer.h"
#include "daemon/symbolizer/kernel_symbolizer.h"
#include "daemon/target_launcher.h"

namespace pystrobe {
namespace {

// How often the ring buffer is read. stat sleeps in between rather than
// waiting in epoll: a reader woken by each off-CPU record preempts the very
// thread whose record it is, which then sends another when it runs again.
constexpr absl::Duration kPollInterval = absl::Milliseconds(100);
constexpr absl::Duration kCommandGracePeriod = absl::Seconds(2);
constexpr size_t kReportStacks = 5;

std::atomic<int> stop_signal{0};
void OnStopSignal(int signal) { stop_signal.store(signal); }

void InstallStopHandlers() {
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int Fail(const absl::Status& status) {
  fprintf(stderr, "pystrobe stat: %s\n", std::string(status.message()).c_str());
  return kExitFailure;
}

// True while `pid` lives and is not a zombie.
bool ProcessAlive(uint32_t pid) {
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  std::ifstream stat_file(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  std::getline(stat_file, stat);
  size_t name_end = stat.rfind(')');
  return name_end == std::string::npos || name_end + 2 >= stat.size() || stat[name_end + 2] != 'Z';
}

void StopCommand(LaunchedCommand& command) {
  if (command.TryReap()) return;
  kill(command.pid(), SIGTERM);
  absl::Time deadline = absl::Now() + kCommandGracePeriod;
  while (!command.TryReap() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  if (!command.TryReap()) {
    kill(command.pid(), SIGKILL);
    waitpid(command.pid(), nullptr, 0);
  }
}

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

// The leaf frame that marks off-CPU stacks of the reason behind `bound`, or
// "" when on-CPU samples explain it.
const char* OffCpuLeafOf(Bound bound) {
  switch (bound) {
    case Bound::kIo:
      return "[io wait]";
    case Bound::kSleep:
      return "[sleep]";
    case Bound::kGil:
      return "[gil wait]";
    case Bound::kRunqueue:
      return "[runqueue]";
    case Bound::kCpu:
    case Bound::kMemory:
      break;
  }
  return "";
}

// The stacks that explain `bound`, heaviest first: off-CPU stacks ending in
// the bounding reason, by time (`offcpu`, in microseconds), or on-CPU samples
// (`oncpu`) for cpu- and memory-bound processes.
void PickStacks(const Profile& oncpu, const Profile& offcpu, bool offcpu_followed, uint32_t pid,
                Bound bound, StatReport& report) {
  std::string process_suffix = absl::StrCat(" (", pid, ")");
  std::string leaf = OffCpuLeafOf(bound);
  const Profile& profile = leaf.empty() ? oncpu : offcpu;
  std::vector<const ProfileStack*> chosen;
  uint64_t total = 0;
  for (const ProfileStack& stack : profile.stacks()) {
    bool mine = false;
    for (const Frame& frame : stack.frames) {
      if (frame.kind == FrameKind::kProcess && absl::EndsWith(frame.name, process_suffix)) {
        mine = true;
        break;
      }
    }
    if (!mine) continue;
    if (!leaf.empty() && (stack.frames.empty() || stack.frames.back().name != leaf)) continue;
    total += stack.count;
    chosen.push_back(&stack);
  }
  std::sort(chosen.begin(), chosen.end(),
            [](const ProfileStack* a, const ProfileStack* b) { return a->count > b->count; });
  if (chosen.size() > kReportStacks) chosen.resize(kReportStacks);
  for (const ProfileStack* stack : chosen) {
    ReportStack out;
    for (const Frame& frame : stack->frames) {
      if (frame.kind != FrameKind::kProcess) out.frames.push_back(frame.name);
    }
    if (leaf.empty()) {
      out.samples = stack->count;
    } else {
      out.seconds = stack->count * 1e-6;
    }
    out.share = total ? static_cast<double>(stack->count) / total : 0;
    report.stacks.push_back(std::move(out));
  }
  report.stacks_kind =
      leaf.empty() ? "on-CPU samples" : absl::StrCat("off-CPU time ending in ", leaf);
  if (!offcpu_followed && !leaf.empty()) {
    report.stacks_note = "off-CPU stacks were not followed (--no-offcpu-stacks)";
  } else if (chosen.empty() && !leaf.empty()) {
    report.stacks_note = absl::StrCat("no off-CPU stack of the process ended in ", leaf);
  }
}

}  // namespace

int RunStatCommand(const std::vector<std::string>& args) {
  absl::StatusOr<StatOptions> parsed = ParseStatOptions(args);
  if (!parsed.ok()) {
    fprintf(stderr, "pystrobe stat: %s\n", std::string(parsed.status().message()).c_str());
    return kExitUsage;
  }
  const StatOptions& options = *parsed;
  if (options.help) {
    fputs(StatUsage(), stdout);
    return kExitOk;
  }
  if (options.pid && !ProcessAlive(*options.pid)) {
    fprintf(stderr, "pystrobe stat: no process with pid %u\n", *options.pid);
    return kExitUsage;
  }
  if (absl::Status caps = CheckProfilingCapabilities(CapabilitySet::OfThisProcess()); !caps.ok()) {
    return Fail(caps);
  }
  LibbpfLog::Capture(options.verbose);

  // 1. The target: a command held at the door, or a running process.
  std::optional<LaunchedCommand> command;
  if (!options.command.empty()) {
    absl::StatusOr<LaunchedCommand> launched = LaunchedCommand::Start(options.command);
    if (!launched.ok()) return Fail(launched.status());
    command.emplace(std::move(*launched));
  }
  uint32_t pid = command ? static_cast<uint32_t>(command->pid()) : *options.pid;

  // 2. Open, configure and load: only the target is looked at.
  absl::StatusOr<std::unique_ptr<BpfSampler>> opened = BpfSampler::Open();
  if (!opened.ok()) return Fail(opened.status());
  BpfSampler& sampler = **opened;
  // Off-CPU stacks too: io, sleep, GIL and run-queue verdicts are explained
  // by where the threads waited.
  if (absl::Status s =
          sampler.Configure(SamplerConfig{.filter_pids = true, .offcpu = options.offcpu_stacks});
      !s.ok()) {
    return Fail(s);
  }
  if (absl::Status s = sampler.Load(); !s.ok()) return Fail(s);
  if (absl::Status s = sampler.AddTargetPid(pid); !s.ok()) return Fail(s);

  // 3. Attach: counters, CPython GC probes where the binary has them, samples.
  if (absl::Status s = sampler.AttachAccounting({.syscalls = options.syscalls}); !s.ok()) {
    return Fail(s);
  }
  std::string binary =
      command ? ResolveExecutable(options.command[0])
              : std::filesystem::read_symlink(absl::StrCat("/proc/", pid, "/exe")).string();
  bool gc_measured = false;
  if (!binary.empty()) {
    absl::Status gc = sampler.AttachPythonGcProbes(static_cast<int>(pid), binary);
    gc_measured = gc.ok();
    if (!gc.ok() && gc.code() != absl::StatusCode::kNotFound && options.verbose) {
      fprintf(stderr, "pystrobe stat: no GC time: %s\n", std::string(gc.message()).c_str());
    }
  }
  absl::StatusOr<KernelSymbolizer> kernel_symbols = KernelSymbolizer::FromFile();
  BccNativeSymbolizer native_symbols;
  KernelPythonDiscovery python_discovery(&sampler);
  Recorder recorder(&native_symbols, &python_discovery, RecorderOptions{});
  SampleTally tally;
  InstallStopHandlers();
  absl::Status attached =
      sampler.Attach(options.rate_hz, [&recorder, &tally](std::span<const uint8_t> record) {
        tally.Observe(record);
        recorder.HandleRecord(record);
      });
  if (!attached.ok()) return Fail(attached);
  absl::Time start = absl::Now();
  if (command) {
    if (absl::Status s = command->Release(); !s.ok()) {
      fprintf(stderr, "pystrobe stat: %s\n", std::string(s.message()).c_str());
      return s.code() == absl::StatusCode::kNotFound ? kExitUsage : kExitFailure;
    }
  }

  // 4. Until the command exits, the duration ends, the process ends, or a signal.
  while (stop_signal.load() == 0) {
    absl::SleepFor(kPollInterval);
    if (absl::Status s = sampler.Drain(); !s.ok()) {
      fprintf(stderr, "pystrobe stat: %s; reporting what was counted\n",
              std::string(s.message()).c_str());
      break;
    }
    if (options.duration && absl::Now() - start >= *options.duration) break;
    if (command && command->TryReap()) break;
    if (!command && !ProcessAlive(pid)) break;
  }
  absl::Duration elapsed = absl::Now() - start;
  sampler.Detach();
  if (absl::Status s = sampler.Drain(); !s.ok()) {
    fprintf(stderr, "pystrobe stat: %s\n", std::string(s.message()).c_str());
  }
  if (command) StopCommand(*command);

  // 5. The process's figures: the entry of the targeted process (a reused
  // pid is not a target, so there is one; the oldest otherwise).
  AccountingReader reader(sampler.accounting_maps());
  std::vector<ProcessCounters> processes = reader.Processes(pid);
  if (processes.empty()) {
    return Fail(absl::NotFoundError(absl::StrCat("nothing was counted for process ", pid)));
  }
  const ProcessCounters& process = *std::min_element(
      processes.begin(), processes.end(),
      [](const ProcessCounters& a, const ProcessCounters& b) { return a.start_ns < b.start_ns; });

  StatReport report;
  report.pid = pid;
  report.comm = process.comm;
  report.duration_seconds = absl::ToDoubleSeconds(elapsed);
  report.figures = FiguresFrom(process.raw);
  report.gc_measured = gc_measured;
  report.syscalls = options.syscalls;
  report.threads = process.threads;
  report.exited = process.exited || (command && command->exited());
  report.drops = reader.Drops();

  VerdictInputs inputs;
  inputs.duration_seconds = report.duration_seconds;
  absl::StatusOr<std::vector<int>> cpus = OnlineCpus();
  inputs.cpus = cpus.ok() ? static_cast<int>(cpus->size()) : 1;
  inputs.figures = report.figures;
  inputs.sample_rate_hz = options.rate_hz;
  if (const ProcessSamples* samples = tally.Of(pid); samples != nullptr) {
    report.samples = samples->samples;
    inputs.samples = samples->samples;
    inputs.python_samples = samples->python_samples;
    inputs.gil_samples = samples->gil_samples;
    // The kernel knew the process's CPython layout, so it could tell a
    // futex on the GIL from any other sleep.
    inputs.gil_wait_measured = samples->python_samples > 0;
    if (samples->python_samples > 0) {
      report.gil_held_share = static_cast<double>(samples->gil_samples) / samples->python_samples;
    }
    double busy = kBusyThreadShare * report.duration_seconds * options.rate_hz;
    for (const auto& [tid, count] : samples->per_thread) {
      if (count >= busy) ++inputs.busy_threads;
    }
  }
  report.gil_wait_measured = inputs.gil_wait_measured;
  report.verdict = Decide(inputs);

  Profile oncpu, offcpu;
  ProfileBuilder builder(&recorder.processes(), &recorder.python_codes(), &recorder.native_names(),
                         kernel_symbols.ok() ? &*kernel_symbols : nullptr, ProfileBuilderOptions{});
  builder.AddTo(recorder.stacks(), oncpu);
  // Off-CPU stacks weigh nanoseconds: kept as microseconds.
  builder.AddTo(recorder.offcpu_stacks(), {.scale = 1e-3, .root = ""}, offcpu);
  PickStacks(oncpu, offcpu, options.offcpu_stacks, pid, report.verdict.bound, report);

  std::string text = options.json ? StatReportJson(report) : StatReportText(report);
  fputs(text.c_str(), stdout);
  fflush(stdout);
  return kExitOk;
}

}  // namespace pystrobe
