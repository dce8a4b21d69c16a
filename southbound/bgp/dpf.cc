#include "southbound/bgp/dpf.h"

#include <algorithm>

namespace loom::southbound::bgp {

std::optional<PathAttributes> DpfExport(const OriginatedRoute& route, const ExportContext& ctx) {
  uint32_t color = 0;
  std::optional<uint64_t> aigp;
  if (route.color != 0) {
    if (ctx.fabric_color == 0 || ctx.fabric_color == route.color) {
      color = route.color;
      aigp = 0;
    } else if (route.backup_color != 0 && ctx.fabric_color == route.backup_color) {
      color = route.backup_color;
      aigp = route.backup_aigp;
    } else {
      return std::nullopt;
    }
  }
  std::optional<float> bandwidth;
  if (!route.bandwidth_by_via.empty() && !ctx.via.empty()) {
    auto it = route.bandwidth_by_via.find(ctx.via);
    if (it == route.bandwidth_by_via.end() || it->second <= 0) return std::nullopt;
    bandwidth = it->second;
  }
  const NextNextHops* nnhn = nullptr;
  if (!route.nnhn_by_via.empty() && !ctx.via.empty()) {
    auto it = route.nnhn_by_via.find(ctx.via);
    if (it == route.nnhn_by_via.end()) return std::nullopt;
    nnhn = &it->second;
  }
  PathAttributes a;
  a.origin = 0;
  a.has_as_path = true;
  if (ctx.ebgp) a.as_path.push_back({AsSegmentType::kSequence, {ctx.local_as}});
  if (route.prefix.afi == Afi::kIpv4) {
    a.next_hop = ctx.next_hop;
  } else {
    a.mp_next_hop = ctx.next_hop_v6;
  }
  if (!ctx.ebgp) a.local_pref = 100;
  a.med = route.med;
  // A receiver without AIGP (RFC 7311; FRR before 9.0 among others) sees the
  // primary and the backup advertisement as equal and installs both as ECMP.
  // A worse MED on the backup (comparable: both come from Loom's AS) keeps the
  // primary preferred there too; AIGP-aware receivers decide on AIGP first.
  if (!a.med && aigp && *aigp > 0) {
    a.med = static_cast<uint32_t>(std::min<uint64_t>(*aigp, 0xffffffffu));
  }
  if (color != 0) a.ext_communities.push_back(ExtCommunity::Color(color));
  if (bandwidth) {
    uint16_t asn = ctx.local_as > 0xffff ? kAsTrans : static_cast<uint16_t>(ctx.local_as);
    a.ext_communities.push_back(ExtCommunity::LinkBandwidth(asn, *bandwidth));
  }
  a.aigp = aigp;
  a.large_communities = route.large_communities;
  if (nnhn && nnhn->next_hop_bgp_id != 0 && !nnhn->next_next_hop_bgp_ids.empty() &&
      route.prefix.afi == Afi::kIpv4) {
    a.nnhn = *nnhn;
    a.nnhn->next_hop = ctx.next_hop;  // Next-hop-self.
  }
  return a;
}

std::string ExportClassKey(const OriginatedRoute& r) {
  std::string k;
  auto put = [&k](const void* p, size_t n) { k.append(static_cast<const char*>(p), n); };
  auto put32 = [&put](uint32_t v) { put(&v, sizeof v); };
  k.push_back(static_cast<char>(r.prefix.afi));
  put32(r.color);
  put32(r.backup_color);
  put(&r.backup_aigp, sizeof r.backup_aigp);
  k.push_back(r.med ? 1 : 0);
  put32(r.med.value_or(0));
  put32(static_cast<uint32_t>(r.bandwidth_by_via.size()));
  for (const auto& [via, bw] : r.bandwidth_by_via) {
    put32(static_cast<uint32_t>(via.size()));
    k += via;
    put(&bw, sizeof bw);
  }
  put32(static_cast<uint32_t>(r.large_communities.size()));
  for (const LargeCommunity& lc : r.large_communities) {
    put32(lc.global_admin);
    put32(lc.local1);
    put32(lc.local2);
  }
  put32(static_cast<uint32_t>(r.nnhn_by_via.size()));
  for (const auto& [via, n] : r.nnhn_by_via) {
    put32(static_cast<uint32_t>(via.size()));
    k += via;
    put(n.next_hop.data(), n.next_hop.size());
    put32(n.next_hop_bgp_id);
    put32(static_cast<uint32_t>(n.next_next_hop_bgp_ids.size()));
    for (uint32_t id : n.next_next_hop_bgp_ids) put32(id);
  }
  return k;
}

void DpfReceiver::Update(const std::string& session, uint32_t session_color,
                         const std::string& neighbor, const Prefix& prefix,
                         const PathAttributes* attrs) {
  auto& by_session = paths_[prefix];
  if (attrs == nullptr) {
    if (by_session.erase(session) > 0) ++version_;
    if (by_session.empty()) paths_.erase(prefix);
    return;
  }
  uint32_t color = attrs->Color();
  if (color != 0 && session_color != 0 && color != session_color) {
    ++hidden_;
    if (by_session.erase(session) > 0) ++version_;
    if (by_session.empty()) paths_.erase(prefix);
    return;
  }
  Path p;
  p.session_color = session_color;
  p.neighbor = neighbor;
  p.color = color;
  p.aigp = attrs->aigp.value_or(0);
  p.weight = attrs->LinkBandwidth().value_or(1.0f);
  if (attrs->next_hop) p.next_hop = *attrs->next_hop;
  if (attrs->nnhn) {
    p.nnhn_next_hop_id = attrs->nnhn->next_hop_bgp_id;
    p.next_next_hops = attrs->nnhn->next_next_hop_bgp_ids;
  }
  by_session[session] = p;
  ++version_;
}

void DpfReceiver::SessionDown(const std::string& session) {
  for (auto it = paths_.begin(); it != paths_.end();) {
    if (it->second.erase(session) > 0) ++version_;
    it = it->second.empty() ? paths_.erase(it) : std::next(it);
  }
}

DpfReceiver::Table DpfReceiver::Build(const Prefix& prefix,
                                      const std::map<std::string, Path>& paths) const {
  Table t;
  t.prefix = prefix;
  std::map<uint32_t, ColorEntry> colors;
  for (const auto& [session, p] : paths) {
    Member m{session,    p.neighbor,         p.weight,        p.aigp,
             p.next_hop, p.nnhn_next_hop_id, p.next_next_hops};
    if (p.color == 0) {
      t.uncolored.push_back(m);
      continue;
    }
    ColorEntry& e = colors[p.color];
    if (e.members.empty() || p.aigp < e.aigp) e.aigp = p.aigp;
    e.color = p.color;
    e.members.push_back(m);
  }
  for (auto& [c, e] : colors) t.colors.push_back(std::move(e));
  std::sort(t.colors.begin(), t.colors.end(), [](const ColorEntry& a, const ColorEntry& b) {
    return a.aigp != b.aigp ? a.aigp < b.aigp : a.color < b.color;
  });
  if (!t.colors.empty()) t.preferred_color = t.colors.front().color;
  return t;
}

std::optional<DpfReceiver::Table> DpfReceiver::Lookup(const Prefix& prefix) const {
  auto it = paths_.find(prefix);
  if (it == paths_.end()) return std::nullopt;
  return Build(it->first, it->second);
}

std::vector<DpfReceiver::Table> DpfReceiver::Tables() const {
  std::vector<Table> out;
  out.reserve(paths_.size());
  for (const auto& [prefix, paths] : paths_) out.push_back(Build(prefix, paths));
  return out;
}

}  // namespace loom::southbound::bgp
