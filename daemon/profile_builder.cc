#include "daemon/profile_builder.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pystrobe {
namespace {

// Every frame but the leaf holds a return address, which may already point
// into the next function when the call was a function's last instruction;
// looking up the byte before it names the caller correctly.
uint64_t LookupAddress(const std::vector<uint64_t>& ips, size_t index) {
  return index == 0 ? ips[index] : ips[index] - 1;
}

}  // namespace

void ProfileBuilder::AddTo(const StackAggregator& stacks, Profile& profile) {
  for (const auto& [stack, count] : stacks.counts()) {
    const ProcessImage& image = processes_->image(stack.image);
    std::vector<Frame> frames;
    frames.reserve(2 + stack.user_ips.size() + stack.kernel_ips.size());
    frames.push_back({absl::StrCat(image.comm, " (", image.pid, ")"), FrameKind::kProcess});
    if (options_.threads) {
      auto name = image.thread_names.find(stack.tid);
      frames.push_back(
          {absl::StrCat(name != image.thread_names.end() ? name->second : "?", " tid=", stack.tid),
           FrameKind::kThread});
    }
    for (size_t i = stack.user_ips.size(); i-- > 0;) {
      frames.push_back({NativeName(image, LookupAddress(stack.user_ips, i)), FrameKind::kNative});
    }
    for (size_t i = stack.kernel_ips.size(); i-- > 0;) {
      frames.push_back({KernelName(LookupAddress(stack.kernel_ips, i)), FrameKind::kKernel});
    }
    if (stack.user_ips.empty() && stack.kernel_ips.empty()) {
      frames.push_back({"[unknown]", FrameKind::kMarker});
    }
    profile.Add(std::move(frames), count);
  }
}

const std::string& ProfileBuilder::NativeName(const ProcessImage& image, uint64_t address) {
  auto [it, inserted] = native_names_.try_emplace({image.id, address});
  if (inserted) {
    it->second = image.symbols != nullptr ? image.symbols->Symbolize(address)
                                          : absl::StrFormat("[unknown] 0x%x", address);
  }
  return it->second;
}

const std::string& ProfileBuilder::KernelName(uint64_t address) {
  auto [it, inserted] = kernel_names_.try_emplace(address);
  if (inserted) {
    it->second =
        kernel_ != nullptr ? kernel_->Symbolize(address) : absl::StrFormat("0x%x_[k]", address);
  }
  return it->second;
}

}  // namespace pystrobe
