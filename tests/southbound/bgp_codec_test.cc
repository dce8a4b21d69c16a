// Unit tests of the pure BGP codec: every attribute round-trips, and every
// error path yields the RFC 4271 / RFC 7606 decision.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "southbound/bgp/codec.h"

namespace loom::southbound::bgp {
namespace {

Prefix P(const char* s) { return *Prefix::Parse(s); }

// Builds an UPDATE from raw withdrawn / attribute / NLRI bytes.
Bytes RawUpdate(const Bytes& withdrawn, const Bytes& attrs, const Bytes& nlri) {
  Bytes b(16, 0xff);
  size_t len = 19 + 2 + withdrawn.size() + 2 + attrs.size() + nlri.size();
  b.push_back(static_cast<uint8_t>(len >> 8));
  b.push_back(static_cast<uint8_t>(len));
  b.push_back(2);
  b.push_back(static_cast<uint8_t>(withdrawn.size() >> 8));
  b.push_back(static_cast<uint8_t>(withdrawn.size()));
  b.insert(b.end(), withdrawn.begin(), withdrawn.end());
  b.push_back(static_cast<uint8_t>(attrs.size() >> 8));
  b.push_back(static_cast<uint8_t>(attrs.size()));
  b.insert(b.end(), attrs.begin(), attrs.end());
  b.insert(b.end(), nlri.begin(), nlri.end());
  return b;
}

// ORIGIN IGP, AS_PATH [65001] (4-byte), NEXT_HOP 198.18.0.1.
Bytes BaseAttrs() {
  return {0x40, 1, 1, 0, 0x40, 2, 6, 2, 1, 0, 0, 0xfd, 0xe9, 0x40, 3, 4, 198, 18, 0, 1};
}
const Bytes kNlri = {24, 10, 1, 2};  // 10.1.2.0/24

struct Decoded {
  bool ok;
  Message msg;
  DecodeError error;
};
Decoded Decode(const Bytes& b, CodecOptions o = {}) {
  Decoded d;
  d.ok = DecodeMessage(b, o, &d.msg, &d.error);
  return d;
}

TEST(PrefixTest, ParsesAndMasksHostBits) {
  auto p = Prefix::Parse("10.1.2.3/24");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->ToString(), "10.1.2.0/24");
  EXPECT_EQ(Prefix::Parse("198.18.1.7")->ToString(), "198.18.1.7/32");
  EXPECT_EQ(Prefix::Parse("2001:db8::1/64")->ToString(), "2001:db8::/64");
  EXPECT_FALSE(Prefix::Parse("10.0.0.0/33"));
  EXPECT_FALSE(Prefix::Parse("nonsense"));
  EXPECT_FALSE(Prefix::Parse("10.0.0.0/"));
}

TEST(CodecTest, OpenRoundTripsAllCapabilities) {
  OpenMessage o;
  o.my_as_field = kAsTrans;
  o.hold_time_s = 9;
  o.bgp_id = 0x01020304;
  o.caps.four_octet_as = 4200000001u;
  o.caps.mp_ipv4_unicast = true;
  o.caps.mp_ipv6_unicast = true;
  o.caps.route_refresh = true;
  GracefulRestartCap gr;
  gr.restart_state = true;
  gr.restart_time_s = 120;
  gr.families.push_back({Afi::kIpv4, kSafiUnicast, true});
  gr.families.push_back({Afi::kIpv6, kSafiUnicast, false});
  o.caps.graceful_restart = gr;
  Decoded d = Decode(EncodeOpen(o));
  ASSERT_TRUE(d.ok) << d.error.reason;
  ASSERT_EQ(d.msg.type, MessageType::kOpen);
  const OpenMessage& r = d.msg.open;
  EXPECT_EQ(r.Asn(), 4200000001u);
  EXPECT_EQ(r.my_as_field, kAsTrans);
  EXPECT_EQ(r.hold_time_s, 9);
  EXPECT_EQ(r.bgp_id, 0x01020304u);
  EXPECT_TRUE(r.caps.mp_ipv4_unicast && r.caps.mp_ipv6_unicast && r.caps.route_refresh);
  ASSERT_TRUE(r.caps.graceful_restart);
  EXPECT_TRUE(r.caps.graceful_restart->restart_state);
  EXPECT_EQ(r.caps.graceful_restart->restart_time_s, 120);
  ASSERT_EQ(r.caps.graceful_restart->families.size(), 2u);
  EXPECT_TRUE(r.caps.graceful_restart->families[0].forwarding_preserved);
  EXPECT_FALSE(r.caps.graceful_restart->families[1].forwarding_preserved);
}

TEST(CodecTest, OpenWithBadVersionIsOpenError1) {
  OpenMessage o;
  o.bgp_id = 1;
  Bytes b = EncodeOpen(o);
  b[19] = 3;
  Decoded d = Decode(b);
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.error.code, err::kOpen);
  EXPECT_EQ(d.error.subcode, err::kOpenBadVersion);
}

