// The "sonic" platform adapter: CONFIG_DB rows written through SONiC's gNMI
// server, origin `sonic-db`, paths /CONFIG_DB/localhost/<TABLE>/<key>, each
// value the row's fields as CONFIG_DB strings (platforms.md §1: Set needs
// --gnmi_native_write; the server YANG-validates). Each row is also written as
// the typed RFC 7951 entry of its SONiC YANG module, which the tests check
// with yanglint (reference/yang/validate.sh sonic).
//
// Mapping (southbound/README.md "Platform adapters" has the table):
// - colors + routes -> STATIC_ROUTE|<vrf>|<prefix>: `nexthop` = the
//   addresses of the route color's next hops (AdapterContext::
//   next_hop_addresses), `ifname` = the local interface towards each (from
//   the topology), comma lists = ECMP (sonic-static-route.yang). VALIDATED.
//   A static route matches the prefix only: routes split by destination QP
//   are refused (named), a traffic class other than 0 and the backup color
//   are reported as partial, and two routes of one prefix with different
//   colors are refused.
// - GLB weights: STATIC_ROUTE has no weight: refused.
// - dlb -> ARS_PROFILE|loom (ewma, interface path selector), ARS_OBJECT|loom
//   (assign_mode per_flowlet_quality|per_packet_quality, flowlet_idle_time
//   µs, 2..2047), ARS_INTERFACE|<fabric port> (ars_obj_name loom). VALIDATED
//   against sonic-ars.yang from unmerged PR sonic-net/sonic-buildimage#22264.
//   Mode static -> deletes of those rows; assigned-flow refused; quality-band
//   knobs (load weight, thresholds) reported as not expressed.
// - thresholds (ECN) -> WRED_PROFILE|LOOM_ECN_<n> (green thresholds, ecn
//   green, drop probability = pmax) VALIDATED, bound with an update of
//   QUEUE|<port>|<priority> wred_profile (UNVERIFIED: sonic-queue.yang is not
//   in reference/yang). PFC xoff/xon are refused: they live in
//   BUFFER_PROFILE / BUFFER_PG, which SONiC's buffer manager owns.
// - pfc_watchdog -> PFC_WD|GLOBAL (POLL_INTERVAL) and PFC_WD|<port> (action,
//   detection_time, restoration_time). VALIDATED (sonic-pfcwd.yang).
// - disabled_interfaces -> update PORT|<port> admin_status down. SOURCED
//   (sonic-port.yang leaf; not validated alone: PORT rows need lanes/speed).
// - alb_tables, spray_rules: no table: refused.
//
// Read back: ARS_OBJECT|loom -> dlb mode and inactivity; PFC_WD -> the
// watchdog. Static routes carry no color, so routes are not read back.
//
// Role, trigger, thread: see set_adapter.h (immutable, const methods).
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "southbound/gnmi/adapter_util.h"
#include "southbound/gnmi/gnmi_config.h"
#include "southbound/gnmi/set_adapter.h"
#include "southbound/wire/device_state_util.h"

namespace loom::southbound::gnmi {

namespace v1 = loom::v1;
using adapter::JsonObject;
using adapter::Quote;
using adapter::Refuse;

namespace {

constexpr char kSonicOrigin[] = "sonic-db";
constexpr char kLoomName[] = "loom";
constexpr uint64_t kMinFlowletUs = 2, kMaxFlowletUs = 2047;  // sonic-ars.yang

// How a field is typed in the YANG module (CONFIG_DB always stores strings).
enum class Kind { kString, kNumber, kNumber64, kBool };

struct Field {
  std::string name;
  std::string value;
  Kind kind = Kind::kString;
};

// One CONFIG_DB row and its YANG list entry.
struct Row {
  std::string table;
  std::vector<std::pair<std::string, std::string>> keys;  // YANG key leaf -> value
  std::vector<Field> fields;
  std::string module;  // "sonic-pfcwd"
  std::string list;    // "PFC_WD_LIST"

