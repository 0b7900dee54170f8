/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one header shared by the BPF programs and the C++ daemon. Everything here
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
	/* Copies put off by the per-CPU copy budget (tried again at the code
	 * object's next sample; meanwhile userspace reads the object itself). */
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

/* ==== CPython frame walking ===========================================
 * Owned by daemon/python/. Filled by the daemon (PythonInterpreterFinder)
 * from its verified per-version tables or, on 3.13+, from the interpreter's
 * own _Py_DebugOffsets, and handed to the kernel walker per process.
 *
 * Walk, for a sampled thread of a process with a pystrobe_python_process:
 *  0. Roots. runtime_addr is &_PyRuntime (3.7+). 2.7 and 3.6 have no
 *     _PyRuntime: their roots are file-scope globals (interp_head,
 *     _PyThreadState_Current, the GIL's lock), and runtime_addr is the lowest
 *     of them, every other one an offset from it (runtime_interpreters_head,
 *     runtime_gil == 0 and the gil_* fields), found per binary from symbols.
 *  1. Thread state. interp = *(runtime_addr + runtime_interpreters_head);
 *     follow interp->(interp_next) for subinterpreters. In each, tstate =
 *     *(interp + interp_tstate_head), then *(tstate + tstate_next) until NULL.
 *     Match, in this order of preference:
 *       - 3.11+: *(u32/ulong *)(tstate + tstate_native_thread_id) == the
 *         sampled thread's tid (as the target's pid namespace sees it);
 *       - 2.7-3.10 (tstate_native_thread_id == PYSTROBE_PY_OFFSET_NONE):
 *         *(u64 *)(tstate + tstate_thread_id) == pthread_self() of the
 *         sampled thread, which with glibc on x86_64 equals the thread's
 *         fs base (task_struct->thread.fsbase).
 *     Threads started after discovery are found because the list is walked
 *     on each sample (or per-thread cached by the walker and revalidated).
 *     3.12+: a thread may have a thread state in several interpreters; the
 *     one whose *(u32 *)(tstate + tstate_status) has PYSTROBE_PY_TSTATE_ACTIVE
 *     is the one running, and is preferred.
 *  2. Top frame, by frame_model:
 *       OBJECT_LASTI_*: frame = *(tstate + tstate_frame)   (PyFrameObject *)
 *       CFRAME:         cf = *(tstate + tstate_frame);     (_PyCFrame *)
 *                       frame = *(cf + cframe_current_frame)
 *       CURRENT_FRAME:  frame = *(tstate + tstate_frame)   (_PyInterpreterFrame *)
 *  3. Per frame: code = *(frame + frame_code), with its low two bits
 *     cleared where frame_code_tagged (3.14+: f_executable is a _PyStackRef,
 *     whose low bits are tags). If frame_owner is not NONE and
 *     *(u8 *)(frame + frame_owner) >= frame_owner_cstack (3.12+), the frame
 *     is an interpreter shim: skip it (no code object of interest). A frame whose
 *     code object's type (*(code + object_type)) is not code_type_addr is
 *     skipped too (3.13 f_executable may be None or another object).
 *     Next frame = *(frame + frame_previous).
 *  4. Instruction offset sent to userspace (`instr_offset`, signed 32 bits),
 *     always a BYTE offset from the code object's first instruction:
 *       OBJECT_LASTI_BYTES (2.7-3.9):  *(s32 *)(frame + frame_instr)
 *       OBJECT_LASTI_UNITS (3.10):     *(s32 *)(frame + frame_instr) * 2
 *       CFRAME, CURRENT_FRAME (3.11+): *(u64 *)(frame + frame_instr)
 *                                      - (code + code_code_adaptive)
 *       free-threaded 3.14+: each thread may run its own copy of the
 *       bytecode: with i = *(s32 *)(frame + frame_tlbc_index) > 0, the base
 *       is ((u64 *)(*(code + code_tlbc) + 8))[i] (_PyCodeArray's entries;
 *       entries[0] is co_code_adaptive itself).
 *     A negative value means "not started yet" (line = co_firstlineno).
 *  5. Stamp of the code object, to notice a freed and reused address:
 *     pystrobe_python_code_stamp(*(code + code_filename), *(code + code_name),
 *     *(s32 *)(code + code_firstlineno)); userspace recomputes it when it
 *     reads the code object and discards a mismatch.
 *  6. GIL: gil = runtime_addr + runtime_gil (2.7-3.11), or
 *     *(interp + interp_gil_ptr) (3.12+, per interpreter: the sampled
 *     thread's, interp = *(tstate + tstate_interp)). The thread holds
 *     the GIL when *(u64 *)(gil + gil_last_holder) == tstate and, where
 *     gil_locked is not NONE, *(s32 *)(gil + gil_locked) != 0. On 2.7 and
 *     3.6 gil_last_holder is _PyThreadState_Current, which the interpreter
 *     sets to NULL before it lets the GIL go, and gil_locked is NONE. On a
 *     free-threaded build no thread holds it while *(s32 *)(gil +
 *     gil_enabled) is 0, which is how such a build normally runs.
 *     A thread waits for the GIL when it sleeps in a futex on an address in
 *     [w, w + gil_wait_span), w = gil + gil_cond, or *(gil + gil_cond)
 *     where gil_wait_indirect (2.7's lock is a malloc'd semaphore).
 */

