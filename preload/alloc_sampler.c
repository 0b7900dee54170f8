/*
 * libpystrobe-alloc.so: allocation sampling inside the process, for
 * `pystrobe record --allocations -- CMD` (LD_PRELOAD'ed by pystrobe).
 *
 * Uprobes on libc's malloc trap into the kernel on every call (hundreds of
 * times slower for an allocation-heavy program). Here the allocator's calls
 * are wrapped in the process instead, as heapprofd and tcmalloc do: each
 * thread counts the bytes it allocates down to a random threshold and only
 * a sampled allocation calls pystrobe_alloc_sampled(), the function the BPF
 * side puts a uprobe on (the kernel then takes the stack, Python frames
 * included). A free calls pystrobe_alloc_freed() only for a block that was
 * sampled, which a small lock-free table of addresses tells.
 *
 * The thresholds are exponential with mean PYSTROBE_ALLOC_SAMPLE_BYTES (a
 * Poisson process over the bytes allocated): an allocation of s bytes is
 * sampled with probability p = 1 - exp(-s / mean), independently of the
 * others, and weighs s / p, so that every estimate is unbiased.
 *
 * Constraints: malloc may be called by dlsym() while the next allocator is
 * being looked up (served from a static buffer then), nothing here allocates,
 * per-thread state is initial-exec TLS (no allocation on first touch), and a
 * program that brings its own allocator (jemalloc as a shared library) keeps
 * it: the wrappers call the next definition of each function (RTLD_NEXT).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- The probes pystrobe attaches to (by symbol) ------------------------ */

/*
 * void pystrobe_alloc_sampled(void *address, uint64_t size, uint64_t weight,
 *                             uint64_t untracked):
 * a sampled allocation: `address`, `size` bytes, standing for `weight` bytes.
 * `untracked`: the address table was full, so this block's free will not be
 * reported (pystrobe counts these).
 * void pystrobe_alloc_freed(void *address):
 * a block pystrobe_alloc_sampled() reported is freed (or unmapped).
 *
 * Each is a 5-byte nop and a return, written in assembly so that nothing
 * comes before the nop: the uprobe sits on it, and a kernel with optimized
 * uprobes (x86, 6.18+) turns a nop5 uprobe into a call to its trampoline
 * after the first hit, a syscall instead of a breakpoint trap and its
 * emulation, several times cheaper. Elsewhere it stays a plain uprobe.
 */
