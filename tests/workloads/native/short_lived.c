// short_lived: burns CPU in short_lived_burner for S seconds of wall time (not
// CPU time: it must end on time on a busy machine), then exits, so a recording
// that outlasts it must still name its frames.
//
//   short_lived [--seconds S] [--announce]
#include <unistd.h>

#include "workload_common.h"

static volatile unsigned long sink;

__attribute__((noinline)) void short_lived_burner(double seconds) {
  double start = MonotonicSeconds();
  while (MonotonicSeconds() - start < seconds) {
    for (unsigned long i = 0; i < 100000; ++i) sink += i;
  }
}

int main(int argc, char** argv) {
  double seconds = atof(FlagValue(argc, argv, "--seconds", "1"));
  if (HasFlag(argc, argv, "--announce")) AnnounceReady();
  short_lived_burner(seconds);
  return 0;
}
