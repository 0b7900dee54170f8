/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Off-CPU intervals of one thread, from the scheduler's tracepoints:
 *
 *   sched_switch (prev)   -> offcpu_switch_out(): the thread leaves the CPU,
 *                            for sched_switch_offcpu_reason()
 *   sched_wakeup(_new)    -> offcpu_wakeup(): it becomes runnable again
 *   sched_switch (next)   -> offcpu_switch_in(): it runs; the interval since
 *                            it left is split into time blocked (for its
 *                            reason) and time runnable in the run queue
 *
 * The clock lives in the caller's per-thread state; accounting_offcpu.bpf.c
 * adds the interval to counters, and an off-CPU sampler can charge the same
 * interval to the stack taken at switch-out, in the same handler.
 */
#ifndef PYSTROBE_BPF_OFFCPU_BPF_H_
#define PYSTROBE_BPF_OFFCPU_BPF_H_

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>

#include "compat.bpf.h"
#include "pystrobe_abi.h"

/* include/linux/sched.h; stable kernel ABI values. */
#define OFFCPU_TASK_RUNNING 0x0000
#define OFFCPU_TASK_UNINTERRUPTIBLE 0x0002
#define OFFCPU_TASK_NOLOAD 0x0400 /* with UNINTERRUPTIBLE: TASK_IDLE */

struct offcpu_clock {
	__u64 off_since_ns; /* 0: on CPU, or never seen leaving it */
	__u64 woken_ns;	    /* wakeup after off_since_ns; 0: not yet */
	__u32 reason;	    /* enum pystrobe_offcpu_reason */
	__u32 _pad;
};

struct offcpu_interval {
	__u64 blocked_ns;  /* asleep, for `reason` (0 when preempted) */
	__u64 runqueue_ns; /* runnable, waiting for a CPU */
	__u32 reason;	   /* why the thread left the CPU */
	__u32 _pad;
};

/*
 * Why a thread left the CPU: the one answer for `record --off-cpu`'s stacks
 * and for `stat`'s counters.
 *   RUNQUEUE  preempted (`preempt`, or prev_state TASK_RUNNING): the thread
 *             stays runnable, so all the time until it runs is run-queue
 *             time, as the kernel counts it involuntary (nivcsw).
 *   IO        TASK_UNINTERRUPTIBLE with in_iowait set: io_schedule() (block
 *             IO, page-in, writeback), what the kernel itself calls iowait.
 *   SLEEP     everything else: TASK_INTERRUPTIBLE (futexes, poll, sleep),
 *             TASK_IDLE (UNINTERRUPTIBLE|NOLOAD: idle kernel threads, which
 *             the load average leaves out too) and uninterruptible waits
 *             that are not IO (mutexes, other kernel locks).
 * The GIL, a kind of SLEEP, is told apart by the callers (waiting_for_gil).
 */
static __always_inline __u32 offcpu_reason(bool preempt, unsigned int prev_state, bool in_iowait)
{
	if (preempt || prev_state == OFFCPU_TASK_RUNNING)
		return PYSTROBE_OFFCPU_RUNQUEUE;
	if ((prev_state & OFFCPU_TASK_UNINTERRUPTIBLE) && !(prev_state & OFFCPU_TASK_NOLOAD) &&
	    in_iowait)
		return PYSTROBE_OFFCPU_IO;
	return PYSTROBE_OFFCPU_SLEEP;
}

/* offcpu_reason() of the thread leaving the CPU at raw_tp/sched_switch, which
 * is the current task. Call it before anything else reads `ctx`: the verifier
 * refuses a ctx pointer the compiler kept moved for a later read. */
static __always_inline __u32 sched_switch_offcpu_reason(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *prev = bpf_get_current_task_btf();

	return offcpu_reason((bool)ctx->args[0], compat_sched_switch_prev_state(ctx),
			     BPF_CORE_READ_BITFIELD(prev, in_iowait));
}

/* The thread leaves the CPU now, for `reason` (sched_switch_offcpu_reason). */
static __always_inline void offcpu_switch_out(struct offcpu_clock *clock, __u32 reason, __u64 now)
{
	clock->off_since_ns = now;
	clock->woken_ns = 0;
	clock->reason = reason;
}

/* A new task is runnable from birth: it waits in the run queue. */
static __always_inline void offcpu_born(struct offcpu_clock *clock, __u64 now)
{
	clock->off_since_ns = now;
	clock->woken_ns = now;
	clock->reason = PYSTROBE_OFFCPU_RUNQUEUE;
}

static __always_inline void offcpu_wakeup(struct offcpu_clock *clock, __u64 now)
{
	/* Only the first wakeup of a sleep counts; a preempted thread is
	 * runnable already. */
	if (clock->off_since_ns && !clock->woken_ns && clock->reason != PYSTROBE_OFFCPU_RUNQUEUE)
		clock->woken_ns = now;
}

/* Returns false when the thread was not seen leaving the CPU. */
static __always_inline bool offcpu_switch_in(struct offcpu_clock *clock, __u64 now,
					     struct offcpu_interval *out)
{
	__u64 since = clock->off_since_ns, woken = clock->woken_ns;

	clock->off_since_ns = 0;
	clock->woken_ns = 0;
	if (!since || now < since)
		return false;
	out->reason = clock->reason;
	if (clock->reason == PYSTROBE_OFFCPU_RUNQUEUE) {
		out->blocked_ns = 0;
		out->runqueue_ns = now - since;
	} else if (!woken || woken < since || woken > now) {
		/* The wakeup was missed: all of it counts as the sleep. */
		out->blocked_ns = now - since;
		out->runqueue_ns = 0;
	} else {
		out->blocked_ns = woken - since;
		out->runqueue_ns = now - woken;
	}
	return true;
}

#endif /* PYSTROBE_BPF_OFFCPU_BPF_H_ */
