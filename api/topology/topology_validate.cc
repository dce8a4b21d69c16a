#include <cstdlib>
#include <map>
#include <set>
#include <unordered_map>

#include "api/topology/topology_index.h"
#include "api/topology/topology_io.h"

namespace loom::topology {

using loom::v1::DeviceRole;
using loom::v1::Topology;

namespace {

std::string Q(const std::string& s) { return "\"" + s + "\""; }

// Tier of a role: switches 1..3 (SwitchTier), NICs 0, anything else -1.
int Tier(DeviceRole r) {
  if (r == loom::v1::DEVICE_ROLE_NIC) return 0;
  const int t = loom::topology::SwitchTier(r);
  return t > 0 ? t : -1;
}

bool KnownRole(int r) { return r >= loom::v1::DEVICE_ROLE_LEAF && r <= loom::v1::DEVICE_ROLE_NIC; }

}  // namespace

std::vector<ValidationError> ValidateTopology(const Topology& topo) {
  std::vector<ValidationError> errs;
  auto add = [&errs](std::string element, std::string message, std::string locate,
                     int occurrence = 0) {
    errs.push_back({std::move(element), std::move(message), std::move(locate), occurrence});
  };

  // Devices and GPUs share one id space (job endpoints name either).
  std::unordered_map<std::string, int> device_index;
  std::unordered_map<std::string, std::string> first_use;  // id -> element path
  std::unordered_map<std::string, int> id_seen;            // id -> occurrences so far
  bool has_spine = false, has_super = false;
  for (int i = 0; i < topo.devices_size(); ++i) {
    const auto& d = topo.devices(i);
    std::string el = "devices[" + std::to_string(i) + "]";
    if (d.id().empty()) {
      add(el, "device has no id", "");
      continue;
    }
    int occ = id_seen[d.id()]++;
    if (auto it = first_use.find(d.id()); it != first_use.end()) {
      add(el + " (" + Q(d.id()) + ")",
          "duplicate id " + Q(d.id()) + " (first used by " + it->second + ")", d.id(), occ);
      continue;
    }
    first_use[d.id()] = el;
    device_index[d.id()] = i;
    if (!KnownRole(d.role())) {
      add(el + " (" + Q(d.id()) + ")",
          d.role() == 0 ? std::string("role is not set (expected DEVICE_ROLE_LEAF, _SPINE, "
                                      "_SUPER_SPINE, _HOST or _NIC)")
                        : "unknown role " + std::to_string(d.role()),
          d.id(), occ);
    }
    if (d.role() == loom::v1::DEVICE_ROLE_SPINE) has_spine = true;
    if (d.role() == loom::v1::DEVICE_ROLE_SUPER_SPINE) has_super = true;
    if (d.line_rate_bps() < 0) {
      add(el + " (" + Q(d.id()) + ")",
          "negative line_rate_bps " + std::to_string(d.line_rate_bps()), d.id(), occ);
    }
  }
  // NIC -> host consistency.
  for (int i = 0; i < topo.devices_size(); ++i) {
    const auto& d = topo.devices(i);
    if (d.role() != loom::v1::DEVICE_ROLE_NIC || d.id().empty()) continue;
    if (device_index.count(d.id()) && device_index[d.id()] != i) continue;
    std::string el = "devices[" + std::to_string(i) + "] (" + Q(d.id()) + ")";
    auto it = device_index.find(d.host());
    if (d.host().empty()) {
      add(el, "NIC has no host", d.id());
    } else if (it == device_index.end()) {
      add(el, "NIC's host " + Q(d.host()) + " does not exist", d.id());
    } else if (topo.devices(it->second).role() != loom::v1::DEVICE_ROLE_HOST) {
      add(el,
          "NIC's host " + Q(d.host()) + " is a " +
              std::string(RoleName(topo.devices(it->second).role())) + ", not a host",
          d.id());
    }
  }

  std::map<std::pair<std::string, std::string>, std::string> iface_use;
  std::set<std::string> link_ids;
  std::unordered_map<std::string, int> link_id_seen;
  std::set<std::string> leaves_with_uplink, spines_with_uplink, nics_linked;
  for (int i = 0; i < topo.links_size(); ++i) {
    const auto& l = topo.links(i);
    std::string el = "links[" + std::to_string(i) + "]";
    std::string loc = l.id();
    int occ = 0;
    if (l.id().empty()) {
      add(el, "link has no id", "");
    } else {
      occ = link_id_seen[l.id()]++;
      el += " (" + Q(l.id()) + ")";
      if (!link_ids.insert(l.id()).second) {
        add(el, "duplicate link id " + Q(l.id()), loc, occ);
        continue;
      }
    }
    if (l.capacity_bps() <= 0) {
      add(el, "capacity_bps must be positive, got " + std::to_string(l.capacity_bps()), loc, occ);
    }
    if (l.propagation_delay_ns() < 0) {
      add(el,
          "propagation_delay_ns must not be negative, got " +
              std::to_string(l.propagation_delay_ns()),
          loc, occ);
    }
    bool ends_ok = true;
    const loom::v1::LinkEndpoint* ends[2] = {&l.a(), &l.b()};
    const char* names[2] = {"a", "b"};
    for (int e = 0; e < 2; ++e) {
      const auto& ep = *ends[e];
      if (ep.device().empty()) {
        add(el, std::string("endpoint ") + names[e] + " has no device", loc, occ);
        ends_ok = false;
        continue;
      }
      auto it = device_index.find(ep.device());
      if (it == device_index.end()) {
        add(el, std::string("endpoint ") + names[e] + " names unknown device " + Q(ep.device()),
            loc, occ);
        ends_ok = false;
        continue;
      }
      if (ep.interface().empty()) {
        add(el, std::string("endpoint ") + names[e] + " on " + Q(ep.device()) + " has no interface",
            loc, occ);
      } else {
        auto key = std::make_pair(ep.device(), ep.interface());
        auto [pos, inserted] = iface_use.emplace(key, el);
        if (!inserted) {
          add(el,
              "interface " + Q(ep.device()) + " " + Q(ep.interface()) + " is already used by " +
                  pos->second,
              loc, occ);
        }
      }
      if (topo.devices(it->second).role() == loom::v1::DEVICE_ROLE_HOST) {
        add(el,
            "endpoint " + std::string(names[e]) + " is host " + Q(ep.device()) +
                "; hosts attach through their NICs",
            loc, occ);
        ends_ok = false;
      }
    }
    if (!ends_ok) continue;
    const auto& da = topo.devices(device_index[l.a().device()]);
    const auto& db = topo.devices(device_index[l.b().device()]);
    if (da.id() == db.id()) {
      add(el, "link connects " + Q(da.id()) + " to itself", loc, occ);
      continue;
    }
    int ta = Tier(da.role()), tb = Tier(db.role());
    if (ta < 0 || tb < 0) continue;  // unknown role already reported
    const auto& lo = ta < tb ? da : db;
    const auto& hi = ta < tb ? db : da;
    if (std::abs(ta - tb) != 1) {
      add(el,
          "link connects " + std::string(RoleName(da.role())) + " " + Q(da.id()) + " to " +
              std::string(RoleName(db.role())) + " " + Q(db.id()) +
              "; supported pairs are nic-leaf, leaf-spine and spine-super-spine",
          loc, occ);
      continue;
    }
    if (lo.role() == loom::v1::DEVICE_ROLE_LEAF) leaves_with_uplink.insert(lo.id());
    if (lo.role() == loom::v1::DEVICE_ROLE_SPINE) spines_with_uplink.insert(lo.id());
    if (lo.role() == loom::v1::DEVICE_ROLE_NIC) nics_linked.insert(lo.id());
    (void)hi;
  }
  for (int i = 0; i < topo.devices_size(); ++i) {
    const auto& d = topo.devices(i);
    if (d.id().empty() || device_index[d.id()] != i) continue;
    std::string el = "devices[" + std::to_string(i) + "] (" + Q(d.id()) + ")";
    if (has_spine && d.role() == loom::v1::DEVICE_ROLE_LEAF && !leaves_with_uplink.count(d.id())) {
      add(el, "leaf " + Q(d.id()) + " has no uplink to a spine", d.id());
    }
    if (has_super && d.role() == loom::v1::DEVICE_ROLE_SPINE && !spines_with_uplink.count(d.id())) {
      add(el, "spine " + Q(d.id()) + " has no uplink to a super-spine", d.id());
    }
    if (d.role() == loom::v1::DEVICE_ROLE_NIC && !nics_linked.count(d.id())) {
      add(el, "NIC " + Q(d.id()) + " has no link to a leaf", d.id());
    }
  }

  for (int i = 0; i < topo.gpus_size(); ++i) {
    const auto& g = topo.gpus(i);
    std::string el = "gpus[" + std::to_string(i) + "]";
    if (g.id().empty()) {
      add(el, "GPU has no id", "");
      continue;
    }
    el += " (" + Q(g.id()) + ")";
    int occ = id_seen[g.id()]++;
    if (auto it = first_use.find(g.id()); it != first_use.end()) {
      add(el, "duplicate id " + Q(g.id()) + " (first used by " + it->second + ")", g.id(), occ);
      continue;
    }
    first_use[g.id()] = "gpus[" + std::to_string(i) + "]";
    auto host = device_index.find(g.host());
    if (host == device_index.end() ||
        topo.devices(host->second).role() != loom::v1::DEVICE_ROLE_HOST) {
      add(el, "GPU's host " + Q(g.host()) + " is not a host in the topology", g.id(), occ);
      continue;
    }
    auto nic = device_index.find(g.nic());
    if (nic == device_index.end() ||
        topo.devices(nic->second).role() != loom::v1::DEVICE_ROLE_NIC) {
      add(el, "GPU's NIC " + Q(g.nic()) + " is not a NIC in the topology", g.id(), occ);
      continue;
    }
    if (topo.devices(nic->second).host() != g.host()) {
      add(el,
          "GPU's NIC " + Q(g.nic()) + " belongs to host " + Q(topo.devices(nic->second).host()) +
              ", not " + Q(g.host()),
          g.id(), occ);
    }
  }
  return errs;
}

}  // namespace loom::topology
