// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Process events: exec and exit of target processes go to userspace in the
 * samples' ring buffer, so it never symbolizes a stack against the wrong
 * address space; a process that execs a known CPython binary is walked
 * from its first sample; with --subprocesses, children of targets become
 * targets as they fork. Exec and exit also drop the per-process state the
 * walks keep (python_processes, unwind_processes).
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "pystrobe_abi.h"
#include "python_process.bpf.h"
#include "sample.bpf.h"
#include "sampler_output.bpf.h"
#include "targets.bpf.h"
#include "unwind_tables.bpf.h"

/* Set by the loader (--subprocesses): children of targets become targets. */
const volatile __u8 follow_children = 0;

/* Reserves a process event; the caller fills what its kind adds and submits. */
static __always_inline struct pystrobe_process_event *new_process_event(__u32 kind, __u32 tgid)
{
	struct pystrobe_process_event *event;

	event = bpf_ringbuf_reserve(&events, sizeof(*event), 0);
	if (!event) {
		count_drop(PYSTROBE_DROP_PROCESS_EVENT);
		return NULL;
	}
	__builtin_memset(event, 0, sizeof(*event));
	event->kind = kind;
	event->pid = tgid;
	event->time_ns = bpf_ktime_get_ns();
	bpf_get_current_comm(event->comm, sizeof(event->comm));
	return event;
}

/*
 * Executables in which the daemon found CPython (not a libpython the loader
 * maps after exec), by file: a process that execs one is walked from its
 * first sample, instead of from when the daemon gets round to it, which a
 * short script may not live to see. Written by the daemon.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct pystrobe_python_binary_key);
	__type(value, struct pystrobe_python_binary);
} python_binaries SEC(".maps");

/* A recognized executable, as the EXEC event tells userspace. */
struct python_exec {
	__u64 dev;
	__u64 inode;
	__u64 start_code;
};

/* Makes the current process, which has just exec'd, a CPython process to
 * walk if its executable is in python_binaries; then fills `exec`, which
 * stays zero otherwise. */
static __always_inline void recognize_python_binary(__u32 tgid, struct python_exec *exec)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pystrobe_python_binary_key key = {};
	const struct pystrobe_python_binary *binary;
	struct pystrobe_python_process process;
	struct mm_struct *mm = task->mm;
	struct inode *inode;

	if (!mm || !mm->exe_file)
		return;
	inode = mm->exe_file->f_inode;
	key.dev = inode->i_sb->s_dev;
	key.inode = inode->i_ino;
	binary = bpf_map_lookup_elem(&python_binaries, &key);
	if (!binary)
		return;
	process.runtime_addr = mm->start_code + binary->runtime_offset;
	process.code_type_addr = mm->start_code + binary->code_type_offset;
	__builtin_memcpy(&process.offsets, &binary->offsets, sizeof(process.offsets));
	if (bpf_map_update_elem(&python_processes, &tgid, &process, BPF_ANY) != 0)
		return;
	python_processes_changed();
	count_sample(PYSTROBE_COUNT_PYTHON_AT_EXEC);
	exec->dev = key.dev;
	exec->inode = key.inode;
	exec->start_code = mm->start_code;
}

SEC("raw_tp/sched_process_exec")
int handle_exec(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct pystrobe_process_event *event;
	struct python_exec recognized = {};
	__u8 one = 1;

	/* The new image is not the interpreter the daemon saw, if any, and
	 * its mappings are not those userspace read: walked with frame
	 * pointers until userspace reads them again. */
	if (bpf_map_delete_elem(&python_processes, &tgid) == 0)
		python_processes_changed();
	if (bpf_map_delete_elem(&unwind_processes, &tgid) == 0)
		unwind_processes_changed();
	if (!is_target(tgid))
		return 0;
	recognize_python_binary(tgid, &recognized);
	bpf_map_update_elem(&fresh_processes, &tgid, &one, BPF_ANY);
	event = new_process_event(PYSTROBE_EVENT_EXEC, tgid);
	if (!event)
		return 0;
	event->python_binary_dev = recognized.dev;
	event->python_binary_inode = recognized.inode;
	event->start_code = recognized.start_code;
	bpf_ringbuf_submit(event, 0);
	return 0;
}

SEC("raw_tp/sched_process_exit")
int handle_exit(void *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	/* The process ends with its last thread, which need not be the leader:
	 * by this tracepoint each exiting thread has left signal->live. */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	if (bpf_map_delete_elem(&python_processes, &tgid) == 0)
		python_processes_changed();
	if (bpf_map_delete_elem(&unwind_processes, &tgid) == 0)
		unwind_processes_changed();
	if (is_target(tgid)) {
		struct pystrobe_process_event *event = new_process_event(PYSTROBE_EVENT_EXIT, tgid);

		if (event)
			bpf_ringbuf_submit(event, 0);
	}
	/* A later process with this pid is not a target. */
	if (filter_pids && bpf_map_delete_elem(&target_pids, &tgid) == 0)
		targets_changed();
	return 0;
}

/* With --subprocesses, a new process whose parent is a target becomes one,
 * before it can run: no sample of it is missed. */
SEC("raw_tp/sched_process_fork")
int handle_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx->args[0];
	struct task_struct *child = (struct task_struct *)ctx->args[1];
	__u32 parent_tgid, child_tgid;
	__u8 one = 1;

	if (!follow_children || !filter_pids)
		return 0;
	parent_tgid = BPF_CORE_READ(parent, tgid);
	child_tgid = BPF_CORE_READ(child, tgid);
	/* A new thread joins its own process, which is already known. */
	if (child_tgid == parent_tgid || !is_target(parent_tgid))
		return 0;
	bpf_map_update_elem(&target_pids, &child_tgid, &one, BPF_ANY);
	targets_changed();
	bpf_map_update_elem(&fresh_processes, &child_tgid, &one, BPF_ANY);
	return 0;
}
