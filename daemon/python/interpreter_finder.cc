#include "daemon/python/interpreter_finder.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/elf/elf_file.h"
#include "daemon/procfs/maps.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/process_files.h"
#include "daemon/procfs/small_file.h"
#include "daemon/python/elf_symbol_cache.h"
#include "daemon/python/process_memory.h"

namespace pystrobe {
namespace {

constexpr uint64_t kPageMask = ~uint64_t{0xfff};

constexpr absl::string_view kRuntimeSymbol = "_PyRuntime";
constexpr absl::string_view kVersionSymbol = "Py_Version";
constexpr absl::string_view kCodeTypeSymbol = "PyCode_Type";
constexpr absl::string_view kUnicodeTypeSymbol = "PyUnicode_Type";
constexpr absl::string_view kBytesTypeSymbol = "PyBytes_Type";
// 2.7's bytes (and names) are PyString objects.
constexpr absl::string_view kStringTypeSymbol = "PyString_Type";
// 2.7 and 3.6 have no _PyRuntime: the thread states hang off a file-scope
// interp_head (in .symtab, or read out of PyInterpreterState_Head's code when
// the binary is stripped), and _PyThreadState_Current (exported) is the
// GIL's holder.
constexpr absl::string_view kThreadStateCurrentSymbol = "_PyThreadState_Current";
constexpr absl::string_view kInterpHeadSymbol = "interp_head";
constexpr absl::string_view kInterpHeadFunctionSymbol = "PyInterpreterState_Head";
// What a thread waiting for the GIL sleeps on: 3.6's static gil_cond and
// gil_mutex (ceval_gil.h), 2.7's interpreter_lock (ceval.c, a sem_t *).
constexpr absl::string_view kGilCondSymbol = "gil_cond";
constexpr absl::string_view kGilMutexSymbol = "gil_mutex";
constexpr absl::string_view kInterpreterLockSymbol = "interpreter_lock";
// sizeof(sem_t) with glibc on x86_64.
constexpr uint64_t kSemaphoreSize = 32;

absl::string_view BaseName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

// A binary worth opening: the executable itself, or a library named libpython*.
bool IsCandidate(absl::string_view path, absl::string_view exe) {
  if (path.empty() || path.front() != '/') return false;
  return path == exe || absl::StartsWith(BaseName(path), "libpython");
}

// Opens the binary as the target sees it: through its root (containers), then
// through map_files (deleted or replaced files).
absl::StatusOr<ElfFile> OpenTargetBinary(pid_t pid, const MemoryMapping& mapping) {
  absl::StatusOr<ElfFile> file = ElfFile::Open(procfs::MappedFilePath(pid, mapping.path));
  if (file.ok()) return file;
  absl::StatusOr<ElfFile> mapped =
      ElfFile::Open(procfs::MapFilesPath(pid, mapping.start, mapping.end));
  if (mapped.ok()) return mapped;
  return file.status();
}

// Load bias of `path` from the mapping of its first loadable segment.
std::optional<uint64_t> LoadBias(const std::vector<MemoryMapping>& maps, absl::string_view path,
                                 const ElfFile& elf) {
  for (const MemoryMapping& mapping : maps) {
    if (mapping.path != path) continue;
    for (const ElfLoadSegment& segment : elf.load_segments()) {
      if ((segment.offset & kPageMask) == mapping.offset) {
        return mapping.start - (segment.vaddr & kPageMask);
      }
    }
  }
  return std::nullopt;
}

// Whether the bytes at `address` (in `path`, loaded at `bias`) are the ones
// the file puts there. The dynamic loader maps a library whole from file
// offset 0 first, then each segment over that at its own offset: until the
// segment holding `address` is in place, the bytes there come from another part
// of the file (a data segment sits a page or more off its file offset). Past
// a segment's file part, anonymous memory (.bss) is in place once no mapping of
// the file covers it.
bool MappedFromItsSegment(const std::vector<MemoryMapping>& maps, absl::string_view path,
                          const ElfFile& elf, uint64_t bias, uint64_t address) {
  const uint64_t link_address = address - bias;
  const auto segment = std::find_if(
      elf.load_segments().begin(), elf.load_segments().end(), [&](const ElfLoadSegment& s) {
        return link_address >= s.vaddr && link_address - s.vaddr < s.mem_size;
      });
  if (segment == elf.load_segments().end()) return true;  // not loaded from the file at all
  const uint64_t file_minus_memory = (segment->vaddr & kPageMask) - (segment->offset & kPageMask);
  for (const MemoryMapping& mapping : maps) {
    if (address < mapping.start || address >= mapping.end) continue;
    return mapping.path != path || mapping.start - mapping.offset == bias + file_minus_memory;
  }
  return false;  // not mapped yet
}

// Finds PY_VERSION ("3.9.18") in read-only data: a NUL-terminated string
// "<major>.<minor>.<micro>" with an optional release suffix ("3.10.0rc1",
// "3.9.18+"). The linker may merge it into the tail of a longer string (a path
// ending in ".../versions/3.8.18"), so it need only follow a byte that is not a
// digit or a dot. With minor < 0 any supported minor of `major` is accepted,
// but only one may appear.
std::optional<PythonVersion> ScanVersionString(absl::Span<const uint8_t> rodata, int major,
                                               int minor) {
  std::optional<PythonVersion> found;
  absl::flat_hash_set<int> minors;
  const absl::string_view data(reinterpret_cast<const char*>(rodata.data()), rodata.size());
  const std::string prefix = absl::StrCat(major, ".");
  for (size_t at = data.find(prefix, 1); at != absl::string_view::npos;
       at = data.find(prefix, at + 1)) {
    const char before = data[at - 1];
    if (before == '.' || std::isdigit(static_cast<unsigned char>(before))) continue;
    const size_t end = data.find('\0', at);
    if (end == absl::string_view::npos || end - at > 15) continue;
    absl::string_view text = data.substr(at, end - at);
    std::vector<absl::string_view> parts = absl::StrSplit(text, '.');
    if (parts.size() != 3) continue;
    int parsed_minor = 0;
    if (!absl::SimpleAtoi(parts[1], &parsed_minor)) continue;
    size_t digits = 0;
    while (digits < parts[2].size() && std::isdigit(static_cast<unsigned char>(parts[2][digits]))) {
      ++digits;
    }
    int micro = 0;
    if (digits == 0 || !absl::SimpleAtoi(parts[2].substr(0, digits), &micro)) continue;
    absl::string_view suffix = parts[2].substr(digits);
    if (!suffix.empty() && suffix != "+" && !absl::StartsWith(suffix, "a") &&
        !absl::StartsWith(suffix, "b") && !absl::StartsWith(suffix, "rc")) {
      continue;
    }
    if (minor >= 0 ? parsed_minor != minor
                   : !IsSupportedPythonVersion(PythonVersion{major, parsed_minor, micro})) {
      continue;
    }
    minors.insert(parsed_minor);
    if (!found) found = PythonVersion{major, parsed_minor, micro};
  }
  if (minors.size() > 1) return std::nullopt;
  return found;
}

absl::Status WithContext(const absl::Status& status, absl::string_view context) {
  return absl::Status(status.code(), absl::StrCat(std::string(context), ": ", status.message()));
}

// The global that `function` returns when its code is exactly
// `mov disp32(%rip), %rax; ret` (PyInterpreterState_Head: return interp_head),
// or 0: how interp_head is found in a binary without .symtab.
uint64_t GlobalReturnedBy(const ProcessMemory& memory, uint64_t function) {
  uint8_t code[8];
  if (function == 0 || !memory.Read(function, code, sizeof(code)).ok()) return 0;
  if (code[0] != 0x48 || code[1] != 0x8b || code[2] != 0x05 || code[7] != 0xc3) return 0;
  int32_t displacement;
  std::memcpy(&displacement, code + 3, sizeof(displacement));
  return function + 7 + static_cast<int64_t>(displacement);
}

// 2.7's and 3.6's globals in process memory, from the binary's symbols.
PythonGlobals FindPythonGlobals(const PythonVersion& version, const ProcessMemory& memory,
                                const absl::flat_hash_map<std::string, ElfSymbol>& symbols,
                                uint64_t bias) {
  auto symbol = [&](absl::string_view name) -> const ElfSymbol* {
    auto it = symbols.find(name);
    return it == symbols.end() ? nullptr : &it->second;
  };
  PythonGlobals globals;
  if (const ElfSymbol* head = symbol(kInterpHeadSymbol)) {
    globals.interp_head = head->value + bias;
  } else if (const ElfSymbol* function = symbol(kInterpHeadFunctionSymbol)) {
    globals.interp_head = GlobalReturnedBy(memory, function->value + bias);
  }
  if (const ElfSymbol* current = symbol(kThreadStateCurrentSymbol)) {
    globals.thread_state_current = current->value + bias;
  }
  if (version.major == 2) {
    if (const ElfSymbol* lock = symbol(kInterpreterLockSymbol)) {
      globals.gil_wait_start = lock->value + bias;
      globals.gil_wait_end = globals.gil_wait_start + kSemaphoreSize;
      globals.gil_wait_indirect = true;
    }
  } else if (const ElfSymbol* cond = symbol(kGilCondSymbol)) {
    globals.gil_wait_start = cond->value + bias;
    globals.gil_wait_end = globals.gil_wait_start + cond->size;
    // The mutex too, when the linker put the two side by side.
    if (const ElfSymbol* mutex = symbol(kGilMutexSymbol)) {
      const uint64_t start = std::min(cond->value, mutex->value) + bias;
      const uint64_t end = std::max(cond->value + cond->size, mutex->value + mutex->size) + bias;
      if (end - start <= 0xff) {
        globals.gil_wait_start = start;
        globals.gil_wait_end = end;
      }
    }
  }
  return globals;
}

}  // namespace

pystrobe_python_process PythonInterpreter::ToBpf() const {
  pystrobe_python_process process = {};
  process.runtime_addr = runtime_address;
  process.code_type_addr = code_type_address;
  process.offsets = layout.abi;
  return process;
}

std::vector<MemoryMapping> ParseProcMaps(absl::string_view text) {
  std::vector<MemoryMapping> maps;
  for (const procfs::MapsLine& line : procfs::ParseMaps(text)) {
    maps.push_back(MemoryMapping{.start = line.start,
                                 .end = line.end,
                                 .offset = line.offset,
                                 .perms = std::string(line.perms),
                                 .path = std::string(line.path)});
  }
  return maps;
}

PythonVersion PythonVersionFromFileName(absl::string_view path) {
  absl::string_view name = BaseName(path);
  for (size_t at = name.find("python"); at != absl::string_view::npos;
       at = name.find("python", at + 1)) {
    absl::string_view rest = name.substr(at + 6);
    if (rest.size() < 3 || !std::isdigit(static_cast<unsigned char>(rest[0])) || rest[1] != '.') {
      continue;
    }
    size_t digits = 2;
    while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) {
      ++digits;
    }
    int minor = 0;
    if (digits == 2 || !absl::SimpleAtoi(rest.substr(2, digits - 2), &minor)) continue;
    return PythonVersion{rest[0] - '0', minor, -1};
  }
  return PythonVersion{};
}

