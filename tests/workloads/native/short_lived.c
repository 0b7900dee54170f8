// short_lived: burns CPU in short_lived_burner for S seconds of wall time (not
// CPU time: it must end on time on a busy machine), then exits, so a recording
// that outlasts it must still name its frames.
//
//   short_lived [--seconds S] [--cpu] [--go-on-sigusr1] [--announce]
//
// --cpu: S seconds of its own CPU time instead, for a test that ends the
//   recording itself once it has exited: on a busy machine it then lives as
//   long as it takes to get that CPU, as the profiler's reader does to see it.
// --go-on-sigusr1: asleep (after "ready") until SIGUSR1, for a test that
//   attaches to it and lets it burn once the recording samples.
#include <signal.h>
#include <unistd.h>

#include "workload_common.h"

static volatile unsigned long sink;

__attribute__((noinline)) void short_lived_burner(double seconds, clockid_t clock) {
  double start = ClockSeconds(clock);
  while (ClockSeconds(clock) - start < seconds) {
    for (unsigned long i = 0; i < 100000; ++i) sink += i;
  }
}

int main(int argc, char** argv) {
  double seconds = atof(FlagValue(argc, argv, "--seconds", "1"));
  clockid_t clock = HasFlag(argc, argv, "--cpu") ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC;
  sigset_t go;
  sigemptyset(&go);
  sigaddset(&go, SIGUSR1);
  int wait_for_go = HasFlag(argc, argv, "--go-on-sigusr1");
  if (wait_for_go) sigprocmask(SIG_BLOCK, &go, NULL);  // before "ready": none is lost
  if (HasFlag(argc, argv, "--announce")) AnnounceReady();
  if (wait_for_go) {
    int signal;
    sigwait(&go, &signal);
  }
  short_lived_burner(seconds, clock);
  return 0;
}