/* An offset that does not exist in this version. */
#define PYSTROBE_PY_OFFSET_NONE 0xffffffffu
/* frame_owner_cstack when the version has no C-stack shim frames. */
#define PYSTROBE_PY_OWNER_NONE 0xffu

/* How a thread state leads to its frames; see step 2 above. */
enum pystrobe_python_frame_model {
	/* 3.8, 3.9: PyFrameObject chain, f_lasti in bytes. */
	PYSTROBE_PY_FRAMES_OBJECT_LASTI_BYTES = 1,
	/* 3.10: PyFrameObject chain, f_lasti in 2-byte code units. */
	PYSTROBE_PY_FRAMES_OBJECT_LASTI_UNITS = 2,
	/* 3.11, 3.12: tstate->cframe->current_frame, _PyInterpreterFrame, prev_instr. */
	PYSTROBE_PY_FRAMES_CFRAME = 3,
	/* 3.13+: tstate->current_frame, _PyInterpreterFrame, f_executable, instr_ptr. */
	PYSTROBE_PY_FRAMES_CURRENT_FRAME = 4,
};

/*
 * Byte offsets into CPython's structures for one interpreter version (x86_64).
 * Every offset is PYSTROBE_PY_OFFSET_NONE where the field does not exist.
 */
struct pystrobe_python_offsets {
	__u8 major;	  /* 2 or 3 */
	__u8 minor;	  /* 7 (2.7), 6 .. 15 (3.x) */
	__u8 frame_model; /* enum pystrobe_python_frame_model */
	/* The lowest owner value of interpreter shim frames (3.12, 3.13:
	 * FRAME_OWNED_BY_CSTACK, 3; 3.14+: FRAME_OWNED_BY_INTERPRETER, 3, and
	 * CSTACK, 4, above it), else PYSTROBE_PY_OWNER_NONE */
	__u8 frame_owner_cstack;
	/* _PyRuntimeState */
	__u32 runtime_interpreters_head; /* interpreters.head (PyInterpreterState *) */
	__u32 runtime_gil;		 /* ceval.gil, inline struct (3.7-3.11); 0 (2.7, 3.6) */
	/* PyInterpreterState */
	__u32 interp_next;	  /* next (PyInterpreterState *) */
	__u32 interp_tstate_head; /* tstate_head (3.8-3.10) / threads.head (3.11+) */
	__u32 interp_gil_ptr;	  /* ceval.gil (struct _gil_runtime_state *, 3.12+) */
	/* struct _gil_runtime_state */
	__u32 gil_last_holder; /* last_holder (PyThreadState *) */
	__u32 gil_locked;      /* locked (int) */
	/* PyThreadState */
	__u32 tstate_next;	       /* next (PyThreadState *) */
	__u32 tstate_thread_id;	       /* thread_id (unsigned long: pthread_t) */
	__u32 tstate_native_thread_id; /* native_thread_id (unsigned long, 3.11+) */
	/* frame (3.8-3.10) / cframe (3.11, 3.12) / current_frame (3.13) */
	__u32 tstate_frame;
	/* _PyCFrame (3.11, 3.12) */
	__u32 cframe_current_frame; /* current_frame (_PyInterpreterFrame *) */
	/* PyFrameObject (3.8-3.10) or _PyInterpreterFrame (3.11+) */
	__u32 frame_previous; /* f_back / previous */
	__u32 frame_code;     /* f_code / f_executable (3.13) */
	__u32 frame_instr;    /* f_lasti (int) / prev_instr (3.11, 3.12) / instr_ptr (3.13) */
	__u32 frame_owner;    /* owner (char, 3.11+) */
	/* PyCodeObject */
	__u32 code_filename;	  /* co_filename (str) */
	__u32 code_name;	  /* co_name (str) */
	__u32 code_qualname;	  /* co_qualname (str, 3.11+) */
	__u32 code_firstlineno;	  /* co_firstlineno (int) */
	__u32 code_linetable;	  /* co_lnotab (2.7-3.9) / co_linetable (3.10+) (bytes) */
	__u32 code_code;	  /* co_code (bytes, 2.7-3.10) */
	__u32 code_code_adaptive; /* co_code_adaptive: inline bytecode (3.11+) */
	/* PyObject, PyVarObject, PyBytesObject (PyStringObject on 2.7) */
	__u32 object_type;     /* ob_type */
	__u32 var_object_size; /* ob_size */
	__u32 bytes_data;      /* ob_sval */
	/* Where a thread waiting for the GIL sleeps, from gil: struct
	 * _gil_runtime_state's cond, then mutex (3.7+); 3.6's gil_cond and
	 * gil_mutex; 2.7's interpreter_lock (see gil_wait_*). NONE: unknown. */
	__u32 gil_cond;
	/* PyASCIIObject / PyCompactUnicodeObject (str) */
	__u32 unicode_length;	    /* length, in code points */
	__u32 unicode_state;	    /* the state bit field (32 bits) */
	__u32 unicode_ascii_data;   /* sizeof(PyASCIIObject): data of a compact ASCII str */
	__u32 unicode_compact_data; /* sizeof(PyCompactUnicodeObject): data of other compact ones */
	__u8 unicode_kind_shift;    /* bit position of state.kind (3 bits: bytes per character) */
	__u8 unicode_compact_shift; /* bit position of state.compact */
	__u8 unicode_ascii_shift;   /* bit position of state.ascii */
	/* 1 on 2.7: co_name and co_filename are byte strings (PyStringObject,
	 * read with var_object_size and bytes_data), not str. */
	__u8 names_are_bytes;
	/* Bytes from gil + gil_cond that a thread waiting for the GIL may
	 * futex on (3.7+: cond and mutex, 88); 0 when unknown. */
	__u8 gil_wait_span;
	/* 1 on 2.7: gil + gil_cond holds a pointer to the GIL's lock (a
	 * malloc'd sem_t), and the waiting range starts where it points. */
	__u8 gil_wait_indirect;
	/* _PyInterpreterFrame.is_entry (bool, 3.11 only: 3.12+ marks an eval
	 * loop's entry with a C-stack shim frame instead); else
	 * PYSTROBE_PY_OWNER_NONE. */
	__u8 frame_is_entry;
	/* 1 from 3.14: f_executable is a _PyStackRef; clear its two tag bits. */
	__u8 frame_code_tagged;
	/* 1 for a free-threaded build (--disable-gil, "3.14t"). */
	__u8 free_threaded;
	__u8 _pad[3];
	/* Free-threaded 3.14+: _PyInterpreterFrame.tlbc_index (s32) and
	 * PyCodeObject.co_tlbc (_PyCodeArray *); else NONE. See step 4. */
	__u32 frame_tlbc_index;
	__u32 code_tlbc;
	/* Free-threaded: struct _gil_runtime_state's `enabled` (int): such a
	 * build runs without a GIL until an extension that needs one turns it
	 * on, and a GIL that is off has no holder. NONE elsewhere. */
	__u32 gil_enabled;
	/* PyThreadState.interp (3.12+, where each interpreter may have its own
	 * GIL); else NONE. */
	__u32 tstate_interp;
	/* PyThreadState._status (3.12+), whose bit PYSTROBE_PY_TSTATE_ACTIVE
	 * is set while the thread state is its thread's current one: a thread
	 * that runs code in sub-interpreters has one per interpreter. */
	__u32 tstate_status;
	/* PyInterpreterState.id (int64, 3.12+), to say which interpreter a
	 * thread's frames ran in; else NONE. */
	__u32 interp_id;
	__u32 _pad2;
};