#if defined(__x86_64__)
#define PROBE_FUNCTION(name)                                             \
  __asm__(                                                               \
      ".text\n"                                                          \
      ".globl " #name                                                    \
      "\n"                                                               \
      ".type " #name                                                     \
      ", @function\n"                                                    \
      ".p2align 4\n" #name                                               \
      ":\n"                                                              \
      ".cfi_startproc\n"                                                 \
      ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n" /* nopl 0x0(%rax,%rax,1) */ \
      "ret\n"                                                            \
      ".cfi_endproc\n"                                                   \
      ".size " #name ", . - " #name "\n")
PROBE_FUNCTION(pystrobe_alloc_sampled);
PROBE_FUNCTION(pystrobe_alloc_freed);
EXPORT void pystrobe_alloc_sampled(void* address, uint64_t size, uint64_t weight,
                                   uint64_t untracked);
EXPORT void pystrobe_alloc_freed(void* address);
#else
EXPORT __attribute__((noinline)) void pystrobe_alloc_sampled(void* address, uint64_t size,
                                                             uint64_t weight, uint64_t untracked) {
  __asm__ volatile("" : : "r"(address), "r"(size), "r"(weight), "r"(untracked) : "memory");
}

EXPORT __attribute__((noinline)) void pystrobe_alloc_freed(void* address) {
  __asm__ volatile("" : : "r"(address) : "memory");
}
#endif

/* ---- The next allocator ---------------------------------------------------- */

struct next_allocator {
  void* (*malloc)(size_t);
  void* (*calloc)(size_t, size_t);
  void* (*realloc)(void*, size_t);
  void (*free)(void*);
  int (*posix_memalign)(void**, size_t, size_t);
  void* (*aligned_alloc)(size_t, size_t);
  void* (*memalign)(size_t, size_t);
  void* (*valloc)(size_t);
  void* (*pvalloc)(size_t);
  void* (*mmap)(void*, size_t, int, int, int, off_t);
  int (*munmap)(void*, size_t);
};

static struct next_allocator next;
static atomic_int resolved; /* 0: not yet, 1: under way, 2: done */

/* Allocations made while dlsym() runs (it may call calloc): never freed. */
static _Alignas(16) char bootstrap[64 * 1024];
static atomic_size_t bootstrap_used;

/* Makes free() of a start-up block take its slow path (below). */
static void mark_in_filter(const void* block);

static __thread int resolving __attribute__((tls_model("initial-exec")));

static inline int in_bootstrap(const void* p) {
  return (uintptr_t)p - (uintptr_t)bootstrap < sizeof(bootstrap); /* one compare */
}

/* 16 bytes in front of each bootstrap block hold its size (for realloc). */
static void* bootstrap_alloc(size_t size) {
  size_t need = (size + 16 + 15) & ~(size_t)15;
  size_t at = atomic_fetch_add(&bootstrap_used, need);

  if (at + need > sizeof(bootstrap)) {
    errno = ENOMEM;
    return NULL;
  }
  memcpy(bootstrap + at, &size, sizeof(size));
  mark_in_filter(bootstrap + at + 16);
  return bootstrap + at + 16;
}

static size_t bootstrap_size(const void* p) {
  size_t size;

  memcpy(&size, (const char*)p - 16, sizeof(size));
  return size;
}

static void resolve(void) {
  int expected = 0;

  if (!atomic_compare_exchange_strong(&resolved, &expected, 1)) {
    /* Another thread resolves: wait for it (only at start-up). */
    while (atomic_load(&resolved) != 2)
      ;
    return;
  }
  resolving = 1;
  /* Released one by one: the hot wrappers test their own (NEXT). */
  __atomic_store_n(&next.malloc, dlsym(RTLD_NEXT, "malloc"), __ATOMIC_RELEASE);
  __atomic_store_n(&next.calloc, dlsym(RTLD_NEXT, "calloc"), __ATOMIC_RELEASE);
  __atomic_store_n(&next.realloc, dlsym(RTLD_NEXT, "realloc"), __ATOMIC_RELEASE);
  __atomic_store_n(&next.free, dlsym(RTLD_NEXT, "free"), __ATOMIC_RELEASE);
  next.posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
  next.aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
  next.memalign = dlsym(RTLD_NEXT, "memalign");
  next.valloc = dlsym(RTLD_NEXT, "valloc");
  next.pvalloc = dlsym(RTLD_NEXT, "pvalloc");
  next.mmap = dlsym(RTLD_NEXT, "mmap");
  next.munmap = dlsym(RTLD_NEXT, "munmap");
  resolving = 0;
  atomic_store(&resolved, 2);
}

/*
 * The next `fn` (malloc, calloc, realloc, free) where it is resolved, else
 * NULL: the load the call needs anyway, instead of one of `resolved` and
 * then the call's (a plain load on x86). NULL sends the wrapper to ready().
 */
#define NEXT(fn) __atomic_load_n(&next.fn, __ATOMIC_ACQUIRE)

/* True when the next allocator can be called; false inside dlsym(). */
static inline int ready(void) {
  if (LIKELY(atomic_load_explicit(&resolved, memory_order_acquire) == 2)) return 1;
  if (resolving) return 0;
  resolve();
  return 1;
}

/* ---- Sampled addresses ------------------------------------------------------ */

/*
 * Open addressing, linear probing, lock-free: a slot holds 0 (empty), 1 (a
 * removed entry, reusable) or a sampled block's address. 65536 slots (512
 * KiB of .bss, pages touched only where entries land) hold the blocks of 16
 * GiB in use at the default mean; past kMaxProbe a block is untracked.
 */
#define TABLE_BITS 16
#define TABLE_SIZE (1u << TABLE_BITS)
#define MAX_PROBE 64
#define SLOT_EMPTY ((uintptr_t)0)
#define SLOT_REMOVED ((uintptr_t)1)

static _Atomic uintptr_t table[TABLE_SIZE];

/*
 * How many sampled blocks hash to each of 4096 buckets (8 KiB, stays in
 * cache): a free whose bucket is empty, nearly every free, skips the table,
 * whose random slots would miss the cache. The start-up blocks count too
 * (never removed): free() then needs no test of its own for them.
 */
#define FILTER_BITS 12
static _Atomic uint16_t filter[1u << FILTER_BITS];

static inline uint64_t hash_of(uintptr_t address) { return (address >> 4) * 0x9E3779B97F4A7C15ull; }

static inline uint32_t slot_of(uintptr_t address) {
  return (uint32_t)(hash_of(address) >> (64 - TABLE_BITS));
}

static inline _Atomic uint16_t* bucket_of(uintptr_t address) {
  return &filter[hash_of(address) >> (64 - FILTER_BITS)];
}

static int table_insert(uintptr_t address) {
  uint32_t slot = slot_of(address);

  for (int i = 0; i < MAX_PROBE; i++, slot = (slot + 1) & (TABLE_SIZE - 1)) {
    uintptr_t seen = atomic_load_explicit(&table[slot], memory_order_relaxed);

    if (seen != SLOT_EMPTY && seen != SLOT_REMOVED) continue;
    if (atomic_compare_exchange_strong(&table[slot], &seen, address)) {
      atomic_fetch_add_explicit(bucket_of(address), 1, memory_order_relaxed);
      return 1;
    }
  }
  return 0;
}

/* Removes `address` if it is there: true if it was a sampled block. */
static int table_remove(uintptr_t address) {
  uint32_t slot = slot_of(address);

  for (int i = 0; i < MAX_PROBE; i++, slot = (slot + 1) & (TABLE_SIZE - 1)) {
    uintptr_t seen = atomic_load_explicit(&table[slot], memory_order_relaxed);

    if (seen == SLOT_EMPTY) return 0;
    if (seen == address && atomic_compare_exchange_strong(&table[slot], &seen, SLOT_REMOVED)) {
      atomic_fetch_sub_explicit(bucket_of(address), 1, memory_order_relaxed);
      return 1;
    }
  }
  return 0;
}

static void mark_in_filter(const void* block) {
  atomic_fetch_add_explicit(bucket_of((uintptr_t)block), 1, memory_order_relaxed);
}

/* After fork() the child's sampled blocks are the parent's, not its own;
 * the start-up blocks are still there. */
static void forget_parent_blocks(void) {
  size_t used = atomic_load(&bootstrap_used);

  for (uint32_t i = 0; i < TABLE_SIZE; i++) {
    if (atomic_load_explicit(&table[i], memory_order_relaxed) != SLOT_EMPTY)
      atomic_store_explicit(&table[i], SLOT_EMPTY, memory_order_relaxed);
  }
  for (uint32_t i = 0; i < (1u << FILTER_BITS); i++)
    atomic_store_explicit(&filter[i], 0, memory_order_relaxed);
  for (size_t at = 0; at + 16 <= used && at + 16 <= sizeof(bootstrap);) {
    size_t size;

    memcpy(&size, bootstrap + at, sizeof(size));
    mark_in_filter(bootstrap + at + 16);
    at += (size + 16 + 15) & ~(size_t)15;
  }
}

/* ---- Per-thread sampling ----------------------------------------------------- */

/* Mean bytes between samples (PYSTROBE_ALLOC_SAMPLE_BYTES); 0: sampling off. */
static uint64_t mean_bytes = 512 * 1024;

struct thread_state {
  int64_t until_sample; /* bytes left before the next sample; <= 0: take it */
  uint64_t rng;         /* xorshift64* state; 0 until the thread's first draw */
  int busy;             /* in the sampled path: what it allocates is not counted */
};

static __thread struct thread_state thread_state __attribute__((tls_model("initial-exec")));

static uint64_t next_random(struct thread_state* state) {
  uint64_t x = state->rng;

  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  state->rng = x;
  return x * 0x2545F4914F6CDD1Dull;
}

static void seed(struct thread_state* state) {
  static atomic_uint_fast64_t threads;
  struct timespec now;
  uint64_t z;

  clock_gettime(CLOCK_MONOTONIC, &now);
  /* splitmix64 of the time, the thread's TLS address and a counter. */
  z = (uint64_t)now.tv_nsec ^ ((uint64_t)now.tv_sec << 32) ^ (uintptr_t)state ^
      (atomic_fetch_add(&threads, 1) * 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  state->rng = z ? z : 1;
}

/* Bytes to the next sample: exponential with mean mean_bytes, at least 1. */
static int64_t draw_interval(struct thread_state* state) {
  /* A uniform in (0, 1]: 53 random bits, never 0. */
  double u = ((next_random(state) >> 11) + 1) * (1.0 / 9007199254740992.0);
  double bytes = -log(u) * (double)mean_bytes;

  return bytes < 1 ? 1 : (int64_t)bytes;
}

/*
 * Takes the sample and returns `address`. The wrappers reach it by a tail
 * call, so the stack the kernel walks from the probe (frame pointers: this
 * function keeps one, the wrappers need none) goes from here straight to
 * the wrapper's caller, the code that allocated.
 */
static __attribute__((noinline, optimize("no-omit-frame-pointer"))) void* sample(void* address,
                                                                                 size_t size) {
  struct thread_state* state = &thread_state;
  double weight;
  int tracked;

  if (state->busy) return address; /* not expected: nothing below allocates */
  if (mean_bytes == 0) {
    state->until_sample = INT64_MAX;
    return address;
  }
  if (state->rng == 0) {
    /* The thread's first allocation: its first threshold. */
    seed(state);
    state->until_sample += draw_interval(state);
    if (state->until_sample > 0) return address;
  }
  /* The next threshold lies past this block (memoryless: draw afresh). */
  state->until_sample = draw_interval(state);
  state->busy = 1;
  /* Sampled with p = 1 - exp(-size / mean): weighs size / p. */
  weight = (double)size / -expm1(-(double)size / (double)mean_bytes);
  tracked = table_insert((uintptr_t)address);
  pystrobe_alloc_sampled(address, size, (uint64_t)(weight + 0.5), !tracked);
  state->busy = 0;
  return address;
}

/* Counts `size` bytes allocated at `address` (not NULL) and returns it: in
 * tail position in every wrapper, so that sample() is a tail call. */
static inline void* counted(void* address, size_t size) {
  struct thread_state* state = &thread_state;

  state->until_sample -= (int64_t)size;
  if (UNLIKELY(state->until_sample <= 0)) return sample(address, size);
  return address;
}

/* For posix_memalign, which returns 0 rather than the block. */
static __attribute__((noinline, optimize("no-omit-frame-pointer"))) int sample_aligned(
    void* address, size_t size) {
  sample(address, size);
  return 0;
}

/* A block whose filter bucket holds a sampled one: the table says whether
 * it is one. Apart, so that the common free saves no registers. */
static __attribute__((noinline)) void release_if_sampled(void* address) {
  if (table_remove((uintptr_t)address)) pystrobe_alloc_freed(address);
}

static inline void release(void* address) {
  if (UNLIKELY(atomic_load_explicit(bucket_of((uintptr_t)address), memory_order_relaxed) != 0))
    release_if_sampled(address);
}

/* ---- The wrappers ------------------------------------------------------------ */

EXPORT void* malloc(size_t size) {
  void* (*next_malloc)(size_t) = NEXT(malloc);
  void* p;

  if (UNLIKELY(next_malloc == NULL)) {
    if (!ready()) return bootstrap_alloc(size);
    next_malloc = next.malloc;
  }
  p = next_malloc(size);
  if (UNLIKELY(p == NULL)) return NULL;
  return counted(p, size);
}

EXPORT void* calloc(size_t n, size_t size) {
  void* (*next_calloc)(size_t, size_t) = NEXT(calloc);
  size_t total = n * size; /* right unless it overflows, and then calloc fails */
  void* p;

  if (UNLIKELY(next_calloc == NULL)) {
    if (__builtin_mul_overflow(n, size, &total)) {
      errno = ENOMEM;
      return NULL;
    }
    if (!ready()) return bootstrap_alloc(total); /* static: already zero */
    next_calloc = next.calloc;
  }
  p = next_calloc(n, size);
  if (UNLIKELY(p == NULL)) return NULL;
  return counted(p, total);
}

/* A free whose filter bucket is not empty (a sampled block, a start-up one
 * or one beside them), or before the next allocator is known. */
static __attribute__((noinline)) void free_slow(void* p) {
  if (p == NULL || in_bootstrap(p)) return;
  if (!ready()) return; /* cannot happen: a block to free came from somewhere */
  release_if_sampled(p);
  next.free(p);
}

/* The fast path is the filter's load and the call: NULL and the start-up
 * blocks take the slow one through their buckets (NULL's, bucket 0, may be
 * empty: then the next free() is called with NULL, which does nothing). */
EXPORT void free(void* p) {
  void (*next_free)(void*) = NEXT(free);

  if (UNLIKELY(next_free == NULL ||
               atomic_load_explicit(bucket_of((uintptr_t)p), memory_order_relaxed) != 0)) {
    free_slow(p);
    return;
  }
  next_free(p);
}

EXPORT void* realloc(void* old, size_t size) {
  void* p;

  if (UNLIKELY(!ready() || in_bootstrap(old))) {
    size_t old_size = old ? bootstrap_size(old) : 0;

    p = ready() ? next.malloc(size) : bootstrap_alloc(size);
    if (p && old) memcpy(p, old, old_size < size ? old_size : size);
    return p;
  }
  /* The old block leaves only if the call moves it or frees it; a failed
   * realloc keeps it, but is rare enough to report as a free anyway. */
  if (old != NULL) release(old);
  p = next.realloc(old, size);
  if (UNLIKELY(p == NULL)) return NULL;
  return counted(p, size);
}

EXPORT int posix_memalign(void** out, size_t alignment, size_t size) {
  struct thread_state* state = &thread_state;
  int error;

  if (UNLIKELY(!ready() || next.posix_memalign == NULL)) return ENOMEM;
  error = next.posix_memalign(out, alignment, size);
  if (error != 0 || *out == NULL) return error;
  state->until_sample -= (int64_t)size;
  if (UNLIKELY(state->until_sample <= 0)) return sample_aligned(*out, size);
  return 0;
}

EXPORT void* aligned_alloc(size_t alignment, size_t size) {
  void* p;

  if (UNLIKELY(!ready() || next.aligned_alloc == NULL)) {
    errno = ENOMEM; /* not in this C library */
    return NULL;
  }
  p = next.aligned_alloc(alignment, size);
  if (UNLIKELY(p == NULL)) return NULL;
  return counted(p, size);
}

EXPORT void* memalign(size_t alignment, size_t size) {
  void* p;

  if (UNLIKELY(!ready() || next.memalign == NULL)) {
    errno = ENOMEM; /* not in this C library */
    return NULL;
  }
  p = next.memalign(alignment, size);
  if (UNLIKELY(p == NULL)) return NULL;
  return counted(p, size);
}

EXPORT void* valloc(size_t size) {
  void* p;

  if (UNLIKELY(!ready() || next.valloc == NULL)) {
    errno = ENOMEM; /* not in this C library */
    return NULL;
  }
  p = next.valloc(size);
  if (UNLIKELY(p == NULL)) return NULL;
  return counted(p, size);
}

EXPORT void* pvalloc(size_t size) {
  void* p;

  if (UNLIKELY(!ready() || next.pvalloc == NULL)) {
    errno = ENOMEM; /* not in this C library */
    return NULL;
  }
  p = next.pvalloc(size);
  if (UNLIKELY(p == NULL)) return NULL;
  return counted(p, size);
}

/* Anonymous mappings are allocations too: CPython's object allocator takes
 * its arenas this way, as do other allocators. File mappings are not. */
EXPORT void* mmap(void* address, size_t length, int prot, int flags, int fd, off_t offset) {
  void* p;

  if (UNLIKELY(!ready()) || next.mmap == NULL)
    return (void*)syscall(SYS_mmap, address, length, prot, flags, fd, offset);
  p = next.mmap(address, length, prot, flags, fd, offset);
  if (p == MAP_FAILED || !(flags & MAP_ANONYMOUS) || (flags & MAP_FIXED)) return p;
  return counted(p, length);
}

EXPORT void* mmap64(void* address, size_t length, int prot, int flags, int fd, off_t offset) {
  return mmap(address, length, prot, flags, fd, offset);
}

EXPORT int munmap(void* address, size_t length) {
  if (UNLIKELY(!ready()) || next.munmap == NULL) return (int)syscall(SYS_munmap, address, length);
  release(address);
  return next.munmap(address, length);
}

/* ---- Start-up ------------------------------------------------------------------ */

__attribute__((constructor)) static void start(void) {
  const char* mean = getenv("PYSTROBE_ALLOC_SAMPLE_BYTES");

  if (mean != NULL && *mean != '\0') {
    char* end;
    unsigned long long value = strtoull(mean, &end, 10);

    if (*end == '\0') mean_bytes = value;
  }
  ready();
  pthread_atfork(NULL, NULL, forget_parent_blocks);
}