  std::string Key() const {
    std::string k;
    for (size_t i = 0; i < keys.size(); ++i) k += (i ? "|" : "") + keys[i].second;
    return k;
  }
  ::gnmi::Path DbPath() const {
    return adapter::MakePath({{"CONFIG_DB", {}}, {"localhost", {}}, {table, {}}, {Key(), {}}});
  }
  // CONFIG_DB form: every value a string.
  std::string DbJson() const {
    JsonObject o;
    for (const auto& f : fields) o.Str(f.name, f.value);
    return o.str();
  }
  // RFC 7951 form: integers up to 32 bits as numbers, 64-bit as strings.
  YangEntry Yang() const {
    JsonObject o;
    for (const auto& [k, v] : keys) o.Str(k, v);
    for (const auto& f : fields) {
      switch (f.kind) {
        case Kind::kNumber:
          o.Raw(f.name, f.value);
          break;
        case Kind::kBool:
          o.Raw(f.name, f.value == "true" ? "true" : "false");
          break;
        default:
          o.Str(f.name, f.value);
      }
    }
    return {{module + ":" + module, table, list}, o.str()};
  }
};

std::string Num(uint64_t v) { return std::to_string(v); }

class SonicAdapter final : public SetAdapter {
 public:
  SonicAdapter() {
    caps_.colored_routes = true;
    caps_.colored_routes_how =
        "STATIC_ROUTE per prefix, ECMP over the color's next-hop addresses (comma lists)";
    caps_.dlb_mode = true;
    caps_.dlb_timers = true;
    caps_.ecn_thresholds = true;
    caps_.pfc_watchdog = true;
    caps_.disable_interfaces = true;
    caps_.read_back = true;
  }

  std::string Name() const override { return "sonic"; }
  const SetCapabilities& capabilities() const override { return caps_; }

  AdapterOutput Encode(const v1::DeviceState& in, const AdapterContext& ctx) const override {
    AdapterOutput out;
    const v1::DeviceState desired = Canonical(in);
    adapter::TopologyView topo(ctx.topology, desired.device());
    auto* prefix = out.request.mutable_prefix();
    prefix->set_origin(kSonicOrigin);
    std::set<std::string> ports_used;
    Routes(desired, ctx, topo, &out);
    Dlb(desired, topo, &out, &ports_used);
    Thresholds(desired, topo, &out);
    Watchdog(desired, topo, &out, &ports_used);
    for (const auto& i : desired.disabled_interfaces()) {
      Row r{"PORT", {{"name", i}}, {{"admin_status", "down"}}, "sonic-port", "PORT_LIST"};
      SetBlock b = Block("disabled_interfaces", r, Mark::kSourced);
      b.source = "sonic-port.yang leaf admin_status (reference/yang)";
      b.note =
          "update (merge): the PORT row's other fields stay; not validated alone (PORT needs "
          "lanes and speed); re-enabling a port Loom no longer lists is not sent";
      b.updates.push_back(out.request.update_size());
      adapter::AddJson(out.request.add_update(), r.DbPath(), r.DbJson());
      out.blocks.push_back(std::move(b));
    }
    for (const auto& t : desired.alb_tables())
      Refuse(&out, "alb_tables", t.group(),
             Status(StatusCode::kUnimplemented, "SONiC has no CONFIG_DB table for ALB buckets"));
    for (const auto& s : desired.spray_rules())
      Refuse(&out, "spray_rules", "traffic-class " + Num(s.traffic_class()),
             Status(StatusCode::kUnimplemented,
                    "SONiC has no CONFIG_DB table for per-class selective spraying"));
    // PORT rows the YANG document needs for the ports ARS_INTERFACE / PFC_WD name.
    int lane = 0;
    for (const auto& p : ports_used) {
      int64_t bps = topo.PortCapacity(p);
      uint64_t mbps = bps > 0 ? static_cast<uint64_t>(bps / 1000000) : 100000;
      std::string lanes;
      for (int i = 0; i < 4; ++i) lanes += (i ? "," : "") + std::to_string(lane++);
      Row r{"PORT",
            {{"name", p}},
            {{"lanes", lanes}, {"speed", Num(mbps), Kind::kNumber}},
            "sonic-port",
            "PORT_LIST"};
      out.yang_context.push_back(r.Yang());
    }
    return out;
  }

