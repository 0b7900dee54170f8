#include "daemon/accounting/process_counters.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/loader/libbpf_errors.h"
#include "daemon/loader/map_entries.h"

namespace pystrobe {
namespace {

constexpr double kNanosecond = 1e-9;

std::string CommOf(const char (&comm)[PYSTROBE_COMM_LEN]) {
  return std::string(comm, strnlen(comm, PYSTROBE_COMM_LEN));
}

// The fields of pystrobe_task_counters, all u64, as an array.
constexpr size_t kFields = sizeof(pystrobe_task_counters) / sizeof(uint64_t);
static_assert(sizeof(pystrobe_task_counters) == kFields * sizeof(uint64_t));

}  // namespace

TaskFigures FiguresFrom(const pystrobe_task_counters& raw) {
  TaskFigures f;
  double cpu = raw.runtime_ns * kNanosecond;
  uint64_t ticks = raw.utime_ns + raw.stime_ns;
  // No tick landed in the window: the kernel would call it all user time too.
  double user_share = ticks == 0 ? 1.0 : static_cast<double>(raw.utime_ns) / ticks;
  f.cpu_user_seconds = cpu * user_share;
  f.cpu_system_seconds = cpu - f.cpu_user_seconds;
  f.runqueue_seconds = raw.runqueue_ns * kNanosecond;
  f.preempted_seconds = raw.preempted_ns * kNanosecond;
  f.offcpu_io_seconds = raw.offcpu_io_ns * kNanosecond;
  f.offcpu_sleep_seconds = raw.offcpu_sleep_ns * kNanosecond;
  f.gil_wait_seconds = raw.gil_wait_ns * kNanosecond;
  f.voluntary_switches = raw.voluntary_switches;
  f.involuntary_switches = raw.involuntary_switches;
  f.minor_faults = raw.minor_faults;
  f.major_faults = raw.major_faults;
  f.read_calls = raw.read_calls;
  f.read_bytes = raw.read_bytes;
  f.write_calls = raw.write_calls;
  f.write_bytes = raw.write_bytes;
  f.read_blocked_seconds = raw.read_blocked_ns * kNanosecond;
  f.write_blocked_seconds = raw.write_blocked_ns * kNanosecond;
  f.block_io_bytes = raw.block_io_bytes;
  f.block_io_ops = raw.block_io_ops;
  f.gc_seconds = raw.gc_ns * kNanosecond;
  f.gc_collections = raw.gc_collections;
  f.sys_read_calls = raw.sys_read_calls;
  f.sys_read_bytes = raw.sys_read_bytes;
  f.sys_read_seconds = raw.sys_read_ns * kNanosecond;
  f.sys_write_calls = raw.sys_write_calls;
  f.sys_write_bytes = raw.sys_write_bytes;
  f.sys_write_seconds = raw.sys_write_ns * kNanosecond;
  return f;
}

ResidentMemory MemoryFrom(const pystrobe_process_memory& raw) {
  return ResidentMemory{.anon_bytes = raw.anon_bytes,
                        .file_bytes = raw.file_bytes,
                        .shmem_bytes = raw.shmem_bytes,
                        .swap_bytes = raw.swap_bytes,
                        .peak_bytes = raw.peak_bytes,
                        .peak_ns = raw.peak_ns,
                        .read_ns = raw.read_ns};
}

pystrobe_task_counters CountersSince(const pystrobe_task_counters& now,
                                     const pystrobe_task_counters& before) {
  uint64_t a[kFields], b[kFields], out[kFields];
  std::memcpy(a, &now, sizeof(a));
  std::memcpy(b, &before, sizeof(b));
  for (size_t i = 0; i < kFields; ++i) out[i] = a[i] > b[i] ? a[i] - b[i] : 0;
  pystrobe_task_counters result;
  std::memcpy(&result, out, sizeof(result));
  return result;
}

std::vector<ProcessCounters> AccountingReader::Processes(std::optional<uint32_t> pid) const {
  std::vector<ProcessCounters> out;
  absl::StatusOr<MapEntries> entries =
      ReadHashMapEntries(bpf_map__fd(maps_.processes), sizeof(pystrobe_process_key),
                         sizeof(pystrobe_process_counters));
  if (!entries.ok()) return out;
  for (size_t i = 0; i < entries->count; i++) {
    pystrobe_process_key key;
    std::memcpy(&key, entries->key(i), sizeof(key));
    if (pid && key.tgid != *pid) continue;
    pystrobe_process_counters value;
    std::memcpy(&value, entries->value(i), sizeof(value));
    ProcessCounters p;
    p.pid = key.tgid;
    p.start_ns = key.start_ns;
    p.comm = CommOf(value.comm);
    p.raw = value.counters;
    p.threads = value.threads;
    p.exited = value.exit_ns != 0;
    p.oom_killed = value.oom_killed != 0;
    p.memory = MemoryFrom(value.memory);
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<ThreadCounters> AccountingReader::Threads(std::optional<uint32_t> pid) const {
  std::vector<ThreadCounters> out;
  // The kernel's value is the ABI part followed by its own bookkeeping.
  size_t value_size = bpf_map__value_size(maps_.threads);
  if (value_size < sizeof(pystrobe_thread_counters)) return out;
  absl::StatusOr<MapEntries> entries =
      ReadHashMapEntries(bpf_map__fd(maps_.threads), sizeof(uint32_t), value_size);
  if (!entries.ok()) return out;
  for (size_t i = 0; i < entries->count; i++) {
    pystrobe_thread_counters thread;
    std::memcpy(&thread, entries->value(i), sizeof(thread));
    if (pid && thread.tgid != *pid) continue;
    out.push_back(ThreadCounters{.pid = thread.tgid,
                                 .tid = thread.tid,
                                 .comm = CommOf(thread.comm),
                                 .raw = thread.counters});
  }
  return out;
}

absl::Status AccountingReader::Forget(uint32_t pid, uint64_t start_ns) {
  pystrobe_process_key key = {.tgid = pid, ._pad = 0, .start_ns = start_ns};
  if (bpf_map_delete_elem(bpf_map__fd(maps_.processes_writable), &key) != 0 && errno != ENOENT) {
    return LibbpfError(-errno, absl::StrCat("forget process ", pid));
  }
  return absl::OkStatus();
}

AccountingDrops AccountingReader::Drops() const {
  AccountingDrops drops;
  int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return drops;
  std::vector<uint64_t> values(cpus);
  uint64_t sums[PYSTROBE_ACCT_DROP_COUNT] = {};
  for (uint32_t key = 0; key < PYSTROBE_ACCT_DROP_COUNT; ++key) {
    if (bpf_map_lookup_elem(bpf_map__fd(maps_.drops), &key, values.data()) != 0) continue;
    for (uint64_t v : values) sums[key] += v;
  }
  drops.process_map_full = sums[PYSTROBE_ACCT_DROP_PROCESS_MAP_FULL];
  drops.thread_map_full = sums[PYSTROBE_ACCT_DROP_THREAD_MAP_FULL];
  drops.no_thread_state = sums[PYSTROBE_ACCT_DROP_NO_THREAD_STATE];
  return drops;
}

}  // namespace pystrobe
