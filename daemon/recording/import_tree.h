// The time each module's import took, as a tree, from samples (record
// --imports): what `python -X importtime` prints, for a process that was
// not started with it, or is already running.
//
// A sample is in the import of module M when its Python stack, read from the
// root, goes through the import machinery (importlib's _find_and_load and
// the frames under it, all in "<frozen importlib._bootstrap...>") into a
// `<module>` frame of M's file. Imports inside that module's body nest the
// same way, which makes the tree. A sample counts as self time of the
// innermost module it is in, and as cumulative time of each around it.
// Time spent finding a module before its body runs counts for the module
// that imports it, whose name is known (importtime counts it for the one
// being found).
#ifndef PYSTROBE_DAEMON_RECORDING_IMPORT_TREE_H_
#define PYSTROBE_DAEMON_RECORDING_IMPORT_TREE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "absl/strings/string_view.h"
#include "daemon/python/code_object_reader.h"
#include "daemon/recording/python_code_table.h"
#include "daemon/recording/stack_aggregator.h"

namespace pystrobe {

// The dotted module name of a module's file name (co_filename): the path
// after site-packages/ or dist-packages/, else after lib/pythonX.Y/ (the
// standard library), else the file's own name; "/__init__.py" names its
// package. "<frozen os>" (3.11+'s frozen standard modules) is "os".
// Empty for a name that is no file of a module ("<string>", "<stdin>").
std::string ModuleNameOfFile(absl::string_view filename);

struct ImportNode {
  uint64_t self_ns = 0;
  uint64_t cumulative_ns = 0;
  uint64_t samples = 0;  // samples in this import, nested ones included
  std::map<std::string, std::unique_ptr<ImportNode>> children;
};

class ImportTree {
 public:
  // Adds a sample (or stack of samples) weighing `ns`, its Python frames
  // root first; a null frame is one that could not be named.
  void Add(std::span<const PythonCodeObject* const> root_first, uint64_t ns, uint64_t samples);

  // Adds each stack of `stacks`, its frames named by `codes`.
  void AddStacks(const StackAggregator& stacks, const PythonCodeTable& codes);

  // The top-level imports (their children the imports they made).
  const ImportNode& root() const { return root_; }
  // Time of samples in an import, and of those whose import machinery had
  // not reached any module's body (a top-level import being found).
  uint64_t imports_ns() const { return root_.cumulative_ns; }
  uint64_t unattributed_ns() const { return unattributed_ns_; }

  // The tree as text, as -X importtime prints it but parents first:
  // "import time: self [ms] | cumulative [ms] | imported package", each
  // nesting indented two spaces, siblings by cumulative time, heaviest
  // first. Imports under `min_ns` cumulative are left out.
  std::string Format(uint64_t min_ns = 0) const;

 private:
  ImportNode root_;
  uint64_t unattributed_ns_ = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_IMPORT_TREE_H_
