// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The CPU sampler: runs on every cpu-clock perf event, filters by target in the
 * kernel before any stack work, and sends one record per sample with the kernel
 * and user stacks to userspace through the ring buffer. Also reports exec and
 * exit of processes so userspace never symbolizes a stack against the wrong
 * address space.
 */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "compat.bpf.h"
#include "offcpu.bpf.h"
#include "pystrobe_abi.h"
#include "sampler_output.bpf.h"
#include "targets.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the loader (--native): full native stacks for CPython processes
 * too, not only the leaf. */
const volatile __u8 python_native_stacks = 0;
/* Set by the loader (--subprocesses): children of targets become targets. */
const volatile __u8 follow_children = 0;

/* A sample and the bytes of it to send: the unit the scratch space and the
 * off-CPU map hold. */
struct sample_slot {
	__u64 size;
	struct pystrobe_sample sample;
};

/*
 * Scratch space to build one sample before it is copied out with its real
 * length: one per CPU. The cpu-clock program never runs inside the
 * sched_switch one (interrupts are off there), so both share it.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sample_slot);
} sample_scratch SEC(".maps");

static __always_inline struct sample_slot *current_slot(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&sample_scratch, &zero);
}

static __always_inline struct pystrobe_sample *current_sample(void)
{
	struct sample_slot *slot = current_slot();

	return slot ? &slot->sample : NULL;
}

#include "native_unwind.bpf.h"
#include "python_stack.bpf.h"

/*
 * Samples are sent without waking the reader: a wakeup per record costs
 * microseconds in a VM (an irq_work IPI), more than the rest of a sample.
 * The reader polls on a short timer instead, and is woken early only when
 * the ring buffer starts to fill.
 */
#define EVENTS_WAKEUP_BYTES (1 << 20)

/*
 * Records sent per CPU since the ring buffer's fill was last looked at. The
 * look reads the reader's position, a cache line another CPU wrote, and cost
 * a twentieth of a sample; every 16th record is often enough, with 7 MiB of
 * the ring left above EVENTS_WAKEUP_BYTES.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} records_since_fill_check SEC(".maps");

#define EVENTS_FILL_CHECK_EVERY 16

static __always_inline __u64 sample_output_flags(void)
{
	__u32 zero = 0, *records = bpf_map_lookup_elem(&records_since_fill_check, &zero);

	if (records && ++*records < EVENTS_FILL_CHECK_EVERY)
		return BPF_RB_NO_WAKEUP;
	if (records)
		*records = 0;
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > EVENTS_WAKEUP_BYTES
		   ? BPF_RB_FORCE_WAKEUP
		   : BPF_RB_NO_WAKEUP;
}

/*
 * Processes exec'd since the recording began whose first sample has not
 * been sent yet. Key: tgid. Value: unused. That first sample wakes the
 * reader at once: userspace snapshots the new process's symbols and finds
 * its interpreter while it still runs, which a short-lived process may not
 * do for the 25 ms of the reader's timer. LRU: a process may never be
 * sampled at all.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u8);
} fresh_processes SEC(".maps");

/* Output flags for the sample of `tgid`: see fresh_processes. */
static __always_inline __u64 first_sample_flags(__u32 tgid)
{
	if (bpf_map_lookup_elem(&fresh_processes, &tgid)) {
		bpf_map_delete_elem(&fresh_processes, &tgid);
		return BPF_RB_FORCE_WAKEUP;
	}
	return sample_output_flags();
}

#include "python_code_copy.bpf.h"

/*
 * Fills `sample` with what the current thread is doing: ids, name, the
 * kernel stack (when `kernel_mode`), the user stack and, for a CPython
 * process, the Python stack. Returns the bytes of `sample` to send.
 */
