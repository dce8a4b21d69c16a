// Adaptive algorithms: GLB weights, ALB bucket rebalancing, DLB tuning, flap
// dampening and remediation decisions. All pure; no clock, no sleeps.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "api/topology/topology_generate.h"
#include "api/topology/topology_index.h"
#include "controller/adaptive/alb.h"
#include "controller/adaptive/dampening.h"
#include "controller/adaptive/dlb_tuning.h"
#include "controller/adaptive/glb.h"
#include "controller/adaptive/remediation.h"
#include "controller/core/adaptive_engine.h"
#include "controller/te/path_engine.h"
#include "telemetry/link_state.h"
#include "tests/unit/test_util.h"

namespace loom::adaptive {
namespace {

namespace v1 = loom::v1;
using telemetry::OperStatus;

constexpr double k400G = 400e9;

// ---------------------------------------------------------------------------
// GLB
// ---------------------------------------------------------------------------

GlbPath Path(const std::string& dev, const std::string& dst, const std::string& hop, int local,
             int remote, double cap = k400G, bool stale = false) {
  GlbPath p;
  p.device = dev;
  p.destination = dst;
  p.next_hop = hop;
  p.local_band = local;
  p.remote_band = remote;
  p.band = std::min(local, remote);
  p.live_capacity_bps = cap;
  p.stale = stale;
  return p;
}

uint32_t Weight(const GlbResult& r, const std::string& dev, const std::string& dst,
                const std::string& hop) {
  auto it = r.weights.find(dev);
  if (it == r.weights.end()) return 0;
  for (const auto& ws : it->second) {
    if (ws.destination() != dst) continue;
    auto w = ws.weights().find(hop);
    return w == ws.weights().end() ? 0 : w->second;
  }
  return 0;
}

uint32_t SetTotal(const GlbResult& r, const std::string& dev, const std::string& dst) {
  uint32_t total = 0;
  for (const auto& ws : r.weights.at(dev)) {
    if (ws.destination() != dst) continue;
    for (const auto& [hop, w] : ws.weights()) total += w;
  }
  return total;
}

// The seed's case:
//
//          spineA                  spineB
//        /   |    \\                /   |   \    .
//       /    |     \\ (hot)        /    |    \   .
//   leaf0  leaf1   leafD      leaf0  leaf1  leafD   (the same three leaves)
//
// leaf0 and leaf1 both send to leafD. Their uplinks to spineA look fine
// (local band 7), but spineA -> leafD is congested (band 2). Local DLB cannot
// see it; GLB lowers spineA's weight for destination leafD on both leaves.
std::vector<GlbPath> SeedPaths(int remote_a = 2) {
  std::vector<GlbPath> p;
  for (const char* leaf : {"leaf0", "leaf1"}) {
    p.push_back(Path(leaf, "leafD", "spineA", 7, remote_a));
    p.push_back(Path(leaf, "leafD", "spineB", 7, 7));
  }
  return p;
}

TEST(GlbTest, RemoteDownlinkCongestionLowersTheSpineOnBothIngressLeaves) {
  GlbParams params;
  GlbResult r = ComputeGlbWeights(SeedPaths(), GlbState{}, params);
  for (const char* leaf : {"leaf0", "leaf1"}) {
    EXPECT_LT(Weight(r, leaf, "leafD", "spineA"), Weight(r, leaf, "leafD", "spineB")) << leaf;
    EXPECT_GT(Weight(r, leaf, "leafD", "spineA"), 0u) << "a live path keeps some weight";
    EXPECT_EQ(SetTotal(r, leaf, "leafD"), params.weight_scale);
  }
  bool saw_reason = false;
  for (const auto& c : r.changes) {
    EXPECT_FALSE(c.reason.empty());
    if (c.next_hop == "spineA") {
      EXPECT_NE(c.reason.find("remote congestion via spineA"), std::string::npos) << c.reason;
      saw_reason = true;
    }
  }
  EXPECT_TRUE(saw_reason);
  EXPECT_EQ(r.sets, 2);
  EXPECT_EQ(r.changed_sets, 2);
}

TEST(GlbTest, PersistentCongestionLowersInBoundedStepsThenHoldsStill) {
  GlbParams params;
  GlbState state;
  uint32_t prev_a = 0;
  int last_change = -1;
  for (int round = 0; round < 60; ++round) {
    GlbResult r = ComputeGlbWeights(SeedPaths(), state, params);
    const uint32_t a = Weight(r, "leaf0", "leafD", "spineA");
    if (round > 0) {
      EXPECT_LE(a, prev_a) << "never raised while congested";
      EXPECT_LE(prev_a - a, params.max_weight_step) << "bounded change per round";
      if (a != prev_a) last_change = round;
    }
    EXPECT_GE(a, params.min_weight);
    prev_a = a;
    state = r.state;
  }
  EXPECT_LT(last_change, 30) << "converges, then nothing changes";
  EXPECT_LE(prev_a, 10u);
}

TEST(GlbTest, SmallQualityDifferencesDoNotMoveWeights) {
  // spineA remote band 6 vs spineB 7: below min_band_gap (2).
  GlbState state;
  for (int round = 0; round < 20; ++round) {
    GlbResult r = ComputeGlbWeights(SeedPaths(6), state, GlbParams{});
    EXPECT_EQ(Weight(r, "leaf0", "leafD", "spineA"), 50u);
    EXPECT_EQ(Weight(r, "leaf0", "leafD", "spineB"), 50u);
    if (round > 0) {
      EXPECT_TRUE(r.changes.empty());
    }
    state = r.state;
  }
}

TEST(GlbTest, StalePathsKeepTheirWeights) {
  GlbParams params;
  GlbResult r0 = ComputeGlbWeights(SeedPaths(7), GlbState{}, params);
  ASSERT_EQ(Weight(r0, "leaf0", "leafD", "spineA"), 50u);
  // spineA now looks congested, but its path data is stale: keep 50.
  auto paths = SeedPaths(1);
  for (auto& p : paths) {
    if (p.next_hop == "spineA") p.stale = true;
  }
  GlbState state = r0.state;
  for (int round = 0; round < 5; ++round) {
    GlbResult r = ComputeGlbWeights(paths, state, params);
    EXPECT_EQ(Weight(r, "leaf0", "leafD", "spineA"), 50u);
    EXPECT_EQ(Weight(r, "leaf0", "leafD", "spineB"), 50u);
    EXPECT_TRUE(r.changes.empty());
    state = r.state;
  }
  // Everything stale: the set is counted as stale and unchanged.
  for (auto& p : paths) p.stale = true;
  GlbResult r = ComputeGlbWeights(paths, state, params);
  EXPECT_EQ(r.stale_sets, 2);
  EXPECT_TRUE(r.changes.empty());
}

TEST(GlbTest, RelaxesBackToCapacityShareWhenCongestionClears) {
  GlbParams params;
  GlbState state;
  for (int round = 0; round < 10; ++round)
    state = ComputeGlbWeights(SeedPaths(), state, params).state;
  GlbResult r = ComputeGlbWeights(SeedPaths(7), state, params);
  ASSERT_LT(Weight(r, "leaf0", "leafD", "spineA"), 40u);
  for (int round = 0; round < 100; ++round) {
    r = ComputeGlbWeights(SeedPaths(7), r.state, params);
  }
  EXPECT_EQ(Weight(r, "leaf0", "leafD", "spineA"), 50u);
  EXPECT_EQ(Weight(r, "leaf0", "leafD", "spineB"), 50u);
}

// Closed feedback with a plant: spineA's downlink also carries foreign
// traffic, so it is congested (band 3) whenever leaf0 sends more than 40 %
// of its flowlets to spineA, good (band 7) otherwise. A memoryless band ->
// weight map would flip every round; GLB settles and probes ever more rarely.
TEST(GlbTest, DoesNotOscillateUnderFeedback) {
  GlbParams params;
  GlbState state;
  uint32_t share_a = 50;
  int changes_late = 0;
  for (int round = 0; round < 400; ++round) {
    const int remote = share_a > 40 ? 3 : 7;
    std::vector<GlbPath> paths = {Path("leaf0", "leafD", "spineA", 7, remote),
                                  Path("leaf0", "leafD", "spineB", 7, 7)};
    GlbResult r = ComputeGlbWeights(paths, state, params);
    const uint32_t a = Weight(r, "leaf0", "leafD", "spineA");
    if (round >= 200 && a != share_a) ++changes_late;
    share_a = a;
    state = r.state;
  }
  EXPECT_LE(share_a, 45u);
  EXPECT_LE(changes_late, 2) << "at most one probe (relax + back) in 200 rounds";
}

// Parallel links:
//
//     spineA        spineB
//       |           ||        leaf0 has 1 x 400G to spineA, 2 x 400G to spineB
//     leaf0 ------- leaf0
TEST(GlbTest, ParallelLinksWeighByLiveCapacityAndFailuresApplyAtOnce) {
  GlbParams params;
  std::vector<GlbPath> paths = {Path("leaf0", "leafD", "spineA", 7, 7, k400G),
                                Path("leaf0", "leafD", "spineB", 7, 7, 2 * k400G)};
  GlbResult r = ComputeGlbWeights(paths, GlbState{}, params);
  EXPECT_EQ(Weight(r, "leaf0", "leafD", "spineA"), 33u);
  EXPECT_EQ(Weight(r, "leaf0", "leafD", "spineB"), 67u);
  // One of the two spineB links fails: 50/50 at once, no bounded step.
  paths[1].live_capacity_bps = k400G;
  r = ComputeGlbWeights(paths, r.state, params);
  EXPECT_EQ(Weight(r, "leaf0", "leafD", "spineA"), 50u);
  EXPECT_EQ(Weight(r, "leaf0", "leafD", "spineB"), 50u);
  ASSERT_FALSE(r.changes.empty());
  EXPECT_NE(r.changes[0].reason.find("live capacity"), std::string::npos) << r.changes[0].reason;
  // spineA down: removed from the set.
  paths[0].live_capacity_bps = 0;
  paths[0].local_band = paths[0].band = 0;
  r = ComputeGlbWeights(paths, r.state, params);
  EXPECT_EQ(Weight(r, "leaf0", "leafD", "spineA"), 0u);
  EXPECT_EQ(Weight(r, "leaf0", "leafD", "spineB"), 100u);
  EXPECT_EQ(r.weights.at("leaf0")[0].weights().count("spineA"), 0u);
  bool down_reason = false;
  for (const auto& c : r.changes) {
    if (c.next_hop == "spineA" && c.reason.find("down") != std::string::npos) down_reason = true;
  }
  EXPECT_TRUE(down_reason);
}

TEST(GlbTest, MoreThan64LeavesOnlyTheHotDestinationMoves) {
  // 96 leaves x 4 spines, every ordered pair; spine2 -> leaf77 congested.
  constexpr int kLeaves = 96;
  std::vector<GlbPath> paths;
  auto name = [](int i) { return "leaf" + std::to_string(i); };
  for (int a = 0; a < kLeaves; ++a) {
    for (int b = 0; b < kLeaves; ++b) {
      if (a == b) continue;
      for (int s = 0; s < 4; ++s) {
        const int remote = (b == 77 && s == 2) ? 1 : 7;
        paths.push_back(Path(name(a), name(b), "spine" + std::to_string(s), 7, remote));
      }
    }
  }
  GlbResult r = ComputeGlbWeights(paths, GlbState{}, GlbParams{});
  EXPECT_EQ(r.sets, kLeaves * (kLeaves - 1));
  for (int a = 0; a < kLeaves; ++a) {
    if (a == 77) continue;
    EXPECT_LT(Weight(r, name(a), "leaf77", "spine2"), 25u) << a;
    EXPECT_EQ(Weight(r, name(a), name((a + 1) % kLeaves == 77 ? 78 : (a + 1) % kLeaves), "spine2"),
              25u);
  }
}

// 5-stage fabric (generated: 2 pods x 2 leaves x 2 spines, 4 super-spines,
// planes = spine index):
//
//            ss0  ss1        ss2  ss3        (plane 0: ss0, ss1; plane 1: ss2, ss3)
//             \\  //          \\  //
//   pod0:  spine-p0-0      spine-p0-1      pod1: spine-p1-0  spine-p1-1
//            |    \        /    |                  |  (hot) \   /  |
//          leaf-p0-0    leaf-p0-1                leaf-p1-0    leaf-p1-1
//
// spine-p1-0 -> leaf-p1-0 is congested. Every leaf sending to leaf-p1-0
// lowers its plane-0 first hop (pod0 leaves: spine-p0-0; leaf-p1-1:
// spine-p1-0) and nothing else changes.
TEST(GlbTest, FiveStageFabricSteersAwayFromRemoteDownlinkThroughPlanes) {
  topology::Clos3Params cp;
  v1::Topology t;
  std::string err;
  ASSERT_TRUE(topology::GenerateClos3(cp, &t, &err)) << err;
  topology::TopologyIndex index(std::move(t));
  const auto& topo = index.topology();
  auto role = [&](const std::string& id) {
    for (const auto& d : topo.devices()) {
      if (d.id() == id) return d.role();
    }
    return v1::DEVICE_ROLE_UNSPECIFIED;
  };
  auto pod = [&](const std::string& id) {
    for (const auto& d : topo.devices()) {
      if (d.id() == id) return d.pod();
    }
    return std::string();
  };
  // Fresh, idle links everywhere.
  std::vector<telemetry::LinkDirectionState> links(2 * topo.links_size());
  for (int i = 0; i < 2 * topo.links_size(); ++i) {
    links[i].link_index = i / 2;
    links[i].direction = i % 2 ? telemetry::Direction::kDown : telemetry::Direction::kUp;
    links[i].oper = OperStatus::kUp;
    links[i].stale = false;
    links[i].has_rate = true;
    links[i].quality_band = 7;
  }
  // The hot downlink: the first spine -> leaf link into a leaf of the second pod.
  std::string first_pod, hot_spine, hot_leaf;
  for (const auto& d : topo.devices()) {
    if (d.role() == v1::DEVICE_ROLE_LEAF) {
      first_pod = d.pod();
      break;
    }
  }
  for (int i = 0; i < topo.links_size() && hot_spine.empty(); ++i) {
    const auto& l = topo.links(i);
    if (role(l.a().device()) == v1::DEVICE_ROLE_LEAF &&
        role(l.b().device()) == v1::DEVICE_ROLE_SPINE && pod(l.a().device()) != first_pod) {
      hot_leaf = l.a().device();
      hot_spine = l.b().device();
      links[2 * i + 1].quality_band = 1;  // kDown = spine -> leaf.
    }
  }
  ASSERT_FALSE(hot_spine.empty());
  const auto quals = telemetry::ComputePathQualities(index, links);
  const auto graph = te::FabricGraph::Build(index, {});
  const auto paths = GlbPathsFromQualities(index, graph, quals);
  ASSERT_FALSE(paths.empty());
  GlbResult r = ComputeGlbWeights(paths, GlbState{}, GlbParams{});

  // Plane of the hot spine: its super-spines; the other pod's spine on them.
  std::set<std::string> hot_plane_ss;
  for (const auto& l : topo.links()) {
    if (l.a().device() == hot_spine && role(l.b().device()) == v1::DEVICE_ROLE_SUPER_SPINE) {
      hot_plane_ss.insert(l.b().device());
    }
  }
  int lowered = 0;
  for (const auto& [dev, sets] : r.weights) {
    for (const auto& ws : sets) {
      ASSERT_EQ(ws.weights_size(), 2) << dev << " -> " << ws.destination();
      std::vector<uint32_t> w;
      std::string low_hop;
      uint32_t low = 1000;
      for (const auto& [hop, x] : ws.weights()) {
        if (x < low) {
          low = x;
          low_hop = hop;
        }
        w.push_back(x);
      }
      if (ws.destination() != hot_leaf) {
        EXPECT_EQ(w[0], w[1]) << dev << " -> " << ws.destination();
        continue;
      }
      ASSERT_LT(low, 50u) << dev;
      ++lowered;
      // The lowered first hop is in the hot spine's plane.
      bool in_plane = low_hop == hot_spine;
      for (const auto& l : topo.links()) {
        if (l.a().device() == low_hop && hot_plane_ss.count(l.b().device())) in_plane = true;
      }
      EXPECT_TRUE(in_plane) << dev << " lowered " << low_hop;
    }
  }
  EXPECT_EQ(lowered, 3) << "the three other leaves send to " << hot_leaf;
}

TEST(GlbTest, ValidatesParams) {
  EXPECT_EQ(ValidateGlbParams(GlbParams{}), "");
  GlbParams p;
  p.decrease_factor = 1.0;
  EXPECT_NE(ValidateGlbParams(p).find("decrease_factor"), std::string::npos);
  p = GlbParams{};
  p.min_weight = 0;
  EXPECT_NE(ValidateGlbParams(p).find("min_weight"), std::string::npos);
}

// ---------------------------------------------------------------------------
// ALB
// ---------------------------------------------------------------------------

// One ECMP group on leaf0 towards leafD, 64 buckets over 4 x 400G members:
//
//            leaf0 (64 buckets)
//        /     |       |      \    .
//      nh0    nh1     nh2     nh3
//
// Bucket b belongs to nh(b % 4) and carries a steady rate: nh0's buckets are
// elephants (12G each), nh1/nh2 5G, nh3 4G -> 192/80/80/64 G: imbalance 67 %.
struct AlbFixture {
  std::vector<std::string> table;
  std::vector<double> rate;
  std::vector<AlbMember> members;
  AlbFixture(double scale = 1.0) {
    for (int m = 0; m < 4; ++m) members.push_back({"nh" + std::to_string(m), k400G, true});
    for (int b = 0; b < 64; ++b) {
      table.push_back("nh" + std::to_string(b % 4));
      const double r[] = {12e9, 5e9, 5e9, 4e9};
      rate.push_back(r[b % 4] * scale);
    }
  }
  AlbInput Input(int64_t scan) const {
    AlbInput in;
    in.group = "leafD";
    in.scan = scan;
    in.buckets = table;
    in.bucket_bps = rate;
    in.members = members;
    return in;
  }
};

TEST(AlbTest, ImbalanceFormula) {
  EXPECT_DOUBLE_EQ(AlbImbalance({100, 60}), 0.4);
  EXPECT_DOUBLE_EQ(AlbImbalance({192, 80, 80, 64}), (192.0 - 64) / 192);
  EXPECT_DOUBLE_EQ(AlbImbalance({0, 0}), 0.0);
}

TEST(AlbTest, ConvergesUnderToleranceWithinBoundedRoundsAndStaysThere) {
  AlbFixture f;
  AlbParams params;
  AlbGroupState state;
  int under_at = -1;      // First scan measured within tolerance.
  int converged_at = -1;  // First scan that ends rebalancing (within tolerance - margin).
  int moves_after = 0;
  std::map<uint32_t, int64_t> last_moved;
  for (int64_t scan = 0; scan < 120; ++scan) {
    AlbResult r = AlbScan(f.Input(scan), state, params);
    EXPECT_LE(static_cast<int>(r.moves.size()), params.max_moves_per_round) << scan;
    if (scan < 1) {
      EXPECT_TRUE(r.moves.empty()) << "one scan over tolerance does not act";
    }
    for (const auto& m : r.moves) {
      EXPECT_FALSE(m.reason.empty());
      if (last_moved.count(m.bucket)) {
        EXPECT_GT(scan - last_moved[m.bucket], params.freeze_scans) << "bucket " << m.bucket;
      }
      last_moved[m.bucket] = scan;
    }
    if (under_at >= 0) {
      EXPECT_LE(r.imbalance, params.tolerance) << "stays under tolerance, scan " << scan;
    } else if (r.imbalance <= params.tolerance) {
      under_at = static_cast<int>(scan);
    }
    if (converged_at >= 0) {
      moves_after += static_cast<int>(r.moves.size());
    } else if (r.imbalance <= params.tolerance - params.stop_margin) {
      converged_at = static_cast<int>(scan);
      EXPECT_TRUE(r.moves.empty());
    }
    f.table = r.buckets;
    state = r.state;
  }
  ASSERT_GE(under_at, 0);
  ASSERT_GE(converged_at, 0);
  EXPECT_LE(under_at, 6) << "bounded number of rounds";
  EXPECT_LE(converged_at, 12) << "bounded number of rounds";
  EXPECT_EQ(moves_after, 0) << "no oscillation under steady load (100+ scans)";
  std::vector<double> load(4, 0);
  for (int b = 0; b < 64; ++b) load[f.table[b].back() - '0'] += f.rate[b];
  EXPECT_LE(AlbImbalance(load), params.tolerance - params.stop_margin);
}

TEST(AlbTest, OneBadScanDoesNothing) {
  AlbFixture hot;
  AlbFixture even;
  for (auto& r : even.rate) r = 5e9;  // 80G each: balanced.
  AlbParams params;
  AlbGroupState state;
  // hot, even, hot, even, ...: never two consecutive scans over tolerance.
  for (int64_t scan = 0; scan < 20; ++scan) {
    AlbInput in = (scan % 2 ? even : hot).Input(scan);
    AlbResult r = AlbScan(in, state, params);
    EXPECT_TRUE(r.moves.empty()) << scan << ": " << r.reason;
    state = r.state;
  }
  // A skipped scan number also restarts the count.
  state = AlbScan(hot.Input(100), state, params).state;
  AlbResult r = AlbScan(hot.Input(102), state, params);
  EXPECT_TRUE(r.moves.empty()) << r.reason;
  // A stale scan in between too.
  AlbInput stale = hot.Input(103);
  stale.bucket_stale.assign(64, false);
  stale.bucket_stale[5] = true;
  r = AlbScan(stale, r.state, params);
  EXPECT_NE(r.reason.find("stale"), std::string::npos);
  r = AlbScan(hot.Input(104), r.state, params);
  EXPECT_TRUE(r.moves.empty());
  r = AlbScan(hot.Input(105), r.state, params);
  EXPECT_FALSE(r.moves.empty()) << "two consecutive fresh scans over tolerance act";
}

TEST(AlbTest, NothingBelowTheUtilizationFloor) {
  AlbFixture f(0.5);  // Busiest 96G of 400G = 24 % < 30 %.
  AlbParams params;
  AlbGroupState state;
  for (int64_t scan = 0; scan < 20; ++scan) {
    AlbResult r = AlbScan(f.Input(scan), state, params);
    EXPECT_GT(r.imbalance, params.tolerance);
    EXPECT_TRUE(r.moves.empty()) << r.reason;
    state = r.state;
  }
}

TEST(AlbTest, MemberDownRedistributesOnlyItsBuckets) {
  AlbFixture f;
  f.members[2].up = false;
  AlbResult r = AlbScan(f.Input(0), AlbGroupState{}, AlbParams{});
  ASSERT_EQ(r.moves.size(), 16u);
  std::map<std::string, int> got;
  for (int b = 0; b < 64; ++b) {
    if (f.table[b] != "nh2") {
      EXPECT_EQ(r.buckets[b], f.table[b]) << "bucket " << b << " of a live member moved";
    } else {
      EXPECT_NE(r.buckets[b], "nh2");
      ++got[r.buckets[b]];
    }
  }
  for (const auto& [m, n] : got) EXPECT_NEAR(n, 16.0 / 3, 1.0) << m;
  EXPECT_NE(r.reason.find("member down"), std::string::npos);
}

TEST(AlbTest, AddedMemberTakesIdleBucketsFirst) {
  // 3 members hold all 48 buckets; every 4th bucket is idle; nh3 comes up.
  AlbFixture f;
  f.table.resize(48);
  f.rate.assign(48, 5e9);
  for (int b = 0; b < 48; ++b) {
    f.table[b] = "nh" + std::to_string(b % 3);
    if (b % 4 == 0) f.rate[b] = 0;
  }
  AlbResult r = AlbScan(f.Input(0), AlbGroupState{}, AlbParams{});
  ASSERT_EQ(r.moves.size(), 12u);
  for (const auto& m : r.moves) {
    EXPECT_EQ(m.to, "nh3");
    EXPECT_EQ(m.bps, 0) << "idle buckets move first";
  }
}

TEST(AlbTest, UnequalCapacitiesCompareUtilization) {
  // nh0 800G carries 2x what nh1 (400G) carries: same utilization, balanced.
  AlbInput in;
  in.members = {{"nh0", 2 * k400G, true}, {"nh1", k400G, true}};
  for (int b = 0; b < 8; ++b) {
    in.buckets.push_back(b < 4 ? "nh0" : "nh1");
    in.bucket_bps.push_back(b < 4 ? 100e9 : 50e9);
  }
  AlbGroupState st;
  for (int64_t scan = 0; scan < 5; ++scan) {
    in.scan = scan;
    AlbResult r = AlbScan(in, st, AlbParams{});
    EXPECT_NEAR(r.imbalance, 0, 1e-12);
    EXPECT_TRUE(r.moves.empty());
    st = r.state;
  }
}

TEST(AlbTest, ScanIntervalDownToOneSecond) {
  AlbParams p;
  p.scan_interval_ns = kNsPerSec;
  EXPECT_EQ(ValidateAlbParams(p), "");
  p.scan_interval_ns = kNsPerSec / 2;
  EXPECT_NE(ValidateAlbParams(p).find("scan_interval_ns"), std::string::npos);
  p = AlbParams{};
  p.stop_margin = 0.3;
  EXPECT_NE(ValidateAlbParams(p).find("stop_margin"), std::string::npos);
}

TEST(AlbTest, RatesFromTelemetryMarkMissingBucketsStale) {
  std::vector<telemetry::AlbBucketState> rows(2);
  rows[0] = {"leaf0", "leafD", 0, "Ethernet1", 10, 1e9, false};
  rows[1] = {"leaf0", "other", 1, "Ethernet2", 10, 2e9, false};
  std::vector<double> bps;
  std::vector<bool> stale;
  AlbRatesFromTelemetry(rows, "leaf0", "leafD", 2, &bps, &stale);
  EXPECT_EQ(bps[0], 1e9);
  EXPECT_FALSE(stale[0]);
  EXPECT_TRUE(stale[1]);
}

// ---------------------------------------------------------------------------
// DLB tuning
// ---------------------------------------------------------------------------

TEST(DlbTuningTest, TimerSitsBetweenSkewAndBurstGaps) {
  DlbLeafInput leaf;
  leaf.leaf = "leaf0";
  leaf.path_delay_skew_ns = 5 * kNsPerUs;
  leaf.jobs.push_back({"jobA", {400 * kNsPerUs, 500 * kNsPerUs, 600 * kNsPerUs}, 2 * kNsPerUs});
  DlbDecision d = TuneDlb(leaf, DlbTuningParams{});
  EXPECT_EQ(d.profile.mode(), v1::DLB_MODE_FLOWLET);
  const auto t = static_cast<TimeNs>(d.profile.inactivity_interval_ns());
  EXPECT_EQ(d.lower_bound_ns, 10 * kNsPerUs);   // 2 x skew.
  EXPECT_EQ(d.upper_bound_ns, 200 * kNsPerUs);  // Smallest gap / 2.
  EXPECT_GE(t, 2 * leaf.path_delay_skew_ns);
  EXPECT_LE(t, 400 * kNsPerUs / 2);
  EXPECT_EQ(t, 45 * kNsPerUs);  // sqrt(10 x 200) us, rounded to 1 us.
  EXPECT_NE(d.reason.find("flowlet timer"), std::string::npos) << d.reason;
}

TEST(DlbTuningTest, TheJobWithTheShortestGapsBoundsTheTimer) {
  DlbLeafInput leaf;
  leaf.leaf = "leaf0";
  leaf.path_delay_skew_ns = 1 * kNsPerUs;
  leaf.jobs.push_back({"slow", {2000 * kNsPerUs}, 0});
  leaf.jobs.push_back({"fast", {80 * kNsPerUs, 90 * kNsPerUs}, 3 * kNsPerUs});
  DlbDecision d = TuneDlb(leaf, DlbTuningParams{});
  EXPECT_EQ(d.bounding_job, "fast");
  EXPECT_EQ(d.lower_bound_ns, 6 * kNsPerUs);  // 2 x burst spacing > 2 x skew.
  EXPECT_EQ(d.upper_bound_ns, 40 * kNsPerUs);
  const auto t = static_cast<TimeNs>(d.profile.inactivity_interval_ns());
  EXPECT_GE(t, d.lower_bound_ns);
  EXPECT_LE(t, d.upper_bound_ns);
}

TEST(DlbTuningTest, GapsShorterThanTheSkewLeaveStaticHashing) {
  DlbLeafInput leaf;
  leaf.leaf = "leaf0";
  leaf.path_delay_skew_ns = 5 * kNsPerUs;
  leaf.jobs.push_back({"jobA", {8 * kNsPerUs, 9 * kNsPerUs}, 0});
  DlbDecision d = TuneDlb(leaf, DlbTuningParams{});
  EXPECT_EQ(d.profile.mode(), v1::DLB_MODE_STATIC);
  EXPECT_NE(d.reason.find("no valid flowlet timer"), std::string::npos) << d.reason;
}

TEST(DlbTuningTest, SprayingOnlyForReorderTolerantJobs) {
  DlbLeafInput leaf;
  leaf.leaf = "leaf0";
  leaf.path_delay_skew_ns = 5 * kNsPerUs;
  // The tolerant job has tiny gaps; it is sprayed and does not force STATIC.
  leaf.jobs.push_back({"tolerant", {3 * kNsPerUs}, 0, true});
  leaf.jobs.push_back({"strict", {300 * kNsPerUs}, 0, false});
  DlbDecision d = TuneDlb(leaf, DlbTuningParams{});
  EXPECT_EQ(d.profile.mode(), v1::DLB_MODE_FLOWLET);
  EXPECT_EQ(d.spray_jobs, std::vector<std::string>{"tolerant"});
  EXPECT_EQ(d.bounding_job, "strict");
  EXPECT_NE(d.reason.find("selective spraying"), std::string::npos);
  // Every job tolerant: per-packet.
  leaf.jobs[1].spray_eligible = true;
  d = TuneDlb(leaf, DlbTuningParams{});
  EXPECT_EQ(d.profile.mode(), v1::DLB_MODE_PER_PACKET);
  // No job tolerant: nothing sprayed.
  leaf.jobs[0].spray_eligible = leaf.jobs[1].spray_eligible = false;
  leaf.jobs.erase(leaf.jobs.begin());
  d = TuneDlb(leaf, DlbTuningParams{});
  EXPECT_TRUE(d.spray_jobs.empty());
}

TEST(DlbTuningTest, NoObservationsUseThePlatformDefault) {
  DlbLeafInput leaf;
  leaf.leaf = "leaf0";
  DlbDecision d = TuneDlb(leaf, DlbTuningParams{});
  EXPECT_EQ(d.profile.mode(), v1::DLB_MODE_FLOWLET);
  EXPECT_EQ(d.profile.inactivity_interval_ns(), 256u * kNsPerUs);
  // A skew above the default raises the timer to the lower bound.
  leaf.path_delay_skew_ns = 200 * kNsPerUs;
  d = TuneDlb(leaf, DlbTuningParams{});
  EXPECT_EQ(d.profile.inactivity_interval_ns(), 400u * kNsPerUs);
}

TEST(DlbTuningTest, QuantileIgnoresARareShortGap) {
  std::vector<TimeNs> gaps(20, 500 * kNsPerUs);
  gaps[7] = 1 * kNsPerUs;  // One outlier.
  EXPECT_EQ(GapQuantile(gaps, 0.0), 1 * kNsPerUs);
  EXPECT_EQ(GapQuantile(gaps, 0.1), 500 * kNsPerUs);
  DlbLeafInput leaf;
  leaf.leaf = "leaf0";
  leaf.path_delay_skew_ns = 5 * kNsPerUs;
  leaf.jobs.push_back({"jobA", gaps, 0});
  EXPECT_EQ(TuneDlb(leaf, DlbTuningParams{}).profile.mode(), v1::DLB_MODE_FLOWLET);
  DlbTuningParams strict;
  strict.gap_quantile = 0;
  EXPECT_EQ(TuneDlb(leaf, strict).profile.mode(), v1::DLB_MODE_STATIC);
  EXPECT_EQ(ValidateDlbTuningParams(strict), "");
}

// ---------------------------------------------------------------------------
// Flap dampening
// ---------------------------------------------------------------------------

TEST(DampeningTest, SingleFlapIsNotSuppressed) {
  DampeningParams p;
  DampeningState s;
  auto d = Dampen(s, LinkEvent::kDown, 0, p);
  EXPECT_FALSE(d.state.suppressed);
  EXPECT_FALSE(d.usable) << "down is down";
  d = Dampen(d.state, LinkEvent::kUp, kNsPerSec, p);
  EXPECT_TRUE(d.usable);
  EXPECT_FALSE(d.state.suppressed);
}

TEST(DampeningTest, FlappingLinkIsSuppressedThenReusedAfterStayingUp) {
  DampeningParams p;
  DampeningState s;
  int suppressed_after = 0;
  for (int i = 0; i < 4; ++i) {
    auto d = Dampen(s, LinkEvent::kDown, (2 * i) * kNsPerSec, p);
    if (d.state.suppressed && suppressed_after == 0) {
      suppressed_after = d.state.flaps;
      EXPECT_TRUE(d.suppression_changed);
      EXPECT_NE(d.reason.find("suppressed"), std::string::npos) << d.reason;
    }
    d = Dampen(d.state, LinkEvent::kUp, (2 * i + 1) * kNsPerSec, p);
    s = d.state;
  }
  EXPECT_EQ(suppressed_after, 3);
  // Up since t = 7 s but suppressed: not usable at 20 s.
  auto d = Dampen(s, LinkEvent::kNone, 20 * kNsPerSec, p);
  EXPECT_FALSE(d.usable);
  EXPECT_GT(d.reuse_at_ns, 20 * kNsPerSec);
  const TimeNs reuse_at = d.reuse_at_ns;
  d = Dampen(d.state, LinkEvent::kNone, reuse_at + kNsPerSec, p);
  EXPECT_TRUE(d.usable) << d.reason;
  EXPECT_TRUE(d.suppression_changed);
  EXPECT_NE(d.reason.find("reused"), std::string::npos);
}

TEST(DampeningTest, MaxSuppressTimeBoundsSuppression) {
  DampeningParams p;
  DampeningState s;
  for (int i = 0; i < 30; ++i) {
    s = Dampen(s, LinkEvent::kDown, i * kNsPerSec / 10, p).state;
    s = Dampen(s, LinkEvent::kUp, i * kNsPerSec / 10 + 1, p).state;
  }
  ASSERT_TRUE(s.suppressed);
  EXPECT_LE(s.penalty, p.reuse_threshold * 16 + 1e-6);  // Ceiling: 2^(60/15).
  auto d = Dampen(s, LinkEvent::kNone, s.suppressed_since_ns + p.max_suppress_ns, p);
  EXPECT_TRUE(d.usable) << d.reason;
  EXPECT_EQ(ValidateDampeningParams(p), "");
}

// ---------------------------------------------------------------------------
// Remediation
// ---------------------------------------------------------------------------

RemediationLink Healthy(const std::string& id) {
  RemediationLink l;
  l.link_id = id;
  l.tx_device = "leaf0";
  l.rx_device = "spine0";
  l.oper = OperStatus::kUp;
  l.tx_pps = 1e6;
  l.nominal_capacity_bps = l.live_capacity_bps = k400G;
  l.utilization_history = {0.5, 0.5, 0.5};
  return l;
}

TEST(RemediationTest, HealthyLinksNeedNothing) {
  EXPECT_TRUE(DecideRemediation({Healthy("l1"), Healthy("l2")}, RemediationParams{}).empty());
}

TEST(RemediationTest, DownOrFlappingLinkLeavesPlacement) {
  auto down = Healthy("l1");
  down.oper = OperStatus::kDown;
  auto flapping = Healthy("l2");
  flapping.dampened = true;
  auto a = DecideRemediation({down, flapping}, RemediationParams{});
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].kind, RemediationKind::kRemoveFromPlacement);
  EXPECT_NE(a[0].Text().find("oper down -> take l1 out of placement"), std::string::npos)
      << a[0].Text();
  EXPECT_EQ(a[1].kind, RemediationKind::kRemoveFromPlacement);
  EXPECT_NE(a[1].cause.find("flapping"), std::string::npos);
}

