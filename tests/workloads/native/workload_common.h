// Helpers shared by the native end-to-end workloads: CPU clocks, a busy loop
// the compiler cannot remove, and a tiny argument reader.
#ifndef PYSTROBE_TESTS_WORKLOADS_NATIVE_WORKLOAD_COMMON_H_
#define PYSTROBE_TESTS_WORKLOADS_NATIVE_WORKLOAD_COMMON_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// Makes GCC set up a frame pointer in a leaf function, which it otherwise skips
// even under -fno-omit-frame-pointer: without it, a sample in the leaf walks
// straight from the leaf to its caller's caller.
#define KEEP_FRAME() __asm__ volatile("" : : "r"(__builtin_frame_address(0)) : "memory")

static inline double ClockSeconds(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline double ThreadCpuSeconds(void) { return ClockSeconds(CLOCK_THREAD_CPUTIME_ID); }
static inline double ProcessCpuSeconds(void) { return ClockSeconds(CLOCK_PROCESS_CPUTIME_ID); }
static inline double MonotonicSeconds(void) { return ClockSeconds(CLOCK_MONOTONIC); }

// Returns the value after `name` in argv ("--seconds 3"), or `fallback`.
static inline const char* FlagValue(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return fallback;
}

static inline int HasFlag(int argc, char** argv, const char* name) {
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], name) == 0) return 1;
  }
  return 0;
}

// Announces the pid on stdout so a test can attach before the real work ends.
static inline void AnnounceReady(void) {
  printf("ready %ld\n", (long)getpid());
  fflush(stdout);
}

#endif  // PYSTROBE_TESTS_WORKLOADS_NATIVE_WORKLOAD_COMMON_H_
