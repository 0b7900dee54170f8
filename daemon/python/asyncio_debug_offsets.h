// Where CPython 3.14+'s C _asyncio keeps its tasks, as the module itself
// publishes it: a Py_AsyncioModuleDebugOffsets structure in an ELF section
// named ".AsyncioDebug", in the _asyncio extension module or, where _asyncio
// is built in (Debian's 3.15), in the interpreter binary. From 3.14 C tasks
// are no longer in asyncio.tasks' WeakSet but in linked lists: one per thread
// state (_PyThreadStateImpl.asyncio_tasks_head) and one per interpreter for
// the tasks of threads that ended; the task a thread's loop is running is its
// asyncio_running_task. `python3.14 -m asyncio ps` reads the same structure.
#ifndef PYSTROBE_DAEMON_PYTHON_ASYNCIO_DEBUG_OFFSETS_H_
#define PYSTROBE_DAEMON_PYTHON_ASYNCIO_DEBUG_OFFSETS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "daemon/python/interpreter_finder.h"

namespace pystrobe {

// Py_AsyncioModuleDebugOffsets (Modules/_asynciomodule.c, 3.14 and 3.15),
// field for field: three groups, each a size followed by offsets into an
// object of that size. It carries no cookie or version: the sizes are what
// can be checked.
struct AsyncioDebugOffsets {
  struct Task {  // TaskObj
    uint64_t size = 0;
    uint64_t task_name = 0;
    uint64_t task_awaited_by = 0;
    uint64_t task_is_task = 0;
    uint64_t task_awaited_by_is_set = 0;
    uint64_t task_coro = 0;
    uint64_t task_node = 0;  // struct llist_node {next, prev}
  } task;
  struct Interpreter {  // PyInterpreterState
    uint64_t size = 0;
    uint64_t asyncio_tasks_head = 0;
  } interpreter;
  struct Thread {  // _PyThreadStateImpl
    uint64_t size = 0;
    uint64_t asyncio_running_loop = 0;
    uint64_t asyncio_running_task = 0;
    uint64_t asyncio_tasks_head = 0;
  } thread;

  friend bool operator==(const AsyncioDebugOffsets&, const AsyncioDebugOffsets&) = default;
};

// The bytes of the structure as 13 little-endian uint64s.
inline constexpr size_t kAsyncioDebugOffsetsSize = 13 * 8;

// Parses and checks the structure: every size plausible, every field (a
// pointer, a byte for the flags, two pointers for a list node) inside the
// size its group gives. DataLoss naming the first field that is not.
absl::StatusOr<AsyncioDebugOffsets> ParseAsyncioDebugOffsets(absl::Span<const uint8_t> bytes);

// (name, value) of every field, named as the C structure names them
// ("asyncio_task_object.task_node"), for tests against the headers.
std::vector<std::pair<std::string, uint64_t>> AsyncioDebugOffsetsFields(
    const AsyncioDebugOffsets& offsets);

// The offsets of the process `interpreter` belongs to, from its interpreter
// binary or a loaded _asyncio module (whichever has the section); nullopt when
// none does (before 3.14, or _asyncio not imported yet). Errors when the
// section is there but malformed, or /proc/PID/maps cannot be read. Sections
// are remembered by the identity of the file holding them, so calling this
// at every read of a process costs a read of its maps.
absl::StatusOr<std::optional<AsyncioDebugOffsets>> FindAsyncioDebugOffsets(
    const PythonInterpreter& interpreter);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_PYTHON_ASYNCIO_DEBUG_OFFSETS_H_
