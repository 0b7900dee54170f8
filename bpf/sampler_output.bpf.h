/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the sampler sends and counts: its ring buffer to userspace and its
 * per-CPU counters of samples and drops, shared by every unit that takes a
 * sample or reports a process event. Declared here, defined once in
 * sampler_output.bpf.c.
 */
#ifndef PYSTROBE_BPF_SAMPLER_OUTPUT_BPF_H_
#define PYSTROBE_BPF_SAMPLER_OUTPUT_BPF_H_

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "pystrobe_abi.h"

/*
 * Sample and process-event records for userspace, sized by the loader to
 * the host (EventsRingBytes in daemon/loader/bpf_sampler.cc): a record is
 * written to lines of the ring it last wrote a whole lap ago, and on some
 * hosts those cost more the bigger the lap (a 100-deep sample took 1.5
 * times as long in an 8 MiB ring as in a 1 MiB one on a 2-CPU VM).
 */
struct events_map {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
};
extern struct events_map events SEC(".maps");

/* Set by the loader: the ring's size in bytes, what its thresholds are
 * fractions of. */
extern const volatile __u32 events_ring_bytes;

/* Why records or stacks were lost. Key: enum pystrobe_drop_reason. Per CPU. */
struct drop_counters_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PYSTROBE_DROP_REASON_COUNT);
	__type(key, __u32);
	__type(value, __u64);
};
extern struct drop_counters_map drop_counters SEC(".maps");

/* What happened to samples. Key: enum pystrobe_sample_counter. Per CPU. */
struct sample_counters_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PYSTROBE_SAMPLE_COUNTER_COUNT);
	__type(key, __u32);
	__type(value, __u64);
};
extern struct sample_counters_map sample_counters SEC(".maps");

static __always_inline void count_drop(__u32 reason)
{
	__u64 *value = bpf_map_lookup_elem(&drop_counters, &reason);

	if (value)
		*value += 1;
}

static __always_inline void count_sample(__u32 counter)
{
	__u64 *value = bpf_map_lookup_elem(&sample_counters, &counter);

	if (value)
		*value += 1;
}

static __always_inline void count_sample_by(__u32 counter, __u64 amount)
{
	__u64 *value = bpf_map_lookup_elem(&sample_counters, &counter);

	if (value)
		*value += amount;
}

#endif /* PYSTROBE_BPF_SAMPLER_OUTPUT_BPF_H_ */
