/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The native stack walk without frame pointers: from the sampled thread's
 * user registers, each frame's caller is found with the rows userspace built
 * from the binary's DWARF call frame information (daemon/unwind/, layout in
 * pystrobe_abi.h). A frame the tables cannot step past ends the stack with
 * one PYSTROBE_UNWIND_FRAME_UNKNOWN; code in anonymous executable memory
 * (a JIT) ends it where it is, named by userspace.
 *
 * Cost per frame: a binary search over the process's mappings, a page
 * index entry pair, a few rows (a page of 4 KiB holds a few dozen), and one
 * read of the target's stack for the return address (two when rbp was
 * saved).
 */
#ifndef PYSTROBE_BPF_NATIVE_UNWIND_BPF_H_
#define PYSTROBE_BPF_NATIVE_UNWIND_BPF_H_

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "compat.bpf.h"
#include "pystrobe_abi.h"
#include "sampler_output.bpf.h"

/* Set by the loader (--native with unwind tables): processes in
 * unwind_processes are walked with tables, others as before. */
const volatile __u8 native_unwinding = 0;

/*
 * Rows of every table, 16 to a value (pystrobe_unwind_row_block). Key:
 * block index. Sized by the loader (daemon/loader/unwind_maps.h) before load:
 * 32 MiB by default, which holds python3.11, libc and numpy's BLAS many times.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pystrobe_unwind_row_block);
} unwind_rows SEC(".maps");

/* Page index entries of every table (see PYSTROBE_UNWIND_PAGE_SHIFT).
 * Key: entry index. Value: row index within its table. Sized by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} unwind_pages SEC(".maps");

/* Where each table lies in unwind_rows and unwind_pages. Key: table id
 * (UnwindTableCache's). Value: struct pystrobe_unwind_table. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct pystrobe_unwind_table);
} unwind_tables SEC(".maps");

/* The executable mappings of each process walked with tables. Key: tgid.
 * Value: struct pystrobe_unwind_process (16 KiB), written whole by
 * userspace on the process's first sample, exec and after a stale hit;
 * deleted at exit. Allocated on use. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct pystrobe_unwind_process);
} unwind_processes SEC(".maps");

/* Steps of a binary search: 2^10 > PYSTROBE_UNWIND_MAX_MAPPINGS, and a
 * page's rows are far fewer than 2^12. */
#define UNWIND_MAPPING_STEPS 10
#define UNWIND_ROW_STEPS 12
/* ucontext_t.uc_mcontext (after uc_flags, uc_link, uc_stack) and the
 * offsets of rbp, rsp and rip in it (struct sigcontext, x86-64). */
#define UNWIND_UC_MCONTEXT 40
#define UNWIND_SC_RBP 80
#define UNWIND_SC_RSP 120
#define UNWIND_SC_RIP 128

/* The walk's registers and where its frames go. */
struct native_walk {
	struct pystrobe_sample *sample;
	const struct pystrobe_unwind_process *proc;
	__u64 pc, sp, bp;
	__u32 base;   /* index in sample->data of the first user frame */
	__u32 frames; /* frames written */
	__u32 max_frames;
	__u8 exact_pc; /* the pc was interrupted, not a return address */
	__u8 outcome;  /* enum native_walk_outcome */
};

enum native_walk_outcome {
	NATIVE_WALK_RUNNING = 0,
	NATIVE_WALK_COMPLETE = 1,  /* reached the outermost frame */
	NATIVE_WALK_UNKNOWN = 2,   /* a step failed: ends with [unknown] */
	NATIVE_WALK_JIT = 3,	   /* ended in anonymous executable memory */
	NATIVE_WALK_STALE = 4,	   /* a pc outside every known mapping */
	NATIVE_WALK_TRUNCATED = 5, /* out of frames */
};

static __always_inline void native_emit(struct native_walk *w, __u64 address)
{
	__u32 slot = w->base + w->frames;

	w->sample->data[slot & (PYSTROBE_SAMPLE_DATA_WORDS - 1)] = address;
	w->frames++;
}

/* A binary search's bounds, for bpf_loop: one step per call keeps the
 * verifier's work per step, not per path through all the steps. */
struct native_search {
	const struct pystrobe_unwind_process *proc;
	__u64 key;
	__u32 lo, hi; /* see each step */
	__u32 first_row;
	__u8 failed;
};

/* The last mapping that starts at or below key lies in [lo, hi). */
static long native_mapping_step(__u32 index, void *ctx)
{
	struct native_search *s = ctx;
	__u32 mid;

	if (s->hi - s->lo <= 1)
		return 1;
	mid = (s->lo + s->hi) / 2;
	if (s->proc->mappings[mid & (PYSTROBE_UNWIND_MAX_MAPPINGS - 1)].start <= s->key)
		s->lo = mid;
	else
		s->hi = mid;
	return 0;
}