TEST(CodecTest, OpenWithNonCapabilityParameterIsOpenError4) {
  Bytes b(16, 0xff);
  Bytes body = {4, 0xfd, 0xe9, 0, 90, 1, 2, 3, 4, 4, 1, 2, 0, 0};
  b.push_back(0);
  b.push_back(static_cast<uint8_t>(19 + body.size()));
  b.push_back(1);
  b.insert(b.end(), body.begin(), body.end());
  Decoded d = Decode(b);
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.error.code, err::kOpen);
  EXPECT_EQ(d.error.subcode, err::kOpenUnsupportedOptParam);
}

TEST(CodecTest, HeaderErrors) {
  Bytes ka = EncodeKeepalive();
  Bytes bad_marker = ka;
  bad_marker[3] = 0;
  Decoded d = Decode(bad_marker);
  EXPECT_EQ(d.error.code, err::kHeader);
  EXPECT_EQ(d.error.subcode, err::kHeaderNotSynchronized);

  Bytes bad_type = ka;
  bad_type[18] = 9;
  d = Decode(bad_type);
  EXPECT_EQ(d.error.subcode, err::kHeaderBadType);
  EXPECT_EQ(d.error.data, Bytes{9});

  Bytes long_ka = ka;
  long_ka.push_back(0);
  long_ka[17] = 20;
  d = Decode(long_ka);
  EXPECT_EQ(d.error.subcode, err::kHeaderBadLength);

  Bytes huge = ka;
  huge[16] = 0x10;
  huge[17] = 0x01;  // 4097
  d = Decode(huge);
  EXPECT_EQ(d.error.subcode, err::kHeaderBadLength);

  Bytes truncated = RawUpdate({}, BaseAttrs(), kNlri);
  truncated.pop_back();
  d = Decode(truncated);
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.error.subcode, err::kHeaderBadLength);
}

TEST(CodecTest, NotificationAndRouteRefreshRoundTrip) {
  Decoded d = Decode(EncodeNotification({6, 2, {1, 2, 3}}));
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.msg.notification.code, 6);
  EXPECT_EQ(d.msg.notification.subcode, 2);
  EXPECT_EQ(d.msg.notification.data, (Bytes{1, 2, 3}));
  d = Decode(EncodeRouteRefresh({Afi::kIpv6, 0, 1}));
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.msg.route_refresh.afi, Afi::kIpv6);
}

PathAttributes FullAttrs() {
  PathAttributes a;
  a.origin = 2;
  a.has_as_path = true;
  a.as_path.push_back({AsSegmentType::kSequence, {65000, 4200000001u}});
  a.as_path.push_back({AsSegmentType::kSet, {1, 2}});
  a.next_hop = std::array<uint8_t, 4>{198, 18, 0, 1};
  a.med = 7;
  a.local_pref = 200;
  a.communities = {0xfde80001};
  a.ext_communities.push_back(ExtCommunity::Color(42));
  a.ext_communities.push_back(ExtCommunity::LinkBandwidth(65000, 12.5e9f));
  a.large_communities.push_back({65000, 1, 3});
  a.aigp = 1000;
  NextNextHops n;
  n.next_hop = {198, 18, 0, 1};
  n.next_hop_bgp_id = 0x0a000001;
  n.next_next_hop_bgp_ids = {0x0a000002, 0x0a000003};
  a.nnhn = n;
  a.unknown.push_back({kFlagOptional | kFlagTransitive | kFlagPartial, 200, {9, 9}});
  return a;
}

