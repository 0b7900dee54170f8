// pprof: the profile.proto message (exporters/profile.proto), gzipped, as
// pprof, Pyroscope, Parca and Grafana read it.
//
// What goes where:
// - Process and thread frames are not locations but labels of the sample:
//   pid (number), comm, tid (number), thread_name; then Profile::labels and
//   Profile::process_labels of that pid.
// - Python frames "qualname (file:line)": a Function (name = qualname,
//   filename = file), one Location per distinct line, the line in its Line.
// - Native frames: a Function named by the symbol (or "module+0xoffset"),
//   in the Mapping of the file their code lies in (Frame::module): filename =
//   the path the process mapped, build_id = its GNU build id. Addresses are
//   ELF virtual addresses (what `addr2line -e FILE` and symbol tables take):
//   a file offset becomes one through the executable segment holding it, and
//   each such segment is a Mapping laid out as the file's program header
//   says (memory_start = p_vaddr, memory_limit = p_vaddr + p_memsz,
//   file_offset = p_offset). A module whose file could not be read has one
//   Mapping from 0, file_offset 0, and its locations' addresses are file
//   offsets. A frame with no module but named "module+0xoffset" gets a
//   Mapping of that base name, the same way. has_functions is false on a
//   Mapping with any frame left as "module+0xoffset", so pprof may symbolize
//   it when it finds the file. Stacks merged by names (Profile) keep the
//   first address seen, so an address is one of the function's, not every one.
// - Kernel frames: a Function named without "_[k]", in the "[kernel]" mapping
//   (build_id: the kernel's, when Frame::module gives it), no address.
// - Markers ("[native]", "[truncated]", "[sleep]"...): Functions of their own.
// - Values: a CPU profile (count_unit "samples") has sample types
//   samples/count and cpu/nanoseconds (the time the samples stand for: each
//   one's interval on its CPU, or count x 1e9 / rate where a stack does not
//   say), period cpu/nanoseconds = 1e9 / rate, the mean. An off-CPU profile (count_unit
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
#include "exporters/profile.pb.h"
#include "exporters/profile_writer.h"
#include "model/profile.h"

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
