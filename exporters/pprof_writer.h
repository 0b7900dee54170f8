// pprof: the profile.proto message (exporters/profile.proto), gzipped, as
// pprof, Pyroscope, Parca and Grafana read it.
//
// What goes where:
// - Process and thread frames are not locations but labels of the sample:
//   pid (number), comm, tid (number), thread_name; then Profile::labels and
//   Profile::process_labels of that pid.
// - Python frames "qualname (file:line)": a Function (name = qualname,
//   filename = file), one Location per distinct line, the line in its Line.
// - Native frames: a Function named by the symbol. "module+0xoffset" (no
//   symbol) is put in a Mapping for the module (has_functions false, so
//   pprof may symbolize it when it finds the file), address = the offset.
// - Kernel frames: a Function named without "_[k]", in the "[kernel]" mapping.
// - Markers ("[native]", "[truncated]", "[sleep]"...): Functions of their own.
// - Values: a CPU profile (count_unit "samples") has sample types
//   samples/count and cpu/nanoseconds (count x 1e9 / rate), period
//   cpu/nanoseconds = 1e9 / rate. An off-CPU profile (count_unit
//   "microseconds", stacks under "[on-cpu]" or "[off-cpu]") has
//   wall/nanoseconds (all time), cpu/nanoseconds (the [on-cpu] part) and
//   off_cpu/nanoseconds (the [off-cpu] part); those two root markers become
//   the choice of sample type and are not locations.
#ifndef PYSTROBE_EXPORTERS_PPROF_WRITER_H_
#define PYSTROBE_EXPORTERS_PPROF_WRITER_H_

#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "exporters/profile.h"
#include "exporters/profile.pb.h"
#include "exporters/profile_writer.h"

namespace pystrobe {

class PprofWriter : public ProfileWriter {
 public:
  absl::Status Write(const Profile& profile, std::ostream& out) const override;
  std::string_view extension() const override { return "pb.gz"; }
};

// The message before serialization, deterministic for a given profile: the
// same profile gives the same bytes.
perftools::profiles::Profile ToPprof(const Profile& profile);

// `data` in gzip format (what a .pb.gz file and Pyroscope's ingest expect).
absl::StatusOr<std::string> Gzip(std::string_view data);

}  // namespace pystrobe

#endif  // PYSTROBE_EXPORTERS_PPROF_WRITER_H_
