#include "exporters/flamegraph_svg_writer.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_format.h"
#include "exporters/flamegraph_layout.h"
#include "exporters/flamegraph_svg_script.h"

namespace pystrobe {
namespace {

// Geometry in pixels, after flamegraph.pl so the result looks familiar.
constexpr int kImageWidth = 1200;
constexpr int kFrameHeight = 16;
constexpr int kFontSize = 12;
// Average glyph width of Verdana relative to its size; decides how many
// characters of a name fit in a frame.
constexpr double kFontWidth = 0.59;
constexpr double kCharWidth = kFontSize * kFontWidth;
constexpr int kSidePad = 10;
constexpr int kTopPad = kFontSize * 5;          // title and subtitle
constexpr int kBottomPad = kFontSize * 2 + 10;  // details line
constexpr double kGraphWidth = kImageWidth - 2 * kSidePad;
// Frames thinner than this share of the samples are noise on screen and, in
// a large profile, most of the file.
constexpr double kMinFrameFraction = 0.001;

constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed UTF-8 sequence at s[i] that XML 1.0 accepts as a
// character, or 0 when there is none.
size_t XmlCharLength(std::string_view s, size_t i) {
  const auto byte = [&s](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return (lead >= 0x20 || lead == '\t') ? 1 : 0;
  size_t length;
  uint32_t code_point;
  uint32_t min_code_point;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, code_point = lead & 0x1F, min_code_point = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, code_point = lead & 0x0F, min_code_point = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, code_point = lead & 0x07, min_code_point = 0x10000;
  } else {
    return 0;
  }
  if (i + length > s.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code_point = (code_point << 6) | (byte(i + k) & 0x3F);
  }
  const bool excluded = code_point < min_code_point || code_point > 0x10FFFF ||
                        (code_point >= 0xD800 && code_point <= 0xDFFF) || code_point == 0xFFFE ||
                        code_point == 0xFFFF;
  return excluded ? 0 : length;
}

// Symbol names come from arbitrary binaries and may hold any bytes; one bad
// byte would make the whole SVG unreadable. Control characters become spaces,
// and bytes that are not valid UTF-8 become U+FFFD.
std::string ToXmlText(std::string_view name) {
  std::string text;
  text.reserve(name.size());
  for (size_t i = 0; i < name.size();) {
    const size_t length = XmlCharLength(name, i);
    if (length > 0) {
      text.append(name.substr(i, length));
      i += length;
    } else if (static_cast<unsigned char>(name[i]) < 0x20) {
      text.push_back(' ');
      ++i;
    } else {
      text.append(kReplacementCharacter);
      ++i;
    }
  }
  return text;
}

std::string EscapeXml(std::string_view text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        escaped.append("&amp;");
        break;
      case '<':
        escaped.append("&lt;");
        break;
      case '>':
        escaped.append("&gt;");
        break;
      case '"':
        escaped.append("&quot;");
        break;
      case '\'':
        escaped.append("&apos;");
        break;
      default:
        escaped.push_back(c);
    }
  }
  return escaped;
}

bool IsUtf8Continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// `text` (valid UTF-8) cut to what fits in `width` pixels, ending in ".." when
// cut; empty when not even three characters fit. The SVG's script applies the
// same rule after a zoom.
std::string FitText(std::string_view text, double width) {
  const auto fitting = static_cast<size_t>(std::floor(width / kCharWidth));
  if (fitting < 3) return "";
  size_t code_points = 0;
  size_t cut = 0;  // byte offset after `fitting - 2` code points
  for (size_t i = 0; i < text.size(); ++i) {
    if (IsUtf8Continuation(text[i])) continue;
    if (code_points == fitting - 2) cut = i;
    ++code_points;
  }
  if (code_points <= fitting) return std::string(text);
  return std::string(text.substr(0, cut)) + "..";
}

// Components in [0, 1] from FNV-1a of the name: the same function gets the
// same colour in every graph, and neighbours usually differ.
struct NameShades {
  double v1, v2, v3;
};