  ::gnmi::GetRequest MakeGetRequest(const AdapterContext&) const override {
    ::gnmi::GetRequest req;
    req.mutable_prefix()->set_origin(kSonicOrigin);
    for (const char* t :
         {"STATIC_ROUTE", "ARS_PROFILE", "ARS_OBJECT", "ARS_INTERFACE", "PFC_WD", "WRED_PROFILE"})
      *req.add_path() = adapter::MakePath({{"CONFIG_DB", {}}, {"localhost", {}}, {t, {}}});
    req.set_encoding(::gnmi::JSON_IETF);
    return req;
  }

  Status ReadBack(const ::gnmi::GetResponse& response, const AdapterContext&,
                  v1::DeviceState* state) const override {
    v1::DeviceState s;
    s.set_device(state->device());
    std::map<std::string, std::string> wd_global;
    for (const auto& n : response.notification()) {
      for (const auto& u : n.update()) {
        ::gnmi::Path full = n.prefix();
        for (const auto& e : u.path().elem()) *full.add_elem() = e;
        if (full.elem_size() < 3) continue;
        const std::string& table = full.elem(2).name();
        google::protobuf::Struct v;
        if (!google::protobuf::util::JsonStringToMessage(adapter::ValueJson(u.val()), &v).ok())
          return InvalidArgument(table + ": value is not a JSON object");
        // Either the whole table ({key: {field: value}}) or one row.
        std::map<std::string, google::protobuf::Struct> rows;
        if (full.elem_size() >= 4) {
          rows[full.elem(3).name()] = v;
        } else {
          for (const auto& [k, row] : v.fields())
            if (row.has_struct_value()) rows[k] = row.struct_value();
        }
        auto str = [](const google::protobuf::Struct& r, const char* f) -> std::string {
          auto it = r.fields().find(f);
          if (it == r.fields().end()) return "";
          if (it->second.has_string_value()) return it->second.string_value();
          if (it->second.has_number_value())
            return std::to_string(static_cast<uint64_t>(it->second.number_value()));
          return "";
        };
        for (const auto& [key, row] : rows) {
          if (table == "ARS_OBJECT" && key == kLoomName) {
            auto* d = s.mutable_dlb();
            std::string mode = str(row, "assign_mode");
            d->set_mode(mode == "per_flowlet_quality"  ? v1::DLB_MODE_FLOWLET
                        : mode == "per_packet_quality" ? v1::DLB_MODE_PER_PACKET
                                                       : v1::DLB_MODE_UNSPECIFIED);
            std::string idle = str(row, "flowlet_idle_time");
            if (!idle.empty()) d->set_inactivity_interval_ns(std::stoull(idle) * 1000);
          } else if (table == "PFC_WD" && key == "GLOBAL") {
            std::string p = str(row, "POLL_INTERVAL");
            if (!p.empty()) s.mutable_pfc_watchdog()->set_poll_interval_ms(std::stoul(p));
          } else if (table == "PFC_WD") {
            auto* w = s.mutable_pfc_watchdog();
            w->add_interfaces(key);
            std::string a = str(row, "action");
            w->set_action(a == "drop"      ? v1::PFC_WATCHDOG_ACTION_DROP
                          : a == "forward" ? v1::PFC_WATCHDOG_ACTION_FORWARD
                          : a == "alert"   ? v1::PFC_WATCHDOG_ACTION_ALERT
                                           : v1::PFC_WATCHDOG_ACTION_UNSPECIFIED);
            std::string dt = str(row, "detection_time"), rt = str(row, "restoration_time");
            if (!dt.empty()) w->set_detection_time_ms(std::stoul(dt));
            if (!rt.empty()) w->set_restoration_time_ms(std::stoul(rt));
          }
        }
      }
    }
    *state = std::move(s);
    return Status::Ok();
  }

 private:
  static SetBlock Block(const char* part, const Row& r, Mark mark) {
    SetBlock b;
    b.part = part;
    b.title = r.table + "|" + r.Key();
    b.mark = mark;
    if (mark == Mark::kValidated) b.yang.push_back(r.Yang());
    return b;
  }

