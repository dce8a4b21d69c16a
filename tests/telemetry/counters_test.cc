#include "telemetry/counters.h"

#include <gtest/gtest.h>

namespace loom::telemetry {
namespace {

constexpr TimeNs kSec = kNsPerSec;

TEST(CounterTrackerTest, FirstSampleIsBaselineThenRate) {
  CounterTracker t;
  EXPECT_EQ(t.Add(10 * kSec, 1000).result, CounterResult::kFirst);
  CounterUpdate u = t.Add(12 * kSec, 3000);
  EXPECT_EQ(u.result, CounterResult::kRate);
  EXPECT_DOUBLE_EQ(u.rate, 1000.0);
  EXPECT_EQ(u.delta, 2000u);
  EXPECT_EQ(u.interval_ns, 2 * kSec);
}

TEST(CounterTrackerTest, RateUsesDeviceTimestampsNotArrival) {
  // Two samples 100 ms apart on the device, however late they arrive.
  CounterTracker t;
  t.Add(1 * kSec, 0);
  CounterUpdate u = t.Add(1 * kSec + 100 * kNsPerMs, 50);
  EXPECT_DOUBLE_EQ(u.rate, 500.0);
}

TEST(CounterTrackerTest, SixtyFourBitWrap) {
  CounterTracker t;
  const uint64_t near_top = ~uint64_t{0} - 99;  // 2^64 - 100
  t.Add(1 * kSec, near_top);
  CounterUpdate u = t.Add(2 * kSec, 50);
  EXPECT_EQ(u.result, CounterResult::kWrapped);
  EXPECT_EQ(u.delta, 150u);
  EXPECT_DOUBLE_EQ(u.rate, 150.0);
}

TEST(CounterTrackerTest, ThirtyTwoBitWrap) {
  CounterOptions o;
  o.width_bits = 32;
  CounterTracker t(o);
  t.Add(1 * kSec, 0xFFFFFF00u);
  CounterUpdate u = t.Add(2 * kSec, 0x10);
  EXPECT_EQ(u.result, CounterResult::kWrapped);
  EXPECT_EQ(u.delta, 0x110u);
}

TEST(CounterTrackerTest, BackwardsStepIsResetNotHugeRate) {
  CounterTracker t;
  t.Add(1 * kSec, 5'000'000);
  CounterUpdate u = t.Add(2 * kSec, 1'000);  // Device restarted.
  EXPECT_EQ(u.result, CounterResult::kReset);
  EXPECT_FALSE(HasRate(u.result));
  EXPECT_EQ(u.rate, 0);
  // Re-baselined on the new value.
  u = t.Add(3 * kSec, 3'000);
  EXPECT_EQ(u.result, CounterResult::kRate);
  EXPECT_DOUBLE_EQ(u.rate, 2000.0);
}

TEST(CounterTrackerTest, BackwardsStepWithRateBoundIsResetEvenNearTop) {
  CounterOptions o;
  o.max_rate = 1e6;
  CounterTracker t(o);
  t.Add(1 * kSec, ~uint64_t{0} - 10);
  EXPECT_EQ(t.Add(2 * kSec, 5).result, CounterResult::kWrapped);  // 16/s: plausible wrap.
  t.Add(3 * kSec, 1'000'000'000);                                 // implausible jump up
  EXPECT_EQ(t.Add(4 * kSec, 10).result, CounterResult::kReset);   // back down: reset
}

TEST(CounterTrackerTest, ImplausibleJumpIsRejectedAndRebaselined) {
  CounterOptions o;
  o.max_rate = 1000;
  CounterTracker t(o);
  t.Add(1 * kSec, 0);
  EXPECT_EQ(t.Add(2 * kSec, 1'000'000).result, CounterResult::kImplausible);
  CounterUpdate u = t.Add(3 * kSec, 1'000'500);
  EXPECT_EQ(u.result, CounterResult::kRate);
  EXPECT_DOUBLE_EQ(u.rate, 500.0);
}

TEST(CounterTrackerTest, OutOfOrderAndDuplicateSamplesAreIgnored) {
  CounterTracker t;
  t.Add(10 * kSec, 1000);
  t.Add(12 * kSec, 3000);
  EXPECT_EQ(t.Add(11 * kSec, 2000).result, CounterResult::kOutOfOrder);
  EXPECT_EQ(t.Add(12 * kSec, 3000).result, CounterResult::kOutOfOrder);
  // The late sample did not move the baseline.
  EXPECT_EQ(t.last_timestamp(), 12 * kSec);
  CounterUpdate u = t.Add(13 * kSec, 4000);
  EXPECT_DOUBLE_EQ(u.rate, 1000.0);
}

TEST(CounterTrackerTest, ExplicitResetForgetsBaseline) {
  CounterTracker t;
  t.Add(1 * kSec, 100);
  t.Reset();
  EXPECT_EQ(t.Add(2 * kSec, 5).result, CounterResult::kFirst);
  EXPECT_EQ(t.Add(3 * kSec, 10).result, CounterResult::kRate);
}

TEST(StalenessTest, StaleAfterNIntervals) {
  StalenessPolicy p;
  p.sample_interval_ns = 100 * kNsPerMs;
  p.stale_after_intervals = 3;
  EXPECT_TRUE(IsStale(-1, 0, p));
  EXPECT_FALSE(IsStale(1 * kSec, 1 * kSec, p));
  EXPECT_FALSE(IsStale(1 * kSec, 1 * kSec + 300 * kNsPerMs, p));
  EXPECT_TRUE(IsStale(1 * kSec, 1 * kSec + 301 * kNsPerMs, p));
}

}  // namespace
}  // namespace loom::telemetry
