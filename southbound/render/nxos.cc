// NX-OS rendering (Nexus 9000, NX-OS 10.5+ DLB). Shapes from
// protocol-facts.md and Cisco's "Configure Dynamic Load Balancing" guide:
//   hardware profile dlb / dlb-interface EthX/Y / mode per-packet|flowlet /
//   flowlet-aging N (microseconds)
//   policy-map type queuing ... random-detect minimum-threshold X bytes
//     maximum-threshold Y bytes drop-probability P weight 0 ecn
// Guesses (UNVERIFIED, marked in the output): `dre-thresholds level-N`,
// `set extcommunity color`, `set extcommunity bandwidth` and the
// network-qos `pause pfc-cos ... pause-threshold/resume-threshold` lines;
// neighbor addresses are router ids (the topology has no link addresses).
// NX-OS has no BGP-DPF: backup colors become comments. ALB tables and spray
// rules are comments (programmed over gNMI), and so are routes split by
// destination QP ("! network P dest-qp V/M route-map loom-color-X ...": one
// color per prefix in BGP).
#include <map>
#include <set>
#include <sstream>

#include "southbound/gnmi/gnmi_config.h"
#include "southbound/render/device_view.h"
#include "southbound/render/render.h"
#include "southbound/render/render_util.h"

namespace loom::southbound::render {

std::string RenderNxos(const loom::v1::DeviceState& in, const loom::v1::Topology& topology) {
  const loom::v1::DeviceState s = gnmi::Canonical(in);
  DeviceView view(s.device(), topology);
  std::ostringstream o;
  o << "! Loom configuration for " << s.device() << ", generation " << s.generation()
    << ". Rendered; do not edit by hand.\n";
  if (!view.known()) o << "! " << s.device() << " is not in the topology: placeholders in <>.\n";

  if (s.has_dlb()) {
    const auto& d = s.dlb();
    o << "!\n";
    if (d.mode() == loom::v1::DLB_MODE_STATIC) {
      o << "no hardware profile dlb\n";
    } else {
      o << "hardware profile dlb\n";
      for (const auto& i : view.fabric_interfaces()) o << "  dlb-interface " << i << "\n";
      if (d.mode() == loom::v1::DLB_MODE_PER_PACKET) {
        o << "  mode per-packet\n";
      } else {
        o << "  mode flowlet\n";
        if (d.mode() == loom::v1::DLB_MODE_ASSIGNED_FLOW) {
          o << "  ! assigned-flow has no NX-OS mode: flowlet with the longest aging\n";
        }
      }
      if (d.inactivity_interval_ns()) {
        o << "  flowlet-aging " << NsToUs(d.inactivity_interval_ns()) << "\n";
      }
      if (d.load_thresholds_percent_size()) {
        o << "  dre-thresholds";
        for (int i = 0; i < d.load_thresholds_percent_size(); ++i) {
          o << " level-" << i + 1 << " " << d.load_thresholds_percent(i);
        }
        o << "  ! UNVERIFIED syntax\n";
      }
    }
  }

  // Colors and routes: route-maps that set the Color extended community.
  std::map<uint32_t, std::vector<std::string>> color_hops;
  for (const auto& c : s.colors()) {
    o << "!\nroute-map loom-color-" << c.color() << " permit 10\n";
    o << "  set extcommunity color " << c.color() << "  ! UNVERIFIED syntax\n";
    color_hops[c.color()] = {c.next_hops().begin(), c.next_hops().end()};
  }
  // GLB weights: link bandwidth set on routes received from each next hop.
  std::map<std::string, std::vector<std::pair<std::string, uint32_t>>> by_neighbor;
  for (const auto& w : s.weights()) {
    o << "!\n";
    std::vector<std::string> prefixes = PrefixesOf(s, topology, w.destination());
    if (prefixes.empty()) {
      o << "! ip prefix-list loom-dst-" << w.destination()
        << ": no prefix known; fill from the addressing plan\n";
    } else {
      int seq = 5;
      for (const auto& p : prefixes) {
        o << "ip prefix-list loom-dst-" << w.destination() << " seq " << seq << " permit " << p
          << "\n";
        seq += 5;
      }
    }
    for (const auto& [nh, v] : SortedWeights(w)) by_neighbor[nh].push_back({w.destination(), v});
  }
  for (const auto& [nh, entries] : by_neighbor) {
    int seq = 10;
    for (const auto& [dst, v] : entries) {
      o << "!\nroute-map loom-glb-from-" << nh << " permit " << seq << "\n";
      o << "  match ip address prefix-list loom-dst-" << dst << "\n";
      o << "  set extcommunity bandwidth " << view.asn() << ":"
        << static_cast<uint64_t>(v) * kBytesPerWeight << "  ! weight " << v
        << ", UNVERIFIED syntax\n";
      seq += 10;
    }
    o << "route-map loom-glb-from-" << nh << " permit " << seq << "\n";
  }

  if (s.colors_size() || s.routes_size() || s.weights_size()) {
    o << "!\nrouter bgp " << (view.asn() ? std::to_string(view.asn()) : "<asn>") << "\n";
    if (!view.router_id().empty()) o << "  router-id " << view.router_id() << "\n";
    o << "  address-family ipv4 unicast\n";
    o << "    maximum-paths 64\n";
    for (const auto& r : s.routes()) {
      if (r.prefix().empty()) {
        o << "    ! route to " << r.destination() << " has no prefix: not advertised\n";
        continue;
      }
      if (IsSplitRoute(r)) {
        o << "    ! network " << r.prefix() << " dest-qp " << DestQp(r) << " route-map loom-color-"
          << r.color();
        if (r.backup_color()) o << " backup color " << r.backup_color();
        o << ": " << r.destination() << " tc " << r.traffic_class()
          << " split by destination QP, no BGP equivalent (one color per prefix); programmed "
             "over gNMI\n";
        continue;
      }
      o << "    network " << r.prefix() << " route-map loom-color-" << r.color() << "\n";
      if (r.backup_color()) {
        o << "    ! backup color " << r.backup_color() << " for " << r.prefix()
          << ": no BGP-DPF on NX-OS\n";
      }
    }
    std::set<std::string> neighbors;
    for (const auto& [c, hops] : color_hops) neighbors.insert(hops.begin(), hops.end());
    for (const auto& [nh, e] : by_neighbor) neighbors.insert(nh);
    for (const auto& nh : neighbors) {
      const Neighbor* n = view.Find(nh);
      std::string addr = n && !n->router_id.empty() ? n->router_id : "<" + nh + ">";
      o << "  neighbor " << addr << "  ! router id of " << nh << " (UNVERIFIED: link address)\n";
      if (n && n->asn) o << "    remote-as " << n->asn << "\n";
      o << "    description " << nh << " via " << view.InterfaceTo(nh) << "\n";
      o << "    address-family ipv4 unicast\n";
      if (by_neighbor.count(nh)) o << "      route-map loom-glb-from-" << nh << " in\n";
    }
  }

  // ECN/PFC thresholds: one queuing policy per interface set.
  std::map<std::string, std::vector<const loom::v1::QueueThresholds*>> by_if;
  for (const auto& t : s.thresholds()) by_if[t.interface()].push_back(&t);
  for (const auto& [ifname, ts] : by_if) {
    std::string name = "loom-queuing" + (ifname.empty() ? "" : "-" + ifname);
    o << "!\npolicy-map type queuing " << name << "\n";
    for (const auto* t : ts) {
      o << "  class type queuing c-out-8q-q" << t->priority() << "\n";
      if (t->ecn_kmax_bytes()) {
        o << "    random-detect minimum-threshold " << t->ecn_kmin_bytes()
          << " bytes maximum-threshold " << t->ecn_kmax_bytes() << " bytes drop-probability "
          << t->ecn_pmax_percent() << " weight 0 ecn\n";
      }
    }
    std::string nq = "loom-network-qos" + (ifname.empty() ? "" : "-" + ifname);
    bool pfc = false;
    for (const auto* t : ts) pfc |= t->pfc_xoff_bytes() > 0;
    if (pfc) {
      o << "policy-map type network-qos " << nq << "\n";
      for (const auto* t : ts) {
        if (!t->pfc_xoff_bytes()) continue;
        o << "  class type network-qos c-8q-nq" << t->priority() << "\n";
        o << "    pause pfc-cos " << t->priority() << " pause-threshold " << t->pfc_xoff_bytes()
          << " resume-threshold " << t->pfc_xon_bytes() << "  ! bytes, UNVERIFIED syntax\n";
      }
    }
    if (ifname.empty()) {
      o << "system qos\n  service-policy type queuing output " << name << "\n";
      if (pfc) o << "  service-policy type network-qos " << nq << "\n";
    } else {
      o << "interface " << ifname << "\n  service-policy type queuing output " << name << "\n";
    }
  }

  for (const auto& a : s.alb_tables()) {
    o << "!\n! alb group " << a.group() << ": " << a.buckets_size() << " buckets, "
      << BucketShares(a) << " (programmed over gNMI)\n";
  }
  for (const auto& r : s.spray_rules()) {
    o << "! spray traffic-class " << r.traffic_class() << " qp " << QpRange(r)
      << " per packet (programmed over gNMI)\n";
  }
  o << "!\n";
  return o.str();
}

}  // namespace loom::southbound::render
