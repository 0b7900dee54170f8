// The bench programs' own cpu-clock events: one per online CPU at a rate,
// each running a BPF program, as pystrobe's sampler and bpftrace's
// profile:hz probes do (reference_reads.cc, cold_costs.cc).
#ifndef PYSTROBE_TESTS_BENCH_CPU_CLOCK_EVENTS_H_
#define PYSTROBE_TESTS_BENCH_CPU_CLOCK_EVENTS_H_

#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <vector>

namespace pystrobe::bench {

// Attaches `program` to a cpu-clock event at `rate_hz` on every online CPU.
// Returns the links (destroy each to detach), or an empty vector, with errno
// set, when one could not be attached.
inline std::vector<bpf_link*> AttachToCpuClocks(bpf_program* program, int rate_hz) {
  std::vector<bpf_link*> links;
  int cpus = libbpf_num_possible_cpus();
  for (int cpu = 0; cpu < cpus; ++cpu) {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.freq = 1;
    attr.sample_freq = rate_hz;
    int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, /*pid=*/-1, cpu,
                                      /*group_fd=*/-1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) continue;  // an offline CPU
    bpf_link* link = bpf_program__attach_perf_event(program, fd);
    if (link == nullptr) {
      for (bpf_link* attached : links) bpf_link__destroy(attached);
      return {};
    }
    links.push_back(link);
  }
  return links;
}

}  // namespace pystrobe::bench

#endif  // PYSTROBE_TESTS_BENCH_CPU_CLOCK_EVENTS_H_
