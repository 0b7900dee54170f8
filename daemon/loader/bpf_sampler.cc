#include "daemon/loader/bpf_sampler.h"

#include <bpf/bpf.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/loader/kernel_btf.h"
#include "daemon/loader/libbpf_errors.h"
#include "pystrobe_sampler.skel.h"

namespace pystrobe {
namespace {

constexpr char kKernelBtf[] = "/sys/kernel/btf/vmlinux";

// Sums a per-CPU array of u64 counters into `out` (one entry per key).
absl::Status SumPerCpuCounters(const bpf_map* map, std::span<uint64_t> out) {
  int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return LibbpfError(cpus, "count possible CPUs");
  std::vector<uint64_t> values(cpus);
  for (uint32_t key = 0; key < out.size(); ++key) {
    if (bpf_map__lookup_elem(map, &key, sizeof(key), values.data(),
                             values.size() * sizeof(uint64_t), 0) != 0) {
      return LibbpfError(-errno, absl::StrCat("read map ", bpf_map__name(map)));
    }
    out[key] = 0;
    for (uint64_t value : values) out[key] += value;
  }
  return absl::OkStatus();
}

// Whether this kernel's sched_switch tracepoint passes prev_state (Linux 5.18
// and later: four arguments, see bpf/compat.bpf.h). Assumes it does when the
// BTF cannot say.
bool SchedSwitchHasPrevState(const std::map<std::string, RawTracepointParams>& declared) {
  // (void *, preempt, prev, next[, prev_state])
  auto it = declared.find("sched_switch");
  return it == declared.end() || it->second.count >= 5;
}

// Whether oom:mark_victim passes the victim's task (see bpf/compat.bpf.h).
bool MarkVictimHasTask(const std::map<std::string, RawTracepointParams>& declared) {
  auto it = declared.find("mark_victim");
  return it != declared.end() && it->second.first_is_pointer;
}

}  // namespace

uint32_t EventsRingBytes(const SamplerConfig& config, int cpus) {
  constexpr uint64_t kSampleBytes = 2560, kSecondsHeld = 2;
  constexpr uint64_t kPerCpuAtLeast = 512 << 10, kEventDrivenAtLeast = 8 << 20;
  constexpr uint64_t kSmallest = 1 << 20, kLargest = 256 << 20;
  uint64_t per_cpu = std::max<uint64_t>(
      kPerCpuAtLeast, uint64_t(std::max(config.rate_hz, 1)) * kSecondsHeld * kSampleBytes);
  uint64_t bytes = per_cpu * uint64_t(std::max(cpus, 1));
  if (config.offcpu || config.allocations || config.memory_growth) {
    bytes = std::max(bytes, kEventDrivenAtLeast);
  }
  return static_cast<uint32_t>(std::clamp(std::bit_ceil(bytes), kSmallest, kLargest));
}

absl::StatusOr<std::unique_ptr<BpfSampler>> BpfSampler::Open() {
  if (!std::filesystem::exists(kKernelBtf)) {
    return absl::FailedPreconditionError(
        absl::StrCat("this kernel exposes no BTF at ", kKernelBtf,
                     ": pystrobe needs a kernel built with CONFIG_DEBUG_INFO_BTF=y"));
  }
  pystrobe_sampler* skeleton = pystrobe_sampler__open();
  if (skeleton == nullptr) return LibbpfError(-errno, "open the sampler BPF object");
  return std::unique_ptr<BpfSampler>(new BpfSampler(skeleton));
}

BpfSampler::~BpfSampler() {
  Detach();
  ring_buffer__free(ring_buffer_);
  pystrobe_sampler__destroy(skeleton_);
}

absl::Status BpfSampler::Configure(const SamplerConfig& config) {
  if (config.python_max_frames < 1 || config.python_max_frames > PYSTROBE_MAX_PYTHON_FRAMES) {
    return absl::InvalidArgumentError(absl::StrCat("Python walk depth ", config.python_max_frames,
                                                   " is outside 1 to ",
                                                   PYSTROBE_MAX_PYTHON_FRAMES));
  }
  skeleton_->rodata->filter_pids = config.filter_pids ? 1 : 0;
  skeleton_->rodata->filter_cgroups = config.filter_pids && config.filter_cgroups ? 1 : 0;
  skeleton_->rodata->follow_children = config.follow_children ? 1 : 0;
  skeleton_->rodata->python_max_frames = static_cast<uint32_t>(config.python_max_frames);
  skeleton_->rodata->offcpu_enabled = config.offcpu ? 1 : 0;
  skeleton_->rodata->python_native_stacks = config.python_native_stacks ? 1 : 0;
  if (config.memory_growth && config.memory_sample_bytes == 0) {
    return absl::InvalidArgumentError("a memory sampling interval of 0 bytes");
  }
  skeleton_->rodata->memory_growth_enabled = config.memory_growth ? 1 : 0;
  skeleton_->rodata->memory_sample_bytes = config.memory_sample_bytes;
  memory_growth_ = config.memory_growth;
  if (config.allocations && config.alloc_sample_bytes == 0) {
    return absl::InvalidArgumentError("an allocation sampling interval of 0 bytes");
  }
  skeleton_->rodata->allocations_enabled = config.allocations ? 1 : 0;
  skeleton_->rodata->alloc_sample_bytes = config.alloc_sample_bytes;
  skeleton_->rodata->oom_kill_stacks_enabled = config.oom_kill_stacks ? 1 : 0;
  oom_kill_stacks_ = config.oom_kill_stacks;
  // One scan of the kernel's BTF for both questions; unreadable, it says nothing.
  std::map<std::string, RawTracepointParams> declared =
      ReadRawTracepointParams(kKernelBtf, {"sched_switch", "mark_victim"})
          .value_or(std::map<std::string, RawTracepointParams>{});
  skeleton_->rodata->sched_switch_has_prev_state = SchedSwitchHasPrevState(declared) ? 1 : 0;
  skeleton_->rodata->mark_victim_has_task = MarkVictimHasTask(declared) ? 1 : 0;
  // The tables' maps: packed rows in blocks of 64, page entries a
  // sixteenth of the room (a 4 KiB page of code holds about 70 rows).
  skeleton_->rodata->native_unwinding = config.native_unwind_bytes > 0 ? 1 : 0;
  skeleton_->rodata->native_unwinding_all = config.native_unwind_all ? 1 : 0;
  uint64_t row_bytes = config.native_unwind_bytes - config.native_unwind_bytes / 16;
  uint32_t blocks = static_cast<uint32_t>(row_bytes / sizeof(pystrobe_unwind_row_block));
  uint32_t pages = static_cast<uint32_t>(config.native_unwind_bytes / 16 / sizeof(uint32_t));
  if (bpf_map__set_max_entries(skeleton_->maps.unwind_rows, std::max<uint32_t>(blocks, 1)) != 0 ||
      bpf_map__set_max_entries(skeleton_->maps.unwind_pages, std::max<uint32_t>(pages, 1)) != 0) {
    return LibbpfError(-errno, "size the unwind table maps");
  }
  int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return LibbpfError(cpus, "count possible CPUs");
  uint32_t ring_bytes = EventsRingBytes(config, cpus);
  if (bpf_map__set_max_entries(skeleton_->maps.events, ring_bytes) != 0) {
    return LibbpfError(-errno, "size the events ring buffer");
  }
  skeleton_->rodata->events_ring_bytes = ring_bytes;
  // The kernel fills an LRU map's every entry when it makes the map, which
  // costs a start-up tens of milliseconds for maps nobody uses: a feature that
  // is off keeps one entry each.
  if (!config.allocations && (bpf_map__set_max_entries(skeleton_->maps.alloc_threads, 1) != 0 ||
                              bpf_map__set_max_entries(skeleton_->maps.alloc_live, 1) != 0)) {
    return LibbpfError(-errno, "size the allocation maps");
  }
  if (!config.memory_growth && bpf_map__set_max_entries(skeleton_->maps.memory_growth, 1) != 0) {
    return LibbpfError(-errno, "size the memory growth map");
  }
  accounting_ = config.accounting;
  if (!accounting_) {
    for (bpf_program* program : AccountingPrograms()) {
      if (bpf_program__set_autoload(program, false) != 0) {
        return LibbpfError(-errno, absl::StrCat("leave ", bpf_program__name(program), " unloaded"));
      }
    }
  }
  offcpu_ = config.offcpu;
  return absl::OkStatus();
}

std::vector<bpf_program*> BpfSampler::AccountingPrograms() const {
  const auto& p = skeleton_->progs;
  return {p.acct_exit,
          p.acct_exec,
          p.acct_wakeup_new,
          p.acct_wakeup,
          p.acct_switch,
          p.acct_runtime,
          p.acct_bio_queue,
          p.acct_sys_enter,
          p.acct_sys_exit,
          p.acct_gc_start,
          p.acct_gc_done,
          p.acct_gc_collect_entry,
          p.acct_gc_collect_return};
}

absl::Status BpfSampler::Load() {
  LibbpfLog::Take();
  int err = pystrobe_sampler__load(skeleton_);
  if (err == 0) return absl::OkStatus();
  std::string log = LibbpfLog::Take();
  if (err == -EPERM) {
    return absl::PermissionDeniedError(
        "load the sampler BPF programs: permission denied (needs CAP_BPF and CAP_PERFMON, or "
        "root)");
  }
  std::string reason = LibbpfLog::VerifierReason(log);
  return absl::Status(LibbpfError(err, "load the sampler BPF programs").code(),
                      absl::StrCat("the kernel rejected the sampler BPF programs (",
                                   std::strerror(-err), ")", reason.empty() ? "" : ": ", reason,
                                   "; run with --verbose for the verifier's full log"));
}

absl::Status BpfSampler::AddTargetPid(uint32_t pid) {
  uint8_t one = 1;
  if (bpf_map__update_elem(skeleton_->maps.target_pids, &pid, sizeof(pid), &one, sizeof(one),
                           BPF_ANY) != 0) {
    return LibbpfError(-errno, absl::StrCat("add pid ", pid, " to the target filter"));
  }
  TargetsChanged();
  return absl::OkStatus();
}

absl::Status BpfSampler::AddTargetCgroup(uint64_t cgroup_id) {
  uint8_t one = 1;
  if (bpf_map__update_elem(skeleton_->maps.target_cgroups, &cgroup_id, sizeof(cgroup_id), &one,
                           sizeof(one), BPF_ANY) != 0) {
    return LibbpfError(-errno, absl::StrCat("add cgroup ", cgroup_id, " to the target filter"));
  }
  TargetsChanged();
  return absl::OkStatus();
}

absl::Status BpfSampler::RemoveTargetCgroup(uint64_t cgroup_id) {
  if (bpf_map__delete_elem(skeleton_->maps.target_cgroups, &cgroup_id, sizeof(cgroup_id), 0) != 0 &&
      errno != ENOENT) {
    return LibbpfError(-errno, absl::StrCat("remove cgroup ", cgroup_id, " from the filter"));
  }
  TargetsChanged();
  return absl::OkStatus();
}

void BpfSampler::TargetsChanged() {
  // Each CPU's verdict on the process it looked at last is good until this
  // moves (bpf/targets.bpf.h).
  __atomic_fetch_add(&skeleton_->bss->targets_generation, 1, __ATOMIC_SEQ_CST);
}

UnwindMaps::Maps BpfSampler::unwind_maps() const {
  return {skeleton_->maps.unwind_rows,
          skeleton_->maps.unwind_pages,
          skeleton_->maps.unwind_tables,
          skeleton_->maps.unwind_processes,
          skeleton_->maps.unwind_rules,
          skeleton_->maps.unwind_wanted,
          &skeleton_->bss->unwind_processes_generation,
          skeleton_->bss->unwind_table_used_ns};
}

std::vector<BpfSampler::MapFill> BpfSampler::ReadMapFill() {
  if (!entry_counter_opened_) {
    entry_counter_opened_ = true;
    absl::StatusOr<std::unique_ptr<MapEntryCounter>> counter = MapEntryCounter::Open();
    if (counter.ok()) entry_counter_ = std::move(*counter);
  }
  absl::flat_hash_map<uint32_t, int64_t> counted;
  if (entry_counter_ != nullptr) counted = entry_counter_->Read().value_or(counted);
  std::vector<MapFill> fill;
  bpf_map* map;
  bpf_object__for_each_map(map, skeleton_->obj) {
    bpf_map_type type = bpf_map__type(map);
    if (type != BPF_MAP_TYPE_HASH && type != BPF_MAP_TYPE_LRU_HASH) continue;
    int fd = bpf_map__fd(map);
    if (fd < 0) continue;
    MapFill entry{.name = bpf_map__name(map), .max_entries = bpf_map__max_entries(map)};
    auto count = counted.find(MapIdOf(fd));
    entry.entries =
        count != counted.end()
            ? static_cast<uint32_t>(std::clamp<int64_t>(count->second, 0, entry.max_entries))
            : CountByWalkingKeys(fd, bpf_map__key_size(map), entry.max_entries);
    fill.push_back(std::move(entry));
  }
  return fill;
}

absl::Status BpfSampler::AddPythonProcess(uint32_t pid, const pystrobe_python_process& process) {
  if (bpf_map__update_elem(skeleton_->maps.python_processes, &pid, sizeof(pid), &process,
                           sizeof(process), BPF_ANY) != 0) {
    return LibbpfError(-errno,
                       absl::StrCat("hand process ", pid, "'s CPython layout to the kernel"));
  }
  // Each CPU's copy of the entry it sampled last, or of its absence, is
  // good until this moves (bpf/python_walk.bpf.h).
  __atomic_fetch_add(&skeleton_->bss->python_processes_generation, 1, __ATOMIC_SEQ_CST);
  return absl::OkStatus();
}

absl::Status BpfSampler::AddPythonBinary(const pystrobe_python_binary_key& key,
                                         const pystrobe_python_binary& binary) {
  if (bpf_map__update_elem(skeleton_->maps.python_binaries, &key, sizeof(key), &binary,
                           sizeof(binary), BPF_ANY) != 0) {
    return LibbpfError(-errno, absl::StrCat("hand the CPython layout of executable ", key.dev, ":",
                                            key.inode, " to the kernel"));
  }
  return absl::OkStatus();
}

absl::Status BpfSampler::OpenRingBuffer(RecordHandler handler) {
  if (ring_buffer_ != nullptr) return absl::FailedPreconditionError("the sampler is attached");
  handler_ = std::move(handler);
  ring_buffer_ = ring_buffer__new(bpf_map__fd(skeleton_->maps.events), &BpfSampler::HandleRecord,
                                  this, nullptr);
  if (ring_buffer_ == nullptr) return LibbpfError(-errno, "create the ring buffer reader");
  return absl::OkStatus();
}

absl::Status BpfSampler::AttachToPerfEvent(int perf_event_fd, RecordHandler handler) {
  if (absl::Status s = OpenRingBuffer(std::move(handler)); !s.ok()) return s;
  if (absl::Status s = StartTickIntervals(); !s.ok()) return s;
  bpf_link* link = bpf_program__attach_perf_event(skeleton_->progs.sample_cpu, perf_event_fd);
  if (link == nullptr) {
    return LibbpfError(-errno,
                       absl::StrCat("attach the cpu sampler to perf event fd ", perf_event_fd));
  }
  links_.push_back(link);
  return absl::OkStatus();
}

absl::Status BpfSampler::Attach(int rate_hz, RecordHandler handler) {
  if (absl::Status s = OpenRingBuffer(std::move(handler)); !s.ok()) return s;

  // Process events first, so no sample arrives for an image we never heard of.
  for (bpf_program* program :
       {skeleton_->progs.handle_exec, skeleton_->progs.handle_exit, skeleton_->progs.handle_fork}) {
    bpf_link* link = bpf_program__attach(program);
    if (link == nullptr) {
      return LibbpfError(-errno, absl::StrCat("attach ", bpf_program__name(program)));
    }
    links_.push_back(link);
  }
  if (offcpu_) {
    bpf_link* link = bpf_program__attach(skeleton_->progs.handle_switch);
    if (link == nullptr) return LibbpfError(-errno, "attach the off-CPU program to sched_switch");
    links_.push_back(link);
  }
  if (memory_growth_) {
    bpf_link* link = bpf_program__attach(skeleton_->progs.sample_memory_growth);
    if (link == nullptr) return LibbpfError(-errno, "attach the memory program to kmem:rss_stat");
    links_.push_back(link);
  }
  if (oom_kill_stacks_) {
    bpf_link* link = bpf_program__attach(skeleton_->progs.sample_oom_killed);
    if (link == nullptr) {
      return LibbpfError(-errno, "attach the OOM-kill program to signal:signal_deliver");
    }
    links_.push_back(link);
  }

  absl::StatusOr<std::vector<int>> cpus = OnlineCpus();
  if (!cpus.ok()) return cpus.status();
  absl::StatusOr<CpuClockEvents> events = CpuClockEvents::Open(*cpus, rate_hz);
  if (!events.ok()) return events.status();
  events_ = std::move(*events);
  // The first tick on each CPU stands for the time since now.
  if (absl::Status s = StartTickIntervals(); !s.ok()) return s;
  for (const CpuClockEvents::Event& event : events_->events()) {
    bpf_link* link = bpf_program__attach_perf_event(skeleton_->progs.sample_cpu, event.fd);
    if (link == nullptr) {
      return LibbpfError(-errno, absl::StrCat("attach perf_event on cpu ", event.cpu));
    }
    links_.push_back(link);
  }
  const CpuClockEvents* clock_events = &*events_;
  sampling_clock_ = std::make_unique<SamplingClock>(
      clock_events->events().size(), rate_hz,
      [clock_events](size_t index, uint64_t period_ns) {
        return clock_events->SetPeriod(clock_events->events()[index], period_ns);
      },
      std::random_device{}());
  return absl::OkStatus();
}

absl::Status BpfSampler::StartTickIntervals() {
  int possible = libbpf_num_possible_cpus();
  if (possible <= 0) return LibbpfError(possible, "count the possible CPUs");
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);  // bpf_ktime_get_ns's clock
  std::vector<uint64_t> start(
      static_cast<size_t>(possible),
      static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(now.tv_nsec));
  uint32_t zero = 0;
  if (bpf_map__update_elem(skeleton_->maps.last_tick_ns, &zero, sizeof(zero), start.data(),
                           start.size() * sizeof(uint64_t), BPF_ANY) != 0) {
    return LibbpfError(-errno, "start the per-CPU tick clocks");
  }
  return absl::OkStatus();
}

