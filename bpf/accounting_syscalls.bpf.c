// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The accounting's --syscalls: calls, time and bytes of every read/write
 * family syscall, entry to exit. Attached only with --syscalls: attaching
 * any syscall tracepoint puts every task's every syscall on the kernel's
 * slow path (about 3x the cost of a 1-byte read).
 */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "accounting.bpf.h"
#include "compat.bpf.h"
#include "syscall_family.bpf.h"

SEC("raw_tp/sys_enter")
int acct_sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task;
	struct acct_refs refs;
	__u32 family, counts_bytes;

	family = syscall_family((long)ctx->args[1], &counts_bytes);
	if (family == SYSCALL_OTHER)
		return 0;
	task = (struct task_struct *)bpf_get_current_task();
	if (!acct_lookup(task, true, &refs) || !refs.thread)
		return 0;
	refs.thread->state.syscall_family = family;
	refs.thread->state.syscall_counts_bytes = counts_bytes;
	refs.thread->state.syscall_start_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("raw_tp/sys_exit")
int acct_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	struct pt_regs *regs = (struct pt_regs *)ctx->args[0];
	long ret = (long)ctx->args[1];
	struct acct_thread_state *s;
	struct task_struct *task;
	struct acct_refs refs;
	__u32 family, counts_bytes;
	__u64 elapsed;

	family = syscall_family(compat_syscall_nr(regs), &counts_bytes);
	if (family == SYSCALL_OTHER)
		return 0;
	task = (struct task_struct *)bpf_get_current_task();
	if (!acct_lookup(task, false, &refs) || !refs.thread)
		return 0;
	s = &refs.thread->state;
	if (s->syscall_family != family || !s->syscall_start_ns)
		return 0;
	elapsed = bpf_ktime_get_ns() - s->syscall_start_ns;
	s->syscall_family = SYSCALL_OTHER;
	s->syscall_start_ns = 0;
	if (family == SYSCALL_READ) {
		ACCT_ADD(&refs, sys_read_calls, 1);
		ACCT_ADD(&refs, sys_read_ns, elapsed);
		if (ret > 0 && counts_bytes)
			ACCT_ADD(&refs, sys_read_bytes, ret);
	} else {
		ACCT_ADD(&refs, sys_write_calls, 1);
		ACCT_ADD(&refs, sys_write_ns, elapsed);
		if (ret > 0 && counts_bytes)
			ACCT_ADD(&refs, sys_write_bytes, ret);
	}
	return 0;
}
