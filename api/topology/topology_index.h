// Read-only lookups over a validated loom.v1.Topology.
//
// Built once per topology (O(devices + links + gpus)); lookups are O(1).
// Thread-safe for concurrent readers once built. Holds a copy of the topology.
#ifndef LOOM_API_TOPOLOGY_TOPOLOGY_INDEX_H_
#define LOOM_API_TOPOLOGY_TOPOLOGY_INDEX_H_

#include <string>
#include <unordered_map>
#include <vector>

#include "loom/v1/topology.pb.h"

namespace loom::topology {

// Tier of a switch role: leaf 1, spine 2, super spine 3; 0 for hosts, NICs
// and unknown roles.
int SwitchTier(loom::v1::DeviceRole role);

class TopologyIndex {
 public:
  explicit TopologyIndex(loom::v1::Topology topo);

  const loom::v1::Topology& topology() const { return topo_; }
  // nullptr when absent.
  const loom::v1::Device* FindDevice(const std::string& id) const;
  const loom::v1::Link* FindLink(const std::string& id) const;
  const loom::v1::Gpu* FindGpu(const std::string& id) const;
  // Index of a link in topology().links(); -1 when absent.
  int LinkIndex(const std::string& id) const;
  // The NIC a job endpoint (GPU or NIC id) sends through; empty when the id
  // is neither.
  std::string EndpointNic(const std::string& endpoint) const;
  // The leaf a NIC attaches to; empty when none.
  std::string NicLeaf(const std::string& nic) const;
  // Indexes (into topology().links()) of links with an endpoint on `device`.
  const std::vector<int>& LinksOf(const std::string& device) const;

 private:
  loom::v1::Topology topo_;
  std::unordered_map<std::string, int> devices_, links_, gpus_;
  std::unordered_map<std::string, std::vector<int>> links_of_;
  std::unordered_map<std::string, std::string> nic_leaf_;
};

}  // namespace loom::topology

#endif  // LOOM_API_TOPOLOGY_TOPOLOGY_INDEX_H_
