#include "exporters/folded_writer.h"

#include <cstdint>
#include <map>
#include <string>

namespace pystrobe {
namespace {

// A stack that has no frames still has samples; it must not become a line
// that starts with the count, which readers would take for a frame name.
constexpr std::string_view kUnknownFrame = "[unknown]";

}  // namespace

std::string FoldedFrameName(std::string_view name) {
  if (name.empty()) return std::string(kUnknownFrame);
  std::string folded(name);
  for (char& c : folded) {
    if (c == ';') {
      c = ':';
    } else if (c == '\n' || c == '\r') {
      c = ' ';
    }
  }
  return folded;
}

absl::Status FoldedWriter::Write(const Profile& profile, std::ostream& out) const {
  // Keyed by the folded text: sorts the output, and merges stacks that differ
  // only in frame kind or in characters that folding replaced.
  std::map<std::string, uint64_t> count_by_line;
  for (const ProfileStack& stack : profile.stacks()) {
    if (stack.count == 0) continue;
    std::string line;
    for (const Frame& frame : stack.frames) {
      if (!line.empty()) line.push_back(';');
      line.append(FoldedFrameName(frame.name));
    }
    if (line.empty()) line = kUnknownFrame;
    count_by_line[std::move(line)] += stack.count;
  }
  for (const auto& [line, count] : count_by_line) {
    out << line << ' ' << count << '\n';
  }
  out.flush();
  if (!out) return absl::DataLossError("writing folded stacks: output stream failed");
  return absl::OkStatus();
}

}  // namespace pystrobe
