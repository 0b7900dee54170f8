// The offsets tables against the real headers of every installed CPython:
// tests/workloads/python/print_offsets.c is compiled against each version's
// own headers and must print exactly what PythonLayoutForVersion claims.
#include "daemon/python/python_offsets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <sstream>
#include <string>

#include "tests/unit/python/python_test_support.h"

namespace pystrobe {
namespace {

using testing::InstalledPython;
using testing::InstalledPythons;
using testing::RunCommand;

TEST(PythonOffsetsTest, TablesMatchTheHeadersOfEveryInstalledVersion) {
  const std::vector<InstalledPython> pythons =
      InstalledPythons(testing::PythonSet::kWithOld, /*with_free_threaded=*/true);
  ASSERT_FALSE(pythons.empty()) << "no CPython on this machine";
  // Named for this process: ctest runs the tests of this file side by side.
  const std::string binary =
      ::testing::TempDir() + "/pystrobe_print_offsets_tables." + std::to_string(getpid());
  for (const InstalledPython& python : pythons) {
    SCOPED_TRACE(python.label);
    // A free-threaded build has no table: its layout comes from its own
    // _Py_DebugOffsets (DebugOffsetsMatchTheHeaders).
    if (python.free_threaded) continue;
    std::string command = "cc -DPy_BUILD_CORE -o " + binary +
                          " " PYSTROBE_SOURCE_DIR "/tests/workloads/python/print_offsets.c";
    for (const std::string& dir : python.include_dirs) {
      command += " -I" + dir + " -I" + dir + "/internal";
    }
    command += " " + python.compile_flags;
    int status = 0;
    const std::string compile_output = RunCommand(command + " 2>&1", &status);
    ASSERT_EQ(status, 0) << command << "\n" << compile_output;
    const std::map<std::string, uint64_t> expected =
        testing::ParseOffsetLines(RunCommand(binary, &status));
    ASSERT_EQ(status, 0);
    ASSERT_EQ(expected.at("version_major"), static_cast<uint64_t>(python.major));
    ASSERT_EQ(expected.at("version_minor"), static_cast<uint64_t>(python.minor));

    absl::StatusOr<PythonLayout> layout = PythonLayoutForVersion({python.major, python.minor, 0});
    ASSERT_TRUE(layout.ok()) << layout.status();
    size_t checked = 0;
    for (const auto& [name, value] : PythonLayoutFields(*layout)) {
      auto it = expected.find(std::string(name));
      ASSERT_NE(it, expected.end()) << "print_offsets.c does not print " << name;
      EXPECT_EQ(value, it->second) << name;
      ++checked;
    }
    EXPECT_EQ(checked, expected.size()) << "print_offsets.c prints fields the table lacks";
    std::cout << "[ CHECKED  ] " << python.label << ": " << checked << " offsets\n";
  }
}

TEST(PythonOffsetsTest, UnsupportedVersionsNameTheVersion) {
  for (PythonVersion version :
       {PythonVersion{2, 6, 9}, PythonVersion{3, 5, 10}, PythonVersion{3, 16, 0}}) {
    absl::StatusOr<PythonLayout> layout = PythonLayoutForVersion(version);
    ASSERT_FALSE(layout.ok());
    EXPECT_EQ(layout.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_NE(layout.status().message().find(version.ToString()), std::string::npos)
        << layout.status();
  }
}

TEST(PythonOffsetsTest, GlobalsOfOldVersionsBecomeOffsetsFromTheLowest) {
  absl::StatusOr<PythonLayout> layout = PythonLayoutForVersion({3, 6, 15});
  ASSERT_TRUE(layout.ok());
  // The addresses of libpython3.6m.so.1.0 (pyenv 3.6.15) at a load bias.
  const uint64_t bias = 0x7f0000000000;
  PythonGlobals globals{.interp_head = bias + 0x2feee0,
                        .thread_state_current = bias + 0x2feed0,
                        .gil_wait_start = bias + 0x2faaa0,
                        .gil_wait_end = bias + 0x2fab10};
  absl::StatusOr<uint64_t> base = PlacePythonGlobals(globals, *layout);
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_EQ(*base, bias + 0x2faaa0);
  const pystrobe_python_offsets& o = layout->abi;
  EXPECT_EQ(o.runtime_interpreters_head, 0x2feee0u - 0x2faaa0u);
  EXPECT_EQ(o.runtime_gil, 0u);
  EXPECT_EQ(o.gil_last_holder, 0x2feed0u - 0x2faaa0u);
  EXPECT_EQ(o.gil_locked, PYSTROBE_PY_OFFSET_NONE);  // the holder pointer alone decides
  EXPECT_EQ(o.gil_cond, 0u);
  EXPECT_EQ(o.gil_wait_span, 0x70u);
  EXPECT_EQ(o.gil_wait_indirect, 0u);

  // Without the wait objects (a stripped binary) there is no GIL wait, the rest holds.
  globals.gil_wait_start = globals.gil_wait_end = 0;
  base = PlacePythonGlobals(globals, *layout);
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_EQ(*base, bias + 0x2feed0);
  EXPECT_EQ(layout->abi.gil_cond, PYSTROBE_PY_OFFSET_NONE);
  EXPECT_EQ(layout->abi.gil_wait_span, 0u);

  // Without interp_head nothing can be walked.
  globals.interp_head = 0;
  EXPECT_EQ(PlacePythonGlobals(globals, *layout).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PythonOffsetsTest, OnlyVersionsWithoutRuntimeHaveGlobalRoots) {
  EXPECT_TRUE(PythonVersionHasGlobalRoots({2, 7, 18}));
  EXPECT_TRUE(PythonVersionHasGlobalRoots({3, 6, 15}));
  EXPECT_FALSE(PythonVersionHasGlobalRoots({3, 7, 16}));
  EXPECT_FALSE(PythonVersionHasGlobalRoots({3, 13, 0}));
  EXPECT_EQ(PythonLayoutForVersion({2, 7, 18})->abi.names_are_bytes, 1);
  EXPECT_EQ(PythonLayoutForVersion({3, 6, 15})->abi.names_are_bytes, 0);
}

TEST(PythonOffsetsTest, FrameModelFollowsTheVersion) {
  EXPECT_EQ(PythonLayoutForVersion({2, 7, 0})->abi.frame_model,
            PYSTROBE_PY_FRAMES_OBJECT_LASTI_BYTES);
  EXPECT_EQ(PythonLayoutForVersion({3, 6, 0})->abi.frame_model,
            PYSTROBE_PY_FRAMES_OBJECT_LASTI_BYTES);
  EXPECT_EQ(PythonLayoutForVersion({3, 8, 0})->abi.frame_model,
            PYSTROBE_PY_FRAMES_OBJECT_LASTI_BYTES);
  EXPECT_EQ(PythonLayoutForVersion({3, 10, 0})->abi.frame_model,
            PYSTROBE_PY_FRAMES_OBJECT_LASTI_UNITS);
  EXPECT_EQ(PythonLayoutForVersion({3, 12, 0})->abi.frame_model, PYSTROBE_PY_FRAMES_CFRAME);
  EXPECT_EQ(PythonLayoutForVersion({3, 13, 0})->abi.frame_model, PYSTROBE_PY_FRAMES_CURRENT_FRAME);
}

std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i + 1 < hex.size() && hex[i] != '\n'; i += 2) {
    bytes.push_back(static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

// 3.14+: the _Py_DebugOffsets that each version's headers build, read back
// by PythonLayoutFromDebugOffsets, give every offset print_offsets.c finds in
// the same headers: for the GIL build, and for the free-threaded build of
// the same headers (Py_GIL_DISABLED), whether or not that build is installed.
TEST(PythonOffsetsTest, DebugOffsetsMatchTheHeaders) {
  size_t layouts = 0;
  for (const InstalledPython& python :
       InstalledPythons(testing::PythonSet::kModern, /*with_free_threaded=*/true)) {
    if (python.minor < 14) continue;
    for (const std::string defines : {"", "-DPy_GIL_DISABLED"}) {
      if (python.free_threaded && defines.empty()) continue;  // its pyconfig.h defines it
      SCOPED_TRACE(python.label + " " + defines);
      const std::vector<uint8_t> blob =
          FromHex(testing::PrintOffsets(python, defines, "--debug-offsets"));
      const std::map<std::string, uint64_t> expected =
          testing::ParseOffsetLines(testing::PrintOffsets(python, defines, ""));
      ASSERT_FALSE(blob.empty());
      absl::StatusOr<size_t> size = PythonDebugOffsetsSize({python.major, python.minor, 0});
      ASSERT_TRUE(size.ok()) << size.status();
      EXPECT_EQ(blob.size(), *size) << "our _Py_DebugOffsets struct has the wrong size";
      absl::StatusOr<PythonLayout> layout = PythonLayoutFromDebugOffsets(blob);
      ASSERT_TRUE(layout.ok()) << layout.status();
      for (const auto& [name, value] : PythonLayoutFields(*layout)) {
        auto it = expected.find(std::string(name));
        ASSERT_NE(it, expected.end()) << "print_offsets.c does not print " << name;
        EXPECT_EQ(value, it->second) << name;
      }
      ++layouts;
    }
  }
  if (layouts == 0) GTEST_SKIP() << "no CPython 3.14+ headers (run scripts/test-pythons.sh)";
  std::cout << "[ CHECKED  ] " << layouts << " layouts read from _Py_DebugOffsets\n";
}

// A blob that lies (an offset past its structure's end, a free_threaded
// flag that is neither 0 nor 1, a truncated blob) is refused, never used.
TEST(PythonOffsetsTest, DebugOffsetsThatLieAreRefused) {
  for (const InstalledPython& python : InstalledPythons()) {
    if (python.minor < 14 || python.free_threaded) continue;
    SCOPED_TRACE(python.label);
    const std::vector<uint8_t> good = FromHex(testing::PrintOffsets(python, "", "--debug-offsets"));
    ASSERT_TRUE(PythonLayoutFromDebugOffsets(good).ok());

    std::vector<uint8_t> flag = good;
    flag[16] = 7;  // free_threaded
    EXPECT_EQ(PythonLayoutFromDebugOffsets(flag).status().code(), absl::StatusCode::kDataLoss);

    // thread_state.current_frame, moved past the thread state's size.
    std::vector<uint8_t> moved = good;
    const size_t thread_state = 8 + 8 + 8 + 3 * 8 + 16 * 8;  // after interpreter_state
    uint64_t tstate_size;
    std::memcpy(&tstate_size, moved.data() + thread_state, 8);
    const uint64_t past = tstate_size + 8;
    std::memcpy(moved.data() + thread_state + 4 * 8, &past, 8);
    absl::StatusOr<PythonLayout> layout = PythonLayoutFromDebugOffsets(moved);
    EXPECT_EQ(layout.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(layout.status().message()), ::testing::HasSubstr("current_frame"));

    std::vector<uint8_t> truncated(good.begin(), good.end() - 8);
    EXPECT_EQ(PythonLayoutFromDebugOffsets(truncated).status().code(), absl::StatusCode::kDataLoss);
    return;
  }
  GTEST_SKIP() << "no CPython 3.14+ headers (run scripts/test-pythons.sh)";
}

TEST(PythonOffsetsTest, DebugOffsetsWithoutCookieAreRejected) {
  std::vector<uint8_t> blob(kPythonDebugOffsets313Size, 0);
  EXPECT_EQ(PythonLayoutFromDebugOffsets(blob).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace pystrobe
