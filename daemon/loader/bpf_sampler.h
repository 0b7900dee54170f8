// The sampler's BPF object, from its embedded skeleton to attached programs:
// Open, Configure, Load, Attach, then Poll until done. One instance per
// recording; destroying it detaches everything.
#ifndef PYSTROBE_DAEMON_LOADER_BPF_SAMPLER_H_
#define PYSTROBE_DAEMON_LOADER_BPF_SAMPLER_H_

#include <bpf/libbpf.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/loader/cpu_clock_events.h"
#include "daemon/loader/map_counts.h"
#include "daemon/loader/sampling_clock.h"
#include "daemon/loader/unwind_maps.h"

struct pystrobe_sampler;  // the generated skeleton

namespace pystrobe {

// Set before load; the kernel side reads these as constants.
struct SamplerConfig {
  // Keep only processes added with AddTargetPid (else the whole system).
  bool filter_pids = false;
  // With filter_pids, also keep processes in the cgroups added with
  // AddTargetCgroup and in their descendants.
  bool filter_cgroups = false;
  // Children of targets become targets as they are born.
  bool follow_children = false;
  // Python frames walked per sample (1 to PYSTROBE_MAX_PYTHON_FRAMES).
  int python_max_frames = 128;
  // Follow threads off CPU: each interval comes back as an OFFCPU record.
  bool offcpu = false;
  // Whole native stacks of CPython processes too (record --native); else
  // only their native leaf, which is all a stack without --native shows.
  bool python_native_stacks = false;
  // Kernel memory for native unwind tables (rows and page entries); 0 keeps
  // native unwinding off and the maps at one entry. Processes handed to
  // unwind_maps() are then walked with tables, others with frame pointers.
  uint64_t native_unwind_bytes = 0;
  // Every process is walked with tables, not only CPython ones (record
  // --native): one not read yet gets its pc and one [unknown].
  bool native_unwind_all = false;
  // Sample the moments memory becomes resident (kmem:rss_stat): a MEMORY
  // record every memory_sample_bytes of growth on average, weighted in bytes.
  bool memory_growth = false;
  uint32_t memory_sample_bytes = 512 * 1024;
  // Sample allocations (record --allocations): an ALLOC record every
  // alloc_sample_bytes allocated on average, FREE when a sampled block goes.
  // The probes come with AttachAllocationProbes (uprobes on libc) or
  // AttachAllocationLibrary (the preloaded library samples, the kernel
  // takes the stacks).
  bool allocations = false;
  uint32_t alloc_sample_bytes = 512 * 1024;
  // Take the stack of each thread of an OOM-killed target as it takes the
  // SIGKILL (signal:signal_deliver): an OOM_KILLED record each, for the
  // daemon's OOM reports. Off, the program is pruned at load (its
  // verification alone takes 0.16 s) and not attached.
  bool oom_kill_stacks = false;
  // Count what each thread does (stat, top, the daemon): the accounting
  // programs, attached by AttachAccounting and AttachPythonGcProbes. Off,
  // they are not loaded at all (`record` counts nothing per process; their
  // verification was a fifth of its start-up), but for the OOM watch's.
  bool accounting = false;
  // The cpu-clock's mean rate: what the ring buffer is sized for.
  int rate_hz = 99;
};

// The events ring buffer's size for `config` on a host of `cpus` CPUs: two
// seconds of every CPU's ticks at 2.5 KiB a sample (100 Python frames and
// their native leaf take 1.8 KiB), at least 512 KiB a CPU; 8 MiB at least
// where records come with events rather than ticks (off-CPU intervals,
// allocations, memory growth), however fast. A power of two from 1 MiB to
// 256 MiB. No bigger than that: a record is written where the ring was
// written a lap before, and on some hosts those lines cost more the longer
// the lap (bpf/sampler_output.bpf.h).
uint32_t EventsRingBytes(const SamplerConfig& config, int cpus);

// The default of SamplerConfig::native_unwind_bytes where unwinding is on:
// python3.11, libc, numpy and OpenBLAS together take about 1 MiB, the
// binaries a torch training loop walks through about 9 MiB.
inline constexpr uint64_t kDefaultNativeUnwindBytes = uint64_t{32} << 20;

// What happened to samples in the kernel, summed over CPUs.
struct SamplerCounters {
  uint64_t taken = 0;                  // cpu-clock samples, before any filter
  uint64_t idle = 0;                   // samples of the idle task, not sent
  uint64_t filtered = 0;               // samples of processes outside the targets
  uint64_t sent = 0;                   // samples written to the ring buffer
  uint64_t python_walked = 0;          // samples with a Python walk
  uint64_t python_truncated = 0;       // walks that hit the depth limit
  uint64_t python_at_exec = 0;         // processes known as CPython from their exec
  uint64_t python_codes_sent = 0;      // code objects copied out of sampled processes
  uint64_t python_codes_deferred = 0;  // copies put off: the copy budget, a faulted read
  uint64_t python_code_copy_ns = 0;    // in-kernel time spent making and sending copies
  uint64_t offcpu_sent = 0;            // off-CPU intervals sent
  uint64_t native_complete = 0;        // native walks with tables to the outermost frame
  uint64_t native_jit = 0;             // ... that ended in JIT code
  uint64_t native_truncated = 0;       // ... deeper than a sample holds
  uint64_t native_through_jit = 0;     // ... that went on past JIT code
  uint64_t memory_sent = 0;            // resident-growth samples sent
  uint64_t memory_retaken = 0;         // ... taken twice (a tick overwrote the first)
  uint64_t memory_lost = 0;            // ... lost (overwritten twice)
  uint64_t allocations_sent = 0;       // sampled allocations sent
  uint64_t frees_sent = 0;             // frees of sampled blocks sent
  uint64_t oom_killed_sent = 0;        // stacks of OOM-killed threads sent
  uint64_t allocations_untracked = 0;  // sampled blocks whose free goes unseen
  uint64_t finalizations_sent = 0;     // CPython processes seen entering finalization
  // Per kernel drop reason (see kDropReasons in drop_reasons.h).
  std::array<uint64_t, PYSTROBE_DROP_REASON_COUNT> dropped = {};
  // The sampling clock's redraws of a CPU's period, and those the kernel
  // refused (that CPU kept its previous period until the next redraw).
  uint64_t period_redraws = 0;
  uint64_t period_redraws_failed = 0;
};

class BpfSampler {
 public:
  // Called with each ring buffer record, in the order the kernel wrote them.
  using RecordHandler = std::function<void(std::span<const uint8_t>)>;

