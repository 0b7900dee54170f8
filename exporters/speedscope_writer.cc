#include "exporters/speedscope_writer.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "exporters/json_string.h"
#include "model/frame_names.h"

namespace pystrobe {
namespace {

constexpr std::string_view kSchema = "https://www.speedscope.app/file-format-schema.json";

// A frame of the shared table.
struct SharedFrame {
  const Frame* frame;
  std::optional<PythonFrameName> python;
};

// One process's samples.
struct ProcessProfile {
  std::string name;
  std::vector<std::pair<std::vector<size_t>, uint64_t>> samples;  // frame indices, weight
  uint64_t total = 0;
};

}  // namespace

absl::Status SpeedscopeWriter::Write(const Profile& profile, std::ostream& out) const {
  std::vector<SharedFrame> frames;
  absl::flat_hash_map<std::pair<FrameKind, std::string_view>, size_t> frame_index;
  std::vector<ProcessProfile> processes;
  absl::flat_hash_map<std::string_view, size_t> process_index;

  // Weights are the time the samples stand for where the profile knows it
  // (each on-CPU sample's interval differs), else its counts.
  bool timed = profile.total_nanoseconds() > 0;
  for (const ProfileStack& stack : profile.stacks()) {
    uint64_t weight = timed ? stack.nanoseconds : stack.count;
    if (weight == 0) continue;
    std::string_view process_name = profile.title;
    std::vector<size_t> sample;
    for (const Frame& frame : stack.frames) {
      if (frame.kind == FrameKind::kProcess) {
        process_name = frame.name;
        continue;
      }
      auto [it, inserted] = frame_index.try_emplace({frame.kind, frame.name}, frames.size());
      if (inserted) {
        frames.push_back({&frame, frame.kind == FrameKind::kPython
                                      ? ParsePythonFrameName(frame.name)
                                      : std::nullopt});
      }
      sample.push_back(it->second);
    }
    auto [it, inserted] = process_index.try_emplace(process_name, processes.size());
    if (inserted) processes.push_back({std::string(process_name), {}, 0});
    ProcessProfile& process = processes[it->second];
    process.samples.emplace_back(std::move(sample), weight);
    process.total += weight;
  }
  std::stable_sort(
      processes.begin(), processes.end(),
      [](const ProcessProfile& a, const ProcessProfile& b) { return a.total > b.total; });
  // Stacks sorted by their names, root first: equal prefixes are neighbours,
  // so the "Time Order" view, which draws samples in file order, merges them
  // as a flame graph would instead of scattering them.
  auto name_of = [&](size_t index) -> std::string_view { return frames[index].frame->name; };
  for (ProcessProfile& process : processes) {
    std::stable_sort(process.samples.begin(), process.samples.end(),
                     [&](const auto& a, const auto& b) {
                       return std::lexicographical_compare(
                           a.first.begin(), a.first.end(), b.first.begin(), b.first.end(),
                           [&](size_t x, size_t y) { return name_of(x) < name_of(y); });
                     });
  }

  std::string_view unit = timed                                   ? "nanoseconds"
                          : profile.count_unit == "microseconds"  ? "microseconds"
                          : profile.count_unit.ends_with("bytes") ? "bytes"
                                                                  : "none";
  out << "{\"$schema\":" << JsonString(kSchema) << ",\"exporter\":\"pystrobe\""
      << ",\"name\":" << JsonString(profile.title.empty() ? "pystrobe" : profile.title)
      << ",\"activeProfileIndex\":0,\"shared\":{\"frames\":[";
  for (size_t i = 0; i < frames.size(); ++i) {
    const SharedFrame& frame = frames[i];
    out << (i == 0 ? "" : ",") << "\n{\"name\":" << JsonString(frame.frame->name);
    if (frame.python && !frame.python->file.empty()) {
      out << ",\"file\":" << JsonString(frame.python->file);
      if (frame.python->line > 0) out << ",\"line\":" << frame.python->line;
    }
    out << "}";
  }
  out << "]},\"profiles\":[";
  for (size_t p = 0; p < processes.size(); ++p) {
    const ProcessProfile& process = processes[p];
    out << (p == 0 ? "" : ",") << "\n{\"type\":\"sampled\",\"name\":" << JsonString(process.name)
        << ",\"unit\":\"" << unit << "\",\"startValue\":0,\"endValue\":" << process.total
        << ",\"samples\":[";
    for (size_t s = 0; s < process.samples.size(); ++s) {
      out << (s == 0 ? "" : ",") << "\n[";
      const std::vector<size_t>& stack = process.samples[s].first;
      for (size_t f = 0; f < stack.size(); ++f) out << (f == 0 ? "" : ",") << stack[f];
      out << "]";
    }
    out << "],\"weights\":[";
    for (size_t s = 0; s < process.samples.size(); ++s) {
      out << (s == 0 ? "" : ",") << process.samples[s].second;
    }
    out << "]}";
  }
  out << "]}\n";
  out.flush();
  if (!out) return absl::DataLossError("writing speedscope JSON: output stream failed");
  return absl::OkStatus();
}

}  // namespace pystrobe
