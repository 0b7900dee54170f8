#include "daemon/reports/call_graph_dot.h"

#include <string>
#include <string_view>

#include "daemon/reports/recording_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Recording Folded(std::string_view text) {
  absl::StatusOr<Recording> recording = ParseFolded(text, "test.folded");
  EXPECT_TRUE(recording.ok()) << recording.status();
  return *recording;
}

const CallGraphNode* Node(const CallGraph& graph, std::string_view function, size_t* index) {
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (graph.nodes[n].key.function == function) {
      if (index != nullptr) *index = n;
      return &graph.nodes[n];
    }
  }
  return nullptr;
}

// main calls a (recursing) and b; b calls a tiny helper.
constexpr std::string_view kProgram =
    "p (1);main (m.py:1);a (m.py:10);a (m.py:11);a (m.py:11) 600\n"
    "p (1);main (m.py:1);b (m.py:20);dgemm_ 395\n"
    "p (1);main (m.py:2);b (m.py:21);tiny (m.py:30) 2\n"
    "p (1);main (m.py:2) 3\n";

TEST(CallGraphTest, NodesHaveLeafSelfAndOncePerStackTotals) {
  CallGraph graph = BuildCallGraph(Folded(kProgram), {}, {});
  EXPECT_EQ(graph.total, 1000);
  const CallGraphNode* main = Node(graph, "main", nullptr);
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->total, 1000);
  EXPECT_EQ(main->self, 3);
  EXPECT_EQ(graph.nodes[0].key.function, "main");    // heaviest total first
  EXPECT_EQ(Node(graph, "a", nullptr)->total, 600);  // recursion counted once
  EXPECT_EQ(Node(graph, "dgemm_", nullptr)->self, 395);
}

TEST(CallGraphTest, HeaviestEdgeIsTheHeaviestCallAndSmallOnesArePruned) {
  CallGraph graph = BuildCallGraph(Folded(kProgram), {}, {});
  size_t main = 0;
  size_t a = 0;
  ASSERT_NE(Node(graph, "main", &main), nullptr);
  ASSERT_NE(Node(graph, "a", &a), nullptr);
  ASSERT_FALSE(graph.edges.empty());
  EXPECT_EQ(graph.edges[0].caller, main);
  EXPECT_EQ(graph.edges[0].callee, a);
  EXPECT_EQ(graph.edges[0].samples, 600);
  // tiny holds 0.2% of the samples, under the 0.5% default.
  EXPECT_EQ(Node(graph, "tiny", nullptr), nullptr);
  EXPECT_EQ(graph.pruned_nodes, 1u);

  CallGraph everything = BuildCallGraph(Folded(kProgram), {}, {0, 0});
  EXPECT_NE(Node(everything, "tiny", nullptr), nullptr);
}

TEST(CallGraphDotTest, WritesAGraphvizDigraphWithSharesAndColours) {
  CallGraph graph = BuildCallGraph(Folded(kProgram), {}, {});
  std::string dot = CallGraphDot(graph, "count", "pystrobe: \"t\"");
  EXPECT_THAT(dot, HasSubstr("digraph pystrobe {"));
  EXPECT_THAT(dot, HasSubstr("label=\"pystrobe: \\\"t\\\"\\n"));  // quotes escaped
  EXPECT_THAT(dot, HasSubstr("main\\nm.py\\n100.00% total\\n(0.30% self)"));
  EXPECT_THAT(dot, HasSubstr("[label=\"60.00%\""));
  EXPECT_THAT(dot, HasSubstr(ShareColour(1.0)));
  EXPECT_THAT(dot, Not(HasSubstr("tiny")));
  // What was left out is said.
  EXPECT_THAT(dot, HasSubstr("\\n(left out: 1 functions and 1 calls under the thresholds)"));
  EXPECT_EQ(dot.back(), '\n');
}

TEST(CallGraphDotTest, ColoursRunFromBlueToRed) {
  auto channel = [](const std::string& colour, int at) {
    return std::stoi(colour.substr(1 + 2 * at, 2), nullptr, 16);
  };
  std::string all = ShareColour(1.0);
  std::string little = ShareColour(0.0);
  EXPECT_GT(channel(all, 0), channel(all, 2));        // red over blue
  EXPECT_GT(channel(little, 2), channel(little, 0));  // blue over red
}

}  // namespace
}  // namespace pystrobe
