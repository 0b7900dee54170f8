/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What every program family knows of CPython processes: the per-process
 * layout the daemon hands over, reads of the target's memory, and where its
 * GIL is. The map is declared here and defined once, in
 * python_process.bpf.c. The frame walk itself is in python_stack.bpf.c.
 */
#ifndef PYSTROBE_BPF_PYTHON_PROCESS_BPF_H_
#define PYSTROBE_BPF_PYTHON_PROCESS_BPF_H_

#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "compat.bpf.h"
#include "pystrobe_abi.h"

/*
 * CPython processes and how to walk them.
 * Key: tgid (host pid). Value: struct pystrobe_python_process.
 * Written by the daemon at discovery; deleted here on exec and exit so a pid
 * that changes image or is reused never inherits another's offsets.
 * Sized for every process of a large host.
 */
struct python_processes_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct pystrobe_python_process);
};
extern struct python_processes_map python_processes SEC(".maps");

/*
 * Bumped after every change to python_processes, by the kernel (exec, exit)
 * and by the daemon (discovery): a copy of an entry, or of its absence, is
 * good while this has not moved (python_walk_of_process).
 */
extern __u64 python_processes_generation;

static __always_inline void python_processes_changed(void)
{
	__sync_fetch_and_add(&python_processes_generation, 1);
}

/* Reads a pointer-sized field of the target; false on a failed read. */
static __always_inline bool read_target_u64(__u64 addr, __u32 offset, __u64 *value)
{
	return bpf_probe_read_user(value, sizeof(*value), (void *)(addr + offset)) == 0;
}

/* The address of the GIL state of interpreter `interp` of process `proc`
 * (0: the newest interpreter, interpreters.head), or 0. Reads current's memory. */
static __always_inline __u64 python_gil_address(const struct pystrobe_python_process *proc,
						__u64 interp)
{
	const struct pystrobe_python_offsets *off = &proc->offsets;
	__u64 gil;

	if (off->runtime_gil != PYSTROBE_PY_OFFSET_NONE)
		return proc->runtime_addr + off->runtime_gil;
	/* 3.12+: one GIL per interpreter, reached by pointer. */
	if ((interp == 0 &&
	     !read_target_u64(proc->runtime_addr, off->runtime_interpreters_head, &interp)) ||
	    !read_target_u64(interp, off->interp_gil_ptr, &gil))
		return 0;
	return gil;
}

/*
 * True when the current thread, a thread of CPython process `tgid` that is
 * leaving the CPU, is blocked in a futex on its GIL's condition or mutex:
 * it is waiting to take the GIL. The futex word sits inside the GIL state
 * (or, on 2.7, the semaphore it points to), so this holds for every version
 * without symbols of take_gil.
 */
static __always_inline bool waiting_for_gil(__u32 tgid)
{
	const struct pystrobe_python_process *proc;
	struct pt_regs *regs;
	__u64 uaddr, gil, wait;

	proc = bpf_map_lookup_elem(&python_processes, &tgid);
	if (!proc || proc->offsets.gil_cond == PYSTROBE_PY_OFFSET_NONE ||
	    proc->offsets.gil_wait_span == 0)
		return false;
	regs = compat_current_user_regs();
	if (compat_syscall_nr(regs) != COMPAT_NR_FUTEX)
		return false;
	uaddr = compat_syscall_arg1(regs);
	gil = python_gil_address(proc, 0);
	if (gil == 0)
		return false;
	wait = gil + proc->offsets.gil_cond;
	/* 2.7: the GIL is a semaphore the interpreter allocated. */
	if (proc->offsets.gil_wait_indirect && !read_target_u64(wait, 0, &wait))
		return false;
	return wait != 0 && uaddr >= wait && uaddr < wait + proc->offsets.gil_wait_span;
}

#endif /* PYSTROBE_BPF_PYTHON_PROCESS_BPF_H_ */
