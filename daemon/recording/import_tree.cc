#include "daemon/recording/import_tree.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace pystrobe {
namespace {

// importlib's own frames: _find_and_load, _load_unlocked, exec_module,
// _call_with_frames_removed and the rest, frozen into the interpreter.
bool IsImportMachinery(const PythonCodeObject& code) {
  return absl::StartsWith(code.filename, "<frozen importlib._bootstrap");
}

// The package a directory outside any site-packages is, from the
// __init__.py files around it (the target's files, when they are ours to
// see); empty when it is none.
std::string PackageOfDirectory(const std::filesystem::path& directory) {
  std::error_code error;
  std::string package;
  for (std::filesystem::path dir = directory;
       dir.has_filename() && std::filesystem::exists(dir / "__init__.py", error);
       dir = dir.parent_path()) {
    package = package.empty() ? dir.filename().string()
                              : absl::StrCat(dir.filename().string(), ".", package);
  }
  return package;
}

void FormatNode(const std::string& name, const ImportNode& node, int depth, uint64_t min_ns,
                std::string& out) {
  absl::StrAppendFormat(&out, "import time: %9.1f | %15.1f | %*s%s\n", node.self_ns / 1e6,
                        node.cumulative_ns / 1e6, 2 * depth, "", name);
  std::vector<std::pair<const std::string*, const ImportNode*>> children;
  for (const auto& [child_name, child] : node.children) {
    if (child->cumulative_ns >= min_ns) children.emplace_back(&child_name, child.get());
  }
  std::stable_sort(children.begin(), children.end(), [](const auto& a, const auto& b) {
    return a.second->cumulative_ns > b.second->cumulative_ns;
  });
  for (const auto& [child_name, child] : children) {
    FormatNode(*child_name, *child, depth + 1, min_ns, out);
  }
}

}  // namespace

std::string ModuleNameOfFile(absl::string_view filename) {
  if (absl::StartsWith(filename, "<frozen ") && absl::EndsWith(filename, ">")) {
    return std::string(filename.substr(8, filename.size() - 9));
  }
  if (!absl::EndsWith(filename, ".py")) return "";
  absl::string_view path = filename.substr(0, filename.size() - 3);
  absl::string_view module;
  for (absl::string_view root :
       {absl::string_view("/site-packages/"), absl::string_view("/dist-packages/")}) {
    if (size_t at = path.rfind(root); at != absl::string_view::npos) {
      module = path.substr(at + root.size());
      break;
    }
  }
  if (module.empty()) {
    // The standard library: .../lib/python3.11/json/decoder.py.
    if (size_t at = path.rfind("/lib/python"); at != absl::string_view::npos) {
      size_t slash = path.find('/', at + 11);
      if (slash != absl::string_view::npos) module = path.substr(slash + 1);
    }
  }
  std::string name;
  if (!module.empty()) {
    name = absl::StrReplaceAll(module, {{"/", "."}});
  } else {
    std::filesystem::path file{std::string(path)};
    std::string package = PackageOfDirectory(file.parent_path());
    name = package.empty() ? file.filename().string()
                           : absl::StrCat(package, ".", file.filename().string());
  }
  if (name == "__init__") return "";
  if (absl::EndsWith(name, ".__init__")) name.resize(name.size() - 9);
  return name;
}

void ImportTree::Add(std::span<const PythonCodeObject* const> root_first, uint64_t ns,
                     uint64_t samples) {
  std::vector<ImportNode*> path;
  ImportNode* node = &root_;
  bool importing = false;  // in the machinery, its module's body not reached
  bool met_machinery = false;
  for (const PythonCodeObject* code : root_first) {
    if (code == nullptr) continue;
    if (IsImportMachinery(*code)) {
      importing = met_machinery = true;
      continue;
    }
    if (!importing || code->name != "<module>") continue;
    importing = false;
    std::string module = ModuleNameOfFile(code->filename);
    if (module.empty()) continue;
    std::unique_ptr<ImportNode>& child = node->children[module];
    if (child == nullptr) child = std::make_unique<ImportNode>();
    node = child.get();
    path.push_back(node);
  }
  if (path.empty()) {
    if (met_machinery) unattributed_ns_ += ns;
    return;
  }
  root_.cumulative_ns += ns;
  root_.samples += samples;
  for (ImportNode* on_path : path) {
    on_path->cumulative_ns += ns;
    on_path->samples += samples;
  }
  path.back()->self_ns += ns;
}

void ImportTree::AddStacks(const StackAggregator& stacks, const PythonCodeTable& codes) {
  std::vector<const PythonCodeObject*> frames;
  for (const auto& [stack, weight] : stacks.weights()) {
    frames.clear();
    for (auto it = stack.python_frames.rbegin(); it != stack.python_frames.rend(); ++it) {
      frames.push_back(codes.Get(it->code));
    }
    Add(frames, weight.nanoseconds, weight.samples);
  }
}

std::string ImportTree::Format(uint64_t min_ns) const {
  std::string out = "import time: self [ms] | cumulative [ms] | imported package\n";
  std::vector<std::pair<const std::string*, const ImportNode*>> top;
  for (const auto& [name, child] : root_.children) {
    if (child->cumulative_ns >= min_ns) top.emplace_back(&name, child.get());
  }
  std::stable_sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
    return a.second->cumulative_ns > b.second->cumulative_ns;
  });
  for (const auto& [name, child] : top) FormatNode(*name, *child, 0, min_ns, out);
  return out;
}

}  // namespace pystrobe