/* _status.active: the bit after initialized, bound, unbound, bound_gilstate
 * (3.12 to 3.15). */
#define PYSTROBE_PY_TSTATE_ACTIVE (1u << 4)

/*
 * Per CPython process: where its runtime lives and how to read it. Filled by
 * the daemon on discovery; a reused pid gets a fresh entry or none.
 */
struct pystrobe_python_process {
	__u64 runtime_addr;   /* &_PyRuntime in the target */
	__u64 code_type_addr; /* &PyCode_Type in the target, to validate code objects */
	struct pystrobe_python_offsets offsets;
};

PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_python_offsets) == 168, "ABI: pystrobe_python_offsets");
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_python_process) == 184, "ABI: pystrobe_python_process");

/*
 * An executable file with CPython linked in, as the kernel names it: the
 * device of its filesystem (the kernel's encoding, major << 20 | minor) and
 * its inode number. Key of map python_binaries.
 */
struct pystrobe_python_binary_key {
	__u64 dev;
	__u64 inode;
};

/*
 * What makes a pystrobe_python_process for any process that execs the
 * binary: its addresses as distances from the process's start of code
 * (mm->start_code, /proc/PID/stat field 26), which the binary fixes, PIE
 * or not. Filled by the daemon when it first finds CPython in the binary.
 */
