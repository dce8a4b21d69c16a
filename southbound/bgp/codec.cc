#include "southbound/bgp/codec.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace loom::southbound::bgp {
namespace {

// Bounds-checked big-endian reader over a byte span.
class Reader {
 public:
  explicit Reader(ByteView data) : data_(data) {}
  size_t left() const { return data_.size() - pos_; }
  size_t pos() const { return pos_; }
  bool U8(uint8_t* v) {
    if (left() < 1) return false;
    *v = data_[pos_++];
    return true;
  }
  bool U16(uint16_t* v) {
    if (left() < 2) return false;
    *v = static_cast<uint16_t>(data_[pos_] << 8 | data_[pos_ + 1]);
    pos_ += 2;
    return true;
  }
  bool U32(uint32_t* v) {
    if (left() < 4) return false;
    *v = static_cast<uint32_t>(data_[pos_]) << 24 | static_cast<uint32_t>(data_[pos_ + 1]) << 16 |
         static_cast<uint32_t>(data_[pos_ + 2]) << 8 | data_[pos_ + 3];
    pos_ += 4;
    return true;
  }
  bool U64(uint64_t* v) {
    uint32_t hi = 0, lo = 0;
    if (left() < 8 || !U32(&hi) || !U32(&lo)) return false;
    *v = static_cast<uint64_t>(hi) << 32 | lo;
    return true;
  }
  bool Take(size_t n, ByteView* out) {
    if (left() < n) return false;
    *out = data_.subspan(pos_, n);
    pos_ += n;
    return true;
  }

