/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The in-kernel CPython walk, as the units that take samples see it: one
 * global function, walk_python_stack (defined in python_stack.bpf.c, with
 * its maps; how it finds the thread state in python_thread_state.bpf.h, its
 * per-CPU state in python_walk.bpf.h), and the sizes of the target's memory
 * it reads at once, which the code copies (python_code_copy.bpf.h) share.
 */
#ifndef PYSTROBE_BPF_PYTHON_STACK_BPF_H_
#define PYSTROBE_BPF_PYTHON_STACK_BPF_H_

#include "vmlinux.h"

#include "pystrobe_abi.h"

/* Bytes copied of a frame and of a code object; every offset the walk uses
 * must be below this minus 8 (checked per process). Powers of two. */
#define PYTHON_COPY_SIZE 256
/* Bytes of a thread's data stack read at once, and the page a read may not
 * reach below (see frame_in_block). */
#define PYTHON_FRAME_BLOCK 4096
#define PYTHON_PAGE_SIZE 4096

/*
 * Walks the current thread's Python stack into `sample`, after `base`
 * words, by the copy of its process's entry in python_processes that
 * python_walk_of_process (python_walk.bpf.h) has just made ready. Fills the
 * sample's python_frames, python_status and GIL flags, and sends a copy of
 * each code object it meets that was not sent before (python_code_copy.bpf.h),
 * so the sample's pid and time must be set. Returns 0.
 *
 * A global function: the verifier checks it once, on its own, instead of
 * once in every program that takes a sample (cpu-clock, resident growth,
 * allocations, OOM kills) and in each of send_event_sample's two attempts;
 * inlined there, with native unwinding, resident growth's program passed
 * the verifier's million-instruction limit.
 */
int walk_python_stack(struct pystrobe_sample *sample, __u32 base);

#endif /* PYSTROBE_BPF_PYTHON_STACK_BPF_H_ */
