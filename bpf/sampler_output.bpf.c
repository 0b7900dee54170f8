// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The one definition of the sampler's ring buffer and its counters of
 * samples and drops (sampler_output.bpf.h says what each holds). Userspace
 * drains `events` and sums the per-CPU counters.
 */
#include "sampler_output.bpf.h"
#include "sample_stages.bpf.h"

const volatile __u32 events_ring_bytes = 8 << 20;

struct events_map events SEC(".maps");
struct drop_counters_map drop_counters SEC(".maps");
struct sample_counters_map sample_counters SEC(".maps");
#ifdef PYSTROBE_SAMPLE_STAGES
struct sample_stage_ns_map sample_stage_ns SEC(".maps");
#endif
