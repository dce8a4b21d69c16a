// The reordering model of per-packet spraying (sim-fabric/reorder.h) and what it costs
// each kind of receiving NIC. Expected values come from the published formulas (the
// M/D/1 Pollaczek-Khinchine mean wait, the go-back-N ARQ efficiency) or from sampling the
// stated distributions independently, never from the engine's output.
#include "sim-fabric/reorder.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "sim-fabric/scenario.h"
#include "tests/sim/sim_test_util.h"

namespace loom::sim {
namespace {

using reorder::Goodput;
using reorder::OvertakeProbability;
using reorder::PathJitter;
using reorder::QueueArrivals;
using reorder::QueueWait;
using reorder::ReorderProbability;
using reorder::StreamWait;
using testing::Clos;
using testing::Make;
using testing::Nic;

constexpr double kServiceNs = 4096 * 8 / 400.0;  // one 4 KB packet at 400G, in ns

TEST(ReorderModel, OnePacedStreamNeverWaitsWhateverItsRate) {
  for (double rho : {0.1, 0.5, 0.9, 1.0}) {
    const double bytes = 1000 * rho;
    auto w = QueueWait({bytes, bytes * bytes, 0, 1000}, kServiceNs);
    EXPECT_EQ(w.p * w.mean_ns, 0) << "rho " << rho;
  }
}

TEST(ReorderModel, ManyRandomStreamsWaitAsAnMD1Queue) {
  // 1,000 equal streams (nu = 1000): the merged arrivals are Poisson (c_a^2 -> 1); fixed
  // packets: M/D/1, whose mean wait is rho t_s / (2 (1 - rho)) (Pollaczek-Khinchine).
  for (double rho : {0.3, 0.5, 0.8}) {
    const double bytes = 1000 * rho, each = bytes / 1000;
    auto w = QueueWait({bytes, 1000 * each * each, 0, 1000}, kServiceNs);
    const double pk = rho * kServiceNs / (2 * (1 - rho));
    EXPECT_NEAR(w.p * w.mean_ns, pk, 0.01 * pk) << "rho " << rho;
    EXPECT_NEAR(w.p, rho, 1e-12);
  }
}

TEST(ReorderModel, FewBurstyStreamsNearSaturationKeepTheirOwnVariability) {
  // 8 sprayed sub-flows of weight 1/8 (each a Bernoulli thinning: c^2 = 7/8) at rho 0.95:
  // QNA's weight on the streams' own variability is 1 / (1 + 4 * 0.05^2 * 7).
  const double bytes = 950, each = bytes / 8;
  auto w = QueueWait({bytes, 8 * each * each, bytes * 7.0 / 8, 1000}, kServiceNs);
  const double mix = 1 / (1 + 4 * 0.05 * 0.05 * 7);
  const double ca2 = mix * 7.0 / 8 + (1 - mix);
  EXPECT_NEAR(w.ca2, ca2, 1e-12);
  EXPECT_NEAR(w.p * w.mean_ns, kServiceNs * 0.95 / 0.05 * ca2 / 2, 1e-9);
  // A stream that is half of the queue waits half as often.
  auto half = StreamWait(w, 0.5);
  EXPECT_NEAR(half.p, w.p / 2, 1e-12);
  EXPECT_EQ(StreamWait(w, 1.0).p, 0);
}

// P(D_a - D_b > spacing) by sampling the zero-or-exponential delays.
double Sampled(double base_a, PathJitter a, double base_b, PathJitter b, double spacing) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  auto draw = [&](const PathJitter& j) {
    if (u(rng) >= j.p) return 0.0;
    return std::exponential_distribution<double>(1 / j.mean_ns)(rng);
  };
  const int n = 400000;
  int hits = 0;
  for (int i = 0; i < n; ++i) hits += base_a + draw(a) - base_b - draw(b) > spacing;
  return static_cast<double>(hits) / n;
}

TEST(ReorderModel, OvertakeProbabilityMatchesSampling) {
  const PathJitter none, light{0.3, 40}, heavy{0.9, 300};
  struct Case {
    double base_a, base_b;
    PathJitter a, b;
  } cases[] = {
      {0, 0, light, light}, {0, 0, heavy, light}, {0, 0, light, heavy},   {0, 0, heavy, none},
      {0, 0, none, heavy},  {200, 0, none, none}, {200, 0, light, heavy}, {0, 150, heavy, heavy},
  };
  for (const auto& c : cases) {
    const double closed = OvertakeProbability(c.base_a, c.a, c.base_b, c.b, 82);
    EXPECT_NEAR(closed, Sampled(c.base_a, c.a, c.base_b, c.b, 82), 0.004)
        << c.base_a << " " << c.a.p << "/" << c.a.mean_ns << " vs " << c.base_b << " " << c.b.p
        << "/" << c.b.mean_ns;
  }
}

TEST(ReorderModel, EqualQuietPathsDoNotReorderASlowerPathDoes) {
  const std::vector<double> w = {0.5, 0.5};
  EXPECT_EQ(ReorderProbability(w, {0, 0}, {PathJitter{}, PathJitter{}}, 82), 0);
  // Path 0 is 200 ns slower than path 1, more than the 82 ns spacing: a packet on path 0
  // followed by one on path 1 (probability 1/4) is overtaken.
  EXPECT_NEAR(ReorderProbability(w, {200, 0}, {PathJitter{}, PathJitter{}}, 82), 0.25, 1e-12);
}

TEST(ReorderModel, GoodputPerReceiver) {
  // Go-back-N ARQ efficiency (1 - p) / (1 + (W - 1) p).
  EXPECT_NEAR(Goodput(ReorderMode::kGoBackN, 0.02, 50), 0.98 / (1 + 49 * 0.02), 1e-12);
  EXPECT_EQ(Goodput(ReorderMode::kGoBackN, 0, 50), 1);
  // At least the packet at the gap per round trip.
  EXPECT_NEAR(Goodput(ReorderMode::kGoBackN, 1, 50), 1.0 / 50, 1e-12);
  EXPECT_NEAR(Goodput(ReorderMode::kSelectiveRepeat, 0.25, 50), 0.8, 1e-12);
  EXPECT_EQ(Goodput(ReorderMode::kTolerant, 0.5, 50), 1);
}

// The engine. A 400G QP sprayed alone over four idle 400G spines is one paced stream at
// every queue it meets, and the paths are equal: nothing arrives out of order.
TEST(ReorderEngine, ALoneSprayedFlowOverIdleEqualPathsStaysInOrder) {
  auto topo = Clos(2, 4, 2, 400e9, 400e9);
  FabricOptions o;
  o.nic_reorder = ReorderMode::kGoBackN;
  auto f = Make(topo, o);
  ASSERT_TRUE(f->SetForwardingMode("*", ForwardingMode::kDlbPerPacket).ok());
  const int q = f->AddFlow(Nic(0), Nic(2), 0);
  f->RunUntil(2 * kNsPerMs);
  NicCounters c;
  ASSERT_TRUE(f->GetNicCounters(Nic(2), &c).ok());
  EXPECT_EQ(c.out_of_sequence, 0u);
  EXPECT_EQ(c.reorder_discarded_bytes, 0u);
  EXPECT_GT(f->GetQp(q).delivered_bytes * 8 / 2e-3, 0.98 * 400e9);
}

// Eight NICs of one leaf each send one long flow to a NIC of the other leaf, sprayed over
// four 400G spines: 8 x 100G (half the uplink capacity) and 8 x 200G (all of it). Where
// the sprayed streams merge, packets wait a few packet times at random: consecutive
// packets of one QP overtake each other. A go-back-N receiver discards a round trip of
// data per event, a selective-repeat one resends a packet, a tolerant one pays nothing.
struct SprayRun {
  double gbps = 0;  // goodput of the 8 flows together
  double oos_fraction = 0;
  double discarded_fraction = 0;
};

SprayRun RunSprayedPermutation(ReorderMode mode, double nic_bps, bool fast_forward = true) {
  auto topo = Clos(2, 4, 8, nic_bps, 400e9);  // leaf0: host000-007, leaf1: host008-015
  FabricOptions o;
  o.nic_reorder = mode;
  o.fast_forward = fast_forward;
  auto f = Make(topo, o);
  EXPECT_TRUE(f->SetForwardingMode("*", ForwardingMode::kDlbPerPacket).ok());
  std::vector<int> qps;
  for (int i = 0; i < 8; ++i) qps.push_back(f->AddFlow(Nic(i), Nic(8 + (i + 3) % 8), 0));
  const TimeNs run = 3 * kNsPerMs;
  f->RunUntil(run);
  SprayRun r;
  double delivered = 0, oos = 0, discarded = 0;
  for (int x : qps) delivered += f->GetQp(x).delivered_bytes;
  for (int i = 8; i < 16; ++i) {
    NicCounters c;
    EXPECT_TRUE(f->GetNicCounters(Nic(i), &c).ok());
    oos += static_cast<double>(c.out_of_sequence);
    discarded += static_cast<double>(c.reorder_discarded_bytes);
  }
  r.gbps = delivered * 8 / (static_cast<double>(run) / 1e9) / 1e9;
  r.oos_fraction = oos * 4096 / std::max(1.0, delivered + discarded);
  r.discarded_fraction = discarded / std::max(1.0, delivered + discarded);
  return r;
}

TEST(ReorderEngine, SprayedStreamsThatMergeReorderAndGoBackNPaysMost) {
  for (double nic : {100e9, 200e9}) {
    const SprayRun tol = RunSprayedPermutation(ReorderMode::kTolerant, nic);
    const SprayRun sr = RunSprayedPermutation(ReorderMode::kSelectiveRepeat, nic);
    const SprayRun gbn = RunSprayedPermutation(ReorderMode::kGoBackN, nic);
    std::printf(
        "8 sprayed flows of %.0fG over 4 x 400G: tolerant %.0f Gb/s (%.3f of packets out of "
        "sequence), selective repeat %.0f Gb/s (%.3f resent), go-back-N %.0f Gb/s (%.3f "
        "discarded)\n",
        nic / 1e9, tol.gbps, tol.oos_fraction, sr.gbps, sr.discarded_fraction, gbn.gbps,
        gbn.discarded_fraction);
    // The tolerant NICs get their line rate (8 x nic within the 1.6T of uplinks)...
    EXPECT_GT(tol.gbps, 0.95 * 8 * nic / 1e9);
    // ... while packets do arrive out of order (below): several streams merge at every
    // uplink and spine downlink.
    EXPECT_LT(sr.gbps, tol.gbps);
    EXPECT_GT(sr.gbps, gbn.gbps);
    // Go-back-N: every reorder event costs a round trip of data (about 20 packets here):
    // a tenth of the goodput at half load, most of it at full load.
    const bool full = nic == 200e9;
    EXPECT_LT(gbn.gbps, (full ? 0.5 : 0.9) * tol.gbps);
    EXPECT_GT(gbn.discarded_fraction, full ? 0.5 : 0.1);
    EXPECT_GT(tol.oos_fraction, full ? 0.1 : 0.005);
  }
}

// A selective-repeat receiver resends one packet per reorder event: what it discards is
// the out-of-sequence bytes over (1 + p), p the out-of-sequence share of what arrived.
TEST(ReorderEngine, SelectiveRepeatResendsOnePacketPerReorderEvent) {
  const SprayRun sr = RunSprayedPermutation(ReorderMode::kSelectiveRepeat, 200e9);
  const double p = sr.oos_fraction;
  ASSERT_GT(p, 0.05);
  EXPECT_NEAR(sr.discarded_fraction, p / (1 + p), 0.1 * p / (1 + p));
}

// Quiescent jumps count the out-of-sequence packets stepping would have counted.
TEST(ReorderEngine, FastForwardCountsWhatSteppingCounts) {
  const SprayRun ff = RunSprayedPermutation(ReorderMode::kTolerant, 100e9, true);
  const SprayRun step = RunSprayedPermutation(ReorderMode::kTolerant, 100e9, false);
  ASSERT_GT(step.oos_fraction, 0);
  EXPECT_NEAR(ff.oos_fraction, step.oos_fraction, 0.01 * step.oos_fraction);
  EXPECT_NEAR(ff.gbps, step.gbps, 0.001 * step.gbps);
}

TEST(ReorderEngine, ScenarioNamesEachReceiverBehaviour) {
  for (const auto& [name, mode] :
       {std::pair<const char*, ReorderMode>{"go-back-n", ReorderMode::kGoBackN},
        {"selective-repeat", ReorderMode::kSelectiveRepeat},
        {"tolerant", ReorderMode::kTolerant}}) {
    LoadedScenario sc;
    std::string err;
    ASSERT_TRUE(ParseScenarioJson(
        std::string(R"({"rail": {"hosts": 2}, "engine": {"nicReorder": ")") + name + "\"}}", ".",
        &sc, &err))
        << err;
    EXPECT_EQ(sc.options.nic_reorder, mode) << name;
  }
}

}  // namespace
}  // namespace loom::sim
