// DLB + ALB on one ECMP group (ForwardingMode::kDlbAlb): the group's bucket table is the
// shared flowset table. DLB writes its flowlet choices into the flow's bucket; ALB
// (SetAlbTable, as an on-box rebalancer does) moves buckets, and a moved bucket's flows go
// to the new member at once, flowlet gap or not.
#include <cmath>
#include <string>
#include <vector>

#include "sim-fabric/fabric.h"
#include "tests/sim/sim_test_util.h"

namespace loom::sim {
namespace {

using testing::Clos;
using testing::IfaceTo;
using testing::LinkBetween;
using testing::Make;
using testing::Nic;
using testing::OutOctets;

TEST(DlbAlb, ModeNameParsesAndPrints) {
  ForwardingMode m = ForwardingMode::kStaticHash;
  ASSERT_TRUE(ParseForwardingMode("dlb-alb", &m));
  EXPECT_EQ(m, ForwardingMode::kDlbAlb);
  EXPECT_STREQ(ForwardingModeName(ForwardingMode::kDlbAlb), "dlb-alb");
  ASSERT_TRUE(ParseForwardingMode("alb", &m));
  EXPECT_EQ(m, ForwardingMode::kAlb);
}

// Two elephants on leaf0 -> leaf1 (2 spines, 100G everywhere), each capped at 40 Gb/s: no
// queue, no ECN, no pause, so neither ever pauses for a flowlet gap. They start while
// leaf0-spine1 is down, so both take spine0; the link returns at 1 ms.
constexpr int kBuckets = 16;
struct Elephants {
  loom::v1::Topology topo;
  std::unique_ptr<Fabric> f;
  int a = -1, b = -1;
  std::string s0, s1;  // leaf0's uplinks to spine0 / spine1
};
Elephants StartElephants(ForwardingMode mode) {
  Elephants e;
  e.topo = Clos(2, 2, 4, 100e9, 100e9);
  FabricOptions o;
  o.seed = 5;
  e.f = Make(e.topo, o);
  e.s0 = IfaceTo(e.topo, "leaf0", "spine0");
  e.s1 = IfaceTo(e.topo, "leaf0", "spine1");
  EXPECT_TRUE(e.f->SetGroupMode("leaf0", "leaf1", mode).ok());
  if (mode == ForwardingMode::kDlbAlb) {
    EXPECT_TRUE(e.f->InitAlbTable("leaf0", "leaf1", kBuckets).ok());
  }
  const std::string link = LinkBetween(e.topo, "leaf0", "spine1");
  EXPECT_TRUE(e.f->SetLinkUp(link, false).ok());
  e.a = e.f->AddFlow(Nic(0), Nic(4), 0, 3, 40e9);
  e.b = e.f->AddFlow(Nic(1), Nic(5), 0, 3, 40e9);
  e.f->RunUntil(1 * kNsPerMs);
  EXPECT_TRUE(e.f->SetLinkUp(link, true).ok());
  e.f->RunUntil(5 * kNsPerMs);
  return e;
}

TEST(DlbAlb, FlowletDlbLeavesGaplessElephantsOnTheHotMember) {
  Elephants e = StartElephants(ForwardingMode::kDlbFlowlet);
  // Four ms after spine1 came back both still share spine0: no gap, no new flowlet.
  EXPECT_EQ(e.f->GetQp(e.a).path[1], "leaf0:" + e.s0);
  EXPECT_EQ(e.f->GetQp(e.b).path[1], "leaf0:" + e.s0);
  const double on_s1 = OutOctets(*e.f, "leaf0", e.s1);
  e.f->RunUntil(10 * kNsPerMs);
  EXPECT_EQ(e.f->GetQp(e.a).path[1], "leaf0:" + e.s0);
  EXPECT_EQ(e.f->GetQp(e.b).path[1], "leaf0:" + e.s0);
  EXPECT_EQ(OutOctets(*e.f, "leaf0", e.s1), on_s1) << "nothing should have moved to spine1";
}

TEST(DlbAlb, AlbBucketMoveTakesAGaplessElephantOffTheHotMemberAtOnce) {
  Elephants e = StartElephants(ForwardingMode::kDlbAlb);
  Fabric& f = *e.f;
  // Stuck like under flowlet DLB: both on spine0.
  ASSERT_EQ(f.GetQp(e.a).path[1], "leaf0:" + e.s0);
  ASSERT_EQ(f.GetQp(e.b).path[1], "leaf0:" + e.s0);
  const size_t ba = f.FlowHash("leaf0", e.a) % kBuckets, bb = f.FlowHash("leaf0", e.b) % kBuckets;
  ASSERT_NE(ba, bb) << "the test needs the elephants in different buckets";
  // The bucket counters see the flows: each flow's bucket names spine0 (DLB wrote it) and
  // carries the flow's bytes; nothing else counts.
  std::vector<AlbBucketCounters> c;
  ASSERT_TRUE(f.GetAlbCounters("leaf0", "leaf1", &c).ok());
  ASSERT_EQ(c.size(), static_cast<size_t>(kBuckets));
  EXPECT_EQ(c[ba].member, e.s0);
  EXPECT_EQ(c[bb].member, e.s0);
  const double sent_a = f.GetQp(e.a).sent_bytes;
  EXPECT_GT(sent_a, 20e6);  // 40 Gb/s for 5 ms = 25 MB
  EXPECT_NEAR(static_cast<double>(c[ba].bytes), sent_a, 0.01 * sent_a);
  EXPECT_NEAR(static_cast<double>(c[bb].bytes), f.GetQp(e.b).sent_bytes, 0.01 * sent_a);
  uint64_t others = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (i != ba && i != bb) others += c[i].bytes;
  }
  EXPECT_EQ(others, 0u);

