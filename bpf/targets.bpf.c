// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The one definition of the target filter's maps and knobs, which every
 * program family reads through targets.bpf.h (what each holds is said
 * there). Written by the loader: the knobs before load, the maps as targets
 * come and go.
 */
#include "targets.bpf.h"

const volatile __u8 filter_pids = 0;
const volatile __u8 filter_cgroups = 0;

struct target_pids_map target_pids SEC(".maps");
struct target_cgroups_map target_cgroups SEC(".maps");
struct target_verdict_map target_verdict SEC(".maps");
__u64 targets_generation = 0;
