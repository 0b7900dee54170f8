/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The accounting's bookkeeping, shared by its programs (accounting*.bpf.c):
 * the per-thread and per-process counter maps and what the kernel side keeps
 * beside them, finding or making a task's entries (acct_lookup), and
 * charging what the kernel counted for a task since the last look
 * (take_task_deltas) and its process's resident memory (take_memory).
 * Inlined into each program; the maps and the start time are declared here
 * and defined once, in accounting.bpf.c.
 */
#ifndef PYSTROBE_BPF_ACCOUNTING_BPF_H_
#define PYSTROBE_BPF_ACCOUNTING_BPF_H_

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "compat.bpf.h"
#include "offcpu.bpf.h"
#include "pystrobe_abi.h"
#include "targets.bpf.h"

/*
 * Set by the loader just before it attaches these programs (boot-time ns):
 * a task born after it counts from zero, an older one from its first event.
 */
extern volatile __u64 accounting_since_boot_ns;

#define PF_EXITING 0x00000004 /* include/linux/sched.h */

/* Kernel bookkeeping per thread, after the part userspace reads. */
struct acct_thread_state {
	struct offcpu_clock offcpu;
	/* The task's own counters at the last look. */
	__u64 last_runtime;
	__u64 last_utime;
	__u64 last_stime;
	__u64 last_min_flt;
	__u64 last_maj_flt;
	__u64 last_nvcsw;
	__u64 last_nivcsw;
	__u64 last_rchar;
	__u64 last_wchar;
	__u64 last_syscr;
	__u64 last_syscw;
	__u64 syscall_start_ns; /* --syscalls only */
	__u64 gc_start_ns;
	__u32 syscall_family; /* enum syscall_family in flight (--syscalls only) */
	__u32 syscall_counts_bytes;
	/* enum syscall_family the thread was in when it left the CPU asleep. */
	__u32 offcpu_syscall;
	__u32 _pad;
	/* last_min_flt + last_maj_flt when this thread last read its process's
	 * memory: faults since then mean the memory may have grown. */
	__u64 memory_faults;
};

/* Value of thread_counters: the ABI part first, so userspace reads a prefix. */
struct acct_thread {
	struct pystrobe_thread_counters pub;
	struct acct_thread_state state;
};

/*
 * Per thread. Key: tid (host). Value: struct acct_thread, whose first
 * sizeof(struct pystrobe_thread_counters) bytes are the ABI. Deleted when
 * the thread exits. Sized for a busy host's threads; not preallocated, so
 * an idle pystrobe costs little memory. Full: counted, the thread's
 * process is still charged.
 */
struct thread_counters_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct acct_thread);
};
extern struct thread_counters_map thread_counters SEC(".maps");

/*
 * Per process. Key: struct pystrobe_process_key (tgid + leader start time).
 * Value: struct pystrobe_process_counters. An exited process keeps its
 * final figures (exit_ns set) until userspace has read and deleted it.
 */
struct process_counters_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct pystrobe_process_key);
	__type(value, struct pystrobe_process_counters);
};
extern struct process_counters_map process_counters SEC(".maps");

/* Lost accounting. Key: enum pystrobe_accounting_drop. Per CPU. */
struct accounting_drops_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PYSTROBE_ACCT_DROP_COUNT);
	__type(key, __u32);
	__type(value, __u64);
};
extern struct accounting_drops_map accounting_drops SEC(".maps");

/* Zeroed values to create entries from: too big for the BPF stack. */
struct acct_templates {
	struct acct_thread thread;
	struct pystrobe_process_counters process;
};
struct acct_scratch_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct acct_templates);
};
extern struct acct_scratch_map acct_scratch SEC(".maps");

/* What one event charges: the thread and its process (either may be NULL). */
struct acct_refs {
	struct acct_thread *thread;
	struct pystrobe_process_counters *process;
};

#define ACCT_ADD(refs, field, value)                                                               \
	do {                                                                                       \
		__u64 __v = (value);                                                               \
		if ((refs)->thread)                                                                \
			__sync_fetch_and_add(&(refs)->thread->pub.counters.field, __v);            \
		if ((refs)->process)                                                               \
			__sync_fetch_and_add(&(refs)->process->counters.field, __v);               \
	} while (0)

static __always_inline void count_acct_drop(__u32 reason)
{
	__u64 *value = bpf_map_lookup_elem(&accounting_drops, &reason);

	if (value)
		*value += 1;
}

static __always_inline void process_key_of(struct task_struct *task,
					   struct pystrobe_process_key *key)
{
	key->tgid = BPF_CORE_READ(task, tgid);
	key->_pad = 0;
	key->start_ns = BPF_CORE_READ(task, group_leader, start_boottime);
}

