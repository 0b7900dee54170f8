#include "daemon/flags/record_flags.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace pystrobe {
namespace {

using RecordFlag = Flag<RecordOptions>;

absl::StatusOr<int64_t> ParseInteger(absl::string_view flag, absl::string_view text, int64_t min,
                                     int64_t max, absl::string_view unit) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " takes a whole number of ", unit, " from ", min, " to ", max, ", not '", text, "'"));
  }
  return value;
}

// A flag taking a whole number in [min, max] of `unit` into `member`.
template <typename Int>
RecordFlag IntegerFlag(std::vector<std::string> names, std::string value_name, std::string help,
                       Int RecordOptions::*member, int64_t min, int64_t max, std::string unit) {
  return ValueFlag<RecordOptions>(
      std::move(names), std::move(value_name), std::move(help),
      [=](RecordOptions& options, absl::string_view flag, const std::string& value) {
        absl::StatusOr<int64_t> number = ParseInteger(flag, value, min, max, unit);
        if (!number.ok()) return number.status();
        options.*member = static_cast<Int>(*number);
        return absl::OkStatus();
      });
}

// A flag taking a path (not empty) into `member`.
RecordFlag PathFlag(std::vector<std::string> names, std::string value_name, std::string help,
                    std::string RecordOptions::*member) {
  return ValueFlag<RecordOptions>(
      std::move(names), std::move(value_name), std::move(help),
      [=](RecordOptions& options, absl::string_view flag, std::string value) {
        if (value.empty()) {
          return absl::InvalidArgumentError(absl::StrCat(flag, " needs a path"));
        }
        options.*member = std::move(value);
        return absl::OkStatus();
      });
}

// A switch that stays on the client: the daemon's recordings do not honour
// it, so it has no wire key (those that travel are WireSwitchFlag rows).
RecordFlag LocalSwitch(std::vector<std::string> names, bool RecordOptions::*member,
                       std::string help) {
  return SwitchFlag(std::move(names), member, std::move(help));
}

RecordFlag PidFlag() {
  return ValueFlag<RecordOptions>(
             {"-p", "--pid"}, "PID", "profile a running process, all its threads (repeatable)",
             [](RecordOptions& options, absl::string_view flag, const std::string& value) {
               absl::StatusOr<int64_t> pid = ParseInteger(flag, value, 1, (1 << 22), "process ids");
               if (!pid.ok()) return pid.status();
               options.pids.push_back(static_cast<uint32_t>(*pid));
               return absl::OkStatus();
             })
      .OnWire(
          "pids",
          [](const RecordOptions& options) -> std::optional<std::string> {
            if (options.pids.empty()) return std::nullopt;
            return absl::StrJoin(options.pids, ",");
          },
          [](RecordOptions& options, absl::string_view value) {
            for (absl::string_view text : absl::StrSplit(value, ',')) {
              uint32_t pid = 0;
              if (!absl::SimpleAtoi(text, &pid) || pid == 0) {
                return absl::InvalidArgumentError("pids: not a pid list");
              }
              if (options.pids.size() >= kMaxRemotePids) {
                return absl::InvalidArgumentError("pids: too many");
              }
              options.pids.push_back(pid);
            }
            return absl::OkStatus();
          });
}

RecordFlag RateFlag() {
  return ValueFlag<RecordOptions>(
             {"-r", "--rate"}, "HZ",
             "mean samples per second on each CPU (1 to 1000, default\n"
             "99); each CPU's instants are random, so that no periodic\n"
             "program is sampled at the same phase of its cycle",
             [](RecordOptions& options, absl::string_view flag, const std::string& value) {
               absl::StatusOr<int64_t> rate =
                   ParseInteger(flag, value, kMinRateHz, kMaxRateHz, "Hz");
               if (!rate.ok()) return rate.status();
               options.rate_hz = static_cast<int>(*rate);
               options.rate_given = true;
               return absl::OkStatus();
             })
      .OnWire(
          "rate_hz",
          [](const RecordOptions& options) -> std::optional<std::string> {
            if (!options.rate_given) return std::nullopt;  // the daemon's rate
            return absl::StrCat(options.rate_hz);
          },
          [](RecordOptions& options, absl::string_view value) {
            if (!absl::SimpleAtoi(value, &options.rate_hz) || options.rate_hz < kMinRateHz ||
                options.rate_hz > kMaxRateHz) {
              return absl::InvalidArgumentError("rate_hz: out of range (1 to 1000)");
            }
            options.rate_given = true;
            return absl::OkStatus();
          });
}

