#include "telemetry/link_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "telemetry/profile.h"
#include "tests/telemetry/test_fabric.h"

namespace loom::telemetry {
namespace {

using testing::Note;
using testing::S;
using testing::U;

constexpr TimeNs kSec = kNsPerSec;
// Device clock (epoch ns) and local monotonic clock differ on purpose.
constexpr TimeNs kDev = 1'700'000'000 * kSec;

class LinkStateTest : public ::testing::Test {
 protected:
  LinkStateTest() : index_(testing::TwoTier()), table_(index_, Options()) {}

  static LinkStateOptions Options() {
    LinkStateOptions o;
    o.staleness.sample_interval_ns = 1 * kSec;
    o.staleness.stale_after_intervals = 3;
    return o;
  }
  int LinkIndex(const std::string& a, const std::string& b) {
    const auto& t = index_.topology();
    for (int i = 0; i < t.links_size(); ++i) {
      if (t.links(i).a().device() == a && t.links(i).b().device() == b) return i;
    }
    ADD_FAILURE() << "no link " << a << "--" << b;
    return -1;
  }
  LinkDirectionState Dir(const std::string& a, const std::string& b, Direction d, TimeNs now) {
    return table_.Compute(now)[2 * LinkIndex(a, b) + static_cast<int>(d)];
  }
  // out-octets of `dev`'s interface at device time `t` (seconds).
  void OutOctets(const std::string& dev, const std::string& intf, int t, uint64_t v,
                 TimeNs arrival) {
    table_.Apply(dev,
                 Note(kDev + t * kSec, "/interfaces/interface[name=" + intf + "]/state/counters",
                      {{"out-octets", U(v)}}),
                 arrival);
  }

