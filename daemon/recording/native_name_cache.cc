#include "daemon/recording/native_name_cache.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/procfs/maps.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/small_file.h"

namespace pystrobe {
namespace {

constexpr size_t kMaxPerfMapBytes = size_t{256} << 20;

}  // namespace

const NativeFrameName& NativeNameCache::Name(const ProcessImage& image, uint64_t address) {
  auto [it, inserted] = names_[image.id].try_emplace(address);
  NativeFrameName& frame = it->second;
  if (!inserted) {
    // An address no mapping held may be in a library loaded since (a dlopen
    // right after the symbolizer's last look): ask again; the symbolizer
    // re-reads the process's maps at most once a second.
    if (frame.module == nullptr && frame.name == "[unknown]" && image.symbols != nullptr) {
      NativeFrameSymbol symbol = image.symbols->Resolve(address);
      if (symbol.location.has_value()) {
        frame.name = std::move(symbol.name);
        frame.module = Intern(*symbol.location);
        frame.file_offset = symbol.location->file_offset;
      } else if (std::string jit = JitName(image, address); !jit.empty()) {
        frame.name = std::move(jit);
      }
    } else if (frame.module == nullptr && frame.name == "[jit]") {
      // A JIT writes its perf map as it goes (and buffers it): the name may
      // come later. JitName reads the map again at most once a second.
      if (std::string jit = JitName(image, address); !jit.empty()) frame.name = std::move(jit);
    }
    return frame;
  }
  ++size_;
  // The native walk's marker where a frame could not be stepped past
  // (FrameLookupAddress may have taken one off it).
  if (address >= PYSTROBE_UNWIND_FRAME_UNKNOWN - 1) {
    frame.name = "[unknown]";
    return frame;
  }
  if (image.symbols == nullptr) {
    frame.name = absl::StrFormat("[unknown] 0x%x", address);
    return frame;
  }
  NativeFrameSymbol symbol = image.symbols->Resolve(address);
  frame.name = std::move(symbol.name);
  if (symbol.location.has_value()) {
    frame.module = Intern(*symbol.location);
    frame.file_offset = symbol.location->file_offset;
  } else if (std::string jit = JitName(image, address); !jit.empty()) {
    frame.name = std::move(jit);
  }
  return frame;
}

std::shared_ptr<const NativeModule> NativeNameCache::Intern(const NativeCodeLocation& location) {
  // NUL cannot occur in a path or in hex; the segments are fixed-size.
  std::string key(location.path);
  key.push_back('\0');
  key.append(location.build_id.data(), location.build_id.size());
  key.push_back('\0');
  for (const CodeSegment& segment : location.code_segments) {
    key.append(reinterpret_cast<const char*>(&segment), sizeof(segment));
  }
  std::weak_ptr<const NativeModule>& entry = modules_[key];
  if (std::shared_ptr<const NativeModule> module = entry.lock()) return module;
  auto module = std::make_shared<NativeModule>();
  module->path = std::string(location.path);
  module->build_id = std::string(location.build_id);
  for (const CodeSegment& segment : location.code_segments) {
    module->code_segments.push_back({segment.vaddr, segment.size, segment.file_offset});
  }
  entry = module;
  if (modules_.size() >= 2 * modules_after_sweep_ + 16) {
    absl::erase_if(modules_, [](const auto& kv) { return kv.second.expired(); });
    modules_after_sweep_ = modules_.size();
  }
  return module;
}

std::string NativeNameCache::JitName(const ProcessImage& image, uint64_t address) {
  if (image.exited || image.pid == 0) return "";
  JitInfo& jit = jit_[image.id];
  auto lookup = [&]() -> std::string {
    if (const std::string* name = jit.perf_map.Find(address)) return *name;
    for (const auto& [start, end] : jit.anonymous_code) {
      if (address >= start && address < end) return "[jit]";
    }
    return "";
  };
  std::string name = lookup();
  if ((!name.empty() && name != "[jit]") || absl::Now() - jit.read_at < absl::Seconds(1)) {
    return name;
  }
  jit.read_at = absl::Now();
  // The map is written by the process under the pid it sees, in its /tmp.
  uint32_t own_pid = image.pid_in_namespace ? image.pid_in_namespace : image.pid;
  // A perf map only grows, a line per compiled function: read up to a bound
  // far above any /proc file's, its oldest entries kept when it is longer.
  absl::StatusOr<std::string> perf_map = procfs::ReadSmallFile(
      procfs::RootPath(image.pid, absl::StrCat("/tmp/perf-", own_pid, ".map")),
      {.max_bytes = kMaxPerfMapBytes, .truncate = true});
  if (perf_map.ok()) jit.perf_map = PerfMap::Parse(*perf_map);
  jit.anonymous_code.clear();
  // None once the process is gone.
  std::string maps = procfs::ReadSmallFile(procfs::PidPath(image.pid, "maps")).value_or("");
  for (const procfs::MapsLine& line : procfs::ParseMaps(maps)) {
    // Executable, no file.
    if (!line.executable() || line.inode != 0 || line.path == "[vdso]") continue;
    jit.anonymous_code.emplace_back(line.start, line.end);
  }
  return lookup();
}

}  // namespace pystrobe
