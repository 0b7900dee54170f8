// syscall_storm: spends its time in the kernel, reading /dev/zero one byte at a
// time from syscall_storm_reader, so a profile must show kernel frames under it.
//
//   syscall_storm [--seconds S] [--announce]
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "workload_common.h"

// Issues read(2) itself rather than through libc, whose read has no frame
// pointer: a frame-pointer walk from inside libc's read would skip its caller.
// With the syscall instruction here, the user stack under the kernel frames is
// main;syscall_storm_reader;syscall_storm_read.
__attribute__((noinline)) long syscall_storm_read(int fd, char* buf, unsigned long count) {
  KEEP_FRAME();
#if defined(__x86_64__)
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "0"((long)SYS_read), "D"((long)fd), "S"(buf), "d"(count)
                   : "rcx", "r11", "memory");
  return ret;
#else
  return read(fd, buf, count);
#endif
}

__attribute__((noinline)) unsigned long syscall_storm_reader(int fd, double seconds) {
  unsigned long reads = 0;
  char byte;
  double start = MonotonicSeconds();
  for (;;) {
    for (int i = 0; i < 4096; ++i) {
      if (syscall_storm_read(fd, &byte, 1) == 1) ++reads;
    }
    if (MonotonicSeconds() - start >= seconds) return reads;
  }
}

int main(int argc, char** argv) {
  double seconds = atof(FlagValue(argc, argv, "--seconds", "3"));
  int fd = open("/dev/zero", O_RDONLY);
  if (fd < 0) {
    perror("/dev/zero");
    return 1;
  }
  if (HasFlag(argc, argv, "--announce")) AnnounceReady();
  unsigned long reads = syscall_storm_reader(fd, seconds);
  printf("{\"pid\": %ld, \"reads\": %lu}\n", (long)getpid(), reads);
  return 0;
}
