#include "exporters/flamegraph_svg_writer.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/profile.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Render(const Profile& profile) {
  std::ostringstream out;
  absl::Status status = FlameGraphSvgWriter().Write(profile, out);
  EXPECT_TRUE(status.ok()) << status;
  return out.str();
}

// Enough of XML to catch what a writer gets wrong: every tag closed in order,
// no stray '<' or '&' in text. Declarations and CDATA sections are skipped.
testing::AssertionResult IsBalancedXml(const std::string& xml) {
  std::vector<std::string> open;
  size_t i = 0;
  while (i < xml.size()) {
    if (xml[i] == '&') {
      const size_t semicolon = xml.find(';', i);
      const std::string entity = xml.substr(i, semicolon == std::string::npos ? 8 : semicolon - i);
      static const std::regex kEntity("&(amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+)");
      if (!std::regex_match(entity, kEntity)) {
        return testing::AssertionFailure() << "bad entity at " << i << ": " << entity;
      }
      ++i;
      continue;
    }
    if (xml[i] != '<') {
      ++i;
      continue;
    }
    if (xml.compare(i, 9, "<![CDATA[") == 0) {
      i = xml.find("]]>", i);
      if (i == std::string::npos) return testing::AssertionFailure() << "unterminated CDATA";
      i += 3;
      continue;
    }
    const size_t end = xml.find('>', i);
    if (end == std::string::npos) return testing::AssertionFailure() << "unterminated tag";
    const std::string tag = xml.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty() || tag[0] == '?' || tag[0] == '!') continue;
    if (tag.find('<') != std::string::npos) {
      return testing::AssertionFailure() << "'<' inside tag: " << tag;
    }
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) {
        return testing::AssertionFailure()
               << "</" << tag.substr(1) << "> closes <" << (open.empty() ? "" : open.back()) << ">";
      }
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find_first_of(" \t\n")));
    }
  }
  if (!open.empty()) return testing::AssertionFailure() << "<" << open.back() << "> never closed";
  return testing::AssertionSuccess();
}

// xmllint is a stricter check when the machine has it; it is not a dependency.
testing::AssertionResult PassesXmllintIfInstalled(const std::string& xml) {
  if (access("/usr/bin/xmllint", X_OK) != 0) return testing::AssertionSuccess();
  char path[] = "/tmp/pystrobe_svg_test_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return testing::AssertionFailure() << "mkstemp failed";
  close(fd);
  std::ofstream(path) << xml;
  const int rc = std::system((std::string("/usr/bin/xmllint --noout ") + path).c_str());
  std::remove(path);
  if (rc != 0) return testing::AssertionFailure() << "xmllint rejected the SVG";
  return testing::AssertionSuccess();
}

struct DrawnFrame {
  std::string kind;
  uint64_t count;
  int depth;
  std::string title;
  double x;
  int y;
  double width;
  std::string fill;
  std::string text;
};

std::vector<DrawnFrame> DrawnFrames(const std::string& svg) {
  static const std::regex kFrame(
      "<g class=\"f\" data-kind=\"(\\w+)\" data-start=\"\\d+\" data-count=\"(\\d+)\" "
      "data-depth=\"(\\d+)\"><title>([^<]*)</title><rect x=\"([0-9.]+)\" y=\"(\\d+)\" "
      "width=\"([0-9.]+)\" height=\"\\d+\" rx=\"2\" ry=\"2\" fill=\"([^\"]+)\"/>"
      "<text [^>]*>([^<]*)</text></g>");
  std::vector<DrawnFrame> frames;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), kFrame); it != std::sregex_iterator();
       ++it) {
    const std::smatch& m = *it;
    frames.push_back(DrawnFrame{m[1], std::stoull(m[2]), std::stoi(m[3]), m[4], std::stod(m[5]),
                                std::stoi(m[6]), std::stod(m[7]), m[8], m[9]});
  }
  return frames;
}

const DrawnFrame* FindByTitlePrefix(const std::vector<DrawnFrame>& frames,
                                    const std::string& prefix) {
  for (const DrawnFrame& frame : frames) {
    if (frame.title.rfind(prefix + " (", 0) == 0) return &frame;
  }
  return nullptr;
}

Profile ThreeToOne() {
  Profile profile;
  profile.title = "three to one";
  profile.Add({{"app (1)", FrameKind::kProcess}, {"hot", FrameKind::kNative}}, 300);
  profile.Add({{"app (1)", FrameKind::kProcess}, {"cold", FrameKind::kNative}}, 100);
  return profile;
}

TEST(FlameGraphSvgWriterTest, IsWellFormedXml) {
  const std::string svg = Render(ThreeToOne());
  EXPECT_TRUE(IsBalancedXml(svg));
  EXPECT_TRUE(PassesXmllintIfInstalled(svg));
  EXPECT_THAT(svg, HasSubstr("xmlns=\"http://www.w3.org/2000/svg\""));
}

