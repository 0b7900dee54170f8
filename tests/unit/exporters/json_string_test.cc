#include "exporters/json_string.h"

#include <string>

#include "gtest/gtest.h"

namespace pystrobe {
namespace {

TEST(JsonStringTest, QuotesAndEscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonString("plain"), "\"plain\"");
  EXPECT_EQ(JsonString(""), "\"\"");
  EXPECT_EQ(JsonString("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonString("line\nnext\ttab\rret"), "\"line\\nnext\\ttab\\rret\"");
  EXPECT_EQ(JsonString(std::string("nul\0x\x01\x1f\b\f", 9)),
            "\"nul\\u0000x\\u0001\\u001f\\u0008\\u000c\"");
}

TEST(JsonStringTest, KeepsValidUtf8) {
  EXPECT_EQ(JsonString("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x8d"),
            "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x8d\"");
}

// A comm or a file name can hold any bytes; each one that does not start a
// valid UTF-8 sequence becomes U+FFFD (EF BF BD), so the document stays valid.
TEST(JsonStringTest, ReplacesEachInvalidByte) {
  EXPECT_EQ(JsonString("bad\xff"), "\"bad\xEF\xBF\xBD\"");
  EXPECT_EQ(JsonString("cut\xE2\x82"), "\"cut\xEF\xBF\xBD\xEF\xBF\xBD\"");
  EXPECT_EQ(JsonString("overlong\xC0\xAF"), "\"overlong\xEF\xBF\xBD\xEF\xBF\xBD\"");
  EXPECT_EQ(JsonString("surrogate\xED\xA0\x80"),
            "\"surrogate\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");
  EXPECT_EQ(JsonString("past\xF4\x90\x80\x80"),
            "\"past\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // > U+10FFFF
}

}  // namespace
}  // namespace pystrobe
