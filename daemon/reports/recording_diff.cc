#include "daemon/reports/recording_diff.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "exporters/flamegraph_svg_writer.h"

namespace pystrobe {
namespace {

double Share(int64_t value, int64_t total) {
  return total == 0 ? 0.0 : static_cast<double>(value) / static_cast<double>(total);
}

// The flame graph's palette for the kind the reader found.
FrameKind KindOf(const RecordedFrame& frame) {
  switch (frame.kind) {
    case RecordedFrameKind::kPython:
      return FrameKind::kPython;
    case RecordedFrameKind::kKernel:
      return FrameKind::kKernel;
    case RecordedFrameKind::kMarker:
      return FrameKind::kMarker;
    case RecordedFrameKind::kInterpreter:
    case RecordedFrameKind::kNative:
      break;
  }
  return FrameKind::kNative;
}

// The stacks of one recording merged into a tree by frame names: each node
// holds the samples of the stacks that pass through it.
struct StackTree {
  int64_t value = 0;
  absl::flat_hash_map<std::string, std::unique_ptr<StackTree>> children;

  static StackTree Of(const Profile& profile) {
    StackTree root;
    for (const ProfileStack& stack : profile.stacks()) {
      int64_t value = static_cast<int64_t>(stack.count);
      root.value += value;
      StackTree* node = &root;
      for (const Frame& frame : stack.frames) {
        std::unique_ptr<StackTree>& child = node->children[frame.name];
        if (child == nullptr) child = std::make_unique<StackTree>();
        node = child.get();
        node->value += value;
      }
    }
    return root;
  }

  const StackTree* Find(const std::vector<std::string_view>& stack) const {
    const StackTree* node = this;
    for (std::string_view name : stack) {
      auto it = node->children.find(absl::string_view(name.data(), name.size()));
      if (it == node->children.end()) return nullptr;
      node = it->second.get();
    }
    return node;
  }
};

// The largest |change of share| over the stacks of `after`.
double LargestChange(const StackTree& after, int64_t after_total, const StackTree* before,
                     int64_t before_total) {
  double largest = 0;
  for (const auto& [name, child] : after.children) {
    const StackTree* before_child = nullptr;
    if (before != nullptr) {
      auto it = before->children.find(name);
      if (it != before->children.end()) before_child = it->second.get();
    }
    double change = Share(child->value, after_total) -
                    Share(before_child != nullptr ? before_child->value : 0, before_total);
    largest = std::max({largest, std::abs(change),
                        LargestChange(*child, after_total, before_child, before_total)});
  }
  return largest;
}

}  // namespace

RecordingDiff DiffRecordings(const Recording& before, size_t before_type, const Recording& after,
                             size_t after_type, ReportGrouping by, ReportSort sort) {
  ReportFilter before_filter{before_type, std::nullopt};
  ReportFilter after_filter{after_type, std::nullopt};
  FlatReport old_report = BuildFlatReport(before, before_filter, by, sort);
  FlatReport new_report = BuildFlatReport(after, after_filter, by, sort);

  RecordingDiff diff;
  diff.before_total = old_report.total;
  diff.after_total = new_report.total;
  absl::flat_hash_map<ReportKey, size_t> row_of;
  auto row = [&](const ReportKey& key) -> DiffRow& {
    auto [it, inserted] = row_of.try_emplace(key, diff.rows.size());
    if (inserted) {
      diff.rows.emplace_back();
      diff.rows.back().key = key;
    }
    return diff.rows[it->second];
  };
  for (const ReportRow& r : old_report.rows) row(r.key).before = r;
  for (const ReportRow& r : new_report.rows) row(r.key).after = r;
  for (DiffRow& r : diff.rows) {
    r.before_self = Share(r.before.self, diff.before_total);
    r.before_total = Share(r.before.total, diff.before_total);
    r.after_self = Share(r.after.self, diff.after_total);
    r.after_total = Share(r.after.total, diff.after_total);
  }
  std::sort(diff.rows.begin(), diff.rows.end(), [sort](const DiffRow& a, const DiffRow& b) {
    auto weight = [sort](const DiffRow& r) {
      double self = std::abs(r.delta_self());
      double total = std::abs(r.delta_total());
      return sort == ReportSort::kSelf ? std::tuple(self, total, r.after_total)
                                       : std::tuple(total, self, r.after_total);
    };
    if (weight(a) != weight(b)) return weight(a) > weight(b);
    return std::tie(a.key.function, a.key.file, a.key.line) <
           std::tie(b.key.function, b.key.file, b.key.line);
  });
  return diff;
}

Profile ToProfile(const Recording& recording, size_t sample_type) {
  return ToProfile(recording, sample_type, ReportFilter{sample_type, std::nullopt});
}

Profile ToProfile(const Recording& recording, size_t sample_type, const ReportFilter& filter) {
  Profile profile;
  std::vector<Frame> frames;
  for (const RecordedStack& stack : recording.stacks) {
    int64_t value = stack.values[sample_type];
    if (value <= 0 || !filter.Keeps(recording, stack)) continue;
    frames.clear();
    for (size_t index : stack.frames) {
      const RecordedFrame& frame = recording.frames[index];
      frames.emplace_back(FrameDisplayName(frame), KindOf(frame));
    }
    profile.Add(frames, static_cast<uint64_t>(value));
  }
  const RecordedSampleType& type = recording.sample_types[sample_type];
  profile.count_unit = type.unit == "count" ? type.type : type.unit;
  return profile;
}

absl::Status WriteDiffFlameGraph(const Recording& before, size_t before_type,
                                 const Recording& after, size_t after_type, std::string title,
                                 std::ostream& out) {
  Profile old_profile = ToProfile(before, before_type);
  Profile new_profile = ToProfile(after, after_type);
  new_profile.title = std::move(title);
  const StackTree old_tree = StackTree::Of(old_profile);
  const StackTree new_tree = StackTree::Of(new_profile);
  const int64_t old_total = old_tree.value;
  const int64_t new_total = new_tree.value;
  const double largest = LargestChange(new_tree, new_total, &old_tree, old_total);

  FlameGraphStyler styler =
      [&](const std::vector<std::string_view>& stack) -> std::optional<FlameGraphFrameStyle> {
    const StackTree* old_node = old_tree.Find(stack);
    const StackTree* new_node = new_tree.Find(stack);
    double old_share = Share(old_node != nullptr ? old_node->value : 0, old_total);
    double new_share = Share(new_node != nullptr ? new_node->value : 0, new_total);
    double change = new_share - old_share;
    // Paler for small changes: 0 is white, the largest change full colour.
    double depth = largest > 0 ? std::abs(change) / largest : 0;
    int pale = static_cast<int>(std::lround(255 - 200 * depth));
    FlameGraphFrameStyle style;
    style.fill = change >= 0 ? absl::StrFormat("rgb(255,%d,%d)", pale, pale)
                             : absl::StrFormat("rgb(%d,%d,255)", pale, pale);
    style.note = absl::StrFormat("%+.2f points: %.2f%% before, %.2f%% after", 100 * change,
                                 100 * old_share, 100 * new_share);
    return style;
  };
  return WriteFlameGraphSvg(new_profile, styler, out);
}

}  // namespace pystrobe
