// GPUs without a GPU: NVML opened with dlopen from a fake library that
// answers from a script (tests/workloads/gpu/fake_nvml.c), the sampler's
// per-device and per-process figures, and the [gpu wait] classifier.
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/gpu/gpu_sampler.h"
#include "daemon/gpu/gpu_wait.h"
#include "daemon/gpu/nvml_library.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

class FakeNvmlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    script_ = ::testing::TempDir() + "/fake_nvml_script_" + std::to_string(getpid());
    setenv("PYSTROBE_FAKE_NVML_SCRIPT", script_.c_str(), 1);
  }
  void TearDown() override { unlink(script_.c_str()); }
  void Script(const std::string& text) { std::ofstream(script_) << text; }
  std::unique_ptr<GpuSampler> Sampler() {
    absl::StatusOr<std::unique_ptr<NvmlLibrary>> nvml = NvmlLibrary::Load(FAKE_NVML);
    EXPECT_TRUE(nvml.ok()) << nvml.status();
    absl::StatusOr<std::unique_ptr<GpuSampler>> sampler =
        GpuSampler::Over(std::move(*nvml), absl::Milliseconds(10));
    EXPECT_TRUE(sampler.ok()) << sampler.status();
    return sampler.ok() ? std::move(*sampler) : nullptr;
  }
  std::string script_;
};

