/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one header shared by the BPF programs and the C++ daemon (with its parts,
 * pystrobe_abi_{python,accounting,unwind}.h, included at its end). Everything here
 * crosses the kernel/user boundary byte for byte: fixed-width types, explicit
 * padding, sizes asserted on both sides. Bump PYSTROBE_ABI_VERSION on any change.
 */
#ifndef PYSTROBE_BPF_PYSTROBE_ABI_H_
#define PYSTROBE_BPF_PYSTROBE_ABI_H_

#ifdef __BPF__
/* vmlinux.h supplies the __u* types on the BPF side. */
#include "vmlinux.h"
#else
#include <linux/types.h>
#endif

#define PYSTROBE_ABI_VERSION 18

#ifdef __cplusplus
#define PYSTROBE_ABI_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define PYSTROBE_ABI_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* Longest native stack the kernel hands us (kernel.perf_event_max_stack is 127). */
#define PYSTROBE_MAX_NATIVE_FRAMES 127
/* Longest user stack the table walker (bpf/native_unwind.bpf.h) writes;
 * the Python walk then gets the words left (see walk_python_stack). */
#define PYSTROBE_MAX_USER_FRAMES 256
#define PYSTROBE_COMM_LEN 16

/* Kinds of record in the ring buffer; every record starts with this tag. */
enum pystrobe_event_kind {
	PYSTROBE_EVENT_SAMPLE = 1,
	/* A process replaced its image: its old address space is gone. */
	PYSTROBE_EVENT_EXEC = 2,
	/* A whole process (thread group) exited. */
	PYSTROBE_EVENT_EXIT = 3,
	/* A thread's stack as it went off CPU, sent when it came back: a
	 * pystrobe_sample with weight_ns and offcpu_reason set. */
	PYSTROBE_EVENT_OFFCPU = 4,
	/* Copies of a code object's memory, sent before the first sample that
	 * meets it: struct pystrobe_python_code_event. */
	PYSTROBE_EVENT_PYTHON_CODE = 5,
	/* Resident memory grew (record --memory, stat): a pystrobe_sample of
	 * the thread that made it resident, weight_ns holding the bytes the
	 * sample stands for. */
	PYSTROBE_EVENT_MEMORY = 6,
	/* A sampled allocation (record --allocations): a pystrobe_sample of the
	 * allocating thread, weight_ns holding the bytes it stands for and
	 * address the block's address. */
	PYSTROBE_EVENT_ALLOC = 7,
	/* A sampled block was freed: struct pystrobe_free_event. */
	PYSTROBE_EVENT_FREE = 8,
	/* A thread of a process the kernel's OOM killer chose, as it took its
	 * SIGKILL: a pystrobe_sample of what the thread was doing when killed
	 * (no kernel stack: that is the signal's delivery). */
	PYSTROBE_EVENT_OOM_KILLED = 9,
	/* A CPython process began finalization (Py_FinalizeEx entered, before
	 * teardown frees the modules' globals): what it holds now is what it
	 * leaks. struct pystrobe_finalize_event. */
	PYSTROBE_EVENT_FINALIZE = 10,
};

/* Why a thread left the CPU, from prev_state at sched_switch (and, for
 * GIL, from what it waits on). Off-CPU records and the accounting use it. */
enum pystrobe_offcpu_reason {
	PYSTROBE_OFFCPU_NONE = 0,
	/* Runnable but not running: preempted, or woken and waiting for a CPU. */
	PYSTROBE_OFFCPU_RUNQUEUE = 1,
	/* TASK_UNINTERRUPTIBLE (disk IO, page-in, some kernel locks). */
	PYSTROBE_OFFCPU_IO = 2,
	/* TASK_INTERRUPTIBLE and other sleeps (futexes, poll, sleep, pipes). */
	PYSTROBE_OFFCPU_SLEEP = 3,
	/* Waiting to take CPython's GIL (off-CPU stacks of record). */
	PYSTROBE_OFFCPU_GIL = 4,
};

