/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Copies of code objects for userspace, sent with the samples of CPython
 * processes (see pystrobe_python_code_event in pystrobe_abi.h).
 *
 * Userspace names a frame by reading its code object when the sample
 * arrives, tens of milliseconds later. By then a script may have exited,
 * and in a process of any age some code objects are gone: a module's body
 * is freed as soon as it has run (imports), and so is the code of exec,
 * eval and compile. So each code object a sample meets is copied here,
 * while the sampled thread is stopped on it, and sent once; after that it
 * costs a look in a cache once per sample that meets it.
 *
 * The walk offers each code object once per sample, when it first reads
 * it; the offer is checked first against this CPU's small cache of code
 * objects known sent (python_codes_sent_cache: a few ns), then against the
 * set of all sent (python_codes_sent: a hash lookup), so a deep stack of
 * old code costs little more than before copies were made for processes
 * of any age.
 *
 * Copies are bounded per CPU by a token bucket (python_code_budget), so a
 * process that makes new code without end cannot fill the ring buffer; a
 * copy the budget puts off is counted (PYSTROBE_COUNT_PYTHON_CODES_DEFERRED)
 * and tried again at the object's next sample.
 *
 * So is a copy one of whose reads faults. A copy is sent once, so it must be
 * whole: a read fails for an instant while the process takes a copy-on-write
 * fault on that page (after a fork, every page it writes), and a copy sent
 * without its name names nothing once the process is gone. Only a part that
 * could never be copied (too big, or its head makes no sense) is left out,
 * for userspace to read while it can.
 *
 * Inlined into the walk (python_stack.bpf.c); the maps are declared here
 * and defined once, in python_code_copy.bpf.c.
 */
#ifndef PYSTROBE_BPF_PYTHON_CODE_COPY_BPF_H_
#define PYSTROBE_BPF_PYTHON_CODE_COPY_BPF_H_

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "pystrobe_abi.h"
#include "python_process.bpf.h"
#include "python_stack.bpf.h"
#include "sampler_output.bpf.h"

/* Copies per second each CPU may send, and how many may be saved up for a
 * burst (an import meets hundreds of new code objects in its first samples).
 * A copy takes a few hundred bytes to a few KiB of the ring buffer: the rate
 * bounds that to a few MiB/s per CPU at worst. */
#define PYTHON_CODE_COPIES_PER_SEC 2000
#define PYTHON_CODE_COPY_BURST 1024
#define PYTHON_NS_PER_CODE_COPY (1000ull * 1000 * 1000 / PYTHON_CODE_COPIES_PER_SEC)
/* Code objects copied per sample at most, to bound a sample's cost; a deep
 * new stack is sent over its first few samples. */
#define PYTHON_CODES_PER_SAMPLE 64
/* First reads of a name or file name, and of a line table: enough for most,
 * where a read of a whole page would cost more. */
#define PYTHON_STR_GUESS 256
#define PYTHON_LINE_TABLE_GUESS 1024
/* Copies wait while the ring buffer holds more than this unread: the rest
 * of it is the samples' (a process's own objects could otherwise flood it). */
#define PYTHON_CODE_RING_LIMIT (events_ring_bytes / 4)

/*
 * Code objects already sent. Key: (tgid, stamp, address). LRU: entries of
 * exited processes age out, and a code object evicted early is only sent
 * again.
 */
struct python_code_key {
	__u32 tgid;
	__u32 stamp;
	__u64 code;
};

struct python_codes_sent_map {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct python_code_key);
	__type(value, __u8);
};
extern struct python_codes_sent_map python_codes_sent SEC(".maps");

/* The token bucket that bounds copies, per CPU: `tokens` copies may be sent
 * now; one more is earned every PYTHON_NS_PER_CODE_COPY after refilled_ns.
 * Starts empty with refilled_ns 0, which fills it at the first copy. */
struct python_code_budget {
	__u64 refilled_ns;
	__u64 tokens;
};

