/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one header shared by the BPF programs and the C++ daemon. Everything here
 * crosses the kernel/user boundary byte for byte: fixed-width types, explicit
 * padding, sizes asserted on both sides. Bump PYSTROBE_ABI_VERSION on any change.
 */
#ifndef PYSTROBE_BPF_PYSTROBE_ABI_H_
#define PYSTROBE_BPF_PYSTROBE_ABI_H_

#ifdef __BPF__
/* vmlinux.h supplies the __u* types on the BPF side. */
#else
#include <linux/types.h>
#endif

#define PYSTROBE_ABI_VERSION 1

/* Longest native stack the kernel hands us (kernel.perf_event_max_stack is 127). */
#define PYSTROBE_MAX_NATIVE_FRAMES 127
#define PYSTROBE_COMM_LEN 16

/* Kinds of record in the ring buffer; every record starts with this tag. */
enum pystrobe_event_kind {
	PYSTROBE_EVENT_SAMPLE = 1,
	/* A process replaced its image: its old address space is gone. */
	PYSTROBE_EVENT_EXEC = 2,
	/* A whole process (thread group) exited. */
	PYSTROBE_EVENT_EXIT = 3,
};

/* Bits of pystrobe_sample.flags. */
enum pystrobe_sample_flags {
	/* The CPU was in kernel mode when the sample fired. */
	PYSTROBE_SAMPLE_KERNEL_MODE = 1u << 0,
	/* bpf_get_stack failed for the kernel or user stack; counted as well. */
	PYSTROBE_SAMPLE_KSTACK_FAILED = 1u << 1,
	PYSTROBE_SAMPLE_USTACK_FAILED = 1u << 2,
};

/*
 * One cpu-clock sample. The stacks are variable length: only
 * kernel_frames + user_frames entries of `ips` are sent (kernel first), so
 * the record's size is offsetof(ips) + 8 * (kernel_frames + user_frames).
 */
struct pystrobe_sample {
	__u32 kind; /* PYSTROBE_EVENT_SAMPLE */
	__u32 pid;  /* thread group id, as the host sees it */
	__u32 tid;
	__u32 cpu;
	__u64 time_ns; /* bpf_ktime_get_ns() */
	__u64 cgroup_id;
	char comm[PYSTROBE_COMM_LEN]; /* name of the sampled thread */
	__u32 flags;                  /* enum pystrobe_sample_flags */
	__u16 kernel_frames;
	__u16 user_frames;
	__u64 ips[2 * PYSTROBE_MAX_NATIVE_FRAMES];
};

/* An exec or exit of a process; `comm` is the name after the event. */
struct pystrobe_process_event {
	__u32 kind; /* PYSTROBE_EVENT_EXEC or PYSTROBE_EVENT_EXIT */
	__u32 pid;
	__u64 time_ns;
	char comm[PYSTROBE_COMM_LEN];
};

/* Indices of the per-CPU drop counters (map `drop_counters`). */
enum pystrobe_drop_reason {
	/* The ring buffer was full: the sample is lost. */
	PYSTROBE_DROP_RINGBUF_FULL = 0,
	/* bpf_get_stack failed on the kernel stack (sample kept without it). */
	PYSTROBE_DROP_KERNEL_STACK = 1,
	/* bpf_get_stack failed on the user stack (sample kept without it). */
	PYSTROBE_DROP_USER_STACK = 2,
	/* A process event could not be sent. */
	PYSTROBE_DROP_PROCESS_EVENT = 3,
	PYSTROBE_DROP_REASON_COUNT = 4,
};

/* Indices of the per-CPU activity counters (map `sample_counters`). */
enum pystrobe_sample_counter {
	/* cpu-clock samples taken, before any filter. */
	PYSTROBE_COUNT_TAKEN = 0,
	/* Samples of the idle task (pid 0), not sent. */
	PYSTROBE_COUNT_IDLE = 1,
	/* Samples of processes outside the target filter, not sent. */
	PYSTROBE_COUNT_FILTERED = 2,
	/* Samples written to the ring buffer. */
	PYSTROBE_COUNT_SENT = 3,
	PYSTROBE_SAMPLE_COUNTER_COUNT = 4,
};

#endif /* PYSTROBE_BPF_PYSTROBE_ABI_H_ */
