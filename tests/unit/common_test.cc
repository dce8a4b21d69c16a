#include <gtest/gtest.h>

#include "common/clock.h"
#include "common/flags.h"

namespace loom {
namespace {

TEST(VirtualClockTest, MovesOnlyWhenTold) {
  VirtualClock c(5);
  EXPECT_EQ(c.Now(), 5);
  c.Advance(10);
  EXPECT_EQ(c.Now(), 15);
  c.Set(3);  // never backwards
  EXPECT_EQ(c.Now(), 15);
  c.Set(100);
  EXPECT_EQ(c.Now(), 100);
  EXPECT_EQ(c.WallNow() - c.Now(), VirtualClock().WallNow());
}

TEST(SteadyClockTest, IsMonotonic) {
  SteadyClock c;
  TimeNs a = c.Now();
  TimeNs b = c.Now();
  EXPECT_LE(a, b);
}

TEST(FlagsTest, ParsesValuesBoolsAndPositionals) {
  const char* argv[] = {"prog", "links", "--server=x:1", "--json", "drain", "--reason", "r r"};
  Flags f;
  std::string err;
  ASSERT_TRUE(f.Parse(7, const_cast<char**>(argv), 1, {"server", "reason"}, {"json"}, &err));
  EXPECT_EQ(f.Get("server"), "x:1");
  EXPECT_TRUE(f.Has("json"));
  EXPECT_EQ(f.Get("reason"), "r r");
  EXPECT_EQ(f.positional(), (std::vector<std::string>{"links", "drain"}));
}

TEST(FlagsTest, RejectsUnknownAndMissingValue) {
  const char* a1[] = {"prog", "--bogus"};
  Flags f;
  std::string err;
  EXPECT_FALSE(f.Parse(2, const_cast<char**>(a1), 1, {}, {}, &err));
  EXPECT_NE(err.find("--bogus"), std::string::npos);
  const char* a2[] = {"prog", "--server"};
  Flags g;
  EXPECT_FALSE(g.Parse(2, const_cast<char**>(a2), 1, {"server"}, {}, &err));
  EXPECT_NE(err.find("needs a value"), std::string::npos);
}

TEST(FlagsTest, BitRates) {
  int64_t v = 0;
  ASSERT_TRUE(ParseBitRate("400G", &v));
  EXPECT_EQ(v, 400'000'000'000);
  ASSERT_TRUE(ParseBitRate("25M", &v));
  EXPECT_EQ(v, 25'000'000);
  EXPECT_FALSE(ParseBitRate("fast", &v));
  EXPECT_FALSE(ParseBitRate("-1G", &v));
}

}  // namespace
}  // namespace loom
