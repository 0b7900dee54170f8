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
 * index entry pair and a few rows (a page of 4 KiB holds a few dozen), or
 * none of these for a pc met before in the process (native_walk_scratch's
 * rules); its return address (and rbp, when saved) come out of a copy of
 * the stack's page, read once for many frames. Several frames are walked
 * per call of bpf_loop's callback (NATIVE_FRAMES_PER_STEP), those of the
 * commonest kind with the registers held in the program's own
 * (native_fast_frames), any other one by native_frame.
 *
 * The walk runs in one global function, unwind_native_stack
 * (native_stack.bpf.h, native_unwind.bpf.c), a frame's lookup in the tables
 * in another (native_rule_of); the tables it reads, and its knobs, are in
 * unwind_tables.bpf.h.
 */
#ifndef PYSTROBE_BPF_NATIVE_UNWIND_BPF_H_
#define PYSTROBE_BPF_NATIVE_UNWIND_BPF_H_

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "compat.bpf.h"
#include "pystrobe_abi.h"
#include "sampler_output.bpf.h"
#include "unwind_tables.bpf.h"

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
/* The largest JIT frame followed through rbp. */
#define UNWIND_JIT_MAX_FRAME (1 << 20)

/*
 * The rules found for the return addresses of a process, per CPU, two
 * slots to a hash of the pc (native_rule_ways). The pcs of a stack repeat:
 * a busy program's stacks differ little from one sample to the next, and
 * before 3.11 every Python call recurses through the same few return
 * addresses of the eval loop (a 100-deep Python stack is 250 native frames
 * or more, of about 8 pcs). A hit skips the mapping's and the row's binary
 * searches, a score of bpf_loop steps and map lookups. (Interrupted pcs
 * have a cache of their own: native_leaf_slot.)
 *
 * A slot holds while the process's mappings stand: it names the process and
 * the generation of its mappings, which userspace renews with every write
 * (a library loaded or unloaded, an exec, a pid reused). A rule is a fact
 * of the binary mapped there, so it holds even when its table has been
 * unloaded since.
 */
#define UNWIND_RULE_CACHE_SLOTS 512

struct native_rule_slot {
	__u64 pc;    /* a return address */
	__u64 owner; /* native_rule_owner: the process and its mappings' generation */
	struct pystrobe_unwind_rule rule;
	__u32 table_id;	 /* marked used on a hit, as a lookup would */
	__u8 lookup_low; /* the address looked up & 15: what a PLT rule tests */
	__u8 _pad;
	/* The slot where the walk found its caller's return address last: a
	 * guess, checked (native_fast_frames). */
	__u16 caller;
};

/*
 * The rules of interrupted pcs (each walk's first frame), per CPU, by the
 * 64 bytes of code they are in, four slots to a hash of those
 * (native_leaf_set). A tick lands anywhere in a function: cached by pc, as
 * return addresses are, its pc missed at most samples and pushed return
 * addresses out of their slots. A row holds for a range of pcs (most of a
 * function's body, where it keeps no frame pointer), and a slot here holds
 * that range, as far as it lies in the pc's page. By block, not by page: a
 * page of small functions (CPython's integer arithmetic) holds dozens of
 * rows, each function's pushes and pops rows of their own, and with a slot
 * a page, a third of a spinner's ticks looked their rule up in the tables.
 */
#define UNWIND_LEAF_SET_BITS 6 /* 64 sets */
#define UNWIND_LEAF_WAYS 4
#define UNWIND_LEAF_CACHE_SLOTS ((1 << UNWIND_LEAF_SET_BITS) * UNWIND_LEAF_WAYS)

struct native_leaf_slot {
	__u64 owner; /* as a native_rule_slot's */
	__u64 start; /* the pcs [start, start + length) the rule holds for */
	__u64 bias;  /* the mapping's: a pc's address looked up is pc - bias */
	struct pystrobe_unwind_rule rule;
	__u32 length; /* within a page */
	__u32 table_id;
};

/*
 * The stack is copied a page at a time. A frame's return address and saved
 * rbp are two 8-byte reads, and the frames it returns into are just above
 * it: one read of the page they are in serves them all, where a read costs
 * about the same however few bytes it takes. A page, not a span from sp:
 * every page from sp's up to the stack's top is mapped (it holds the
 * callers' frames), but a span may reach past the top, and a read that
 * faults costs twenty good ones.
 */
#define UNWIND_STACK_WINDOW 4096

/*
 * The walk's registers and counts. In its per-CPU scratch, not in the
 * context of bpf_loop's steps (native_walk): the verifier follows what that
 * context holds value by value, across every frame of every step, where it
 * takes a value read from a map as any value.
 *
 * A walk in process context (allocations, resident growth) may be
 * interrupted by a cpu-clock walk on the same CPU, which starts its own
 * here; the sample the first then finishes is taken again (sample.bpf.h's
 * send_event_sample), as is everything else it keeps per CPU.
 */
