#include "daemon/python/asyncio_tasks.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pystrobe {
namespace {

// Opcodes that mark "suspended in an await" (Include/opcode.h of each version):
// the instruction after the suspension point is YIELD_FROM (3.8-3.10) or a
// RESUME whose oparg is 2 or 3 (3.11-3.12; 150 is 3.11's RESUME_QUICK, 240
// 3.12's INSTRUMENTED_RESUME). 3.13 says it in the frame state instead.
constexpr uint8_t kYieldFrom = 72;
constexpr uint8_t kResume = 151;
constexpr uint8_t kResumeQuick311 = 150;
constexpr uint8_t kInstrumentedResume312 = 240;
// gi_frame_state values (Include/internal/pycore_frame.h), 3.11+.
struct FrameStates {
  int8_t created;
  int8_t suspended;  // 3.11-3.12: suspended, in an await or not
  // 3.13+: suspended in an await (yield from); 3.15 adds a locked variant
  // just above it.
  int8_t yield_from_first, yield_from_last;
  int8_t executing;
  int8_t finished;  // this and above: completed or cleared
};
constexpr int8_t kNoState = -128;
constexpr FrameStates kFrameStates311 = {-2, -1, kNoState, kNoState, 0, 1};
constexpr FrameStates kFrameStates313 = {-3, -2, -1, -1, 0, 1};
// 3.15 renumbered them from 0: created, suspended, yield from (plain and
// locked), executing, cleared.
constexpr FrameStates kFrameStates315 = {0, 1, 2, 3, 4, 5};

const FrameStates& FrameStatesFor(int minor) {
  if (minor >= 15) return kFrameStates315;
  if (minor >= 13) return kFrameStates313;
  return kFrameStates311;
}

// Reads that fail because the process is gone or closed to us end the whole
// read; anything else is one object that changed or is not what it seemed.
bool IsFatal(const absl::Status& status) {
  return status.code() == absl::StatusCode::kNotFound ||
         status.code() == absl::StatusCode::kPermissionDenied;
}

template <typename T>
T Load(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

}  // namespace

absl::StatusOr<uint64_t> AsyncioTaskReader::CoroutineFrameAddress(uint64_t coroutine) {
  const PythonObjectLayout& l = objects_.layout();
  if (l.gen_frame != kNoObjectField) return objects_.Pointer(coroutine + l.gen_frame);
  return coroutine + l.gen_iframe;
}

absl::StatusOr<AsyncioTaskReader::CoroutineFrame> AsyncioTaskReader::ReadCoroutineFrame(
    uint64_t coroutine) {
  const PythonObjectLayout& l = objects_.layout();
  const pystrobe_python_offsets& o = interpreter_.layout.abi;
  const ProcessMemory& memory = objects_.memory();
  absl::StatusOr<std::string> type = objects_.TypeNameOf(coroutine);
  if (!type.ok()) return type.status();
  if (*type != "coroutine" && *type != "generator") {
    return absl::InvalidArgumentError(absl::StrCat("a ", *type, " is not a coroutine"));
  }
  CoroutineFrame out;
  const FrameStates& states = FrameStatesFor(l.minor);
  int8_t state = 0;
  if (l.gen_frame_state != kNoObjectField) {
    absl::StatusOr<int8_t> s = memory.ReadValue<int8_t>(coroutine + l.gen_frame_state);
    if (!s.ok()) return s.status();
    state = *s;
    if (state >= states.finished) return absl::FailedPreconditionError("coroutine finished");
  }
  absl::StatusOr<uint64_t> frame = CoroutineFrameAddress(coroutine);
  if (!frame.ok()) return frame.status();
  if (*frame == 0) return absl::FailedPreconditionError("coroutine finished");
  out.frame_address = *frame;
  uint8_t raw[128];
  if (absl::Status status = memory.Read(*frame, raw, sizeof(raw)); !status.ok()) return status;
  out.code_address = pystrobe_python_frame_code(Load<uint64_t>(raw + o.frame_code), &o);
  bool awaiting = false;
  switch (o.frame_model) {
    case PYSTROBE_PY_FRAMES_OBJECT_LASTI_BYTES:
    case PYSTROBE_PY_FRAMES_OBJECT_LASTI_UNITS: {
      const int32_t lasti = Load<int32_t>(raw + o.frame_instr);
      out.instr_offset =
          o.frame_model == PYSTROBE_PY_FRAMES_OBJECT_LASTI_UNITS && lasti >= 0 ? lasti * 2 : lasti;
      if (out.instr_offset < 0) {
        out.started = false;
        break;
      }
      absl::StatusOr<uint64_t> bytecode = objects_.Pointer(out.code_address + o.code_code);
      if (!bytecode.ok()) return bytecode.status();
      absl::StatusOr<uint8_t> next = memory.ReadValue<uint8_t>(
          *bytecode + o.bytes_data + static_cast<uint64_t>(out.instr_offset) + 2);
      if (!next.ok()) return next.status();
      awaiting = *next == kYieldFrom;
      break;
    }
    default: {
      const uint64_t instr = Load<uint64_t>(raw + o.frame_instr);
      // A coroutine last stepped by another thread of a free-threaded build
      // points into that thread's copy of the bytecode.
      const int32_t copy = o.frame_tlbc_index == PYSTROBE_PY_OFFSET_NONE
                               ? 0
                               : Load<int32_t>(raw + o.frame_tlbc_index);
      absl::StatusOr<uint64_t> bytecode = FrameBytecodeStart(memory, o, out.code_address, copy);
      if (!bytecode.ok()) return bytecode.status();
      out.instr_offset = static_cast<int32_t>(static_cast<int64_t>(instr - *bytecode));
      out.started = state != states.created;
      if (l.minor >= 13) {
        awaiting = state >= states.yield_from_first && state <= states.yield_from_last;
      } else if (state == states.suspended) {
        absl::StatusOr<uint16_t> next = memory.ReadValue<uint16_t>(instr + 2);
        if (!next.ok()) return next.status();
        const uint8_t opcode = *next & 0xff;
        awaiting =
            (opcode == kResume || opcode == kResumeQuick311 || opcode == kInstrumentedResume312) &&
            (*next >> 8) >= 2;
      }
      break;
    }
  }
  // Before 3.11 a running frame has no stack top (3.8-3.9) or a depth of -1
  // (3.10); from 3.11 its state says so.
  if (l.gen_frame_state != kNoObjectField) {
    out.executing = state == states.executing;
  } else if (l.frame_stacktop != kNoObjectField) {
    out.executing = Load<uint64_t>(raw + l.frame_stacktop) == 0;
  } else {
    out.executing = Load<int32_t>(raw + l.frame_stackdepth) < 0;
  }
  if (!awaiting || out.executing) return out;
  // The awaited object is the top of the suspended frame's value stack
  // (3.15: the slot below it).
  uint64_t top_slot = 0;
  if (l.frame_stacktop != kNoObjectField) {
    top_slot = Load<uint64_t>(raw + l.frame_stacktop) - 8 * uint64_t{l.yield_from_depth};
  } else {
    const int32_t depth = Load<int32_t>(raw + l.frame_stackdepth);
    if (depth <= 0 || depth > (1 << 16)) return out;
    const uint64_t base = l.gen_frame != kNoObjectField ? Load<uint64_t>(raw + l.frame_stack)
                                                        : *frame + l.frame_stack;
    top_slot = base + 8 * static_cast<uint64_t>(depth - 1);
  }
  absl::StatusOr<uint64_t> top = objects_.Pointer(top_slot);
  if (!top.ok()) return top.status();
  // 3.14+: the value stack holds _PyStackRefs, tagged like f_executable.
  out.awaiting = pystrobe_python_frame_code(*top, &o);
  return out;
}

absl::StatusOr<AsyncioTaskReader::AwaitChain> AsyncioTaskReader::ReadAwaitChain(
    uint64_t coroutine) {
  AwaitChain chain;
  uint64_t current = coroutine;
  for (int depth = 0; current != 0 && depth < kMaxAwaitDepth; ++depth) {
    absl::StatusOr<CoroutineFrame> frame = ReadCoroutineFrame(current);
    if (!frame.ok()) {
      if (IsFatal(frame.status())) return frame.status();
      chain.end = frame.status().code();
      break;
    }
    chain.frames.push_back(*frame);
    // A coroutine that has not started awaits nothing; a running one is
    // where its thread is, not in an await.
    if (!frame->started || frame->executing) break;
    current = frame->awaiting;
  }
  return chain;
}

bool AsyncioTaskReader::AwaitChain::SteppedUnderRead() const {
  for (const CoroutineFrame& frame : frames) {
    if (frame.executing) return true;
  }
  // A coroutine awaited by a suspended one cannot have finished yet.
  return !frames.empty() && end == absl::StatusCode::kFailedPrecondition;
}

absl::StatusOr<std::vector<uint64_t>> AsyncioTaskReader::FutureCallbacks(uint64_t future) {
  const PythonObjectLayout& l = objects_.layout();
  std::vector<uint64_t> callbacks;
  uint64_t list = 0;
  absl::StatusOr<bool> c_future = objects_.IsInstance(future, {"_asyncio.Future"});
  if (!c_future.ok()) return c_future.status();
  if (*c_future) {
    absl::StatusOr<uint64_t> first = objects_.Pointer(future + l.future_callback0);
    if (!first.ok()) return first.status();
    if (*first != 0) callbacks.push_back(*first);
    absl::StatusOr<uint64_t> rest = objects_.Pointer(future + l.future_callbacks);
    if (!rest.ok()) return rest.status();
    list = *rest;
  } else {
    absl::StatusOr<uint64_t> rest = objects_.Attribute(future, "_callbacks");
    if (!rest.ok()) return rest.status();
    list = *rest;
  }
  if (list == 0) return callbacks;
  absl::StatusOr<std::string> list_type = objects_.TypeNameOf(list);
  if (!list_type.ok()) return list_type.status();
  if (*list_type != "list") return callbacks;  // None: no callbacks
  absl::StatusOr<std::vector<uint64_t>> entries = objects_.ListItems(list);
  if (!entries.ok()) return entries.status();
  for (uint64_t entry : *entries) {
    // (callback, context) since 3.7.
    absl::StatusOr<std::vector<uint64_t>> pair = objects_.TupleItems(entry);
    if (!pair.ok()) return pair.status();
    if (!pair->empty() && (*pair)[0] != 0) callbacks.push_back((*pair)[0]);
  }
  return callbacks;
}

absl::StatusOr<std::string> AsyncioTaskReader::TaskName(uint64_t name) {
  absl::StatusOr<std::string> type = objects_.TypeNameOf(name);
  if (!type.ok()) return type.status();
  if (*type == "str") return objects_.Str(name);
  if (*type == "int") {
    // A default name kept as its number until asked ("Task-N"): a small,
    // positive int of one or two 30-bit digits.
    const ProcessMemory& memory = objects_.memory();
    absl::StatusOr<uint64_t> size_or_tag = memory.ReadValue<uint64_t>(name + 16);
    if (!size_or_tag.ok()) return size_or_tag.status();
    uint64_t digits = objects_.layout().minor >= 12 ? *size_or_tag >> 3 : *size_or_tag;
    if (digits > 2) return absl::DataLossError("task number too large");
    uint32_t digit[2] = {0, 0};
    if (digits > 0) {
      if (absl::Status status = memory.Read(name + 24, digit, 4 * digits); !status.ok()) {
        return status;
      }
    }
    return absl::StrCat("Task-", uint64_t{digit[0]} | (uint64_t{digit[1]} << 30));
  }
  return absl::DataLossError(absl::StrCat("task name is a ", *type));
}

absl::StatusOr<AsyncioTaskReader::TaskFields> AsyncioTaskReader::ReadTaskFields(uint64_t task) {
  const PythonObjectLayout& l = objects_.layout();
  TaskFields fields;
  absl::StatusOr<bool> c_task = objects_.IsInstance(task, {"_asyncio.Task"});
  if (!c_task.ok()) return c_task.status();
  if (*c_task) {
    absl::StatusOr<int32_t> state = objects_.memory().ReadValue<int32_t>(task + l.future_state);
    if (!state.ok()) return state.status();
    fields.pending = *state == 0;  // STATE_PENDING
    // 3.14+: where the module says, rather than the table.
    const uint64_t coro_offset = debug_offsets_ ? debug_offsets_->task.task_coro : l.task_coro;
    const uint64_t name_offset = debug_offsets_ ? debug_offsets_->task.task_name : l.task_name;
    absl::StatusOr<uint64_t> coro = objects_.Pointer(task + coro_offset);
    if (!coro.ok()) return coro.status();
    fields.coro = *coro;
    absl::StatusOr<uint64_t> name = objects_.Pointer(task + name_offset);
    if (!name.ok()) return name.status();
    fields.name = *name;
  } else {
    absl::StatusOr<bool> py_task = objects_.IsInstance(task, {"Task"});
    if (!py_task.ok()) return py_task.status();
    if (!*py_task) return absl::DataLossError(absl::StrFormat("0x%x is not a Task", task));
    // Future._state is a class attribute ("PENDING") until the future is done.
    absl::StatusOr<uint64_t> state = objects_.Attribute(task, "_state");
    if (!state.ok()) return state.status();
    if (*state == 0) {
      fields.pending = true;
    } else {
      absl::StatusOr<std::string> state_text = objects_.Str(*state);
      if (!state_text.ok()) return state_text.status();
      fields.pending = *state_text == "PENDING";
    }
    absl::StatusOr<uint64_t> coro = objects_.Attribute(task, "_coro");
    if (!coro.ok()) return coro.status();
    fields.coro = *coro;
    absl::StatusOr<uint64_t> name = objects_.Attribute(task, "_name");
    if (!name.ok()) return name.status();
    fields.name = *name;
  }
  if (!fields.pending) return fields;
  absl::StatusOr<std::vector<uint64_t>> callbacks = FutureCallbacks(task);
  if (!callbacks.ok()) return callbacks.status();
  fields.callbacks = std::move(*callbacks);
  return fields;
}

void AsyncioTaskReader::Awaiters(uint64_t callback, const absl::flat_hash_set<uint64_t>& tasks,
                                 int depth, std::vector<uint64_t>& out) {
  if (depth > kMaxAwaiterDepth || callback == 0) return;
  const PythonObjectLayout& l = objects_.layout();
  absl::StatusOr<std::string> type = objects_.TypeNameOf(callback);
  if (!type.ok()) return;
  auto follow_future = [&](uint64_t future) {
    absl::StatusOr<bool> is_future = objects_.IsInstance(future, {"_asyncio.Future", "Future"});
    if (!is_future.ok() || !*is_future) return false;
    absl::StatusOr<std::vector<uint64_t>> callbacks = FutureCallbacks(future);
    if (!callbacks.ok()) return true;
    for (uint64_t next : *callbacks) Awaiters(next, tasks, depth + 1, out);
    return true;
  };
  uint64_t owner = 0;
  if (*type == "TaskWakeupMethWrapper") {  // 3.8-3.11 _asyncio: {PyObject_HEAD; ww_task}
    owner = objects_.Pointer(callback + 16).value_or(0);
  } else if (*type ==
             "builtin_function_or_method") {  // 3.12+ _asyncio: task_wakeup bound to the task
    owner = objects_.Pointer(callback + l.cfunction_self).value_or(0);
  } else if (*type == "method") {  // pure-Python Task.__wakeup, TaskGroup._on_task_done
    owner = objects_.Pointer(callback + l.method_self).value_or(0);
  } else if (*type == "function") {
    // gather's _done_callback: its closure holds the outer _GatheringFuture.
    absl::StatusOr<uint64_t> closure = objects_.Pointer(callback + l.function_closure);
    if (!closure.ok() || *closure == 0) return;
    absl::StatusOr<std::vector<uint64_t>> cells = objects_.TupleItems(*closure);
    if (!cells.ok()) return;
    for (uint64_t cell : *cells) {
      absl::StatusOr<std::string> cell_type = objects_.TypeNameOf(cell);
      if (!cell_type.ok() || *cell_type != "cell") continue;
      absl::StatusOr<uint64_t> content = objects_.Pointer(cell + l.cell_ref);
      if (content.ok() && *content != 0) follow_future(*content);
    }
    return;
  }
  if (owner == 0) return;
  if (tasks.contains(owner)) {
    out.push_back(owner);
    return;
  }
  if (follow_future(owner)) return;
  // A TaskGroup's _on_task_done: the group's parent task awaits its children.
  absl::StatusOr<uint64_t> parent = objects_.Attribute(owner, "_parent_task");
  if (parent.ok() && tasks.contains(*parent)) out.push_back(*parent);
}

absl::Status AsyncioTaskReader::ReadTaskSets(uint64_t module_dict, std::vector<uint64_t>& tasks,
                                             absl::flat_hash_set<uint64_t>& running,
                                             size_t& unreadable) {
  auto count = [&](const absl::Status& status) {
    if (IsFatal(status)) return status;
    ++unreadable;
    return absl::OkStatus();
  };
  // WeakSets of tasks: _all_tasks (3.8-3.11), _scheduled_tasks (3.12+).
  for (std::string_view name : {"_all_tasks", "_scheduled_tasks"}) {
    absl::StatusOr<uint64_t> weak_set = objects_.DictGetStr(module_dict, name);
    if (!weak_set.ok()) return count(weak_set.status());
    if (*weak_set == 0) continue;
    absl::StatusOr<uint64_t> data = objects_.Attribute(*weak_set, "data");
    if (!data.ok() || *data == 0) {
      if (absl::Status status =
              count(data.ok() ? absl::DataLossError("WeakSet without data") : data.status());
          !status.ok()) {
        return status;
      }
      continue;
    }
    absl::StatusOr<std::vector<uint64_t>> refs = objects_.SetItems(*data);
    if (!refs.ok()) {
      if (absl::Status status = count(refs.status()); !status.ok()) return status;
      continue;
    }
    for (uint64_t ref : *refs) {
      absl::StatusOr<uint64_t> task = objects_.WeakrefTarget(ref);
      if (!task.ok()) {
        // The set's dummy (deleted) entries are no weakrefs: not worth counting.
        if (IsFatal(task.status())) return task.status();
        continue;
      }
      if (*task != 0) tasks.push_back(*task);
    }
  }
  // A plain set: tasks running eagerly (3.12+).
  absl::StatusOr<uint64_t> eager = objects_.DictGetStr(module_dict, "_eager_tasks");
  if (!eager.ok()) return count(eager.status());
  if (*eager != 0) {
    absl::StatusOr<std::vector<uint64_t>> items = objects_.SetItems(*eager);
    if (items.ok()) {
      for (uint64_t item : *items) {
        absl::StatusOr<bool> is_task = objects_.IsInstance(item, {"_asyncio.Task", "Task"});
        if (is_task.ok() && *is_task) tasks.push_back(item);
      }
    } else if (absl::Status status = count(items.status()); !status.ok()) {
      return status;
    }
  }
  // {loop: task} for every loop running a task now.
  absl::StatusOr<uint64_t> current = objects_.DictGetStr(module_dict, "_current_tasks");
  if (!current.ok()) return count(current.status());
  if (*current != 0) {
    absl::StatusOr<std::vector<std::pair<uint64_t, uint64_t>>> items = objects_.DictItems(*current);
    if (!items.ok()) return count(items.status());
    for (const auto& [loop, task] : *items) running.insert(task);
  }
  return absl::OkStatus();
}

absl::Status AsyncioTaskReader::ReadTaskList(uint64_t head, std::vector<uint64_t>& tasks,
                                             size_t& unreadable) {
  // struct llist_node {next, prev}, embedded in each TaskObj at task_node;
  // the head links to itself when the list is empty.
  absl::StatusOr<uint64_t> node = objects_.Pointer(head);
  for (size_t n = 0; node.ok() && *node != head; ++n) {
    if (*node == 0 || n >= kMaxTasks) {
      ++unreadable;  // a list not yet made, or one that does not close
      return absl::OkStatus();
    }
    tasks.push_back(*node - debug_offsets_->task.task_node);
    node = objects_.Pointer(*node);
  }
  if (!node.ok()) {
    if (IsFatal(node.status())) return node.status();
    ++unreadable;  // a task freed under the read
  }
  return absl::OkStatus();
}

absl::Status AsyncioTaskReader::ReadTaskLists(uint64_t interp, std::vector<uint64_t>& tasks,
                                              absl::flat_hash_set<uint64_t>& running,
                                              size_t& unreadable) {
  const pystrobe_python_offsets& o = interpreter_.layout.abi;
  const AsyncioDebugOffsets& d = *debug_offsets_;
  // Tasks of threads that ended were moved to their interpreter's list.
  if (absl::Status status =
          ReadTaskList(interp + d.interpreter.asyncio_tasks_head, tasks, unreadable);
      !status.ok()) {
    return status;
  }
  absl::StatusOr<uint64_t> tstate = objects_.Pointer(interp + o.interp_tstate_head);
  for (size_t n = 0; tstate.ok() && *tstate != 0; ++n) {
    if (n >= PythonFrameWalker::kMaxThreads) {
      ++unreadable;
      return absl::OkStatus();
    }
    if (absl::Status status =
            ReadTaskList(*tstate + d.thread.asyncio_tasks_head, tasks, unreadable);
        !status.ok()) {
      return status;
    }
    absl::StatusOr<uint64_t> task = objects_.Pointer(*tstate + d.thread.asyncio_running_task);
    if (!task.ok()) {
      if (IsFatal(task.status())) return task.status();
      ++unreadable;
    } else if (*task != 0) {
      running.insert(*task);
      tasks.push_back(*task);  // a task of another thread's list, or eager
    }
    tstate = objects_.Pointer(*tstate + o.tstate_next);
  }
  if (!tstate.ok()) {
    if (IsFatal(tstate.status())) return tstate.status();
    ++unreadable;  // a thread state freed under the read
  }
  return absl::OkStatus();
}

absl::StatusOr<AsyncioSnapshot> AsyncioTaskReader::ReadTasks(
    const std::vector<PythonThread>& threads) {
  const pystrobe_python_offsets& o = interpreter_.layout.abi;
  const PythonObjectLayout& l = objects_.layout();
  AsyncioSnapshot snapshot;
  absl::StatusOr<std::optional<AsyncioDebugOffsets>> debug_offsets =
      FindAsyncioDebugOffsets(interpreter_);
  if (!debug_offsets.ok()) {
    // Without them the C tasks of 3.14+ cannot be found: say so, once per
    // read, and still list the pure-Python ones.
    if (IsFatal(debug_offsets.status())) return debug_offsets.status();
    ++snapshot.unreadable;
    debug_offsets_.reset();
  } else {
    debug_offsets_ = *debug_offsets;
  }
  std::vector<uint64_t> candidates;
  absl::flat_hash_set<uint64_t> running;
  absl::StatusOr<uint64_t> interp =
      objects_.Pointer(interpreter_.runtime_address + o.runtime_interpreters_head);
  if (!interp.ok()) return interp.status();
  for (size_t n = 0; *interp != 0 && n < PythonFrameWalker::kMaxInterpreters; ++n) {
    absl::StatusOr<uint64_t> modules = objects_.Pointer(*interp + l.interp_modules);
    if (!modules.ok()) return modules.status();
    absl::StatusOr<uint64_t> tasks_module =
        *modules != 0 ? objects_.DictGetStr(*modules, "asyncio.tasks") : 0;
    if (!tasks_module.ok()) {
      if (IsFatal(tasks_module.status())) return tasks_module.status();
      ++snapshot.unreadable;
    } else if (*tasks_module != 0) {
      absl::StatusOr<uint64_t> module_dict = objects_.Pointer(*tasks_module + l.module_dict);
      if (!module_dict.ok()) return module_dict.status();
      snapshot.asyncio_imported = true;
      if (absl::Status status =
              ReadTaskSets(*module_dict, candidates, running, snapshot.unreadable);
          !status.ok()) {
        return status;
      }
      if (debug_offsets_) {
        if (absl::Status status = ReadTaskLists(*interp, candidates, running, snapshot.unreadable);
            !status.ok()) {
          return status;
        }
      }
    }
    interp = objects_.Pointer(*interp + o.interp_next);
    if (!interp.ok()) return interp.status();
  }

  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  if (candidates.size() > kMaxTasks) {
    snapshot.unreadable += candidates.size() - kMaxTasks;
    candidates.resize(kMaxTasks);
  }
  absl::flat_hash_set<uint64_t> task_set;
  std::vector<TaskFields> fields;
  for (uint64_t address : candidates) {
    absl::StatusOr<TaskFields> read = ReadTaskFields(address);
    if (!read.ok()) {
      if (IsFatal(read.status())) return read.status();
      ++snapshot.unreadable;
      continue;
    }
    if (!read->pending) continue;  // done, awaiting collection
    AsyncioTask task;
    task.address = address;
    task.running = running.contains(address);
    absl::StatusOr<std::string> name = TaskName(read->name);
    if (!name.ok() && IsFatal(name.status())) return name.status();
    task.name = name.ok() ? *name : "<unreadable>";
    task_set.insert(address);
    snapshot.tasks.push_back(std::move(task));
    fields.push_back(std::move(*read));
  }

  for (size_t i = 0; i < snapshot.tasks.size(); ++i) {
    AsyncioTask& task = snapshot.tasks[i];
    const uint64_t coro = fields[i].coro;
    if (absl::StatusOr<CoroutineFrame> root = ReadCoroutineFrame(coro); root.ok()) {
      task.root_code_address = root->code_address;
    }
    // A running task's frames are on its thread's stack: from the innermost
    // frame out to the task's own coroutine frame.
    if (task.running) {
      absl::StatusOr<uint64_t> frame = CoroutineFrameAddress(coro);
      for (const PythonThread& thread : threads) {
        if (!frame.ok() || *frame == 0) break;
        auto it = std::find_if(thread.frames.begin(), thread.frames.end(),
                               [&](const PythonFrame& f) { return f.frame_address == *frame; });
        if (it == thread.frames.end()) continue;
        task.running_frames.assign(std::make_reverse_iterator(it + 1), thread.frames.rend());
        task.running_thread_state = thread.thread_state_address;
        break;
      }
      for (const PythonFrame& frame : task.running_frames) {
        absl::StatusOr<PythonFrameSymbol> symbol =
            code_.Symbolize(frame.code_address, frame.stamp, frame.instr_offset);
        if (!symbol.ok() && IsFatal(symbol.status())) return symbol.status();
        task.stack.push_back(symbol.ok() ? *symbol : PythonFrameSymbol{"<unreadable>", "", -1});
      }
    }
    // A suspended task (or a running one whose frames were not found): follow
    // what each coroutine awaits.
    if (task.stack.empty()) {
      absl::StatusOr<AwaitChain> chain = ReadAwaitChain(coro);
      if (!chain.ok()) return chain.status();
      // The loop may step the task while its chain is read: then the chain
      // is part before, part after, or a frame is running. Only a chain that
      // reads the same twice is where the task is suspended.
      bool suspended = !task.running && !chain->frames.empty() && chain->frames[0].started;
      if (suspended) {
        absl::StatusOr<AwaitChain> again = ReadAwaitChain(coro);
        if (!again.ok()) return again.status();
        suspended = !chain->SteppedUnderRead() && *again == *chain;
        if (!suspended) ++snapshot.unreadable;
      }
      for (const CoroutineFrame& frame : chain->frames) {
        absl::StatusOr<uint32_t> stamp = code_.CurrentStamp(frame.code_address);
        absl::StatusOr<PythonFrameSymbol> symbol =
            stamp.ok() ? code_.Symbolize(frame.code_address, *stamp, frame.instr_offset)
                       : absl::StatusOr<PythonFrameSymbol>(stamp.status());
        if (!symbol.ok()) {
          if (IsFatal(symbol.status())) return symbol.status();
          ++snapshot.unreadable;
          task.suspended_frames.clear();
          break;
        }
        task.stack.push_back(std::move(*symbol));
        if (suspended) {
          task.suspended_frames.push_back(
              {frame.code_address, *stamp, frame.instr_offset, frame.frame_address});
        }
      }
    }
    std::vector<uint64_t> awaiters;
    for (uint64_t callback : fields[i].callbacks) Awaiters(callback, task_set, 0, awaiters);
    std::sort(awaiters.begin(), awaiters.end());
    awaiters.erase(std::unique(awaiters.begin(), awaiters.end()), awaiters.end());
    task.awaited_by = std::move(awaiters);
  }
  return snapshot;
}

}  // namespace pystrobe
