/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * pystrobe_abi.h's part for native unwinding: tables, rows, mappings.
 * Included by pystrobe_abi.h, after its types and PYSTROBE_ABI_ASSERT: include that.
 * The same rules hold: byte-for-byte layouts, sizes asserted, and any change
 * bumps PYSTROBE_ABI_VERSION there.
 */
#ifndef PYSTROBE_BPF_PYSTROBE_ABI_UNWIND_H_
#define PYSTROBE_BPF_PYSTROBE_ABI_UNWIND_H_

#ifndef PYSTROBE_BPF_PYSTROBE_ABI_H_
#error "include pystrobe_abi.h, not its parts"
#endif

/* ==== native unwinding ==================================================
 * Owned by daemon/unwind/ (tables) and daemon/loader/unwind_maps.* (maps).
 * Userspace turns a binary's .eh_frame/.debug_frame into a table of rows,
 * one per address range with one rule; the kernel walks a thread's native
 * stack with them from its user registers (bpf/native_unwind.bpf.h).
 *
 * A table's rows are sorted by `addr`, the binary's link-time virtual
 * address where the row's rule starts; a row holds until the next one. A
 * process's mapping turns a pc into that address: addr = pc - bias.
 *
 * Userspace builds full rows (pystrobe_unwind_row); the kernel holds them
 * packed, 4 bytes each (pystrobe_unwind_packed_row): the low 16 bits of the
 * address (the page index gives the rest) and the index of the row's rule in
 * one dictionary that every table shares (a binary uses a few hundred
 * distinct rules, libtorch_cpu's 1.4M rows 642). Packed rows of every table
 * live in one array map (unwind_rows), in blocks of
 * PYSTROBE_UNWIND_ROWS_PER_BLOCK.
 */

/* How the canonical frame address (the caller's rsp) is found. */
enum pystrobe_unwind_cfa_rule {
	/* No rule here: a gap between functions, or a rule pystrobe does not
	 * follow (a DWARF expression). The walk ends with one [unknown]. */
	PYSTROBE_UNWIND_CFA_INVALID = 0,
	PYSTROBE_UNWIND_CFA_RSP = 1, /* rsp + cfa_offset */
	PYSTROBE_UNWIND_CFA_RBP = 2, /* rbp + cfa_offset */
	/* GCC's PLT entries: rsp + 8, + 8 more from the 11th byte of each
	 * 16-byte entry on (after its push). */
	PYSTROBE_UNWIND_CFA_PLT = 3,
	/* A signal trampoline (__restore_rt): rsp points at the ucontext the
	 * kernel pushed; the interrupted frame's registers are read there. */
	PYSTROBE_UNWIND_CFA_SIGNAL = 4,
	/* The outermost frame (_start, clone: the return address is
	 * undefined): the stack ends here, complete. */
	PYSTROBE_UNWIND_CFA_END = 5,
};

/* Where the caller's rbp is; pystrobe_unwind_rule.rbp_rule. */
enum pystrobe_unwind_rbp_rule {
	PYSTROBE_UNWIND_RBP_SAME = 0,	 /* not saved: the caller's rbp is rbp */
	PYSTROBE_UNWIND_RBP_OFFSET = 1,	 /* saved at CFA + rbp_offset */
	PYSTROBE_UNWIND_RBP_UNKNOWN = 2, /* in another register or an expression */
};

/* A row as userspace builds it: where a rule starts, and the rule. */
struct pystrobe_unwind_row {
	__u32 addr;	  /* link-time virtual address the rule starts at */
	__s32 cfa_offset; /* with CFA_RSP/CFA_RBP */
	__s16 rbp_offset; /* with RBP_OFFSET */
	__u8 cfa_rule;	  /* enum pystrobe_unwind_cfa_rule */
	__u8 rbp_rule;	  /* enum pystrobe_unwind_rbp_rule */
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_unwind_row) == 12, "ABI: pystrobe_unwind_row");

/* One rule of the shared dictionary: map unwind_rules, by rule index.
 * Index 0 is the INVALID rule (all zeroes). */
struct pystrobe_unwind_rule {
	__s32 cfa_offset;
	__s16 rbp_offset;
	__u8 cfa_rule; /* enum pystrobe_unwind_cfa_rule */
	__u8 rbp_rule; /* enum pystrobe_unwind_rbp_rule */
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_unwind_rule) == 8, "ABI: pystrobe_unwind_rule");
#define PYSTROBE_UNWIND_MAX_RULES 65536 /* a rule index is 16 bits */

