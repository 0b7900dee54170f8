#include "daemon/cli/record_options.h"

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace pystrobe {

std::string DefaultOutputPath(const RecordOptions& options, absl::Time now,
                              absl::string_view extension) {
  std::string target = "all";
  if (!options.command.empty()) {
    target = std::filesystem::path(options.command.front()).filename().string();
  } else if (!options.pids.empty()) {
    target = absl::StrCat("pid", options.pids.front());
  }
  return absl::StrCat("pystrobe-", target, "-",
                      absl::FormatTime("%Y%m%d-%H%M%S", now, absl::LocalTimeZone()), ".",
                      extension);
}

}  // namespace pystrobe
