#include "daemon/symbolizer/shared_module_symbolizer.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "daemon/symbolizer/module_symbols.h"
#include "daemon/symbolizer/proc_maps.h"

namespace pystrobe {
namespace {

// One executable mapping with what names it; the module is null when its file
// could not be read (frames there get "module+0xoffset").
struct ResolvedMapping {
  uint64_t start;
  uint64_t end;
  uint64_t file_offset;
  std::string path;  // As the process sees it, e.g. "/usr/lib/.../libc.so.6"; or "[vdso]".
  std::shared_ptr<const ModuleSymbols> symbols;
};

absl::string_view Basename(absl::string_view path) {
  size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

class SharedModuleProcessSymbols final : public ProcessSymbols {
 public:
  static absl::StatusOr<std::unique_ptr<ProcessSymbols>> Create(
      uint32_t pid, std::shared_ptr<ModuleSymbolCache> cache,
      const SharedModuleSymbolizer::Options& options) {
    absl::StatusOr<ImageIdentity> identity = ReadImageIdentity(pid);
    if (!identity.ok()) return identity.status();
    auto symbols = std::unique_ptr<SharedModuleProcessSymbols>(
        new SharedModuleProcessSymbols(pid, *identity, std::move(cache), options));
    if (absl::Status status = symbols->Snapshot(); !status.ok()) return status;
    return std::unique_ptr<ProcessSymbols>(std::move(symbols));
  }

  std::string Symbolize(uint64_t addr) override { return Resolve(addr).name; }

  NativeFrameSymbol Resolve(uint64_t addr) override {
    const ResolvedMapping* mapping = FindMapping(addr);
    if (mapping == nullptr && MaybeRefresh()) mapping = FindMapping(addr);
    if (mapping == nullptr) return {"[unknown]", std::nullopt};
    NativeCodeLocation location;
    location.path = mapping->path;
    location.file_offset = addr - mapping->start + mapping->file_offset;
    if (mapping->symbols != nullptr) {
      location.build_id = mapping->symbols->build_id();
      location.code_segments = mapping->symbols->code_segments();
      if (std::optional<absl::string_view> name =
              mapping->symbols->FunctionAt(location.file_offset)) {
        return {std::string(*name), location};
      }
    }
    return {absl::StrFormat("%s+0x%x", Basename(mapping->path), location.file_offset), location};
  }

 private:
  SharedModuleProcessSymbols(uint32_t pid, ImageIdentity identity,
                             std::shared_ptr<ModuleSymbolCache> cache,
                             const SharedModuleSymbolizer::Options& options)
      : pid_(pid), identity_(identity), cache_(std::move(cache)), options_(options) {}

  // (Re)reads the maps and takes the modules' tables; keeps the old state
  // unless the new one is of the same image.
  absl::Status Snapshot() {
    absl::StatusOr<std::vector<ExecutableMapping>> mappings = ReadExecutableMappings(pid_);
    if (!mappings.ok()) return mappings.status();
    std::vector<ResolvedMapping> resolved;
    resolved.reserve(mappings->size());
    for (size_t i = 0; i < mappings->size(); ++i) {
      const ExecutableMapping& mapping = (*mappings)[i];
      // A file mapped twice (rare for text) is looked up once.
      bool same_file = i > 0 && !mapping.is_vdso() && (*mappings)[i - 1].dev == mapping.dev &&
                       (*mappings)[i - 1].inode == mapping.inode;
      std::shared_ptr<const ModuleSymbols> symbols =
          same_file ? resolved.back().symbols : cache_->Get(pid_, mapping);
      resolved.push_back(
          {mapping.start, mapping.end, mapping.file_offset, mapping.path, std::move(symbols)});
    }
    // An exec during the snapshot would mix two images. A process that exited
    // meanwhile is kept: what was loaded is still the best we will get.
    absl::StatusOr<ImageIdentity> identity = ReadImageIdentity(pid_);
    if (identity.ok() && *identity != identity_) {
      return absl::AbortedError(absl::StrCat("process ", pid_, " exec'd during the snapshot"));
    }
    std::sort(resolved.begin(), resolved.end(),
              [](const ResolvedMapping& a, const ResolvedMapping& b) { return a.start < b.start; });
    mappings_ = std::move(resolved);
    return absl::OkStatus();
  }

  // Refreshes for libraries loaded after the snapshot, but only while the
  // process still runs this image: after exit or exec the maps describe
  // nothing, or another image, and the old snapshot is all there is.
  bool MaybeRefresh() {
    absl::Time now = absl::Now();
    if (now - last_refresh_ < options_.min_refresh_interval) return false;
    last_refresh_ = now;
    absl::StatusOr<ImageIdentity> identity = ReadImageIdentity(pid_);
    if (!identity.ok() || *identity != identity_) return false;
    return Snapshot().ok();
  }

  const ResolvedMapping* FindMapping(uint64_t addr) const { return MappingAt(mappings_, addr); }

  uint32_t pid_;
  ImageIdentity identity_;
  std::shared_ptr<ModuleSymbolCache> cache_;
  SharedModuleSymbolizer::Options options_;
  std::vector<ResolvedMapping> mappings_;  // Sorted by start.
  absl::Time last_refresh_ = absl::InfinitePast();
};

}  // namespace

SharedModuleSymbolizer::SharedModuleSymbolizer(Options options)
    : options_(options),
      cache_(std::make_shared<ModuleSymbolCache>(
          ModuleSymbolCache::Options{.max_bytes = options.max_cache_bytes})) {}

absl::StatusOr<std::unique_ptr<ProcessSymbols>> SharedModuleSymbolizer::ForProcess(uint32_t pid) {
  return SharedModuleProcessSymbols::Create(pid, cache_, options_);
}

}  // namespace pystrobe
