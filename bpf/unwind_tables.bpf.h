/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The unwind tables in the kernel, as userspace writes them
 * (daemon/loader/unwind_maps.h; layout in pystrobe_abi.h): the rows, their
 * page index and rules, each table's place and state, the tables a walk
 * wanted, and each walked process's mappings. Also the knobs that switch the
 * walk on. Declared here for the walk (native_unwind.bpf.h) and for the
 * process events that drop a process's mappings; defined once, in
 * unwind_tables.bpf.c.
 */
#ifndef PYSTROBE_BPF_UNWIND_TABLES_BPF_H_
#define PYSTROBE_BPF_UNWIND_TABLES_BPF_H_

#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "pystrobe_abi.h"

/* Set by the loader (--native with unwind tables): processes in
 * unwind_processes are walked with tables. */
extern const volatile __u8 native_unwinding;
/* Set by the loader when every process is walked with tables (record
 * --native), not only CPython ones: a process not read yet then gets its pc
 * and one [unknown], as a CPython process always does, never a
 * frame-pointer guess. */
extern const volatile __u8 native_unwinding_all;

/*
 * Packed rows of every table, 64 to a value (pystrobe_unwind_row_block).
 * Key: block index. Sized by the loader (daemon/loader/unwind_maps.h) before
 * load from the table budget (record --native-table-mib): 32 MiB by default,
 * 8M rows, which holds a torch process's busy binaries (libtorch_cpu: 1.3M).
 */
struct unwind_rows_map {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pystrobe_unwind_row_block);
};
extern struct unwind_rows_map unwind_rows SEC(".maps");

/* Page index entries of every table (see PYSTROBE_UNWIND_PAGE_SHIFT).
 * Key: entry index. Value: row index within its table. Sized by the loader. */
struct unwind_pages_map {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
};
extern struct unwind_pages_map unwind_pages SEC(".maps");

/* The rules every table's rows name (pystrobe_unwind_rule). Key: rule
 * index (a packed row's `rule`). Written by userspace as tables bring new
 * rules; never shrinks (a few thousand on a whole system). */
struct unwind_rules_map {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PYSTROBE_UNWIND_MAX_RULES);
	__type(key, __u32);
	__type(value, struct pystrobe_unwind_rule);
};
extern struct unwind_rules_map unwind_rules SEC(".maps");

/* Where each table lies in unwind_rows and unwind_pages, and whether it is
 * there. Key: table id (UnwindTableCache's). Value: struct
 * pystrobe_unwind_table, written by userspace only. */
struct unwind_tables_map {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PYSTROBE_UNWIND_MAX_TABLES);
	__type(key, __u32);
	__type(value, struct pystrobe_unwind_table);
};
extern struct unwind_tables_map unwind_tables SEC(".maps");

/* Tables a walk needed and found absent. Key: table id. Value: the
 * bpf_ktime_get_ns() of the first such walk. Userspace takes the keys when
 * a sample carries PYSTROBE_SAMPLE_NATIVE_TABLE_WANTED and loads those
 * tables; a full map only delays a table until a key is taken. */
struct unwind_wanted_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
};
extern struct unwind_wanted_map unwind_wanted SEC(".maps");

/* The executable mappings of each process walked with tables. Key: tgid.
 * Value: struct pystrobe_unwind_process (16 KiB), written whole by
 * userspace on the process's first sample, exec and after a stale hit;
 * deleted at exit. Allocated on use. */
struct unwind_processes_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct pystrobe_unwind_process);
};
extern struct unwind_processes_map unwind_processes SEC(".maps");

/*
 * Bumped after every change to unwind_processes, by the loader (a write, a
 * removal) and by the kernel (exec, exit): each CPU's note of the process it
 * walked last (native_walk_scratch's) holds while this has not moved.
 */
extern __u64 unwind_processes_generation;

static __always_inline void unwind_processes_changed(void)
{
	__sync_fetch_and_add(&unwind_processes_generation, 1);
}

/*
 * bpf_ktime_get_ns() of a walk that used each table lately, by table id:
 * userspace evicts the least recently used first, and sets a table's to 0
 * when it loads it. In .bss, not in unwind_tables' values: a store to a
 * global is no helper call, so the walk's fast loop marks a table without
 * leaving the loop (native_fast_frames).
 */
extern __u64 unwind_table_used_ns[PYSTROBE_UNWIND_MAX_TABLES];

/* How stale a table's stamp may grow before a walk writes it again: every
 * CPU walks the same few tables (a program's binary, libc), and a line that
 * each wrote at every sample would go from CPU to CPU at each. Eviction
 * needs no finer order than this. */
#define UNWIND_TABLE_USED_GRAIN_NS (64ull * 1000 * 1000)

static __always_inline void unwind_table_used(__u32 table_id, __u64 now)
{
	__u64 *used = &unwind_table_used_ns[table_id & (PYSTROBE_UNWIND_MAX_TABLES - 1)];

	if (*used + UNWIND_TABLE_USED_GRAIN_NS < now)
		*used = now;
}

#endif /* PYSTROBE_BPF_UNWIND_TABLES_BPF_H_ */