struct native_walk_regs {
	__u64 pc, sp, bp;
	__u64 stack_value; /* what native_stack_read read */
	/* scratch->stack holds [window_addr, window_end) of the stack. */
	__u64 window_addr, window_end;
	__u32 frames; /* frames written */
	__u32 max_frames;
	__u32 jit_frames; /* frames in JIT code walked through by rbp */
	__u32 used_table; /* the table last marked used by this walk */
	__u8 no_window;	  /* a read of the stack's page failed: read alone */
	__u8 exact_pc;	  /* the pc was interrupted, not a return address */
	__u8 outcome;	  /* enum native_walk_outcome */
};

/*
 * The process walked last on a CPU and its entry in unwind_processes then,
 * as of unwind_processes_generation `seen` (plus one: 0 while the note is
 * written): a hash lookup is a kernel function that a slow rate fetches
 * again at every tick, and a CPU mostly walks the process it walked last.
 * `process`: the tgid above, the entry's generation below (0: no entry).
 * Written seen first (0), then process, then seen: a walk that interrupts
 * the writing of the note leaves its own process there with the seen of the
 * walk it interrupted, which read the generation first, so no later one.
 */
struct native_process_note {
	__u64 process;
	__u64 seen;
};

/* What a walk keeps per CPU: too big for the BPF stack. */
struct native_walk_scratch {
	struct native_process_note last_process;
	struct native_rule_slot rules[UNWIND_RULE_CACHE_SLOTS];
	struct native_leaf_slot leaves[UNWIND_LEAF_CACHE_SLOTS];
	struct native_walk_regs regs;
	/* A page of the stack, or what of it lies above sp (regs.window_addr,
	 * regs.window_end), and 8 bytes of slack so a read at any offset in
	 * it stays in bounds. */
	__u8 stack[UNWIND_STACK_WINDOW + 8];
};
/* A per-CPU map's value is at most 32 KiB (the kernel's PCPU_MIN_UNIT_SIZE):
 * past it the map is refused at load, with E2BIG. */
_Static_assert(sizeof(struct native_walk_scratch) <= 32 * 1024,
	       "native_walk_scratch is too large for a per-CPU map");

struct native_walk_scratch_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct native_walk_scratch);
};
extern struct native_walk_scratch_map native_walk_scratch SEC(".maps");

/* What the walk's steps work on: where its frames go, its cache of rules,
 * and its registers (r: scratch->regs). */
struct native_walk {
	struct pystrobe_sample *sample;
	struct native_walk_scratch *scratch;
	struct native_walk_regs *r;
	__u64 now;   /* the sample's time_ns: every fill_sample reads its own */
	__u64 owner; /* of the rule cache's slots this walk takes (native_rule_owner) */
	__u32 base;  /* index in sample->data of the first user frame */
};

enum native_walk_outcome {
	NATIVE_WALK_RUNNING = 0,
	NATIVE_WALK_COMPLETE = 1,  /* reached the outermost frame */
	NATIVE_WALK_UNKNOWN = 2,   /* a step failed: ends with [unknown] */
	NATIVE_WALK_JIT = 3,	   /* ended in anonymous executable memory */
	NATIVE_WALK_STALE = 4,	   /* a pc outside every known mapping */
	NATIVE_WALK_TRUNCATED = 5, /* out of frames */
	NATIVE_WALK_ABSENT = 6,	   /* a binary's table is not in the kernel */
};

static __always_inline void native_emit(struct native_walk *w, __u64 address)
{
	__u32 slot = w->base + w->r->frames;

	w->sample->data[slot & (PYSTROBE_SAMPLE_DATA_WORDS - 1)] = address;
	w->r->frames++;
}

/* A binary search's bounds, for bpf_loop: one step per call keeps the
 * verifier's work per step, not per path through all the steps. */
