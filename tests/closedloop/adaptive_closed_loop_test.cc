// Adaptive closed loop (issue 7): GLB, ALB and DLB tuning, run by the real
// controller core against the emulator in shared virtual time.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "controller/adaptive/alb.h"
#include "tests/closedloop/harness.h"
#include "tests/unit/test_util.h"

namespace loom::testing {
namespace {

namespace v1 = loom::v1;
using loom::sim::Collective;
using loom::sim::ForwardingMode;
using loom::sim::JobSpec;

// Interface of `from` that links to `to` (first one).
std::string IfaceTowards(const v1::Topology& t, const std::string& from, const std::string& to) {
  for (const auto& l : t.links()) {
    if (l.a().device() == from && l.b().device() == to) return l.a().interface();
    if (l.b().device() == from && l.a().device() == to) return l.b().interface();
  }
  return "";
}

uint64_t OutOctets(loom::sim::Fabric& f, const std::string& dev, const std::string& ifc) {
  loom::sim::InterfaceCounters c;
  EXPECT_TRUE(f.GetInterfaceCounters(dev, ifc, &c).ok()) << dev << " " << ifc;
  return c.out_octets;
}

int CountEvents(const std::vector<v1::Event>& evs, v1::EventType type) {
  int n = 0;
  for (const auto& e : evs) n += e.type() == type;
  return n;
}

// ------------------------------------------------------------------ GLB --

// The seed's case. leaf1 sends bursts to leaf0 over four spines; a flow from
// leaf2 pinned to spine0 saturates spine0's downlink into leaf0. leaf1 cannot
// see that congestion locally: its uplink to spine0 looks idle at every
// flowlet boundary.
struct GlbRun {
  double jct_ms = 0;
  double late_share_spine0 = 0;  // leaf1->spine0 bytes / all leaf1 uplink bytes, 2nd half
  double share_spine0 = 0;       // same over the whole run
  std::map<std::string, uint32_t> leaf1_weights;  // towards leaf0
};

GlbRun RunRemoteCongestion(bool loom, uint64_t seed) {
  TempDir dir;
  LoopOptions o;
  o.topology = SmallClos(3, 4, 2);
  o.fabric.seed = seed;
  o.loom_programs = loom;
  o.db_path = dir.File("glb.db");
  ClosedLoop loop(o);
  auto& f = loop.fabric();
  EXPECT_TRUE(f.SetForwardingMode("*", ForwardingMode::kDlbFlowlet).ok());
  // Background: leaf2 -> leaf0 pinned to spine0 by a QP color Loom does not own.
  loom::sim::ColorConfig pin;
  pin.interfaces.push_back(IfaceTowards(o.topology, "leaf2", "spine0"));
  EXPECT_TRUE(f.SetColor("leaf2", 99, pin).ok());
  f.AddFlow("host004-gpu0", "host000-gpu0", 0, 3, 0, 0, 99);
  f.AddFlow("host004-gpu1", "host000-gpu1", 0, 3, 0, 0, 99);
  // The bursty job (not registered with Loom: storage-like traffic Loom only sees).
  JobSpec j;
  j.id = "bursty";
  j.tenant = "acme";
  j.collective = Collective::kPointToPoint;
  j.ranks = {"host002-gpu0", "host001-gpu0", "host003-gpu0", "host001-gpu1"};
  j.message_bytes = 8e6;
  j.iterations = 60;
  j.compute_gap_ns = 500 * kNsPerUs;
  j.start_ns = 2 * kNsPerMs;
  std::string err;
  EXPECT_GE(f.AddJob(j, &err), 0) << err;

  std::map<std::string, std::string> up;  // leaf1 uplink interface -> spine
  for (int s = 0; s < 4; ++s) {
    const std::string spine = "spine" + std::to_string(s);
    up[IfaceTowards(o.topology, "leaf1", spine)] = spine;
  }
  auto bytes = [&](std::map<std::string, uint64_t>* m) {
    for (const auto& [ifc, spine] : up) (*m)[spine] = OutOctets(f, "leaf1", ifc);
  };
  std::map<std::string, uint64_t> b0, bmid, bend;
  bytes(&b0);
  EXPECT_TRUE(loop.RunUntilJobsDone(200 * kNsPerMs));
  GlbRun r;
  auto st = f.GetJob(0);
  r.jct_ms = static_cast<double>(st.end_ns - st.start_ns) / 1e6;
  // The second half of the job by iterations.
  (void)bmid;
  bytes(&bend);
  uint64_t total = 0;
  for (const auto& [s, b] : bend) total += b - b0[s];
  r.share_spine0 = total ? static_cast<double>(bend["spine0"] - b0["spine0"]) / total : 0;
  loop.controller().GetDesiredStates([&](Status, std::map<std::string, v1::DeviceState> d) {
    for (const auto& w : d["leaf1"].weights()) {
      if (w.destination() != "leaf0") continue;
      for (const auto& [hop, weight] : w.weights()) r.leaf1_weights[hop] = weight;
    }
  });
  loop.Drain();
  return r;
}

TEST(AdaptiveClosedLoopTest, GlbSteersAroundRemoteDownlinkCongestionLocalDlbDoesNot) {
  int collided = 0;
  for (uint64_t seed : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE(seed);
    GlbRun dlb = RunRemoteCongestion(false, seed);
    GlbRun glb = RunRemoteCongestion(true, seed);
    std::printf(
        "seed %llu: DLB alone JCT %.2f ms, spine0 share %.1f%%; Loom GLB JCT %.2f ms, "
        "spine0 share %.1f%%, leaf1->leaf0 weights:",
        static_cast<unsigned long long>(seed), dlb.jct_ms, dlb.share_spine0 * 100, glb.jct_ms,
        glb.share_spine0 * 100);
    for (const auto& [h, w] : glb.leaf1_weights) std::printf(" %s=%u", h.c_str(), w);
    std::printf("\n");
    // GLB lowered spine0 for (leaf1, leaf0): its remote downlink is congested.
    ASSERT_EQ(glb.leaf1_weights.size(), 4u);
    for (const auto& s : {"spine1", "spine2", "spine3"}) {
      EXPECT_LT(glb.leaf1_weights["spine0"], glb.leaf1_weights[s]) << s;
    }
    // Never worse than local DLB alone.
    EXPECT_LE(glb.share_spine0, std::max(0.10, dlb.share_spine0));
    EXPECT_LE(glb.jct_ms, dlb.jct_ms * 1.02);
    // Where local DLB kept putting flowlets on spine0 (it cannot see the
    // remote congestion), GLB moved them off and the job finished sooner.
    if (dlb.share_spine0 > 0.10) {
      ++collided;
      EXPECT_LT(glb.share_spine0, dlb.share_spine0 / 2);
      EXPECT_LT(glb.jct_ms, dlb.jct_ms);
    }
  }
  // Local DLB alone did walk into the congestion for some seed.
  EXPECT_GT(collided, 0);
}

// ------------------------------------------------------------------ ALB --

// Member loads of leaf0's uplinks towards the spines over a window.
std::vector<double> UplinkLoads(loom::sim::Fabric& f, const v1::Topology& t,
                                const std::map<std::string, uint64_t>& before,
                                std::map<std::string, uint64_t>* after) {
  std::vector<double> loads;
  for (int s = 0; s < 4; ++s) {
    const std::string ifc = IfaceTowards(t, "leaf0", "spine" + std::to_string(s));
    (*after)[ifc] = OutOctets(f, "leaf0", ifc);
    loads.push_back(static_cast<double>((*after)[ifc] - before.at(ifc)));
  }
  return loads;
}

TEST(AdaptiveClosedLoopTest, AlbBringsBucketImbalanceUnderToleranceAndStaysThere) {
  TempDir dir;
  LoopOptions o;
  o.topology = SmallClos(2, 4, 4);
  o.fabric.seed = 3;
  o.loom_programs = true;
  o.db_path = dir.File("alb.db");
  o.telemetry_interval_ns = 100 * kNsPerMs;
  o.control_period_ns = 10 * kNsPerMs;
  o.controller.adaptive.alb_params.scan_interval_ns = 1 * kNsPerSec;
  o.controller.adaptive.alb_params.tolerance = 0.20;
  ClosedLoop loop(o);
  auto& f = loop.fabric();
  ASSERT_TRUE(f.SetGroupMode("leaf0", "leaf1", ForwardingMode::kAlb).ok());
  ASSERT_TRUE(f.InitAlbTable("leaf0", "leaf1", 64).ok());
  // 16 steady flows of unequal rates leaf0 -> leaf1 (1.04 Tb/s over 1.6 Tb/s).
  const double rates_g[] = {20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80, 85, 90, 95};
  for (int i = 0; i < 16; ++i) {
    const int src_host = i % 4, dst_host = 4 + (i / 4) % 4;
    char src[32], dst[32];
    std::snprintf(src, sizeof(src), "host%03d-gpu%d", src_host, i % 2);
    std::snprintf(dst, sizeof(dst), "host%03d-gpu%d", dst_host, (i / 2) % 2);
    f.AddFlow(src, dst, 0, 3, rates_g[i] * 1e9);
  }
  std::map<std::string, uint64_t> before, after;
  for (int s = 0; s < 4; ++s) {
    const std::string ifc = IfaceTowards(o.topology, "leaf0", "spine" + std::to_string(s));
    before[ifc] = OutOctets(f, "leaf0", ifc);
  }
  std::vector<double> imbalance;  // per second
  int alb_events_at_7s = -1;
  for (int sec = 1; sec <= 12; ++sec) {
    loop.RunUntil(sec * kNsPerSec);
    if (sec == 7) alb_events_at_7s = CountEvents(loop.Events(), v1::EVENT_TYPE_ALB_REBALANCED);
    auto loads = UplinkLoads(f, o.topology, before, &after);
    imbalance.push_back(loom::adaptive::AlbImbalance(loads));
    if (getenv("ALB_DEBUG")) {
      for (double l : loads) std::printf(" %.1f", l * 8 / 1e9);
      std::printf(" Gb/s\n");
    }
    before = after;
  }
  std::printf("ALB imbalance per second:");
  for (double x : imbalance) std::printf(" %.0f%%", x * 100);
  std::printf("\n");
  auto events = loop.Events();
  const int moves_events = CountEvents(events, v1::EVENT_TYPE_ALB_REBALANCED);
  for (const auto& e : events) {
    if (e.type() != v1::EVENT_TYPE_ALB_REBALANCED && !getenv("ALB_DEBUG")) continue;
    std::printf("  %s | %s | %s\n", e.cause().c_str(), e.action().c_str(), e.result().c_str());
  }
  // Precondition: hashing alone left the group out of tolerance.
  ASSERT_GT(imbalance[0], 0.20);
  EXPECT_GT(moves_events, 0);
  // Within a bounded number of scans (two to trigger, a few to converge)
  // the imbalance is under tolerance, and it stays there.
  for (size_t s = 6; s < imbalance.size(); ++s) EXPECT_LE(imbalance[s], 0.20) << "second " << s;
  // No oscillation: no rebalancing in the last five seconds of steady load.
  EXPECT_EQ(moves_events, alb_events_at_7s);
  // Loom programmed the table it balanced.
  bool has_table = false;
  loop.controller().GetDesiredStates([&](Status, std::map<std::string, v1::DeviceState> d) {
    for (const auto& t : d["leaf0"].alb_tables()) has_table |= t.group() == "leaf1";
  });
  loop.Drain();
  EXPECT_TRUE(has_table);
}

// ------------------------------------------------------------------ DLB --

TEST(AdaptiveClosedLoopTest, DlbTimerSitsBetweenBurstSpacingAndBurstGaps) {
  TempDir dir;
  LoopOptions o;
  o.topology = SmallClos(2, 4, 2);
  o.fabric.seed = 5;
  o.loom_programs = true;
  o.db_path = dir.File("dlb.db");
  o.controller.adaptive.dlb_interval_ns = 20 * kNsPerMs;
  o.controller.adaptive.dlb_confirm = 2;
  ClosedLoop loop(o);
  JobSpec j;
  j.id = "ring";
  j.tenant = "acme";
  j.collective = Collective::kRingAllReduce;
  j.ranks = {"host000-gpu0", "host002-gpu0", "host001-gpu0", "host003-gpu0"};
  j.message_bytes = 16e6;
  j.iterations = 80;
  const TimeNs gap = 400 * kNsPerUs;
  j.compute_gap_ns = gap;
  j.start_ns = 1 * kNsPerMs;
  loop.AddJob(j);
  ASSERT_TRUE(loop.RunUntilJobsDone(400 * kNsPerMs));
  v1::DlbProfile p;
  loop.controller().GetDesiredStates(
      [&](Status, std::map<std::string, v1::DeviceState> d) { p = d["leaf0"].dlb(); });
  loop.Drain();
  EXPECT_EQ(p.mode(), v1::DLB_MODE_FLOWLET);
  // The timer is shorter than the gaps between bursts (else it never sees
  // a flowlet boundary) and longer than the packet spacing inside a burst
  // (4 KB at 400 Gb/s: 82 ns) and the floor.
  std::printf("DLB timer on leaf0: %.1f us (compute gap %.0f us)\n",
              static_cast<double>(p.inactivity_interval_ns()) / 1e3,
              static_cast<double>(gap) / 1e3);
  EXPECT_LT(static_cast<TimeNs>(p.inactivity_interval_ns()), gap);
  EXPECT_GE(static_cast<TimeNs>(p.inactivity_interval_ns()), 2 * kNsPerUs);
  // It was derived from observed gaps, not the 256 us platform default.
  EXPECT_NE(p.inactivity_interval_ns(), 256u * kNsPerUs);
  EXPECT_GT(CountEvents(loop.Events(), v1::EVENT_TYPE_DLB_TUNED), 0);
  // No reordering for flowlet-mode traffic.
  for (const auto& d : o.topology.devices()) {
    if (d.role() != v1::DEVICE_ROLE_NIC) continue;
    loom::sim::NicCounters c;
    ASSERT_TRUE(loop.fabric().GetNicCounters(d.id(), &c).ok());
    EXPECT_EQ(c.out_of_sequence, 0u) << d.id();
  }
}

}  // namespace
}  // namespace loom::testing

