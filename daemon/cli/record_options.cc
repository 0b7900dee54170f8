#include "daemon/cli/record_options.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "daemon/cli/flag_cursor.h"

namespace pystrobe {
namespace {

absl::StatusOr<int64_t> ParseInteger(absl::string_view flag, absl::string_view text, int64_t min,
                                     int64_t max, absl::string_view unit) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " takes a whole number of ", unit, " from ", min, " to ", max, ", not '", text, "'"));
  }
  return value;
}

// The boolean flag named `flag`, or null.
bool* SwitchFlag(RecordOptions& options, absl::string_view flag) {
  if (flag == "--threads") return &options.threads;
  if (flag == "--subprocesses") return &options.subprocesses;
  if (flag == "--off-cpu") return &options.offcpu;
  if (flag == "--idle") return &options.idle;
  if (flag == "--native") return &options.native;
  if (flag == "--gil") return &options.gil_only;
  if (flag == "--function") return &options.function_lines;
  if (flag == "--nolineno") return &options.no_line_numbers;
  if (flag == "--full-filenames") return &options.full_filenames;
  if (flag == "--imports") return &options.imports;
  if (flag == "--asyncio") return &options.asyncio;
  if (flag == "--memory") return &options.memory;
  if (flag == "--allocations") return &options.allocations;
  if (flag == "--alloc-space") return &options.alloc_space;
  return nullptr;
}

}  // namespace

const char* RecordUsage() {
  return R"(usage: pystrobe record [options] [-- COMMAND ARGS...]

Records a CPU profile with kernel, native (and Python) frames.

Targets (one kind; the whole system when none is given):
  -- COMMAND ARGS...   start COMMAND and profile it, all its threads, until it exits
  -p, --pid PID        profile a running process, all its threads (repeatable)
  -a, --all            profile every process on the system

Options:
  -r, --rate HZ        mean samples per second on each CPU (1 to 1000, default
                       99); each CPU's instants are random, so that no periodic
                       program is sampled at the same phase of its cycle
  -d, --duration SECS  stop after SECS seconds (default: when the target exits,
                       or on Ctrl-C / SIGTERM; the profile is written either way)
  -f, --format FMT     svg (default), folded, pprof (.pb.gz), speedscope, or otlp
                       (an OTLP ExportProfilesServiceRequest, .otlp.pb, to post
                       to a collector's /v1development/profiles)
  -o, --output FILE    where to write (default pystrobe-<target>-<time>.<format>)
      --threads        add a frame per thread ("<name> tid=<tid>", with
                       "[interpreter <id>]" after the name in a sub-interpreter)
                       under the process
      --subprocesses   also profile the children of the targets (fork, exec,
                       multiprocessing), decided in the kernel as they are born
      --summary-json FILE
                       also write the summary's counters (samples, processes,
                       every drop by reason) as one JSON object to FILE, for
                       scripts; a recording made here, not by a daemon

Off CPU (where threads wait, and why: [sleep], [io wait], [runqueue]):
      --off-cpu        weigh stacks by time: on-CPU time under an [on-cpu] root,
                       time off CPU under [off-cpu], both in microseconds
      --idle           include threads that are not running, as py-spy does:
                       their time off CPU counts as samples at the rate

Memory:
      --memory         instead of CPU time, where resident memory grows: the
                       moments pages become resident (first touches), sampled
                       in the kernel every 512 KiB of growth on average, each
                       stack weighed in bytes (Python, native and kernel
                       frames; pprof sample type resident_growth/bytes). It
                       traces kmem:rss_stat while it runs: about 80 ns per
                       page fault (2% of a core at 1 GB/s of first touch,
                       docs/benchmarks.md)
      --allocations    instead of CPU time, what the target allocated and still
                       holds (leaks: inuse_space), each stack weighed in bytes
                       (an unbiased estimate), sampled every 512 KiB allocated
                       on average. A command pystrobe starts (-- CMD) samples
                       in its own process: pystrobe preloads its small
                       allocation sampler (libpystrobe-alloc.so) into it and
                       its children, which wraps malloc, calloc, realloc,
                       free, the aligned allocators and anonymous mmap, and
                       traps into the kernel only for a sampled allocation or
                       its free: a loop of 1 KiB allocations takes 1.1x its
                       CPU time (docs/benchmarks.md). A Python program's
                       in-use view is what it holds when its finalization
                       begins (before teardown frees its globals); another's,
                       what it holds at exit. A process already running
                       (--pid, --all), or a static or setuid command, is seen
                       through uprobes on its allocator instead, and every
                       allocator call traps into the kernel (8 to 11 us a
                       call on this VM: a loop of 1 KiB mallocs runs 100x to
                       600x slower); it says so before it starts
      --alloc-space    with --allocations: every sampled allocation, freed or
                       not (alloc_space)
      --alloc-sample-bytes N
                       with --allocations: mean bytes allocated between two
                       samples (default 524288); smaller is more exact and
                       costs more

Python (any CPython 2.7 or 3.6 to 3.13, found automatically):
      --native         keep native frames: extensions above the Python frame
                       that called them, the interpreter's starters below;
                       every process's native stack is walked with unwind
                       tables built from its binaries' .eh_frame, for the
                       binaries its samples walk through (the first samples
                       through a binary end in [unknown] while its table is
                       built, once: tables are kept on disk)
      --native-table-mib MIB
                       kernel memory for unwind tables (4 to 1024, default
                       32; a torch training loop needs about 9): when full,
                       the tables walked least recently make room
      --unwind-cache DIR
                       where unwind tables are kept across runs (default
                       /var/cache/pystrobe/unwind, at most 512 MiB; "none":
                       build them in every run)
      --gil            keep only samples whose thread held the GIL
      --function       show the line a function starts at, not the line running
      --nolineno       no line numbers
      --full-filenames whole paths (default: shortened as py-spy does)
      --imports        instead of a profile, the import time of each module as a
                       tree (self and cumulative ms, as python -X importtime
                       prints it), from samples: to -o FILE, else to stderr
      --asyncio        group asyncio code by task: a sample of a running task reads
                       <process>;[task NAME];<frames of the tasks awaiting it>;
                       <the task's own frames>, without the event loop's frames
      --max-python-depth N
                       Python frames walked per sample (1 to 384, default 128);
                       deeper stacks start with a [truncated] frame
      --no-daemon      record here even when a pystrobe daemon runs (by default
                       --pid and --all recordings are asked of it, over its socket)
      --socket PATH    the daemon's socket (default /run/pystrobe/pystrobe.sock)
  -v, --verbose        print libbpf's log, including the verifier's
  -h, --help           this text
)";
}

