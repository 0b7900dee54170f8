// Where each frame of a flame graph goes, independent of how it is drawn.
#ifndef PYSTROBE_EXPORTERS_FLAMEGRAPH_LAYOUT_H_
#define PYSTROBE_EXPORTERS_FLAMEGRAPH_LAYOUT_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "model/profile.h"

namespace pystrobe {

// One box of the flame graph, measured in samples rather than pixels so any
// renderer (and the SVG's zoom script) can scale it.
struct FlameGraphBox {
  std::string_view name;  // points into the Profile, or kFlameGraphRootName
  FrameKind kind = FrameKind::kMarker;
  uint64_t start = 0;  // samples to the left of this box at its depth
  uint64_t count = 0;  // samples in this frame and everything it called
  int depth = 0;       // 0 is the root that spans all samples
};

struct FlameGraphLayout {
  // Pre-order: every box comes after its parent, siblings sorted by name.
  // Empty when the profile has no samples; otherwise boxes[0] is the root.
  std::vector<FlameGraphBox> boxes;
  uint64_t total_count = 0;
  int max_depth = 0;  // of the boxes kept
};

// The frame under which all stacks are merged, like flamegraph.pl's "all".
inline constexpr std::string_view kFlameGraphRootName = "all";

// Merges the profile's stacks into a tree and lays it out. Frames with fewer
// than `min_fraction` of all samples are left out, and so are their callees;
// their samples still count in their callers' widths.
FlameGraphLayout LayOutFlameGraph(const Profile& profile, double min_fraction);

}  // namespace pystrobe

#endif  // PYSTROBE_EXPORTERS_FLAMEGRAPH_LAYOUT_H_
