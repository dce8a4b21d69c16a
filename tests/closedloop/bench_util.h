// Pieces the benchmark programs share without the emulator: GPU names of the generated
// topologies, mean/percentile, and the random job mix of telb_bench's section 3 and
// scale_bench. Header-only (scale_bench links the controller only).
#ifndef LOOM_TESTS_CLOSEDLOOP_BENCH_UTIL_H_
#define LOOM_TESTS_CLOSEDLOOP_BENCH_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "loom/v1/job.pb.h"

namespace loom::testing::bench {

// GPU id "hostHHH-gpuG" of the generated topologies.
inline std::string Gpu(int host, int g) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "host%03d-gpu%d", host, g);
  return buf;
}

inline double Mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double idx = p * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(idx));
  size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

// A random job mix filling (most of) a fabric: job sizes in hosts from `sizes`, patterns
// ring all-reduce (GPU-major over a random host order, what NCCL gets from a scheduler's
// host list) / all-to-all (at most `a2a_max_hosts` hosts) / permutation, hosts drawn from
// a shuffled free list of 4-host blocks (fragmentation with some locality). Job ids
// "job" + `id_digits` digits, tenants tenant0..6, traffic class 3.
inline std::vector<loom::v1::Job> RandomJobs(std::mt19937_64& rng, int hosts, int gpus_per_host,
                                             const std::vector<int>& sizes, int a2a_max_hosts,
                                             double fill, int id_digits = 4) {
  namespace v1 = loom::v1;
  std::vector<std::vector<int>> blocks;
  for (int h = 0; h < hosts; h += 4) {
    blocks.push_back({});
    for (int k = h; k < std::min(hosts, h + 4); ++k) blocks.back().push_back(k);
  }
  std::shuffle(blocks.begin(), blocks.end(), rng);
  std::vector<int> free;
  for (const auto& b : blocks) free.insert(free.end(), b.begin(), b.end());
  std::vector<v1::Job> jobs;
  size_t next = 0;
  const size_t limit = static_cast<size_t>(fill * hosts);
  int id = 0;
  while (next < limit) {
    int n = sizes[std::uniform_int_distribution<size_t>(0, sizes.size() - 1)(rng)];
    n = std::min<int>(n, static_cast<int>(free.size() - next));
    if (n < 1) break;
    std::vector<int> hs(free.begin() + static_cast<long>(next),
                        free.begin() + static_cast<long>(next) + n);
    next += static_cast<size_t>(n);
    double pick = std::uniform_real_distribution<double>(0, 1)(rng);
    v1::CollectivePattern p = v1::COLLECTIVE_PATTERN_RING_ALLREDUCE;
    if (pick < 0.25 && n <= a2a_max_hosts) {
      p = v1::COLLECTIVE_PATTERN_ALL_TO_ALL;
    } else if (pick < 0.35) {
      p = v1::COLLECTIVE_PATTERN_PERMUTATION;
    }
    if (p == v1::COLLECTIVE_PATTERN_RING_ALLREDUCE) std::shuffle(hs.begin(), hs.end(), rng);
    v1::Job j;
    for (int g = 0; g < gpus_per_host; ++g) {
      for (int h : hs) j.add_endpoints(Gpu(h, g));
    }
    if (p == v1::COLLECTIVE_PATTERN_PERMUTATION) {
      std::shuffle(j.mutable_endpoints()->begin(), j.mutable_endpoints()->end(), rng);
    }
    char buf[32];
    std::snprintf(buf, sizeof(buf), "job%0*d", id_digits, id);
    j.set_job_id(buf);
    j.set_tenant("tenant" + std::to_string(id % 7));
    j.set_collective(p);
    j.set_traffic_class(3);
    jobs.push_back(std::move(j));
    ++id;
  }
  return jobs;
}

}  // namespace loom::testing::bench

#endif  // LOOM_TESTS_CLOSEDLOOP_BENCH_UTIL_H_
