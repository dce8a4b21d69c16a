// BGP-4 message codec: pure encode/decode of OPEN, UPDATE, NOTIFICATION,
// KEEPALIVE and ROUTE-REFRESH (RFC 4271, 4760, 5492, 6793, 4360, 8092, 7311,
// 9012 Color, draft-ietf-idr-link-bandwidth, NHC/NNHN), with RFC 7606 error
// handling decisions (session reset vs treat-as-withdraw vs attribute
// discard) made here so the session code only acts on them.
//
// No I/O, no clock, no threads: every function is safe to call from any
// thread. Every decode path bounds-checks; malformed input yields a
// DecodeError (session reset) or a flagged UpdateMessage (treat-as-withdraw),
// never a crash.
#ifndef LOOM_SOUTHBOUND_BGP_CODEC_H_
#define LOOM_SOUTHBOUND_BGP_CODEC_H_

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom::southbound::bgp {

using Bytes = std::vector<uint8_t>;
using ByteView = std::span<const uint8_t>;

constexpr size_t kHeaderSize = 19;
constexpr size_t kMaxMessageSize = 4096;
constexpr uint16_t kAsTrans = 23456;

enum class MessageType : uint8_t {
  kOpen = 1,
  kUpdate = 2,
  kNotification = 3,
  kKeepalive = 4,
  kRouteRefresh = 5,
};
const char* MessageTypeName(MessageType t);

enum class Afi : uint16_t { kIpv4 = 1, kIpv6 = 2 };
constexpr uint8_t kSafiUnicast = 1;

// Path attribute type codes.
namespace attr {
constexpr uint8_t kOrigin = 1;
constexpr uint8_t kAsPath = 2;
constexpr uint8_t kNextHop = 3;
constexpr uint8_t kMed = 4;
constexpr uint8_t kLocalPref = 5;
constexpr uint8_t kAtomicAggregate = 6;
constexpr uint8_t kAggregator = 7;
constexpr uint8_t kCommunities = 8;
constexpr uint8_t kMpReach = 14;
constexpr uint8_t kMpUnreach = 15;
constexpr uint8_t kExtCommunities = 16;
constexpr uint8_t kAs4Path = 17;
constexpr uint8_t kAs4Aggregator = 18;
constexpr uint8_t kAigp = 26;
constexpr uint8_t kLargeCommunities = 32;
// NHC (BGP Next Hop Dependent Characteristics), carrying NNHN.
// UNVERIFIED: 39 is the value FRR uses; the IANA assignment was not checked.
constexpr uint8_t kNhc = 39;
}  // namespace attr

// Attribute flag bits.
constexpr uint8_t kFlagOptional = 0x80;
constexpr uint8_t kFlagTransitive = 0x40;
constexpr uint8_t kFlagPartial = 0x20;
constexpr uint8_t kFlagExtendedLength = 0x10;

// NOTIFICATION error codes and the subcodes Loom sends.
namespace err {
constexpr uint8_t kHeader = 1;
constexpr uint8_t kHeaderNotSynchronized = 1;
constexpr uint8_t kHeaderBadLength = 2;
constexpr uint8_t kHeaderBadType = 3;
constexpr uint8_t kOpen = 2;
constexpr uint8_t kOpenUnspecific = 0;
constexpr uint8_t kOpenBadVersion = 1;
constexpr uint8_t kOpenBadPeerAs = 2;
constexpr uint8_t kOpenBadBgpId = 3;
constexpr uint8_t kOpenUnsupportedOptParam = 4;
constexpr uint8_t kOpenBadHoldTime = 6;
constexpr uint8_t kOpenUnsupportedCapability = 7;
constexpr uint8_t kUpdate = 3;
constexpr uint8_t kUpdateMalformedAttrList = 1;
constexpr uint8_t kUpdateUnrecognizedWellKnown = 2;
constexpr uint8_t kUpdateMissingWellKnown = 3;
constexpr uint8_t kUpdateAttrFlags = 4;
constexpr uint8_t kUpdateAttrLength = 5;
constexpr uint8_t kUpdateInvalidOrigin = 6;
constexpr uint8_t kUpdateInvalidNextHop = 8;
constexpr uint8_t kUpdateOptionalAttr = 9;
constexpr uint8_t kUpdateInvalidNetwork = 10;
constexpr uint8_t kUpdateMalformedAsPath = 11;
constexpr uint8_t kHoldTimerExpired = 4;
constexpr uint8_t kFsm = 5;
constexpr uint8_t kCease = 6;
// RFC 4486 Cease subcodes.
constexpr uint8_t kCeaseMaxPrefixes = 1;  // Data: AFI (2), SAFI (1), limit (4).
constexpr uint8_t kCeaseAdminShutdown = 2;
constexpr uint8_t kCeasePeerDeconfigured = 3;
constexpr uint8_t kCeaseAdminReset = 4;
constexpr uint8_t kCeaseConnectionRejected = 5;
constexpr uint8_t kCeaseCollision = 7;
}  // namespace err

// An IPv4 or IPv6 prefix. Host bits beyond `length` are zero.
struct Prefix {
  Afi afi = Afi::kIpv4;
  uint8_t length = 0;
  std::array<uint8_t, 16> addr{};

  // "198.18.1.7/32", "2001:db8::/64"; a bare address means a host prefix.
  static std::optional<Prefix> Parse(std::string_view text);
  std::string ToString() const;
  auto operator<=>(const Prefix&) const = default;
  bool operator==(const Prefix&) const = default;
};

// Parses a dotted IPv4 address into network-order bytes.
std::optional<std::array<uint8_t, 4>> ParseIpv4(std::string_view text);
std::string Ipv4ToString(const std::array<uint8_t, 4>& a);
// BGP identifiers are handled as host-order uint32 ("1.2.3.4" -> 0x01020304).
std::optional<uint32_t> ParseRouterId(std::string_view text);
std::string RouterIdToString(uint32_t id);

// ---- OPEN ----

struct GracefulRestartCap {
  bool restart_state = false;   // R bit: the sender has restarted.
  uint16_t restart_time_s = 0;  // 12 bits.
  struct Family {
    Afi afi = Afi::kIpv4;
    uint8_t safi = kSafiUnicast;
    bool forwarding_preserved = false;  // F bit.
  };
  std::vector<Family> families;
};

struct Capabilities {
  std::optional<uint32_t> four_octet_as;               // Capability 65.
  bool mp_ipv4_unicast = false;                        // Capability 1, AFI 1 SAFI 1.
  bool mp_ipv6_unicast = false;                        // Capability 1, AFI 2 SAFI 1.
  bool route_refresh = false;                          // Capability 2.
  bool enhanced_route_refresh = false;                 // Capability 70 (parsed only).
  std::optional<GracefulRestartCap> graceful_restart;  // Capability 64.
  std::vector<uint8_t> unknown;                        // Other codes seen.
};

struct OpenMessage {
  uint8_t version = 4;
  uint16_t my_as_field = 0;  // AS_TRANS when the real ASN is > 65535.
  uint16_t hold_time_s = 90;
  uint32_t bgp_id = 0;
  Capabilities caps;
  // The speaker's real ASN: capability 65 when present, else my_as_field.
  uint32_t Asn() const { return caps.four_octet_as.value_or(my_as_field); }
};

// ---- UPDATE ----

enum class AsSegmentType : uint8_t { kSet = 1, kSequence = 2, kConfedSequence = 3, kConfedSet = 4 };
struct AsSegment {
  AsSegmentType type = AsSegmentType::kSequence;
  std::vector<uint32_t> asns;
  bool operator==(const AsSegment&) const = default;
};

// One 8-byte extended community (RFC 4360), raw.
struct ExtCommunity {
  std::array<uint8_t, 8> bytes{};
  bool operator==(const ExtCommunity&) const = default;
  auto operator<=>(const ExtCommunity&) const = default;

  // Color (RFC 9012 §4.3): 0x03 0x0b, flags (2), color (4).
  static ExtCommunity Color(uint32_t color, uint16_t flags = 0);
  bool IsColor() const { return bytes[0] == 0x03 && bytes[1] == 0x0b; }
  uint32_t ColorValue() const;
  // Link bandwidth (draft-ietf-idr-link-bandwidth): 0x40 0x04, AS (2), IEEE
  // float bytes per second (4).
  static ExtCommunity LinkBandwidth(uint16_t asn, float bytes_per_sec);
  bool IsLinkBandwidth() const { return (bytes[0] & 0xbf) == 0x00 && bytes[1] == 0x04; }
  float LinkBandwidthValue() const;
};

struct LargeCommunity {
  uint32_t global_admin = 0;
  uint32_t local1 = 0;
  uint32_t local2 = 0;
  bool operator==(const LargeCommunity&) const = default;
};

// NNHN: NHC characteristic code 2 (draft-ietf-idr-next-next-hop-nodes).
struct NextNextHops {
  std::array<uint8_t, 4> next_hop{};  // NHC network address (IPv4).
  uint32_t next_hop_bgp_id = 0;
  std::vector<uint32_t> next_next_hop_bgp_ids;  // Ascending.
  bool operator==(const NextNextHops&) const = default;
};

// An attribute Loom does not interpret, kept verbatim.
struct RawAttribute {
  uint8_t flags = 0;
  uint8_t type = 0;
  Bytes value;
  bool operator==(const RawAttribute&) const = default;
};

struct PathAttributes {
  std::optional<uint8_t> origin;  // 0 IGP, 1 EGP, 2 INCOMPLETE.
  bool has_as_path = false;
  std::vector<AsSegment> as_path;
  std::optional<std::array<uint8_t, 4>> next_hop;  // IPv4 NEXT_HOP.
  Bytes mp_next_hop;                               // IPv6 next hop from MP_REACH (16 or 32 bytes).
  std::optional<uint32_t> med;
  std::optional<uint32_t> local_pref;
  bool atomic_aggregate = false;
  std::vector<uint32_t> communities;
  std::vector<ExtCommunity> ext_communities;
  std::vector<LargeCommunity> large_communities;
  std::optional<uint64_t> aigp;
  std::optional<NextNextHops> nnhn;
  // Unrecognized optional transitive attributes (and AS4_PATH, AGGREGATOR
  // and friends Loom does not interpret), propagated with Partial set.
  std::vector<RawAttribute> unknown;

  // First Color community's value, or 0 when uncolored.
  uint32_t Color() const;
  // First link-bandwidth value in bytes/s, or nullopt.
  std::optional<float> LinkBandwidth() const;
  bool operator==(const PathAttributes&) const = default;
};

struct UpdateMessage {
  std::vector<Prefix> withdrawn;  // IPv4 withdrawn + MP_UNREACH prefixes.
  std::vector<Prefix> nlri;       // IPv4 NLRI + MP_REACH prefixes.
  PathAttributes attrs;
  // End-of-RIB marker (RFC 4724): set by the decoder, honoured by the
  // encoder when nlri and withdrawn are empty.
  std::optional<Afi> end_of_rib;

  // Decode results (RFC 7606). When treat_as_withdraw is set, every prefix
  // in nlri must be handled as withdrawn.
  bool treat_as_withdraw = false;
  std::vector<uint8_t> discarded_attributes;  // Attribute-discard types.
  std::string error;                          // Why, for logs and counters.
};

struct NotificationMessage {
  uint8_t code = 0;
  uint8_t subcode = 0;
  Bytes data;
};

struct RouteRefreshMessage {
  Afi afi = Afi::kIpv4;
  uint8_t subtype = 0;
  uint8_t safi = kSafiUnicast;
};

struct Message {
  MessageType type = MessageType::kKeepalive;
  OpenMessage open;
  UpdateMessage update;
  NotificationMessage notification;
  RouteRefreshMessage route_refresh;
};

// A decode failure that resets the session: the NOTIFICATION to send.
struct DecodeError {
  uint8_t code = 0;
  uint8_t subcode = 0;
  Bytes data;
  std::string reason;
};

struct CodecOptions {
  // Both sides advertised capability 65: AS_PATH carries 4-byte ASNs.
  bool four_octet_as = true;
  // The session is eBGP (LOCAL_PREF from an eBGP peer is discarded).
  bool ebgp = true;
};

// ---- Framing ----

enum class HeaderStatus { kNeedMore, kOk, kError };
// Checks the 19-byte header at the front of `buf`: marker, length (19..4096
// and per-type minimum), type. On kOk sets *length (whole message).
HeaderStatus ParseHeader(ByteView buf, size_t* length, MessageType* type, DecodeError* error);

// Decodes one whole message (header included). Returns false with *error set
// when the session must be reset; UPDATE attribute errors that RFC 7606 maps
// to treat-as-withdraw or attribute-discard return true and flag the update.
bool DecodeMessage(ByteView msg, const CodecOptions& options, Message* out, DecodeError* error);

// ---- Encoding ----

Bytes EncodeOpen(const OpenMessage& open);
Bytes EncodeKeepalive();
Bytes EncodeNotification(const NotificationMessage& n);
Bytes EncodeRouteRefresh(const RouteRefreshMessage& rr);
// Encodes the path attribute block (no NLRI). IPv6 prefixes in `reach` go
// into MP_REACH_NLRI; `unreach_v6` into MP_UNREACH_NLRI.
Bytes EncodePathAttributes(const PathAttributes& attrs, const CodecOptions& options,
                           const std::vector<Prefix>& reach_v6 = {},
                           const std::vector<Prefix>& unreach_v6 = {});
// Encodes `update` as one message, or several when it does not fit in 4096
// bytes (prefixes are split across messages carrying the same attributes).
std::vector<Bytes> EncodeUpdate(const UpdateMessage& update, const CodecOptions& options);
Bytes EncodeEndOfRib(Afi afi);

// Appends a prefix in NLRI form (length byte + ceil(len/8) bytes).
void AppendPrefix(const Prefix& p, Bytes* out);

}  // namespace loom::southbound::bgp

#endif  // LOOM_SOUTHBOUND_BGP_CODEC_H_
