// What userspace knows about each sampled process image (a pid between two
// execs): its name, its threads' names, and the snapshot that names its
// native frames. Images are never reused: a pid that execs or is recycled
// gets a new image, so old stacks keep their old symbols.
#ifndef PYSTROBE_DAEMON_RECORDING_PROCESS_TABLE_H_
#define PYSTROBE_DAEMON_RECORDING_PROCESS_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/recording/python_process.h"
#include "daemon/records/record_decoder.h"
#include "daemon/symbolizer/native_symbolizer.h"

namespace pystrobe {

// True while `pid` is a live process: not gone, and not a zombie whose exit
// its parent has yet to collect.
bool ProcessIsAlive(uint32_t pid);

using ImageId = uint32_t;

struct ProcessImage {
  ImageId id = 0;
  uint32_t pid = 0;
  // The cgroup v2 group of its first sample (bpf_get_current_cgroup_id), 0
  // when unknown.
  uint64_t cgroup_id = 0;
  // Its pid inside its own PID namespace (what `ps` in its container shows)
  // when that namespace is nested below ours; 0 when it shares our namespace
  // (the pid is the same there) or it could not be read.
  uint32_t pid_in_namespace = 0;
  std::string comm;  // the process's name (its main thread's comm)
  absl::flat_hash_map<uint32_t, std::string> thread_names;  // tid -> comm
  // Names native frames; null when the snapshot failed (see symbols_error).
  std::unique_ptr<ProcessSymbols> symbols;
  absl::Status symbols_error;
  // Set once CPython is found in the image; its frames can then be named.
  std::unique_ptr<PythonProcess> python;
  // From its exec record, when the kernel knew the executable as CPython's.
  std::optional<PythonExecutable> exec_python;
  // Why the last attempt found no usable CPython (NotFound: none at all).
  absl::Status python_error;
  int python_attempts = 0;
  absl::Time next_python_attempt = absl::InfinitePast();
  bool exited = false;
};

// Looks for CPython in new process images and hands what it finds to the
// kernel walker. An interface so tests run without /proc and BPF.
class PythonDiscovery {
 public:
  virtual ~PythonDiscovery() = default;
  // Finds CPython in `pid` and, when found, lets the kernel walk it.
  virtual absl::StatusOr<std::unique_ptr<PythonProcess>> Discover(uint32_t pid) = 0;
  // CPython in `pid` as its exec record tells it: an executable already
  // found in another process, which the kernel walks from the exec. Needs
  // nothing of the process, which may have ended before its first sample was
  // read. NotFound when the executable is not one this discovery found.
  virtual absl::StatusOr<std::unique_ptr<PythonProcess>> FromExec(
      uint32_t /*pid*/, const PythonExecutable& /*executable*/) {
    return absl::NotFoundError("no CPython executable known by exec");
  }
};

class ProcessTable {
 public:
  // A process's own name (its main thread's comm), empty when unknown.
  using CommReader = std::function<std::string(uint32_t pid)>;
  // Reads /proc/PID/comm.
  static std::string ReadProcComm(uint32_t pid);
  // A process's pid in its own PID namespace when that is nested below ours,
  // else 0 (see ProcessImage::pid_in_namespace).
  using NamespacePidReader = std::function<uint32_t(uint32_t pid)>;
  // Reads the NSpid line of /proc/PID/status.
  static uint32_t ReadPidInNamespace(uint32_t pid);

  // `symbolizer` and `python` (may be null: no Python support) must outlive
  // the table.
  explicit ProcessTable(NativeSymbolizer* symbolizer, PythonDiscovery* python = nullptr,
                        CommReader read_comm = ReadProcComm,
                        NamespacePidReader read_pid_in_namespace = ReadPidInNamespace)
      : symbolizer_(symbolizer),
        python_discovery_(python),
        read_comm_(std::move(read_comm)),
        read_pid_in_namespace_(std::move(read_pid_in_namespace)) {}

