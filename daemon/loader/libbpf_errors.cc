#include "daemon/loader/libbpf_errors.h"

#include <bpf/libbpf.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/const_init.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"

namespace pystrobe {
namespace {

// libbpf's print callback is process-wide, so its sink is too.
ABSL_CONST_INIT absl::Mutex log_mutex(absl::kConstInit);
std::string* captured_log = nullptr;  // guarded by log_mutex
bool echo_log = false;                // guarded by log_mutex

int CapturePrint(enum libbpf_print_level /*level*/, const char* format, va_list args) {
  // libbpf hands over the whole verifier log in one call: size it first.
  va_list copy;
  va_copy(copy, args);
  int length = vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  if (length <= 0) return 0;
  std::string text(static_cast<size_t>(length), '\0');
  vsnprintf(text.data(), text.size() + 1, format, args);
  absl::MutexLock lock(&log_mutex);
  if (captured_log == nullptr) captured_log = new std::string();
  // Keep the log bounded: a verifier log can run to megabytes.
  if (captured_log->size() < (4 << 20)) captured_log->append(text);
  // Everything is kept for the error message; only --verbose shows it live.
  if (echo_log) fputs(text.c_str(), stderr);
  return 0;
}

}  // namespace

absl::Status LibbpfError(int err, absl::string_view what) {
  int code = err < 0 ? -err : err;
  std::string message = absl::StrCat(what, ": ", std::strerror(code));
  switch (code) {
    case EPERM:
    case EACCES:
      return absl::PermissionDeniedError(message);
    case ENOENT:
    case ESRCH:
      return absl::NotFoundError(message);
    case EINVAL:
    case E2BIG:
      return absl::InvalidArgumentError(message);
    case ENOMEM:
      return absl::ResourceExhaustedError(message);
    case EOPNOTSUPP:
      return absl::UnimplementedError(message);
    default:
      return absl::InternalError(message);
  }
}

void LibbpfLog::Capture(bool echo) {
  {
    absl::MutexLock lock(&log_mutex);
    echo_log = echo;
  }
  libbpf_set_print(CapturePrint);
}

std::string LibbpfLog::Take() {
  absl::MutexLock lock(&log_mutex);
  if (captured_log == nullptr) return "";
  std::string log = std::move(*captured_log);
  captured_log->clear();
  return log;
}

std::string LibbpfLog::VerifierReason(absl::string_view log) {
  std::vector<absl::string_view> lines = absl::StrSplit(log, '\n', absl::SkipWhitespace());
  absl::string_view last_libbpf_line;
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::string_view line = absl::StripAsciiWhitespace(lines[i]);
    if (absl::StartsWith(line, "processed ") && absl::StrContains(line, " insns")) {
      // The verifier's verdict is the last line before its statistics.
      for (size_t j = i; j-- > 0;) {
        absl::string_view candidate = absl::StripAsciiWhitespace(lines[j]);
        if (!candidate.empty() && !absl::StartsWith(candidate, "libbpf:") &&
            !absl::StartsWith(candidate, ";")) {
          return std::string(candidate);
        }
      }
    }
    if (absl::StartsWith(line, "libbpf:") && !absl::StrContains(line, "PROG LOAD LOG")) {
      last_libbpf_line = line;
    }
  }
  return std::string(absl::StripPrefix(last_libbpf_line, "libbpf: "));
}

}  // namespace pystrobe
