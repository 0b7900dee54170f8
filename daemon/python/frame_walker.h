// Walks every thread's Python stack from userspace, with exactly the steps and
// offsets the kernel walker uses (bpf/pystrobe_abi.h), for tests that prove
// the offsets and for `pystrobe dump`.
#ifndef PYSTROBE_DAEMON_PYTHON_FRAME_WALKER_H_
#define PYSTROBE_DAEMON_PYTHON_FRAME_WALKER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/python/interpreter_finder.h"
#include "daemon/python/process_memory.h"

namespace pystrobe {

// One Python frame as the kernel walker records it.
struct PythonFrame {
  uint64_t code_address = 0;
  uint32_t stamp = 0;          // pystrobe_python_code_stamp32, as samples carry it
  int32_t instr_offset = 0;    // byte offset from the first instruction; < 0: not started
  uint64_t frame_address = 0;  // the PyFrameObject / _PyInterpreterFrame (asyncio matches on it)
};

struct PythonThread {
  uint64_t thread_state_address = 0;         // PyThreadState *
  uint64_t thread_id = 0;                    // PyThreadState.thread_id (pthread_t)
  std::optional<uint64_t> native_thread_id;  // the kernel tid (3.11+)
  bool holds_gil = false;
  std::vector<PythonFrame> frames;  // innermost first
  bool truncated = false;           // deeper than max_frames
  // OK, or why the frame chain broke off before its end (the thread ran on
  // and reused a frame as it was read); `frames` holds what was read first.
  absl::Status frames_status;
};

class PythonFrameWalker {
 public:
  static constexpr size_t kDefaultMaxFrames = 1024;
  static constexpr size_t kMaxThreads = 16384;
  static constexpr size_t kMaxInterpreters = 256;

  // `memory` and `interpreter` must outlive the walker.
  PythonFrameWalker(const ProcessMemory& memory, const PythonInterpreter& interpreter,
                    size_t max_frames = kDefaultMaxFrames)
      : memory_(memory), interpreter_(interpreter), max_frames_(max_frames) {}

  // Every thread of every interpreter, in the interpreter's list order. The
  // process keeps running: a thread that exits mid-walk may end the walk with
  // an error, a frame chain that changes mid-read ends that thread's frames
  // (PythonThread::frames_status); loops in corrupt lists end at the limits above.
  absl::StatusOr<std::vector<PythonThread>> WalkAllThreads() const;

  // The frames of one thread state.
  absl::Status WalkFrames(uint64_t thread_state, PythonThread& thread) const;

 private:
  // The thread holding the GIL of `interpreter_state`, or 0.
  absl::StatusOr<uint64_t> GilHolder(uint64_t interpreter_state) const;
  absl::StatusOr<uint64_t> ReadPointer(uint64_t address) const;

  const ProcessMemory& memory_;
  const PythonInterpreter& interpreter_;
  size_t max_frames_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_PYTHON_FRAME_WALKER_H_