/* Bits of pystrobe_sample.flags. */
enum pystrobe_sample_flags {
	/* The CPU was in kernel mode when the sample fired. */
	PYSTROBE_SAMPLE_KERNEL_MODE = 1u << 0,
	/* bpf_get_stack failed for the kernel or user stack; counted as well. */
	PYSTROBE_SAMPLE_KSTACK_FAILED = 1u << 1,
	PYSTROBE_SAMPLE_USTACK_FAILED = 1u << 2,
	/* The sampled thread held the GIL (CPython processes only). */
	PYSTROBE_SAMPLE_HOLDS_GIL = 1u << 3,
	/* The Python stack was deeper than the walk: outer frames are missing. */
	PYSTROBE_SAMPLE_PY_TRUNCATED = 1u << 4,
	/* The native walk met a pc outside the process's known mappings
	 * (a library loaded since): userspace reads them again. */
	PYSTROBE_SAMPLE_NATIVE_STALE = 1u << 5,
	/* The native walk was deeper than PYSTROBE_MAX_NATIVE_FRAMES. */
	PYSTROBE_SAMPLE_NATIVE_TRUNCATED = 1u << 6,
	/* The native walk met a binary whose unwind table is not in the kernel
	 * yet (or was evicted): it is in map unwind_wanted, for userspace. */
	PYSTROBE_SAMPLE_NATIVE_TABLE_WANTED = 1u << 7,
	/* A free-threaded CPython (3.14t): it has no GIL for a thread to hold. */
	PYSTROBE_SAMPLE_FREE_THREADED = 1u << 8,
};

/* What the in-kernel CPython walk found; pystrobe_sample.python_status. */
enum pystrobe_python_status {
	/* The process is not (yet) known to run CPython: native frames only. */
	PYSTROBE_PY_NOT_PYTHON = 0,
	/* The thread's frames were walked (possibly zero: an idle interpreter). */
	PYSTROBE_PY_WALKED = 1,
	/* No PyThreadState belongs to this thread (a thread CPython never ran). */
	PYSTROBE_PY_NO_THREAD_STATE = 2,
	/* Reading the target's memory failed mid-walk; frames so far are kept. */
	PYSTROBE_PY_READ_FAILED = 3,
};

/*
 * Bit 0 of pystrobe_python_frame.code (code objects are 8-byte aligned):
 * the frame is the first its _PyEval_EvalFrameDefault call ran, so that
 * userspace can put each eval loop's Python frames where that C frame is in
 * the native stack. Every frame before 3.11 (one eval call per frame); the
 * frame with is_entry on 3.11; on 3.12+ the frame just above a C-stack shim.
 */
#define PYSTROBE_PY_FRAME_ENTRY 1ull

/* One Python frame as the kernel saw it; userspace names it. */
struct pystrobe_python_frame {
	__u64 code;	    /* PyCodeObject address, | PYSTROBE_PY_FRAME_ENTRY */
	__u32 stamp;	    /* pystrobe_python_code_stamp32() of the code object */
	__s32 instr_offset; /* byte offset of the instruction; < 0: not started */
};

/*
 * Words of pystrobe_sample.data: kernel ips, then user ips, then Python
 * frames (two words each). A power of two, so the kernel side can bound
 * indices with a mask the verifier understands.
 */
#define PYSTROBE_SAMPLE_DATA_WORDS 1024
/* Deepest Python walk that fits after two full native stacks. */
#define PYSTROBE_MAX_PYTHON_FRAMES                                                                 \
	((PYSTROBE_SAMPLE_DATA_WORDS - 2 * PYSTROBE_MAX_NATIVE_FRAMES) / 2)

/*
 * One cpu-clock sample. Only the used words of `data` are sent:
 * (kernel_frames + user_frames + 2 * python_frames) of them, so a record's
 * size is offsetof(data) + 8 * that.
 */
struct pystrobe_sample {
	__u32 kind; /* PYSTROBE_EVENT_SAMPLE */
	__u32 pid;  /* thread group id, as the host sees it */
	__u32 tid;
	__u32 cpu;
	__u64 time_ns; /* bpf_ktime_get_ns() */
	__u64 cgroup_id;
	char comm[PYSTROBE_COMM_LEN]; /* name of the sampled thread */
	__u32 flags;		      /* enum pystrobe_sample_flags */
	__u16 kernel_frames;
	__u16 user_frames;
	__u16 python_frames;
	__u16 python_status; /* enum pystrobe_python_status */
	__u32 offcpu_reason; /* enum pystrobe_offcpu_reason (OFFCPU records) */
	/* What this record stands for: for a SAMPLE, the interval since the
	 * previous cpu-clock tick on its CPU (intervals are random, so samples
	 * weigh differently); for an OFFCPU record, the time off CPU; for a
	 * MEMORY or ALLOC record, bytes (not nanoseconds). */
	__u64 weight_ns;
	__u64 address; /* ALLOC: the block's address; else 0 */
	/* The PyInterpreterState.id of the interpreter the thread's state
	 * belongs to (3.12+): 0 for the main one, and where it is not known. */
	__u64 interpreter_id;
	__u64 data[PYSTROBE_SAMPLE_DATA_WORDS];
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_python_frame) == 16, "pystrobe_python_frame layout");
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_sample) == 88 + 8 * PYSTROBE_SAMPLE_DATA_WORDS,
		    "pystrobe_sample layout changed: bump PYSTROBE_ABI_VERSION");

