// What the accounting programs counted, in userspace units: seconds, bytes,
// events. Raw kernel counters (pystrobe_task_counters) become TaskFigures;
// the reader lists processes and threads from the kernel's maps.
#ifndef PYSTROBE_DAEMON_ACCOUNTING_PROCESS_COUNTERS_H_
#define PYSTROBE_DAEMON_ACCOUNTING_PROCESS_COUNTERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/loader/bpf_sampler.h"

namespace pystrobe {

// One thread's or one process's figures over a window.
struct TaskFigures {
  // On-CPU time, split as the kernel's cputime_adjust() splits it: exact
  // total (sum_exec_runtime), divided by the tick-sampled utime:stime ratio.
  double cpu_user_seconds = 0;
  double cpu_system_seconds = 0;
  double runqueue_seconds = 0;   // runnable, waiting for a CPU
  double preempted_seconds = 0;  // the part of runqueue_seconds after a preemption
  double offcpu_io_seconds = 0;
  double offcpu_sleep_seconds = 0;  // includes gil_wait_seconds
  double gil_wait_seconds = 0;      // asleep waiting to take CPython's GIL
  uint64_t voluntary_switches = 0;
  uint64_t involuntary_switches = 0;
  uint64_t minor_faults = 0;
  uint64_t major_faults = 0;
  // The kernel's IO accounting (/proc/PID/io): syscr, rchar, syscw, wchar.
  uint64_t read_calls = 0;
  uint64_t read_bytes = 0;
  uint64_t write_calls = 0;
  uint64_t write_bytes = 0;
  // Off CPU while inside a read- or write-family syscall.
  double read_blocked_seconds = 0;
  double write_blocked_seconds = 0;
  uint64_t block_io_bytes = 0;
  uint64_t block_io_ops = 0;
  double gc_seconds = 0;
  uint64_t gc_collections = 0;
  // Only with --syscalls: every read/write-family syscall, entry to exit.
  uint64_t sys_read_calls = 0;
  uint64_t sys_read_bytes = 0;
  double sys_read_seconds = 0;
  uint64_t sys_write_calls = 0;
  uint64_t sys_write_bytes = 0;
  double sys_write_seconds = 0;

  double cpu_seconds() const { return cpu_user_seconds + cpu_system_seconds; }
  uint64_t context_switches() const { return voluntary_switches + involuntary_switches; }
};

TaskFigures FiguresFrom(const pystrobe_task_counters& raw);
// `now - before`, field by field (a field that went backwards gives 0).
pystrobe_task_counters CountersSince(const pystrobe_task_counters& now,
                                     const pystrobe_task_counters& before);

// A process's resident memory as the kernel counts it (pystrobe_process_memory).
struct ResidentMemory {
  uint64_t anon_bytes = 0;
  uint64_t file_bytes = 0;
  uint64_t shmem_bytes = 0;
  uint64_t swap_bytes = 0;
  uint64_t peak_bytes = 0;  // VmHWM
  uint64_t peak_ns = 0;     // CLOCK_MONOTONIC ns when the peak was first seen
  uint64_t read_ns = 0;     // CLOCK_MONOTONIC ns of the kernel's last read; 0: never

  bool known() const { return read_ns != 0; }
  uint64_t resident_bytes() const { return anon_bytes + file_bytes + shmem_bytes; }
};
ResidentMemory MemoryFrom(const pystrobe_process_memory& raw);

struct ProcessCounters {
  uint32_t pid = 0;
  uint64_t start_ns = 0;  // leader's start_boottime: with pid, the process's identity
  std::string comm;
  pystrobe_task_counters raw = {};
  uint32_t threads = 0;  // threads seen in the window
  bool exited = false;
  bool oom_killed = false;  // the kernel's OOM killer chose it
  ResidentMemory memory;
};

struct ThreadCounters {
  uint32_t pid = 0;
  uint32_t tid = 0;
  std::string comm;
  pystrobe_task_counters raw = {};
};

// Lost accounting, summed over CPUs (see enum pystrobe_accounting_drop).
struct AccountingDrops {
  uint64_t process_map_full = 0;
  uint64_t thread_map_full = 0;
  uint64_t no_thread_state = 0;
};

// Reads the accounting maps of a loaded BpfSampler, which must outlive it.
class AccountingReader {
 public:
  explicit AccountingReader(BpfSampler::AccountingMaps maps) : maps_(maps) {}

  // Every process counted so far, exited ones included; or only `pid`'s
  // (several entries if the pid was reused).
  std::vector<ProcessCounters> Processes(std::optional<uint32_t> pid = std::nullopt) const;
  // Live threads, all or of process `pid`.
  std::vector<ThreadCounters> Threads(std::optional<uint32_t> pid = std::nullopt) const;
  // Deletes an exited process's entry once its final figures were read.
  absl::Status Forget(uint32_t pid, uint64_t start_ns);
  AccountingDrops Drops() const;

 private:
  BpfSampler::AccountingMaps maps_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_ACCOUNTING_PROCESS_COUNTERS_H_
