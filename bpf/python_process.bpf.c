// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The one definition of python_processes, the CPython processes the daemon
 * has found and how to walk them (python_process.bpf.h says what it holds).
 * Read by the sampler's walk and the accounting's GIL wait; entries go at
 * exec and exit (process_events.bpf.c). And the count of its changes.
 */
#include "python_process.bpf.h"

struct python_processes_map python_processes SEC(".maps");
__u64 python_processes_generation = 0;
