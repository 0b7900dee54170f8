// speedscope's JSON file format (https://www.speedscope.app/file-format-schema.json).
//
// What goes where:
// - One "sampled" profile per process, named by its process frame
//   ("python3 (1234)"), heaviest first and shown first; the process frame
//   itself is left out of the stacks, where it would be every stack's root.
//   Stacks without a process frame share a profile named by the title.
// - Frames are shared by all profiles. A frame's name is pystrobe's frame
//   name as the folded format writes it, so lines of one function stay apart
//   in the flame chart; Python frames also carry "file" and "line", which
//   speedscope shows for the selected frame.
// - Each distinct stack is one sample, root first, weighed by the time its
//   samples stand for (unit "nanoseconds") where the profile knows it, else
//   by its count: unit "none" for samples, "microseconds" for off-CPU
//   weighted profiles.
//   pystrobe keeps no timestamps, so samples are sorted by their names
//   instead: speedscope's default "Time Order" view then reads as a flame
//   graph sorted by name, "Left Heavy" as one sorted by weight.
#ifndef PYSTROBE_EXPORTERS_SPEEDSCOPE_WRITER_H_
#define PYSTROBE_EXPORTERS_SPEEDSCOPE_WRITER_H_

#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "exporters/profile_writer.h"
#include "model/profile.h"

namespace pystrobe {

class SpeedscopeWriter : public ProfileWriter {
 public:
  absl::Status Write(const Profile& profile, std::ostream& out) const override;
  std::string_view extension() const override { return "speedscope.json"; }
};

}  // namespace pystrobe

#endif  // PYSTROBE_EXPORTERS_SPEEDSCOPE_WRITER_H_
