// The command lines of `pystrobe stat` and `pystrobe top`, parsed.
#ifndef PYSTROBE_DAEMON_CLI_ACCOUNTING_OPTIONS_H_
#define PYSTROBE_DAEMON_CLI_ACCOUNTING_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/accounting/top_screen.h"
#include "daemon/flags/daemon_client_flags.h"

namespace pystrobe {

struct StatOptions {
  std::vector<std::string> command;  // `-- CMD ARGS...`, or
  std::optional<uint32_t> pid;       // `--pid PID` (with -d)
  std::optional<absl::Duration> duration;
  bool json = false;
  int rate_hz = 199;  // the sampler that finds the stacks
  // Also trace every read/write-family syscall (sys_enter/sys_exit): socket
  // calls and time in them, at the cost of every syscall on the host.
  bool syscalls = false;
  // Follow threads off CPU for the stacks of io/sleep/GIL/run-queue
  // verdicts: a stack walk at each of the target's context switches.
  bool offcpu_stacks = true;
  // Sample allocations (--allocations): in the command's own process for
  // -- CMD (the preloaded sampler), through uprobes for --pid.
  bool allocations = false;
  uint32_t alloc_sample_bytes = 512 * 1024;  // mean bytes between samples
  bool verbose = false;
  DaemonClientFlags daemon_client;  // --socket, --no-daemon: whether to ask a daemon
  bool help = false;
};

absl::StatusOr<StatOptions> ParseStatOptions(const std::vector<std::string>& args);
const char* StatUsage();

struct TopOptions {
  std::optional<uint32_t> pid;  // per thread of one process; else every process
  TopSort sort = TopSort::kCpu;
  bool once = false;  // one screen after one interval, then exit
  absl::Duration interval = absl::Seconds(1);
  int rows = 20;
  int rate_hz = 49;
  bool verbose = false;
  DaemonClientFlags daemon_client;  // --socket, --no-daemon: whether to ask a daemon
  bool help = false;
};

absl::StatusOr<TopOptions> ParseTopOptions(const std::vector<std::string>& args);
const char* TopUsage();

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_ACCOUNTING_OPTIONS_H_
