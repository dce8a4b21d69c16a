// TELB: demand model and path computation.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "api/proto_util/fingerprint.h"
#include "api/topology/topology_generate.h"
#include "controller/te/demand.h"
#include "controller/te/path_engine.h"
#include "controller/te/placement.h"
#include "southbound/wire/device_state_util.h"
#include "tests/unit/test_util.h"

namespace loom::te {
namespace {

namespace v1 = loom::v1;

// Two leaves, two spines, 400G everywhere:
//
//      spine0   spine1
//        |  \ /  |
//        |  / \  |
//      leaf0   leaf1
//     (host000,001) (host002,003), 2 NICs each
std::shared_ptr<const loom::topology::TopologyIndex> Fabric() {
  return loom::testing::SmallFabric();
}

Unit MakeUnit(const FabricGraph& g, const std::string& job, const std::string& dst,
              const std::vector<std::pair<std::string, double>>& sources) {
  Unit u;
  u.job_id = job;
  u.dst_nic = dst;
  u.dst_leaf = g.NicLeaf(dst);
  for (const auto& [nic, rate] : sources) u.sources.emplace_back(g.NicLeaf(nic), rate);
  return u;
}

TEST(DemandTest, RingSkipsSameHostAndWraps) {
  auto topo = Fabric();
  v1::Job job;
  job.set_collective(v1::COLLECTIVE_PATTERN_RING_ALLREDUCE);
  // host000-gpu0 -> host000-gpu1 is NVLink; -> host002-gpu0 -> back to host000-gpu0.
  for (const char* e : {"host000-gpu0", "host000-gpu1", "host002-gpu0"}) job.add_endpoints(e);
  auto d = JobDemand(job, *topo);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].src_nic, "host000-nic1");
  EXPECT_EQ(d[0].dst_nic, "host002-nic0");
  EXPECT_DOUBLE_EQ(d[0].rate_bps, 400e9);
  EXPECT_EQ(d[1].src_nic, "host002-nic0");
  EXPECT_EQ(d[1].dst_nic, "host000-nic0");
}

TEST(DemandTest, AllToAllSplitsLineRate) {
  auto topo = Fabric();
  v1::Job job;
  job.set_collective(v1::COLLECTIVE_PATTERN_ALL_TO_ALL);
  for (const char* e : {"host000-gpu0", "host001-gpu0", "host002-gpu0", "host003-gpu0"}) {
    job.add_endpoints(e);
  }
  auto d = JobDemand(job, *topo, 0.5);
  ASSERT_EQ(d.size(), 12u);
  for (const auto& x : d) EXPECT_DOUBLE_EQ(x.rate_bps, 400e9 / 3 * 0.5);
}

TEST(PathEngineTest, TwoElephantsGoToDifferentSpines) {
  auto topo = Fabric();
  FabricGraph g = FabricGraph::Build(*topo, {});
  EXPECT_EQ(g.num_tops(), 2);
  // Two 400G flows leaf0 -> leaf1: ECMP may hash both onto one spine (200%);
  // TELB must split them (100% each).
  std::vector<Unit> units = {MakeUnit(g, "a", "host002-nic0", {{"host000-nic0", 400e9}}),
                             MakeUnit(g, "b", "host003-nic0", {{"host001-nic0", 400e9}})};
  auto r = Place(g, units, {}, PlacementMode::kFull);
  ASSERT_NE(r.top[0], -1);
  ASSERT_NE(r.top[1], -1);
  EXPECT_NE(r.top[0], r.top[1]);
  EXPECT_NEAR(r.max_utilization, 1.0, 1e-9);
  EXPECT_NE(r.reason[0].find("least-loaded"), std::string::npos) << r.reason[0];
}

//   spine0  spine1  spine2  spine3
//      \      \      /      /
//       leaf0 ====== leaf1        three 100G flows leaf0 -> leaf1 kept on spine0
TEST(PathEngineTest, BackupsOfUnitsSharingATopSpreadOverTheOthers) {
  loom::topology::Clos2Params p;
  p.leaves = 2;
  p.spines = 4;
  p.hosts_per_leaf = 2;
  p.host.gpus_per_host = 2;
  p.host.nics_per_host = 2;
  v1::Topology t;
  std::string err;
  ASSERT_TRUE(loom::topology::GenerateClos2(p, &t, &err)) << err;
  loom::topology::TopologyIndex topo(t);
  FabricGraph g = FabricGraph::Build(topo, {});
  ASSERT_EQ(g.num_tops(), 4);
  std::vector<Unit> units;
  int i = 0;
  for (const char* dst : {"host002-nic0", "host002-nic1", "host003-nic0"}) {
    units.push_back(MakeUnit(g, "j", dst, {{"host000-nic0", (100 + i++) * 1e9}}));
    units.back().current = 0;  // kept where it is (incremental placement)
    units.back().pinned = true;
  }
  auto r = Place(g, units, {}, PlacementMode::kIncremental);
  std::set<int> backups;
  for (size_t u = 0; u < units.size(); ++u) {
    ASSERT_EQ(r.top[u], 0) << r.reason[u];
    ASSERT_GE(r.backup[u], 1);
    backups.insert(r.backup[u]);
  }
  // Were spine0 to fail, its three flows would land on three spines, not one.
  EXPECT_EQ(backups.size(), 3u);
}

// Two leaves, three spines, 400G links, 3 hosts of 2 NICs per leaf:
//
//   spine0   spine1   spine2
//      \   \  |   /   /
//       leaf0 ==== leaf1
//
// An elephant (400G) leaf0 -> leaf1 fills one spine; small flows leaf0 -> leaf1 share
// the other two. Were leaf0's link to the elephant's spine to fail, the elephant would
// land on a spine that carries small flows and collide there (the switch moves it to
// the backup color at once; the controller comes later).
struct ProtectionCase {
  v1::Topology t;
  std::unique_ptr<loom::topology::TopologyIndex> topo;
  FabricGraph g;
  std::vector<Unit> units;
};
std::unique_ptr<ProtectionCase> ElephantAndSmallFlows(double small_bps,
                                                      double elephant_bps = 400e9) {
  auto c = std::make_unique<ProtectionCase>();
  loom::topology::Clos2Params p;
  p.leaves = 2;
  p.spines = 3;
  p.hosts_per_leaf = 3;
  p.host.gpus_per_host = 2;
  p.host.nics_per_host = 2;
  std::string err;
  EXPECT_TRUE(loom::topology::GenerateClos2(p, &c->t, &err)) << err;
  c->topo = std::make_unique<loom::topology::TopologyIndex>(c->t);
  c->g = FabricGraph::Build(*c->topo, {});
  c->units.push_back(MakeUnit(c->g, "elephant", "host003-nic0", {{"host000-nic0", elephant_bps}}));
  for (const char* dst : {"host003-nic1", "host004-nic0", "host004-nic1", "host005-nic0"}) {
    c->units.push_back(MakeUnit(c->g, "small", dst, {{"host000-nic1", small_bps}}));
  }
  return c;
}

