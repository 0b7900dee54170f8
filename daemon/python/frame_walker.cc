#include "daemon/python/frame_walker.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "daemon/python/code_object_reader.h"

namespace pystrobe {

absl::StatusOr<uint64_t> PythonFrameWalker::ReadPointer(uint64_t address) const {
  return memory_.ReadValue<uint64_t>(address);
}

absl::StatusOr<uint64_t> PythonFrameWalker::GilHolder(uint64_t interpreter_state) const {
  const pystrobe_python_offsets& o = interpreter_.layout.abi;
  uint64_t gil = 0;
  if (o.runtime_gil != PYSTROBE_PY_OFFSET_NONE) {
    gil = interpreter_.runtime_address + o.runtime_gil;
  } else {
    absl::StatusOr<uint64_t> pointer = ReadPointer(interpreter_state + o.interp_gil_ptr);
    if (!pointer.ok()) return pointer.status();
    gil = *pointer;
  }
  if (gil == 0) return 0;
  // A free-threaded build's GIL is off, with no holder, unless an extension
  // turned it on.
  if (o.gil_enabled != PYSTROBE_PY_OFFSET_NONE) {
    absl::StatusOr<int32_t> enabled = memory_.ReadValue<int32_t>(gil + o.gil_enabled);
    if (!enabled.ok()) return enabled.status();
    if (*enabled == 0) return 0;
  }
  // 2.7, 3.6: the holder is _PyThreadState_Current, NULL while the GIL is free.
  if (o.gil_locked == PYSTROBE_PY_OFFSET_NONE) return ReadPointer(gil + o.gil_last_holder);
  absl::StatusOr<int32_t> locked = memory_.ReadValue<int32_t>(gil + o.gil_locked);
  if (!locked.ok()) return locked.status();
  if (*locked <= 0) return 0;  // free, or -1: not created yet
  return ReadPointer(gil + o.gil_last_holder);
}

absl::Status PythonFrameWalker::WalkFrames(uint64_t thread_state, PythonThread& thread) const {
  const pystrobe_python_offsets& o = interpreter_.layout.abi;
  absl::StatusOr<uint64_t> frame = ReadPointer(thread_state + o.tstate_frame);
  if (!frame.ok()) return frame.status();
  if (o.frame_model == PYSTROBE_PY_FRAMES_CFRAME && *frame != 0) {
    frame = ReadPointer(*frame + o.cframe_current_frame);
    if (!frame.ok()) return frame.status();
  }
  for (uint64_t current = *frame; current != 0;) {
    if (thread.frames.size() >= max_frames_) {
      thread.truncated = true;
      break;
    }
    uint8_t raw[128];
    // frame_code, frame_previous, frame_instr and frame_owner all lie in the
    // first 128 bytes of both frame structures.
    if (absl::Status status = memory_.Read(current, raw, sizeof(raw)); !status.ok()) {
      return status;
    }
    auto field = [&raw]<typename T>(uint32_t offset, T) {
      T value;
      std::memcpy(&value, raw + offset, sizeof(T));
      return value;
    };
    const uint64_t code = pystrobe_python_frame_code(field(o.frame_code, uint64_t{}), &o);
    const uint64_t previous = field(o.frame_previous, uint64_t{});
    const bool shim = o.frame_owner != PYSTROBE_PY_OFFSET_NONE &&
                      pystrobe_python_is_shim_frame(field(o.frame_owner, uint8_t{}), &o);
    if (!shim && code != 0) {
      uint8_t code_head[256];
      const uint32_t code_head_size =
          std::max({o.code_filename, o.code_name, o.code_firstlineno, o.object_type}) + 8;
      if (absl::Status status = memory_.Read(code, code_head, code_head_size); !status.ok()) {
        return status;
      }
      uint64_t type, filename, name;
      int32_t first_line;
      std::memcpy(&type, code_head + o.object_type, 8);
      std::memcpy(&filename, code_head + o.code_filename, 8);
      std::memcpy(&name, code_head + o.code_name, 8);
      std::memcpy(&first_line, code_head + o.code_firstlineno, 4);
      if (type == interpreter_.code_type_address) {
        PythonFrame out;
        out.code_address = code;
        out.frame_address = current;
        out.stamp = pystrobe_python_code_stamp32(
            pystrobe_python_code_stamp(filename, name, static_cast<uint32_t>(first_line)));
        switch (o.frame_model) {
          case PYSTROBE_PY_FRAMES_OBJECT_LASTI_BYTES:
            out.instr_offset = field(o.frame_instr, int32_t{});
            break;
          case PYSTROBE_PY_FRAMES_OBJECT_LASTI_UNITS:
            out.instr_offset = field(o.frame_instr, int32_t{}) * 2;
            break;
          default: {
            const int32_t copy = o.frame_tlbc_index == PYSTROBE_PY_OFFSET_NONE
                                     ? 0
                                     : field(o.frame_tlbc_index, int32_t{});
            absl::StatusOr<uint64_t> bytecode = FrameBytecodeStart(memory_, o, code, copy);
            if (!bytecode.ok()) return bytecode.status();
            out.instr_offset = static_cast<int32_t>(
                static_cast<int64_t>(field(o.frame_instr, uint64_t{}) - *bytecode));
            break;
          }
        }
        thread.frames.push_back(out);
      }
    }
    if (previous == current) {
      return absl::DataLossError(absl::StrFormat("frame 0x%x is its own caller", current));
    }
    current = previous;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PythonThread>> PythonFrameWalker::WalkAllThreads() const {
  const pystrobe_python_offsets& o = interpreter_.layout.abi;
  std::vector<PythonThread> threads;
  absl::StatusOr<uint64_t> interp =
      ReadPointer(interpreter_.runtime_address + o.runtime_interpreters_head);
  if (!interp.ok()) return interp.status();
  for (size_t interpreters = 0; *interp != 0; ++interpreters) {
    if (interpreters >= kMaxInterpreters) {
      return absl::DataLossError("interpreter list does not end (corrupt or looping)");
    }
    absl::StatusOr<uint64_t> gil_holder = GilHolder(*interp);
    if (!gil_holder.ok()) return gil_holder.status();
    absl::StatusOr<uint64_t> tstate = ReadPointer(*interp + o.interp_tstate_head);
    if (!tstate.ok()) return tstate.status();
    while (*tstate != 0) {
      if (threads.size() >= kMaxThreads) {
        return absl::DataLossError("thread list does not end (corrupt or looping)");
      }
      PythonThread thread;
      thread.thread_state_address = *tstate;
      absl::StatusOr<uint64_t> thread_id = ReadPointer(*tstate + o.tstate_thread_id);
      if (!thread_id.ok()) return thread_id.status();
      thread.thread_id = *thread_id;
      if (o.tstate_native_thread_id != PYSTROBE_PY_OFFSET_NONE) {
        absl::StatusOr<uint64_t> native = ReadPointer(*tstate + o.tstate_native_thread_id);
        if (!native.ok()) return native.status();
        thread.native_thread_id = *native;
      }
      thread.holds_gil = *gil_holder == *tstate;
      // The thread state list held; only this thread's frames moved under us.
      thread.frames_status = WalkFrames(*tstate, thread);
      threads.push_back(std::move(thread));
      tstate = ReadPointer(*tstate + o.tstate_next);
      if (!tstate.ok()) return tstate.status();
    }
    interp = ReadPointer(*interp + o.interp_next);
    if (!interp.ok()) return interp.status();
  }
  return threads;
}

}  // namespace pystrobe
