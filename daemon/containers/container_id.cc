#include "daemon/containers/container_id.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace pystrobe {
namespace {

constexpr size_t kContainerIdLength = 64;
constexpr size_t kShortIdLength = 12;

bool IsContainerId(absl::string_view text) {
  if (text.size() != kContainerIdLength) return false;
  for (char c : text) {
    if (!absl::ascii_isdigit(c) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

// A pod UID: 32 hex digits with or without the four dashes (static pods use a
// config hash without dashes).
bool IsPodUid(absl::string_view text) {
  if (text.size() != 32 && text.size() != 36) return false;
  int hex = 0;
  for (char c : text) {
    if (c == '-') continue;
    if (!absl::ascii_isxdigit(c)) return false;
    ++hex;
  }
  return hex == 32;
}

struct RuntimePrefix {
  absl::string_view prefix;
  ContainerRuntime runtime;
};

// Scope names of the systemd cgroup drivers ("docker-<id>.scope"); the
// ".scope" is optional for the cgroupfs drivers that use the same prefix.
constexpr RuntimePrefix kRuntimePrefixes[] = {
    {"docker-", ContainerRuntime::kDocker},
    {"cri-containerd-", ContainerRuntime::kContainerd},
    {"crio-", ContainerRuntime::kCrio},
    {"libpod-", ContainerRuntime::kPodman},
};

// The pod UID in a kubepods component: "pod<uid>" (cgroupfs) or
// "kubepods[-<qos>]-pod<uid_>.slice" (systemd).
std::optional<std::string> PodUidOf(absl::string_view component, bool under_kubepods) {
  if (absl::StartsWith(component, "kubepods") && absl::ConsumeSuffix(&component, ".slice")) {
    size_t pos = component.rfind("-pod");
    if (pos == absl::string_view::npos) return std::nullopt;
    std::string uid = absl::StrReplaceAll(component.substr(pos + 4), {{"_", "-"}});
    if (IsPodUid(uid)) return absl::AsciiStrToLower(uid);
    return std::nullopt;
  }
  if (under_kubepods && absl::ConsumePrefix(&component, "pod") && IsPodUid(component)) {
    return absl::AsciiStrToLower(component);
  }
  return std::nullopt;
}

}  // namespace

absl::string_view ContainerRuntimeName(ContainerRuntime runtime) {
  switch (runtime) {
    case ContainerRuntime::kNone:
      return "";
    case ContainerRuntime::kDocker:
      return "docker";
    case ContainerRuntime::kContainerd:
      return "containerd";
    case ContainerRuntime::kCrio:
      return "cri-o";
    case ContainerRuntime::kPodman:
      return "podman";
    case ContainerRuntime::kCri:
      return "cri";
    case ContainerRuntime::kUnknown:
      return "unknown";
  }
  return "unknown";
}

std::string ContainerInfo::Identity() const {
  if (!short_id.empty()) return short_id;
  return systemd_unit;
}

ContainerInfo ParseContainerInfo(absl::string_view cgroup_path) {
  ContainerInfo info;
  bool under_kubepods = false;
  absl::string_view previous;
  for (absl::string_view component : absl::StrSplit(cgroup_path, '/', absl::SkipEmpty())) {
    if (component == "." || component == "..") continue;
    if (std::optional<std::string> uid = PodUidOf(component, under_kubepods)) {
      info.pod_uid = *uid;
    }
    if (absl::StartsWith(component, "kubepods")) under_kubepods = true;

    ContainerRuntime runtime = ContainerRuntime::kNone;
    absl::string_view id;
    if (IsContainerId(component)) {
      id = component;
      if (previous == "docker") {
        runtime = ContainerRuntime::kDocker;
      } else if (under_kubepods) {
        runtime = ContainerRuntime::kCri;
      } else {
        runtime = ContainerRuntime::kUnknown;
      }
    } else {
      absl::string_view name = component;
      absl::ConsumeSuffix(&name, ".scope");
      for (const RuntimePrefix& candidate : kRuntimePrefixes) {
        absl::string_view rest = name;
        if (absl::ConsumePrefix(&rest, candidate.prefix) && IsContainerId(rest)) {
          runtime = candidate.runtime;
          id = rest;
          break;
        }
      }
    }
    if (!id.empty()) {
      info.runtime = runtime;
      info.id = std::string(id);
      info.short_id = info.id.substr(0, kShortIdLength);
    }
    if (absl::EndsWith(component, ".service") || absl::EndsWith(component, ".scope")) {
      info.systemd_unit = std::string(component);
    }
    previous = component;
  }
  return info;
}

std::vector<ProcCgroupEntry> ParseProcCgroup(absl::string_view text) {
  std::vector<ProcCgroupEntry> entries;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    // The path may itself contain ':', so split at the first two only.
    size_t first = line.find(':');
    if (first == absl::string_view::npos) continue;
    size_t second = line.find(':', first + 1);
    if (second == absl::string_view::npos) continue;
    ProcCgroupEntry entry;
    if (!absl::SimpleAtoi(line.substr(0, first), &entry.hierarchy_id)) continue;
    entry.controllers = std::string(line.substr(first + 1, second - first - 1));
    entry.path = std::string(line.substr(second + 1));
    if (entry.path.empty()) continue;
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::optional<std::string> UnifiedCgroupPath(const std::vector<ProcCgroupEntry>& entries) {
  for (const ProcCgroupEntry& entry : entries) {
    if (entry.hierarchy_id == 0 && entry.controllers.empty()) return entry.path;
  }
  return std::nullopt;
}

ContainerInfo ContainerInfoFromProcCgroup(const std::vector<ProcCgroupEntry>& entries) {
  ContainerInfo info;
  if (std::optional<std::string> unified = UnifiedCgroupPath(entries)) {
    info = ParseContainerInfo(*unified);
    if (info.in_container()) return info;
  }
  // v1 hierarchies, most telling first.
  auto rank = [](const ProcCgroupEntry& entry) {
    if (entry.controllers == "name=systemd") return 0;
    for (absl::string_view controller : absl::StrSplit(entry.controllers, ',')) {
      if (controller == "memory") return 1;
    }
    return 2;
  };
  std::optional<ContainerInfo> systemd_line;
  for (int wanted = 0; wanted <= 2; ++wanted) {
    for (const ProcCgroupEntry& entry : entries) {
      if (entry.hierarchy_id == 0 || rank(entry) != wanted) continue;
      ContainerInfo v1 = ParseContainerInfo(entry.path);
      if (v1.in_container()) return v1;
      if (wanted == 0 && !systemd_line) systemd_line = v1;
    }
  }
  // Not in a container: on a hybrid host the unit may be named only by the
  // name=systemd hierarchy.
  if (info.systemd_unit.empty() && systemd_line) info = *systemd_line;
  return info;
}

}  // namespace pystrobe
