/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * pystrobe_abi.h's part for per-thread and per-process accounting counters.
 * Included by pystrobe_abi.h, after its types and PYSTROBE_ABI_ASSERT: include that.
 * The same rules hold: byte-for-byte layouts, sizes asserted, and any change
 * bumps PYSTROBE_ABI_VERSION there.
 */
#ifndef PYSTROBE_BPF_PYSTROBE_ABI_ACCOUNTING_H_
#define PYSTROBE_BPF_PYSTROBE_ABI_ACCOUNTING_H_

#ifndef PYSTROBE_BPF_PYSTROBE_ABI_H_
#error "include pystrobe_abi.h, not its parts"
#endif

/* ==== Accounting ======================================================
 * Owned by bpf/accounting.bpf.c (kernel side) and daemon/accounting/
 * (userspace). Counters start at zero when accounting is attached, so a
 * reader gets figures for exactly the window it watched; a task created
 * after that counts from its birth.
 */

/* What one thread, or all threads of one process, did in the window. */
struct pystrobe_task_counters {
	__u64 runtime_ns; /* on CPU: deltas of the kernel's sum_exec_runtime */
	/* Deltas of task->utime/stime: tick-sampled, used only as the ratio
	 * that splits runtime_ns, as the kernel's cputime_adjust() does. */
	__u64 utime_ns;
	__u64 stime_ns;
	__u64 runqueue_ns;     /* runnable, not running (includes preempted_ns) */
	__u64 preempted_ns;    /* the part of runqueue_ns that began by preemption */
	__u64 offcpu_io_ns;    /* asleep in TASK_UNINTERRUPTIBLE until woken */
	__u64 offcpu_sleep_ns; /* asleep otherwise until woken (includes gil_wait_ns) */
	/* The part of offcpu_sleep_ns spent in a futex on the interpreter's
	 * GIL (CPython processes the daemon has discovered). */
	__u64 gil_wait_ns;
	__u64 voluntary_switches;   /* deltas of task->nvcsw */
	__u64 involuntary_switches; /* deltas of task->nivcsw */
	__u64 minor_faults;	    /* deltas of task->min_flt */
	__u64 major_faults;	    /* deltas of task->maj_flt */
	/* The kernel's per-task IO accounting, as /proc/PID/io reports it:
	 * deltas of task->ioac.syscr/rchar/syscw/wchar. syscr/syscw count the
	 * VFS read/write-family syscalls (read, pread64, readv, preadv(2),
	 * sendfile, splice, copy_file_range and the write counterparts);
	 * rchar/wchar the bytes they moved, from any file, pipe or socket. */
	__u64 read_calls;
	__u64 read_bytes;
	__u64 write_calls;
	__u64 write_bytes;
	/* Off CPU (asleep until running again; preemption not counted) while
	 * inside a read- or write-family syscall (x86_64 numbers, including
	 * recvfrom/recvmsg/recvmmsg and sendto/sendmsg/sendmmsg). */
	__u64 read_blocked_ns;
	__u64 write_blocked_ns;
	__u64 block_io_bytes; /* bios queued by the thread(s) (block_bio_queue) */
	__u64 block_io_ops;
	__u64 gc_ns; /* CPython gc__start to gc__done (USDT) */
	__u64 gc_collections;
	/* Only with `--syscalls` (sys_enter/sys_exit attached): every
	 * read/write-family syscall, bytes from its return value ((m)msg
	 * variants: calls only), entry to exit time. */
	__u64 sys_read_calls;
	__u64 sys_read_bytes;
	__u64 sys_read_ns;
	__u64 sys_write_calls;
	__u64 sys_write_bytes;
	__u64 sys_write_ns;
};
#define PYSTROBE_TASK_COUNTER_FIELDS 28

/* Key of map `thread_counters`: the host tid. Deleted when the thread exits. */
struct pystrobe_thread_counters {
	__u32 tgid;
	__u32 tid;
	__u64 process_start_ns; /* start_boottime of the process's leader */
	char comm[PYSTROBE_COMM_LEN];
	struct pystrobe_task_counters counters;
};

/* Key of map `process_counters`: a pid and its leader's start time
 * (task->start_boottime, ns since boot; /proc/PID/stat field 22 in ticks),
 * so a reused pid never meets its predecessor's numbers. */
struct pystrobe_process_key {
	__u32 tgid;
	__u32 _pad;
	__u64 start_ns;
};

/*
 * A process's resident memory: gauges, not counters. Read from its mm's own
 * RSS counters (their folded part, see compat_mm_rss_pages) while its threads
 * run, at most every PYSTROBE_MEMORY_READ_NS, when a thread that faulted
 * since leaves the CPU, and when a thread exits; nothing is done per fault.
 */
struct pystrobe_process_memory {
	__u64 anon_bytes;  /* MM_ANONPAGES: RssAnon */
	__u64 file_bytes;  /* MM_FILEPAGES: RssFile */
	__u64 shmem_bytes; /* MM_SHMEMPAGES: RssShmem */
	__u64 swap_bytes;  /* MM_SWAPENTS: VmSwap */
	/* The highest resident size seen: max(mm->hiwater_rss, anon + file +
	 * shmem) at each read (VmHWM), and signal->maxrss at exit. */
	__u64 peak_bytes;
	/* bpf_ktime_get_ns() of the first read within 1% of peak_bytes */
	__u64 peak_ns;
	__u64 read_ns; /* bpf_ktime_get_ns() of the last read; 0: never read */
};
#define PYSTROBE_MEMORY_READ_NS 4000000ull

struct pystrobe_process_counters {
	struct pystrobe_task_counters counters; /* all threads, dead ones too */
	__u64 exit_ns; /* bpf_ktime_get_ns() when the last thread exited; 0: alive */
	__u32 threads; /* threads seen in the window */
	/* The kernel's OOM killer chose this process (oom:mark_victim). */
	__u32 oom_killed;
	char comm[PYSTROBE_COMM_LEN]; /* of the thread that made the entry, or at exec/exit */
	struct pystrobe_process_memory memory;
};

/* Indices of the per-CPU drop counters (map `accounting_drops`). */
enum pystrobe_accounting_drop {
	/* process_counters was full: a process's events were not counted. */
	PYSTROBE_ACCT_DROP_PROCESS_MAP_FULL = 0,
	/* thread_counters was full: a thread's own figures were not kept. */
	PYSTROBE_ACCT_DROP_THREAD_MAP_FULL = 1,
	/* No per-thread state could be had (task storage busy or full). */
	PYSTROBE_ACCT_DROP_NO_THREAD_STATE = 2,
	PYSTROBE_ACCT_DROP_COUNT = 3,
};

PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_task_counters) == PYSTROBE_TASK_COUNTER_FIELDS * 8,
		    "ABI: pystrobe_task_counters");
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_thread_counters) ==
			32 + PYSTROBE_TASK_COUNTER_FIELDS * 8,
		    "ABI: pystrobe_thread_counters");
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_process_key) == 16, "ABI: pystrobe_process_key");
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_process_memory) == 56, "ABI: pystrobe_process_memory");
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_process_counters) ==
			PYSTROBE_TASK_COUNTER_FIELDS * 8 + 16 + 16 + 56,
		    "ABI: pystrobe_process_counters");
/* ==== end of accounting ================================================== */

#endif /* PYSTROBE_BPF_PYSTROBE_ABI_ACCOUNTING_H_ */
