// The engine's in-process counter/config interface, workloads and faults.
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sim-fabric/fabric.h"
#include "sim-fabric/scenario.h"
#include "tests/sim/sim_test_util.h"

namespace loom::sim {
namespace {

using testing::Clos;
using testing::IfaceTo;
using testing::Make;
using testing::Nic;
using testing::OutOctets;

TEST(FabricApi, SingleFlowRunsAtLineRateAndCountersAddUp) {
  auto topo = Clos(2, 2, 2, 100e9, 100e9);
  auto f = Make(topo, FabricOptions{});
  const int q = f->AddFlow(Nic(0), Nic(2), 10e6);
  ASSERT_GE(q, 0);
  f->RunUntil(2 * kNsPerMs);
  const QpInfo info = f->GetQp(q);
  EXPECT_NEAR(info.delivered_bytes, 10e6, 1);
  // 10 MB at 100 Gb/s = 800 us (+ a few us of pipeline).
  InterfaceCounters nic;
  ASSERT_TRUE(f->GetInterfaceCounters(Nic(0), "eth0", &nic).ok());
  EXPECT_NEAR(static_cast<double>(nic.out_octets), 10e6, 1);
  EXPECT_EQ(nic.out_pkts, static_cast<uint64_t>(10e6 / 4096 + 0.5));
  NicCounters rx;
  ASSERT_TRUE(f->GetNicCounters(Nic(2), &rx).ok());
  EXPECT_NEAR(static_cast<double>(rx.rx_bytes), 10e6, 1);
  EXPECT_EQ(f->GetInterfaceCounters("nope", "eth0", &nic).code(), StatusCode::kNotFound);
}

TEST(FabricApi, RingAllReduceCompletesNearBandwidthBound) {
  auto topo = Clos(2, 2, 2, 100e9, 100e9);
  auto f = Make(topo, FabricOptions{});
  JobSpec j;
  j.id = "ar";
  for (int i = 0; i < 4; ++i) j.ranks.push_back("host00" + std::to_string(i) + "-gpu0");
  j.message_bytes = 40e6;
  j.iterations = 2;
  j.compute_gap_ns = 100 * kNsPerUs;
  std::string err;
  ASSERT_EQ(f->AddJob(j, &err), 0) << err;
  ASSERT_TRUE(f->RunUntilJobsDone(50 * kNsPerMs));
  JobStatus st = f->GetJob(0);
  ASSERT_EQ(st.collective_ns.size(), 2u);
  // Each rank sends 2 (n-1)/n S = 60 MB at 100 Gb/s: 4.8 ms lower bound.
  for (TimeNs t : st.collective_ns) {
    EXPECT_GE(t, 4.8 * kNsPerMs);
    EXPECT_LT(t, 6.0 * kNsPerMs);
  }
}

TEST(FabricApi, EveryCollectiveFinishes) {
  auto topo = Clos(2, 2, 4, 100e9, 100e9);
  for (Collective c : {Collective::kRingAllReduce, Collective::kTreeAllReduce,
                       Collective::kAllGather, Collective::kReduceScatter, Collective::kAllToAll,
                       Collective::kIncast, Collective::kPermutation, Collective::kPointToPoint}) {
    auto f = Make(topo, FabricOptions{});
    JobSpec j;
    j.id = CollectiveName(c);
    j.collective = c;
    for (int i = 0; i < 8; ++i) j.ranks.push_back("host00" + std::to_string(i) + "-gpu0");
    j.message_bytes = 4e6;
    j.qps_per_connection = 2;
    std::string err;
    ASSERT_EQ(f->AddJob(j, &err), 0) << err;
    EXPECT_TRUE(f->RunUntilJobsDone(50 * kNsPerMs)) << j.id;
  }
}

TEST(FabricApi, LinkDownReroutesAndCountsCarrierTransitions) {
  auto topo = Clos(2, 2, 1, 100e9, 100e9);
  auto f = Make(topo, FabricOptions{});
  const int q = f->AddFlow(Nic(0), Nic(1), 0);
  f->Step();
  const std::string up0 = IfaceTo(topo, "leaf0", "spine0"), up1 = IfaceTo(topo, "leaf0", "spine1");
  const std::string used = f->GetQp(q).path[1];
  const std::string link = used == "leaf0:" + up0 ? topo.links(0).id() : "";
  std::string link_id;
  for (const auto& l : topo.links()) {
    if ("leaf0:" + l.a().interface() == used && l.a().device() == "leaf0") link_id = l.id();
  }
  ASSERT_FALSE(link_id.empty());
  ASSERT_TRUE(f->SetLinkUp(link_id, false).ok());
  f->RunUntil(kNsPerMs);
  EXPECT_NE(f->GetQp(q).path[1], used);
  InterfaceCounters c;
  ASSERT_TRUE(f->GetInterfaceCounters("leaf0", used.substr(6), &c).ok());
  EXPECT_FALSE(c.oper_up);
  EXPECT_EQ(c.carrier_transitions, 1u);
  const double d0 = f->GetQp(q).delivered_bytes;
  f->RunUntil(2 * kNsPerMs);
  EXPECT_NEAR((f->GetQp(q).delivered_bytes - d0) * 8 / 1e-3, 100e9, 1e9);
}

// Colors: traffic of color 10 may only use leaf0 -> spine1; when that link
// fails it falls back to the backup color 20 (leaf0 -> spine0).
TEST(FabricApi, ColorsPinTrafficAndFallBackToBackup) {
  auto topo = Clos(2, 2, 4, 100e9, 100e9);
  auto f = Make(topo, FabricOptions{});
  const std::string s0 = IfaceTo(topo, "leaf0", "spine0"), s1 = IfaceTo(topo, "leaf0", "spine1");
  ASSERT_TRUE(f->SetColor("leaf0", 10, {{s1}, 20}).ok());
  ASSERT_TRUE(f->SetColor("leaf0", 20, {{s0}, 0}).ok());
  std::vector<int> qps;
  for (int i = 0; i < 4; ++i) qps.push_back(f->AddFlow(Nic(i), Nic(4 + i), 0, 3, 0, 0, 10));
  f->Step();
  for (int q : qps) EXPECT_EQ(f->GetQp(q).path[1], "leaf0:" + s1);
  std::string link;
  for (const auto& l : topo.links()) {
    if (l.a().device() == "leaf0" && l.a().interface() == s1) link = l.id();
  }
  ASSERT_TRUE(f->SetLinkUp(link, false).ok());
  f->Step();
  for (int q : qps) EXPECT_EQ(f->GetQp(q).path[1], "leaf0:" + s0);
}

// Link id of `device`:`iface`.
std::string LinkOf(const loom::v1::Topology& topo, const std::string& device,
                   const std::string& iface) {
  for (const auto& l : topo.links()) {
    if ((l.a().device() == device && l.a().interface() == iface) ||
        (l.b().device() == device && l.b().interface() == iface)) {
      return l.id();
    }
  }
  return "";
}

// Per-destination colored routes (TELB over BGP-DPF): on leaf0, traffic to host004
// is pinned to spine0 (color 1) and traffic to host005 to spine1 (color 2), whatever
// the hash or the QP's own color says; other destinations are hashed as usual.
TEST(FabricApi, RoutesPinEachDestinationToItsColor) {
  auto topo = Clos(2, 2, 4, 100e9, 100e9);
  auto f = Make(topo, FabricOptions{});
  const std::string s0 = IfaceTo(topo, "leaf0", "spine0"), s1 = IfaceTo(topo, "leaf0", "spine1");
  ASSERT_TRUE(f->SetColor("leaf0", 1, {{s0}, 0}).ok());
  ASSERT_TRUE(f->SetColor("leaf0", 2, {{s1}, 0}).ok());
  ASSERT_TRUE(f->SetRoute("leaf0", Nic(4), 1, 2, -1).ok());
  ASSERT_TRUE(f->SetRoute("leaf0", Nic(5), 2, 1, -1).ok());
  EXPECT_EQ(f->RouteCount("leaf0"), 2u);
  // Several QPs per destination (different hashes), one of them colored 2: the route wins.
  std::vector<int> to4, to5;
  for (int s = 0; s < 4; ++s) {
    to4.push_back(f->AddFlow(Nic(s), Nic(4), 0, 3, 10e9, 0, s == 0 ? 2 : 0));
    to5.push_back(f->AddFlow(Nic(s), Nic(5), 0, 3, 10e9));
  }
  f->RunUntil(200 * kNsPerUs);
  for (int q : to4) EXPECT_EQ(f->GetQp(q).path[1], "leaf0:" + s0);
  for (int q : to5) EXPECT_EQ(f->GetQp(q).path[1], "leaf0:" + s1);
  // The bytes follow the pinning: each uplink carries exactly its destination's traffic.
  const double u0 = OutOctets(*f, "leaf0", s0), u1 = OutOctets(*f, "leaf0", s1);
  EXPECT_GT(u0, 0);
  EXPECT_GT(u1, 0);
  double d4 = 0, d5 = 0;
  for (int q : to4) d4 += f->GetQp(q).sent_bytes;
  for (int q : to5) d5 += f->GetQp(q).sent_bytes;
  EXPECT_NEAR(u0, d4, 0.01 * d4);
  EXPECT_NEAR(u1, d5, 0.01 * d5);
  // Removing a route hands the destination back to the hash (RemoveRoute of a missing
  // route is kNotFound), ClearRoutes removes the rest.
  ASSERT_TRUE(f->RemoveRoute("leaf0", Nic(4), -1).ok());
  EXPECT_EQ(f->RemoveRoute("leaf0", Nic(4), -1).code(), StatusCode::kNotFound);
  ASSERT_TRUE(f->ClearRoutes("leaf0").ok());
  EXPECT_EQ(f->RouteCount("leaf0"), 0u);
  f->Step();
  // Without a route, the QP colored 2 follows its own color again.
  EXPECT_EQ(f->GetQp(to4[0]).path[1], "leaf0:" + s1);
}

// Backup: when the primary color's only link goes down the route uses its backup
// color; when that is down too, every live ECMP member (the third spine); when the
// primary comes back, the route returns to it. A class-specific route beats the
// any-class route for that class; a route to an unknown color means plain ECMP.
TEST(FabricApi, RoutesFallBackToBackupThenToEcmpAndMatchTrafficClass) {
  auto topo = Clos(2, 3, 2, 100e9, 100e9);  // leaf0: host000-001, leaf1: host002-003
  auto f = Make(topo, FabricOptions{});
  const std::string s0 = IfaceTo(topo, "leaf0", "spine0"), s1 = IfaceTo(topo, "leaf0", "spine1"),
                    s2 = IfaceTo(topo, "leaf0", "spine2");
  ASSERT_TRUE(f->SetColor("leaf0", 1, {{s0}, 0}).ok());
  ASSERT_TRUE(f->SetColor("leaf0", 2, {{s1}, 0}).ok());
  ASSERT_TRUE(f->SetRoute("leaf0", Nic(2), 1, 2).ok());          // any class
  ASSERT_TRUE(f->SetRoute("leaf0", Nic(2), 2, 0, 5).ok());       // priority 5 only
  ASSERT_TRUE(f->SetRoute("leaf0", "host003-gpu0", 9, 0).ok());  // unknown color: ECMP
  const int q3 = f->AddFlow(Nic(0), Nic(2), 0, 3, 20e9);
  const int q5 = f->AddFlow(Nic(1), Nic(2), 0, 5, 20e9);
  const int other = f->AddFlow(Nic(0), Nic(3), 0, 3, 20e9);
  f->RunUntil(100 * kNsPerUs);
  EXPECT_EQ(f->GetQp(q3).path[1], "leaf0:" + s0);
  EXPECT_EQ(f->GetQp(q5).path[1], "leaf0:" + s1);
  EXPECT_FALSE(f->GetQp(other).path.empty());
  // Primary (spine0) down: the backup color (spine1) carries it, at full rate.
  ASSERT_TRUE(f->SetLinkUp(LinkOf(topo, "leaf0", s0), false).ok());
  f->RunUntil(200 * kNsPerUs);
  EXPECT_EQ(f->GetQp(q3).path[1], "leaf0:" + s1);
  const double d0 = f->GetQp(q3).delivered_bytes;
  f->RunUntil(400 * kNsPerUs);
  EXPECT_NEAR((f->GetQp(q3).delivered_bytes - d0) * 8 / 200e-6, 20e9, 0.5e9);
  // Backup down too: neither color has a live member, so any ECMP member (spine2).
  ASSERT_TRUE(f->SetLinkUp(LinkOf(topo, "leaf0", s1), false).ok());
  f->RunUntil(500 * kNsPerUs);
  EXPECT_EQ(f->GetQp(q3).path[1], "leaf0:" + s2);
  EXPECT_EQ(f->GetQp(q5).path[1], "leaf0:" + s2);
  // Primary back: the route returns to it.
  ASSERT_TRUE(f->SetLinkUp(LinkOf(topo, "leaf0", s0), true).ok());
  f->RunUntil(600 * kNsPerUs);
  EXPECT_EQ(f->GetQp(q3).path[1], "leaf0:" + s0);
  // Errors name what is wrong.
  EXPECT_EQ(f->SetRoute("nope", Nic(2), 1, 0).code(), StatusCode::kNotFound);
  EXPECT_EQ(f->SetRoute("leaf0", "nope", 1, 0).code(), StatusCode::kNotFound);
  EXPECT_EQ(f->SetRoute("leaf0", Nic(2), 0, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f->SetRoute("leaf0", Nic(2), 1, 0, 8).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f->ClearRoutes("nope").code(), StatusCode::kNotFound);
}

// Weighted ECMP (GLB): weight 0 on one member removes it; ALB tables count per bucket.
TEST(FabricApi, WeightsAndAlbBucketTables) {
  auto topo = Clos(2, 2, 8, 100e9, 400e9);
  auto f = Make(topo, FabricOptions{});
  const std::string s0 = IfaceTo(topo, "leaf0", "spine0"), s1 = IfaceTo(topo, "leaf0", "spine1");
  ASSERT_TRUE(f->SetEcmpWeights("leaf0", "leaf1", {{s0, 0}, {s1, 1}}).ok());
  std::vector<int> qps;
  for (int i = 0; i < 8; ++i) qps.push_back(f->AddFlow(Nic(i), Nic(8 + i), 0));
  f->Step();
  for (int q : qps) EXPECT_EQ(f->GetQp(q).path[1], "leaf0:" + s1);
  // ALB: 16 buckets, all pointing to spine0.
  ASSERT_TRUE(f->SetAlbTable("leaf0", "leaf1", std::vector<std::string>(16, s0)).ok());
  f->RunUntil(100 * kNsPerUs);
  for (int q : qps) EXPECT_EQ(f->GetQp(q).path[1], "leaf0:" + s0);
  std::vector<AlbBucketCounters> b;
  ASSERT_TRUE(f->GetAlbCounters("leaf0", "leaf1", &b).ok());
  ASSERT_EQ(b.size(), 16u);
  uint64_t total = 0;
  for (const auto& x : b) total += x.bytes;
  EXPECT_GT(total, 0u);
  // Replacing the table at run time moves the buckets.
  ASSERT_TRUE(f->SetAlbTable("leaf0", "leaf1", std::vector<std::string>(16, s1)).ok());
  f->Step();
  for (int q : qps) EXPECT_EQ(f->GetQp(q).path[1], "leaf0:" + s1);
}

// GLB weights inside DLB flowlet mode: 3 leaves x 2 spines (100G); hosts on leaf0 and
// leaf1 (two ingress leaves) send to hosts on leaf2 (the destination leaf E). Each flow
// is 1.25 MB capped at 12.5 Gb/s (800 us), a new one every 100 us, so an uplink carries
// at most 50 % and spine -> leaf2 at most 100 %: no queue anywhere, and with DLB quality =
// load band (load_weight 1) the local quality of either uplink stays >= 2. Without
// weights the flowlet DLB spreads new flowlets over both spines (about half on spine0 =
// A; 14 of 32 with this seed). With weights {A: 1, B: 7} for destination leaf2 on both
// ingress leaves, A's effective quality is min(local, floor(7 x 1/7) = 1) and B's
// min(local, 7) >= 2, so new flowlets avoid A; weight 0 removes A; equal weights (remote
// band 7 for both) and all-zero weights change nothing.
struct Weights {
  bool set = false;
  double a = 0, b = 0;  // spine0, spine1
};
struct GlbDlbRun {
  int on_a = 0, total = 0;
  std::vector<std::string> paths;  // first hop of every flow, in start order
};
GlbDlbRun RunGlbDlb(Weights w) {
  auto topo = Clos(3, 2, 4, 100e9, 100e9);
  auto f = Make(topo, FabricOptions{});
  EXPECT_TRUE(f->SetForwardingMode("*", ForwardingMode::kDlbFlowlet).ok());
  DlbProfile dlb;
  dlb.load_weight = 1;  // quality = load band: 12.5 % of the link per band
  EXPECT_TRUE(f->SetDlbProfile("*", dlb).ok());
  if (w.set) {
    for (const std::string leaf : {"leaf0", "leaf1"}) {
      EXPECT_TRUE(f->SetEcmpWeights(
                       leaf, "leaf2",
                       {{IfaceTo(topo, leaf, "spine0"), w.a}, {IfaceTo(topo, leaf, "spine1"), w.b}})
                      .ok());
    }
  }
  // hosts 0-3 on leaf0, 4-7 on leaf1, 8-11 on leaf2. Four rounds of eight flows, 100 us
  // apart (each a new flowlet, chosen as it starts); between rounds the ports go idle.
  GlbDlbRun r;
  for (int round = 0; round < 4; ++round) {
    for (int h = 0; h < 8; ++h) {
      const int q = f->AddFlow(Nic(h), Nic(8 + h % 4), 1.25e6, 3, 12.5e9);
      EXPECT_GE(q, 0);
      f->RunUntil(f->now() + 100 * kNsPerUs);
      const QpInfo info = f->GetQp(q);
      EXPECT_GE(info.path.size(), 3u);
      if (info.path.size() < 2) continue;
      const std::string leaf = h < 4 ? "leaf0" : "leaf1";
      ++r.total;
      r.on_a += info.path[1] == leaf + ":" + IfaceTo(topo, leaf, "spine0");
      r.paths.push_back(info.path[1]);
    }
    f->RunUntil(f->now() + 1500 * kNsPerUs);
  }
  return r;
}

TEST(FabricApi, GlbWeightsSteerDlbFlowlets) {
  const GlbDlbRun none = RunGlbDlb({});
  ASSERT_EQ(none.total, 32);
  std::printf("flowlets on spine0 without weights: %d of %d\n", none.on_a, none.total);
  EXPECT_GE(none.on_a, 10) << "without weights DLB should use spine0 about half the time";
  EXPECT_LE(none.on_a, 22);
  // Equal weights: remote band 7 for both members, the same choices as without weights.
  const GlbDlbRun equal = RunGlbDlb({true, 3, 3});
  EXPECT_EQ(equal.paths, none.paths);
  // Spine0 penalized for destination leaf2: no new flowlet takes it.
  const GlbDlbRun penalized = RunGlbDlb({true, 1, 7});
  ASSERT_EQ(penalized.total, 32);
  EXPECT_EQ(penalized.on_a, 0);
  // A mild penalty {A: 5, B: 7}: the weights are a band, not a filter. A's remote band 5
  // only caps its quality; whenever B's local quality is <= A's effective one (B at
  // >= 25 % load), A still gets new flowlets. (At these loads both uplinks are mostly at
  // band <= 5 anyway, so the count is close to the unweighted one; 17 of 32 here.)
  const GlbDlbRun mild = RunGlbDlb({true, 5, 7});
  std::printf("flowlets on spine0 with weights 5:7: %d of %d\n", mild.on_a, mild.total);
  EXPECT_GT(mild.on_a, 0);
  // Weight 0: never chosen while the other member has a weight.
  const GlbDlbRun removed = RunGlbDlb({true, 0, 1});
  EXPECT_EQ(removed.on_a, 0);
  // Both 0: weights say nothing; DLB as without weights.
  const GlbDlbRun zeros = RunGlbDlb({true, 0, 0});
  EXPECT_EQ(zeros.paths, none.paths);
}

// Per-packet spraying splits a QP over every uplink and counts reordering.
TEST(FabricApi, PerPacketSprayingUsesAllUplinks) {
  auto topo = Clos(2, 4, 2, 400e9, 100e9);
  auto f = Make(topo, FabricOptions{});
  ASSERT_TRUE(f->SetSprayPriorities("leaf0", 1u << 3).ok());
  const int q = f->AddFlow(Nic(0), Nic(2), 0);
  f->RunUntil(2 * kNsPerMs);
  EXPECT_EQ(f->GetQp(q).subflows, 4);
  for (int s = 0; s < 4; ++s) {
    EXPECT_GT(OutOctets(*f, "leaf0", IfaceTo(topo, "leaf0", "spine" + std::to_string(s))), 0);
  }
  // Four 100G paths carry one 400G QP.
  EXPECT_GT(f->GetQp(q).delivered_bytes * 8 / 2e-3, 350e9);
}

TEST(FabricApi, DegradedLinkLowersCapacityAndCountsErrors) {
  auto topo = Clos(1, 1, 2, 100e9, 100e9);
  auto f = Make(topo, FabricOptions{});
  const std::string link = topo.links(1).id();  // a NIC link
  ASSERT_TRUE(f->DegradeLink(topo.links(topo.links_size() - 1).id(), 0.5, 0.01).ok());
  f->AddFlow(Nic(0), Nic(1), 0);
  f->RunUntil(2 * kNsPerMs);
  InterfaceCounters c;
  ASSERT_TRUE(f->GetInterfaceCounters("leaf0", IfaceTo(topo, "leaf0", Nic(1)), &c).ok());
  EXPECT_DOUBLE_EQ(c.capacity_bps, 50e9);
  InterfaceCounters rx;
  ASSERT_TRUE(f->GetInterfaceCounters(Nic(1), "eth0", &rx).ok());
  EXPECT_GT(rx.in_errors, 0u);
  (void)link;
}

TEST(Scenario, ExampleScenarioLoadsAndRuns) {
  LoadedScenario sc;
  std::string err;
  ASSERT_TRUE(LoadScenarioFile(
      std::string(LOOM_SOURCE_DIR) + "/sim-fabric/examples/small-allreduce.json", &sc, &err))
      << err;
  auto f = BuildScenarioFabric(sc, &err);
  ASSERT_NE(f, nullptr) << err;
  EXPECT_TRUE(f->RunUntilJobsDone(sc.duration_ns));
  EXPECT_EQ(f->job_count(), 2);
}

TEST(Scenario, BadScenarioNamesTheField) {
  LoadedScenario sc;
  std::string err;
  EXPECT_FALSE(ParseScenarioJson(R"({"rail": {"hosts": 2}, "jobs": [{"collective": "nope"}]})", ".",
                                 &sc, &err));
  EXPECT_NE(err.find("jobs[0].collective"), std::string::npos) << err;
}

// Every example scenario in the repo loads (its numbers are within the ranges).
TEST(Scenario, EveryExampleScenarioPassesTheNumberRanges) {
  int loaded = 0;
  for (const char* dir : {"/sim-fabric/examples", "/deploy/examples", "/tests/e2e/data"}) {
    for (const auto& e : std::filesystem::directory_iterator(std::string(LOOM_SOURCE_DIR) + dir)) {
      const std::string name = e.path().filename().string();
      if (e.path().extension() != ".json") continue;
      if (dir != std::string("/sim-fabric/examples") && name.rfind("scenario", 0) != 0) continue;
      LoadedScenario sc;
      std::string err;
      EXPECT_TRUE(LoadScenarioFile(e.path().string(), &sc, &err)) << name << ": " << err;
      ++loaded;
    }
  }
  EXPECT_GE(loaded, 5);
}

// Absurd numbers are refused with their path, whatever message they sit in.
TEST(Scenario, AbsurdNumbersAreRefusedWithTheirPath) {
  const std::string rail = R"("rail": {"hosts": 4, "hostsPerStripe": 2, "spines": 2})";
  auto refused = [&](const std::string& body, const std::string& want) {
    LoadedScenario sc;
    std::string err;
    EXPECT_FALSE(ParseScenarioJson("{" + rail + ", " + body + "}", ".", &sc, &err)) << body;
    EXPECT_NE(err.find(want), std::string::npos) << body << " -> " << err;
  };
  refused(R"("engine": {"stepNs": "-5"})", "scenario.engine.step_ns: -5 is out of range 0..1e+09");
  refused(R"("jobs": [{"collective": "allreduce", "messageBytes": "NaN"}])",
          "scenario.jobs[0].message_bytes: nan is not a finite number");
  refused(R"("jobs": [{"collective": "allreduce", "rankCount": 2147483647}])",
          "scenario.jobs[0].rank_count: 2.14748e+09 is out of range");
  refused(R"("switchModes": [{"mode": "alb", "albBuckets": 2147483647}])",
          "scenario.switch_modes[0].alb_buckets");
  refused(R"("faults": [{"kind": "link-down", "capacityFactor": 7}])",
          "scenario.faults[0].capacity_factor: 7 is out of range 0..1");
  refused(R"("dcqcn": [{"nic": "*", "g": "Infinity"}])", "is not a finite number");
}

// Go-back-N vs reorder-tolerant NICs under spraying: a sprayed QP whose paths queue
// differently (a second, hashed flow loads one of the two 60G uplinks) has packets overtake
// earlier ones. A go-back-N receiver discards them and they are sent again: the QP delivers
// less in the same time; a tolerant one places them at no cost.
struct ReorderRun {
  double sprayed_gbps = 0;
  uint64_t oos = 0, discarded = 0;
};

ReorderRun RunSprayWithCrossTraffic(ReorderMode mode) {
  auto topo = Clos(2, 2, 3, 100e9, 60e9);  // leaf0: host000-002, leaf1: host003-005
  FabricOptions o;
  o.nic_reorder = mode;
  auto f = Make(topo, o);
  EXPECT_TRUE(f->SetSprayPriorities("leaf0", 1u << 3).ok());
  const int q = f->AddFlow(Nic(0), Nic(3), 0);
  f->AddFlow(Nic(1), Nic(4), 0, /*priority=*/2);  // hashed onto one spine, not sprayed
  f->RunUntil(10 * kNsPerMs);
  ReorderRun r;
  r.sprayed_gbps = f->GetQp(q).delivered_bytes * 8 / 10e-3 / 1e9;
  NicCounters c;
  EXPECT_TRUE(f->GetNicCounters(Nic(3), &c).ok());
  r.oos = c.out_of_sequence;
  r.discarded = c.reorder_discarded_bytes;
  return r;
}

// With the paper's notification point (a CNP per interval, drawn from the marked share of
// what arrived) go-back-N discards must not hide the marks: discarded marked packets still
// raise CNPs (a NACK carries the CNP bit), so go-back-N NICs never come out ahead.
TEST(FabricApi, GoBackNDiscardsKeepTheirCnpsWithThePapersNotificationPoint) {
  auto run = [](ReorderMode mode) {
    auto topo = Clos(2, 2, 5, 100e9, 60e9);  // leaf0: host000-004, leaf1: host005-009
    FabricOptions o;
    o.dcqcn = PaperDcqcnParams();
    o.nic_reorder = mode;
    auto f = Make(topo, o);
    EXPECT_TRUE(f->SetSprayPriorities("leaf0", 1u << 3).ok());
    std::vector<int> q;
    for (int i = 0; i < 4; ++i) q.push_back(f->AddFlow(Nic(i), Nic(5), 0));
    f->AddFlow(Nic(4), Nic(6), 0, /*priority=*/2);
    f->RunUntil(5 * kNsPerMs);
    double d = 0;
    for (int x : q) d += f->GetQp(x).delivered_bytes;
    return d * 8 / 5e-3 / 1e9;
  };
  const double gbn = run(ReorderMode::kGoBackN), tol = run(ReorderMode::kTolerant);
  std::printf("4:1 sprayed incast, paper RP: go-back-N %.1f Gb/s, tolerant %.1f Gb/s\n", gbn, tol);
  EXPECT_LE(gbn, tol * 1.001);
}

TEST(FabricApi, GoBackNNicsPayForSprayedReorderingTolerantOnesDoNot) {
  const ReorderRun gbn = RunSprayWithCrossTraffic(ReorderMode::kGoBackN);
  const ReorderRun tol = RunSprayWithCrossTraffic(ReorderMode::kTolerant);
  std::printf(
      "sprayed QP: go-back-N %.1f Gb/s (%llu out of sequence, %llu B discarded), "
      "tolerant %.1f Gb/s (%llu out of sequence)\n",
      gbn.sprayed_gbps, static_cast<unsigned long long>(gbn.oos),
      static_cast<unsigned long long>(gbn.discarded), tol.sprayed_gbps,
      static_cast<unsigned long long>(tol.oos));
  EXPECT_GT(tol.oos, 0u);
  EXPECT_EQ(tol.discarded, 0u);
  EXPECT_GT(gbn.discarded, 0u);
  EXPECT_GT(gbn.oos, 0u);
  // What was discarded is sent again: the go-back-N QP delivers that much less.
  EXPECT_LT(gbn.sprayed_gbps, tol.sprayed_gbps);
}

// Every field a scenario accepts is applied; an unknown or unusable one is an error naming
// it, never ignored.
TEST(Scenario, AppliesBufferMtuReorderEcnPerSpeedAndDcqcnRules) {
  LoadedScenario sc;
  std::string err;
  ASSERT_TRUE(ParseScenarioJson(R"({
      "rail": {"hosts": 2, "gpusPerHost": 2},
      "engine": {"mtuBytes": 1024, "nicReorder": "tolerant", "dcqcnPreset": "paper"},
      "queues": [{"device": "*", "bufferBytes": 12000000,
                  "ecnBySpeed": [{"speed": "400G", "kminBytes": 800000, "kmaxBytes": 3200000,
                                  "pmax": 0.2}]}],
      "dcqcn": [{"nic": "*", "clampTargetRate": false, "decreaseIntervalNs": 4000,
                 "alphaPerInterval": true, "bBytes": 0, "cnpIntervalNs": 0}]
  })",
                                ".", &sc, &err))
      << err;
  EXPECT_EQ(sc.options.mtu_bytes, 1024);
  EXPECT_EQ(sc.options.nic_reorder, ReorderMode::kTolerant);
  EXPECT_EQ(sc.options.dcqcn.t_ns, PaperDcqcnParams().t_ns);
  auto f = BuildScenarioFabric(sc, &err);
  ASSERT_NE(f, nullptr) << err;
  const std::string leaf = f->Devices().front();
  const SwitchConfig* cfg = nullptr;
  for (const auto& d : f->Devices()) {
    if ((cfg = f->GetSwitchConfig(d))) break;
  }
  ASSERT_NE(cfg, nullptr);
  EXPECT_EQ(cfg->buffer_bytes, 12e6);
  ASSERT_EQ(cfg->ecn[3].by_speed.size(), 1u);
  EXPECT_EQ(cfg->ecn[3].by_speed[0].speed_bps, 400e9);
  EXPECT_EQ(cfg->ecn[3].by_speed[0].kmin_bytes, 800e3);
  (void)leaf;
}

// A queues[] entry that lowers the headroom and the buffer together is applied as one:
// the smaller buffer is checked against the smaller reservation.
TEST(Scenario, BufferAndHeadroomOfOneEntryAreCheckedTogether) {
  LoadedScenario sc;
  std::string err;
  ASSERT_TRUE(ParseScenarioJson(R"({
      "rail": {"hosts": 2, "gpusPerHost": 2},
      "queues": [{"device": "*", "pfcHeadroomBytes": 1000000, "bufferBytes": 100000000},
                 {"device": "*", "pfcHeadroomBytes": 200000, "bufferBytes": 10000000}]
  })",
                                ".", &sc, &err))
      << err;
  auto f = BuildScenarioFabric(sc, &err);
  ASSERT_NE(f, nullptr) << err;
  for (const auto& d : f->Devices()) {
    const SwitchConfig* c = f->GetSwitchConfig(d);
    if (c != nullptr) {
      EXPECT_EQ(c->buffer_bytes, 10e6) << d;
    }
  }
}