struct native_search {
	const struct pystrobe_unwind_process *proc;
	__u64 key;
	__u32 lo, hi; /* see each step */
	__u32 first_row;
	__u16 page_low; /* the page's start & 0xffff */
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

static __always_inline const struct pystrobe_unwind_packed_row *native_row(__u32 index)
{
	__u32 block = index / PYSTROBE_UNWIND_ROWS_PER_BLOCK;
	const struct pystrobe_unwind_row_block *rows = bpf_map_lookup_elem(&unwind_rows, &block);

	if (!rows)
		return NULL;
	return &rows->rows[index & (PYSTROBE_UNWIND_ROWS_PER_BLOCK - 1)];
}

/* The last row at or below key lies in [lo, hi], rows[lo] at or below it;
 * rows after lo are compared by their offset from the page's start (key is
 * that offset here). */
static long native_row_step(__u32 index, void *ctx)
{
	struct native_search *s = ctx;
	const struct pystrobe_unwind_packed_row *row;
	__u32 mid;

	if (s->lo >= s->hi)
		return 1;
	mid = s->lo + (s->hi - s->lo + 1) / 2;
	row = native_row(s->first_row + mid);
	if (!row) {
		s->failed = 1;
		return 1;
	}
	if ((__u16)(row->addr_low - s->page_low) <= s->key)
		s->lo = mid;
	else
		s->hi = mid - 1;
	return 0;
}

/* What native_find_rule and native_rule_of found. */
enum native_lookup {
	NATIVE_LOOKUP_FOUND = 0,
	NATIVE_LOOKUP_NONE = 1,	  /* no row: the walk cannot go on */
	NATIVE_LOOKUP_ABSENT = 2, /* the table is not in the kernel */
	NATIVE_LOOKUP_STALE = 3,  /* the pc is outside every known mapping */
	NATIVE_LOOKUP_JIT = 4,	  /* the pc is in anonymous executable memory */
};

/* What native_rule_of found for a pc: its rule, the link-time address it
 * was looked up for, and the link-time addresses [start, end) its row holds
 * for within that address's page. */
struct native_found {
	struct pystrobe_unwind_rule rule;
	__u64 lookup;
	__u64 start, end;
};

/*
 * The rule of `pc` in process `tgid` (an interrupted pc when `exact_pc`, else
 * a return address), looked up in the tables and put in the walk's caches,
 * for a walk at time `now`:
 * NATIVE_LOOKUP_FOUND with *found filled, or why not (enum native_lookup).
 * And whether `pc` lies in one of process `tgid`'s known mappings.
 *
 * Global functions, each verified once on its own (native_unwind.bpf.c):
 * inlined, their binary searches were verified again at every frame of a
 * step of several (NATIVE_FRAMES_PER_STEP).
 */
int native_rule_of(__u32 tgid, __u64 pc, __u32 exact_pc, __u64 now, struct native_found *found);
int native_pc_is_mapped(__u32 tgid, __u64 pc);

/* The rule of table `table_id` in effect at link-time address
 * found->lookup, with the addresses it holds for, into *found, for a walk
 * at time `now`. */
static __always_inline int native_find_rule(__u64 now, __u32 table_id, struct native_found *found)
{
	struct pystrobe_unwind_table *table = bpf_map_lookup_elem(&unwind_tables, &table_id);
	const struct pystrobe_unwind_packed_row *row, *next;
	const struct pystrobe_unwind_rule *rule;
	struct native_search s = {};
	__u32 page, entry, *bound, rule_index, first, last;
	__u64 addr = found->lookup, page_start;

	if (!table || addr > 0xffffffffull)
		return NATIVE_LOOKUP_NONE;
	if (table->state != PYSTROBE_UNWIND_TABLE_LOADED) {
		if (table->state == PYSTROBE_UNWIND_TABLE_UNAVAILABLE)
			return NATIVE_LOOKUP_NONE;
		bpf_map_update_elem(&unwind_wanted, &table_id, &now, BPF_NOEXIST);
		return NATIVE_LOOKUP_ABSENT;
	}
	page = (__u32)(addr >> PYSTROBE_UNWIND_PAGE_SHIFT);
	page_start = (__u64)page << PYSTROBE_UNWIND_PAGE_SHIFT;
	s.key = addr & ((1u << PYSTROBE_UNWIND_PAGE_SHIFT) - 1);
	s.page_low = (__u16)page_start;
	if (page < table->first_page || page - table->first_page + 1 >= table->page_count)
		return NATIVE_LOOKUP_NONE;
	entry = table->first_page_entry + (page - table->first_page);
	bound = bpf_map_lookup_elem(&unwind_pages, &entry);
	if (!bound)
		return NATIVE_LOOKUP_NONE;
	first = s.lo = *bound;
	entry++;
	bound = bpf_map_lookup_elem(&unwind_pages, &entry);
	if (!bound)
		return NATIVE_LOOKUP_NONE;
	last = s.hi = *bound;
	s.first_row = table->first_row;
	bpf_loop(UNWIND_ROW_STEPS, native_row_step, &s, 0);
	if (s.failed || s.lo < s.hi || s.lo >= table->row_count)
		return NATIVE_LOOKUP_NONE;
	row = native_row(table->first_row + s.lo);
	if (!row)
		return NATIVE_LOOKUP_NONE;
	rule_index = row->rule;
	rule = bpf_map_lookup_elem(&unwind_rules, &rule_index);
	if (!rule)
		return NATIVE_LOOKUP_NONE;
	found->rule = *rule;
	/* The page's first row may start below it; the next row, if the
	 * page has one, starts within it (pystrobe_unwind_packed_row). */
	found->start = page_start;
	if (s.lo != first)
		found->start += (__u16)(row->addr_low - s.page_low);
	found->end = page_start + (1u << PYSTROBE_UNWIND_PAGE_SHIFT);
	if (s.lo < last) {
		next = native_row(table->first_row + s.lo + 1);
		/* Unread, the next row's start is unknown: the range is addr. */
		found->end = next ? page_start + (__u16)(next->addr_low - s.page_low) : addr + 1;
	}
	unwind_table_used(table_id, now);
	return NATIVE_LOOKUP_FOUND;
}

static __always_inline bool native_read(__u64 address, __u64 *value)
{
	return bpf_probe_read_user(value, sizeof(*value), (void *)address) == 0;
}

/*
 * 8 bytes of the stack at `address` (a frame's return address or saved
 * rbp) into w->r->stack_value, out of the walk's copy of the stack: the page
 * that holds `address`, from sp where sp is in it, read when the copy is
 * of another; read alone when `address` is below sp or its 8 bytes span two
 * pages. (Into the walk, not through a pointer to the step's own stack:
 * that trips a bug of the 6.18 verifier.) A read of a page that fails ends
 * the copies for the rest of the walk: each such read faults, at the cost
 * of many good ones.
 */
static __always_inline bool native_stack_read(struct native_walk *w, __u64 address)
{
	struct native_walk_scratch *scratch = w->scratch;
	__u64 start, end, size;

	/* Most reads fall in the copy, which lies above sp in one page. */
	if (address < w->r->window_addr || address + 8 > w->r->window_end) {
		if (w->r->no_window || address < w->r->sp ||
		    (address & (UNWIND_STACK_WINDOW - 1)) > UNWIND_STACK_WINDOW - 8)
			return native_read(address, &w->r->stack_value);
		start = address & ~(__u64)(UNWIND_STACK_WINDOW - 1);
		end = start + UNWIND_STACK_WINDOW;
		if (start < w->r->sp)
			start = w->r->sp;
		size = end - start;
		if (size > UNWIND_STACK_WINDOW)
			return native_read(address, &w->r->stack_value);
		if (bpf_probe_read_user(scratch->stack, size, (void *)start)) {
			w->r->no_window = 1;
			return native_read(address, &w->r->stack_value);
		}
		w->r->window_addr = start;
		w->r->window_end = end;
	}
	w->r->stack_value = *(__u64 *)(scratch->stack +
				       ((address - w->r->window_addr) & (UNWIND_STACK_WINDOW - 1)));
	return true;
}

/*
 * A frame in anonymous executable memory has no table. The walk goes on
 * where the code's shape says how: CPython 3.12's perf trampolines return
 * with `add $8,%rsp; ret` (the caller's frame is 16 bytes up), code that
 * keeps frame pointers (V8, the JVM, trampolines built with them) with
 * `pop %rbp; ret` or, elsewhere in it, through rbp. Every step must land in
 * known code, so a JIT without either ends the stack here, never in garbage.
 */
static __always_inline long native_jit_step(struct native_walk *w)
{
	__u64 saved[2], cfa;
	__u8 code[5] = {};

	w->r->outcome = NATIVE_WALK_JIT;
	if (w->r->exact_pc)
		return 1; /* the leaf's stack is in no known state */
	bpf_probe_read_user(code, sizeof(code), (void *)w->r->pc);
	if (code[0] == 0x48 && code[1] == 0x83 && code[2] == 0xc4 && code[3] == 0x08 &&
	    code[4] == 0xc3) {
		/* add $8,%rsp; ret */
		cfa = w->r->sp + 16;
		if (bpf_probe_read_user(&saved[1], sizeof(saved[1]), (void *)(cfa - 8)))
			return 1;
		saved[0] = w->r->bp;
	} else {
		if (w->r->bp < w->r->sp || w->r->bp - w->r->sp > UNWIND_JIT_MAX_FRAME ||
		    bpf_probe_read_user(saved, sizeof(saved), (void *)w->r->bp))
			return 1;
		cfa = w->r->bp + 16;
	}
	if (!native_pc_is_mapped(w->sample->pid, saved[1]))
		return 1;
	w->r->sp = cfa;
	w->r->pc = saved[1];
	w->r->bp = saved[0];
	w->r->outcome = NATIVE_WALK_RUNNING;
	w->r->jit_frames++;
	return 0;
}

/* A slot being written is owned by no one: 0. A process whose mappings
 * have generation 0 takes no slot. */
#define NATIVE_RULE_WRITTEN 0
#define NATIVE_RULE_UNCACHED 1

/* The owner of the slots of process `tgid` while its mappings stand: both
 * compared at once. Never NATIVE_RULE_WRITTEN (a tgid is never 0). */
static __always_inline __u64 native_rule_owner(__u32 tgid, __u32 generation)
{
	return generation == 0 ? NATIVE_RULE_UNCACHED : (__u64)tgid << 32 | generation;
}

/* The first of the two slots that return address `pc` of `owner` may take:
 * two, so that two pcs of a stack that hash alike do not push each other
 * out at every walk (with one slot a pc, and interrupted pcs among them, a
 * CPython 3.12 spinner's twenty-odd frames took three lookups a sample). */
static __always_inline __u32 native_rule_ways(__u64 pc, __u64 owner)
{
	return (__u32)(((pc ^ owner) * 0x9e3779b97f4a7c15ull) >> 56) * 2;
}

/* The index of the slot that holds return address `pc` of `owner`, of the
 * two its hash allows, or UNWIND_RULE_CACHE_SLOTS when neither does. */
static __always_inline __u32 native_return_slot(const struct native_walk_scratch *scratch, __u64 pc,
						__u64 owner)
{
	__u32 way = native_rule_ways(pc, owner) & (UNWIND_RULE_CACHE_SLOTS - 1);
	const struct native_rule_slot *slot = &scratch->rules[way];

	if (slot->pc == pc && slot->owner == owner)
		return way;
	way = (way + 1) & (UNWIND_RULE_CACHE_SLOTS - 1);
	slot = &scratch->rules[way];
	if (slot->pc == pc && slot->owner == owner)
		return way;
	return UNWIND_RULE_CACHE_SLOTS;
}

/* The first of the UNWIND_LEAF_WAYS slots that interrupted pc `pc` of
 * `owner` may take, by the 64 bytes of code it is in. Four ways: a CPU
 * keeps the hot blocks of each process it runs (a spinner doing arithmetic
 * ticks in 50 to 75 blocks), and two ways lost a tenth of 3.10's ticks to
 * blocks that hashed alike. */
static __always_inline __u32 native_leaf_set(__u64 pc, __u64 owner)
{
	__u64 hash = ((pc >> 6) ^ owner) * 0x9e3779b97f4a7c15ull;

	return (__u32)(hash >> (64 - UNWIND_LEAF_SET_BITS)) * UNWIND_LEAF_WAYS;
}

static __always_inline bool native_leaf_holds(const struct native_leaf_slot *leaf, __u64 pc,
					      __u64 owner)
{
	return leaf->owner == owner && pc - leaf->start < leaf->length;
}

/* The slot that holds the rule of interrupted pc `pc` of `owner`, of those
 * its block allows, or NULL when none does. */
static __always_inline const struct native_leaf_slot *
native_leaf_slot(const struct native_walk_scratch *scratch, __u64 pc, __u64 owner)
{
	__u32 set = native_leaf_set(pc, owner);
	const struct native_leaf_slot *leaf;
	int i;

	for (i = 0; i < UNWIND_LEAF_WAYS; i++) {
		leaf = &scratch->leaves[(set + i) & (UNWIND_LEAF_CACHE_SLOTS - 1)];
		if (native_leaf_holds(leaf, pc, owner))
			return leaf;
	}
	return NULL;
}

/* Marks table `table_id` used by walk w, as a lookup in it would: once a
 * run of frames in the same binary. */
static __always_inline void native_table_walked(struct native_walk *w, __u32 table_id)
{
	if (table_id != w->r->used_table) {
		w->r->used_table = table_id;
		unwind_table_used(table_id, w->now);
	}
}

/* The rule of w->r->pc and the low bits of the address looked up for it,
 * when found before in the process's mappings as they stand. */
static __always_inline bool native_cached_rule(struct native_walk *w,
					       struct pystrobe_unwind_rule *rule, __u32 *lookup_low)
{
	__u64 pc = w->r->pc;
	struct native_rule_slot *slot;
	const struct native_leaf_slot *leaf;
	__u32 table_id, way;