struct pystrobe_python_binary {
	__u64 runtime_offset;	/* &_PyRuntime - start_code */
	__u64 code_type_offset; /* &PyCode_Type - start_code */
	struct pystrobe_python_offsets offsets;
};

PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_python_binary_key) == 16, "ABI: python_binary_key");
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_python_binary) == 184, "ABI: pystrobe_python_binary");

/*
 * The stamp the walker records per code object. Interned names are shared
 * between code objects, so the filename, the name and the first line are
 * mixed; a code object freed and replaced by another at the same address
 * almost always changes at least one of them.
 */
static inline __u64 pystrobe_python_code_stamp(__u64 co_filename, __u64 co_name,
					       __u32 co_firstlineno)
{
	__u64 h = co_filename * 0x9e3779b97f4a7c15ull;

	h ^= (co_name << 17) | (co_name >> 47);
	h ^= (__u64)co_firstlineno << 40;
	return h;
}

/* The 32-bit stamp a sample carries: both halves of the 64-bit stamp folded. */
static inline __u32 pystrobe_python_code_stamp32(__u64 stamp)
{
	return (__u32)(stamp ^ (stamp >> 32));
}

/* The code object a frame's frame_code field holds (step 3): 3.14+ tags a
 * _PyStackRef's low two bits. */
static inline __u64 pystrobe_python_frame_code(__u64 raw, const struct pystrobe_python_offsets *o)
{
	return o->frame_code_tagged ? raw & ~(__u64)3 : raw;
}

/* True for an interpreter shim frame, given its owner byte (step 3). */
static inline int pystrobe_python_is_shim_frame(__u8 owner, const struct pystrobe_python_offsets *o)
{
	return o->frame_owner != PYSTROBE_PY_OFFSET_NONE && owner >= o->frame_owner_cstack;
}

/* Bytes of a code object's head that naming it reads: every field up to the
 * last one. Userspace reads this much, and the kernel copies this much. */
