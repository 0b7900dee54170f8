/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Kernel and architecture differences, one shim each, in the style of
 * libbpf-tools' core_fixes.bpf.h: every other file calls these instead of
 * reading what differs. pystrobe needs Linux 5.15 or later (bpf_task_pt_regs,
 * task storage, ring buffers, BTF); each shim says which kernel changed what.
 * The knobs that the loader sets from the kernel's BTF live in compat.bpf.c.
 */
#ifndef PYSTROBE_BPF_COMPAT_BPF_H_
#define PYSTROBE_BPF_COMPAT_BPF_H_

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#ifndef __TARGET_ARCH_x86
#error "pystrobe reads x86-64 registers: add this architecture's shims to compat.bpf.h"
#endif

/*
 * sched_switch's prev_state. Since Linux 5.18 (commit fa2c3254d7cf,
 * "sched/tracing: Don't re-read p->state when emitting sched_switch event")
 * the raw tracepoint's arguments are (bool preempt, prev, next,
 * unsigned int prev_state): the state __schedule() acted on. Before, they are
 * (preempt, prev, next) only, and prev->__state is the best there is (a
 * wakeup on another CPU may already have set it back to TASK_RUNNING).
 * The loader sets this from the kernel's BTF (the arity of
 * btf_trace_sched_switch) before load; when zero the verifier prunes the read
 * of args[3], which a 5.15 kernel refuses to attach.
 */
extern const volatile __u8 sched_switch_has_prev_state;

static __always_inline unsigned int
compat_sched_switch_prev_state(struct bpf_raw_tracepoint_args *ctx)
{
	/* prev is the current task. */
	struct task_struct *prev = bpf_get_current_task_btf();

	if (sched_switch_has_prev_state)
		return (unsigned int)ctx->args[3];
	/* task_struct::state became __state in 5.14 (commit 2f064a59a11f),
	 * before the oldest kernel pystrobe runs on. */
	return prev->__state;
}

/* The current thread's saved user registers (bpf_task_pt_regs: 5.15). */
static __always_inline struct pt_regs *compat_current_user_regs(void)
{
	return (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
}

/* x86-64: the syscall number, kept in orig_ax by the entry code (an
 * exception's error code there otherwise). */
static __always_inline long compat_syscall_nr(struct pt_regs *regs)
{
	return BPF_CORE_READ(regs, orig_ax);
}

/* x86-64: a syscall's first argument, in rdi. */
static __always_inline __u64 compat_syscall_arg1(struct pt_regs *regs)
{
	return BPF_CORE_READ(regs, di);
}

/*
 * The registers a walk starts from, out of the saved user registers that
 * compat_current_user_regs returns: a pointer the verifier knows the type
 * of, so each is a load of the program's own. (BPF_CORE_READ would call
 * bpf_probe_read_kernel, a kernel function that a slow rate fetches again
 * at every tick: 1.5 to 2 us a sample at 99 Hz on a host measured,
 * tests/bench/cold_costs.)
 */
static __always_inline __u64 compat_user_ip(struct pt_regs *regs)
{
	return regs->ip;
}

static __always_inline __u64 compat_user_sp(struct pt_regs *regs)
{
	return regs->sp;
}

/* The frame register a native walk starts from (rbp on x86-64). */
static __always_inline __u64 compat_user_fp(struct pt_regs *regs)
{
	return regs->bp;
}

/* x86-64: the syscall instruction leaves the return address in rcx, which the
 * entry code saves beside ip, so a syscall has cx == ip and an exception
 * almost never does. */
static __always_inline bool compat_regs_from_syscall(struct pt_regs *regs)
{
	return BPF_CORE_READ(regs, cx) == BPF_CORE_READ(regs, ip);
}

/* x86-64's futex syscall number (arch/x86/entry/syscalls/syscall_64.tbl). */
#define COMPAT_NR_FUTEX 202

/*
 * A process's RSS counters (enum MM_FILEPAGES, MM_ANONPAGES, MM_SWAPENTS,
 * MM_SHMEMPAGES), in pages. Since Linux 6.2 (commit f1a7941243c1, "mm:
 * convert mm's rss stats into percpu_counter") each is a percpu_counter whose
 * `count` lags the truth by each CPU's not yet folded delta (less than the
 * batch: 32 pages, or 2 per CPU on larger machines). `count` is what the
 * kernel's own readers took (get_mm_counter: /proc/PID/status until 6.16,
 * the OOM killer's badness): the per-CPU rest would need the per-CPU offsets,
 * which a kernel without CONFIG_KALLSYMS_ALL does not let BPF resolve. Before
 * 6.2 they are atomic_long_t in struct mm_rss_stat, read as they are.
 */
struct mm_rss_stat___pre62 {
	atomic_long_t count[4];
};
struct mm_struct___pre62 {
	struct mm_rss_stat___pre62 rss_stat;
};

/* Counter `i` (a constant: CO-RE relocates the index's field), in pages. */
#define COMPAT_MM_RSS_COUNT(mm, i)                                                                 \
	(bpf_core_type_exists(struct mm_rss_stat___pre62)                                          \
	     ? BPF_CORE_READ((struct mm_struct___pre62 *)(mm), rss_stat.count[i].counter)          \
	     : BPF_CORE_READ((mm), rss_stat[i].count))

/* One of the counters, in pages; 0 for a member that does not exist. */
static __always_inline long compat_mm_rss_page_count(struct mm_struct *mm, __u32 member)
{
	switch (member) {
	case 0:
		return COMPAT_MM_RSS_COUNT(mm, 0);
	case 1:
		return COMPAT_MM_RSS_COUNT(mm, 1);
	case 2:
		return COMPAT_MM_RSS_COUNT(mm, 2);
	case 3:
		return COMPAT_MM_RSS_COUNT(mm, 3);
	}
	return 0;
}

/* The four counters, in pages, each at least zero as the kernel reports them. */
static __always_inline void compat_mm_rss_pages(struct mm_struct *mm, long pages[4])
{
	/* Unrolled: each read is a constant member, as CO-RE wants. */
#pragma unroll
	for (int i = 0; i < 4; i++) {
		pages[i] = compat_mm_rss_page_count(mm, i);
		if (pages[i] < 0)
			pages[i] = 0;
	}
}

/*
 * oom:mark_victim's victim. Recent kernels (6.18 here) pass (struct
 * task_struct *task, uid_t uid) to the raw tracepoint; older ones (int pid)
 * only, and a task cannot be found by pid from BPF: there no victim is
 * marked. The loader sets this from btf_trace_mark_victim's first parameter.
 */
extern const volatile __u8 mark_victim_has_task;

static __always_inline struct task_struct *
compat_mark_victim_task(struct bpf_raw_tracepoint_args *ctx)
{
	if (!mark_victim_has_task)
		return NULL;
	return (struct task_struct *)ctx->args[0];
}

/* x86-64 pages are 4 KiB. */
#define COMPAT_PAGE_SHIFT 12

#endif /* PYSTROBE_BPF_COMPAT_BPF_H_ */