TEST(PathEngineTest, ProtectionLeavesRoomForAFailedLinksElephant) {
  auto c = ElephantAndSmallFlows(50e9);
  PlacementParams unprotected;
  unprotected.protect = false;
  auto before = Place(c->g, c->units, unprotected, PlacementMode::kFull);
  std::set<int> small_tops;
  for (size_t u = 1; u < c->units.size(); ++u) small_tops.insert(before.top[u]);
  // Without protection the small flows spread over both other spines (100G each), so
  // the elephant's backup, whichever it is, carries 100G: 500G after a failover.
  ASSERT_EQ(small_tops.size(), 2u);
  EXPECT_EQ(small_tops.count(before.backup[0]), 1u);

  auto r = Place(c->g, c->units, {}, PlacementMode::kFull);
  EXPECT_TRUE(r.protected_backups);
  EXPECT_NEAR(r.max_utilization, 1.0, 1e-9);  // the normal objective does not move
  std::set<int> packed;
  for (size_t u = 1; u < c->units.size(); ++u) packed.insert(r.top[u]);
  ASSERT_EQ(packed.size(), 1u);  // 200G on one spine, under the 90 % ceiling
  const int free_top = 3 - r.top[0] - *packed.begin();
  EXPECT_EQ(r.backup[0], free_top);
  EXPECT_EQ(r.protection_deficit_bps, 0);
  EXPECT_LE(r.protection_worst_utilization, 1.0 + 1e-9);
  EXPECT_GE(r.protection_moves, 1);
  bool said = false;
  for (size_t u = 1; u < c->units.size(); ++u) {
    said |= r.reason[u].find("room on the backup paths") != std::string::npos;
  }
  EXPECT_TRUE(said);
}

TEST(PathEngineTest, ProtectionNeverPacksFlowsAboveTheCeiling) {
  // 4 x 100G small flows: all four on one spine would run it at 100 %, above the 90 %
  // ceiling. Protection goes as far as 300G + 100G (the elephant's backup then takes the
  // 100G spine: 500G after a failover, better than 600G) and reports what is left: each
  // of the elephant's two failures (leaf0's uplink, the spine's downlink to leaf1)
  // overloads the backup's uplink and downlink by 100G.
  auto c = ElephantAndSmallFlows(100e9);
  auto r = Place(c->g, c->units, {}, PlacementMode::kFull);
  std::map<int, int> per_top;
  for (size_t u = 1; u < c->units.size(); ++u) per_top[r.top[u]]++;
  ASSERT_EQ(per_top.size(), 2u);
  EXPECT_EQ(std::max(per_top.begin()->second, per_top.rbegin()->second), 3);
  EXPECT_EQ(per_top[r.backup[0]], 1);
  EXPECT_NEAR(r.protection_deficit_bps, 4 * 100e9, 1e6);
  EXPECT_NEAR(r.protection_worst_utilization, 1.25, 1e-9);
}

TEST(PathEngineTest, ProtectionNeverRaisesTheFabricMaximum) {
  // A 200G elephant (50 %) and 4 x 60G small flows: packing the small flows on one spine
  // (240G, 60 %) would make room for the elephant's failover but raise the fabric
  // maximum above 50 %; protection stops at 180G there.
  auto c = ElephantAndSmallFlows(60e9, 200e9);
  PlacementParams off;
  off.protect = false;
  auto before = Place(c->g, c->units, off, PlacementMode::kFull);
  auto r = Place(c->g, c->units, {}, PlacementMode::kFull);
  EXPECT_NEAR(r.max_utilization, before.max_utilization, 1e-9);
  EXPECT_NEAR(r.max_utilization, 0.5, 1e-9);
  std::map<int, int> per_top;
  for (size_t u = 1; u < c->units.size(); ++u) per_top[r.top[u]]++;
  EXPECT_EQ(per_top.size(), 2u);
}

// 4 leaves x 4 spines, 2 hosts of 2 NICs per leaf; every NIC sends 50G to the
// NICs of the other leaves (multi-source units), one uplink drained. Paths read
// from the graph's tables (links listed leaf by leaf) and stored candidates
// (links listed in reverse) must give the same placement, and a reused
// workspace must not change it.
TEST(PathEngineTest, PlacementIsTheSameWhateverOrderTheLinksAreListedIn) {
  loom::topology::Clos2Params p;
  p.leaves = 4;
  p.spines = 4;
  p.hosts_per_leaf = 2;
  p.host.gpus_per_host = 2;
  p.host.nics_per_host = 2;
  v1::Topology t;
  std::string err;
  ASSERT_TRUE(loom::topology::GenerateClos2(p, &t, &err)) << err;
  v1::Topology reversed = t;
  std::reverse(reversed.mutable_links()->begin(), reversed.mutable_links()->end());
  loom::topology::TopologyIndex topo(t), topo_rev(reversed);
  std::set<std::string> down;
  for (const auto& l : t.links()) {
    if (down.empty() && l.id().find("spine1") != std::string::npos) down.insert(l.id());
  }
  ASSERT_EQ(down.size(), 1u);
  FabricGraph g = FabricGraph::Build(topo, down);
  FabricGraph g_rev = FabricGraph::Build(topo_rev, down);
  ASSERT_TRUE(g.leaf_ordered());
  ASSERT_FALSE(g_rev.leaf_ordered());
  std::vector<std::string> nics;
  for (const auto& d : t.devices()) {
    if (d.role() == v1::DEVICE_ROLE_NIC) nics.push_back(d.id());
  }
  auto units_of = [&](const FabricGraph& fg) {
    std::vector<Unit> units;
    for (const auto& dst : nics) {
      std::map<int, double> from;
      for (const auto& src : nics) {
        if (fg.NicLeaf(src) != fg.NicLeaf(dst)) from[fg.NicLeaf(src)] += 50e9;
      }
      Unit u;
      u.job_id = "a2a";
      u.dst_nic = dst;
      u.dst_leaf = fg.NicLeaf(dst);
      u.sources.assign(from.begin(), from.end());
      units.push_back(std::move(u));
    }
    return units;
  };
  std::vector<Unit> units = units_of(g), units_rev = units_of(g_rev);
  PlaceWorkspace ws;
  auto a = Place(g, units, {}, PlacementMode::kFull);
  auto b = Place(g_rev, units_rev, {}, PlacementMode::kFull, nullptr, &ws);
  auto c = Place(g, units, {}, PlacementMode::kFull, nullptr, &ws);
  for (size_t u = 0; u < units.size(); ++u) {
    ASSERT_GE(a.top[u], 0) << a.reason[u];
    EXPECT_EQ(g.top(a.top[u]), g_rev.top(b.top[u])) << units[u].dst_nic;
    EXPECT_EQ(g.top(a.backup[u]), g_rev.top(b.backup[u])) << units[u].dst_nic;
    EXPECT_EQ(a.top[u], c.top[u]);
    EXPECT_EQ(a.backup[u], c.backup[u]);
    EXPECT_EQ(a.reason[u], c.reason[u]);
  }
  EXPECT_DOUBLE_EQ(a.max_utilization, b.max_utilization);
  EXPECT_EQ(a.edge_load, c.edge_load);
}