  static void Replace(const Row& r, SetBlock* b, AdapterOutput* out) {
    b->replaces.push_back(out->request.replace_size());
    adapter::AddJson(out->request.add_replace(), r.DbPath(), r.DbJson());
  }

  void Routes(const v1::DeviceState& s, const AdapterContext& ctx,
              const adapter::TopologyView& topo, AdapterOutput* out) const {
    for (const auto& w : s.weights())
      Refuse(out, "weights", w.destination(),
             Status(StatusCode::kUnimplemented,
                    "SONiC STATIC_ROUTE has no next-hop weight (no weighted ECMP)"));
    std::map<uint32_t, const v1::ColorGroup*> colors;
    for (const auto& c : s.colors()) colors[c.color()] = &c;
    // prefix -> (color, first route naming it)
    std::map<std::string, std::pair<uint32_t, std::string>> by_prefix;
    for (const auto& r : s.routes()) {
      std::string name = r.destination() + " class " + Num(r.traffic_class());
      if (IsSplitRoute(r)) {
        Refuse(
            out, "routes", name + " qp " + Num(r.qp_value()) + "/" + Num(r.qp_mask()),
            InvalidArgument("routes split by destination QP cannot be expressed on sonic: " +
                            r.destination() + " qp " + Num(r.qp_value()) + "/" + Num(r.qp_mask()) +
                            " (STATIC_ROUTE matches the destination prefix only)"));
        continue;
      }
      if (r.prefix().empty()) {
        Refuse(out, "routes", name,
               InvalidArgument("route to " + r.destination() + " has no prefix"));
        continue;
      }
      auto cit = colors.find(r.color());
      if (cit == colors.end() || cit->second->next_hops().empty()) {
        Refuse(out, "routes", name,
               InvalidArgument("color " + Num(r.color()) + " of the route to " + r.destination() +
                               " has no next hops on " + s.device()));
        continue;
      }
      auto [it, fresh] = by_prefix.emplace(r.prefix(), std::make_pair(r.color(), name));
      if (!fresh) {
        if (it->second.first != r.color())
          Refuse(
              out, "routes", name,
              InvalidArgument("route to " + r.prefix() + " with color " + Num(r.color()) +
                              " conflicts with " + it->second.second + " (color " +
                              Num(it->second.first) + "): SONiC has one STATIC_ROUTE per prefix"));
        continue;
      }
      std::vector<std::string> hops, ifs;
      std::string missing;
      for (const auto& nh : cit->second->next_hops()) {
        auto a = ctx.next_hop_addresses.find(nh);
        if (a == ctx.next_hop_addresses.end() || a->second.empty()) {
          missing += (missing.empty() ? "" : ", ") + nh;
          continue;
        }
        hops.push_back(a->second);
        auto local = topo.InterfacesTo(nh);
        ifs.push_back(local.empty() ? "" : local.front());
      }
      if (!missing.empty()) {
        Refuse(out, "routes", name,
               InvalidArgument("next hop(s) " + missing + " of color " + Num(r.color()) +
                               " have no address (inventory BGP session next_hop)"));
        by_prefix.erase(it);
        continue;
      }
      bool all_ifs = std::find(ifs.begin(), ifs.end(), "") == ifs.end();
      Row row{"STATIC_ROUTE",
              {{"vrf_name", ctx.vrf}, {"prefix", r.prefix()}},
              {{"nexthop", Join(hops)}},
              "sonic-static-route",
              "STATIC_ROUTE_LIST"};
      if (all_ifs) row.fields.push_back({"ifname", Join(ifs)});
      SetBlock b = Block("routes", row, Mark::kValidated);
      b.source = "sonic-static-route.yang (reference/yang); platforms.md §1 (origin sonic-db)";
      b.note = "color " + Num(r.color()) + " -> ECMP over " + Join(cit->second->next_hops());
      if (!all_ifs) b.note += "; no interface names (topology), ifname omitted";
      Replace(row, &b, out);
      out->blocks.push_back(std::move(b));
      if (r.backup_color() != 0)
        Refuse(out, "routes", name,
               Status(StatusCode::kUnimplemented,
                      "backup color " + Num(r.backup_color()) +
                          " not expressed: a static route has no fallback next-hop set"),
               true);
      if (r.traffic_class() != 0)
        Refuse(out, "routes", name,
               Status(StatusCode::kUnimplemented,
                      "traffic class " + Num(r.traffic_class()) +
                          " not distinguished: the static route carries every class"),
               true);
    }
  }