/* The task's own counters, as the kernel keeps them. */
static __always_inline void read_task_totals(struct task_struct *task, struct acct_thread_state *s)
{
	s->last_runtime = BPF_CORE_READ(task, se.sum_exec_runtime);
	s->last_utime = BPF_CORE_READ(task, utime);
	s->last_stime = BPF_CORE_READ(task, stime);
	s->last_min_flt = BPF_CORE_READ(task, min_flt);
	s->last_maj_flt = BPF_CORE_READ(task, maj_flt);
	s->last_nvcsw = BPF_CORE_READ(task, nvcsw);
	s->last_nivcsw = BPF_CORE_READ(task, nivcsw);
	s->last_rchar = BPF_CORE_READ(task, ioac.rchar);
	s->last_wchar = BPF_CORE_READ(task, ioac.wchar);
	s->last_syscr = BPF_CORE_READ(task, ioac.syscr);
	s->last_syscw = BPF_CORE_READ(task, ioac.syscw);
}

static __always_inline struct pystrobe_process_counters *
process_entry(struct task_struct *task, const struct pystrobe_process_key *key, bool new_thread)
{
	struct pystrobe_process_counters *process;
	struct acct_templates *scratch;
	__u32 zero = 0;

	process = bpf_map_lookup_elem(&process_counters, key);
	if (!process) {
		scratch = bpf_map_lookup_elem(&acct_scratch, &zero);
		if (!scratch)
			return NULL;
		__builtin_memset(&scratch->process, 0, sizeof(scratch->process));
		BPF_CORE_READ_STR_INTO(&scratch->process.comm, task, group_leader, comm);
		if (bpf_map_update_elem(&process_counters, key, &scratch->process, BPF_NOEXIST) &&
		    !bpf_map_lookup_elem(&process_counters, key)) {
			count_acct_drop(PYSTROBE_ACCT_DROP_PROCESS_MAP_FULL);
			return NULL;
		}
		process = bpf_map_lookup_elem(&process_counters, key);
		if (!process)
			return NULL;
	}
	if (new_thread)
		__sync_fetch_and_add(&process->threads, 1);
	return process;
}

/*
 * Finds (or, with `create`, makes) the thread's entry and its process's.
 * Returns false when the task is not accounted (idle, not a target).
 */
static __always_inline bool acct_lookup(struct task_struct *task, bool create,
					struct acct_refs *refs)
{
	struct pystrobe_process_key key;
	struct acct_templates *scratch;
	struct acct_thread *thread;
	__u32 tid, zero = 0;

	refs->thread = NULL;
	refs->process = NULL;
	tid = BPF_CORE_READ(task, pid);
	if (tid == 0)
		return false;
	thread = bpf_map_lookup_elem(&thread_counters, &tid);
	if (thread) {
		key.tgid = thread->pub.tgid;
		key._pad = 0;
		key.start_ns = thread->pub.process_start_ns;
		refs->thread = thread;
		refs->process = bpf_map_lookup_elem(&process_counters, &key);
		return true;
	}
	process_key_of(task, &key);
	if (!is_target(key.tgid))
		return false;
	/* A dying thread is not given a new entry: it would never be freed. */
	if (!create || (BPF_CORE_READ(task, flags) & PF_EXITING)) {
		refs->process = bpf_map_lookup_elem(&process_counters, &key);
		return true;
	}

	scratch = bpf_map_lookup_elem(&acct_scratch, &zero);
	if (!scratch)
		return false;
	__builtin_memset(&scratch->thread, 0, sizeof(scratch->thread));
	scratch->thread.pub.tgid = key.tgid;
	scratch->thread.pub.tid = tid;
	scratch->thread.pub.process_start_ns = key.start_ns;
	BPF_CORE_READ_STR_INTO(&scratch->thread.pub.comm, task, comm);
	/* Born before accounting began: count from now, not from birth. */
	if (BPF_CORE_READ(task, start_boottime) < accounting_since_boot_ns)
		read_task_totals(task, &scratch->thread.state);
	if (bpf_map_update_elem(&thread_counters, &tid, &scratch->thread, BPF_NOEXIST) == 0) {
		refs->process = process_entry(task, &key, true);
	} else {
		refs->process = process_entry(task, &key, false);
		if (!bpf_map_lookup_elem(&thread_counters, &tid))
			count_acct_drop(PYSTROBE_ACCT_DROP_THREAD_MAP_FULL);
	}
	refs->thread = bpf_map_lookup_elem(&thread_counters, &tid);
	return true;
}

#define TAKE_DELTA(refs, state, field, last, current)                                              \
	do {                                                                                       \
		__u64 __cur = (current);                                                           \
		if (__cur > (state)->last)                                                         \
			ACCT_ADD(refs, field, __cur - (state)->last);                              \
		(state)->last = __cur;                                                             \
	} while (0)

