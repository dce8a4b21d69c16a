#include "telemetry/path.h"

#include <gtest/gtest.h>

#include <string>

#include "api/proto_util/fingerprint.h"

namespace loom::telemetry {
namespace {

gnmi::Path Parse(const std::string& text) {
  gnmi::Path p;
  Status s = ParsePath(text, &p);
  EXPECT_TRUE(s.ok()) << text << ": " << s.message();
  return p;
}

std::string ErrorOf(const std::string& text) {
  gnmi::Path p;
  Status s = ParsePath(text, &p);
  EXPECT_FALSE(s.ok()) << text << " parsed as " << FormatPath(p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  return s.message();
}

TEST(PathTest, ParsesOpenConfigCounterPath) {
  gnmi::Path p = Parse("/interfaces/interface[name=Ethernet1]/state/counters/in-octets");
  EXPECT_EQ(p.origin(), "");
  EXPECT_EQ(p.target(), "");
  ASSERT_EQ(p.elem_size(), 5);
  EXPECT_EQ(p.elem(0).name(), "interfaces");
  EXPECT_EQ(p.elem(1).name(), "interface");
  EXPECT_EQ(p.elem(1).key().at("name"), "Ethernet1");
  EXPECT_EQ(p.elem(4).name(), "in-octets");
}

TEST(PathTest, ParsesOriginAndTarget) {
  gnmi::Path p = Parse("leaf-0@loom:/pfc/interfaces/interface[name=Ethernet1]");
  EXPECT_EQ(p.target(), "leaf-0");
  EXPECT_EQ(p.origin(), "loom");
  EXPECT_EQ(p.elem_size(), 3);
  gnmi::Path q = Parse("loom:/pfc");
  EXPECT_EQ(q.origin(), "loom");
  EXPECT_EQ(q.target(), "");
  gnmi::Path r = Parse("spine-1@/interfaces");
  EXPECT_EQ(r.target(), "spine-1");
  EXPECT_EQ(r.origin(), "");
}

TEST(PathTest, ModulePrefixedElementIsNotAnOrigin) {
  gnmi::Path p = Parse("openconfig-interfaces:interfaces/interface");
  EXPECT_EQ(p.origin(), "");
  ASSERT_EQ(p.elem_size(), 2);
  EXPECT_EQ(p.elem(0).name(), "openconfig-interfaces:interfaces");
}

TEST(PathTest, RootAndRelativePaths) {
  EXPECT_EQ(Parse("/").elem_size(), 0);
  EXPECT_EQ(Parse("loom:/").origin(), "loom");
  EXPECT_EQ(Parse("state/counters").elem_size(), 2);
  EXPECT_EQ(FormatPath(gnmi::Path()), "/");
}

TEST(PathTest, MultipleKeysAreFormattedSorted) {
  gnmi::Path p = Parse("/a/b[z=1][a=2]/c");
  EXPECT_EQ(p.elem(1).key_size(), 2);
  EXPECT_EQ(FormatPath(p), "/a/b[a=2][z=1]/c");
}

TEST(PathTest, EscapedCharactersInKeyValues) {
  gnmi::Path p = Parse(R"(/a/b[k=x\]y\\z=w/v]/c)");
  EXPECT_EQ(p.elem(1).key().at("k"), R"(x]y\z=w/v)");
  EXPECT_EQ(Parse(R"(/a[k=a\=b])").elem(0).key().at("k"), "a=b");
  EXPECT_EQ(Parse("/a[name=Ethernet1/1]/b").elem(0).key().at("name"), "Ethernet1/1");
  // Round trip of the awkward value.
  EXPECT_EQ(FormatPath(p), R"(/a/b[k=x\]y\\z=w/v]/c)");
  gnmi::Path again = Parse(FormatPath(p));
  EXPECT_TRUE(loom::proto::SameMessage(again, p));
}

TEST(PathTest, EscapedCharactersInNames) {
  gnmi::Path p = Parse(R"(/a\/b/c\[d)");
  ASSERT_EQ(p.elem_size(), 2);
  EXPECT_EQ(p.elem(0).name(), "a/b");
  EXPECT_EQ(p.elem(1).name(), "c[d");
  EXPECT_EQ(FormatPath(p), R"(/a\/b/c\[d)");
}

TEST(PathTest, RoundTripsCatalogue) {
  for (const char* text : {
           "/interfaces/interface[name=Ethernet1]/state/oper-status",
           "/qos/interfaces/interface[interface-id=Ethernet1]/output/queues/queue[name=3]/state/"
           "ecn-marked-pkts",
           "loom:/pfc/interfaces/interface[name=Ethernet1]/priorities/priority[id=3]/state/rx-pkts",
           "leaf-0@loom:/nic/interfaces/interface[name=eth0]/roce/state/np_cnp_sent",
           "/interfaces/interface[name=*]/state/counters/*",
           "/interfaces/.../in-octets",
       }) {
    gnmi::Path p = Parse(text);
    EXPECT_EQ(FormatPath(p), text);
  }
}

TEST(PathTest, ErrorsNamePosition) {
  EXPECT_NE(ErrorOf("").find("empty path"), std::string::npos);
  EXPECT_NE(ErrorOf("/a//b").find("at 3: empty element name"), std::string::npos);
  EXPECT_NE(ErrorOf("/a/").find("trailing"), std::string::npos);
  EXPECT_NE(ErrorOf("/a[k=v").find("missing ']'"), std::string::npos);
  EXPECT_NE(ErrorOf("/a[kv]").find("at 5: expected '=' in key, found ']'"), std::string::npos);
  EXPECT_NE(ErrorOf("/a[=v]").find("at 3: empty key name"), std::string::npos);
  EXPECT_NE(ErrorOf("/a[k=]").find("empty value"), std::string::npos);
  EXPECT_NE(ErrorOf("/a[k=1][k=2]").find("duplicate key 'k'"), std::string::npos);
  EXPECT_NE(ErrorOf("/a[k=1]x").find("expected '/' or '['"), std::string::npos);
  EXPECT_NE(ErrorOf("/a]").find("unexpected ']'"), std::string::npos);
  EXPECT_NE(ErrorOf("/a\\").find("dangling"), std::string::npos);
  EXPECT_NE(ErrorOf(":/a").find("empty origin"), std::string::npos);
  EXPECT_NE(ErrorOf("t@o@:/a").find("'@' in origin"), std::string::npos);
}

TEST(PathTest, JoinTakesOriginAndTargetFromEitherSide) {
  gnmi::Path prefix = Parse("leaf-0@loom:/pfc/interfaces");
  gnmi::Path rel = Parse("interface[name=E1]/state");
  gnmi::Path j = JoinPath(prefix, rel);
  EXPECT_EQ(FormatPath(j), "leaf-0@loom:/pfc/interfaces/interface[name=E1]/state");
}

TEST(PathMatchTest, WildcardKeyValuesAndElements) {
  gnmi::Path pattern = Parse("/interfaces/interface[name=*]/state/counters/*");
  EXPECT_TRUE(PathMatches(pattern, Parse("/interfaces/interface[name=E1]/state/counters/in-pkts")));
  EXPECT_FALSE(PathMatches(pattern, Parse("/interfaces/interface[name=E1]/state/oper-status")));
  EXPECT_FALSE(PathMatches(pattern, Parse("/interfaces/interface[name=E1]/state/counters")));
  EXPECT_FALSE(PathMatches(pattern, Parse("/interfaces/interface/state/counters/in-pkts")));
}

TEST(PathMatchTest, OmittedKeysMatchAnyValue) {
  EXPECT_TRUE(PathMatches(Parse("/interfaces/interface/state"),
                          Parse("/interfaces/interface[name=E1]/state")));
  EXPECT_FALSE(PathMatches(Parse("/interfaces/interface[name=E2]/state"),
                           Parse("/interfaces/interface[name=E1]/state")));
}

TEST(PathMatchTest, EllipsisMatchesAnyDepth) {
  gnmi::Path pattern = Parse("/qos/.../ecn-marked-pkts");
  EXPECT_TRUE(PathMatches(
      pattern, Parse("/qos/interfaces/interface[interface-id=E1]/output/queues/queue[name=3]/"
                     "state/ecn-marked-pkts")));
  EXPECT_FALSE(PathMatches(pattern, Parse("/qos/interfaces/x")));
  EXPECT_TRUE(PathMatches(Parse("/qos/..."), Parse("/qos")));
}

TEST(PathMatchTest, OriginsAndTargets) {
  EXPECT_TRUE(PathMatches(Parse("/a"), Parse("openconfig:/a")));
  EXPECT_FALSE(PathMatches(Parse("/a"), Parse("loom:/a")));
  EXPECT_TRUE(PathMatches(Parse("loom:/a"), Parse("leaf-0@loom:/a")));
  EXPECT_TRUE(PathMatches(Parse("*@loom:/a"), Parse("leaf-0@loom:/a")));
  EXPECT_FALSE(PathMatches(Parse("leaf-1@loom:/a"), Parse("leaf-0@loom:/a")));
}

}  // namespace
}  // namespace loom::telemetry