static inline __u32 pystrobe_python_code_head_size(const struct pystrobe_python_offsets *o)
{
	__u32 fields[] = {o->code_filename,  o->code_name, o->code_qualname,
			  o->code_linetable, o->code_code, o->var_object_size};
	__u32 size = o->code_firstlineno + 4;

	for (unsigned int i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		if (fields[i] != PYSTROBE_PY_OFFSET_NONE && fields[i] + 8 > size)
			size = fields[i] + 8;
	}
	return size;
}
/*
 * A code object as the kernel copied it, sent before the first sample that
 * meets it (PYSTROBE_EVENT_PYTHON_CODE). Userspace names a frame from the
 * target's memory, read when the sample arrives; by then a short-lived
 * process may have exited, and a module's body or exec'd code been freed. The copy holds the
 * memory that reading would take, region by region, so the name comes out
 * the same. A region that could not be copied whole is left out, and
 * userspace reads the object from the process instead, if it still lives.
 *
 * Regions, in this order when present: the code object's head (its fields up
 * to the last one read), co_code's head (3.8-3.10: its size), co_qualname or
 * co_name, co_filename, the line table. Only offsetof(data) + the bytes used
 * are sent.
 */
#define PYSTROBE_CODE_REGIONS 5
#define PYSTROBE_CODE_DATA_BYTES 16384
/* The most a region may take; a bigger object is left to userspace. A region
 * starts in the first half of data. */
#define PYSTROBE_CODE_REGION_MAX 8191

struct pystrobe_memory_region {
	__u64 address; /* in the target */
	__u32 size;    /* bytes copied */
	__u32 offset;  /* where they start in data */
};

struct pystrobe_python_code_event {
	__u32 kind;  /* PYSTROBE_EVENT_PYTHON_CODE */
	__u32 pid;   /* thread group id, as the host sees it */
	__u64 code;  /* the code object's address */
	__u32 stamp; /* as the samples' frames carry it */
	__u32 regions_used;
	struct pystrobe_memory_region regions[PYSTROBE_CODE_REGIONS];
	__u8 data[PYSTROBE_CODE_DATA_BYTES];
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_python_code_event) ==
			24 + 16 * PYSTROBE_CODE_REGIONS + PYSTROBE_CODE_DATA_BYTES,
		    "pystrobe_python_code_event layout changed: bump PYSTROBE_ABI_VERSION");
/* ==== end of CPython frame walking ======================================= */

/* ==== Accounting ======================================================
 * Owned by bpf/accounting.bpf.c (kernel side) and daemon/accounting/
 * (userspace). Counters start at zero when accounting is attached, so a
 * reader gets figures for exactly the window it watched; a task created
 * after that counts from its birth.
 */

/* What one thread, or all threads of one process, did in the window. */
struct pystrobe_task_counters {
	__u64 runtime_ns; /* on CPU: deltas of the kernel's sum_exec_runtime */
	/* Deltas of task->utime/stime: tick-sampled, used only as the ratio
	 * that splits runtime_ns, as the kernel's cputime_adjust() does. */
	__u64 utime_ns;
	__u64 stime_ns;
	__u64 runqueue_ns;     /* runnable, not running (includes preempted_ns) */
	__u64 preempted_ns;    /* the part of runqueue_ns that began by preemption */
	__u64 offcpu_io_ns;    /* asleep in TASK_UNINTERRUPTIBLE until woken */
	__u64 offcpu_sleep_ns; /* asleep otherwise until woken (includes gil_wait_ns) */
	/* The part of offcpu_sleep_ns spent in a futex on the interpreter's
	 * GIL (CPython processes the daemon has discovered). */
	__u64 gil_wait_ns;
	__u64 voluntary_switches;   /* deltas of task->nvcsw */
	__u64 involuntary_switches; /* deltas of task->nivcsw */
	__u64 minor_faults;	    /* deltas of task->min_flt */
	__u64 major_faults;	    /* deltas of task->maj_flt */
	/* The kernel's per-task IO accounting, as /proc/PID/io reports it:
	 * deltas of task->ioac.syscr/rchar/syscw/wchar. syscr/syscw count the
	 * VFS read/write-family syscalls (read, pread64, readv, preadv(2),
	 * sendfile, splice, copy_file_range and the write counterparts);
	 * rchar/wchar the bytes they moved, from any file, pipe or socket. */
	__u64 read_calls;
	__u64 read_bytes;
	__u64 write_calls;
	__u64 write_bytes;
	/* Off CPU (asleep until running again; preemption not counted) while
	 * inside a read- or write-family syscall (x86_64 numbers, including
	 * recvfrom/recvmsg/recvmmsg and sendto/sendmsg/sendmmsg). */
	__u64 read_blocked_ns;
	__u64 write_blocked_ns;
	__u64 block_io_bytes; /* bios queued by the thread(s) (block_bio_queue) */
	__u64 block_io_ops;
	__u64 gc_ns; /* CPython gc__start to gc__done (USDT) */
	__u64 gc_collections;
	/* Only with `--syscalls` (sys_enter/sys_exit attached): every
	 * read/write-family syscall, bytes from its return value ((m)msg
	 * variants: calls only), entry to exit time. */
	__u64 sys_read_calls;
	__u64 sys_read_bytes;
	__u64 sys_read_ns;
	__u64 sys_write_calls;
	__u64 sys_write_bytes;
	__u64 sys_write_ns;
};
#define PYSTROBE_TASK_COUNTER_FIELDS 28