TEST(Scenario, UnknownOrUnusableFieldsAreErrorsNamingTheField) {
  struct Case {
    const char* json;
    const char* names;
  };
  const Case cases[] = {
      {R"({"rail": {"hosts": 2}, "bogus": 1})", "bogus"},
      {R"({"rail": {"hosts": 2}, "engine": {"nicReorder": "sometimes"}})", "nic_reorder"},
      {R"({"rail": {"hosts": 2}, "engine": {"mtuBytes": 64}})", "mtu_bytes"},
      {R"({"rail": {"hosts": 2}, "engine": {"dcqcnPreset": "mlx"}})", "dcqcn_preset"},
      {R"({"rail": {"hosts": 2}, "queues": [{"watchdog": true, "watchdogAction": "pray"}]})",
       "watchdog_action"},
      {R"({"rail": {"hosts": 2}, "switchModes": [{"sprayPriorities": [9]}]})", "spray_priorities"},
      {R"({"rail": {"hosts": 2}, "queues": [{"bufferBytes": -1}]})", "buffer_bytes"},
      {R"({"rail": {"hosts": 2}, "queues": [{"ecnBySpeed": [{"speed": "fast"}]}]})",
       "ecn_by_speed[0].speed"},
      {R"({"rail": {"hosts": 2}, "dcqcn": [{"decreaseIntervalNs": -4}]})", "decrease_interval_ns"},
      {R"({"rail": {"hosts": 2}, "flows": [{"src": "nope", "dst": "host001-nic0", "bytes": 1}]})",
       "flows[0].src"},
      {R"({"rail": {"hosts": 2}, "flows": [{"src": "host000-nic0", "dst": "host001-nic0"}]})",
       "flows[0].bytes"},
      {R"({"rail": {"hosts": 2}, "engine": {"switchLatencyNs": -1}})", "switch_latency_ns"},
      {R"({"rail": {"hosts": 2}, "engine": {"routing": "shortest"}})", "engine.routing"},
      {R"({"rail": {"hosts": 2}, "dcqcn": [{"tNs": -5}]})", "dcqcn[0].t_ns"},
      {R"({"rail": {"hosts": 2}, "staticRoutes": [{"device": "nope", "dest": "x",
          "interfaces": ["Ethernet0"]}]})",
       "static_routes[0]"},
      {R"({"rail": {"hosts": 2}, "staticRoutes": [{"device": "spine0"}]})",
       "static_routes[0].interfaces"},
      {R"({"rail": {"hosts": 2, "propagationDelayNs": -5}})", "propagation_delay_ns"},
      {R"({"rail": {"hosts": 2}, "queues": [{"pfcHeadroomBytes": 10}]})", "headroom_bytes"},
  };
  for (const auto& c : cases) {
    LoadedScenario sc;
    std::string err;
    bool ok = ParseScenarioJson(c.json, ".", &sc, &err);
    if (ok) ok = BuildScenarioFabric(sc, &err) != nullptr;
    EXPECT_FALSE(ok) << c.json;
    EXPECT_NE(err.find(c.names), std::string::npos) << c.json << " -> " << err;
  }
}

