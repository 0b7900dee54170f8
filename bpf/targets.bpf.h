/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which processes pystrobe looks at, shared by every program family: the
 * sampler and the accounting programs filter on it before doing any work.
 * The maps and the knobs are declared here and defined once, in targets.bpf.c.
 */
#ifndef PYSTROBE_BPF_TARGETS_BPF_H_
#define PYSTROBE_BPF_TARGETS_BPF_H_

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

/* Set by the loader before load: non-zero keeps only processes in target_pids
 * (or, with filter_cgroups, in target_cgroups). */
extern const volatile __u8 filter_pids;
/* Set by the loader before load: non-zero also keeps processes whose cgroup v2
 * group is in target_cgroups or below one that is. Only with filter_pids. */
extern const volatile __u8 filter_cgroups;

/* Ancestors of a task's cgroup looked at, from the root: deeper groups are
 * only found through their own or a shallower ancestor's id. */
#define TARGET_CGROUP_MAX_LEVELS 16

/*
 * Processes to look at when filter_pids is set.
 * Key: tgid (host pid). Value: unused (1). Sized for --pid lists and the
 * children that --subprocesses follows, and the processes of targeted
 * cgroups, which are added here when first seen.
 */
struct target_pids_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u8);
};
extern struct target_pids_map target_pids SEC(".maps");

/*
 * cgroup v2 groups to look at when filter_cgroups is set; a group includes
 * its descendants. Key: cgroup id (kernfs id, as bpf_get_current_cgroup_id()).
 * Value: unused (1). Sized for the configured cgroups and containers.
 */
struct target_cgroups_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u8);
};
extern struct target_cgroups_map target_cgroups SEC(".maps");

/* True when the current task's cgroup, or one of its ancestors, is targeted. */
static __always_inline bool current_cgroup_is_target(void)
{
	for (int level = 0; level < TARGET_CGROUP_MAX_LEVELS; level++) {
		__u64 id = bpf_get_current_ancestor_cgroup_id(level);

		if (id == 0)
			return false;
		if (bpf_map_lookup_elem(&target_cgroups, &id))
			return true;
	}
	return false;
}

/*
 * Bumped after every change to target_pids or target_cgroups, by the loader
 * and by the programs here (a process found in a targeted cgroup, a child
 * followed, an exit): each CPU's verdict on the process it looked at last
 * holds while this has not moved (is_target).
 */
extern __u64 targets_generation;

static __always_inline void targets_changed(void)
{
	__sync_fetch_and_add(&targets_generation, 1);
}

/*
 * Each CPU's verdict on the process it looked at last, in one word so that a
 * program interrupted while it writes it (an allocation probe, by the
 * cpu-clock tick on its CPU) never leaves one process's verdict under
 * another's tgid: the tgid above, the low 31 bits of targets_generation
 * then, and the verdict in the lowest bit. A CPU mostly looks at the process
 * it looked at last, and a hash lookup is a kernel function of its own that a
 * slow rate fetches again at every tick (1.2 us against 0.3 at 999 Hz on a
 * host measured, docs/benchmarks.md).
 */
struct target_verdict_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
};
extern struct target_verdict_map target_verdict SEC(".maps");

static __always_inline __u64 target_verdict_word(__u32 tgid, __u64 generation, bool target)
{
	return (__u64)tgid << 32 | (generation & 0x7fffffff) << 1 | target;
}

/* Whether `tgid` is targeted, from the maps, for is_target. */
static __always_inline bool look_up_target(__u32 tgid)
{
	__u8 one = 1;

	if (bpf_map_lookup_elem(&target_pids, &tgid) != NULL)
		return true;
	/* The cgroup is known only for the current task. A process found in a
	 * targeted cgroup becomes a target pid, so the programs that look at
	 * other tasks (the next task of a switch) see it too. */
	if (!filter_cgroups || tgid != (bpf_get_current_pid_tgid() >> 32) ||
	    !current_cgroup_is_target())
		return false;
	bpf_map_update_elem(&target_pids, &tgid, &one, BPF_ANY);
	targets_changed();
	return true;
}

static __always_inline bool is_target(__u32 tgid)
{
	__u64 generation, *verdict;
	__u32 zero = 0;
	bool target;

	if (!filter_pids)
		return true;
	/* Read before the lookup: a change meanwhile is seen at the next one. */
	generation = *(volatile __u64 *)&targets_generation;
	verdict = bpf_map_lookup_elem(&target_verdict, &zero);
	if (verdict && (*verdict & ~1ull) == target_verdict_word(tgid, generation, false))
		return *verdict & 1;
	target = look_up_target(tgid);
	/* A process moved into a targeted cgroup changes no map: without a
	 * verdict kept, its next sample looks at its cgroup again. */
	if (verdict && (target || !filter_cgroups))
		*verdict = target_verdict_word(tgid, generation, target);
	return target;
}

#endif /* PYSTROBE_BPF_TARGETS_BPF_H_ */
