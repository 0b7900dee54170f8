#include "daemon/cli/record_command.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "daemon/accounting/process_counters.h"
#include "daemon/cli/allocation_route.h"
#include "daemon/cli/command_lifecycle.h"
#include "daemon/cli/control_client.h"
#include "daemon/cli/exit_status.h"
#include "daemon/cli/record_options.h"
#include "daemon/cli/record_summary.h"
#include "daemon/cli/target_launcher.h"
#include "daemon/gpu/nvml_library.h"
#include "daemon/loader/bpf_sampler.h"
#include "daemon/loader/capabilities.h"
#include "daemon/loader/cpu_clock_events.h"
#include "daemon/loader/libbpf_errors.h"
#include "daemon/recording/import_tree.h"
#include "daemon/recording/profile_builder.h"
#include "daemon/recording/recorder.h"
#include "daemon/recording/recording_profile.h"
#include "daemon/recording/sampling_session.h"
#include "daemon/service/signals.h"
#include "exporters/profile_writer.h"

namespace pystrobe {
namespace {

std::string TargetDescription(const RecordOptions& options) {
  return RecordingTarget(options.command, options.pids);
}

// The profile `options` ask for: recording builds it (as the daemon's).
RecordingProfileSpec ProfileSpecFor(const RecordOptions& options) {
  ProfileBuilderOptions names = ProfileBuilderOptionsFrom(options);
  names.asyncio = options.asyncio;  // record's own: the daemon reads no tasks
  return {.measure = options.allocations ? RecordingMeasure::kAllocations
                     : options.memory    ? RecordingMeasure::kResidentGrowth
                                         : RecordingMeasure::kCpuTime,
          .target = TargetDescription(options),
          .names = names,
          .time = {.offcpu = options.offcpu, .idle = options.idle, .rate_hz = options.rate_hz},
          .alloc_space = options.alloc_space,
          .alloc_sample_bytes = options.alloc_sample_bytes};
}

// Prints the summary to stderr and, with --summary-json, writes its JSON.
// A summary that cannot be written does not cost the profile: the caller
// writes that first and fails afterwards.
absl::Status PrintSummary(const SamplerCounters& kernel, const SamplingSession& session,
                          absl::Duration elapsed, const RecordOptions& options) {
  const Recorder& recorder = session.recorder();
  RecordTotals totals = {
      .samples = recorder.samples(),
      .processes = recorder.processes().process_count(),
      .python_processes = recorder.processes().python_processes(),
      .python_not_read = recorder.processes().python_not_read_count(),
      .python_not_read_examples = recorder.processes().python_not_read(),
      .malformed_records = recorder.malformed_records(),
      .python_codes_unreadable = recorder.python_codes().read_errors(),
      .python_codes_from_copies = recorder.python_codes().read_from_copies(),
      .python_code_copy_bytes = recorder.python_code_copy_bytes(),
      .samples_without_gil = recorder.samples_without_gil(),
      .samples_free_threaded = recorder.samples_free_threaded(),
      .memory_bytes = recorder.memory_stacks().total_nanoseconds(),  // bytes, for memory
      .allocation_bytes = recorder.allocation_stacks().total_nanoseconds(),
      .in_use = recorder.InUseByMoment(),
  };
  NativeUnwindTotals native_totals;
  if (const NativeUnwindTracker* native = session.native_unwind()) {
    const UnwindTableCache::Stats& cache = native->cache().stats();
    UnwindTableBuilder::Stats built = native->builder_stats();
    native_totals = {.enabled = true,
                     .binaries = cache.binaries,
                     .tables_shared = cache.shared,
                     .tables_built = built.built,
                     .tables_from_disk = built.from_disk,
                     .tables_loaded = native->stats().tables_loaded,
                     .tables_evicted = native->stats().tables_evicted,
                     .tables_unavailable = native->stats().tables_unavailable,
                     .files_without_cfi = cache.without_cfi,
                     .kernel_bytes = session.unwind_maps()->peak_bytes_used(),
                     .budget_bytes = session.unwind_maps()->bytes_total(),
                     .build_cpu = built.build_cpu,
                     .disk_load_cpu = built.load_cpu,
                     .disk_cache = native->has_disk_cache()};
  }
  fputs(RecordSummary(kernel, totals, elapsed, options.rate_hz, native_totals).c_str(), stderr);
  if (options.summary_json.empty()) return absl::OkStatus();
  std::ofstream json(options.summary_json, std::ios::trunc);
  json << RecordSummaryJson(kernel, totals, elapsed, options.rate_hz, native_totals);
  json.close();
  if (!json) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write the summary to ", options.summary_json));
  }
  return absl::OkStatus();
}

// The session `options` ask for, with `targets` in its filter. On a GPU host
// CPython's whole native stacks are read even without --native: a CUDA wait
// is found by its symbol below the driver's own frames, for [gpu wait].
SamplingSessionConfig SessionConfigFor(const RecordOptions& options,
                                       const std::vector<uint32_t>& targets, bool gpu_host) {
  return SamplingSessionConfig{
      .sampler = {.filter_pids = !options.all,
                  .follow_children = options.subprocesses,
                  .python_max_frames = options.max_python_depth,
                  .offcpu = options.offcpu || options.idle,
                  .python_native_stacks = options.native || gpu_host,
                  // On a GPU host, CPython's native stacks (for [gpu wait])
                  // are walked with tables too.
                  .native_unwind_bytes =
                      options.native || gpu_host ? uint64_t(options.native_table_mib) << 20 : 0,
                  .native_unwind_all = options.native,
                  .memory_growth = options.memory,
                  .allocations = options.allocations,
                  .alloc_sample_bytes = options.alloc_sample_bytes},
      .target_pids = targets,
      .rate_hz = options.rate_hz,
      .recorder = {.threads = options.threads,
                   .gil_only = options.gil_only,
                   .mean_period_ns = MeanPeriodNs(options.rate_hz),
                   .asyncio = options.asyncio,
                   .asyncio_await = options.asyncio && (options.offcpu || options.idle)},
      .accounting = std::nullopt,  // record counts nothing per process
      .python = SamplingSessionConfig::PythonDiscovery::kOn,
      .native_unwind_python_only = !options.native,
      .unwind_cache_directory = options.unwind_cache,
  };
}

// Writes the import tree of what was recorded to `out` (opened on `output`),
// or to stderr when there is no output.
int WriteImportTree(const RecordOptions& options, const Recorder& recorder,
                    const std::string& output, std::ofstream& out) {
  ImportTree tree;
  tree.AddStacks(recorder.stacks(), recorder.python_codes());
  // Off CPU too with --off-cpu: an import's time reading files is its time.
  if (options.offcpu || options.idle) {
    tree.AddStacks(recorder.offcpu_stacks(), recorder.python_codes());
  }
  std::string text = tree.Format();
  absl::StrAppendFormat(
      &text, "pystrobe: %.1f ms in imports (%s), %.1f ms finding top-level modules\n",
      tree.imports_ns() / 1e6, options.offcpu || options.idle ? "on and off CPU" : "on CPU",
      tree.unattributed_ns() / 1e6);
  if (output.empty()) {
    fputs(text.c_str(), stderr);
    return kExitOk;
  }
  out << text;
  out.close();
  if (!out) return Fail("record", absl::DataLossError(absl::StrCat("writing ", output, " failed")));
  fprintf(stderr, "pystrobe: wrote %s\n", output.c_str());
  return kExitOk;
}

// One line per target the kernel's OOM killer chose during the recording.
void PrintOomKills(BpfSampler& sampler) {
  AccountingReader reader(sampler.accounting_maps());
  for (const ProcessCounters& process : reader.Processes()) {
    if (!process.oom_killed) continue;
    fprintf(stderr,
            "pystrobe: %s (%u) was killed by the kernel's OOM killer: resident %.1f MiB "
            "(anon %.1f MiB), peak %.1f MiB\n",
            process.comm.c_str(), process.pid, process.memory.resident_bytes() / 1048576.0,
            process.memory.anon_bytes / 1048576.0, process.memory.peak_bytes / 1048576.0);
  }
}

}  // namespace

