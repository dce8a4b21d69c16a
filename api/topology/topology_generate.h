// Generators for standard fabric shapes, so nobody writes topologies by hand.
//
// Every generated topology passes ValidateTopology. Link ids follow the
// convention "<a.device>:<a.interface>--<b.device>:<b.interface>" with `a`
// the lower tier. Pure functions.
#ifndef LOOM_API_TOPOLOGY_TOPOLOGY_GENERATE_H_
#define LOOM_API_TOPOLOGY_TOPOLOGY_GENERATE_H_

#include <cstdint>
#include <string>

#include "loom/v1/topology.pb.h"

namespace loom::topology {

struct HostShape {
  int gpus_per_host = 8;
  // NICs per host; GPUs share NICs evenly when fewer than GPUs.
  int nics_per_host = 8;
  int64_t nic_speed_bps = 400'000'000'000;
};

// 2-tier leaf/spine Clos. Every host hangs off one leaf (all its NICs on that
// leaf); every leaf has `links_per_spine` parallel links to every spine.
struct Clos2Params {
  std::string name = "clos2";
  int leaves = 4;
  int spines = 4;
  int hosts_per_leaf = 2;
  int links_per_spine = 1;
  int64_t uplink_speed_bps = 400'000'000'000;
  int64_t propagation_delay_ns = 500;  // ~100 m of fiber
  HostShape host;
};

// Rail-optimized 2-tier: hosts are grouped in stripes of `hosts_per_stripe`;
// each stripe has one leaf per rail, and NIC k of every host in the stripe
// attaches to rail leaf k. Every leaf links to every spine.
struct RailParams {
  std::string name = "rail";
  int hosts = 32;
  int hosts_per_stripe = 32;
  int spines = 8;
  int links_per_spine = 4;
  int64_t uplink_speed_bps = 400'000'000'000;
  int64_t propagation_delay_ns = 500;
  HostShape host;
};

// 3-tier (5-stage) Clos with pods. Each pod has leaves and spines as a
// 2-tier Clos; spine i of every pod connects to every super-spine of plane i
// (planes = spines_per_pod, super_spines must be a multiple of it).
struct Clos3Params {
  std::string name = "clos3";
  int pods = 2;
  int leaves_per_pod = 2;
  int spines_per_pod = 2;
  int super_spines = 4;
  int hosts_per_leaf = 2;
  int64_t uplink_speed_bps = 400'000'000'000;
  int64_t propagation_delay_ns = 500;
  HostShape host;
};

// Each returns false and sets `error` when the parameters are inconsistent.
bool GenerateClos2(const Clos2Params& p, loom::v1::Topology* out, std::string* error);
bool GenerateRail(const RailParams& p, loom::v1::Topology* out, std::string* error);
bool GenerateClos3(const Clos3Params& p, loom::v1::Topology* out, std::string* error);

}  // namespace loom::topology

#endif  // LOOM_API_TOPOLOGY_TOPOLOGY_GENERATE_H_
