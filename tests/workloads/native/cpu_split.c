// cpu_split: splits one thread's CPU time between spin_alpha and spin_beta in a
// chosen ratio and reports, from the thread's own CPU clock, how much each got.
// The e2e tests compare those seconds with the share of samples pystrobe saw.
//
//   cpu_split [--seconds S] [--alpha-percent P] [--json FILE] [--worker-thread]
//             [--announce]
//
// --seconds 0 runs until SIGINT/SIGTERM. --worker-thread does the work in a
// thread named "split-worker" (the main thread sleeps), for the --threads test.
// --announce prints "ready <pid>" once running.
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "workload_common.h"

// One chunk of work is about 2 ms: short against a multi-second recording, long
// against the two clock reads around it.
#define CHUNK_SECONDS 0.002

static volatile sig_atomic_t stop_requested;
static volatile unsigned long sink;

__attribute__((noinline)) void spin_alpha(unsigned long iterations) {
  KEEP_FRAME();
  for (unsigned long i = 0; i < iterations; ++i) sink += i;
}

__attribute__((noinline)) void spin_beta(unsigned long iterations) {
  KEEP_FRAME();
  for (unsigned long i = 0; i < iterations; ++i) sink += i ^ 1;
}

struct Split {
  double seconds;
  double alpha_fraction;
  double alpha_cpu;
  double beta_cpu;
  double wall;
  long tid;
};

static void OnStop(int signo) {
  (void)signo;
  stop_requested = 1;
}

static void* RunSplit(void* arg) {
  struct Split* split = arg;
  split->tid = (long)syscall(SYS_gettid);
  // Calibrate the chunk on spin_alpha itself; that time counts as alpha's.
  double t0 = ThreadCpuSeconds();
  spin_alpha(1000000);
  double t1 = ThreadCpuSeconds();
  split->alpha_cpu += t1 - t0;
  unsigned long chunk =
      (unsigned long)(1000000 * CHUNK_SECONDS / (t1 - t0 > 1e-6 ? t1 - t0 : 1e-6));
  if (chunk < 1000) chunk = 1000;

  double start = MonotonicSeconds();
  while (!stop_requested) {
    double now = MonotonicSeconds();
    if (split->seconds > 0 && now - start >= split->seconds) break;
    // Whichever function is behind its target share runs next.
    double total = split->alpha_cpu + split->beta_cpu;
    int alpha_turn = split->alpha_cpu < split->alpha_fraction * total;
    double before = ThreadCpuSeconds();
    if (alpha_turn) {
      spin_alpha(chunk);
    } else {
      spin_beta(chunk);
    }
    double spent = ThreadCpuSeconds() - before;
    if (alpha_turn) {
      split->alpha_cpu += spent;
    } else {
      split->beta_cpu += spent;
    }
  }
  split->wall = MonotonicSeconds() - start;
  return NULL;
}

int main(int argc, char** argv) {
  struct Split split = {0};
  split.seconds = atof(FlagValue(argc, argv, "--seconds", "4"));
  split.alpha_fraction = atof(FlagValue(argc, argv, "--alpha-percent", "70")) / 100.0;
  const char* json_path = FlagValue(argc, argv, "--json", NULL);
  signal(SIGINT, OnStop);
  signal(SIGTERM, OnStop);
  if (HasFlag(argc, argv, "--announce")) AnnounceReady();

  if (HasFlag(argc, argv, "--worker-thread")) {
    pthread_t worker;
    if (pthread_create(&worker, NULL, RunSplit, &split) != 0) {
      perror("pthread_create");
      return 1;
    }
    pthread_setname_np(worker, "split-worker");
    pthread_join(worker, NULL);
  } else {
    RunSplit(&split);
  }

  FILE* out = stdout;
  if (json_path != NULL && (out = fopen(json_path, "w")) == NULL) {
    perror(json_path);
    return 1;
  }
  fprintf(out,
          "{\"pid\": %ld, \"tid\": %ld, \"alpha_cpu_s\": %.6f, \"beta_cpu_s\": %.6f, "
          "\"process_cpu_s\": %.6f, \"wall_s\": %.6f}\n",
          (long)getpid(), split.tid, split.alpha_cpu, split.beta_cpu, ProcessCpuSeconds(),
          split.wall);
  if (out != stdout) fclose(out);
  return 0;
}
