/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which PyThreadState is the sampled thread's, and whether it holds the GIL:
 * the first step of the CPython walk (python_stack.bpf.c). The thread state
 * found is cached with the thread (python_thread_states, declared here and
 * defined in python_stack.bpf.c) and revalidated on every use; the search
 * runs over the interpreters' thread lists only when the cache misses.
 */
#ifndef PYSTROBE_BPF_PYTHON_THREAD_STATE_BPF_H_
#define PYSTROBE_BPF_PYTHON_THREAD_STATE_BPF_H_

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "pystrobe_abi.h"
#include "python_process.bpf.h"
#include "python_walk.bpf.h"

/* Threads examined when looking for a thread's PyThreadState. */
#define PYTHON_MAX_THREADS 4096

/* How often a thread whose cached thread state is not its active one looks
 * for another (a power of two): a thread that let the GIL go has none active,
 * and the search costs a read or two per thread of the process. */
#define PYTHON_INACTIVE_SEARCH_EVERY 4

/*
 * The PyThreadState found for a thread last time, revalidated on every use.
 * Kept with the thread itself, which frees it when the thread ends, and
 * found without hashing: a hash lookup here cost a tenth of a sample.
 */
struct python_thread_cache {
	__u64 tstate;	/* PyThreadState address in the target */
	__u32 inactive; /* samples that found it inactive (3.12+) */
	__u32 _pad;
};

struct python_thread_states_map {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct python_thread_cache);
};
extern struct python_thread_states_map python_thread_states SEC(".maps");

/* Reads the head of thread state `tstate` into walk->tstate_head. */
static __always_inline bool read_thread_state_head(struct python_walk *walk, __u64 tstate)
{
	walk->tstate_head_of = 0;
	if (bpf_probe_read_user(walk->tstate_head, walk->tstate_head_size & (PYTHON_COPY_SIZE - 1),
				(void *)tstate))
		return false;
	walk->tstate_head_of = tstate;
	return true;
}

/* A field of the thread state head last read. */
static __always_inline __u64 thread_state_u64(const struct python_walk *walk, __u32 offset)
{
	return copied_u64(walk->tstate_head, offset);
}

/* Reads the head of thread state `tstate` (one found earlier) and says
 * whether it is still the sampled thread's. */
static __always_inline bool thread_state_still_threads(struct python_walk *walk, __u64 tstate)
{
	return read_thread_state_head(walk, tstate) &&
	       thread_state_u64(walk, walk->proc.offsets.tstate_thread_id) == walk->pthread_self;
}

/* True when the thread state head last read is its thread's current one
 * (see thread_state_active). */
static __always_inline bool thread_state_head_active(const struct python_walk *walk)
{
	if (walk->proc.offsets.tstate_status == PYSTROBE_PY_OFFSET_NONE)
		return true;
	return copied_u32(walk->tstate_head, walk->proc.offsets.tstate_status) &
	       PYSTROBE_PY_TSTATE_ACTIVE;
}

/* True when thread state `tstate` is its thread's current one (3.12+; always
 * before, where a thread has one thread state). */
static __always_inline bool thread_state_active(struct python_walk *walk, __u64 tstate)
{
	__u32 status = 0;

	if (walk->proc.offsets.tstate_status == PYSTROBE_PY_OFFSET_NONE)
		return true;
	if (bpf_probe_read_user(&status, sizeof(status),
				(void *)(tstate + walk->proc.offsets.tstate_status)))
		return false;
	return status & PYSTROBE_PY_TSTATE_ACTIVE;
}

/* One step of the search for the thread's PyThreadState: the active one, or
 * else the first that names the thread (in walk->inactive_match). */
static long find_thread_state_step(__u32 index, void *ctx)
{
	struct python_walk *walk = python_walk_state();
	__u64 thread_id;

	if (!walk)
		return 1;
	if (walk->cursor == 0) {
		/* This interpreter's threads are done: on to the next one. */
		if (!read_target_u64(walk->interp, walk->proc.offsets.interp_next, &walk->interp) ||
		    walk->interp == 0 ||
		    !read_target_u64(walk->interp, walk->proc.offsets.interp_tstate_head,
				     &walk->cursor))
			return 1;
		return 0;
	}
	if (!read_target_u64(walk->cursor, walk->proc.offsets.tstate_thread_id, &thread_id))
		return 1;
	if (thread_id == walk->pthread_self) {
		if (thread_state_active(walk, walk->cursor)) {
			walk->tstate = walk->cursor;
			return 1;
		}
		if (walk->inactive_match == 0)
			walk->inactive_match = walk->cursor;
	}
	if (!read_target_u64(walk->cursor, walk->proc.offsets.tstate_next, &walk->cursor))
		return 1;
	return 0;
}

/* Finds (or revalidates) the thread's PyThreadState into walk->tstate,
 * with its head in walk->tstate_head, by the thread's cache in task
 * storage or else a search. */
