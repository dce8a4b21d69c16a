// SONiC rendering: CONFIG_DB JSON (as in /etc/sonic/config_db.json; every
// value a string, keys "TABLE|key").
// - ARS (SONiC's Adaptive Routing and Switching HLD; field names as in
//   sonic-swss arsorch): ARS_PROFILE|loom {algorithm ewma, max_flows,
//   sampling_interval}, ARS_INTERFACE|<if> (the fabric ports),
//   ARS_OBJECT|loom {profile_name, assign_mode per_flowlet_quality |
//   per_packet, flowlet_idle_time (microseconds), max_flows},
//   ARS_NEXTHOP_GROUP|<destination> {ars_object, ifname} (UNVERIFIED: table
//   and field names of the per-group binding vary between SONiC branches).
// - Thresholds: WRED_PROFILE (ecn, green_min/max_threshold,
//   green_drop_probability, wred_green_enable), QUEUE|<if>|<q>
//   {wred_profile}, BUFFER_PROFILE {xoff, xon, pool} and BUFFER_PG|<if>|<pg>
//   {profile} (UNVERIFIED: pool name, profile reference form).
// - LOOM_* tables for what SONiC has no table for (colors, colored routes,
//   GLB weights, ALB tables, spray rules, quality thresholds); a Loom agent
//   or the gNMI path programs them. LOOM_COLORED_ROUTE is keyed
//   "<destination>|<class>", and "<destination>|<class>|<qp value>/<qp mask>"
//   for a route split by destination QP (fields qp_mask, qp_value too).
// assigned-flow maps to assign_mode "fixed" (SAI_ARS_MODE_FIXED; UNVERIFIED
// in CONFIG_DB). DLB static renders no ARS tables.
#include <map>
#include <sstream>

#include "southbound/gnmi/gnmi_config.h"
#include "southbound/render/device_view.h"
#include "southbound/render/render.h"
#include "southbound/render/render_util.h"

namespace loom::southbound::render {
namespace {

using Fields = std::map<std::string, std::string>;
using Table = std::map<std::string, Fields>;
using Db = std::map<std::string, Table>;

void Quote(const std::string& s, std::ostringstream& o) {
  o << '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o << '\\' << c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      o << buf;
    } else {
      o << c;
    }
  }
  o << '"';
}

std::string Write(const Db& db) {
  std::ostringstream o;
  o << "{";
  bool first_table = true;
  for (const auto& [table, rows] : db) {
    o << (first_table ? "\n" : ",\n") << "    ";
    first_table = false;
    Quote(table, o);
    o << ": {";
    bool first_row = true;
    for (const auto& [key, fields] : rows) {
      o << (first_row ? "\n" : ",\n") << "        ";
      first_row = false;
      Quote(key, o);
      o << ": {";
      bool first_field = true;
      for (const auto& [f, v] : fields) {
        o << (first_field ? "\n" : ",\n") << "            ";
        first_field = false;
        Quote(f, o);
        o << ": ";
        Quote(v, o);
      }
      o << "\n        }";
    }
    o << "\n    }";
  }
  o << "\n}\n";
  return o.str();
}

std::string Ifnames(const DeviceView& view, const std::vector<std::string>& devices) {
  std::vector<std::string> out;
  for (const auto& d : devices) out.push_back(view.InterfaceTo(d));
  return Join(out, ",");
}

}  // namespace

