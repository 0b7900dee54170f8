// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The native walk's global functions (declared in native_stack.bpf.h and
 * native_unwind.bpf.h); the walk's steps are in native_unwind.bpf.h, its
 * maps defined in unwind_tables.bpf.c.
 */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "compat.bpf.h"
#include "native_stack.bpf.h"
#include "native_unwind.bpf.h"

/* Declared, and its contract given, in native_stack.bpf.h. */
__noinline int unwind_native_stack(struct pystrobe_sample *sample, __u32 base, __u32 python)
{
	struct pt_regs *regs = compat_current_user_regs();

	if (!sample)
		return -1;
	return native_unwind(sample, base, PYSTROBE_MAX_USER_FRAMES, compat_user_ip(regs),
			     compat_user_sp(regs), compat_user_fp(regs), python != 0);
}

/* Declared, and their contracts given, in native_unwind.bpf.h. */
__noinline int native_rule_of(__u32 tgid, __u64 pc, __u32 exact_pc, __u64 now,
			      struct native_found *found)
{
	const struct pystrobe_unwind_process *proc = bpf_map_lookup_elem(&unwind_processes, &tgid);
	const struct pystrobe_unwind_mapping *mapping;
	struct native_walk_scratch *scratch;
	__u64 owner;
	__u32 zero = 0;
	int looked_up;

	scratch = bpf_map_lookup_elem(&native_walk_scratch, &zero);
	if (!proc || !scratch || !found)
		return NATIVE_LOOKUP_NONE;
	mapping = native_find_mapping(proc, pc);
	if (!mapping)
		return NATIVE_LOOKUP_STALE;
	if (mapping->table_id == PYSTROBE_UNWIND_TABLE_JIT)
		return NATIVE_LOOKUP_JIT;
	if (mapping->table_id == PYSTROBE_UNWIND_TABLE_NONE)
		return NATIVE_LOOKUP_NONE;
	/* A return address is the instruction after the call: the call
	 * itself, one byte earlier, is in the calling function (which may end
	 * with it). */
	found->lookup = pc - mapping->bias - (exact_pc ? 0 : 1);
	looked_up = native_find_rule(now, mapping->table_id, found);
	if (looked_up != NATIVE_LOOKUP_FOUND)
		return looked_up;
	owner = native_rule_owner(tgid, proc->generation);
	if (exact_pc)
		native_cache_leaf(scratch, pc, owner, mapping->bias, found, mapping->table_id, now);
	else
		native_cache_rule(scratch, pc, owner, &found->rule, found->lookup,
				  mapping->table_id);
	return NATIVE_LOOKUP_FOUND;
}

__noinline int native_pc_is_mapped(__u32 tgid, __u64 pc)
{
	const struct pystrobe_unwind_process *proc = bpf_map_lookup_elem(&unwind_processes, &tgid);

	return proc && native_find_mapping(proc, pc) != NULL;
}
