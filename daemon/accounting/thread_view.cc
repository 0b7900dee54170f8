#include "daemon/accounting/thread_view.h"

#include <dirent.h>

#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace pystrobe {
namespace {

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string CommFile(const std::string& path) {
  return std::string(absl::StripTrailingAsciiWhitespace(ReadSmallFile(path)));
}

}  // namespace

std::optional<uint64_t> VmRssBytes(absl::string_view status) {
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, "VmRSS:")) continue;
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumeSuffix(&line, " kB")) return std::nullopt;
    uint64_t kib = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kib)) return std::nullopt;
    return kib * 1024;
  }
  return std::nullopt;  // a kernel thread, or a zombie
}

ProcProcess ReadProcProcess(uint32_t pid, const absl::flat_hash_set<uint32_t>& known_tids) {
  ProcProcess out;
  const std::string dir = absl::StrCat("/proc/", pid);
  out.comm = CommFile(dir + "/comm");
  out.resident_bytes = VmRssBytes(ReadSmallFile(dir + "/status"));
  DIR* tasks = opendir((dir + "/task").c_str());
  if (tasks == nullptr) return out;
  while (const dirent* entry = readdir(tasks)) {
    uint32_t tid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &tid)) continue;  // "." and ".."
    if (known_tids.contains(tid)) continue;
    out.threads.push_back(ThreadCounters{
        .pid = pid, .tid = tid, .comm = CommFile(absl::StrCat(dir, "/task/", tid, "/comm"))});
  }
  closedir(tasks);
  return out;
}

PerThreadView MergeThreadViews(const std::vector<ProcessCounters>& accounted,
                               std::vector<ThreadCounters> accounted_threads,
                               const ProcProcess& proc) {
  PerThreadView view;
  const ProcessCounters* process = accounted.empty() ? nullptr : &accounted[0];
  view.comm = process != nullptr ? process->comm : proc.comm;
  if (process != nullptr && process->memory.known()) {
    view.resident_bytes = process->memory.resident_bytes();
  } else {
    view.resident_bytes = proc.resident_bytes;
  }
  view.threads = std::move(accounted_threads);
  view.threads.insert(view.threads.end(), proc.threads.begin(), proc.threads.end());
  return view;
}

std::string PerThreadTitle(uint32_t pid, const PerThreadView& view) {
  return absl::StrCat("pid ", pid, view.comm.empty() ? "" : absl::StrCat(" (", view.comm, ")"),
                      ", per thread");
}

PerThreadView ReadPerThreadView(const AccountingReader& reader, uint32_t pid) {
  std::vector<ThreadCounters> counted = reader.Threads(pid);
  absl::flat_hash_set<uint32_t> counted_tids;
  for (const ThreadCounters& thread : counted) counted_tids.insert(thread.tid);
  ProcProcess proc = ReadProcProcess(pid, counted_tids);
  return MergeThreadViews(reader.Processes(pid), std::move(counted), proc);
}

}  // namespace pystrobe
