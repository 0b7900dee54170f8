// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What the parts of a sample cost when the CPU comes to them cold (issue #26):
 * at every tick of the spinners cold_costs.cc starts, a fixed series of the
 * operations a sample is made of (helper calls, user reads of pages the
 * target does not touch, map lookups, ring buffer output), each timed with
 * the clock and added to its step's total. Run at a slow rate and a fast
 * one, the difference is what the host has evicted between ticks: a step
 * that costs the same at both is the work itself.
 */
// vmlinux.h defines the types the libbpf headers use: it comes first.
// clang-format off
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
// clang-format on

#include "cold_costs.h"

/* Set by the loader: the spinners (tgids), and where each has mapped its
 * COLD_BUFFER_PAGES pages, touched once before the ticks begin. */
const volatile __u32 spinner_tgids[COLD_MAX_SPINNERS];
const volatile __u32 spinner_count;
const volatile __u64 cold_buffer;

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct cold_step_times);
} step_times SEC(".maps");

/* Where the reads land: one per CPU, like a sample's scratch space. */
struct cold_scratch {
  __u8 bytes[COLD_SCRATCH_BYTES];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct cold_scratch);
} scratch SEC(".maps");

/* Looked up and never written: every lookup misses. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1024);
  __type(key, __u32);
  __type(value, __u8);
} empty_hash SEC(".maps");

/* Never read: records go nowhere, as fast as a reader would take them. */
struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 1 << 20);
} records SEC(".maps");

#define PAGE 4096

/* Closes step `step`: its time since the last mark is added to its total. */
#define STEP_DONE(step)              \
  do {                               \
    __u64 now_ = bpf_ktime_get_ns(); \
    times->ns[step] += now_ - mark;  \
    mark = now_;                     \
  } while (0)

SEC("perf_event")
int cold_costs(struct bpf_perf_event_data* ctx) {
  struct task_struct* task = bpf_get_current_task_btf();
  __u32 tgid = task->tgid, zero = 0, key = 1;
  __u64 sp = ctx->regs.sp, value, mark;
  struct cold_step_times* times;
  struct cold_scratch* into;
  char comm[16];
  int i;

  for (i = 0; i < COLD_MAX_SPINNERS && i < spinner_count; i++)
    if (spinner_tgids[i] == tgid) break;
  if (i == COLD_MAX_SPINNERS || i == spinner_count) return 0;
  times = bpf_map_lookup_elem(&step_times, &zero);
  into = bpf_map_lookup_elem(&scratch, &zero);
  if (!times || !into) return 0;
  times->ticks++;
  mark = bpf_ktime_get_ns();
  STEP_DONE(COLD_CLOCK);
  bpf_probe_read_user(&value, sizeof(value), (void*)sp);
  STEP_DONE(COLD_FIRST_READ);
  bpf_probe_read_user(&value, sizeof(value), (void*)(sp + 8));
  STEP_DONE(COLD_WARM_READ);
  bpf_probe_read_user(&value, sizeof(value), (void*)cold_buffer);
  STEP_DONE(COLD_PAGE_READ);
  bpf_probe_read_user(into->bytes, 256, (void*)(cold_buffer + PAGE));
  STEP_DONE(COLD_PAGE_READ_256);
  bpf_probe_read_user(into->bytes + PAGE, PAGE, (void*)(cold_buffer + 2 * PAGE));
  STEP_DONE(COLD_PAGE_READ_4K);
  bpf_probe_read_user(into->bytes + 2 * PAGE, PAGE, (void*)(cold_buffer + 2 * PAGE));
  STEP_DONE(COLD_DESTINATION_4K);
  bpf_probe_read_user(into->bytes + PAGE, PAGE, (void*)(cold_buffer + 2 * PAGE));
  STEP_DONE(COLD_WARM_4K);
  for (i = 0; i < COLD_STACK_PAGES; i++)
    bpf_probe_read_user(into->bytes, PAGE, (void*)(cold_buffer + (4 + i) * PAGE));
  STEP_DONE(COLD_STACK_4K);
  for (i = 0; i < COLD_STACK_PAGES / 4; i++)
    bpf_probe_read_user(into->bytes, 4 * PAGE,
                        (void*)(cold_buffer + (4 + COLD_STACK_PAGES + 4 * i) * PAGE));
  STEP_DONE(COLD_STACK_16K);
  bpf_map_lookup_elem(&empty_hash, &key);
  STEP_DONE(COLD_HASH_LOOKUP);
  bpf_map_lookup_elem(&empty_hash, &key);
  STEP_DONE(COLD_HASH_LOOKUP_AGAIN);
  for (i = 0; i < 4; i++) into->bytes[(3 + i) * PAGE + 64] = 1;
  STEP_DONE(COLD_PERCPU_PAGES);
  bpf_ringbuf_output(&records, into->bytes, 256, BPF_RB_NO_WAKEUP);
  STEP_DONE(COLD_RINGBUF_OUTPUT);
  bpf_ringbuf_output(&records, into->bytes, 256, BPF_RB_NO_WAKEUP);
  STEP_DONE(COLD_RINGBUF_OUTPUT_AGAIN);
  value = task->cgroups->dfl_cgrp->kn->id;
  STEP_DONE(COLD_CGROUP_LOADS);
  value = bpf_get_current_cgroup_id();
  STEP_DONE(COLD_CGROUP_HELPER);
  *(__u64*)comm = *(const __u64*)task->comm;
  *(__u64*)(comm + 8) = *(const __u64*)(task->comm + 8);
  STEP_DONE(COLD_COMM_LOADS);
  bpf_get_current_comm(comm, sizeof(comm));
  STEP_DONE(COLD_COMM_HELPER);
  value = bpf_get_current_pid_tgid();
  STEP_DONE(COLD_PID_TGID_HELPER);
  return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