absl::Status BpfSampler::Poll(absl::Duration timeout) {
  if (ring_buffer_ == nullptr) return absl::FailedPreconditionError("Poll before Attach");
  // ring_buffer__poll keeps handing over records for as long as they come;
  // under load that is forever. The handler cuts it short at the deadline
  // (the rest waits in the ring buffer), so the caller gets to check its
  // own clock and signals.
  handler_deadline_ = absl::Now() + std::max(timeout, kMinPollBudget);
  int result = ring_buffer__poll(ring_buffer_, absl::ToInt64Milliseconds(timeout));
  // Samples are written without waking us (see bpf/sample.bpf.h), so epoll
  // reports only process events and a filling buffer: take the rest too,
  // with a budget of its own (the wait above may have used the first).
  if (result >= 0) {
    handler_deadline_ = absl::Now() + kMinPollBudget;
    result = ring_buffer__consume(ring_buffer_);
  }
  if (result < 0 && result != -EINTR) return LibbpfError(result, "poll the ring buffer");
  return absl::OkStatus();
}

int BpfSampler::ring_buffer_fd() const {
  return ring_buffer_ != nullptr ? ring_buffer__epoll_fd(ring_buffer_) : -1;
}

absl::Status BpfSampler::Drain() {
  if (ring_buffer_ == nullptr) return absl::FailedPreconditionError("Drain before Attach");
  handler_deadline_ = absl::InfiniteFuture();
  int result = ring_buffer__consume(ring_buffer_);
  if (result < 0) return LibbpfError(result, "drain the ring buffer");
  return absl::OkStatus();
}

