#include "daemon/recording/recorder.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/records/record_decoder.h"

namespace pystrobe {
namespace {

// Bounds on the threads of OOM-killed processes kept until taken.
constexpr size_t kMaxKilledProcesses = 64;
constexpr size_t kMaxKilledThreadsPerProcess = 1024;

}  // namespace

uint64_t OnCpuSampleWeightNs(uint64_t interval_ns, uint64_t mean_period_ns) {
  // The clock draws periods up to about 2 mean periods. A longer interval
  // means ticks did not come: a CPU that went idle stops its timer here (a
  // virtual machine's idle CPU does), and the time it slept is nobody's CPU
  // time. Such an interval, and a CPU's first, weighs the mean period.
  constexpr uint64_t kMaxPeriods = 2;
  if (mean_period_ns == 0) return interval_ns;
  if (interval_ns == 0 || interval_ns > kMaxPeriods * mean_period_ns) return mean_period_ns;
  return interval_ns;
}

void Recorder::HandleRecord(std::span<const uint8_t> record) {
  // Decoded into the last record's buffers: no allocation per sample.
  if (RingRecord* decoded = decoder_.Decode(record)) Handle(*decoded, record.size());
}

void Recorder::Handle(RingRecord& record, size_t record_bytes) {
  if (auto* sample = std::get_if<SampleRecord>(&record)) {
    HandleSample(*sample);
  } else if (auto* event = std::get_if<ProcessEventRecord>(&record)) {
    if (event->kind == PYSTROBE_EVENT_EXEC) {
      processes_.OnExec(event->pid, event->comm, event->python_executable);
    } else {
      processes_.OnExit(event->pid);
      auto allocator = allocators_.find(event->pid);
      if (allocator != allocators_.end() && allocator->second == AllocatorState::kRunning) {
        allocator->second = AllocatorState::kExited;
      }
    }
    python_code_copies_.ForgetProcess(event->pid);
  } else if (auto* free = std::get_if<FreeRecord>(&record)) {
    live_blocks_.erase({free->pid, free->address});
  } else if (auto* finalize = std::get_if<FinalizeRecord>(&record)) {
    OnFinalize(finalize->pid);
  } else if (auto* copy = std::get_if<PythonCodeCopy>(&record)) {
    python_code_copy_bytes_ += record_bytes;
    python_code_copies_.Add(std::move(*copy));
  }
}

void Recorder::HandleSample(SampleRecord& sample) {
  const SampleKind kind = sample.kind == PYSTROBE_EVENT_OFFCPU       ? SampleKind::kOffCpu
                          : sample.kind == PYSTROBE_EVENT_MEMORY     ? SampleKind::kMemory
                          : sample.kind == PYSTROBE_EVENT_ALLOC      ? SampleKind::kAllocation
                          : sample.kind == PYSTROBE_EVENT_OOM_KILLED ? SampleKind::kOomKilled
                                                                     : SampleKind::kOnCpu;
  const bool offcpu = kind == SampleKind::kOffCpu;
  // The last sample's stack, every field set again: a stack the aggregator
  // already held leaves its buffers here for the next one.
  RawStack& stack = stack_;
  stack.python_frames.clear();
  stack.python_truncated = false;
  stack.offcpu_reason = -1;
  stack.asyncio_task = 0;
  // Every sample counts toward discovery, even one --gil then leaves out:
  // only a discovered process has its GIL holder known.
  std::optional<ImageId> image_id =
      processes_.OnSample(sample.pid, sample.tid, sample.comm, sample.cgroup_id);
  if (!image_id) {
    ++samples_of_refused_processes_;
    return;
  }
  stack.image = *image_id;
  if (kind == SampleKind::kOnCpu && options_.gil_only &&
      (sample.flags & PYSTROBE_SAMPLE_HOLDS_GIL) == 0) {
    // A free-threaded interpreter has no GIL: --gil keeps its samples, as
    // every thread of it runs as a GIL holder would, and says so.
    if (sample.flags & PYSTROBE_SAMPLE_FREE_THREADED) {
      ++samples_free_threaded_;
    } else {
      ++samples_without_gil_;
      return;
    }
  }
  stack.tid = options_.threads ? sample.tid : 0;
  stack.interpreter_id = options_.threads ? sample.interpreter_id : 0;
  stack.kernel_ips.assign(sample.kernel_ips.begin(), sample.kernel_ips.end());
  stack.user_ips.assign(sample.user_ips.begin(), sample.user_ips.end());

  // Frames are named now, while the process (its mappings and code objects)
  // lives: its symbols are released when it exits.
  const ProcessImage& image = processes_.image(stack.image);
  native_names_.NameAll(image, stack.user_ips);
  PythonProcess* python = image.python.get();
  if (python != nullptr && !sample.python_frames.empty()) {
    python_codes_.InternFrames(stack.image, sample.tid, sample.pid, *python, sample.python_frames,
                               python_code_copies_, code_ids_);
    // Field by field in place: a frame built aside and copied in stalls
    // on every frame (its halves stored apart, loaded as one).
    stack.python_frames.resize(sample.python_frames.size());
    for (size_t i = 0; i < sample.python_frames.size(); ++i) {
      RawPythonFrame& raw = stack.python_frames[i];
      raw.code = code_ids_[i];
      raw.instr_offset = sample.python_frames[i].instr_offset;
      raw.eval_entry = sample.python_frames[i].eval_entry;
    }
    stack.python_truncated = (sample.flags & PYSTROBE_SAMPLE_PY_TRUNCATED) != 0;
    if (options_.asyncio && python->RefreshAsyncioTasks(absl::Now()) && options_.asyncio_await) {
      ChargeAwaitTime(stack.image, sample.pid, *python);
    }
  }
  if (offcpu)
    stack.offcpu_reason = static_cast<int8_t>(std::min<uint32_t>(sample.offcpu_reason, 127));
  if (kind == SampleKind::kOomKilled) {
    stack.tid = sample.tid;
    auto victim = killed_threads_.find(sample.pid);
    if (victim == killed_threads_.end()) {
      if (killed_threads_.size() >= kMaxKilledProcesses) return;
      victim = killed_threads_.try_emplace(sample.pid).first;
    }
    if (victim->second.size() < kMaxKilledThreadsPerProcess) {
      victim->second.push_back({sample.tid, std::move(sample.comm), std::move(stack)});
    }
    return;
  }
  StackAggregator& stacks = kind == SampleKind::kOnCpu    ? stacks_
                            : kind == SampleKind::kOffCpu ? offcpu_stacks_
                            : kind == SampleKind::kMemory ? memory_stacks_
                                                          : allocation_stacks_;
  if (stacks_.size() + offcpu_stacks_.size() + memory_stacks_.size() + allocation_stacks_.size() >=
          options_.max_stacks &&
      !stacks.Contains(stack)) {
    ++samples_over_stack_limit_;
    return;
  }
  // A sampled block is in use until its FREE record comes.
  if (kind == SampleKind::kAllocation) {
    live_blocks_[{sample.pid, sample.address}] = {stack, sample.weight_ns};
    allocators_.try_emplace(sample.pid, AllocatorState::kRunning);
  }
  // Off CPU: the time away; memory and allocations: bytes.
  stacks.Add(std::move(stack),
             {1, kind == SampleKind::kOnCpu
                     ? OnCpuSampleWeightNs(sample.weight_ns, options_.mean_period_ns)
                     : sample.weight_ns});
}

void Recorder::ChargeAwaitTime(ImageId image, uint32_t pid, PythonProcess& python) {
  const uint64_t charge = static_cast<uint64_t>(absl::ToInt64Nanoseconds(python.await_charge()));
  if (charge == 0) return;
  for (const PythonProcess::SuspendedTask& task : python.suspended_tasks()) {
    RawStack stack;
    stack.image = image;
    stack.offcpu_reason = kOffCpuAwait;
    stack.asyncio_task = task.label;
    for (auto frame = task.frames.rbegin(); frame != task.frames.rend(); ++frame) {
      stack.python_frames.push_back({python_codes_.Intern(image, pid, python, frame->code_address,
                                                          frame->stamp, python_code_copies_),
                                     frame->instr_offset, false});
    }
    if (stacks_.size() + offcpu_stacks_.size() >= options_.max_stacks &&
        !offcpu_stacks_.Contains(stack)) {
      ++samples_over_stack_limit_;
      continue;
    }
    offcpu_stacks_.Add(std::move(stack), {1, charge});
  }
}

std::vector<KilledThread> Recorder::TakeKilledThreads(uint32_t pid) {
  auto victim = killed_threads_.find(pid);
  if (victim == killed_threads_.end()) return {};
  std::vector<KilledThread> threads = std::move(victim->second);
  killed_threads_.erase(victim);
  return threads;
}

void Recorder::OnFinalize(uint32_t pid) {
  AllocatorState& state = allocators_[pid];
  // Once: a second interpreter's finalization in the process (an embedder
  // that initializes Python again) does not move the moment.
  if (state == AllocatorState::kFinalized) return;
  state = AllocatorState::kFinalized;
  // What it holds now stays, whatever teardown frees afterwards.
  for (auto block = live_blocks_.begin(); block != live_blocks_.end();) {
    if (block->first.first != pid) {
      ++block;
      continue;
    }
    finalized_blocks_.insert(*block);
    live_blocks_.erase(block++);
  }
}

StackAggregator Recorder::InUseStacks() const {
  StackAggregator in_use;
  for (const auto& [block, held] : finalized_blocks_) in_use.Add(held.first, {1, held.second});
  for (const auto& [block, held] : live_blocks_) {
    auto allocator = allocators_.find(block.first);
    if (allocator != allocators_.end() && allocator->second == AllocatorState::kFinalized) {
      continue;  // allocated during teardown, after its view was taken
    }
    in_use.Add(held.first, {1, held.second});
  }
  return in_use;
}

Recorder::InUseTotals Recorder::InUseByMoment() const {
  InUseTotals totals;
  for (const auto& [block, held] : finalized_blocks_) totals.at_finalization_bytes += held.second;
  for (const auto& [block, held] : live_blocks_) {
    auto allocator = allocators_.find(block.first);
    AllocatorState state =
        allocator == allocators_.end() ? AllocatorState::kRunning : allocator->second;
    if (state == AllocatorState::kExited) totals.at_exit_bytes += held.second;
    if (state == AllocatorState::kRunning) totals.at_end_bytes += held.second;
  }
  for (const auto& [pid, state] : allocators_) {
    switch (state) {
      case AllocatorState::kFinalized:
        ++totals.finalized_processes;
        break;
      case AllocatorState::kExited:
        ++totals.exited_processes;
        break;
      case AllocatorState::kRunning:
        ++totals.running_processes;
        break;
    }
  }
  return totals;
}

WindowStacks Recorder::TakeStacks() {
  WindowStacks taken{std::move(stacks_), std::move(offcpu_stacks_), std::move(memory_stacks_)};
  stacks_ = StackAggregator();
  offcpu_stacks_ = StackAggregator();
  memory_stacks_ = StackAggregator();
  return taken;
}

void Recorder::EvictAfterWindow(size_t max_native_names, size_t max_python_codes) {
  // The daemon writes its OOM reports before each cut: threads of a victim
  // still here were never asked for (its kill went unseen by the accounting).
  killed_threads_.clear();
  std::vector<ImageId> evicted = processes_.EvictExited();
  absl::flat_hash_set<ImageId> gone(evicted.begin(), evicted.end());
  for (ImageId id : evicted) native_names_.Forget(id);
  if (!gone.empty()) {
    python_codes_.ForgetImages([&gone](uint32_t image) { return gone.contains(image); },
                               /*counted=*/false);
  }
  // Live images still have their symbols: their names can be looked up again.
  native_names_.Shrink(max_native_names, [](ImageId) { return true; });
  if (python_codes_.size() > max_python_codes) {
    python_codes_.ForgetImages([](uint32_t) { return true; }, /*counted=*/true);
  }
}

}  // namespace pystrobe
