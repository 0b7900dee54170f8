// The whole program's call graph, as gprof2dot draws it from a profile:
// functions as nodes with their self and total shares, edges with the share
// of the samples that passed through each call, small ones pruned, colour
// by share. Written as Graphviz dot (`dot -Tsvg`).
#ifndef PYSTROBE_DAEMON_REPORTS_CALL_GRAPH_DOT_H_
#define PYSTROBE_DAEMON_REPORTS_CALL_GRAPH_DOT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/reports/flat_report.h"
#include "daemon/reports/recording_reader.h"

namespace pystrobe {

struct CallGraphNode {
  ReportKey key;  // a function (line 0)
  RecordedFrameKind kind = RecordedFrameKind::kNative;
  int64_t self = 0;   // samples where it was the leaf: its own code running
  int64_t total = 0;  // samples with it on the stack, once per stack
};

struct CallGraphEdge {
  size_t caller = 0;  // indices into CallGraph::nodes
  size_t callee = 0;
  int64_t samples = 0;  // stacks through this call, once per stack
};

struct CallGraph {
  int64_t total = 0;                 // all samples: what shares divide by
  std::vector<CallGraphNode> nodes;  // heaviest total first
  std::vector<CallGraphEdge> edges;  // heaviest first
  size_t pruned_nodes = 0;           // below the node threshold, left out
  size_t pruned_edges = 0;           // below the edge threshold or at a pruned node
};

// Thresholds are shares of all samples, as gprof2dot's --node-thres and
// --edge-thres (whose defaults, 0.5% and 0.1%, these are).
struct CallGraphOptions {
  double node_threshold = 0.005;
  double edge_threshold = 0.001;
};

CallGraph BuildCallGraph(const Recording& recording, const ReportFilter& filter,
                         const CallGraphOptions& options);

// `unit` names what values count ("count", "nanoseconds"...), `title` the graph.
std::string CallGraphDot(const CallGraph& graph, std::string_view unit, std::string_view title);

// The colour gprof2dot-like graphs give a share (0..1): blue for little,
// through green and yellow, to red for all, as "#rrggbb".
std::string ShareColour(double share);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_REPORTS_CALL_GRAPH_DOT_H_