/* Key of map `thread_counters`: the host tid. Deleted when the thread exits. */
struct pystrobe_thread_counters {
	__u32 tgid;
	__u32 tid;
	__u64 process_start_ns; /* start_boottime of the process's leader */
	char comm[PYSTROBE_COMM_LEN];
	struct pystrobe_task_counters counters;
};

/* Key of map `process_counters`: a pid and its leader's start time
 * (task->start_boottime, ns since boot; /proc/PID/stat field 22 in ticks),
 * so a reused pid never meets its predecessor's numbers. */
struct pystrobe_process_key {
	__u32 tgid;
	__u32 _pad;
	__u64 start_ns;
};

/*
 * A process's resident memory: gauges, not counters. Read from its mm's own
 * RSS counters (their folded part, see compat_mm_rss_pages) while its threads
 * run, at most every PYSTROBE_MEMORY_READ_NS, when a thread that faulted
 * since leaves the CPU, and when a thread exits; nothing is done per fault.
 */
struct pystrobe_process_memory {
	__u64 anon_bytes;  /* MM_ANONPAGES: RssAnon */
	__u64 file_bytes;  /* MM_FILEPAGES: RssFile */
	__u64 shmem_bytes; /* MM_SHMEMPAGES: RssShmem */
	__u64 swap_bytes;  /* MM_SWAPENTS: VmSwap */
	/* The highest resident size seen: max(mm->hiwater_rss, anon + file +
	 * shmem) at each read (VmHWM), and signal->maxrss at exit. */
	__u64 peak_bytes;
	/* bpf_ktime_get_ns() of the first read within 1% of peak_bytes */
	__u64 peak_ns;
	__u64 read_ns; /* bpf_ktime_get_ns() of the last read; 0: never read */
};
#define PYSTROBE_MEMORY_READ_NS 4000000ull

struct pystrobe_process_counters {
	struct pystrobe_task_counters counters; /* all threads, dead ones too */
	__u64 exit_ns; /* bpf_ktime_get_ns() when the last thread exited; 0: alive */
	__u32 threads; /* threads seen in the window */
	/* The kernel's OOM killer chose this process (oom:mark_victim). */
	__u32 oom_killed;
	char comm[PYSTROBE_COMM_LEN]; /* of the thread that made the entry, or at exec/exit */
	struct pystrobe_process_memory memory;
};

/* Indices of the per-CPU drop counters (map `accounting_drops`). */
enum pystrobe_accounting_drop {
	/* process_counters was full: a process's events were not counted. */
	PYSTROBE_ACCT_DROP_PROCESS_MAP_FULL = 0,
	/* thread_counters was full: a thread's own figures were not kept. */
	PYSTROBE_ACCT_DROP_THREAD_MAP_FULL = 1,
	/* No per-thread state could be had (task storage busy or full). */
	PYSTROBE_ACCT_DROP_NO_THREAD_STATE = 2,
	PYSTROBE_ACCT_DROP_COUNT = 3,
};

PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_task_counters) == PYSTROBE_TASK_COUNTER_FIELDS * 8,
		    "ABI: pystrobe_task_counters");
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_thread_counters) ==
			32 + PYSTROBE_TASK_COUNTER_FIELDS * 8,
		    "ABI: pystrobe_thread_counters");
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_process_key) == 16, "ABI: pystrobe_process_key");
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_process_memory) == 56, "ABI: pystrobe_process_memory");
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_process_counters) ==
			PYSTROBE_TASK_COUNTER_FIELDS * 8 + 16 + 16 + 56,
		    "ABI: pystrobe_process_counters");
