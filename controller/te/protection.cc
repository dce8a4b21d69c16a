#include "controller/te/protection.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <unordered_map>

namespace loom::te {

namespace {

constexpr double kEps = 1e-9;
// A (unit, source leaf) pair, or a unit's whole traffic into its destination's leaf,
// below this share of the link it would fail over onto fits in any headroom: it is not
// counted (keeps the model O(big pairs)).
constexpr double kBigShare = 0.05;
// Backup candidates a unit scans before settling (Backups).
constexpr int kScan = 16;

// One (unit, source leaf) pair: what a link failure displaces.
struct Pair {
  size_t unit;
  int leaf;
  double rate;
};

// Post-failure load entry: in the failure of edge `f`, `x` bits/s more on edge `e`.
struct Shed {
  int f, e;
  double x;
  bool operator<(const Shed& o) const { return std::tie(f, e) < std::tie(o.f, o.e); }
};

class Protector {
 public:
  Protector(const FabricGraph& g, const std::vector<Unit>& units, std::vector<int> top,
            std::vector<double> load, double ceiling)
      : g_(g), units_(units), top_(std::move(top)), load_(std::move(load)), ceiling_(ceiling) {
    first_.assign(units.size() + 1, 0);
    total_.assign(units.size(), 0);
    for (size_t u = 0; u < units.size(); ++u) {
      first_[u] = pairs_.size();
      for (const auto& [leaf, rate] : units[u].sources) {
        if (leaf == units[u].dst_leaf || leaf < 0 || rate <= 0) continue;
        pairs_.push_back({u, leaf, rate});
        total_[u] += rate;
      }
    }
    first_[units.size()] = pairs_.size();
    big_first_.assign(units.size() + 1, 0);
    for (size_t u = 0; u < units.size(); ++u) {
      big_first_[u] = big_.size();
      FindBig(u);
    }
    big_first_[units.size()] = big_.size();
  }

  size_t num_pairs() const { return pairs_.size(); }
  const std::vector<int>& top() const { return top_; }

  // Whether unit u may use top t with every edge live.
  bool Usable(size_t u, int t) const {
    const Unit& unit = units_[u];
    if (!unit.allowed.empty() &&
        std::find(unit.allowed.begin(), unit.allowed.end(), t) == unit.allowed.end()) {
      return false;
    }
    if (unit.dst_leaf < 0 || g_.DownEdge(unit.dst_leaf, t) < 0) return false;
    if (g_.TopLive(t)) return true;
    for (size_t p = first_[u]; p < first_[u + 1]; ++p) {
      if (g_.UpEdge(pairs_[p].leaf, t) < 0) return false;
    }
    return true;
  }

  // Calls f(edge, bits/s) for unit u's normal path through t.
  template <class F>
  void PathEdges(size_t u, int t, F&& f) const {
    for (size_t p = first_[u]; p < first_[u + 1]; ++p)
      f(g_.UpEdge(pairs_[p].leaf, t), pairs_[p].rate);
    if (first_[u] < first_[u + 1]) f(g_.DownEdge(units_[u].dst_leaf, t), total_[u]);
  }

  // Big pairs are judged on the primary's links; a moved unit keeps its list (fabrics
  // whose uplinks differ in speed may count a pair by its old primary's capacity).
  void Move(size_t u, int t) {
    if (top_[u] >= 0)
      PathEdges(u, top_[u], [&](int e, double r) { load_[static_cast<size_t>(e)] -= r; });
    top_[u] = t;
    if (t >= 0) PathEdges(u, t, [&](int e, double r) { load_[static_cast<size_t>(e)] += r; });
  }

  double Util(int e, double extra) const {
    const double cap = g_.capacity(e);
    return cap > 0 ? (load_[static_cast<size_t>(e)] + extra) / cap : 0;
  }
  double Over(int e, double extra) const {
    return std::max(0.0, load_[static_cast<size_t>(e)] + extra - g_.capacity(e));
  }

  bool Big(double rate, int edge) const {
    return edge >= 0 && rate >= kBigShare * g_.capacity(edge);
  }

  // Appends unit u's big pairs on its primary to big_.
  void FindBig(size_t u) {
    const int t = top_[u];
    if (t < 0) return;
    for (size_t p = first_[u]; p < first_[u + 1]; ++p) {
      if (Big(pairs_[p].rate, g_.UpEdge(pairs_[p].leaf, t))) big_.push_back(p);
    }
  }

  // Appends what unit u sheds onto backup b in its failures (big contributions only).
  void ShedOf(size_t u, int b, std::vector<Shed>* out) const {
    const int t = top_[u];
    if (t < 0 || b < 0 || first_[u] == first_[u + 1]) return;
    const int dst = units_[u].dst_leaf;
    const int down_fail = g_.DownEdge(dst, t), down_b = g_.DownEdge(dst, b);
    for (size_t i = big_first_[u]; i < big_first_[u + 1]; ++i) {
      const Pair& pr = pairs_[big_[i]];
      const int up_fail = g_.UpEdge(pr.leaf, t), up_b = g_.UpEdge(pr.leaf, b);
      // The source's uplink to t fails: this pair moves to b.
      out->push_back({up_fail, up_b, pr.rate});
      out->push_back({up_fail, down_b, pr.rate});
      // t's downlink to the destination fails: every pair moves to b.
      out->push_back({down_fail, up_b, pr.rate});
    }
    if (Big(total_[u], down_fail)) out->push_back({down_fail, down_b, total_[u]});
  }

