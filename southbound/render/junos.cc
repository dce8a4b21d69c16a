// Junos rendering, in `set` form (load with `load set`). Statement shapes
// from protocol-facts.md and Juniper's CLI reference:
//   set forwarding-options enhanced-hash-key ecmp-dlb flowlet inactivity-interval N
//   set forwarding-options enhanced-hash-key ecmp-dlb per-packet | assigned-flow
//   set protocols bgp group G fabric-color C           (BGP-DPF, Junos 25.4R1+)
//   set protocols bgp fabric-advertise route P color X backup-color Y
//   set policy-options community N members bandwidth:AS:BYTES_PER_S (link bandwidth)
// Guesses (UNVERIFIED, marked in the output where they appear):
// - inactivity-interval unit taken as microseconds;
// - neighbor addresses: the topology has no link addresses, so the
//   neighbor's router id stands in for it;
// - ALB tables, spray rules and ECN/PFC thresholds have no Junos statement
//   Loom can target generically; they are rendered as comments.
// - Routes split by destination QP (qp_mask != 0) cannot be BGP-DPF
//   advertisements (one color per prefix): each part is a comment
//   "# fabric-advertise route P dest-qp V/M color X ..." (programmed over gNMI).
#include <map>
#include <set>
#include <sstream>

#include "southbound/gnmi/gnmi_config.h"
#include "southbound/render/device_view.h"
#include "southbound/render/render.h"
#include "southbound/render/render_util.h"

