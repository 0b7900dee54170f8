// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Resident growth (record --memory, stat): the stacks that make memory
 * resident, sampled from the kernel's RSS counter changes (kmem:rss_stat)
 * at random points of each process's growth, each weighing the mean bytes
 * between two points.
 */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "compat.bpf.h"
#include "pystrobe_abi.h"
#include "sample.bpf.h"
#include "targets.bpf.h"

/* Set by the loader: sample the moments memory becomes resident. */
const volatile __u8 memory_growth_enabled = 0;
/* Set by the loader: mean bytes of resident growth between two samples. */
const volatile __u32 memory_sample_bytes = 512 * 1024;

/*
 * Per process: its RSS counters (MM_FILEPAGES, MM_ANONPAGES, -, MM_SHMEMPAGES)
 * at the last kmem:rss_stat event, and the bytes of growth left before the
 * next sample. Key: tgid. LRU: a process that ends leaves its entry behind.
 */
struct memory_growth {
	__s64 pages[4];
	__s64 until_sample;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct memory_growth);
} memory_growth SEC(".maps");

/* Bytes of growth until the next sample: uniform in [1, 2 x mean], so that
 * samples fall at random places in the growth (no rhythm to alias with). */
static __always_inline __s64 draw_memory_interval(void)
{
	return 1 + bpf_get_prandom_u32() % (2 * (__u64)memory_sample_bytes);
}

/*
 * Each change of a process's RSS counter. The counters' folded part moves
 * when a CPU's batch of pages (32) is folded into it, by the fault that
 * filled the batch: that fault's thread, the current one, grew the memory,
 * and its stack is taken when the growth passes the next sampling point.
 * A sample weighs the mean interval once per point passed: an unbiased
 * estimate of the bytes each stack made resident. Args: (struct mm_struct
 * *mm, int member).
 */
SEC("raw_tp/rss_stat")
int sample_memory_growth(struct bpf_raw_tracepoint_args *ctx)
{
	struct mm_struct *mm = (struct mm_struct *)ctx->args[0];
	__u32 member = (__u32)ctx->args[1];
	struct task_struct *task = bpf_get_current_task_btf();
	struct memory_growth *growth, fresh = {};
	__u64 pid_tgid, weight = 0;
	__s64 pages, delta;
	__u32 tgid;

	if (!memory_growth_enabled || member > 3 || member == 2 /* MM_SWAPENTS */)
		return 0;
	/* Only the mm's own threads grow it by faulting. */
	if (task->mm != mm)
		return 0;
	pid_tgid = current_pid_tgid();
	tgid = pid_tgid >> 32;
	if (!is_target(tgid))
		return 0;
	pages = compat_mm_rss_page_count(mm, member);
	growth = bpf_map_lookup_elem(&memory_growth, &tgid);
	if (!growth) {
		/* Growth counts from the first event seen. */
		fresh.pages[0] = compat_mm_rss_page_count(mm, 0);
		fresh.pages[1] = compat_mm_rss_page_count(mm, 1);
		fresh.pages[3] = compat_mm_rss_page_count(mm, 3);
		fresh.until_sample = draw_memory_interval();
		bpf_map_update_elem(&memory_growth, &tgid, &fresh, BPF_ANY);
		return 0;
	}
	delta = pages - growth->pages[member & 3];
	growth->pages[member & 3] = pages;
	if (delta <= 0)
		return 0;
	growth->until_sample -= delta << COMPAT_PAGE_SHIFT;
	if (growth->until_sample > 0)
		return 0;
	for (int i = 0; i < 64 && growth->until_sample <= 0; i++) {
		growth->until_sample += draw_memory_interval();
		weight += memory_sample_bytes;
	}

	send_event_sample(ctx, pid_tgid, true, PYSTROBE_EVENT_MEMORY, weight, 0);
	return 0;
}