void BpfSampler::Detach() {
  if (sampling_clock_ != nullptr) {
    detached_redraws_.set += sampling_clock_->redraws();
    detached_redraws_.failed += sampling_clock_->failed_redraws();
  }
  sampling_clock_.reset();  // before the events it sets
  for (std::vector<bpf_link*>* links : {&links_, &finalize_links_}) {
    for (bpf_link* link : *links) bpf_link__destroy(link);
    links->clear();
  }
  events_.reset();
}

int BpfSampler::HandleRecord(void* self, void* data, size_t size) {
  auto* sampler = static_cast<BpfSampler*>(self);
  sampler->handler_(std::span<const uint8_t>(static_cast<const uint8_t*>(data), size));
  // A negative return stops this poll after the record just handled.
  return absl::Now() > sampler->handler_deadline_ ? -EINTR : 0;
}

SamplerCounters BpfSampler::ReadCounters() const {
  SamplerCounters counters;
  uint64_t samples[PYSTROBE_SAMPLE_COUNTER_COUNT] = {};
  // A counter that cannot be read stays zero; the map is ours and loaded.
  SumPerCpuCounters(skeleton_->maps.sample_counters, samples).IgnoreError();
  SumPerCpuCounters(skeleton_->maps.drop_counters, counters.dropped).IgnoreError();
  counters.taken = samples[PYSTROBE_COUNT_TAKEN];
  counters.idle = samples[PYSTROBE_COUNT_IDLE];
  counters.filtered = samples[PYSTROBE_COUNT_FILTERED];
  counters.sent = samples[PYSTROBE_COUNT_SENT];
  counters.python_walked = samples[PYSTROBE_COUNT_PYTHON_WALKED];
  counters.python_truncated = samples[PYSTROBE_COUNT_PYTHON_TRUNCATED];
  counters.offcpu_sent = samples[PYSTROBE_COUNT_OFFCPU_SENT];
  counters.python_at_exec = samples[PYSTROBE_COUNT_PYTHON_AT_EXEC];
  counters.python_codes_sent = samples[PYSTROBE_COUNT_PYTHON_CODES_SENT];
  counters.python_codes_deferred = samples[PYSTROBE_COUNT_PYTHON_CODES_DEFERRED];
  counters.python_code_copy_ns = samples[PYSTROBE_COUNT_PYTHON_CODE_COPY_NS];
  counters.native_complete = samples[PYSTROBE_COUNT_NATIVE_COMPLETE];
  counters.native_jit = samples[PYSTROBE_COUNT_NATIVE_JIT];
  counters.native_truncated = samples[PYSTROBE_COUNT_NATIVE_TRUNCATED];
  counters.native_through_jit = samples[PYSTROBE_COUNT_NATIVE_THROUGH_JIT];
  counters.memory_sent = samples[PYSTROBE_COUNT_MEMORY_SENT];
  counters.memory_retaken = samples[PYSTROBE_COUNT_MEMORY_RETAKEN];
  counters.memory_lost = samples[PYSTROBE_COUNT_MEMORY_LOST];
  counters.allocations_sent = samples[PYSTROBE_COUNT_ALLOC_SENT];
  counters.frees_sent = samples[PYSTROBE_COUNT_FREE_SENT];
  counters.oom_killed_sent = samples[PYSTROBE_COUNT_OOM_KILLED_SENT];
  counters.allocations_untracked = samples[PYSTROBE_COUNT_ALLOC_UNTRACKED];
  counters.finalizations_sent = samples[PYSTROBE_COUNT_FINALIZE_SENT];
  counters.period_redraws = detached_redraws_.set;
  counters.period_redraws_failed = detached_redraws_.failed;
  if (sampling_clock_ != nullptr) {
    counters.period_redraws += sampling_clock_->redraws();
    counters.period_redraws_failed += sampling_clock_->failed_redraws();
  }
  return counters;
}