 private:
  ByteView data_;
  size_t pos_ = 0;
};

void Put8(Bytes* b, uint8_t v) { b->push_back(v); }
void Put16(Bytes* b, uint16_t v) {
  b->push_back(static_cast<uint8_t>(v >> 8));
  b->push_back(static_cast<uint8_t>(v));
}
void Put32(Bytes* b, uint32_t v) {
  Put16(b, static_cast<uint16_t>(v >> 16));
  Put16(b, static_cast<uint16_t>(v));
}
void Put64(Bytes* b, uint64_t v) {
  Put32(b, static_cast<uint32_t>(v >> 32));
  Put32(b, static_cast<uint32_t>(v));
}
void Set16(Bytes* b, size_t at, uint16_t v) {
  (*b)[at] = static_cast<uint8_t>(v >> 8);
  (*b)[at + 1] = static_cast<uint8_t>(v);
}

// Starts a message: marker, placeholder length, type. FinishMessage fills
// the length.
Bytes StartMessage(MessageType type) {
  Bytes b(16, 0xff);
  Put16(&b, 0);
  Put8(&b, static_cast<uint8_t>(type));
  return b;
}
void FinishMessage(Bytes* b) { Set16(b, 16, static_cast<uint16_t>(b->size())); }

size_t MinLength(MessageType t) {
  switch (t) {
    case MessageType::kOpen:
      return 29;
    case MessageType::kUpdate:
      return 23;
    case MessageType::kNotification:
      return 21;
    case MessageType::kKeepalive:
      return 19;
    case MessageType::kRouteRefresh:
      return 23;
  }
  return 19;
}

DecodeError MakeError(uint8_t code, uint8_t subcode, std::string reason, Bytes data = {}) {
  DecodeError e;
  e.code = code;
  e.subcode = subcode;
  e.reason = std::move(reason);
  e.data = std::move(data);
  return e;
}

// Reads one prefix of family `afi`. Returns false on a syntax error.
bool ReadPrefix(Reader* r, Afi afi, Prefix* p) {
  uint8_t len = 0;
  if (!r->U8(&len)) return false;
  size_t max_bits = afi == Afi::kIpv4 ? 32 : 128;
  if (len > max_bits) return false;
  size_t nbytes = (len + 7) / 8;
  ByteView bytes;
  if (!r->Take(nbytes, &bytes)) return false;
  p->afi = afi;
  p->length = len;
  p->addr.fill(0);
  std::copy(bytes.begin(), bytes.end(), p->addr.begin());
  if (len % 8 != 0 && nbytes > 0) {
    p->addr[nbytes - 1] &= static_cast<uint8_t>(0xff << (8 - len % 8));
  }
  return true;
}

bool ReadPrefixes(ByteView data, Afi afi, std::vector<Prefix>* out) {
  Reader r(data);
  while (r.left() > 0) {
    Prefix p;
    if (!ReadPrefix(&r, afi, &p)) return false;
    out->push_back(p);
  }
  return true;
}

// ---- OPEN ----

bool DecodeCapabilities(ByteView data, Capabilities* caps, DecodeError* error) {
  Reader r(data);
  while (r.left() > 0) {
    uint8_t code = 0, len = 0;
    ByteView v;
    if (!r.U8(&code) || !r.U8(&len) || !r.Take(len, &v)) {
      *error = MakeError(err::kOpen, err::kOpenUnspecific, "truncated capability");
      return false;
    }
    Reader cv(v);
    switch (code) {
      case 1: {
        uint16_t afi = 0;
        uint8_t res = 0, safi = 0;
        if (len != 4 || !cv.U16(&afi) || !cv.U8(&res) || !cv.U8(&safi)) {
          *error = MakeError(err::kOpen, err::kOpenUnspecific, "bad multiprotocol capability");
          return false;
        }
        if (afi == 1 && safi == 1) caps->mp_ipv4_unicast = true;
        if (afi == 2 && safi == 1) caps->mp_ipv6_unicast = true;
        break;
      }
      case 2:
        caps->route_refresh = true;
        break;
      case 70:
        caps->enhanced_route_refresh = true;
        break;
      case 65: {
        uint32_t asn = 0;
        if (len != 4 || !cv.U32(&asn)) {
          *error = MakeError(err::kOpen, err::kOpenUnspecific, "bad 4-octet AS capability");
          return false;
        }
        caps->four_octet_as = asn;
        break;
      }
      case 64: {
        uint16_t word = 0;
        if (len < 2 || (len - 2) % 4 != 0 || !cv.U16(&word)) {
          *error = MakeError(err::kOpen, err::kOpenUnspecific, "bad graceful restart capability");
          return false;
        }
        GracefulRestartCap gr;
        gr.restart_state = (word & 0x8000) != 0;
        gr.restart_time_s = word & 0x0fff;
        while (cv.left() >= 4) {
          uint16_t afi = 0;
          uint8_t safi = 0, flags = 0;
          cv.U16(&afi);
          cv.U8(&safi);
          cv.U8(&flags);
          if (afi != 1 && afi != 2) continue;
          gr.families.push_back({static_cast<Afi>(afi), safi, (flags & 0x80) != 0});
        }
        caps->graceful_restart = gr;
        break;
      }
      default:
        caps->unknown.push_back(code);
    }
  }
  return true;
}

bool DecodeOpen(ByteView body, OpenMessage* open, DecodeError* error) {
  Reader r(body);
  uint8_t opt_len = 0;
  if (!r.U8(&open->version) || !r.U16(&open->my_as_field) || !r.U16(&open->hold_time_s) ||
      !r.U32(&open->bgp_id) || !r.U8(&opt_len)) {
    *error = MakeError(err::kHeader, err::kHeaderBadLength, "short OPEN");
    return false;
  }
  if (open->version != 4) {
    *error = MakeError(err::kOpen, err::kOpenBadVersion, "unsupported version", {0, 4});
    return false;
  }
  if (opt_len != r.left()) {
    *error = MakeError(err::kOpen, err::kOpenUnspecific, "optional parameter length mismatch");
    return false;
  }
  while (r.left() > 0) {
    uint8_t type = 0, len = 0;
    ByteView v;
    if (!r.U8(&type) || !r.U8(&len) || !r.Take(len, &v)) {
      *error = MakeError(err::kOpen, err::kOpenUnspecific, "truncated optional parameter");
      return false;
    }
    if (type != 2) {
      *error =
          MakeError(err::kOpen, err::kOpenUnsupportedOptParam, "unsupported optional parameter");
      return false;
    }
    if (!DecodeCapabilities(v, &open->caps, error)) return false;
  }
  return true;
}

// ---- UPDATE attributes ----

// How RFC 7606 says to handle a malformed attribute of this type.
enum class ErrorAction { kTreatAsWithdraw, kAttributeDiscard, kSessionReset };

ErrorAction ActionFor(uint8_t type) {
  switch (type) {
    case attr::kAtomicAggregate:
    case attr::kAggregator:
    case attr::kAs4Aggregator:
    case attr::kAs4Path:
    case attr::kAigp:  // RFC 7311 §3.2 and RFC 7606 §7: discard a malformed AIGP.
    case attr::kNhc:
      return ErrorAction::kAttributeDiscard;
    case attr::kMpReach:
    case attr::kMpUnreach:
      return ErrorAction::kSessionReset;
    default:
      return ErrorAction::kTreatAsWithdraw;
  }
}

// Expected Optional/Transitive bits of recognized attributes.
std::optional<uint8_t> ExpectedFlags(uint8_t type) {
  switch (type) {
    case attr::kOrigin:
    case attr::kAsPath:
    case attr::kNextHop:
    case attr::kLocalPref:
    case attr::kAtomicAggregate:
      return kFlagTransitive;
    case attr::kMed:
    case attr::kMpReach:
    case attr::kMpUnreach:
    case attr::kAigp:
      return kFlagOptional;
    case attr::kAggregator:
    case attr::kCommunities:
    case attr::kExtCommunities:
    case attr::kLargeCommunities:
    case attr::kAs4Path:
    case attr::kAs4Aggregator:
    case attr::kNhc:
      return kFlagOptional | kFlagTransitive;
    default:
      return std::nullopt;
  }
}

bool DecodeAsPath(ByteView v, bool four_octet, std::vector<AsSegment>* out) {
  Reader r(v);
  size_t asn_size = four_octet ? 4 : 2;
  while (r.left() > 0) {
    uint8_t type = 0, count = 0;
    if (!r.U8(&type) || !r.U8(&count)) return false;
    if (type < 1 || type > 4 || count == 0) return false;
    if (r.left() < count * asn_size) return false;
    AsSegment seg;
    seg.type = static_cast<AsSegmentType>(type);
    for (int i = 0; i < count; ++i) {
      if (four_octet) {
        uint32_t a = 0;
        r.U32(&a);
        seg.asns.push_back(a);
      } else {
        uint16_t a = 0;
        r.U16(&a);
        seg.asns.push_back(a);
      }
    }
    out->push_back(std::move(seg));
  }
  return true;
}

bool DecodeNhc(ByteView v, NextNextHops* out) {
  Reader r(v);
  uint16_t afi = 0;
  uint8_t nh_len = 0;
  if (!r.U16(&afi) || !r.U8(&nh_len) || afi != 1 || nh_len != 4) return false;
  ByteView nh;
  if (!r.Take(4, &nh)) return false;
  std::copy(nh.begin(), nh.end(), out->next_hop.begin());
  bool found = false;
  while (r.left() > 0) {
    uint16_t code = 0, len = 0;
    ByteView cv;
    if (!r.U16(&code) || !r.U16(&len) || !r.Take(len, &cv)) return false;
    if (code != 2) continue;
    if (len < 4 || len % 4 != 0) return false;
    Reader c(cv);
    c.U32(&out->next_hop_bgp_id);
    out->next_next_hop_bgp_ids.clear();
    while (c.left() >= 4) {
      uint32_t id = 0;
      c.U32(&id);
      out->next_next_hop_bgp_ids.push_back(id);
    }
    found = true;
  }
  return found;
}

struct AttrContext {
  const CodecOptions* options;
  UpdateMessage* update;
  std::vector<Prefix> mp_reach;
  std::vector<Prefix> mp_unreach;
  bool saw_mp_reach = false;
  bool saw_mp_unreach = false;
  std::optional<Afi> mp_unreach_afi;
  std::optional<Afi> mp_reach_afi;
};

// Decodes one attribute value. Returns false when the value is malformed.
// MP_REACH/MP_UNREACH syntax errors set *reset instead.
bool DecodeAttribute(uint8_t flags, uint8_t type, ByteView v, AttrContext* ctx,
                     DecodeError* reset) {
  PathAttributes& a = ctx->update->attrs;
  Reader r(v);
  switch (type) {
    case attr::kOrigin: {
      uint8_t o = 0;
      if (v.size() != 1 || !r.U8(&o) || o > 2) return false;
      a.origin = o;
      return true;
    }
    case attr::kAsPath: {
      std::vector<AsSegment> segs;
      if (!DecodeAsPath(v, ctx->options->four_octet_as, &segs)) return false;
      a.has_as_path = true;
      a.as_path = std::move(segs);
      return true;
    }
    case attr::kNextHop: {
      if (v.size() != 4) return false;
      std::array<uint8_t, 4> nh;
      std::copy(v.begin(), v.end(), nh.begin());
      // RFC 4271 §6.3: 0.0.0.0, multicast and broadcast are invalid; RFC
      // 7606 §7.3 makes it treat-as-withdraw.
      if ((nh[0] == 0 && nh[1] == 0 && nh[2] == 0 && nh[3] == 0) || nh[0] >= 224) return false;
      a.next_hop = nh;
      return true;
    }
    case attr::kMed: {
      uint32_t m = 0;
      if (v.size() != 4 || !r.U32(&m)) return false;
      a.med = m;
      return true;
    }
    case attr::kLocalPref: {
      uint32_t lp = 0;
      if (v.size() != 4 || !r.U32(&lp)) return false;
      // RFC 7606 §7.5: ignore LOCAL_PREF from an external peer.
      if (!ctx->options->ebgp) a.local_pref = lp;
      return true;
    }
    case attr::kAtomicAggregate:
      if (!v.empty()) return false;
      a.atomic_aggregate = true;
      return true;
    case attr::kAggregator:
      // RFC 6793 §3 / RFC 7606 §7.7: AS (2 or 4 octets, per the session) + BGP ID.
      return v.size() == (ctx->options->four_octet_as ? 8u : 6u);
    case attr::kAs4Aggregator:
      // RFC 6793 §3: a NEW speaker (4-octet AS session) discards AS4_* attributes.
      return v.size() == 8 && !ctx->options->four_octet_as;
    case attr::kAs4Path: {
      std::vector<AsSegment> segs;
      return !ctx->options->four_octet_as && DecodeAsPath(v, /*four_octet=*/true, &segs);
    }
    case attr::kCommunities: {
      if (v.size() % 4 != 0) return false;
      while (r.left() > 0) {
        uint32_t c = 0;
        r.U32(&c);
        a.communities.push_back(c);
      }
      return true;
    }
    case attr::kExtCommunities: {
      if (v.size() % 8 != 0) return false;
      for (size_t i = 0; i + 8 <= v.size(); i += 8) {
        ExtCommunity c;
        std::copy(v.begin() + i, v.begin() + i + 8, c.bytes.begin());
        a.ext_communities.push_back(c);
      }
      return true;
    }
    case attr::kLargeCommunities: {
      if (v.empty() || v.size() % 12 != 0) return false;
      while (r.left() > 0) {
        LargeCommunity c;
        r.U32(&c.global_admin);
        r.U32(&c.local1);
        r.U32(&c.local2);
        a.large_communities.push_back(c);
      }
      return true;
    }
    case attr::kAigp: {
      // TLVs: type 1 (AIGP) length 11 value 8 bytes.
      std::optional<uint64_t> metric;
      while (r.left() > 0) {
        uint8_t t = 0;
        uint16_t len = 0;
        ByteView tv;
        if (!r.U8(&t) || !r.U16(&len) || len < 3 || !r.Take(len - 3, &tv)) return false;
        if (t == 1) {
          if (len != 11 || metric) return false;
          Reader m(tv);
          uint64_t val = 0;
          m.U64(&val);
          metric = val;
        }
      }
      if (!metric) return false;
      a.aigp = metric;
      return true;
    }
    case attr::kNhc: {
      NextNextHops n;
      if (!DecodeNhc(v, &n)) return false;
      a.nnhn = n;
      return true;
    }
    case attr::kMpReach: {
      uint16_t afi = 0;
      uint8_t safi = 0, nh_len = 0, reserved = 0;
      ByteView nh, nlri;
      if (!r.U16(&afi) || !r.U8(&safi) || !r.U8(&nh_len) || !r.Take(nh_len, &nh) ||
          !r.U8(&reserved)) {
        *reset = MakeError(err::kUpdate, err::kUpdateOptionalAttr, "malformed MP_REACH_NLRI");
        return false;
      }
      ctx->saw_mp_reach = true;
      if (safi != kSafiUnicast || (afi != 1 && afi != 2)) return true;  // Not negotiated: ignore.
      nlri = v.subspan(r.pos());
      if (afi == 2) {
        if (nh_len != 16 && nh_len != 32) {
          *reset =
              MakeError(err::kUpdate, err::kUpdateOptionalAttr, "bad MP_REACH next hop length");
          return false;
        }
        a.mp_next_hop.assign(nh.begin(), nh.end());
      } else if (nh_len == 4) {
        std::array<uint8_t, 4> n4;
        std::copy(nh.begin(), nh.end(), n4.begin());
        a.next_hop = n4;
      }
      ctx->mp_reach_afi = static_cast<Afi>(afi);
      if (!ReadPrefixes(nlri, static_cast<Afi>(afi), &ctx->mp_reach)) {
        *reset = MakeError(err::kUpdate, err::kUpdateOptionalAttr, "malformed MP_REACH NLRI");
        return false;
      }
      return true;
    }
    case attr::kMpUnreach: {
      uint16_t afi = 0;
      uint8_t safi = 0;
      if (!r.U16(&afi) || !r.U8(&safi)) {
        *reset = MakeError(err::kUpdate, err::kUpdateOptionalAttr, "malformed MP_UNREACH_NLRI");
        return false;
      }
      ctx->saw_mp_unreach = true;
      if (safi != kSafiUnicast || (afi != 1 && afi != 2)) return true;
      ctx->mp_unreach_afi = static_cast<Afi>(afi);
      if (!ReadPrefixes(v.subspan(3), static_cast<Afi>(afi), &ctx->mp_unreach)) {
        *reset = MakeError(err::kUpdate, err::kUpdateOptionalAttr, "malformed MP_UNREACH NLRI");
        return false;
      }
      return true;
    }
    default:
      break;
  }
  (void)flags;
  return true;
}

bool DecodeUpdate(ByteView body, const CodecOptions& options, UpdateMessage* u,
                  DecodeError* error) {
  Reader r(body);
  uint16_t wlen = 0;
  ByteView withdrawn, attrs;
  if (!r.U16(&wlen) || !r.Take(wlen, &withdrawn)) {
    *error = MakeError(err::kUpdate, err::kUpdateMalformedAttrList, "withdrawn length overrun");
    return false;
  }
  uint16_t alen = 0;
  if (!r.U16(&alen) || !r.Take(alen, &attrs)) {
    *error = MakeError(err::kUpdate, err::kUpdateMalformedAttrList, "attribute length overrun");
    return false;
  }
  ByteView nlri = body.subspan(r.pos());
  // RFC 7606 §5.3: NLRI syntax errors reset the session.
  if (!ReadPrefixes(withdrawn, Afi::kIpv4, &u->withdrawn)) {
    *error = MakeError(err::kUpdate, err::kUpdateInvalidNetwork, "malformed withdrawn routes");
    return false;
  }
  if (!ReadPrefixes(nlri, Afi::kIpv4, &u->nlri)) {
    *error = MakeError(err::kUpdate, err::kUpdateInvalidNetwork, "malformed NLRI");
    return false;
  }

  AttrContext ctx{&options, u, {}, {}, false, false, std::nullopt, std::nullopt};
  uint64_t seen[4] = {0, 0, 0, 0};
  auto flag_withdraw = [&](std::string why) {
    if (!u->treat_as_withdraw) u->error = std::move(why);
    u->treat_as_withdraw = true;
  };
  Reader ar(attrs);
  while (ar.left() > 0) {
    uint8_t flags = 0, type = 0;
    if (!ar.U8(&flags) || !ar.U8(&type)) {
      // RFC 7606 §4: attribute section too short for a header.
      flag_withdraw("truncated attribute header");
      break;
    }
    uint16_t len = 0;
    if (flags & kFlagExtendedLength) {
      if (!ar.U16(&len)) {
        flag_withdraw("truncated attribute length");
        break;
      }
    } else {
      uint8_t l8 = 0;
      if (!ar.U8(&l8)) {
        flag_withdraw("truncated attribute length");
        break;
      }
      len = l8;
    }
    ByteView v;
    if (!ar.Take(len, &v)) {
      // RFC 7606 §4: attribute overruns the section; NLRI was located via the
      // Total Path Attribute Length, so treat-as-withdraw.
      flag_withdraw("attribute length overruns attribute section");
      break;
    }
    uint64_t bit = uint64_t{1} << (type % 64);
    if (seen[type / 64] & bit) {
      // RFC 7606 §3.g: duplicate MP attributes reset; others: keep the first.
      if (type == attr::kMpReach || type == attr::kMpUnreach) {
        *error = MakeError(err::kUpdate, err::kUpdateMalformedAttrList, "duplicate MP attribute");
        return false;
      }
      u->discarded_attributes.push_back(type);
      continue;
    }
    seen[type / 64] |= bit;
    std::optional<uint8_t> expected = ExpectedFlags(type);
    if (!expected) {
      if (!(flags & kFlagOptional)) {
        Bytes data = {flags, type};
        *error = MakeError(err::kUpdate, err::kUpdateUnrecognizedWellKnown,
                           "unrecognized well-known attribute " + std::to_string(type), data);
        return false;
      }
      if (flags & kFlagTransitive) {
        u->attrs.unknown.push_back({flags, type, Bytes(v.begin(), v.end())});
      }
      continue;  // Unknown optional non-transitive: silently ignored.
    }
    bool malformed = false;
    if ((flags & (kFlagOptional | kFlagTransitive)) != *expected) {
      malformed = true;  // RFC 7606 §3.c.
    } else {
      DecodeError reset;
      reset.code = 0;
      if (!DecodeAttribute(flags, type, v, &ctx, &reset)) {
        if (reset.code != 0) {
          *error = reset;
          return false;
        }
        malformed = true;
      }
    }
    if (type == attr::kAs4Path || type == attr::kAggregator || type == attr::kAs4Aggregator) {
      if (!malformed) u->attrs.unknown.push_back({flags, type, Bytes(v.begin(), v.end())});
    }
    if (malformed) {
      switch (ActionFor(type)) {
        case ErrorAction::kSessionReset:
          *error = MakeError(err::kUpdate, err::kUpdateOptionalAttr,
                             "malformed attribute " + std::to_string(type));
          return false;
        case ErrorAction::kAttributeDiscard:
          u->discarded_attributes.push_back(type);
          break;
        case ErrorAction::kTreatAsWithdraw:
          flag_withdraw("malformed attribute " + std::to_string(type));
          break;
      }
    }
  }
  for (const Prefix& p : ctx.mp_reach) u->nlri.push_back(p);
  for (const Prefix& p : ctx.mp_unreach) u->withdrawn.push_back(p);

  bool has_reach = !u->nlri.empty();
  // End-of-RIB (RFC 4724 §2).
  if (body.size() == 4) {
    u->end_of_rib = Afi::kIpv4;
    return true;
  }
  if (ctx.saw_mp_unreach && ctx.mp_unreach_afi && ctx.mp_unreach.empty() && !has_reach &&
      u->withdrawn.empty() && alen > 0 && !ctx.saw_mp_reach) {
    u->end_of_rib = ctx.mp_unreach_afi;
  }
  if (has_reach && !u->treat_as_withdraw) {
    // RFC 7606 §3.d: missing well-known mandatory attributes.
    bool v4_nlri = std::any_of(u->nlri.begin(), u->nlri.end(),
                               [](const Prefix& p) { return p.afi == Afi::kIpv4; }) &&
                   !(ctx.mp_reach_afi == Afi::kIpv4);
    if (!u->attrs.origin) {
      flag_withdraw("missing ORIGIN");
    } else if (!u->attrs.has_as_path) {
      flag_withdraw("missing AS_PATH");
    } else if (v4_nlri && !u->attrs.next_hop) {
      flag_withdraw("missing NEXT_HOP");
    }
  }
  return true;
}

}  // namespace

