// Consumes the sampler's ring buffer records: validates each one, keeps the
// process table current, and counts samples per raw stack.
#ifndef PYSTROBE_DAEMON_RECORDING_RECORDER_H_
#define PYSTROBE_DAEMON_RECORDING_RECORDER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/python/code_copies.h"
#include "daemon/recording/native_name_cache.h"
#include "daemon/recording/process_table.h"
#include "daemon/recording/stack_aggregator.h"
#include "daemon/records/record_decoder.h"

namespace pystrobe {

struct RecorderOptions {
  bool threads = false;   // keep samples of different threads apart
  bool gil_only = false;  // keep only samples whose thread held the GIL
  // Distinct stacks kept (on and off CPU together) until TakeStacks();
  // samples of further stacks are dropped and counted.
  size_t max_stacks = SIZE_MAX;
  // The sampling clock's mean period (1e9 / rate): what an on-CPU sample
  // weighs when the kernel measured no interval before it (the first tick
  // on its CPU) or an implausible one. 0: samples weigh what the kernel says.
  uint64_t mean_period_ns = 0;
  bool asyncio = false;  // read the asyncio tasks of Python processes as they are sampled
  // Also charge each suspended task's wall time to its chain (off-CPU, [await]).
  bool asyncio_await = false;
};

// The time an on-CPU sample stands for: the interval since the previous tick
// on its CPU, as the kernel measured it, or the mean period where that
// measure is missing or beyond what the sampling clock draws (ticks that did
// not come, as on an idle CPU whose timer stopped).
uint64_t OnCpuSampleWeightNs(uint64_t interval_ns, uint64_t mean_period_ns);

// The stacks of one window, taken out of the recorder.
struct WindowStacks {
  StackAggregator on_cpu;
  StackAggregator off_cpu;
  StackAggregator memory;  // resident growth, in bytes
};

// A thread of a process the kernel's OOM killer chose, as it took the
// SIGKILL: what it was doing when killed.
struct KilledThread {
  uint32_t tid = 0;
  std::string name;  // the thread's comm
  RawStack stack;
};

class Recorder {
 public:
  // `symbolizer` must outlive the recorder.
  Recorder(
      NativeSymbolizer* symbolizer, PythonDiscovery* python, RecorderOptions options,
      ProcessTable::CommReader read_comm = ProcessTable::ReadProcComm,
      ProcessTable::NamespacePidReader read_pid_in_namespace = ProcessTable::ReadPidInNamespace)
      : processes_(symbolizer, python, std::move(read_comm), std::move(read_pid_in_namespace)),
        options_(options) {}

  // Handles one ring buffer record, decoded by decoder(): malformed records
  // are counted there and dropped (tests, replays).
  void HandleRecord(std::span<const uint8_t> record);
  // Handles a record decoder() decoded: a sampling session decodes each
  // record once and hands it to its other readers first. `record_bytes` is
  // its size in the ring buffer. A code object's copy is moved out of it.
  void Handle(RingRecord& record, size_t record_bytes);
  // The decoder whose refusals malformed_records() counts.
  RecordDecoder& decoder() { return decoder_; }

  ProcessTable& processes() { return processes_; }
  const ProcessTable& processes() const { return processes_; }
  // On-CPU samples per stack, and the time they stand for.
  const StackAggregator& stacks() const { return stacks_; }
  // Off-CPU intervals per stack (its leaf-most frame is why), and their time.
  const StackAggregator& offcpu_stacks() const { return offcpu_stacks_; }
  // Resident-growth samples per stack; StackWeight::nanoseconds holds the
  // bytes they stand for (record --memory, stat).
  const StackAggregator& memory_stacks() const { return memory_stacks_; }
  // Sampled allocations per stack, every one (alloc_space); nanoseconds
  // holds their bytes (record --allocations).
  const StackAggregator& allocation_stacks() const { return allocation_stacks_; }
  // The sampled blocks in use, per stack (inuse_space), bytes in
  // nanoseconds: for a CPython process seen entering finalization, those it
  // held at that moment (before teardown frees its globals); for others,
  // those not freed when it exited, or not yet if it still runs.
  StackAggregator InUseStacks() const;
  // The bytes InUseStacks() holds, by the moment each process's were taken.
  struct InUseTotals {
    uint64_t at_finalization_bytes = 0;  // CPython processes entering finalization
    uint64_t at_exit_bytes = 0;          // processes that exited (or were never seen finalizing)
    uint64_t at_end_bytes = 0;           // processes still running when recording ended
    uint32_t finalized_processes = 0;
    uint32_t exited_processes = 0;
    uint32_t running_processes = 0;
  };
  InUseTotals InUseByMoment() const;
  const PythonCodeTable& python_codes() const { return python_codes_; }
  // Code objects the kernel copied out of sampled processes, not yet used.
  const PythonCodeCopies& python_code_copies() const { return python_code_copies_; }
  NativeNameCache& native_names() { return native_names_; }
  uint64_t samples() const { return stacks_.total(); }
  // The threads of OOM-killed process `pid` seen so far, in the order they
  // took the kill; forgets them.
  std::vector<KilledThread> TakeKilledThreads(uint32_t pid);

