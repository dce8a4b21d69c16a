// BGP-DPF (draft-wang-idr-dpf-00) semantics, both directions.
//
// DpfExport (origination side, pure): which routes a session with a given
// fabric color gets and with which attributes. A route with `color X
// backup-color Y` goes out on X sessions with Color X and AIGP 0, and on Y
// sessions with Color Y and a worse AIGP (and, unless the route sets one, a
// MED equal to it, for receivers without AIGP) so the primary is preferred;
// uncolored routes go everywhere; a colored session gets nothing else.
// Uncolored sessions (fabric color 0, e.g. a monitoring peer) get every
// route with its primary color. NNHN (NHC attribute, draft-ietf-idr-next-
// next-hop-nodes) is per session `via`: the session standing for next hop S
// carries S's BGP id and the next-next-hop ids behind S, and a route whose
// NNHN map does not list S is not sent there (S cannot reach it).
//
// DpfReceiver (receiving side): given the routes received on colored
// sessions, keeps per-destination color tables (members and link-bandwidth
// weights per color, the preferred color, and each member's NNHN). Pure data structure: no I/O, no
// threads; the caller serializes access (feed it from the speaker's thread).
// Free of any emulator dependency so sim-fabric leaves can reuse it.
#ifndef LOOM_SOUTHBOUND_BGP_DPF_H_
#define LOOM_SOUTHBOUND_BGP_DPF_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "southbound/bgp/codec.h"

namespace loom::southbound::bgp {

// AIGP on the backup-color advertisement (primary carries 0).
constexpr uint64_t kDefaultBackupAigp = 1000;

// A route Loom originates. A new field must also go into ExportClassKey.
struct OriginatedRoute {
  Prefix prefix;
  uint32_t color = 0;         // Primary color (0 = uncolored).
  uint32_t backup_color = 0;  // 0 = none.
  uint64_t backup_aigp = kDefaultBackupAigp;
  // GLB weights: link bandwidth (bytes/s) per session `via` (neighbor id).
  // When non-empty, a session whose via is missing does not get the route
  // (weight 0); sessions without a via get no link-bandwidth community.
  std::map<std::string, float> bandwidth_by_via;
  std::vector<LargeCommunity> large_communities;
  // NNHN per session `via` (originated with next-hop-self: DpfExport sets
  // the NHC address to the session's IPv4 next hop). When non-empty, a
  // session whose via is missing does not get the route (its next hop cannot
  // reach the destination); an entry without next_hop_bgp_id or next-next-hop
  // ids sends the route without the attribute. Sessions without a via and
  // IPv6 routes get no NNHN.
  std::map<std::string, NextNextHops> nnhn_by_via;
  std::optional<uint32_t> med;
  bool operator==(const OriginatedRoute&) const = default;
};

// What DpfExport needs to know about the session.
struct ExportContext {
  uint32_t local_as = 0;
  uint32_t fabric_color = 0;
  bool ebgp = true;
  std::array<uint8_t, 4> next_hop{};  // IPv4 next-hop-self.
  Bytes next_hop_v6;                  // 16 bytes, for IPv6 routes.
  std::string via;
};

// Attributes of `route` on a session described by `ctx`, or nullopt when the
// session must not carry it.
std::optional<PathAttributes> DpfExport(const OriginatedRoute& route, const ExportContext& ctx);

// A key equal for two routes exactly when DpfExport gives them the same
// attributes on every session (every field but the prefix address and
// length). The speaker exports and encodes one route per key and session.
std::string ExportClassKey(const OriginatedRoute& route);

class DpfReceiver {
 public:
  struct Member {
    std::string session;
    std::string neighbor;  // Session's via/peer name (the next-hop device).
    double weight = 1;     // Link bandwidth (bytes/s) when present, else 1.
    uint64_t aigp = 0;
    std::array<uint8_t, 4> next_hop{};
    // NNHN received with the route (0 / empty when absent): the next hop's
    // BGP id and the next-next-hop BGP ids behind it (e.g. the egress leaf
    // behind a spine), ascending.
    uint32_t nnhn_next_hop_id = 0;
    std::vector<uint32_t> next_next_hops;
  };
  struct ColorEntry {
    uint32_t color = 0;
    uint64_t aigp = 0;  // Best (lowest) AIGP among members.
    std::vector<Member> members;
  };
  struct Table {
    Prefix prefix;
    // Colors with members, ordered by (AIGP, color): front is preferred.
    std::vector<ColorEntry> colors;
    // Members that sent the route uncolored (usable by uncolored traffic).
    std::vector<Member> uncolored;
    // Preferred color (lowest AIGP with a live member), 0 if none.
    uint32_t preferred_color = 0;
  };

  // Feeds one received route on `session` (fabric color `session_color`,
  // neighbor id `neighbor`); attrs == nullptr withdraws it. A colored route
  // received on a session of another color is hidden (DPF receiver rule).
  void Update(const std::string& session, uint32_t session_color, const std::string& neighbor,
              const Prefix& prefix, const PathAttributes* attrs);
  // Forgets everything learned on `session`.
  void SessionDown(const std::string& session);

  std::optional<Table> Lookup(const Prefix& prefix) const;
  std::vector<Table> Tables() const;
  uint64_t hidden_routes() const { return hidden_; }
  // Bumped on every change (consumers poll it to reprogram).
  uint64_t version() const { return version_; }

 private:
  struct Path {
    uint32_t session_color = 0;
    std::string neighbor;
    uint32_t color = 0;
    uint64_t aigp = 0;
    double weight = 1;
    std::array<uint8_t, 4> next_hop{};
    uint32_t nnhn_next_hop_id = 0;
    std::vector<uint32_t> next_next_hops;
  };
  Table Build(const Prefix& prefix, const std::map<std::string, Path>& paths) const;

  std::map<Prefix, std::map<std::string, Path>> paths_;  // prefix -> session -> path
  uint64_t hidden_ = 0;
  uint64_t version_ = 0;
};

}  // namespace loom::southbound::bgp

#endif  // LOOM_SOUTHBOUND_BGP_DPF_H_