const char* MessageTypeName(MessageType t) {
  switch (t) {
    case MessageType::kOpen:
      return "open";
    case MessageType::kUpdate:
      return "update";
    case MessageType::kNotification:
      return "notification";
    case MessageType::kKeepalive:
      return "keepalive";
    case MessageType::kRouteRefresh:
      return "route_refresh";
  }
  return "unknown";
}

std::optional<Prefix> Prefix::Parse(std::string_view text) {
  std::string s(text);
  int len = -1;
  if (auto slash = s.find('/'); slash != std::string::npos) {
    std::string l = s.substr(slash + 1);
    if (l.empty() || l.size() > 3 || !std::all_of(l.begin(), l.end(), ::isdigit)) {
      return std::nullopt;
    }
    len = std::stoi(l);
    s = s.substr(0, slash);
  }
  Prefix p;
  if (inet_pton(AF_INET, s.c_str(), p.addr.data()) == 1) {
    p.afi = Afi::kIpv4;
    if (len < 0) len = 32;
    if (len > 32) return std::nullopt;
  } else if (inet_pton(AF_INET6, s.c_str(), p.addr.data()) == 1) {
    p.afi = Afi::kIpv6;
    if (len < 0) len = 128;
    if (len > 128) return std::nullopt;
  } else {
    return std::nullopt;
  }
  p.length = static_cast<uint8_t>(len);
  for (int bit = len; bit < 128; ++bit)
    p.addr[bit / 8] &= static_cast<uint8_t>(~(0x80 >> (bit % 8)));
  return p;
}

