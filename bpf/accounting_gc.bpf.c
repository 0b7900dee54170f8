// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The accounting's CPython GC time and collections: USDT probes
 * (python:gc__start/gc__done) where the interpreter has them, else uprobes
 * on the entry and return of the function that runs one collection.
 */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

#include "accounting.bpf.h"

static __always_inline void acct_gc_begin(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct acct_refs refs;

	if (acct_lookup(task, true, &refs) && refs.thread)
		refs.thread->state.gc_start_ns = bpf_ktime_get_ns();
}

static __always_inline void acct_gc_end(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct acct_refs refs;
	__u64 start;

	if (!acct_lookup(task, false, &refs) || !refs.thread)
		return;
	start = refs.thread->state.gc_start_ns;
	refs.thread->state.gc_start_ns = 0;
	if (!start)
		return;
	ACCT_ADD(&refs, gc_ns, bpf_ktime_get_ns() - start);
	ACCT_ADD(&refs, gc_collections, 1);
}

/* Interpreters built --with-dtrace (Debian's): python:gc__start/gc__done. */
SEC("usdt")
int BPF_USDT(acct_gc_start, int generation)
{
	acct_gc_begin();
	return 0;
}

SEC("usdt")
int BPF_USDT(acct_gc_done, long collected)
{
	acct_gc_end();
	return 0;
}

/* The others (pyenv's, most source builds): entry and return of the function
 * that runs one collection, which the USDT probes bracket (gc_collect_main
 * in 3.10 to 3.13, collect in 3.9); the loader finds it in the symbols. */
SEC("uprobe")
int acct_gc_collect_entry(struct pt_regs *ctx)
{
	acct_gc_begin();
	return 0;
}

SEC("uretprobe")
int acct_gc_collect_return(struct pt_regs *ctx)
{
	acct_gc_end();
	return 0;
}
