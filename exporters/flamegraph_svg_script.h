// The inline stylesheet and script of the flame graph SVG, kept apart from
// the C++ that writes the frames.
#ifndef PYSTROBE_EXPORTERS_FLAMEGRAPH_SVG_SCRIPT_H_
#define PYSTROBE_EXPORTERS_FLAMEGRAPH_SVG_SCRIPT_H_

#include <string_view>

namespace pystrobe {

// CSS for the <style> element.
extern const std::string_view kFlameGraphSvgStyle;

// JavaScript for a <script> placed after all frames, inside CDATA (so it must
// never contain "]]>"). It reads the layout from the #frames group's data-total,
// data-x, data-width and data-char-width attributes and from each frame's data-* attributes;
// the text inside #details, #unzoom, #search and #matched is its to change.
extern const std::string_view kFlameGraphSvgScript;

}  // namespace pystrobe

#endif  // PYSTROBE_EXPORTERS_FLAMEGRAPH_SVG_SCRIPT_H_