NameShades ShadesOf(std::string_view name) {
  uint64_t hash = 14695981039346656037ull;
  for (char c : name) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  const auto shade = [hash](int shift) { return ((hash >> shift) & 0xFFFF) / 65535.0; };
  return {shade(0), shade(16), shade(32)};
}

std::string Rgb(double r, double g, double b) {
  return absl::StrFormat("rgb(%d,%d,%d)", static_cast<int>(r), static_cast<int>(g),
                         static_cast<int>(b));
}

// One palette per kind, so the kind reads at a glance; after flamegraph.pl's
// "java" palette: kernel orange as its "[k]", native red or yellow, Python
// green to aqua, processes and threads lavender to purple (kept clear of the
// search highlight's magenta), pystrobe's own markers grey.
std::string FillFor(const FlameGraphBox& box) {
  const auto [v1, v2, v3] = ShadesOf(box.name);
  switch (box.kind) {
    case FrameKind::kKernel:
      return Rgb(190 + 65 * v1, 90 + 65 * v1, 0);
    case FrameKind::kNative:
      // Half red, half yellow: the orange between them belongs to the kernel.
      if (v3 < 0.5) return Rgb(200 + 55 * v1, 50 + 80 * v2, 50 + 80 * v2);
      return Rgb(175 + 55 * v1, 175 + 55 * v1, 50 + 20 * v2);
    case FrameKind::kPython:
      return Rgb(50 + 60 * v1, 170 + 60 * v2, 120 + 100 * v3);
    case FrameKind::kProcess:
      return Rgb(185 + 30 * v1, 180 + 30 * v1, 205 + 30 * v1);
    case FrameKind::kThread:
      return Rgb(160 + 50 * v1, 125 + 40 * v1, 210 + 40 * v1);
    case FrameKind::kMarker:
      break;
  }
  const double grey = 180 + 50 * v1;
  return Rgb(grey, grey, grey);
}

double PercentOf(uint64_t count, uint64_t total) {
  return total == 0 ? 0.0 : 100.0 * static_cast<double>(count) / static_cast<double>(total);
}

void WriteFrame(const FlameGraphBox& box, uint64_t total, int image_height, absl::string_view unit,
                const std::optional<FlameGraphFrameStyle>& style, std::ostream& out) {
  const double x = kSidePad + kGraphWidth * static_cast<double>(box.start) / total;
  const double width = kGraphWidth * static_cast<double>(box.count) / total;
  const int y = image_height - kBottomPad - (box.depth + 1) * kFrameHeight;
  const std::string text = ToXmlText(box.name);
  out << absl::StrFormat(
      "<g class=\"f\" data-kind=\"%s\" data-start=\"%d\" data-count=\"%d\" data-depth=\"%d\">"
      "<title>%s (%d %s, %.2f%%%s)</title>"
      "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" rx=\"2\" ry=\"2\" fill=\"%s\"/>"
      "<text x=\"%.2f\" y=\"%d\">%s</text></g>\n",
      FrameKindName(box.kind), box.start, box.count, box.depth, EscapeXml(text), box.count, unit,
      PercentOf(box.count, total), style ? EscapeXml(ToXmlText(", " + style->note)) : "", x, y,
      width, kFrameHeight - 1, style ? EscapeXml(style->fill) : FillFor(box), x + 3,
      y + kFrameHeight - 5, EscapeXml(FitText(text, width)));
}

std::string Subtitle(const Profile& profile, uint64_t total) {
  std::string subtitle = absl::StrFormat("%d %s", total, profile.count_unit);
  if (profile.sample_rate_hz > 0) {
    absl::StrAppendFormat(&subtitle, ", sampled at %d Hz", profile.sample_rate_hz);
  }
  if (total > 0) subtitle.append(". Click a frame to zoom, Ctrl-F to search.");
  return subtitle;
}

}  // namespace

std::string_view FrameKindName(FrameKind kind) {
  switch (kind) {
    case FrameKind::kProcess:
      return "process";
    case FrameKind::kThread:
      return "thread";
    case FrameKind::kKernel:
      return "kernel";
    case FrameKind::kNative:
      return "native";
    case FrameKind::kPython:
      return "python";
    case FrameKind::kMarker:
      return "marker";
  }
  return "marker";
}