TEST(CodecTest, UpdateRoundTripsEveryAttribute) {
  UpdateMessage u;
  u.attrs = FullAttrs();
  u.nlri = {P("10.1.0.0/16"), P("198.18.7.1/32")};
  u.withdrawn = {P("10.9.0.0/16")};
  CodecOptions ibgp{true, false};
  std::vector<Bytes> msgs = EncodeUpdate(u, ibgp);
  ASSERT_EQ(msgs.size(), 2u);  // Withdrawals and announcements.
  Decoded w = Decode(msgs[0], ibgp);
  ASSERT_TRUE(w.ok);
  EXPECT_EQ(w.msg.update.withdrawn, std::vector<Prefix>{P("10.9.0.0/16")});
  Decoded d = Decode(msgs[1], ibgp);
  ASSERT_TRUE(d.ok) << d.error.reason;
  const UpdateMessage& r = d.msg.update;
  EXPECT_FALSE(r.treat_as_withdraw) << r.error;
  EXPECT_EQ(r.nlri, u.nlri);
  EXPECT_EQ(r.attrs, u.attrs);
  EXPECT_EQ(r.attrs.Color(), 42u);
  EXPECT_FLOAT_EQ(*r.attrs.LinkBandwidth(), 12.5e9f);
}

TEST(CodecTest, ColorAndLinkBandwidthWireFormat) {
  ExtCommunity c = ExtCommunity::Color(0x01020304);
  EXPECT_EQ(c.bytes, (std::array<uint8_t, 8>{0x03, 0x0b, 0, 0, 1, 2, 3, 4}));
  ExtCommunity lb = ExtCommunity::LinkBandwidth(65000, 1.0f);
  // 1.0f = 0x3f800000.
  EXPECT_EQ(lb.bytes, (std::array<uint8_t, 8>{0x40, 0x04, 0xfd, 0xe8, 0x3f, 0x80, 0, 0}));
}

TEST(CodecTest, AigpWireFormat) {
  PathAttributes a;
  a.aigp = 5;
  Bytes b = EncodePathAttributes(a, {});
  EXPECT_EQ(b, (Bytes{0x80, 26, 11, 1, 0, 11, 0, 0, 0, 0, 0, 0, 0, 5}));
}

TEST(CodecTest, LocalPrefFromEbgpPeerIsIgnored) {
  Bytes attrs = BaseAttrs();
  Bytes lp = {0x40, 5, 4, 0, 0, 0, 100};
  attrs.insert(attrs.end(), lp.begin(), lp.end());
  Decoded d = Decode(RawUpdate({}, attrs, kNlri), CodecOptions{true, true});
  ASSERT_TRUE(d.ok);
  EXPECT_FALSE(d.msg.update.attrs.local_pref);
  d = Decode(RawUpdate({}, attrs, kNlri), CodecOptions{true, false});
  EXPECT_EQ(d.msg.update.attrs.local_pref, 100u);
}

TEST(CodecTest, TwoOctetAsPathUsesAsTransAndAs4Path) {
  UpdateMessage u;
  u.attrs = FullAttrs();
  u.attrs.unknown.clear();
  u.nlri = {P("10.1.0.0/16")};
  CodecOptions two{false, true};
  Decoded d = Decode(EncodeUpdate(u, two)[0], two);
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.msg.update.attrs.as_path[0].asns, (std::vector<uint32_t>{65000, kAsTrans}));
  ASSERT_EQ(d.msg.update.attrs.unknown.size(), 1u);
  EXPECT_EQ(d.msg.update.attrs.unknown[0].type, attr::kAs4Path);
}