  // Opens the embedded BPF object; nothing is in the kernel yet.
  static absl::StatusOr<std::unique_ptr<BpfSampler>> Open();
  ~BpfSampler();
  BpfSampler(const BpfSampler&) = delete;
  BpfSampler& operator=(const BpfSampler&) = delete;

  // Sets the load-time constants. Only before Load().
  absl::Status Configure(const SamplerConfig& config);
  // Loads and verifies the programs and creates the maps.
  absl::Status Load();
  // Adds a process (thread group id) to the in-kernel filter. After Load().
  absl::Status AddTargetPid(uint32_t pid);
  // Adds a cgroup v2 group (and its descendants) to the in-kernel filter, or
  // takes it out. After Load(); needs filter_cgroups.
  absl::Status AddTargetCgroup(uint64_t cgroup_id);
  absl::Status RemoveTargetCgroup(uint64_t cgroup_id);
  // Lets the kernel walk the Python frames of process `pid`. After Load().
  absl::Status AddPythonProcess(uint32_t pid, const pystrobe_python_process& process);
  // Lets the kernel walk every process that later execs `key`'s file from
  // its first sample. After Load().
  absl::Status AddPythonBinary(const pystrobe_python_binary_key& key,
                               const pystrobe_python_binary& binary);
  // Starts sampling: opens a cpu-clock event on each online CPU, ticking
  // `rate_hz` times a second on average at random intervals (SamplingClock),
  // and attaches the programs. Records go to `handler` during Poll().
  absl::Status Attach(int rate_hz, RecordHandler handler);
  // Starts sampling on one perf event the caller opened and keeps open
  // (a software event on one thread, say) instead of Attach()'s per-CPU
  // clocks: each of its overflows runs the cpu sampler once. For samples
  // taken at moments the caller chooses: the BPF tests (tests/bpf/) sample
  // their own thread while it runs on memory they crafted. Records go to
  // `handler` during Poll() and Drain(). Once per sampler, instead of Attach().
  absl::Status AttachToPerfEvent(int perf_event_fd, RecordHandler handler);
  // An fd readable when the ring buffer has records that asked to wake the
  // reader (for a caller's own epoll set); -1 before Attach.
  int ring_buffer_fd() const;
  // Hands waiting records to the handler, waiting up to `timeout` for some,
  // and returns after about `timeout` even while records keep coming.
  // Interrupted by a signal: returns OK.
  absl::Status Poll(absl::Duration timeout);
  // Hands every record still in the ring buffer to the handler, however
  // long it takes: the last step of a recording, after Detach().
  absl::Status Drain();
  // Stops sampling (detaches the perf events) so Drain() gets the rest.
  void Detach();

  SamplerCounters ReadCounters() const;

  // The maps of the native unwinder, for UnwindMaps. After Load().
  UnwindMaps::Maps unwind_maps() const;

  // How full a hash map is: entries now, out of max_entries.
  struct MapFill {
    std::string name;
    uint32_t entries = 0;
    uint32_t max_entries = 0;
  };
  // Every hash map of the object (targets, CPython processes, accounting),
  // as the kernel counts them (MapEntryCounter, opened at the first call)
  // or, on a kernel that cannot, by walking their keys: call it every few
  // seconds, not per sample.
  std::vector<MapFill> ReadMapFill();

