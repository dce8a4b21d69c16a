#include "controller/te/demand.h"

#include <algorithm>
#include <cmath>
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

namespace {

// Stable counting sort of `in` by key(pair) in [0, keys).
template <typename Key>
void CountingSort(const std::vector<IndexedDemand::Pair>& in, size_t keys, Key key,
                  std::vector<IndexedDemand::Pair>* out) {
  std::vector<size_t> start(keys + 1, 0);
  for (const auto& p : in) ++start[key(p) + 1];
  for (size_t k = 0; k < keys; ++k) start[k + 1] += start[k];
  out->resize(in.size());
  for (const auto& p : in) (*out)[start[key(p)]++] = p;
}

// Rank of each of `nics` (table indexes) among them, in NIC id order.
std::vector<uint32_t> LocalRanks(const EndpointTable& table, const std::vector<int>& nics) {
  std::vector<uint32_t> by_rank(nics.size()), rank(nics.size());
  for (uint32_t k = 0; k < nics.size(); ++k) by_rank[k] = k;
  std::sort(by_rank.begin(), by_rank.end(),
            [&](uint32_t a, uint32_t b) { return table.rank(nics[a]) < table.rank(nics[b]); });
  for (uint32_t r = 0; r < nics.size(); ++r) rank[by_rank[r]] = r;
  return rank;
}

}  // namespace

EndpointTable::EndpointTable(const loom::topology::TopologyIndex& topo) {
  for (const auto& g : topo.topology().gpus()) Add(topo, g.id());
  for (const auto& d : topo.topology().devices()) {
    if (d.role() == v1::DEVICE_ROLE_NIC) Add(topo, d.id());
  }
  Finish();
}

EndpointTable::EndpointTable(const loom::topology::TopologyIndex& topo, const v1::Job& job) {
  for (const auto& e : job.endpoints()) Add(topo, e);
  Finish();
}

void EndpointTable::Add(const loom::topology::TopologyIndex& topo, const std::string& endpoint) {
  if (endpoint_.count(endpoint)) return;
  std::string nic = topo.EndpointNic(endpoint);
  if (nic.empty()) return;
  auto [it, added] = nic_index_.emplace(nic, num_nics());
  if (added) {
    const auto* d = topo.FindDevice(nic);
    int host = -1;
    if (d && !d->host().empty()) {
      host = host_index_.emplace(d->host(), static_cast<int>(host_index_.size())).first->second;
    }
    host_.push_back(host);
    rate_.push_back(NicLineRate(topo, nic));
    nic_id_.push_back(std::move(nic));
  }
  endpoint_.emplace(endpoint, it->second);
}

void EndpointTable::Finish() {
  std::vector<int> by_id(nic_id_.size());
  for (size_t k = 0; k < by_id.size(); ++k) by_id[k] = static_cast<int>(k);
  std::sort(by_id.begin(), by_id.end(), [&](int a, int b) { return nic_id(a) < nic_id(b); });
  rank_.resize(by_id.size());
  for (size_t r = 0; r < by_id.size(); ++r) {
    rank_[static_cast<size_t>(by_id[r])] = static_cast<uint32_t>(r);
  }
}

int EndpointTable::Find(const std::string& endpoint) const {
  auto it = endpoint_.find(endpoint);
  return it == endpoint_.end() ? -1 : it->second;
}

