/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which processes pystrobe looks at, shared by every program family: the
 * sampler and the accounting programs filter on it before doing any work.
 * The map and the knob are weak, so each .bpf.c that includes this header
 * links into one object with one copy of them.
 */
#ifndef PYSTROBE_BPF_TARGETS_BPF_H_
#define PYSTROBE_BPF_TARGETS_BPF_H_

/* Set by the loader before load: non-zero keeps only processes in target_pids. */
const volatile __u8 filter_pids __weak = 0;

/*
 * Processes to look at when filter_pids is set.
 * Key: tgid (host pid). Value: unused (1). Sized for --pid lists and the
 * children that --subprocesses follows.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} target_pids SEC(".maps") __weak;

static __always_inline bool is_target(__u32 tgid)
{
	if (!filter_pids)
		return true;
	return bpf_map_lookup_elem(&target_pids, &tgid) != NULL;
}

#endif /* PYSTROBE_BPF_TARGETS_BPF_H_ */
