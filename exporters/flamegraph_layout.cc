#include "exporters/flamegraph_layout.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <utility>

namespace pystrobe {
namespace {

struct Node {
  std::string_view name;
  FrameKind kind = FrameKind::kMarker;
  uint64_t count = 0;
  // Ordered by name so siblings appear alphabetically, as in flamegraph.pl;
  // the kind keeps a Python and a native frame of the same name apart.
  std::map<std::pair<std::string_view, FrameKind>, size_t> children;
};

// Returns the nodes of the merged call tree; nodes[0] is the root.
std::vector<Node> BuildCallTree(const Profile& profile) {
  std::vector<Node> nodes(1);
  nodes[0].name = kFlameGraphRootName;
  for (const ProfileStack& stack : profile.stacks()) {
    size_t current = 0;
    nodes[current].count += stack.count;
    for (const Frame& frame : stack.frames) {
      auto [it, inserted] =
          nodes[current].children.try_emplace({frame.name, frame.kind}, nodes.size());
      const size_t child = it->second;
      // Index, not reference: emplace_back may move the nodes.
      if (inserted) nodes.push_back(Node{frame.name, frame.kind, 0, {}});
      nodes[child].count += stack.count;
      current = child;
    }
  }
  return nodes;
}

}  // namespace

FlameGraphLayout LayOutFlameGraph(const Profile& profile, double min_fraction) {
  FlameGraphLayout layout;
  const std::vector<Node> nodes = BuildCallTree(profile);
  layout.total_count = nodes[0].count;
  if (layout.total_count == 0) return layout;
  const double min_count = min_fraction * static_cast<double>(layout.total_count);

  // Iterative pre-order walk: Python recursion can make stacks deep.
  struct Pending {
    size_t node;
    uint64_t start;
    int depth;
  };
  std::vector<Pending> pending = {{0, 0, 0}};
  while (!pending.empty()) {
    const Pending item = pending.back();
    pending.pop_back();
    const Node& node = nodes[item.node];
    // The root always stays, so a profile of only tiny stacks is not blank.
    if (item.node != 0 && static_cast<double>(node.count) < min_count) continue;
    layout.boxes.push_back(FlameGraphBox{node.name, node.kind, item.start, node.count, item.depth});
    layout.max_depth = std::max(layout.max_depth, item.depth);

    // Children start where their left sibling ends; push them right to left
    // so they are popped, and emitted, left to right.
    std::vector<Pending> children;
    uint64_t start = item.start;
    for (const auto& [key, child] : node.children) {
      children.push_back({child, start, item.depth + 1});
      start += nodes[child].count;
    }
    pending.insert(pending.end(), children.rbegin(), children.rend());
  }
  return layout;
}

}  // namespace pystrobe
