#include "daemon/symbolizer/perf_map.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace pystrobe {

PerfMap PerfMap::Parse(absl::string_view text) {
  PerfMap map;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(' ', 2));
    Entry entry;
    uint64_t size = 0;
    if (fields.size() != 3 || !absl::SimpleHexAtoi(fields[0], &entry.start) ||
        !absl::SimpleHexAtoi(fields[1], &size) || size == 0) {
      continue;
    }
    entry.end = entry.start + size;
    entry.name = std::string(absl::StripAsciiWhitespace(fields[2]));
    map.entries_.push_back(std::move(entry));
  }
  std::stable_sort(map.entries_.begin(), map.entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.start < b.start; });
  // The last entry written for a start wins.
  std::vector<Entry> unique;
  for (Entry& entry : map.entries_) {
    if (!unique.empty() && unique.back().start == entry.start) {
      unique.back() = std::move(entry);
    } else {
      unique.push_back(std::move(entry));
    }
  }
  map.entries_ = std::move(unique);
  return map;
}

const std::string* PerfMap::Find(uint64_t address) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), address,
                             [](uint64_t a, const Entry& e) { return a < e.start; });
  if (it == entries_.begin()) return nullptr;
  --it;
  return address < it->end ? &it->name : nullptr;
}

}  // namespace pystrobe
