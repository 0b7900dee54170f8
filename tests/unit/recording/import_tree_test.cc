#include "daemon/recording/import_tree.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pystrobe {
namespace {

TEST(ModuleNameOfFileTest, PackagesAreNamedFromSitePackages) {
  EXPECT_EQ(ModuleNameOfFile("/usr/lib/python3/dist-packages/numpy/core/__init__.py"),
            "numpy.core");
  EXPECT_EQ(ModuleNameOfFile("/venv/lib/python3.12/site-packages/torch/nn/modules/module.py"),
            "torch.nn.modules.module");
}

TEST(ModuleNameOfFileTest, StandardLibraryAndFrozenModules) {
  EXPECT_EQ(ModuleNameOfFile("/usr/lib/python3.11/json/decoder.py"), "json.decoder");
  EXPECT_EQ(ModuleNameOfFile("/usr/lib/python3.11/asyncio/__init__.py"), "asyncio");
  EXPECT_EQ(ModuleNameOfFile("<frozen os>"), "os");
}

TEST(ModuleNameOfFileTest, CodeOfNoModuleFileHasNoName) {
  EXPECT_EQ(ModuleNameOfFile("<string>"), "");
  EXPECT_EQ(ModuleNameOfFile("<stdin>"), "");
  EXPECT_EQ(ModuleNameOfFile("/nonexistent/dir/tool.py"), "tool");
}

class ImportTreeTest : public ::testing::Test {
 protected:
  const PythonCodeObject* Code(std::string name, std::string filename) {
    auto code = std::make_unique<PythonCodeObject>();
    code->name = std::move(name);
    code->filename = std::move(filename);
    codes_.push_back(std::move(code));
    return codes_.back().get();
  }
  // The frames of an import of `file`'s module.
  std::vector<const PythonCodeObject*> Import(const std::string& file) {
    return {find_and_load_, load_unlocked_, exec_module_, frames_removed_, Code("<module>", file)};
  }

  std::vector<std::unique_ptr<PythonCodeObject>> codes_;
  const PythonCodeObject* find_and_load_ = Code("_find_and_load", "<frozen importlib._bootstrap>");
  const PythonCodeObject* load_unlocked_ = Code("_load_unlocked", "<frozen importlib._bootstrap>");
  const PythonCodeObject* exec_module_ =
      Code("SourceFileLoader.exec_module", "<frozen importlib._bootstrap_external>");
  const PythonCodeObject* frames_removed_ =
      Code("_call_with_frames_removed", "<frozen importlib._bootstrap>");
  const PythonCodeObject* script_ = Code("<module>", "/work/app/main.py");
  const PythonCodeObject* helper_ = Code("helper", "/usr/lib/python3/dist-packages/numpy/x.py");
};

TEST_F(ImportTreeTest, NestedImportsMakeTheTreeAndSelfTimeIsTheInnermostModules) {
  ImportTree tree;
  const std::string numpy = "/usr/lib/python3/dist-packages/numpy/__init__.py";
  const std::string core = "/usr/lib/python3/dist-packages/numpy/core/__init__.py";
  std::vector<const PythonCodeObject*> in_numpy = {script_};
  for (const PythonCodeObject* frame : Import(numpy)) in_numpy.push_back(frame);
  std::vector<const PythonCodeObject*> in_core = in_numpy;
  for (const PythonCodeObject* frame : Import(core)) in_core.push_back(frame);
  in_core.push_back(helper_);

  tree.Add(in_numpy, 3'000'000, 3);
  tree.Add(in_core, 7'000'000, 7);
  tree.Add(std::vector<const PythonCodeObject*>{script_}, 50'000'000, 50);  // not importing

  const ImportNode& numpy_node = *tree.root().children.at("numpy");
  EXPECT_EQ(numpy_node.cumulative_ns, 10'000'000u);
  EXPECT_EQ(numpy_node.self_ns, 3'000'000u);
  const ImportNode& core_node = *numpy_node.children.at("numpy.core");
  EXPECT_EQ(core_node.cumulative_ns, 7'000'000u);
  EXPECT_EQ(core_node.self_ns, 7'000'000u);
  EXPECT_EQ(tree.imports_ns(), 10'000'000u);
  EXPECT_EQ(tree.Format(),
            "import time: self [ms] | cumulative [ms] | imported package\n"
            "import time:       3.0 |            10.0 | numpy\n"
            "import time:       7.0 |             7.0 |   numpy.core\n");
}

TEST_F(ImportTreeTest, FindingATopLevelModuleIsUnattributed) {
  ImportTree tree;
  tree.Add(std::vector<const PythonCodeObject*>{script_, find_and_load_}, 2'000'000, 2);
  EXPECT_TRUE(tree.root().children.empty());
  EXPECT_EQ(tree.unattributed_ns(), 2'000'000u);
}

TEST_F(ImportTreeTest, UnnamedFramesAreSkippedNotGuessed) {
  ImportTree tree;
  std::vector<const PythonCodeObject*> frames = {
      script_, find_and_load_, nullptr, Code("<module>", "/usr/lib/python3.11/json/__init__.py")};
  tree.Add(frames, 1'000'000, 1);
  ASSERT_TRUE(tree.root().children.contains("json"));
  // exec'd code is a <module> of no file: it names nothing.
  ImportTree exec_tree;
  exec_tree.Add(std::vector<const PythonCodeObject*>{find_and_load_, Code("<module>", "<string>")},
                1'000'000, 1);
  EXPECT_TRUE(exec_tree.root().children.empty());
}

}  // namespace
}  // namespace pystrobe
