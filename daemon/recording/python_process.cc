#include "daemon/recording/python_process.h"

#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/elf/elf_file.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/process_files.h"
#include "daemon/procfs/small_file.h"
#include "daemon/python/asyncio_tasks.h"
#include "daemon/python/object_reader.h"

namespace pystrobe {
namespace {

// The part of `path` after the last "lib/pythonX.Y/" (or pythonX.Y/ under
// any lib directory), or npos.
size_t AfterStdlibPrefix(absl::string_view path) {
  size_t found = absl::string_view::npos;
  for (size_t at = path.find("/python3."); at != absl::string_view::npos;
       at = path.find("/python3.", at + 1)) {
    size_t slash = path.find('/', at + 1);
    if (slash == absl::string_view::npos) break;
    absl::string_view minor = path.substr(at + 9, slash - (at + 9));
    if (!minor.empty() && minor.size() <= 2 &&
        minor.find_first_not_of("0123456789") == absl::string_view::npos) {
      found = slash + 1;
    }
  }
  return found;
}

}  // namespace

bool PythonProcess::RefreshAsyncioTasks(absl::Time now) {
  if (now < next_asyncio_refresh_) return false;
  // The time since the last read, up to kMaxAwaitCharge: a longer gap means
  // the process went unsampled and its tasks unseen. But a gap the reads'
  // own spacing chose (below: slow reads are spaced wider) is charged whole,
  // else every read over 50 ms would lose the time past a second.
  if (last_asyncio_read_ == absl::InfinitePast()) {
    await_charge_ = absl::ZeroDuration();
  } else {
    const absl::Duration spacing = next_asyncio_refresh_ - last_asyncio_read_;
    await_charge_ = std::min(now - last_asyncio_read_, std::max(kMaxAwaitCharge, spacing));
  }
  next_asyncio_refresh_ = now + kAsyncioRefreshInterval;
  suspended_.clear();
  last_asyncio_read_ = now;
  absl::StatusOr<PythonObjectLayout> layout =
      PythonObjectLayoutFor(interpreter_.version, interpreter_.layout);
  if (!layout.ok()) return false;
  PythonObjectReader objects(*memory_, interpreter_, *layout);
  AsyncioTaskReader reader(objects, code_reader_, interpreter_);
  absl::StatusOr<AsyncioSnapshot> snapshot = reader.ReadTasks({});
  // Reading many tasks costs: keep it under about 5% of the wall time.
  next_asyncio_refresh_ = std::max(next_asyncio_refresh_, now + 20 * (absl::Now() - now));
  if (!snapshot.ok()) {
    ++asyncio_read_errors_;
    previous_tasks_.clear();
    return true;
  }
  TakeAsyncioSnapshot(*snapshot);
  return true;
}

void PythonProcess::TakeAsyncioSnapshot(const AsyncioSnapshot& snapshot) {
  asyncio_read_errors_ += snapshot.unreadable;
  absl::flat_hash_set<std::pair<uint64_t, std::string>> seen;
  absl::flat_hash_map<uint64_t, const AsyncioTask*> by_address;
  for (const AsyncioTask& task : snapshot.tasks) by_address[task.address] = &task;
  for (const AsyncioTask& task : snapshot.tasks) {
    if (task.root_code_address == 0) continue;
    if (!asyncio_roots_.contains(task.root_code_address) &&
        asyncio_roots_.size() >= kMaxAsyncioRoots) {
      continue;
    }
    AsyncioTaskLabel label;
    label.name = task.name;
    // The chain of awaiting tasks, outermost first (the first awaiter of each).
    std::vector<const AsyncioTask*> chain;
    bool awaiter_unread = false;
    for (const AsyncioTask* at = &task; !at->awaited_by.empty() && chain.size() < 16;) {
      auto it = by_address.find(at->awaited_by.front());
      awaiter_unread = it == by_address.end();
      if (awaiter_unread || it->second == &task ||
          std::find(chain.begin(), chain.end(), it->second) != chain.end()) {
        break;
      }
      chain.push_back(it->second);
      at = it->second;
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      label.awaiter_frames.insert(label.awaiter_frames.end(), (*it)->stack.begin(),
                                  (*it)->stack.end());
    }
    auto key = std::make_pair(task.address, task.name);
    seen.insert(key);
    // A task is charged the time since the last read only if it existed then.
    if (!task.running && !task.suspended_frames.empty() && previous_tasks_.contains(key)) {
      auto it = asyncio_label_ids_.find(key);
      if (it == asyncio_label_ids_.end() && asyncio_labels_.size() < kMaxAsyncioRoots) {
        asyncio_labels_.push_back(label);
        it = asyncio_label_ids_.emplace(key, asyncio_labels_.size()).first;
      }
      if (it != asyncio_label_ids_.end()) {
        KeepAsyncioLabel(asyncio_labels_[it->second - 1], label, awaiter_unread);
        suspended_.push_back({it->second, task.suspended_frames});
      }
    }
    KeepAsyncioLabel(asyncio_roots_[task.root_code_address][task.name], std::move(label),
                     awaiter_unread);
  }
  previous_tasks_ = std::move(seen);
}

void PythonProcess::KeepAsyncioLabel(AsyncioTaskLabel& kept, AsyncioTaskLabel read,
                                     bool awaiter_unread) {
  // The label stands for every sample of the task, so one read that tears
  // must not decide it: a chain that lost an awaiter (its task unreadable
  // this time) or came out empty (the done callbacks changed under the read)
  // leaves the chain read before. Only a whole chain replaces one. A task
  // whose awaiter really goes away (cancelled, the task left to run on) keeps
  // showing it, which is rarer than a torn read on a busy loop.
  if (!kept.awaiter_frames.empty() && (awaiter_unread || read.awaiter_frames.empty())) return;
  kept = std::move(read);
}

const absl::btree_map<std::string, AsyncioTaskLabel>* PythonProcess::AsyncioTasksRootedAt(
    uint64_t code_address) const {
  auto it = asyncio_roots_.find(code_address);
  return it == asyncio_roots_.end() ? nullptr : &it->second;
}

std::vector<std::pair<uint64_t, uint64_t>> ColdPartsOf(const ElfFile& binary, ElfSymbol hot) {
  const ElfSection* text = binary.FindSection(".text");
  if (text == nullptr || binary.machine() != EM_X86_64 || hot.value < text->address ||
      hot.value + hot.size > text->address + text->size) {
    return {};
  }
  std::vector<uint64_t> starts = binary.FunctionStarts();
  absl::Span<const uint8_t> code =
      binary.Section(".text").subspan(hot.value - text->address, hot.size);
  std::vector<std::pair<uint64_t, uint64_t>> parts;
  // Byte by byte, not instruction by instruction: a false match must also
  // land exactly on a function start outside the hot part, and then must
  // be a conditional jump's target, which a tail call to another function
  // never is in GCC's code.
  for (size_t i = 0; i + 6 <= code.size(); ++i) {
    if (code[i] != 0x0f || code[i + 1] < 0x80 || code[i + 1] > 0x8f) continue;  // jcc rel32
    int32_t displacement;
    std::memcpy(&displacement, code.data() + i + 2, sizeof(displacement));
    uint64_t target = hot.value + i + 6 + static_cast<int64_t>(displacement);
    if (target >= hot.value && target < hot.value + hot.size) continue;
    auto start = std::lower_bound(starts.begin(), starts.end(), target);
    if (start == starts.end() || *start != target || start + 1 == starts.end()) continue;
    std::pair<uint64_t, uint64_t> part = {target, *(start + 1)};
    if (std::find(parts.begin(), parts.end(), part) == parts.end()) parts.push_back(part);
  }
  return parts;
}

std::vector<std::pair<uint64_t, uint64_t>> EvalLoopRanges(const ElfFile& binary) {
  static constexpr absl::string_view kEvalLoop[] = {"_PyEval_EvalFrameDefault",
                                                    "_PyEval_EvalFrameDefault.cold"};
  absl::flat_hash_map<std::string, ElfSymbol> symbols = binary.FindSymbols(kEvalLoop);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, symbol] : symbols) {
    if (symbol.size != 0) ranges.emplace_back(symbol.value, symbol.value + symbol.size);
  }
  auto hot = symbols.find(kEvalLoop[0]);
  if (hot != symbols.end() && !symbols.contains(kEvalLoop[1])) {
    for (const auto& part : ColdPartsOf(binary, hot->second)) ranges.push_back(part);
  }
  return ranges;
}