RecordFlag DurationFlag() {
  return ValueFlag<RecordOptions>(
             {"-d", "--duration"}, "SECS",
             "stop after SECS seconds (default: when the target exits,\n"
             "or on Ctrl-C / SIGTERM; the profile is written either way)",
             [](RecordOptions& options, absl::string_view flag, const std::string& value) {
               double seconds = 0;
               if (!absl::SimpleAtod(value, &seconds) || !(seconds > 0) ||
                   seconds > 365 * 86400.0) {
                 return absl::InvalidArgumentError(
                     absl::StrCat(flag, " takes a positive number of seconds, not '", value, "'"));
               }
               options.duration = absl::Seconds(seconds);
               return absl::OkStatus();
             })
      .OnWire(
          "duration_ms",
          [](const RecordOptions& options) -> std::optional<std::string> {
            if (!options.duration) return std::nullopt;  // until kStop or the pids exit
            return absl::StrCat(absl::ToInt64Milliseconds(*options.duration));
          },
          [](RecordOptions& options, absl::string_view value) {
            int64_t ms = 0;
            if (!absl::SimpleAtoi(value, &ms) || ms <= 0 ||
                absl::Milliseconds(ms) > kMaxRemoteRecording) {
              return absl::InvalidArgumentError("duration_ms: out of range (1 ms to 1 h)");
            }
            options.duration = absl::Milliseconds(ms);
            return absl::OkStatus();
          });
}