IndexedDemand JobDemandIndexed(const v1::Job& job, const EndpointTable& table, double scale,
                               const std::vector<NicDemand>* measured) {
  IndexedDemand out;
  // Per endpoint: its NIC (index into out.nics) and host; per NIC its line rate.
  std::vector<uint32_t> nic;
  std::vector<int> host;
  std::vector<double> nic_rate;
  std::unordered_map<int, uint32_t> local;
  nic.reserve(static_cast<size_t>(job.endpoints_size()));
  host.reserve(static_cast<size_t>(job.endpoints_size()));
  for (const auto& e : job.endpoints()) {
    const int t = table.Find(e);
    if (t < 0) continue;
    auto [it, added] = local.emplace(t, static_cast<uint32_t>(out.nics.size()));
    if (added) {
      out.nics.push_back(t);
      nic_rate.push_back(table.line_rate(t));
    }
    nic.push_back(it->second);
    host.push_back(table.host(t));
  }
  const size_t n = nic.size();
  if (n < 2) return out;
  // Contributions in the order the pattern adds them; merged per NIC pair below.
  std::vector<IndexedDemand::Pair> adds;
  auto add = [&](size_t i, size_t j, double fraction) {
    if (i == j || nic[i] == nic[j]) return;
    if (host[i] >= 0 && host[i] == host[j]) return;  // NVLink
    adds.push_back({nic[i], nic[j], fraction * nic_rate[nic[i]] * scale});
  };
  // A traffic matrix (measured, else stated by the scheduler) replaces the pattern:
  // its weights between the job's NICs, scaled so the busiest NIC sends or receives
  // at its line rate (x scale).
  const bool use_measured = measured != nullptr && !measured->empty();
  if (use_measured || job.traffic_size() > 0) {
    out.source = use_measured ? DemandSource::kMeasured : DemandSource::kStated;
    const size_t m = out.nics.size();
    auto local_of = [&](const std::string& id) -> int {
      const int t = table.Find(id);
      if (t < 0) return -1;
      auto it = local.find(t);
      return it == local.end() ? -1 : static_cast<int>(it->second);
    };
    std::vector<int> nic_host(m, -1);
    for (size_t k = 0; k < m; ++k) nic_host[k] = table.host(out.nics[k]);
    auto add_weight = [&](int a, int b, double w) {
      if (a < 0 || b < 0 || a == b || !(w > 0) || !std::isfinite(w)) return;
      if (nic_host[a] >= 0 && nic_host[a] == nic_host[b]) return;  // NVLink
      adds.push_back({static_cast<uint32_t>(a), static_cast<uint32_t>(b), w});
    };
    if (use_measured) {
      for (const NicDemand& p : *measured) {
        add_weight(local_of(p.src_nic), local_of(p.dst_nic), p.rate_bps);
      }
    } else {
      for (const auto& f : job.traffic())
        add_weight(local_of(f.src()), local_of(f.dst()), f.weight());
    }
    std::vector<double> sent(m, 0.0), got(m, 0.0);
    for (const auto& p : adds) {
      sent[p.src] += p.rate_bps;
      got[p.dst] += p.rate_bps;
    }
    double factor = 0;
    for (size_t k = 0; k < m; ++k) {
      const double load = std::max(sent[k], got[k]);
      if (load <= 0 || nic_rate[k] <= 0) continue;
      const double f = nic_rate[k] / load;
      if (factor == 0 || f < factor) factor = f;
    }
    for (auto& p : adds) p.rate_bps *= factor * scale;
  } else {
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
        adds.reserve(n * (n - 1));
        for (size_t i = 0; i < n; ++i) {
          for (size_t j = 0; j < n; ++j) add(i, j, 1.0 / static_cast<double>(n - 1));
        }
    }
  }
  // Stable counting sorts by source then destination rank (NIC id order) give
  // (destination, source, order added).
  const size_t m = out.nics.size();
  const std::vector<uint32_t> rank = LocalRanks(table, out.nics);
  std::vector<IndexedDemand::Pair> tmp;
  CountingSort(
      adds, m, [&](const auto& p) { return rank[p.src]; }, &tmp);
  CountingSort(
      tmp, m, [&](const auto& p) { return rank[p.dst]; }, &adds);
  // Merge contributions to the same NIC pair (NICs shared by several endpoints),
  // summed from 0 in the order added, as a map's += would.
  out.pairs.reserve(adds.size());
  for (const auto& p : adds) {
    if (!out.pairs.empty() && out.pairs.back().src == p.src && out.pairs.back().dst == p.dst) {
      out.pairs.back().rate_bps += p.rate_bps;
    } else {
      out.pairs.push_back({p.src, p.dst, 0.0 + p.rate_bps});
    }
  }
  return out;
}

std::vector<NicDemand> JobDemand(const v1::Job& job, const loom::topology::TopologyIndex& topo,
                                 double scale) {
  const EndpointTable table(topo, job);
  IndexedDemand d = JobDemandIndexed(job, table, scale);
  // By source, then destination NIC id: the pairs are by (destination, source).
  std::vector<IndexedDemand::Pair> order;
  const std::vector<uint32_t> rank = LocalRanks(table, d.nics);
  CountingSort(
      d.pairs, d.nics.size(), [&](const auto& p) { return rank[p.src]; }, &order);
  std::vector<NicDemand> out;
  out.reserve(order.size());
  for (const auto& p : order) {
    out.push_back({table.nic_id(d.nics[p.src]), table.nic_id(d.nics[p.dst]), p.rate_bps});
  }
  return out;
}

}  // namespace loom::te
