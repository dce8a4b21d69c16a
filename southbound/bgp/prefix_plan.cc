#include "southbound/bgp/prefix_plan.h"

#include <set>

namespace loom::southbound::bgp {

namespace v1 = loom::v1;

namespace {

std::string HostPrefix(uint32_t index) {
  const uint32_t a = (198u << 24 | 18u << 16) + index;
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." +
         std::to_string((a >> 8) & 255) + "." + std::to_string(a & 255) + "/32";
}

struct Roles {
  std::map<std::string, v1::DeviceRole> role;
  std::map<std::string, std::vector<std::string>> neighbors;  // in link order, unique
  bool three_tier = false;
};

Roles RolesOf(const v1::Topology& topo) {
  Roles r;
  for (const auto& d : topo.devices()) {
    r.role[d.id()] = d.role();
    r.three_tier |= d.role() == v1::DEVICE_ROLE_SUPER_SPINE;
  }
  auto add = [&](const std::string& a, const std::string& b) {
    auto& v = r.neighbors[a];
    for (const auto& x : v) {
      if (x == b) return;
    }
    v.push_back(b);
  };
  for (const auto& l : topo.links()) {
    add(l.a().device(), l.b().device());
    add(l.b().device(), l.a().device());
  }
  return r;
}

}  // namespace

PrefixPlan::PrefixPlan(const v1::Topology& topo) {
  std::map<std::string, v1::DeviceRole> role;
  for (const auto& d : topo.devices()) {
    role[d.id()] = d.role();
    if (d.role() != v1::DEVICE_ROLE_NIC) continue;
    if (nics_.size() >= kMaxPlannedNics || prefix_of_.count(d.id())) continue;
    const std::string p = HostPrefix(static_cast<uint32_t>(nics_.size()));
    nics_.push_back(d.id());
    prefix_of_[d.id()] = p;
    if (auto parsed = Prefix::Parse(p)) nic_of_[*parsed] = d.id();
  }
  for (const auto& g : topo.gpus()) {
    auto it = prefix_of_.find(g.nic());
    if (it != prefix_of_.end() && !prefix_of_.count(g.id())) prefix_of_[g.id()] = it->second;
  }
  for (const auto& l : topo.links()) {
    const std::string& a = l.a().device();
    const std::string& b = l.b().device();
    if (role[a] == v1::DEVICE_ROLE_NIC && role[b] == v1::DEVICE_ROLE_LEAF) leaf_of_.emplace(a, b);
    if (role[b] == v1::DEVICE_ROLE_NIC && role[a] == v1::DEVICE_ROLE_LEAF) leaf_of_.emplace(b, a);
  }
  for (const std::string& nic : nics_) {
    auto it = leaf_of_.find(nic);
    if (it != leaf_of_.end()) leaf_nics_[it->second].push_back(nic);
  }
}

std::string PrefixPlan::PrefixOf(const std::string& device) const {
  auto it = prefix_of_.find(device);
  return it == prefix_of_.end() ? std::string() : it->second;
}

std::string PrefixPlan::NicOf(const Prefix& prefix) const {
  auto it = nic_of_.find(prefix);
  return it == nic_of_.end() ? std::string() : it->second;
}

std::string PrefixPlan::NicOf(std::string_view prefix) const {
  std::optional<Prefix> p = Prefix::Parse(prefix);
  return p ? NicOf(*p) : std::string();
}

std::string PrefixPlan::LeafOf(const std::string& nic) const {
  auto it = leaf_of_.find(nic);
  return it == leaf_of_.end() ? std::string() : it->second;
}

std::map<std::string, std::vector<std::string>> PrefixPlan::DestinationPrefixes() const {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [dev, p] : prefix_of_) out[dev].push_back(p);
  for (const auto& [leaf, nics] : leaf_nics_) {
    auto& v = out[leaf];
    for (const std::string& n : nics) v.push_back(prefix_of_.at(n));
  }
  return out;
}

std::map<std::string, std::string> PrefixPlan::EgressLeaves() const {
  std::map<std::string, std::string> out;
  for (const auto& [dev, p] : prefix_of_) {
    auto parsed = Prefix::Parse(p);
    if (!parsed) continue;
    auto nic = nic_of_.find(*parsed);
    if (nic == nic_of_.end()) continue;
    auto leaf = leaf_of_.find(nic->second);
    if (leaf != leaf_of_.end()) out[dev] = leaf->second;
  }
  return out;
}

void PrefixPlan::FillPrefixes(v1::DeviceState* state) const {
  for (auto& r : *state->mutable_routes()) {
    if (r.prefix().empty()) r.set_prefix(PrefixOf(r.destination()));
  }
}

