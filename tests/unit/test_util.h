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

}  // namespace loom::testing

#endif  // LOOM_TESTS_UNIT_TEST_UTIL_H_