struct python_code_budget_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct python_code_budget);
};
extern struct python_code_budget_map python_code_budget SEC(".maps");

/* Takes one copy's token from this CPU's bucket at time `now_ns`; false
 * when it is empty. */
static __always_inline bool take_code_copy_token(__u64 now_ns)
{
	struct python_code_budget *budget;
	__u32 zero = 0;
	__u64 earned;

	budget = bpf_map_lookup_elem(&python_code_budget, &zero);
	if (!budget)
		return false;
	earned = (now_ns - budget->refilled_ns) / PYTHON_NS_PER_CODE_COPY;
	if (earned > 0) {
		if (budget->tokens + earned >= PYTHON_CODE_COPY_BURST) {
			budget->tokens = PYTHON_CODE_COPY_BURST;
			budget->refilled_ns = now_ns;
		} else {
			budget->tokens += earned;
			budget->refilled_ns += earned * PYTHON_NS_PER_CODE_COPY;
		}
	}
	if (budget->tokens == 0)
		return false;
	budget->tokens--;
	return true;
}

/*
 * Code objects this CPU has found in python_codes_sent, or sent, lately:
 * direct-mapped by a hash of the key, so a hit costs one comparison. A stale
 * slot (its key evicted from python_codes_sent since) only spares a copy
 * userspace has had. 8 KiB per CPU.
 */
#define PYTHON_SENT_CACHE_SLOTS 512

struct python_sent_cache {
	struct python_code_key keys[PYTHON_SENT_CACHE_SLOTS];
};

struct python_codes_sent_cache_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct python_sent_cache);
};
extern struct python_codes_sent_cache_map python_codes_sent_cache SEC(".maps");

/* The cache slot of `key`, or null when the cache cannot be had. */
static __always_inline struct python_code_key *sent_cache_slot(const struct python_code_key *key)
{
	struct python_sent_cache *cache;
	__u32 zero = 0, slot;

	cache = bpf_map_lookup_elem(&python_codes_sent_cache, &zero);
	if (!cache)
		return NULL;
	slot = (__u32)(key->code >> 4) ^ (__u32)(key->code >> 20) ^ key->stamp ^ key->tgid;
	return &cache->keys[slot & (PYTHON_SENT_CACHE_SLOTS - 1)];
}

/* The event being built, per CPU: too big for the BPF stack. */
struct python_code_scratch_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pystrobe_python_code_event);
};
extern struct python_code_scratch_map python_code_scratch SEC(".maps");

/* A field of a region copied at `at` in event->data (8-aligned offsets). */
static __always_inline __u64 event_u64(const struct pystrobe_python_code_event *event, __u32 at)
{
	return *(const __u64 *)(event->data + (at & (PYSTROBE_CODE_DATA_BYTES - 8)));
}

static __always_inline __u32 event_u32(const struct pystrobe_python_code_event *event, __u32 at)
{
	return *(const __u32 *)(event->data + (at & (PYSTROBE_CODE_DATA_BYTES - 4)));
}

/* Copies `size` bytes at `address` to event->data at `*used`, as region
 * `index`; on success the region is recorded and *used moves on, aligned.
 * A read that faults sets *faulted. */
static __always_inline bool copy_region(struct pystrobe_python_code_event *event, __u32 index,
					__u32 *used, __u64 address, __u32 size, bool *faulted)
{
	__u32 at = *used;

	if (at >= PYSTROBE_CODE_DATA_BYTES / 2 || size == 0 || size > PYSTROBE_CODE_REGION_MAX ||
	    index >= PYSTROBE_CODE_REGIONS || address == 0)
		return false;
	/* Masked as well, for the verifier, which may not connect the checks
	 * to the registers passed; the barrier keeps clang from dropping masks
	 * it can prove change nothing. */
	asm volatile("" : "+r"(at), "+r"(size));
	if (bpf_probe_read_user(event->data + (at & (PYSTROBE_CODE_DATA_BYTES / 2 - 1)),
				size & (PYSTROBE_CODE_DATA_BYTES / 2 - 1), (void *)address)) {
		*faulted = true;
		return false;
	}
	event->regions[index].address = address;
	event->regions[index].size = size;
	event->regions[index].offset = at;
	event->regions_used = index + 1;
	*used = (at + size + 7) & ~7u;
	return true;
}

