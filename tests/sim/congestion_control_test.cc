// The congestion-control seam (sim-fabric/congestion_control.h): a second algorithm and a
// second congestion point plug in through the interfaces alone, and the engine runs them
// with its own queue, hop and NIC code.
#include "sim-fabric/congestion_control.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "sim-fabric/fabric.h"
#include "tests/sim/sim_test_util.h"

namespace loom::sim {
namespace {

using testing::Clos;
using testing::IfaceTo;
using testing::Make;
using testing::Nic;
using testing::OutOctets;

// A delay-based algorithm in the manner of Swift (Kumar et al., SIGCOMM 2020): the
// receiver acknowledges every step's bytes with the round trip they saw; the sender adds
// `ai_bps` per round trip of acknowledged bytes while the delay is under the target and,
// at most once per round trip, cuts by beta x (delay - target) / delay (at most max_cut)
// above it. Test
// fixture: enough of the algorithm to show the seam carries one, not a validated model.
struct DelayParams {
  double target_ns = 20'000;
  double ai_bps = 1e9;
  double beta = 0.8, max_cut = 0.5;
  double min_bps = 1e8;
};

class DelayRateControl final : public RateControl {
 public:
  DelayRateControl(const DelayParams& p, double line_bps)
      : p_(p), line_(line_bps), rate_(line_bps) {}
  void Reset(double line_bps, TimeNs) override { line_ = rate_ = line_bps; }
  void AdvanceTo(TimeNs) override {}
  TimeNs next_event_ns() const override { return std::numeric_limits<TimeNs>::max() / 4; }
  void OnBytesSent(double, TimeNs) override {}
  bool OnFeedback(const CcFeedback& fb, TimeNs now) override {
    if (fb.kind != CcFeedback::Kind::kAck) return false;
    last_rtt_ = fb.rtt_ns;
    if (fb.rtt_ns <= p_.target_ns) {
      // ai_bps per round trip's worth of acknowledged bytes.
      const double rtt_s = std::max(fb.rtt_ns, 1.0) * 1e-9;
      rate_ = std::min(line_, rate_ + p_.ai_bps * fb.bytes * 8 / (rate_ * rtt_s));
    } else if (now - last_cut_ >= fb.rtt_ns) {
      const double cut = std::min(p_.max_cut, p_.beta * (fb.rtt_ns - p_.target_ns) / fb.rtt_ns);
      rate_ = std::max(p_.min_bps, rate_ * (1 - cut));
      last_cut_ = now;
    }
    return true;
  }
  double rate_bps() const override { return rate_; }
  double line_rate_bps() const override { return line_; }
  bool Steady() const override { return true; }  // changes only on feedback
  TimeNs next_change_ns() const override { return next_event_ns(); }
  double bytes_to_next_change() const override { return 1e300; }
  double target_bps() const override { return rate_; }

 private:
  DelayParams p_;
  double line_, rate_;
  double last_rtt_ = 0;
  TimeNs last_cut_ = std::numeric_limits<TimeNs>::min() / 4;
};

class AckEveryStep final : public NotificationPoint {
 public:
  bool every_delivery() const override { return true; }
  bool needs_rtt() const override { return true; }
  int OnDelivery(const CcDelivery& d, NpQpState*, Rng&, CcFeedback* out,
                 int max_out) const override {
    if (max_out < 1 || d.arrived <= 0) return 0;
    out[0].kind = CcFeedback::Kind::kAck;
    out[0].bytes = d.arrived;
    out[0].rtt_ns = d.rtt_ns;
    out[0].ecn_fraction = d.marked / d.arrived;
    return 1;
  }
};

class DelayCc final : public CongestionControl {
 public:
  explicit DelayCc(const DelayParams& p) : p_(p) {}
  std::string name() const override { return "delay"; }
  bool enabled() const override { return true; }
  std::unique_ptr<RateControl> NewRateControl(double line_bps, TimeNs) const override {
    return std::make_unique<DelayRateControl>(p_, line_bps);
  }
  const NotificationPoint& notification_point() const override { return np_; }
  bool Reconfigure(RateControl* rc, TimeNs) const override {
    return dynamic_cast<DelayRateControl*>(rc) != nullptr;
  }

