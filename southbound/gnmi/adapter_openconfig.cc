// The "openconfig" platform adapter: OpenConfig models where they exist
// (origin "openconfig", values JSON_IETF), nothing where they do not
// (platforms.md §0: no OpenConfig model for DLB, ARS or DPF).
//
// Mapping (southbound/README.md "Platform adapters" has the table):
// - colors + routes (+ GLB weights) -> replace of
//   /network-instances/network-instance[name=<vrf>]/protocols/
//   protocol[identifier=STATIC][name=<static_protocol_name>]/static-routes/
//   static[prefix=P]: one next-hop per member of the route's color, index =
//   the neighbor id, next-hop = its address; with a GLB WeightSet for the
//   route's destination (or its egress leaf) each next hop gets
//   `wecmp-weight` (openconfig-local-routing 4.1.0) and next hops the set
//   leaves out are dropped. SOURCED (platforms.md §0; the static-routes tree
//   needs openconfig-network-instance, which reference/yang leaves out, so it
//   cannot be validated here). QP-split routes are refused (named); traffic
//   class and backup color are partial, as for SONiC.
// - thresholds (ECN) -> /qos/queue-management-profiles/
//   queue-management-profile[name=LOOM_ECN_<n>] (wred/uniform: min/max
//   threshold, enable-ecn, max-drop-probability-percent) and an update of
//   /qos/interfaces/interface[interface-id=I]/output/queues/queue[name=P]/
//   config queue-management-profile. VALIDATED (openconfig-qos 2.2.0,
//   yanglint -t config); the queue is named by its priority, which is
//   platform-specific (NC). PFC xoff/xon: no OpenConfig leaf; refused.
// - disabled_interfaces -> update /interfaces/interface[name=I]/config
//   {"enabled": false}. SOURCED (openconfig-interfaces.yang).
// - dlb, alb_tables, spray_rules, pfc_watchdog: no model; refused.
//
// Read back: static routes -> next hops per prefix are readable, but a
// static route carries no color, so ReadBack is UNIMPLEMENTED for now.
//
// Role, trigger, thread: see set_adapter.h (immutable, const methods).
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
using adapter::Elem;
using adapter::JsonObject;
using adapter::Quote;
using adapter::Refuse;

namespace {

constexpr char kOcOrigin[] = "openconfig";

std::string Num(uint64_t v) { return std::to_string(v); }

Status NoModel(const std::string& what) {
  return Status(StatusCode::kUnimplemented,
                "OpenConfig has no model for " + what + " (platforms.md §0)");
}

class OpenConfigAdapter final : public SetAdapter {
 public:
  OpenConfigAdapter() {
    caps_.colored_routes = true;
    caps_.colored_routes_how =
        "network-instance STATIC protocol static route per prefix, one next-hop per color "
        "member (ECMP)";
    caps_.glb_weights = true;  // wecmp-weight on static next hops
    caps_.ecn_thresholds = true;
    caps_.disable_interfaces = true;
  }

  std::string Name() const override { return "openconfig"; }
  const SetCapabilities& capabilities() const override { return caps_; }

  AdapterOutput Encode(const v1::DeviceState& in, const AdapterContext& ctx) const override {
    AdapterOutput out;
    const v1::DeviceState desired = Canonical(in);
    adapter::TopologyView topo(ctx.topology, desired.device());
    out.request.mutable_prefix()->set_origin(kOcOrigin);
    out.request.mutable_prefix()->set_target(ctx.target.empty() ? desired.device() : ctx.target);
    Routes(desired, ctx, topo, &out);
    Thresholds(desired, topo, &out);
    for (const auto& i : desired.disabled_interfaces()) {
      SetBlock b;
      b.part = "disabled_interfaces";
      b.title = "interface " + i + " enabled=false";
      b.mark = Mark::kSourced;
      b.source = "openconfig-interfaces.yang 3.8.1 config/enabled (reference/yang)";
      b.note = "update (merge); re-enabling a port Loom no longer lists is not sent";
      b.updates.push_back(out.request.update_size());
      adapter::AddJson(
          out.request.add_update(),
          adapter::MakePath({{"interfaces", {}}, {"interface", {{"name", i}}}, {"config", {}}}),
          JsonObject().Bool("enabled", false).str());
      out.blocks.push_back(std::move(b));
    }
    if (desired.has_dlb() && desired.dlb().mode() != v1::DLB_MODE_UNSPECIFIED)
      Refuse(&out, "dlb", "", NoModel("DLB / adaptive routing"));
    for (const auto& t : desired.alb_tables())
      Refuse(&out, "alb_tables", t.group(), NoModel("ALB hash-bucket tables"));
    for (const auto& s : desired.spray_rules())
      Refuse(&out, "spray_rules", "traffic-class " + Num(s.traffic_class()),
             NoModel("selective spraying"));
    if (desired.has_pfc_watchdog()) Refuse(&out, "pfc_watchdog", "", NoModel("the PFC watchdog"));
    return out;
  }

