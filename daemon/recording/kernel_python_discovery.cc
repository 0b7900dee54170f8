#include "daemon/recording/kernel_python_discovery.h"

#include <signal.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "daemon/elf/elf_file.h"
#include "daemon/procfs/paths.h"
#include "daemon/symbolizer/proc_maps.h"

namespace pystrobe {

absl::StatusOr<std::unique_ptr<PythonProcess>> KernelPythonDiscovery::Discover(uint32_t pid) {
  absl::StatusOr<std::unique_ptr<PythonProcess>> python = PythonProcess::Discover(pid);
  if (!python.ok()) {
    if (absl::IsUnimplemented(python.status()) &&
        warned_.insert(std::string(python.status().message())).second) {
      fprintf(stderr, "pystrobe: warning: %s; its samples keep native frames only\n",
              std::string(python.status().message()).c_str());
    }
    return python.status();
  }
  if (absl::Status status = sampler_->AddPythonProcess(pid, (*python)->interpreter().ToBpf());
      !status.ok()) {
    return status;
  }
  RememberBinary(pid, **python);
  if (gc_probes_) AttachGcProbes(pid, (*python)->interpreter());
  if (finalize_probes_) AttachFinalizeProbe(pid, (*python)->interpreter());
  return python;
}

void KernelPythonDiscovery::AttachFinalizeProbe(uint32_t pid,
                                                const PythonInterpreter& interpreter) {
  std::string binary = procfs::RootPath(pid, interpreter.binary_path);
  absl::Status status = sampler_->AttachPythonFinalizeProbe(binary);
  if (!status.ok() && warned_.insert(absl::StrCat("finalize ", interpreter.binary_path)).second) {
    fprintf(stderr,
            "pystrobe: warning: %s; the in-use view of its processes is taken at their exit\n",
            std::string(status.message()).c_str());
  }
}

void KernelPythonDiscovery::AttachGcProbes(uint32_t pid, const PythonInterpreter& interpreter) {
  // Through the process's root: the path is as its mount namespace sees it.
  std::string binary = procfs::MappedFilePath(pid, interpreter.binary_path);
  if (!sampler_->AttachPythonGcProbes(binary).ok()) return;  // no probes: gc_measured false
  if (gc_measured_.size() >= gc_measured_sweep_at_) {
    absl::erase_if(gc_measured_, [](uint32_t old) {
      return kill(static_cast<pid_t>(old), 0) != 0 && errno == ESRCH;
    });
    gc_measured_sweep_at_ = std::max<size_t>(kGcMeasuredSweepAt, 2 * gc_measured_.size());
  }
  gc_measured_.insert(pid);
}

absl::StatusOr<std::unique_ptr<PythonProcess>> KernelPythonDiscovery::FromExec(
    uint32_t pid, const PythonExecutable& executable) {
  auto known = executables_.find({executable.dev, executable.inode});
  if (known == executables_.end() || known->second.first_run == nullptr) {
    return absl::NotFoundError(absl::StrCat("executable ", executable.dev, ":", executable.inode,
                                            " is not one CPython was found in"));
  }
  return known->second.first_run->RunBy(pid, executable.start_code - known->second.start_code);
}

void KernelPythonDiscovery::RememberBinary(uint32_t pid, const PythonProcess& python) {
  const PythonInterpreter& interpreter = python.interpreter();
  // A libpython is mapped by the dynamic loader after exec, where the kernel
  // cannot wait for it: only an interpreter linked into the executable.
  if (!interpreter.in_executable) return;
  absl::StatusOr<ImageIdentity> identity = ReadImageIdentity(pid);
  // /proc/PID/stat shows startcode as 0 for a process without memory and as
  // 1 to a reader that may not trace it.
  if (!identity.ok() || identity->start_code <= 1) return;
  // The kernel's encoding of a device number, as in struct super_block.
  pystrobe_python_binary_key key = {
      .dev = (static_cast<uint64_t>(major(identity->exe_dev)) << 20) | minor(identity->exe_dev),
      .inode = identity->exe_inode};
  auto [known, added] = executables_.try_emplace({key.dev, key.inode});
  if (!added) return;
  known->second = {.first_run = python.RunBy(pid, 0), .start_code = identity->start_code};
  const pystrobe_python_process process = interpreter.ToBpf();
  const pystrobe_python_binary binary = {
      .runtime_offset = process.runtime_addr - identity->start_code,
      .code_type_offset = process.code_type_addr - identity->start_code,
      .offsets = process.offsets};
  if (absl::Status status = sampler_->AddPythonBinary(key, binary); !status.ok()) {
    fprintf(stderr, "pystrobe: warning: %s; later runs of %s are found as before\n",
            std::string(status.message()).c_str(), interpreter.binary_path.c_str());
  }
}

}  // namespace pystrobe
