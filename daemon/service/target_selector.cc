#include "daemon/service/target_selector.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/containers/container_id.h"
#include "daemon/containers/process_container_info.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/process_files.h"

namespace pystrobe {
namespace {

constexpr absl::Duration kProcessScanInterval = absl::Seconds(1);
constexpr absl::Duration kCgroupScanInterval = absl::Seconds(5);
// Groups walked when looking for containers; the map holds 1024.
constexpr size_t kMaxCgroupsWalked = 65536;
constexpr size_t kMaxTargetCgroups = 1024;

}  // namespace

bool FiltersProcesses(const TargetsConfig& targets) { return !targets.all; }

bool FiltersCgroups(const TargetsConfig& targets) {
  return !targets.all && (!targets.cgroups.empty() || !targets.containers.empty());
}

TargetSelector::TargetSelector(TargetsConfig targets, BpfSampler* sampler, CgroupResolver* cgroups)
    : targets_(std::move(targets)), sampler_(sampler), cgroups_(cgroups) {
  // The loader validated every pattern.
  for (const std::string& pattern : targets_.process_names) {
    patterns_.emplace_back(pattern, std::regex::ECMAScript);
  }
}

absl::Status TargetSelector::Start() {
  if (!FiltersProcesses(targets_)) return absl::OkStatus();
  for (int32_t pid : targets_.pids) {
    if (absl::Status s = sampler_->AddTargetPid(static_cast<uint32_t>(pid)); !s.ok()) return s;
  }
  if (FiltersCgroups(targets_) && cgroups_ == nullptr) {
    return absl::FailedPreconditionError(
        "targets.cgroups and targets.containers need cgroup v2, which is not mounted here");
  }
  Refresh(absl::Now());
  return absl::OkStatus();
}

void TargetSelector::Refresh(absl::Time now) {
  if (!FiltersProcesses(targets_)) return;
  if (!patterns_.empty() && now >= next_process_scan_) {
    next_process_scan_ = now + kProcessScanInterval;
    ScanProcesses();
  }
  if (FiltersCgroups(targets_) && cgroups_ != nullptr && now >= next_cgroup_scan_) {
    next_cgroup_scan_ = now + kCgroupScanInterval;
    ScanCgroups();
  }
}

bool TargetSelector::NameMatches(const std::string& comm, const std::string& exe_base) const {
  for (const std::regex& pattern : patterns_) {
    if (std::regex_match(comm, pattern)) return true;
    if (!exe_base.empty() && std::regex_match(exe_base, pattern)) return true;
  }
  return false;
}

bool TargetSelector::ProcessNameMatches(uint32_t pid) const {
  std::string comm = procfs::ReadComm(procfs::PidPath(pid, "comm"));
  absl::StatusOr<std::string> link = procfs::ReadLink(procfs::PidPath(pid, "exe"));
  std::string exe = link.ok() ? *link : "";
  // A kernel thread has no executable: it is never a target.
  if (!link.ok() && comm.empty()) return false;
  return NameMatches(comm, std::filesystem::path(exe).filename().string());
}

bool TargetSelector::InTargetCgroup(uint32_t pid) const {
  absl::StatusOr<ProcessContainerInfo> info = ReadProcessContainerInfo(static_cast<int32_t>(pid));
  if (!info.ok() || info->cgroup_path.empty()) return false;
  // The kernel looks at the task's group and its ancestors (targets.bpf.h).
  std::string path = info->cgroup_path;
  while (true) {
    absl::StatusOr<uint64_t> id = cgroups_->IdForPath(path);
    if (id.ok() && cgroup_ids_.contains(*id)) return true;
    if (path == "/" || path.empty()) return false;
    size_t slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
}

bool TargetSelector::Includes(uint32_t pid) {
  if (!FiltersProcesses(targets_)) return true;
  if (std::find(targets_.pids.begin(), targets_.pids.end(), static_cast<int32_t>(pid)) !=
      targets_.pids.end()) {
    return true;
  }
  if (!patterns_.empty() && ProcessNameMatches(pid)) {
    if (checked_pids_.contains(pid)) return true;  // the scan put it in the filter
    if (absl::Status s = sampler_->AddTargetPid(pid); !s.ok()) {
      warnings_.push_back(std::string(s.message()));
      return false;
    }
    return true;
  }
  return FiltersCgroups(targets_) && cgroups_ != nullptr && InTargetCgroup(pid);
}

void TargetSelector::ScanProcesses() {
  absl::flat_hash_set<uint32_t> present;
  for (uint32_t pid : procfs::ReadPids()) {
    present.insert(pid);
    if (checked_pids_.contains(pid)) continue;
    if (ProcessNameMatches(pid)) {
      if (absl::Status s = sampler_->AddTargetPid(pid); !s.ok()) {
        warnings_.push_back(std::string(s.message()));
      }
    }
  }
  // A process is looked at once; a pid that comes back is a new process.
  checked_pids_.swap(present);
}

void TargetSelector::ScanCgroups() {
  absl::flat_hash_set<uint64_t> wanted;
  auto warn_once = [&](std::string warning) {
    if (warned_.insert(warning).second) warnings_.push_back(std::move(warning));
  };
  for (const std::string& path : targets_.cgroups) {
    absl::StatusOr<uint64_t> id = cgroups_->IdForPath(path);
    if (id.ok()) {
      wanted.insert(*id);
    } else {
      warn_once(absl::StrCat("targets.cgroups: ", path, ": ", id.status().message()));
    }
  }
  if (!targets_.containers.empty()) {
    WalkCgroupTree(cgroups_->mount(), "/", kMaxCgroupsWalked,
                   [&](uint64_t id, const std::string& path) {
                     ContainerInfo container = ParseContainerInfo(path);
                     if (!container.in_container()) return;
                     for (const std::string& prefix : targets_.containers) {
                       if (absl::StartsWith(container.id, prefix)) wanted.insert(id);
                     }
                   });
  }
  for (uint64_t id : wanted) {
    if (cgroup_ids_.size() >= kMaxTargetCgroups) {
      warn_once("more targeted cgroups than the kernel's map holds (1024): some are left out");
      break;
    }
    if (cgroup_ids_.contains(id)) continue;
    if (absl::Status s = sampler_->AddTargetCgroup(id); s.ok()) {
      cgroup_ids_.insert(id);
    } else {
      warn_once(std::string(s.message()));
    }
  }
  // Groups that are gone (a container stopped): their ids are not reused.
  for (auto it = cgroup_ids_.begin(); it != cgroup_ids_.end();) {
    if (!wanted.contains(*it)) {
      sampler_->RemoveTargetCgroup(*it).IgnoreError();
      cgroup_ids_.erase(it++);
    } else {
      ++it;
    }
  }
}

std::vector<std::string> TargetSelector::TakeWarnings() {
  std::vector<std::string> out;
  out.swap(warnings_);
  return out;
}

}  // namespace pystrobe
