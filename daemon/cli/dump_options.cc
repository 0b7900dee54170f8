#include "daemon/cli/dump_options.h"

#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/flags/flag_table.h"

namespace pystrobe {
namespace {

FlagTable<DumpOptions>::Spec DumpSpec() {
  std::vector<Flag<DumpOptions>> rows = {
      ValueFlag<DumpOptions>(
          {"-p", "--pid"}, "PID", "the process to dump",
          [](DumpOptions& options, absl::string_view flag, const std::string& value) {
            int32_t pid = 0;
            if (!absl::SimpleAtoi(value, &pid) || pid < 1 || pid > (1 << 22)) {
              return absl::InvalidArgumentError(absl::StrCat(flag, " takes a process id from 1 to ",
                                                             1 << 22, ", not '", value, "'"));
            }
            options.pid = pid;
            return absl::OkStatus();
          }),
      SwitchFlag<DumpOptions>({"--asyncio"}, &DumpOptions::asyncio,
                              "after the threads, every pending asyncio task of every event\n"
                              "loop: its name, whether it is running or pending, its\n"
                              "coroutine chain (outermost first, each where it is suspended\n"
                              "or running) and the tasks awaiting it (await, gather,\n"
                              "TaskGroup)"),
      SwitchFlag<DumpOptions>({"--json"}, &DumpOptions::json,
                              "print one JSON object instead:\n"
                              "{\"pid\", \"python_version\", \"threads\": [{\"tid\", \"name\", "
                              "\"holds_gil\",\n"
                              " \"state\", \"frames\": [{\"name\", \"filename\", \"line\"}]}]}\n"
                              "with --asyncio also \"asyncio_tasks\": [{\"name\", \"state\",\n"
                              " \"stack\": [{\"name\", \"filename\", \"line\"}], \"awaited_by\": "
                              "[names]}]"),
      HelpFlag(&DumpOptions::help, "this text"),
  };
  return {
      .command = "dump",
      .intro =
          "usage: pystrobe dump --pid PID [--json] [--asyncio]\n"
          "\n"
          "Prints the Python stack of every thread of a running CPython process (3.8 to\n"
          "3.13), innermost frame first, read from its memory without stopping it. Each\n"
          "thread shows its kernel thread id (as top and ps -L show it), its name, "
          "whether\n"
          "it is running or idle, and whether it holds the GIL. Needs root "
          "(CAP_SYS_PTRACE).\n"
          "\n",
      .sections = {{.heading = "Options:", .flags = std::move(rows)}},
      .outro = "",
      .help_column = 18,
      .positional = nullptr,
      .rest = nullptr,
      .check =
          [](DumpOptions& options, const FlagsGiven&) {
            if (options.pid == 0)
              return absl::InvalidArgumentError("which process? give --pid PID");
            return absl::OkStatus();
          },
  };
}

const FlagTable<DumpOptions>& DumpFlags() {
  static const FlagTable<DumpOptions>* const table = new FlagTable<DumpOptions>(DumpSpec());
  return *table;
}

}  // namespace

absl::StatusOr<DumpOptions> ParseDumpOptions(const std::vector<std::string>& args) {
  return DumpFlags().Parse(args);
}

const char* DumpUsage() { return DumpFlags().UsageText(); }

}  // namespace pystrobe
