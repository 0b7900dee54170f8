// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Per-process and per-thread accounting: where the time goes besides the CPU.
 *
 * The kernel already keeps exact per-task figures for CPU time, faults,
 * context switches and read/write calls and bytes (task->ioac, what
 * /proc/PID/io shows); these programs read them (CO-RE) whenever a task's
 * runtime advances (sched_stat_runtime: every tick and every switch) and at
 * exit, and add the deltas since the last look to the thread's and its
 * process's counters. What the kernel does not keep per task is measured
 * here: off-CPU time by reason, GIL wait, time blocked in read/write
 * syscalls and run-queue wait (sched_switch/wakeup), block IO issued
 * (block_bio_queue) and CPython GC time (USDT gc__start/gc__done).
 *
 * No syscall tracepoint is attached by default: attaching any puts every
 * task's every syscall on the kernel's slow path (about 3x the cost of a
 * 1-byte read). sys_enter/sys_exit only count with `--syscalls`.
 *
 * Attached only by `pystrobe stat` and `pystrobe top` (BpfSampler::
 * AttachAccounting); loaded, unattached, with the sampler otherwise.
 *
 * Here: the definitions of the accounting's maps (accounting.bpf.h says what
 * each holds) and the programs that charge what the kernel counts per task:
 * every runtime tick, exec, exit, block IO and the OOM killer's victim.
 * Off-CPU time is in accounting_offcpu.bpf.c, --syscalls in
 * accounting_syscalls.bpf.c, CPython GC in accounting_gc.bpf.c.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "accounting.bpf.h"
#include "compat.bpf.h"
#include "pystrobe_abi.h"

/* Set by the loader just before it attaches these programs: see
 * accounting.bpf.h. */
volatile __u64 accounting_since_boot_ns = 0;

struct thread_counters_map thread_counters SEC(".maps");
struct process_counters_map process_counters SEC(".maps");
struct accounting_drops_map accounting_drops SEC(".maps");
struct acct_scratch_map acct_scratch SEC(".maps");

/* Every tick of a running task and every switch: keeps CPU time current. */
SEC("raw_tp/sched_stat_runtime")
int acct_runtime(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx->args[0];
	struct acct_refs refs;

	if (acct_lookup(task, true, &refs)) {
		take_task_deltas(task, &refs);
		take_memory(task, &refs, MEMORY_READ_THROTTLED);
	}
	return 0;
}

/* The new image's name replaces the launcher's or the shell's. */
SEC("raw_tp/sched_process_exec")
int acct_exec(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx->args[0];
	struct acct_refs refs;

	if (!acct_lookup(task, true, &refs))
		return 0;
	if (refs.thread)
		bpf_get_current_comm(refs.thread->pub.comm, sizeof(refs.thread->pub.comm));
	if (refs.process)
		bpf_get_current_comm(refs.process->comm, sizeof(refs.process->comm));
	return 0;
}

/* Each exiting thread: its final figures, then its entry goes. */
SEC("raw_tp/sched_process_exit")
int acct_exit(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct acct_refs refs;
	__u32 tid;

	if (!acct_lookup(task, false, &refs))
		return 0;
	take_task_deltas(task, &refs);
	take_memory(task, &refs, MEMORY_READ_ALWAYS);
	tid = BPF_CORE_READ(task, pid);
	bpf_map_delete_elem(&thread_counters, &tid);
	/* The last thread out (not always the leader) ends the process. */
	if (refs.process && BPF_CORE_READ(task, signal, live.counter) == 0) {
		struct pystrobe_process_memory *m = &refs.process->memory;
		/* Each thread's exit raised maxrss to the mm's hiwater mark. */
		__u64 maxrss = (__u64)BPF_CORE_READ(task, signal, maxrss) << COMPAT_PAGE_SHIFT;

		if (maxrss > m->peak_bytes) {
			if (maxrss - m->peak_bytes > m->peak_bytes / 100)
				m->peak_ns = bpf_ktime_get_ns();
			m->peak_bytes = maxrss;
		}
		refs.process->exit_ns = bpf_ktime_get_ns();
	}
	return 0;
}

/* --- OOM kills ---------------------------------------------------------------- */

/*
 * The kernel's OOM killer chose a victim: its process is marked, and its
 * memory read as it was (the victim's mm is still whole here). Args: (struct
 * task_struct *task, uid_t uid) since 6.8; see compat_mark_victim_task().
 */
SEC("raw_tp/mark_victim")
int acct_oom_victim(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = compat_mark_victim_task(ctx);
	struct acct_refs refs;

	if (!task || !acct_lookup(task, true, &refs))
		return 0;
	take_memory(task, &refs, MEMORY_READ_ALWAYS);
	if (refs.process)
		refs.process->oom_killed = 1;
	return 0;
}

/* --- block IO: charged to the thread that queues the bio -------------------- */

SEC("raw_tp/block_bio_queue")
int acct_bio_queue(struct bpf_raw_tracepoint_args *ctx)
{
	struct bio *bio = (struct bio *)ctx->args[0];
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct acct_refs refs;

	if (!acct_lookup(task, true, &refs))
		return 0;
	ACCT_ADD(&refs, block_io_bytes, BPF_CORE_READ(bio, bi_iter.bi_size));
	ACCT_ADD(&refs, block_io_ops, 1);
	return 0;
}
