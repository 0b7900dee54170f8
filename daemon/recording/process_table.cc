#include "daemon/recording/process_table.h"

#include <signal.h>

#include <cerrno>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "daemon/containers/pid_namespace.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/process_files.h"
#include "daemon/procfs/stat.h"

namespace pystrobe {

bool ProcessIsAlive(uint32_t pid) {
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  // A zombie still answers kill. A stat file gone since (the process was
  // reaped meanwhile) is left to the next look.
  absl::StatusOr<procfs::StatLine> stat = procfs::ReadStat(procfs::PidPath(pid, "stat"));
  return !stat.ok() || stat->state() != 'Z';
}

std::string ProcessTable::ReadProcComm(uint32_t pid) {
  return procfs::ReadComm(procfs::PidPath(pid, "comm"));
}

uint32_t ProcessTable::ReadPidInNamespace(uint32_t pid) {
  absl::StatusOr<PidNamespaceInfo> info = ReadPidNamespaceInfo(static_cast<int32_t>(pid));
  if (!info.ok() || !info->in_child_namespace()) return 0;
  return static_cast<uint32_t>(info->ns_pid);
}

std::optional<ImageId> ProcessTable::OnSample(uint32_t pid, uint32_t tid,
                                              absl::string_view thread_comm, uint64_t cgroup_id) {
  auto it = live_image_by_pid_.find(pid);
  ImageId id;
  if (it != live_image_by_pid_.end()) {
    id = it->second;
  } else {
    if (live_image_by_pid_.size() >= max_live_images_) {
      ++images_refused_;
      return std::nullopt;
    }
    ExecRecord exec;
    if (auto it = exec_by_pid_.find(pid); it != exec_by_pid_.end()) {
      exec = std::move(it->second);
      exec_by_pid_.erase(it);
    } else {
      exec.comm = read_comm_(pid);
    }
    // A process that is already gone is named after the thread we saw.
    if (exec.comm.empty()) exec.comm = std::string(thread_comm);
    id = NewImage(pid, std::move(exec.comm));
    images_[id]->cgroup_id = cgroup_id;
    images_[id]->exec_python = exec.python;
  }
  ProcessImage& image = *images_[id];
  MaybeDiscoverPython(image);
  auto [name, inserted] = image.thread_names.try_emplace(tid, thread_comm);
  if (!inserted && name->second != thread_comm) name->second = std::string(thread_comm);
  return id;
}

std::optional<ImageId> ProcessTable::Track(uint32_t pid) {
  return OnSample(pid, pid, read_comm_(pid));
}

void ProcessTable::OnExec(uint32_t pid, absl::string_view comm,
                          std::optional<PythonExecutable> python) {
  if (auto it = live_image_by_pid_.find(pid); it != live_image_by_pid_.end()) {
    Retire(*images_[it->second]);
    live_image_by_pid_.erase(it);
  }
  exec_by_pid_[pid] = {.comm = std::string(comm), .python = python};
}

void ProcessTable::OnExit(uint32_t pid) {
  if (auto it = live_image_by_pid_.find(pid); it != live_image_by_pid_.end()) {
    Retire(*images_[it->second]);
    live_image_by_pid_.erase(it);
  }
  exec_by_pid_.erase(pid);
}

void ProcessTable::Retire(ProcessImage& image) {
  image.exited = true;
  exited_.push_back(image.id);
  // Its native frames were named as they arrived: the symbol tables
  // (megabytes for an interpreter) are of no more use. What is kept of its
  // Python side is small: the interpreter's ranges and the working directory.
  image.symbols.reset();
}

std::vector<ImageId> ProcessTable::EvictExited() {
  std::vector<ImageId> evicted;
  evicted.swap(exited_);
  for (ImageId id : evicted) images_.erase(id);
  images_evicted_ += evicted.size();
  return evicted;
}

size_t ProcessTable::process_count() const {
  absl::flat_hash_set<uint32_t> pids;
  for (const auto& [id, image] : images_) pids.insert(image->pid);
  return pids.size();
}

void ProcessTable::MaybeDiscoverPython(ProcessImage& image) {
  // The dynamic loader maps libpython a few milliseconds after exec: look
  // again soon, then less and less often (10 ms, 20 ms, ... 1.3 s in all).
  constexpr int kMaxAttempts = 8;
  constexpr absl::Duration kFirstRetry = absl::Milliseconds(10);
  if (python_discovery_ == nullptr || image.python != nullptr ||
      image.python_attempts >= kMaxAttempts) {
    return;
  }
  absl::Time now = absl::Now();
  if (now < image.next_python_attempt) return;
  image.next_python_attempt = now + kFirstRetry * (1 << image.python_attempts);
  ++image.python_attempts;
  absl::StatusOr<std::unique_ptr<PythonProcess>> python = python_discovery_->Discover(image.pid);
  if (python.ok()) {
    image.python = std::move(*python);
    image.python_error = absl::OkStatus();
    ++python_processes_;
    return;
  }
  image.python_error = python.status();
  // A run of an executable known from another process: named from its exec
  // record when /proc has nothing (it ended before this first sample was
  // read, as a short script or an OOM victim on a loaded host does).
  if (image.exec_python) {
    absl::StatusOr<std::unique_ptr<PythonProcess>> from_exec =
        python_discovery_->FromExec(image.pid, *image.exec_python);
    if (from_exec.ok()) {
      image.python = std::move(*from_exec);
      image.python_error = absl::OkStatus();
      ++python_processes_;
      return;
    }
  }
  // A version pystrobe cannot read, or memory it may not, stays so: look no
  // more. Anything else (no CPython yet, a read that failed as the process
  // changed under it) is worth another look.
  if (absl::IsUnimplemented(python.status()) || absl::IsPermissionDenied(python.status())) {
    image.python_attempts = kMaxAttempts;
  }
  // Said at the end of a recording: its samples have native frames only.
  if (image.python_attempts == kMaxAttempts && !absl::IsNotFound(python.status())) {
    if (python_not_read_.size() < kMaxPythonNotReadKept) {
      python_not_read_.push_back({image.pid, image.comm, python.status()});
    }
    ++python_not_read_count_;
  }
}

ImageId ProcessTable::NewImage(uint32_t pid, std::string comm) {
  auto image = std::make_unique<ProcessImage>();
  image->id = next_image_id_++;
  image->pid = pid;
  image->comm = std::move(comm);
  // Read while the process lives, as its symbols are: it may be gone by the
  // time its profile is written.
  image->pid_in_namespace = read_pid_in_namespace_(pid);
  absl::StatusOr<std::unique_ptr<ProcessSymbols>> symbols = symbolizer_->ForProcess(pid);
  if (symbols.ok()) {
    image->symbols = std::move(*symbols);
  } else {
    image->symbols_error = symbols.status();
    ++symbol_failures_;
  }
  ImageId id = image->id;
  images_.emplace(id, std::move(image));
  live_image_by_pid_[pid] = id;
  return id;
}

}  // namespace pystrobe