EvalLoopRangeCache& EvalLoopRangeCache::Shared() {
  static EvalLoopRangeCache* const cache = new EvalLoopRangeCache();
  return *cache;
}

std::vector<std::pair<uint64_t, uint64_t>> EvalLoopRangeCache::For(const ElfFile& binary) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = ranges_.find(binary.identity()); it != ranges_.end()) {
      ++hits_;
      return it->second;
    }
  }
  // Scanned without the lock: two threads may scan the same binary once each.
  std::vector<std::pair<uint64_t, uint64_t>> ranges = EvalLoopRanges(binary);
  absl::MutexLock lock(&mu_);
  if (ranges_.size() >= kMaxBinaries) ranges_.clear();
  ranges_.try_emplace(binary.identity(), ranges);
  return ranges;
}

uint64_t EvalLoopRangeCache::hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}

absl::StatusOr<std::unique_ptr<PythonProcess>> PythonProcess::Discover(uint32_t pid) {
  absl::StatusOr<PythonInterpreter> interpreter = FindPythonInterpreter(static_cast<pid_t>(pid));
  if (!interpreter.ok()) return interpreter.status();

  std::string maps_text = procfs::ReadSmallFile(procfs::PidPath(pid, "maps")).value_or("");
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const MemoryMapping& mapping : ParseProcMaps(maps_text)) {
    if (mapping.path == interpreter->binary_path && absl::StrContains(mapping.perms, "x")) {
      ranges.emplace_back(mapping.start, mapping.end);
    }
  }
  // The eval loop, for putting Python frames where its native frames are.
  std::vector<std::pair<uint64_t, uint64_t>> eval_ranges;
  absl::StatusOr<ElfFile> binary =
      ElfFile::Open(procfs::MappedFilePath(pid, interpreter->binary_path));
  if (binary.ok()) {
    for (auto [start, end] : EvalLoopRangeCache::Shared().For(*binary)) {
      eval_ranges.emplace_back(start + interpreter->load_bias, end + interpreter->load_bias);
    }
  }
  std::string cwd = procfs::ReadLink(procfs::PidPath(pid, "cwd")).value_or("");
  auto process = std::make_unique<PythonProcess>(std::move(*interpreter),
                                                 std::make_unique<RemoteProcessMemory>(pid),
                                                 std::move(ranges), std::move(cwd));
  process->set_eval_ranges(std::move(eval_ranges));
  return process;
}

