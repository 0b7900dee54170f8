// Turns aggregated raw stacks into a symbolized Profile: a process frame, an
// optional thread frame, then native frames from the outermost caller down to
// the kernel frames where the sample was taken.
#ifndef PYSTROBE_DAEMON_RECORDING_PROFILE_BUILDER_H_
#define PYSTROBE_DAEMON_RECORDING_PROFILE_BUILDER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/recording/native_name_cache.h"
#include "daemon/recording/process_table.h"
#include "daemon/recording/stack_aggregator.h"
#include "daemon/symbolizer/kernel_symbolizer.h"
#include "model/profile.h"

namespace pystrobe {

// What a Python frame's line says.
enum class PythonLineMode {
  kCurrentLine,  // the line being run (default)
  kFunction,     // the line of the function's definition (--function)
  kNone,         // no line at all (--nolineno)
};

class Recorder;

struct ProfileBuilderOptions {
  bool threads = false;  // add "<thread name> tid=<tid>" under the process
  // Keep native frames around the Python ones (--native); otherwise a
  // CPython process shows Python frames and one "[native]" leaf.
  bool native = false;
  PythonLineMode python_lines = PythonLineMode::kCurrentLine;
  bool full_filenames = false;
  // Samples of a running asyncio task read [task NAME], the frames of the
  // tasks awaiting it, then the task's own frames (--asyncio).
  bool asyncio = false;
};

// The builder options that a recording's flags ask for: `record`'s
// RecordOptions and the control protocol's RecordRequest name them alike.
template <typename RecordingFlags>
ProfileBuilderOptions ProfileBuilderOptionsFrom(const RecordingFlags& flags) {
  return {.threads = flags.threads,
          .native = flags.native,
          .python_lines = flags.function_lines    ? PythonLineMode::kFunction
                          : flags.no_line_numbers ? PythonLineMode::kNone
                                                  : PythonLineMode::kCurrentLine,
          .full_filenames = flags.full_filenames};
}

// Native frames, leaf first, searched for a CUDA wait.
inline constexpr size_t kGpuWaitScanFrames = 32;

class ProfileBuilder {
 public:
  // `processes`, `python_codes`, `native_names` and `kernel` must outlive the
  // builder; `kernel` may be null (kernel frames then read "0x..._[k]").
  ProfileBuilder(const ProcessTable* processes, const PythonCodeTable* python_codes,
                 NativeNameCache* native_names, const KernelSymbolizer* kernel,
                 ProfileBuilderOptions options);
  // Names the stacks `recorder` holds, with its processes, code objects and
  // native names; `recorder` and `kernel` must outlive the builder.
  ProfileBuilder(Recorder& recorder, const KernelSymbolizer* kernel, ProfileBuilderOptions options);

  // How a set of stacks is weighed into a profile: a stack's count there is
  // samples x per_sample + nanoseconds x per_nanosecond, rounded. The time
  // the samples stand for goes with them as it is (ProfileStack::nanoseconds).
  struct Weighting {
    double per_sample = 0;
    double per_nanosecond = 0;
    // A frame above every process frame ("[on-cpu]", "[off-cpu]"), or none.
    std::string root = {};
    // Stacks of resident growth or allocations (Recorder::memory_stacks,
    // allocation_stacks): taken in a BPF program on a tracepoint or uprobe,
    // whose frames and the tracepoint's are left out, and weighing bytes
    // (per_nanosecond 1), not time.
    bool resident_growth = false;
  };

  // Adds every stack of `stacks` to `profile`, counting samples.
  void AddTo(const StackAggregator& stacks, Profile& profile) {
    AddTo(stacks, {.per_sample = 1}, profile);
  }
  void AddTo(const StackAggregator& stacks, const Weighting& weighting, Profile& profile);
  // Adds every stack of resident growth or allocations, counting the bytes
  // its samples stand for.
  void AddBytesTo(const StackAggregator& stacks, Profile& profile) {
    AddTo(stacks, {.per_nanosecond = 1, .resident_growth = true}, profile);
  }

 private:
  // The running kernel's build id (/sys/kernel/notes), "" when unknown.
  static const std::string& KernelBuildId();
  const std::string& KernelName(uint64_t address);
  // How many of a native-only stack's frames (leaf first) are the thread's.
  size_t NativeDepth(const ProcessImage& image, const std::vector<uint64_t>& user_ips);
  Frame NativeFrame(const ProcessImage& image, uint64_t address);
  // A native frame of the stack, leaf first, above any interpreter frame, is
  // one of CUDA's synchronisations or blocking copies (daemon/gpu/gpu_wait.h).
  bool WaitsOnGpu(const ProcessImage& image, const RawStack& stack);
  const std::string& PythonName(const ProcessImage& image, const RawPythonFrame& frame);
  std::string NamePythonFrame(const ProcessImage& image, const RawPythonFrame& frame) const;
  std::string PythonSymbolName(const ProcessImage& image, const PythonFrameSymbol& frame) const;
  // With --asyncio: the index of the outermost Python frame that is the own
  // coroutine of a task seen, or none; `label` gets the task's frames above it.
  std::optional<size_t> AsyncioTaskRoot(const ProcessImage& image, const RawStack& stack,
                                        std::vector<Frame>& label) const;
  // Frames of a sample that has Python frames, root first, after the
  // process and thread frames.
  // Python frames in place of the eval loop frames that ran them (Python ->
  // C -> Python in true order); false, adding nothing, when the two stacks
  // do not pair up.
  bool AddInterleavedStack(const ProcessImage& image, const RawStack& stack,
                           std::vector<Frame>& frames);
  void AddPythonStack(const ProcessImage& image, const RawStack& stack, std::vector<Frame>& frames);

  const ProcessTable* processes_;
  const PythonCodeTable* python_codes_;
  NativeNameCache* native_names_;
  const KernelSymbolizer* kernel_;
  ProfileBuilderOptions options_;
  // The module of every kernel frame: "[kernel]" with the kernel's build id.
  std::shared_ptr<const NativeModule> kernel_module_;
  // Kernel names are resolved once per distinct address.
  absl::flat_hash_map<uint64_t, std::string> kernel_names_;
  // Python frame names, by code id and instruction offset (0 unless lines
  // are the current ones).
  absl::flat_hash_map<std::pair<PythonCodeId, int32_t>, std::string> python_names_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_PROFILE_BUILDER_H_