/* A sampled block freed (PYSTROBE_EVENT_FREE). */
struct pystrobe_free_event {
	__u32 kind; /* PYSTROBE_EVENT_FREE */
	__u32 pid;
	__u64 address;
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_free_event) == 16,
		    "pystrobe_free_event layout changed: bump PYSTROBE_ABI_VERSION");

/* A CPython process began finalization (PYSTROBE_EVENT_FINALIZE). */
struct pystrobe_finalize_event {
	__u32 kind; /* PYSTROBE_EVENT_FINALIZE */
	__u32 pid;
	__u64 time_ns; /* bpf_ktime_get_ns() */
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_finalize_event) == 16,
		    "pystrobe_finalize_event layout changed: bump PYSTROBE_ABI_VERSION");

/* An exec or exit of a process; `comm` is the name after the event. */
struct pystrobe_process_event {
	__u32 kind; /* PYSTROBE_EVENT_EXEC or PYSTROBE_EVENT_EXIT */
	__u32 pid;
	__u64 time_ns;
	char comm[PYSTROBE_COMM_LEN];
	/* EXEC of an executable in python_binaries: which file (as its key) and
	 * where the kernel loaded its text (mm->start_code), so that userspace
	 * can name the frames of a run that ends before it reads /proc; zero
	 * otherwise. */
	__u64 python_binary_dev;
	__u64 python_binary_inode;
	__u64 start_code;
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_process_event) == 56,
		    "pystrobe_process_event layout changed: bump PYSTROBE_ABI_VERSION");

/*
 * The drop reasons: the one list every other is made from (the kernel enum
 * below, SamplerCounters::dropped, the reason labels of pystrobe_dropped_total
 * and the words of `record`'s summary). A row is
 *   X(NAME, metric label, summary words)
 * and its position is the index in map `drop_counters`: append, never reorder.
 * The labels and words are what users and scripts read: keep them as they are.
 */
#define PYSTROBE_DROP_REASONS(X)                                                                   \
	/* The ring buffer was full: the sample is lost. */                                        \
	X(RINGBUF_FULL, "ringbuf_full", "samples (ring buffer full)")                              \
	/* bpf_get_stack failed on the kernel stack (sample kept without it). */                   \
	X(KERNEL_STACK, "kernel_stack_failed", "kernel")                                           \
	/* bpf_get_stack failed on the user stack (sample kept without it). */                     \
	X(USER_STACK, "user_stack_failed", "user")                                                 \
	/* A process event could not be sent. */                                                   \
	X(PROCESS_EVENT, "process_event_lost", "process events")                                   \
	/* A CPython walk stopped on a failed read of the target's memory. */                      \
	X(PYTHON_READ, "python_read_failed", "walks cut by failed reads")                          \
	/* A CPython process's thread had no PyThreadState we could find. */                       \
	X(PYTHON_NO_THREAD_STATE, "python_no_thread_state", "threads without a thread state")      \
	/* An off-CPU stack could not be kept until the thread came back. */                       \
	X(OFFCPU_STORAGE, "offcpu_storage_failed", "stacks that could not be kept")                \
	/* A code object's copy was not sent (the ring buffer too full); userspace                 \
	 * reads the object itself if its process still lives. */                                  \
	X(PYTHON_CODE, "python_code_copy_lost", "code object copies lost")                         \
	/* A native walk with unwind tables met a frame it could not step past                     \
	 * (the stack ends with one [unknown]). */                                                 \
	X(NATIVE_UNWIND, "native_unwind_failed", "native walks ended in [unknown]")                \
	/* ... because the pc was in no mapping the kernel knew (then refreshed). */               \
	X(NATIVE_STALE_MAPPINGS, "native_mappings_stale", "before their mappings were read")       \
	/* ... because a binary's table was not in the kernel yet (being built,                    \
	 * or evicted for room): userspace loads it. */                                            \
	X(NATIVE_TABLE_ABSENT, "native_table_absent", "before their tables were loaded")           \
	/* A process sampled before its mappings were read: one [unknown] frame                    \
	 * after the pc, never a frame-pointer guess. */                                           \
	X(NATIVE_NOT_TRACKED, "native_process_unknown", "before their process was read")

