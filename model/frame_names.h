// Reads back the parts of the frame names ProfileBuilder writes, for formats
// that keep them apart (pprof's functions, files, lines and labels;
// speedscope's file and line).
#ifndef PYSTROBE_MODEL_FRAME_NAMES_H_
#define PYSTROBE_MODEL_FRAME_NAMES_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace pystrobe {

// "qualname (file:line)", or "qualname (file)" with --nolineno.
struct PythonFrameName {
  std::string_view qualname;
  std::string_view file;
  int64_t line = 0;  // 0: no line
};
std::optional<PythonFrameName> ParsePythonFrameName(std::string_view name);

// "<comm> (<pid>)". comm may itself hold spaces and parentheses.
struct ProcessFrameName {
  std::string_view comm;
  uint32_t pid = 0;
};
std::optional<ProcessFrameName> ParseProcessFrameName(std::string_view name);

// "<thread name> tid=<tid>".
struct ThreadFrameName {
  std::string_view name;
  uint32_t tid = 0;
};
std::optional<ThreadFrameName> ParseThreadFrameName(std::string_view name);

// "module+0xoffset": a native frame without a symbol, at a file offset.
struct ModuleOffsetFrameName {
  std::string_view module;
  uint64_t offset = 0;
};
std::optional<ModuleOffsetFrameName> ParseModuleOffsetFrameName(std::string_view name);

// A kernel frame's function: "schedule_[k]" without its "_[k]".
std::string_view KernelFunctionName(std::string_view name);

}  // namespace pystrobe

#endif  // PYSTROBE_MODEL_FRAME_NAMES_H_