/* The mapping holding `pc`, or NULL. */
static __always_inline const struct pystrobe_unwind_mapping *
native_find_mapping(const struct pystrobe_unwind_process *proc, __u64 pc)
{
	struct native_search s = {.proc = proc, .key = pc, .lo = 0, .hi = proc->count};
	__u32 lo;

	if (s.hi > PYSTROBE_UNWIND_MAX_MAPPINGS)
		s.hi = PYSTROBE_UNWIND_MAX_MAPPINGS;
	if (s.hi == 0)
		return NULL;
	bpf_loop(UNWIND_MAPPING_STEPS, native_mapping_step, &s, 0);
	lo = s.lo & (PYSTROBE_UNWIND_MAX_MAPPINGS - 1);
	if (pc < proc->mappings[lo].start || pc >= proc->mappings[lo].end)
		return NULL;
	return &proc->mappings[lo];
}

static __always_inline const struct pystrobe_unwind_row *native_row(__u32 index)
{
	__u32 block = index / PYSTROBE_UNWIND_ROWS_PER_BLOCK;
	const struct pystrobe_unwind_row_block *rows = bpf_map_lookup_elem(&unwind_rows, &block);

	if (!rows)
		return NULL;
	return &rows->rows[index & (PYSTROBE_UNWIND_ROWS_PER_BLOCK - 1)];
}

/* The last row at or below key lies in [lo, hi], rows[lo] at or below it. */
static long native_row_step(__u32 index, void *ctx)
{
	struct native_search *s = ctx;
	const struct pystrobe_unwind_row *row;
	__u32 mid;

	if (s->lo >= s->hi)
		return 1;
	mid = s->lo + (s->hi - s->lo + 1) / 2;
	row = native_row(s->first_row + mid);
	if (!row) {
		s->failed = 1;
		return 1;
	}
	if (row->addr <= s->key)
		s->lo = mid;
	else
		s->hi = mid - 1;
	return 0;
}

/* The row of table `table_id` in effect at link-time address `addr`. */
static __always_inline const struct pystrobe_unwind_row *native_find_row(__u32 table_id, __u64 addr)
{
	const struct pystrobe_unwind_table *table = bpf_map_lookup_elem(&unwind_tables, &table_id);
	const struct pystrobe_unwind_row *row;
	struct native_search s = {.key = addr};
	__u32 page, entry, *bound;

	if (!table || addr > 0xffffffffull)
		return NULL;
	page = (__u32)(addr >> PYSTROBE_UNWIND_PAGE_SHIFT);
	if (page < table->first_page || page - table->first_page + 1 >= table->page_count)
		return NULL;
	entry = table->first_page_entry + (page - table->first_page);
	bound = bpf_map_lookup_elem(&unwind_pages, &entry);
	if (!bound)
		return NULL;
	s.lo = *bound;
	entry++;
	bound = bpf_map_lookup_elem(&unwind_pages, &entry);
	if (!bound)
		return NULL;
	s.hi = *bound;
	s.first_row = table->first_row;
	bpf_loop(UNWIND_ROW_STEPS, native_row_step, &s, 0);
	if (s.failed || s.lo < s.hi)
		return NULL;
	row = native_row(table->first_row + s.lo);
	if (!row || row->addr > addr)
		return NULL;
	return row;
}

static __always_inline bool native_read(__u64 address, __u64 *value)
{
	return bpf_probe_read_user(value, sizeof(*value), (void *)address) == 0;
}

