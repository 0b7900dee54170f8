// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * How many entries each BPF map holds, for the daemon's metrics: an iterator
 * over the kernel's maps that writes, for every map, its id and the count the
 * kernel keeps of its elements (bpf_map_sum_elem_count, Linux 6.6+; 0 for
 * maps that keep none, such as arrays). One read of the iterator counts every
 * map however full: walking a hash map's keys costs a system call an entry,
 * reading it in batches a locked visit of each of its buckets, full or not.
 *
 * Its own object, not the sampler's: a kernel without the kfunc refuses this
 * program, and the daemon then walks the keys instead (bpf_sampler.cc).
 */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "pystrobe_abi.h"

extern __s64 bpf_map_sum_elem_count(const struct bpf_map *map) __ksym;

SEC("iter/bpf_map")
int count_map_entries(struct bpf_iter__bpf_map *ctx)
{
	struct pystrobe_map_count out = {};
	struct bpf_map *map = ctx->map;

	if (!map)
		return 0;
	out.map_id = map->id;
	out.entries = bpf_map_sum_elem_count(map);
	bpf_seq_write(ctx->meta->seq, &out, sizeof(out));
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
