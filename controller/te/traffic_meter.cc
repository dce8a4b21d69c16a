#include "controller/te/traffic_meter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

namespace loom::te {

namespace {

using PairKey = std::pair<std::string, std::string>;

std::map<PairKey, double> Normalized(const std::vector<NicDemand>& m) {
  std::map<PairKey, double> out;
  double total = 0;
  for (const auto& p : m) {
    if (!(p.rate_bps > 0) || !std::isfinite(p.rate_bps)) continue;
    out[{p.src_nic, p.dst_nic}] += p.rate_bps;
    total += p.rate_bps;
  }
  if (total <= 0) return {};
  for (auto& [k, v] : out) v /= total;
  return out;
}

}  // namespace

double TrafficDistance(const std::vector<NicDemand>& a, const std::vector<NicDemand>& b) {
  const auto na = Normalized(a), nb = Normalized(b);
  if (na.empty() || nb.empty()) return na.empty() == nb.empty() ? 0.0 : 1.0;
  double d = 0;
  auto ia = na.begin();
  auto ib = nb.begin();
  while (ia != na.end() || ib != nb.end()) {
    if (ib == nb.end() || (ia != na.end() && ia->first < ib->first)) {
      d += ia->second;
      ++ia;
    } else if (ia == na.end() || ib->first < ia->first) {
      d += ib->second;
      ++ib;
    } else {
      d += std::abs(ia->second - ib->second);
      ++ia;
      ++ib;
    }
  }
  return std::min(1.0, 0.5 * d);
}

void TrafficMeter::Observe(const std::vector<NicDemand>& rates,
                           const std::map<std::string, std::vector<std::string>>& job_nics) {
  if (rates.empty()) return;
  // NIC -> jobs that have it.
  std::unordered_map<std::string, std::vector<const std::string*>> owners;
  for (const auto& [job, nics] : job_nics) {
    for (const auto& n : nics) owners[n].push_back(&job);
  }
  std::map<std::string, std::map<PairKey, double>> sample;
  for (const auto& r : rates) {
    if (!(r.rate_bps > 0) || !std::isfinite(r.rate_bps)) continue;
    auto s = owners.find(r.src_nic);
    auto d = owners.find(r.dst_nic);
    if (s == owners.end() || d == owners.end()) continue;
    const std::string* owner = nullptr;
    int count = 0;
    for (const std::string* a : s->second) {
      for (const std::string* b : d->second) {
        if (a == b) {
          owner = a;
          ++count;
        }
      }
    }
    if (count != 1) continue;  // no job, or two jobs share both NICs: not attributable
    sample[*owner][{r.src_nic, r.dst_nic}] += r.rate_bps;
  }
  for (auto& [job, pairs] : sample) {
    Acc& acc = jobs_[job];
    for (const auto& [k, v] : pairs) acc.sum[k] += v;
    ++acc.samples;
  }
  // Released jobs.
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    it = job_nics.count(it->first) ? std::next(it) : jobs_.erase(it);
  }
}

int TrafficMeter::samples(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? 0 : it->second.samples;
}

namespace {

// Each source NIC's row scaled to sum 1: the shares of its bytes per destination.
// Rates say how much the network gave a flow, not how much the job wanted (a flow
// sharing a link gets half); where the bytes go is what the measurement adds.
std::map<std::string, std::map<std::string, double>> RowShares(const std::vector<NicDemand>& m) {
  std::map<std::string, std::map<std::string, double>> rows;
  for (const auto& p : m) {
    if (p.rate_bps > 0 && std::isfinite(p.rate_bps)) rows[p.src_nic][p.dst_nic] += p.rate_bps;
  }
  for (auto& [src, row] : rows) {
    double sum = 0;
    for (const auto& [dst, v] : row) sum += v;
    for (auto& [dst, v] : row) v /= sum;
  }
  return rows;
}

}  // namespace

std::vector<TrafficVerdict> TrafficMeter::Judge(
    const std::function<std::vector<NicDemand>(const std::string&)>& in_use,
    std::vector<std::string>* confirmed) {
  std::vector<TrafficVerdict> out;
  for (auto& [job, acc] : jobs_) {
    if (acc.samples < options_.min_samples) continue;
    std::vector<NicDemand> mean;
    for (const auto& [k, sum] : acc.sum) mean.push_back({k.first, k.second, sum / acc.samples});
    const auto measured = RowShares(mean);
    const auto model = RowShares(in_use(job));
    // Enough of the job seen: most sources the model has (counters of a NIC give a
    // rate from their second sample on), unless the evidence keeps not coming.
    size_t seen = 0;
    for (const auto& [src, row] : model) seen += measured.count(src);
    if (static_cast<double>(seen) < options_.min_coverage * static_cast<double>(model.size()) &&
        acc.samples < 4 * options_.min_samples) {
      continue;
    }
    TrafficVerdict v;
    v.job_id = job;
    v.samples = acc.samples;
    acc = Acc();  // fresh evidence for the next judgement
    // Distance over the sources that sent (one that sent nothing in the window, e.g.
    // done or in a compute phase, says nothing): each row weighs the same.
    std::vector<NicDemand> a, b;
    double unmodelled = 0;
    for (const auto& [src, row] : measured) {
      auto mr = model.find(src);
      for (const auto& [dst, share] : row) {
        a.push_back({src, dst, share});
        if (mr == model.end() || !mr->second.count(dst)) unmodelled += share;
      }
      if (mr == model.end()) continue;
      for (const auto& [dst, share] : mr->second) b.push_back({src, dst, share});
    }
    v.distance = TrafficDistance(a, b);
    if (v.distance < options_.min_distance) {
      if (confirmed != nullptr) confirmed->push_back(job);
      continue;
    }
    // The new matrix: measured rows, and the model's rows for sources not seen sending.
    v.measured = std::move(a);
    for (const auto& [src, row] : model) {
      if (measured.count(src)) continue;
      for (const auto& [dst, share] : row) v.measured.push_back({src, dst, share});
    }
    char buf[320];
    std::snprintf(buf, sizeof(buf),
                  "measured traffic of job %.100s differs from the matrix it was placed with: "
                  "%.0f%% of its bytes would have to move to other NIC pairs (%.0f%% go to "
                  "pairs the model does not have; %zu source NICs measured over %d samples)",
                  job.c_str(), v.distance * 100,
                  measured.empty() ? 0.0 : 100 * unmodelled / static_cast<double>(measured.size()),
                  measured.size(), v.samples);
    v.why = buf;
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace loom::te