std::string LoomSourceAddress(uint32_t top_index) {
  if (top_index >= 65535) return "";
  const uint32_t a = top_index + 1;
  return "127.1." + std::to_string(a >> 8) + "." + std::to_string(a & 255);
}

std::vector<ColorSession> ColorSessions(const v1::Topology& topo) {
  const Roles r = RolesOf(topo);
  const v1::DeviceRole top_role =
      r.three_tier ? v1::DEVICE_ROLE_SUPER_SPINE : v1::DEVICE_ROLE_SPINE;
  std::vector<std::string> tops;
  for (const auto& d : topo.devices()) {
    if (d.role() == top_role) tops.push_back(d.id());
  }
  std::vector<ColorSession> out;
  for (const auto& d : topo.devices()) {
    if (d.role() != v1::DEVICE_ROLE_LEAF) continue;
    auto nit = r.neighbors.find(d.id());
    if (nit == r.neighbors.end()) continue;
    for (size_t t = 0; t < tops.size(); ++t) {
      std::string via;
      for (const std::string& n : nit->second) {
        if (n == tops[t]) {
          via = n;
          break;
        }
      }
      if (via.empty() && r.three_tier) {
        for (const std::string& n : nit->second) {
          auto rn = r.role.find(n);
          if (rn == r.role.end() || rn->second != v1::DEVICE_ROLE_SPINE) continue;
          auto up = r.neighbors.find(n);
          if (up == r.neighbors.end()) continue;
          bool linked = false;
          for (const std::string& x : up->second) linked |= x == tops[t];
          if (linked) {
            via = n;
            break;
          }
        }
      }
      const std::string addr = LoomSourceAddress(static_cast<uint32_t>(t));
      if (via.empty() || addr.empty()) continue;
      out.push_back({d.id(), kFabricColorBase + static_cast<uint32_t>(t), via, addr});
    }
  }
  return out;
}

std::map<std::string, uint32_t> RouterIds(const v1::Topology& topo) {
  std::map<std::string, uint32_t> out;
  for (const auto& d : topo.devices()) {
    if (d.role() != v1::DEVICE_ROLE_LEAF && d.role() != v1::DEVICE_ROLE_SPINE &&
        d.role() != v1::DEVICE_ROLE_SUPER_SPINE) {
      continue;
    }
    if (auto id = ParseRouterId(d.router_id()); id && *id != 0) out[d.id()] = *id;
  }
  return out;
}

uint32_t LeafAs(const v1::Topology& topo, const std::string& leaf) {
  uint32_t index = 0;
  for (const auto& d : topo.devices()) {
    if (d.role() != v1::DEVICE_ROLE_LEAF) continue;
    if (d.id() == leaf) return d.asn() != 0 ? d.asn() : 4200000000u + index;
    ++index;
  }
  return 4200000000u + index;
}

namespace {

// What both ends of a colored session configure alike.
PeerConfig ColorSessionPeer(const ColorSession& cs, const LoomSessionOptions& options) {
  PeerConfig p;
  p.device = cs.leaf;
  p.hold_time_s = options.hold_time_s;
  p.connect_retry = options.connect_retry;
  p.idle_hold = options.idle_hold;
  p.fabric_color = cs.color;
  p.via = cs.via;
  p.ipv6 = false;
  return p;
}

}  // namespace

std::vector<PeerConfig> LoomPeers(const v1::Topology& topo,
                                  const std::map<std::string, uint16_t>& leaf_ports,
                                  const LoomSessionOptions& options) {
  std::vector<PeerConfig> out;
  for (const ColorSession& cs : ColorSessions(topo)) {
    auto it = leaf_ports.find(cs.leaf);
    if (it == leaf_ports.end()) continue;
    PeerConfig p = ColorSessionPeer(cs, options);
    p.name = cs.leaf + "/" + std::to_string(cs.color);
    p.local_as = options.loom_as;
    p.peer_as = LeafAs(topo, cs.leaf);
    p.peer_address = options.leaf_address;
    p.peer_port = it->second;
    p.local_address = cs.loom_address;
    p.passive = false;
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<PeerConfig> LeafPeers(const v1::Topology& topo, const std::string& leaf,
                                  const LoomSessionOptions& options) {
  std::vector<PeerConfig> out;
  for (const ColorSession& cs : ColorSessions(topo)) {
    if (cs.leaf != leaf) continue;
    PeerConfig p = ColorSessionPeer(cs, options);
    p.name = "loom/" + std::to_string(cs.color);
    p.local_as = LeafAs(topo, leaf);
    p.peer_as = options.loom_as;
    p.peer_address = cs.loom_address;
    p.passive = true;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace loom::southbound::bgp
