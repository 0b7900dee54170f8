#include "daemon/cli/dump_command.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "daemon/cli/dump_options.h"
#include "daemon/cli/dump_report.h"
#include "daemon/cli/exit_status.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/process_files.h"
#include "daemon/procfs/small_file.h"
#include "daemon/procfs/stat.h"
#include "daemon/python/asyncio_tasks.h"
#include "daemon/python/code_object_reader.h"
#include "daemon/python/frame_walker.h"
#include "daemon/python/interpreter_finder.h"
#include "daemon/python/object_layout.h"
#include "daemon/python/object_reader.h"
#include "daemon/python/process_memory.h"
#include "daemon/python/pthread_tid.h"

namespace pystrobe {
namespace {

// The process runs on while we read it: a thread state or frame freed between
// two reads makes a walk fail or a frame unreadable. Such a walk is retried;
// after the last attempt unreadable frames are shown as such.
constexpr int kWalkAttempts = 20;
constexpr std::chrono::microseconds kWalkRetryPause{500};
// The same for the asyncio tasks: a read in which the loop stepped a task is
// taken again, and the one that shows the most tasks, less the parts it could
// not read, is shown. (A task set that changed under the read is skipped whole:
// no task, one unreadable part. Fewest unreadable parts alone would pick it.)
constexpr int kAsyncioAttempts = 5;

int64_t LegibleTasks(const AsyncioSnapshot& snapshot) {
  return static_cast<int64_t>(snapshot.tasks.size()) - static_cast<int64_t>(snapshot.unreadable);
}

bool ProcessExists(pid_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

std::string CommandLine(pid_t pid) {
  absl::StatusOr<std::string> raw = procfs::ReadSmallFile(procfs::PidPath(pid, "cmdline"));
  if (!raw.ok()) return "?";
  std::string text = std::string(absl::StripSuffix(*raw, absl::string_view("\0", 1)));
  std::replace(text.begin(), text.end(), '\0', ' ');
  return text;
}

// Name and state of one thread from /proc; empty name and '?' once it is gone.
void ReadThreadProcInfo(pid_t pid, DumpThread& thread) {
  if (!thread.tid) return;
  if (std::string comm = procfs::ReadComm(procfs::TaskPath(pid, *thread.tid, "comm"));
      !comm.empty()) {
    thread.name = std::move(comm);
  }
  absl::StatusOr<procfs::StatLine> stat =
      procfs::ReadStat(procfs::TaskPath(pid, *thread.tid, "stat"));
  if (stat.ok()) thread.proc_state = stat->state();
}

// Fills in the kernel tid of threads whose interpreter does not record it
// (3.8 to 3.10), through glibc's struct pthread (see pthread_tid.h). Threads
// stay without a tid when the offset cannot be found; the reason is returned.
absl::Status MapPthreadIds(const ProcessMemory& memory, pid_t pid,
                           const std::vector<PythonThread>& walked,
                           std::vector<DumpThread>& threads) {
  std::vector<uint64_t> ids;
  for (const PythonThread& thread : walked) {
    if (!thread.native_thread_id) ids.push_back(thread.thread_id);
  }
  if (ids.empty()) return absl::OkStatus();
  absl::StatusOr<uint32_t> offset = FindPthreadTidOffset(memory, pid, ids, ReadTaskTids(pid));
  if (!offset.ok()) return offset.status();
  for (DumpThread& thread : threads) {
    if (thread.tid || thread.pthread_id == 0) continue;
    absl::StatusOr<int32_t> tid = memory.ReadValue<int32_t>(thread.pthread_id + *offset);
    if (tid.ok() && *tid > 0) thread.tid = *tid;
  }
  return absl::OkStatus();
}

bool IsTransient(const absl::Status& status) {
  return status.code() != absl::StatusCode::kNotFound &&
         status.code() != absl::StatusCode::kPermissionDenied;
}

// Walks and symbolizes every thread; retries walks that raced the process.
absl::StatusOr<std::vector<DumpThread>> ReadThreads(const ProcessMemory& memory,
                                                    const PythonInterpreter& interpreter,
                                                    std::vector<PythonThread>& walked) {
  PythonFrameWalker walker(memory, interpreter);
  CodeObjectReader reader(memory, interpreter);
  absl::Status last_error = absl::OkStatus();
  for (int attempt = 1; attempt <= kWalkAttempts; ++attempt) {
    const bool last_attempt = attempt == kWalkAttempts;
    absl::StatusOr<std::vector<PythonThread>> threads = walker.WalkAllThreads();
    if (!threads.ok()) {
      if (!IsTransient(threads.status())) return threads.status();
      last_error = threads.status();
      continue;
    }
    std::vector<DumpThread> out;
    bool complete = true;
    for (const PythonThread& thread : *threads) {
      if (!thread.frames_status.ok()) {
        if (!IsTransient(thread.frames_status)) return thread.frames_status;
        complete = false;
        last_error = thread.frames_status;
      }
      DumpThread dumped;
      if (thread.native_thread_id) dumped.tid = static_cast<pid_t>(*thread.native_thread_id);
      dumped.pthread_id = thread.thread_id;
      dumped.holds_gil = thread.holds_gil;
      dumped.truncated = thread.truncated;
      for (const PythonFrame& frame : thread.frames) {
        absl::StatusOr<PythonFrameSymbol> symbol =
            reader.Symbolize(frame.code_address, frame.stamp, frame.instr_offset);
        if (symbol.ok()) {
          dumped.frames.push_back({symbol->name, symbol->filename, symbol->line});
          continue;
        }
        if (!IsTransient(symbol.status())) return symbol.status();
        complete = false;
        last_error = symbol.status();
        dumped.frames.push_back({"<unreadable>", std::string(symbol.status().message()), -1});
      }
      if (!thread.frames_status.ok()) {
        // The callers below the break are not known; say so once.
        dumped.frames.push_back({"<unreadable>", std::string(thread.frames_status.message()), -1});
      }
      out.push_back(std::move(dumped));
    }
    if (complete || last_attempt) {
      walked = std::move(*threads);
      return out;
    }
    // A busy thread (an event loop switching tasks thousands of times a
    // second) reuses its frames as they are read; a moment later it is
    // elsewhere in its cycle.
    std::this_thread::sleep_for(kWalkRetryPause);
  }
  return absl::Status(last_error.code(),
                      absl::StrCat("the Python threads changed under every one of ", kWalkAttempts,
                                   " walks; last: ", last_error.message()));
}

// The pending asyncio tasks, named and symbolized for the report. The tasks
// change as they are read; what no longer makes sense is counted, not fatal.
absl::Status ReadAsyncioTasks(const ProcessMemory& memory, const PythonInterpreter& interpreter,
                              const std::vector<PythonThread>& walked, DumpReport& report) {
  absl::StatusOr<PythonObjectLayout> layout =
      PythonObjectLayoutFor(interpreter.version, interpreter.layout);
  if (!layout.ok()) return layout.status();
  PythonObjectReader objects(memory, interpreter, *layout);
  CodeObjectReader code(memory, interpreter);
  AsyncioTaskReader reader(objects, code, interpreter);
  absl::StatusOr<AsyncioSnapshot> snapshot = reader.ReadTasks(walked);
  for (int attempt = 1; attempt < kAsyncioAttempts && snapshot.ok() && snapshot->unreadable > 0;
       ++attempt) {
    std::this_thread::sleep_for(kWalkRetryPause);
    absl::StatusOr<AsyncioSnapshot> again = reader.ReadTasks(walked);
    if (!again.ok()) break;
    if (LegibleTasks(*again) > LegibleTasks(*snapshot)) snapshot = std::move(again);
  }
  if (!snapshot.ok()) return snapshot.status();
  absl::flat_hash_map<uint64_t, std::string> names;
  for (const AsyncioTask& task : snapshot->tasks) names[task.address] = task.name;
  for (const AsyncioTask& task : snapshot->tasks) {
    DumpAsyncioTask out;
    out.name = task.name;
    out.running = task.running;
    for (const PythonFrameSymbol& frame : task.stack) {
      out.stack.push_back({frame.name, frame.filename, frame.line});
    }
    for (uint64_t awaiter : task.awaited_by) out.awaited_by.push_back(names[awaiter]);
    report.asyncio_tasks.push_back(std::move(out));
  }
  // Running tasks first, then by name, so the output reads the same run to run.
  std::stable_sort(report.asyncio_tasks.begin(), report.asyncio_tasks.end(),
                   [](const DumpAsyncioTask& a, const DumpAsyncioTask& b) {
                     if (a.running != b.running) return a.running;
                     return a.name < b.name;
                   });
  report.asyncio_unreadable = snapshot->unreadable;
  return absl::OkStatus();
}

// The message for an error reading process `pid`: an exit, a refusal, or the rest.
std::string ReadFailure(pid_t pid, const absl::Status& status) {
  if (status.code() == absl::StatusCode::kNotFound && !ProcessExists(pid)) {
    return absl::StrCat("process ", pid, " exited while it was being read");
  }
  if (status.code() == absl::StatusCode::kPermissionDenied) {
    return absl::StrCat(status.message(),
                        "; pystrobe dump must run as root (it needs CAP_SYS_PTRACE to read "
                        "another process's memory)");
  }
  return absl::StrCat("reading process ", pid, ": ", status.message());
}

}  // namespace

int RunDumpCommand(const std::vector<std::string>& args) {
  absl::StatusOr<DumpOptions> parsed = ParseDumpOptions(args);
  if (!parsed.ok()) {
    return UsageError("dump", parsed.status());
  }
  const DumpOptions& options = *parsed;
  if (options.help) {
    fputs(DumpUsage(), stdout);
    return kExitOk;
  }
  const pid_t pid = options.pid;
  if (!ProcessExists(pid)) {
    return UsageError("dump", absl::StrCat("no process with pid ", pid));
  }

  // Without CAP_SYS_PTRACE over the target even its maps are closed to us:
  // say so, rather than that it runs no Python.
  const std::string maps = procfs::PidPath(pid, "maps");
  if (absl::IsPermissionDenied(procfs::ReadSmallFile(maps).status())) {
    return Fail("dump",
                absl::StrCat("cannot read ", maps,
                             ": permission denied; pystrobe dump must run as root (it needs "
                             "CAP_SYS_PTRACE to read another process's memory)"));
  }

  absl::StatusOr<PythonInterpreter> interpreter = FindPythonInterpreter(pid);
  if (!interpreter.ok()) {
    const absl::Status& status = interpreter.status();
    if (status.code() == absl::StatusCode::kUnimplemented) {
      return Fail("dump",
                  absl::StrCat("process ", pid,
                               " runs a CPython pystrobe does not support: ", status.message()));
    }
    if (status.code() == absl::StatusCode::kNotFound && ProcessExists(pid)) {
      return Fail("dump", absl::StrCat("process ", pid, " (", CommandLine(pid),
                                       ") is not a CPython process: ", status.message()));
    }
    return Fail("dump", ReadFailure(pid, status));
  }

  RemoteProcessMemory memory(pid);
  std::vector<PythonThread> walked;
  absl::StatusOr<std::vector<DumpThread>> threads = ReadThreads(memory, *interpreter, walked);
  if (!threads.ok()) return Fail("dump", ReadFailure(pid, threads.status()));
  if (absl::Status mapped = MapPthreadIds(memory, pid, walked, *threads); !mapped.ok()) {
    if (!IsTransient(mapped) && !ProcessExists(pid)) return Fail("dump", ReadFailure(pid, mapped));
    fprintf(stderr, "pystrobe dump: warning: thread ids unknown, shown as pthread_t: %s\n",
            std::string(mapped.message()).c_str());
  }
  for (DumpThread& thread : *threads) ReadThreadProcInfo(pid, thread);
  // Threads in the order they were born: the main thread (tid = pid) first.
  std::stable_sort(threads->begin(), threads->end(), [](const DumpThread& a, const DumpThread& b) {
    if (a.tid.has_value() != b.tid.has_value()) return a.tid.has_value();
    return a.tid.value_or(0) < b.tid.value_or(0);
  });

  DumpReport report;
  report.pid = pid;
  report.command_line = CommandLine(pid);
  report.python_version = interpreter->version.ToString();
  report.python_binary = interpreter->binary_path;
  report.free_threaded = interpreter->layout.abi.free_threaded != 0;
  report.threads = std::move(*threads);
  if (options.asyncio) {
    report.asyncio = true;
    if (absl::Status status = ReadAsyncioTasks(memory, *interpreter, walked, report);
        !status.ok()) {
      if (!IsTransient(status)) return Fail("dump", ReadFailure(pid, status));
      fprintf(stderr, "pystrobe dump: warning: asyncio tasks unreadable: %s\n",
              std::string(status.message()).c_str());
    }
  }
  const std::string text = options.json ? FormatDumpJson(report) : FormatDumpText(report);
  fwrite(text.data(), 1, text.size(), stdout);
  return fflush(stdout) == 0 ? kExitOk : kExitFailure;
}

}  // namespace pystrobe
