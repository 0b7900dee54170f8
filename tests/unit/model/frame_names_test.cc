#include "model/frame_names.h"

#include <optional>

#include "gtest/gtest.h"

namespace pystrobe {
namespace {

TEST(FrameNamesTest, PythonFrameSplitsQualnameFileAndLine) {
  std::optional<PythonFrameName> f = ParsePythonFrameName("Outer.run.<locals>.f (pkg/mod.py:42)");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->qualname, "Outer.run.<locals>.f");
  EXPECT_EQ(f->file, "pkg/mod.py");
  EXPECT_EQ(f->line, 42);
}

TEST(FrameNamesTest, PythonFrameWithoutLineHasLineZero) {
  std::optional<PythonFrameName> f = ParsePythonFrameName("<module> (app.py)");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->file, "app.py");
  EXPECT_EQ(f->line, 0);
}

TEST(FrameNamesTest, PythonFrameFileMayHoldColonsAndParentheses) {
  std::optional<PythonFrameName> f =
      ParsePythonFrameName("_find (<frozen importlib._bootstrap>:1007)");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->file, "<frozen importlib._bootstrap>");
  EXPECT_EQ(f->line, 1007);
  f = ParsePythonFrameName("g (C:/odd (dir)/x.py:3)");
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->file, "C:/odd (dir)/x.py");
  EXPECT_EQ(f->line, 3);
}

TEST(FrameNamesTest, NotAPythonFrame) {
  EXPECT_FALSE(ParsePythonFrameName("[unknown python frame]").has_value());
  EXPECT_FALSE(ParsePythonFrameName("f ()").has_value());
  EXPECT_FALSE(ParsePythonFrameName(" (a.py:1)").has_value());
}

TEST(FrameNamesTest, ProcessFrameTakesThePidFromTheLastParentheses) {
  std::optional<ProcessFrameName> p = ParseProcessFrameName("my (odd) app (1234)");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->comm, "my (odd) app");
  EXPECT_EQ(p->pid, 1234u);
  EXPECT_FALSE(ParseProcessFrameName("python3 (12x)").has_value());
  EXPECT_FALSE(ParseProcessFrameName("python3").has_value());
}

TEST(FrameNamesTest, ThreadFrame) {
  std::optional<ThreadFrameName> t = ParseThreadFrameName("ThreadPoolExecutor-0_1 tid=77");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->name, "ThreadPoolExecutor-0_1");
  EXPECT_EQ(t->tid, 77u);
  EXPECT_FALSE(ParseThreadFrameName("worker tid=").has_value());
}

TEST(FrameNamesTest, ModuleOffsetOnlyForABaseNameAndHexOffset) {
  std::optional<ModuleOffsetFrameName> m = ParseModuleOffsetFrameName("libc.so.6+0x2a1f0");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->module, "libc.so.6");
  EXPECT_EQ(m->offset, 0x2a1f0u);
  EXPECT_FALSE(ParseModuleOffsetFrameName("[unknown] 0x7f00").has_value());
  EXPECT_FALSE(ParseModuleOffsetFrameName("memcpy").has_value());
  EXPECT_FALSE(ParseModuleOffsetFrameName("libx.so+0xzz").has_value());
  EXPECT_FALSE(ParseModuleOffsetFrameName("operator+(A const&, int)+0x10").has_value());
}

TEST(FrameNamesTest, KernelFunctionDropsTheSuffixOnly) {
  EXPECT_EQ(KernelFunctionName("do_syscall_64_[k]"), "do_syscall_64");
  EXPECT_EQ(KernelFunctionName("schedule"), "schedule");
  EXPECT_EQ(KernelFunctionName("_[k]"), "_[k]");
}

}  // namespace
}  // namespace pystrobe
