// Reads the asyncio tasks of a running CPython process from its memory: the
// tasks every event loop knows (asyncio.tasks' _all_tasks, or
// _scheduled_tasks and _eager_tasks from 3.12; from 3.14 the C tasks are in
// per-thread linked lists that _asyncio publishes the offsets of), which one
// each loop is running (_current_tasks, or from 3.14 each thread state's
// asyncio_running_task), each task's coroutine chain and the tasks that
// await it. Works for the C _asyncio tasks and the pure-Python fallback.
#ifndef PYSTROBE_DAEMON_PYTHON_ASYNCIO_TASKS_H_
#define PYSTROBE_DAEMON_PYTHON_ASYNCIO_TASKS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "daemon/python/asyncio_debug_offsets.h"
#include "daemon/python/code_object_reader.h"
#include "daemon/python/frame_walker.h"
#include "daemon/python/object_reader.h"

namespace pystrobe {

struct AsyncioTask {
  uint64_t address = 0;
  std::string name;
  uint64_t root_code_address = 0;  // the code object of the task's own coroutine
  bool running = false;            // the task its event loop is running now
  // Coroutine frames, outermost first: where each is suspended, or for a
  // running task the frames on its thread's stack from the task's coroutine in.
  std::vector<PythonFrameSymbol> stack;
  // Frames of a suspended task as code objects, outermost first (each with
  // its stamp, as samples carry them).
  std::vector<PythonFrame> suspended_frames;
  // Frames of the running task as the walker saw them, outermost first.
  std::vector<PythonFrame> running_frames;
  uint64_t running_thread_state = 0;  // the PyThreadState running it; 0 when not found
  // Tasks that await this one (directly, through gather or a TaskGroup).
  std::vector<uint64_t> awaited_by;
};

struct AsyncioSnapshot {
  bool asyncio_imported = false;   // some interpreter has imported asyncio.tasks
  std::vector<AsyncioTask> tasks;  // pending tasks, in no particular order
  // Tasks (or task sets) skipped because their memory changed under the read
  // or made no sense; never fatal.
  size_t unreadable = 0;
};

class AsyncioTaskReader {
 public:
  static constexpr size_t kMaxTasks = 1u << 16;
  static constexpr int kMaxAwaitDepth = 64;
  static constexpr int kMaxAwaiterDepth = 4;

  // All must outlive the reader.
  AsyncioTaskReader(PythonObjectReader& objects, CodeObjectReader& code,
                    const PythonInterpreter& interpreter)
      : objects_(objects), code_(code), interpreter_(interpreter) {}

  // Every pending task. `threads` (walked with frame addresses) place the
  // frames of running tasks. Errors only when the process cannot be read at
  // all (NotFound, PermissionDenied); oddities are counted in `unreadable`.
  absl::StatusOr<AsyncioSnapshot> ReadTasks(const std::vector<PythonThread>& threads);

  // One coroutine's frame: where it stands and what it awaits (0: nothing).
  struct CoroutineFrame {
    uint64_t frame_address = 0;
    uint64_t code_address = 0;
    int32_t instr_offset = -1;
    uint64_t awaiting = 0;
    // False for a coroutine that has not run yet: a task made but not yet
    // stepped by its loop is ready to run, not suspended in an await.
    bool started = true;
    // True while the frame runs: its task is being stepped now.
    bool executing = false;
    bool operator==(const CoroutineFrame&) const = default;
  };
  // Errors for objects that are no coroutine or generator; FailedPrecondition
  // for one that finished (no frame).
  absl::StatusOr<CoroutineFrame> ReadCoroutineFrame(uint64_t coroutine);

  // A coroutine and what it awaits, inwards, up to an object that is no
  // coroutine (a future), a bare yield, or a frame that is running.
  struct AwaitChain {
    std::vector<CoroutineFrame> frames;            // outermost first
    absl::StatusCode end = absl::StatusCode::kOk;  // why the walk stopped early
    // A frame running, or an awaited coroutine that finished: read while the
    // loop stepped its task.
    bool SteppedUnderRead() const;
    bool operator==(const AwaitChain&) const = default;
  };
  // Errors only when the process cannot be read at all.
  absl::StatusOr<AwaitChain> ReadAwaitChain(uint64_t coroutine);

 private:
  struct TaskFields {
    bool pending = false;
    uint64_t coro = 0;
    uint64_t name = 0;
    std::vector<uint64_t> callbacks;
  };
  absl::StatusOr<TaskFields> ReadTaskFields(uint64_t task);
  absl::StatusOr<std::vector<uint64_t>> FutureCallbacks(uint64_t future);
  absl::StatusOr<std::string> TaskName(uint64_t name);
  // The tasks among `tasks` that `callback` (a done callback) would wake.
  void Awaiters(uint64_t callback, const absl::flat_hash_set<uint64_t>& tasks, int depth,
                std::vector<uint64_t>& out);
  absl::Status ReadTaskSets(uint64_t module_dict, std::vector<uint64_t>& tasks,
                            absl::flat_hash_set<uint64_t>& running, size_t& unreadable);
  // 3.14+: the C tasks of interpreter `interp`, from its own list and its
  // threads' lists, and the task each thread is running.
  absl::Status ReadTaskLists(uint64_t interp, std::vector<uint64_t>& tasks,
                             absl::flat_hash_set<uint64_t>& running, size_t& unreadable);
  // The tasks on the circular list whose head is at `head`; stops (counting
  // it unreadable) at a link that leads nowhere or after kMaxTasks.
  absl::Status ReadTaskList(uint64_t head, std::vector<uint64_t>& tasks, size_t& unreadable);
  absl::StatusOr<uint64_t> CoroutineFrameAddress(uint64_t coroutine);

  PythonObjectReader& objects_;
  CodeObjectReader& code_;
  const PythonInterpreter& interpreter_;
  // What the process's _asyncio publishes (3.14+), read at each ReadTasks:
  // _asyncio may be imported between two reads.
  std::optional<AsyncioDebugOffsets> debug_offsets_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_PYTHON_ASYNCIO_TASKS_H_
