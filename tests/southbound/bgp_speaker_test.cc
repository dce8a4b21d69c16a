// Speaker-to-speaker tests over loopback: FSM, capability negotiation,
// BGP-DPF export per fabric color, withdraw/recolor, graceful restart helper,
// DPF receiver, BgpDriver. Sessions use ephemeral ports; the io_context is
// run until a condition holds (bounded), never slept on.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>

#include "southbound/bgp/bgp_driver.h"
#include "southbound/bgp/dpf.h"
#include "southbound/bgp/speaker.h"

namespace loom::southbound::bgp {
namespace {

namespace asio = boost::asio;
using std::chrono::milliseconds;

Prefix P(const char* s) { return *Prefix::Parse(s); }

OriginatedRoute R(Prefix p, uint32_t color, uint32_t backup) {
  OriginatedRoute r;
  r.prefix = p;
  r.color = color;
  r.backup_color = backup;
  return r;
}

// Runs `io` until `pred` holds; false after a 10 s safety bound.
bool RunUntil(asio::io_context& io, const std::function<bool()>& pred) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    io.restart();
    io.run_for(milliseconds(5));
  }
  return true;
}

PeerConfig Peer(const std::string& name, uint32_t local_as, uint32_t peer_as, uint16_t port,
                bool passive) {
  PeerConfig p;
  p.name = name;
  p.local_as = local_as;
  p.peer_as = peer_as;
  p.peer_address = "127.0.0.1";
  p.peer_port = port;
  p.passive = passive;
  p.hold_time_s = 9;
  p.connect_retry = milliseconds(200);
  p.idle_hold = milliseconds(50);
  p.next_hop = "198.18.0.1";
  p.restart_time_s = 5;
  return p;
}

// Loom (active, AS 4200000001 to exercise 4-octet AS) and a leaf (passive
// listener) that records what it receives in a DpfReceiver.
struct Pair {
  asio::io_context io;
  Speaker leaf{io, SpeakerConfig{0x0a000002, "127.0.0.1", 0, false}};
  std::unique_ptr<Speaker> loom;
  DpfReceiver receiver;

  explicit Pair(uint32_t fabric_color = 0, bool restarting = false) {
    EXPECT_TRUE(leaf.Start().ok());
    leaf.AddRouteListener([this](const Session& s, const Prefix& p, const PathAttributes* a) {
      receiver.Update(s.config().name, s.config().fabric_color, s.config().via, p, a);
    });
    PeerConfig lp = Peer("loom", 65001, 4200000001u, 0, true);
    lp.fabric_color = fabric_color;
    lp.via = "spine1";
    EXPECT_TRUE(leaf.AddPeer(lp).ok());
    StartLoom(fabric_color, restarting);
  }
  void StartLoom(uint32_t fabric_color, bool restarting) {
    loom = std::make_unique<Speaker>(io, SpeakerConfig{0x0a000001, "127.0.0.1", -1, restarting});
    EXPECT_TRUE(loom->Start().ok());
    PeerConfig p = Peer("leaf1", 4200000001u, 65001, leaf.listen_port(), false);
    p.device = "leaf1";
    p.fabric_color = fabric_color;
    p.via = "spine1";
    EXPECT_TRUE(loom->AddPeer(p).ok());
  }
  bool Established() {
    auto* a = loom->FindSession("leaf1");
    auto* b = leaf.FindSession("loom");
    return a && b && a->state() == SessionState::kEstablished &&
           b->state() == SessionState::kEstablished;
  }
  const std::map<Prefix, ReceivedRoute>& Rib() { return *leaf.AdjRibIn("loom"); }
};

TEST(SpeakerTest, EstablishesWithFourOctetAsAndGracefulRestart) {
  Pair t;
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Established(); }));
  const Session* s = t.leaf.FindSession("loom");
  EXPECT_EQ(s->peer_open().Asn(), 4200000001u);
  EXPECT_EQ(s->peer_open().my_as_field, kAsTrans);
  EXPECT_TRUE(s->codec_options().four_octet_as);
  EXPECT_TRUE(s->PeerSupportsGracefulRestart());
  EXPECT_EQ(s->hold_time_s(), 9);
  EXPECT_EQ(s->counters().established_transitions, 1u);
  // Both sent End-of-RIB for IPv4 and IPv6.
  ASSERT_TRUE(RunUntil(t.io, [&] { return s->counters().end_of_rib_in == 2; }));
}

TEST(SpeakerTest, WrongPeerAsGetsOpenErrorBadPeerAs) {
  asio::io_context io;
  Speaker leaf(io, SpeakerConfig{0x0a000002, "127.0.0.1", 0, false});
  ASSERT_TRUE(leaf.Start().ok());
  ASSERT_TRUE(leaf.AddPeer(Peer("loom", 65001, 65099, 0, true)).ok());
  Speaker loom(io, SpeakerConfig{0x0a000001, "127.0.0.1", -1, false});
  ASSERT_TRUE(loom.AddPeer(Peer("leaf1", 65000, 65001, leaf.listen_port(), false)).ok());
  const Session* s = loom.FindSession("leaf1");
  ASSERT_TRUE(RunUntil(io, [&] { return s->counters().notifications_received[err::kOpen] > 0; }));
  EXPECT_EQ(leaf.FindSession("loom")->counters().notifications_sent[err::kOpen], 1u);
  EXPECT_NE(s->state(), SessionState::kEstablished);
  EXPECT_NE(s->last_error().find("notification received 2/2"), std::string::npos)
      << s->last_error();
}

