/* A fake CUDA driver (libcuda.so) for tests without a GPU: cuCtxSynchronize
 * spins on the CPU as the real one does while the GPU works, for
 * $FAKE_CUDA_SYNC_MS milliseconds (default 20), so that a real program
 * calling it (Python through ctypes) has samples whose native stack is in it. */
#include <stdlib.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default"), noinline))

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

EXPORT int cuCtxSynchronize(void) {
  const char* env = getenv("FAKE_CUDA_SYNC_MS");
  double until = now_ms() + (env ? atof(env) : 20.0);
  volatile unsigned long spins = 0;
  /* Mostly in its own loop, as the driver polls its own memory: most
   * samples' leaf is this function, by name. */
  while (now_ms() < until) {
    for (int i = 0; i < 20000; ++i) ++spins;
  }
  return 0;                         /* CUDA_SUCCESS */
}