TEST(PathEngineTest, DrainedLinkCarriesNothing) {
  auto topo = Fabric();
  FabricGraph g = FabricGraph::Build(*topo, {"leaf0:Ethernet0--spine0:Ethernet0"});
  std::vector<Unit> units = {MakeUnit(g, "a", "host002-nic0", {{"host000-nic0", 100e9}}),
                             MakeUnit(g, "b", "host003-nic0", {{"host001-nic0", 100e9}})};
  auto r = Place(g, units, {}, PlacementMode::kFull);
  EXPECT_EQ(g.top(r.top[0]), "spine1");
  EXPECT_EQ(g.top(r.top[1]), "spine1");
  EXPECT_EQ(r.edge_load[static_cast<size_t>(g.Edge("leaf0", "spine0"))], 0.0);
}

TEST(PathEngineTest, CurrentPathThatDiesIsReplacedWithReason) {
  auto topo = Fabric();
  FabricGraph g = FabricGraph::Build(*topo, {"leaf1:Ethernet0--spine0:Ethernet1"});
  auto u = MakeUnit(g, "a", "host002-nic0", {{"host000-nic0", 100e9}});
  u.current = g.TopIndex("spine0");
  auto r = Place(g, {u}, {}, PlacementMode::kIncremental);
  EXPECT_EQ(g.top(r.top[0]), "spine1");
  EXPECT_EQ(r.moved, 1);
  EXPECT_NE(r.reason[0].find("lost its capacity"), std::string::npos) << r.reason[0];
}

TEST(PathEngineTest, SteadyStateIsStable) {
  auto topo = Fabric();
  FabricGraph g = FabricGraph::Build(*topo, {});
  std::vector<Unit> units = {MakeUnit(g, "a", "host002-nic0", {{"host000-nic0", 300e9}}),
                             MakeUnit(g, "b", "host003-nic0", {{"host001-nic0", 300e9}}),
                             MakeUnit(g, "c", "host000-nic1", {{"host002-nic1", 200e9}})};
  auto first = Place(g, units, {}, PlacementMode::kFull);
  for (size_t i = 0; i < units.size(); ++i) units[i].current = first.top[i];
  for (int round = 0; round < 5; ++round) {
    auto again = Place(g, units, {}, PlacementMode::kFull);
    EXPECT_EQ(again.moved, 0);
    EXPECT_EQ(again.top, first.top);
  }
}

TEST(PathEngineTest, RecomputeMovesOnlyForRealGain) {
  auto topo = Fabric();
  FabricGraph g = FabricGraph::Build(*topo, {});
  std::vector<Unit> units = {MakeUnit(g, "a", "host002-nic0", {{"host000-nic0", 400e9}}),
                             MakeUnit(g, "b", "host003-nic0", {{"host001-nic0", 400e9}})};
  // Both on spine0: 200% on leaf0->spine0. Recompute must split them.
  units[0].current = units[1].current = g.TopIndex("spine0");
  auto r = Place(g, units, {}, PlacementMode::kFull);
  EXPECT_TRUE(r.adopted_new);
  EXPECT_EQ(r.moved, 1);
  EXPECT_NEAR(r.max_utilization, 1.0, 1e-9);
}

TEST(PathEngineTest, RecomputeTakesASmallGainWhenItRemovesAnOverload) {
  auto topo = Fabric();
  FabricGraph g = FabricGraph::Build(*topo, {});
  std::vector<Unit> units = {MakeUnit(g, "a", "host002-nic0", {{"host000-nic0", 400e9}}),
                             MakeUnit(g, "b", "host003-nic0", {{"host001-nic0", 12e9}})};
  // Both on spine0: 103 % on leaf0->spine0. Moving b lowers the maximum by 3 %, less
  // than the 5 % stability gain, but the link is over capacity: take it.
  units[0].current = units[1].current = g.TopIndex("spine0");
  auto r = Place(g, units, {}, PlacementMode::kFull);
  EXPECT_TRUE(r.adopted_new);
  EXPECT_EQ(r.moved, 1);
  EXPECT_NEAR(r.max_utilization, 1.0, 1e-9);
  // Under capacity, the same 3 % is not worth a move.
  units[0].sources[0].second = 380e9;
  auto keep = Place(g, units, {}, PlacementMode::kFull);
  EXPECT_FALSE(keep.adopted_new);
  EXPECT_EQ(keep.moved, 0);
  EXPECT_NEAR(keep.max_utilization, 392.0 / 400, 1e-9);
}

TEST(PathEngineTest, AllowedTopsAreRespected) {
  auto topo = Fabric();
  FabricGraph g = FabricGraph::Build(*topo, {});
  auto u = MakeUnit(g, "a", "host002-nic0", {{"host000-nic0", 400e9}});
  u.allowed = {g.TopIndex("spine1")};
  auto v = MakeUnit(g, "b", "host003-nic0", {{"host001-nic0", 400e9}});
  v.allowed = {g.TopIndex("spine1")};
  auto r = Place(g, {u, v}, {}, PlacementMode::kFull);
  EXPECT_EQ(g.top(r.top[0]), "spine1");
  EXPECT_EQ(g.top(r.top[1]), "spine1");
  EXPECT_NEAR(r.max_utilization, 2.0, 1e-9);  // isolation beats balance
}

TEST(PathEngineTest, NoLivePathIsReported) {
  auto topo = Fabric();
  FabricGraph g = FabricGraph::Build(
      *topo, {"leaf0:Ethernet0--spine0:Ethernet0", "leaf0:Ethernet1--spine1:Ethernet0"});
  auto r = Place(g, {MakeUnit(g, "a", "host002-nic0", {{"host000-nic0", 1e9}})}, {},
                 PlacementMode::kFull);
  EXPECT_EQ(r.top[0], -1);
  EXPECT_NE(r.reason[0].find("no live path"), std::string::npos);
}