TEST(SpeakerTest, ColoredRoutesAdvertiseWithdrawAndRecolor) {
  Pair t(/*fabric_color=*/10);
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Established(); }));
  OriginatedRoute r1 = R(P("198.18.1.7/32"), 10, 20);
  OriginatedRoute r2 = R(P("198.18.1.8/32"), 20, 10);  // Backup on color 10.
  OriginatedRoute r3 = R(P("198.18.1.9/32"), 30, 0);   // Other color: not sent.
  OriginatedRoute r4 = R(P("198.18.1.10/32"), 0, 0);   // Uncolored: sent.
  r1.large_communities.push_back({4200000001u, 1, 3});
  t.loom->SetRoutes("leaf1", {r1, r2, r3, r4});
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Rib().size() == 3; }));
  const PathAttributes& a1 = t.Rib().at(r1.prefix).attrs;
  EXPECT_EQ(a1.Color(), 10u);
  EXPECT_EQ(a1.aigp, 0u);
  EXPECT_EQ(Ipv4ToString(*a1.next_hop), "198.18.0.1");
  EXPECT_EQ(a1.as_path[0].asns, std::vector<uint32_t>{4200000001u});
  EXPECT_EQ(a1.large_communities, r1.large_communities);
  const PathAttributes& a2 = t.Rib().at(r2.prefix).attrs;
  EXPECT_EQ(a2.Color(), 10u);
  EXPECT_EQ(a2.aigp, kDefaultBackupAigp);
  EXPECT_EQ(t.Rib().at(r4.prefix).attrs.Color(), 0u);
  EXPECT_FALSE(t.Rib().count(r3.prefix));

  // Job release withdraws; recolor to a color the session lacks withdraws.
  t.loom->SetRoutes("leaf1", {R(P("198.18.1.7/32"), 30, 0), r4});
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Rib().size() == 1; }));
  EXPECT_TRUE(t.Rib().count(r4.prefix));
  // Recolor to this session's color announces with the new color.
  t.loom->SetRoutes("leaf1", {R(P("198.18.1.9/32"), 10, 0), r4});
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Rib().count(P("198.18.1.9/32")) == 1; }));
  EXPECT_EQ(t.Rib().at(P("198.18.1.9/32")).attrs.Color(), 10u);
  const SessionCounters& c = t.loom->FindSession("leaf1")->counters();
  EXPECT_EQ(c.prefixes_withdrawn_out, 2u);
  EXPECT_GE(c.messages_out[static_cast<size_t>(MessageType::kUpdate)], 4u);
}

TEST(SpeakerTest, RoutesForOtherDevicesAreNotSent) {
  Pair t;
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Established(); }));
  t.loom->SetRoutes("leaf2", {R(P("198.18.2.1/32"), 0, 0)});
  t.loom->SetRoutes("", {R(P("198.18.9.9/32"), 0, 0)});
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Rib().size() == 1; }));
  EXPECT_TRUE(t.Rib().count(P("198.18.9.9/32")));
}

TEST(SpeakerTest, LinkBandwidthPerViaAndIpv6) {
  Pair t;
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Established(); }));
  OriginatedRoute r = R(P("2001:db8:7::/48"), 5, 0);
  r.bandwidth_by_via = {{"spine1", 3e9f}, {"spine2", 1e9f}};
  OriginatedRoute gone = R(P("198.18.3.3/32"), 0, 0);
  gone.bandwidth_by_via = {{"spine2", 1e9f}};  // Weight 0 via spine1.
  t.loom->SetRoutes("leaf1", {r, gone});
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Rib().size() == 1; }));
  const PathAttributes& a = t.Rib().at(r.prefix).attrs;
  EXPECT_FLOAT_EQ(*a.LinkBandwidth(), 3e9f);
  EXPECT_EQ(a.mp_next_hop.size(), 16u);
  auto table = t.receiver.Lookup(r.prefix);
  ASSERT_TRUE(table);
  EXPECT_EQ(table->preferred_color, 5u);
  EXPECT_DOUBLE_EQ(table->colors[0].members[0].weight, 3e9);
  EXPECT_EQ(table->colors[0].members[0].neighbor, "spine1");
}

TEST(SpeakerTest, GracefulRestartHelperKeepsStaleRoutesUntilEndOfRib) {
  Pair t;
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Established(); }));
  OriginatedRoute keep = R(P("198.18.1.1/32"), 0, 0);
  OriginatedRoute drop = R(P("198.18.1.2/32"), 0, 0);
  t.loom->SetRoutes("leaf1", {keep, drop});
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Rib().size() == 2; }));
  int withdrawals = 0;
  t.leaf.AddRouteListener([&](const Session&, const Prefix&, const PathAttributes* a) {
    if (!a) ++withdrawals;
  });
  // Loom's process "dies" (sockets close without NOTIFICATION): destroy the
  // speaker without Shutdown. Sessions close their sockets in destructors.
  t.loom.reset();
  ASSERT_TRUE(RunUntil(
      t.io, [&] { return t.leaf.FindSession("loom")->state() != SessionState::kEstablished; }));
  EXPECT_EQ(t.Rib().size(), 2u);
  EXPECT_TRUE(t.Rib().at(keep.prefix).stale);
  // Loom comes back restarting, re-originates only `keep`, then End-of-RIB.
  t.StartLoom(0, /*restarting=*/true);
  t.loom->SetRoutes("leaf1", {keep});
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Established(); }));
  ASSERT_TRUE(RunUntil(t.io, [&] { return !t.Rib().at(keep.prefix).stale; }));
  EXPECT_EQ(t.Rib().size(), 2u);  // Still stale until End-of-RIB.
  auto* s = t.leaf.FindSession("loom");
  EXPECT_TRUE(s->peer_open().caps.graceful_restart->restart_state);
  t.loom->MarkRibReady();
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Rib().size() == 1; }));
  EXPECT_EQ(withdrawals, 1);
  EXPECT_EQ(s->counters().flaps, 1u);
}

