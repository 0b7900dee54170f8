/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One sample of the current thread, for every program that takes one
 * (cpu-clock, off-CPU, resident growth, OOM kills, allocations): the per-CPU
 * scratch it is built in, fill_sample (ids, name, kernel and user stacks,
 * the native walk with tables, the CPython walk and its code copies),
 * send_event_sample for programs that run in process context, and the ring
 * buffer's wakeup policy. Inlined into each of those programs; the maps and
 * the knob are declared here and defined once, in sample.bpf.c.
 */
#ifndef PYSTROBE_BPF_SAMPLE_BPF_H_
#define PYSTROBE_BPF_SAMPLE_BPF_H_

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "compat.bpf.h"
#include "current_task.bpf.h"
#include "native_stack.bpf.h"
#include "pystrobe_abi.h"
#include "python_process.bpf.h"
#include "python_stack.bpf.h"
#include "python_walk.bpf.h"
#include "sample_stages.bpf.h"
#include "sampler_output.bpf.h"

/* Set by the loader (--native): full native stacks for CPython processes
 * too, not only the leaf. */
extern const volatile __u8 python_native_stacks;

/* A sample and the bytes of it to send: the unit the scratch space and the
 * off-CPU map hold. */
struct sample_slot {
	__u64 size;
	struct pystrobe_sample sample;
};

/*
 * Scratch space to build one sample before it is copied out with its real
 * length: one per CPU. The cpu-clock program never runs inside the
 * sched_switch one (interrupts are off there), so both share it.
 */
struct sample_scratch_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sample_slot);
};
extern struct sample_scratch_map sample_scratch SEC(".maps");

static __always_inline struct sample_slot *current_slot(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&sample_scratch, &zero);
}

static __always_inline struct pystrobe_sample *current_sample(void)
{
	struct sample_slot *slot = current_slot();

	return slot ? &slot->sample : NULL;
}

/*
 * Samples are sent without waking the reader: a wakeup per record costs
 * microseconds in a VM (an irq_work IPI), more than the rest of a sample.
 * The reader polls on a short timer instead, and is woken early only when
 * the ring buffer starts to fill.
 */
#define EVENTS_WAKEUP_BYTES (events_ring_bytes / 8)

/*
 * Records sent per CPU since the ring buffer's fill was last looked at. The
 * look reads the reader's position, a cache line another CPU wrote, and cost
 * a twentieth of a sample; every 16th record is often enough: 16 of the
 * largest (8 KiB each) take an eighth of the smallest ring the loader makes,
 * and seven eighths are left above EVENTS_WAKEUP_BYTES.
 */
struct records_since_fill_check_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
};
extern struct records_since_fill_check_map records_since_fill_check SEC(".maps");

#define EVENTS_FILL_CHECK_EVERY 16

static __always_inline __u64 sample_output_flags(void)
{
	__u32 zero = 0, *records = bpf_map_lookup_elem(&records_since_fill_check, &zero);

	if (records && ++*records < EVENTS_FILL_CHECK_EVERY)
		return BPF_RB_NO_WAKEUP;
	if (records)
		*records = 0;
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > EVENTS_WAKEUP_BYTES
		   ? BPF_RB_FORCE_WAKEUP
		   : BPF_RB_NO_WAKEUP;
}

/*
 * Processes exec'd since the recording began whose first sample has not
 * been sent yet. Key: tgid. Value: unused. That first sample wakes the
 * reader at once: userspace snapshots the new process's symbols and finds
 * its interpreter while it still runs, which a short-lived process may not
 * do for the 25 ms of the reader's timer. LRU: a process may never be
 * sampled at all.
 */
struct fresh_processes_map {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u8);
};
extern struct fresh_processes_map fresh_processes SEC(".maps");

/* Output flags for the sample of `tgid`: see fresh_processes. */
static __always_inline __u64 first_sample_flags(__u32 tgid)
{
	if (bpf_map_lookup_elem(&fresh_processes, &tgid)) {
		bpf_map_delete_elem(&fresh_processes, &tgid);
		return BPF_RB_FORCE_WAKEUP;
	}
	return sample_output_flags();
}

