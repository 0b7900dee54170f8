// One CPython process image as the recorder sees it: its interpreter, a
// reader of its code objects, and where the interpreter's own code lives
// (to tell eval-loop frames from extension frames).
#ifndef PYSTROBE_DAEMON_RECORDING_PYTHON_PROCESS_H_
#define PYSTROBE_DAEMON_RECORDING_PYTHON_PROCESS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/elf/elf_file.h"
#include "daemon/python/asyncio_tasks.h"
#include "daemon/python/code_object_reader.h"
#include "daemon/python/frame_walker.h"
#include "daemon/python/interpreter_finder.h"
#include "daemon/python/object_layout.h"
#include "daemon/python/process_memory.h"

namespace pystrobe {

// What `record --asyncio` puts above a task's own frames: the task's name and
// the coroutine frames of the tasks awaiting it, outermost first.
struct AsyncioTaskLabel {
  std::string name;
  std::vector<PythonFrameSymbol> awaiter_frames;
};

class PythonProcess {
 public:
  // Tasks are read at most this often per process (each read walks every
  // task's coroutine chain).
  static constexpr absl::Duration kAsyncioRefreshInterval = absl::Milliseconds(200);
  static constexpr size_t kMaxAsyncioRoots = 4096;

  // Finds CPython in `pid` now. NotFound when it runs none (yet: libpython may
  // not be mapped so soon after exec), Unimplemented for versions we do not
  // support.
  static absl::StatusOr<std::unique_ptr<PythonProcess>> Discover(uint32_t pid);

  PythonProcess(PythonInterpreter interpreter, std::unique_ptr<ProcessMemory> memory,
                std::vector<std::pair<uint64_t, uint64_t>> interpreter_ranges, std::string cwd);

  const PythonInterpreter& interpreter() const { return interpreter_; }

  // The same executable run by process `pid`, which the kernel loaded
  // `load_delta` bytes away from this one: every address moves by it. For a
  // run known from its exec record alone (see PythonDiscovery::FromExec);
  // its working directory is not known.
  std::unique_ptr<PythonProcess> RunBy(uint32_t pid, uint64_t load_delta) const;
  // The process's working directory at discovery, to shorten file names.
  const std::string& cwd() const { return cwd_; }

  // True when `address` is in the interpreter's binary (python or libpython).
  bool InInterpreter(uint64_t address) const;
  // True when `address` is in _PyEval_EvalFrameDefault (or its .cold part,
  // where the binary names it): a native frame that runs Python frames.
  bool InEvalLoop(uint64_t address) const;
  void set_eval_ranges(std::vector<std::pair<uint64_t, uint64_t>> ranges) {
    eval_ranges_ = std::move(ranges);
  }
  // What InInterpreter and InEvalLoop test, [start, end) (for snapshots of a
  // process, tests/bench/replay_corpus.h).
  const std::vector<std::pair<uint64_t, uint64_t>>& interpreter_ranges() const {
    return interpreter_ranges_;
  }
  const std::vector<std::pair<uint64_t, uint64_t>>& eval_ranges() const { return eval_ranges_; }

  // The code object the kernel walker saw at `address` with `stamp`.
  absl::StatusOr<std::shared_ptr<const PythonCodeObject>> ReadCode(uint64_t address,
                                                                   uint32_t stamp) {
    return code_reader_.Read(address, stamp);
  }

  // Reads the process's asyncio tasks when the last read is older than
  // kAsyncioRefreshInterval (or, for processes with many tasks, 20 times as
  // long as the last read took), and remembers every task seen by the code
  // object of its coroutine. Errors are counted, never fatal. True when it read.
  bool RefreshAsyncioTasks(absl::Time now);
  // What one read of the tasks found (RefreshAsyncioTasks's second half): the
  // labels of the tasks by the code object of their coroutine, and the
  // suspended ones to charge.
  void TakeAsyncioSnapshot(const AsyncioSnapshot& snapshot);