TEST(SpeakerTest, NotificationDropsRoutesImmediately) {
  Pair t;
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Established(); }));
  t.loom->SetRoutes("leaf1", {R(P("198.18.1.1/32"), 0, 0)});
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Rib().size() == 1; }));
  t.loom->Shutdown();  // Cease: no graceful restart retention.
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Rib().empty(); }));
  EXPECT_EQ(t.leaf.FindSession("loom")->counters().notifications_received[err::kCease], 1u);
}

TEST(SpeakerTest, MalformedUpdateIsTreatAsWithdrawAndSessionStays) {
  Pair t;
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Established(); }));
  t.loom->SetRoutes("leaf1", {R(P("10.1.2.0/24"), 0, 0)});
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Rib().size() == 1; }));
  // Bad ORIGIN value for 10.1.2.0/24 sent raw by Loom's session.
  Bytes b(16, 0xff);
  Bytes body = {0, 0, 0, 14, 0x40, 1, 1, 9, 0x40, 2, 0, 0x40, 3, 4, 198, 18, 0, 1, 24, 10, 1, 2};
  b.push_back(0);
  b.push_back(static_cast<uint8_t>(19 + body.size()));
  b.push_back(2);
  b.insert(b.end(), body.begin(), body.end());
  const_cast<Session*>(t.loom->FindSession("leaf1"))->SendRaw(b);
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Rib().empty(); }));
  const Session* s = t.leaf.FindSession("loom");
  EXPECT_EQ(s->counters().treat_as_withdraw, 1u);
  EXPECT_EQ(s->state(), SessionState::kEstablished);
}

TEST(SpeakerTest, MessagesBatchedAndSplitAcrossReadsAreAllHandled) {
  Pair t;
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Established(); }));
  Session* s = const_cast<Session*>(t.loom->FindSession("leaf1"));
  ExportContext ctx{4200000001u, 0, true, {198, 18, 0, 1}, {}, ""};
  auto update = [&](const char* prefix) {
    UpdateMessage u;
    u.attrs = *DpfExport(R(P(prefix), 0, 0), ctx);
    u.nlri.push_back(P(prefix));
    return EncodeUpdate(u, s->codec_options()).at(0);
  };
  // Two UPDATEs and the first 10 bytes of a third in one write; the rest of
  // the third in a second write.
  Bytes a = update("10.1.1.0/24"), b = update("10.1.2.0/24"), c = update("10.1.3.0/24");
  Bytes first = a;
  first.insert(first.end(), b.begin(), b.end());
  first.insert(first.end(), c.begin(), c.begin() + 10);
  s->SendRaw(first);
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Rib().size() == 2; }));
  s->SendRaw(Bytes(c.begin() + 10, c.end()));
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Rib().size() == 3; }));
  const Session* leaf = t.leaf.FindSession("loom");
  EXPECT_EQ(leaf->state(), SessionState::kEstablished);
  EXPECT_EQ(leaf->counters().prefixes_announced_in, 3u);
  EXPECT_EQ(leaf->counters().treat_as_withdraw, 0u);
}

TEST(SpeakerTest, RoutesSharingAnExportClassGetTheirOwnAttributes) {
  Pair t(/*fabric_color=*/10);
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Established(); }));
  // Same colors, differing in MED, large communities and backup AIGP: each
  // must keep its own attributes; the two identical ones share an UPDATE.
  OriginatedRoute r1 = R(P("198.18.1.1/32"), 10, 20);
  OriginatedRoute r2 = R(P("198.18.1.2/32"), 10, 20);
  OriginatedRoute r3 = R(P("198.18.1.3/32"), 10, 20);
  r3.med = 7;
  OriginatedRoute r4 = R(P("198.18.1.4/32"), 10, 20);
  r4.large_communities.push_back({4200000001u, 1, 3});
  OriginatedRoute r5 = R(P("198.18.1.5/32"), 20, 10);
  OriginatedRoute r6 = R(P("198.18.1.6/32"), 20, 10);
  r6.backup_aigp = 5;
  const uint64_t updates_before =
      t.leaf.FindSession("loom")->counters().messages_in[static_cast<size_t>(MessageType::kUpdate)];
  t.loom->SetRoutes("leaf1", {r1, r2, r3, r4, r5, r6});
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Rib().size() == 6; }));
  EXPECT_EQ(t.Rib().at(r1.prefix).attrs, t.Rib().at(r2.prefix).attrs);
  EXPECT_FALSE(t.Rib().at(r1.prefix).attrs.med);
  EXPECT_EQ(t.Rib().at(r3.prefix).attrs.med, 7u);
  EXPECT_TRUE(t.Rib().at(r3.prefix).attrs.large_communities.empty());
  ASSERT_EQ(t.Rib().at(r4.prefix).attrs.large_communities.size(), 1u);
  EXPECT_EQ(t.Rib().at(r4.prefix).attrs.large_communities[0].local2, 3u);
  EXPECT_EQ(t.Rib().at(r1.prefix).attrs.aigp, 0u);
  EXPECT_EQ(t.Rib().at(r5.prefix).attrs.aigp, kDefaultBackupAigp);
  EXPECT_EQ(t.Rib().at(r6.prefix).attrs.aigp, 5u);
  // The backup advertisement's MED mirrors its AIGP (receivers without AIGP
  // prefer the primary too); a primary advertisement carries none.
  EXPECT_EQ(t.Rib().at(r5.prefix).attrs.med, static_cast<uint32_t>(kDefaultBackupAigp));
  EXPECT_EQ(t.Rib().at(r6.prefix).attrs.med, 5u);
  // Five distinct attribute sets: five UPDATEs (r1 and r2 in one).
  const uint64_t updates =
      t.leaf.FindSession("loom")->counters().messages_in[static_cast<size_t>(MessageType::kUpdate)];
  EXPECT_EQ(updates - updates_before, 5u);
  // Recolor r1 only (it becomes a backup on this color-10 session, like r5):
  // one UPDATE for it, the others unchanged.
  r1.color = 20;
  r1.backup_color = 10;
  t.loom->SetRoutes("leaf1", {r1, r2, r3, r4, r5, r6});
  ASSERT_TRUE(
      RunUntil(t.io, [&] { return t.Rib().at(r1.prefix).attrs.aigp == kDefaultBackupAigp; }));
  EXPECT_EQ(t.Rib().at(r1.prefix).attrs, t.Rib().at(r5.prefix).attrs);
  EXPECT_EQ(t.Rib().at(r2.prefix).attrs.aigp, 0u);
  EXPECT_EQ(t.leaf.FindSession("loom")
                    ->counters()
                    .messages_in[static_cast<size_t>(MessageType::kUpdate)] -
                updates,
            1u);
}