  topology::TopologyIndex index_;
  LinkStateTable table_;
};

TEST_F(LinkStateTest, UtilizationFromTransmitterOutOctets) {
  // leaf-0 ==200G==> spine-0 : 25e9 bytes in 1 s = 200 Gb/s on a 400G link.
  OutOctets("leaf-0", "Ethernet0", 1, 0, 5 * kSec);
  OutOctets("leaf-0", "Ethernet0", 2, 25'000'000'000, 6 * kSec);
  LinkDirectionState up = Dir("leaf-0", "spine-0", Direction::kUp, 6 * kSec);
  EXPECT_DOUBLE_EQ(up.tx_bps, 200e9);
  EXPECT_DOUBLE_EQ(up.utilization, 0.5);
  EXPECT_FALSE(up.stale);
  EXPECT_EQ(*up.tx_device, "leaf-0");
  EXPECT_EQ(*up.rx_device, "spine-0");
  // The other direction has no data: stale.
  EXPECT_TRUE(Dir("leaf-0", "spine-0", Direction::kDown, 6 * kSec).stale);
}

TEST_F(LinkStateTest, FallsBackToReceiverInOctets) {
  // spine-0 reports what it received from leaf-1; leaf-1 reports nothing.
  for (int t = 1; t <= 2; ++t) {
    table_.Apply("spine-0",
                 Note(kDev + t * kSec, "/interfaces/interface[name=Ethernet1]/state/counters",
                      {{"in-octets", U((t - 1) * 5'000'000'000ull)}}),
                 t * kSec);
  }
  LinkDirectionState up = Dir("leaf-1", "spine-0", Direction::kUp, 2 * kSec);
  EXPECT_DOUBLE_EQ(up.utilization, 0.1);
  EXPECT_FALSE(up.stale);
}

TEST_F(LinkStateTest, QueueEcnPfcAndWatchdog) {
  const std::string q =
      "/qos/interfaces/interface[interface-id=Ethernet1]/output/queues/queue[name=3]/state";
  const std::string lq = "loom:" + q;
  const std::string pfc =
      "loom:/pfc/interfaces/interface[name=Ethernet1]/priorities/priority[id=3]";
  // spine-0 transmits to leaf-1 (downlink).
  for (int t = 1; t <= 2; ++t) {
    TimeNs ts = kDev + t * kSec;
    table_.Apply("spine-0",
                 Note(ts, q,
                      {{"ecn-marked-pkts", U((t - 1) * 1000)},
                       {"dropped-pkts", U((t - 1) * 10)},
                       {"max-queue-len", U(300'000)}}),
                 t * kSec);
    table_.Apply("spine-0", Note(ts, lq, {{"current-queue-len", U(120'000)}}), t * kSec);
    table_.Apply(
        "spine-0",
        Note(ts, pfc + "/state",
             {{"rx-pause-duration-us", U((t - 1) * 250'000)}, {"rx-pkts", U((t - 1) * 40)}}),
        t * kSec);
    OutOctets("spine-0", "Ethernet1", t, (t - 1) * 10'000'000'000ull, t * kSec);
  }
  table_.Apply("spine-0",
               Note(kDev + 2 * kSec, pfc + "/watchdog/state",
                    {{"status", S("stormed")}, {"deadlock-detected", U(2)}}),
               2 * kSec);
  LinkDirectionState down = Dir("leaf-1", "spine-0", Direction::kDown, 2 * kSec);
  EXPECT_DOUBLE_EQ(down.ecn_marked_pps, 1000);
  EXPECT_DOUBLE_EQ(down.drops_pps, 10);
  EXPECT_EQ(down.queue_depth_bytes, 120'000u);
  EXPECT_EQ(down.queue_peak_bytes, 300'000u);
  EXPECT_DOUBLE_EQ(down.pfc_pause_ratio, 0.25);
  EXPECT_DOUBLE_EQ(down.pfc_pause_fps, 40);
  EXPECT_TRUE(down.pfc_stormed);
  EXPECT_EQ(down.pfc_deadlocks_detected, 2u);
  // Load 20 % -> level 1; queue 120 KB -> level 4; band = 7 - round(2.5) = 4.
  EXPECT_DOUBLE_EQ(down.utilization, 0.2);
  EXPECT_EQ(down.quality_band, 4);
  // Uplink untouched.
  EXPECT_FALSE(Dir("leaf-1", "spine-0", Direction::kUp, 2 * kSec).pfc_stormed);
}

TEST_F(LinkStateTest, NicCnpCountersMapToDirections) {
  const std::string roce = "loom:/nic/interfaces/interface[name=eth0]/roce/state";
  for (int t = 1; t <= 2; ++t) {
    table_.Apply("nic-0",
                 Note(kDev + t * kSec, roce,
                      {{"np_cnp_sent", U((t - 1) * 300)}, {"rp_cnp_handled", U((t - 1) * 70)}}),
                 t * kSec);
  }
  // nic-0 -> leaf-0: CNPs the sending NIC handled; leaf-0 -> nic-0: CNPs it sent.
  EXPECT_DOUBLE_EQ(Dir("nic-0", "leaf-0", Direction::kUp, 2 * kSec).cnp_pps, 70);
  EXPECT_DOUBLE_EQ(Dir("nic-0", "leaf-0", Direction::kDown, 2 * kSec).cnp_pps, 300);
}

TEST_F(LinkStateTest, OperationalSpeedSetsLiveCapacity) {
  const std::string leaf_eth = "loom:/interfaces/interface[name=Ethernet0]/ethernet/state";
  const std::string spine_eth = "loom:/interfaces/interface[name=Ethernet0]/ethernet/state";
  // Nothing reported: live capacity is the nominal 400G.
  EXPECT_EQ(Dir("leaf-0", "spine-0", Direction::kUp, 1 * kSec).live_capacity_bps, testing::k400G);

  // leaf-0 reports 200G on its port towards spine-0: both directions see it.
  EXPECT_EQ(
      table_.Apply("leaf-0",
                   Note(kDev + kSec, leaf_eth, {{"operational-speed-bps", U(200'000'000'000)}}),
                   1 * kSec),
      0u);
  EXPECT_EQ(Dir("leaf-0", "spine-0", Direction::kUp, 1 * kSec).live_capacity_bps, 200'000'000'000);
  EXPECT_EQ(Dir("leaf-0", "spine-0", Direction::kDown, 1 * kSec).live_capacity_bps,
            200'000'000'000);
  // Other links are untouched.
  EXPECT_EQ(Dir("leaf-0", "spine-1", Direction::kUp, 1 * kSec).live_capacity_bps, testing::k400G);

  // The other end reports less: the minimum of both ends wins.
  table_.Apply("spine-0",
               Note(kDev + kSec, spine_eth, {{"operational-speed-bps", U(100'000'000'000)}}),
               1 * kSec);
  EXPECT_EQ(Dir("leaf-0", "spine-0", Direction::kUp, 1 * kSec).live_capacity_bps, 100'000'000'000);

  // Utilization stays relative to the nominal capacity: 100 Gb/s on a 400G link.
  OutOctets("leaf-0", "Ethernet0", 1, 0, 1 * kSec);
  OutOctets("leaf-0", "Ethernet0", 2, 12'500'000'000, 2 * kSec);
  LinkDirectionState up = Dir("leaf-0", "spine-0", Direction::kUp, 2 * kSec);
  EXPECT_DOUBLE_EQ(up.tx_bps, 100e9);
  EXPECT_DOUBLE_EQ(up.utilization, 0.25);
  EXPECT_EQ(up.capacity_bps, testing::k400G);

  // Bad values are counted and change nothing: NaN, negative, above 2x nominal.
  gnmi::TypedValue nan, neg;
  nan.set_double_val(std::numeric_limits<double>::quiet_NaN());
  neg.set_int_val(-400);
  const uint64_t bad_before = table_.stats().bad_value;
  EXPECT_EQ(table_.Apply("spine-0",
                         Note(kDev + 2 * kSec, spine_eth,
                              {{"operational-speed-bps", nan},
                               {"operational-speed-bps", neg},
                               {"operational-speed-bps", U(800'000'000'001)}}),
                         2 * kSec),
            3u);
  EXPECT_EQ(table_.stats().bad_value, bad_before + 3);
  EXPECT_EQ(Dir("leaf-0", "spine-0", Direction::kUp, 2 * kSec).live_capacity_bps, 100'000'000'000);

  // Speed above nominal (up to 2x) is accepted but live capacity never exceeds
  // nominal; 0 means "unknown" and clears that end's value.
  table_.Apply("spine-0",
               Note(kDev + 3 * kSec, spine_eth, {{"operational-speed-bps", U(800'000'000'000)}}),
               3 * kSec);
  EXPECT_EQ(Dir("leaf-0", "spine-0", Direction::kUp, 3 * kSec).live_capacity_bps, 200'000'000'000);
  table_.Apply("leaf-0", Note(kDev + 3 * kSec, leaf_eth, {{"operational-speed-bps", U(0)}}),
               3 * kSec);
  EXPECT_EQ(Dir("leaf-0", "spine-0", Direction::kUp, 3 * kSec).live_capacity_bps, testing::k400G);

  // Unknown leaves under the loom interface tree are unknown paths.
  const uint64_t unknown_before = table_.stats().unknown_path;
  table_.Apply("leaf-0", Note(kDev + 4 * kSec, leaf_eth, {{"port-speed", U(1)}}), 4 * kSec);
  EXPECT_EQ(table_.stats().unknown_path, unknown_before + 1);
}

TEST_F(LinkStateTest, OperDownForcesBandZero) {
  OutOctets("leaf-2", "Ethernet1", 1, 0, 1 * kSec);
  OutOctets("leaf-2", "Ethernet1", 2, 1000, 2 * kSec);
  EXPECT_EQ(Dir("leaf-2", "spine-1", Direction::kUp, 2 * kSec).quality_band, 7);
  table_.Apply("spine-1",
               Note(kDev + 2 * kSec, "/interfaces/interface[name=Ethernet2]/state",
                    {{"oper-status", S("DOWN")}}),
               2 * kSec);
  for (Direction d : {Direction::kUp, Direction::kDown}) {
    LinkDirectionState s = Dir("leaf-2", "spine-1", d, 2 * kSec);
    EXPECT_EQ(s.oper, OperStatus::kDown);
    EXPECT_EQ(s.quality_band, 0);
  }
  table_.Apply("spine-1",
               Note(kDev + 3 * kSec, "/interfaces/interface[name=Ethernet2]/state",
                    {{"oper-status", S("openconfig-interfaces:UP")}}),
               3 * kSec);
  EXPECT_EQ(Dir("leaf-2", "spine-1", Direction::kUp, 3 * kSec).oper, OperStatus::kUp);
}

TEST_F(LinkStateTest, DeviceRestartGivesNoNegativeOrHugeRate) {
  OutOctets("leaf-0", "Ethernet1", 1, 900'000'000'000, 1 * kSec);
  OutOctets("leaf-0", "Ethernet1", 2, 910'000'000'000, 2 * kSec);
  EXPECT_DOUBLE_EQ(Dir("leaf-0", "spine-1", Direction::kUp, 2 * kSec).tx_bps, 80e9);
  // Restart: counters start again from a small value.
  OutOctets("leaf-0", "Ethernet1", 3, 1'000'000, 3 * kSec);
  LinkDirectionState s = Dir("leaf-0", "spine-1", Direction::kUp, 3 * kSec);
  EXPECT_EQ(s.tx_bps, 0);
  EXPECT_EQ(s.counter_resets, 1u);
  EXPECT_TRUE(s.stale);  // No valid rate until the next sample.
  EXPECT_EQ(table_.stats().resets, 1u);
  OutOctets("leaf-0", "Ethernet1", 4, 5'001'000'000, 4 * kSec);
  s = Dir("leaf-0", "spine-1", Direction::kUp, 4 * kSec);
  EXPECT_DOUBLE_EQ(s.tx_bps, 40e9);
  EXPECT_FALSE(s.stale);
}

TEST_F(LinkStateTest, OutOfOrderNotificationIsIgnored) {
  OutOctets("leaf-0", "Ethernet0", 1, 0, 1 * kSec);
  OutOctets("leaf-0", "Ethernet0", 3, 10'000'000'000, 2 * kSec);
  OutOctets("leaf-0", "Ethernet0", 2, 9'000'000'000, 3 * kSec);  // Late.
  LinkDirectionState s = Dir("leaf-0", "spine-0", Direction::kUp, 3 * kSec);
  EXPECT_DOUBLE_EQ(s.tx_bps, 40e9);
  EXPECT_EQ(s.last_fresh_ns, 2 * kSec);  // The late sample did not refresh.
  EXPECT_EQ(table_.stats().out_of_order, 1u);
}

TEST_F(LinkStateTest, DataBecomesStaleAfterNIntervals) {
  OutOctets("leaf-0", "Ethernet0", 1, 0, 10 * kSec);
  OutOctets("leaf-0", "Ethernet0", 2, 1000, 11 * kSec);
  EXPECT_FALSE(Dir("leaf-0", "spine-0", Direction::kUp, 14 * kSec).stale);
  EXPECT_TRUE(Dir("leaf-0", "spine-0", Direction::kUp, 14 * kSec + 1).stale);
}

TEST_F(LinkStateTest, BadInputIsCountedNotApplied) {
  gnmi::TypedValue nan, neg, text;
  nan.set_double_val(std::numeric_limits<double>::quiet_NaN());
  neg.set_int_val(-5);
  text.set_string_val("lots");
  const std::string c = "/interfaces/interface[name=Ethernet0]/state/counters";
  EXPECT_EQ(table_.Apply("leaf-0",
                         Note(kDev, c,
                              {{"in-octets", nan},
                               {"out-octets", neg},
                               {"in-pkts", text},
                               {"bogus-leaf", U(1)},
                               {"out-pkts", U(7)}}),
                         0),
            4u);
  EXPECT_EQ(table_.stats().bad_value, 3u);
  EXPECT_EQ(table_.stats().unknown_path, 1u);
  EXPECT_EQ(table_.stats().applied, 1u);
  // Interface not in the topology, unknown target, missing timestamp, missing key.
  table_.Apply(
      "leaf-0",
      Note(kDev, "/interfaces/interface[name=Ethernet99]/state/counters", {{"in-octets", U(1)}}),
      0);
  table_.Apply("nobody", Note(kDev, c, {{"in-octets", U(1)}}), 0);
  table_.Apply("leaf-0", Note(0, c, {{"in-octets", U(1)}}), 0);
  table_.Apply("leaf-0", Note(kDev, "/interfaces/interface/state/counters", {{"in-octets", U(1)}}),
               0);
  EXPECT_EQ(table_.stats().unknown_path, 3u);
  EXPECT_EQ(table_.stats().unknown_target, 1u);
  EXPECT_EQ(table_.stats().missing_timestamp, 1u);
}

TEST_F(LinkStateTest, AbsurdCounterJumpIsImplausible) {
  OutOctets("leaf-0", "Ethernet0", 1, 0, 1 * kSec);
  // 1e15 bytes in one second on a 400G link.
  OutOctets("leaf-0", "Ethernet0", 2, 1'000'000'000'000'000, 2 * kSec);
  LinkDirectionState s = Dir("leaf-0", "spine-0", Direction::kUp, 2 * kSec);
  EXPECT_EQ(s.tx_bps, 0);
  EXPECT_EQ(table_.stats().implausible, 1u);
}

// A notification speaks for the device of the session it arrived on: leaf-0's stream
// cannot set spine-1's link down by naming spine-1 in its prefix target (SONiC puts a
// database name there; the name is never compared with device names).
TEST_F(LinkStateTest, AnOrdinarySessionSpeaksForItsOwnDeviceWhateverItsPrefixTarget) {
  OutOctets("leaf-2", "Ethernet1", 1, 0, 1 * kSec);
  OutOctets("leaf-2", "Ethernet1", 2, 1000, 2 * kSec);
  table_.Apply("leaf-0",
               Note(kDev + 2 * kSec, "spine-1@/interfaces/interface[name=Ethernet2]/state",
                    {{"oper-status", S("DOWN")}}),
               2 * kSec);
  for (Direction d : {Direction::kUp, Direction::kDown}) {
    EXPECT_NE(Dir("leaf-2", "spine-1", d, 2 * kSec).oper, OperStatus::kDown);
  }
  // A stream whose prefix target is a database name still speaks for its device.
  table_.Apply("leaf-0",
               Note(kDev + kSec, "COUNTERS_DB@/interfaces/interface[name=Ethernet0]/state/counters",
                    {{"out-octets", U(0)}}),
               kSec);
  table_.Apply(
      "leaf-0",
      Note(kDev + 2 * kSec, "COUNTERS_DB@/interfaces/interface[name=Ethernet0]/state/counters",
           {{"out-octets", U(100)}}),
      2 * kSec);
  EXPECT_TRUE(Dir("leaf-0", "spine-0", Direction::kUp, 2 * kSec).has_rate);
}

// Only a session declared an aggregator speaks for other devices, from its allow-list.
TEST_F(LinkStateTest, AnAggregatorSpeaksOnlyForItsAllowList) {
  table_.SetAggregator("fabric", {"leaf-0"});
  table_.Apply("fabric",
               Note(kDev + kSec, "leaf-0@/interfaces/interface[name=Ethernet0]/state/counters",
                    {{"out-octets", U(0)}}),
               kSec);
  table_.Apply("fabric",
               Note(kDev + 2 * kSec, "leaf-0@/interfaces/interface[name=Ethernet0]/state/counters",
                    {{"out-octets", U(100)}}),
               2 * kSec);
  EXPECT_TRUE(Dir("leaf-0", "spine-0", Direction::kUp, 2 * kSec).has_rate);
  EXPECT_EQ(
      table_.Apply("fabric",
                   Note(kDev + 2 * kSec, "spine-1@/interfaces/interface[name=Ethernet2]/state",
                        {{"oper-status", S("DOWN")}}),
                   2 * kSec),
      1u);
  EXPECT_EQ(table_.stats().foreign_target, 1u);
  EXPECT_NE(Dir("leaf-2", "spine-1", Direction::kUp, 2 * kSec).oper, OperStatus::kDown);
}

// One sample stamped a year ahead must not become the latest: every later sample would
// look old and the link would stay stale for good, its oper-status changes ignored.
TEST_F(LinkStateTest, AFarFutureTimestampIsRejectedAndCountedNotStored) {
  LinkStateOptions o = Options();
  o.future_tolerance_ns = 60 * kSec;
  LinkStateTable t(index_, o);
  const std::string c = "/interfaces/interface[name=Ethernet0]/state/counters";
  auto out = [&](TimeNs dev_ts, uint64_t v, TimeNs now) {
    return t.Apply("leaf-0", Note(dev_ts, c, {{"out-octets", U(v)}}), now, kDev + now);
  };
  out(kDev + 1 * kSec, 0, 1 * kSec);
  out(kDev + 2 * kSec, 1'000'000'000, 2 * kSec);
  EXPECT_EQ(out(kDev + 365 * 86400 * kSec, 2'000'000'000, 3 * kSec), 1u);
  EXPECT_EQ(t.stats().future_timestamp, 1u);
  // Within the tolerance is fine (a device clock a little ahead).
  out(kDev + 4 * kSec + 30 * kSec, 3'000'000'000, 4 * kSec);
  out(kDev + 5 * kSec + 30 * kSec, 4'000'000'000, 5 * kSec);
  const auto s = t.Compute(5 * kSec)[2 * LinkIndex("leaf-0", "spine-0")];
  EXPECT_TRUE(s.has_rate);
  EXPECT_FALSE(s.stale);
  EXPECT_DOUBLE_EQ(s.tx_bps, 8e9);
  EXPECT_EQ(t.stats().future_timestamp, 1u);
  // The link's oper-status still moves.
  t.Apply("spine-0",
          Note(kDev + 6 * kSec, "/interfaces/interface[name=Ethernet0]/state",
               {{"oper-status", S("DOWN")}}),
          6 * kSec, kDev + 6 * kSec);
  EXPECT_EQ(t.Compute(6 * kSec)[2 * LinkIndex("leaf-0", "spine-0")].oper, OperStatus::kDown);
}

TEST_F(LinkStateTest, AlbBucketsReportRatesAndNextHop) {
  const std::string b = "loom:/alb/groups/group[name=default]/buckets/bucket[id=7]/state";
  for (int t = 1; t <= 2; ++t) {
    table_.Apply("leaf-0",
                 Note(kDev + t * kSec, b,
                      {{"transmit-pkts", U((t - 1) * 100)},
                       {"transmit-octets", U((t - 1) * 1000)},
                       {"next-hop", S("Ethernet1")}}),
                 t * kSec);
  }
  auto buckets = table_.AlbBuckets(2 * kSec);
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_EQ(buckets[0].device, "leaf-0");
  EXPECT_EQ(buckets[0].bucket, 7u);
  EXPECT_EQ(buckets[0].next_hop, "Ethernet1");
  EXPECT_DOUBLE_EQ(buckets[0].pps, 100);
  EXPECT_DOUBLE_EQ(buckets[0].bps, 8000);
  EXPECT_FALSE(buckets[0].stale);
}

TEST(NicPeerTest, NicPeerCountersGiveRatesPerDestinationNic) {
  loom::v1::Topology topo = testing::TwoTier();
  testing::AddDevice(&topo, "host-1", loom::v1::DeviceRole::DEVICE_ROLE_HOST);
  testing::AddDevice(&topo, "nic-1", loom::v1::DeviceRole::DEVICE_ROLE_NIC);
  testing::AddLink(&topo, "nic-1", "eth0", "leaf-1", "Ethernet10");
  topology::TopologyIndex index(topo);
  LinkStateOptions o;
  o.staleness.sample_interval_ns = 1 * kSec;
  o.staleness.stale_after_intervals = 3;
  LinkStateTable table_(index, o);
  const std::string peer =
      "loom:/nic/interfaces/interface[name=eth0]/roce/peers/peer[nic=nic-1]/state";
  for (int t = 1; t <= 2; ++t) {
    EXPECT_EQ(table_.Apply("nic-0", Note(kDev + t * kSec, peer, {{"tx-octets", U((t - 1) * 5000)}}),
                           t * kSec),
              0u);
  }
  auto peers = table_.NicPeers(2 * kSec);
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].nic, "nic-0");
  EXPECT_EQ(peers[0].peer, "nic-1");
  EXPECT_DOUBLE_EQ(peers[0].bps, 40000);
  EXPECT_FALSE(peers[0].stale);
  EXPECT_TRUE(table_.NicPeers(10 * kSec).empty()) << "stale rates are left out";
  // A destination that is not a NIC of the topology, a switch reporting peers, a
  // wrong leaf or a text value: counted, not applied.
  const IngestStats before = table_.stats();
  table_.Apply("nic-0",
               Note(kDev + 3 * kSec,
                    "loom:/nic/interfaces/interface[name=eth0]/roce/peers/peer[nic=leaf-0]/state",
                    {{"tx-octets", U(1)}}),
               3 * kSec);
  table_.Apply("nic-0",
               Note(kDev + 3 * kSec,
                    "loom:/nic/interfaces/interface[name=eth0]/roce/peers/peer[nic=nic-9]/state",
                    {{"tx-octets", U(1)}}),
               3 * kSec);
  table_.Apply("nic-0", Note(kDev + 3 * kSec, peer, {{"rx-octets", U(1)}}), 3 * kSec);
  table_.Apply("nic-0", Note(kDev + 3 * kSec, peer, {{"tx-octets", S("many")}}), 3 * kSec);
  EXPECT_EQ(table_.stats().unknown_path - before.unknown_path, 3u);
  EXPECT_EQ(table_.stats().bad_value - before.bad_value, 1u);
  EXPECT_EQ(table_.NicPeers(3 * kSec).size(), 1u);
}

TEST(QualityBandTest, EqualWeightsByDefault) {
  QualityParams p;
  EXPECT_EQ(QualityBand(0, 0, 0, p), 7);
  EXPECT_EQ(QualityBand(1.0, 1e9, 0, p), 0);
  // Full load, empty queue: level (7 + 0) / 2 = 3.5 -> 4 -> band 3.
  EXPECT_EQ(QualityBand(1.0, 0, 0, p), 3);
  EXPECT_EQ(QualityBand(0, 1e9, 0, p), 3);
  // Pause has no weight by default.
  EXPECT_EQ(QualityBand(0, 0, 1.0, p), 7);
}

TEST(QualityBandTest, ConfigurableWeightsAndThresholds) {
  QualityParams p;
  p.queue_weight = 0;
  EXPECT_EQ(QualityBand(1.0, 0, 0, p), 0);
  EXPECT_EQ(QualityBand(0.3, 0, 0, p), 5);  // >= 12.5 %, >= 25 %
  p.pause_weight = 1;
  EXPECT_EQ(QualityBand(0, 0, 0.5, p), 4);  // pause level 6, load 0 -> 3 -> band 4
  EXPECT_EQ(QuantizeLevel(std::nan(""), p.load_thresholds), 0);
}

// Path quality over TwoTier(): 3 leaves x 2 other leaves x 2 spines = 12 paths.
//
//        spine-0            spine-1
//       /   |   \          /   |   \   (full mesh)
//   leaf-0 leaf-1 leaf-2
// leaf-0 -> spine-0 uplink congested (band 0); spine-1 -> leaf-2 downlink at band 3.
TEST_F(LinkStateTest, PathQualityIsMinOfLocalUplinkAndRemoteDownlink) {
  // Give every leaf-spine direction a fresh, idle sample.
  const auto& topo = index_.topology();
  for (int t = 1; t <= 2; ++t) {
    for (const auto& l : topo.links()) {
      OutOctets(l.a().device(), l.a().interface(), t, 0, t * kSec);
      OutOctets(l.b().device(), l.b().interface(), t, 0, t * kSec);
    }
  }
  OutOctets("leaf-0", "Ethernet0", 3, 50'000'000'000, 3 * kSec);  // 100 % load
  OutOctets("leaf-0", "Ethernet0", 1, 0, 3 * kSec);               // ignored (old)
  table_.Apply("leaf-0",
               Note(kDev + 3 * kSec,
                    "loom:/qos/interfaces/interface[interface-id=Ethernet0]/output/"
                    "queues/queue[name=3]/state",
                    {{"current-queue-len", U(10'000'000)}}),
               3 * kSec);
  OutOctets("spine-1", "Ethernet2", 3, 50'000'000'000, 3 * kSec);  // 100 % load, empty queue
  auto links = table_.Compute(3 * kSec);
  auto paths = ComputePathQualities(index_, links);
  ASSERT_EQ(paths.size(), 12u);
  auto id = [&](int d) { return topo.devices(d).id(); };
  int checked = 0;
  for (const PathQuality& p : paths) {
    EXPECT_EQ(p.super_spine, -1);
    EXPECT_FALSE(p.stale) << id(p.ingress_leaf) << "->" << id(p.egress_leaf);
    if (id(p.ingress_leaf) == "leaf-0" && id(p.spine) == "spine-0") {
      EXPECT_EQ(p.local_band, 0);
      EXPECT_EQ(p.band, 0);
      ++checked;
    } else if (id(p.egress_leaf) == "leaf-2" && id(p.spine) == "spine-1") {
      EXPECT_EQ(p.remote_band, 3);
      EXPECT_EQ(p.band, 3);
      ++checked;
    } else {
      EXPECT_EQ(p.band, 7);
    }
  }
  EXPECT_EQ(checked, 4);
}

TEST_F(LinkStateTest, PathWithStaleHopIsStale) {
  auto paths = ComputePathQualities(index_, table_.Compute(0));
  ASSERT_FALSE(paths.empty());
  for (const PathQuality& p : paths) EXPECT_TRUE(p.stale);
}

// Two pods, one super-spine:
//                 ss-0
//               /      \   (pod uplinks)
//         spine-a0    spine-b0
//          /   \       /   \   (leaf links)
//     leaf-a0 leaf-a1 leaf-b0 leaf-b1
TEST(PathQuality3TierTest, CrossPodPathsGoThroughSuperSpine) {
  using loom::v1::DeviceRole;
  loom::v1::Topology t;
  testing::AddDevice(&t, "ss-0", DeviceRole::DEVICE_ROLE_SUPER_SPINE);
  for (std::string pod : {"a", "b"}) {
    testing::AddDevice(&t, "spine-" + pod + "0", DeviceRole::DEVICE_ROLE_SPINE, pod);
    for (int l = 0; l < 2; ++l) {
      std::string leaf = "leaf-" + pod + std::to_string(l);
      testing::AddDevice(&t, leaf, DeviceRole::DEVICE_ROLE_LEAF, pod);
      testing::AddLink(&t, leaf, "Ethernet0", "spine-" + pod + "0", "Ethernet" + std::to_string(l));
    }
    testing::AddLink(&t, "spine-" + pod + "0", "Ethernet9", "ss-0", "Ethernet" + pod);
  }
  topology::TopologyIndex index(t);
  LinkStateTable table(index, LinkStateOptions());
  auto links = table.Compute(0);
  for (auto& l : links) {
    l.stale = false;
    l.quality_band = 7;
  }
  // spine-b0 -> ss-0 uplink at band 2 affects paths from pod b to pod a.
  for (int i = 0; i < t.links_size(); ++i) {
    if (t.links(i).a().device() == "spine-b0" && t.links(i).b().device() == "ss-0") {
      links[2 * i].quality_band = 2;
    }
  }
  auto paths = ComputePathQualities(index, links);
  // Same pod: 2 pods x 2 ordered pairs; cross pod: 4 x 2 ordered pairs.
  int same = 0, cross = 0;
  for (const PathQuality& p : paths) {
    if (p.super_spine < 0) {
      ++same;
      EXPECT_EQ(p.band, 7);
    } else {
      ++cross;
      const bool from_b = t.devices(p.ingress_leaf).pod() == "b";
      EXPECT_EQ(p.band, from_b ? 2 : 7);
      EXPECT_EQ(p.local_band, 7);
    }
  }
  EXPECT_EQ(same, 4);
  EXPECT_EQ(cross, 8);
}

}  // namespace
}  // namespace loom::telemetry

namespace loom::telemetry {
namespace {

using testing::Note;
using testing::S;
using testing::U;

class LinkCheckTest : public ::testing::Test {
 protected:
  LinkCheckTest() : index_(testing::TwoTier()), table_(index_, Options()) {}
  static LinkStateOptions Options() {
    LinkStateOptions o;
    o.staleness.sample_interval_ns = 1 * kNsPerSec;
    o.staleness.stale_after_intervals = 3;
    return o;
  }
  void Lldp(const std::string& dev, const std::string& ifname, const std::string& system,
            const std::string& port) {
    table_.Apply(
        dev,
        Note(1, "/lldp/interfaces/interface[name=" + ifname + "]/neighbors/neighbor[id=1]/state",
             {{"system-name", S(system)}, {"port-id", S(port)}}),
        1);
  }
  LinkDirectionState Link(const std::string& a, const std::string& b, TimeNs now = 1) {
    const auto& t = index_.topology();
    for (int i = 0; i < t.links_size(); ++i) {
      if (t.links(i).a().device() == a && t.links(i).b().device() == b) {
        return table_.Compute(now)[2 * i];
      }
    }
    ADD_FAILURE() << "no link";
    return {};
  }
  topology::TopologyIndex index_;
  LinkStateTable table_;
};

//   spine-0          spine-1
//     | Ethernet0      | Ethernet0
//   leaf-0 Ethernet0  leaf-0 Ethernet1
TEST_F(LinkCheckTest, LldpVerifiesContradictsOrLeavesUnverified) {
  EXPECT_EQ(Link("leaf-0", "spine-0").lldp, LldpCheck::kUnverified);
  // FQDN and case differences are the same name.
  Lldp("leaf-0", "Ethernet0", "SPINE-0.pod1.example.net", "ethernet0");
  EXPECT_EQ(Link("leaf-0", "spine-0").lldp, LldpCheck::kVerified);
  // The other end names a different neighbour: contradicted, with the detail.
  Lldp("spine-0", "Ethernet0", "leaf-7", "Ethernet0");
  auto l = Link("leaf-0", "spine-0");
  EXPECT_EQ(l.lldp, LldpCheck::kContradicted);
  EXPECT_EQ(l.lldp_detail,
            "spine-0:Ethernet0 reports neighbor leaf-7 port Ethernet0, topology says leaf-0 "
            "Ethernet0");
  // A port id given as the neighbour's alias, or as a MAC address, verifies
  // by the system name.
  Lldp("leaf-0", "Ethernet1", "spine-1", "etp1");
  EXPECT_EQ(Link("leaf-0", "spine-1").lldp, LldpCheck::kContradicted);
  table_.SetInterfaceAliases("spine-1", {{"etp1", "Ethernet0"}});
  EXPECT_EQ(Link("leaf-0", "spine-1").lldp, LldpCheck::kVerified);
  Lldp("leaf-0", "Ethernet1", "spine-1", "0c:42:a1:00:00:01");
  EXPECT_EQ(Link("leaf-0", "spine-1").lldp, LldpCheck::kVerified);
}

TEST_F(LinkCheckTest, LldpNamesNumbersMissingNamesAndDeletes) {
  // No system name (an optional TLV): the end says nothing.
  Lldp("leaf-0", "Ethernet0", "", "Ethernet0");
  EXPECT_EQ(Link("leaf-0", "spine-0").lldp, LldpCheck::kUnverified);
  // A numeric (locally assigned) port id is checked by system name only.
  Lldp("leaf-0", "Ethernet0", "spine-0", "17");
  EXPECT_EQ(Link("leaf-0", "spine-0").lldp, LldpCheck::kVerified);
  // A name that only shares a label is someone else.
  Lldp("leaf-0", "Ethernet0", "pod1.spine-0", "Ethernet0");
  EXPECT_EQ(Link("leaf-0", "spine-0").lldp, LldpCheck::kContradicted);
  // The inventory says what spine-0 calls itself.
  Lldp("leaf-0", "Ethernet0", "dc1-r3-spine0.example.net", "Ethernet0");
  EXPECT_EQ(Link("leaf-0", "spine-0").lldp, LldpCheck::kContradicted);
  table_.SetInterfaceAliases("spine-0", {}, "dc1-r3-spine0");
  EXPECT_EQ(Link("leaf-0", "spine-0").lldp, LldpCheck::kVerified);
  // The neighbour goes away (a delete of its subtree): unverified again.
  gnmi::Notification del;
  del.set_timestamp(2);
  ASSERT_TRUE(ParsePath("/lldp/interfaces/interface[name=Ethernet0]/neighbors/neighbor[id=1]",
                        del.add_delete_())
                  .ok());
  table_.Apply("leaf-0", del, 2);
  EXPECT_EQ(Link("leaf-0", "spine-0").lldp, LldpCheck::kUnverified);
}

// A device that refreshes its counters every 10 s is not stale 3 s after a
// sample; a device that does not serve a signal marks its links.
TEST_F(LinkCheckTest, DeviceRefreshIntervalStretchesStalenessAndUnavailableSignalsShow) {
  auto octets = [&](uint64_t v, TimeNs t) {
    table_.Apply(
        "leaf-0",
        Note(1'700'000'000 * kNsPerSec + t, "/interfaces/interface[name=Ethernet0]/state/counters",
             {{"out-octets", U(v)}}),
        t);
  };
  octets(0, 0);
  octets(1'000'000, 10 * kNsPerSec);
  EXPECT_TRUE(Link("leaf-0", "spine-0", 14 * kNsPerSec).stale);  // 3 x 1 s passed
  SignalAvailability a;
  a.target = "leaf-0";
  a.signal = "interface-counters";
  a.effective_interval_ns = 10 * kNsPerSec;
  table_.SetSignalAvailability(a);
  EXPECT_FALSE(Link("leaf-0", "spine-0", 14 * kNsPerSec).stale);
  EXPECT_TRUE(Link("leaf-0", "spine-0", 41 * kNsPerSec).stale);
  a.signal = "pfc-counters";
  a.available = false;
  a.reason = "no per-priority PFC";
  table_.SetSignalAvailability(a);
  const auto& sigs = CatalogueSignals();
  const uint32_t bit = 1u << (std::find(sigs.begin(), sigs.end(), "pfc-counters") - sigs.begin());
  EXPECT_EQ(Link("leaf-0", "spine-0", 14 * kNsPerSec).unavailable_signals, bit);
  EXPECT_EQ(Link("leaf-1", "spine-0", 14 * kNsPerSec).unavailable_signals, 0u);
  EXPECT_EQ(table_.UnavailableSignals()["leaf-0"]["pfc-counters"], "no per-priority PFC");
  a.available = true;
  table_.SetSignalAvailability(a);
  EXPECT_EQ(Link("leaf-0", "spine-0", 14 * kNsPerSec).unavailable_signals, 0u);
}

}  // namespace
}  // namespace loom::telemetry
