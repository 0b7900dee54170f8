// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The off-CPU sampler (record --off-cpu/--idle): at each context switch the
 * thread leaving keeps its stack and why it left (offcpu.bpf.h's
 * classifier, the GIL told apart), and the thread arriving sends the stack
 * it kept, weighed by how long it was away.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "offcpu.bpf.h"
#include "pystrobe_abi.h"
#include "python_process.bpf.h"
#include "sample.bpf.h"
#include "sampler_output.bpf.h"
#include "targets.bpf.h"

/* Set by the loader (record --off-cpu/--idle): follow threads off CPU. */
const volatile __u8 offcpu_enabled = 0;

/*
 * The stack each thread had when it last went off CPU, kept until it comes
 * back and the interval's length is known (then sent and deleted).
 * Key: tid (host). Value: a sample_slot; only the used part is sent. Allocated on use: only threads
 * off CPU right now hold an entry, so 16384 covers every sleeping thread of a large host.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct sample_slot);
} offcpu_stacks SEC(".maps");

/*
 * On each context switch: the thread leaving gets its stack kept, with the
 * time and why it left; the thread arriving, if it has a stack kept, sends
 * it weighted by how long it was away.
 * Args: (bool preempt, struct task_struct *prev, struct task_struct *next
 * [, unsigned int prev_state since 5.18: see compat.bpf.h]).
 */
SEC("raw_tp/sched_switch")
int handle_switch(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *next = (struct task_struct *)ctx->args[2];
	__u64 pid_tgid = current_pid_tgid();
	struct sample_slot *kept, *leaving;
	__u32 next_tid, tid = (__u32)pid_tgid;
	__u32 reason;
	__u64 size;

	if (!offcpu_enabled)
		return 0;
	reason = sched_switch_offcpu_reason(ctx);

	/* The arriving thread: send what it left behind. */
	next_tid = BPF_CORE_READ(next, pid);
	kept = bpf_map_lookup_elem(&offcpu_stacks, &next_tid);
	if (kept) {
		kept->sample.weight_ns = bpf_ktime_get_ns() - kept->sample.time_ns;
		size = kept->size;
		if (size > sizeof(kept->sample))
			size = sizeof(kept->sample);
		if (bpf_ringbuf_output(&events, &kept->sample, size, sample_output_flags()))
			count_drop(PYSTROBE_DROP_RINGBUF_FULL);
		else
			count_sample(PYSTROBE_COUNT_OFFCPU_SENT);
		bpf_map_delete_elem(&offcpu_stacks, &next_tid);
	}

	/* The leaving thread (current): keep its stack. */
	if ((pid_tgid >> 32) == 0 || !is_target(pid_tgid >> 32))
		return 0;
	leaving = current_slot();
	if (!leaving)
		return 0;
	leaving->sample.kind = PYSTROBE_EVENT_OFFCPU;
	leaving->size = fill_sample(ctx, &leaving->sample, pid_tgid, true, 0, bpf_ktime_get_ns());
	leaving->sample.offcpu_reason = reason;
	if (leaving->sample.offcpu_reason == PYSTROBE_OFFCPU_SLEEP &&
	    waiting_for_gil(pid_tgid >> 32))
		leaving->sample.offcpu_reason = PYSTROBE_OFFCPU_GIL;
	if (bpf_map_update_elem(&offcpu_stacks, &tid, leaving, BPF_ANY))
		count_drop(PYSTROBE_DROP_OFFCPU_STORAGE);
	return 0;
}