int RunRecordCommand(const std::vector<std::string>& args) {
  absl::StatusOr<RecordOptions> parsed = ParseRecordOptions(args);
  if (!parsed.ok()) return UsageError("record", parsed.status());
  const RecordOptions& options = *parsed;
  if (options.help) {
    fputs(RecordUsage(), stdout);
    return kExitOk;
  }
  absl::StatusOr<std::unique_ptr<ProfileWriter>> writer = MakeProfileWriter(options.format);
  if (!writer.ok()) return UsageError("record", writer.status());
  for (uint32_t pid : options.pids) {
    if (!ProcessIsAlive(pid))
      return UsageError("record", absl::StrCat("no process with pid ", pid));
  }
  if (std::optional<int> status = MaybeRecordThroughDaemon(options, **writer)) {
    return *status;
  }
  if (absl::Status caps = CheckProfilingCapabilities(CapabilitySet::OfThisProcess()); !caps.ok()) {
    return Fail("record", caps);
  }

  // Open the output first: a recording must not end in an unwritable path.
  // An import tree without -o goes to stderr.
  std::string output =
      options.output.empty() && !options.imports
          ? DefaultOutputPath(options, absl::Now(), std::string((*writer)->extension()))
          : options.output;
  std::ofstream out;
  if (!output.empty()) {
    out.open(output, std::ios::binary | std::ios::trunc);
    if (!out)
      return Fail("record", absl::PermissionDeniedError(absl::StrCat("cannot write ", output)));
  }

  LibbpfLog::Capture(options.verbose);
  absl::StatusOr<HeldCommand> held =
      HoldCommand(options.command, options.allocations, options.alloc_sample_bytes);
  if (!held.ok()) return Fail("record", held.status());
  const AllocationRoute& allocation_route = held->allocation_route;
  std::optional<LaunchedCommand>& command = held->launched;

  std::vector<uint32_t> targets = options.pids;
  if (command) targets.push_back(static_cast<uint32_t>(command->pid()));
  absl::StatusOr<std::unique_ptr<SamplingSession>> session =
      SamplingSession::Open(SessionConfigFor(options, targets, NvmlLibrary::SeesAGpu()));
  if (!session.ok()) return Fail("record", session.status());
  if (!(*session)->kernel_symbols_status().ok()) {
    fprintf(stderr, "pystrobe record: warning: kernel frames stay unnamed: %s\n",
            std::string((*session)->kernel_symbols_status().message()).c_str());
  }
  if (!(*session)->unwind_cache_status().ok()) {
    fprintf(stderr,
            "pystrobe record: warning: unwind tables are built in every run, not kept on disk: "
            "%s (--unwind-cache DIR to choose another)\n",
            std::string((*session)->unwind_cache_status().message()).c_str());
  }
  Recorder& recorder = (*session)->recorder();

  Signals::Install();
  if (absl::Status s = (*session)->Start(); !s.ok()) return Fail("record", s);
  if (options.allocations) {
    // Running processes are walked whole from their first sampled allocation.
    for (uint32_t pid : options.pids) recorder.processes().Track(pid);
    if (absl::Status s = AttachAllocationRoute((*session)->sampler(), allocation_route, targets,
                                               options.all, options.alloc_sample_bytes);
        !s.ok()) {
      return Fail("record", s);
    }
  }
  absl::Time start = absl::Now();
  if (command) {
    if (absl::Status s = command->Release(); !s.ok()) {
      return s.code() == absl::StatusCode::kNotFound ? UsageError("record", s) : Fail("record", s);
    }
  }
  fprintf(stderr, "pystrobe: recording %s at %d Hz; Ctrl-C to stop\n",
          TargetDescription(options).c_str(), options.rate_hz);

  if (absl::Status s = PollUntilEnd(**session,
                                    {.duration = options.duration,
                                     .command = command ? &*command : nullptr,
                                     .pids = options.pids},
                                    start);
      !s.ok()) {
    fprintf(stderr, "pystrobe record: %s; writing what was recorded\n",
            std::string(s.message()).c_str());
  }
  absl::Duration elapsed = absl::Now() - start;
  if (absl::Status s = (*session)->Finish(); !s.ok()) {
    fprintf(stderr, "pystrobe record: %s\n", std::string(s.message()).c_str());
  }
  SamplerCounters counters = (*session)->sampler().ReadCounters();
  if (command) StopCommand(*command);
  PrintOomKills((*session)->sampler());

  if (options.imports) {
    absl::Status summary = PrintSummary(counters, **session, elapsed, options);
    int status = WriteImportTree(options, recorder, output, out);
    return summary.ok() ? status : Fail("record", summary);
  }

  Profile profile =
      BuildRecordingProfile(ProfileSpecFor(options), recorder, (*session)->kernel_symbols());
  absl::Status summary = PrintSummary(counters, **session, elapsed, options);
  if (absl::Status s = (*writer)->Write(profile, out); !s.ok()) return Fail("record", s);
  out.close();
  if (!out) return Fail("record", absl::DataLossError(absl::StrCat("writing ", output, " failed")));
  std::error_code ignored;
  std::filesystem::path written = std::filesystem::absolute(output, ignored);
  fprintf(stderr, "pystrobe: wrote %s\n", written.c_str());
  return summary.ok() ? kExitOk : Fail("record", summary);
}

}  // namespace pystrobe
