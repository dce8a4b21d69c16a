#include "southbound/render/render.h"

#include <algorithm>
#include <map>
#include <set>

#include "southbound/render/device_view.h"
#include "southbound/render/render_util.h"

namespace loom::southbound::render {

const char* VendorName(Vendor v) {
  switch (v) {
    case Vendor::kJunos:
      return "junos";
    case Vendor::kNxos:
      return "nxos";
    case Vendor::kSonic:
      return "sonic";
  }
  return "unknown";
}

bool ParseVendor(std::string_view name, Vendor* v) {
  for (Vendor x : {Vendor::kJunos, Vendor::kNxos, Vendor::kSonic}) {
    if (name == VendorName(x)) {
      *v = x;
      return true;
    }
  }
  return false;
}

std::string Render(const loom::v1::DeviceState& state, const loom::v1::Topology& topology,
                   Vendor vendor) {
  switch (vendor) {
    case Vendor::kJunos:
      return RenderJunos(state, topology);
    case Vendor::kNxos:
      return RenderNxos(state, topology);
    case Vendor::kSonic:
      return RenderSonic(state, topology);
  }
  return "";
}

DeviceView::DeviceView(const std::string& device, const loom::v1::Topology& topology) {
  std::map<std::string, const loom::v1::Device*> devices;
  for (const auto& d : topology.devices()) devices[d.id()] = &d;
  auto self = devices.find(device);
  if (self != devices.end()) {
    known_ = true;
    asn_ = self->second->asn();
    router_id_ = self->second->router_id();
  }
  for (const auto& l : topology.links()) {
    const loom::v1::LinkEndpoint* local = nullptr;
    const loom::v1::LinkEndpoint* remote = nullptr;
    if (l.a().device() == device) {
      local = &l.a();
      remote = &l.b();
    } else if (l.b().device() == device) {
      local = &l.b();
      remote = &l.a();
    } else {
      continue;
    }
    Neighbor n;
    n.interface = local->interface();
    n.device = remote->device();
    n.capacity_bps = l.capacity_bps();
    auto it = devices.find(n.device);
    bool is_switch = true;
    if (it != devices.end()) {
      n.asn = it->second->asn();
      n.router_id = it->second->router_id();
      auto role = it->second->role();
      is_switch = role == loom::v1::DEVICE_ROLE_LEAF || role == loom::v1::DEVICE_ROLE_SPINE ||
                  role == loom::v1::DEVICE_ROLE_SUPER_SPINE;
    }
    if (is_switch) fabric_.push_back(n.interface);
    neighbors_.push_back(std::move(n));
  }
  std::sort(neighbors_.begin(), neighbors_.end(), [](const Neighbor& x, const Neighbor& y) {
    return std::tie(x.interface, x.device) < std::tie(y.interface, y.device);
  });
  std::sort(fabric_.begin(), fabric_.end());
}

std::vector<std::string> DeviceView::InterfacesTo(const std::string& device) const {
  std::vector<std::string> out;
  for (const auto& n : neighbors_) {
    if (n.device == device) out.push_back(n.interface);
  }
  return out;
}

std::string DeviceView::InterfaceTo(const std::string& device) const {
  for (const auto& n : neighbors_) {
    if (n.device == device) return n.interface;
  }
  return "<" + device + ">";
}

const Neighbor* DeviceView::Find(const std::string& device) const {
  for (const auto& n : neighbors_) {
    if (n.device == device) return &n;
  }
  return nullptr;
}

}  // namespace loom::southbound::render

namespace loom::southbound::render {

std::vector<std::pair<std::string, uint32_t>> SortedWeights(const loom::v1::WeightSet& w) {
  std::map<std::string, uint32_t> m(w.weights().begin(), w.weights().end());
  return {m.begin(), m.end()};
}

std::string BucketShares(const loom::v1::AlbTable& a) {
  std::map<std::string, int> n;
  for (const auto& b : a.buckets()) n[b]++;
  std::string out;
  for (const auto& [m, c] : n) {
    if (!out.empty()) out += ", ";
    out += m + " x" + std::to_string(c);
  }
  return out;
}

std::string QpRange(const loom::v1::SprayRule& r) {
  if (r.qp_first() == 0 && r.qp_last() == 0) return "all";
  return std::to_string(r.qp_first()) + "-" + std::to_string(r.qp_last());
}

std::string DestQp(const loom::v1::ColoredRoute& r) {
  return std::to_string(r.qp_value()) + "/" + std::to_string(r.qp_mask());
}

std::vector<std::string> PrefixesOf(const loom::v1::DeviceState& s,
                                    const loom::v1::Topology& topology,
                                    const std::string& destination) {
  std::set<std::string> nics = {destination};
  for (const auto& l : topology.links()) {
    if (l.b().device() == destination) nics.insert(l.a().device());
  }
  std::set<std::string> out;
  for (const auto& r : s.routes()) {
    if (!r.prefix().empty() && nics.count(r.destination())) out.insert(r.prefix());
  }
  return {out.begin(), out.end()};
}

}  // namespace loom::southbound::render