absl::StatusOr<PythonInterpreter> FindPythonInterpreter(pid_t pid) {
  const std::string maps_path = procfs::PidPath(pid, "maps");
  absl::StatusOr<std::string> maps_text = procfs::ReadSmallFile(maps_path);
  if (!maps_text.ok()) {
    return absl::NotFoundError(absl::StrCat("process ", pid, " exited (no ", maps_path, ")"));
  }
  const std::vector<MemoryMapping> maps = ParseProcMaps(*maps_text);
  const std::string exe = procfs::ReadLink(procfs::PidPath(pid, "exe")).value_or("");

  PythonInterpreter interpreter;
  interpreter.pid = pid;
  std::optional<ElfFile> elf;
  absl::flat_hash_map<std::string, ElfSymbol> symbols;
  PythonVersion unsupported_hint;  // a python-named binary we cannot read (3.5, 2.6)
  std::string unsupported_path;
  absl::Status last_open_error = absl::OkStatus();
  absl::flat_hash_set<std::string> seen;
  for (const MemoryMapping& mapping : maps) {
    if (!IsCandidate(mapping.path, exe) || !seen.insert(mapping.path).second) continue;
    absl::StatusOr<ElfFile> file = OpenTargetBinary(pid, mapping);
    if (!file.ok()) {
      last_open_error = file.status();
      continue;
    }
    static constexpr absl::string_view kWanted[] = {kRuntimeSymbol,
                                                    kVersionSymbol,
                                                    kCodeTypeSymbol,
                                                    kUnicodeTypeSymbol,
                                                    kBytesTypeSymbol,
                                                    kStringTypeSymbol,
                                                    kThreadStateCurrentSymbol,
                                                    kInterpHeadSymbol,
                                                    kInterpHeadFunctionSymbol,
                                                    kGilCondSymbol,
                                                    kGilMutexSymbol,
                                                    kInterpreterLockSymbol};
    absl::flat_hash_map<std::string, ElfSymbol> found =
        ElfSymbolCache::Shared().FindSymbols(*file, kWanted);
    // 3.7+ has _PyRuntime; 2.7 and 3.6 export _PyThreadState_Current instead.
    if (found.contains(kRuntimeSymbol) ||
        (found.contains(kThreadStateCurrentSymbol) && found.contains(kCodeTypeSymbol))) {
      interpreter.binary_path = mapping.path;
      interpreter.in_executable = mapping.path == exe;
      elf = std::move(*file);
      symbols = std::move(found);
      break;
    }
    const PythonVersion hint = PythonVersionFromFileName(mapping.path);
    if (hint.major != 0 && found.contains(kCodeTypeSymbol)) {
      unsupported_hint = hint;
      unsupported_path = mapping.path;
    }
  }
  if (!elf) {
    if (unsupported_hint.major != 0) {
      return absl::UnimplementedError(absl::StrCat(
          "process ", pid, " runs CPython ", unsupported_hint.ToString(), " (", unsupported_path,
          "), which pystrobe does not support (", kSupportedPythonVersions, " are)"));
    }
    if (!last_open_error.ok() && absl::IsPermissionDenied(last_open_error)) {
      return WithContext(last_open_error, absl::StrCat("process ", pid));
    }
    return absl::NotFoundError(absl::StrCat("process ", pid, " runs no CPython"));
  }
  const bool has_runtime = symbols.contains(kRuntimeSymbol);

  const std::optional<uint64_t> bias = LoadBias(maps, interpreter.binary_path, *elf);
  if (!bias) {
    return absl::NotFoundError(absl::StrCat("process ", pid, ": cannot find the load address of ",
                                            interpreter.binary_path));
  }
  interpreter.load_bias = *bias;
  const std::string context = absl::StrCat("process ", pid, " (", interpreter.binary_path, ")");
  // Caught while the dynamic loader maps it: read nothing yet, as what is
  // there would be taken for another version or build (a free-threaded 3.14
  // for one with a GIL). The next look finds it whole.
  for (const auto& [name, symbol] : symbols) {
    if (!MappedFromItsSegment(maps, interpreter.binary_path, *elf, *bias, symbol.value + *bias)) {
      return absl::UnavailableError(
          absl::StrCat(context, ": still being loaded (", name, " is not mapped yet)"));
    }
  }
  auto address_of = [&](absl::string_view name) -> uint64_t {
    auto it = symbols.find(name);
    return it == symbols.end() ? 0 : it->second.value + *bias;
  };
  interpreter.runtime_address = address_of(kRuntimeSymbol);
  interpreter.code_type_address = address_of(kCodeTypeSymbol);
  interpreter.unicode_type_address = address_of(kUnicodeTypeSymbol);

  // The version: the interpreter's own _Py_DebugOffsets (3.13+), Py_Version
  // (3.11+), then PY_VERSION in .rodata and the file name.
  RemoteProcessMemory memory(pid);
  absl::StatusOr<uint64_t> debug_version = absl::NotFoundError("no _PyRuntime");
  if (has_runtime) {
    uint8_t head[16];
    if (absl::Status status = memory.Read(interpreter.runtime_address, head, sizeof(head));
        !status.ok()) {
      return WithContext(status, absl::StrCat(context, ": reading _PyRuntime"));
    }
    debug_version = PythonDebugOffsetsVersion(head);
  }
  const PythonVersion name_version = PythonVersionFromFileName(interpreter.binary_path);
  const absl::Span<const uint8_t> rodata = elf->Section(".rodata");
  std::optional<PythonVersion> scanned;
  if (name_version.major != 0) {
    scanned = ScanVersionString(rodata, name_version.major, name_version.minor);
  } else {
    scanned = ScanVersionString(rodata, 3, -1);
    if (!scanned && !has_runtime) scanned = ScanVersionString(rodata, 2, -1);
  }
  if (debug_version.ok()) {
    interpreter.version = PythonVersionFromHex(*debug_version);
  } else if (const uint64_t version_address = address_of(kVersionSymbol); version_address != 0) {
    absl::StatusOr<uint32_t> hex = memory.ReadValue<uint32_t>(version_address);
    if (!hex.ok()) return WithContext(hex.status(), absl::StrCat(context, ": reading Py_Version"));
    interpreter.version = PythonVersionFromHex(*hex);
  } else if (scanned) {
    interpreter.version = *scanned;
  } else if (name_version.major != 0) {
    interpreter.version = name_version;
  } else {
    return absl::NotFoundError(
        absl::StrCat(context, ": looks like CPython but has no version to be found"));
  }
  if (!IsSupportedPythonVersion(interpreter.version)) {
    return absl::UnimplementedError(
        absl::StrCat("process ", pid, " runs CPython ", interpreter.version.ToString(), " (",
                     interpreter.binary_path, "), which pystrobe does not support (",
                     kSupportedPythonVersions, " are)"));
  }
  // Every 3.13+ opens _PyRuntime with its _Py_DebugOffsets (statically
  // initialised): without them, what was read there is not the runtime.
  if (has_runtime && !debug_version.ok() && interpreter.version.major == 3 &&
      interpreter.version.minor >= 13) {
    return absl::UnavailableError(absl::StrCat(context, ": CPython ",
                                               interpreter.version.ToString(),
                                               " without _Py_DebugOffsets at _PyRuntime"));
  }
  if (PythonVersionHasGlobalRoots(interpreter.version) == has_runtime) {
    return absl::NotFoundError(absl::StrCat(context, ": CPython ", interpreter.version.ToString(),
                                            has_runtime ? " with" : " without", " _PyRuntime"));
  }
  interpreter.bytes_type_address =
      address_of(interpreter.version.major == 2 ? kStringTypeSymbol : kBytesTypeSymbol);
  if (interpreter.code_type_address == 0 || interpreter.unicode_type_address == 0 ||
      interpreter.bytes_type_address == 0) {
    return absl::NotFoundError(
        absl::StrCat(context, ": PyCode_Type, PyUnicode_Type or PyBytes_Type not in its symbols"));
  }

  if (!has_runtime) {
    absl::StatusOr<PythonLayout> layout = PythonLayoutForVersion(interpreter.version);
    if (!layout.ok()) return WithContext(layout.status(), context);
    interpreter.layout = *layout;
    absl::StatusOr<uint64_t> base = PlacePythonGlobals(
        FindPythonGlobals(interpreter.version, memory, symbols, *bias), interpreter.layout);
    if (!base.ok()) return WithContext(base.status(), context);
    interpreter.runtime_address = *base;
  } else if (debug_version.ok()) {
    absl::StatusOr<size_t> blob_size = PythonDebugOffsetsSize(interpreter.version);
    if (!blob_size.ok()) return WithContext(blob_size.status(), context);
    std::vector<uint8_t> blob(*blob_size);
    if (absl::Status status = memory.Read(interpreter.runtime_address, blob.data(), blob.size());
        !status.ok()) {
      return WithContext(status, absl::StrCat(context, ": reading _Py_DebugOffsets"));
    }
    absl::StatusOr<PythonLayout> layout = PythonLayoutFromDebugOffsets(blob);
    if (!layout.ok()) return WithContext(layout.status(), context);
    interpreter.layout = *layout;
    interpreter.layout_from_debug_offsets = true;
  } else {
    absl::StatusOr<PythonLayout> layout = PythonLayoutForVersion(interpreter.version);
    if (!layout.ok()) return WithContext(layout.status(), context);
    interpreter.layout = *layout;
  }
  return interpreter;
}

}  // namespace pystrobe