absl::StatusOr<RecordOptions> ParseRecordOptions(const std::vector<std::string>& args) {
  RecordOptions options;
  bool format_given = false;
  bool alloc_sample_bytes_given = false;
  FlagCursor cursor(args);
  while (!cursor.Done()) {
    std::string flag = cursor.Next();
    if (flag == "--") {
      options.command = cursor.Rest();
      if (options.command.empty()) {
        return absl::InvalidArgumentError("'--' must be followed by a command to run");
      }
      break;
    }
    auto takes_no_value = [&]() -> absl::Status {
      if (cursor.HadInlineValue()) {
        return absl::InvalidArgumentError(absl::StrCat(flag, " takes no value"));
      }
      return absl::OkStatus();
    };
    if (flag == "-p" || flag == "--pid") {
      absl::StatusOr<std::string> value = cursor.Value(flag);
      if (!value.ok()) return value.status();
      absl::StatusOr<int64_t> pid = ParseInteger(flag, *value, 1, (1 << 22), "process ids");
      if (!pid.ok()) return pid.status();
      options.pids.push_back(static_cast<uint32_t>(*pid));
    } else if (flag == "-a" || flag == "--all") {
      if (absl::Status s = takes_no_value(); !s.ok()) return s;
      options.all = true;
    } else if (flag == "-r" || flag == "--rate") {
      absl::StatusOr<std::string> value = cursor.Value(flag);
      if (!value.ok()) return value.status();
      absl::StatusOr<int64_t> rate = ParseInteger(flag, *value, kMinRateHz, kMaxRateHz, "Hz");
      if (!rate.ok()) return rate.status();
      options.rate_hz = static_cast<int>(*rate);
    } else if (flag == "-d" || flag == "--duration") {
      absl::StatusOr<std::string> value = cursor.Value(flag);
      if (!value.ok()) return value.status();
      double seconds = 0;
      if (!absl::SimpleAtod(*value, &seconds) || !(seconds > 0) || seconds > 365 * 86400.0) {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, " takes a positive number of seconds, not '", *value, "'"));
      }
      options.duration = absl::Seconds(seconds);
    } else if (flag == "-f" || flag == "--format") {
      absl::StatusOr<std::string> value = cursor.Value(flag);
      if (!value.ok()) return value.status();
      options.format = *value;
      format_given = true;
    } else if (flag == "-o" || flag == "--output") {
      absl::StatusOr<std::string> value = cursor.Value(flag);
      if (!value.ok()) return value.status();
      if (value->empty()) return absl::InvalidArgumentError(absl::StrCat(flag, " needs a path"));
      options.output = *value;
    } else if (flag == "--summary-json") {
      absl::StatusOr<std::string> value = cursor.Value(flag);
      if (!value.ok()) return value.status();
      if (value->empty()) return absl::InvalidArgumentError(absl::StrCat(flag, " needs a path"));
      options.summary_json = *value;
    } else if (flag == "--max-python-depth") {
      absl::StatusOr<std::string> value = cursor.Value(flag);
      if (!value.ok()) return value.status();
      absl::StatusOr<int64_t> depth = ParseInteger(flag, *value, 1, kMaxPythonDepth, "frames");
      if (!depth.ok()) return depth.status();
      options.max_python_depth = static_cast<int>(*depth);
    } else if (flag == "--native-table-mib") {
      absl::StatusOr<std::string> value = cursor.Value(flag);
      if (!value.ok()) return value.status();
      absl::StatusOr<int64_t> mib = ParseInteger(flag, *value, 4, 1024, "MiB");
      if (!mib.ok()) return mib.status();
      options.native_table_mib = static_cast<int>(*mib);
    } else if (flag == "--unwind-cache") {
      absl::StatusOr<std::string> value = cursor.Value(flag);
      if (!value.ok()) return value.status();
      if (value->empty()) return absl::InvalidArgumentError(absl::StrCat(flag, " needs a path"));
      options.unwind_cache = *value == "none" ? "" : *value;
    } else if (flag == "--alloc-sample-bytes") {
      absl::StatusOr<std::string> value = cursor.Value(flag);
      if (!value.ok()) return value.status();
      absl::StatusOr<int64_t> bytes = ParseInteger(flag, *value, 1, 1 << 30, "bytes");
      if (!bytes.ok()) return bytes.status();
      options.alloc_sample_bytes = static_cast<uint32_t>(*bytes);
      alloc_sample_bytes_given = true;
    } else if (bool* switch_flag = SwitchFlag(options, flag); switch_flag != nullptr) {
      if (absl::Status s = takes_no_value(); !s.ok()) return s;
      *switch_flag = true;
    } else if (flag == "-h" || flag == "--help") {
      options.help = true;
      return options;
    } else if (flag == "-v" || flag == "--verbose") {
      if (absl::Status s = takes_no_value(); !s.ok()) return s;
      options.verbose = true;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown option '", flag, "' (see pystrobe record --help)"));
    }
  }

  int kinds =
      (options.command.empty() ? 0 : 1) + (options.pids.empty() ? 0 : 1) + (options.all ? 1 : 0);
  if (kinds > 1) {
    return absl::InvalidArgumentError(
        "choose one kind of target: -- COMMAND, --pid PID..., or --all");
  }
  if (kinds == 0) options.all = true;
  if (options.function_lines && options.no_line_numbers) {
    return absl::InvalidArgumentError("--function and --nolineno exclude each other");
  }
  if (options.subprocesses && options.all) {
    return absl::InvalidArgumentError(
        "--subprocesses follows the children of -- COMMAND or --pid; --all sees them anyway");
  }
  if (options.imports && format_given) {
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
  if (alloc_sample_bytes_given && !options.allocations) {
    return absl::InvalidArgumentError("--alloc-sample-bytes is a setting of --allocations");
  }
  if (options.format != "svg" && options.format != "folded" && options.format != "pprof" &&
      options.format != "speedscope" && options.format != "otlp") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--format takes folded or svg (flame graphs), pprof, speedscope or otlp, not '",
        options.format, "'"));
  }
  return options;
}

std::string DefaultOutputPath(const RecordOptions& options, absl::Time now,
                              absl::string_view extension) {
  std::string target = "all";
  if (!options.command.empty()) {
    target = std::filesystem::path(options.command.front()).filename().string();
  } else if (!options.pids.empty()) {
    target = absl::StrCat("pid", options.pids.front());
  }
  return absl::StrCat("pystrobe-", target, "-",
                      absl::FormatTime("%Y%m%d-%H%M%S", now, absl::LocalTimeZone()), ".",
                      extension);
}

}  // namespace pystrobe