// 3-tier: pods p0, p1; each pod spine i connects to super-spines of plane i.
//
//   ss0 ss1 | ss2 ss3      (plane 0 | plane 1)
//    \  /       \  /
//  p0-spine0  p0-spine1   p1-spine0  p1-spine1
//      leaves of p0           leaves of p1
TEST(PathEngineTest, ThreeTierPathsFollowPlanes) {
  FabricGraph g = FabricGraph::Build(*loom::testing::OneNicClos3(), {});
  ASSERT_TRUE(g.three_tier());
  EXPECT_EQ(g.num_tops(), 4);
  std::vector<int> edges;
  int a = g.LeafIndex("pod0-leaf0"), b = g.LeafIndex("pod1-leaf1"), c = g.LeafIndex("pod0-leaf1");
  ASSERT_TRUE(g.PathEdges(a, b, g.TopIndex("superspine3"), &edges));
  ASSERT_EQ(edges.size(), 4u);
  EXPECT_EQ(g.edge_name(edges[0]), "pod0-leaf0->pod0-spine1");
  EXPECT_EQ(g.edge_name(edges[1]), "pod0-spine1->superspine3");
  EXPECT_EQ(g.edge_name(edges[2]), "superspine3->pod1-spine1");
  EXPECT_EQ(g.edge_name(edges[3]), "pod1-spine1->pod1-leaf1");
  ASSERT_TRUE(g.PathEdges(a, c, g.TopIndex("superspine0"), &edges));
  ASSERT_EQ(edges.size(), 2u);  // intra-pod: the super-spine is not used
  EXPECT_EQ(g.edge_name(edges[1]), "pod0-spine0->pod0-leaf1");
  EXPECT_EQ(g.FirstHop(b, g.TopIndex("superspine2")), "pod1-spine1");
}

}  // namespace
}  // namespace loom::te

namespace loom::te {
namespace {

TEST(PlacementTest, MeasuredDemandScaleRefinesTheModel) {
  // One job: host000 (leaf0) <-> host002 (leaf1), point to point, modelled at
  // 400G. Telemetry says it only sends a quarter of that.
  auto topo = loom::testing::SmallFabric();
  Placement p(topo, {});
  v1::Job job;
  job.set_job_id("j");
  job.set_tenant("t");
  job.set_collective(v1::COLLECTIVE_PATTERN_POINT_TO_POINT);
  job.add_endpoints("host000-gpu0");
  job.add_endpoints("host002-gpu0");
  p.Upsert(job);
  EXPECT_NEAR(p.max_utilization(), 1.0, 1e-9);
  EXPECT_EQ(p.ModelledNicRates("j").at("host000-nic0"), 400e9);
  EXPECT_FALSE(p.SetDemandScale("j", 0.9));  // within 20 %: not worth it
  EXPECT_TRUE(p.SetDemandScale("j", 0.25));
  p.Recompute(PlacementMode::kFull);
  EXPECT_NEAR(p.max_utilization(), 0.25, 1e-9);
  p.Remove("j");
  EXPECT_DOUBLE_EQ(p.DemandScale("j"), 1.0);
}

}  // namespace
}  // namespace loom::te

namespace loom::te {
namespace {

TEST(PlacementTest, RingsFillOneSpinePlaneEachAndAFullRecomputeRelievesTheOverload) {
  loom::testing::MixedJobs m = loom::testing::MakeMixedJobs();
  Placement p(m.topo, {});
  for (int j = 0; j < 3; ++j) p.Upsert(m.jobs[static_cast<size_t>(j)]);
  // Placed on an empty fabric, each ring's flows (one per leaf, no two on a link)
  // join the spine plane the ring already uses.
  for (const char* ring : {"job0", "job1"}) {
    auto a = p.AssignmentOf(ring);
    ASSERT_EQ(a.primary_spines_size(), 1) << ring << ": " << a.reason();
  }
  EXPECT_NE(p.AssignmentOf("job0").primary_spines(0), p.AssignmentOf("job1").primary_spines(0));
  EXPECT_LE(p.max_utilization(), 1.0 + 1e-9);
  // The last ring arrives after the all-to-all took every other plane: placed
  // incrementally around the others, some link is predicted over capacity.
  p.Upsert(m.jobs[3]);
  const double incremental = p.max_utilization();
  EXPECT_GT(incremental, 1.0 + 1e-6);
  // A full recompute moves jobs to remove the overload (a smaller gain than the
  // 5 % stability threshold would still be taken), every ring in a plane of its own.
  auto changed = p.Recompute(PlacementMode::kFull);
  EXPECT_FALSE(changed.empty());
  EXPECT_LE(p.max_utilization(), 1.0 + 1e-9) << "was " << incremental;
  std::set<std::string> planes;
  for (const char* ring : {"job0", "job1", "job3"}) {
    auto a = p.AssignmentOf(ring);
    ASSERT_EQ(a.primary_spines_size(), 1) << ring << ": " << a.reason();
    planes.insert(a.primary_spines(0));
  }
  EXPECT_EQ(planes.size(), 3u);
  const v1::PathAssignment a2a = p.AssignmentOf("job2");
  for (const auto& s : a2a.primary_spines()) EXPECT_EQ(planes.count(s), 0u) << s;
  // And it stays: the next recompute moves nothing.
  EXPECT_TRUE(p.Recompute(PlacementMode::kFull).empty());
}

}  // namespace
}  // namespace loom::te