// ---- Accounting ------------------------------------------------------------

absl::Status BpfSampler::AttachAccounting(AccountingOptions options) {
  if (!accounting_) {
    return absl::FailedPreconditionError("accounting was not configured before the load");
  }
  // Tasks born from now on count from zero; older ones from their first event.
  timespec now = {};
  clock_gettime(CLOCK_BOOTTIME, &now);
  skeleton_->bss->accounting_since_boot_ns =
      static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
  std::vector<bpf_program*> programs = {
      skeleton_->progs.acct_exit,       skeleton_->progs.acct_exec,
      skeleton_->progs.acct_wakeup_new, skeleton_->progs.acct_wakeup,
      skeleton_->progs.acct_switch,     skeleton_->progs.acct_runtime,
      skeleton_->progs.acct_bio_queue,  skeleton_->progs.acct_oom_victim};
  if (options.syscalls) {
    programs.push_back(skeleton_->progs.acct_sys_enter);
    programs.push_back(skeleton_->progs.acct_sys_exit);
  }
  for (bpf_program* program : programs) {
    bpf_link* link = bpf_program__attach(program);
    if (link == nullptr) {
      return LibbpfError(-errno, absl::StrCat("attach ", bpf_program__name(program)));
    }
    links_.push_back(link);
  }
  return absl::OkStatus();
}