	if (w->r->exact_pc) {
		leaf = native_leaf_slot(w->scratch, pc, w->owner);
		if (!leaf)
			return false;
		*rule = leaf->rule;
		*lookup_low = (pc - leaf->bias) & 15;
		table_id = leaf->table_id;
	} else {
		way = native_return_slot(w->scratch, pc, w->owner);
		if (way >= UNWIND_RULE_CACHE_SLOTS)
			return false;
		slot = &w->scratch->rules[way & (UNWIND_RULE_CACHE_SLOTS - 1)];
		*rule = slot->rule;
		*lookup_low = slot->lookup_low;
		table_id = slot->table_id;
	}
	native_table_walked(w, table_id);
	return true;
}

/* Caches what `found` says of interrupted pc `pc` of a mapping at `bias`,
 * found by a walk at time `now`. */
static __always_inline void native_cache_leaf(struct native_walk_scratch *scratch, __u64 pc,
					      __u64 owner, __u64 bias,
					      const struct native_found *found, __u32 table_id,
					      __u64 now)
{
	__u32 set = native_leaf_set(pc, owner);
	/* A way that holds nothing of this process as its mappings stand
	 * (empty, another's, stale), else one by the clock's low bits: never
	 * one way that every new block of the set takes in turn. */
	__u32 way = (__u32)(now >> 6) & (UNWIND_LEAF_WAYS - 1);
	struct native_leaf_slot *leaf;
	int i;

	if (owner == NATIVE_RULE_UNCACHED)
		return;
	for (i = 0; i < UNWIND_LEAF_WAYS; i++) {
		if (scratch->leaves[(set + i) & (UNWIND_LEAF_CACHE_SLOTS - 1)].owner != owner) {
			way = i;
			break;
		}
	}
	leaf = &scratch->leaves[(set + way) & (UNWIND_LEAF_CACHE_SLOTS - 1)];
	leaf->owner = NATIVE_RULE_WRITTEN; /* as in native_cache_rule, by start */
	asm volatile("" ::: "memory");
	leaf->start = found->start + bias;
	leaf->length = found->end > found->start ? found->end - found->start : 0;
	leaf->bias = bias;
	leaf->rule = found->rule;
	leaf->table_id = table_id;
	asm volatile("" ::: "memory");
	leaf->owner = leaf->start == found->start + bias ? owner : NATIVE_RULE_WRITTEN;
}

static __always_inline void native_cache_rule(struct native_walk_scratch *scratch, __u64 pc,
					      __u64 owner, const struct pystrobe_unwind_rule *rule,
					      __u64 lookup, __u32 table_id)
{
	__u32 way = native_rule_ways(pc, owner);
	struct native_rule_slot *slot = &scratch->rules[way & (UNWIND_RULE_CACHE_SLOTS - 1)];

	if (owner == NATIVE_RULE_UNCACHED)
		return;
	/* The first way keeps the process's first pc; the others take turns
	 * in the second. */
	if (slot->owner == owner)
		slot = &scratch->rules[(way + 1) & (UNWIND_RULE_CACHE_SLOTS - 1)];
	/* A walk that interrupts this one while the slot is half written
	 * does not take it. */
	slot->owner = NATIVE_RULE_WRITTEN;
	asm volatile("" ::: "memory");
	slot->pc = pc;
	slot->lookup_low = lookup & 15;
	slot->rule = *rule;
	slot->table_id = table_id;
	asm volatile("" ::: "memory");
	/* Nor does this one when the other wrote the slot meanwhile (a tick
	 * during an allocation's walk, of the same process): its fields may
	 * lie under the rest of these. Every write of a slot begins with its
	 * pc, and a pc that is still this one names the same rule. */
	slot->owner = slot->pc == pc ? owner : NATIVE_RULE_WRITTEN;
}

/* The caller's registers, from w's by `row`, the rule of w->r->pc (found for
 * a link-time address whose low 4 bits are `lookup_low`): 0 to go on, 1 when
 * the walk ends. */
static __always_inline long
native_step_by_rule(struct native_walk *w, const struct pystrobe_unwind_rule *row, __u32 lookup_low)
{
	__u64 cfa, ra, regs[7];

	switch (row->cfa_rule) {
	case PYSTROBE_UNWIND_CFA_RSP:
		cfa = w->r->sp + row->cfa_offset;
		break;
	case PYSTROBE_UNWIND_CFA_RBP:
		if (w->r->bp == 0) {
			w->r->outcome = NATIVE_WALK_UNKNOWN;
			return 1;
		}
		cfa = w->r->bp + row->cfa_offset;
		break;
	case PYSTROBE_UNWIND_CFA_PLT:
		cfa = w->r->sp + 8 + ((lookup_low >= (__u32)row->cfa_offset) ? 8 : 0);
		break;
	case PYSTROBE_UNWIND_CFA_SIGNAL:
		/* The handler returned into __restore_rt: rsp is the ucontext. */
		if (bpf_probe_read_user(regs, sizeof(regs),
					(void *)(w->r->sp + UNWIND_UC_MCONTEXT + UNWIND_SC_RBP))) {
			w->r->outcome = NATIVE_WALK_UNKNOWN;
			return 1;
		}
		w->r->bp = regs[0];
		w->r->sp = regs[(UNWIND_SC_RSP - UNWIND_SC_RBP) / 8];
		w->r->pc = regs[(UNWIND_SC_RIP - UNWIND_SC_RBP) / 8];
		w->r->exact_pc = 1;
		return w->r->pc == 0 ? (w->r->outcome = NATIVE_WALK_COMPLETE, 1) : 0;
	case PYSTROBE_UNWIND_CFA_END:
		w->r->outcome = NATIVE_WALK_COMPLETE;
		return 1;
	default:
		w->r->outcome = NATIVE_WALK_UNKNOWN;
		return 1;
	}
	/* The caller's frame is above this one; anything else is garbage. */
	if (cfa <= w->r->sp || !native_stack_read(w, cfa - 8)) {
		w->r->outcome = NATIVE_WALK_UNKNOWN;
		return 1;
	}
	ra = w->r->stack_value;
	if (row->rbp_rule == PYSTROBE_UNWIND_RBP_OFFSET) {
		if (!native_stack_read(w, cfa + row->rbp_offset)) {
			w->r->outcome = NATIVE_WALK_UNKNOWN;
			return 1;
		}
		w->r->bp = w->r->stack_value;
	} else if (row->rbp_rule == PYSTROBE_UNWIND_RBP_UNKNOWN) {
		w->r->bp = 0;
	}
	w->r->sp = cfa;
	w->r->pc = ra;
	w->r->exact_pc = 0;
	if (ra == 0) {
		/* Threads' outermost frames return to 0. */
		w->r->outcome = NATIVE_WALK_COMPLETE;
		return 1;
	}
	return 0;
}

/* A frame whose pc's rule is not in the walk's cache: it is looked up in
 * the tables and cached, or the frame is a JIT's. 0 to go on, 1 when the
 * walk ends. */
static __always_inline long native_step_uncached(struct native_walk *w)
{
	struct native_found found = {};

	switch (native_rule_of(w->sample->pid, w->r->pc, w->r->exact_pc, w->now, &found)) {
	case NATIVE_LOOKUP_FOUND:
		return native_step_by_rule(w, &found.rule, found.lookup & 15);
	case NATIVE_LOOKUP_JIT:
		return native_jit_step(w);
	case NATIVE_LOOKUP_STALE:
		w->r->outcome = NATIVE_WALK_STALE;
		return 1;
	case NATIVE_LOOKUP_ABSENT:
		w->r->outcome = NATIVE_WALK_ABSENT;
		return 1;
	default:
		w->r->outcome = NATIVE_WALK_UNKNOWN;
		return 1;
	}
}

/*
 * Frames walked per call of the bpf_loop callback: a call and its return
 * cost about a quarter of a frame's work on a host whose CPU guards returns
 * (AMD's Safe RET), and before 3.11 a 100-deep Python stack is 250 native
 * frames or more.
 */
#define NATIVE_FRAMES_PER_STEP 8

/* One frame, whatever its kind: record its pc, then find the caller's
 * registers by its rule, looked up in the tables when it is not cached.
 * 0 to go on, 1 when the walk ends. */
static __always_inline long native_frame(struct native_walk *w)
{
	struct pystrobe_unwind_rule rule = {};
	__u32 lookup_low;

	if (w->r->frames >= w->r->max_frames) {
		w->r->outcome = NATIVE_WALK_TRUNCATED;
		return 1;
	}
	native_emit(w, w->r->pc);
	if (!native_cached_rule(w, &rule, &lookup_low))
		return native_step_uncached(w);
	return native_step_by_rule(w, &rule, lookup_low);
}

enum native_fast_outcome {
	NATIVE_FAST_WALKED,  /* NATIVE_FRAMES_PER_STEP frames */
	NATIVE_FAST_STOPPED, /* at a frame native_frame must take */
	NATIVE_FAST_ENDED,   /* the walk is over: w->r->outcome says how */
};

/*
 * Up to NATIVE_FRAMES_PER_STEP frames of the commonest kind, with the
 * walk's registers in the program's own: a return address whose rule is
 * cached, the CFA rsp or rbp plus an offset, the return address and a
 * saved rbp in the copy of the stack. That is nearly every frame of a deep
 * stack, and a frame in another binary than the last is one too (its
 * table is stamped used on the way). Walked through
 * w->r (native_frame), such a frame took about 100 BPF instructions, a
 * third of them loads and stores of the registers; here about 65. It stops
 * at the first frame of another kind, unrecorded, for native_frame.
 */
static __always_inline enum native_fast_outcome native_fast_frames(struct native_walk *w)
{
	struct native_walk_regs *r = w->r;
	struct native_rule_slot *slot, *callee = &w->scratch->rules[0];
	__u64 pc = r->pc, sp = r->sp, bp = r->bp, window = r->window_addr;
	__u64 cfa, at, saved_bp_at, span;
	__u64 *data = w->sample->data;
	__u32 frames = r->frames, way, guess;
	enum native_fast_outcome outcome = NATIVE_FAST_STOPPED;
	int i;

	/* An interrupted pc is cached by its range (native_leaf_slot); the stack
	 * may not be copied yet. */
	if (r->exact_pc || r->window_end < window + 8)
		return NATIVE_FAST_STOPPED;
	span = r->window_end - window - 8; /* the last offset of a read in the copy */
	guess = native_rule_ways(pc, w->owner);
	for (i = 0; i < NATIVE_FRAMES_PER_STEP; i++) {
		if (frames >= r->max_frames) {
			r->outcome = NATIVE_WALK_TRUNCATED;
			outcome = NATIVE_FAST_ENDED;
			break;
		}
		/*
		 * Most often the pc's slot is the one its callee's slot names:
		 * the frames of a deep stack follow one another in the same
		 * few ways (the eval loop's), and the CPU goes on with that
		 * slot's rule while the pc is still being read, where a hash
		 * of the pc waited for it. Otherwise the hash's two ways, and
		 * the callee's slot learns. (The first frame's guess is the
		 * hash's first way.)
		 */
		slot = &w->scratch->rules[guess & (UNWIND_RULE_CACHE_SLOTS - 1)];
		if (slot->pc != pc || slot->owner != w->owner) {
			way = native_return_slot(w->scratch, pc, w->owner);
			if (way >= UNWIND_RULE_CACHE_SLOTS)
				break;
			slot = &w->scratch->rules[way & (UNWIND_RULE_CACHE_SLOTS - 1)];
			if (i > 0)
				callee->caller = way;
		}
		native_table_walked(w, slot->table_id);
		if (slot->rule.cfa_rule == PYSTROBE_UNWIND_CFA_RSP)
			cfa = sp + slot->rule.cfa_offset;
		else if (slot->rule.cfa_rule == PYSTROBE_UNWIND_CFA_RBP && bp != 0)
			cfa = bp + slot->rule.cfa_offset;
		else
			break;
		/* Unsigned: an address below the copy wraps past span. */
		at = cfa - 8 - window;
		if (cfa <= sp || at > span)
			break;
		if (slot->rule.rbp_rule == PYSTROBE_UNWIND_RBP_OFFSET) {
			saved_bp_at = cfa + slot->rule.rbp_offset - window;
			if (saved_bp_at > span)
				break;
			bp = *(__u64 *)(w->scratch->stack +
					(saved_bp_at & (UNWIND_STACK_WINDOW - 1)));
		} else if (slot->rule.rbp_rule == PYSTROBE_UNWIND_RBP_UNKNOWN) {
			bp = 0;
		}
		data[(w->base + frames) & (PYSTROBE_SAMPLE_DATA_WORDS - 1)] = pc;
		frames++;
		pc = *(__u64 *)(w->scratch->stack + (at & (UNWIND_STACK_WINDOW - 1)));
		sp = cfa;
		guess = slot->caller;
		callee = slot;
		if (pc == 0) {
			/* Threads' outermost frames return to 0. */
			r->outcome = NATIVE_WALK_COMPLETE;
			outcome = NATIVE_FAST_ENDED;
			break;
		}
	}
	if (i == NATIVE_FRAMES_PER_STEP)
		outcome = NATIVE_FAST_WALKED;
	r->pc = pc;
	r->sp = sp;
	r->bp = bp;
	r->frames = frames;
	return outcome;
}

/* Up to NATIVE_FRAMES_PER_STEP frames the fast way, and the frame that
 * stopped them the careful way. */
static long native_unwind_step(__u32 index, void *ctx)
{
	struct native_walk *w = ctx;

	switch (native_fast_frames(w)) {
	case NATIVE_FAST_WALKED:
		return 0;
	case NATIVE_FAST_STOPPED:
		return native_frame(w);
	default:
		return 1;
	}
}

/* The generation of process `tgid`'s entry in unwind_processes, 0 when it
 * has none: from this CPU's note when no entry has changed since. */
static __always_inline __u32 native_process_generation(struct native_walk_scratch *scratch,
						       __u32 tgid)
{
	struct native_process_note *note = &scratch->last_process;
	__u64 seen = *(volatile __u64 *)&unwind_processes_generation + 1;
	const struct pystrobe_unwind_process *proc;
	__u32 generation;

	if (note->seen == seen && note->process >> 32 == tgid)
		return (__u32)note->process;
	proc = bpf_map_lookup_elem(&unwind_processes, &tgid);
	generation = proc ? proc->generation : 0;
	note->seen = 0;
	asm volatile("" ::: "memory");
	note->process = (__u64)tgid << 32 | generation;
	asm volatile("" ::: "memory");
	note->seen = seen;
	return generation;
}

/*
 * Walks the current thread's user stack with the tables into
 * sample->data[base...], from `regs` (its user registers). Returns the
 * frames written, or -1 when the process is not walked with tables (the
 * caller falls back to bpf_get_stack). A process that should be but whose
 * mappings userspace has not read yet gets its pc and one [unknown].
 */
static __always_inline long native_unwind(struct pystrobe_sample *sample, __u32 base,
					  __u32 max_frames, __u64 ip, __u64 sp, __u64 bp,
					  bool python)
{
	__u32 tgid = sample->pid, zero = 0, generation;
	struct native_walk w = {};

	if (!native_unwinding)
		return -1;
	w.sample = sample;
	w.base = base;
	w.scratch = bpf_map_lookup_elem(&native_walk_scratch, &zero);
	if (!w.scratch)
		return -1;
	generation = native_process_generation(w.scratch, tgid);
	if (generation == 0) {
		/* Kernel threads have no user stack: bpf_get_stack says so. */
		if ((!native_unwinding_all && !python) || !bpf_get_current_task_btf()->mm)
			return -1;
		sample->data[base & (PYSTROBE_SAMPLE_DATA_WORDS - 1)] = ip;
		sample->data[(base + 1) & (PYSTROBE_SAMPLE_DATA_WORDS - 1)] =
		    PYSTROBE_UNWIND_FRAME_UNKNOWN;
		count_drop(PYSTROBE_DROP_NATIVE_NOT_TRACKED);
		count_drop(PYSTROBE_DROP_NATIVE_UNWIND);
		return 2;
	}
	w.now = sample->time_ns;
	w.owner = native_rule_owner(tgid, generation);
	w.r = &w.scratch->regs;
	*w.r = (struct native_walk_regs){.pc = ip,
					 .sp = sp,
					 .bp = bp,
					 .max_frames = max_frames,
					 .used_table = PYSTROBE_UNWIND_TABLE_NONE,
					 .exact_pc = 1};
	bpf_loop(max_frames, native_unwind_step, &w, 0);
	if (w.r->jit_frames)
		count_sample(PYSTROBE_COUNT_NATIVE_THROUGH_JIT);
	switch (w.r->outcome) {
	case NATIVE_WALK_COMPLETE:
		count_sample(PYSTROBE_COUNT_NATIVE_COMPLETE);
		break;
	case NATIVE_WALK_JIT:
		count_sample(PYSTROBE_COUNT_NATIVE_JIT);
		break;
	case NATIVE_WALK_STALE:
	case NATIVE_WALK_ABSENT:
	case NATIVE_WALK_UNKNOWN:
		/* The stack ends with [unknown]; the first two say why. */
		if (w.r->outcome == NATIVE_WALK_STALE) {
			sample->flags |= PYSTROBE_SAMPLE_NATIVE_STALE;
			count_drop(PYSTROBE_DROP_NATIVE_STALE_MAPPINGS);
		} else if (w.r->outcome == NATIVE_WALK_ABSENT) {
			sample->flags |= PYSTROBE_SAMPLE_NATIVE_TABLE_WANTED;
			count_drop(PYSTROBE_DROP_NATIVE_TABLE_ABSENT);
		}
		if (w.r->frames < max_frames)
			native_emit(&w, PYSTROBE_UNWIND_FRAME_UNKNOWN);
		count_drop(PYSTROBE_DROP_NATIVE_UNWIND);
		break;
	default:
		sample->flags |= PYSTROBE_SAMPLE_NATIVE_TRUNCATED;
		count_sample(PYSTROBE_COUNT_NATIVE_TRUNCATED);
		break;
	}
	return w.r->frames;
}

#endif /* PYSTROBE_BPF_NATIVE_UNWIND_BPF_H_ */
