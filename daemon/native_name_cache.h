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
    auto [it, inserted] = names_.try_emplace({image.id, address});
    if (inserted) {
      it->second = image.symbols != nullptr ? image.symbols->Symbolize(address)
                                            : absl::StrFormat("[unknown] 0x%x", address);
    }
    return it->second;
  }

  // Resolves every frame of a user stack of `image` now.
  void NameAll(const ProcessImage& image, const std::vector<uint64_t>& user_ips) {
    for (size_t i = 0; i < user_ips.size(); ++i) Name(image, FrameLookupAddress(user_ips, i));
  }

  size_t size() const { return names_.size(); }

 private:
  absl::flat_hash_map<std::pair<ImageId, uint64_t>, std::string> names_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_NATIVE_NAME_CACHE_H_
