#include "daemon/service/profile_pages.h"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "daemon/reports/html_report.h"
#include "daemon/reports/recording_reader.h"
#include "model/frame_names.h"

namespace pystrobe {
namespace {

// Processes listed per window on the index; the rest are counted.
constexpr size_t kProcessesPerWindow = 50;

constexpr char kIndexHead[] = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>pystrobe: recent windows</title>
<style>
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 1.5em; }
h2 { font-size: 1.1em; margin-top: 1.5em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { padding: 2px 10px; text-align: right; }
td.name { text-align: left; font-family: monospace; }
th { background: #f3f3f3; }
p.note { color: #555; }
</style>
</head>
<body>
<h1>pystrobe: recent windows</h1>
)html";

struct ProcessSamples {
  std::string comm;
  uint32_t pid = 0;
  uint64_t samples = 0;
};

std::vector<ProcessSamples> ProcessesOf(const Profile& profile) {
  absl::flat_hash_map<uint32_t, ProcessSamples> by_pid;
  for (const ProfileStack& stack : profile.stacks()) {
    for (const Frame& frame : stack.frames) {
      if (frame.kind != FrameKind::kProcess) continue;
      if (std::optional<ProcessFrameName> process = ParseProcessFrameName(frame.name)) {
        ProcessSamples& entry = by_pid[process->pid];
        entry.pid = process->pid;
        entry.comm = std::string(process->comm);
        entry.samples += stack.count;
      }
      break;
    }
  }
  std::vector<ProcessSamples> processes;
  for (auto& [pid, entry] : by_pid) processes.push_back(std::move(entry));
  std::sort(processes.begin(), processes.end(), [](const auto& a, const auto& b) {
    return a.samples != b.samples ? a.samples > b.samples : a.pid < b.pid;
  });
  return processes;
}

PageResponse Error(int status, std::string_view message) {
  PageResponse response;
  response.status = status;
  response.content_type = "text/plain; charset=utf-8";
  response.body = absl::StrCat(std::string(message), "\n");
  return response;
}

}  // namespace

std::optional<PageResponse> ProfilePages::Get(std::string_view path, std::string_view query) const {
  if (path == "/") return Index();
  if (path == "/profile") return Window(query);
  return std::nullopt;
}

PageResponse ProfilePages::Index() const {
  PageResponse response;
  std::string& page = response.body;
  page = kIndexHead;
  std::vector<std::shared_ptr<const ProfileWindow>> windows = windows_->Windows();
  if (windows.empty()) {
    page.append(
        "<p class=\"note\">No window has ended yet; the first one will be here when "
        "it does.</p>\n");
  }
  for (const auto& window : windows) {
    uint64_t n = window->sequence;
    absl::StrAppendFormat(
        &page,
        "<h2 class=\"window\" data-window=\"%d\">Window %d: %s, %s, %d %s</h2>\n"
        "<p><a href=\"/profile?window=%d\">all processes</a>%s</p>\n",
        n, n, absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", window->start, absl::UTCTimeZone()),
        absl::FormatDuration(window->end - window->start), window->profile.total_count(),
        HtmlEscape(window->profile.count_unit), n,
        window->memory ? absl::StrFormat(" &middot; <a href=\"/profile?window=%d&amp;memory=1\">"
                                         "memory growth</a>",
                                         n)
                       : "");
    std::vector<ProcessSamples> processes = ProcessesOf(window->profile);
    page.append(
        "<table class=\"processes\">\n<tr><th style=\"text-align:left\">process</th>"
        "<th>pid</th><th>samples</th><th>share</th></tr>\n");
    uint64_t total = window->profile.total_count();
    for (size_t i = 0; i < processes.size() && i < kProcessesPerWindow; ++i) {
      const ProcessSamples& process = processes[i];
      absl::StrAppendFormat(
          &page,
          "<tr class=\"process-row\" data-pid=\"%d\"><td class=\"name\"><a "
          "href=\"/profile?window=%d&amp;pid=%d\">%s</a></td><td>%d</td><td>%d</td>"
          "<td>%.2f%%</td></tr>\n",
          process.pid, n, process.pid, HtmlEscape(process.comm), process.pid, process.samples,
          total == 0 ? 0.0 : 100.0 * static_cast<double>(process.samples) / total);
    }
    page.append("</table>\n");
    if (processes.size() > kProcessesPerWindow) {
      absl::StrAppendFormat(&page, "<p class=\"note\">%d more processes.</p>\n",
                            processes.size() - kProcessesPerWindow);
    }
  }
  page.append("</body>\n</html>\n");
  return response;
}

PageResponse ProfilePages::Window(std::string_view query) const {
  std::optional<uint64_t> sequence;
  std::optional<uint32_t> pid;
  bool memory = false;
  for (absl::string_view pair :
       absl::StrSplit(absl::string_view(query.data(), query.size()), '&', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(pair, '=');
    uint64_t number = 0;
    if (!absl::SimpleAtoi(kv.second, &number)) {
      return Error(400, absl::StrCat("bad query: ", std::string(pair),
                                     " (window=N, pid=P and memory=1 take numbers)"));
    }
    if (kv.first == "window") {
      sequence = number;
    } else if (kv.first == "pid" && number <= UINT32_MAX) {
      pid = static_cast<uint32_t>(number);
    } else if (kv.first == "memory") {
      memory = number != 0;
    } else {
      return Error(400, absl::StrCat("bad query: ", std::string(pair)));
    }
  }
  if (!sequence) return Error(400, "which window? /profile?window=N (see /)");
  std::shared_ptr<const ProfileWindow> window = windows_->Find(*sequence);
  if (window == nullptr) {
    return Error(404, absl::StrCat("window ", *sequence,
                                   " is not among the recent ones kept in memory (see /; older "
                                   "windows are in the profile directory)"));
  }
  if (memory && !window->memory) {
    return Error(404, absl::StrCat("window ", *sequence, " has no memory profile"));
  }
  const Profile& profile = memory ? *window->memory : window->profile;
  Recording recording = RecordingFromProfile(profile, pid);
  if (recording.stacks.empty()) {
    return Error(404, pid ? absl::StrCat("no samples of pid ", *pid, " in window ", *sequence)
                          : absl::StrCat("window ", *sequence, " holds no samples"));
  }
  HtmlReportOptions options;
  // The daemon reads any file; the names in a profile come from the
  // processes it watches, which may name any file (a code object's
  // co_filename is the program's to set). So the page shows sampled lines
  // without their text: `pystrobe report --html` on the window's pprof file
  // reads them with the user's own rights.
  options.read_sources = false;
  options.title =
      absl::StrCat("window ", *sequence, pid ? absl::StrCat(", pid ", *pid) : "",
                   memory ? ", memory growth" : "", " (",
                   absl::FormatTime("%H:%M:%S UTC", window->start, absl::UTCTimeZone()), ")");
  std::ostringstream out;
  absl::Status written = WriteHtmlReport(recording, options, out);
  if (!written.ok()) return Error(500, std::string(written.message()));
  PageResponse response;
  response.body = out.str();
  return response;
}

}  // namespace pystrobe