/* ==== end of accounting ================================================== */

/* ==== native unwinding ==================================================
 * Owned by daemon/unwind/ (tables) and daemon/loader/unwind_maps.* (maps).
 * Userspace turns a binary's .eh_frame/.debug_frame into a table of rows,
 * one per address range with one rule; the kernel walks a thread's native
 * stack with them from its user registers (bpf/native_unwind.bpf.h).
 *
 * A table's rows are sorted by `addr`, the binary's link-time virtual
 * address where the row's rule starts; a row holds until the next one. A
 * process's mapping turns a pc into that address: addr = pc - bias.
 *
 * Userspace builds full rows (pystrobe_unwind_row); the kernel holds them
 * packed, 4 bytes each (pystrobe_unwind_packed_row): the low 16 bits of the
 * address (the page index gives the rest) and the index of the row's rule in
 * one dictionary that every table shares (a binary uses a few hundred
 * distinct rules, libtorch_cpu's 1.4M rows 642). Packed rows of every table
 * live in one array map (unwind_rows), in blocks of
 * PYSTROBE_UNWIND_ROWS_PER_BLOCK.
 */

/* How the canonical frame address (the caller's rsp) is found. */
enum pystrobe_unwind_cfa_rule {
	/* No rule here: a gap between functions, or a rule pystrobe does not
	 * follow (a DWARF expression). The walk ends with one [unknown]. */
	PYSTROBE_UNWIND_CFA_INVALID = 0,
	PYSTROBE_UNWIND_CFA_RSP = 1, /* rsp + cfa_offset */
	PYSTROBE_UNWIND_CFA_RBP = 2, /* rbp + cfa_offset */
	/* GCC's PLT entries: rsp + 8, + 8 more from the 11th byte of each
	 * 16-byte entry on (after its push). */
	PYSTROBE_UNWIND_CFA_PLT = 3,
	/* A signal trampoline (__restore_rt): rsp points at the ucontext the
	 * kernel pushed; the interrupted frame's registers are read there. */
	PYSTROBE_UNWIND_CFA_SIGNAL = 4,
	/* The outermost frame (_start, clone: the return address is
	 * undefined): the stack ends here, complete. */
	PYSTROBE_UNWIND_CFA_END = 5,
};

/* Where the caller's rbp is; pystrobe_unwind_rule.rbp_rule. */
enum pystrobe_unwind_rbp_rule {
	PYSTROBE_UNWIND_RBP_SAME = 0,	 /* not saved: the caller's rbp is rbp */
	PYSTROBE_UNWIND_RBP_OFFSET = 1,	 /* saved at CFA + rbp_offset */
	PYSTROBE_UNWIND_RBP_UNKNOWN = 2, /* in another register or an expression */
};

/* A row as userspace builds it: where a rule starts, and the rule. */
struct pystrobe_unwind_row {
	__u32 addr;	  /* link-time virtual address the rule starts at */
	__s32 cfa_offset; /* with CFA_RSP/CFA_RBP */
	__s16 rbp_offset; /* with RBP_OFFSET */
	__u8 cfa_rule;	  /* enum pystrobe_unwind_cfa_rule */
	__u8 rbp_rule;	  /* enum pystrobe_unwind_rbp_rule */
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_unwind_row) == 12, "ABI: pystrobe_unwind_row");

/* One rule of the shared dictionary: map unwind_rules, by rule index.
 * Index 0 is the INVALID rule (all zeroes). */
struct pystrobe_unwind_rule {
	__s32 cfa_offset;
	__s16 rbp_offset;
	__u8 cfa_rule; /* enum pystrobe_unwind_cfa_rule */
	__u8 rbp_rule; /* enum pystrobe_unwind_rbp_rule */
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_unwind_rule) == 8, "ABI: pystrobe_unwind_rule");
#define PYSTROBE_UNWIND_MAX_RULES 65536 /* a rule index is 16 bits */

/* A row as the kernel holds it. */
struct pystrobe_unwind_packed_row {
	/* addr & 0xffff. Within a page's rows (see PYSTROBE_UNWIND_PAGE_SHIFT)
	 * every address after the page's first row is in (page start, page
	 * start + page size], so (addr_low - page start) mod 2^16 is exact. */
	__u16 addr_low;
	__u16 rule; /* index in unwind_rules */
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_unwind_packed_row) == 4,
		    "ABI: pystrobe_unwind_packed_row");