absl::Status BpfSampler::AttachAllocationProbes(const std::string& libc, int pid) {
  struct Probe {
    bpf_program* program;
    const char* function;
    bool retprobe;
  };
  const Probe probes[] = {
      {skeleton_->progs.alloc_malloc_entry, "malloc", false},
      {skeleton_->progs.alloc_return, "malloc", true},
      {skeleton_->progs.alloc_calloc_entry, "calloc", false},
      {skeleton_->progs.alloc_return, "calloc", true},
      {skeleton_->progs.alloc_realloc_entry, "realloc", false},
      {skeleton_->progs.alloc_return, "realloc", true},
      {skeleton_->progs.alloc_free, "free", false},
  };
  for (const Probe& probe : probes) {
    LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = probe.retprobe, .func_name = probe.function);
    bpf_link* link = bpf_program__attach_uprobe_opts(probe.program, pid, libc.c_str(), 0, &opts);
    if (link == nullptr) {
      return LibbpfError(-errno, absl::StrCat("attach a ", probe.retprobe ? "uretprobe" : "uprobe",
                                              " on ", probe.function, " in ", libc));
    }
    links_.push_back(link);
  }
  return absl::OkStatus();
}

absl::Status BpfSampler::AttachAllocationLibrary(const std::string& library) {
  struct Probe {
    bpf_program* program;
    const char* function;
  };
  const Probe probes[] = {
      {skeleton_->progs.alloc_lib_sampled, "pystrobe_alloc_sampled"},
      {skeleton_->progs.alloc_lib_freed, "pystrobe_alloc_freed"},
  };
  for (const Probe& probe : probes) {
    LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = probe.function);
    bpf_link* link = bpf_program__attach_uprobe_opts(probe.program, -1, library.c_str(), 0, &opts);
    if (link == nullptr) {
      return LibbpfError(-errno,
                         absl::StrCat("attach a uprobe on ", probe.function, " in ", library));
    }
    links_.push_back(link);
  }
  return absl::OkStatus();
}