FlagTable<RecordOptions>::Spec RecordSpec() {
  std::vector<RecordFlag> python = {
      WireSwitchFlag<RecordOptions>({"--native"}, &RecordOptions::native,
                                    "keep native frames: extensions above the Python frame\n"
                                    "that called them, the interpreter's starters below;\n"
                                    "every process's native stack is walked with unwind\n"
                                    "tables built from its binaries' .eh_frame, for the\n"
                                    "binaries its samples walk through (the first samples\n"
                                    "through a binary end in [unknown] while its table is\n"
                                    "built, once: tables are kept on disk)",
                                    "native"),
      IntegerFlag({"--native-table-mib"}, "MIB",
                  "kernel memory for unwind tables (4 to 1024, default\n"
                  "32; a torch training loop needs about 9): when full,\n"
                  "the tables walked least recently make room",
                  &RecordOptions::native_table_mib, 4, 1024, "MiB"),
      ValueFlag<RecordOptions>(
          {"--unwind-cache"}, "DIR",
          "where unwind tables are kept across runs (default\n"
          "/var/cache/pystrobe/unwind, at most 512 MiB; \"none\":\n"
          "build them in every run)",
          [](RecordOptions& options, absl::string_view flag, std::string value) {
            if (value.empty()) {
              return absl::InvalidArgumentError(absl::StrCat(flag, " needs a path"));
            }
            if (value == "none") value.clear();  // build tables in every run
            options.unwind_cache = std::move(value);
            return absl::OkStatus();
          }),
      WireSwitchFlag<RecordOptions>({"--gil"}, &RecordOptions::gil_only,
                                    "keep only samples whose thread held the GIL", "gil"),
      WireSwitchFlag<RecordOptions>({"--function"}, &RecordOptions::function_lines,
                                    "show the line a function starts at, not the line running",
                                    "function_lines"),
      WireSwitchFlag<RecordOptions>({"--nolineno"}, &RecordOptions::no_line_numbers,
                                    "no line numbers", "no_line_numbers"),
      WireSwitchFlag<RecordOptions>({"--full-filenames"}, &RecordOptions::full_filenames,
                                    "whole paths (default: shortened as py-spy does)",
                                    "full_filenames"),
      LocalSwitch({"--imports"}, &RecordOptions::imports,
                  "instead of a profile, the import time of each module as a\n"
                  "tree (self and cumulative ms, as python -X importtime\n"
                  "prints it), from samples: to -o FILE, else to stderr"),
      LocalSwitch({"--asyncio"}, &RecordOptions::asyncio,
                  "group asyncio code by task: a sample of a running task reads\n"
                  "<process>;[task NAME];<frames of the tasks awaiting it>;\n"
                  "<the task's own frames>, without the event loop's frames"),
      IntegerFlag({"--max-python-depth"}, "N",
                  "Python frames walked per sample (1 to 384, default 128);\n"
                  "deeper stacks start with a [truncated] frame",
                  &RecordOptions::max_python_depth, 1, kMaxPythonDepth, "frames"),
  };
  for (RecordFlag& row : DaemonClientRows<RecordOptions>(
           &RecordOptions::daemon_client,
           "record here even when a pystrobe daemon runs (by default\n"
           "--pid and --all recordings are asked of it, over its socket)")) {
    python.push_back(std::move(row));
  }
  python.push_back(LocalSwitch({"-v", "--verbose"}, &RecordOptions::verbose,
                               "print libbpf's log, including the verifier's"));
  python.push_back(HelpFlag(&RecordOptions::help, "this text"));

  return {
      .command = "record",
      .intro =
          "usage: pystrobe record [options] [-- COMMAND ARGS...]\n"
          "\n"
          "Records a CPU profile with kernel, native (and Python) frames.\n"
          "\n",
      .sections =
          {
              {.heading = "Targets (one kind; the whole system when none is given):",
               .flags =
                   {
                       HelpOnlyRow<RecordOptions>(
                           "-- COMMAND ARGS...",
                           "start COMMAND and profile it, all its threads, until it exits"),
                       PidFlag(),
                       WireSwitchFlag<RecordOptions>({"-a", "--all"}, &RecordOptions::all,
                                                     "profile every process on the system", "all"),
                   }},
              {.heading = "Options:",
               .flags =
                   {
                       RateFlag(),
                       DurationFlag(),
                       ValueFlag<RecordOptions>(
                           {"-f", "--format"}, "FMT",
                           "svg (default), folded, pprof (.pb.gz), speedscope, or otlp\n"
                           "(an OTLP ExportProfilesServiceRequest, .otlp.pb, to post\n"
                           "to a collector's /v1development/profiles)",
                           [](RecordOptions& options, absl::string_view, std::string value) {
                             options.format = std::move(value);  // checked with the others
                             return absl::OkStatus();
                           }),

                       PathFlag({"-o", "--output"}, "FILE",
                                "where to write (default pystrobe-<target>-<time>.<format>)",
                                &RecordOptions::output),
                       WireSwitchFlag<RecordOptions>(
                           {"--threads"}, &RecordOptions::threads,
                           "add a frame per thread (\"<name> tid=<tid>\", with\n"
                           "\"[interpreter <id>]\" after the name in a sub-interpreter)\n"
                           "under the process",
                           "threads"),
                       LocalSwitch({"--subprocesses"}, &RecordOptions::subprocesses,
                                   "also profile the children of the targets (fork, exec,\n"
                                   "multiprocessing), decided in the kernel as they are born"),
                       PathFlag({"--summary-json"}, "FILE",
                                "also write the summary's counters (samples, processes,\n"
                                "every drop by reason) as one JSON object to FILE, for\n"
                                "scripts; a recording made here, not by a daemon",
                                &RecordOptions::summary_json),
                   }},
              {.heading = "Off CPU (where threads wait, and why: [sleep], [io wait], [runqueue]):",
               .flags =
                   {
                       WireSwitchFlag<RecordOptions>(
                           {"--off-cpu"}, &RecordOptions::offcpu,
                           "weigh stacks by time: on-CPU time under an [on-cpu] root,\n"
                           "time off CPU under [off-cpu], both in microseconds",
                           "offcpu"),
                       WireSwitchFlag<RecordOptions>(
                           {"--idle"}, &RecordOptions::idle,
                           "include threads that are not running, as py-spy does:\n"
                           "their time off CPU counts as samples at the rate",
                           "idle"),
                   }},
              {.heading = "Memory:",
               .flags =
                   {
                       LocalSwitch({"--memory"}, &RecordOptions::memory,
                                   "instead of CPU time, where resident memory grows: the\n"
                                   "moments pages become resident (first touches), sampled\n"
                                   "in the kernel every 512 KiB of growth on average, each\n"
                                   "stack weighed in bytes (Python, native and kernel\n"
                                   "frames; pprof sample type resident_growth/bytes). It\n"
                                   "traces kmem:rss_stat while it runs: about 80 ns per\n"
                                   "page fault (2% of a core at 1 GB/s of first touch,\n"
                                   "docs/benchmarks.md)"),
                       LocalSwitch({"--allocations"}, &RecordOptions::allocations,
                                   "instead of CPU time, what the target allocated and still\n"
                                   "holds (leaks: inuse_space), each stack weighed in bytes\n"
                                   "(an unbiased estimate), sampled every 512 KiB allocated\n"
                                   "on average. A command pystrobe starts (-- CMD) samples\n"
                                   "in its own process: pystrobe preloads its small\n"
                                   "allocation sampler (libpystrobe-alloc.so) into it and\n"
                                   "its children, which wraps malloc, calloc, realloc,\n"
                                   "free, the aligned allocators and anonymous mmap, and\n"
                                   "traps into the kernel only for a sampled allocation or\n"
                                   "its free: a loop of 1 KiB allocations takes 1.1x its\n"
                                   "CPU time (docs/benchmarks.md). A Python program's\n"
                                   "in-use view is what it holds when its finalization\n"
                                   "begins (before teardown frees its globals); another's,\n"
                                   "what it holds at exit. A process already running\n"
                                   "(--pid, --all), or a static or setuid command, is seen\n"
                                   "through uprobes on its allocator instead, and every\n"
                                   "allocator call traps into the kernel (8 to 11 us a\n"
                                   "call on this VM: a loop of 1 KiB mallocs runs 100x to\n"
                                   "600x slower); it says so before it starts"),
                       LocalSwitch({"--alloc-space"}, &RecordOptions::alloc_space,
                                   "with --allocations: every sampled allocation, freed or\n"
                                   "not (alloc_space)"),
                       IntegerFlag({"--alloc-sample-bytes"}, "N",
                                   "with --allocations: mean bytes allocated between two\n"
                                   "samples (default 524288); smaller is more exact and\n"
                                   "costs more",
                                   &RecordOptions::alloc_sample_bytes, 1, 1 << 30, "bytes"),
                   }},
              {.heading = "Python (any CPython 2.7 or 3.6 to 3.13, found automatically):",
               .flags = std::move(python)},
          },
      .outro = "",
      .help_column = 23,
      .positional = nullptr,
      .rest =
          [](RecordOptions& options, std::vector<std::string> command) {
            if (command.empty()) {
              return absl::InvalidArgumentError("'--' must be followed by a command to run");
            }
            options.command = std::move(command);
            return absl::OkStatus();
          },
      .check =
          [](RecordOptions& options, const FlagsGiven& given) {
            int kinds = (options.command.empty() ? 0 : 1) + (options.pids.empty() ? 0 : 1) +
                        (options.all ? 1 : 0);
            if (kinds > 1) {
              return absl::InvalidArgumentError(
                  "choose one kind of target: -- COMMAND, --pid PID..., or --all");
            }
            if (kinds == 0) options.all = true;
            return CheckRecordOptions(options, given);
          },
  };
}

}  // namespace