#define PYSTROBE_UNWIND_ROWS_PER_BLOCK 64
struct pystrobe_unwind_row_block {
	struct pystrobe_unwind_packed_row rows[PYSTROBE_UNWIND_ROWS_PER_BLOCK];
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_unwind_row_block) == 256,
		    "ABI: pystrobe_unwind_row_block");

/*
 * A table's page index cuts the search: for each page of
 * 1 << PYSTROBE_UNWIND_PAGE_SHIFT bytes from first_page on, the index (from
 * the table's first row) of the row in effect at the page's start. The rows
 * a pc of page p may need lie between the entries of p and p + 1, a few
 * dozen at most, instead of the whole table. A table's first row is at or
 * below its first page's start (userspace puts an INVALID row there), so
 * the row an entry names is in effect for the whole page up to the next row.
 */
#define PYSTROBE_UNWIND_PAGE_SHIFT 12

/* Whether a table's rows are in the kernel; pystrobe_unwind_table.state. */
enum pystrobe_unwind_table_state {
	/* Not loaded (not built yet, or evicted for room): the walk ends with
	 * [unknown] and asks for it (map unwind_wanted). */
	PYSTROBE_UNWIND_TABLE_ABSENT = 0,
	PYSTROBE_UNWIND_TABLE_LOADED = 1,
	/* The file has no usable call frame information, or its table never
	 * fits: the walk ends with [unknown] and asks for nothing. */
	PYSTROBE_UNWIND_TABLE_UNAVAILABLE = 2,
};

/* One table as the kernel finds it: map unwind_tables, by table id. */
struct pystrobe_unwind_table {
	__u32 first_row; /* index in unwind_rows' rows (block * 64 + slot) */
	__u32 row_count;
	__u32 first_page_entry; /* index in unwind_pages of first_page's entry */
	__u32 page_count;	/* entries: pages covered, plus one past the last */
	__u32 first_page;	/* lowest row address >> PYSTROBE_UNWIND_PAGE_SHIFT */
	__u32 state;		/* enum pystrobe_unwind_table_state */
	/* bpf_ktime_get_ns() of the last walk that used a row of it, written
	 * by the kernel: userspace evicts the least recently used first. */
	__u64 used_ns;
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_unwind_table) == 32, "ABI: pystrobe_unwind_table");

/* Special table ids of a mapping. */
#define PYSTROBE_UNWIND_TABLE_NONE 0xffffffffu /* a file without unwind info */
#define PYSTROBE_UNWIND_TABLE_JIT 0xfffffffeu  /* anonymous executable memory */

/* One executable mapping of a process, sorted by start. */
struct pystrobe_unwind_mapping {
	__u64 start; /* [start, end) in the process */
	__u64 end;
	__u64 bias; /* pc - bias = the binary's link-time address */
	__u32 table_id;
	__u32 _pad;
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_unwind_mapping) == 32, "ABI: pystrobe_unwind_mapping");

#define PYSTROBE_UNWIND_MAX_MAPPINGS 512
/* A process's executable mappings: map unwind_processes, by tgid. */
struct pystrobe_unwind_process {
	__u32 count;
	__u32 generation; /* bumped by userspace on each rewrite */
	struct pystrobe_unwind_mapping mappings[PYSTROBE_UNWIND_MAX_MAPPINGS];
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_unwind_process) == 8 + 32 * PYSTROBE_UNWIND_MAX_MAPPINGS,
		    "ABI: pystrobe_unwind_process");

/* Frames the native walk writes in place of an address it could not
 * follow: userspace shows them as [unknown] and [jit]. Neither is a
 * user-space address (those are below 1 << 47). */
#define PYSTROBE_UNWIND_FRAME_UNKNOWN 0xfffffffffffff001ull
#define PYSTROBE_UNWIND_FRAME_JIT 0xfffffffffffff002ull
/* ==== end of native unwinding ============================================ */

#endif /* PYSTROBE_BPF_PYSTROBE_ABI_H_ */
