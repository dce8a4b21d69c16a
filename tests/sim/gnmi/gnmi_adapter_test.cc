// The notification generator and the in-process adapter, in virtual time.
#include "sim-fabric/gnmi_adapter.h"

#include <set>
#include <string>
#include <vector>

#include "api/topology/topology_index.h"
#include "gtest/gtest.h"
#include "telemetry/link_state.h"
#include "telemetry/path.h"
#include "tests/sim/gnmi/gnmi_test_util.h"

namespace loom::sim {
namespace {

using testing::FullPath;
using testing::IfLeaf;
using testing::kEpochNs;
using testing::kFlowBps;
using testing::RecordingSink;
using testing::Sample;
using testing::Select;
using testing::SmallFabric;

GnmiOptions Opts() {
  GnmiOptions o;
  o.tick_ns = 1 * kNsPerMs;
  o.min_sample_interval_ns = 1 * kNsPerMs;
  o.epoch_ns = kEpochNs;
  return o;
}

gnmi::GetRequest GetReq(const std::string& target, const std::string& path) {
  gnmi::GetRequest req;
  req.mutable_prefix()->set_target(target);
  EXPECT_TRUE(telemetry::ParsePath(path, req.add_path()).ok()) << path;
  return req;
}

// The collector's default subscriptions for every device, plus the loom
// operational port speed (ON_CHANGE), which telemetry::SwitchSubscriptions /
// NicSubscriptions do not list yet.
std::vector<InProcessTarget> TargetsWithSpeed(const Fabric& fabric, TimeNs interval) {
  std::vector<InProcessTarget> targets = DefaultInProcessTargets(fabric, interval);
  for (InProcessTarget& t : targets) {
    t.subscriptions.push_back(
        {"loom:/interfaces/interface[name=*]/ethernet/state/operational-speed-bps", gnmi::ON_CHANGE,
         0});
  }
  return targets;
}

size_t CountUpdates(const gnmi::GetResponse& r) {
  size_t n = 0;
  for (const auto& x : r.notification()) n += static_cast<size_t>(x.update_size());
  return n;
}

TEST(GnmiGeneratorTest, ServesEveryCataloguePathForSwitchesAndNics) {
  SmallFabric f;
  ASSERT_EQ(f.leaf0, "leaf0");
  ASSERT_TRUE(f.fabric->InitAlbTable(f.leaf0, "leaf1", 16).ok());
  SnapshotBuilder b(*f.fabric, Opts());
  auto snap = b.Capture();
  const int ports = static_cast<int>(f.fabric->Interfaces(f.leaf0).size());
  for (const std::string& tmpl : CatalogueLeafPaths()) {
    SCOPED_TRACE(tmpl);
    gnmi::GetResponse sw, nic;
    ASSERT_TRUE(GetNotifications(*snap, GetReq(f.leaf0, tmpl), &sw).ok());
    ASSERT_TRUE(GetNotifications(*snap, GetReq(f.nic0, tmpl), &nic).ok());
    const bool is_nic_only = tmpl.find("loom:/nic/") == 0;
    const bool is_switch_only = tmpl.find("/qos/") != std::string::npos ||
                                tmpl.find("/watchdog/") != std::string::npos ||
                                tmpl.find("loom:/alb/") == 0;
    if (tmpl.find("loom:/alb/") == 0) {
      EXPECT_EQ(CountUpdates(sw), 16u);
    } else if (tmpl.find("/queue[") != std::string::npos ||
               tmpl.find("/priority[") != std::string::npos) {
      EXPECT_EQ(CountUpdates(sw), is_nic_only ? 0u : static_cast<size_t>(ports * 8));
    } else {
      EXPECT_EQ(CountUpdates(sw), is_nic_only ? 0u : static_cast<size_t>(ports));
    }
    EXPECT_EQ(CountUpdates(nic) > 0, !is_switch_only);
    for (const auto& n : sw.notification()) {
      EXPECT_EQ(n.prefix().target(), f.leaf0);
      EXPECT_EQ(n.timestamp(), kEpochNs);
      for (const auto& u : n.update()) {
        const bool is_enum =
            tmpl.ends_with("oper-status") || tmpl.ends_with("status") || tmpl.ends_with("next-hop");
        EXPECT_EQ(u.val().has_string_val(), is_enum) << FullPath(n, u);
        EXPECT_EQ(u.val().has_uint_val(), !is_enum) << FullPath(n, u);
      }
    }
  }
}

TEST(GnmiGeneratorTest, OctetsRiseAtTheFlowRateAndLinkDownShowsOnChange) {
  SmallFabric f;
  RecordingSink sink;
  std::vector<InProcessTarget> targets = {
      {f.nic0,
       {{"/interfaces/interface[name=*]/state/counters/out-octets", gnmi::SAMPLE, 1 * kNsPerMs}}},
      {f.leaf0,
       {{"/interfaces/interface[name=*]/state/counters", gnmi::SAMPLE, 2 * kNsPerMs},
        {"/interfaces/interface[name=*]/state/oper-status", gnmi::ON_CHANGE, 0}}}};
  InProcessTelemetry tel(f.fabric.get(), Opts(), targets, &sink);
  ASSERT_TRUE(tel.Start().ok());
  EXPECT_EQ(sink.events(), (std::vector<std::string>{"connected " + f.nic0, "synced " + f.nic0,
                                                     "connected " + f.leaf0, "synced " + f.leaf0}));
  tel.RunUntil(20 * kNsPerMs);

  // NIC egress: one sample per 1 ms tick, timestamps = epoch + virtual time.
  auto out = Select(sink.samples(), f.nic0, IfLeaf(f.nic0_if, "counters/out-octets"));
  ASSERT_GE(out.size(), 20u);
  for (size_t i = 1; i < out.size(); ++i) {
    EXPECT_EQ(out[i].timestamp_ns - out[i - 1].timestamp_ns, 1 * kNsPerMs);
  }
  EXPECT_EQ(out.front().timestamp_ns, kEpochNs);
  const Sample& a = out[5];
  const Sample& z = out.back();
  const double bps = static_cast<double>(z.value.uint_val() - a.value.uint_val()) * 8e9 /
                     static_cast<double>(z.timestamp_ns - a.timestamp_ns);
  EXPECT_NEAR(bps, kFlowBps, 0.02 * kFlowBps);

  // The leaf's port towards the NIC receives the flow: in-octets every 2 ms.
  auto in = Select(sink.samples(), f.leaf0, IfLeaf(f.leaf0_down_if, "counters/in-octets"));
  ASSERT_GE(in.size(), 10u);
  EXPECT_EQ(in[2].timestamp_ns - in[1].timestamp_ns, 2 * kNsPerMs);
  // oper-status: initial UP only, nothing while it does not change.
  auto up = Select(sink.samples(), f.leaf0, IfLeaf(f.uplink_leaf_if, "oper-status"));
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].value.string_val(), "UP");

