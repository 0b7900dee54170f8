// Perf maps as CPython 3.12 (-X perf), V8 and JVM agents write them.
#include "daemon/symbolizer/perf_map.h"

#include "gtest/gtest.h"

namespace pystrobe {
namespace {

TEST(PerfMapTest, NamesTheCodeEachLineCovers) {
  PerfMap map = PerfMap::Parse(
      "7f0000001000 20 py::compare:/tmp/callback.py\n"
      "7f0000000000 b py::<module>:/tmp/callback.py\n"
      "not a line\n"
      "7f0000002000 0 empty\n");
  EXPECT_EQ(map.size(), 2u);
  ASSERT_NE(map.Find(0x7f0000001000), nullptr);
  EXPECT_EQ(*map.Find(0x7f000000101f), "py::compare:/tmp/callback.py");
  EXPECT_EQ(map.Find(0x7f0000001020), nullptr);
  EXPECT_EQ(*map.Find(0x7f000000000a), "py::<module>:/tmp/callback.py");
  EXPECT_EQ(map.Find(0x7f000000000b), nullptr);
  EXPECT_EQ(map.Find(0x7f0000002000), nullptr);
}

TEST(PerfMapTest, CodeRegeneratedInPlaceTakesItsLatestName) {
  PerfMap map = PerfMap::Parse("1000 10 old\n1000 10 new\n");
  ASSERT_NE(map.Find(0x1008), nullptr);
  EXPECT_EQ(*map.Find(0x1008), "new");
}

}  // namespace
}  // namespace pystrobe