/* One frame: record the pc, then find the caller's registers. */
static long native_unwind_step(__u32 index, void *ctx)
{
	struct native_walk *w = ctx;
	const struct pystrobe_unwind_mapping *mapping;
	const struct pystrobe_unwind_row *row;
	__u64 lookup, cfa, ra, regs[7];

	if (w->frames >= w->max_frames) {
		w->outcome = NATIVE_WALK_TRUNCATED;
		return 1;
	}
	native_emit(w, w->pc);
	mapping = native_find_mapping(w->proc, w->pc);
	if (!mapping) {
		w->outcome = NATIVE_WALK_STALE;
		return 1;
	}
	if (mapping->table_id == PYSTROBE_UNWIND_TABLE_JIT) {
		w->outcome = NATIVE_WALK_JIT;
		return 1;
	}
	/* A return address is the instruction after the call: the call itself,
	 * one byte earlier, is in the calling function (which may end with it). */
	lookup = w->pc - mapping->bias - (w->exact_pc ? 0 : 1);
	row = mapping->table_id == PYSTROBE_UNWIND_TABLE_NONE
		  ? NULL
		  : native_find_row(mapping->table_id, lookup);
	if (!row) {
		w->outcome = NATIVE_WALK_UNKNOWN;
		return 1;
	}
	switch (row->cfa_rule) {
	case PYSTROBE_UNWIND_CFA_RSP:
		cfa = w->sp + row->cfa_offset;
		break;
	case PYSTROBE_UNWIND_CFA_RBP:
		if (w->bp == 0) {
			w->outcome = NATIVE_WALK_UNKNOWN;
			return 1;
		}
		cfa = w->bp + row->cfa_offset;
		break;
	case PYSTROBE_UNWIND_CFA_PLT:
		cfa = w->sp + 8 + (((lookup & 15) >= (__u64)row->cfa_offset) ? 8 : 0);
		break;
	case PYSTROBE_UNWIND_CFA_SIGNAL:
		/* The handler returned into __restore_rt: rsp is the ucontext. */
		if (bpf_probe_read_user(regs, sizeof(regs),
					(void *)(w->sp + UNWIND_UC_MCONTEXT + UNWIND_SC_RBP))) {
			w->outcome = NATIVE_WALK_UNKNOWN;
			return 1;
		}
		w->bp = regs[0];
		w->sp = regs[(UNWIND_SC_RSP - UNWIND_SC_RBP) / 8];
		w->pc = regs[(UNWIND_SC_RIP - UNWIND_SC_RBP) / 8];
		w->exact_pc = 1;
		return w->pc == 0 ? (w->outcome = NATIVE_WALK_COMPLETE, 1) : 0;
	case PYSTROBE_UNWIND_CFA_END:
		w->outcome = NATIVE_WALK_COMPLETE;
		return 1;
	default:
		w->outcome = NATIVE_WALK_UNKNOWN;
		return 1;
	}
	/* The caller's frame is above this one; anything else is garbage. */
	if (cfa <= w->sp || !native_read(cfa - 8, &ra)) {
		w->outcome = NATIVE_WALK_UNKNOWN;
		return 1;
	}
	if (row->rbp_rule == PYSTROBE_UNWIND_RBP_OFFSET) {
		if (!native_read(cfa + row->rbp_offset, &w->bp)) {
			w->outcome = NATIVE_WALK_UNKNOWN;
			return 1;
		}
	} else if (row->rbp_rule == PYSTROBE_UNWIND_RBP_UNKNOWN) {
		w->bp = 0;
	}
	w->sp = cfa;
	w->pc = ra;
	w->exact_pc = 0;
	if (ra == 0) {
		/* Threads' outermost frames return to 0. */
		w->outcome = NATIVE_WALK_COMPLETE;
		return 1;
	}
	return 0;
}

/*
 * Walks the current thread's user stack with the tables into
 * sample->data[base...], from `regs` (its user registers). Returns the
 * frames written, or -1 when the process has no tables (the caller falls
 * back to bpf_get_stack).
 */
static __always_inline long native_unwind(struct pystrobe_sample *sample, __u32 base,
					  __u32 max_frames, __u64 ip, __u64 sp, __u64 bp)
{
	__u32 tgid = sample->pid;
	struct native_walk w = {};

	if (!native_unwinding)
		return -1;
	w.proc = bpf_map_lookup_elem(&unwind_processes, &tgid);
	if (!w.proc)
		return -1;
	w.sample = sample;
	w.base = base;
	w.max_frames = max_frames;
	w.pc = ip;
	w.sp = sp;
	w.bp = bp;
	w.exact_pc = 1;
	bpf_loop(max_frames, native_unwind_step, &w, 0);
	switch (w.outcome) {
	case NATIVE_WALK_COMPLETE:
		count_sample(PYSTROBE_COUNT_NATIVE_COMPLETE);
		break;
	case NATIVE_WALK_JIT:
		count_sample(PYSTROBE_COUNT_NATIVE_JIT);
		break;
	case NATIVE_WALK_STALE:
		sample->flags |= PYSTROBE_SAMPLE_NATIVE_STALE;
		count_drop(PYSTROBE_DROP_NATIVE_STALE_MAPPINGS);
		/* fall through: the stack ends with [unknown] */
	case NATIVE_WALK_UNKNOWN:
		if (w.frames < max_frames)
			native_emit(&w, PYSTROBE_UNWIND_FRAME_UNKNOWN);
		count_drop(PYSTROBE_DROP_NATIVE_UNWIND);
		break;
	default:
		sample->flags |= PYSTROBE_SAMPLE_NATIVE_TRUNCATED;
		count_sample(PYSTROBE_COUNT_NATIVE_TRUNCATED);
		break;
	}
	return w.frames;
}

#endif /* PYSTROBE_BPF_NATIVE_UNWIND_BPF_H_ */
