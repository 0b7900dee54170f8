#include "daemon/reports/call_graph_dot.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pystrobe {
namespace {

double Share(int64_t value, int64_t total) {
  return total == 0 ? 0.0 : static_cast<double>(value) / static_cast<double>(total);
}

// A dot double-quoted string's contents: quotes and backslashes escaped,
// so that a function name cannot end the string or make an escape.
std::string DotEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n' || c == '\r') {
      out.push_back(' ');
      continue;
    }
    out.push_back(c);
  }
  return out;
}

// HSL (each 0..1) to "#rrggbb".
std::string HslColour(double h, double s, double l) {
  auto channel = [&](double n) {
    double k = std::fmod(n + h * 12, 12);
    double a = s * std::min(l, 1 - l);
    double v = l - a * std::max(-1.0, std::min({k - 3, 9 - k, 1.0}));
    return static_cast<int>(std::lround(255 * v));
  };
  return absl::StrFormat("#%02x%02x%02x", channel(0), channel(8), channel(4));
}

// The title, and a second line with what the thresholds left out: a graph
// never hides that it is not the whole program.
std::string GraphLabel(const CallGraph& graph, std::string_view title) {
  std::string label = DotEscape(title);
  if (graph.pruned_nodes > 0 || graph.pruned_edges > 0) {
    absl::StrAppendFormat(&label, "\\n(left out: %d functions and %d calls under the thresholds)",
                          graph.pruned_nodes, graph.pruned_edges);
  }
  return label;
}

}  // namespace

std::string ShareColour(double share) {
  share = std::clamp(share, 0.0, 1.0);
  // A square root spreads the small shares, where most functions are, over
  // more of the hues; as gprof2dot's gamma does.
  double ratio = std::sqrt(share);
  double hue = (2.0 / 3.0) * (1 - ratio);
  double lightness = 0.5 - 0.15 * ratio;
  return HslColour(hue, 0.9, lightness);
}

CallGraph BuildCallGraph(const Recording& recording, const ReportFilter& filter,
                         const CallGraphOptions& options) {
  CallGraph graph;
  graph.total = recording.Total(filter.sample_type);
  absl::flat_hash_map<ReportKey, size_t> node_of_key;
  std::vector<size_t> node_of_frame;
  std::vector<CallGraphNode> nodes;
  node_of_frame.reserve(recording.frames.size());
  for (const RecordedFrame& frame : recording.frames) {
    auto [it, inserted] =
        node_of_key.try_emplace(KeyOf(frame, ReportGrouping::kFunction), nodes.size());
    if (inserted) nodes.push_back({it->first, frame.kind, 0, 0});
    node_of_frame.push_back(it->second);
  }
  absl::flat_hash_map<std::pair<size_t, size_t>, int64_t> edge_samples;
  absl::flat_hash_set<size_t> nodes_seen;
  absl::flat_hash_set<std::pair<size_t, size_t>> edges_seen;
  for (const RecordedStack& stack : recording.stacks) {
    int64_t value = stack.values[filter.sample_type];
    if (value == 0 || stack.frames.empty() || !filter.Keeps(recording, stack)) continue;
    nodes_seen.clear();
    edges_seen.clear();
    for (size_t at = 0; at < stack.frames.size(); ++at) {
      size_t node = node_of_frame[stack.frames[at]];
      if (nodes_seen.insert(node).second) nodes[node].total += value;
      if (at == 0) continue;
      std::pair<size_t, size_t> edge(node_of_frame[stack.frames[at - 1]], node);
      if (edges_seen.insert(edge).second) edge_samples[edge] += value;
    }
    nodes[node_of_frame[stack.frames.back()]].self += value;
  }

  // Keep the nodes over the threshold, heaviest first, and renumber them.
  std::vector<size_t> order;
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (nodes[n].total == 0) continue;
    if (Share(nodes[n].total, graph.total) < options.node_threshold) {
      ++graph.pruned_nodes;
      continue;
    }
    order.push_back(n);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(nodes[b].total, nodes[b].self) < std::tie(nodes[a].total, nodes[a].self) ||
           (std::tie(nodes[b].total, nodes[b].self) == std::tie(nodes[a].total, nodes[a].self) &&
            std::tie(nodes[a].key.function, nodes[a].key.file) <
                std::tie(nodes[b].key.function, nodes[b].key.file));
  });
  std::vector<size_t> kept(nodes.size(), SIZE_MAX);
  for (size_t n : order) {
    kept[n] = graph.nodes.size();
    graph.nodes.push_back(nodes[n]);
  }
  for (const auto& [edge, samples] : edge_samples) {
    if (kept[edge.first] == SIZE_MAX || kept[edge.second] == SIZE_MAX ||
        Share(samples, graph.total) < options.edge_threshold) {
      ++graph.pruned_edges;
      continue;
    }
    graph.edges.push_back({kept[edge.first], kept[edge.second], samples});
  }
  std::sort(
      graph.edges.begin(), graph.edges.end(), [](const CallGraphEdge& a, const CallGraphEdge& b) {
        return std::tie(b.samples, a.caller, a.callee) < std::tie(a.samples, b.caller, b.callee);
      });
  return graph;
}

std::string CallGraphDot(const CallGraph& graph, std::string_view unit, std::string_view title) {
  std::string out = "digraph pystrobe {\n";
  absl::StrAppendFormat(&out,
                        "  graph [label=\"%s\", labelloc=t, fontname=\"Helvetica\", "
                        "ranksep=0.25, nodesep=0.125];\n"
                        "  node [shape=box, style=filled, fontname=\"Helvetica\", "
                        "fontcolor=white, fontsize=10];\n"
                        "  edge [fontname=\"Helvetica\", fontsize=9, arrowsize=0.5];\n",
                        GraphLabel(graph, title));
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const CallGraphNode& node = graph.nodes[n];
    double total = Share(node.total, graph.total);
    double self = Share(node.self, graph.total);
    std::string label = DotEscape(node.key.function);
    if (!node.key.file.empty()) absl::StrAppend(&label, "\\n", DotEscape(node.key.file));
    absl::StrAppendFormat(&label, "\\n%.2f%% total\\n(%.2f%% self)", 100 * total, 100 * self);
    absl::StrAppendFormat(&out,
                          "  n%d [label=\"%s\", fillcolor=\"%s\", color=\"%s\", "
                          "tooltip=\"%s: %d %s total, %d self\"];\n",
                          n, label, ShareColour(total), ShareColour(total),
                          DotEscape(node.key.function), node.total, DotEscape(unit), node.self);
  }
  for (const CallGraphEdge& edge : graph.edges) {
    double share = Share(edge.samples, graph.total);
    absl::StrAppendFormat(&out,
                          "  n%d -> n%d [label=\"%.2f%%\", tooltip=\"%d %s\", color=\"%s\", "
                          "fontcolor=\"%s\", penwidth=%.2f, weight=%d];\n",
                          edge.caller, edge.callee, 100 * share, edge.samples, DotEscape(unit),
                          ShareColour(share), ShareColour(share), 1 + 5 * share,
                          static_cast<int>(std::lround(1 + 100 * share)));
  }
  out.append("}\n");
  return out;
}

}  // namespace pystrobe
