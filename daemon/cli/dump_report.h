// What `pystrobe dump` found in one process, and its two renderings: text for
// people (innermost frame first, as py-spy dump prints it) and one JSON object
// for scripts.
#ifndef PYSTROBE_DAEMON_CLI_DUMP_REPORT_H_
#define PYSTROBE_DAEMON_CLI_DUMP_REPORT_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace pystrobe {

struct DumpFrame {
  std::string name;      // qualname on 3.11+, else co_name; "<unknown>" when unreadable
  std::string filename;  // co_filename as the interpreter holds it
  int32_t line = -1;     // -1: no line for this instruction
};

struct DumpThread {
  std::optional<pid_t> tid;  // the kernel tid (top, ps -L); none when it cannot be mapped
  uint64_t pthread_id = 0;   // PyThreadState.thread_id, threading.get_ident()
  std::string name;          // /proc/PID/task/TID/comm; empty when unknown
  bool holds_gil = false;
  char proc_state = '?';          // the state letter of /proc/PID/task/TID/stat
  std::vector<DumpFrame> frames;  // innermost first
  bool truncated = false;         // deeper than the walk goes
};

struct DumpAsyncioTask {
  std::string name;
  bool running = false;                 // "running" when its loop runs it now, else "pending"
  std::vector<DumpFrame> stack;         // outermost first
  std::vector<std::string> awaited_by;  // names of the tasks awaiting it
};

struct DumpReport {
  pid_t pid = 0;
  std::string command_line;    // /proc/PID/cmdline, arguments joined by spaces
  std::string python_version;  // "3.11.2"
  std::string python_binary;   // the ELF that holds _PyRuntime
  bool free_threaded = false;  // a --disable-gil build: no thread holds a GIL
  std::vector<DumpThread> threads;
  bool asyncio = false;  // --asyncio: the tasks below were asked for
  std::vector<DumpAsyncioTask> asyncio_tasks;
  size_t asyncio_unreadable = 0;  // tasks skipped because their memory changed under the read
};

// "running" for R (on a CPU or waiting for one), "idle" for every other state
// (S sleeping, D in uninterruptible wait, T stopped...), "unknown" for '?'.
absl::string_view ThreadActivity(char proc_state);

// The state letter of a /proc/PID/task/TID/stat line: the first field after
// the last ')' (the comm may itself contain ')' and spaces); '?' if malformed.
char ProcStatState(absl::string_view stat_line);

// One JSON object, followed by a newline:
// {"pid":N,"python_version":"3.11.2","threads":[{"tid":N,"name":"..",
//  "holds_gil":true,"state":"running","frames":[{"name":..,"filename":..,"line":N}]}]}
// plus "thread_id" (pthread_t), "proc_state" and "truncated" per thread;
// "tid" is null when unknown, "line" null when the frame has none. With
// --asyncio also "asyncio_tasks":[{"name","state":"running"|"pending",
// "stack":[{"name","filename","line"}] (outermost first),"awaited_by":[names]}]
// and "asyncio_unreadable":N.
std::string FormatDumpJson(const DumpReport& report);

// The text rendering:
//   Process 1234: python3 app.py
//   Python v3.11.2 (/usr/bin/python3.11)
//
//   Thread 1234 "python3" (idle)
//       wait_here (/srv/app.py:12)
//       main (/srv/app.py:30)
//
//   Task "io-0" (pending), awaited by "main"
//       serve (/srv/app.py:40)
//       query_db (/srv/app.py:22)
std::string FormatDumpText(const DumpReport& report);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_DUMP_REPORT_H_
