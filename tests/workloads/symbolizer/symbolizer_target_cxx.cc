// A C++ process for the native symbolizer tests: prints the address of a
// namespaced member function (so the test can check demangling), then waits
// for EOF on stdin.
#include <cstdio>

namespace pystrobe::testing {

class Worker {
 public:
  __attribute__((noinline)) static int Spin(int n);
};

int Worker::Spin(int n) {
  volatile int sum = 0;
  for (int i = 0; i < n; ++i) sum = sum + i;
  return sum;
}

}  // namespace pystrobe::testing

int main() {
  std::printf("work=%p\n", reinterpret_cast<void*>(&pystrobe::testing::Worker::Spin));
  std::printf("ready\n");
  std::fflush(stdout);
  char line[256];
  while (std::fgets(line, sizeof(line), stdin) != nullptr) {
  }
  return pystrobe::testing::Worker::Spin(3) == 12345;
}
