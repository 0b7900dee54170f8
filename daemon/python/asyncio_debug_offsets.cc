#include "daemon/python/asyncio_debug_offsets.h"

#include <sys/stat.h>

#include <cstring>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/elf/elf_file.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/small_file.h"

namespace pystrobe {
namespace {

constexpr char kSectionName[] = ".AsyncioDebug";
// Far above 3.14's (TaskObj 168 bytes, PyInterpreterState 220 KiB,
// _PyThreadStateImpl under 1 KiB), far below anything a stray word would say.
constexpr uint64_t kMaxTaskSize = 4096;
constexpr uint64_t kMaxStateSize = 16u << 20;

uint64_t Word(absl::Span<const uint8_t> bytes, size_t index) {
  uint64_t value;
  std::memcpy(&value, bytes.data() + 8 * index, sizeof(value));
  return value;
}

// The identity of a file another process maps, without opening it.
std::optional<FileIdentity> Identity(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileIdentity{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                      static_cast<uint64_t>(st.st_size),
                      int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
}

// What each binary's section said, by the binary's identity: nullopt for a
// binary without one. Bounded like ElfSymbolCache.
class SectionCache {
 public:
  static constexpr size_t kMaxBinaries = 1024;

  static SectionCache& Shared() {
    static SectionCache* cache = new SectionCache;
    return *cache;
  }

  absl::StatusOr<std::optional<AsyncioDebugOffsets>> Get(const std::string& path,
                                                         const std::string& fallback_path) {
    const std::optional<FileIdentity> id = Identity(path);
    if (id) {
      absl::MutexLock lock(&mu_);
      if (auto it = found_.find(*id); it != found_.end()) return it->second;
    }
    absl::StatusOr<ElfFile> elf = ElfFile::Open(path);
    if (!elf.ok()) elf = ElfFile::Open(fallback_path);
    if (!elf.ok()) return elf.status();
    absl::StatusOr<std::optional<AsyncioDebugOffsets>> result = std::nullopt;
    if (elf->FindSection(kSectionName) != nullptr) {
      const absl::Span<const uint8_t> bytes = elf->Section(kSectionName);
      absl::StatusOr<AsyncioDebugOffsets> parsed = ParseAsyncioDebugOffsets(bytes);
      if (parsed.ok()) {
        result = *parsed;
      } else {
        result = absl::DataLossError(
            absl::StrCat(path, ": ", kSectionName, ": ", parsed.status().message()));
      }
    }
    absl::MutexLock lock(&mu_);
    if (found_.size() >= kMaxBinaries) found_.clear();
    found_.insert_or_assign(elf->identity(), result);
    return result;
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<FileIdentity, absl::StatusOr<std::optional<AsyncioDebugOffsets>>> found_
      ABSL_GUARDED_BY(mu_);
};

// "_asyncio.cpython-314-x86_64-linux-gnu.so", "_asyncio.so", "_asyncio_d.so".
bool IsAsyncioModule(absl::string_view path) {
  const size_t slash = path.rfind('/');
  const absl::string_view name = slash == absl::string_view::npos ? path : path.substr(slash + 1);
  return absl::StartsWith(name, "_asyncio") && absl::StrContains(name, ".so");
}

}  // namespace

absl::StatusOr<AsyncioDebugOffsets> ParseAsyncioDebugOffsets(absl::Span<const uint8_t> bytes) {
  if (bytes.size() < kAsyncioDebugOffsetsSize) {
    return absl::DataLossError(absl::StrCat("asyncio debug offsets of ", bytes.size(),
                                            " bytes, expected ", kAsyncioDebugOffsetsSize));
  }
  AsyncioDebugOffsets o;
  uint64_t* const fields[] = {
      &o.task.size,
      &o.task.task_name,
      &o.task.task_awaited_by,
      &o.task.task_is_task,
      &o.task.task_awaited_by_is_set,
      &o.task.task_coro,
      &o.task.task_node,
      &o.interpreter.size,
      &o.interpreter.asyncio_tasks_head,
      &o.thread.size,
      &o.thread.asyncio_running_loop,
      &o.thread.asyncio_running_task,
      &o.thread.asyncio_tasks_head,
  };
  for (size_t i = 0; i < std::size(fields); ++i) *fields[i] = Word(bytes, i);
  struct Check {
    const char* name;
    uint64_t offset, width, size;
  };
  // A task starts with a PyObject header (16 bytes): nothing of ours is in it.
  const Check checks[] = {
      {"asyncio_task_object.task_name", o.task.task_name, 8, o.task.size},
      {"asyncio_task_object.task_awaited_by", o.task.task_awaited_by, 8, o.task.size},
      {"asyncio_task_object.task_is_task", o.task.task_is_task, 1, o.task.size},
      {"asyncio_task_object.task_awaited_by_is_set", o.task.task_awaited_by_is_set, 1, o.task.size},
      {"asyncio_task_object.task_coro", o.task.task_coro, 8, o.task.size},
      {"asyncio_task_object.task_node", o.task.task_node, 16, o.task.size},
      {"asyncio_interpreter_state.asyncio_tasks_head", o.interpreter.asyncio_tasks_head, 16,
       o.interpreter.size},
      {"asyncio_thread_state.asyncio_running_loop", o.thread.asyncio_running_loop, 8,
       o.thread.size},
      {"asyncio_thread_state.asyncio_running_task", o.thread.asyncio_running_task, 8,
       o.thread.size},
      {"asyncio_thread_state.asyncio_tasks_head", o.thread.asyncio_tasks_head, 16, o.thread.size},
  };
  if (o.task.size < 16 || o.task.size > kMaxTaskSize) {
    return absl::DataLossError(absl::StrCat("task size ", o.task.size, " is implausible"));
  }
  if (o.interpreter.size == 0 || o.interpreter.size > kMaxStateSize || o.thread.size == 0 ||
      o.thread.size > kMaxStateSize) {
    return absl::DataLossError(absl::StrCat("interpreter or thread state size (",
                                            o.interpreter.size, ", ", o.thread.size,
                                            ") is implausible"));
  }
  for (const Check& check : checks) {
    const bool in_task = absl::StartsWith(check.name, "asyncio_task_object.");
    if (check.offset < (in_task ? 16u : 0u) || check.offset > check.size ||
        check.width > check.size - check.offset) {
      return absl::DataLossError(absl::StrCat(
          check.name, " = ", check.offset, " is outside its structure of ", check.size, " bytes"));
    }
  }
  return o;
}

std::vector<std::pair<std::string, uint64_t>> AsyncioDebugOffsetsFields(
    const AsyncioDebugOffsets& o) {
  return {
      {"asyncio_task_object.size", o.task.size},
      {"asyncio_task_object.task_name", o.task.task_name},
      {"asyncio_task_object.task_awaited_by", o.task.task_awaited_by},
      {"asyncio_task_object.task_is_task", o.task.task_is_task},
      {"asyncio_task_object.task_awaited_by_is_set", o.task.task_awaited_by_is_set},
      {"asyncio_task_object.task_coro", o.task.task_coro},
      {"asyncio_task_object.task_node", o.task.task_node},
      {"asyncio_interpreter_state.size", o.interpreter.size},
      {"asyncio_interpreter_state.asyncio_tasks_head", o.interpreter.asyncio_tasks_head},
      {"asyncio_thread_state.size", o.thread.size},
      {"asyncio_thread_state.asyncio_running_loop", o.thread.asyncio_running_loop},
      {"asyncio_thread_state.asyncio_running_task", o.thread.asyncio_running_task},
      {"asyncio_thread_state.asyncio_tasks_head", o.thread.asyncio_tasks_head},
  };
}

absl::StatusOr<std::optional<AsyncioDebugOffsets>> FindAsyncioDebugOffsets(
    const PythonInterpreter& interpreter) {
  // The section is new in 3.14: older binaries are not worth opening.
  if (interpreter.version.major != 3 || interpreter.version.minor < 14) return std::nullopt;
  absl::StatusOr<std::string> text =
      procfs::ReadSmallFile(procfs::PidPath(interpreter.pid, "maps"));
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat("process ", interpreter.pid, " exited"));
  }
  absl::flat_hash_set<std::string> seen;
  absl::Status unopened = absl::OkStatus();
  for (const MemoryMapping& mapping : ParseProcMaps(*text)) {
    if (mapping.path.empty() || mapping.path[0] != '/') continue;
    if (mapping.path != interpreter.binary_path && !IsAsyncioModule(mapping.path)) continue;
    if (!seen.insert(mapping.path).second) continue;
    absl::StatusOr<std::optional<AsyncioDebugOffsets>> found = SectionCache::Shared().Get(
        procfs::RootPath(interpreter.pid, mapping.path),
        procfs::MapFilesPath(interpreter.pid, mapping.start, mapping.end));
    if (!found.ok() && !absl::IsDataLoss(found.status())) {
      unopened = found.status();  // another candidate may still have it
      continue;
    }
    if (!found.ok() || found->has_value()) return found;
  }
  // A binary we could not open may have held it: say so rather than read
  // the tasks as if there were none.
  if (!unopened.ok()) return unopened;
  return std::nullopt;
}

}  // namespace pystrobe
