// Puts the configured targets into the kernel's filter: pids at once; cgroup
// paths and containers as cgroup ids (the kernel includes their descendants),
// looked for again every few seconds since containers come and go; process
// name patterns by scanning /proc for new processes whose comm or executable
// base name matches, whose pids then join the filter.
#ifndef PYSTROBE_DAEMON_SERVICE_TARGET_SELECTOR_H_
#define PYSTROBE_DAEMON_SERVICE_TARGET_SELECTOR_H_

#include <cstdint>
#include <regex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "config/config.h"
#include "daemon/containers/cgroup_resolver.h"
#include "daemon/loader/bpf_sampler.h"

namespace pystrobe {

// Whether a configuration filters at all, and by cgroup.
bool FiltersProcesses(const TargetsConfig& targets);
bool FiltersCgroups(const TargetsConfig& targets);

class TargetSelector {
 public:
  // `sampler` and `cgroups` (may be null: no cgroup v2) must outlive this.
  TargetSelector(TargetsConfig targets, BpfSampler* sampler, CgroupResolver* cgroups);

  // Adds the pids and looks for the cgroups and processes once.
  absl::Status Start();
  // Looks again, when it is time: /proc every second, cgroups every 5.
  void Refresh(absl::Time now);

  // Whether `comm` or `exe_base` matches a process-name pattern.
  bool NameMatches(const std::string& comm, const std::string& exe_base) const;

  // Whether live process `pid` is a target: every process is, or it is in
  // targets.pids, or its name matches a pattern, or its cgroup is (or is
  // below) a targeted one. What the kernel filter decides for the process,
  // asked before the process has run: one that matches a pattern but is
  // newer than the last scan is put into the filter now.
  bool Includes(uint32_t pid);

  size_t target_cgroups() const { return cgroup_ids_.size(); }
  // Warnings worth logging once (a cgroup path that does not exist...).
  std::vector<std::string> TakeWarnings();

 private:
  void ScanProcesses();
  void ScanCgroups();
  // Whether a process's comm or executable matches a pattern (never a
  // kernel thread's).
  bool ProcessNameMatches(uint32_t pid) const;
  // Whether the process's cgroup or one of its ancestors is targeted.
  bool InTargetCgroup(uint32_t pid) const;

  TargetsConfig targets_;
  BpfSampler* sampler_;
  CgroupResolver* cgroups_;
  std::vector<std::regex> patterns_;
  absl::flat_hash_set<uint32_t> checked_pids_;
  absl::flat_hash_set<uint64_t> cgroup_ids_;
  absl::flat_hash_set<std::string> warned_;
  std::vector<std::string> warnings_;
  absl::Time next_process_scan_ = absl::InfinitePast();
  absl::Time next_cgroup_scan_ = absl::InfinitePast();
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_TARGET_SELECTOR_H_