absl::Status BpfSampler::AttachPythonFinalizeProbe(const std::string& binary) {
  struct stat file = {};
  if (stat(binary.c_str(), &file) != 0) {
    return absl::NotFoundError(absl::StrCat(binary, ": ", std::strerror(errno)));
  }
  auto [probe, first] = finalize_probes_.try_emplace(
      {static_cast<uint64_t>(file.st_dev), static_cast<uint64_t>(file.st_ino)});
  if (!first) return probe->second;
  // Py_FinalizeEx from 3.6 on (Py_Finalize calls it); Py_Finalize before.
  for (const char* function : {"Py_FinalizeEx", "Py_Finalize"}) {
    LibbpfLog::Take();
    LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = function);
    bpf_link* link = bpf_program__attach_uprobe_opts(skeleton_->progs.alloc_python_finalize, -1,
                                                     binary.c_str(), 0, &opts);
    if (link != nullptr) {
      finalize_links_.push_back(link);
      return probe->second = absl::OkStatus();
    }
    int err = -errno;
    LibbpfLog::Take();
    if (err != -ENOENT && err != -ESRCH) {
      return probe->second =
                 LibbpfError(err, absl::StrCat("attach a uprobe on ", function, " in ", binary));
    }
  }
  return probe->second =
             absl::NotFoundError(absl::StrCat(binary, " has no Py_FinalizeEx or Py_Finalize"));
}

