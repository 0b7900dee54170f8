#include "daemon/recording/profile_builder.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/elf/elf_file.h"
#include "daemon/gpu/gpu_wait.h"
#include "daemon/recording/recorder.h"

namespace pystrobe {
namespace {

// The leaf frame of an off-CPU stack: why the thread was away.
std::string OffCpuReasonFrame(int reason) {
  switch (reason) {
    case PYSTROBE_OFFCPU_RUNQUEUE:
      return "[runqueue]";
    case PYSTROBE_OFFCPU_IO:
      return "[io wait]";
    case PYSTROBE_OFFCPU_SLEEP:
      return "[sleep]";
    case PYSTROBE_OFFCPU_GIL:
      return "[gil wait]";
    case kOffCpuAwait:
      return "[await]";
  }
  return "[off cpu]";
}

// Kernel frames of the BPF program that took a stack, and of its tracepoint
// glue: "bpf_prog_<tag>_<name>_[k]", "bpf_trace_run4_[k]", "__bpf_trace_..._[k]",
// "__traceiter_sched_switch_[k]", and the rss_stat tracepoint's own "mm_trace_rss_stat_[k]".
bool IsBpfMachinery(absl::string_view name) {
  return absl::StartsWith(name, "bpf_prog_") || absl::StartsWith(name, "bpf_trace_run") ||
         absl::StartsWith(name, "__bpf_trace_") || absl::StartsWith(name, "__traceiter_") ||
         absl::StartsWith(name, "mm_trace_rss_stat");
}

}  // namespace

void ProfileBuilder::AddTo(const StackAggregator& stacks, const Weighting& weighting,
                           Profile& profile) {
  for (const auto& [stack, weight] : stacks.weights()) {
    uint64_t count = static_cast<uint64_t>(
        std::llround(static_cast<double>(weight.samples) * weighting.per_sample +
                     static_cast<double>(weight.nanoseconds) * weighting.per_nanosecond));
    if (count == 0) continue;
    const ProcessImage& image = processes_->image(stack.image);
    std::vector<Frame> frames;
    frames.reserve(4 + stack.user_ips.size() + stack.kernel_ips.size());
    if (!weighting.root.empty()) frames.push_back({weighting.root, FrameKind::kMarker});
    frames.push_back({absl::StrCat(image.comm, " (", image.pid, ")"), FrameKind::kProcess});
    if (options_.threads) {
      auto name = image.thread_names.find(stack.tid);
      std::string thread = name != image.thread_names.end() ? name->second : "?";
      // A sub-interpreter's thread says which (3.12+: each has its own GIL).
      if (stack.interpreter_id != 0)
        absl::StrAppend(&thread, " [interpreter ", stack.interpreter_id, "]");
      frames.push_back({absl::StrCat(thread, " tid=", stack.tid), FrameKind::kThread});
    }
    if (!stack.python_frames.empty() && image.python != nullptr) {
      AddPythonStack(image, stack, frames);
    } else {
      for (size_t i = NativeDepth(image, stack.user_ips); i-- > 0;) {
        frames.push_back(NativeFrame(image, FrameLookupAddress(stack.user_ips, i)));
      }
    }
    // An off-CPU stack was taken inside our sched_switch program: its
    // innermost kernel frames are BPF's, not the thread's.
    size_t own_frames = 0;
    if (stack.offcpu_reason >= 0 || weighting.resident_growth) {
      while (own_frames < stack.kernel_ips.size() &&
             IsBpfMachinery(KernelName(FrameLookupAddress(stack.kernel_ips, own_frames)))) {
        ++own_frames;
      }
    }
    for (size_t i = stack.kernel_ips.size(); i-- > own_frames;) {
      frames.push_back({KernelName(FrameLookupAddress(stack.kernel_ips, i)), FrameKind::kKernel,
                        kernel_module_});
    }
    if (stack.user_ips.empty() && stack.kernel_ips.empty() && stack.python_frames.empty()) {
      frames.push_back({"[unknown]", FrameKind::kMarker});
    }
    // Waiting on the GPU, on CPU (CUDA spins) or asleep in the driver, is
    // not the CPU's work: the stack ends in [gpu wait] (for an on-CPU
    // CPython stack, in place of its [native] leaf). A thread preempted
    // there still waited for a CPU: [runqueue] stays.
    bool gpu_wait = WaitsOnGpu(image, stack);
    if (stack.offcpu_reason >= 0) {
      bool waited_on_gpu = gpu_wait && stack.offcpu_reason != PYSTROBE_OFFCPU_RUNQUEUE;
      frames.push_back(
          {waited_on_gpu ? std::string(kGpuWaitFrame) : OffCpuReasonFrame(stack.offcpu_reason),
           FrameKind::kMarker});
    } else if (gpu_wait) {
      if (!frames.empty() && frames.back().kind == FrameKind::kMarker &&
          frames.back().name == "[native]") {
        frames.pop_back();
      }
      frames.push_back({std::string(kGpuWaitFrame), FrameKind::kMarker});
    }
    // Resident growth weighs bytes (in its count), not time.
    profile.Add(std::move(frames), count, weighting.resident_growth ? 0 : weight.nanoseconds);
  }
}

bool ProfileBuilder::WaitsOnGpu(const ProcessImage& image, const RawStack& stack) {
  // The native frames Python called, leaf first: CUDA's waits are there,
  // never below the interpreter.
  size_t depth = std::min(stack.user_ips.size(), kGpuWaitScanFrames);
  for (size_t i = 0; i < depth; ++i) {
    uint64_t address = FrameLookupAddress(stack.user_ips, i);
    if (image.python != nullptr && image.python->InInterpreter(address)) break;
    if (IsGpuWaitSymbol(native_names_->Name(image, address).name)) return true;
  }
  return false;
}

bool ProfileBuilder::AddInterleavedStack(const ProcessImage& image, const RawStack& stack,
                                         std::vector<Frame>& frames) {
  const PythonProcess& python = *image.python;
  if (stack.python_truncated || stack.user_ips.empty()) return false;
  // The Python frames each eval loop call ran, leaf first: a call's frames
  // end (toward the root) with the frame that began it.
  std::vector<std::pair<size_t, size_t>> calls;  // [first, last] indices, leaf first
  size_t first = 0;
  for (size_t i = 0; i < stack.python_frames.size(); ++i) {
    if (stack.python_frames[i].eval_entry) {
      calls.emplace_back(first, i);
      first = i + 1;
    }
  }
  if (first != stack.python_frames.size()) return false;  // a call without its beginning
  size_t eval_frames = 0;
  for (size_t i = 0; i < stack.user_ips.size(); ++i) {
    if (python.InEvalLoop(FrameLookupAddress(stack.user_ips, i))) ++eval_frames;
  }
  // A native walk cut short (ending [unknown]) lost eval loop frames of the
  // oldest calls: then nothing tells where their Python frames belong.
  if (eval_frames != calls.size() || eval_frames == 0) return false;
  // Root first: each eval loop frame becomes its Python frames; the
  // interpreter's own C frames between them are left out, as the leaf
  // natives of a stack without interleaving leave them out.
  size_t call = calls.size();
  for (size_t i = stack.user_ips.size(); i-- > 0;) {
    uint64_t address = FrameLookupAddress(stack.user_ips, i);
    if (python.InEvalLoop(address)) {
      const auto& [leaf, root] = calls[--call];
      for (size_t f = root + 1; f-- > leaf;) {
        frames.push_back({PythonName(image, stack.python_frames[f]), FrameKind::kPython});
      }
    } else if (!python.InInterpreter(address)) {
      frames.push_back(NativeFrame(image, address));
    }
  }
  return true;
}

void ProfileBuilder::AddPythonStack(const ProcessImage& image, const RawStack& stack,
                                    std::vector<Frame>& frames) {
  const PythonProcess& python = *image.python;
  // With whole native stacks, Python frames go where their eval loop ran.
  if (options_.native && !options_.asyncio && AddInterleavedStack(image, stack, frames)) return;
  if (stack.python_truncated) frames.push_back({"[truncated]", FrameKind::kMarker});
  // Native frames, root first, split around the interpreter's own frames:
  // those below the outermost interpreter frame started the interpreter,
  // those above the innermost one were called from Python.
  size_t root_side_end = stack.user_ips.size();  // exclusive, in root-first order
  size_t leaf_side_begin = stack.user_ips.size();
  for (size_t depth = 0; depth < stack.user_ips.size(); ++depth) {
    uint64_t address = FrameLookupAddress(stack.user_ips, stack.user_ips.size() - 1 - depth);
    if (python.InInterpreter(address)) {
      if (root_side_end == stack.user_ips.size()) root_side_end = depth;
      leaf_side_begin = depth + 1;
    }
  }
  auto native_frame = [&](size_t depth) {
    size_t index = stack.user_ips.size() - 1 - depth;
    return NativeFrame(image, FrameLookupAddress(stack.user_ips, index));
  };
  bool interpreter_seen = root_side_end < stack.user_ips.size();
  if (options_.native && interpreter_seen) {
    for (size_t depth = 0; depth < root_side_end; ++depth) frames.push_back(native_frame(depth));
  }
  size_t outermost = stack.python_frames.size();
  if (options_.asyncio) {
    std::vector<Frame> label;
    if (const AsyncioTaskLabel* task = python.AsyncioLabel(stack.asyncio_task)) {
      // A suspended task's chain: its task is known exactly.
      label.push_back({absl::StrCat("[task ", task->name, "]"), FrameKind::kMarker});
      for (const PythonFrameSymbol& frame : task->awaiter_frames) {
        label.push_back({PythonSymbolName(image, frame), FrameKind::kPython});
      }
      frames.insert(frames.end(), label.begin(), label.end());
    } else if (std::optional<size_t> root = AsyncioTaskRoot(image, stack, label)) {
      // The event loop's frames below the task say nothing about it.
      frames.insert(frames.end(), label.begin(), label.end());
      outermost = *root + 1;
    }
  }
  for (size_t i = outermost; i-- > 0;) {
    frames.push_back({PythonName(image, stack.python_frames[i]), FrameKind::kPython});
  }
  if (options_.native) {
    size_t first = interpreter_seen ? leaf_side_begin : 0;
    for (size_t depth = first; depth < stack.user_ips.size(); ++depth) {
      frames.push_back(native_frame(depth));
    }
  } else if (stack.kernel_ips.empty() && !stack.user_ips.empty() &&
             !python.InInterpreter(stack.user_ips.front())) {
    // The thread was running native code (an extension, libc) for Python.
    frames.push_back({"[native]", FrameKind::kMarker});
  }
}

ProfileBuilder::ProfileBuilder(Recorder& recorder, const KernelSymbolizer* kernel,
                               ProfileBuilderOptions options)
    : ProfileBuilder(&recorder.processes(), &recorder.python_codes(), &recorder.native_names(),
                     kernel, options) {}

ProfileBuilder::ProfileBuilder(const ProcessTable* processes, const PythonCodeTable* python_codes,
                               NativeNameCache* native_names, const KernelSymbolizer* kernel,
                               ProfileBuilderOptions options)
    : processes_(processes),
      python_codes_(python_codes),
      native_names_(native_names),
      kernel_(kernel),
      options_(options) {
  auto kernel_module = std::make_shared<NativeModule>();
  kernel_module->path = "[kernel]";
  kernel_module->build_id = KernelBuildId();
  kernel_module_ = std::move(kernel_module);
}

const std::string& ProfileBuilder::KernelBuildId() {
  // One kernel per boot: read once per pystrobe process.
  static const std::string* const build_id = new std::string(ReadKernelBuildId());
  return *build_id;
}

size_t ProfileBuilder::NativeDepth(const ProcessImage& image,
                                   const std::vector<uint64_t>& user_ips) {
  // A frame-pointer walk through code built without frame pointers reads on
  // into garbage once it leaves them. The first address that no mapping holds
  // (nor a JIT names) is where the truth ended: it stays as one [unknown] root.
  for (size_t i = 0; i < user_ips.size(); ++i) {
    const NativeFrameName& name = native_names_->Name(image, FrameLookupAddress(user_ips, i));
    if (name.module == nullptr && name.name == "[unknown]") return i + 1;
  }
  return user_ips.size();
}

Frame ProfileBuilder::NativeFrame(const ProcessImage& image, uint64_t address) {
  const NativeFrameName& name = native_names_->Name(image, address);
  return {name.name, FrameKind::kNative, name.module, name.file_offset};
}

const std::string& ProfileBuilder::PythonName(const ProcessImage& image,
                                              const RawPythonFrame& frame) {
  // Distinct stacks share most of their frames: each is named once. A code
  // id belongs to one image, so the id and offset say the name.
  const int32_t offset =
      options_.python_lines == PythonLineMode::kCurrentLine ? frame.instr_offset : 0;
  auto [it, inserted] = python_names_.try_emplace({frame.code, offset});
  if (inserted) it->second = NamePythonFrame(image, frame);
  return it->second;
}

std::string ProfileBuilder::NamePythonFrame(const ProcessImage& image,
                                            const RawPythonFrame& frame) const {
  const PythonCodeObject* code = python_codes_->Get(frame.code);
  if (code == nullptr) return "[unknown python frame]";
  std::string filename = options_.full_filenames
                             ? code->filename
                             : ShortenPythonFilename(code->filename, image.python->cwd());
  switch (options_.python_lines) {
    case PythonLineMode::kNone:
      return absl::StrCat(code->name, " (", filename, ")");
    case PythonLineMode::kFunction:
      return absl::StrCat(code->name, " (", filename, ":", code->first_line, ")");
    case PythonLineMode::kCurrentLine:
      break;
  }
  int32_t line = code->line_table.LineForOffset(frame.instr_offset);
  if (line < 0) line = code->first_line;
  return absl::StrCat(code->name, " (", filename, ":", line, ")");
}

std::string ProfileBuilder::PythonSymbolName(const ProcessImage& image,
                                             const PythonFrameSymbol& frame) const {
  std::string filename = options_.full_filenames
                             ? frame.filename
                             : ShortenPythonFilename(frame.filename, image.python->cwd());
  if (options_.python_lines == PythonLineMode::kNone || frame.line < 0) {
    return absl::StrCat(frame.name, " (", filename, ")");
  }
  return absl::StrCat(frame.name, " (", filename, ":", frame.line, ")");
}

std::optional<size_t> ProfileBuilder::AsyncioTaskRoot(const ProcessImage& image,
                                                      const RawStack& stack,
                                                      std::vector<Frame>& label) const {
  const PythonProcess& python = *image.python;
  for (size_t i = stack.python_frames.size(); i-- > 0;) {
    const PythonCodeObject* code = python_codes_->Get(stack.python_frames[i].code);
    if (code == nullptr) continue;
    const absl::btree_map<std::string, AsyncioTaskLabel>* tasks =
        python.AsyncioTasksRootedAt(code->address);
    if (tasks == nullptr || tasks->empty()) continue;
    // Tasks running the same coroutine function cannot be told apart by the
    // sample's code objects: they share one frame naming them all (up to 3).
    std::vector<std::string> names;
    for (const auto& [name, unused] : *tasks) names.push_back(name);
    std::string shown = names.size() <= 3
                            ? absl::StrJoin(names, "|")
                            : absl::StrCat(names.front(), "|...(", names.size(), " tasks)");
    label.push_back({absl::StrCat("[task ", shown, "]"), FrameKind::kMarker});
    // The awaiters are shown when every candidate has the same ones.
    const AsyncioTaskLabel& first = tasks->begin()->second;
    bool same = true;
    for (const auto& [name, task] : *tasks) {
      if (task.awaiter_frames.size() != first.awaiter_frames.size()) same = false;
      for (size_t f = 0; same && f < first.awaiter_frames.size(); ++f) {
        same = task.awaiter_frames[f].name == first.awaiter_frames[f].name &&
               task.awaiter_frames[f].filename == first.awaiter_frames[f].filename;
      }
    }
    if (same) {
      for (const PythonFrameSymbol& frame : first.awaiter_frames) {
        label.push_back({PythonSymbolName(image, frame), FrameKind::kPython});
      }
    }
    return i;
  }
  return std::nullopt;
}

const std::string& ProfileBuilder::KernelName(uint64_t address) {
  auto [it, inserted] = kernel_names_.try_emplace(address);
  if (inserted) {
    it->second =
        kernel_ != nullptr ? kernel_->Symbolize(address) : absl::StrFormat("0x%x_[k]", address);
  }
  return it->second;
}

}  // namespace pystrobe
