#include "daemon/recording/native_name_cache.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bpf/pystrobe_abi.h"

namespace pystrobe {

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
      }
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

}  // namespace pystrobe
