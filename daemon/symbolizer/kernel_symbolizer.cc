#include "daemon/symbolizer/kernel_symbolizer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/procfs/small_file.h"

namespace pystrobe {
namespace {

// Symbol types a sampled instruction pointer can land in: text (t/T) and weak
// functions (w/W). BPF programs, ftrace and kprobe trampolines are listed as
// 't' in pseudo-modules ([bpf], [__builtin__ftrace]), so they are kept too.
bool IsFunctionType(char type) { return type == 't' || type == 'T' || type == 'w' || type == 'W'; }

// Symbols that mark where a text region ends; on x86 they are typed 'T', yet
// an address at or past them is in no function.
bool IsTextEndMarker(absl::string_view name) { return name == "_etext" || name == "_einittext"; }

struct ParsedLine {
  uint64_t addr;
  char type;
  absl::string_view name;
  absl::string_view module;
};

// One kallsyms line: "<hex address> <type> <name>[\t[<module>]]".
std::optional<ParsedLine> ParseLine(absl::string_view line) {
  std::vector<absl::string_view> fields =
      absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (fields.size() < 3 || fields.size() > 4 || fields[1].size() != 1) return std::nullopt;
  ParsedLine parsed;
  if (!absl::SimpleHexAtoi(fields[0], &parsed.addr)) return std::nullopt;
  parsed.type = fields[1][0];
  parsed.name = fields[2];
  if (fields.size() == 4) {
    absl::string_view module = fields[3];
    if (!absl::ConsumePrefix(&module, "[") || !absl::ConsumeSuffix(&module, "]") ||
        module.empty()) {
      return std::nullopt;
    }
    parsed.module = module;
  }
  return parsed;
}

}  // namespace

absl::StatusOr<KernelSymbolizer> KernelSymbolizer::FromFile(const std::string& path) {
  absl::StatusOr<std::string> text = procfs::ReadSmallFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<KernelSymbolizer> symbolizer = FromText(*text);
  if (!symbolizer.ok()) {
    return absl::Status(symbolizer.status().code(),
                        absl::StrCat(path, ": ", symbolizer.status().message()));
  }
  return symbolizer;
}

absl::StatusOr<KernelSymbolizer> KernelSymbolizer::FromText(std::string_view text) {
  KernelSymbolizer symbolizer;
  symbolizer.modules_.emplace_back();  // Index 0: the core kernel.
  bool any_nonzero_address = false;
  size_t parsed_lines = 0;

  // This abseil build has its own string_view type, distinct from std's.
  absl::string_view absl_text(text.data(), text.size());
  for (absl::string_view line : absl::StrSplit(absl_text, '\n', absl::SkipWhitespace())) {
    std::optional<ParsedLine> parsed = ParseLine(line);
    if (!parsed.has_value()) {
      ++symbolizer.malformed_lines_;
      continue;
    }
    ++parsed_lines;
    any_nonzero_address |= parsed->addr != 0;

    bool is_function = IsFunctionType(parsed->type) && !IsTextEndMarker(parsed->name);
    Entry entry{parsed->addr, 0, 0, 0, is_function};
    if (is_function) {
      entry.name_offset = static_cast<uint32_t>(symbolizer.name_pool_.size());
      entry.name_size = static_cast<uint32_t>(parsed->name.size());
      symbolizer.name_pool_.append(parsed->name.data(), parsed->name.size());
      if (!parsed->module.empty()) {
        // Modules' symbols are listed together, so checking the last one is
        // enough to intern them.
        if (absl::string_view(symbolizer.modules_.back()) != parsed->module) {
          symbolizer.modules_.emplace_back(parsed->module.data(), parsed->module.size());
        }
        entry.module_index = static_cast<uint32_t>(symbolizer.modules_.size() - 1);
      }
    }
    symbolizer.entries_.push_back(entry);
  }

  if (parsed_lines > 0 && !any_nonzero_address) {
    return absl::PermissionDeniedError(
        "kallsyms addresses are hidden: run as root or set kernel.kptr_restrict=0");
  }

  // Several names often share one address (aliases such as _text/_stext). Keep
  // one entry per address: the first function listed, else the boundary.
  std::vector<Entry>& entries = symbolizer.entries_;
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.addr < b.addr; });
  auto out = entries.begin();
  for (auto it = entries.begin(); it != entries.end();) {
    auto same_end = std::find_if(it, entries.end(),
                                 [addr = it->addr](const Entry& e) { return e.addr != addr; });
    auto function = std::find_if(it, same_end, [](const Entry& e) { return e.is_function; });
    *out++ = function != same_end ? *function : *it;
    it = same_end;
  }
  entries.erase(out, entries.end());
  entries.shrink_to_fit();
  symbolizer.function_count_ = static_cast<size_t>(
      std::count_if(entries.begin(), entries.end(), [](const Entry& e) { return e.is_function; }));
  if (symbolizer.function_count_ == 0) {
    return absl::InvalidArgumentError("kallsyms lists no function symbols");
  }
  return symbolizer;
}

std::optional<KernelSymbol> KernelSymbolizer::Lookup(uint64_t addr) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), addr,
                             [](uint64_t a, const Entry& e) { return a < e.addr; });
  if (it == entries_.begin()) return std::nullopt;
  const Entry& entry = *std::prev(it);
  if (!entry.is_function) return std::nullopt;
  return KernelSymbol{
      .name = std::string_view(name_pool_).substr(entry.name_offset, entry.name_size),
      .module = modules_[entry.module_index],
      .offset = addr - entry.addr,
  };
}

std::string KernelSymbolizer::Symbolize(uint64_t addr) const {
  std::optional<KernelSymbol> symbol = Lookup(addr);
  if (!symbol.has_value()) return "[unknown]_[k]";
  std::string frame(symbol->name);
  frame.append("_[k]");
  return frame;
}

}  // namespace pystrobe
