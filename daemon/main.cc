// pystrobe: a system-wide eBPF profiler that understands CPython.
// Thin entry point: picks the subcommand and returns its exit status.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/cli/daemon_command.h"
#include "daemon/cli/dump_command.h"
#include "daemon/cli/exit_status.h"
#include "daemon/cli/record_command.h"
#include "daemon/cli/report_command.h"
#include "daemon/cli/stat_command.h"
#include "daemon/cli/top_command.h"

namespace {

constexpr char kUsage[] = R"(usage: pystrobe <command> [options]

Commands:
  record    record a CPU profile of a command, processes, or the whole system
  dump      print the Python stack of every thread of a running process
  stat      run a command (or watch a pid) and say where its time went: a verdict
  top       live per-process (or per-thread) CPU, IO, faults and off-CPU view
  report    a recording's heaviest functions (or lines, files), callers, source
  diff      what changed between two recordings: a table and a differential flame graph
  daemon    the always-on service: windows of profiles on disk, Prometheus metrics
  version   print the version

Run 'pystrobe <command> --help' for a command's options.
)";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fputs(kUsage, stderr);
    return pystrobe::kExitUsage;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "record") return pystrobe::RunRecordCommand(args);
  if (command == "dump") return pystrobe::RunDumpCommand(args);
  if (command == "stat") return pystrobe::RunStatCommand(args);
  if (command == "top") return pystrobe::RunTopCommand(args);
  if (command == "report") return pystrobe::RunReportCommand(args);
  if (command == "diff") return pystrobe::RunDiffCommand(args);
  if (command == "daemon") return pystrobe::RunDaemonCommand(args);
  if (command == "version" || command == "--version") {
    printf("pystrobe %s\n", PYSTROBE_VERSION);
    return pystrobe::kExitOk;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    fputs(kUsage, stdout);
    return pystrobe::kExitOk;
  }
  fprintf(stderr, "pystrobe: unknown command '%s'\n\n%s", command.c_str(), kUsage);
  return pystrobe::kExitUsage;
}
