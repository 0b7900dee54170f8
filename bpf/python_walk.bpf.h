/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One CPython walk's working state, per CPU (struct python_walk: the
 * process's layout, the thread state found, the block of frames and the
 * code object last read, and the walk's cache of code stamps), and reading
 * fields out of its copies of the target's memory. Used by the thread-state
 * search (python_thread_state.bpf.h) and the frame walk (python_stack.bpf.c),
 * which defines the scratch map declared here.
 */
#ifndef PYSTROBE_BPF_PYTHON_WALK_BPF_H_
#define PYSTROBE_BPF_PYTHON_WALK_BPF_H_

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "pystrobe_abi.h"
#include "python_process.bpf.h"
#include "python_stack.bpf.h"

/*
 * Stamps of the code objects read during this walk, direct-mapped by
 * address: a recursive function's frames share one code object, and a hit
 * saves reading its head again, half of a frame's cost.
 *
 * A hit counts within one walk only. While the sampled thread is stopped
 * under us, every code object its frames run is kept alive by those frames,
 * so an address names one code object for the whole walk. Across walks it
 * does not: a module's code is freed once its import has run, and the next
 * code objects (with fresh globals dicts, at the same addresses too) take
 * its place; a stamp cached across walks went stale for a quarter of a
 * program's samples.
 */
#define PYTHON_STAMP_SLOTS 256

struct python_stamp_slot {
	__u64 code;
	__u64 walk_id;
	__u64 tlbc; /* co_tlbc (free-threaded 3.14+), else 0 */
	__u32 stamp;
	__u32 _pad;
};

/* Everything one walk needs, per CPU: too big for the BPF stack. */
struct python_walk {
	/* A copy of proc_tgid's entry in python_processes, or of its absence
	 * (proc_is_python 0), as of python_processes_generation
	 * proc_generation: see python_walk_of_process. */
	struct pystrobe_python_process proc;
	__u64 proc_generation;
	__u32 proc_tgid;
	__u8 proc_known;
	__u8 proc_is_python;
	__u64 pthread_self; /* the sampled thread's fs base: PyThreadState.thread_id */
	__u64 interp;	    /* interpreter being searched */
	__u64 cursor;	    /* thread state being looked at */
	__u64 tstate;
	__u64 inactive_match; /* a thread state of the thread, not its active one */
	__u32 frames;	      /* Python frames written so far */
	__u32 max_frames;     /* python_max_frames, or what is left of the sample */
	__u32 base;	      /* index in sample->data of the first Python frame */
	__u32 status;	      /* enum pystrobe_python_status */
	/* Bytes to copy of a frame (a multiple of 8) and of a code object:
	 * just past the last field used. */
	__u16 frame_copy_size;
	__u16 code_copy_size;
	/* Bytes read below a frame with it: frame_copy_size, or up to
	 * PYTHON_FRAME_BLOCK where frames sit side by side (3.11+). */
	__u16 block_span;
	/* Bytes of a thread state's head that the walk uses: every field of it
	 * the walk reads, copied in one read (thread id, status, interpreter,
	 * frame). */
	__u16 tstate_head_size;
	__u64 walk_id;	      /* counts this CPU's walks: tells the stamp cache's walks apart */
	__u64 tstate_head_of; /* the thread state tstate_head was read from, or 0 */
	/* The thread this CPU walked last (its task and start time) and its
	 * thread state then: see find_thread_state. */
	__u64 last_task;
	__u64 last_task_start;
	__u64 last_tstate;
	__u8 tstate_head[PYTHON_COPY_SIZE];
	/* Copy of the target's memory from block_addr: the frame being walked
	 * and, with luck, the frames it was called from. block_last is the
	 * last index in it at which a whole frame (frame_copy_size) fits. */
	__u64 block_addr;
	__u32 block_last;
	__u8 frame_block[PYTHON_FRAME_BLOCK];
	__u8 code_copy[PYTHON_COPY_SIZE];
	/* Left over from earlier walks too: walk_id tells them apart. */
	struct python_stamp_slot stamps[PYTHON_STAMP_SLOTS];
};

