// An interactive flame graph as one self-contained SVG file: hover for
// details, click to zoom, Ctrl-F to search. No network access needed to view.
#ifndef PYSTROBE_EXPORTERS_FLAMEGRAPH_SVG_WRITER_H_
#define PYSTROBE_EXPORTERS_FLAMEGRAPH_SVG_WRITER_H_

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "exporters/profile_writer.h"
#include "model/profile.h"

namespace pystrobe {

// Draws the root at the bottom, as flamegraph.pl does, with each frame as wide
// as its share of the samples. Frames under 0.1% of all samples are not drawn.
//
// For tests and tools, the file carries machine-readable markers:
//   - the root <svg> has data-pystrobe-frames="<number of frames drawn>",
//     counting the "all" root frame;
//   - each drawn frame is a <g class="f"> with data-kind (see FrameKindName),
//     data-start, data-count and data-depth (in samples and levels);
//   - once its script has run, the document element has
//     data-pystrobe-ready="1".
// Opening the file with "?s=<term>" in the URL runs a search for <term>.
class FlameGraphSvgWriter : public ProfileWriter {
 public:
  absl::Status Write(const Profile& profile, std::ostream& out) const override;
  std::string_view extension() const override { return "svg"; }
};

// How a differential flame graph draws a frame instead of by its kind: its
// fill colour and a note added to its tooltip.
struct FlameGraphFrameStyle {
  std::string fill;  // e.g. "rgb(255,120,120)"
  std::string note;  // e.g. "+2.10 points"
};
// Called with each drawn frame's stack, root first, without the "all" root;
// nullopt draws the frame in its kind's palette.
using FlameGraphStyler =
    std::function<std::optional<FlameGraphFrameStyle>(const std::vector<std::string_view>& stack)>;

// FlameGraphSvgWriter's file, with each frame styled by `styler` (may be empty).
absl::Status WriteFlameGraphSvg(const Profile& profile, const FlameGraphStyler& styler,
                                std::ostream& out);

// "kernel", "native", "python", "process", "thread" or "marker".
std::string_view FrameKindName(FrameKind kind);

}  // namespace pystrobe

#endif  // PYSTROBE_EXPORTERS_FLAMEGRAPH_SVG_WRITER_H_