/* Charges what the kernel counted for the task since the last look. */
static __always_inline void take_task_deltas(struct task_struct *task, struct acct_refs *refs)
{
	struct acct_thread_state *s;

	if (!refs->thread)
		return;
	s = &refs->thread->state;
	TAKE_DELTA(refs, s, runtime_ns, last_runtime, BPF_CORE_READ(task, se.sum_exec_runtime));
	TAKE_DELTA(refs, s, utime_ns, last_utime, BPF_CORE_READ(task, utime));
	TAKE_DELTA(refs, s, stime_ns, last_stime, BPF_CORE_READ(task, stime));
	TAKE_DELTA(refs, s, minor_faults, last_min_flt, BPF_CORE_READ(task, min_flt));
	TAKE_DELTA(refs, s, major_faults, last_maj_flt, BPF_CORE_READ(task, maj_flt));
	TAKE_DELTA(refs, s, voluntary_switches, last_nvcsw, BPF_CORE_READ(task, nvcsw));
	TAKE_DELTA(refs, s, involuntary_switches, last_nivcsw, BPF_CORE_READ(task, nivcsw));
	TAKE_DELTA(refs, s, read_bytes, last_rchar, BPF_CORE_READ(task, ioac.rchar));
	TAKE_DELTA(refs, s, write_bytes, last_wchar, BPF_CORE_READ(task, ioac.wchar));
	TAKE_DELTA(refs, s, read_calls, last_syscr, BPF_CORE_READ(task, ioac.syscr));
	TAKE_DELTA(refs, s, write_calls, last_syscw, BPF_CORE_READ(task, ioac.syscw));
}

/* When take_memory() reads the mm's counters. */
enum memory_read {
	/* At most every PYSTROBE_MEMORY_READ_NS (each tick and switch). */
	MEMORY_READ_THROTTLED,
	/* When the thread faulted since its last read (it leaves the CPU). */
	MEMORY_READ_IF_FAULTED,
	MEMORY_READ_ALWAYS,
};

/*
 * Reads the process's resident memory from its mm (see struct
 * pystrobe_process_memory). Costs nothing per page fault: a few loads on the
 * scheduler events accounting already handles, at most every
 * PYSTROBE_MEMORY_READ_NS per process while it runs, and once more when a
 * thread that faulted since its last read leaves the CPU, so a process that
 * grows and then sleeps is read as it is. Memory that changes while no thread
 * of the process runs (reclaim, another process's faults) is seen at its
 * next run. Call after take_task_deltas().
 */
static __always_inline void take_memory(struct task_struct *task, struct acct_refs *refs,
					enum memory_read when)
{
	struct acct_thread_state *s = refs->thread ? &refs->thread->state : NULL;
	struct pystrobe_process_memory *m;
	__u64 now, rss, peak, faults = 0;
	struct mm_struct *mm;
	long pages[4];

	if (!refs->process)
		return;
	m = &refs->process->memory;
	if (s)
		faults = s->last_min_flt + s->last_maj_flt;
	if (when == MEMORY_READ_IF_FAULTED && (!s || faults == s->memory_faults))
		return;
	now = bpf_ktime_get_ns();
	if (when == MEMORY_READ_THROTTLED && now - m->read_ns < PYSTROBE_MEMORY_READ_NS)
		return;
	mm = BPF_CORE_READ(task, mm);
	if (!mm)
		return;
	if (s)
		s->memory_faults = faults;
	m->read_ns = now;
	compat_mm_rss_pages(mm, pages);
	m->file_bytes = (__u64)pages[MM_FILEPAGES] << COMPAT_PAGE_SHIFT;
	m->anon_bytes = (__u64)pages[MM_ANONPAGES] << COMPAT_PAGE_SHIFT;
	m->swap_bytes = (__u64)pages[MM_SWAPENTS] << COMPAT_PAGE_SHIFT;
	m->shmem_bytes = (__u64)pages[MM_SHMEMPAGES] << COMPAT_PAGE_SHIFT;
	rss = m->file_bytes + m->anon_bytes + m->shmem_bytes;
	/* hiwater_rss is raised lazily, just before memory is unmapped: with
	 * the resident size now it is the peak, as VmHWM reads it. */
	peak = (__u64)BPF_CORE_READ(mm, hiwater_rss) << COMPAT_PAGE_SHIFT;
	if (rss > peak)
		peak = rss;
	/* The time is when the resident size first came within 1% of the
	 * peak: the folded counters and hiwater_rss (raised when memory is
	 * freed) add a few pages to a peak already passed. */
	if (peak > m->peak_bytes) {
		if (peak - m->peak_bytes > m->peak_bytes / 100)
			m->peak_ns = now;
		m->peak_bytes = peak;
	}
}

#endif /* PYSTROBE_BPF_ACCOUNTING_BPF_H_ */
