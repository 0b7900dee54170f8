// Known call chains in code built without frame pointers (-O2
// -fomit-frame-pointer, see CMakeLists.txt), for the native unwinder's
// end-to-end tests. One mode per run, each spinning for --seconds of its
// own CPU time (on a loaded machine the run takes longer, its share of
// samples taken before pystrobe read its tables does not grow):
//   recursion: main -> RunRecursion -> Recurse x DEPTH -> SpinLeaf
//   qsort:     main -> RunSort -> SortOuter -> SortInner -> qsort (libc's
//              sort frames) -> CompareSlowly
//   signal:    main -> RunSignal -> SignalLoop; a SIGPROF handler,
//              OnSignal -> SpinInHandler, runs on top of it most of the time
// At the end it prints "cpu_seconds S", the CPU time it had: what a test
// judges pystrobe's sample count by, whatever the machine's load gave it.
#include <signal.h>
#include <sys/time.h>

#include "workload_common.h"

#define DEPTH 12
#define NOINLINE __attribute__((noinline))

static volatile unsigned long sink;
static double cpu_seconds_wanted;

// Whether the process has had its --seconds of CPU. The kernel is asked (a
// system call) at most every 5 ms of wall time, so that few samples land in it.
static int Done(void) {
  static double next_check;
  double now = MonotonicSeconds();
  if (now < next_check) return 0;
  next_check = now + 0.005;
  return ProcessCpuSeconds() >= cpu_seconds_wanted;
}

NOINLINE static void SpinLeaf(void) {
  for (int i = 0; i < 20000; ++i) sink += (unsigned long)i * 7;
}

// Not a tail call: work after the call keeps this frame on the stack.
NOINLINE static int Recurse(int depth) {
  if (depth == 0) {
    SpinLeaf();
    return 1;
  }
  int below = Recurse(depth - 1);
  sink += (unsigned long)below;
  return below + 1;
}

NOINLINE static void RunRecursion(void) {
  while (!Done()) sink += (unsigned long)Recurse(DEPTH - 1);
}

NOINLINE static int CompareSlowly(const void* a, const void* b) {
  for (int i = 0; i < 400; ++i) sink += (unsigned long)i;
  int x = *(const int*)a, y = *(const int*)b;
  return (x > y) - (x < y);
}

NOINLINE static void SortInner(int* values, size_t n) {
  for (size_t i = 0; i < n; ++i) values[i] = (int)((i * 2654435761u) % 100003);
  qsort(values, n, sizeof(int), CompareSlowly);
  sink += (unsigned long)values[0];
}

NOINLINE static void SortOuter(int* values, size_t n) {
  SortInner(values, n);
  sink += (unsigned long)values[n - 1];
}

NOINLINE static void RunSort(void) {
  static int values[4096];
  while (!Done()) SortOuter(values, 4096);
}

NOINLINE static void SpinInHandler(void) {
  // Most of the 10 ms between signals.
  double until = MonotonicSeconds() + 0.008;
  while (MonotonicSeconds() < until) {
    for (int i = 0; i < 1000; ++i) sink += (unsigned long)i;
  }
}

NOINLINE static void OnSignal(int signal) {
  SpinInHandler();
  sink += (unsigned long)signal;
}

NOINLINE static void SignalLoop(void) {
  while (!Done()) {
    for (int i = 0; i < 1000; ++i) sink += (unsigned long)i;
  }
}

NOINLINE static void RunSignal(void) {
  struct sigaction action = {0};
  action.sa_handler = OnSignal;
  sigaction(SIGPROF, &action, NULL);
  struct itimerval timer = {{0, 10000}, {0, 10000}};
  setitimer(ITIMER_PROF, &timer, NULL);
  SignalLoop();
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
}

int main(int argc, char** argv) {
  const char* mode = FlagValue(argc, argv, "--mode", "recursion");
  cpu_seconds_wanted = atof(FlagValue(argc, argv, "--seconds", "2"));
  if (strcmp(mode, "qsort") == 0) {
    RunSort();
  } else if (strcmp(mode, "signal") == 0) {
    RunSignal();
  } else {
    RunRecursion();
  }
  printf("%lu\ncpu_seconds %.6f\n", sink & 1, ProcessCpuSeconds());
  return 0;
}
