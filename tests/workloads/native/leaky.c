// leaky: keeps --leak-mib MiB in leak_into() (64 KiB blocks, never freed)
// while churn() mallocs and frees as many bytes in 1 KiB blocks, then
// returns from main without freeing: what it holds at exit is its leak.
// Writes "<pid> <leaked bytes> <churned bytes>" to --truth FILE. Built
// twice: dynamically (leaky) and statically (leaky_static, where no library
// can be preloaded).
//
//   leaky [--leak-mib N] [--truth FILE]
#include "workload_common.h"

enum { kLeakBlock = 64 << 10, kChurnBlock = 1 << 10 };

static void* volatile sink;

__attribute__((noinline)) size_t leak_into(void*** held, size_t* count) {
  void* block = malloc(kLeakBlock);
  memset(block, 'l', kLeakBlock);
  (*held)[(*count)++] = block;
  return kLeakBlock;
}

__attribute__((noinline)) size_t churn(size_t bytes) {
  size_t made = 0;
  for (; made < bytes; made += kChurnBlock) {
    sink = malloc(kChurnBlock);
    free(sink);
  }
  return made;
}

int main(int argc, char** argv) {
  size_t mib = (size_t)atol(FlagValue(argc, argv, "--leak-mib", "64"));
  const char* truth = FlagValue(argc, argv, "--truth", NULL);
  size_t blocks = (mib << 20) / kLeakBlock, count = 0, leaked = 0, churned = 0;
  void** held = calloc(blocks, sizeof(void*));
  for (size_t i = 0; i < blocks; ++i) {
    leaked += leak_into(&held, &count);
    churned += churn(kLeakBlock);
  }
  if (truth != NULL) {
    FILE* f = fopen(truth, "w");
    if (f == NULL) return 1;
    fprintf(f, "%ld %zu %zu\n", (long)getpid(), leaked, churned);
    fclose(f);
  }
  // Lives on a moment: pystrobe names frames from the process's mappings,
  // which go with it.
  usleep(300 * 1000);
  return 0;
}