  ASSERT_TRUE(f.fabric->SetLinkUp(f.uplink_id, false).ok());
  tel.RunUntil(22 * kNsPerMs);
  up = Select(sink.samples(), f.leaf0, IfLeaf(f.uplink_leaf_if, "oper-status"));
  ASSERT_EQ(up.size(), 2u);
  EXPECT_EQ(up[1].value.string_val(), "DOWN");
}

TEST(GnmiGeneratorTest, SuppressRedundantSendsOnlyChangesAndHeartbeats) {
  SmallFabric f;
  SnapshotBuilder b(*f.fabric, Opts());
  auto s0 = b.Capture();
  gnmi::SubscriptionList list;
  list.mutable_prefix()->set_target(f.nic0);
  auto* sub = list.add_subscription();
  ASSERT_TRUE(
      telemetry::ParsePath("/interfaces/interface[name=*]/state/counters", sub->mutable_path())
          .ok());
  sub->set_mode(gnmi::SAMPLE);
  sub->set_sample_interval(1 * kNsPerMs);
  sub->set_suppress_redundant(true);
  sub->set_heartbeat_interval(5 * kNsPerMs);
  std::unique_ptr<GnmiSession> session;
  ASSERT_TRUE(GnmiSession::Create(list, *s0, Opts(), &session).ok());
  std::vector<gnmi::Notification> ns;
  session->Initial(*s0, &ns);
  ASSERT_EQ(ns.size(), 1u);
  EXPECT_EQ(ns[0].update_size(), 9);  // every counter once
  std::vector<int64_t> discard_times, octet_times;
  for (int tick = 1; tick <= 12; ++tick) {
    f.fabric->RunUntil(tick * kNsPerMs);
    auto s = b.OnStep();
    ASSERT_NE(s, nullptr);
    ns.clear();
    session->Tick(*s, &ns);
    for (const auto& n : ns) {
      for (const auto& u : n.update()) {
        const std::string p = FullPath(n, u);
        if (p.ends_with("in-discards")) discard_times.push_back(n.timestamp() - kEpochNs);
        if (p.ends_with("out-octets")) octet_times.push_back(n.timestamp() - kEpochNs);
      }
    }
  }
  // in-discards stays 0: only heartbeats (every 5 ms); out-octets changes every tick.
  EXPECT_EQ(discard_times, (std::vector<int64_t>{5 * kNsPerMs, 10 * kNsPerMs}));
  EXPECT_EQ(octet_times.size(), 12u);
}