TEST(RemediationTest, ErroringLinkLeavesPlacement) {
  auto l = Healthy("l1");
  l.errors_pps = 50;  // 5e-5 of 1 Mpps.
  auto a = DecideRemediation({l}, RemediationParams{});
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RemediationKind::kRemoveFromPlacement);
  EXPECT_NE(a[0].cause.find("errors"), std::string::npos);
  l.errors_pps = 1;  // 1e-6: below both thresholds.
  EXPECT_TRUE(DecideRemediation({l}, RemediationParams{}).empty());
}

TEST(RemediationTest, CapacityLossLowersGlbWeight) {
  auto l = Healthy("l1");
  l.live_capacity_bps = 200e9;
  auto a = DecideRemediation({l}, RemediationParams{});
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RemediationKind::kLowerGlbWeight);
  EXPECT_DOUBLE_EQ(a[0].weight_factor, 0.5);
  EXPECT_NE(a[0].cause.find("lost capacity"), std::string::npos);
  l.live_capacity_bps = 350e9;  // 12.5 % loss: under the threshold.
  EXPECT_TRUE(DecideRemediation({l}, RemediationParams{}).empty());
}

TEST(RemediationTest, SustainedHotspotLowersGlbWeightButABlipDoesNot) {
  auto l = Healthy("l1");
  l.utilization_history = {0.5, 0.95, 0.97, 0.99};
  auto a = DecideRemediation({l}, RemediationParams{});
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RemediationKind::kLowerGlbWeight);
  EXPECT_NE(a[0].cause.find("hotspot"), std::string::npos);
  l.utilization_history = {0.95, 0.5, 0.97, 0.99};
  EXPECT_TRUE(DecideRemediation({l}, RemediationParams{}).empty());
}