/*
 * Fills `sample` with what the current thread is doing: ids, name, the
 * kernel stack (when `kernel_mode`), the user stack and, for a CPython
 * process, the Python stack. `now` is bpf_ktime_get_ns(), which a caller
 * may have read already: a helper call costs as much as a read on some hosts.
 * `user_ip`: the thread's user ip where the caller has it (a tick that
 * interrupted user mode), else 0 and it is read from the task's saved
 * registers (three helper calls: about a tenth of the 100-read reference of
 * docs/benchmarks.md). Returns the bytes of `sample` to send.
 */
static __always_inline __u64 fill_sample(void *ctx, struct pystrobe_sample *sample, __u64 pid_tgid,
					 bool kernel_mode, __u64 user_ip, __u64 now)
{
	__u32 tgid = pid_tgid >> 32;
	/* Non-null for a CPython process: the walk, ready for it. */
	const struct python_walk *python = python_walk_of_process(tgid);
	long kernel_bytes, user_bytes;
	__u32 native_frames;
	__u64 size;

	sample->pid = tgid;
	sample->tid = (__u32)pid_tgid;
	sample->cpu = bpf_get_smp_processor_id();
	sample->time_ns = now;
	sample->cgroup_id = current_cgroup_id();
	sample->offcpu_reason = 0;
	sample->weight_ns = 0;
	sample->address = 0;
	sample->interpreter_id = 0;
	copy_current_comm(sample->comm);
	sample->flags = kernel_mode ? PYSTROBE_SAMPLE_KERNEL_MODE : 0;
	sample_stage_done(SAMPLE_STAGE_IDS);

	/* The kernel stack is empty for a sample taken in user mode. */
	kernel_bytes = 0;
	if (kernel_mode) {
		kernel_bytes =
		    bpf_get_stack(ctx, sample->data, PYSTROBE_MAX_NATIVE_FRAMES * sizeof(__u64), 0);
		if (kernel_bytes < 0) {
			count_drop(PYSTROBE_DROP_KERNEL_STACK);
			sample->flags |= PYSTROBE_SAMPLE_KSTACK_FAILED;
			kernel_bytes = 0;
		}
	}
	/* Bound for the verifier: the user stack starts where the kernel's ends. */
	kernel_bytes &= 0x7ff;
	if (kernel_bytes > PYSTROBE_MAX_NATIVE_FRAMES * sizeof(__u64))
		kernel_bytes = PYSTROBE_MAX_NATIVE_FRAMES * sizeof(__u64);
	sample->kernel_frames = kernel_bytes / sizeof(__u64);

	if (!python_native_stacks && python) {
		/* A CPython process's Python stack replaces its interpreter's
		 * frames; without --native only the native leaf is shown (as
		 * [native] when outside the interpreter), so only it is read. */
		sample->data[(kernel_bytes / sizeof(__u64)) & (PYSTROBE_SAMPLE_DATA_WORDS - 1)] =
		    user_ip ? user_ip : compat_user_ip(compat_current_user_regs());
		user_bytes = sizeof(__u64);
	} else {
		long frames =
		    unwind_native_stack(sample, kernel_bytes / sizeof(__u64), python != NULL);

		if (frames >= 0)
			user_bytes = frames * sizeof(__u64);
		else
			user_bytes = bpf_get_stack(ctx, (void *)sample->data + kernel_bytes,
						   PYSTROBE_MAX_NATIVE_FRAMES * sizeof(__u64),
						   BPF_F_USER_STACK);
	}
	if (user_bytes < 0) {
		count_drop(PYSTROBE_DROP_USER_STACK);
		sample->flags |= PYSTROBE_SAMPLE_USTACK_FAILED;
		user_bytes = 0;
	}
	user_bytes &= 0xfff;
	if (user_bytes > PYSTROBE_MAX_USER_FRAMES * sizeof(__u64))
		user_bytes = PYSTROBE_MAX_USER_FRAMES * sizeof(__u64);
	sample->user_frames = user_bytes / sizeof(__u64);
	sample_stage_done(SAMPLE_STAGE_USER);

	native_frames = sample->kernel_frames + sample->user_frames;
	sample->python_frames = 0;
	sample->python_status = PYSTROBE_PY_NOT_PYTHON;
	if (python)
		walk_python_stack(sample, native_frames);
	switch (sample->python_status) {
	case PYSTROBE_PY_WALKED:
		count_sample(PYSTROBE_COUNT_PYTHON_WALKED);
		break;
	case PYSTROBE_PY_READ_FAILED:
		count_drop(PYSTROBE_DROP_PYTHON_READ);
		break;
	case PYSTROBE_PY_NO_THREAD_STATE:
		count_drop(PYSTROBE_DROP_PYTHON_NO_THREAD_STATE);
		break;
	}
	if (sample->flags & PYSTROBE_SAMPLE_PY_TRUNCATED)
		count_sample(PYSTROBE_COUNT_PYTHON_TRUNCATED);

	size = __builtin_offsetof(struct pystrobe_sample, data) +
	       sizeof(__u64) * (native_frames + 2 * (__u32)sample->python_frames);
	if (size > sizeof(*sample))
		size = sizeof(*sample);
	sample_stage_done(SAMPLE_STAGE_FINISH);
	return size;
}