TEST(DpfExportTest, ExportClassKeyIgnoresOnlyThePrefix) {
  OriginatedRoute a = R(P("198.18.1.7/32"), 1, 2);
  OriginatedRoute b = a;
  b.prefix = P("198.18.9.0/24");
  EXPECT_EQ(ExportClassKey(a), ExportClassKey(b));
  std::vector<OriginatedRoute> other(8, a);
  other[0].prefix = P("2001:db8::/64");
  other[1].color = 3;
  other[2].backup_color = 3;
  other[3].backup_aigp = 1;
  other[4].bandwidth_by_via["spine1"] = 1e9f;
  other[5].large_communities.push_back({1, 1, 1});
  other[6].nnhn_by_via["spine1"] = NextNextHops{{}, 7, {8}};
  other[7].med = 0;
  for (const OriginatedRoute& o : other) EXPECT_NE(ExportClassKey(o), ExportClassKey(a));
  // NNHN differing only in the via, or only in a next-next-hop id.
  OriginatedRoute c = other[6], d = other[6];
  c.nnhn_by_via = {{"spine2", NextNextHops{{}, 7, {8}}}};
  d.nnhn_by_via["spine1"].next_next_hop_bgp_ids = {9};
  EXPECT_NE(ExportClassKey(c), ExportClassKey(other[6]));
  EXPECT_NE(ExportClassKey(d), ExportClassKey(other[6]));
}

TEST(DpfExportTest, PrimaryBackupAndUncoloredSessions) {
  OriginatedRoute r = R(P("198.18.1.7/32"), 1, 2);
  ExportContext red{65000, 1, true, {198, 18, 0, 1}, {}, ""};
  ExportContext blue = red;
  blue.fabric_color = 2;
  ExportContext green = red;
  green.fabric_color = 3;
  ExportContext none = red;
  none.fabric_color = 0;
  auto a = DpfExport(r, red);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->Color(), 1u);
  EXPECT_EQ(a->aigp, 0u);
  a = DpfExport(r, blue);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->Color(), 2u);
  EXPECT_EQ(a->aigp, kDefaultBackupAigp);
  EXPECT_FALSE(DpfExport(r, green));
  a = DpfExport(r, none);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->Color(), 1u);
}

//   leaf ── red session (spine1) ── route color 1, AIGP 0
//        └─ blue session (spine2) ─ route color 2 (backup), AIGP 1000
//        └─ green session (spine3) ─ route color 1 (hidden: color mismatch)
TEST(DpfExportTest, NnhnPerViaAndNoRouteOnASessionWhoseViaCannotReach) {
  OriginatedRoute r = R(P("198.18.1.7/32"), 1, 0);
  r.nnhn_by_via["spine1"] = NextNextHops{{}, 0x0a000001, {0x0a000011}};
  r.nnhn_by_via["spine3"] = NextNextHops{};  // Reaches, nothing to advertise.
  ExportContext ctx{65000, 0, true, {198, 18, 0, 9}, {}, "spine1"};
  auto a = DpfExport(r, ctx);
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->nnhn);
  EXPECT_EQ(a->nnhn->next_hop, (std::array<uint8_t, 4>{198, 18, 0, 9}));  // Next-hop-self.
  EXPECT_EQ(a->nnhn->next_hop_bgp_id, 0x0a000001u);
  EXPECT_EQ(a->nnhn->next_next_hop_bgp_ids, (std::vector<uint32_t>{0x0a000011}));
  ctx.via = "spine2";  // Not listed: its next hop cannot reach the destination.
  EXPECT_FALSE(DpfExport(r, ctx));
  ctx.via = "spine3";
  a = DpfExport(r, ctx);
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->nnhn);
  ctx.via = "";  // A session that stands for no next hop: no NNHN.
  a = DpfExport(r, ctx);
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->nnhn);
  r.prefix = P("2001:db8::/64");
  ctx.via = "spine1";
  a = DpfExport(r, ctx);
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->nnhn);  // NHC is encoded for IPv4 next hops only.
}