/* Indices of the per-CPU drop counters (map `drop_counters`). */
/* clang-format off */
enum pystrobe_drop_reason {
#define PYSTROBE_DROP_ENUMERATOR(name, label, words) PYSTROBE_DROP_##name,
	PYSTROBE_DROP_REASONS(PYSTROBE_DROP_ENUMERATOR)
#undef PYSTROBE_DROP_ENUMERATOR
	PYSTROBE_DROP_REASON_COUNT,
};
/* clang-format on */

/* Indices of the per-CPU activity counters (map `sample_counters`). */
enum pystrobe_sample_counter {
	/* cpu-clock samples taken, before any filter. */
	PYSTROBE_COUNT_TAKEN = 0,
	/* Samples of the idle task (pid 0), not sent. */
	PYSTROBE_COUNT_IDLE = 1,
	/* Samples of processes outside the target filter, not sent. */
	PYSTROBE_COUNT_FILTERED = 2,
	/* Samples written to the ring buffer. */
	PYSTROBE_COUNT_SENT = 3,
	/* Samples whose Python stack was deeper than the walk. */
	PYSTROBE_COUNT_PYTHON_TRUNCATED = 4,
	/* Samples with a Python walk (status WALKED). */
	PYSTROBE_COUNT_PYTHON_WALKED = 5,
	/* Off-CPU intervals sent (record --off-cpu / --idle). */
	PYSTROBE_COUNT_OFFCPU_SENT = 6,
	/* Processes known to run CPython from their exec, by their executable
	 * (map python_binaries). */
	PYSTROBE_COUNT_PYTHON_AT_EXEC = 7,
	/* Code objects sent as copies with the samples that met them. */
	PYSTROBE_COUNT_PYTHON_CODES_SENT = 8,
	/* Copies put off by the per-CPU copy budget or by a read that faulted
	 * (tried again at the code object's next sample; meanwhile userspace
	 * reads the object itself). */
	PYSTROBE_COUNT_PYTHON_CODES_DEFERRED = 9,
	/* Nanoseconds spent copying and sending code objects (bpf_ktime_get_ns
	 * around each copy): what the copies cost in the kernel. */
	PYSTROBE_COUNT_PYTHON_CODE_COPY_NS = 10,
	/* Native walks with unwind tables that reached the outermost frame. */
	PYSTROBE_COUNT_NATIVE_COMPLETE = 11,
	/* ... that ended in anonymous executable memory (a JIT). */
	PYSTROBE_COUNT_NATIVE_JIT = 12,
	/* ... that were deeper than the frames a sample holds. */
	PYSTROBE_COUNT_NATIVE_TRUNCATED = 13,
	/* ... that went on past JIT code through its frame pointers. */
	PYSTROBE_COUNT_NATIVE_THROUGH_JIT = 14,
	/* Resident-growth samples sent (PYSTROBE_EVENT_MEMORY). */
	PYSTROBE_COUNT_MEMORY_SENT = 15,
	/* Resident-growth or allocation samples whose stack a cpu-clock sample
	 * overwrote while they were being taken (both share the per-CPU
	 * scratch), taken again, and those lost when that happened twice. */
	PYSTROBE_COUNT_MEMORY_RETAKEN = 16,
	PYSTROBE_COUNT_MEMORY_LOST = 17,
	/* Sampled allocations sent (PYSTROBE_EVENT_ALLOC), and frees of them. */
	PYSTROBE_COUNT_ALLOC_SENT = 18,
	PYSTROBE_COUNT_FREE_SENT = 19,
	/* Stacks of OOM-killed threads sent (PYSTROBE_EVENT_OOM_KILLED). */
	PYSTROBE_COUNT_OOM_KILLED_SENT = 20,
	/* Sampled allocations the preloaded library could not keep in its
	 * address table (full): their frees go unseen, so they stay in use. */
	PYSTROBE_COUNT_ALLOC_UNTRACKED = 21,
	/* CPython processes seen entering finalization (PYSTROBE_EVENT_FINALIZE). */
	PYSTROBE_COUNT_FINALIZE_SENT = 22,
	PYSTROBE_SAMPLE_COUNTER_COUNT = 23,
};

/* What bpf/map_counts.bpf.c writes for each BPF map: its id and the entries
 * the kernel counts in it. */
struct pystrobe_map_count {
	__u32 map_id;
	__u32 reserved;
	__s64 entries;
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_map_count) == 16,
		    "pystrobe_map_count layout changed: bump PYSTROBE_ABI_VERSION");

/* The parts of the ABI owned by one concern each. */
#include "pystrobe_abi_python.h"
#include "pystrobe_abi_accounting.h"
#include "pystrobe_abi_unwind.h"

#endif /* PYSTROBE_BPF_PYSTROBE_ABI_H_ */
