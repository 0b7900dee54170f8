// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The CPU sampler: runs on every cpu-clock perf event, filters by target in
 * the kernel before any stack work, and sends one record per sample with the
 * kernel and user stacks (and the Python stack of a CPython process) to
 * userspace through the ring buffer, weighed by the time since the CPU's
 * previous tick. How a sample is taken is in sample.bpf.h.
 */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "current_task.bpf.h"
#include "pystrobe_abi.h"
#include "sample.bpf.h"
#include "sample_stages.bpf.h"
#include "sampler_output.bpf.h"
#include "targets.bpf.h"

/*
 * When the cpu-clock last ticked on each CPU (bpf_ktime_get_ns). Userspace
 * redraws each CPU's period at random moments (daemon/loader/sampling_clock.h),
 * so intervals differ and a sample weighs the one that preceded it. Updated
 * on every tick, filtered or not, so no interval is charged twice; set to
 * the moment sampling starts by the loader, so the first tick has one too.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} last_tick_ns SEC(".maps");

/* The time since the previous tick on this CPU, and notes this one. */
static __always_inline __u64 take_tick_interval(__u64 now)
{
	__u32 zero = 0;
	__u64 *last = bpf_map_lookup_elem(&last_tick_ns, &zero), interval;

	if (!last)
		return 0;
	interval = *last && now > *last ? now - *last : 0;
	*last = now;
	return interval;
}

SEC("perf_event")
int sample_cpu(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	struct pystrobe_sample *sample;
	__u64 size, flags, interval, now = bpf_ktime_get_ns();
	bool kernel_mode;

	count_sample(PYSTROBE_COUNT_TAKEN);
	interval = take_tick_interval(now);
	if (tgid == 0) {
		count_sample(PYSTROBE_COUNT_IDLE);
		return 0;
	}
	if (!is_target(tgid)) {
		count_sample(PYSTROBE_COUNT_FILTERED);
		return 0;
	}
	sample_stages_start();
	sample = current_sample();
	if (!sample)
		return 0;
	sample->kind = PYSTROBE_EVENT_SAMPLE;
	/* Kernel text lives in the upper half of the address space on x86_64;
	 * the 8-byte ip is also a context access the verifier accepts, unlike
	 * the 2-byte cs. */
	kernel_mode = (__s64)ctx->regs.ip < 0;
	size = fill_sample(ctx, sample, pid_tgid, kernel_mode, kernel_mode ? 0 : ctx->regs.ip, now);
	sample->weight_ns = interval;
	/* A process the daemon has found to run CPython is known to it: only
	 * others may be fresh. */
	flags = sample->python_status == PYSTROBE_PY_NOT_PYTHON ? first_sample_flags(tgid)
								: sample_output_flags();
	if (bpf_ringbuf_output(&events, sample, size, flags)) {
		count_drop(PYSTROBE_DROP_RINGBUF_FULL);
		return 0;
	}
	count_sample(PYSTROBE_COUNT_SENT);
	sample_stage_done(SAMPLE_STAGE_OUTPUT);
	return 0;
}