absl::Status BpfSampler::AttachOomWatch() {
  bpf_link* link = bpf_program__attach(skeleton_->progs.acct_oom_victim);
  if (link == nullptr) return LibbpfError(-errno, "attach acct_oom_victim to oom:mark_victim");
  links_.push_back(link);
  return absl::OkStatus();
}

absl::Status BpfSampler::AttachPythonGcProbes(const std::string& binary) {
  if (!accounting_) {
    return absl::FailedPreconditionError("accounting was not configured before the load");
  }
  struct stat file = {};
  if (stat(binary.c_str(), &file) != 0) {
    return absl::NotFoundError(absl::StrCat(binary, ": ", std::strerror(errno)));
  }
  auto [probes, first] = gc_probes_.try_emplace(
      {static_cast<uint64_t>(file.st_dev), static_cast<uint64_t>(file.st_ino)});
  if (!first) return probes->second;
  probes->second = AttachGcUsdt(binary);
  if (absl::IsNotFound(probes->second)) probes->second = AttachGcUprobes(binary);
  return probes->second;
}

absl::Status BpfSampler::AttachGcUsdt(const std::string& binary) {
  LibbpfLog::Take();
  bpf_link* start = bpf_program__attach_usdt(skeleton_->progs.acct_gc_start, -1, binary.c_str(),
                                             "python", "gc__start", nullptr);
  if (start == nullptr) {
    int err = -errno;
    LibbpfLog::Take();
    if (err == -ENOENT) {
      return absl::NotFoundError(absl::StrCat(binary, " has no python:gc__start probe"));
    }
    return LibbpfError(err, absl::StrCat("attach python:gc__start of ", binary));
  }
  links_.push_back(start);
  bpf_link* done = bpf_program__attach_usdt(skeleton_->progs.acct_gc_done, -1, binary.c_str(),
                                            "python", "gc__done", nullptr);
  if (done == nullptr) {
    return LibbpfError(-errno, absl::StrCat("attach python:gc__done of ", binary));
  }
  links_.push_back(done);
  return absl::OkStatus();
}

