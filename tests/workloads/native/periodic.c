// periodic: a program with a rhythm. Each cycle of --cycle-ms milliseconds of
// wall time spends --alpha-percent of it spinning in phase_alpha and the rest
// in phase_beta, as a frame loop or a 100 Hz control loop would. A sampler
// that ticks at a fixed period near a multiple of the cycle sees the same
// phase of it tick after tick; the e2e tests check pystrobe does not.
//
//   periodic [--cycle-ms MS] [--alpha-percent P] [--cpu-seconds S] [--json FILE]
//
// Runs until it has used S seconds of CPU (so a busy machine makes it run
// longer, not sample less), then reports each function's thread CPU seconds
// (its own clock), the truth the tests compare the recorded shares with.
#include "workload_common.h"

static volatile unsigned long sink;

// Spins until the monotonic clock reaches `until` (read through the vDSO: no
// system call, so the samples land in the function itself).
__attribute__((noinline)) void phase_alpha(double until) {
  KEEP_FRAME();
  while (MonotonicSeconds() < until) sink += 1;
}

__attribute__((noinline)) void phase_beta(double until) {
  KEEP_FRAME();
  while (MonotonicSeconds() < until) sink += 2;
}

int main(int argc, char** argv) {
  double cycle = atof(FlagValue(argc, argv, "--cycle-ms", "5")) / 1000.0;
  double alpha_fraction = atof(FlagValue(argc, argv, "--alpha-percent", "80")) / 100.0;
  double cpu_seconds = atof(FlagValue(argc, argv, "--cpu-seconds", "5"));
  const char* json_path = FlagValue(argc, argv, "--json", NULL);

  double alpha_cpu = 0;
  double beta_cpu = 0;
  double start = MonotonicSeconds();
  // Cycles start at fixed multiples of the cycle from the start, as a
  // timer-driven loop's do, so the rhythm does not drift.
  for (double cycle_start = start; alpha_cpu + beta_cpu < cpu_seconds; cycle_start += cycle) {
    double t0 = ThreadCpuSeconds();
    phase_alpha(cycle_start + alpha_fraction * cycle);
    double t1 = ThreadCpuSeconds();
    phase_beta(cycle_start + cycle);
    double t2 = ThreadCpuSeconds();
    alpha_cpu += t1 - t0;
    beta_cpu += t2 - t1;
  }

  FILE* out = stdout;
  if (json_path != NULL && (out = fopen(json_path, "w")) == NULL) {
    perror(json_path);
    return 1;
  }
  fprintf(out,
          "{\"pid\": %ld, \"alpha_cpu_s\": %.6f, \"beta_cpu_s\": %.6f, \"process_cpu_s\": %.6f}\n",
          (long)getpid(), alpha_cpu, beta_cpu, ProcessCpuSeconds());
  if (out != stdout) fclose(out);
  return 0;
}