/* The counter of records of `kind` sent by send_event_sample. */
static __always_inline __u32 event_sent_counter(__u32 kind)
{
	switch (kind) {
	case PYSTROBE_EVENT_ALLOC:
		return PYSTROBE_COUNT_ALLOC_SENT;
	case PYSTROBE_EVENT_OOM_KILLED:
		return PYSTROBE_COUNT_OOM_KILLED_SENT;
	default:
		return PYSTROBE_COUNT_MEMORY_SENT;
	}
}

/*
 * Takes the current thread's stack as a record of `kind` (MEMORY, ALLOC,
 * OOM_KILLED) weighing `weight` bytes, from a program that runs in process context: a
 * cpu-clock tick may interrupt it and take the same per-CPU scratch. The
 * tick's program counts PYSTROBE_COUNT_TAKEN on entry, so a change of that
 * count means this sample was overwritten: it is taken again, once.
 */
static __always_inline void send_event_sample(void *ctx, __u64 pid_tgid, bool kernel_mode,
					      __u32 kind, __u64 weight, __u64 address)
{
	__u32 taken_key = PYSTROBE_COUNT_TAKEN, tgid = pid_tgid >> 32;
	struct pystrobe_sample *sample = current_sample();
	__u64 size, taken, *taken_now, flags;

	if (!sample)
		return;
	taken_now = bpf_map_lookup_elem(&sample_counters, &taken_key);
	if (!taken_now)
		return;
	for (int attempt = 0; attempt < 2; attempt++) {
		taken = *taken_now;
		size = fill_sample(ctx, sample, pid_tgid, kernel_mode, 0, bpf_ktime_get_ns());
		sample->kind = kind;
		sample->weight_ns = weight;
		sample->address = address;
		if (*taken_now == taken) {
			/* A process not known as CPython may be fresh: wake the
			 * reader for it, as sample_cpu does. */
			flags = sample->python_status == PYSTROBE_PY_NOT_PYTHON
				    ? first_sample_flags(tgid)
				    : sample_output_flags();
			if (bpf_ringbuf_output(&events, sample, size, flags))
				count_drop(PYSTROBE_DROP_RINGBUF_FULL);
			else
				count_sample(event_sent_counter(kind));
			return;
		}
		count_sample(attempt == 0 ? PYSTROBE_COUNT_MEMORY_RETAKEN
					  : PYSTROBE_COUNT_MEMORY_LOST);
	}
}

#endif /* PYSTROBE_BPF_SAMPLE_BPF_H_ */