absl::Status BpfSampler::AttachGcUprobes(const std::string& binary) {
  // The function one collection runs in, by version: its entry and return
  // bracket what gc__start and gc__done do. Found in the ELF symbol table,
  // which pyenv's and most source builds keep.
  for (const char* function : {"gc_collect_main", "collect"}) {
    LibbpfLog::Take();
    LIBBPF_OPTS(bpf_uprobe_opts, entry_opts, .func_name = function);
    bpf_link* entry = bpf_program__attach_uprobe_opts(skeleton_->progs.acct_gc_collect_entry, -1,
                                                      binary.c_str(), 0, &entry_opts);
    if (entry == nullptr) {
      int err = -errno;
      LibbpfLog::Take();
      if (err == -ENOENT) continue;
      return LibbpfError(err, absl::StrCat("attach a uprobe on ", function, " in ", binary));
    }
    links_.push_back(entry);
    LIBBPF_OPTS(bpf_uprobe_opts, return_opts, .retprobe = true, .func_name = function);
    bpf_link* exit = bpf_program__attach_uprobe_opts(skeleton_->progs.acct_gc_collect_return, -1,
                                                     binary.c_str(), 0, &return_opts);
    if (exit == nullptr) {
      return LibbpfError(-errno, absl::StrCat("attach a uretprobe on ", function, " in ", binary));
    }
    links_.push_back(exit);
    return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat(
      binary, " has neither python:gc__* probes nor a gc_collect_main or collect symbol"));
}

BpfSampler::AccountingMaps BpfSampler::accounting_maps() const {
  return AccountingMaps{.threads = skeleton_->maps.thread_counters,
                        .processes = skeleton_->maps.process_counters,
                        .processes_writable = skeleton_->maps.process_counters,
                        .drops = skeleton_->maps.accounting_drops};
}

}  // namespace pystrobe