  static std::string Join(const google::protobuf::RepeatedPtrField<std::string>& v) {
    return Join(std::vector<std::string>(v.begin(), v.end()));
  }
  static std::string Join(const std::vector<std::string>& v) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + v[i];
    return out;
  }

  void Dlb(const v1::DeviceState& s, const adapter::TopologyView& topo, AdapterOutput* out,
           std::set<std::string>* ports_used) const {
    if (!s.has_dlb() || s.dlb().mode() == v1::DLB_MODE_UNSPECIFIED) return;
    const auto& d = s.dlb();
    const char* ars_source =
        "sonic-ars.yang from unmerged PR sonic-net/sonic-buildimage#22264 (reference/yang "
        "pr-22264, revision 2025-10-30); platforms.md §1";
    if (d.mode() == v1::DLB_MODE_STATIC) {
      SetBlock b;
      b.part = "dlb";
      b.title = "ARS off (static hashing): delete Loom's ARS rows";
      b.mark = Mark::kSourced;
      b.source = ars_source;
      std::vector<::gnmi::Path> dels;
      for (const auto& p : topo.fabric_ports())
        dels.push_back(Row{"ARS_INTERFACE", {{"if_name", p}}, {}, "", ""}.DbPath());
      dels.push_back(Row{"ARS_PROFILE", {{"profile_name", kLoomName}}, {}, "", ""}.DbPath());
      dels.push_back(Row{"ARS_OBJECT", {{"ars_obj_name", kLoomName}}, {}, "", ""}.DbPath());
      for (auto& p : dels) {
        b.deletes.push_back(out->request.delete__size());
        *out->request.add_delete_() = std::move(p);
      }
      out->blocks.push_back(std::move(b));
      return;
    }
    if (d.mode() != v1::DLB_MODE_FLOWLET && d.mode() != v1::DLB_MODE_PER_PACKET) {
      Refuse(out, "dlb", DlbModeName(d.mode()),
             Status(StatusCode::kUnimplemented,
                    std::string("DLB mode ") + DlbModeName(d.mode()) +
                        " has no ARS assign_mode (per_flowlet_quality, per_packet_quality)"));
      return;
    }
    Row obj{"ARS_OBJECT",
            {{"ars_obj_name", kLoomName}},
            {{"assign_mode",
              d.mode() == v1::DLB_MODE_FLOWLET ? "per_flowlet_quality" : "per_packet_quality"}},
            "sonic-ars",
            "ARS_OBJECT_LIST"};
    if (d.mode() == v1::DLB_MODE_FLOWLET && d.inactivity_interval_ns() != 0) {
      uint64_t us = (d.inactivity_interval_ns() + 500) / 1000;
      if (us < kMinFlowletUs || us > kMaxFlowletUs) {
        Refuse(out, "dlb", "inactivity_interval_ns",
               InvalidArgument("flowlet inactivity " + Num(d.inactivity_interval_ns()) +
                               " ns is outside SONiC ARS flowlet_idle_time " + Num(kMinFlowletUs) +
                               ".." + Num(kMaxFlowletUs) + " us"));
        return;
      }
      if (d.inactivity_interval_ns() % 1000 != 0)
        Refuse(out, "dlb", "inactivity_interval_ns",
               Status(StatusCode::kUnimplemented,
                      "rounded to " + Num(us) + " us (flowlet_idle_time is in us)"),
               true);
      obj.fields.push_back({"flowlet_idle_time", Num(us), Kind::kNumber});
    }
    if (d.load_weight_percent() != 0 || d.load_thresholds_percent_size() != 0 ||
        d.queue_thresholds_bytes_size() != 0)
      Refuse(out, "dlb", "quality bands",
             Status(StatusCode::kUnimplemented,
                    "load weight and load/queue thresholds have no ARS field with a documented "
                    "meaning; the platform's quality defaults apply"),
             true);
    Row prof{"ARS_PROFILE",
             {{"profile_name", kLoomName}},
             {{"algorithm", "ewma"},
              {"ars_nhg_path_selector_mode", "interface"},
              {"default_ars_object", kLoomName},
              {"ipv4_enable", "true", Kind::kBool},
              {"ipv6_enable", "true", Kind::kBool}},
             "sonic-ars",
             "ARS_PROFILE_LIST"};
    SetBlock pb = Block("dlb", prof, Mark::kValidated);
    pb.source = ars_source;
    pb.note = "ARS_PROFILE holds at most one entry: a device with another profile rejects it";
    Replace(prof, &pb, out);
    out->blocks.push_back(std::move(pb));
    SetBlock ob = Block("dlb", obj, Mark::kValidated);
    ob.source = ars_source;
    Replace(obj, &ob, out);
    out->blocks.push_back(std::move(ob));
    if (topo.fabric_ports().empty()) {
      Refuse(out, "dlb", "ARS_INTERFACE",
             InvalidArgument("no fabric ports known for " + s.device() +
                             " (topology): ARS is enabled on no interface"),
             true);
      return;
    }
    for (const auto& p : topo.fabric_ports()) {
      ports_used->insert(p);
      Row i{"ARS_INTERFACE",
            {{"if_name", p}},
            {{"ars_obj_name", kLoomName}},
            "sonic-ars",
            "ARS_INTERFACE_LIST"};
      SetBlock ib = Block("dlb", i, Mark::kValidated);
      ib.source = ars_source;
      Replace(i, &ib, out);
      out->blocks.push_back(std::move(ib));
    }
  }