std::string Prefix::ToString() const {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(afi == Afi::kIpv4 ? AF_INET : AF_INET6, addr.data(), buf, sizeof(buf));
  return std::string(buf) + "/" + std::to_string(length);
}

std::optional<std::array<uint8_t, 4>> ParseIpv4(std::string_view text) {
  std::array<uint8_t, 4> a;
  if (inet_pton(AF_INET, std::string(text).c_str(), a.data()) != 1) return std::nullopt;
  return a;
}

std::string Ipv4ToString(const std::array<uint8_t, 4>& a) {
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, a.data(), buf, sizeof(buf));
  return buf;
}

std::optional<uint32_t> ParseRouterId(std::string_view text) {
  auto a = ParseIpv4(text);
  if (!a) return std::nullopt;
  return static_cast<uint32_t>((*a)[0]) << 24 | static_cast<uint32_t>((*a)[1]) << 16 |
         static_cast<uint32_t>((*a)[2]) << 8 | (*a)[3];
}

std::string RouterIdToString(uint32_t id) {
  return Ipv4ToString({static_cast<uint8_t>(id >> 24), static_cast<uint8_t>(id >> 16),
                       static_cast<uint8_t>(id >> 8), static_cast<uint8_t>(id)});
}

ExtCommunity ExtCommunity::Color(uint32_t color, uint16_t flags) {
  ExtCommunity c;
  c.bytes = {0x03,
             0x0b,
             static_cast<uint8_t>(flags >> 8),
             static_cast<uint8_t>(flags),
             static_cast<uint8_t>(color >> 24),
             static_cast<uint8_t>(color >> 16),
             static_cast<uint8_t>(color >> 8),
             static_cast<uint8_t>(color)};
  return c;
}