TEST(CodecTest, Ipv6RoutesUseMpReachAndMpUnreach) {
  UpdateMessage u;
  u.attrs.origin = 0;
  u.attrs.has_as_path = true;
  u.attrs.mp_next_hop = Bytes(16, 0);
  u.attrs.mp_next_hop[0] = 0x20;
  u.attrs.ext_communities.push_back(ExtCommunity::Color(7));
  u.nlri = {P("2001:db8:1::/48")};
  Decoded d = Decode(EncodeUpdate(u, {})[0]);
  ASSERT_TRUE(d.ok);
  EXPECT_FALSE(d.msg.update.treat_as_withdraw) << d.msg.update.error;
  EXPECT_EQ(d.msg.update.nlri, u.nlri);
  EXPECT_EQ(d.msg.update.attrs.mp_next_hop, u.attrs.mp_next_hop);
  UpdateMessage w;
  w.withdrawn = {P("2001:db8:1::/48")};
  d = Decode(EncodeUpdate(w, {})[0]);
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.msg.update.withdrawn, w.withdrawn);
  EXPECT_FALSE(d.msg.update.end_of_rib);
}

TEST(CodecTest, EndOfRibBothFamilies) {
  Decoded d = Decode(EncodeEndOfRib(Afi::kIpv4));
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.msg.update.end_of_rib, Afi::kIpv4);
  d = Decode(EncodeEndOfRib(Afi::kIpv6));
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.msg.update.end_of_rib, Afi::kIpv6);
}

TEST(CodecTest, LargeUpdatesAreSplitUnder4096Bytes) {
  UpdateMessage u;
  u.attrs = FullAttrs();
  for (int i = 0; i < 3000; ++i) {
    Prefix p = P("10.0.0.0/32");
    p.addr[1] = static_cast<uint8_t>(i >> 8);
    p.addr[2] = static_cast<uint8_t>(i);
    u.nlri.push_back(p);
  }
  std::vector<Bytes> msgs = EncodeUpdate(u, {});
  EXPECT_GT(msgs.size(), 1u);
  size_t total = 0;
  for (const Bytes& m : msgs) {
    EXPECT_LE(m.size(), kMaxMessageSize);
    Decoded d = Decode(m);
    ASSERT_TRUE(d.ok);
    total += d.msg.update.nlri.size();
  }
  EXPECT_EQ(total, 3000u);
}

// ---- RFC 7606 decisions ----

struct Case {
  const char* name;
  Bytes extra_attrs;  // Appended to BaseAttrs (or replaces when base=false).
  bool base = true;
};

void ExpectTreatAsWithdraw(const Bytes& attrs, const char* what) {
  Decoded d = Decode(RawUpdate({}, attrs, kNlri));
  ASSERT_TRUE(d.ok) << what << ": " << d.error.reason;
  EXPECT_TRUE(d.msg.update.treat_as_withdraw) << what;
  EXPECT_EQ(d.msg.update.nlri.size(), 1u) << what;
}

