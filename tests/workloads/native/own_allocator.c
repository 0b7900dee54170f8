// own_allocator: a program with its own allocator (libbump_allocator.so, a
// shared library as jemalloc is) that also dlopens a library before its
// work. keep() takes 1000 blocks of 16 KiB from it; then it prints
// "bump <bytes the allocator handed out> dlopen <ok|failed>" and lives
// 0.3 s more.
#include <dlfcn.h>

#include "workload_common.h"

size_t bump_used(void);

__attribute__((noinline)) void* keep(size_t size) {
  void* block = malloc(size);
  KEEP_FRAME();
  return block;
}

int main(void) {
  void* libm = dlopen("libm.so.6", RTLD_NOW);
  size_t before = bump_used();
  for (int i = 0; i < 1000; ++i) keep(16 << 10);
  printf("bump %zu dlopen %s\n", bump_used() - before, libm != NULL ? "ok" : "failed");
  fflush(stdout);
  // Lives on a moment: pystrobe names frames from the process's mappings,
  // which go with it.
  usleep(300 * 1000);
  return 0;
}
