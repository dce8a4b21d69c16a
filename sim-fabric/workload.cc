#include "sim-fabric/workload.h"

#include <numeric>
#include <utility>

#include "sim-fabric/rng.h"

namespace loom::sim {

namespace {

std::vector<TransferTemplate> Ring(int n, double total, double step) {
  std::vector<TransferTemplate> out;
  if (n < 2) return out;
  for (int i = 0; i < n; ++i) {
    TransferTemplate t;
    t.src = i;
    t.dst = (i + 1) % n;
    t.bytes = total;
    t.base = step;
    t.gates = {(i - 1 + n) % n};  // transfer i-1 delivers into rank i
    out.push_back(t);
  }
  return out;
}

std::vector<TransferTemplate> Tree(int n, double s) {
  std::vector<TransferTemplate> out;
  if (n < 2) return out;
  // up[i] = index of transfer i -> parent(i); down[i] = parent(i) -> i; i >= 1.
  std::vector<int> up(n, -1), down(n, -1);
  for (int i = 1; i < n; ++i) {
    up[i] = static_cast<int>(out.size());
    out.push_back({i, (i - 1) / 2, s, 0, {}});
  }
  for (int i = 1; i < n; ++i) {
    down[i] = static_cast<int>(out.size());
    out.push_back({(i - 1) / 2, i, s, 0, {}});
  }
  auto children = [n](int i) {
    std::vector<int> c;
    if (2 * i + 1 < n) c.push_back(2 * i + 1);
    if (2 * i + 2 < n) c.push_back(2 * i + 2);
    return c;
  };
  for (int i = 1; i < n; ++i) {
    for (int c : children(i)) out[up[i]].gates.push_back(up[c]);
    const int parent = (i - 1) / 2;
    if (parent == 0) {
      for (int c : children(0)) out[down[i]].gates.push_back(up[c]);
    } else {
      out[down[i]].gates.push_back(down[parent]);
    }
  }
  return out;
}

}  // namespace

std::vector<TransferTemplate> BuildCollective(Collective c, int n, double s, uint64_t seed) {
  std::vector<TransferTemplate> out;
  switch (c) {
    case Collective::kRingAllReduce:
      return Ring(n, 2.0 * (n - 1) * s / n, s / n);
    case Collective::kAllGather:
    case Collective::kReduceScatter:
      return Ring(n, 1.0 * (n - 1) * s / n, s / n);
    case Collective::kTreeAllReduce:
      return Tree(n, s);
    case Collective::kAllToAll:
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          if (i != j) out.push_back({i, j, s / n, 0, {}});
        }
      }
      return out;
    case Collective::kIncast:
      for (int i = 1; i < n; ++i) out.push_back({i, 0, s, 0, {}});
      return out;
    case Collective::kPermutation: {
      if (n < 2) return out;
      std::vector<int> perm(n);
      std::iota(perm.begin(), perm.end(), 0);
      Rng rng(seed);
      // Sattolo's algorithm: a uniformly random single cycle, so nobody sends to itself.
      for (int i = n - 1; i > 0; --i) {
        int j = static_cast<int>(rng.Below(static_cast<uint64_t>(i)));
        std::swap(perm[i], perm[j]);
      }
      for (int i = 0; i < n; ++i) out.push_back({i, perm[i], s, 0, {}});
      return out;
    }
    case Collective::kPointToPoint:
      for (int i = 0; i + 1 < n; i += 2) out.push_back({i, i + 1, s, 0, {}});
      return out;
  }
  return out;
}

}  // namespace loom::sim
