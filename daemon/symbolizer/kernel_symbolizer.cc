#include "daemon/symbolizer/kernel_symbolizer.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <tuple>
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

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// Cuts the next field, up to a space or tab, off the front of `rest`. (A
// plain loop: a kallsyms file is 100k+ lines of four short fields, and a
// character-set search builds its table on every call.)
absl::string_view NextField(absl::string_view& rest) {
  size_t start = 0;
  while (start < rest.size() && IsBlank(rest[start])) ++start;
  size_t end = start;
  while (end < rest.size() && !IsBlank(rest[end])) ++end;
  absl::string_view field = rest.substr(start, end - start);
  rest.remove_prefix(end);
  return field;
}

// One kallsyms line: "<hex address> <type> <name>[\t[<module>]]".
std::optional<ParsedLine> ParseLine(absl::string_view line) {
  absl::string_view address = NextField(line);
  absl::string_view type = NextField(line);
  absl::string_view name = NextField(line);
  absl::string_view module = NextField(line);
  if (name.empty() || type.size() != 1 || !NextField(line).empty()) return std::nullopt;
  ParsedLine parsed;
  if (!absl::SimpleHexAtoi(address, &parsed.addr)) return std::nullopt;
  parsed.type = type[0];
  parsed.name = name;
  if (!module.empty()) {
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
  KernelSymbolizer symbolizer;
  // Megabytes of text, never held whole, and room for what is kept reserved
  // once, not copied as it grows: each page a start-up first touches costs a
  // fault, tens of microseconds on some VMs. (A reservation's untouched
  // pages cost nothing.) Room for 256k symbols; a kernel has 100k to 200k.
  symbolizer.entries_.reserve(256 * 1024);
  symbolizer.name_pool_.reserve(8 << 20);
  absl::Status read =
      procfs::ForEachLine(path, [&](absl::string_view line) { symbolizer.AddLine(line); });
  if (!read.ok()) return read;
  if (absl::Status s = symbolizer.Finish(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  }
  return symbolizer;
}

absl::StatusOr<KernelSymbolizer> KernelSymbolizer::FromText(std::string_view text) {
  KernelSymbolizer symbolizer;
  // This abseil build has its own string_view type, distinct from std's.
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    symbolizer.AddLine(line);
  }
  if (absl::Status s = symbolizer.Finish(); !s.ok()) return s;
  return symbolizer;
}

void KernelSymbolizer::AddLine(absl::string_view line) {
  if (absl::StripAsciiWhitespace(line).empty()) return;
  std::optional<ParsedLine> parsed = ParseLine(line);
  // A name too long for an entry is malformed: kallsyms names are under 512 bytes.
  if (!parsed.has_value() || parsed->name.size() > UINT16_MAX) {
    ++malformed_lines_;
    return;
  }
  ++parsed_lines_;
  any_nonzero_address_ |= parsed->addr != 0;

  Entry entry{parsed->addr, static_cast<uint32_t>(name_pool_.size()), 0, 0};
  if (IsFunctionType(parsed->type) && !IsTextEndMarker(parsed->name)) {
    if (!parsed->module.empty()) {
      // Modules' symbols are listed together, so checking the last one is
      // enough to intern them.
      if (absl::string_view(modules_.back()) != parsed->module) {
        if (modules_.size() > UINT16_MAX) {  // past what an entry can index
          ++malformed_lines_;
          return;
        }
        modules_.emplace_back(parsed->module.data(), parsed->module.size());
      }
      entry.module_index = static_cast<uint16_t>(modules_.size() - 1);
    }
    entry.name_size = static_cast<uint16_t>(parsed->name.size());
    name_pool_.append(parsed->name.data(), parsed->name.size());
  }
  entries_.push_back(entry);
}

absl::Status KernelSymbolizer::Finish() {
  if (parsed_lines_ > 0 && !any_nonzero_address_) {
    return absl::PermissionDeniedError(
        "kallsyms addresses are hidden: run as root or set kernel.kptr_restrict=0");
  }

  // Several names often share one address (aliases such as _text/_stext). Keep
  // one entry per address: the first function listed, else the boundary. (A
  // sort by that order, not a stable one: a stable sort takes a buffer as
  // large as the entries, megabytes of pages touched once.)
  std::vector<Entry>& entries = entries_;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tuple(a.addr, !a.is_function(), a.name_offset) <
           std::tuple(b.addr, !b.is_function(), b.name_offset);
  });
  entries.erase(std::unique(entries.begin(), entries.end(),
                            [](const Entry& a, const Entry& b) { return a.addr == b.addr; }),
                entries.end());
  function_count_ = static_cast<size_t>(std::count_if(
      entries.begin(), entries.end(), [](const Entry& e) { return e.is_function(); }));
  if (function_count_ == 0) return absl::InvalidArgumentError("kallsyms lists no function symbols");
  return absl::OkStatus();
}

std::optional<KernelSymbol> KernelSymbolizer::Lookup(uint64_t addr) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), addr,
                             [](uint64_t a, const Entry& e) { return a < e.addr; });
  if (it == entries_.begin()) return std::nullopt;
  const Entry& entry = *std::prev(it);
  if (!entry.is_function()) return std::nullopt;
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
