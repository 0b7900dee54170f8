// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Allocations (record --allocations): uprobes on libc's malloc, calloc,
 * realloc and free sample the allocating stacks every so many bytes and
 * report the frees of sampled blocks; uprobes on the library pystrobe
 * preloads (preload/alloc_sampler.c) take the stacks of the allocations it
 * sampled itself; Py_FinalizeEx marks the moment the in-use view is taken.
 */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "pystrobe_abi.h"
#include "sample.bpf.h"
#include "sampler_output.bpf.h"
#include "targets.bpf.h"

/* Set by the loader: sample the allocator's calls (uprobes on libc). */
const volatile __u8 allocations_enabled = 0;
/* Set by the loader: mean bytes allocated between two samples. */
const volatile __u32 alloc_sample_bytes = 512 * 1024;

/* Per thread: bytes left before the next sampled allocation, and the one in
 * flight between an allocator's entry and its return. Key: tid. */
struct alloc_thread {
	__s64 until_sample;
	__u64 pending_weight; /* 0: the call in flight is not sampled */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct alloc_thread);
} alloc_threads SEC(".maps");

/* Sampled blocks not yet freed. Key: the process and the block's address.
 * Value: unused. LRU: a block of a process that exits is never freed. */
struct alloc_block {
	__u32 tgid;
	__u32 _pad;
	__u64 address;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 262144);
	__type(key, struct alloc_block);
	__type(value, __u8);
} alloc_live SEC(".maps");

static __always_inline __s64 draw_alloc_interval(void)
{
	return 1 + bpf_get_prandom_u32() % (2 * (__u64)alloc_sample_bytes);
}

/* An allocator's entry: counts `size` against the thread's interval. */
static __always_inline void alloc_enter(__u64 size)
{
	__u64 pid_tgid = current_pid_tgid();
	struct alloc_thread *thread, fresh = {};
	__u32 tid = (__u32)pid_tgid;
	__u64 weight = 0;

	if (!allocations_enabled || !is_target(pid_tgid >> 32))
		return;
	thread = bpf_map_lookup_elem(&alloc_threads, &tid);
	if (!thread) {
		fresh.until_sample = draw_alloc_interval();
		bpf_map_update_elem(&alloc_threads, &tid, &fresh, BPF_ANY);
		thread = bpf_map_lookup_elem(&alloc_threads, &tid);
		if (!thread)
			return;
	}
	thread->pending_weight = 0;
	thread->until_sample -= size;
	if (thread->until_sample > 0)
		return;
	for (int i = 0; i < 64 && thread->until_sample <= 0; i++) {
		thread->until_sample += draw_alloc_interval();
		weight += alloc_sample_bytes;
	}
	thread->pending_weight = weight;
}

/* Sends a FREE record for `address` of the current process. */
static __always_inline void send_free(__u32 tgid, __u64 address)
{
	struct pystrobe_free_event *event;

	event = bpf_ringbuf_reserve(&events, sizeof(*event), 0);
	if (!event) {
		count_drop(PYSTROBE_DROP_RINGBUF_FULL);
		return;
	}
	event->kind = PYSTROBE_EVENT_FREE;
	event->pid = tgid;
	event->address = address;
	bpf_ringbuf_submit(event, BPF_RB_NO_WAKEUP);
	count_sample(PYSTROBE_COUNT_FREE_SENT);
}

/* A block leaves: if it was sampled, say so. */
static __always_inline void alloc_release(__u64 address)
{
	struct alloc_block block = {.tgid = current_pid_tgid() >> 32, .address = address};

	if (!allocations_enabled || !address || !bpf_map_lookup_elem(&alloc_live, &block))
		return;
	bpf_map_delete_elem(&alloc_live, &block);
	send_free(block.tgid, address);
}

SEC("uprobe")
int BPF_KPROBE(alloc_malloc_entry, __u64 size)
{
	alloc_enter(size);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(alloc_calloc_entry, __u64 count, __u64 size)
{
	alloc_enter(count * size);
	return 0;
}

/* realloc(p, n): p leaves, a block of n comes. */
SEC("uprobe")
int BPF_KPROBE(alloc_realloc_entry, __u64 address, __u64 size)
{
	alloc_release(address);
	alloc_enter(size);
	return 0;
}

/* The return of malloc, calloc and realloc: a sampled call's block. */
SEC("uretprobe")
int BPF_KRETPROBE(alloc_return, __u64 address)
{
	__u64 pid_tgid = current_pid_tgid();
	struct alloc_block block = {.tgid = pid_tgid >> 32, .address = address};
	struct alloc_thread *thread;
	__u32 tid = (__u32)pid_tgid;
	__u64 weight;
	__u8 one = 1;

	if (!allocations_enabled)
		return 0;
	thread = bpf_map_lookup_elem(&alloc_threads, &tid);
	if (!thread || !thread->pending_weight)
		return 0;
	weight = thread->pending_weight;
	thread->pending_weight = 0;
	if (!address)
		return 0;
	bpf_map_update_elem(&alloc_live, &block, &one, BPF_ANY);
	send_event_sample(ctx, pid_tgid, false, PYSTROBE_EVENT_ALLOC, weight, address);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(alloc_free, __u64 address)
{
	alloc_release(address);
	return 0;
}

/*
 * In-process sampling: the library pystrobe preloads into a command it
 * starts (preload/alloc_sampler.c) samples in the process and calls these
 * two functions only for a sampled allocation and for the free of a sampled
 * block, so the uprobes below trap rarely. The library has chosen and
 * weighed the sample; here the stack is taken, as for the uprobes on libc.
 */
SEC("uprobe")
int BPF_KPROBE(alloc_lib_sampled, __u64 address, __u64 size, __u64 weight, __u64 untracked)
{
	__u64 pid_tgid = current_pid_tgid();

	if (!allocations_enabled || !is_target(pid_tgid >> 32))
		return 0;
	if (untracked)
		count_sample(PYSTROBE_COUNT_ALLOC_UNTRACKED);
	send_event_sample(ctx, pid_tgid, false, PYSTROBE_EVENT_ALLOC, weight, address);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(alloc_lib_freed, __u64 address)
{
	__u32 tgid = current_pid_tgid() >> 32;

	if (!allocations_enabled || !is_target(tgid))
		return 0;
	send_free(tgid, address);
	return 0;
}

/* Py_FinalizeEx entered: the moment a Python program's own code has ended
 * and before teardown frees its globals (the in-use view is taken here). */
SEC("uprobe")
int BPF_KPROBE(alloc_python_finalize)
{
	__u32 tgid = current_pid_tgid() >> 32;
	struct pystrobe_finalize_event *event;

	if (!allocations_enabled || !is_target(tgid))
		return 0;
	event = bpf_ringbuf_reserve(&events, sizeof(*event), 0);
	if (!event) {
		count_drop(PYSTROBE_DROP_RINGBUF_FULL);
		return 0;
	}
	event->kind = PYSTROBE_EVENT_FINALIZE;
	event->pid = tgid;
	event->time_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(event, 0);
	count_sample(PYSTROBE_COUNT_FINALIZE_SENT);
	return 0;
}
