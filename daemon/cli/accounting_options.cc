#include "daemon/cli/accounting_options.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/flags/flag_table.h"

namespace pystrobe {
namespace {

absl::StatusOr<double> PositiveSeconds(absl::string_view flag, const std::string& text) {
  double seconds = 0;
  if (!absl::SimpleAtod(text, &seconds) || !(seconds > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " wants a positive number of seconds, not '", text, "'"));
  }
  return seconds;
}

absl::StatusOr<int> PositiveInt(absl::string_view flag, const std::string& text, int max) {
  int value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < 1 || value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " wants a whole number from 1 to ", max, ", not '", text, "'"));
  }
  return value;
}

// A flag taking a whole number from 1 to `max` into `member`.
template <typename Options, typename Int>
Flag<Options> PositiveIntFlag(std::vector<std::string> names, std::string value_name,
                              std::string help, Int Options::*member, int max) {
  return ValueFlag<Options>(
      std::move(names), std::move(value_name), std::move(help),
      [member, max](Options& options, absl::string_view flag, const std::string& v) {
        absl::StatusOr<int> n = PositiveInt(flag, v, max);
        if (!n.ok()) return n.status();
        options.*member = static_cast<Int>(*n);
        return absl::OkStatus();
      });
}

// -p/--pid, which stat and top read alike.
template <typename Options>
Flag<Options> PidFlag(std::string help) {
  return ValueFlag<Options>({"-p", "--pid"}, "PID", std::move(help),
                            [](Options& options, absl::string_view, const std::string& text) {
                              uint32_t pid = 0;
                              if (!absl::SimpleAtoi(text, &pid) || pid == 0) {
                                return absl::InvalidArgumentError(
                                    absl::StrCat("--pid wants a process id, not '", text, "'"));
                              }
                              options.pid = pid;
                              return absl::OkStatus();
                            });
}

// The rows stat and top end with: the daemon's, -v and -h.
template <typename Options>
void AddClosingRows(std::vector<Flag<Options>>& rows, std::string no_daemon_help) {
  for (Flag<Options>& row :
       DaemonClientRows<Options>(&Options::daemon_client, std::move(no_daemon_help))) {
    rows.push_back(std::move(row));
  }
  rows.push_back(SwitchFlag<Options>({"-v", "--verbose"}, &Options::verbose,
                                     "show libbpf's messages, and why there are no GPU figures"));
  rows.push_back(HelpFlag(&Options::help, "this help"));
}

FlagTable<StatOptions>::Spec StatSpec() {
  std::vector<Flag<StatOptions>> rows = {
      PidFlag<StatOptions>("watch a running process"),
      ValueFlag<StatOptions>(
          {"-d", "--duration"}, "SECS", "how long to watch it (required with --pid)",
          [](StatOptions& options, absl::string_view flag, const std::string& value) {
            absl::StatusOr<double> seconds = PositiveSeconds(flag, value);
            if (!seconds.ok()) return seconds.status();
            options.duration = absl::Seconds(*seconds);
            return absl::OkStatus();
          }),
      SwitchFlag<StatOptions>({"--json"}, &StatOptions::json,
                              "print one JSON object instead of text"),
      PositiveIntFlag<StatOptions>({"-r", "--rate"}, "HZ",
                                   "mean sampling rate for the stacks (default 199)",
                                   &StatOptions::rate_hz, 10000),
      SwitchFlag<StatOptions>({"--syscalls"}, &StatOptions::syscalls,
                              "also trace each read/write-family syscall (socket calls,\n"
                              "time entry to exit); slows every syscall on the host"),
      SwitchFlag<StatOptions>({"--no-offcpu-stacks"},
                              "on-CPU stacks only: no stack walk at each context switch\n"
                              "(cheaper for programs that switch very often)",
                              [](StatOptions& options, absl::string_view, const std::string&) {
                                options.offcpu_stacks = false;
                                return absl::OkStatus();
                              }),
      SwitchFlag<StatOptions>({"--allocations"}, &StatOptions::allocations,
                              "also sample allocations, every 512 KiB allocated on\n"
                              "average (an unbiased estimate): the bytes allocated,\n"
                              "those still in use at the end (a Python program's when\n"
                              "its finalization begins) and the Python lines (or\n"
                              "native functions) that allocated them, with their\n"
                              "shares. -- CMD samples in its own process (pystrobe\n"
                              "preloads libpystrobe-alloc.so: about 1.1x its CPU time\n"
                              "on a loop of 1 KiB allocations); --pid, a static or a\n"
                              "setuid command, through uprobes on its allocator, which\n"
                              "trap at every call (100x slower and more)"),
      PositiveIntFlag<StatOptions>({"--alloc-sample-bytes"}, "N",
                                   "with --allocations: mean bytes allocated between two\n"
                                   "samples (default 524288)",
                                   &StatOptions::alloc_sample_bytes, 1 << 30),
  };
  AddClosingRows(rows,
                 "measure here even when a pystrobe daemon runs (by default\n"
                 "--pid is asked of it, over its socket; -- CMD never is)");
  return {
      .command = "stat",
      .intro =
          "usage: pystrobe stat [options] -- CMD [ARGS...]\n"
          "       pystrobe stat [options] --pid PID -d SECONDS\n"
          "\n"
          "Runs CMD (or watches PID for SECONDS) and prints where its time went: CPU\n"
          "user/system, run-queue wait, off-CPU time by reason, read/write syscalls,\n"
          "block IO, page faults, context switches, CPython GC, time waiting on the GPU\n"
          "([gpu wait]) and, where NVML is, GPU utilization and memory; a verdict\n"
          "(gpu-bound, gpu-starved, cpu-bound, io-bound, memory-bound, gil-bound,\n"
          "lock-or-sleep-bound, cpu-starved) with the figures behind it, and the five\n"
          "stacks most responsible. Memory: the resident size (anon, file, shmem), swap,\n"
          "the peak (VmHWM) and when it came, the resident size over the run, the stacks\n"
          "that made memory resident up to the peak (first touches sampled every 512 KiB,\n"
          "in bytes), and whether the kernel's OOM killer took the process.\n"
          "\n"
          "Exit status: with -- CMD, the command's own (128 + the signal when a signal\n"
          "ended it), as `time` does; 1 when stat itself fails, 2 for bad flags, a --pid\n"
          "that does not exist or a CMD that cannot be found.\n"
          "\n",
      .sections = {{.heading = "Options:", .flags = std::move(rows)}},
      .outro = "",
      .help_column = 23,
      .positional = nullptr,
      .rest =
          [](StatOptions& options, std::vector<std::string> command) {
            if (command.empty()) return absl::InvalidArgumentError("-- needs a command");
            options.command = std::move(command);
            return absl::OkStatus();
          },
      .check =
          [](StatOptions& options, const FlagsGiven& given) {
            if (options.command.empty() == !options.pid.has_value()) {
              return absl::InvalidArgumentError(
                  "give either -- CMD ARGS... or --pid PID -d SECONDS");
            }
            if (options.pid && !options.duration) {
              return absl::InvalidArgumentError("--pid needs -d SECONDS");
            }
            if (given.contains("--alloc-sample-bytes") && !options.allocations) {
              return absl::InvalidArgumentError(
                  "--alloc-sample-bytes is a setting of --allocations");
            }
            return absl::OkStatus();
          },
  };
}

