#include "api/topology/topology_index.h"

namespace loom::topology {

int SwitchTier(loom::v1::DeviceRole role) {
  switch (role) {
    case loom::v1::DEVICE_ROLE_LEAF:
      return 1;
    case loom::v1::DEVICE_ROLE_SPINE:
      return 2;
    case loom::v1::DEVICE_ROLE_SUPER_SPINE:
      return 3;
    default:
      return 0;
  }
}

TopologyIndex::TopologyIndex(loom::v1::Topology topo) : topo_(std::move(topo)) {
  for (int i = 0; i < topo_.devices_size(); ++i) devices_.emplace(topo_.devices(i).id(), i);
  for (int i = 0; i < topo_.gpus_size(); ++i) gpus_.emplace(topo_.gpus(i).id(), i);
  for (int i = 0; i < topo_.links_size(); ++i) {
    const auto& l = topo_.links(i);
    links_.emplace(l.id(), i);
    links_of_[l.a().device()].push_back(i);
    links_of_[l.b().device()].push_back(i);
    const auto* a = FindDevice(l.a().device());
    const auto* b = FindDevice(l.b().device());
    if (a && b) {
      if (a->role() == loom::v1::DEVICE_ROLE_NIC && b->role() == loom::v1::DEVICE_ROLE_LEAF) {
        nic_leaf_[a->id()] = b->id();
      } else if (b->role() == loom::v1::DEVICE_ROLE_NIC &&
                 a->role() == loom::v1::DEVICE_ROLE_LEAF) {
        nic_leaf_[b->id()] = a->id();
      }
    }
  }
}

const loom::v1::Device* TopologyIndex::FindDevice(const std::string& id) const {
  auto it = devices_.find(id);
  return it == devices_.end() ? nullptr : &topo_.devices(it->second);
}

const loom::v1::Link* TopologyIndex::FindLink(const std::string& id) const {
  auto it = links_.find(id);
  return it == links_.end() ? nullptr : &topo_.links(it->second);
}

int TopologyIndex::LinkIndex(const std::string& id) const {
  auto it = links_.find(id);
  return it == links_.end() ? -1 : it->second;
}

const loom::v1::Gpu* TopologyIndex::FindGpu(const std::string& id) const {
  auto it = gpus_.find(id);
  return it == gpus_.end() ? nullptr : &topo_.gpus(it->second);
}

std::string TopologyIndex::EndpointNic(const std::string& endpoint) const {
  if (const auto* g = FindGpu(endpoint)) return g->nic();
  if (const auto* d = FindDevice(endpoint); d && d->role() == loom::v1::DEVICE_ROLE_NIC) {
    return d->id();
  }
  return "";
}

std::string TopologyIndex::NicLeaf(const std::string& nic) const {
  auto it = nic_leaf_.find(nic);
  return it == nic_leaf_.end() ? "" : it->second;
}

const std::vector<int>& TopologyIndex::LinksOf(const std::string& device) const {
  static const std::vector<int> kEmpty;
  auto it = links_of_.find(device);
  return it == links_of_.end() ? kEmpty : it->second;
}

}  // namespace loom::topology