Bytes With(Bytes extra) {
  Bytes a = BaseAttrs();
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(Rfc7606Test, TreatAsWithdrawCases) {
  ExpectTreatAsWithdraw({0x40, 1, 1, 7, 0x40, 2, 0, 0x40, 3, 4, 198, 18, 0, 1}, "bad ORIGIN");
  ExpectTreatAsWithdraw({0x40, 1, 2, 0, 0, 0x40, 2, 0, 0x40, 3, 4, 198, 18, 0, 1},
                        "ORIGIN length 2");
  ExpectTreatAsWithdraw({0x40, 1, 1, 0, 0x40, 2, 3, 2, 5, 0, 0x40, 3, 4, 198, 18, 0, 1},
                        "AS_PATH segment overrun");
  ExpectTreatAsWithdraw({0x40, 1, 1, 0, 0x40, 2, 2, 9, 0, 0x40, 3, 4, 198, 18, 0, 1},
                        "AS_PATH bad segment type");
  ExpectTreatAsWithdraw({0x40, 1, 1, 0, 0x40, 2, 2, 2, 0, 0x40, 3, 4, 198, 18, 0, 1},
                        "AS_PATH empty segment");
  ExpectTreatAsWithdraw({0x40, 1, 1, 0, 0x40, 2, 0, 0x40, 3, 3, 198, 18, 0}, "NEXT_HOP len 3");
  ExpectTreatAsWithdraw({0x40, 1, 1, 0, 0x40, 2, 0, 0x40, 3, 4, 0, 0, 0, 0}, "NEXT_HOP 0.0.0.0");
  ExpectTreatAsWithdraw(With({0x80, 4, 3, 0, 0, 1}), "MED len 3");
  ExpectTreatAsWithdraw(With({0xc0, 16, 7, 3, 11, 0, 0, 0, 0, 1}), "ext communities len 7");
  ExpectTreatAsWithdraw(With({0xc0, 32, 11, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 3}), "large len 11");
  ExpectTreatAsWithdraw({0x80, 1, 1, 0, 0x40, 2, 0, 0x40, 3, 4, 198, 18, 0, 1},
                        "ORIGIN with optional flag");
  ExpectTreatAsWithdraw({0x40, 2, 0, 0x40, 3, 4, 198, 18, 0, 1}, "missing ORIGIN");
  ExpectTreatAsWithdraw({0x40, 1, 1, 0, 0x40, 3, 4, 198, 18, 0, 1}, "missing AS_PATH");
  ExpectTreatAsWithdraw({0x40, 1, 1, 0, 0x40, 2, 0}, "missing NEXT_HOP");
  ExpectTreatAsWithdraw(With({0xc0, 16, 200, 0}), "attribute overruns section");
  ExpectTreatAsWithdraw(With({0xc0}), "truncated attribute header");
}

TEST(Rfc7606Test, AggregatorLengthsAndAs4AttributesOnFourOctetSessions) {
  // Decode() uses a 4-octet-AS session. RFC 7606 §7.7: AGGREGATOR is 8 bytes
  // there, else discarded; RFC 6793 §3: a NEW speaker discards AS4_PATH and
  // AS4_AGGREGATOR. Found by the exabgp interop test.
  Decoded d = Decode(RawUpdate({}, With({0xc0, 7, 2, 0, 1}), kNlri));
  ASSERT_TRUE(d.ok);
  EXPECT_FALSE(d.msg.update.treat_as_withdraw);
  EXPECT_EQ(d.msg.update.discarded_attributes, std::vector<uint8_t>{attr::kAggregator});
  EXPECT_TRUE(d.msg.update.attrs.unknown.empty());
  d = Decode(RawUpdate({}, With({0xc0, 18, 8, 0, 0, 0, 1, 10, 0, 0, 1}), kNlri));
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.msg.update.discarded_attributes, std::vector<uint8_t>{attr::kAs4Aggregator});
  d = Decode(RawUpdate({}, With({0xc0, 7, 8, 0, 0, 0xfd, 0xe8, 10, 0, 0, 1}), kNlri));
  ASSERT_TRUE(d.ok);
  EXPECT_TRUE(d.msg.update.discarded_attributes.empty());
  ASSERT_EQ(d.msg.update.attrs.unknown.size(), 1u);  // a well-formed AGGREGATOR is kept
}

TEST(Rfc7606Test, AttributeDiscardCases) {
  Decoded d = Decode(RawUpdate({}, With({0x80, 26, 3, 1, 0, 5}), kNlri));
  ASSERT_TRUE(d.ok);
  EXPECT_FALSE(d.msg.update.treat_as_withdraw);
  EXPECT_FALSE(d.msg.update.attrs.aigp);
  EXPECT_EQ(d.msg.update.discarded_attributes, std::vector<uint8_t>{attr::kAigp});
  d = Decode(RawUpdate({}, With({0x40, 6, 1, 0}), kNlri));
  EXPECT_EQ(d.msg.update.discarded_attributes, std::vector<uint8_t>{attr::kAtomicAggregate});
  // Duplicate (non-MP) attribute: keep the first.
  d = Decode(RawUpdate({}, With({0x40, 1, 1, 2}), kNlri));
  ASSERT_TRUE(d.ok);
  EXPECT_EQ(d.msg.update.attrs.origin, 0);
  EXPECT_FALSE(d.msg.update.treat_as_withdraw);
}