  // A task suspended at the last read, and the wall time it is charged for.
  struct SuspendedTask {
    uint32_t label = 0;               // AsyncioLabel(label)
    std::vector<PythonFrame> frames;  // its coroutine chain, outermost first
  };
  // The tasks suspended at the last read, and the wall time since the read
  // before it (at most kMaxAwaitCharge, or the spacing the reads chose when
  // that is wider): what each is charged for.
  const std::vector<SuspendedTask>& suspended_tasks() const { return suspended_; }
  absl::Duration await_charge() const { return await_charge_; }
  static constexpr absl::Duration kMaxAwaitCharge = absl::Seconds(1);
  // The task a SuspendedTask names (1-based); null when unknown.
  const AsyncioTaskLabel* AsyncioLabel(uint32_t label) const {
    return label >= 1 && label <= asyncio_labels_.size() ? &asyncio_labels_[label - 1] : nullptr;
  }
  // The tasks seen whose own coroutine runs `code_address` (by name); null
  // when none.
  const absl::btree_map<std::string, AsyncioTaskLabel>* AsyncioTasksRootedAt(
      uint64_t code_address) const;
  size_t asyncio_read_errors() const { return asyncio_read_errors_; }

  // The code object at `address`, from the kernel's copy of its memory; a
  // copy without the line table (too big to copy) names it without lines.
  absl::StatusOr<std::shared_ptr<const PythonCodeObject>> ReadCodeFrom(const ProcessMemory& copy,
                                                                       uint64_t address,
                                                                       uint32_t stamp) const {
    return CodeObjectReader(copy, interpreter_, CodeObjectReader::LineTables::kOptional)
        .Read(address, stamp);
  }

 private:
  // Sets `kept` to what a read found of its task, unless the read's chain of
  // awaiters is broken or empty where `kept` has one.
  static void KeepAsyncioLabel(AsyncioTaskLabel& kept, AsyncioTaskLabel read, bool awaiter_unread);

  PythonInterpreter interpreter_;
  std::unique_ptr<ProcessMemory> memory_;
  CodeObjectReader code_reader_;
  std::vector<std::pair<uint64_t, uint64_t>> interpreter_ranges_;  // [start, end)
  std::vector<std::pair<uint64_t, uint64_t>> eval_ranges_;         // [start, end)
  std::string cwd_;
  absl::Time next_asyncio_refresh_ = absl::InfinitePast();
  absl::Time last_asyncio_read_ = absl::InfinitePast();
  std::vector<SuspendedTask> suspended_;
  absl::Duration await_charge_;
  // Every task seen (by address and name), as SuspendedTask.label - 1.
  std::vector<AsyncioTaskLabel> asyncio_labels_;
  absl::flat_hash_map<std::pair<uint64_t, std::string>, uint32_t> asyncio_label_ids_;
  // The tasks of the last read: only they are charged the time up to the next.
  absl::flat_hash_set<std::pair<uint64_t, std::string>> previous_tasks_;
  absl::flat_hash_map<uint64_t, absl::btree_map<std::string, AsyncioTaskLabel>> asyncio_roots_;
  size_t asyncio_read_errors_ = 0;
};

// The eval loop's code in `binary`, link-time [start, end) ranges:
// _PyEval_EvalFrameDefault, and its cold part, by symbol where the binary
// has one, else as ColdPartsOf finds it.
std::vector<std::pair<uint64_t, uint64_t>> EvalLoopRanges(const ElfFile& binary);

// EvalLoopRanges by the binary's identity. Finding a stripped build's cold
// part reads the whole of .eh_frame_hdr's table and scans the hot part byte
// by byte: once per binary, not once per process that runs it.
class EvalLoopRangeCache {
 public:
  // Past this many binaries it starts afresh (only the scans repeat then).
  static constexpr size_t kMaxBinaries = 1024;

  // The one cache of this process.
  static EvalLoopRangeCache& Shared();

  std::vector<std::pair<uint64_t, uint64_t>> For(const ElfFile& binary);
  uint64_t hits() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<FileIdentity, std::vector<std::pair<uint64_t, uint64_t>>> ranges_
      ABSL_GUARDED_BY(mu_);
  uint64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
};

// The parts GCC split off function `hot` (x86-64) in a binary stripped of
// their symbols: the functions (.eh_frame_hdr's starts) that the hot part's
// conditional jumps enter at their first byte. Debian's PGO builds of 3.14
// and 3.15 keep 1,184 bytes of the eval loop hot and 84 KiB of it in such a
// part, where most Python frames run.
std::vector<std::pair<uint64_t, uint64_t>> ColdPartsOf(const ElfFile& binary, ElfSymbol hot);

// How a Python frame's file is shown: the part after site-packages/ or
// dist-packages/, else after lib/pythonX.Y/, else relative to `cwd` when
// under it, else the base name.
std::string ShortenPythonFilename(absl::string_view path, absl::string_view cwd);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_PYTHON_PROCESS_H_