// A single short flow's FCT is the ideal one (issue 17 item 3): size / line rate + (hops - 1)
// x MTU / line rate (store and forward at each switch) + the links' propagation delays + the
// switches' forwarding latency, to within one engine step, at any step.
TEST(FabricApi, ShortFlowCompletesInTheIdealTimeAtAnyStep) {
  for (TimeNs delay : {TimeNs{1000}, TimeNs{10000}}) {
    for (TimeNs step : {TimeNs{100}, TimeNs{1000}, TimeNs{5000}}) {
      for (int leaves : {1, 2}) {
        loom::topology::Clos2Params c;
        c.leaves = leaves;
        c.spines = 1;
        c.hosts_per_leaf = 2;
        c.host.gpus_per_host = c.host.nics_per_host = 1;
        c.host.nic_speed_bps = 100'000'000'000;
        c.uplink_speed_bps = 100'000'000'000;
        c.propagation_delay_ns = delay;
        loom::v1::Topology t;
        std::string err;
        ASSERT_TRUE(loom::topology::GenerateClos2(c, &t, &err)) << err;
        FabricOptions o;
        o.step_ns = step;
        o.switch_latency_ns = 600;
        auto f = Make(t, o);
        const std::string dst = leaves == 1 ? Nic(1) : Nic(2);
        const int q = f->AddFlow(Nic(0), dst, 10e3);
        f->RunUntil(200 * kNsPerUs);
        const auto info = f->GetQp(q);
        ASSERT_GE(info.finish_ns, 0);
        const int links = leaves == 1 ? 2 : 4, switches = links - 1;
        const double ideal = 10e3 * 8 / 100e9 * 1e9 + switches * o.mtu_bytes * 8 / 100e9 * 1e9 +
                             links * static_cast<double>(delay) + switches * 600.0;
        const double fct = static_cast<double>(info.finish_ns - info.start_ns);
        std::printf("delay %lld ns, step %lld ns, %d links: FCT %.0f ns, ideal %.0f ns\n",
                    static_cast<long long>(delay), static_cast<long long>(step), links, fct, ideal);
        // Within one step of ideal at every step, also where (switches - 1) steps of the
        // engine's hop pipeline are longer than the physical latency (5 us steps over 1 us
        // links, 3 switches): the finish time is when the last byte physically arrived.
        EXPECT_GE(fct, ideal - static_cast<double>(step))
            << "delay " << delay << " step " << step << " links " << links;
        EXPECT_LE(fct, ideal + static_cast<double>(step))
            << "delay " << delay << " step " << step << " links " << links;
      }
    }
  }
}

}  // namespace
}  // namespace loom::sim