TEST(NvmlLibrary, AbsentLibraryIsNotFoundNotAnError) {
  absl::StatusOr<std::unique_ptr<NvmlLibrary>> nvml =
      NvmlLibrary::Load("/nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(nvml.status().code(), absl::StatusCode::kNotFound);
}

TEST(NvmlLibrary, DefaultPathIsTheDriversSonameUnlessOverridden) {
  unsetenv("PYSTROBE_NVML_LIBRARY");
  EXPECT_EQ(NvmlLibrary::DefaultPath(), "libnvidia-ml.so.1");
  setenv("PYSTROBE_NVML_LIBRARY", "/tmp/x.so", 1);
  EXPECT_EQ(NvmlLibrary::DefaultPath(), "/tmp/x.so");
  unsetenv("PYSTROBE_NVML_LIBRARY");
}

TEST(NvmlLibrary, LibraryWithoutTheEntryPointsIsRefusedNamingOne) {
  absl::StatusOr<std::unique_ptr<NvmlLibrary>> nvml = NvmlLibrary::Load(FAKE_CUDA);
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(nvml.status().message().find("nvml"), std::string::npos) << nvml.status();
}

TEST_F(FakeNvmlTest, FailedInitIsUnavailableWithNvmlsReason) {
  Script("init_fails\ndevice A 0 0 0\n");
  absl::StatusOr<std::unique_ptr<NvmlLibrary>> nvml = NvmlLibrary::Load(FAKE_NVML);
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(nvml.status().message().find("Driver Not Loaded"), std::string::npos);
}

TEST_F(FakeNvmlTest, NoDeviceIsNotFound) {
  Script("# no device\n");
  absl::StatusOr<std::unique_ptr<NvmlLibrary>> nvml = NvmlLibrary::Load(FAKE_NVML);
  ASSERT_TRUE(nvml.ok());
  EXPECT_EQ(GpuSampler::Over(std::move(*nvml), absl::Seconds(1)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(FakeNvmlTest, DeviceFiguresAreMeansOverPollsAndPeaks) {
  Script("device Fake_H100 80 1000 8000\n");
  std::unique_ptr<GpuSampler> sampler = Sampler();
  ASSERT_NE(sampler, nullptr);
  sampler->PollNow();
  Script("device Fake_H100 40 3000 8000\n");
  sampler->PollNow();
  Script("device Fake_H100 0 2000 8000\n");
  sampler->PollNow();
  GpuWindow window = sampler->TakeWindow();
  ASSERT_EQ(window.devices.size(), 1u);
  EXPECT_EQ(window.polls, 3u);
  EXPECT_EQ(window.devices[0].name, "Fake H100");
  EXPECT_NEAR(window.devices[0].utilization, 0.40, 1e-9);
  EXPECT_EQ(window.devices[0].memory_used_peak_bytes, 3000u);
  EXPECT_EQ(window.devices[0].memory_used_bytes, 2000u);
  EXPECT_EQ(window.devices[0].memory_total_bytes, 8000u);
  // A new window starts from nothing.
  sampler->PollNow();
  EXPECT_NEAR(sampler->TakeWindow().devices[0].utilization, 0.0, 1e-9);
}

TEST_F(FakeNvmlTest, ProcessFiguresPerHostPidAndDeviceSummedOverDevices) {
  Script(
      "device A 90 0 100\ndevice B 50 0 100\n"
      "process 4242 0 1000 74\nprocess 4242 1 500 30\nprocess 7 1 64 -\n");
  std::unique_ptr<GpuSampler> sampler = Sampler();
  ASSERT_NE(sampler, nullptr);
  usleep(2000);  // the fake's samples are stamped now: newer than the start
  sampler->PollNow();
  usleep(2000);
  sampler->PollNow();
  GpuWindow window = sampler->TakeWindow();
  const GpuProcessFigures* p = window.Of(4242);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->devices.size(), 2u);
  EXPECT_NEAR(p->devices[0].utilization, 0.74, 1e-9);
  EXPECT_NEAR(p->devices[1].utilization, 0.30, 1e-9);
  EXPECT_NEAR(p->utilization, 1.04, 1e-9);
  EXPECT_NEAR(p->busy_share(), 0.52, 1e-9);
  EXPECT_EQ(p->memory_bytes, 1500u);
  EXPECT_EQ(p->memory_peak_bytes, 1500u);
  EXPECT_FALSE(p->utilization_from_device);
  // Running with no utilization sample: its kernels did not run.
  const GpuProcessFigures* idle = window.Of(7);
  ASSERT_NE(idle, nullptr);
  EXPECT_EQ(idle->utilization, 0);
  EXPECT_EQ(idle->memory_bytes, 64u);
  EXPECT_EQ(window.Of(1), nullptr);
}

TEST_F(FakeNvmlTest, ProcessMemoryPeakIsTheLargestSumAtOnePoll) {
  Script("device A 0 0 100\nprocess 5 0 100 0\n");
  std::unique_ptr<GpuSampler> sampler = Sampler();
  ASSERT_NE(sampler, nullptr);
  sampler->PollNow();
  Script("device A 0 0 100\nprocess 5 0 900 0\n");
  sampler->PollNow();
  Script("device A 0 0 100\nprocess 5 0 300 0\n");
  sampler->PollNow();
  GpuWindow window = sampler->TakeWindow();
  ASSERT_NE(window.Of(5), nullptr);
  EXPECT_EQ(window.Of(5)->memory_peak_bytes, 900u);
  EXPECT_EQ(window.Of(5)->memory_bytes, 300u);
}

TEST_F(FakeNvmlTest, WithoutPerProcessUtilizationTheDevicesIsChargedAndSaidSo) {
  Script("no_process_utilization\ndevice A 60 0 100\nprocess 9 0 10 0\n");
  std::unique_ptr<GpuSampler> sampler = Sampler();
  ASSERT_NE(sampler, nullptr);
  sampler->PollNow();
  GpuWindow window = sampler->TakeWindow();
  ASSERT_NE(window.Of(9), nullptr);
  EXPECT_NEAR(window.Of(9)->utilization, 0.60, 1e-9);
  EXPECT_TRUE(window.Of(9)->utilization_from_device);
}

TEST_F(FakeNvmlTest, BackgroundThreadPollsAtItsInterval) {
  Script("device A 100 0 100\n");
  std::unique_ptr<GpuSampler> sampler = Sampler();
  ASSERT_NE(sampler, nullptr);
  absl::Time start = absl::Now();
  sampler->Start();
  // 10 ms interval: five polls come, however long a loaded machine takes to
  // run the thread (a liveness limit), and never more often than the interval.
  GpuWindow window;
  uint64_t polls = 0;
  absl::Time deadline = start + absl::Seconds(30);
  while (polls < 5 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
    GpuWindow taken = sampler->TakeWindow();
    polls += taken.polls;
    if (taken.polls > 0) window = taken;
  }
  double elapsed_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  EXPECT_GE(polls, 5u) << "in " << elapsed_ms << " ms";
  EXPECT_LE(polls, elapsed_ms / 10 + 2) << "in " << elapsed_ms << " ms";
  ASSERT_FALSE(window.devices.empty());
  EXPECT_NEAR(window.devices[0].utilization, 1.0, 1e-9);
}

TEST(IsGpuWaitSymbol, SynchronisationsOfDriverAndRuntimeWhateverTheSuffix) {
  for (const char* name :
       {"cuCtxSynchronize", "cuCtxSynchronize_v2", "cuStreamSynchronize_ptsz", "cuEventSynchronize",
        "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaStreamSynchronize_ptsz",
        "cudaEventSynchronize", "cudaThreadSynchronize"}) {
    EXPECT_TRUE(IsGpuWaitSymbol(name)) << name;
  }
}

TEST(IsGpuWaitSymbol, BlockingCopiesWaitAsyncOnesDoNot) {
  for (const char* name : {"cuMemcpyDtoH_v2", "cuMemcpyDtoH", "cuMemcpy", "cuMemcpy2D_v2",
                           "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpyFromSymbol"}) {
    EXPECT_TRUE(IsGpuWaitSymbol(name)) << name;
  }
  for (const char* name : {"cuMemcpyDtoHAsync_v2", "cudaMemcpyAsync", "cudaMemcpy2DAsync_ptsz",
                           "cuLaunchKernel", "cudaLaunchKernel", "cuCtxSynchronizeX",
                           "my_cuCtxSynchronize", "cudaStreamQuery", "cuStreamWaitEvent"}) {
    EXPECT_FALSE(IsGpuWaitSymbol(name)) << name;
  }
}

TEST(IsCudaLibrary, DriverAndRuntimeByFileName) {
  EXPECT_TRUE(IsCudaLibrary("/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05"));
  EXPECT_TRUE(
      IsCudaLibrary("/opt/venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/"
                    "libcudart.so.12"));
  EXPECT_TRUE(IsCudaLibrary("libcuda.so.1"));
  EXPECT_FALSE(IsCudaLibrary("/usr/lib/libcudnn.so.9"));
  EXPECT_FALSE(IsCudaLibrary("/usr/lib/libc.so.6"));
}

}  // namespace
}  // namespace pystrobe