  void Thresholds(const v1::DeviceState& s, const adapter::TopologyView& topo,
                  AdapterOutput* out) const {
    std::map<std::tuple<uint64_t, uint64_t, uint32_t>, std::string> profiles;
    for (const auto& t : s.thresholds()) {
      std::string name =
          (t.interface().empty() ? "every port" : t.interface()) + " priority " + Num(t.priority());
      if (t.pfc_xoff_bytes() != 0 || t.pfc_xon_bytes() != 0)
        Refuse(out, "thresholds", name,
               Status(StatusCode::kUnimplemented,
                      "PFC xoff/xon live in BUFFER_PROFILE/BUFFER_PG, which SONiC's buffer "
                      "manager owns; Loom does not rewrite them"),
               true);
      if (t.ecn_kmin_bytes() == 0 && t.ecn_kmax_bytes() == 0 && t.ecn_pmax_percent() == 0) continue;
      std::vector<std::string> ports;
      if (t.interface().empty()) {
        ports = topo.ports();
        if (ports.empty()) {
          Refuse(out, "thresholds", name,
                 InvalidArgument("every-port thresholds need the device's ports (topology)"));
          continue;
        }
      } else {
        ports.push_back(t.interface());
      }
      auto key = std::make_tuple(t.ecn_kmin_bytes(), t.ecn_kmax_bytes(), t.ecn_pmax_percent());
      auto it = profiles.find(key);
      if (it == profiles.end()) {
        std::string pname = "LOOM_ECN_" + Num(profiles.size());
        it = profiles.emplace(key, pname).first;
        Row w{"WRED_PROFILE",
              {{"name", pname}},
              {{"ecn", "ecn_green"},
               {"wred_green_enable", "true", Kind::kBool},
               {"green_min_threshold", Num(t.ecn_kmin_bytes()), Kind::kNumber64},
               {"green_max_threshold", Num(t.ecn_kmax_bytes()), Kind::kNumber64},
               {"green_drop_probability", Num(t.ecn_pmax_percent()), Kind::kNumber64}},
              "sonic-wred-profile",
              "WRED_PROFILE_LIST"};
        SetBlock b = Block("thresholds", w, Mark::kValidated);
        b.source = "sonic-wred-profile.yang (reference/yang)";
        b.note = "ECN marking for green (RoCE) traffic from kmin to kmax, pmax at kmax";
        Replace(w, &b, out);
        out->blocks.push_back(std::move(b));
      }
      for (const auto& p : ports) {
        Row q{"QUEUE",
              {{"ifname", p}, {"qindex", Num(t.priority())}},
              {{"wred_profile", it->second}},
              "",
              ""};
        SetBlock b = Block("thresholds", q, Mark::kUnverified);
        b.note =
            "update (merge) of the queue's wred_profile; queue index = priority; the QUEUE "
            "table's YANG (sonic-queue.yang) is not in reference/yang";
        b.updates.push_back(out->request.update_size());
        adapter::AddJson(out->request.add_update(), q.DbPath(), q.DbJson());
        out->blocks.push_back(std::move(b));
      }
    }
  }

