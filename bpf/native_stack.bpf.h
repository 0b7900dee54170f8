/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The native walk with unwind tables, as the units that take samples see
 * it: one global function, unwind_native_stack (defined in
 * native_unwind.bpf.c; the walk itself is in native_unwind.bpf.h).
 */
#ifndef PYSTROBE_BPF_NATIVE_STACK_BPF_H_
#define PYSTROBE_BPF_NATIVE_STACK_BPF_H_

#include "vmlinux.h"

#include "pystrobe_abi.h"

/*
 * Walks the current thread's user stack into `sample` from word `base`,
 * with the unwind tables, starting from the user registers the interrupt
 * or system call saved. `python`: the process runs CPython (walked even
 * when native unwinding is not asked for every process). Returns the
 * frames written, or -1 when the tables do not apply (native unwinding is
 * off, or the process is not tracked): bpf_get_stack's frame pointers then.
 *
 * A global function: the verifier checks it once per program, on its own,
 * instead of once in each place a sample is filled; inlined there, with
 * its reads of the stack in windows, the allocation and off-CPU programs
 * passed the verifier's million-instruction limit.
 */
int unwind_native_stack(struct pystrobe_sample *sample, __u32 base, __u32 python);

#endif /* PYSTROBE_BPF_NATIVE_STACK_BPF_H_ */
