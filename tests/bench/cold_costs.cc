// What the parts of a sample cost when the CPU comes to them cold, at each
// rate given (issue #26; docs/benchmarks.md):
//   cold_costs [--seconds S] [--rate HZ]...     (default: 5 s at 99 and 999 Hz)
// Starts a spinner per CPU, each with a few pages mapped and touched once,
// then for each rate loads cold_costs.bpf.c on a cpu-clock event per CPU and
// prints each step's mean nanoseconds a tick. At 99 Hz a host's neighbours
// have ten milliseconds to evict what the last tick brought in, at 999 Hz one:
// what a step costs more at the slow rate is what it fetches again. As root.
#include "tests/bench/cold_costs.h"

#include <bpf/libbpf.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "cold_costs.skel.h"
#include "tests/bench/cpu_clock_events.h"

namespace {

static_assert(COLD_STACK_PAGES == 12, "the stack steps' names count 12 pages");
constexpr const char* kStepNames[COLD_STEPS] = {
    "the clock, read twice",
    "the tick's first user read (8 B of the stack)",
    "another user read of the stack",
    "8 B of a page the spinner does not touch",
    "256 B of another such page",
    "4 KiB of another, into 4 KiB of scratch",
    "that page again, into other scratch",
    "that page again, into the first scratch",
    "12 more pages in a row, 4 KiB a read",
    "12 others in a row, 16 KiB a read",
    "hash map lookup (a miss)",
    "the same lookup again",
    "a byte on each of 4 per-CPU pages",
    "ring buffer output, 256 B",
    "another ring buffer output",
    "cgroup id: task_struct loads",
    "cgroup id: bpf_get_current_cgroup_id",
    "comm: two task_struct loads",
    "comm: bpf_get_current_comm",
    "bpf_get_current_pid_tgid",
};

// Where every spinner maps its pages: one address, written into the program.
void* const kBufferAddress = reinterpret_cast<void*>(0x600000000000ull);

// Forks a process that maps and touches its pages, says so on `ready`, then
// spins until it is killed (or its parent dies) without touching them again.
// It writes its stack as it spins, as a program does, so the stack's page is
// hot when a tick reads it.
pid_t StartSpinner(int ready) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  size_t bytes = COLD_BUFFER_PAGES * 4096;
  auto* buffer =
      static_cast<volatile char*>(mmap(kBufferAddress, bytes, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0));
  if (buffer != kBufferAddress) _exit(1);
  for (size_t at = 0; at < bytes; at += 64) buffer[at] = 1;
  char one = 1;
  if (write(ready, &one, 1) != 1) _exit(1);
  volatile unsigned long spins = 0;
  for (;;) spins = spins + 1;
}

using Skeleton = std::unique_ptr<cold_costs, decltype(&cold_costs__destroy)>;

// Each step's mean nanoseconds a tick of a spinner over `seconds` at `rate_hz`,
// or an empty vector when the program could not run.
std::vector<double> Measure(const std::vector<pid_t>& spinners, int rate_hz, int seconds) {
  Skeleton skel(cold_costs__open(), &cold_costs__destroy);
  if (!skel) return {};
  for (size_t i = 0; i < spinners.size(); ++i) {
    skel->rodata->spinner_tgids[i] = static_cast<__u32>(spinners[i]);
  }
  skel->rodata->spinner_count = static_cast<__u32>(spinners.size());
  skel->rodata->cold_buffer = reinterpret_cast<__u64>(kBufferAddress);
  if (cold_costs__load(skel.get()) != 0) {
    std::perror("cold_costs: load");
    return {};
  }
  std::vector<bpf_link*> links =
      pystrobe::bench::AttachToCpuClocks(skel->progs.cold_costs, rate_hz);
  if (links.empty()) {
    std::perror("cold_costs: attach");
    return {};
  }
  sleep(seconds);
  for (bpf_link* link : links) bpf_link__destroy(link);

  std::vector<cold_step_times> per_cpu(libbpf_num_possible_cpus());
  __u32 zero = 0;
  if (bpf_map__lookup_elem(skel->maps.step_times, &zero, sizeof(zero), per_cpu.data(),
                           per_cpu.size() * sizeof(cold_step_times), 0) != 0) {
    std::perror("cold_costs: read the times");
    return {};
  }
  cold_step_times total{};
  for (const cold_step_times& cpu : per_cpu) {
    total.ticks += cpu.ticks;
    for (int step = 0; step < COLD_STEPS; ++step) total.ns[step] += cpu.ns[step];
  }
  if (total.ticks == 0) return {};
  std::vector<double> means(COLD_STEPS);
  for (int step = 0; step < COLD_STEPS; ++step) {
    means[step] = static_cast<double>(total.ns[step]) / static_cast<double>(total.ticks);
  }
  return means;
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = 5;
  std::vector<int> rates;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seconds") == 0) {
      seconds = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--rate") == 0) {
      rates.push_back(std::atoi(argv[i + 1]));
    } else {
      break;
    }
  }
  if (argc % 2 == 0 || seconds <= 0 || (!rates.empty() && rates.back() <= 0)) {
    std::fprintf(stderr, "usage: %s [--seconds S] [--rate HZ]...\n", argv[0]);
    return 2;
  }
  if (rates.empty()) rates = {99, 999};

  int ready[2];
  if (pipe(ready) != 0) return 1;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  std::vector<pid_t> spinners;
  for (long cpu = 0; cpu < cpus && cpu < COLD_MAX_SPINNERS; ++cpu) {
    pid_t pid = StartSpinner(ready[1]);
    if (pid < 0) break;
    spinners.push_back(pid);
  }
  bool started = !spinners.empty();
  for (size_t i = 0; i < spinners.size() && started; ++i) {
    char byte;
    started = read(ready[0], &byte, 1) == 1;
  }

  std::vector<std::vector<double>> columns;
  for (int rate : rates) {
    if (!started) break;
    columns.push_back(Measure(spinners, rate, seconds));
    started = !columns.back().empty();
  }
  for (pid_t pid : spinners) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  if (!started) {
    std::fprintf(stderr, "cold_costs: no measurement (spinners or program failed)\n");
    return 1;
  }

  std::printf("Mean ns a tick of %zu spinners (one per CPU), %d s per rate\n", spinners.size(),
              seconds);
  std::printf("%-46s", "step");
  for (int rate : rates) std::printf(" %7d Hz", rate);
  std::printf("\n");
  for (int step = 0; step < COLD_STEPS; ++step) {
    std::printf("%-46s", kStepNames[step]);
    for (const std::vector<double>& column : columns) std::printf(" %10.0f", column[step]);
    std::printf("\n");
  }
  return 0;
}