static __always_inline __u64 fill_sample(void *ctx, struct pystrobe_sample *sample, __u64 pid_tgid,
					 bool kernel_mode)
{
	__u32 tgid = pid_tgid >> 32;
	const struct pystrobe_python_process *python =
	    bpf_map_lookup_elem(&python_processes, &tgid);
	long kernel_bytes, user_bytes;
	__u32 native_frames;
	__u64 size;

	sample->pid = tgid;
	sample->tid = (__u32)pid_tgid;
	sample->cpu = bpf_get_smp_processor_id();
	sample->time_ns = bpf_ktime_get_ns();
	sample->cgroup_id = bpf_get_current_cgroup_id();
	sample->offcpu_reason = 0;
	sample->weight_ns = 0;
	sample->address = 0;
	sample->interpreter_id = 0;
	bpf_get_current_comm(sample->comm, sizeof(sample->comm));
	sample->flags = kernel_mode ? PYSTROBE_SAMPLE_KERNEL_MODE : 0;

	/* The kernel stack is empty for a sample taken in user mode. */
	kernel_bytes = 0;
	if (kernel_mode) {
		kernel_bytes =
		    bpf_get_stack(ctx, sample->data, PYSTROBE_MAX_NATIVE_FRAMES * sizeof(__u64), 0);
		if (kernel_bytes < 0) {
			count_drop(PYSTROBE_DROP_KERNEL_STACK);
			sample->flags |= PYSTROBE_SAMPLE_KSTACK_FAILED;
			kernel_bytes = 0;
		}
	}
	/* Bound for the verifier: the user stack starts where the kernel's ends. */
	kernel_bytes &= 0x7ff;
	if (kernel_bytes > PYSTROBE_MAX_NATIVE_FRAMES * sizeof(__u64))
		kernel_bytes = PYSTROBE_MAX_NATIVE_FRAMES * sizeof(__u64);
	sample->kernel_frames = kernel_bytes / sizeof(__u64);

	if (!python_native_stacks && python) {
		/* A CPython process's Python stack replaces its interpreter's
		 * frames; without --native only the native leaf is shown (as
		 * [native] when outside the interpreter), so only it is read. */
		sample->data[(kernel_bytes / sizeof(__u64)) & (PYSTROBE_SAMPLE_DATA_WORDS - 1)] =
		    compat_user_ip(compat_current_user_regs());
		user_bytes = sizeof(__u64);
	} else {
		/* The interrupt or syscall that the sample came in on saved the
		 * thread's user registers at the top of its kernel stack. */
		struct pt_regs *regs = compat_current_user_regs();
		long frames =
		    native_unwind(sample, kernel_bytes / sizeof(__u64), PYSTROBE_MAX_USER_FRAMES,
				  compat_user_ip(regs), compat_user_sp(regs), compat_user_fp(regs),
				  python != NULL);

		if (frames >= 0)
			user_bytes = frames * sizeof(__u64);
		else
			user_bytes = bpf_get_stack(ctx, (void *)sample->data + kernel_bytes,
						   PYSTROBE_MAX_NATIVE_FRAMES * sizeof(__u64),
						   BPF_F_USER_STACK);
	}
	if (user_bytes < 0) {
		count_drop(PYSTROBE_DROP_USER_STACK);
		sample->flags |= PYSTROBE_SAMPLE_USTACK_FAILED;
		user_bytes = 0;
	}
	user_bytes &= 0xfff;
	if (user_bytes > PYSTROBE_MAX_USER_FRAMES * sizeof(__u64))
		user_bytes = PYSTROBE_MAX_USER_FRAMES * sizeof(__u64);
	sample->user_frames = user_bytes / sizeof(__u64);

	native_frames = sample->kernel_frames + sample->user_frames;
	sample->python_frames = 0;
	sample->python_status = PYSTROBE_PY_NOT_PYTHON;
	if (python) {
		walk_python_stack(sample, native_frames, python);
		send_new_code_copies(sample, native_frames, python);
	}
	switch (sample->python_status) {
	case PYSTROBE_PY_WALKED:
		count_sample(PYSTROBE_COUNT_PYTHON_WALKED);
		break;
	case PYSTROBE_PY_READ_FAILED:
		count_drop(PYSTROBE_DROP_PYTHON_READ);
		break;
	case PYSTROBE_PY_NO_THREAD_STATE:
		count_drop(PYSTROBE_DROP_PYTHON_NO_THREAD_STATE);
		break;
	}
	if (sample->flags & PYSTROBE_SAMPLE_PY_TRUNCATED)
		count_sample(PYSTROBE_COUNT_PYTHON_TRUNCATED);

	size = __builtin_offsetof(struct pystrobe_sample, data) +
	       sizeof(__u64) * (native_frames + 2 * (__u32)sample->python_frames);
	if (size > sizeof(*sample))
		size = sizeof(*sample);
	return size;
}

