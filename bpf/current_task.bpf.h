/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Who the current task is (its ids, its name, its cgroup), read straight
 * out of its task_struct through the pointer bpf_get_current_task_btf gives,
 * for the programs that take samples (at every tick, switch, allocation).
 *
 * The helpers that return the same (bpf_get_current_pid_tgid, _comm,
 * _cgroup_id) are each a kernel function of their own. At a slow rate every
 * one of them is fetched again at every tick: on a host measured at 99 Hz
 * the first call of each in a tick cost about 1 us, against 0.1 to 0.3 us at
 * 999 Hz (docs/benchmarks.md). A load through the task's BTF pointer is one
 * instruction of the program itself (a faulting one is caught and reads 0).
 */
#ifndef PYSTROBE_BPF_CURRENT_TASK_BPF_H_
#define PYSTROBE_BPF_CURRENT_TASK_BPF_H_

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

/* As bpf_get_current_pid_tgid(): the tgid above, the thread's id below. */
static __always_inline __u64 current_pid_tgid(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	return (__u64)(__u32)task->tgid << 32 | (__u32)task->pid;
}

/* As bpf_get_current_cgroup_id(): the id of the task's cgroup v2 group. */
static __always_inline __u64 current_cgroup_id(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	return task->cgroups->dfl_cgrp->kn->id;
}

/* As bpf_get_current_comm() into 16 bytes: the name ends at its first NUL
 * (within the 16, where the kernel keeps one), and the reader stops there. */
static __always_inline void copy_current_comm(char comm[16])
{
	struct task_struct *task = bpf_get_current_task_btf();
	const __u64 *name = (const __u64 *)task->comm;

	((__u64 *)comm)[0] = name[0];
	((__u64 *)comm)[1] = name[1];
}

#endif /* PYSTROBE_BPF_CURRENT_TASK_BPF_H_ */
