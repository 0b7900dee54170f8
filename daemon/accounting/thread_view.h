// The per-thread view of one process that `top --pid` shows, local or
// answered by the daemon. The accounting counts a process once it runs: one
// asleep since accounting started has no entry yet, so its name, its threads
// and its resident memory come from /proc until it runs.
#ifndef PYSTROBE_DAEMON_ACCOUNTING_THREAD_VIEW_H_
#define PYSTROBE_DAEMON_ACCOUNTING_THREAD_VIEW_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "daemon/accounting/process_counters.h"

namespace pystrobe {

struct PerThreadView {
  std::string comm;                        // "" when neither knows the process
  std::optional<uint64_t> resident_bytes;  // none when neither knows it
  // The accounting's threads, then those /proc lists that it has not seen
  // run, with zero counters.
  std::vector<ThreadCounters> threads;
};

PerThreadView ReadPerThreadView(const AccountingReader& reader, uint32_t pid);

// "pid 1234 (python3), per thread".
std::string PerThreadTitle(uint32_t pid, const PerThreadView& view);

// What /proc says of a process: its name, its resident memory (VmRSS) and
// its threads but `known_tids`, with their names (a thread's name is a file
// read: a process may have thousands). Empty fields where it could not be read.
struct ProcProcess {
  std::string comm;
  std::optional<uint64_t> resident_bytes;
  std::vector<ThreadCounters> threads;  // counters zero
};
ProcProcess ReadProcProcess(uint32_t pid, const absl::flat_hash_set<uint32_t>& known_tids);

// The parts of the view, apart for tests: VmRSS of a /proc/PID/status text,
// and the view from both sources (`proc` read without the accounted threads).
std::optional<uint64_t> VmRssBytes(absl::string_view status);
PerThreadView MergeThreadViews(const std::vector<ProcessCounters>& accounted,
                               std::vector<ThreadCounters> accounted_threads,
                               const ProcProcess& proc);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_ACCOUNTING_THREAD_VIEW_H_