  ::gnmi::GetRequest MakeGetRequest(const AdapterContext& ctx) const override {
    ::gnmi::GetRequest req;
    req.mutable_prefix()->set_origin(kOcOrigin);
    req.mutable_prefix()->set_target(ctx.target);
    *req.add_path() = StaticRoutesPath(ctx);
    *req.add_path() = adapter::MakePath({{"qos", {}}, {"queue-management-profiles", {}}});
    req.set_type(::gnmi::GetRequest::CONFIG);
    req.set_encoding(::gnmi::JSON_IETF);
    return req;
  }

  Status ReadBack(const ::gnmi::GetResponse&, const AdapterContext&,
                  v1::DeviceState*) const override {
    return Status(StatusCode::kUnimplemented,
                  "openconfig: static routes carry no color; read-back not implemented");
  }

 private:
  static ::gnmi::Path StaticRoutesPath(const AdapterContext& ctx) {
    return adapter::MakePath(
        {{"network-instances", {}},
         {"network-instance", {{"name", ctx.vrf}}},
         {"protocols", {}},
         {"protocol", {{"identifier", "STATIC"}, {"name", ctx.static_protocol_name}}},
         {"static-routes", {}}});
  }

  void Routes(const v1::DeviceState& s, const AdapterContext& ctx,
              const adapter::TopologyView& topo, AdapterOutput* out) const {
    std::map<uint32_t, const v1::ColorGroup*> colors;
    for (const auto& c : s.colors()) colors[c.color()] = &c;
    std::map<std::string, const v1::WeightSet*> weights;
    for (const auto& w : s.weights()) weights[w.destination()] = &w;
    std::set<std::string> weights_used;
    std::map<std::string, std::pair<uint32_t, std::string>> by_prefix;
    for (const auto& r : s.routes()) {
      std::string name = r.destination() + " class " + Num(r.traffic_class());
      if (IsSplitRoute(r)) {
        Refuse(
            out, "routes", name + " qp " + Num(r.qp_value()) + "/" + Num(r.qp_mask()),
            InvalidArgument("routes split by destination QP cannot be expressed on openconfig: " +
                            r.destination() + " qp " + Num(r.qp_value()) + "/" + Num(r.qp_mask()) +
                            " (a static route matches the destination prefix only)"));
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
      auto [pit, fresh] = by_prefix.emplace(r.prefix(), std::make_pair(r.color(), name));
      if (!fresh) {
        if (pit->second.first != r.color())
          Refuse(out, "routes", name,
                 InvalidArgument("route to " + r.prefix() + " with color " + Num(r.color()) +
                                 " conflicts with " + pit->second.second + " (color " +
                                 Num(pit->second.first) + "): one static route per prefix"));
        continue;
      }
      // GLB weights of the destination, or of its egress leaf.
      const v1::WeightSet* ws = nullptr;
      if (auto w = weights.find(r.destination()); w != weights.end()) {
        ws = w->second;
      } else if (auto w2 = weights.find(topo.LeafOf(r.destination())); w2 != weights.end()) {
        ws = w2->second;
      }
      std::vector<std::string> hops;
      std::string missing;
      for (const auto& nh : cit->second->next_hops()) {
        auto a = ctx.next_hop_addresses.find(nh);
        if (a == ctx.next_hop_addresses.end() || a->second.empty()) {
          missing += (missing.empty() ? "" : ", ") + nh;
          continue;
        }
        JsonObject cfg;
        cfg.Str("index", nh).Str("next-hop", a->second);
        if (ws != nullptr) {
          auto wit = ws->weights().find(nh);
          if (wit == ws->weights().end() || wit->second == 0) continue;  // weight 0: unused
          cfg.Str("wecmp-weight", Num(wit->second));                     // uint64: string
        }
        hops.push_back(JsonObject().Str("index", nh).Raw("config", cfg.str()).str());
      }
      if (!missing.empty() || hops.empty()) {
        Refuse(out, "routes", name,
               InvalidArgument(missing.empty()
                                   ? "no next hop of color " + Num(r.color()) +
                                         " has a weight in " + ws->destination()
                                   : "next hop(s) " + missing + " of color " + Num(r.color()) +
                                         " have no address (inventory BGP session next_hop)"));
        by_prefix.erase(pit);
        continue;
      }
      if (ws != nullptr) weights_used.insert(ws->destination());
      std::string json =
          JsonObject()
              .Str("prefix", r.prefix())
              .Raw("config", JsonObject().Str("prefix", r.prefix()).str())
              .Raw("next-hops", JsonObject().Raw("next-hop", adapter::Array(hops)).str())
              .str();
      ::gnmi::Path path = StaticRoutesPath(ctx);
      auto* e = path.add_elem();
      e->set_name("static");
      (*e->mutable_key())["prefix"] = r.prefix();
      SetBlock b;
      b.part = "routes";
      b.title = "static " + r.prefix() + " (color " + Num(r.color()) +
                (ws != nullptr ? ", weights of " + ws->destination() : "") + ")";
      b.mark = Mark::kSourced;
      b.source =
          "platforms.md §0 (openconfig-local-routing static-routes); wecmp-weight: "
          "openconfig-local-routing.yang 4.1.0";
      b.note =
          "not validated: the static-routes tree needs openconfig-network-instance, not in "
          "reference/yang; next-hop index = neighbor id";
      b.replaces.push_back(out->request.replace_size());
      adapter::AddJson(out->request.add_replace(), path, json);
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
    for (const auto& w : s.weights())
      if (!weights_used.count(w.destination()))
        Refuse(out, "weights", w.destination(),
               InvalidArgument("no static route to " + w.destination() +
                               " (or its NICs) to carry the weights"));
  }

  void Thresholds(const v1::DeviceState& s, const adapter::TopologyView& topo,
                  AdapterOutput* out) const {
    const char* source = "openconfig-qos.yang 2.2.0 (reference/yang)";
    std::map<std::tuple<uint64_t, uint64_t, uint32_t>, std::string> profiles;
    // interface -> (queue name -> profile)
    std::map<std::string, std::map<std::string, std::string>> bindings;
    for (const auto& t : s.thresholds()) {
      std::string name =
          (t.interface().empty() ? "every port" : t.interface()) + " priority " + Num(t.priority());
      if (t.pfc_xoff_bytes() != 0 || t.pfc_xon_bytes() != 0)
        Refuse(out, "thresholds", name,
               Status(StatusCode::kUnimplemented,
                      "OpenConfig has no PFC xoff/xon threshold leaf (platforms.md §0)"),
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
        std::string uniform = JsonObject()
                                  .Str("min-threshold", Num(t.ecn_kmin_bytes()))
                                  .Str("max-threshold", Num(t.ecn_kmax_bytes()))
                                  .Bool("enable-ecn", true)
                                  .Num("max-drop-probability-percent", t.ecn_pmax_percent())
                                  .str();
        std::string entry =
            JsonObject()
                .Str("name", pname)
                .Raw("config", JsonObject().Str("name", pname).str())
                .Raw("wred",
                     JsonObject().Raw("uniform", JsonObject().Raw("config", uniform).str()).str())
                .str();
        SetBlock b;
        b.part = "thresholds";
        b.title = "queue-management-profile " + pname;
        b.mark = Mark::kValidated;
        b.source = source;
        b.replaces.push_back(out->request.replace_size());
        adapter::AddJson(out->request.add_replace(),
                         adapter::MakePath({{"qos", {}},
                                            {"queue-management-profiles", {}},
                                            {"queue-management-profile", {{"name", pname}}}}),
                         entry);
        b.yang.push_back(
            {{"openconfig-qos:qos", "queue-management-profiles", "queue-management-profile"},
             entry});
        out->blocks.push_back(std::move(b));
      }
      for (const auto& p : ports) bindings[p][Num(t.priority())] = it->second;
    }
    for (const auto& [port, queues] : bindings) {
      SetBlock b;
      b.part = "thresholds";
      b.title = "qos interface " + port + " output queues";
      b.mark = Mark::kValidated;
      b.source = source;
      b.note = "update (merge); queue named by priority: platform queue naming is NC";
      // The interface entry's config/interface-id (its key's leafref target):
      // strict targets refuse an entry created without it.
      b.updates.push_back(out->request.update_size());
      adapter::AddJson(out->request.add_update(),
                       adapter::MakePath({{"qos", {}},
                                          {"interfaces", {}},
                                          {"interface", {{"interface-id", port}}},
                                          {"config", {}}}),
                       JsonObject().Str("interface-id", port).str());
      std::vector<std::string> qs;
      for (const auto& [q, prof] : queues) {
        std::string cfg = JsonObject().Str("name", q).Str("queue-management-profile", prof).str();
        b.updates.push_back(out->request.update_size());
        adapter::AddJson(out->request.add_update(),
                         adapter::MakePath({{"qos", {}},
                                            {"interfaces", {}},
                                            {"interface", {{"interface-id", port}}},
                                            {"output", {}},
                                            {"queues", {}},
                                            {"queue", {{"name", q}}},
                                            {"config", {}}}),
                         cfg);
        qs.push_back(JsonObject().Str("name", q).Raw("config", cfg).str());
      }
      b.yang.push_back(
          {{"openconfig-qos:qos", "interfaces", "interface"},
           JsonObject()
               .Str("interface-id", port)
               .Raw("config", JsonObject().Str("interface-id", port).str())
               .Raw("output",
                    JsonObject()
                        .Raw("queues", JsonObject().Raw("queue", adapter::Array(qs)).str())
                        .str())
               .str()});
      out->blocks.push_back(std::move(b));
    }
  }

  SetCapabilities caps_;
};

}  // namespace

std::unique_ptr<SetAdapter> MakeOpenConfigAdapter() {
  return std::make_unique<OpenConfigAdapter>();
}

}  // namespace loom::southbound::gnmi
