// Known call chains through a large library without frame pointers
// (libunwind_big.so, written by gen_unwind_big.py: 20,000 functions, 3 MB of
// .eh_frame), for the native unwinder's end-to-end test of binaries the
// size ML users run:
//   main -> RunChains -> big_chain_C_0 -> ... -> big_chain_C_5 -> unwind_big_leaf
// for each chain C in turn, for --seconds.
#include "workload_common.h"

#define CHAINS 4
#define NOINLINE __attribute__((noinline))

static volatile unsigned long sink;

// Called back by the library's last function of each chain.
NOINLINE void unwind_big_leaf(long x) {
  for (int i = 0; i < 20000; ++i) sink += (unsigned long)i * (unsigned long)x;
}

void big_chain_0_0(long);
void big_chain_1_0(long);
void big_chain_2_0(long);
void big_chain_3_0(long);

NOINLINE static void RunChains(double deadline) {
  void (*const chains[CHAINS])(long) = {big_chain_0_0, big_chain_1_0, big_chain_2_0, big_chain_3_0};
  for (unsigned long n = 0; MonotonicSeconds() < deadline; ++n) chains[n % CHAINS]((long)n);
  sink += 1;  // not a tail call: RunChains stays on the stack
}

int main(int argc, char** argv) {
  double deadline = MonotonicSeconds() + atof(FlagValue(argc, argv, "--seconds", "3"));
  RunChains(deadline);
  // Its own CPU time: what the tests judge the samples against.
  printf("{\"cpu_s\": %.3f}\n", ProcessCpuSeconds());
  return (int)(sink & 1) * 0;
}
