#include "controller/te/demand.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

namespace loom::te {

namespace v1 = loom::v1;

double NicLineRate(const loom::topology::TopologyIndex& topo, const std::string& nic) {
  const auto* d = topo.FindDevice(nic);
  if (d && d->line_rate_bps() > 0) return static_cast<double>(d->line_rate_bps());
  for (int li : topo.LinksOf(nic))
    return static_cast<double>(topo.topology().links(li).capacity_bps());
  return 0;
}

std::vector<NicDemand> JobDemand(const v1::Job& job, const loom::topology::TopologyIndex& topo,
                                 double scale) {
  struct Ep {
    std::string nic;
    std::string host;
  };
  std::vector<Ep> eps;
  for (const auto& e : job.endpoints()) {
    std::string nic = topo.EndpointNic(e);
    if (nic.empty()) continue;
    const auto* d = topo.FindDevice(nic);
    eps.push_back({nic, d ? d->host() : ""});
  }
  const size_t n = eps.size();
  // Rates keyed by (source endpoint, destination endpoint) indexes of the
  // first endpoint of each NIC, so shared NICs merge without string keys.
  std::unordered_map<std::string, size_t> first_of_nic;
  std::vector<size_t> nic_rep(n);
  std::vector<double> line_rate(n);
  for (size_t i = 0; i < n; ++i) {
    nic_rep[i] = first_of_nic.emplace(eps[i].nic, i).first->second;
    line_rate[i] = NicLineRate(topo, eps[i].nic);
  }
  std::unordered_map<uint64_t, double> rates;
  auto add = [&](size_t i, size_t j, double fraction) {
    if (i == j || nic_rep[i] == nic_rep[j]) return;
    if (!eps[i].host.empty() && eps[i].host == eps[j].host) return;  // NVLink
    rates[static_cast<uint64_t>(nic_rep[i]) << 32 | nic_rep[j]] += fraction * line_rate[i] * scale;
  };
  if (n < 2) return {};
  switch (job.collective()) {
    case v1::COLLECTIVE_PATTERN_RING_ALLREDUCE:
    case v1::COLLECTIVE_PATTERN_ALL_GATHER:
    case v1::COLLECTIVE_PATTERN_REDUCE_SCATTER:
      for (size_t i = 0; i < n; ++i) add(i, (i + 1) % n, 1.0);
      break;
    case v1::COLLECTIVE_PATTERN_TREE_ALLREDUCE:
      for (size_t i = 1; i < n; ++i) {
        size_t parent = (i - 1) / 2;
        add(i, parent, 0.5);
        add(parent, i, 0.5);
      }
      break;
    case v1::COLLECTIVE_PATTERN_INCAST:
      for (size_t i = 1; i < n; ++i) add(i, 0, 1.0 / static_cast<double>(n - 1));
      break;
    case v1::COLLECTIVE_PATTERN_PERMUTATION:
      for (size_t i = 0; i < n; ++i) add(i, (i + n / 2) % n, 1.0);
      break;
    case v1::COLLECTIVE_PATTERN_POINT_TO_POINT:
      for (size_t i = 0; i + 1 < n; i += 2) add(i, i + 1, 1.0);
      break;
    default:
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < n; ++j) add(i, j, 1.0 / static_cast<double>(n - 1));
      }
  }
  std::vector<NicDemand> out;
  out.reserve(rates.size());
  for (const auto& [k, r] : rates) {
    out.push_back(
        {eps[static_cast<size_t>(k >> 32)].nic, eps[static_cast<size_t>(k & 0xffffffffu)].nic, r});
  }
  // Deterministic order (by source, then destination NIC id).
  std::sort(out.begin(), out.end(), [](const NicDemand& a, const NicDemand& b) {
    return std::tie(a.src_nic, a.dst_nic) < std::tie(b.src_nic, b.dst_nic);
  });
  return out;
}

}  // namespace loom::te
