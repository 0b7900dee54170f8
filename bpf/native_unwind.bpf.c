// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The native walk's global function (native_stack.bpf.h); the walk's steps
 * are in native_unwind.bpf.h, its maps defined in unwind_tables.bpf.c.
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