  // For a daemon's windows: hands over the stacks so far and starts afresh.
  // Processes, code objects and names stay (they are still needed).
  WindowStacks TakeStacks();
  // After the stacks TakeStacks() returned are written: forgets the exited
  // processes' images, names and code objects, then drops cached names and
  // code objects of live processes while there are more than the bounds
  // (they are looked up again when sampled; counted as evictions).
  void EvictAfterWindow(size_t max_native_names, size_t max_python_codes);
  // Samples dropped because the window already held max_stacks stacks, or
  // because their process was refused (ProcessTable::set_max_live_images).
  uint64_t samples_over_stack_limit() const { return samples_over_stack_limit_; }
  uint64_t samples_of_refused_processes() const { return samples_of_refused_processes_; }
  uint64_t malformed_records() const { return decoder_.malformed(); }
  // Ring buffer bytes the kernel's code object copies took (records, unpadded).
  uint64_t python_code_copy_bytes() const { return python_code_copy_bytes_; }
  // Samples left out by --gil because their thread did not hold the GIL.
  uint64_t samples_without_gil() const { return samples_without_gil_; }
  // Samples --gil kept because their process is a free-threaded CPython.
  uint64_t samples_free_threaded() const { return samples_free_threaded_; }

 private:
  // Adds the wall time since the last read of `python`'s tasks to every
  // suspended task's chain, as off-CPU time ending in [await].
  void ChargeAwaitTime(ImageId image, uint32_t pid, PythonProcess& python);
  // A cpu-clock sample, an interval off CPU with its stack, resident
  // growth, an allocation or a killed thread's stack.
  enum class SampleKind { kOnCpu, kOffCpu, kMemory, kAllocation, kOomKilled };
  void HandleSample(SampleRecord& sample);

  ProcessTable processes_;
  StackAggregator stacks_;
  StackAggregator offcpu_stacks_;
  StackAggregator memory_stacks_;
  StackAggregator allocation_stacks_;
  // Sampled blocks not yet freed, by (pid, address): their stack and bytes.
  using Blocks = absl::flat_hash_map<std::pair<uint32_t, uint64_t>, std::pair<RawStack, uint64_t>>;
  Blocks live_blocks_;
  // A process's blocks as they were when it entered finalization.
  Blocks finalized_blocks_;
  // Where each process that allocated stands: the moment of its in-use view.
  enum class AllocatorState : uint8_t { kRunning, kExited, kFinalized };
  absl::flat_hash_map<uint32_t, AllocatorState> allocators_;
  void OnFinalize(uint32_t pid);
  // Threads of OOM-killed processes, by pid, until taken. Bounded: a
  // recording nobody takes them from keeps the first victims' only.
  absl::flat_hash_map<uint32_t, std::vector<KilledThread>> killed_threads_;
  PythonCodeTable python_codes_;
  // Scratch, reused from sample to sample: the record decoded, its stack,
  // its frames' code ids.
  RecordDecoder decoder_;
  RawStack stack_;
  std::vector<PythonCodeId> code_ids_;
  PythonCodeCopies python_code_copies_;
  NativeNameCache native_names_;
  RecorderOptions options_;
  uint64_t python_code_copy_bytes_ = 0;
  uint64_t samples_without_gil_ = 0;
  uint64_t samples_free_threaded_ = 0;
  uint64_t samples_over_stack_limit_ = 0;
  uint64_t samples_of_refused_processes_ = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_RECORDER_H_