namespace loom::te {
namespace {

// Three 400G point-to-point flows leaf0 -> leaf1 over two 400G spines: one color per
// destination puts two of them on one uplink (200 %); split by destination QP into two
// parts, each uplink carries three half flows (150 %, the fractional optimum).
v1::Job ThreeCrossLeafFlows() {
  v1::Job job;
  job.set_job_id("j");
  job.set_tenant("t");
  job.set_traffic_class(3);
  job.set_collective(v1::COLLECTIVE_PATTERN_POINT_TO_POINT);
  for (const char* e : {"host000-nic0", "host002-nic0", "host000-nic1", "host002-nic1",
                        "host001-nic0", "host003-nic0"}) {
    job.add_endpoints(e);
  }
  return job;
}

v1::PolicySet SplitPolicy(uint32_t parts) {
  v1::PolicySet set;
  set.mutable_default_action()->set_qp_split(parts);
  return set;
}

TEST(PlacementTest, QpSplitIsNotAskedOfALeafWhoseSouthboundCannotExpressIt) {
  auto topo = loom::testing::SmallFabric();
  Placement p(topo, {});
  p.SetPolicy(SplitPolicy(2));
  loom::te::DeviceLimitsMap limits;
  limits["leaf1"].qp_split_routes = false;
  limits["leaf1"].spray = false;
  limits["leaf1"].driver = "bgp";
  p.SetDeviceLimits(limits);
  v1::PathAssignment a = p.Upsert(ThreeCrossLeafFlows());
  // One color per destination again (the 200 % of the unsplit placement).
  EXPECT_NEAR(p.max_utilization(), 2.0, 1e-9) << a.reason();
  ASSERT_EQ(a.routes_size(), 3) << a.reason();
  for (const auto& r : a.routes()) EXPECT_EQ(r.qp_mask(), 0u);
  EXPECT_NE(a.reason().find("QP split 2 not applied: leaf1 cannot express routes split by "
                            "destination QP (programmed by bgp)"),
            std::string::npos)
      << a.reason();
  for (const auto& [dev, st] : p.DesiredStates()) {
    for (const auto& r : st.routes()) EXPECT_EQ(r.qp_mask(), 0u) << dev;
  }
  // Once every leaf can carry it, a recompute splits again.
  p.SetDeviceLimits({});
  p.Recompute(loom::te::PlacementMode::kFull);
  EXPECT_NEAR(p.max_utilization(), 1.5, 1e-9);
}

// A job that says its connections stripe over QPs is split without a policy asking,
// where every leaf can route by destination QP; the policy's qp_split 1 turns it off.
TEST(PlacementTest, JobsQpsPerConnectionSplitsWhereEveryLeafCanExpressIt) {
  auto topo = loom::testing::SmallFabric();
  Placement p(topo, {});
  v1::Job job = ThreeCrossLeafFlows();
  job.set_qps_per_connection(8);  // two spines: split in 2
  v1::PathAssignment a = p.Upsert(job);
  EXPECT_NEAR(p.max_utilization(), 1.5, 1e-9) << a.reason();
  ASSERT_EQ(a.routes_size(), 6) << a.reason();
  for (const auto& r : a.routes()) EXPECT_EQ(r.qp_mask(), 1u);
  EXPECT_NE(a.reason().find("QP split 2 from the job's 8 QPs per connection"), std::string::npos)
      << a.reason();
  // A leaf that cannot express it: one color per destination, and the reason says why.
  loom::te::DeviceLimitsMap limits;
  limits["leaf1"].qp_split_routes = false;
  limits["leaf1"].driver = "bgp";
  p.SetDeviceLimits(limits);
  a = p.Upsert(job);
  EXPECT_NEAR(p.max_utilization(), 2.0, 1e-9);
  EXPECT_NE(a.reason().find("QP split 2 not applied: leaf1"), std::string::npos) << a.reason();
  // The policy says no split.
  p.SetDeviceLimits({});
  p.SetPolicy(SplitPolicy(1));
  a = p.Upsert(job);
  EXPECT_EQ(a.routes_size(), 3) << a.reason();
  EXPECT_NEAR(p.max_utilization(), 2.0, 1e-9);
}

// Three flows leaf0 -> leaf1 need three colored routes on leaf0 (none on
// leaf1, the destinations' leaf); with a budget of two, one is left out (its
// traffic takes ECMP) and the job's reason says where and why.
TEST(PlacementTest, RoutesBeyondALeafsBudgetAreLeftOutAndTheReasonSaysSo) {
  auto topo = loom::testing::SmallFabric();
  Placement p(topo, {});
  v1::PathAssignment a = p.Upsert(ThreeCrossLeafFlows());
  EXPECT_EQ(p.DesiredStateOf("leaf0").routes_size(), 3);
  EXPECT_EQ(p.DesiredStateOf("leaf1").routes_size(), 0);
  EXPECT_EQ(a.reason().find("route budget"), std::string::npos) << a.reason();
  loom::te::DeviceLimitsMap limits;
  limits["leaf0"].max_routes = 2;
  p.SetDeviceLimits(limits);
  a = p.Upsert(ThreeCrossLeafFlows());
  EXPECT_EQ(a.routes_size(), 3);  // the placement itself is unchanged
  v1::DeviceState leaf0 = p.DesiredStateOf("leaf0");
  EXPECT_EQ(leaf0.routes_size(), 2);
  EXPECT_EQ(leaf0.colors_size(), 2);
  EXPECT_NE(a.reason().find("1 colored route(s) left out for route budgets on 1 switch(es): "
                            "leaf0 (budget 2)"),
            std::string::npos)
      << a.reason();
  auto stats = p.Routes();
  EXPECT_EQ(stats.routes, 2u);
  EXPECT_EQ(stats.dropped, 1u);
  EXPECT_EQ(stats.max_per_leaf, 2u);
  // The map of every switch is the same per-device state.
  auto all = p.DesiredStates();
  ASSERT_TRUE(all.count("leaf0"));
  EXPECT_TRUE(loom::proto::SameMessage(all["leaf0"], leaf0));
  EXPECT_EQ(all.size(), p.DesiredDevices().size());
}

TEST(PlacementTest, QpSplitSpreadsEachDestinationOverSpinesByQpParts) {
  auto topo = loom::testing::SmallFabric();
  Placement whole(topo, {});
  whole.Upsert(ThreeCrossLeafFlows());
  EXPECT_NEAR(whole.max_utilization(), 2.0, 1e-9);

  Placement p(topo, {});
  p.SetPolicy(SplitPolicy(2));
  v1::PathAssignment a = p.Upsert(ThreeCrossLeafFlows());
  EXPECT_NEAR(p.max_utilization(), 1.5, 1e-9) << a.reason();
  // Two parts per destination: QPs with an even / odd destination QP number.
  ASSERT_EQ(a.routes_size(), 6) << a.reason();
  std::map<std::string, std::set<uint32_t>> values;
  std::map<std::string, int> per_spine;
  for (const auto& r : a.routes()) {
    EXPECT_EQ(r.qp_mask(), 1u) << r.destination();
    values[r.destination()].insert(r.qp_value());
    per_spine[r.via()]++;
  }
  ASSERT_EQ(values.size(), 3u);
  for (const auto& [dst, v] : values) EXPECT_EQ(v, (std::set<uint32_t>{0, 1})) << dst;
  EXPECT_EQ(per_spine["spine0"], 3);
  EXPECT_EQ(per_spine["spine1"], 3);
  EXPECT_NE(a.reason().find("split by destination QP modulo 2"), std::string::npos) << a.reason();
  // The switches get one colored route per part, matching the destination QP.
  auto states = p.DesiredStates();
  int parts = 0;
  for (const auto& r : states.at("leaf0").routes()) {
    EXPECT_EQ(r.qp_mask(), 1u);
    EXPECT_LE(r.qp_value(), 1u);
    ++parts;
  }
  EXPECT_EQ(parts, 6);

  // Restart: a job reloaded with its split assignment keeps every part where it was.
  // (The saved parts swap spines, equally good, so a fresh placement would differ.)
  v1::PathAssignment saved = a;
  for (int i = 0; i + 1 < saved.routes_size(); i += 2) {
    std::string via = saved.routes(i).via(), backup = saved.routes(i).backup_via();
    saved.mutable_routes(i)->set_via(saved.routes(i + 1).via());
    saved.mutable_routes(i)->set_backup_via(saved.routes(i + 1).backup_via());
    saved.mutable_routes(i + 1)->set_via(via);
    saved.mutable_routes(i + 1)->set_backup_via(backup);
  }
  ASSERT_NE(Placement::RouteKey(saved), Placement::RouteKey(a));
  v1::Job reloaded = ThreeCrossLeafFlows();
  *reloaded.mutable_status()->mutable_assignment() = saved;
  Placement q(topo, {});
  q.SetPolicy(SplitPolicy(2));
  v1::PathAssignment again = q.Upsert(reloaded);
  EXPECT_EQ(Placement::RouteKey(again), Placement::RouteKey(saved));
  EXPECT_NEAR(q.max_utilization(), 1.5, 1e-9);
  for (const auto& r : again.routes()) EXPECT_NE(r.reason().find("kept"), std::string::npos);

  // Turning the split on for a placed job: a full recompute splits it and
  // takes the gain; turning it off puts each destination back on one spine.
  whole.SetPolicy(SplitPolicy(2));
  EXPECT_EQ(whole.Recompute(PlacementMode::kFull).size(), 1u);
  EXPECT_NEAR(whole.max_utilization(), 1.5, 1e-9);
  whole.SetPolicy(v1::PolicySet());
  whole.Recompute(PlacementMode::kFull);
  const v1::PathAssignment unsplit = whole.AssignmentOf("j");
  EXPECT_EQ(unsplit.routes_size(), 3);
  for (const auto& r : unsplit.routes()) EXPECT_EQ(r.qp_mask(), 0u);
  EXPECT_NEAR(whole.max_utilization(), 2.0, 1e-9);
}

TEST(PlacementTest, SplittingAPlacedJobSpreadsItsPartsEvenWhenAnotherJobIsHotter) {
  // Another tenant's three flows leaf1 -> leaf0 keep the fabric's maximum at 200 %
  // whatever happens, so a recompute gains nothing fabric-wide; the split job's
  // new parts must still spread (its own links 200 % -> 150 %).
  auto topo = loom::testing::SmallFabric();
  Placement p(topo, {});
  v1::Job other = ThreeCrossLeafFlows();
  other.set_job_id("other");
  other.set_tenant("o");
  other.clear_endpoints();
  for (const char* e : {"host002-nic0", "host000-nic0", "host002-nic1", "host000-nic1",
                        "host003-nic0", "host001-nic0"}) {
    other.add_endpoints(e);
  }
  p.Upsert(other);
  p.Upsert(ThreeCrossLeafFlows());
  EXPECT_NEAR(p.max_utilization(), 2.0, 1e-9);
  EXPECT_NEAR(p.AssignmentOf("j").predicted_max_utilization(), 2.0, 1e-9);
  v1::PolicySet set;
  auto* rule = set.add_rules();
  rule->set_name("t-split");
  rule->mutable_match()->add_tenants("t");
  rule->mutable_action()->set_qp_split(2);
  p.SetPolicy(set);
  auto changed = p.Recompute(PlacementMode::kFull);
  EXPECT_EQ(changed.count("j"), 1u);
  EXPECT_EQ(changed.count("other"), 0u);
  const v1::PathAssignment j = p.AssignmentOf("j");
  ASSERT_EQ(j.routes_size(), 6);
  std::map<std::string, int> per_spine;
  for (const auto& r : j.routes()) per_spine[r.via()]++;
  EXPECT_EQ(per_spine["spine0"], 3) << j.reason();
  EXPECT_EQ(per_spine["spine1"], 3) << j.reason();
  EXPECT_NEAR(j.predicted_max_utilization(), 1.5, 1e-9) << j.reason();
  EXPECT_NEAR(p.max_utilization(), 2.0, 1e-9);
  // Ending the split keeps each destination where its part 0 was.
  std::map<std::string, std::string> part0;
  for (const auto& r : j.routes()) {
    if (r.qp_value() == 0) part0[r.destination()] = r.via();
  }
  p.SetPolicy(v1::PolicySet());
  p.Recompute(PlacementMode::kFull);
  const v1::PathAssignment whole = p.AssignmentOf("j");
  ASSERT_EQ(whole.routes_size(), 3);
  for (const auto& r : whole.routes()) {
    EXPECT_EQ(r.via(), part0[r.destination()]) << r.destination();
    EXPECT_NE(r.reason().find("kept"), std::string::npos) << r.reason();
  }
}

}  // namespace
}  // namespace loom::te