TEST(GnmiGeneratorTest, RejectsBadRequestsWithTheSpecCodes) {
  SmallFabric f;
  SnapshotBuilder b(*f.fabric, Opts());
  auto snap = b.Capture();
  auto make = [&](const std::string& target, const std::string& path, gnmi::SubscriptionMode m,
                  uint64_t interval) {
    gnmi::SubscriptionList list;
    list.mutable_prefix()->set_target(target);
    auto* sub = list.add_subscription();
    EXPECT_TRUE(telemetry::ParsePath(path, sub->mutable_path()).ok());
    sub->set_mode(m);
    sub->set_sample_interval(interval);
    return list;
  };
  std::unique_ptr<GnmiSession> s;
  const std::string ok_path = "/interfaces/interface[name=*]/state/counters";
  EXPECT_EQ(
      GnmiSession::Create(make(f.leaf0, ok_path, gnmi::SAMPLE, 1000), *snap, Opts(), &s).code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(GnmiSession::Create(make(f.leaf0, "/system/state", gnmi::SAMPLE, 0), *snap, Opts(), &s)
                .code(),
            StatusCode::kNotFound);
  EXPECT_EQ(GnmiSession::Create(make("nope", ok_path, gnmi::SAMPLE, 0), *snap, Opts(), &s).code(),
            StatusCode::kNotFound);
  gnmi::SubscriptionList empty;
  EXPECT_EQ(GnmiSession::Create(empty, *snap, Opts(), &s).code(), StatusCode::kInvalidArgument);
  auto ascii = make(f.leaf0, ok_path, gnmi::SAMPLE, 0);
  ascii.set_encoding(gnmi::ASCII);
  EXPECT_EQ(GnmiSession::Create(ascii, *snap, Opts(), &s).code(), StatusCode::kUnimplemented);
  // "..." wildcards work; pathological paths are refused cheaply.
  ASSERT_TRUE(GnmiSession::Create(make(f.leaf0, "/.../.../counters/in-octets", gnmi::SAMPLE, 0),
                                  *snap, Opts(), &s)
                  .ok());
  std::vector<gnmi::Notification> ns;
  s->Initial(*snap, &ns);
  EXPECT_EQ(ns.size(), f.fabric->Interfaces(f.leaf0).size());
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "/.../x";
  EXPECT_EQ(GnmiSession::Create(make(f.leaf0, deep, gnmi::SAMPLE, 0), *snap, Opts(), &s).code(),
            StatusCode::kInvalidArgument);
  // A schema path with no data yet (ALB) is fine.
  EXPECT_TRUE(GnmiSession::Create(make(f.leaf0, "loom:/alb/groups/group[name=*]", gnmi::SAMPLE, 0),
                                  *snap, Opts(), &s)
                  .ok());
  // Get: unknown leaf without wildcards -> NOT_FOUND; wildcard without data -> empty OK.
  gnmi::GetResponse r;
  EXPECT_EQ(GetNotifications(*snap, GetReq(f.leaf0, IfLeaf("nope", "oper-status")), &r).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(GetNotifications(*snap, GetReq(f.leaf0, "/foo/bar"), &r).code(), StatusCode::kNotFound);
  EXPECT_TRUE(GetNotifications(*snap, GetReq(f.leaf0, "loom:/alb/groups/group[name=*]"), &r).ok());
  EXPECT_EQ(r.notification_size(), 0);
}

TEST(GnmiGeneratorTest, MaxQueueLenIsAPerIntervalPeak) {
  // Two 100G flows into one 100G NIC: a queue at the leaf's downlink while both run.
  auto topo = testing::Clos(2, 2, 2, 100e9, 100e9);
  auto fab = testing::Make(topo, FabricOptions());
  const std::string dst = testing::Nic(0);
  fab->AddFlow(testing::Nic(1), dst, 0);  // same leaf
  fab->AddFlow(testing::Nic(2), dst, 0);  // through a spine
  SnapshotBuilder b(*fab, Opts());
  b.Capture();
  std::string leaf, ifc;
  for (const auto& l : topo.links()) {
    if (l.b().device() == dst) leaf = l.a().device(), ifc = l.a().interface();
    if (l.a().device() == dst) leaf = l.b().device(), ifc = l.b().interface();
  }
  const std::string path = "/qos/interfaces/interface[interface-id=" + ifc +
                           "]/output/queues/queue[name=3]/state/max-queue-len";
  fab->RunUntil(5 * kNsPerMs);
  gnmi::GetResponse r;
  ASSERT_TRUE(GetNotifications(*b.Capture(), GetReq(leaf, path), &r).ok());
  ASSERT_EQ(CountUpdates(r), 1u);
  const uint64_t busy_peak = r.notification(0).update(0).val().uint_val();
  EXPECT_GT(busy_peak, 0u);
  // Flows stop; the queue drains; the next intervals' peaks fall to 0 while
  // the all-time watermark stays.
  for (const auto& q : fab->GetQps()) fab->StopFlow(q.id);
  fab->RunUntil(10 * kNsPerMs);
  b.Capture();
  fab->RunUntil(11 * kNsPerMs);
  ASSERT_TRUE(GetNotifications(*b.Capture(), GetReq(leaf, path), &r).ok());
  EXPECT_EQ(r.notification(0).update(0).val().uint_val(), 0u);
  QueueCounters qc;
  ASSERT_TRUE(fab->GetQueueCounters(leaf, ifc, 3, &qc).ok());
  EXPECT_GE(qc.watermark_bytes, busy_peak);
}

TEST(GnmiGeneratorTest, DegradedLinkShowsAsLiveCapacityInLinkTelemetry) {
  SmallFabric f;
  topology::TopologyIndex index(f.topo);
  telemetry::LinkStateOptions lso;
  lso.staleness.sample_interval_ns = 10 * kNsPerMs;
  VirtualClock clock;
  telemetry::LinkTelemetry links(index, lso, &clock);
  RecordingSink record;
  InProcessTelemetry tel(f.fabric.get(), Opts(), TargetsWithSpeed(*f.fabric, 10 * kNsPerMs),
                         &links);
  InProcessTelemetry rec(f.fabric.get(), Opts(), TargetsWithSpeed(*f.fabric, 10 * kNsPerMs),
                         &record);
  ASSERT_TRUE(tel.Start().ok());
  ASSERT_TRUE(rec.Start().ok());
  auto run_until = [&](TimeNs t) {
    while (f.fabric->now() < t) {
      f.fabric->Step();
      tel.OnStep();
      rec.OnStep();
    }
    clock.Set(f.fabric->now());
  };
  int uplink = -1;
  for (int i = 0; i < f.topo.links_size(); ++i) {
    if (f.topo.links(i).id() == f.uplink_id) uplink = i;
  }
  ASSERT_GE(uplink, 0);

  run_until(30 * kNsPerMs);
  telemetry::LinkSnapshot snap = links.Snapshot();
  ASSERT_EQ(snap.links.size(), 2u * static_cast<size_t>(f.topo.links_size()));
  for (const auto& d : snap.links) {
    EXPECT_EQ(d.live_capacity_bps, d.capacity_bps) << *d.link_id;
    EXPECT_EQ(d.capacity_bps, 100'000'000'000) << *d.link_id;
  }

  ASSERT_TRUE(f.fabric->DegradeLink(f.uplink_id, 0.5, 0).ok());
  run_until(40 * kNsPerMs);
  // The adapter reports half speed on both ends of the degraded link (once, ON_CHANGE).
  const std::string leaf_speed = "loom:/interfaces/interface[name=" + f.uplink_leaf_if +
                                 "]/ethernet/state/operational-speed-bps";
  auto speeds = Select(record.samples(), f.leaf0, leaf_speed);
  ASSERT_EQ(speeds.size(), 2u);
  EXPECT_EQ(speeds[0].value.uint_val(), 100'000'000'000u);
  EXPECT_EQ(speeds[1].value.uint_val(), 50'000'000'000u);

  snap = links.Snapshot();
  for (const auto& d : snap.links) {
    const int64_t want = d.link_index == uplink ? 50'000'000'000 : 100'000'000'000;
    EXPECT_EQ(d.live_capacity_bps, want) << *d.link_id;
    EXPECT_EQ(d.capacity_bps, 100'000'000'000) << *d.link_id;
  }
  EXPECT_EQ(snap.stats.bad_value, 0u);
  EXPECT_EQ(snap.stats.unknown_path, 0u);

  // Restored: back to nominal.
  ASSERT_TRUE(f.fabric->DegradeLink(f.uplink_id, 1.0, 0).ok());
  run_until(50 * kNsPerMs);
  EXPECT_EQ(links.Snapshot().links[2 * static_cast<size_t>(uplink)].live_capacity_bps,
            100'000'000'000);
}

// NIC burst gaps through the whole telemetry path: a ring all-reduce over 8 NICs with a
// 500 us compute gap (one transmit burst per iteration per NIC, see
// tests/sim/nic_burst_test.cc); LinkTelemetry's NIC->leaf direction reports the mean
// idle gap per burst started in each 2 ms counter interval.
TEST(GnmiGeneratorTest, NicBurstGapsReachLinkTelemetry) {
  auto topo = testing::Clos(2, 2, 4, 100e9, 100e9);
  auto fab = testing::Make(topo, FabricOptions());
  JobSpec j;
  j.id = "ring";
  j.collective = Collective::kRingAllReduce;
  for (int i = 0; i < 8; ++i) j.ranks.push_back("host00" + std::to_string(i) + "-gpu0");
  j.message_bytes = 4e6;  // 7 MB per rank per iteration: ~0.56 ms at 100 Gb/s
  j.iterations = 8;
  j.compute_gap_ns = 500 * kNsPerUs;
  std::string err;
  ASSERT_GE(fab->AddJob(j, &err), 0) << err;

  topology::TopologyIndex index(topo);
  telemetry::LinkStateOptions lso;
  lso.staleness.sample_interval_ns = 2 * kNsPerMs;
  VirtualClock clock;
  telemetry::LinkTelemetry links(index, lso, &clock);
  InProcessTelemetry tel(fab.get(), Opts(), DefaultInProcessTargets(*fab, 2 * kNsPerMs), &links);
  ASSERT_TRUE(tel.Start().ok());
  const std::string nic = testing::Nic(3);
  int dir = -1;  // NIC -> leaf
  for (int i = 0; i < topo.links_size(); ++i) {
    if (topo.links(i).a().device() == nic) dir = 2 * i;
    if (topo.links(i).b().device() == nic) dir = 2 * i + 1;
  }
  ASSERT_GE(dir, 0);

  int windows_with_bursts = 0, gaps = 0;
  for (TimeNs t = 2 * kNsPerMs; t <= 14 * kNsPerMs; t += 2 * kNsPerMs) {
    tel.RunUntil(t);
    clock.Set(fab->now());
    const telemetry::LinkSnapshot snap = links.Snapshot();
    const telemetry::LinkDirectionState& s = snap.links[static_cast<size_t>(dir)];
    ASSERT_EQ(*s.tx_device, nic);
    SCOPED_TRACE("t = " + std::to_string(t));
    if (s.burst_gap_ns > 0) {
      // The first window holds the NIC's first burst, which ends no gap (it would pull
      // the mean down); later windows: the compute gap plus the last bytes' latency.
      if (windows_with_bursts > 0) {
        EXPECT_GE(s.burst_gap_ns, 500e3);
        EXPECT_LE(s.burst_gap_ns, 525e3);
        ++gaps;
      }
      EXPECT_GE(s.intra_burst_gap_ns, 327);  // 4096 B at <= 100 Gb/s
    }
    NicCounters c;
    ASSERT_TRUE(fab->GetNicCounters(nic, &c).ok());
    if (c.tx_bursts > 0) ++windows_with_bursts;
    // The leaf -> NIC direction carries no burst figures.
    EXPECT_EQ(snap.links[static_cast<size_t>(dir ^ 1)].burst_gap_ns, 0);
    EXPECT_EQ(snap.stats.unknown_path, 0u);
    EXPECT_EQ(snap.stats.bad_value, 0u);
  }
  EXPECT_GE(gaps, 3);
  ASSERT_TRUE(fab->AllJobsDone());
  // After the job: no new burst, no gap (the idle time after the last burst is not one).
  tel.RunUntil(20 * kNsPerMs);
  clock.Set(fab->now());
  EXPECT_EQ(links.Snapshot().links[static_cast<size_t>(dir)].burst_gap_ns, 0);
}

}  // namespace
}  // namespace loom::sim