/*
 * When the cpu-clock last ticked on each CPU (bpf_ktime_get_ns). Userspace
 * redraws each CPU's period at random moments (daemon/loader/sampling_clock.h),
 * so intervals differ and a sample weighs the one that preceded it. Updated
 * on every tick, filtered or not, so no interval is charged twice; set to
 * the moment sampling starts by the loader, so the first tick has one too.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} last_tick_ns SEC(".maps");

/* The time since the previous tick on this CPU, and notes this one. */
static __always_inline __u64 take_tick_interval(__u64 now)
{
	__u32 zero = 0;
	__u64 *last = bpf_map_lookup_elem(&last_tick_ns, &zero), interval;

	if (!last)
		return 0;
	interval = *last && now > *last ? now - *last : 0;
	*last = now;
	return interval;
}

SEC("perf_event")
int sample_cpu(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	struct pystrobe_sample *sample;
	__u64 size, flags, interval;

	count_sample(PYSTROBE_COUNT_TAKEN);
	interval = take_tick_interval(bpf_ktime_get_ns());
	if (tgid == 0) {
		count_sample(PYSTROBE_COUNT_IDLE);
		return 0;
	}
	if (!is_target(tgid)) {
		count_sample(PYSTROBE_COUNT_FILTERED);
		return 0;
	}
	sample = current_sample();
	if (!sample)
		return 0;
	sample->kind = PYSTROBE_EVENT_SAMPLE;
	/* Kernel text lives in the upper half of the address space on x86_64;
	 * the 8-byte ip is also a context access the verifier accepts, unlike
	 * the 2-byte cs. */
	size = fill_sample(ctx, sample, pid_tgid, (__s64)ctx->regs.ip < 0);
	sample->weight_ns = interval;
	/* A process the daemon has found to run CPython is known to it: only
	 * others may be fresh. */
	flags = sample->python_status == PYSTROBE_PY_NOT_PYTHON ? first_sample_flags(tgid)
								: sample_output_flags();
	if (bpf_ringbuf_output(&events, sample, size, flags)) {
		count_drop(PYSTROBE_DROP_RINGBUF_FULL);
		return 0;
	}
	count_sample(PYSTROBE_COUNT_SENT);
	return 0;
}

/* The counter of records of `kind` sent by send_event_sample. */
static __always_inline __u32 event_sent_counter(__u32 kind)
{
	switch (kind) {
	case PYSTROBE_EVENT_ALLOC:
		return PYSTROBE_COUNT_ALLOC_SENT;
	case PYSTROBE_EVENT_OOM_KILLED:
		return PYSTROBE_COUNT_OOM_KILLED_SENT;
	default:
		return PYSTROBE_COUNT_MEMORY_SENT;
	}
}

/*
 * Takes the current thread's stack as a record of `kind` (MEMORY, ALLOC,
 * OOM_KILLED) weighing `weight` bytes, from a program that runs in process context: a
 * cpu-clock tick may interrupt it and take the same per-CPU scratch. The
 * tick's program counts PYSTROBE_COUNT_TAKEN on entry, so a change of that
 * count means this sample was overwritten: it is taken again, once.
 */
static __always_inline void send_event_sample(void *ctx, __u64 pid_tgid, bool kernel_mode,
					      __u32 kind, __u64 weight, __u64 address)
{
	__u32 taken_key = PYSTROBE_COUNT_TAKEN, tgid = pid_tgid >> 32;
	struct pystrobe_sample *sample = current_sample();
	__u64 size, taken, *taken_now, flags;

	if (!sample)
		return;
	taken_now = bpf_map_lookup_elem(&sample_counters, &taken_key);
	if (!taken_now)
		return;
	for (int attempt = 0; attempt < 2; attempt++) {
		taken = *taken_now;
		size = fill_sample(ctx, sample, pid_tgid, kernel_mode);
		sample->kind = kind;
		sample->weight_ns = weight;
		sample->address = address;
		if (*taken_now == taken) {
			/* A process not known as CPython may be fresh: wake the
			 * reader for it, as sample_cpu does. */
			flags = sample->python_status == PYSTROBE_PY_NOT_PYTHON
				    ? first_sample_flags(tgid)
				    : sample_output_flags();
			if (bpf_ringbuf_output(&events, sample, size, flags))
				count_drop(PYSTROBE_DROP_RINGBUF_FULL);
			else
				count_sample(event_sent_counter(kind));
			return;
		}
		count_sample(attempt == 0 ? PYSTROBE_COUNT_MEMORY_RETAKEN
					  : PYSTROBE_COUNT_MEMORY_LOST);
	}
}

