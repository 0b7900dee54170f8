// libbump_allocator.so: a program's own allocator (as jemalloc is, linked as a
// shared library), for own_allocator. A bump allocator over a static arena;
// free does nothing. bump_used() says how much it handed out, so a test
// sees that the program's calls still reached it under pystrobe's sampler.
#include <stddef.h>
#include <string.h>

static char arena[64 << 20];
static size_t used;

// 16 bytes in front of each block hold its size (for realloc).
void* malloc(size_t size) {
  size_t need = (size + 16 + 15) & ~(size_t)15;
  if (used + need > sizeof(arena)) return NULL;
  char* block = arena + used;
  used += need;
  memcpy(block, &size, sizeof(size));
  return block + 16;
}

void free(void* block) { (void)block; }

void* calloc(size_t count, size_t size) {
  void* block = malloc(count * size);
  if (block != NULL) memset(block, 0, count * size);
  return block;
}

void* realloc(void* old, size_t size) {
  void* block = malloc(size);
  if (old != NULL && block != NULL) {
    size_t old_size;
    memcpy(&old_size, (char*)old - 16, sizeof(old_size));
    memcpy(block, old, old_size < size ? old_size : size);
  }
  return block;
}

size_t bump_used(void) { return used; }
