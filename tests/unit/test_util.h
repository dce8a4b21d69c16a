// Helpers shared by unit tests.
#ifndef LOOM_TESTS_UNIT_TEST_UTIL_H_
#define LOOM_TESTS_UNIT_TEST_UTIL_H_

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "api/topology/topology_generate.h"
#include "api/topology/topology_index.h"
#include "loom/v1/job.pb.h"

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

// `leaves` x `spines` 2-tier Clos, `hosts_per_leaf` hosts per leaf with one GPU
// and one NIC each.
inline std::shared_ptr<const loom::topology::TopologyIndex> OneNicClos2(int leaves, int spines,
                                                                        int hosts_per_leaf = 1) {
  loom::topology::Clos2Params p;
  p.leaves = leaves;
  p.spines = spines;
  p.hosts_per_leaf = hosts_per_leaf;
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

// A rail-optimized fabric like the benchmark's (2 stripes x 8 rails = 16 leaves, 8
// spines, one 400G uplink per spine) filled by four jobs of two hosts per stripe:
// three rings (one 400G flow out of and into every leaf each) and an all-to-all
// (small flows from every leaf to every NIC). Each ring fits exactly in one spine
// plane; the all-to-all fits in the others.
struct MixedJobs {
  std::shared_ptr<const loom::topology::TopologyIndex> topo;
  std::vector<loom::v1::Job> jobs;
};

inline MixedJobs MakeMixedJobs() {
  loom::topology::RailParams r;
  r.hosts = 16;
  r.hosts_per_stripe = 8;
  r.spines = 8;
  r.links_per_spine = 1;
  r.host.gpus_per_host = 8;
  r.host.nics_per_host = 8;
  r.host.nic_speed_bps = 400'000'000'000;
  r.uplink_speed_bps = 400'000'000'000;
  loom::v1::Topology t;
  std::string err;
  loom::topology::GenerateRail(r, &t, &err);
  MixedJobs m;
  m.topo = std::make_shared<const loom::topology::TopologyIndex>(t);
  const loom::v1::CollectivePattern kinds[] = {
      loom::v1::COLLECTIVE_PATTERN_RING_ALLREDUCE, loom::v1::COLLECTIVE_PATTERN_RING_ALLREDUCE,
      loom::v1::COLLECTIVE_PATTERN_ALL_TO_ALL, loom::v1::COLLECTIVE_PATTERN_RING_ALLREDUCE};
  for (int j = 0; j < 4; ++j) {
    loom::v1::Job job;
    job.set_job_id("job" + std::to_string(j));
    job.set_tenant("t" + std::to_string(j));
    job.set_collective(kinds[j]);
    job.set_expected_bytes_per_iteration(256'000'000);
    for (int g = 0; g < 8; ++g) {
      for (int stripe = 0; stripe < 2; ++stripe) {
        for (int k = 0; k < 2; ++k) {
          char gpu[32];
          std::snprintf(gpu, sizeof(gpu), "host%03d-gpu%d", stripe * 8 + j * 2 + k, g);
          job.add_endpoints(gpu);
        }
      }
    }
    m.jobs.push_back(job);
  }
  return m;
}

}  // namespace loom::testing

#endif  // LOOM_TESTS_UNIT_TEST_UTIL_H_
