// bystander: a busy process that is not the target, so a --pid recording can be
// checked to contain nothing of it.
//
//   bystander [--seconds S] [--announce]     (--seconds 0: until SIGTERM)
#include <unistd.h>

#include "workload_common.h"

static volatile unsigned long sink;

__attribute__((noinline)) void bystander_spin(double seconds) {
  double start = MonotonicSeconds();
  while (seconds <= 0 || MonotonicSeconds() - start < seconds) {
    for (unsigned long i = 0; i < 100000; ++i) sink += i;
  }
}

int main(int argc, char** argv) {
  double seconds = atof(FlagValue(argc, argv, "--seconds", "5"));
  if (HasFlag(argc, argv, "--announce")) AnnounceReady();
  bystander_spin(seconds);
  return 0;
}
