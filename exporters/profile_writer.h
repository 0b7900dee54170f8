// Turns a Profile into a file format. One implementation per format.
#ifndef PYSTROBE_EXPORTERS_PROFILE_WRITER_H_
#define PYSTROBE_EXPORTERS_PROFILE_WRITER_H_

#include <memory>
#include <ostream>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/profile.h"

namespace pystrobe {

class ProfileWriter {
 public:
  virtual ~ProfileWriter() = default;

  // Writes the whole profile to `out`.
  virtual absl::Status Write(const Profile& profile, std::ostream& out) const = 0;

  // File name extension without the dot, e.g. "svg".
  virtual std::string_view extension() const = 0;
};

// The writer for a --format value ("folded", "svg", "pprof", "speedscope",
// "otlp");
// InvalidArgument otherwise.
absl::StatusOr<std::unique_ptr<ProfileWriter>> MakeProfileWriter(std::string_view format);

}  // namespace pystrobe

#endif  // PYSTROBE_EXPORTERS_PROFILE_WRITER_H_