std::unique_ptr<PythonProcess> PythonProcess::RunBy(uint32_t pid, uint64_t load_delta) const {
  // Modulo 2^64: a run loaded below this one moves by a "negative" delta.
  auto moved = [load_delta](uint64_t address) { return address ? address + load_delta : 0; };
  auto moved_ranges = [&](std::vector<std::pair<uint64_t, uint64_t>> ranges) {
    for (auto& [start, end] : ranges) {
      start = moved(start);
      end = moved(end);
    }
    return ranges;
  };
  PythonInterpreter interpreter = interpreter_;
  interpreter.pid = static_cast<pid_t>(pid);
  interpreter.load_bias += load_delta;
  interpreter.runtime_address = moved(interpreter.runtime_address);
  interpreter.code_type_address = moved(interpreter.code_type_address);
  interpreter.unicode_type_address = moved(interpreter.unicode_type_address);
  interpreter.bytes_type_address = moved(interpreter.bytes_type_address);
  auto run = std::make_unique<PythonProcess>(std::move(interpreter),
                                             std::make_unique<RemoteProcessMemory>(pid),
                                             moved_ranges(interpreter_ranges_), "");
  run->set_eval_ranges(moved_ranges(eval_ranges_));
  return run;
}

PythonProcess::PythonProcess(PythonInterpreter interpreter, std::unique_ptr<ProcessMemory> memory,
                             std::vector<std::pair<uint64_t, uint64_t>> interpreter_ranges,
                             std::string cwd)
    : interpreter_(std::move(interpreter)),
      memory_(std::move(memory)),
      code_reader_(*memory_, interpreter_),
      interpreter_ranges_(std::move(interpreter_ranges)),
      cwd_(std::move(cwd)) {}

bool PythonProcess::InEvalLoop(uint64_t address) const {
  for (const auto& [start, end] : eval_ranges_) {
    if (address >= start && address < end) return true;
  }
  return false;
}

bool PythonProcess::InInterpreter(uint64_t address) const {
  for (const auto& [start, end] : interpreter_ranges_) {
    if (address >= start && address < end) return true;
  }
  return false;
}

std::string ShortenPythonFilename(absl::string_view path, absl::string_view cwd) {
  // Relative already ("examples/x.py"), or not a file ("<string>", "<frozen ...>").
  if (!absl::StartsWith(path, "/")) return std::string(path);
  for (absl::string_view packages : {"/site-packages/", "/dist-packages/"}) {
    size_t at = path.rfind(packages);
    if (at != absl::string_view::npos) return std::string(path.substr(at + packages.size()));
  }
  if (size_t after = AfterStdlibPrefix(path); after != absl::string_view::npos) {
    return std::string(path.substr(after));
  }
  if (!cwd.empty() && cwd != "/" && absl::StartsWith(path, cwd) && path.size() > cwd.size() &&
      path[cwd.size()] == '/') {
    return std::string(path.substr(cwd.size() + 1));
  }
  size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
}

}  // namespace pystrobe
