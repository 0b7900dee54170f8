/* A fake CUDA driver (libcuda.so) for tests without a GPU: cuCtxSynchronize
 * spins on the CPU as the real one does while the GPU works, for
 * $FAKE_CUDA_SYNC_MS milliseconds (default 20), so that a real program
 * calling it (Python through ctypes) has samples whose native stack is in it.
 * As in the real driver, the spinning is done by code without a name: the
 * library is stripped to its dynamic symbols (CMakeLists.txt), so the
 * samples' leaf reads libcuda.so+0x... and only the caller is named. */
#include <stdlib.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default"), noinline))

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The driver's inside: polls until the "GPU" is done. */
static __attribute__((noinline)) void wait_for_gpu(double until) {
  volatile unsigned long spins = 0;
  while (now_ms() < until) {
    for (int i = 0; i < 20000; ++i) ++spins;
  }
}

EXPORT int cuCtxSynchronize(void) {
  const char* env = getenv("FAKE_CUDA_SYNC_MS");
  wait_for_gpu(now_ms() + (env ? atof(env) : 20.0));
  return 0; /* CUDA_SUCCESS */
}