namespace loom::testing {
namespace {

// ------------------------------------------------- placement, mixed jobs --

// Three rings and an all-to-all on a 128-GPU rail fabric (tests/unit/test_util.h
// MakeMixedJobs), registered ring, ring, all-to-all, ring. Each ring fits exactly in
// one spine plane; placed around the all-to-all, the last ring would share uplinks
// with it. With the full recompute after an overloading registration every ring runs
// at line rate; without it the last ring is slowed down.
struct MixedRun {
  std::vector<double> jct_ms;  // per job
  double ring_ideal_ms = 0;
  int overload_recomputes = 0;
};

MixedRun RunMixed(bool recompute_on_overload) {
  TempDir dir;
  MixedJobs m = MakeMixedJobs();
  LoopOptions o;
  o.topology = m.topo->topology();
  o.db_path = dir.File("loom.db");
  o.subscribe_nics = false;
  o.controller.recompute_on_overload = recompute_on_overload;
  o.controller.adaptive.glb = o.controller.adaptive.alb = false;
  o.controller.adaptive.dlb_tuning = o.controller.adaptive.remediation = false;
  ClosedLoop loop(o);
  const double bytes = 32e6;
  const int iterations = 2;
  for (const auto& job : m.jobs) {
    JobSpec spec;
    spec.id = job.job_id();
    spec.tenant = job.tenant();
    spec.collective = job.collective() == v1::COLLECTIVE_PATTERN_ALL_TO_ALL
                          ? Collective::kAllToAll
                          : Collective::kRingAllReduce;
    for (const auto& e : job.endpoints()) spec.ranks.push_back(e);
    spec.message_bytes = bytes;
    spec.iterations = iterations;
    spec.compute_gap_ns = 100 * kNsPerUs;
    spec.start_ns = 1 * kNsPerMs;
    loop.AddJob(spec);
  }
  EXPECT_TRUE(loop.RunUntilJobsDone(1 * kNsPerSec));
  MixedRun r;
  auto& f = loop.fabric();
  for (int j = 0; j < f.job_count(); ++j) {
    auto st = f.GetJob(j);
    r.jct_ms.push_back(static_cast<double>(st.end_ns - st.start_ns) / 1e6);
  }
  // A ring of n ranks on n distinct NICs: every NIC sends 2 (n - 1) / n x S at 400G.
  const double n = static_cast<double>(m.jobs[0].endpoints_size());
  r.ring_ideal_ms =
      (iterations * 2 * (n - 1) / n * bytes * 8 / 400e9 * 1e3) + (iterations - 1) * 0.1;
  for (const auto& e : loop.Events()) {
    if (e.type() == v1::EVENT_TYPE_JOB_UPDATED &&
        e.cause().find("placing job job3 around the others") != std::string::npos) {
      ++r.overload_recomputes;
    }
  }
  return r;
}

TEST(PlacementClosedLoopTest, RingsRunAtLineRateNextToAnAllToAllAfterTheOverloadRecompute) {
  MixedRun with = RunMixed(true);
  MixedRun without = RunMixed(false);
  ASSERT_EQ(with.jct_ms.size(), 4u);
  ASSERT_EQ(without.jct_ms.size(), 4u);
  EXPECT_GT(with.overload_recomputes, 0);
  EXPECT_EQ(without.overload_recomputes, 0);
  for (int j : {0, 1, 3}) {
    EXPECT_LE(with.jct_ms[static_cast<size_t>(j)], 1.03 * with.ring_ideal_ms)
        << "ring job" << j << " (ideal " << with.ring_ideal_ms << " ms)";
  }
  // Without the recompute the last ring shares links with the all-to-all.
  EXPECT_GT(without.jct_ms[3], 1.08 * with.jct_ms[3])
      << "without " << without.jct_ms[3] << " ms, with " << with.jct_ms[3] << " ms";
  std::printf("ring JCTs (ideal %.2f ms): with recompute %.2f %.2f %.2f, without %.2f %.2f %.2f\n",
              with.ring_ideal_ms, with.jct_ms[0], with.jct_ms[1], with.jct_ms[3], without.jct_ms[0],
              without.jct_ms[1], without.jct_ms[3]);
}

}  // namespace
}  // namespace loom::testing