TEST(FlameGraphSvgWriterTest, WidthsAreProportionalToSamples) {
  const std::vector<DrawnFrame> frames = DrawnFrames(Render(ThreeToOne()));
  const DrawnFrame* hot = FindByTitlePrefix(frames, "hot");
  const DrawnFrame* cold = FindByTitlePrefix(frames, "cold");
  const DrawnFrame* process = FindByTitlePrefix(frames, "app (1)");
  ASSERT_NE(hot, nullptr);
  ASSERT_NE(cold, nullptr);
  ASSERT_NE(process, nullptr);

  EXPECT_NEAR(hot->width / cold->width, 3.0, 0.03);
  EXPECT_NEAR(hot->width + cold->width, process->width, 0.05);
  // Siblings sit side by side, alphabetically: "cold" left of "hot".
  EXPECT_NEAR(cold->x + cold->width, hot->x, 0.05);
}

TEST(FlameGraphSvgWriterTest, TitlesGiveNameSamplesAndPercent) {
  const std::vector<DrawnFrame> frames = DrawnFrames(Render(ThreeToOne()));
  const DrawnFrame* hot = FindByTitlePrefix(frames, "hot");
  ASSERT_NE(hot, nullptr);
  EXPECT_EQ(hot->title, "hot (300 samples, 75.00%)");
  const DrawnFrame* root = FindByTitlePrefix(frames, "all");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->title, "all (400 samples, 100.00%)");
}

TEST(FlameGraphSvgWriterTest, DrawsTheRootAtTheBottom) {
  const std::vector<DrawnFrame> frames = DrawnFrames(Render(ThreeToOne()));
  const DrawnFrame* root = FindByTitlePrefix(frames, "all");
  const DrawnFrame* process = FindByTitlePrefix(frames, "app (1)");
  const DrawnFrame* hot = FindByTitlePrefix(frames, "hot");
  ASSERT_TRUE(root && process && hot);
  EXPECT_EQ(root->depth, 0);
  EXPECT_GT(root->y, process->y);
  EXPECT_GT(process->y, hot->y);
}

TEST(FlameGraphSvgWriterTest, OmitsTinyFramesButCountsThemInTheirParents) {
  Profile profile;
  profile.Add({{"parent", FrameKind::kNative}, {"big", FrameKind::kNative}}, 99990);
  profile.Add({{"parent", FrameKind::kNative}, {"tiny", FrameKind::kNative}}, 10);
  const std::string svg = Render(profile);
  const std::vector<DrawnFrame> frames = DrawnFrames(svg);

  EXPECT_EQ(FindByTitlePrefix(frames, "tiny"), nullptr);
  const DrawnFrame* parent = FindByTitlePrefix(frames, "parent");
  ASSERT_NE(parent, nullptr);
  EXPECT_EQ(parent->count, 100000u);
  EXPECT_THAT(svg, Not(HasSubstr("tiny")));
  // all, parent, big.
  EXPECT_EQ(frames.size(), 3u);
  EXPECT_THAT(svg, HasSubstr("data-pystrobe-frames=\"3\""));
}

TEST(FlameGraphSvgWriterTest, KeepsFramesAtTheThreshold) {
  Profile profile;
  profile.Add({{"big", FrameKind::kNative}}, 999);
  profile.Add({{"small", FrameKind::kNative}}, 1);  // exactly 0.1%

  EXPECT_NE(FindByTitlePrefix(DrawnFrames(Render(profile)), "small"), nullptr);
}

TEST(FlameGraphSvgWriterTest, EscapesEveryName) {
  Profile profile;
  profile.title = "<title> & \"more\"";
  profile.Add({{"a&b", FrameKind::kProcess},
               {"<module> (x.py:1)", FrameKind::kPython},
               {"operator>\"'", FrameKind::kNative}},
              1);
  const std::string svg = Render(profile);

  EXPECT_TRUE(IsBalancedXml(svg));
  EXPECT_TRUE(PassesXmllintIfInstalled(svg));
  EXPECT_THAT(svg, HasSubstr("a&amp;b ("));
  EXPECT_THAT(svg, HasSubstr("&lt;module&gt; (x.py:1) ("));
  EXPECT_THAT(svg, HasSubstr("operator&gt;&quot;&apos; ("));
  EXPECT_THAT(svg, HasSubstr("&lt;title&gt; &amp; &quot;more&quot;"));
  EXPECT_THAT(svg, Not(HasSubstr("<module>")));
}

TEST(FlameGraphSvgWriterTest, StaysWellFormedWithInvalidUtf8AndControlCharacters) {
  Profile profile;
  profile.Add({{"bad\xff\xfe utf8\x01\n", FrameKind::kNative},
               {"caf\xc3\xa9 \xe2\x86\x92 ok", FrameKind::kNative}},
              1);
  const std::string svg = Render(profile);

  EXPECT_TRUE(IsBalancedXml(svg));
  EXPECT_TRUE(PassesXmllintIfInstalled(svg));
  EXPECT_THAT(svg, HasSubstr("bad\xEF\xBF\xBD\xEF\xBF\xBD utf8   ("));
  EXPECT_THAT(svg, HasSubstr("caf\xc3\xa9 \xe2\x86\x92 ok ("));
}

