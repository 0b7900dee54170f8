#include "model/frame_names.h"

#include <charconv>
#include <string_view>

namespace pystrobe {
namespace {

constexpr std::string_view kKernelSuffix = "_[k]";

// `text` as a whole decimal (or hex) number that fits in T, or nothing.
template <typename T>
std::optional<T> ParseNumber(std::string_view text, int base = 10) {
  T value = 0;
  if (text.empty()) return std::nullopt;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<PythonFrameName> ParsePythonFrameName(std::string_view name) {
  // A qualname has no spaces ("Outer.method.<locals>.inner", "<module>"), so
  // the first " (" ends it; a file name may hold anything, so the line is the
  // digits after the last ':'.
  size_t open = name.find(" (");
  if (open == std::string_view::npos || open == 0 || !name.ends_with(')')) return std::nullopt;
  PythonFrameName parsed;
  parsed.qualname = name.substr(0, open);
  std::string_view inside = name.substr(open + 2, name.size() - open - 3);
  if (inside.empty()) return std::nullopt;
  size_t colon = inside.rfind(':');
  if (colon != std::string_view::npos) {
    if (std::optional<int64_t> line = ParseNumber<int64_t>(inside.substr(colon + 1))) {
      parsed.file = inside.substr(0, colon);
      parsed.line = *line;
      return parsed;
    }
  }
  parsed.file = inside;
  return parsed;
}

std::optional<ProcessFrameName> ParseProcessFrameName(std::string_view name) {
  size_t open = name.rfind(" (");
  if (open == std::string_view::npos || !name.ends_with(')')) return std::nullopt;
  std::optional<uint32_t> pid =
      ParseNumber<uint32_t>(name.substr(open + 2, name.size() - open - 3));
  if (!pid) return std::nullopt;
  return ProcessFrameName{name.substr(0, open), *pid};
}

std::optional<ThreadFrameName> ParseThreadFrameName(std::string_view name) {
  constexpr std::string_view kTid = " tid=";
  size_t at = name.rfind(kTid);
  if (at == std::string_view::npos) return std::nullopt;
  std::optional<uint32_t> tid = ParseNumber<uint32_t>(name.substr(at + kTid.size()));
  if (!tid) return std::nullopt;
  return ThreadFrameName{name.substr(0, at), *tid};
}

std::optional<ModuleOffsetFrameName> ParseModuleOffsetFrameName(std::string_view name) {
  constexpr std::string_view kPlus = "+0x";
  size_t at = name.rfind(kPlus);
  if (at == std::string_view::npos || at == 0) return std::nullopt;
  std::string_view module = name.substr(0, at);
  // A module is a file's base name; "[unknown] 0x..." and symbols with
  // spaces (C++ signatures) are not.
  if (module.find_first_of(" ()") != std::string_view::npos) return std::nullopt;
  std::optional<uint64_t> offset = ParseNumber<uint64_t>(name.substr(at + kPlus.size()), 16);
  if (!offset) return std::nullopt;
  return ModuleOffsetFrameName{module, *offset};
}

std::string_view KernelFunctionName(std::string_view name) {
  if (name.ends_with(kKernelSuffix) && name.size() > kKernelSuffix.size()) {
    name.remove_suffix(kKernelSuffix.size());
  }
  return name;
}

}  // namespace pystrobe
