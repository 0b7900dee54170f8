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
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

#include "compat.bpf.h"
#include "offcpu.bpf.h"
#include "pystrobe_abi.h"
#include "python_process.bpf.h"
#include "targets.bpf.h"

/*
 * Set by the loader just before it attaches these programs (boot-time ns):
 * a task born after it counts from zero, an older one from its first event.
 */
volatile __u64 accounting_since_boot_ns = 0;

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
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct acct_thread);
} thread_counters SEC(".maps");

/*
 * Per process. Key: struct pystrobe_process_key (tgid + leader start time).
 * Value: struct pystrobe_process_counters. An exited process keeps its
 * final figures (exit_ns set) until userspace has read and deleted it.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct pystrobe_process_key);
	__type(value, struct pystrobe_process_counters);
} process_counters SEC(".maps");

/* Lost accounting. Key: enum pystrobe_accounting_drop. Per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PYSTROBE_ACCT_DROP_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} accounting_drops SEC(".maps");

/* Zeroed values to create entries from: too big for the BPF stack. */
struct acct_templates {
	struct acct_thread thread;
	struct pystrobe_process_counters process;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct acct_templates);
} acct_scratch SEC(".maps");

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

/* --- read/write-family syscalls (x86_64 numbers) --------------------------- */

enum syscall_family {
	SYSCALL_OTHER = 0,
	SYSCALL_READ = 1,
	SYSCALL_WRITE = 2,
};

static __always_inline __u32 syscall_family(long id, __u32 *counts_bytes)
{
	*counts_bytes = 1;
	switch (id) {
	case 0:	  /* read */
	case 17:  /* pread64 */
	case 19:  /* readv */
	case 45:  /* recvfrom */
	case 47:  /* recvmsg */
	case 295: /* preadv */
	case 327: /* preadv2 */
		return SYSCALL_READ;
	case 299: /* recvmmsg: returns messages */
		*counts_bytes = 0;
		return SYSCALL_READ;
	case 1:	  /* write */
	case 18:  /* pwrite64 */
	case 20:  /* writev */
	case 40:  /* sendfile */
	case 44:  /* sendto */
	case 46:  /* sendmsg */
	case 296: /* pwritev */
	case 328: /* pwritev2 */
		return SYSCALL_WRITE;
	case 307: /* sendmmsg: returns messages */
		*counts_bytes = 0;
		return SYSCALL_WRITE;
	}
	return SYSCALL_OTHER;
}

/*
 * The read/write family of the syscall the current thread is in, from its
 * saved user registers. The syscall number's slot also holds an exception's
 * error code (a user page fault on code is 0x14, writev's number), which
 * compat_regs_from_syscall() tells apart.
 */
static __always_inline __u32 current_syscall_family(void)
{
	struct pt_regs *regs = compat_current_user_regs();
	__u32 counts_bytes;
	__u32 family;

	family = syscall_family(compat_syscall_nr(regs), &counts_bytes);
	if (family != SYSCALL_OTHER && !compat_regs_from_syscall(regs))
		return SYSCALL_OTHER;
	return family;
}

SEC("raw_tp/sched_switch")
int acct_switch(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *prev = (struct task_struct *)ctx->args[1];
	struct task_struct *next = (struct task_struct *)ctx->args[2];
	__u32 reason = sched_switch_offcpu_reason(ctx);
	struct offcpu_interval interval;
	struct acct_thread_state *s;
	struct acct_refs refs;
	__u64 now = bpf_ktime_get_ns();

	/* prev is the current task. nvcsw/nivcsw were counted just before
	 * this tracepoint. */
	if (acct_lookup(prev, true, &refs)) {
		take_task_deltas(prev, &refs);
		take_memory(prev, &refs, MEMORY_READ_IF_FAULTED);
		if (refs.thread) {
			s = &refs.thread->state;
			offcpu_switch_out(&s->offcpu, reason, now);
			s->offcpu_syscall = SYSCALL_OTHER;
			if (s->offcpu.reason != PYSTROBE_OFFCPU_RUNQUEUE)
				s->offcpu_syscall = current_syscall_family();
			if (s->offcpu.reason == PYSTROBE_OFFCPU_SLEEP &&
			    waiting_for_gil(refs.thread->pub.tgid))
				s->offcpu.reason = PYSTROBE_OFFCPU_GIL;
		}
	}
	if (!acct_lookup(next, true, &refs) || !refs.thread)
		return 0;
	s = &refs.thread->state;
	if (!offcpu_switch_in(&s->offcpu, now, &interval))
		return 0;
	if (interval.runqueue_ns)
		ACCT_ADD(&refs, runqueue_ns, interval.runqueue_ns);
	switch (interval.reason) {
	case PYSTROBE_OFFCPU_RUNQUEUE:
		ACCT_ADD(&refs, preempted_ns, interval.runqueue_ns);
		return 0;
	case PYSTROBE_OFFCPU_IO:
		ACCT_ADD(&refs, offcpu_io_ns, interval.blocked_ns);
		break;
	case PYSTROBE_OFFCPU_GIL:
		ACCT_ADD(&refs, gil_wait_ns, interval.blocked_ns);
		ACCT_ADD(&refs, offcpu_sleep_ns, interval.blocked_ns);
		break;
	default:
		ACCT_ADD(&refs, offcpu_sleep_ns, interval.blocked_ns);
	}
	/* Asleep inside a read or write: until it runs again. */
	if (s->offcpu_syscall == SYSCALL_READ)
		ACCT_ADD(&refs, read_blocked_ns, interval.blocked_ns + interval.runqueue_ns);
	else if (s->offcpu_syscall == SYSCALL_WRITE)
		ACCT_ADD(&refs, write_blocked_ns, interval.blocked_ns + interval.runqueue_ns);
	s->offcpu_syscall = SYSCALL_OTHER;
	return 0;
}

SEC("raw_tp/sched_wakeup")
int acct_wakeup(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx->args[0];
	struct acct_refs refs;

	if (acct_lookup(task, false, &refs) && refs.thread)
		offcpu_wakeup(&refs.thread->state.offcpu, bpf_ktime_get_ns());
	return 0;
}

SEC("raw_tp/sched_wakeup_new")
int acct_wakeup_new(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx->args[0];
	struct acct_refs refs;

	if (acct_lookup(task, true, &refs) && refs.thread)
		offcpu_born(&refs.thread->state.offcpu, bpf_ktime_get_ns());
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

/* --- --syscalls: every read/write-family syscall, entry to exit ------------ */

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

/* --- CPython GC: USDT probes where the interpreter has them, else uprobes --- */

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