  // Whether any of unit u's failures sheds a big contribution (on its primary).
  bool Covered(size_t u) const {
    const int t = top_[u];
    if (t < 0 || first_[u] == first_[u + 1]) return false;
    return big_first_[u] < big_first_[u + 1] || Big(total_[u], g_.DownEdge(units_[u].dst_leaf, t));
  }

  // Greedy backups (algorithm step 1).
  void Backups(std::vector<int>* backup) {
    const size_t n = units_.size();
    backup->assign(n, -1);
    // Units by decreasing demand, ties by index.
    order_.clear();
    for (size_t u = 0; u < n; ++u) {
      if (Covered(u)) order_.push_back(u);
    }
    std::stable_sort(order_.begin(), order_.end(),
                     [&](size_t a, size_t b) { return total_[a] > total_[b]; });
    extra_.clear();
    std::vector<Shed> mine;
    std::vector<int> next_start(static_cast<size_t>(g_.num_tops()));
    for (int t = 0; t < g_.num_tops(); ++t)
      next_start[static_cast<size_t>(t)] = (t + 1) % g_.num_tops();
    for (size_t u : order_) {
      int best = -1;
      double best_add = 0, best_worst = 0, best_load = 0;
      // Tops in a rotation that starts, for the units sharing a primary, one top further
      // each (they spread); the first that takes everything without an overload and
      // within the ceiling ends the scan.
      const int tops = g_.num_tops();
      int& next = next_start[static_cast<size_t>(top_[u])];
      const int start = next;
      next = (next + 1) % tops;
      int scanned = 0;
      for (int k = 0; k < tops; ++k) {
        const int b = (start + k) % tops;
        if (b == top_[u] || !Usable(u, b)) continue;
        // Bounded scan in large fabrics: after kScan candidates one without an overload
        // is good enough, and after 2 x kScan the best so far.
        if (scanned >= 2 * kScan || (scanned >= kScan && best_add <= kEps)) break;
        ++scanned;
        mine.clear();
        ShedOf(u, b, &mine);
        std::sort(mine.begin(), mine.end());
        double add = 0, worst = 0, path = 0;
        for (size_t i = 0; i < mine.size();) {
          const Shed& s = mine[i];
          double x = 0;
          size_t j = i;
          for (; j < mine.size() && mine[j].f == s.f && mine[j].e == s.e; ++j) x += mine[j].x;
          const double before = Extra(s.f, s.e);
          add += Over(s.e, before + x) - Over(s.e, before);
          worst = std::max(worst, Util(s.e, before + x));
          i = j;
        }
        path = Util(g_.DownEdge(units_[u].dst_leaf, b), 0);
        if (best < 0 || add < best_add - kEps ||
            (add <= best_add + kEps && (worst < best_worst - kEps ||
                                        (worst <= best_worst + kEps && path < best_load - kEps)))) {
          best = b;
          best_add = add;
          best_worst = worst;
          best_load = path;
          if (add <= kEps && worst <= ceiling_ + kEps) break;
        }
      }
      (*backup)[u] = best;
      if (best < 0) continue;
      mine.clear();
      ShedOf(u, best, &mine);
      for (const Shed& s : mine) extra_[Key(s.f, s.e)] += s.x;
    }
  }

  // Deficit of `backup` (and the edge with the largest post-failure overload).
  double Deficit(const std::vector<int>& backup, double* worst_util, int* worst_edge) {
    all_.clear();
    for (size_t u = 0; u < units_.size(); ++u) ShedOf(u, backup[u], &all_);
    std::sort(all_.begin(), all_.end());
    double deficit = 0, worst = 0, worst_over = 0;
    int edge = -1;
    for (size_t i = 0; i < all_.size();) {
      double x = 0;
      size_t j = i;
      for (; j < all_.size() && all_[j].f == all_[i].f && all_[j].e == all_[i].e; ++j)
        x += all_[j].x;
      const double over = Over(all_[i].e, x);
      deficit += over;
      worst = std::max(worst, Util(all_[i].e, x));
      if (over > worst_over) {
        worst_over = over;
        edge = all_[i].e;
      }
      i = j;
    }
    if (worst_util) *worst_util = worst;
    if (worst_edge) *worst_edge = edge;
    return deficit;
  }

