// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What the linked object as a whole declares: its license (one unit carries
 * it for all), and the knobs of compat.bpf.h that the loader sets from the
 * kernel's BTF before load. Their defaults suit the kernel pystrobe is
 * developed on (6.x); see each shim in compat.bpf.h for what it selects.
 */
#include "compat.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* sched_switch passes prev_state as its fourth argument (5.18+). */
const volatile __u8 sched_switch_has_prev_state = 1;
/* oom:mark_victim passes the victim's task (6.8+). */
const volatile __u8 mark_victim_has_task = 1;
