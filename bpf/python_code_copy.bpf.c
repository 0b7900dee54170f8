// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The one definition of the code copies' maps (python_code_copy.bpf.h says
 * what each holds): the set of code objects sent, this CPU's cache of it,
 * the token bucket that bounds copies and the scratch a copy is built in.
 */
#include "python_code_copy.bpf.h"

struct python_codes_sent_map python_codes_sent SEC(".maps");
struct python_code_budget_map python_code_budget SEC(".maps");
struct python_codes_sent_cache_map python_codes_sent_cache SEC(".maps");
struct python_code_scratch_map python_code_scratch SEC(".maps");