TEST(DpfReceiverTest, MembersExposeTheReceivedNnhn) {
  DpfReceiver rx;
  Prefix p = P("198.18.1.7/32");
  PathAttributes a;
  a.next_hop = {198, 18, 0, 1};
  a.ext_communities.push_back(ExtCommunity::Color(1));
  a.nnhn = NextNextHops{{198, 18, 0, 1}, 0x0a000001, {0x0a000011, 0x0a000012}};
  rx.Update("s-red", 1, "spine1", p, &a);
  auto t = rx.Lookup(p);
  ASSERT_TRUE(t);
  ASSERT_EQ(t->colors.size(), 1u);
  ASSERT_EQ(t->colors[0].members.size(), 1u);
  EXPECT_EQ(t->colors[0].members[0].nnhn_next_hop_id, 0x0a000001u);
  EXPECT_EQ(t->colors[0].members[0].next_next_hops,
            (std::vector<uint32_t>{0x0a000011, 0x0a000012}));
  a.nnhn.reset();
  rx.Update("s-red", 1, "spine1", p, &a);
  EXPECT_TRUE(rx.Lookup(p)->colors[0].members[0].next_next_hops.empty());
}

TEST(DpfReceiverTest, PrefersLowestAigpColorAndHidesMismatchedColors) {
  DpfReceiver rx;
  Prefix p = P("198.18.1.7/32");
  PathAttributes primary;
  primary.ext_communities.push_back(ExtCommunity::Color(1));
  primary.aigp = 0;
  PathAttributes backup;
  backup.ext_communities.push_back(ExtCommunity::Color(2));
  backup.ext_communities.push_back(ExtCommunity::LinkBandwidth(1, 2.0f));
  backup.aigp = 1000;
  rx.Update("s-red", 1, "spine1", p, &primary);
  rx.Update("s-blue", 2, "spine2", p, &backup);
  rx.Update("s-green", 3, "spine3", p, &primary);
  auto t = rx.Lookup(p);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->preferred_color, 1u);
  ASSERT_EQ(t->colors.size(), 2u);
  EXPECT_EQ(t->colors[1].color, 2u);
  EXPECT_DOUBLE_EQ(t->colors[1].members[0].weight, 2.0);
  EXPECT_EQ(rx.hidden_routes(), 1u);
  // Red fabric fails: the backup color takes over.
  rx.SessionDown("s-red");
  EXPECT_EQ(rx.Lookup(p)->preferred_color, 2u);
  rx.Update("s-blue", 2, "spine2", p, nullptr);
  EXPECT_FALSE(rx.Lookup(p));
}

TEST(BgpDriverTest, AppliesRoutesColorsWeightsAndReportsAppliedState) {
  Pair t(/*fabric_color=*/0);
  // The Pair's Loom speaker already has a session for leaf1; the driver
  // reuses it (config.sessions only tells the driver which devices exist).
  BgpDriverConfig cfg;
  PeerConfig p = Peer("leaf1", 4200000001u, 65001, 0, false);
  p.device = "leaf1";
  cfg.sessions.push_back(p);
  cfg.destination_prefixes["leaf9"] = {"198.18.9.0/24"};
  BgpDriver driver(t.io, t.loom.get(), cfg);
  EXPECT_TRUE(driver.Handles("leaf1"));
  EXPECT_FALSE(driver.Handles("leaf2"));
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Established(); }));

  loom::v1::DeviceState desired;
  desired.set_device("leaf1");
  desired.set_generation(7);
  auto* g = desired.add_colors();
  g->set_color(1);
  g->add_next_hops("spine1");
  auto* r = desired.add_routes();
  r->set_destination("nic7");
  r->set_prefix("198.18.1.7/32");
  r->set_color(1);
  r->set_backup_color(2);
  r->set_job_id("job-a");
  r->set_traffic_class(3);
  auto* bad = desired.add_routes();
  bad->set_destination("nic8");
  auto* w = desired.add_weights();
  w->set_destination("leaf9");
  (*w->mutable_weights())["spine1"] = 3;
  desired.add_alb_tables()->set_group("x");

  std::optional<ApplyResult> result;
  driver.Apply(desired, [&](ApplyResult res) { result = std::move(res); });
  ASSERT_TRUE(RunUntil(t.io, [&] { return result.has_value(); }));
  EXPECT_EQ(result->applied.generation(), 7u);
  EXPECT_EQ(result->applied.routes_size(), 1);
  EXPECT_EQ(result->applied.colors_size(), 1);
  EXPECT_EQ(result->applied.weights_size(), 1);
  std::set<std::string> failed;
  for (const auto& f : result->failures) failed.insert(f.part);
  EXPECT_EQ(failed, (std::set<std::string>{"routes", "alb_tables"}));
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Rib().size() == 2; }));
  EXPECT_EQ(t.Rib().at(P("198.18.1.7/32")).attrs.Color(), 1u);
  EXPECT_FLOAT_EQ(*t.Rib().at(P("198.18.9.0/24")).attrs.LinkBandwidth(), 3e9f);

  std::optional<Status> read_status;
  loom::v1::DeviceState read;
  driver.Read("leaf1", [&](Status s, loom::v1::DeviceState st) {
    read_status = s;
    read = st;
  });
  ASSERT_TRUE(RunUntil(t.io, [&] { return read_status.has_value(); }));
  EXPECT_TRUE(read_status->ok());
  EXPECT_EQ(read.generation(), 7u);

  // Job release: the route goes away on the wire.
  desired.clear_routes();
  desired.clear_alb_tables();
  result.reset();
  driver.Apply(desired, [&](ApplyResult res) { result = std::move(res); });
  ASSERT_TRUE(RunUntil(t.io, [&] { return result.has_value(); }));
  EXPECT_TRUE(result->ok());
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Rib().size() == 1; }));
}

