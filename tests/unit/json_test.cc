// The JSON reader behind json_val / json_ietf_val values.
#include "common/json.h"

#include <gtest/gtest.h>

#include <string>

namespace loom {
namespace {

TEST(JsonTest, KeepsNumbersAsWrittenAndMembersInOrder) {
  JsonValue v;
  std::string err;
  ASSERT_TRUE(
      ParseJson(R"( {"b": 18446744073709551615, "a": -1.5e3, "c": [true, null, "x"]} )", &v, &err))
      << err;
  ASSERT_EQ(v.kind, JsonValue::Kind::kObject);
  ASSERT_EQ(v.members.size(), 3u);
  EXPECT_EQ(v.members[0].name, "b");
  EXPECT_EQ(v.members[0].value.text, "18446744073709551615");  // exact, not a double
  EXPECT_EQ(v.members[1].value.text, "-1.5e3");
  ASSERT_EQ(v.members[2].value.items.size(), 3u);
  EXPECT_EQ(v.members[2].value.items[0].text, "true");
  EXPECT_EQ(v.members[2].value.items[1].kind, JsonValue::Kind::kNull);
}

TEST(JsonTest, UnescapesStringsToUtf8) {
  JsonValue v;
  std::string err;
  ASSERT_TRUE(ParseJson(R"("a\"b\\c\/d\n\u00e9\ud83d\ude00")", &v, &err)) << err;
  EXPECT_EQ(v.text, "a\"b\\c/d\n\xc3\xa9\xf0\x9f\x98\x80");
}

TEST(JsonTest, RejectsWhatIsNotJsonNamingThePosition) {
  JsonValue v;
  std::string err;
  const std::pair<const char*, const char*> bad[] = {
      {R"({"a" 1})", "at 5: expected ':'"},
      {R"({"a": 1,})", "at 8: expected a member name"},
      {R"([1 2])", "at 3: expected ',' or ']'"},
      {R"("abc)", "unterminated string"},
      {R"("\ud800")", "unpaired surrogate"},
      {R"(01)", "trailing characters"},
      {R"(-)", "invalid number"},
      {R"({"a": tru})", "invalid literal"},
      {"\"a\x01\"", "control character"},
      {"", "unexpected end of input"},
  };
  for (const auto& [text, want] : bad) {
    EXPECT_FALSE(ParseJson(text, &v, &err)) << text;
    EXPECT_NE(err.find(want), std::string::npos) << text << " -> " << err;
  }
  // Deep nesting is an error, not a stack overflow.
  EXPECT_FALSE(ParseJson(std::string(100000, '['), &v, &err));
  EXPECT_NE(err.find("nesting deeper than 64"), std::string::npos) << err;
}

TEST(JsonTest, ChecksUtf8AndOptionallyUniqueNames) {
  JsonValue v;
  std::string err;
  EXPECT_TRUE(ParseJson("\"caf\xc3\xa9\"", &v, &err)) << err;
  EXPECT_FALSE(ParseJson("\"caf\xc3\"", &v, &err));  // truncated sequence
  EXPECT_NE(err.find("invalid UTF-8"), std::string::npos) << err;
  EXPECT_FALSE(ParseJson("\"\xc0\xaf\"", &v, &err));               // overlong '/'
  EXPECT_FALSE(ParseJson("\"\xed\xa0\x80\"", &v, &err));           // encoded surrogate
  EXPECT_TRUE(ParseJson(R"({"a": 1, "a": 2})", &v, &err)) << err;  // allowed by default
  EXPECT_FALSE(ParseJson(R"({"a": 1, "a": 2})", &v, &err, /*unique_names=*/true));
  EXPECT_NE(err.find("a member name appears twice"), std::string::npos) << err;
}

}  // namespace
}  // namespace loom
