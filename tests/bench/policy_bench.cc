// Policy validation benchmark (issue 18 item 6): ValidatePolicy time for
// policies of 1k to 64k rules on a 16-spine fabric. Each rule names its own
// tenant and job (the shape of a per-tenant policy), every 100th rule matches
// a traffic class of every tenant, and 8 tenants are dedicated to a spine of
// their own. Prints rules, findings and milliseconds per size, and the ratio
// to the previous size (2.0-2.3 for O(n log n) when the size doubles; 4 for a
// pairwise comparison). Not a test: no assertion on timing.
//
// usage: policy_bench [max_rules]   (default 65536)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/topology/topology_generate.h"
#include "api/topology/topology_index.h"
#include "policy/policy_engine.h"

int main(int argc, char** argv) {
  const int max_rules = argc > 1 ? std::atoi(argv[1]) : 65536;
  loom::topology::Clos2Params p;
  p.leaves = 16;
  p.spines = 16;
  loom::v1::Topology topo;
  std::string error;
  if (!loom::topology::GenerateClos2(p, &topo, &error)) {
    std::fprintf(stderr, "topology: %s\n", error.c_str());
    return 1;
  }
  loom::topology::TopologyIndex index(topo);
  std::printf("%8s %9s %10s %7s\n", "rules", "findings", "ms", "ratio");
  double prev = 0;
  for (int n = 1024; n <= max_rules; n *= 2) {
    loom::v1::PolicySet set;
    for (int s = 0; s < p.spines; ++s) {
      auto* c = set.add_colors();
      c->set_color(static_cast<uint32_t>(s + 1));
      c->add_spines(topo.devices(s).id());
    }
    for (int i = 0; i < n; ++i) {
      auto* r = set.add_rules();
      r->set_name("rule-" + std::to_string(i));
      if (i % 100 == 99) {
        r->mutable_match()->add_traffic_classes(static_cast<uint32_t>(i % 8));
        r->mutable_action()->set_dlb_mode(loom::v1::DLB_MODE_FLOWLET);
        continue;
      }
      r->mutable_match()->add_tenants("tenant-" + std::to_string(i));
      r->mutable_match()->add_job_ids("job-" + std::to_string(i));
      if (i < 8) {
        r->mutable_action()->set_isolation(loom::v1::ISOLATION_DEDICATED);
        r->mutable_action()->add_colors(static_cast<uint32_t>(i + 1));
      } else {
        r->mutable_action()->add_colors(static_cast<uint32_t>(9 + i % 8));
      }
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto findings = loom::policy::ValidatePolicy(set, index);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (prev > 0) {
      std::printf("%8d %9zu %10.1f %7.2f\n", n, findings.size(), ms, ms / prev);
    } else {
      std::printf("%8d %9zu %10.1f %7s\n", n, findings.size(), ms, "-");
    }
    std::fflush(stdout);
    prev = ms;
  }
  return 0;
}
