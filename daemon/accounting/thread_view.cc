#include "daemon/accounting/thread_view.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/process_files.h"
#include "daemon/procfs/small_file.h"

namespace pystrobe {

std::optional<uint64_t> VmRssBytes(absl::string_view status) {
  std::optional<absl::string_view> line = procfs::StatusField(status, "VmRSS");
  if (!line) return std::nullopt;  // a kernel thread, or a zombie
  absl::string_view kib_text = *line;
  if (!absl::ConsumeSuffix(&kib_text, " kB")) return std::nullopt;
  uint64_t kib = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(kib_text), &kib)) return std::nullopt;
  return kib * 1024;
}

ProcProcess ReadProcProcess(uint32_t pid, const absl::flat_hash_set<uint32_t>& known_tids) {
  ProcProcess out;
  out.comm = procfs::ReadComm(procfs::PidPath(pid, "comm"));
  // Gone, or not ours to read: no figure, as for a kernel thread.
  out.resident_bytes =
      VmRssBytes(procfs::ReadSmallFile(procfs::PidPath(pid, "status")).value_or(""));
  for (int32_t task : procfs::ReadTaskIds(pid)) {
    uint32_t tid = static_cast<uint32_t>(task);
    if (known_tids.contains(tid)) continue;
    out.threads.push_back(ThreadCounters{
        .pid = pid, .tid = tid, .comm = procfs::ReadComm(procfs::TaskPath(pid, tid, "comm"))});
  }
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
