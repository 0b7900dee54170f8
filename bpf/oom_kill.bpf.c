// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * OOM kills: what each thread of the OOM killer's victim was doing, taken
 * as the thread takes its SIGKILL, while its stack can still be read. The
 * victim's memory figures are the accounting's (acct_oom_victim in
 * accounting.bpf.c).
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "pystrobe_abi.h"
#include "sample.bpf.h"
#include "targets.bpf.h"

#define SIGKILL_SIGNAL 9

/* Set by the loader (the daemon, for its OOM reports). Off, the verifier
 * prunes the program to its first test. */
const volatile __u8 oom_kill_stacks_enabled = 0;

/*
 * Each signal a thread takes. The OOM killer marks its victim's signal_struct
 * (oom_mm) and sends it SIGKILL; every thread of it then comes here, in its
 * own context with its user registers saved, on its way to exit: the one
 * moment its whole stack, Python frames too, can still be read. The victim's
 * memory is reaped only seconds later (the OOM reaper waits), and its threads
 * die within milliseconds. Args: (int sig, struct kernel_siginfo *info,
 * struct k_sigaction *ka).
 */
SEC("raw_tp/signal_deliver")
int sample_oom_killed(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task;
	__u64 pid_tgid;

	if (!oom_kill_stacks_enabled || (int)ctx->args[0] != SIGKILL_SIGNAL)
		return 0;
	task = bpf_get_current_task_btf();
	if (!BPF_CORE_READ(task, signal, oom_mm))
		return 0;
	pid_tgid = current_pid_tgid();
	if (!is_target(pid_tgid >> 32))
		return 0;
	send_event_sample(ctx, pid_tgid, false, PYSTROBE_EVENT_OOM_KILLED, 1, 0);
	return 0;
}
