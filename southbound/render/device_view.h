// What the renderers need to know about one device from the topology: its
// record and its neighbors with the local interface of each link. Internal to
// southbound/render.
#ifndef LOOM_SOUTHBOUND_RENDER_DEVICE_VIEW_H_
#define LOOM_SOUTHBOUND_RENDER_DEVICE_VIEW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "loom/v1/topology.pb.h"

namespace loom::southbound::render {

struct Neighbor {
  std::string interface;  // Local interface.
  std::string device;     // Neighbor device id.
  uint32_t asn = 0;       // 0 when unknown.
  std::string router_id;  // "" when unknown.
  int64_t capacity_bps = 0;
};

class DeviceView {
 public:
  DeviceView(const std::string& device, const loom::v1::Topology& topology);

  bool known() const { return known_; }
  uint32_t asn() const { return asn_; }
  const std::string& router_id() const { return router_id_; }
  // Sorted by interface name.
  const std::vector<Neighbor>& neighbors() const { return neighbors_; }
  // Local interfaces toward `device`, sorted; empty when not adjacent.
  std::vector<std::string> InterfacesTo(const std::string& device) const;
  // The first of them, or "<device>" (a placeholder) when not adjacent.
  std::string InterfaceTo(const std::string& device) const;
  // Neighbor record of `device`; nullptr when not adjacent.
  const Neighbor* Find(const std::string& device) const;
  // Interfaces toward other switches (the ECMP / DLB members), sorted.
  const std::vector<std::string>& fabric_interfaces() const { return fabric_; }

 private:
  bool known_ = false;
  uint32_t asn_ = 0;
  std::string router_id_;
  std::vector<Neighbor> neighbors_;
  std::vector<std::string> fabric_;
};

}  // namespace loom::southbound::render

#endif  // LOOM_SOUTHBOUND_RENDER_DEVICE_VIEW_H_
