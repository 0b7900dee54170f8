#include "daemon/cli/accounting_options.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/cli/flag_cursor.h"

namespace pystrobe {
namespace {

absl::StatusOr<double> PositiveSeconds(const std::string& flag, const std::string& text) {
  double seconds = 0;
  if (!absl::SimpleAtod(text, &seconds) || !(seconds > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " wants a positive number of seconds, not '", text, "'"));
  }
  return seconds;
}

absl::StatusOr<int> PositiveInt(const std::string& flag, const std::string& text, int max) {
  int value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < 1 || value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " wants a whole number from 1 to ", max, ", not '", text, "'"));
  }
  return value;
}

absl::StatusOr<uint32_t> Pid(const std::string& text) {
  uint32_t pid = 0;
  if (!absl::SimpleAtoi(text, &pid) || pid == 0) {
    return absl::InvalidArgumentError(absl::StrCat("--pid wants a process id, not '", text, "'"));
  }
  return pid;
}

// A switch takes no value ("--json=1" is a mistake, not a yes).
absl::Status NoValue(const std::string& flag, const FlagCursor& flags) {
  if (!flags.HadInlineValue()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(flag, " takes no value"));
}

// The flags stat and top share: -p/--pid, -r/--rate, -v/--verbose and
// -h/--help. Takes `flag` (and its value from `flags`) into `options` when it
// is one of them; false when it is not.
template <typename Options>
absl::StatusOr<bool> TakeSharedFlag(const std::string& flag, FlagCursor& flags, Options& options) {
  if (flag == "-h" || flag == "--help") {
    options.help = true;
  } else if (flag == "-v" || flag == "--verbose") {
    options.verbose = true;
  } else if (flag == "-p" || flag == "--pid") {
    absl::StatusOr<std::string> v = flags.Value(flag);
    if (!v.ok()) return v.status();
    absl::StatusOr<uint32_t> pid = Pid(*v);
    if (!pid.ok()) return pid.status();
    options.pid = *pid;
    return true;
  } else if (flag == "-r" || flag == "--rate") {
    absl::StatusOr<std::string> v = flags.Value(flag);
    if (!v.ok()) return v.status();
    absl::StatusOr<int> hz = PositiveInt(flag, *v, 10000);
    if (!hz.ok()) return hz.status();
    options.rate_hz = *hz;
    return true;
  } else {
    return false;
  }
  if (absl::Status s = NoValue(flag, flags); !s.ok()) return s;
  return true;
}

}  // namespace

const char* StatUsage() {
  return R"(usage: pystrobe stat [options] -- CMD [ARGS...]
       pystrobe stat [options] --pid PID -d SECONDS

Runs CMD (or watches PID for SECONDS) and prints where its time went: CPU
user/system, run-queue wait, off-CPU time by reason, read/write syscalls,
block IO, page faults, context switches, CPython GC, time waiting on the GPU
([gpu wait]) and, where NVML is, GPU utilization and memory; a verdict
(gpu-bound, gpu-starved, cpu-bound, io-bound, memory-bound, gil-bound,
lock-or-sleep-bound, cpu-starved) with the figures behind it, and the five
stacks most responsible. Memory: the resident size (anon, file, shmem), swap,
the peak (VmHWM) and when it came, the resident size over the run, the stacks
that made memory resident up to the peak (first touches sampled every 512 KiB,
in bytes), and whether the kernel's OOM killer took the process.

Exit status: with -- CMD, the command's own (128 + the signal when a signal
ended it), as `time` does; 1 when stat itself fails, 2 for bad flags, a --pid
that does not exist or a CMD that cannot be found.

Options:
  -p, --pid PID        watch a running process
  -d, --duration SECS  how long to watch it (required with --pid)
  --json               print one JSON object instead of text
  -r, --rate HZ        mean sampling rate for the stacks (default 199)
  --syscalls           also trace each read/write-family syscall (socket calls,
                       time entry to exit); slows every syscall on the host
  --no-offcpu-stacks   on-CPU stacks only: no stack walk at each context switch
                       (cheaper for programs that switch very often)
  --allocations        also sample allocations, every 512 KiB allocated on
                       average (an unbiased estimate): the bytes allocated,
                       those still in use at the end (a Python program's when
                       its finalization begins) and the Python lines (or
                       native functions) that allocated them, with their
                       shares. -- CMD samples in its own process (pystrobe
                       preloads libpystrobe-alloc.so: about 1.1x its CPU time
                       on a loop of 1 KiB allocations); --pid, a static or a
                       setuid command, through uprobes on its allocator, which
                       trap at every call (100x slower and more)
  --alloc-sample-bytes N
                       with --allocations: mean bytes allocated between two
                       samples (default 524288)
  --no-daemon          measure here even when a pystrobe daemon runs (by default
                       --pid is asked of it, over its socket; -- CMD never is)
  --socket PATH        the daemon's socket (default /run/pystrobe/pystrobe.sock)
  -v, --verbose        show libbpf's messages, and why there are no GPU figures
  -h, --help           this help
)";
}

