/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * pystrobe_abi.h's part for the CPython walk: per-version offsets, processes,
 * binaries, code copies.
 * Included by pystrobe_abi.h, after its types and PYSTROBE_ABI_ASSERT: include that.
 * The same rules hold: byte-for-byte layouts, sizes asserted, and any change
 * bumps PYSTROBE_ABI_VERSION there.
 */
#ifndef PYSTROBE_BPF_PYSTROBE_ABI_PYTHON_H_
#define PYSTROBE_BPF_PYSTROBE_ABI_PYTHON_H_

#ifndef PYSTROBE_BPF_PYSTROBE_ABI_H_
#error "include pystrobe_abi.h, not its parts"
#endif

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

#endif /* PYSTROBE_BPF_PYSTROBE_ABI_PYTHON_H_ */