TEST(FlameGraphSvgWriterTest, TagsEachFrameWithItsKind) {
  Profile profile;
  profile.Add({{"p (1)", FrameKind::kProcess},
               {"t tid=1", FrameKind::kThread},
               {"f (a.py:1)", FrameKind::kPython},
               {"memcpy", FrameKind::kNative},
               {"vfs_read_[k]", FrameKind::kKernel},
               {"[truncated]", FrameKind::kMarker}},
              1);
  const std::vector<DrawnFrame> frames = DrawnFrames(Render(profile));

  auto kind_of = [&frames](const std::string& name) {
    const DrawnFrame* frame = FindByTitlePrefix(frames, name);
    return frame ? frame->kind : "(not drawn)";
  };
  EXPECT_EQ(kind_of("p (1)"), "process");
  EXPECT_EQ(kind_of("t tid=1"), "thread");
  EXPECT_EQ(kind_of("f (a.py:1)"), "python");
  EXPECT_EQ(kind_of("memcpy"), "native");
  EXPECT_EQ(kind_of("vfs_read_[k]"), "kernel");
  EXPECT_EQ(kind_of("[truncated]"), "marker");
}

TEST(FlameGraphSvgWriterTest, ColoursAreDeterministicPerNameAndDifferByKind) {
  Profile profile;
  profile.Add({{"a", FrameKind::kNative}, {"same", FrameKind::kPython}}, 1);
  profile.Add({{"b", FrameKind::kNative}, {"same", FrameKind::kPython}}, 1);
  profile.Add({{"c", FrameKind::kNative}, {"same", FrameKind::kKernel}}, 1);
  const std::string svg = Render(profile);
  const std::vector<DrawnFrame> frames = DrawnFrames(svg);

  std::vector<std::string> python_fills, kernel_fills;
  for (const DrawnFrame& frame : frames) {
    if (frame.title.rfind("same (", 0) != 0) continue;
    (frame.kind == "python" ? python_fills : kernel_fills).push_back(frame.fill);
  }
  ASSERT_EQ(python_fills.size(), 2u);
  ASSERT_EQ(kernel_fills.size(), 1u);
  EXPECT_EQ(python_fills[0], python_fills[1]);
  EXPECT_NE(python_fills[0], kernel_fills[0]);
  EXPECT_EQ(Render(profile), svg);
}

TEST(FlameGraphSvgWriterTest, TruncatesLongNamesToFitWithDots) {
  Profile profile;
  const std::string long_name(300, 'x');
  profile.Add({{"left", FrameKind::kNative}, {long_name, FrameKind::kNative}}, 1);
  profile.Add({{"right", FrameKind::kNative}}, 9);
  const std::vector<DrawnFrame> frames = DrawnFrames(Render(profile));

  const DrawnFrame* frame = FindByTitlePrefix(frames, long_name);
  ASSERT_NE(frame, nullptr);
  // 10% of 1180 px holds 16 characters of 7.08 px: 14 of the name and "..".
  EXPECT_EQ(frame->text, std::string(14, 'x') + "..");
  EXPECT_EQ(FindByTitlePrefix(frames, "right")->text, "right");
}

TEST(FlameGraphSvgWriterTest, UsesTheProfileTitleAndSampleRate) {
  Profile profile = ThreeToOne();
  profile.sample_rate_hz = 99;
  const std::string svg = Render(profile);

  EXPECT_THAT(svg, HasSubstr("<title>three to one</title>"));
  EXPECT_THAT(svg, HasSubstr("400 samples, sampled at 99 Hz"));
}

TEST(FlameGraphSvgWriterTest, IsInteractiveAndSelfContained) {
  const std::string svg = Render(ThreeToOne());

  EXPECT_THAT(svg, HasSubstr("<script"));
  EXPECT_THAT(svg, HasSubstr("setAttribute('data-pystrobe-ready', '1')"));
  EXPECT_THAT(svg, HasSubstr(">Reset Zoom<"));
  EXPECT_THAT(svg, HasSubstr(">Search<"));
  EXPECT_THAT(svg, HasSubstr("id=\"details\""));
  EXPECT_THAT(svg, HasSubstr("e.ctrlKey"));
  // Viewable offline: the namespace is the only URL in the file.
  std::string without_namespace = svg;
  without_namespace.erase(without_namespace.find("http://www.w3.org/2000/svg"), 26);
  EXPECT_THAT(without_namespace, Not(HasSubstr("://")));
}

TEST(FlameGraphSvgWriterTest, EmptyProfileSaysNoSamples) {
  const std::string svg = Render(Profile());

  EXPECT_TRUE(IsBalancedXml(svg));
  EXPECT_TRUE(PassesXmllintIfInstalled(svg));
  EXPECT_THAT(svg, HasSubstr(">no samples<"));
  EXPECT_THAT(svg, HasSubstr("data-pystrobe-frames=\"0\""));
  EXPECT_TRUE(DrawnFrames(svg).empty());
}

TEST(FlameGraphSvgWriterTest, ExtensionIsSvg) {
  EXPECT_EQ(FlameGraphSvgWriter().extension(), "svg");
}

}  // namespace
}  // namespace pystrobe