// Next-hop reach entry of a DeviceState.
void AddReach(loom::v1::DeviceState* d, const std::string& next_hop,
              std::vector<std::string> egress, std::vector<std::string> beyond = {}) {
  auto* r = d->add_next_hop_reach();
  r->set_next_hop(next_hop);
  for (const auto& e : egress) r->add_egress(e);
  for (const auto& b : beyond) r->add_beyond(b);
}

loom::v1::ColoredRoute* AddRoute(loom::v1::DeviceState* d, const std::string& nic,
                                 const std::string& prefix, uint32_t color) {
  auto* r = d->add_routes();
  r->set_destination(nic);
  r->set_prefix(prefix);
  r->set_color(color);
  return r;
}

// Leaf0's sessions via spine0..2, router ids, and the NICs' egress leaves.
BgpDriverConfig NnhnConfig() {
  BgpDriverConfig cfg;
  for (int s = 0; s < 3; ++s) {
    PeerConfig p = Peer("leaf0/" + std::to_string(s), 65000, 65001, 179, false);
    p.device = "leaf0";
    p.fabric_color = 10 + static_cast<uint32_t>(s);
    p.via = "spine" + std::to_string(s);
    cfg.sessions.push_back(p);
  }
  cfg.router_ids = {{"spine0", 0x0a000001}, {"spine1", 0x0a000002}, {"spine2", 0x0a000003},
                    {"leaf1", 0x0a000011},  {"leaf2", 0x0a000012},  {"super0", 0x0a000021},
                    {"super1", 0x0a000022}};
  cfg.egress_leaves = {{"nic1", "leaf1"}, {"nic2", "leaf2"}, {"nic3", "leaf3"}};
  cfg.destination_prefixes["leaf2"] = {"198.18.2.0/24"};
  cfg.nnhn = BgpDriverConfig::NnhnMode::kAlways;
  return cfg;
}

// A BgpDriver for Translate only (its speaker never runs).
struct TranslateOnly {
  asio::io_context io;
  Speaker loom{io, SpeakerConfig{1, "127.0.0.1", -1, false}};
  BgpDriver driver{io, &loom, NnhnConfig()};
};

TEST(BgpDriverTest, TranslateBuildsNnhnPerViaFromTheNextHopReach) {
  TranslateOnly t;
  loom::v1::DeviceState d;
  d.set_device("leaf0");
  AddRoute(&d, "nic1", "198.18.1.1/32", 10);
  AddRoute(&d, "nic2", "198.18.2.1/32", 10);
  AddRoute(&d, "nic3", "198.18.3.1/32", 10);  // leaf3: in no reach entry.
  auto* w = d.add_weights();
  w->set_destination("leaf2");
  (*w->mutable_weights())["spine0"] = 1;
  (*w->mutable_weights())["spine2"] = 1;
  // spine0 reaches both leaves directly; spine1 lost leaf2; spine2 is not
  // listed (nothing known about it).
  AddReach(&d, "spine0", {"leaf1", "leaf2"});
  AddReach(&d, "spine1", {"leaf1"});
  std::vector<ApplyFailure> failures;
  loom::v1::DeviceState applied;
  auto routes = t.driver.Translate(d, &failures, &applied);
  EXPECT_TRUE(failures.empty());
  EXPECT_EQ(applied.next_hop_reach_size(), 2);
  std::map<Prefix, OriginatedRoute> by_prefix;
  for (const auto& r : routes) by_prefix[r.prefix] = r;
  ASSERT_EQ(by_prefix.size(), 4u);
  const auto& to1 = by_prefix.at(P("198.18.1.1/32")).nnhn_by_via;
  EXPECT_EQ(to1, (std::map<std::string, NextNextHops>{{"spine0", {{}, 0x0a000001, {0x0a000011}}},
                                                      {"spine1", {{}, 0x0a000002, {0x0a000011}}},
                                                      {"spine2", {}}}));
  const auto& to2 = by_prefix.at(P("198.18.2.1/32")).nnhn_by_via;
  EXPECT_EQ(to2, (std::map<std::string, NextNextHops>{{"spine0", {{}, 0x0a000001, {0x0a000012}}},
                                                      {"spine2", {}}}));
  // The weights' prefixes of leaf2 get the same NNHN (and their bandwidth).
  const OriginatedRoute& glb = by_prefix.at(P("198.18.2.0/24"));
  EXPECT_EQ(glb.nnhn_by_via, to2);
  EXPECT_EQ(glb.bandwidth_by_via.size(), 2u);
  EXPECT_TRUE(by_prefix.at(P("198.18.3.1/32")).nnhn_by_via.empty());
  // On the wire: spine1's session does not carry the route to leaf2.
  ExportContext ctx{65000, 10, true, {198, 18, 0, 1}, {}, "spine1"};
  EXPECT_TRUE(DpfExport(by_prefix.at(P("198.18.1.1/32")), ctx));
  EXPECT_FALSE(DpfExport(by_prefix.at(P("198.18.2.1/32")), ctx));
}

