#include "config/check_config.h"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "config/config_loader.h"

namespace pystrobe {
namespace {

constexpr int kCheckOk = 0;
constexpr int kCheckInvalid = 1;
constexpr int kCheckUnreadable = 2;  // also bad usage

int CheckConfig(const std::string& path, const ConfigOverrides& overrides) {
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

constexpr char kUsage[] =
    "usage: pystrobe daemon --check-config FILE [--rate HZ] [--window SECONDS]\n"
    "                       [--profile-dir DIR] [--prometheus-listen HOST:PORT]\n";

int UsageError(const std::string& message) {
  fprintf(stderr, "pystrobe daemon: %s\n%s", message.c_str(), kUsage);
  return kCheckUnreadable;
}

}  // namespace

int RunDaemonCheckConfigCommand(const std::vector<std::string>& args) {
  std::optional<std::string> path;
  ConfigOverrides overrides;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "--check-config" && i + 1 < args.size()) {
      path = args[++i];
      continue;
    }
    if (absl::ConsumePrefix(&arg, "--check-config=")) {
      path = std::string(arg);
      continue;
    }
    std::optional<absl::string_view> next;
    if (i + 1 < args.size()) next = args[i + 1];
    bool consumed_next = false;
    absl::StatusOr<bool> is_override = ParseOverrideFlag(args[i], next, &overrides, &consumed_next);
    if (!is_override.ok()) {
      fprintf(stderr, "pystrobe daemon: %s\n", std::string(is_override.status().message()).c_str());
      return kCheckUnreadable;
    }
    if (!*is_override) {
      return UsageError(absl::StrCat(args[i], " cannot be checked with --check-config"));
    }
    if (consumed_next) ++i;
  }
  if (!path) return UsageError("--check-config needs a FILE");
  return CheckConfig(*path, overrides);
}

}  // namespace pystrobe