TEST(RemediationTest, PfcStormReportsTheNicAndQuarantinesOnlyWhenAllowed) {
  auto l = Healthy("l9");
  l.tx_device = "leaf0";
  l.rx_device = "host003-nic1";
  l.nic_facing = true;
  l.pfc_stormed = true;
  l.pfc_pause_ratio = 0.8;
  RemediationParams p;
  auto a = DecideRemediation({l}, p);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].kind, RemediationKind::kReportNicPort);
  EXPECT_EQ(a[0].target, "host003-nic1");
  p.allow_quarantine = true;
  a = DecideRemediation({l}, p);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1].kind, RemediationKind::kQuarantineNicPort);
  EXPECT_NE(a[1].Text().find("PFC watchdog stormed"), std::string::npos) << a[1].Text();
  // A pause ratio alone triggers too.
  l.pfc_stormed = false;
  l.pfc_pause_ratio = 0.3;
  EXPECT_EQ(DecideRemediation({l}, RemediationParams{}).size(), 1u);
}

TEST(RemediationTest, StaleTelemetryDoesNotAct) {
  auto l = Healthy("l1");
  l.stale = true;
  l.errors_pps = 1e6;
  l.utilization_history = {1, 1, 1};
  EXPECT_TRUE(DecideRemediation({l}, RemediationParams{}).empty());
  l.oper = OperStatus::kDown;  // Oper status is authoritative.
  EXPECT_EQ(DecideRemediation({l}, RemediationParams{}).size(), 1u);
}