TEST(BgpDriverTest, TranslateListsTheDevicesBeyondAndDropsRoutesNoViaReaches) {
  TranslateOnly t;
  loom::v1::DeviceState d;
  d.set_device("leaf0");
  AddRoute(&d, "nic1", "198.18.1.1/32", 10);
  AddRoute(&d, "nic2", "198.18.2.1/32", 10);
  AddReach(&d, "spine0", {"leaf1"}, {"super1", "super0", "unknown-device"});
  AddReach(&d, "spine0", {"leaf2"}, {"super9"});  // No router id: no attribute.
  AddReach(&d, "spine1", {});
  AddReach(&d, "spine2", {});
  std::vector<ApplyFailure> failures;
  loom::v1::DeviceState applied;
  auto routes = t.driver.Translate(d, &failures, &applied);
  ASSERT_EQ(routes.size(), 2u);
  EXPECT_EQ(routes[0].nnhn_by_via, (std::map<std::string, NextNextHops>{
                                       {"spine0", {{}, 0x0a000001, {0x0a000021, 0x0a000022}}}}));
  ASSERT_EQ(routes[1].nnhn_by_via.size(), 1u);
  EXPECT_TRUE(routes[1].nnhn_by_via.at("spine0").next_next_hop_bgp_ids.empty());
  ExportContext ctx{65000, 10, true, {198, 18, 0, 1}, {}, "spine0"};
  auto a = DpfExport(routes[1], ctx);
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->nnhn);
  // Only spine9, which no session stands for, reaches leaf1: the route is
  // not originated, yet applied (that is what the reach asks for).
  d.clear_next_hop_reach();
  AddReach(&d, "spine0", {"leaf2"});
  AddReach(&d, "spine1", {});
  AddReach(&d, "spine2", {});
  AddReach(&d, "spine9", {"leaf1"});
  applied.Clear();
  routes = t.driver.Translate(d, &failures, &applied);
  ASSERT_EQ(routes.size(), 1u);
  EXPECT_EQ(routes[0].prefix, P("198.18.2.1/32"));
  EXPECT_EQ(applied.routes_size(), 2);
  EXPECT_TRUE(failures.empty());
  // leaf1 in no entry at all (unknown, or reached by nothing): sent as
  // before, without NNHN.
  d.mutable_next_hop_reach()->RemoveLast();
  routes = t.driver.Translate(d, &failures, &applied);
  ASSERT_EQ(routes.size(), 2u);
  EXPECT_TRUE(routes[0].nnhn_by_via.empty());
}

// BGP-DPF has one color per prefix: routes split by destination QP cannot
// be carried. They are reported (not as duplicate prefixes), not originated
// and not applied; the device's other routes still go out.
TEST(BgpDriverTest, TranslateRejectsRoutesSplitByDestinationQp) {
  TranslateOnly t;
  loom::v1::DeviceState d;
  d.set_device("leaf0");
  AddRoute(&d, "nic1", "198.18.1.1/32", 10)->set_traffic_class(3);
  for (uint32_t v : {0u, 1u}) {
    auto* r = AddRoute(&d, "nic2", "198.18.2.1/32", 10 + v);
    r->set_traffic_class(3);
    r->set_qp_mask(1);
    r->set_qp_value(v);
  }
  AddRoute(&d, "nic3", "198.18.3.1/32", 11);
  std::vector<ApplyFailure> failures;
  loom::v1::DeviceState applied;
  auto routes = t.driver.Translate(d, &failures, &applied);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].part, "routes");
  EXPECT_EQ(failures[0].status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(failures[0].status.message(),
            "routes split by destination QP cannot be carried by BGP-DPF (one color per prefix); "
            "program these devices over gNMI or remove qp_split from the policy: nic2 qp 0/1 "
            "nic2 qp 1/1");
  ASSERT_EQ(routes.size(), 2u);
  EXPECT_EQ(routes[0].prefix, P("198.18.1.1/32"));
  EXPECT_EQ(routes[0].color, 10u);
  EXPECT_EQ(routes[1].prefix, P("198.18.3.1/32"));
  EXPECT_EQ(routes[1].color, 11u);
  ASSERT_EQ(applied.routes_size(), 2);
  EXPECT_EQ(applied.routes(0).destination(), "nic1");
  EXPECT_EQ(applied.routes(1).destination(), "nic3");
  // A split destination that also has an unsplit route (0/0): that one goes
  // out, the parts are still reported.
  AddRoute(&d, "nic2", "198.18.2.1/32", 12)->set_traffic_class(3);
  failures.clear();
  applied.Clear();
  routes = t.driver.Translate(d, &failures, &applied);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].status.message().find("nic2 qp 0/1 nic2 qp 1/1"), std::string::npos);
  EXPECT_EQ(failures[0].status.message().find("duplicate"), std::string::npos);
  ASSERT_EQ(routes.size(), 3u);
  EXPECT_EQ(routes[1].prefix, P("198.18.2.1/32"));
  EXPECT_EQ(routes[1].color, 12u);
  EXPECT_EQ(applied.routes_size(), 3);
}