/* The walk's state. Key: 0. Value: struct python_walk, one per CPU. */
struct python_walk_scratch_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct python_walk);
};
extern struct python_walk_scratch_map python_walk_scratch SEC(".maps");

static __always_inline struct python_walk *python_walk_state(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&python_walk_scratch, &zero);
}

/* The bytes the walk copies of a frame, of a code object and of a thread
 * state's head for these offsets, or 0 when a field lies beyond what a copy
 * holds (python_stack.bpf.c). */
int python_frame_copy_size(const struct pystrobe_python_offsets *off);
int python_code_copy_size(const struct pystrobe_python_offsets *off);
int python_tstate_head_size(const struct pystrobe_python_offsets *off);

/*
 * The walk state, ready to walk process `tgid`, or null when `tgid` is not a
 * CPython process the daemon handed over (or the state cannot be had).
 *
 * A CPU mostly samples the process it sampled last, so the copy of its entry
 * (and its copy sizes) from an earlier sample is used again while no entry of
 * python_processes has changed since: a hash lookup, a 184-byte copy and the
 * three size functions cost about half of the 100-read reference on a VM
 * measured (docs/benchmarks.md). The generation is read before the lookup,
 * so an entry changed meanwhile is looked up again at the next sample.
 */
static __always_inline struct python_walk *python_walk_of_process(__u32 tgid)
{
	struct python_walk *walk = python_walk_state();
	const struct pystrobe_python_process *proc;
	__u64 generation = *(volatile __u64 *)&python_processes_generation;

	if (!walk)
		return NULL;
	if (walk->proc_known && walk->proc_tgid == tgid && walk->proc_generation == generation)
		return walk->proc_is_python ? walk : NULL;
	proc = bpf_map_lookup_elem(&python_processes, &tgid);
	walk->proc_known = 1;
	walk->proc_tgid = tgid;
	walk->proc_generation = generation;
	walk->proc_is_python = proc != NULL;
	if (!proc)
		return NULL;
	__builtin_memcpy(&walk->proc, proc, sizeof(walk->proc));
	walk->frame_copy_size = python_frame_copy_size(&walk->proc.offsets);
	walk->code_copy_size = python_code_copy_size(&walk->proc.offsets);
	walk->tstate_head_size = python_tstate_head_size(&walk->proc.offsets);
	/* Frame objects before 3.11 are each on the heap: read one by one,
	 * unless packed (see frame_in_block). */
	walk->block_span = walk->proc.offsets.frame_model >= PYSTROBE_PY_FRAMES_CFRAME
			       ? PYTHON_FRAME_BLOCK
			       : walk->frame_copy_size;
	return walk;
}

/* A field out of a copy; offsets were checked against the copy's size. */
static __always_inline __u64 copied_u64(const __u8 *copy, __u32 offset)
{
	return *(const __u64 *)(copy + (offset & (PYTHON_COPY_SIZE - 8)));
}

static __always_inline __u32 copied_u32(const __u8 *copy, __u32 offset)
{
	return *(const __u32 *)(copy + (offset & (PYTHON_COPY_SIZE - 4)));
}

static __always_inline bool offset_fits_copy(__u32 offset)
{
	return offset == PYSTROBE_PY_OFFSET_NONE || offset <= PYTHON_COPY_SIZE - 8;
}

/* The copy size that covers `size` and a field of `field_size` at `offset`. */
static __always_inline __u16 copy_size_covering(__u16 size, __u32 offset, __u32 field_size)
{
	if (offset == PYSTROBE_PY_OFFSET_NONE || offset + field_size <= size)
		return size;
	return offset + field_size;
}

#endif /* PYSTROBE_BPF_PYTHON_WALK_BPF_H_ */
