#include "exporters/profile_writer.h"

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "exporters/flamegraph_svg_writer.h"
#include "exporters/folded_writer.h"
#include "exporters/otlp_encoder.h"
#include "exporters/pprof_writer.h"
#include "exporters/speedscope_writer.h"

namespace pystrobe {

absl::StatusOr<std::unique_ptr<ProfileWriter>> MakeProfileWriter(std::string_view format) {
  if (format == "folded") return std::make_unique<FoldedWriter>();
  if (format == "svg") return std::make_unique<FlameGraphSvgWriter>();
  if (format == "pprof") return std::make_unique<PprofWriter>();
  if (format == "speedscope") return std::make_unique<SpeedscopeWriter>();
  if (format == "otlp") return std::make_unique<OtlpWriter>();
  return absl::InvalidArgumentError(
      absl::StrCat("unknown profile format \"", std::string(format),
                   "\"; accepted formats: folded, svg, pprof, speedscope, otlp"));
}

}  // namespace pystrobe
