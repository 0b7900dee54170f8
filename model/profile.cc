#include "model/profile.h"

#include <utility>

namespace pystrobe {

void Profile::Add(std::vector<Frame> frames, uint64_t count, uint64_t nanoseconds) {
  // A key that cannot collide: each frame's kind, then its name, NUL-separated.
  std::string key;
  for (const Frame& frame : frames) {
    key.push_back(static_cast<char>('0' + static_cast<int>(frame.kind)));
    key.append(frame.name);
    key.push_back('\0');
  }
  total_count_ += count;
  total_nanoseconds_ += nanoseconds;
  auto [it, inserted] = index_by_key_.try_emplace(std::move(key), stacks_.size());
  if (inserted) {
    stacks_.push_back(ProfileStack{std::move(frames), count, nanoseconds});
  } else {
    stacks_[it->second].count += count;
    stacks_[it->second].nanoseconds += nanoseconds;
  }
}

}  // namespace pystrobe
