#include "daemon/cli/dump_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/procfs/stat.h"
#include "exporters/json_string.h"

namespace pystrobe {
namespace {

std::string FrameText(const DumpFrame& frame) {
  if (frame.line < 0) return absl::StrCat(frame.name, " (", frame.filename, ")");
  return absl::StrCat(frame.name, " (", frame.filename, ":", frame.line, ")");
}

std::string FrameJson(const DumpFrame& frame) {
  return absl::StrCat("{\"name\":", JsonString(frame.name),
                      ",\"filename\":", JsonString(frame.filename),
                      ",\"line\":", frame.line >= 0 ? absl::StrCat(frame.line) : "null", "}");
}

}  // namespace

absl::string_view ThreadActivity(char proc_state) {
  if (proc_state == 'R') return "running";
  if (proc_state == '?') return "unknown";
  return "idle";
}

char ProcStatState(absl::string_view stat_line) {
  std::optional<procfs::StatLine> stat = procfs::StatLine::Parse(stat_line);
  return stat ? stat->state() : '?';
}

std::string FormatDumpJson(const DumpReport& report) {
  std::string out = absl::StrCat(
      "{\"pid\":", report.pid, ",\"python_version\":", JsonString(report.python_version),
      ",\"free_threaded\":", report.free_threaded ? "true" : "false", ",\"threads\":[");
  for (size_t t = 0; t < report.threads.size(); ++t) {
    const DumpThread& thread = report.threads[t];
    if (t > 0) out += ",";
    absl::StrAppend(
        &out, "{\"tid\":", thread.tid ? absl::StrCat(*thread.tid) : "null",
        ",\"thread_id\":", thread.pthread_id, ",\"name\":", JsonString(thread.name),
        // A free-threaded build runs without a GIL (null) unless an
        // extension turned one on, which a thread may then hold.
        ",\"holds_gil\":", thread.holds_gil ? "true" : (report.free_threaded ? "null" : "false"),
        ",\"state\":", JsonString(std::string(ThreadActivity(thread.proc_state))),
        ",\"proc_state\":", JsonString(std::string(1, thread.proc_state)),
        ",\"truncated\":", thread.truncated ? "true" : "false", ",\"frames\":[");
    for (size_t f = 0; f < thread.frames.size(); ++f) {
      if (f > 0) out += ",";
      out += FrameJson(thread.frames[f]);
    }
    out += "]}";
  }
  out += "]";
  if (report.asyncio) {
    out += ",\"asyncio_tasks\":[";
    for (size_t t = 0; t < report.asyncio_tasks.size(); ++t) {
      const DumpAsyncioTask& task = report.asyncio_tasks[t];
      if (t > 0) out += ",";
      absl::StrAppend(&out, "{\"name\":", JsonString(task.name),
                      ",\"state\":", task.running ? "\"running\"" : "\"pending\"", ",\"stack\":[");
      for (size_t f = 0; f < task.stack.size(); ++f) {
        if (f > 0) out += ",";
        absl::StrAppend(&out, FrameJson(task.stack[f]));
      }
      out += "],\"awaited_by\":[";
      for (size_t a = 0; a < task.awaited_by.size(); ++a) {
        if (a > 0) out += ",";
        out += JsonString(task.awaited_by[a]);
      }
      out += "]}";
    }
    absl::StrAppend(&out, "],\"asyncio_unreadable\":", report.asyncio_unreadable);
  }
  out += "}\n";
  return out;
}

std::string FormatDumpText(const DumpReport& report) {
  std::string out = absl::StrCat(
      "Process ", report.pid, ": ", report.command_line, "\n", "Python v", report.python_version,
      report.free_threaded ? " free-threaded, no GIL" : "", " (", report.python_binary, ")\n");
  for (const DumpThread& thread : report.threads) {
    const std::string id =
        thread.tid ? absl::StrCat(*thread.tid) : absl::StrFormat("0x%x", thread.pthread_id);
    absl::StrAppend(&out, "\nThread ", id, " \"", thread.name, "\" (",
                    ThreadActivity(thread.proc_state), thread.holds_gil ? ", holds the GIL" : "",
                    ")\n");
    if (thread.frames.empty()) out += "    (no Python frames)\n";
    for (const DumpFrame& frame : thread.frames)
      absl::StrAppend(&out, "    ", FrameText(frame), "\n");
    if (thread.truncated) out += "    [truncated]\n";
  }
  if (!report.asyncio) return out;
  if (report.asyncio_tasks.empty()) out += "\nNo asyncio tasks\n";
  for (const DumpAsyncioTask& task : report.asyncio_tasks) {
    absl::StrAppend(&out, "\nTask \"", task.name, "\" (", task.running ? "running" : "pending",
                    ")");
    for (size_t a = 0; a < task.awaited_by.size(); ++a) {
      absl::StrAppend(&out, a == 0 ? ", awaited by " : ", ", "\"", task.awaited_by[a], "\"");
    }
    out += "\n";
    if (task.stack.empty()) out += "    (no coroutine frames)\n";
    for (const DumpFrame& frame : task.stack) absl::StrAppend(&out, "    ", FrameText(frame), "\n");
  }
  if (report.asyncio_unreadable > 0) {
    absl::StrAppend(&out, "\n", report.asyncio_unreadable,
                    " asyncio task(s) or task set(s) changed while being read and are not shown\n");
  }
  return out;
}

}  // namespace pystrobe