namespace loom::southbound::render {

std::string RenderJunos(const loom::v1::DeviceState& in, const loom::v1::Topology& topology) {
  const loom::v1::DeviceState s = gnmi::Canonical(in);
  DeviceView view(s.device(), topology);
  std::ostringstream o;
  o << "# Loom configuration for " << s.device() << ", generation " << s.generation()
    << ". Rendered; do not edit by hand.\n";
  if (!view.known()) o << "# " << s.device() << " is not in the topology: placeholders in <>.\n";

  // DLB.
  const std::string dlb = "set forwarding-options enhanced-hash-key ecmp-dlb";
  if (s.has_dlb()) {
    const auto& d = s.dlb();
    o << "\n# DLB\n";
    switch (d.mode()) {
      case loom::v1::DLB_MODE_FLOWLET:
        o << dlb << " flowlet inactivity-interval " << NsToUs(d.inactivity_interval_ns())
          << "  # microseconds (UNVERIFIED unit)\n";
        break;
      case loom::v1::DLB_MODE_PER_PACKET:
        o << dlb << " per-packet\n";
        break;
      case loom::v1::DLB_MODE_ASSIGNED_FLOW:
        o << dlb << " assigned-flow\n";
        break;
      default:
        o << "delete forwarding-options enhanced-hash-key ecmp-dlb  # static hashing\n";
    }
    if (d.load_weight_percent() || d.load_thresholds_percent_size() ||
        d.queue_thresholds_bytes_size()) {
      o << "# quality bands: load weight " << d.load_weight_percent() << "%";
      if (d.load_thresholds_percent_size()) {
        o << ", load thresholds [" << Join(d.load_thresholds_percent(), " ") << "] %";
      }
      if (d.queue_thresholds_bytes_size()) {
        o << ", queue thresholds [" << Join(d.queue_thresholds_bytes(), " ") << "] bytes";
      }
      o << " (platform quantization; no generic statement)\n";
    }
  }

  // Colors: one group per color; neighbors named by the color's next hops.
  std::map<std::string, uint32_t> color_of;  // neighbor -> first color.
  if (s.colors_size() || s.routes_size()) o << "\n# BGP-DPF colors\n";
  for (const auto& c : s.colors()) {
    const std::string group = "loom-color-" + std::to_string(c.color());
    o << "set policy-options community " << group << " members color:0:" << c.color() << "\n";
    o << "set protocols bgp group " << group << " type external\n";
    o << "set protocols bgp group " << group << " fabric-color " << c.color() << "\n";
    for (const auto& nh : c.next_hops()) {
      if (!color_of.emplace(nh, c.color()).second) {
        o << "# " << nh << " is already in color " << color_of[nh]
          << ": a session has one fabric color\n";
        continue;
      }
      const Neighbor* n = view.Find(nh);
      std::string addr = n && !n->router_id.empty() ? n->router_id : "<" + nh + ">";
      o << "set protocols bgp group " << group << " neighbor " << addr << " description \"" << nh
        << " via " << view.InterfaceTo(nh) << "\"  # address: router id (UNVERIFIED)\n";
      if (n && n->asn) {
        o << "set protocols bgp group " << group << " neighbor " << addr << " peer-as " << n->asn
          << "\n";
      }
    }
  }
  for (const auto& r : s.routes()) {
    const bool split = IsSplitRoute(r);
    std::string what = r.destination() + " tc " + std::to_string(r.traffic_class()) +
                       (split ? " qp " + DestQp(r) : "") +
                       (r.job_id().empty() ? "" : " job " + r.job_id());
    if (r.prefix().empty()) {
      o << "# route to " << what << " has no prefix: not advertised\n";
      continue;
    }
    if (split) {
      o << "# fabric-advertise route " << r.prefix() << " dest-qp " << DestQp(r) << " color "
        << r.color();
      if (r.backup_color()) o << " backup-color " << r.backup_color();
      o << "  # " << what
        << ": split by destination QP, not expressible in BGP-DPF (one color per prefix); "
           "programmed over gNMI\n";
      continue;
    }
    o << "set protocols bgp fabric-advertise route " << r.prefix() << " color " << r.color();
    if (r.backup_color()) o << " backup-color " << r.backup_color();
    o << "  # " << what << "\n";
  }

  // GLB weights: link-bandwidth communities added on import, per neighbor.
  if (s.weights_size()) {
    o << "\n# GLB weights (link bandwidth, " << kBytesPerWeight << " bytes/s per weight unit)\n";
    o << "set protocols bgp multipath\n";
    std::set<uint32_t> values;
    for (const auto& w : s.weights()) {
      for (const auto& [nh, v] : SortedWeights(w)) values.insert(v);
    }
    for (uint32_t v : values) {
      o << "set policy-options community loom-bw-" << v << " members bandwidth:" << view.asn()
        << ":" << static_cast<uint64_t>(v) * kBytesPerWeight << "\n";
    }
    std::map<std::string, std::vector<std::pair<std::string, uint32_t>>> by_neighbor;
    for (const auto& w : s.weights()) {
      const std::string list = "loom-dst-" + w.destination();
      std::vector<std::string> prefixes = PrefixesOf(s, topology, w.destination());
      if (prefixes.empty()) {
        o << "# prefix-list " << list << ": no prefix known for " << w.destination()
          << "; fill from the addressing plan\n";
      }
      for (const auto& p : prefixes) {
        o << "set policy-options prefix-list " << list << " " << p << "\n";
      }
      for (const auto& [nh, v] : SortedWeights(w)) by_neighbor[nh].push_back({w.destination(), v});
    }
    for (const auto& [nh, entries] : by_neighbor) {
      const std::string pol = "loom-glb-from-" + nh;
      for (const auto& [dst, v] : entries) {
        o << "set policy-options policy-statement " << pol << " term " << dst
          << " from prefix-list loom-dst-" << dst << "\n";
        o << "set policy-options policy-statement " << pol << " term " << dst
          << " then community add loom-bw-" << v << "\n";
      }
      const Neighbor* n = view.Find(nh);
      std::string addr = n && !n->router_id.empty() ? n->router_id : "<" + nh + ">";
      auto c = color_of.find(nh);
      std::string group =
          c == color_of.end() ? "loom-fabric" : "loom-color-" + std::to_string(c->second);
      o << "set protocols bgp group " << group << " neighbor " << addr << " import " << pol << "\n";
    }
  }

  if (s.alb_tables_size() || s.spray_rules_size() || s.thresholds_size()) {
    o << "\n# Not expressible as generic Junos statements (programmed over gNMI):\n";
  }
  for (const auto& a : s.alb_tables()) {
    o << "# alb group " << a.group() << ": " << a.buckets_size() << " buckets, " << BucketShares(a)
      << "\n";
  }
  for (const auto& r : s.spray_rules()) {
    o << "# spray traffic-class " << r.traffic_class() << " qp " << QpRange(r) << " per packet\n";
  }
  for (const auto& t : s.thresholds()) {
    o << "# thresholds " << (t.interface().empty() ? "all interfaces" : t.interface())
      << " priority " << t.priority() << ": ecn kmin " << t.ecn_kmin_bytes() << " kmax "
      << t.ecn_kmax_bytes() << " pmax " << t.ecn_pmax_percent() << "%, pfc xoff "
      << t.pfc_xoff_bytes() << " xon " << t.pfc_xon_bytes() << " bytes\n";
  }
  return o.str();
}

}  // namespace loom::southbound::render
