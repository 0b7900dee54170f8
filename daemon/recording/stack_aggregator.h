// Counts samples per distinct raw stack (addresses, not names), so the cost
// of symbolization is paid once per distinct address, not once per sample.
#ifndef PYSTROBE_DAEMON_RECORDING_STACK_AGGREGATOR_H_
#define PYSTROBE_DAEMON_RECORDING_STACK_AGGREGATOR_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/recording/process_table.h"
#include "daemon/recording/python_code_table.h"

namespace pystrobe {

// The off-CPU "reason" of the wall time an asyncio task spent suspended
// (record --asyncio --off-cpu): never sent by the kernel, whose reasons
// (enum pystrobe_offcpu_reason) are small.
inline constexpr int8_t kOffCpuAwait = 100;

// A Python frame as sampled: its code object and the instruction's byte offset.
struct RawPythonFrame {
  PythonCodeId code = 0;
  int32_t instr_offset = 0;

  friend bool operator==(const RawPythonFrame&, const RawPythonFrame&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const RawPythonFrame& frame) {
    return H::combine(std::move(h), frame.code, frame.instr_offset);
  }
};

// A sample's identity before symbolization. Stacks are leaf first, as the
// kernel reports them.
struct RawStack {
  ImageId image = 0;
  uint32_t tid = 0;  // 0 when threads are not told apart
  std::vector<uint64_t> kernel_ips;
  std::vector<uint64_t> user_ips;
  std::vector<RawPythonFrame> python_frames;
  bool python_truncated = false;  // the Python stack was deeper than the walk
  // Why the thread was off CPU (enum pystrobe_offcpu_reason, or
  // kOffCpuAwait); -1 on CPU.
  int8_t offcpu_reason = -1;
  // For kOffCpuAwait: the suspended task (PythonProcess::AsyncioLabel).
  uint32_t asyncio_task = 0;

  friend bool operator==(const RawStack&, const RawStack&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const RawStack& stack) {
    return H::combine(std::move(h), stack.image, stack.tid, stack.kernel_ips, stack.user_ips,
                      stack.python_frames, stack.python_truncated, stack.offcpu_reason,
                      stack.asyncio_task);
  }
};

class StackAggregator {
 public:
  void Add(RawStack stack, uint64_t count = 1) {
    counts_[std::move(stack)] += count;
    total_ += count;
  }

  const absl::flat_hash_map<RawStack, uint64_t>& counts() const { return counts_; }
  uint64_t total() const { return total_; }
  // Distinct stacks.
  size_t size() const { return counts_.size(); }
  bool Contains(const RawStack& stack) const { return counts_.contains(stack); }

 private:
  absl::flat_hash_map<RawStack, uint64_t> counts_;
  uint64_t total_ = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_STACK_AGGREGATOR_H_
