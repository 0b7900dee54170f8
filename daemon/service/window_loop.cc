#include "daemon/service/window_loop.h"

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/loader/bpf_sampler.h"
#include "daemon/recording/process_labels.h"
#include "daemon/recording/profile_builder.h"
#include "daemon/recording/time_weighting.h"

namespace pystrobe {

WindowLoop::WindowLoop(Recorder* recorder, const KernelSymbolizer* kernel, ContainerLabels* labels,
                       std::vector<WindowSink*> sinks, WindowOptions options, absl::Time start,
                       uint64_t next_sequence)
    : recorder_(recorder),
      kernel_(kernel),
      labels_(labels),
      sinks_(std::move(sinks)),
      options_(std::move(options)),
      window_start_(start),
      next_sequence_(next_sequence) {}

Profile WindowLoop::Build(const WindowStacks& stacks, absl::Time now, bool memory) {
  Profile profile;
  profile.title = memory ? "pystrobe daemon: resident growth (bytes)" : "pystrobe daemon";
  profile.sample_rate_hz = memory ? 0 : options_.rate_hz;
  profile.start_time = window_start_;
  profile.duration = now - window_start_;
  for (const auto& [key, value] : options_.static_labels) profile.labels.push_back({key, value});

  // The builder keeps its kernel names for one window only: a fresh one per
  // window keeps that cache bounded too.
  ProfileBuilder builder(*recorder_, kernel_,
                         ProfileBuilderOptions{.threads = true, .native = options_.native_stacks});
  // Per process: where it runs, which Python it is, its pid in its container.
  auto container = [this](const ProcessImage& image) {
    return labels_ != nullptr ? labels_->ForCgroup(image.cgroup_id) : std::vector<ProfileLabel>();
  };
  if (memory) {
    profile.count_unit = "bytes";
    profile.sampling_interval_bytes = SamplerConfig{}.memory_sample_bytes;
    builder.AddBytesTo(stacks.memory, profile);
    AddProcessLabels(recorder_->processes(), {&stacks.memory}, profile, container);
  } else {
    AddOnAndOffCpuStacks(stacks.on_cpu, stacks.off_cpu,
                         {.offcpu = options_.offcpu, .rate_hz = options_.rate_hz}, builder,
                         profile);
    AddProcessLabels(recorder_->processes(), {&stacks.on_cpu, &stacks.off_cpu}, profile, container);
  }
  return profile;
}

void WindowLoop::Cut(absl::Time now, bool final) {
  WindowStacks stacks = recorder_->TakeStacks();
  ProfileWindow window;
  window.sequence = next_sequence_++;
  window.start = window_start_;
  window.end = now;
  window.final = final;
  window.profile = Build(stacks, now);
  if (options_.memory) window.memory = Build(stacks, now, /*memory=*/true);
  for (WindowSink* sink : sinks_) {
    if (absl::Status s = sink->Consume(window); !s.ok()) {
      ++sink_errors_[sink->name()];
      fprintf(stderr, "pystrobe daemon: window %llu: %s: %s\n",
              static_cast<unsigned long long>(window.sequence), sink->name().c_str(),
              std::string(s.message()).c_str());
    }
  }
  if (observer_) observer_(stacks);
  ++windows_;
  window_start_ = now;
  // The window is written: nothing refers to exited processes any more.
  recorder_->EvictAfterWindow(options_.max_native_names, options_.max_python_codes);
}

}  // namespace pystrobe
