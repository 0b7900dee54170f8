// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The one definition of the unwind tables' maps, the native walk's scratch
 * (its rule cache and window on the stack) and its knobs (unwind_tables.bpf.h
 * and native_unwind.bpf.h say what each holds and who sizes it). The walk
 * itself is inlined from native_unwind.bpf.h into each program that takes a
 * sample.
 */
#include "native_unwind.bpf.h"
#include "unwind_tables.bpf.h"

const volatile __u8 native_unwinding = 0;
const volatile __u8 native_unwinding_all = 0;

struct unwind_rows_map unwind_rows SEC(".maps");
struct unwind_pages_map unwind_pages SEC(".maps");
struct unwind_rules_map unwind_rules SEC(".maps");
struct unwind_tables_map unwind_tables SEC(".maps");
struct unwind_wanted_map unwind_wanted SEC(".maps");
struct unwind_processes_map unwind_processes SEC(".maps");
__u64 unwind_processes_generation = 0;
__u64 unwind_table_used_ns[PYSTROBE_UNWIND_MAX_TABLES] = {};
struct native_walk_scratch_map native_walk_scratch SEC(".maps");
