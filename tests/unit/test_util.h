// Helpers shared by unit tests.
#ifndef LOOM_TESTS_UNIT_TEST_UTIL_H_
#define LOOM_TESTS_UNIT_TEST_UTIL_H_

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "api/topology/topology_generate.h"
#include "api/topology/topology_index.h"

namespace loom::testing {

// A fresh directory under $TMPDIR, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "loomtest-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// 2 leaves x 2 spines, 2 hosts per leaf, 2 GPUs/NICs per host.
//
//      spine0   spine1
//        |  \ /  |
//        |  / \  |
//      leaf0   leaf1
//      /  \    /  \   (hosts per leaf)
//  host000 001 002 003    (each: gpu0/nic0, gpu1/nic1)
inline std::shared_ptr<const loom::topology::TopologyIndex> SmallFabric() {
  loom::topology::Clos2Params p;
  p.name = "small";
  p.leaves = 2;
  p.spines = 2;
  p.hosts_per_leaf = 2;
  p.host.gpus_per_host = 2;
  p.host.nics_per_host = 2;
  loom::v1::Topology t;
  std::string err;
  loom::topology::GenerateClos2(p, &t, &err);
  return std::make_shared<const loom::topology::TopologyIndex>(std::move(t));
}

// `leaves` x `spines` 2-tier Clos, one host per leaf with one GPU and one NIC.
inline std::shared_ptr<const loom::topology::TopologyIndex> OneNicClos2(int leaves, int spines) {
  loom::topology::Clos2Params p;
  p.leaves = leaves;
  p.spines = spines;
  p.hosts_per_leaf = 1;
  p.host.gpus_per_host = 1;
  p.host.nics_per_host = 1;
  loom::v1::Topology t;
  std::string err;
  if (!loom::topology::GenerateClos2(p, &t, &err)) std::abort();
  return std::make_shared<const loom::topology::TopologyIndex>(std::move(t));
}

// 3-tier: pods pod0, pod1 of 2 leaves and 2 spines; pod spine i connects to
// the super spines of plane i; one host per leaf with one GPU and one NIC.
//
//   superspine0 superspine1 | superspine2 superspine3   (plane 0 | plane 1)
//          \     /                   \     /
//   pod0-spine0 pod1-spine0     pod0-spine1 pod1-spine1
//   (each pod spine links to both leaves of its pod)
inline std::shared_ptr<const loom::topology::TopologyIndex> OneNicClos3() {
  loom::topology::Clos3Params p;
  p.pods = 2;
  p.leaves_per_pod = 2;
  p.spines_per_pod = 2;
  p.super_spines = 4;
  p.hosts_per_leaf = 1;
  p.host.gpus_per_host = 1;
  p.host.nics_per_host = 1;
  loom::v1::Topology t;
  std::string err;
  if (!loom::topology::GenerateClos3(p, &t, &err)) std::abort();
  return std::make_shared<const loom::topology::TopologyIndex>(std::move(t));
}

}  // namespace loom::testing

#endif  // LOOM_TESTS_UNIT_TEST_UTIL_H_