uint32_t ExtCommunity::ColorValue() const {
  return static_cast<uint32_t>(bytes[4]) << 24 | static_cast<uint32_t>(bytes[5]) << 16 |
         static_cast<uint32_t>(bytes[6]) << 8 | bytes[7];
}

ExtCommunity ExtCommunity::LinkBandwidth(uint16_t asn, float bytes_per_sec) {
  uint32_t bits = 0;
  static_assert(sizeof(bits) == sizeof(bytes_per_sec));
  std::memcpy(&bits, &bytes_per_sec, sizeof(bits));
  ExtCommunity c;
  c.bytes = {0x40,
             0x04,
             static_cast<uint8_t>(asn >> 8),
             static_cast<uint8_t>(asn),
             static_cast<uint8_t>(bits >> 24),
             static_cast<uint8_t>(bits >> 16),
             static_cast<uint8_t>(bits >> 8),
             static_cast<uint8_t>(bits)};
  return c;
}

float ExtCommunity::LinkBandwidthValue() const {
  uint32_t bits = static_cast<uint32_t>(bytes[4]) << 24 | static_cast<uint32_t>(bytes[5]) << 16 |
                  static_cast<uint32_t>(bytes[6]) << 8 | bytes[7];
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint32_t PathAttributes::Color() const {
  for (const ExtCommunity& c : ext_communities) {
    if (c.IsColor()) return c.ColorValue();
  }
  return 0;
}

std::optional<float> PathAttributes::LinkBandwidth() const {
  for (const ExtCommunity& c : ext_communities) {
    if (c.IsLinkBandwidth()) return c.LinkBandwidthValue();
  }
  return std::nullopt;
}

HeaderStatus ParseHeader(ByteView buf, size_t* length, MessageType* type, DecodeError* error) {
  if (buf.size() < kHeaderSize) return HeaderStatus::kNeedMore;
  for (size_t i = 0; i < 16; ++i) {
    if (buf[i] != 0xff) {
      *error = MakeError(err::kHeader, err::kHeaderNotSynchronized, "bad marker");
      return HeaderStatus::kError;
    }
  }
  uint16_t len = static_cast<uint16_t>(buf[16] << 8 | buf[17]);
  uint8_t t = buf[18];
  Bytes len_data = {buf[16], buf[17]};
  if (len < kHeaderSize || len > kMaxMessageSize) {
    *error = MakeError(err::kHeader, err::kHeaderBadLength, "bad message length", len_data);
    return HeaderStatus::kError;
  }
  if (t < 1 || t > 5) {
    *error = MakeError(err::kHeader, err::kHeaderBadType, "bad message type", {t});
    return HeaderStatus::kError;
  }
  MessageType mt = static_cast<MessageType>(t);
  if (len < MinLength(mt) || (mt == MessageType::kKeepalive && len != 19) ||
      (mt == MessageType::kRouteRefresh && len != 23)) {
    *error = MakeError(err::kHeader, err::kHeaderBadLength, "bad length for type", len_data);
    return HeaderStatus::kError;
  }
  *length = len;
  *type = mt;
  return HeaderStatus::kOk;
}

bool DecodeMessage(ByteView msg, const CodecOptions& options, Message* out, DecodeError* error) {
  size_t len;
  MessageType type;
  HeaderStatus hs = ParseHeader(msg, &len, &type, error);
  if (hs == HeaderStatus::kError) return false;
  if (hs == HeaderStatus::kNeedMore || len != msg.size()) {
    Bytes data;
    if (msg.size() >= 18) data = {msg[16], msg[17]};
    *error = MakeError(err::kHeader, err::kHeaderBadLength, "truncated message", data);
    return false;
  }
  out->type = type;
  ByteView body = msg.subspan(kHeaderSize);
  switch (type) {
    case MessageType::kOpen:
      out->open = OpenMessage();
      return DecodeOpen(body, &out->open, error);
    case MessageType::kUpdate:
      out->update = UpdateMessage();
      return DecodeUpdate(body, options, &out->update, error);
    case MessageType::kNotification: {
      out->notification = NotificationMessage();
      out->notification.code = body[0];
      out->notification.subcode = body[1];
      out->notification.data.assign(body.begin() + 2, body.end());
      return true;
    }
    case MessageType::kKeepalive:
      return true;
    case MessageType::kRouteRefresh: {
      Reader r(body);
      uint16_t afi = 0;
      r.U16(&afi);
      r.U8(&out->route_refresh.subtype);
      r.U8(&out->route_refresh.safi);
      out->route_refresh.afi = static_cast<Afi>(afi);
      return true;
    }
  }
  return true;
}

void AppendPrefix(const Prefix& p, Bytes* out) {
  out->push_back(p.length);
  size_t n = (p.length + 7) / 8;
  out->insert(out->end(), p.addr.begin(), p.addr.begin() + n);
}

Bytes EncodeOpen(const OpenMessage& open) {
  Bytes b = StartMessage(MessageType::kOpen);
  Put8(&b, open.version);
  Put16(&b, open.my_as_field);
  Put16(&b, open.hold_time_s);
  Put32(&b, open.bgp_id);
  Bytes caps;
  auto cap = [&caps](uint8_t code, const Bytes& value) {
    Put8(&caps, code);
    Put8(&caps, static_cast<uint8_t>(value.size()));
    caps.insert(caps.end(), value.begin(), value.end());
  };
  const Capabilities& c = open.caps;
  if (c.mp_ipv4_unicast) cap(1, {0, 1, 0, 1});
  if (c.mp_ipv6_unicast) cap(1, {0, 2, 0, 1});
  if (c.route_refresh) cap(2, {});
  if (c.graceful_restart) {
    Bytes v;
    uint16_t word = (c.graceful_restart->restart_state ? 0x8000 : 0) |
                    (c.graceful_restart->restart_time_s & 0x0fff);
    Put16(&v, word);
    for (const auto& f : c.graceful_restart->families) {
      Put16(&v, static_cast<uint16_t>(f.afi));
      Put8(&v, f.safi);
      Put8(&v, f.forwarding_preserved ? 0x80 : 0);
    }
    cap(64, v);
  }
  if (c.four_octet_as) {
    Bytes v;
    Put32(&v, *c.four_octet_as);
    cap(65, v);
  }
  // One optional parameter holding all capabilities.
  Put8(&b, static_cast<uint8_t>(caps.size() + 2));
  Put8(&b, 2);
  Put8(&b, static_cast<uint8_t>(caps.size()));
  b.insert(b.end(), caps.begin(), caps.end());
  FinishMessage(&b);
  return b;
}

Bytes EncodeKeepalive() {
  Bytes b = StartMessage(MessageType::kKeepalive);
  FinishMessage(&b);
  return b;
}

Bytes EncodeNotification(const NotificationMessage& n) {
  Bytes b = StartMessage(MessageType::kNotification);
  Put8(&b, n.code);
  Put8(&b, n.subcode);
  size_t room = kMaxMessageSize - 21;
  b.insert(b.end(), n.data.begin(), n.data.begin() + std::min(room, n.data.size()));
  FinishMessage(&b);
  return b;
}

Bytes EncodeRouteRefresh(const RouteRefreshMessage& rr) {
  Bytes b = StartMessage(MessageType::kRouteRefresh);
  Put16(&b, static_cast<uint16_t>(rr.afi));
  Put8(&b, rr.subtype);
  Put8(&b, rr.safi);
  FinishMessage(&b);
  return b;
}

namespace {

void PutAttr(Bytes* b, uint8_t flags, uint8_t type, const Bytes& value) {
  if (value.size() > 255) flags |= kFlagExtendedLength;
  Put8(b, flags);
  Put8(b, type);
  if (flags & kFlagExtendedLength) {
    Put16(b, static_cast<uint16_t>(value.size()));
  } else {
    Put8(b, static_cast<uint8_t>(value.size()));
  }
  b->insert(b->end(), value.begin(), value.end());
}

Bytes EncodeAsPathValue(const std::vector<AsSegment>& path, bool four_octet) {
  Bytes v;
  for (const AsSegment& s : path) {
    // Segments hold at most 255 ASNs; split longer ones.
    for (size_t i = 0; i < s.asns.size() || (i == 0 && s.asns.empty()); i += 255) {
      size_t n = std::min<size_t>(255, s.asns.size() - i);
      if (n == 0) break;
      Put8(&v, static_cast<uint8_t>(s.type));
      Put8(&v, static_cast<uint8_t>(n));
      for (size_t k = i; k < i + n; ++k) {
        if (four_octet) {
          Put32(&v, s.asns[k]);
        } else {
          Put16(&v, s.asns[k] > 0xffff ? kAsTrans : static_cast<uint16_t>(s.asns[k]));
        }
      }
    }
  }
  return v;
}

}  // namespace

Bytes EncodePathAttributes(const PathAttributes& a, const CodecOptions& options,
                           const std::vector<Prefix>& reach_v6,
                           const std::vector<Prefix>& unreach_v6) {
  Bytes b;
  if (a.origin) PutAttr(&b, kFlagTransitive, attr::kOrigin, {*a.origin});
  if (a.has_as_path) {
    PutAttr(&b, kFlagTransitive, attr::kAsPath,
            EncodeAsPathValue(a.as_path, options.four_octet_as));
  }
  if (a.next_hop)
    PutAttr(&b, kFlagTransitive, attr::kNextHop, Bytes(a.next_hop->begin(), a.next_hop->end()));
  if (a.med) {
    Bytes v;
    Put32(&v, *a.med);
    PutAttr(&b, kFlagOptional, attr::kMed, v);
  }
  if (a.local_pref && !options.ebgp) {
    Bytes v;
    Put32(&v, *a.local_pref);
    PutAttr(&b, kFlagTransitive, attr::kLocalPref, v);
  }
  if (a.atomic_aggregate) PutAttr(&b, kFlagTransitive, attr::kAtomicAggregate, {});
  if (!a.communities.empty()) {
    Bytes v;
    for (uint32_t c : a.communities) Put32(&v, c);
    PutAttr(&b, kFlagOptional | kFlagTransitive, attr::kCommunities, v);
  }
  if (!reach_v6.empty()) {
    Bytes v;
    Put16(&v, 2);
    Put8(&v, kSafiUnicast);
    Bytes nh = a.mp_next_hop;
    if (nh.size() != 16 && nh.size() != 32) nh.assign(16, 0);
    Put8(&v, static_cast<uint8_t>(nh.size()));
    v.insert(v.end(), nh.begin(), nh.end());
    Put8(&v, 0);
    for (const Prefix& p : reach_v6) AppendPrefix(p, &v);
    PutAttr(&b, kFlagOptional, attr::kMpReach, v);
  }
  if (!unreach_v6.empty()) {
    Bytes v;
    Put16(&v, 2);
    Put8(&v, kSafiUnicast);
    for (const Prefix& p : unreach_v6) AppendPrefix(p, &v);
    PutAttr(&b, kFlagOptional, attr::kMpUnreach, v);
  }
  if (!a.ext_communities.empty()) {
    Bytes v;
    for (const ExtCommunity& c : a.ext_communities)
      v.insert(v.end(), c.bytes.begin(), c.bytes.end());
    PutAttr(&b, kFlagOptional | kFlagTransitive, attr::kExtCommunities, v);
  }
  if (a.aigp) {
    Bytes v;
    Put8(&v, 1);
    Put16(&v, 11);
    Put64(&v, *a.aigp);
    PutAttr(&b, kFlagOptional, attr::kAigp, v);
  }
  if (!a.large_communities.empty()) {
    Bytes v;
    for (const LargeCommunity& c : a.large_communities) {
      Put32(&v, c.global_admin);
      Put32(&v, c.local1);
      Put32(&v, c.local2);
    }
    PutAttr(&b, kFlagOptional | kFlagTransitive, attr::kLargeCommunities, v);
  }
  if (a.nnhn) {
    Bytes v;
    Put16(&v, 1);
    Put8(&v, 4);
    v.insert(v.end(), a.nnhn->next_hop.begin(), a.nnhn->next_hop.end());
    Put16(&v, 2);  // Characteristic code 2: NNHN.
    Put16(&v, static_cast<uint16_t>(4 + 4 * a.nnhn->next_next_hop_bgp_ids.size()));
    Put32(&v, a.nnhn->next_hop_bgp_id);
    for (uint32_t id : a.nnhn->next_next_hop_bgp_ids) Put32(&v, id);
    PutAttr(&b, kFlagOptional | kFlagTransitive, attr::kNhc, v);
  }
  if (!options.four_octet_as && a.has_as_path) {
    bool big = false;
    for (const auto& s : a.as_path) {
      for (uint32_t asn : s.asns) big |= asn > 0xffff;
    }
    if (big) {
      PutAttr(&b, kFlagOptional | kFlagTransitive, attr::kAs4Path,
              EncodeAsPathValue(a.as_path, true));
    }
  }
  for (const RawAttribute& r : a.unknown) {
    if (r.type == attr::kAs4Path && !options.four_octet_as && a.has_as_path) continue;
    uint8_t flags = r.flags & ~kFlagExtendedLength;
    // RFC 4271 §5: set Partial on unrecognized optional transitive attributes
    // passed along.
    if (!ExpectedFlags(r.type)) flags |= kFlagPartial;
    PutAttr(&b, flags, r.type, r.value);
  }
  return b;
}

std::vector<Bytes> EncodeUpdate(const UpdateMessage& u, const CodecOptions& options) {
  std::vector<Bytes> out;
  if (u.nlri.empty() && u.withdrawn.empty()) {
    out.push_back(EncodeEndOfRib(u.end_of_rib.value_or(Afi::kIpv4)));
    return out;
  }
  std::vector<Prefix> w4, w6, r4, r6;
  for (const Prefix& p : u.withdrawn) (p.afi == Afi::kIpv4 ? w4 : w6).push_back(p);
  for (const Prefix& p : u.nlri) (p.afi == Afi::kIpv4 ? r4 : r6).push_back(p);
  // Room for prefixes: 4096 - header - lengths - attributes, with slack.
  auto emit = [&](const std::vector<Prefix>& wd4, const std::vector<Prefix>& rc4,
                  const Bytes& attrs) {
    Bytes b = StartMessage(MessageType::kUpdate);
    Bytes wd;
    for (const Prefix& p : wd4) AppendPrefix(p, &wd);
    Put16(&b, static_cast<uint16_t>(wd.size()));
    b.insert(b.end(), wd.begin(), wd.end());
    Put16(&b, static_cast<uint16_t>(attrs.size()));
    b.insert(b.end(), attrs.begin(), attrs.end());
    for (const Prefix& p : rc4) AppendPrefix(p, &b);
    FinishMessage(&b);
    out.push_back(std::move(b));
  };
  // Chunks sized so every message fits: an IPv6 prefix takes at most 17 bytes.
  Bytes base_attrs = EncodePathAttributes(u.attrs, options);
  size_t room = kMaxMessageSize - kHeaderSize - 4 - base_attrs.size() - 64;
  size_t per_msg = std::max<size_t>(1, room / 17);
  size_t wd_per_msg = (kMaxMessageSize - kHeaderSize - 4 - 64) / 17;
  for (size_t i = 0; i < w4.size(); i += wd_per_msg) {
    std::vector<Prefix> chunk(w4.begin() + i, w4.begin() + std::min(w4.size(), i + wd_per_msg));
    emit(chunk, {}, {});
  }
  for (size_t i = 0; i < w6.size(); i += wd_per_msg) {
    std::vector<Prefix> chunk(w6.begin() + i, w6.begin() + std::min(w6.size(), i + wd_per_msg));
    emit({}, {}, EncodePathAttributes(PathAttributes(), options, {}, chunk));
  }
  for (size_t i = 0; i < r4.size(); i += per_msg) {
    std::vector<Prefix> chunk(r4.begin() + i, r4.begin() + std::min(r4.size(), i + per_msg));
    emit({}, chunk, base_attrs);
  }
  for (size_t i = 0; i < r6.size(); i += per_msg) {
    std::vector<Prefix> chunk(r6.begin() + i, r6.begin() + std::min(r6.size(), i + per_msg));
    emit({}, {}, EncodePathAttributes(u.attrs, options, chunk));
  }
  return out;
}

Bytes EncodeEndOfRib(Afi afi) {
  Bytes b = StartMessage(MessageType::kUpdate);
  Put16(&b, 0);
  if (afi == Afi::kIpv4) {
    Put16(&b, 0);
  } else {
    Bytes attrs;
    PutAttr(&attrs, kFlagOptional, attr::kMpUnreach, {0, 2, kSafiUnicast});
    Put16(&b, static_cast<uint16_t>(attrs.size()));
    b.insert(b.end(), attrs.begin(), attrs.end());
  }
  FinishMessage(&b);
  return b;
}

}  // namespace loom::southbound::bgp
