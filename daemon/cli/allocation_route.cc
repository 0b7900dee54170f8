#include "daemon/cli/allocation_route.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/cli/alloc_preload.h"
#include "daemon/procfs/maps.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/small_file.h"

namespace pystrobe {
namespace {

// The C library process `pid` maps, as a path from here (through its root,
// for a process in a container); "" when it maps none (yet).
std::string LibcPath(const std::string& pid) {
  std::string maps = procfs::ReadSmallFile(procfs::PidPath(pid, "maps")).value_or("");
  for (const procfs::MapsLine& line : procfs::ParseMaps(maps)) {
    if (!absl::StartsWith(line.path, "/")) continue;
    std::string path(line.path);
    if (!std::filesystem::path(path).filename().string().starts_with("libc.so")) continue;
    // Through the process's root only when it is not ours (a container).
    std::error_code error;
    bool same_root = std::filesystem::equivalent(procfs::PidPath(pid, "root"), "/", error);
    return pid == "self" || same_root ? path : procfs::RootPath(pid, path);
  }
  return "";
}

absl::Status AttachAllocationProbes(BpfSampler& sampler, const std::vector<uint32_t>& targets,
                                    bool all, const std::string& static_program) {
  std::vector<std::pair<std::string, int>> probes;
  if (all) probes.push_back({LibcPath("self"), -1});
  for (uint32_t pid : targets) {
    std::string libc = LibcPath(absl::StrCat(pid));
    if (!static_program.empty()) libc = static_program;
    probes.push_back({libc.empty() ? LibcPath("self") : libc, static_cast<int>(pid)});
  }
  for (const auto& [libc, pid] : probes) {
    if (libc.empty()) return absl::NotFoundError("--allocations: no libc.so to probe");
    fprintf(stderr,
            "pystrobe: --allocations traps every malloc, calloc, realloc and free of %s in %s: "
            "it runs slower while it records\n",
            libc.c_str(), pid < 0 ? "every process" : absl::StrCat("process ", pid).c_str());
    if (absl::Status s = sampler.AttachAllocationProbes(libc, pid); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

AllocationRoute ChooseAllocationRoute(const std::vector<std::string>& command,
                                      uint32_t sample_bytes) {
  AllocationRoute route;
  if (command.empty()) return route;
  const char* path = getenv("PATH");
  absl::StatusOr<std::string> program = ResolveCommand(command.front(), path ? path : "");
  if (!program.ok()) return route;  // the launch says it
  absl::StatusOr<std::string> library = FindAllocationLibrary();
  absl::Status preloadable = library.ok() ? CheckPreloadable(*program) : library.status();
  if (preloadable.ok()) {
    route.library = *library;
    route.environment =
        AllocationPreloadEnvironment(route.library, sample_bytes, getenv("LD_PRELOAD"));
    return route;
  }
  fprintf(stderr, "pystrobe: --allocations cannot sample inside the process: %s; uprobes instead\n",
          std::string(preloadable.message()).c_str());
  if (IsStaticExecutable(*program)) route.static_program = *program;
  return route;
}

absl::Status AttachAllocationRoute(BpfSampler& sampler, const AllocationRoute& route,
                                   const std::vector<uint32_t>& targets, bool all,
                                   uint32_t sample_bytes) {
  if (!route.in_process())
    return AttachAllocationProbes(sampler, targets, all, route.static_program);
  if (absl::Status s = sampler.AttachAllocationLibrary(route.library); !s.ok()) return s;
  fprintf(stderr,
          "pystrobe: --allocations samples inside the command (%s preloaded, every %u bytes on "
          "average): only sampled allocations and their frees trap into the kernel\n",
          route.library.c_str(), sample_bytes);
  return absl::OkStatus();
}

absl::StatusOr<HeldCommand> HoldCommand(const std::vector<std::string>& command, bool allocations,
                                        uint32_t alloc_sample_bytes) {
  HeldCommand held;
  if (allocations) held.allocation_route = ChooseAllocationRoute(command, alloc_sample_bytes);
  if (!command.empty()) {
    absl::StatusOr<LaunchedCommand> launched =
        LaunchedCommand::Start(command, held.allocation_route.environment);
    if (!launched.ok()) return launched.status();
    held.launched.emplace(std::move(*launched));
  }
  return held;
}

}  // namespace pystrobe