absl::Status CheckRecordOptions(const RecordOptions& options, const FlagsGiven& given) {
  if (options.function_lines && options.no_line_numbers) {
    return absl::InvalidArgumentError("--function and --nolineno exclude each other");
  }
  if (options.subprocesses && options.all) {
    return absl::InvalidArgumentError(
        "--subprocesses follows the children of -- COMMAND or --pid; --all sees them anyway");
  }
  if (options.imports && given.contains("--format")) {
    return absl::InvalidArgumentError("--imports writes a text tree, not a profile: drop --format");
  }
  if (options.offcpu && options.idle) {
    return absl::InvalidArgumentError("--off-cpu and --idle exclude each other");
  }
  if (options.memory && (options.offcpu || options.idle || options.imports)) {
    return absl::InvalidArgumentError(
        "--memory weighs stacks in bytes: it excludes --off-cpu, --idle and --imports");
  }
  if (options.allocations &&
      (options.memory || options.offcpu || options.idle || options.imports)) {
    return absl::InvalidArgumentError(
        "--allocations weighs stacks in bytes: it excludes --memory, --off-cpu, --idle and "
        "--imports");
  }
  if (options.alloc_space && !options.allocations) {
    return absl::InvalidArgumentError("--alloc-space is a view of --allocations");
  }
  if (given.contains("--alloc-sample-bytes") && !options.allocations) {
    return absl::InvalidArgumentError("--alloc-sample-bytes is a setting of --allocations");
  }
  if (options.format != "svg" && options.format != "folded" && options.format != "pprof" &&
      options.format != "speedscope" && options.format != "otlp") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--format takes folded or svg (flame graphs), pprof, speedscope or otlp, not '",
        options.format, "'"));
  }
  return absl::OkStatus();
}

const FlagTable<RecordOptions>& RecordFlags() {
  static const FlagTable<RecordOptions>* const table = new FlagTable<RecordOptions>(RecordSpec());
  return *table;
}

absl::StatusOr<RecordOptions> ParseRecordOptions(const std::vector<std::string>& args) {
  return RecordFlags().Parse(args);
}

const char* RecordUsage() { return RecordFlags().UsageText(); }

}  // namespace pystrobe