/* A row as the kernel holds it. */
struct pystrobe_unwind_packed_row {
	/* addr & 0xffff. Within a page's rows (see PYSTROBE_UNWIND_PAGE_SHIFT)
	 * every address after the page's first row is in (page start, page
	 * start + page size], so (addr_low - page start) mod 2^16 is exact. */
	__u16 addr_low;
	__u16 rule; /* index in unwind_rules */
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_unwind_packed_row) == 4,
		    "ABI: pystrobe_unwind_packed_row");

#define PYSTROBE_UNWIND_ROWS_PER_BLOCK 64
struct pystrobe_unwind_row_block {
	struct pystrobe_unwind_packed_row rows[PYSTROBE_UNWIND_ROWS_PER_BLOCK];
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_unwind_row_block) == 256,
		    "ABI: pystrobe_unwind_row_block");

/*
 * A table's page index cuts the search: for each page of
 * 1 << PYSTROBE_UNWIND_PAGE_SHIFT bytes from first_page on, the index (from
 * the table's first row) of the row in effect at the page's start. The rows
 * a pc of page p may need lie between the entries of p and p + 1, a few
 * dozen at most, instead of the whole table. A table's first row is at or
 * below its first page's start (userspace puts an INVALID row there), so
 * the row an entry names is in effect for the whole page up to the next row.
 */
#define PYSTROBE_UNWIND_PAGE_SHIFT 12

/* Whether a table's rows are in the kernel; pystrobe_unwind_table.state. */
enum pystrobe_unwind_table_state {
	/* Not loaded (not built yet, or evicted for room): the walk ends with
	 * [unknown] and asks for it (map unwind_wanted). */
	PYSTROBE_UNWIND_TABLE_ABSENT = 0,
	PYSTROBE_UNWIND_TABLE_LOADED = 1,
	/* The file has no usable call frame information, or its table never
	 * fits: the walk ends with [unknown] and asks for nothing. */
	PYSTROBE_UNWIND_TABLE_UNAVAILABLE = 2,
};

/* One table as the kernel finds it: map unwind_tables, by table id. */
struct pystrobe_unwind_table {
	__u32 first_row; /* index in unwind_rows' rows (block * 64 + slot) */
	__u32 row_count;
	__u32 first_page_entry; /* index in unwind_pages of first_page's entry */
	__u32 page_count;	/* entries: pages covered, plus one past the last */
	__u32 first_page;	/* lowest row address >> PYSTROBE_UNWIND_PAGE_SHIFT */
	__u32 state;		/* enum pystrobe_unwind_table_state */
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_unwind_table) == 24, "ABI: pystrobe_unwind_table");

/* Table ids are below this: map unwind_tables' size. */
#define PYSTROBE_UNWIND_MAX_TABLES 8192

/* Special table ids of a mapping. */
#define PYSTROBE_UNWIND_TABLE_NONE 0xffffffffu /* a file without unwind info */
#define PYSTROBE_UNWIND_TABLE_JIT 0xfffffffeu  /* anonymous executable memory */

/* One executable mapping of a process, sorted by start. */
struct pystrobe_unwind_mapping {
	__u64 start; /* [start, end) in the process */
	__u64 end;
	__u64 bias; /* pc - bias = the binary's link-time address */
	__u32 table_id;
	__u32 _pad;
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_unwind_mapping) == 32, "ABI: pystrobe_unwind_mapping");

#define PYSTROBE_UNWIND_MAX_MAPPINGS 512
/* A process's executable mappings: map unwind_processes, by tgid. */
struct pystrobe_unwind_process {
	__u32 count;
	/* New with each write by userspace, never 0: the kernel keeps the
	 * rules it found for this process's pcs while it stands. */
	__u32 generation;
	struct pystrobe_unwind_mapping mappings[PYSTROBE_UNWIND_MAX_MAPPINGS];
};
PYSTROBE_ABI_ASSERT(sizeof(struct pystrobe_unwind_process) == 8 + 32 * PYSTROBE_UNWIND_MAX_MAPPINGS,
		    "ABI: pystrobe_unwind_process");

/* Frames the native walk writes in place of an address it could not
 * follow: userspace shows them as [unknown] and [jit]. Neither is a
 * user-space address (those are below 1 << 47). */
#define PYSTROBE_UNWIND_FRAME_UNKNOWN 0xfffffffffffff001ull
#define PYSTROBE_UNWIND_FRAME_JIT 0xfffffffffffff002ull
/* ==== end of native unwinding ============================================ */

#endif /* PYSTROBE_BPF_PYSTROBE_ABI_UNWIND_H_ */