/* ---- Resident growth (record --memory, stat) ------------------------------ */

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
	pid_tgid = bpf_get_current_pid_tgid();
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

/* ---- OOM kills: what each thread of the victim was doing -------------------- */

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
	pid_tgid = bpf_get_current_pid_tgid();
	if (!is_target(pid_tgid >> 32))
		return 0;
	send_event_sample(ctx, pid_tgid, false, PYSTROBE_EVENT_OOM_KILLED, 1, 0);
	return 0;
}

/* ---- Allocations (record --allocations) ---------------------------------- */

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
	__u64 pid_tgid = bpf_get_current_pid_tgid();
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
	struct alloc_block block = {.tgid = bpf_get_current_pid_tgid() >> 32, .address = address};

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
	__u64 pid_tgid = bpf_get_current_pid_tgid();
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
	__u64 pid_tgid = bpf_get_current_pid_tgid();

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
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

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
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
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

/* Set by the loader (record --off-cpu/--idle): follow threads off CPU. */
const volatile __u8 offcpu_enabled = 0;

/*
 * The stack each thread had when it last went off CPU, kept until it comes
 * back and the interval's length is known (then sent and deleted).
 * Key: tid (host). Value: a sample_slot; only the used part is sent. Allocated on use: only threads
 * off CPU right now hold an entry, so 16384 covers every sleeping thread of a large host.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct sample_slot);
} offcpu_stacks SEC(".maps");

/*
 * On each context switch: the thread leaving gets its stack kept, with the
 * time and why it left; the thread arriving, if it has a stack kept, sends
 * it weighted by how long it was away.
 * Args: (bool preempt, struct task_struct *prev, struct task_struct *next
 * [, unsigned int prev_state since 5.18: see compat.bpf.h]).
 */
SEC("raw_tp/sched_switch")
int handle_switch(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *next = (struct task_struct *)ctx->args[2];
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct sample_slot *kept, *leaving;
	__u32 next_tid, tid = (__u32)pid_tgid;
	__u32 reason;
	__u64 size;

	if (!offcpu_enabled)
		return 0;
	reason = sched_switch_offcpu_reason(ctx);

	/* The arriving thread: send what it left behind. */
	next_tid = BPF_CORE_READ(next, pid);
	kept = bpf_map_lookup_elem(&offcpu_stacks, &next_tid);
	if (kept) {
		kept->sample.weight_ns = bpf_ktime_get_ns() - kept->sample.time_ns;
		size = kept->size;
		if (size > sizeof(kept->sample))
			size = sizeof(kept->sample);
		if (bpf_ringbuf_output(&events, &kept->sample, size, sample_output_flags()))
			count_drop(PYSTROBE_DROP_RINGBUF_FULL);
		else
			count_sample(PYSTROBE_COUNT_OFFCPU_SENT);
		bpf_map_delete_elem(&offcpu_stacks, &next_tid);
	}

	/* The leaving thread (current): keep its stack. */
	if ((pid_tgid >> 32) == 0 || !is_target(pid_tgid >> 32))
		return 0;
	leaving = current_slot();
	if (!leaving)
		return 0;
	leaving->sample.kind = PYSTROBE_EVENT_OFFCPU;
	leaving->size = fill_sample(ctx, &leaving->sample, pid_tgid, true);
	leaving->sample.offcpu_reason = reason;
	if (leaving->sample.offcpu_reason == PYSTROBE_OFFCPU_SLEEP &&
	    waiting_for_gil(pid_tgid >> 32))
		leaving->sample.offcpu_reason = PYSTROBE_OFFCPU_GIL;
	if (bpf_map_update_elem(&offcpu_stacks, &tid, leaving, BPF_ANY))
		count_drop(PYSTROBE_DROP_OFFCPU_STORAGE);
	return 0;
}

/* Reserves a process event; the caller fills what its kind adds and submits. */
static __always_inline struct pystrobe_process_event *new_process_event(__u32 kind, __u32 tgid)
{
	struct pystrobe_process_event *event;

	event = bpf_ringbuf_reserve(&events, sizeof(*event), 0);
	if (!event) {
		count_drop(PYSTROBE_DROP_PROCESS_EVENT);
		return NULL;
	}
	__builtin_memset(event, 0, sizeof(*event));
	event->kind = kind;
	event->pid = tgid;
	event->time_ns = bpf_ktime_get_ns();
	bpf_get_current_comm(event->comm, sizeof(event->comm));
	return event;
}