TEST(Rfc7606Test, UnknownOptionalTransitiveIsKeptNonTransitiveDropped) {
  Decoded d = Decode(RawUpdate({}, With({0xc0, 99, 2, 7, 7, 0x80, 98, 1, 5}), kNlri));
  ASSERT_TRUE(d.ok);
  ASSERT_EQ(d.msg.update.attrs.unknown.size(), 1u);
  EXPECT_EQ(d.msg.update.attrs.unknown[0].type, 99);
  // Re-encoding sets Partial.
  Bytes re = EncodePathAttributes(d.msg.update.attrs, {});
  const Bytes needle = {0xe0, 99, 2, 7, 7};
  auto it = std::search(re.begin(), re.end(), needle.begin(), needle.end());
  EXPECT_NE(it, re.end());
}

void ExpectReset(const Bytes& msg, uint8_t code, uint8_t subcode, const char* what) {
  Decoded d = Decode(msg);
  EXPECT_FALSE(d.ok) << what;
  EXPECT_EQ(d.error.code, code) << what;
  EXPECT_EQ(d.error.subcode, subcode) << what;
}

TEST(Rfc7606Test, SessionResetCases) {
  ExpectReset(RawUpdate({}, With({0x40, 77, 1, 0}), kNlri), err::kUpdate,
              err::kUpdateUnrecognizedWellKnown, "unknown well-known");
  ExpectReset(RawUpdate({}, BaseAttrs(), {33, 10, 1, 2, 3, 4}), err::kUpdate,
              err::kUpdateInvalidNetwork, "NLRI length 33");
  ExpectReset(RawUpdate({24, 10}, {}, {}), err::kUpdate, err::kUpdateInvalidNetwork,
              "truncated withdrawn prefix");
  ExpectReset(RawUpdate({}, With({0x80, 14, 2, 0, 2}), kNlri), err::kUpdate,
              err::kUpdateOptionalAttr, "truncated MP_REACH");
  Bytes mp_unreach = {0x80, 15, 3, 0, 2, 1};
  Bytes dup = mp_unreach;
  dup.insert(dup.end(), mp_unreach.begin(), mp_unreach.end());
  ExpectReset(RawUpdate({}, dup, {}), err::kUpdate, err::kUpdateMalformedAttrList,
              "duplicate MP_UNREACH");
  // Withdrawn length larger than the message.
  Bytes b = RawUpdate({}, {}, {});
  b[19] = 0;
  b[20] = 50;
  ExpectReset(b, err::kUpdate, err::kUpdateMalformedAttrList, "withdrawn overrun");
  b = RawUpdate({}, {}, {});
  b[21] = 0;
  b[22] = 50;
  ExpectReset(b, err::kUpdate, err::kUpdateMalformedAttrList, "attributes overrun");
}

TEST(Rfc7606Test, MalformedNhcIsDiscardedNotWithdrawn) {
  Decoded d = Decode(RawUpdate({}, With({0xc0, attr::kNhc, 3, 0, 1, 4}), kNlri));
  ASSERT_TRUE(d.ok);
  EXPECT_FALSE(d.msg.update.treat_as_withdraw);
  EXPECT_FALSE(d.msg.update.attrs.nnhn);
}

// Replays the committed fuzz corpus through the decoder (g++ build).
TEST(FuzzCorpusReplay, DecoderSurvivesEveryInput) {
  std::filesystem::path dir = LOOM_BGP_CORPUS_DIR;
  ASSERT_TRUE(std::filesystem::exists(dir)) << dir;
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream f(e.path(), std::ios::binary);
    Bytes data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    for (bool four : {true, false}) {
      Message m;
      DecodeError error;
      CodecOptions o{four, true};
      if (DecodeMessage(data, o, &m, &error) && m.type == MessageType::kUpdate) {
        EncodeUpdate(m.update, o);
      }
    }
    ++n;
  }
  EXPECT_GT(n, 5);
}

}  // namespace
}  // namespace loom::southbound::bgp