FlagTable<TopOptions>::Spec TopSpec() {
  std::vector<Flag<TopOptions>> rows = {
      PidFlag<TopOptions>("one process, per thread"),
      ValueFlag<TopOptions>(
          {"-s", "--sort"}, "KEY", "cpu (default), io, faults, offcpu or memory (RSS)",
          [](TopOptions& options, absl::string_view, const std::string& key) {
            if (key == "cpu") {
              options.sort = TopSort::kCpu;
            } else if (key == "io") {
              options.sort = TopSort::kIo;
            } else if (key == "faults") {
              options.sort = TopSort::kFaults;
            } else if (key == "offcpu") {
              options.sort = TopSort::kOffCpu;
            } else if (key == "memory") {
              options.sort = TopSort::kMemory;
            } else {
              return absl::InvalidArgumentError(
                  absl::StrCat("--sort wants cpu, io, faults, offcpu or memory, not '", key, "'"));
            }
            return absl::OkStatus();
          }),
      SwitchFlag<TopOptions>({"--once"}, &TopOptions::once,
                             "print one screen after one interval and exit"),
      ValueFlag<TopOptions>(
          {"-i", "--interval"}, "SECS", "refresh interval (default 1)",
          [](TopOptions& options, absl::string_view flag, const std::string& value) {
            absl::StatusOr<double> seconds = PositiveSeconds(flag, value);
            if (!seconds.ok()) return seconds.status();
            options.interval = absl::Seconds(*seconds);
            return absl::OkStatus();
          }),
      PositiveIntFlag<TopOptions>({"-n", "--rows"}, "N", "rows shown (default 20)",
                                  &TopOptions::rows, 10000),
      PositiveIntFlag<TopOptions>({"-r", "--rate"}, "HZ",
                                  "mean sampling rate for the Python functions (default 49)",
                                  &TopOptions::rate_hz, 10000),
  };
  AddClosingRows(rows,
                 "measure here even when a pystrobe daemon runs (by default\n"
                 "top is asked of it, over its socket)");
  return {
      .command = "top",
      .intro =
          "usage: pystrobe top [options]\n"
          "\n"
          "A live view, refreshed every second, of every process (or, with --pid, every\n"
          "thread of one process): CPU% user/system, read/write rates, page faults per\n"
          "second, off-CPU time by reason, GIL wait, resident memory (RSS) and how fast\n"
          "it grows, GPU% and GPU memory where NVML is, and the hottest Python functions.\n"
          "\n",
      .sections = {{.heading = "Options:", .flags = std::move(rows)}},
      .outro =
          "\n"
          "Keys (when stdin is a terminal): c, i, f, o, m sort by cpu, io, faults,\n"
          "off-CPU, resident memory; q quits.\n",
      .help_column = 23,
      .positional = nullptr,
      .rest = nullptr,
      .check = nullptr,
  };
}

const FlagTable<StatOptions>& StatFlags() {
  static const FlagTable<StatOptions>* const table = new FlagTable<StatOptions>(StatSpec());
  return *table;
}

const FlagTable<TopOptions>& TopFlags() {
  static const FlagTable<TopOptions>* const table = new FlagTable<TopOptions>(TopSpec());
  return *table;
}

}  // namespace

const char* StatUsage() { return StatFlags().UsageText(); }

absl::StatusOr<StatOptions> ParseStatOptions(const std::vector<std::string>& args) {
  return StatFlags().Parse(args);
}

const char* TopUsage() { return TopFlags().UsageText(); }

absl::StatusOr<TopOptions> ParseTopOptions(const std::vector<std::string>& args) {
  return TopFlags().Parse(args);
}

}  // namespace pystrobe