namespace loom::te {
namespace {

// A permutation of whole 400G flows on a non-blocking rail fabric (32 leaves x 8
// spines): every leaf sends 8 flows and receives 8, so a placement with one flow per
// link exists (a bipartite edge colouring, König). Greedy and pair moves get stuck
// with two flows on a link; longer Kempe chains find the colouring.
// The bounded-churn re-placement (overloaded fabrics) moves units of at most its
// budget of jobs, and what it moves lowers the worst link.
TEST(PathEngineTest, RebalanceMovesAtMostItsBudgetOfJobsAndLowersTheWorstLink) {
  auto topo = loom::testing::OneNicClos2(2, 4, 8);
  FabricGraph g = FabricGraph::Build(*topo, {});
  // 8 jobs of two 150G units (leaf0 -> leaf1 and back), all on spine 0: 300 %.
  std::vector<Unit> units;
  std::vector<uint32_t> group;
  for (uint32_t j = 0; j < 8; ++j) {
    for (int dir = 0; dir < 2; ++dir) {
      Unit u;
      u.job_id = "job" + std::to_string(j);
      u.dst_nic = "nic" + std::to_string(j) + "-" + std::to_string(dir);
      u.dst_leaf = 1 - dir;
      u.sources = {{dir, 150e9}};
      u.current = 0;
      units.push_back(u);
      group.push_back(j);
    }
  }
  const std::vector<int> current(units.size(), 0);
  const double before = MaxUtilization(g, units, current);
  EXPECT_NEAR(before, 3.0, 1e-9);
  for (size_t budget : {size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{100}}) {
    PlacementResult r = Rebalance(g, units, group, budget, {});
    std::set<uint32_t> moved_jobs;
    for (size_t u = 0; u < units.size(); ++u) {
      if (r.top[u] == units[u].current) {
        EXPECT_EQ(r.backup[u], -1);  // the caller keeps its own
        continue;
      }
      moved_jobs.insert(group[u]);
      EXPECT_GE(r.backup[u], 0);
      EXPECT_NE(r.backup[u], r.top[u]);
      EXPECT_NE(r.reason[u].find("bounded re-placement"), std::string::npos) << r.reason[u];
    }
    EXPECT_LE(moved_jobs.size(), budget);
    EXPECT_GT(moved_jobs.size(), 0u) << "budget " << budget;
    EXPECT_LT(r.max_utilization, before - 0.1) << "budget " << budget;
    EXPECT_NEAR(r.max_utilization, MaxUtilization(g, units, r.top), 1e-9);
    // A unit of a moved job off spine 0 takes 150G off the busiest links.
    EXPECT_LE(r.max_utilization, before - 0.375 * static_cast<double>(moved_jobs.size()) / 2 + 1e-9)
        << "budget " << budget;
  }
  // Budget enough for every job: the spines share the 1,200G per direction.
  PlacementResult all = Rebalance(g, units, group, 100, {});
  EXPECT_NEAR(all.max_utilization, 0.75, 1e-9);
}

TEST(PathEngineTest, KempeChainsPlaceAPermutationOfWholeFlowsOnePerLink) {
  loom::topology::RailParams r;
  r.hosts = 32;
  r.hosts_per_stripe = 8;
  r.spines = 8;
  r.links_per_spine = 1;
  v1::Topology t;
  std::string err;
  ASSERT_TRUE(loom::topology::GenerateRail(r, &t, &err)) << err;
  loom::topology::TopologyIndex index(t);
  FabricGraph g = FabricGraph::Build(index, {});
  std::vector<std::string> nics;
  for (const auto& d : t.devices()) {
    if (d.role() == v1::DEVICE_ROLE_NIC) nics.push_back(d.id());
  }
  ASSERT_EQ(nics.size(), 256u);
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    std::vector<size_t> perm(nics.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937_64 rng(seed);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<Unit> units;
    for (size_t i = 0; i < nics.size(); ++i) {
      const std::string& src = nics[i];
      const std::string& dst = nics[perm[i]];
      if (g.NicLeaf(src) == g.NicLeaf(dst)) continue;
      units.push_back(MakeUnit(g, "perm", dst, {{src, 400e9}}));
    }
    PlacementResult res = Place(g, units, PlacementParams{}, PlacementMode::kFull);
    EXPECT_NEAR(res.max_utilization, 1.0, 1e-9) << "seed " << seed;
  }
}

}  // namespace
}  // namespace loom::te