absl::StatusOr<StatOptions> ParseStatOptions(const std::vector<std::string>& args) {
  StatOptions options;
  bool alloc_sample_bytes_given = false;
  FlagCursor flags(args);
  while (!flags.Done()) {
    const std::string arg = flags.Next();
    if (arg == "--") {
      options.command = flags.Rest();
      if (options.command.empty()) return absl::InvalidArgumentError("-- needs a command");
      break;
    }
    absl::StatusOr<bool> shared = TakeSharedFlag(arg, flags, options);
    if (!shared.ok()) return shared.status();
    if (options.help) return options;
    if (*shared) continue;
    if (arg == "-d" || arg == "--duration") {
      absl::StatusOr<std::string> v = flags.Value(arg);
      if (!v.ok()) return v.status();
      absl::StatusOr<double> s = PositiveSeconds(arg, *v);
      if (!s.ok()) return s.status();
      options.duration = absl::Seconds(*s);
      continue;
    }
    if (arg == "--alloc-sample-bytes") {
      absl::StatusOr<std::string> v = flags.Value(arg);
      if (!v.ok()) return v.status();
      absl::StatusOr<int> bytes = PositiveInt(arg, *v, 1 << 30);
      if (!bytes.ok()) return bytes.status();
      options.alloc_sample_bytes = static_cast<uint32_t>(*bytes);
      alloc_sample_bytes_given = true;
      continue;
    }
    if (arg == "--syscalls") {
      options.syscalls = true;
    } else if (arg == "--allocations") {
      options.allocations = true;
    } else if (arg == "--no-offcpu-stacks") {
      options.offcpu_stacks = false;
    } else if (arg == "--json") {
      options.json = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown option '", arg, "'"));
    }
    if (absl::Status s = NoValue(arg, flags); !s.ok()) return s;
  }
  if (options.command.empty() == !options.pid.has_value()) {
    return absl::InvalidArgumentError("give either -- CMD ARGS... or --pid PID -d SECONDS");
  }
  if (options.pid && !options.duration) {
    return absl::InvalidArgumentError("--pid needs -d SECONDS");
  }
  if (alloc_sample_bytes_given && !options.allocations) {
    return absl::InvalidArgumentError("--alloc-sample-bytes is a setting of --allocations");
  }
  return options;
}

const char* TopUsage() {
  return R"(usage: pystrobe top [options]

A live view, refreshed every second, of every process (or, with --pid, every
thread of one process): CPU% user/system, read/write rates, page faults per
second, off-CPU time by reason, GIL wait, resident memory (RSS) and how fast
it grows, GPU% and GPU memory where NVML is, and the hottest Python functions.

Options:
  -p, --pid PID        one process, per thread
  -s, --sort KEY       cpu (default), io, faults, offcpu or memory (RSS)
  --once               print one screen after one interval and exit
  -i, --interval SECS  refresh interval (default 1)
  -n, --rows N         rows shown (default 20)
  -r, --rate HZ        mean sampling rate for the Python functions (default 49)
  --no-daemon          measure here even when a pystrobe daemon runs (by default
                       top is asked of it, over its socket)
  --socket PATH        the daemon's socket (default /run/pystrobe/pystrobe.sock)
  -v, --verbose        show libbpf's messages, and why there are no GPU figures
  -h, --help           this help

Keys (when stdin is a terminal): c, i, f, o, m sort by cpu, io, faults,
off-CPU, resident memory; q quits.
)";
}

absl::StatusOr<TopOptions> ParseTopOptions(const std::vector<std::string>& args) {
  TopOptions options;
  FlagCursor flags(args);
  while (!flags.Done()) {
    const std::string arg = flags.Next();
    absl::StatusOr<bool> shared = TakeSharedFlag(arg, flags, options);
    if (!shared.ok()) return shared.status();
    if (options.help) return options;
    if (*shared) continue;
    if (arg == "--once") {
      if (absl::Status s = NoValue(arg, flags); !s.ok()) return s;
      options.once = true;
    } else if (arg == "-s" || arg == "--sort") {
      absl::StatusOr<std::string> v = flags.Value(arg);
      if (!v.ok()) return v.status();
      if (*v == "cpu") {
        options.sort = TopSort::kCpu;
      } else if (*v == "io") {
        options.sort = TopSort::kIo;
      } else if (*v == "faults") {
        options.sort = TopSort::kFaults;
      } else if (*v == "offcpu") {
        options.sort = TopSort::kOffCpu;
      } else if (*v == "memory") {
        options.sort = TopSort::kMemory;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("--sort wants cpu, io, faults, offcpu or memory, not '", *v, "'"));
      }
    } else if (arg == "-i" || arg == "--interval") {
      absl::StatusOr<std::string> v = flags.Value(arg);
      if (!v.ok()) return v.status();
      absl::StatusOr<double> s = PositiveSeconds(arg, *v);
      if (!s.ok()) return s.status();
      options.interval = absl::Seconds(*s);
    } else if (arg == "-n" || arg == "--rows") {
      absl::StatusOr<std::string> v = flags.Value(arg);
      if (!v.ok()) return v.status();
      absl::StatusOr<int> n = PositiveInt(arg, *v, 10000);
      if (!n.ok()) return n.status();
      options.rows = *n;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown option '", arg, "'"));
    }
  }
  return options;
}

}  // namespace pystrobe