/* The bytes a str or bytes object takes, from its head copied at `at`;
 * 0 when the head makes no sense (userspace says why when it reads it). */
static __always_inline __u32 object_size(const struct pystrobe_python_code_event *event, __u32 at,
					 const struct pystrobe_python_offsets *off, bool is_str)
{
	__u64 length;
	__u32 state, kind;

	if (!is_str) {
		length = event_u64(event, at + off->var_object_size);
		return length > PYSTROBE_CODE_REGION_MAX ? 0 : off->bytes_data + length;
	}
	length = event_u64(event, at + off->unicode_length);
	state = event_u32(event, at + off->unicode_state);
	kind = (state >> off->unicode_kind_shift) & 7;
	if (length > PYSTROBE_CODE_REGION_MAX || (kind != 1 && kind != 2 && kind != 4))
		return 0;
	return ((state >> off->unicode_ascii_shift) & 1 ? off->unicode_ascii_data
							: off->unicode_compact_data) +
	       length * kind;
}

/*
 * Copies the str or bytes object at `address` as region `index`. One read
 * usually does: a guess of `guess` bytes, cut at the end of the object's
 * page (the next page may not be mapped, and a faulting read costs twenty
 * good ones); an object the guess fell short of is read again, whole.
 */
static __always_inline bool copy_object(struct pystrobe_python_code_event *event, __u32 index,
					__u32 *used, __u64 address, __u32 guess,
					const struct pystrobe_python_offsets *off, bool is_str,
					bool *faulted)
{
	__u32 at = *used, in_page, first, size;
	__u32 head = is_str ? off->unicode_state + 4 : off->var_object_size + 8;

	if (address == 0 || index >= PYSTROBE_CODE_REGIONS)
		return false;
	in_page = PYTHON_PAGE_SIZE - (address & (PYTHON_PAGE_SIZE - 1));
	first = in_page < guess ? in_page : guess;
	/* The object's own head may go on into the next page. */
	if (first < head)
		first = head;
	if (!copy_region(event, index, used, address, first, faulted))
		return false;
	size = object_size(event, at, off, is_str);
	/* The first read was a guess: region `index` is redone to the size. */
	event->regions_used = index;
	*used = at;
	if (size == 0 || size > PYSTROBE_CODE_REGION_MAX)
		return false;
	if (size <= first) {
		event->regions[index].size = size;
		event->regions_used = index + 1;
		*used = (at + size + 7) & ~7u;
		return true;
	}
	return copy_region(event, index, used, address, size, faulted);
}

/* Copies the code object `code` of process `tgid` and sends it; false when
 * it could not be copied whole or sent. */
