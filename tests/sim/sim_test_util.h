// Helpers shared by the emulator tests: small generated fabrics.
#ifndef LOOM_TESTS_SIM_SIM_TEST_UTIL_H_
#define LOOM_TESTS_SIM_SIM_TEST_UTIL_H_

#include <memory>
#include <string>

#include "api/topology/topology_generate.h"
#include "gtest/gtest.h"
#include "sim-fabric/fabric.h"

namespace loom::sim::testing {

// A 2-tier Clos with one GPU/NIC per host: NIC "hostNNN-nic0" on leaf (N / hosts_per_leaf).
inline loom::v1::Topology Clos(int leaves, int spines, int hosts_per_leaf, double nic_bps,
                               double uplink_bps, int links_per_spine = 1) {
  loom::topology::Clos2Params p;
  p.leaves = leaves;
  p.spines = spines;
  p.hosts_per_leaf = hosts_per_leaf;
  p.links_per_spine = links_per_spine;
  p.uplink_speed_bps = static_cast<int64_t>(uplink_bps);
  p.host.gpus_per_host = 1;
  p.host.nics_per_host = 1;
  p.host.nic_speed_bps = static_cast<int64_t>(nic_bps);
  loom::v1::Topology t;
  std::string err;
  EXPECT_TRUE(loom::topology::GenerateClos2(p, &t, &err)) << err;
  return t;
}

inline std::string Nic(int host) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "host%03d-nic0", host);
  return buf;
}

inline std::unique_ptr<Fabric> Make(const loom::v1::Topology& t, const FabricOptions& o) {
  std::string err;
  auto f = Fabric::Create(t, o, &err);
  EXPECT_NE(f, nullptr) << err;
  return f;
}

// Interface of `device` whose link goes to `peer` (first one).
inline std::string IfaceTo(const loom::v1::Topology& t, const std::string& device,
                           const std::string& peer) {
  for (const auto& l : t.links()) {
    if (l.a().device() == device && l.b().device() == peer) return l.a().interface();
    if (l.b().device() == device && l.a().device() == peer) return l.b().interface();
  }
  return "";
}

inline double OutOctets(const Fabric& f, const std::string& dev, const std::string& ifc) {
  InterfaceCounters c;
  EXPECT_TRUE(f.GetInterfaceCounters(dev, ifc, &c).ok()) << dev << ":" << ifc;
  return static_cast<double>(c.out_octets);
}

// Id of the (first) link between devices a and b; "" when none.
inline std::string LinkBetween(const loom::v1::Topology& t, const std::string& a,
                               const std::string& b) {
  for (const auto& l : t.links()) {
    if ((l.a().device() == a && l.b().device() == b) ||
        (l.a().device() == b && l.b().device() == a)) {
      return l.id();
    }
  }
  return "";
}

}  // namespace loom::sim::testing

#endif  // LOOM_TESTS_SIM_SIM_TEST_UTIL_H_
