// Shared parts of the platform datastores (platform_config.h): device facts
// from the topology, the static-route translation, JSON text.
#include "sim-fabric/platform_config.h"

#include <chrono>
#include <utility>

#include "common/text.h"
#include "southbound/bgp/prefix_plan.h"

namespace loom::sim {

namespace v1 = loom::v1;

DeviceFacts FactsOf(const v1::Topology& topo, const std::string& device,
                    std::shared_ptr<const loom::southbound::bgp::PrefixPlan> plan) {
  DeviceFacts f;
  f.device = device;
  f.plan = std::move(plan);
  for (const auto& l : topo.links()) {
    const v1::LinkEndpoint* mine = nullptr;
    const v1::LinkEndpoint* far = nullptr;
    if (l.a().device() == device) {
      mine = &l.a();
      far = &l.b();
    } else if (l.b().device() == device) {
      mine = &l.b();
      far = &l.a();
    } else {
      continue;
    }
    if (!f.capacity_bps.count(mine->interface())) f.ports.push_back(mine->interface());
    f.capacity_bps[mine->interface()] = l.capacity_bps();
    f.neighbor_of[mine->interface()] = far->device();
  }
  return f;
}

void AddStaticRoutes(const std::map<std::string, StaticRoute>& by_nic, v1::DeviceState* s) {
  std::map<std::set<std::string>, uint32_t> color_of;
  for (const auto& [nic, r] : by_nic) color_of.emplace(r.neighbors, 0);
  uint32_t next = kStaticColorBase;
  for (auto& [hops, color] : color_of) {
    color = next++;
    v1::ColorGroup* g = s->add_colors();
    g->set_color(color);
    for (const auto& h : hops) g->add_next_hops(h);
  }
  for (const auto& [nic, r] : by_nic) {
    v1::ColoredRoute* route = s->add_routes();
    route->set_destination(nic);
    route->set_prefix(r.prefix);
    route->set_color(color_of[r.neighbors]);
    // A static route carries every traffic class: -1 travels as uint32 max
    // (InProcessDriver casts it back), as for BGP-learned routes.
    route->set_traffic_class(static_cast<uint32_t>(-1));
    if (!r.weights.empty()) {
      v1::WeightSet* w = s->add_weights();
      w->set_destination(nic);
      for (const auto& [hop, weight] : r.weights) (*w->mutable_weights())[hop] = weight;
    }
  }
}

namespace {

void Write(const JsonValue& v, std::string* out) {
  switch (v.kind) {
    case JsonValue::Kind::kNull:
      *out += "null";
      return;
    case JsonValue::Kind::kBool:
    case JsonValue::Kind::kNumber:
      *out += v.text;
      return;
    case JsonValue::Kind::kString:
      AppendJsonString(*out, v.text);
      return;
    case JsonValue::Kind::kArray:
      out->push_back('[');
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i > 0) out->push_back(',');
        Write(v.items[i], out);
      }
      out->push_back(']');
      return;
    case JsonValue::Kind::kObject:
      out->push_back('{');
      for (size_t i = 0; i < v.members.size(); ++i) {
        if (i > 0) out->push_back(',');
        AppendJsonString(*out, v.members[i].name);
        out->push_back(':');
        Write(v.members[i].value, out);
      }
      out->push_back('}');
      return;
  }
}

}  // namespace

std::string JsonText(const JsonValue& v) {
  std::string out;
  Write(v, &out);
  return out;
}

int64_t WallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace loom::sim
