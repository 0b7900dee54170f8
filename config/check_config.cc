#include "config/check_config.h"

#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "config/config_loader.h"

namespace pystrobe {
namespace {

constexpr int kCheckOk = 0;
constexpr int kCheckInvalid = 1;
constexpr int kCheckUnreadable = 2;

}  // namespace

int CheckDaemonConfig(const std::string& path, const ConfigOverrides& overrides) {
  absl::StatusOr<ConfigParseResult> parsed = ReadConfigFile(path);
  if (!parsed.ok()) {
    fprintf(stderr, "pystrobe: %s\n", std::string(parsed.status().message()).c_str());
    return kCheckUnreadable;
  }
  bool ok = parsed->ok();
  if (!ok) fprintf(stderr, "%s\n", parsed->ErrorText().c_str());
  DaemonConfig config = parsed->config;
  if (absl::Status status = ApplyOverrides(overrides, &config); !status.ok()) {
    fprintf(stderr, "%s\n", std::string(status.message()).c_str());
    ok = false;
  }
  if (!ok) return kCheckInvalid;
  printf("%s: OK\n", path.c_str());
  return kCheckOk;
}

}  // namespace pystrobe
