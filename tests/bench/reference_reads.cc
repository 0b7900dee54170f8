// The kernel-ratio bench's reference (reference_reads.bpf.c), loaded and
// attached to a cpu-clock event (99 Hz, or --rate) on every online CPU:
//   reference_reads [--rate HZ] TGID...
// Prints "ready" once attached and runs until SIGTERM or SIGINT; the bench
// reads the program's run time and count (bpf_stats) from its fdinfo.
#include <bpf/libbpf.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "reference_reads.skel.h"
#include "tests/bench/cpu_clock_events.h"

namespace {

volatile std::sig_atomic_t stopping = 0;

void Stop(int) { stopping = 1; }

}  // namespace

int main(int argc, char** argv) {
  constexpr int kMaxTargets = 64;  // REFERENCE_MAX_TARGETS
  int rate_hz = 99;
  int first_tgid = 1;
  if (argc > 2 && std::strcmp(argv[1], "--rate") == 0) {
    rate_hz = std::atoi(argv[2]);
    first_tgid = 3;
  }
  if (rate_hz <= 0 || argc - first_tgid < 1 || argc - first_tgid > kMaxTargets) {
    std::fprintf(stderr, "usage: %s [--rate HZ] TGID... (1 to %d of them)\n", argv[0], kMaxTargets);
    return 2;
  }
  std::unique_ptr<reference_reads, decltype(&reference_reads__destroy)> skel(
      reference_reads__open(), &reference_reads__destroy);
  if (!skel) {
    std::perror("reference_reads: open");
    return 1;
  }
  for (int i = first_tgid; i < argc; ++i) {
    skel->rodata->reference_tgids[i - first_tgid] = static_cast<__u32>(std::atoi(argv[i]));
  }
  skel->rodata->reference_target_count = static_cast<__u32>(argc - first_tgid);
  if (reference_reads__load(skel.get()) != 0) {
    std::perror("reference_reads: load");
    return 1;
  }
  std::vector<bpf_link*> links =
      pystrobe::bench::AttachToCpuClocks(skel->progs.reference_reads, rate_hz);
  if (links.empty()) {
    std::perror("reference_reads: attach");
    return 1;
  }
  std::signal(SIGTERM, Stop);
  std::signal(SIGINT, Stop);
  std::printf("ready\n");
  std::fflush(stdout);
  while (!stopping) pause();
  for (bpf_link* link : links) bpf_link__destroy(link);
  return 0;
}