std::string RenderSonic(const loom::v1::DeviceState& in, const loom::v1::Topology& topology) {
  const loom::v1::DeviceState s = gnmi::Canonical(in);
  DeviceView view(s.device(), topology);
  Db db;
  db["LOOM_META"]["loom"] = {{"device", s.device()},
                             {"generation", std::to_string(s.generation())},
                             {"rendered_by", "loom"}};

  bool ars = s.has_dlb() && s.dlb().mode() != loom::v1::DLB_MODE_STATIC;
  if (ars) {
    const auto& d = s.dlb();
    db["ARS_PROFILE"]["loom"] = {{"algorithm", "ewma"},
                                 {"max_flows", "512"},
                                 {"sampling_interval", "16"},
                                 {"ipv4_enable", "true"},
                                 {"ipv6_enable", "true"}};
    for (const auto& i : view.fabric_interfaces()) db["ARS_INTERFACE"][i] = {{"NULL", "NULL"}};
    std::string mode = d.mode() == loom::v1::DLB_MODE_PER_PACKET      ? "per_packet"
                       : d.mode() == loom::v1::DLB_MODE_ASSIGNED_FLOW ? "fixed"
                                                                      : "per_flowlet_quality";
    Fields obj = {{"profile_name", "loom"}, {"assign_mode", mode}, {"max_flows", "512"}};
    if (d.inactivity_interval_ns()) {
      obj["flowlet_idle_time"] = std::to_string(NsToUs(d.inactivity_interval_ns()));
    }
    db["ARS_OBJECT"]["loom"] = obj;
    if (d.load_weight_percent() || d.load_thresholds_percent_size() ||
        d.queue_thresholds_bytes_size()) {
      db["LOOM_DLB_QUALITY"]["loom"] = {
          {"load_weight_percent", std::to_string(d.load_weight_percent())},
          {"load_thresholds_percent", Join(d.load_thresholds_percent(), ",")},
          {"queue_thresholds_bytes", Join(d.queue_thresholds_bytes(), ",")}};
    }
  }

  for (const auto& c : s.colors()) {
    std::vector<std::string> hops(c.next_hops().begin(), c.next_hops().end());
    db["LOOM_COLOR"][std::to_string(c.color())] = {{"nexthop_device", Join(hops, ",")},
                                                   {"ifname", Ifnames(view, hops)}};
  }
  for (const auto& r : s.routes()) {
    Fields f = {{"color", std::to_string(r.color())}};
    if (r.backup_color()) f["backup_color"] = std::to_string(r.backup_color());
    if (!r.prefix().empty()) f["prefix"] = r.prefix();
    if (!r.job_id().empty()) f["job_id"] = r.job_id();
    std::string key = r.destination() + "|" + std::to_string(r.traffic_class());
    if (IsSplitRoute(r)) {
      key += "|" + DestQp(r);
      f["qp_mask"] = std::to_string(r.qp_mask());
      f["qp_value"] = std::to_string(r.qp_value());
    }
    db["LOOM_COLORED_ROUTE"][key] = f;
  }
  for (const auto& w : s.weights()) {
    std::vector<std::string> hops, weights;
    for (const auto& [nh, v] : SortedWeights(w)) {
      hops.push_back(nh);
      weights.push_back(std::to_string(v));
    }
    db["LOOM_GLB_WEIGHT"][w.destination()] = {{"nexthop_device", Join(hops, ",")},
                                              {"ifname", Ifnames(view, hops)},
                                              {"weight", Join(weights, ",")}};
    if (ars) {
      db["ARS_NEXTHOP_GROUP"][w.destination()] = {{"ars_object", "loom"},
                                                  {"ifname", Ifnames(view, hops)}};
    }
  }
  for (const auto& a : s.alb_tables()) {
    std::vector<std::string> members(a.buckets().begin(), a.buckets().end());
    db["LOOM_ALB_TABLE"][a.group()] = {{"bucket_count", std::to_string(a.buckets_size())},
                                       {"buckets", Ifnames(view, members)}};
    if (ars && !db["ARS_NEXTHOP_GROUP"].count(a.group())) {
      std::vector<std::string> uniq;
      for (const auto& [m, n] : [&] {
             std::map<std::string, int> c;
             for (const auto& b : members) c[b]++;
             return c;
           }()) {
        uniq.push_back(m);
      }
      db["ARS_NEXTHOP_GROUP"][a.group()] = {{"ars_object", "loom"},
                                            {"ifname", Ifnames(view, uniq)}};
    }
  }
  for (const auto& r : s.spray_rules()) {
    db["LOOM_SPRAY_RULE"][std::to_string(r.traffic_class()) + "|" + std::to_string(r.qp_first())] =
        {{"qp_last", std::to_string(r.qp_last())}, {"assign_mode", "per_packet"}};
  }
  for (const auto& t : s.thresholds()) {
    std::string tag =
        (t.interface().empty() ? "ALL" : t.interface()) + "_" + std::to_string(t.priority());
    std::vector<std::string> ifs;
    if (t.interface().empty()) {
      ifs = view.fabric_interfaces();
      if (ifs.empty()) ifs.push_back("<all-ports>");
    } else {
      ifs.push_back(t.interface());
    }
    std::string q = std::to_string(t.priority());
    if (t.ecn_kmax_bytes()) {
      db["WRED_PROFILE"]["LOOM_ECN_" + tag] = {
          {"ecn", "ecn_all"},
          {"wred_green_enable", "true"},
          {"green_min_threshold", std::to_string(t.ecn_kmin_bytes())},
          {"green_max_threshold", std::to_string(t.ecn_kmax_bytes())},
          {"green_drop_probability", std::to_string(t.ecn_pmax_percent())}};
      for (const auto& i : ifs) db["QUEUE"][i + "|" + q] = {{"wred_profile", "LOOM_ECN_" + tag}};
    }
    if (t.pfc_xoff_bytes()) {
      db["BUFFER_PROFILE"]["LOOM_PG_" + tag] = {{"pool", "ingress_lossless_pool"},
                                                {"xoff", std::to_string(t.pfc_xoff_bytes())},
                                                {"xon", std::to_string(t.pfc_xon_bytes())},
                                                {"size", std::to_string(t.pfc_xon_bytes())},
                                                {"dynamic_th", "0"}};
      for (const auto& i : ifs) db["BUFFER_PG"][i + "|" + q] = {{"profile", "LOOM_PG_" + tag}};
    }
  }
  return Write(db);
}

}  // namespace loom::southbound::render