TEST(BgpDriverTest, NnhnCrossesTheWireAndFollowsTheReach) {
  Pair t(/*fabric_color=*/0);
  BgpDriverConfig cfg;
  PeerConfig p = Peer("leaf1", 4200000001u, 65001, 0, false);
  p.device = "leaf1";
  p.via = "spine1";
  cfg.sessions.push_back(p);
  cfg.router_ids = {{"spine1", 0x0a000001}, {"leaf2", 0x0a000012}, {"leaf3", 0x0a000013}};
  cfg.egress_leaves = {{"nic2", "leaf2"}, {"nic3", "leaf3"}};
  cfg.nnhn = BgpDriverConfig::NnhnMode::kAlways;
  BgpDriver driver(t.io, t.loom.get(), cfg);
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Established(); }));
  loom::v1::DeviceState desired;
  desired.set_device("leaf1");
  AddRoute(&desired, "nic2", "198.18.2.1/32", 0);
  AddRoute(&desired, "nic3", "198.18.3.1/32", 0);
  AddReach(&desired, "spine1", {"leaf2", "leaf3"});
  AddReach(&desired, "spine2", {"leaf2", "leaf3"});  // A next hop without a session here.
  auto apply = [&] {
    std::optional<ApplyResult> result;
    driver.Apply(desired, [&](ApplyResult res) { result = std::move(res); });
    EXPECT_TRUE(RunUntil(t.io, [&] { return result.has_value(); }));
    EXPECT_TRUE(result->ok());
    EXPECT_EQ(result->applied.next_hop_reach_size(), desired.next_hop_reach_size());
  };
  apply();
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Rib().size() == 2; }));
  const PathAttributes& got = t.Rib().at(P("198.18.3.1/32")).attrs;
  ASSERT_TRUE(got.nnhn);
  EXPECT_EQ(got.nnhn->next_hop, (std::array<uint8_t, 4>{198, 18, 0, 1}));
  EXPECT_EQ(got.nnhn->next_hop_bgp_id, 0x0a000001u);
  EXPECT_EQ(got.nnhn->next_next_hop_bgp_ids, (std::vector<uint32_t>{0x0a000013}));
  auto table = t.receiver.Lookup(P("198.18.2.1/32"));
  ASSERT_TRUE(table);
  ASSERT_EQ(table->uncolored.size(), 1u);
  EXPECT_EQ(table->uncolored[0].neighbor, "spine1");
  EXPECT_EQ(table->uncolored[0].nnhn_next_hop_id, 0x0a000001u);
  EXPECT_EQ(table->uncolored[0].next_next_hops, (std::vector<uint32_t>{0x0a000012}));

  // spine1 loses its link to leaf3 (spine2 still reaches it): the session
  // via spine1 withdraws the route.
  desired.clear_next_hop_reach();
  AddReach(&desired, "spine1", {"leaf2"});
  AddReach(&desired, "spine2", {"leaf2", "leaf3"});
  apply();
  ASSERT_TRUE(RunUntil(t.io, [&] { return t.Rib().size() == 1; }));
  EXPECT_TRUE(t.Rib().count(P("198.18.2.1/32")));
  EXPECT_FALSE(t.receiver.Lookup(P("198.18.3.1/32")));
}

TEST(BgpDriverTest, NnhnOnlyWhereTheTopologyNeedsItByDefault) {
  BgpDriverConfig cfg = NnhnConfig();
  cfg.nnhn = BgpDriverConfig::NnhnMode::kWhereNeeded;
  asio::io_context io;
  Speaker loom(io, SpeakerConfig{1, "127.0.0.1", -1, false});
  BgpDriver driver(io, &loom, cfg);
  loom::v1::DeviceState d;
  d.set_device("leaf0");
  AddRoute(&d, "nic1", "198.18.1.1/32", 10);
  AddRoute(&d, "nic2", "198.18.2.1/32", 10);
  // Every spine reaches leaf1 directly (a healthy 2-tier Clos): nothing to say.
  // spine1 lost leaf2: its route carries NNHN on the spines that still reach it.
  AddReach(&d, "spine0", {"leaf1", "leaf2"});
  AddReach(&d, "spine1", {"leaf1"});
  AddReach(&d, "spine2", {"leaf1", "leaf2"});
  std::vector<ApplyFailure> failures;
  loom::v1::DeviceState applied;
  std::map<Prefix, OriginatedRoute> by_prefix;
  for (auto& r : driver.Translate(d, &failures, &applied)) by_prefix[r.prefix] = r;
  EXPECT_TRUE(failures.empty());
  EXPECT_TRUE(by_prefix.at(P("198.18.1.1/32")).nnhn_by_via.empty());  // to every session
  EXPECT_EQ(by_prefix.at(P("198.18.2.1/32")).nnhn_by_via,
            (std::map<std::string, NextNextHops>{{"spine0", {{}, 0x0a000001, {0x0a000012}}},
                                                 {"spine2", {{}, 0x0a000003, {0x0a000012}}}}));
  // Routes without NNHN to the same vias share one export class (one UPDATE).
  AddRoute(&d, "nic1b", "198.18.1.2/32", 10);
  cfg.egress_leaves["nic1b"] = "leaf1";
  BgpDriver driver2(io, &loom, cfg);
  by_prefix.clear();
  for (auto& r : driver2.Translate(d, &failures, &applied)) by_prefix[r.prefix] = r;
  EXPECT_EQ(ExportClassKey(by_prefix.at(P("198.18.1.1/32"))),
            ExportClassKey(by_prefix.at(P("198.18.1.2/32"))));
  // kOff: no route carries it, and spine1 still does not get the route to leaf2.
  cfg.nnhn = BgpDriverConfig::NnhnMode::kOff;
  BgpDriver off(io, &loom, cfg);
  by_prefix.clear();
  for (auto& r : off.Translate(d, &failures, &applied)) by_prefix[r.prefix] = r;
  EXPECT_EQ(by_prefix.at(P("198.18.2.1/32")).nnhn_by_via,
            (std::map<std::string, NextNextHops>{{"spine0", {}}, {"spine2", {}}}));
}

TEST(BgpDriverTest, UnknownDeviceFailsWholeDevice) {
  asio::io_context io;
  Speaker loom(io, SpeakerConfig{1, "127.0.0.1", -1, false});
  BgpDriver driver(io, &loom, BgpDriverConfig{});
  loom::v1::DeviceState d;
  d.set_device("nope");
  std::optional<ApplyResult> result;
  driver.Apply(d, [&](ApplyResult r) { result = std::move(r); });
  ASSERT_TRUE(RunUntil(io, [&] { return result.has_value(); }));
  ASSERT_EQ(result->failures.size(), 1u);
  EXPECT_EQ(result->failures[0].part, "device");
  EXPECT_EQ(result->failures[0].status.code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace loom::southbound::bgp