  // The units whose normal path crosses edge e, largest contribution first.
  std::vector<size_t> UnitsOn(int e) const {
    std::vector<std::pair<double, size_t>> v;
    for (size_t u = 0; u < units_.size(); ++u) {
      if (top_[u] < 0) continue;
      double r = 0;
      PathEdges(u, top_[u], [&](int x, double rate) {
        if (x == e) r += rate;
      });
      if (r > 0) v.emplace_back(r, u);
    }
    std::stable_sort(v.begin(), v.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<size_t> out;
    for (const auto& p : v) out.push_back(p.second);
    return out;
  }

  // Whether moving u to t keeps every edge of the new path within `limit`, or within
  // the busiest edge of its current path (a move never makes its own path hotter).
  bool Fits(size_t u, int t, double limit) const {
    if (top_[u] >= 0) {
      PathEdges(u, top_[u], [&](int e, double) { limit = std::max(limit, Util(e, 0)); });
    }
    bool ok = true;
    PathEdges(u, t, [&](int e, double r) {
      if (Util(e, r) > limit + kEps) ok = false;
    });
    return ok;
  }

 private:
  uint64_t Key(int f, int e) const {
    return static_cast<uint64_t>(f) * static_cast<uint64_t>(g_.num_edges()) +
           static_cast<uint64_t>(e);
  }
  double Extra(int f, int e) const {
    auto it = extra_.find(Key(f, e));
    return it == extra_.end() ? 0 : it->second;
  }

  const FabricGraph& g_;
  const std::vector<Unit>& units_;
  std::vector<int> top_;
  std::vector<double> load_;
  double ceiling_;
  std::vector<Pair> pairs_;
  std::vector<size_t> first_;
  // Indexes into pairs_ of each unit's big pairs: big_[big_first_[u] .. big_first_[u+1]).
  std::vector<size_t> big_, big_first_;
  std::vector<double> total_;
  std::vector<size_t> order_;
  std::unordered_map<uint64_t, double> extra_;
  std::vector<Shed> all_;
};

}  // namespace

ProtectionResult Protect(const FabricGraph& g, const std::vector<Unit>& units,
                         const std::vector<int>& top, const std::vector<double>& load,
                         const std::vector<bool>& movable, const ProtectionParams& params) {
  ProtectionResult r;
  r.top = top;
  r.moved.assign(units.size(), 0);
  if (g.three_tier() || g.num_tops() < 2 || load.size() != static_cast<size_t>(g.num_edges())) {
    return r;
  }
  Protector p(g, units, top, load, params.ceiling);
  if (p.num_pairs() == 0 ||
      static_cast<double>(p.num_pairs()) * g.num_tops() > params.max_backup_work) {
    return r;
  }
  r.computed = true;
  double normal_max = 0;
  for (int e = 0; e < g.num_edges(); ++e) normal_max = std::max(normal_max, p.Util(e, 0));
  p.Backups(&r.backup);
  int hot = -1;
  r.deficit_before = p.Deficit(r.backup, &r.worst_utilization, &hot);
  r.deficit_after = r.deficit_before;
  // Room-making moves: never above the ceiling or the normal maximum, whichever is lower
  // (or the busiest edge of the moved unit's own path), never while the fabric is over
  // capacity in normal operation (that comes first).
  const double limit = std::min(params.ceiling, normal_max);
  const double pairs = static_cast<double>(p.num_pairs());
  const bool repair =
      params.allow_moves && normal_max <= 1.0 + kEps && p.num_pairs() <= params.max_pairs;
  constexpr size_t kCandidates = 16;
  auto budget = [&] {
    return r.trials < params.max_trials && r.trials * pairs < params.max_trial_work;
  };
  while (repair && r.deficit_after > 1.0 && hot >= 0 && budget()) {
    const std::vector<size_t> on_hot = p.UnitsOn(hot);
    size_t best_u = 0;
    int best_t = -1;
    double best = r.deficit_after * (1 - 1e-6) - 1.0;
    std::vector<int> trial_backup, best_backup;
    for (size_t i = 0; i < on_hot.size() && i < kCandidates; ++i) {
      const size_t u = on_hot[i];
      if (u >= movable.size() || !movable[u]) continue;
      const int from = p.top()[u];
      for (int t = 0; t < g.num_tops() && budget(); ++t) {
        if (t == from || !p.Usable(u, t) || !p.Fits(u, t, limit)) continue;
        ++r.trials;
        p.Move(u, t);
        // The other backups stay; u's own backup must not be its new primary.
        trial_backup = r.backup;
        if (trial_backup[u] == t) trial_backup[u] = from;
        const double d = p.Deficit(trial_backup, nullptr, nullptr);
        p.Move(u, from);
        if (d < best) {
          best = d;
          best_u = u;
          best_t = t;
          best_backup = trial_backup;
        }
      }
    }
    if (best_t < 0) break;
    p.Move(best_u, best_t);
    r.moved[best_u] = 1;
    ++r.moves;
    // Backups chosen afresh around the move, unless the trial's were better.
    std::vector<int> fresh;
    p.Backups(&fresh);
    double worst = 0;
    int fresh_hot = -1;
    const double d = p.Deficit(fresh, &worst, &fresh_hot);
    if (d <= best) {
      r.backup = std::move(fresh);
      r.deficit_after = d;
      r.worst_utilization = worst;
      hot = fresh_hot;
    } else {
      r.backup = std::move(best_backup);
      r.deficit_after = p.Deficit(r.backup, &r.worst_utilization, &hot);
    }
  }
  r.top = p.top();
  return r;
}

}  // namespace loom::te
