// A process for the native symbolizer tests. It prints the addresses of one of
// its own functions, of its load base and of a libc function, then serves
// commands on stdin until EOF:
//   dlopen <path>   loads a library, prints "plugin=<address of
//                   pystrobe_plugin_work>"
// Built as non-PIE, PIE, stripped and with a separate debug file.
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

// The linker defines this at the first byte of the image.
extern char __executable_start;

__attribute__((noinline)) int pystrobe_target_work(int n) {
  volatile int sum = 0;
  for (int i = 0; i < n; ++i) sum += i;
  return sum;
}

int main(void) {
  // dlsym gives libc's own address; &qsort in a non-PIE binary could be a PLT
  // stub in the executable instead.
  printf("work=%p\n", (void*)&pystrobe_target_work);
  printf("base=%p\n", (void*)&__executable_start);
  printf("libc=%p\n", dlsym(RTLD_DEFAULT, "qsort"));
  printf("ready\n");
  fflush(stdout);

  char line[4096];
  while (fgets(line, sizeof(line), stdin) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    if (strncmp(line, "dlopen ", 7) == 0) {
      void* handle = dlopen(line + 7, RTLD_NOW);
      printf("plugin=%p\n", handle != NULL ? dlsym(handle, "pystrobe_plugin_work") : NULL);
      fflush(stdout);
    }
  }
  return pystrobe_target_work(3) == 12345;
}
