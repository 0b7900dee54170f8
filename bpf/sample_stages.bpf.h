/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where a cpu-clock sample's time goes, stage by stage: with
 * -DPYSTROBE_SAMPLE_STAGES=ON (CMake), sample_cpu notes bpf_ktime_get_ns
 * between its stages and sums each stage's nanoseconds per CPU in
 * sample_stage_ns, which tests/bench/run_sample_stages.py reads beside a
 * reference of bare reads measured in the same seconds. Without the option
 * the marks compile to nothing and the map does not exist.
 *
 * Builds that stop the program after a stage say what the stages before it
 * cost alone; these marks say what each costs with the rest running, which
 * is what found the ring buffer's lap (docs/benchmarks.md). A mark costs a
 * clock read and a per-CPU lookup, counted in the stage that ends with it.
 * Only sample_cpu starts a sample's marks: run the bench without off-CPU,
 * memory or allocation records, whose programs share fill_sample. The map
 * is defined in sampler_output.bpf.c, linked before every unit that marks.
 */
#ifndef PYSTROBE_BPF_SAMPLE_STAGES_BPF_H_
#define PYSTROBE_BPF_SAMPLE_STAGES_BPF_H_

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

enum sample_stage {
	SAMPLE_STAGE_IDS,	   /* the entry, the filter, ids and name */
	SAMPLE_STAGE_USER,	   /* the kernel and user stacks (or the user leaf) */
	SAMPLE_STAGE_WALK_SETUP,   /* the walk's state and copy sizes */
	SAMPLE_STAGE_THREAD_STATE, /* the thread state: found or revalidated */
	SAMPLE_STAGE_INTERPRETER,  /* its interpreter and the GIL */
	SAMPLE_STAGE_TOP_FRAME,	   /* the innermost frame */
	SAMPLE_STAGE_FRAMES,	   /* every frame */
	SAMPLE_STAGE_FINISH,	   /* the rest of the sample */
	SAMPLE_STAGE_OUTPUT,	   /* sending the record */
	SAMPLE_STAGE_COUNT,
};

#ifdef PYSTROBE_SAMPLE_STAGES

struct sample_stage_times {
	__u64 samples; /* samples whose marks started */
	__u64 mark_ns; /* the last mark */
	__u64 ns[SAMPLE_STAGE_COUNT];
};

/* Key: 0. Value: struct sample_stage_times, per CPU. */
struct sample_stage_ns_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sample_stage_times);
};
extern struct sample_stage_ns_map sample_stage_ns SEC(".maps");

static __always_inline void sample_stages_start(void)
{
	__u32 zero = 0;
	struct sample_stage_times *times = bpf_map_lookup_elem(&sample_stage_ns, &zero);

	if (times) {
		times->samples++;
		times->mark_ns = bpf_ktime_get_ns();
	}
}

static __always_inline void sample_stage_done(enum sample_stage stage)
{
	__u32 zero = 0;
	struct sample_stage_times *times = bpf_map_lookup_elem(&sample_stage_ns, &zero);
	__u64 now;

	if (!times || stage >= SAMPLE_STAGE_COUNT)
		return;
	now = bpf_ktime_get_ns();
	times->ns[stage] += now - times->mark_ns;
	times->mark_ns = now;
}

#else

static __always_inline void sample_stages_start(void)
{
}

static __always_inline void sample_stage_done(enum sample_stage stage)
{
}

#endif /* PYSTROBE_SAMPLE_STAGES */

#endif /* PYSTROBE_BPF_SAMPLE_STAGES_BPF_H_ */