  // ---- Accounting: per-process and per-thread counters. ------------------
  // The maps the accounting programs (bpf/accounting*.bpf.c) fill; AccountingReader reads them.
  struct AccountingMaps {
    const bpf_map* threads;       // tid -> pystrobe_thread_counters (+ kernel state)
    const bpf_map* processes;     // pystrobe_process_key -> pystrobe_process_counters
    bpf_map* processes_writable;  // the same map, for deleting exited processes
    const bpf_map* drops;         // per-CPU enum pystrobe_accounting_drop -> u64
  };
  struct AccountingOptions {
    // Also attach sys_enter/sys_exit for the sys_* figures. Off by default:
    // any syscall tracepoint puts every syscall of every task on the
    // kernel's slow path.
    bool syscalls = false;
  };
  // Starts counting: attaches the scheduler, block and exit programs (and
  // the syscall ones if asked). Counters cover the time from this call on.
  // After Load().
  absl::Status AttachAccounting(AccountingOptions options);
  // Puts uprobes on the allocator of `libc` (a path): malloc, calloc,
  // realloc (entry and return) and free, in process `pid` only (-1: every
  // process that maps it: each of their calls then traps). Needs
  // allocations in the config.
  absl::Status AttachAllocationProbes(const std::string& libc, int pid);
  // Puts uprobes on the two probe functions of the preloaded allocation
  // sampler `library` (a path; preload/alloc_sampler.c), in every process
  // that maps it: they fire only for sampled allocations and their frees,
  // and the targets' are kept. Needs allocations in the config.
  absl::Status AttachAllocationLibrary(const std::string& library);
  // Marks the moment each process running `binary` (a CPython executable or
  // libpython) enters Py_FinalizeEx (Py_Finalize before 3.6): a FINALIZE
  // record, where the in-use view of --allocations is taken. Once per file,
  // as AttachPythonGcProbes. NotFound when `binary` has neither symbol.
  absl::Status AttachPythonFinalizeProbe(const std::string& binary);
  // Marks the processes the kernel's OOM killer chooses (oom_killed in
  // their process_counters entry, with their memory as it was), without the
  // rest of accounting; AttachAccounting does it too. After Load().
  absl::Status AttachOomWatch();
  // Adds CPython GC time in every process that runs `binary` (an interpreter
  // executable or a libpython): from its USDT probes python:gc__start and
  // gc__done, or else from uprobes on the function that runs one collection
  // (gc_collect_main, 3.10+; collect, 3.9). Once per file: a later call, by
  // any path, returns the first one's result. NotFound when `binary` has
  // neither.
  absl::Status AttachPythonGcProbes(const std::string& binary);
  AccountingMaps accounting_maps() const;

 private:
  absl::Status AttachGcUsdt(const std::string& binary);
  absl::Status AttachGcUprobes(const std::string& binary);
  explicit BpfSampler(pystrobe_sampler* skeleton) : skeleton_(skeleton) {}
  static int HandleRecord(void* self, void* data, size_t size);
  // Creates the reader of the events ring buffer, handing records to `handler`.
  absl::Status OpenRingBuffer(RecordHandler handler);
  // Notes the moment sampling starts as every CPU's last tick.
  absl::Status StartTickIntervals();
  // Called after every change to the target maps: voids each CPU's verdict.
  void TargetsChanged();
  // Every program that only SamplerConfig::accounting loads.
  std::vector<bpf_program*> AccountingPrograms() const;

  pystrobe_sampler* skeleton_;
  std::optional<CpuClockEvents> events_;
  std::unique_ptr<SamplingClock> sampling_clock_;  // redraws events_'s periods
  // The redraws of clocks already stopped, still counted.
  struct {
    uint64_t set = 0;
    uint64_t failed = 0;
  } detached_redraws_;
  std::vector<bpf_link*> links_;
  // The finalization probes, detached after every other link: a program
  // that finalizes while the probes come off is then seen entering
  // finalization whenever its teardown's frees are seen (else the in-use
  // view would lose what it held and not know the moment).
  std::vector<bpf_link*> finalize_links_;
  // AttachPythonGcProbes' result per file (device, inode).
  std::map<std::pair<uint64_t, uint64_t>, absl::Status> gc_probes_;
  // AttachPythonFinalizeProbe's result per file (device, inode).
  std::map<std::pair<uint64_t, uint64_t>, absl::Status> finalize_probes_;
  // Null until ReadMapFill's first call, and where the kernel refused it.
  std::unique_ptr<MapEntryCounter> entry_counter_;
  bool entry_counter_opened_ = false;
  bool offcpu_ = false;
  bool memory_growth_ = false;
  bool oom_kill_stacks_ = false;
  bool accounting_ = false;
  ring_buffer* ring_buffer_ = nullptr;
  RecordHandler handler_;
  // When the handler stops the poll in progress.
  absl::Time handler_deadline_ = absl::InfiniteFuture();
  // Time a poll may spend handling records even with a zero timeout.
  static constexpr absl::Duration kMinPollBudget = absl::Milliseconds(50);
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_LOADER_BPF_SAMPLER_H_
