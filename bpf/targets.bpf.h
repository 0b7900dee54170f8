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

static __always_inline bool is_target(__u32 tgid)
{
	__u8 one = 1;

	if (!filter_pids)
		return true;
	if (bpf_map_lookup_elem(&target_pids, &tgid) != NULL)
		return true;
	/* The cgroup is known only for the current task. A process found in a
	 * targeted cgroup becomes a target pid, so the programs that look at
	 * other tasks (the next task of a switch) see it too. */
	if (!filter_cgroups || tgid != (bpf_get_current_pid_tgid() >> 32) ||
	    !current_cgroup_is_target())
		return false;
	bpf_map_update_elem(&target_pids, &tgid, &one, BPF_ANY);
	return true;
}

#endif /* PYSTROBE_BPF_TARGETS_BPF_H_ */
