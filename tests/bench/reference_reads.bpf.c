// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The kernel-ratio bench's reference (run_kernel_ratio.py): at every tick of
 * the target processes, 100 plain 8-byte user reads at 8-byte steps up the
 * interrupted thread's stack, and nothing else. The bpftrace program the
 * issue names does the same:
 *   profile:hz:99 /pid == A || pid == B || .../ {
 *     $at = reg("sp"); unroll(100) { $v = *(uint64 *)uptr($at); $at += 8; } }
 * built in so that the bench runs on a host without bpftrace (it needs LLVM).
 */
// vmlinux.h defines the types the libbpf headers use: it comes first.
// clang-format off
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
// clang-format on

#define REFERENCE_READS 100

#define REFERENCE_MAX_TARGETS 64

/* Set by the loader: the processes measured (tgids, bpftrace's pid), compared
 * one by one as bpftrace's `pid == A || pid == B || ...` filter does. */
const volatile __u32 reference_tgids[REFERENCE_MAX_TARGETS];
const volatile __u32 reference_target_count;

SEC("perf_event")
int reference_reads(struct bpf_perf_event_data* ctx) {
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  __u64 at = ctx->regs.sp, value;
  int target;

  for (target = 0; target < REFERENCE_MAX_TARGETS && target < reference_target_count; target++)
    if (reference_tgids[target] == tgid) break;
  if (target == REFERENCE_MAX_TARGETS || target == reference_target_count) return 0;
#pragma unroll
  for (int i = 0; i < REFERENCE_READS; i++) {
    bpf_probe_read_user(&value, sizeof(value), (void*)at);
    at += 8;
  }
  return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
