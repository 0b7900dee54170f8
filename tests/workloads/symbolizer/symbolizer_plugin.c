// A library the symbolizer test target dlopens after its snapshot was taken.
__attribute__((noinline)) int pystrobe_plugin_work(int n) {
  volatile int sum = 0;
  for (int i = 0; i < n; ++i) sum += i * 3;
  return sum;
}