static __always_inline bool send_code_copy(__u32 tgid, __u64 code, __u32 stamp,
					   const struct pystrobe_python_process *proc)
{
	const struct pystrobe_python_offsets *off = &proc->offsets;
	struct pystrobe_python_code_event *event;
	__u32 zero = 0, used = 0, region = 0, head = pystrobe_python_code_head_size(off);
	__u64 name_field, size;
	bool names_are_str, faulted = false;

	event = bpf_map_lookup_elem(&python_code_scratch, &zero);
	if (!event || head > PYTHON_COPY_SIZE)
		return false;
	event->kind = PYSTROBE_EVENT_PYTHON_CODE;
	event->pid = tgid;
	event->code = code;
	event->stamp = stamp;
	event->regions_used = 0;
	if (!copy_region(event, region++, &used, code, head, &faulted) ||
	    event_u64(event, off->object_type) != proc->code_type_addr)
		return false;
	/* A part that can never be copied is left to userspace to read. */
	if (off->code_code != PYSTROBE_PY_OFFSET_NONE &&
	    copy_region(event, region, &used, event_u64(event, off->code_code),
			off->var_object_size + 8, &faulted))
		region++;
	name_field =
	    off->code_qualname != PYSTROBE_PY_OFFSET_NONE ? off->code_qualname : off->code_name;
	/* 2.7's names are byte strings. */
	names_are_str = !off->names_are_bytes;
	if (copy_object(event, region, &used, event_u64(event, name_field), PYTHON_STR_GUESS, off,
			names_are_str, &faulted))
		region++;
	if (copy_object(event, region, &used, event_u64(event, off->code_filename),
			PYTHON_STR_GUESS, off, names_are_str, &faulted))
		region++;
	copy_object(event, region, &used, event_u64(event, off->code_linetable),
		    PYTHON_LINE_TABLE_GUESS, off, false, &faulted);
	if (faulted) {
		count_sample(PYSTROBE_COUNT_PYTHON_CODES_DEFERRED);
		return false;
	}

	size = __builtin_offsetof(struct pystrobe_python_code_event, data) + used;
	asm volatile("" : "+r"(size));
	if (size > sizeof(*event))
		size = sizeof(*event);
	if (bpf_ringbuf_output(&events, event, size, BPF_RB_NO_WAKEUP)) {
		count_drop(PYSTROBE_DROP_PYTHON_CODE);
		return false;
	}
	count_sample(PYSTROBE_COUNT_PYTHON_CODES_SENT);
	return true;
}

/* What one sample's copies have come to: how many were sent, and whether
 * the ring buffer or the budget said stop. */
struct code_copy_progress {
	__u32 sent;
	bool stopped;
};

/*
 * Sends a copy of code object `code` (stamp `stamp`) of process `tgid` unless
 * it was sent before, at time `now_ns` of the sample that met it. The walk
 * offers each code object once per sample, when it first reads it, leaf
 * first: the youngest code, likeliest to die, goes first. The walk runs
 * before the sample is sent, so userspace has the copies when it names it.
 */
static __always_inline void offer_code_copy(struct code_copy_progress *progress, __u32 tgid,
					    __u64 code, __u32 stamp, __u64 now_ns,
					    const struct pystrobe_python_process *proc)
{
	struct python_code_key key = {.tgid = tgid, .stamp = stamp, .code = code};
	struct python_code_key *cached;
	__u64 started_ns;
	__u8 one = 1;
	bool sent;

	if (progress->stopped)
		return;
	cached = sent_cache_slot(&key);
	if (cached && cached->code == key.code && cached->stamp == key.stamp &&
	    cached->tgid == key.tgid)
		return;
	if (bpf_map_lookup_elem(&python_codes_sent, &key)) {
		if (cached)
			*cached = key;
		return;
	}
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > PYTHON_CODE_RING_LIMIT) {
		count_drop(PYSTROBE_DROP_PYTHON_CODE);
		progress->stopped = true;
		return;
	}
	if (!take_code_copy_token(now_ns)) {
		count_sample(PYSTROBE_COUNT_PYTHON_CODES_DEFERRED);
		progress->stopped = true;
		return;
	}
	started_ns = bpf_ktime_get_ns();
	sent = send_code_copy(key.tgid, key.code, key.stamp, proc);
	count_sample_by(PYSTROBE_COUNT_PYTHON_CODE_COPY_NS, bpf_ktime_get_ns() - started_ns);
	if (!sent)
		return;
	bpf_map_update_elem(&python_codes_sent, &key, &one, BPF_ANY);
	if (cached)
		*cached = key;
	if (++progress->sent >= PYTHON_CODES_PER_SAMPLE)
		progress->stopped = true;
}

#endif /* PYSTROBE_BPF_PYTHON_CODE_COPY_BPF_H_ */