absl::Status FlameGraphSvgWriter::Write(const Profile& profile, std::ostream& out) const {
  return WriteFlameGraphSvg(profile, nullptr, out);
}

absl::Status WriteFlameGraphSvg(const Profile& profile, const FlameGraphStyler& styler,
                                std::ostream& out) {
  const FlameGraphLayout layout = LayOutFlameGraph(profile, kMinFrameFraction);
  const bool empty = layout.boxes.empty();
  // An empty graph keeps room for two rows, where "no samples" is written.
  const int rows = empty ? 2 : layout.max_depth + 1;
  const int height = kTopPad + rows * kFrameHeight + kBottomPad;
  const std::string title =
      EscapeXml(ToXmlText(profile.title.empty() ? "Flame Graph" : profile.title));

  out << "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n";
  out << absl::StrFormat(
      "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" data-pystrobe-frames=\"%d\">\n",
      kImageWidth, height, kImageWidth, height, layout.boxes.size());
  out << "<title>" << title << "</title>\n";
  out << "<style type=\"text/css\"><![CDATA[" << kFlameGraphSvgStyle << "]]></style>\n";
  out << "<defs><linearGradient id=\"background\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"1\">"
         "<stop stop-color=\"#eeeeee\" offset=\"5%\"/><stop stop-color=\"#eeeeb0\" "
         "offset=\"95%\"/></linearGradient></defs>\n";
  out << absl::StrFormat(
      "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"url(#background)\"/>\n", kImageWidth,
      height);
  out << absl::StrFormat("<text id=\"title\" x=\"%d\" y=\"%d\">%s</text>\n", kImageWidth / 2,
                         kFontSize * 2, title);
  out << absl::StrFormat("<text id=\"subtitle\" x=\"%d\" y=\"%d\">%s</text>\n", kImageWidth / 2,
                         kFontSize * 4, EscapeXml(Subtitle(profile, layout.total_count)));
  out << absl::StrFormat(
      "<text id=\"unzoom\" class=\"control hide\" x=\"%d\" y=\"%d\">"
      "Reset Zoom</text>\n",
      kSidePad, kFontSize * 2);
  out << absl::StrFormat("<text id=\"search\" class=\"control\" x=\"%d\" y=\"%d\">Search</text>\n",
                         kImageWidth - kSidePad, kFontSize * 2);
  out << absl::StrFormat("<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n", kSidePad,
                         height - kBottomPad / 2);
  out << absl::StrFormat("<text id=\"matched\" class=\"hide\" x=\"%d\" y=\"%d\"> </text>\n",
                         kImageWidth - kSidePad, height - kBottomPad / 2);
  if (empty) {
    out << absl::StrFormat("<text id=\"nosamples\" x=\"%d\" y=\"%d\">no samples</text>\n",
                           kImageWidth / 2, kTopPad + kFrameHeight + kFontSize / 2);
  }
  out << absl::StrFormat(
      "<g id=\"frames\" data-total=\"%d\" data-x=\"%d\" data-width=\"%.2f\" "
      "data-char-width=\"%.2f\">\n",
      layout.total_count, kSidePad, kGraphWidth, kCharWidth);
  // Boxes come in pre-order, so a box's stack is the stack of the last box
  // one level up, and its own name.
  std::vector<std::string_view> stack;
  for (const FlameGraphBox& box : layout.boxes) {
    std::optional<FlameGraphFrameStyle> style;
    if (styler && box.depth > 0) {
      stack.resize(box.depth - 1);
      stack.push_back(box.name);
      style = styler(stack);
    }
    WriteFrame(box, layout.total_count, height, profile.count_unit, style, out);
  }
  out << "</g>\n";
  // Last, so every element it looks up already exists when it runs.
  out << "<script type=\"text/ecmascript\"><![CDATA[" << kFlameGraphSvgScript << "]]></script>\n";
  out << "</svg>\n";
  out.flush();
  if (!out) return absl::DataLossError("writing flame graph SVG: output stream failed");
  return absl::OkStatus();
}

}  // namespace pystrobe
