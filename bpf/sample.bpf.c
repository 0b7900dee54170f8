// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The one definition of the maps and the knob behind a sample
 * (sample.bpf.h says what each holds): the per-CPU scratch a sample is
 * built in, the count of records since the ring's fill was looked at, and
 * the processes whose first sample is still to come.
 */
#include "sample.bpf.h"

const volatile __u8 python_native_stacks = 0;

struct sample_scratch_map sample_scratch SEC(".maps");
struct records_since_fill_check_map records_since_fill_check SEC(".maps");
struct fresh_processes_map fresh_processes SEC(".maps");