/*
 * Executables in which the daemon found CPython (not a libpython the loader
 * maps after exec), by file: a process that execs one is walked from its
 * first sample, instead of from when the daemon gets round to it, which a
 * short script may not live to see. Written by the daemon.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct pystrobe_python_binary_key);
	__type(value, struct pystrobe_python_binary);
} python_binaries SEC(".maps");

/* A recognized executable, as the EXEC event tells userspace. */
struct python_exec {
	__u64 dev;
	__u64 inode;
	__u64 start_code;
};

/* Makes the current process, which has just exec'd, a CPython process to
 * walk if its executable is in python_binaries; then fills `exec`, which
 * stays zero otherwise. */
static __always_inline void recognize_python_binary(__u32 tgid, struct python_exec *exec)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pystrobe_python_binary_key key = {};
	const struct pystrobe_python_binary *binary;
	struct pystrobe_python_process process;
	struct mm_struct *mm = task->mm;
	struct inode *inode;

	if (!mm || !mm->exe_file)
		return;
	inode = mm->exe_file->f_inode;
	key.dev = inode->i_sb->s_dev;
	key.inode = inode->i_ino;
	binary = bpf_map_lookup_elem(&python_binaries, &key);
	if (!binary)
		return;
	process.runtime_addr = mm->start_code + binary->runtime_offset;
	process.code_type_addr = mm->start_code + binary->code_type_offset;
	__builtin_memcpy(&process.offsets, &binary->offsets, sizeof(process.offsets));
	if (bpf_map_update_elem(&python_processes, &tgid, &process, BPF_ANY) != 0)
		return;
	count_sample(PYSTROBE_COUNT_PYTHON_AT_EXEC);
	exec->dev = key.dev;
	exec->inode = key.inode;
	exec->start_code = mm->start_code;
}

SEC("raw_tp/sched_process_exec")
int handle_exec(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct pystrobe_process_event *event;
	struct python_exec recognized = {};
	__u8 one = 1;

	/* The new image is not the interpreter the daemon saw, if any, and
	 * its mappings are not those userspace read: walked with frame
	 * pointers until userspace reads them again. */
	bpf_map_delete_elem(&python_processes, &tgid);
	bpf_map_delete_elem(&unwind_processes, &tgid);
	if (!is_target(tgid))
		return 0;
	recognize_python_binary(tgid, &recognized);
	bpf_map_update_elem(&fresh_processes, &tgid, &one, BPF_ANY);
	event = new_process_event(PYSTROBE_EVENT_EXEC, tgid);
	if (!event)
		return 0;
	event->python_binary_dev = recognized.dev;
	event->python_binary_inode = recognized.inode;
	event->start_code = recognized.start_code;
	bpf_ringbuf_submit(event, 0);
	return 0;
}

SEC("raw_tp/sched_process_exit")
int handle_exit(void *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	/* The process ends with its last thread, which need not be the leader:
	 * by this tracepoint each exiting thread has left signal->live. */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	bpf_map_delete_elem(&python_processes, &tgid);
	bpf_map_delete_elem(&unwind_processes, &tgid);
	if (is_target(tgid)) {
		struct pystrobe_process_event *event = new_process_event(PYSTROBE_EVENT_EXIT, tgid);

		if (event)
			bpf_ringbuf_submit(event, 0);
	}
	/* A later process with this pid is not a target. */
	if (filter_pids)
		bpf_map_delete_elem(&target_pids, &tgid);
	return 0;
}

/* With --subprocesses, a new process whose parent is a target becomes one,
 * before it can run: no sample of it is missed. */
SEC("raw_tp/sched_process_fork")
int handle_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx->args[0];
	struct task_struct *child = (struct task_struct *)ctx->args[1];
	__u32 parent_tgid, child_tgid;
	__u8 one = 1;

	if (!follow_children || !filter_pids)
		return 0;
	parent_tgid = BPF_CORE_READ(parent, tgid);
	child_tgid = BPF_CORE_READ(child, tgid);
	/* A new thread joins its own process, which is already known. */
	if (child_tgid == parent_tgid || !is_target(parent_tgid))
		return 0;
	bpf_map_update_elem(&target_pids, &child_tgid, &one, BPF_ANY);
	bpf_map_update_elem(&fresh_processes, &child_tgid, &one, BPF_ANY);
	return 0;
}
