#include "daemon/recording/python_process.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

TEST(ShortenPythonFilenameTest, KeepsWhatFollowsSitePackages) {
  EXPECT_EQ(ShortenPythonFilename("/usr/lib/python3/dist-packages/numpy/core/fromnumeric.py", "/"),
            "numpy/core/fromnumeric.py");
  EXPECT_EQ(ShortenPythonFilename("/venv/lib/python3.12/site-packages/torch/nn/modules/module.py",
                                  "/home/me"),
            "torch/nn/modules/module.py");
}

TEST(ShortenPythonFilenameTest, StandardLibraryIsRelativeToItsDirectory) {
  EXPECT_EQ(ShortenPythonFilename("/usr/lib/python3.11/threading.py", "/"), "threading.py");
  EXPECT_EQ(ShortenPythonFilename(
                "/root/.pyenv/versions/3.8.18/lib/python3.8/concurrent/futures/thread.py", "/"),
            "concurrent/futures/thread.py");
}

TEST(ShortenPythonFilenameTest, ProgramFilesAreRelativeToTheWorkingDirectory) {
  EXPECT_EQ(ShortenPythonFilename("/work/app/jobs/train.py", "/work/app"), "jobs/train.py");
  // A directory that only shares a prefix is not the working directory.
  EXPECT_EQ(ShortenPythonFilename("/work/application/train.py", "/work/app"), "train.py");
  EXPECT_EQ(ShortenPythonFilename("/elsewhere/tool.py", "/work/app"), "tool.py");
}

TEST(ShortenPythonFilenameTest, RelativeAndSyntheticNamesStayAsTheyAre) {
  EXPECT_EQ(ShortenPythonFilename("examples/word_census.py", "/work"), "examples/word_census.py");
  EXPECT_EQ(ShortenPythonFilename("<frozen importlib._bootstrap>", "/"),
            "<frozen importlib._bootstrap>");
  EXPECT_EQ(ShortenPythonFilename("<string>", "/"), "<string>");
}

}  // namespace
}  // namespace pystrobe