  // The rebalancer moves a's bucket to spine1 (reads the table, writes it back changed).
  std::vector<std::string> table;
  for (const auto& x : c) table.push_back(x.member);
  table[ba] = e.s1;
  ASSERT_TRUE(f.SetAlbTable("leaf0", "leaf1", table).ok());
  f.Step();
  // At once: a follows its bucket without a flowlet gap (it sent in this step); b stays.
  EXPECT_EQ(f.GetQp(e.a).path[1], "leaf0:" + e.s1);
  EXPECT_GT(f.GetQp(e.a).send_bps, 0);
  EXPECT_EQ(f.GetQp(e.b).path[1], "leaf0:" + e.s0);

  // The bucket keeps counting the flow on its new member.
  const double s1_before = OutOctets(f, "leaf0", e.s1);
  const double a_before = f.GetQp(e.a).sent_bytes;
  std::vector<AlbBucketCounters> c0;
  ASSERT_TRUE(f.GetAlbCounters("leaf0", "leaf1", &c0).ok());
  f.RunUntil(f.now() + 2 * kNsPerMs);
  ASSERT_TRUE(f.GetAlbCounters("leaf0", "leaf1", &c).ok());
  EXPECT_EQ(c[ba].member, e.s1);
  EXPECT_EQ(c[bb].member, e.s0);
  const double moved = f.GetQp(e.a).sent_bytes - a_before;
  EXPECT_NEAR(moved, 10e6, 0.02 * 10e6);  // 40 Gb/s for 2 ms
  EXPECT_NEAR(static_cast<double>(c[ba].bytes - c0[ba].bytes), moved, 0.01 * moved);
  EXPECT_NEAR(OutOctets(f, "leaf0", e.s1) - s1_before, moved, 0.01 * moved);
  EXPECT_GT(c[bb].bytes, c0[bb].bytes);
  // The group stays in the combined mode after SetAlbTable: nothing else moved.
  EXPECT_EQ(f.GetQp(e.b).path[1], "leaf0:" + e.s0);
}

// A point-to-point job (host0 -> host4, 2.5 MB at 25 Gb/s, from 0.2 ms, two iterations
// 1 ms apart): its QP is a new flow in iteration 1 and starts a new flowlet in iteration 2.
// Quality is the load band only. During iteration 1 an elephant colored to spine1 loads
// that uplink to 60 % (band 3 against 7), so the new flow takes spine0; between the
// iterations it stops and another elephant loads spine0, so at the flowlet boundary
// quality points to spine1.
struct BoundaryRun {
  std::string first, second;                // the job's uplink in iteration 1 / 2
  std::string bucket_first, bucket_second;  // its bucket's member then (kDlbAlb)
  std::string e1, e2;                       // the elephants' uplinks
  std::string s0, s1;                       // "leaf0:<uplink to spine0 / spine1>"
};
BoundaryRun RunBoundary(ForwardingMode mode) {
  constexpr int kTable = 64;
  BoundaryRun r;
  auto topo = Clos(2, 2, 4, 100e9, 100e9);
  auto f = Make(topo, FabricOptions{});
  const std::string s0 = IfaceTo(topo, "leaf0", "spine0"), s1 = IfaceTo(topo, "leaf0", "spine1");
  DlbProfile dlb;
  dlb.load_weight = 1;  // quality = load band
  EXPECT_TRUE(f->SetDlbProfile("*", dlb).ok());
  EXPECT_TRUE(f->SetGroupMode("leaf0", "leaf1", mode).ok());
  if (mode == ForwardingMode::kDlbAlb) {
    EXPECT_TRUE(f->InitAlbTable("leaf0", "leaf1", kTable).ok());
  }
  ColorConfig on_s0, on_s1;
  on_s0.interfaces = {s0};
  on_s1.interfaces = {s1};
  EXPECT_TRUE(f->SetColor("leaf0", 7, on_s1).ok());
  EXPECT_TRUE(f->SetColor("leaf0", 8, on_s0).ok());
  const int e1 = f->AddFlow(Nic(1), Nic(5), 0, 3, 60e9, 0, 7);
  JobSpec j;
  j.id = "p2p";
  j.collective = Collective::kPointToPoint;
  j.ranks = {"host000-gpu0", "host004-gpu0"};
  j.message_bytes = 2.5e6;
  j.iterations = 2;
  j.compute_gap_ns = 1 * kNsPerMs;
  j.start_ns = 200 * kNsPerUs;
  j.max_rate_bps = 25e9;
  std::string err;
  EXPECT_GE(f->AddJob(j, &err), 0) << err;
  auto bucket_member = [&](int qp) -> std::string {
    std::vector<AlbBucketCounters> c;
    if (!f->GetAlbCounters("leaf0", "leaf1", &c).ok()) return "";
    return "leaf0:" + c[f->FlowHash("leaf0", qp) % c.size()].member;
  };
  f->RunUntil(500 * kNsPerUs);
  int qa = -1;
  for (const auto& q : f->GetQps()) {
    if (q.job == "p2p") qa = q.id;
  }
  EXPECT_GE(qa, 0);
  if (qa < 0) return r;
  r.s0 = "leaf0:" + s0;
  r.s1 = "leaf0:" + s1;
  r.first = f->GetQp(qa).path[1];
  r.bucket_first = bucket_member(qa);
  r.e1 = f->GetQp(e1).path[1];
  f->RunUntil(1200 * kNsPerUs);
  EXPECT_EQ(f->GetJob(0).iterations_done, 1);
  f->StopFlow(e1);
  const int e2 = f->AddFlow(Nic(2), Nic(6), 0, 3, 60e9, 0, 8);
  if (mode == ForwardingMode::kDlbAlb) {
    const size_t ba = f->FlowHash("leaf0", qa) % kTable;
    EXPECT_NE(f->FlowHash("leaf0", e1) % kTable, ba) << "the test needs another bucket";
    EXPECT_NE(f->FlowHash("leaf0", e2) % kTable, ba) << "the test needs another bucket";
  }
  f->RunUntil(2400 * kNsPerUs);  // iteration 2 started at about 2 ms
  EXPECT_EQ(f->GetJob(0).iterations_done, 1);
  r.second = f->GetQp(qa).path[1];
  r.bucket_second = bucket_member(qa);
  r.e2 = f->GetQp(e2).path[1];
  return r;
}

TEST(DlbAlb, FlowletBoundaryChoosesByQualityLikeDlbAndWritesTheBucket) {
  const BoundaryRun dlb = RunBoundary(ForwardingMode::kDlbFlowlet);
  const BoundaryRun both = RunBoundary(ForwardingMode::kDlbAlb);
  ASSERT_FALSE(dlb.first.empty());
  ASSERT_FALSE(both.first.empty());
  for (const BoundaryRun* r : {&dlb, &both}) {
    EXPECT_EQ(r->e1, r->s1);
    EXPECT_EQ(r->e2, r->s0);
  }
  // Flowlet DLB: the new flow avoids spine1, the new flowlet avoids spine0.
  EXPECT_EQ(dlb.first, dlb.s0);
  EXPECT_EQ(dlb.second, dlb.s1);
  // The combined mode makes the same choices, new flow and flowlet boundary alike ...
  EXPECT_EQ(both.first, dlb.first);
  EXPECT_EQ(both.second, dlb.second);
  // ... and the flow's bucket holds each choice.
  EXPECT_EQ(both.bucket_first, both.first);
  EXPECT_EQ(both.bucket_second, both.second);
}

// The flowset entry is shared: a flow starting in a bucket that another flow keeps busy
// follows the bucket's member instead of choosing by quality (the busy flow keeps its
// member, nothing reorders); once the bucket was idle for the inactivity time, the next
// flow's choice by quality is written into it. 3 leaves x 2 spines; leaf0 -> leaf1 has a
// one-bucket table, so every flow shares the bucket.
TEST(DlbAlb, BusyBucketIsFollowedIdleBucketIsReChosen) {
  auto topo = Clos(3, 2, 4, 100e9, 100e9);
  auto f = Make(topo, FabricOptions{});
  DlbProfile dlb;
  dlb.load_weight = 1;  // quality = load band
  ASSERT_TRUE(f->SetDlbProfile("*", dlb).ok());
  ASSERT_TRUE(f->SetGroupMode("leaf0", "leaf1", ForwardingMode::kDlbAlb).ok());
  ASSERT_TRUE(f->SetAlbTable("leaf0", "leaf1", {IfaceTo(topo, "leaf0", "spine0")}).ok());
  auto bucket = [&]() {
    std::vector<AlbBucketCounters> c;
    EXPECT_TRUE(f->GetAlbCounters("leaf0", "leaf1", &c).ok());
    return c.size() == 1 ? "leaf0:" + c[0].member : std::string();
  };
  // An elephant (60 % of an uplink), then a second flow into the same, busy bucket.
  const int a = f->AddFlow(Nic(0), Nic(4), 0, 3, 60e9);
  f->RunUntil(300 * kNsPerUs);
  const std::string a_path = f->GetQp(a).path[1];
  EXPECT_EQ(bucket(), a_path);
  const int b = f->AddFlow(Nic(1), Nic(5), 2.5e6, 3, 25e9);
  f->RunUntil(f->now() + 100 * kNsPerUs);
  // By quality b would take the idle uplink (band 7 against 3); the bucket keeps it on a's.
  EXPECT_EQ(f->GetQp(b).path[1], a_path);
  EXPECT_EQ(bucket(), a_path);
  // Both stop; the bucket goes idle. Then traffic to leaf2 (another group, colored to a's
  // uplink) loads that uplink to 60 %, and a new leaf1 flow starts: DLB chooses the other
  // uplink by quality and writes it into the bucket.
  f->StopFlow(a);
  f->RunUntil(f->now() + 2 * kNsPerMs);
  ColorConfig pin;
  pin.interfaces = {a_path.substr(std::string("leaf0:").size())};
  ASSERT_TRUE(f->SetColor("leaf0", 7, pin).ok());
  const int e = f->AddFlow(Nic(2), Nic(8), 0, 3, 60e9, 0, 7);
  f->RunUntil(f->now() + 300 * kNsPerUs);
  EXPECT_EQ(f->GetQp(e).path[1], a_path);
  const int d = f->AddFlow(Nic(3), Nic(6), 0, 3, 10e9);
  f->RunUntil(f->now() + 100 * kNsPerUs);
  EXPECT_NE(f->GetQp(d).path[1], a_path);
  EXPECT_EQ(bucket(), f->GetQp(d).path[1]);
}

}  // namespace
}  // namespace loom::sim