TEST(RemediationTest, CapacityLossActsBeforeTheFirstCounterRate) {
  // A link that comes up degraded: its operational speed (ON_CHANGE) is known
  // from the first notification, before two counter samples make a rate.
  auto l = Healthy("l1");
  l.stale = true;
  l.live_capacity_bps = 200e9;
  l.errors_pps = 1e6;  // not a fresh rate: not acted on
  auto a = DecideRemediation({l}, RemediationParams{});
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].rule, RemediationCause::kCapacityLoss);
  EXPECT_NE(a[0].cause.find("lost capacity: 200G of 400G"), std::string::npos) << a[0].cause;
  // Fresh, the errors decide (they take the link out altogether).
  l.stale = false;
  a = DecideRemediation({l}, RemediationParams{});
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].rule, RemediationCause::kErrors);
}

}  // namespace
}  // namespace loom::adaptive

// ---------------------------------------------------------------------------
// DLB mode dampening in the adaptive engine
// ---------------------------------------------------------------------------

namespace loom::controller {
namespace {

// The decision for a leaf flips every interval (its only job turns spray-eligible,
// then not: per-packet spraying, then flowlet), as traffic on the edge between two
// modes does. Returns how many times the leaf's programmed mode changed over 40
// intervals, then over 40 more with the decision steady.
std::pair<int, int> ModeChanges(const loom::adaptive::DampeningParams& damp) {
  auto index = loom::testing::SmallFabric();
  AdaptiveOptions o;
  o.glb = o.alb = o.remediation = false;
  o.dlb_interval_ns = kNsPerSec;
  o.dlb_confirm = 1;
  o.dlb_dampening = damp;
  AdaptiveEngine engine(*index, o);
  const auto graph = loom::te::FabricGraph::Build(*index, {});
  int changes = 0, steady_changes = 0;
  std::string last;
  for (int i = 0; i < 80; ++i) {
    loom::telemetry::LinkSnapshot snap;
    snap.taken_at_ns = static_cast<TimeNs>(i) * kNsPerSec;
    LeafJob j;
    j.job_id = "j";
    j.nics = {"host000-nic0"};
    j.spray_eligible = i < 40 ? i % 2 == 1 : true;
    engine.Balance(snap, snap.taken_at_ns, graph, {{"leaf0", {j}}});
    auto it = engine.dlb().find("leaf0");
    const std::string mode = it == engine.dlb().end() ? "" : v1::DlbMode_Name(it->second.mode());
    if (!last.empty() && mode != last) ++(i < 40 ? changes : steady_changes);
    last = mode;
  }
  return {changes, steady_changes};
}

TEST(DlbDampeningTest, ReversingDecisionsSettleAndASteadyOneIsFollowed) {
  // Default dampening: the first change is free, the reversal is the last one applied
  // until the penalty decays (~20 s at a 15 s half-life), then one more pair.
  auto [flapping, steady] = ModeChanges(AdaptiveOptions{}.dlb_dampening);
  EXPECT_LE(flapping, 4);
  // Once the decisions stay the same the leaf follows them (at most one change).
  EXPECT_LE(steady, 1);
  // Without dampening (a threshold never reached) the leaf flaps with its decision.
  loom::adaptive::DampeningParams off;
  off.suppress_threshold = 1e12;
  off.reuse_threshold = 1;
  auto [undamped, unused] = ModeChanges(off);
  (void)unused;
  EXPECT_GE(undamped, 30);
}

}  // namespace
}  // namespace loom::controller