 private:
  DelayParams p_;
  AckEveryStep np_;
};

// A congestion point that never marks.
class NoMarking final : public CongestionPoint {
 public:
  double MarkProbability(const CpQueue&) const override { return 0; }
};

struct IncastRun {
  double util = 0, mean_queue = 0;
  uint64_t marked = 0, cnps = 0, pfc = 0;
};

// 8:1 incast at 100G through one switch (the bottleneck is leaf0 -> host008).
IncastRun RunIncast(const FabricOptions& o) {
  const int n = 8;
  auto topo = Clos(1, 1, n + 1, 100e9, 100e9);
  auto f = Make(topo, o);
  for (int i = 0; i < n; ++i) f->AddFlow(Nic(i), Nic(n), 0);
  const TimeNs warm = 10 * kNsPerMs, end = 30 * kNsPerMs;
  f->RunUntil(warm);
  const std::string bott = IfaceTo(topo, "leaf0", Nic(n));
  const double oct0 = OutOctets(*f, "leaf0", bott);
  double qsum = 0;
  int samples = 0;
  while (f->now() < end) {
    f->Step();
    QueueCounters c;
    EXPECT_TRUE(f->GetQueueCounters("leaf0", bott, 3, &c).ok());
    qsum += static_cast<double>(c.current_depth_bytes);
    ++samples;
  }
  IncastRun r;
  r.util =
      (OutOctets(*f, "leaf0", bott) - oct0) * 8 / (100e9 * static_cast<double>(end - warm) / 1e9);
  r.mean_queue = qsum / samples;
  QueueCounters c;
  EXPECT_TRUE(f->GetQueueCounters("leaf0", bott, 3, &c).ok());
  r.marked = c.ecn_marked_pkts;
  for (int i = 0; i < n; ++i) {
    NicCounters nc;
    EXPECT_TRUE(f->GetNicCounters(Nic(i), &nc).ok());
    r.cnps += nc.rp_cnp_handled;
  }
  for (const auto& i : f->Interfaces("leaf0")) {
    PfcCounters pc;
    EXPECT_TRUE(f->GetPfcCounters("leaf0", i, 3, &pc).ok());
    r.pfc += pc.tx_pkts;
  }
  return r;
}

TEST(CongestionControlSeam, ADelayBasedAlgorithmHoldsTheQueueNearItsTarget) {
  FabricOptions o;
  DelayParams p;
  o.congestion_control = std::make_shared<DelayCc>(p);
  o.congestion_point = std::make_shared<NoMarking>();
  const IncastRun r = RunIncast(o);
  // Target 20 us of round trip over 2 us of base round trip: about 18 us of queueing at
  // 100G = 225 KB standing queue; no ECN marks, no CNPs; the link stays busy.
  const double target_queue = (p.target_ns - 2'000) * 100e9 / 8e9;
  std::printf(
      "8:1 incast, delay-based: utilization %.3f, mean queue %.0f KB (target ~%.0f KB), "
      "%llu marked, %llu CNPs, %llu PFC frames\n",
      r.util, r.mean_queue / 1e3, target_queue / 1e3, static_cast<unsigned long long>(r.marked),
      static_cast<unsigned long long>(r.cnps), static_cast<unsigned long long>(r.pfc));
  EXPECT_GT(r.util, 0.9);
  EXPECT_GT(r.mean_queue, 0.3 * target_queue);
  EXPECT_LT(r.mean_queue, 3 * target_queue);
  EXPECT_EQ(r.marked, 0u);
  EXPECT_EQ(r.cnps, 0u);
}

TEST(CongestionControlSeam, TheCongestionPointDecidesWhatIsMarked) {
  FabricOptions o;  // DCQCN (ns3-mlx), RED/ECN by default
  const IncastRun red = RunIncast(o);
  EXPECT_GT(red.marked, 0u);
  EXPECT_GT(red.cnps, 0u);
  // The same DCQCN with a congestion point that never marks: no CNP, and PFC alone holds
  // the queue.
  o.congestion_point = std::make_shared<NoMarking>();
  const IncastRun none = RunIncast(o);
  EXPECT_EQ(none.marked, 0u);
  EXPECT_EQ(none.cnps, 0u);
  EXPECT_GT(none.pfc, 0u);
  EXPECT_GT(none.mean_queue, red.mean_queue);
}

// The notification point is the receiver's and the reaction point the sender's: a
// connection needs both ends on one algorithm, so the test switches every NIC.
TEST(CongestionControlSeam, SwitchingTheAlgorithmReplacesTheQpsReactionPoints) {
  auto topo = Clos(1, 1, 3, 100e9, 100e9);
  FabricOptions o;
  o.congestion_point = std::make_shared<NoMarking>();  // the delay-based one needs no ECN
  auto f = Make(topo, o);
  const int q = f->AddFlow(Nic(0), Nic(2), 0);
  const int q2 = f->AddFlow(Nic(1), Nic(2), 0);
  f->RunUntil(2 * kNsPerMs);
  EXPECT_FALSE(std::isnan(f->GetQp(q).alpha));  // DCQCN's alpha
  ASSERT_TRUE(f->SetCongestionControl("*", std::make_shared<DelayCc>(DelayParams{})).ok());
  f->RunUntil(6 * kNsPerMs);
  EXPECT_TRUE(std::isnan(f->GetQp(q).alpha));  // the delay-based one has none
  // It acts: two 100G senders into one 100G receiver share it instead of both sending at
  // line rate into PFC.
  const double r1 = f->GetQp(q).rate_bps, r2 = f->GetQp(q2).rate_bps;
  EXPECT_LT(r1 + r2, 1.5 * 100e9) << r1 / 1e9 << " + " << r2 / 1e9 << " Gb/s";
  EXPECT_GT(f->GetQp(q).delivered_bytes, 0);
  EXPECT_FALSE(
      f->SetCongestionControl("no-such-nic", std::make_shared<DelayCc>(DelayParams{})).ok());
  EXPECT_FALSE(f->SetCongestionControl(Nic(0), nullptr).ok());
}

}  // namespace
}  // namespace loom::sim