namespace loom::te {
namespace {

// A random sequence of changes on a small rail fabric (16 hosts x 4 NICs, 16 leaves,
// 4 spines) driven over capacity — jobs of tenant t0, whose policy allows spraying,
// jobs on reorder-tolerant NICs, permutations whose pairing is a guess (footprint
// routes), rings and all-to-alls; registrations, updates that change a job's
// eligibility, releases, full recomputes, confirmations — checking after each step
// that the incremental bookkeeping equals a recompute from scratch
// (Placement::CheckIncrementalState). Returns what the reasons showed.
struct SequenceSeen {
  int sprayed_routes = 0, overload_sprayed = 0, budget_notes = 0;
  int rebalances = 0, rebalance_moves = 0;
};
SequenceSeen RunRandomSequence(const loom::te::DeviceLimitsMap& limits, uint32_t seed) {
  SequenceSeen seen;
  loom::topology::RailParams r;
  r.hosts = 16;
  r.hosts_per_stripe = 4;
  r.spines = 4;
  r.links_per_spine = 1;
  r.host.gpus_per_host = 4;
  r.host.nics_per_host = 4;
  v1::Topology t;
  std::string err;
  EXPECT_TRUE(loom::topology::GenerateRail(r, &t, &err)) << err;
  auto topo = std::make_shared<const loom::topology::TopologyIndex>(t);
  Placement p(topo, {});
  p.SetDeviceLimits(limits);
  v1::PolicySet set;
  auto* rule = set.add_rules();
  rule->set_name("spray-t0");
  rule->mutable_match()->add_tenants("t0");
  rule->mutable_action()->set_spray_eligible(true);
  p.SetPolicy(set);
  std::set<std::string> tolerant;
  for (int h = 8; h < 12; ++h) {
    for (int n = 0; n < 4; ++n) {
      char nic[32];
      std::snprintf(nic, sizeof(nic), "host%03d-nic%d", h, n);
      tolerant.insert(nic);
    }
  }
  p.SetReorderTolerantNics(tolerant);
  const v1::CollectivePattern kinds[] = {
      v1::COLLECTIVE_PATTERN_RING_ALLREDUCE, v1::COLLECTIVE_PATTERN_ALL_TO_ALL,
      v1::COLLECTIVE_PATTERN_PERMUTATION, v1::COLLECTIVE_PATTERN_UNSPECIFIED};
  std::mt19937 rng(seed);
  std::set<std::string> live;
  // Every switch's desired state as kept by TakeChangedDevices: only switches it names
  // are rebuilt (as PushDesired does).
  std::map<std::string, v1::DeviceState> desired;
  auto route_keys = [&] {
    std::map<std::string, std::string> out;
    for (const auto& j : live) out[j] = Placement::RouteKey(p.AssignmentOf(j));
    return out;
  };
  for (int step = 0; step < 200; ++step) {
    const int action = std::uniform_int_distribution<int>(0, 11)(rng);
    const std::string id = "j" + std::to_string(std::uniform_int_distribution<int>(0, 39)(rng));
    if (action >= 10 && p.max_utilization() > 1.0 + 1e-9) {
      // The bounded overload re-placement (3 jobs), rolled back half of the time.
      const auto keys = route_keys();
      const double before = p.max_utilization();
      Placement::Undo undo;
      const auto changed = p.Rebalance(3, &undo);
      ++seen.rebalances;
      seen.rebalance_moves += static_cast<int>(changed.size());
      if (live.size() > 3) {
        EXPECT_LE(p.max_utilization(), before + 1e-9) << "step " << step;
      }
      if (action == 11) {
        p.RollBack(std::move(undo));
        EXPECT_EQ(route_keys(), keys) << "step " << step;
        EXPECT_EQ(p.max_utilization(), before) << "step " << step;
      }
    } else if (action == 0 && live.count(id)) {
      p.Remove(id);
      live.erase(id);
    } else if (action == 1 && step % 3 == 0) {
      p.Recompute(PlacementMode::kFull);
    } else if (action == 2 && live.count(id)) {
      p.SetDemandConfirmed(id);
    } else if (action == 3 && live.count(id)) {
      // A measured scale changes the job's rates at the next recompute.
      p.SetDemandScale(id, std::uniform_int_distribution<int>(0, 1)(rng) ? 0.3 : 1.0);
      p.Recompute(PlacementMode::kFull);
    } else {
      v1::Job job;
      job.set_job_id(id);
      job.set_tenant("t" + std::to_string(std::uniform_int_distribution<int>(0, 2)(rng)));
      job.set_traffic_class(3);
      job.set_collective(kinds[std::uniform_int_distribution<int>(0, 3)(rng)]);
      // Hosts 8..11 are reorder-tolerant: some jobs lie there only.
      const bool on_tolerant = std::uniform_int_distribution<int>(0, 3)(rng) == 0;
      std::set<int> hosts;
      const int n = 1 << std::uniform_int_distribution<int>(1, 2)(rng);
      while (static_cast<int>(hosts.size()) < n) {
        hosts.insert(on_tolerant ? 8 + std::uniform_int_distribution<int>(0, 3)(rng)
                                 : std::uniform_int_distribution<int>(0, 15)(rng));
      }
      for (int g = 0; g < 4; ++g) {
        for (int h : hosts) {
          char gpu[32];
          std::snprintf(gpu, sizeof(gpu), "host%03d-gpu%d", h, g);
          job.add_endpoints(gpu);
        }
      }
      p.Upsert(job);
      live.insert(id);
    }
    const std::string diff = p.CheckIncrementalState();
    EXPECT_EQ(diff, "") << "step " << step;
    if (!diff.empty()) break;
    for (const auto& d : p.TakeChangedDevices()) desired[d] = p.DesiredStateOf(d);
    const auto full = p.DesiredStates();
    EXPECT_EQ(desired.size(), full.size()) << "step " << step;
    bool same = true;
    for (const auto& [d, st] : full) {
      const bool eq = loom::southbound::ContentKey(desired[d]) == loom::southbound::ContentKey(st);
      EXPECT_TRUE(eq) << "step " << step << ": " << d << " differs from a full rebuild";
      same &= eq;
    }
    if (!same) break;
    for (const auto& j : live) {
      const v1::PathAssignment a = p.AssignmentOf(j);
      for (const auto& route : a.routes()) seen.sprayed_routes += route.sprayed_at_size() > 0;
      seen.overload_sprayed +=
          a.reason().find("pinning whole flows cannot fit") != std::string::npos;
      seen.budget_notes += a.reason().find("left out for route budgets") != std::string::npos;
    }
  }
  return seen;
}

// The bounded overload re-placement on a placement of many jobs: at most its budget
// of jobs change (and exactly the ones it reports), the worst link drops, the
// incremental bookkeeping holds, and a roll-back restores every route.
TEST(PlacementTest, BoundedRebalanceMovesAtMostItsBudgetAndRollsBack) {
  loom::topology::RailParams r;
  r.hosts = 32;
  r.hosts_per_stripe = 8;
  r.spines = 4;
  r.links_per_spine = 1;
  r.host.gpus_per_host = 4;
  r.host.nics_per_host = 4;
  v1::Topology t;
  std::string err;
  ASSERT_TRUE(loom::topology::GenerateRail(r, &t, &err)) << err;
  auto topo = std::make_shared<const loom::topology::TopologyIndex>(t);
  Placement p(topo, {});
  std::mt19937 rng(3);
  std::vector<std::string> ids;
  for (int i = 0; i < 60; ++i) {
    v1::Job job;
    job.set_job_id("j" + std::to_string(i));
    job.set_tenant("t");
    job.set_collective(i % 3 == 0 ? v1::COLLECTIVE_PATTERN_ALL_TO_ALL
                                  : v1::COLLECTIVE_PATTERN_RING_ALLREDUCE);
    std::set<int> hosts;
    while (hosts.size() < 4) hosts.insert(std::uniform_int_distribution<int>(0, 31)(rng));
    for (int g = 0; g < 4; ++g) {
      for (int h : hosts) {
        char gpu[32];
        std::snprintf(gpu, sizeof(gpu), "host%03d-gpu%d", h, g);
        job.add_endpoints(gpu);
      }
    }
    p.Upsert(job);
    ids.push_back(job.job_id());
  }
  ASSERT_GT(p.max_utilization(), 1.0);
  int rounds_that_moved = 0;
  for (size_t budget : {size_t{1}, size_t{4}, size_t{10}}) {
    std::map<std::string, std::string> keys;
    for (const auto& id : ids) keys[id] = Placement::RouteKey(p.AssignmentOf(id));
    const double before = p.max_utilization();
    Placement::Undo undo;
    const auto changed = p.Rebalance(budget, &undo);
    EXPECT_LE(changed.size(), budget);
    for (const auto& id : ids) {
      const bool differs = Placement::RouteKey(p.AssignmentOf(id)) != keys[id];
      EXPECT_EQ(differs, changed.count(id) > 0) << id;
    }
    EXPECT_EQ(p.CheckIncrementalState(), "");
    if (!changed.empty()) {
      ++rounds_that_moved;
      EXPECT_LT(p.max_utilization(), before - 1e-9) << "budget " << budget;
    }
    // Rolled back: every route as it was.
    p.RollBack(std::move(undo));
    for (const auto& id : ids) {
      EXPECT_EQ(Placement::RouteKey(p.AssignmentOf(id)), keys[id]) << id;
    }
    EXPECT_EQ(p.max_utilization(), before);
    EXPECT_EQ(p.CheckIncrementalState(), "");
    // Kept this time (the next budget starts from it).
    Placement::Undo kept;
    p.Rebalance(budget, &kept);
  }
  EXPECT_GT(rounds_that_moved, 0);
}

// Spraying is decided over the jobs that may be sprayed only (the others' units are
// never sprayed): the same as deciding it over every job.
TEST(PlacementTest, IncrementalSprayingMatchesDecidingOverEveryJob) {
  SequenceSeen seen = RunRandomSequence({}, 11);
  // The sequence did exercise spraying, for unknown pairings and on overloaded leaves.
  EXPECT_GT(seen.sprayed_routes, 0);
  EXPECT_GT(seen.overload_sprayed, 0);
  EXPECT_GT(seen.rebalances, 0);
}

// What route budgets leave out of one job is found from a per-leaf index kept with
// the jobs, not the whole route table: the index equals one built afresh and its
// notes are the table's, with footprint routes, sprayed units and recomputes.
TEST(PlacementTest, IncrementalRouteBudgetNotesMatchTheWholeTable) {
  loom::te::DeviceLimitsMap limits;
  for (int s = 0; s < 4; ++s) {
    for (int rail = 0; rail < 4; ++rail) {
      limits["leaf-s" + std::to_string(s) + "-r" + std::to_string(rail)].max_routes = 6;
    }
  }
  SequenceSeen seen = RunRandomSequence(limits, 5);
  EXPECT_GT(seen.budget_notes, 0);
  EXPECT_GT(seen.sprayed_routes, 0);
}

}  // namespace
}  // namespace loom::te
