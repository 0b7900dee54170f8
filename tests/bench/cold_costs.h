/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What cold_costs.bpf.c times at every tick and hands its loader
 * (cold_costs.cc): the steps, in the order they run, and their totals.
 */
#ifndef PYSTROBE_TESTS_BENCH_COLD_COSTS_H_
#define PYSTROBE_TESTS_BENCH_COLD_COSTS_H_

#ifndef __bpf__
#include <linux/types.h>
#endif

#define COLD_MAX_SPINNERS 64
/* Pages each spinner maps and touches once, before the ticks begin: four
 * for the single reads, then two runs of COLD_STACK_PAGES, each what a
 * 100-deep pre-3.11 sample's native walk copies of the stack below the
 * running frame (48 KiB, docs/benchmarks.md). */
#define COLD_STACK_PAGES 12
#define COLD_BUFFER_PAGES (4 + 2 * COLD_STACK_PAGES)
/* Bytes of the per-CPU scratch the reads land in (and whose pages the
 * per-CPU step writes): under the 32 KiB a per-CPU value may take. */
#define COLD_SCRATCH_BYTES (8 * 4096)

enum cold_step {
  COLD_CLOCK,                /* bpf_ktime_get_ns, twice */
  COLD_FIRST_READ,           /* the tick's first bpf_probe_read_user: 8 bytes of the stack */
  COLD_WARM_READ,            /* another 8 bytes of the stack */
  COLD_PAGE_READ,            /* 8 bytes of a page the spinner does not touch */
  COLD_PAGE_READ_256,        /* 256 bytes of another */
  COLD_PAGE_READ_4K,         /* 4 KiB of another, into 4 KiB of scratch */
  COLD_DESTINATION_4K,       /* that page again, into another 4 KiB of scratch */
  COLD_WARM_4K,              /* that page again, into the first 4 KiB */
  COLD_STACK_4K,             /* COLD_STACK_PAGES more pages in a row, 4 KiB a read */
  COLD_STACK_16K,            /* as many others in a row, 16 KiB a read */
  COLD_HASH_LOOKUP,          /* a lookup that misses in a hash map */
  COLD_HASH_LOOKUP_AGAIN,    /* the same lookup */
  COLD_PERCPU_PAGES,         /* a byte written on each of 4 other pages of the scratch */
  COLD_RINGBUF_OUTPUT,       /* bpf_ringbuf_output of 256 bytes */
  COLD_RINGBUF_OUTPUT_AGAIN, /* another */
  COLD_CGROUP_LOADS,         /* task->cgroups->dfl_cgrp->kn->id */
  COLD_CGROUP_HELPER,        /* bpf_get_current_cgroup_id, after the loads */
  COLD_COMM_LOADS,           /* task->comm, two 8-byte loads */
  COLD_COMM_HELPER,          /* bpf_get_current_comm, after the loads */
  COLD_PID_TGID_HELPER,      /* bpf_get_current_pid_tgid */
  COLD_STEPS,
};

struct cold_step_times {
  __u64 ticks; /* ticks of a spinner */
  __u64 ns[COLD_STEPS];
};

#endif /* PYSTROBE_TESTS_BENCH_COLD_COSTS_H_ */
