// Weighs samples per distinct raw stack (addresses, not names), so the cost
// of symbolization is paid once per distinct address, not once per sample.
#ifndef PYSTROBE_DAEMON_RECORDING_STACK_AGGREGATOR_H_
#define PYSTROBE_DAEMON_RECORDING_STACK_AGGREGATOR_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
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
  // The first frame its eval loop call ran (PYSTROBE_PY_FRAME_ENTRY): where
  // the frames of one _PyEval_EvalFrameDefault native frame begin.
  bool eval_entry = false;
  // Always zero: with it the frame's bytes are its value, so a stack's
  // frames hash as one block of memory (RawStack's hash), not one by one.
  uint8_t reserved[3] = {};

  friend bool operator==(const RawPythonFrame&, const RawPythonFrame&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const RawPythonFrame& frame) {
    return H::combine(std::move(h), frame.code, frame.instr_offset, frame.eval_entry);
  }
};
static_assert(sizeof(RawPythonFrame) == 12 && std::is_trivially_copyable_v<RawPythonFrame>,
              "RawPythonFrame has no padding: RawStack hashes its frames' bytes");

// A sample's identity before symbolization. Stacks are leaf first, as the
// kernel reports them.
struct RawStack {
  ImageId image = 0;
  uint32_t tid = 0;  // 0 when threads are not told apart
  // The interpreter the thread's frames ran in, where threads are told
  // apart (PyInterpreterState.id; 0: the main one).
  uint64_t interpreter_id = 0;
  std::vector<uint64_t> kernel_ips;
  std::vector<uint64_t> user_ips;
  std::vector<RawPythonFrame> python_frames;
  bool python_truncated = false;  // the Python stack was deeper than the walk
  // Why the thread was off CPU (enum pystrobe_offcpu_reason, or
  // kOffCpuAwait); -1 on CPU.
  int8_t offcpu_reason = -1;
  // For kOffCpuAwait: the suspended task (PythonProcess::AsyncioLabel).
  uint32_t asyncio_task = 0;

  friend bool operator==(const RawStack& a, const RawStack& b) {
    // The Python frames as bytes, as they are hashed: frame by frame, the
    // comparison of a sample with the stack already held was a tenth of a
    // live recording's CPU.
    return a.image == b.image && a.tid == b.tid && a.interpreter_id == b.interpreter_id &&
           a.python_truncated == b.python_truncated && a.offcpu_reason == b.offcpu_reason &&
           a.asyncio_task == b.asyncio_task && a.kernel_ips == b.kernel_ips &&
           a.user_ips == b.user_ips && a.python_frames.size() == b.python_frames.size() &&
           (a.python_frames.empty() ||
            std::memcmp(a.python_frames.data(), b.python_frames.data(),
                        a.python_frames.size() * sizeof(RawPythonFrame)) == 0);
  }
  template <typename H>
  friend H AbslHashValue(H h, const RawStack& stack) {
    // Deep stacks are hashed per sample: the Python frames as one block of
    // bytes (as the ips are) costs a fraction of mixing them in one by one.
    h = H::combine_contiguous(std::move(h),
                              reinterpret_cast<const unsigned char*>(stack.python_frames.data()),
                              stack.python_frames.size() * sizeof(RawPythonFrame));
    return H::combine(std::move(h), stack.python_frames.size(), stack.image, stack.tid,
                      stack.interpreter_id, stack.kernel_ips, stack.user_ips,
                      stack.python_truncated, stack.offcpu_reason, stack.asyncio_task);
  }
};

// What the samples of one stack weigh: how many landed on it, and the time
// they stand for. An on-CPU sample stands for the interval since the previous
// tick on its CPU (the sampling clock's intervals differ, see
// daemon/loader/sampling_clock.h); an off-CPU sample for the time its thread
// was off CPU.
struct StackWeight {
  uint64_t samples = 0;
  uint64_t nanoseconds = 0;

  StackWeight& operator+=(const StackWeight& other) {
    samples += other.samples;
    nanoseconds += other.nanoseconds;
    return *this;
  }
  friend bool operator==(const StackWeight&, const StackWeight&) = default;
};

class StackAggregator {
 public:
  // A stack already held is found, not copied or moved: `stack` is then
  // left as it was, so a caller may reuse its buffers for the next sample.
  void Add(RawStack&& stack, StackWeight weight) {
    weights_.try_emplace(std::move(stack)).first->second += weight;
    total_ += weight;
  }
  void Add(const RawStack& stack, StackWeight weight) {
    weights_.try_emplace(stack).first->second += weight;
    total_ += weight;
  }

  const absl::flat_hash_map<RawStack, StackWeight>& weights() const { return weights_; }
  // Samples, and the time they stand for, of every stack together.
  uint64_t total() const { return total_.samples; }
  uint64_t total_nanoseconds() const { return total_.nanoseconds; }
  // Distinct stacks.
  size_t size() const { return weights_.size(); }
  bool Contains(const RawStack& stack) const { return weights_.contains(stack); }

  // What each stack gained since `earlier`, a copy of this aggregator taken
  // before (a window's difference, for top and on-demand recordings).
  StackAggregator Since(const StackAggregator& earlier) const;

 private:
  absl::flat_hash_map<RawStack, StackWeight> weights_;
  StackWeight total_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_STACK_AGGREGATOR_H_
