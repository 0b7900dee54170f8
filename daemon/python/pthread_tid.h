// Maps a thread's pthread_t to its kernel tid without the target's help, for
// CPython 3.8 to 3.10, whose PyThreadState holds only the pthread_t.
//
// On glibc a pthread_t is the address of the thread's `struct pthread`, which
// holds the kernel tid (`pid_t tid`) at an offset fixed for one glibc build
// (0x2d0 on x86_64 glibc 2.36) but not across builds. We find it at run time:
// the main thread's tid is the pid, so the candidates are the 4-byte aligned
// offsets in [kPthreadTidWindowBegin, kPthreadTidWindowEnd) of the main
// thread's struct that hold the pid; a candidate stands when, at that offset,
// every other thread's struct holds a distinct tid of /proc/PID/task (or 0:
// the kernel clears the tid of a thread that exited). The lowest standing
// offset wins.
#ifndef PYSTROBE_DAEMON_PYTHON_PTHREAD_TID_H_
#define PYSTROBE_DAEMON_PYTHON_PTHREAD_TID_H_

#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "daemon/python/process_memory.h"

namespace pystrobe {

inline constexpr uint32_t kPthreadTidWindowBegin = 0x100;
inline constexpr uint32_t kPthreadTidWindowEnd = 0x800;

// The offset of the tid in `struct pthread` of process `pid`, whose threads
// have the pthread_t values `pthread_ids` (0s are ignored) and the kernel tids
// `task_tids`. NotFound when no offset fits all threads (not glibc, or the
// main thread runs no Python); errors of `memory` when the main thread's
// struct cannot be read.
absl::StatusOr<uint32_t> FindPthreadTidOffset(const ProcessMemory& memory, pid_t pid,
                                              const std::vector<uint64_t>& pthread_ids,
                                              const absl::flat_hash_set<pid_t>& task_tids);

// The kernel tids of process `pid`, from /proc/PID/task; empty if it is gone.
absl::flat_hash_set<pid_t> ReadTaskTids(pid_t pid);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_PYTHON_PTHREAD_TID_H_
