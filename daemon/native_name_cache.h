// Names of native frames, resolved once per distinct (image, address), and
// as samples arrive: a process image's symbols can then be released as soon
// as it exits, which keeps memory bounded by the live processes.
#ifndef PYSTROBE_DAEMON_NATIVE_NAME_CACHE_H_
#define PYSTROBE_DAEMON_NATIVE_NAME_CACHE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "daemon/process_table.h"

namespace pystrobe {

// Every frame but the leaf holds a return address, which may already point
// into the next function when the call was a function's last instruction;
// looking up the byte before it names the caller correctly.
inline uint64_t FrameLookupAddress(const std::vector<uint64_t>& ips, size_t index) {
  return index == 0 ? ips[index] : ips[index] - 1;
}

class NativeNameCache {
 public:
  // The name of `address` (a lookup address) in `image`: "function",
  // "module+0xoffset", or "[unknown] 0x..." when the image has no symbols.
  const std::string& Name(const ProcessImage& image, uint64_t address) {
    auto [it, inserted] = names_[image.id].try_emplace(address);
    if (inserted) {
      ++size_;
      it->second = image.symbols != nullptr ? image.symbols->Symbolize(address)
                                            : absl::StrFormat("[unknown] 0x%x", address);
    }
    return it->second;
  }

  // Resolves every frame of a user stack of `image` now.
  void NameAll(const ProcessImage& image, const std::vector<uint64_t>& user_ips) {
    for (size_t i = 0; i < user_ips.size(); ++i) Name(image, FrameLookupAddress(user_ips, i));
  }

  // Drops the names of an image no stack refers to any more.
  void Forget(ImageId image) {
    auto it = names_.find(image);
    if (it == names_.end()) return;
    size_ -= it->second.size();
    names_.erase(it);
  }

  // Drops names to get under `max_names`: those of images `still_named`
  // says can name them again (live ones, whose symbols are still loaded).
  // Counts what it dropped in evictions().
  template <typename Predicate>
  void Shrink(size_t max_names, Predicate still_named) {
    for (auto it = names_.begin(); size_ > max_names && it != names_.end();) {
      if (!still_named(it->first)) {
        ++it;
        continue;
      }
      size_ -= it->second.size();
      evictions_ += it->second.size();
      names_.erase(it++);
    }
  }

  size_t size() const { return size_; }
  uint64_t evictions() const { return evictions_; }

 private:
  // Image -> lookup address -> name.
  absl::flat_hash_map<ImageId, absl::flat_hash_map<uint64_t, std::string>> names_;
  size_t size_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_NATIVE_NAME_CACHE_H_
