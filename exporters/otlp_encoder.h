// OTLP Profiles (opentelemetry-proto v1development, vendored under
// exporters/otlp/proto): a window's profiles as one ExportProfilesServiceRequest,
// what an OpenTelemetry Collector, Pyroscope 2 and other OTLP receivers take.
//
// What goes where:
// - The profile is first laid out as pprof (ToPprof: the same functions,
//   lines, mappings, addresses and values as the .pb.gz of the same window),
//   then moved into the request's one ProfilesDictionary, shared by every
//   profile of the request: strings, functions, mappings (build id as the
//   attribute process.executable.build_id.gnu), locations (the frame's kind
//   as profile.frame.type: cpython, native or kernel), stacks, attributes and
//   links. Every table starts with its zero value, as the format requires.
// - One ResourceProfiles per process, with the resource attributes of
//   OpenTelemetry's semantic conventions: service.name and host.name, then
//   process.pid, process.executable.name (the comm), process.runtime.name
//   "CPython" and process.runtime.version where the process runs a known
//   CPython, container.id and k8s.pod.uid where it lives in one; the
//   profile's static labels as they are. Stacks without a process frame go
//   to a resource without process attributes.
// - In each, one ScopeProfiles (scope "pystrobe") with one Profile per
//   sample type the window carries: samples/count and cpu/nanoseconds for
//   CPU time; cpu/nanoseconds and off_cpu/nanoseconds with off-CPU time
//   (wall/nanoseconds too where it is not their sum); resident_growth/bytes
//   for memory growth; inuse_space or alloc_space/bytes for allocations.
//   A sample with a zero value is left out of that type's profile.
// - Thread frames (--threads) become the sample attributes thread.id and
//   thread.name, not locations.
#ifndef PYSTROBE_EXPORTERS_OTLP_ENCODER_H_
#define PYSTROBE_EXPORTERS_OTLP_ENCODER_H_

#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "exporters/profile_writer.h"
#include "model/profile.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb.h"

namespace pystrobe {

namespace otlp_collector = ::opentelemetry::proto::collector::profiles::v1development;

// What the profiles themselves do not say about where they come from.
struct OtlpResourceOptions {
  // service.name of every resource (exporters.otlp.service_name).
  std::string service_name = "pystrobe";
  // host.name; empty: this machine's name (gethostname).
  std::string host_name;
  // The instrumentation scope's version.
  std::string scope_version = "0.1.0";
};

// The request for one window: `profiles` are its profiles (the CPU or
// off-CPU profile, and the resident-growth one where the window has it),
// their stacks merged into one dictionary. Deterministic for given profiles
// and options.
otlp_collector::ExportProfilesServiceRequest ToOtlpRequest(std::span<const Profile* const> profiles,
                                                           const OtlpResourceOptions& options);

// record -f otlp: the serialized request (protobuf binary, not compressed),
// what `curl --data-binary @FILE -H 'Content-Type: application/x-protobuf'
// http://collector:4318/v1development/profiles` posts as it is.
class OtlpWriter : public ProfileWriter {
 public:
  explicit OtlpWriter(OtlpResourceOptions options = {}) : options_(std::move(options)) {}
  absl::Status Write(const Profile& profile, std::ostream& out) const override;
  std::string_view extension() const override { return "otlp.pb"; }

 private:
  OtlpResourceOptions options_;
};

// This machine's host name, "" when it cannot be read.
std::string LocalHostName();

}  // namespace pystrobe

#endif  // PYSTROBE_EXPORTERS_OTLP_ENCODER_H_