  void Watchdog(const v1::DeviceState& s, const adapter::TopologyView& topo, AdapterOutput* out,
                std::set<std::string>* ports_used) const {
    if (!s.has_pfc_watchdog()) return;
    const auto& w = s.pfc_watchdog();
    const char* source = "sonic-pfcwd.yang (reference/yang); platforms.md §1";
    auto range = [&](const char* what, uint32_t v, uint32_t lo, uint32_t hi) {
      if (v >= lo && v <= hi) return true;
      Refuse(out, "pfc_watchdog", what,
             InvalidArgument(std::string(what) + " " + Num(v) + " ms is outside SONiC PFC_WD " +
                             Num(lo) + ".." + Num(hi) + " ms"));
      return false;
    };
    bool ok = true;
    if (w.poll_interval_ms() != 0) ok &= range("poll_interval", w.poll_interval_ms(), 100, 1000);
    ok &= range("detection_time", w.detection_time_ms(), 100, 5000);
    ok &= range("restoration_time", w.restoration_time_ms(), 100, 60000);
    if (ok && w.poll_interval_ms() != 0 &&
        (w.detection_time_ms() < w.poll_interval_ms() ||
         w.restoration_time_ms() < w.poll_interval_ms())) {
      Refuse(out, "pfc_watchdog", "",
             InvalidArgument("detection and restoration time must be >= the poll interval"));
      ok = false;
    }
    std::vector<std::string> ports(w.interfaces().begin(), w.interfaces().end());
    if (ports.empty()) ports = topo.ports();
    if (ports.empty()) {
      Refuse(out, "pfc_watchdog", "",
             InvalidArgument("watchdog on every port needs the device's ports (topology)"));
      ok = false;
    }
    if (!ok) return;
    if (w.poll_interval_ms() != 0) {
      Row g{"PFC_WD",
            {{"ifname", "GLOBAL"}},
            {{"POLL_INTERVAL", Num(w.poll_interval_ms()), Kind::kNumber}},
            "sonic-pfcwd",
            "PFC_WD_LIST"};
      SetBlock b = Block("pfc_watchdog", g, Mark::kValidated);
      b.source = source;
      Replace(g, &b, out);
      out->blocks.push_back(std::move(b));
    }
    const char* action = w.action() == v1::PFC_WATCHDOG_ACTION_FORWARD ? "forward"
                         : w.action() == v1::PFC_WATCHDOG_ACTION_ALERT ? "alert"
                                                                       : "drop";
    for (const auto& p : ports) {
      ports_used->insert(p);
      Row r{"PFC_WD",
            {{"ifname", p}},
            {{"action", action},
             {"detection_time", Num(w.detection_time_ms()), Kind::kNumber},
             {"restoration_time", Num(w.restoration_time_ms()), Kind::kNumber}},
            "sonic-pfcwd",
            "PFC_WD_LIST"};
      SetBlock b = Block("pfc_watchdog", r, Mark::kValidated);
      b.source = source;
      Replace(r, &b, out);
      out->blocks.push_back(std::move(b));
    }
  }

  SetCapabilities caps_;
};

}  // namespace

std::unique_ptr<SetAdapter> MakeSonicAdapter() { return std::make_unique<SonicAdapter>(); }

}  // namespace loom::southbound::gnmi
