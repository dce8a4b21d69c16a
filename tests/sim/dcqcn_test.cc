// DCQCN reaction point: the state machine of the SIGCOMM'15 paper, step by step.
#include "sim-fabric/dcqcn.h"

#include <cmath>

#include "gtest/gtest.h"
#include "sim-fabric/thresholds.h"

namespace loom::sim {
namespace {

// One CNP, then only timer events (no bytes sent):
//   CNP at t=0 with alpha=1:  RT <- RC = 40G; RC <- 40G (1 - 1/2) = 20G; alpha <- (1-g) + g = 1.
//   A second CNP at t=1us:    RT <- 20G; RC <- 10G; alpha stays 1.
//   Timer T (55us) fires t=1..4: fast recovery RC <- (RT + RC)/2: 15, 17.5, 18.75, 19.375 G.
//   t=5 (= F): additive increase RT += R_AI (40 Mb/s), RC <- (RT + RC)/2.
//   t=6: again additive (byte counter b=0 <= F).
//   Alpha timer K (55us, no CNP): alpha <- (1-g) alpha each period.
TEST(DcqcnRp, RateAfterCnpFollowsThePaperStepByStep) {
  DcqcnParams p = PaperDcqcnParams();
  const double line = 40e9;
  DcqcnRp rp(p, line, 0);
  ASSERT_TRUE(rp.OnCnp(0));
  EXPECT_DOUBLE_EQ(rp.rate_bps(), 20e9);
  EXPECT_DOUBLE_EQ(rp.target_bps(), 40e9);
  EXPECT_DOUBLE_EQ(rp.alpha(), 1.0);
  rp.AdvanceTo(1000);
  ASSERT_TRUE(rp.OnCnp(1000));
  EXPECT_DOUBLE_EQ(rp.rate_bps(), 10e9);
  EXPECT_DOUBLE_EQ(rp.target_bps(), 20e9);

  double rc = 10e9, rt = 20e9, alpha = 1.0;
  const TimeNs t0 = 1000;
  for (int k = 1; k <= 8; ++k) {
    const TimeNs at = t0 + k * p.t_ns;
    rp.AdvanceTo(at - 1);
    EXPECT_DOUBLE_EQ(rp.rate_bps(), rc) << "before event " << k;
    rp.AdvanceTo(at);
    alpha *= (1 - p.g);  // K == T: the alpha timer fires at the same instants
    if (k < p.f) {
      rc = (rt + rc) / 2;  // fast recovery
    } else {
      rt += p.rai_bps;  // additive increase (min(t, b) = 0 <= F)
      rc = (rt + rc) / 2;
    }
    EXPECT_EQ(rp.timer_count(), k);
    EXPECT_DOUBLE_EQ(rp.rate_bps(), rc) << "event " << k;
    EXPECT_DOUBLE_EQ(rp.target_bps(), rt) << "event " << k;
    EXPECT_DOUBLE_EQ(rp.alpha(), alpha) << "event " << k;
  }
  // Fast recovery halved the gap 4 times: 10 -> 15 -> 17.5 -> 18.75 -> 19.375 G.
  rp = DcqcnRp(p, line, 0);
  rp.OnCnp(0);
  rp.AdvanceTo(4 * p.t_ns);
  EXPECT_DOUBLE_EQ(rp.rate_bps(), 20e9 + 20e9 * (1 - 1.0 / 16));
}

// The byte counter is an increase event too; with both counters past F the
// RP enters hyper increase: RT += (min(t,b) - F) R_HAI.
TEST(DcqcnRp, ByteCounterAndHyperIncrease) {
  DcqcnParams p = PaperDcqcnParams();
  p.t_ns = 1'000'000'000;  // keep the timer out of the way
  p.k_ns = 1'000'000'000;
  DcqcnRp rp(p, 100e9, 0);
  rp.OnCnp(0);  // RC 50G, RT 100G
  double rc = 50e9, rt = 100e9;
  rp.OnBytesSent(p.b_bytes, 1);  // b = 1 < F: fast recovery
  rc = (rt + rc) / 2;
  EXPECT_EQ(rp.byte_count(), 1);
  EXPECT_DOUBLE_EQ(rp.rate_bps(), rc);
  // Second CNP, then drive both counters: timer via a short T.
  p.t_ns = 10'000;
  rp = DcqcnRp(p, 100e9, 0);
  rp.OnCnp(0);
  rp.OnCnp(0);  // RC 25G, RT 50G
  rc = 25e9;
  rt = 50e9;
  int t = 0, b = 0;
  auto step = [&](bool timer) {
    if (timer)
      ++t;
    else
      ++b;
    const int hi = std::max(t, b), lo = std::min(t, b);
    if (hi < p.f) {
    } else if (lo > p.f) {
      rt += (lo - p.f) * p.rhai_bps;
    } else {
      rt += p.rai_bps;
    }
    rt = std::min(rt, 100e9);
    rc = (rt + rc) / 2;
  };
  for (int i = 1; i <= 7; ++i) {
    rp.AdvanceTo(i * p.t_ns);
    step(true);
    rp.OnBytesSent(p.b_bytes, i * p.t_ns);
    step(false);
    EXPECT_DOUBLE_EQ(rp.rate_bps(), rc) << i;
    EXPECT_DOUBLE_EQ(rp.target_bps(), rt) << i;
  }
  EXPECT_GT(rp.target_bps(), 50e9 + 2 * p.rhai_bps);  // hyper increase happened
}

// Vendor preset: a CNP within 4us of the last cut is ignored; a cut never
// goes below 50 % of the current rate; the rate never goes below min_rate.
TEST(DcqcnRp, VendorPresetCollectsCnpsAndLimitsCuts) {
  DcqcnParams p = VendorDcqcnParams();
  DcqcnRp rp(p, 400e9, 0);
  // CNPs only set the "arrived" bit; one cut per 4 us interval, never below 50 % of RC.
  EXPECT_TRUE(rp.OnCnp(0));
  EXPECT_DOUBLE_EQ(rp.rate_bps(), 400e9);
  EXPECT_TRUE(rp.OnCnp(2'000));
  rp.AdvanceTo(4'000);
  EXPECT_DOUBLE_EQ(rp.rate_bps(), 400e9);  // the check is 1 ns after the interval
  rp.AdvanceTo(4'001);
  EXPECT_DOUBLE_EQ(rp.rate_bps(), 200e9);  // alpha 1 -> a 50 % cut (the limit)
  rp.AdvanceTo(8'001);
  EXPECT_DOUBLE_EQ(rp.rate_bps(), 200e9);  // no CNP in the second interval: no cut
  for (int i = 0; i < 100; ++i) {
    rp.AdvanceTo(8'002 + i * 4'000);
    rp.OnCnp(8'002 + i * 4'000);
  }
  rp.AdvanceTo(8'002 + 100 * 4'000);
  EXPECT_DOUBLE_EQ(rp.rate_bps(), p.min_rate_bps);
}

// The NIC model's rules as the HPCC simulator implements them (rdma-hw.cc,
// cnp_received_mlx / UpdateAlphaMlx / CheckRateDecreaseMlx / RateIncEventTimerMlx).
TEST(DcqcnRp, Ns3MlxFollowsThePacketLevelModel) {
  const DcqcnParams p = Ns3MlxDcqcnParams();
  const double g = p.g;
  DcqcnRp rp(p, 100e9, 0);
  // First CNP at t=0: alpha = 1, RC = RT = 1.0 x RC, alpha clock every 1 us from now,
  // decrease check at 4 us + 1 ns.
  ASSERT_TRUE(rp.OnCnp(0));
  EXPECT_DOUBLE_EQ(rp.alpha(), 1.0);
  rp.AdvanceTo(4'001);
  // Alpha ticks at 1..4 us saw no CNP: alpha = (1-g)^4 at the cut.
  const double a = std::pow(1 - g, 4);
  EXPECT_NEAR(rp.alpha(), a, 1e-12);
  const double rc1 = 100e9 * (1 - a / 2);
  EXPECT_NEAR(rp.rate_bps(), rc1, 1);
  EXPECT_DOUBLE_EQ(rp.target_bps(), 100e9);  // no increase before the cut: RT not clamped
  // A second CNP before any increase: the cut leaves RT at 100G (CLAMP_TARGET_RATE 0).
  rp.AdvanceTo(5'000);
  ASSERT_TRUE(rp.OnCnp(5'000));
  rp.AdvanceTo(6'000);
  const double a2 = rp.alpha();  // tick at 6 us saw the CNP: raised
  EXPECT_NEAR(a2, (1 - g) * std::pow(1 - g, 1) * a + g, 1e-9);
  rp.AdvanceTo(8'001);
  const double rc2 = rc1 * (1 - rp.alpha() / 2);
  EXPECT_NEAR(rp.rate_bps(), rc2, 1e3);
  EXPECT_DOUBLE_EQ(rp.target_bps(), 100e9);
  // Rate timer from the last cut (8 us + 1 ns), every 300 us: stage 0 -> fast recovery,
  // stage 1 (= F) -> additive increase, stage 2 -> hyper increase by R_HAI (not scaled).
  rp.AdvanceTo(8'001 + 300'000);
  const double rc3 = (rc2 + 100e9) / 2;
  EXPECT_NEAR(rp.rate_bps(), rc3, 1e3);
  // A CNP now clamps RT to RC (RC rose since the last cut).
  DcqcnRp clamp = rp;
  ASSERT_TRUE(clamp.OnCnp(8'001 + 300'000));
  clamp.AdvanceTo(8'001 + 304'000);
  EXPECT_NEAR(clamp.target_bps(), rc3, 1e3);
  rp.AdvanceTo(8'001 + 600'000);
  EXPECT_DOUBLE_EQ(rp.target_bps(), 100e9);  // RT + 20 Mb/s, capped at line rate
  EXPECT_NEAR(rp.rate_bps(), (rc3 + 100e9) / 2, 1e3);
}

// The rate timer, re-armed at a cut, lands on the 4 us decrease grid; ns-3 runs it before
// the decrease check due at the same instant (it was scheduled first), so a CNP collected
// meanwhile finds RC just raised: RT is clamped to it, then RC is cut.
TEST(DcqcnRp, Ns3MlxRateTimerRunsBeforeTheDecreaseCheckAtTheSameInstant) {
  DcqcnRp rp(Ns3MlxDcqcnParams(), 100e9, 0);
  ASSERT_TRUE(rp.OnCnp(0));
  rp.AdvanceTo(4'001);  // the first cut
  const double rc1 = rp.rate_bps();
  ASSERT_LT(rc1, 60e9);
  rp.AdvanceTo(302'001);
  ASSERT_TRUE(rp.OnCnp(302'001));
  rp.AdvanceTo(304'001);                      // timer (4,001 + 300 us) and decrease check coincide
  const double raised = (rc1 + 100e9) / 2;    // fast recovery first
  EXPECT_NEAR(rp.target_bps(), raised, 1e3);  // clamped: RC rose since the last cut
  EXPECT_LT(rp.rate_bps(), raised);           // then cut
}

TEST(DcqcnRp, HyperIncreaseByTheTimerAloneAddsRhaiPerEvent) {
  DcqcnParams p = Ns3MlxDcqcnParams();
  DcqcnRp rp(p, 100e9, 0);
  ASSERT_TRUE(rp.OnCnp(0));
  rp.AdvanceTo(4'001);    // cut at 4 us + 1 ns
  rp.AdvanceTo(304'001);  // fast recovery: RC rose
  ASSERT_TRUE(rp.OnCnp(304'001));
  rp.AdvanceTo(308'001);  // cut (the 4 us grid) with RT <- RC
  const double rt0 = rp.target_bps();
  ASSERT_LT(rt0, 99e9);
  const TimeNs cut = 308'001;
  rp.AdvanceTo(cut + 3 * 300'000);  // fast recovery, additive, hyper
  EXPECT_NEAR(rp.target_bps(), rt0 + p.rai_bps + p.rhai_bps, 1);
  rp.AdvanceTo(cut + 4 * 300'000);
  EXPECT_NEAR(rp.target_bps(), rt0 + p.rai_bps + 2 * p.rhai_bps, 1);
}

TEST(DcqcnRp, ParamsAreValidated) {
  EXPECT_EQ(DcqcnParamsError(PaperDcqcnParams()), "");
  EXPECT_EQ(DcqcnParamsError(Ns3MlxDcqcnParams()), "");
  EXPECT_EQ(DcqcnParamsError(VendorDcqcnParams()), "");
  DcqcnParams p;
  p.t_ns = 0;
  EXPECT_NE(DcqcnParamsError(p).find("t_ns"), std::string::npos);
  p = {};
  p.decrease_interval_ns = -1;
  EXPECT_NE(DcqcnParamsError(p).find("decrease_interval_ns"), std::string::npos);
  DcqcnParams out;
  EXPECT_TRUE(DcqcnPresetByName("ns3-mlx", &out));
  EXPECT_EQ(out.decrease_interval_ns, 4 * kNsPerUs);
  EXPECT_FALSE(DcqcnPresetByName("mlx", &out));
}

// DCQCN paper, buffer settings: Trident II with B = 12 MB shared buffer,
// n = 32 ports of 40 Gb/s, 8 priorities, PFC headroom t_flight = 22.4 KB per
// port and priority. The static PFC threshold is bounded by
//   (12 MB - 8 * 32 * 22.4 KB) / (8 * 32) = (12e6 - 5,734,400) / 256 = 24,475 B = 24.47 KB,
// which is why the paper moves to dynamic thresholds (beta = 8). Our derived
// worst case for ECN-before-PFC with dynamic thresholds (every one of the 8n
// ingress queues at t_ECN): t_ECN < beta (B - 8 n t_flight) / (8 (n beta + 1))
//   = 8 * 6,265,600 / (8 * 257) = 24,379.8 B. The paper's Kmin = 5 KB is below both.
TEST(Thresholds, ReproducesTheDcqcnPaperBufferExample) {
  BufferSwitch sw;
  sw.buffer_bytes = 12e6;
  sw.ports = 32;
  sw.priorities = 8;
  sw.port_bps = 40e9;
  sw.headroom_bytes = 22.4e3;
  sw.beta = 8;
  BufferThresholds t = ComputeBufferThresholds(sw, 5e3);
  EXPECT_NEAR(t.static_pfc_max_bytes, 24'475, 1);
  EXPECT_NEAR(t.ecn_max_bytes_dynamic, 24'379.8, 0.1);
  EXPECT_NEAR(t.dynamic_pfc_empty_bytes, 8 * 6'265'600.0 / 8, 1);
  EXPECT_TRUE(t.paper_settings_ok);
  // A Kmin above the bound is flagged.
  EXPECT_FALSE(ComputeBufferThresholds(sw, 30e3).paper_settings_ok);
  // Headroom from the cable: 2 x BDP(300 m at 40G = 1.5 us -> 7.5 KB) + 3.84 us x 5 B/ns
  // + 2 x 1500 B MTU = 15 KB + 19.2 KB + 3 KB = 37.2 KB.
  EXPECT_NEAR(PfcHeadroomBytes(40e9, 300, 3840, 1500), 37'200, 1);
}

}  // namespace
}  // namespace loom::sim
