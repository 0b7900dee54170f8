// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The accounting's off-CPU time, from the scheduler (offcpu.bpf.h's clock
 * and classifier): at each switch the thread leaving is charged what the
 * kernel counted and starts its off-CPU clock, noting why it left (the GIL
 * and a read or write it sleeps in told apart); the thread arriving is
 * charged the interval by reason, and its run-queue wait. Wakeups split the
 * interval into blocked and runnable time.
 */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "accounting.bpf.h"
#include "offcpu.bpf.h"
#include "pystrobe_abi.h"
#include "python_process.bpf.h"
#include "syscall_family.bpf.h"

SEC("raw_tp/sched_switch")
int acct_switch(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx->args[1];
	struct task_struct *next = (struct task_struct *)ctx->args[2];
	__u32 reason = sched_switch_offcpu_reason(ctx);
	struct offcpu_interval interval;
	struct acct_thread_state *s;
	struct acct_refs refs;
	__u64 now = bpf_ktime_get_ns();

	/* prev is the current task. nvcsw/nivcsw were counted just before
	 * this tracepoint. */
	if (acct_lookup(prev, true, &refs)) {
		take_task_deltas(prev, &refs);
		take_memory(prev, &refs, MEMORY_READ_IF_FAULTED);
		if (refs.thread) {
			s = &refs.thread->state;
			offcpu_switch_out(&s->offcpu, reason, now);
			s->offcpu_syscall = SYSCALL_OTHER;
			if (s->offcpu.reason != PYSTROBE_OFFCPU_RUNQUEUE)
				s->offcpu_syscall = current_syscall_family();
			if (s->offcpu.reason == PYSTROBE_OFFCPU_SLEEP &&
			    waiting_for_gil(refs.thread->pub.tgid))
				s->offcpu.reason = PYSTROBE_OFFCPU_GIL;
		}
	}
	if (!acct_lookup(next, true, &refs) || !refs.thread)
		return 0;
	s = &refs.thread->state;
	if (!offcpu_switch_in(&s->offcpu, now, &interval))
		return 0;
	if (interval.runqueue_ns)
		ACCT_ADD(&refs, runqueue_ns, interval.runqueue_ns);
	switch (interval.reason) {
	case PYSTROBE_OFFCPU_RUNQUEUE:
		ACCT_ADD(&refs, preempted_ns, interval.runqueue_ns);
		return 0;
	case PYSTROBE_OFFCPU_IO:
		ACCT_ADD(&refs, offcpu_io_ns, interval.blocked_ns);
		break;
	case PYSTROBE_OFFCPU_GIL:
		ACCT_ADD(&refs, gil_wait_ns, interval.blocked_ns);
		ACCT_ADD(&refs, offcpu_sleep_ns, interval.blocked_ns);
		break;
	default:
		ACCT_ADD(&refs, offcpu_sleep_ns, interval.blocked_ns);
	}
	/* Asleep inside a read or write: until it runs again. */
	if (s->offcpu_syscall == SYSCALL_READ)
		ACCT_ADD(&refs, read_blocked_ns, interval.blocked_ns + interval.runqueue_ns);
	else if (s->offcpu_syscall == SYSCALL_WRITE)
		ACCT_ADD(&refs, write_blocked_ns, interval.blocked_ns + interval.runqueue_ns);
	s->offcpu_syscall = SYSCALL_OTHER;
	return 0;
}

SEC("raw_tp/sched_wakeup")
int acct_wakeup(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx->args[0];
	struct acct_refs refs;

	if (acct_lookup(task, false, &refs) && refs.thread)
		offcpu_wakeup(&refs.thread->state.offcpu, bpf_ktime_get_ns());
	return 0;
}

SEC("raw_tp/sched_wakeup_new")
int acct_wakeup_new(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx->args[0];
	struct acct_refs refs;

	if (acct_lookup(task, true, &refs) && refs.thread)
		offcpu_born(&refs.thread->state.offcpu, bpf_ktime_get_ns());
	return 0;
}