static __always_inline void look_up_thread_state(struct python_walk *walk,
						 struct task_struct *thread)
{
	struct python_thread_cache *cached =
	    bpf_task_storage_get(&python_thread_states, thread, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (cached && cached->tstate != 0 && thread_state_still_threads(walk, cached->tstate)) {
		/* Not its current one: the thread may run in another interpreter
		 * now, or have let the GIL go; look again, now and then. */
		if (thread_state_head_active(walk) ||
		    (++cached->inactive & (PYTHON_INACTIVE_SEARCH_EVERY - 1)) != 0) {
			walk->tstate = cached->tstate;
			return;
		}
	}
	if (!read_target_u64(walk->proc.runtime_addr, walk->proc.offsets.runtime_interpreters_head,
			     &walk->interp) ||
	    walk->interp == 0 ||
	    !read_target_u64(walk->interp, walk->proc.offsets.interp_tstate_head, &walk->cursor))
		return;
	bpf_loop(PYTHON_MAX_THREADS, find_thread_state_step, NULL, 0);
	if (walk->tstate == 0)
		walk->tstate = walk->inactive_match;
	if (walk->tstate && cached) {
		cached->tstate = walk->tstate;
		cached->inactive = 0;
	}
	/* The walk goes on from the head of the one found, which the search
	 * may have found to be the cached one after all. */
	if (walk->tstate && walk->tstate_head_of != walk->tstate &&
	    !read_thread_state_head(walk, walk->tstate))
		walk->tstate = 0;
}

/*
 * Finds (or revalidates) the sampled thread's PyThreadState into
 * walk->tstate, with its head in walk->tstate_head.
 *
 * A CPU mostly samples the thread it sampled last, so the thread state its
 * last walk found is tried first when that walk was of this thread: taken
 * if it revalidates as the cache's does and is still the thread's active
 * one. That spares the task storage lookup, which cost about 0.15 of the
 * 100-read reference on a VM measured (docs/benchmarks.md), as much as the
 * head's read. The thread is named by its task and its start time, since a
 * task's memory goes to the next thread made once it ends.
 */
static __always_inline void find_thread_state(struct python_walk *walk, struct task_struct *thread)
{
	__u64 start_time = thread->start_time;

	walk->tstate = 0;
	walk->inactive_match = 0;
	walk->tstate_head_of = 0; /* an earlier walk's, maybe of another process */
	if (walk->last_task == (__u64)thread && walk->last_task_start == start_time &&
	    walk->last_tstate != 0 && thread_state_still_threads(walk, walk->last_tstate) &&
	    thread_state_head_active(walk)) {
		walk->tstate = walk->last_tstate;
		return;
	}
	look_up_thread_state(walk, thread);
	walk->last_task = (__u64)thread;
	walk->last_task_start = start_time;
	walk->last_tstate = walk->tstate;
}

/* True when the thread state `tstate` holds the GIL right now. `interp`:
 * the thread state's interpreter (3.12+, where a subinterpreter may have a
 * GIL of its own), else 0. */
static __always_inline bool holds_gil(struct python_walk *walk, __u64 interp)
{
	const struct pystrobe_python_offsets *off = &walk->proc.offsets;
	struct {
		__u64 last_holder;
		__s32 locked;
	} holder = {};
	__s32 enabled = 0;
	__u64 gil;

	gil = python_gil_address(&walk->proc, interp);

	if (gil == 0)
		return false;
	/* A free-threaded build's GIL is off unless an extension turned it on. */
	if (off->gil_enabled != PYSTROBE_PY_OFFSET_NONE &&
	    (bpf_probe_read_user(&enabled, sizeof(enabled), (void *)(gil + off->gil_enabled)) ||
	     enabled == 0))
		return false;
	if (off->gil_locked == off->gil_last_holder + 8) {
		/* 3.7+: locked follows last_holder, a pointer after it; one read
		 * takes both, and a read costs more than the rest of the check. */
		if (bpf_probe_read_user(&holder, sizeof(holder.last_holder) + sizeof(holder.locked),
					(void *)(gil + off->gil_last_holder)))
			return false;
	} else {
		if (!read_target_u64(gil, off->gil_last_holder, &holder.last_holder))
			return false;
		/* 2.7, 3.6: the holder is _PyThreadState_Current, NULL while the GIL is free. */
		if (off->gil_locked == PYSTROBE_PY_OFFSET_NONE)
			holder.locked = 1;
		else if (bpf_probe_read_user(&holder.locked, sizeof(holder.locked),
					     (void *)(gil + off->gil_locked)))
			return false;
	}
	return holder.locked != 0 && holder.last_holder == walk->tstate;
}

#endif /* PYSTROBE_BPF_PYTHON_THREAD_STATE_BPF_H_ */