  // The image a sample of (pid, tid) belongs to. The first sample of an image
  // snapshots its symbols, while the process is alive. Nullopt when the
  // process is new and max_live_images are already tracked (counted in
  // images_refused()).
  std::optional<ImageId> OnSample(uint32_t pid, uint32_t tid, absl::string_view thread_comm,
                                  uint64_t cgroup_id = 0);
  // A running process (a --pid target) looked at before its first sample:
  // its image, symbols and CPython now, so that the kernel walks its Python
  // frames from its first sample on (a burst of allocations right after the
  // probes attach would go without them). Nullopt as for OnSample.
  std::optional<ImageId> Track(uint32_t pid);
  // The process replaced its image: later samples belong to a new one.
  // `python`: the kernel knew the new executable as CPython's.
  void OnExec(uint32_t pid, absl::string_view comm,
              std::optional<PythonExecutable> python = std::nullopt);
  // The process exited: its pid may be reused by an unrelated process.
  void OnExit(uint32_t pid);

  const ProcessImage& image(ImageId id) const { return *images_.at(id); }
  // The image `pid` runs now, if it has been sampled; null otherwise.
  const ProcessImage* LiveImage(uint32_t pid) const {
    auto it = live_image_by_pid_.find(pid);
    return it == live_image_by_pid_.end() ? nullptr : images_.at(it->second).get();
  }
  // Whether `pid`, as last sampled, runs a free-threaded CPython (no GIL).
  bool RunsFreeThreadedPython(uint32_t pid) const {
    const ProcessImage* image = LiveImage(pid);
    return image != nullptr && image->python != nullptr &&
           image->python->interpreter().layout.abi.free_threaded != 0;
  }
  // Images held: live ones, and exited ones not yet evicted.
  size_t image_count() const { return images_.size(); }
  size_t live_image_count() const { return live_image_by_pid_.size(); }

  // Most live images tracked at once; beyond it new processes are refused.
  void set_max_live_images(size_t max) { max_live_images_ = max; }
  // Forgets every exited image, returning their ids. Call only when no stack
  // refers to them any more (after the window that used them is written).
  std::vector<ImageId> EvictExited();
  // Images forgotten by EvictExited, and new processes refused, so far.
  uint64_t images_evicted() const { return images_evicted_; }
  uint64_t images_refused() const { return images_refused_; }
  // Distinct pids seen (a process that execs has several images, one pid).
  size_t process_count() const;
  // Images whose symbols could not be snapshotted.
  size_t symbol_failures() const { return symbol_failures_; }
  // Images found to run CPython.
  size_t python_processes() const { return python_processes_; }
  // A process whose CPython was seen but never read, and why.
  struct PythonNotRead {
    uint32_t pid = 0;
    std::string comm;
    absl::Status why;
  };
  // Images where the looking for CPython ended on something other than "no
  // CPython here": an unsupported version, memory we may not read, a runtime
  // still unreadable at the last look. The first kMaxPythonNotReadKept of
  // them, and how many in all.
  static constexpr size_t kMaxPythonNotReadKept = 8;
  const std::vector<PythonNotRead>& python_not_read() const { return python_not_read_; }
  size_t python_not_read_count() const { return python_not_read_count_; }

 private:
  ImageId NewImage(uint32_t pid, std::string comm);
  // An image whose process exited or exec'd: releases what only a live
  // process needs.
  void Retire(ProcessImage& image);
  // Looks for CPython in a live image, a few times: libpython is mapped by
  // the dynamic loader after exec, or later still by an embedding program.
  void MaybeDiscoverPython(ProcessImage& image);

  NativeSymbolizer* symbolizer_;
  PythonDiscovery* python_discovery_;
  size_t python_processes_ = 0;
  std::vector<PythonNotRead> python_not_read_;
  size_t python_not_read_count_ = 0;
  CommReader read_comm_;
  NamespacePidReader read_pid_in_namespace_;
  // By id; ids are never reused (a counter, not a slot).
  absl::flat_hash_map<ImageId, std::unique_ptr<ProcessImage>> images_;
  ImageId next_image_id_ = 0;
  std::vector<ImageId> exited_;  // retired, not yet evicted
  size_t max_live_images_ = SIZE_MAX;
  uint64_t images_evicted_ = 0;
  uint64_t images_refused_ = 0;
  absl::flat_hash_map<uint32_t, ImageId> live_image_by_pid_;
  // What exec events said, used when the first sample of the new image comes.
  struct ExecRecord {
    std::string comm;
    std::optional<PythonExecutable> python;
  };
  absl::flat_hash_map<uint32_t, ExecRecord> exec_by_pid_;
  size_t symbol_failures_ = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_PROCESS_TABLE_H_
