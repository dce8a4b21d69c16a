#include "controller/te/path_engine.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <optional>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "common/text.h"
#include "controller/te/protection.h"

namespace loom::te {

namespace v1 = loom::v1;

namespace {

constexpr double kEps = 1e-9;

// "%.0f%%" of u * 100 (std::to_chars with a precision formats as printf does).
std::string Percent(double u) {
  char buf[400];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf) - 1, u * 100, std::chars_format::fixed, 0);
  if (ec != std::errc()) return "?%";
  *end++ = '%';
  return std::string(buf, end);
}

// std::round (halves away from zero) without the library call; a zero may come out
// as +0 where std::round gives -0, which compares equal.
inline double Round(double x) {
  if (!(std::abs(x) < 4503599627370496.0)) return x;  // >= 2^52: integral (or inf/NaN)
  double t = static_cast<double>(static_cast<int64_t>(x));
  double f = x - t;  // exact
  if (f >= 0.5) {
    t += 1;
  } else if (f <= -0.5) {
    t -= 1;
  }
  return t;
}

}  // namespace

FabricGraph FabricGraph::Build(const loom::topology::TopologyIndex& topo,
                               const std::set<std::string>& down_links) {
  FabricGraph g;
  const auto& t = topo.topology();
  for (const auto& d : t.devices()) {
    if (d.role() == v1::DEVICE_ROLE_SUPER_SPINE) g.three_tier_ = true;
  }
  for (const auto& d : t.devices()) {
    g.device_index_[d.id()] = static_cast<int>(g.devices_.size());
    g.devices_.push_back(d.id());
    if (d.role() == v1::DEVICE_ROLE_LEAF) {
      g.leaf_index_[d.id()] = static_cast<int>(g.leaves_.size());
      g.leaves_.push_back(d.id());
      g.leaf_pod_.push_back(d.pod());
    }
    bool is_top =
        g.three_tier_ ? d.role() == v1::DEVICE_ROLE_SUPER_SPINE : d.role() == v1::DEVICE_ROLE_SPINE;
    if (is_top) {
      g.top_index_[d.id()] = static_cast<int>(g.tops_.size());
      g.tops_.push_back(d.id());
    }
  }
  for (const auto& l : t.links()) {
    const auto* a = topo.FindDevice(l.a().device());
    const auto* b = topo.FindDevice(l.b().device());
    if (!a || !b) continue;
    if (a->role() == v1::DEVICE_ROLE_NIC && b->role() == v1::DEVICE_ROLE_LEAF) {
      g.nic_leaf_[a->id()] = g.leaf_index_[b->id()];
      continue;
    }
    if (b->role() == v1::DEVICE_ROLE_NIC && a->role() == v1::DEVICE_ROLE_LEAF) {
      g.nic_leaf_[b->id()] = g.leaf_index_[a->id()];
      continue;
    }
    double cap = down_links.count(l.id()) ? 0.0 : static_cast<double>(l.capacity_bps());
    int da = g.device_index_[a->id()], db = g.device_index_[b->id()];
    for (auto [from, to] : {std::make_pair(da, db), std::make_pair(db, da)}) {
      auto [it, inserted] = g.edges_.emplace(std::make_pair(from, to), g.num_edges());
      if (inserted) {
        g.capacity_.push_back(0);
        g.edge_names_.push_back(g.devices_[static_cast<size_t>(from)] + "->" +
                                g.devices_[static_cast<size_t>(to)]);
      }
      g.capacity_[static_cast<size_t>(it->second)] += cap;
    }
    if (g.three_tier_) {
      // Remember which pod spine hangs off each super-spine.
      if (a->role() == v1::DEVICE_ROLE_SPINE && b->role() == v1::DEVICE_ROLE_SUPER_SPINE) {
        g.pod_spine_[{a->pod(), g.top_index_[b->id()]}] = da;
      } else if (b->role() == v1::DEVICE_ROLE_SPINE && a->role() == v1::DEVICE_ROLE_SUPER_SPINE) {
        g.pod_spine_[{b->pod(), g.top_index_[a->id()]}] = db;
      }
    }
  }
  if (!g.three_tier_) {
    size_t n = g.leaves_.size() * g.tops_.size();
    g.up_edge_.assign(n, -1);
    g.down_edge_.assign(n, -1);
    for (size_t l = 0; l < g.leaves_.size(); ++l) {
      int dl = g.device_index_.at(g.leaves_[l]);
      for (size_t t = 0; t < g.tops_.size(); ++t) {
        int dt = g.device_index_.at(g.tops_[t]);
        int up = g.EdgeIdx(dl, dt), down = g.EdgeIdx(dt, dl);
        size_t k = l * g.tops_.size() + t;
        if (up >= 0 && g.capacity_[static_cast<size_t>(up)] > 0) g.up_edge_[k] = up;
        if (down >= 0 && g.capacity_[static_cast<size_t>(down)] > 0) g.down_edge_[k] = down;
      }
    }
    g.top_live_.assign(g.tops_.size(), 1);
    g.leaf_ordered_ = true;
    for (size_t t = 0; t < g.tops_.size(); ++t) {
      int below = -1;  // largest live edge id of the leaves before
      for (size_t l = 0; l < g.leaves_.size(); ++l) {
        size_t k = l * g.tops_.size() + t;
        int lo = -1, hi = -1;
        for (int e : {g.up_edge_[k], g.down_edge_[k]}) {
          if (e < 0) {
            g.top_live_[t] = 0;
            continue;
          }
          lo = lo < 0 ? e : std::min(lo, e);
          hi = std::max(hi, e);
        }
        if (lo < 0) continue;
        if (lo <= below) g.leaf_ordered_ = false;
        below = std::max(below, hi);
      }
    }
  }
  return g;
}

int FabricGraph::TopIndex(const std::string& id) const {
  auto it = top_index_.find(id);
  return it == top_index_.end() ? -1 : it->second;
}

int FabricGraph::LeafIndex(const std::string& leaf) const {
  auto it = leaf_index_.find(leaf);
  return it == leaf_index_.end() ? -1 : it->second;
}

int FabricGraph::NicLeaf(const std::string& nic) const {
  auto it = nic_leaf_.find(nic);
  return it == nic_leaf_.end() ? -1 : it->second;
}

int FabricGraph::EdgeIdx(int from_dev, int to_dev) const {
  auto it = edges_.find({from_dev, to_dev});
  return it == edges_.end() ? -1 : it->second;
}

int FabricGraph::Edge(const std::string& from, const std::string& to) const {
  auto a = device_index_.find(from), b = device_index_.find(to);
  if (a == device_index_.end() || b == device_index_.end()) return -1;
  return EdgeIdx(a->second, b->second);
}

std::string FabricGraph::FirstHop(int leaf, int t) const {
  if (!three_tier_) return tops_[static_cast<size_t>(t)];
  auto it = pod_spine_.find({leaf_pod_[static_cast<size_t>(leaf)], t});
  return it == pod_spine_.end() ? "" : devices_[static_cast<size_t>(it->second)];
}

bool FabricGraph::PathEdges(int a, int b, int t, std::vector<int>* edges) const {
  edges->clear();
  if (a == b) return true;
  auto push = [&](int from, int to) {
    int e = EdgeIdx(from, to);
    if (e < 0 || capacity_[static_cast<size_t>(e)] <= 0) return false;
    edges->push_back(e);
    return true;
  };
  if (!three_tier_) {
    int up = UpEdge(a, t), down = DownEdge(b, t);
    if (up < 0 || down < 0) return false;
    edges->push_back(up);
    edges->push_back(down);
    return true;
  }
  int la = device_index_.at(leaves_[static_cast<size_t>(a)]);
  int lb = device_index_.at(leaves_[static_cast<size_t>(b)]);
  auto sa = pod_spine_.find({leaf_pod_[static_cast<size_t>(a)], t});
  auto sb = pod_spine_.find({leaf_pod_[static_cast<size_t>(b)], t});
  if (sa == pod_spine_.end() || sb == pod_spine_.end()) return false;
  if (sa->second == sb->second) return push(la, sa->second) && push(sa->second, lb);
  int top = device_index_.at(tops_[static_cast<size_t>(t)]);
  return push(la, sa->second) && push(sa->second, top) && push(top, sb->second) &&
         push(sb->second, lb);
}

namespace {

// FabricGraph::PathEdges for one placement: in 2-tier fabrics a path is the
// leaf->top and top->leaf edges from the graph's tables; 3-tier paths are
// memoized per (source leaf, destination leaf, top).
class PathCache {
 public:
  explicit PathCache(const FabricGraph& g)
      : g_(g),
        leaves_(static_cast<size_t>(g.num_leaves())),
        tops_(static_cast<size_t>(g.num_tops())) {}
  bool Get(int a, int b, int t, std::vector<int>* edges) {
    if (g_.three_tier()) {
      uint64_t key = (static_cast<uint64_t>(a) * leaves_ + static_cast<uint64_t>(b)) * tops_ +
                     static_cast<uint64_t>(t);
      auto it = memo_.find(key);
      if (it == memo_.end()) {
        std::vector<int> e;
        bool ok = g_.PathEdges(a, b, t, &e);
        it = memo_.emplace(key, std::make_pair(ok, std::move(e))).first;
      }
      *edges = it->second.second;
      return it->second.first;
    }
    edges->clear();
    if (a == b) return true;
    int up = g_.UpEdge(a, t);
    int down = g_.DownEdge(b, t);
    if (up < 0 || down < 0) return false;
    edges->push_back(up);
    edges->push_back(down);
    return true;
  }

 private:
  const FabricGraph& g_;
  size_t leaves_, tops_;
  std::unordered_map<uint64_t, std::pair<bool, std::vector<int>>> memo_;
};

// Maximum of per-edge utilizations with the edge that holds it (the lowest index
// among equal values): O(log E) update, O(1) query.
class MaxTree {
 public:
  MaxTree() = default;
  // Sizes the tree for n values, all -1 until Build (the storage is kept when n is
  // the size it had: Build then overwrites every value that was set).
  void Reset(int n) {
    if (n == n_) return;
    n_ = n;
    size_ = 1;
    while (size_ < n) size_ *= 2;
    val_.assign(2 * static_cast<size_t>(size_), -1.0);
    idx_.assign(2 * static_cast<size_t>(size_), -1);
    for (int i = 0; i < n; ++i) idx_[static_cast<size_t>(size_ + i)] = i;
  }
  void Set(int i, double v) {
    size_t p = static_cast<size_t>(size_ + i);
    val_[p] = v;
    for (p /= 2; p >= 1; p /= 2) {
      size_t l = 2 * p, r = l + 1;
      bool left = val_[l] >= val_[r];
      val_[p] = left ? val_[l] : val_[r];
      idx_[p] = left ? idx_[l] : idx_[r];
    }
  }
  // Sets values 0 .. count - 1 to value(i) at once (count <= n), O(n).
  template <class F>
  void Build(size_t count, F&& value) {
    for (size_t i = 0; i < count; ++i) val_[static_cast<size_t>(size_) + i] = value(i);
    for (size_t p = static_cast<size_t>(size_) - 1; p >= 1; --p) {
      size_t l = 2 * p, r = l + 1;
      bool left = val_[l] >= val_[r];
      val_[p] = left ? val_[l] : val_[r];
      idx_[p] = left ? idx_[l] : idx_[r];
    }
  }
  double max() const { return val_[1]; }
  int argmax() const { return idx_[1]; }

 private:
  int n_ = -1, size_ = 1;
  std::vector<double> val_;
  std::vector<int> idx_;
};

}  // namespace

// A solver's per-edge buffers, kept between Place calls (every list of on_edge empty).
struct PlaceWorkspace::Buffers {
  std::vector<double> load;
  MaxTree tree;
  std::vector<std::vector<size_t>> on_edge;
};

PlaceWorkspace::PlaceWorkspace() = default;
PlaceWorkspace::~PlaceWorkspace() = default;
PlaceWorkspace::PlaceWorkspace(const PlaceWorkspace&) {}
PlaceWorkspace& PlaceWorkspace::operator=(const PlaceWorkspace&) { return *this; }
PlaceWorkspace::Buffers* PlaceWorkspace::Get(int k) {
  auto& b = k == 0 ? keep_ : fresh_;
  if (!b) b = std::make_unique<Buffers>();
  return b.get();
}

namespace {

// Placement state: loads, the units on each edge and the maximum utilization, both kept up
// to date by Assign. A unit's candidate on top t is its path's (edge, bits/s) entries, one
// per edge, in edge id order. 2-tier units whose sources sit on distinct leaves other than
// the destination's (what Placement builds) have no stored candidates: their entries are
// read from the graph's per-(leaf, top) edge tables when needed (the sources' uplinks to t
// and t's downlink to the destination with their summed rate), in edge id order without a
// sort when the graph's edge ids follow its leaf order. Other units' candidates are built
// once into a table shared by the solvers of one Place call.
class Solver {
 public:
  // A candidate of a unit: its top and, for a unit with stored candidates, its entries.
  struct Cand {
    int top = -1;
    const std::pair<int, double>* edges = nullptr;  // nullptr: read from the graph
    size_t len = 0;
  };

  // `buf`, when given, lends its buffers for the solver's life.
  Solver(const FabricGraph& g, const std::vector<Unit>& units, PathCache& paths,
         const std::vector<double>* base_load = nullptr, PlaceWorkspace::Buffers* buf = nullptr)
      : g_(g), units_(units), buf_(buf) {
    InitLoad(base_load);
    BuildTables(paths);
  }

  // A second solver over the same units and graph that shares `other`'s
  // tables (read-only once built), e.g. a full recompute's fresh placement
  // beside the one that keeps current paths.
  Solver(const Solver& other, const std::vector<double>* base_load,
         PlaceWorkspace::Buffers* buf = nullptr)
      : g_(other.g_), units_(other.units_), buf_(buf), tab_(other.tab_) {
    InitLoad(base_load);
  }

  Solver(const Solver&) = delete;
  Solver& operator=(const Solver&) = delete;
  ~Solver() {
    if (!buf_) return;
    for (int e : dirty_) on_edge_[static_cast<size_t>(e)].clear();
    buf_->load = std::move(load_);
    buf_->tree = std::move(tree_);
    buf_->on_edge = std::move(on_edge_);
  }

 private:
  void InitLoad(const std::vector<double>* base_load) {
    if (buf_) {
      load_ = std::move(buf_->load);
      tree_ = std::move(buf_->tree);
      on_edge_ = std::move(buf_->on_edge);
    }
    const size_t edges = static_cast<size_t>(g_.num_edges());
    if (base_load && base_load->size() == edges) {
      load_.assign(base_load->begin(), base_load->end());
    } else {
      load_.assign(edges, 0.0);
    }
    tree_.Reset(std::max(1, g_.num_edges()));
    tree_.Build(edges, [&](size_t e) { return Util(static_cast<int>(e)); });
    on_edge_.resize(edges);
    top_.assign(units_.size(), -1);
  }

  void BuildTables(PathCache& paths) {
    const FabricGraph& g = g_;
    const std::vector<Unit>& units = units_;
    Tables& tab = *tab_;
    tab.info.assign(units.size(), UnitInfo{});
    tab.off.assign(units.size() + 1, 0);
    std::vector<double> rates;
    // Units read from the graph: sources on distinct leaves in ascending order, none on the
    // destination's leaf. Their downlink rate is summed in ascending rate order (the order
    // a sort-and-merge of the entries sums them in).
    size_t reserve = 0, num_candidates = 0;
    for (size_t u = 0; u < units.size(); ++u) {
      const Unit& unit = units[u];
      bool direct = !g.three_tier() && unit.dst_leaf >= 0 && !unit.sources.empty();
      for (size_t i = 0; direct && i < unit.sources.size(); ++i) {
        const int src = unit.sources[i].first;
        direct = src >= 0 && src < g.num_leaves() && src != unit.dst_leaf &&
                 (i == 0 || src > unit.sources[i - 1].first);
      }
      UnitInfo& in = tab.info[u];
      in.direct = direct;
      if (direct) {
        rates.clear();
        for (const auto& s : unit.sources) rates.push_back(s.second);
        std::sort(rates.begin(), rates.end());
        in.down_rate = rates[0];
        for (size_t i = 1; i < rates.size(); ++i) in.down_rate += rates[i];
        while (in.split < unit.sources.size() && unit.sources[in.split].first < unit.dst_leaf) {
          ++in.split;
        }
        in.lazy = g.leaf_ordered();
      }
      if (in.lazy) continue;
      size_t tops = unit.allowed.empty() ? static_cast<size_t>(g.num_tops()) : unit.allowed.size();
      reserve += tops * (g.three_tier() ? 4 * unit.sources.size() : unit.sources.size() + 1);
      num_candidates += tops;
    }
    if (num_candidates == 0) return;
    // Arena size: every allowed top of every unit with a path from each source plus
    // the shared downlink (2-tier), or up to 4 edges per source (3-tier).
    auto& arena = tab.arena;
    auto& cand = tab.cand;
    arena.reserve(reserve);
    cand.reserve(num_candidates);
    std::vector<int> edges;
    for (size_t u = 0; u < units.size(); ++u) {
      tab.off[u] = cand.size();
      const Unit& unit = units[u];
      const UnitInfo& in = tab.info[u];
      if (in.lazy) continue;
      const size_t num_allowed =
          unit.allowed.empty() ? static_cast<size_t>(g.num_tops()) : unit.allowed.size();
      for (size_t k = 0; k < num_allowed; ++k) {
        const int t = unit.allowed.empty() ? static_cast<int>(k) : unit.allowed[k];
        if (t < 0 || t >= g.num_tops()) continue;
        const size_t off = arena.size();
        if (in.direct) {
          // The sources' uplinks (distinct edges) and the shared downlink, by edge id
          // (insertion sort, few entries).
          const int down = g.DownEdge(unit.dst_leaf, t);
          bool ok = down >= 0;
          for (size_t i = 0; ok && i < unit.sources.size(); ++i) {
            const int up = g.UpEdge(unit.sources[i].first, t);
            if (up < 0) {
              ok = false;
              break;
            }
            arena.emplace_back(up, unit.sources[i].second);
          }
          if (!ok) {
            arena.resize(off);
            continue;
          }
          arena.emplace_back(down, in.down_rate);
          for (size_t i = off + 1; i < arena.size(); ++i) {
            auto x = arena[i];
            size_t j = i;
            for (; j > off && arena[j - 1].first > x.first; --j) arena[j] = arena[j - 1];
            arena[j] = x;
          }
          cand.push_back(Stored{t, off, arena.size() - off});
          continue;
        }
        bool ok = unit.dst_leaf >= 0;
        for (const auto& [src, rate] : unit.sources) {
          if (!ok) break;
          if (!paths.Get(src, unit.dst_leaf, t, &edges)) {
            ok = false;
            break;
          }
          for (int e : edges) arena.emplace_back(e, rate);
        }
        if (!ok) {
          arena.resize(off);
          continue;
        }
        // One entry per edge: the sources of a unit share the edges towards its
        // destination, and a score must see their summed load.
        auto first = arena.begin() + static_cast<std::ptrdiff_t>(off);
        std::sort(first, arena.end());
        size_t w = off;
        for (size_t i = off; i < arena.size(); ++i) {
          if (w > off && arena[w - 1].first == arena[i].first) {
            arena[w - 1].second += arena[i].second;
          } else {
            arena[w++] = arena[i];
          }
        }
        arena.resize(w);
        cand.push_back(Stored{t, off, w - off});
      }
    }
    tab.off[units.size()] = cand.size();
  }

  // Whether every edge of lazy unit u's path through t is live.
  bool LazyLive(size_t u, int t) const {
    if (g_.TopLive(t)) return true;
    const Unit& unit = units_[u];
    if (g_.DownEdge(unit.dst_leaf, t) < 0) return false;
    for (const auto& s : unit.sources) {
      if (g_.UpEdge(s.first, t) < 0) return false;
    }
    return true;
  }

 public:
  // Calls f(const Cand&) for each candidate of unit u: its allowed tops with a
  // live path, in allowed order.
  template <class F>
  void ForEachCand(size_t u, F&& f) const {
    const Tables& tab = *tab_;
    if (!tab.info[u].lazy) {
      for (size_t i = tab.off[u]; i < tab.off[u + 1]; ++i) {
        const Stored& s = tab.cand[i];
        f(Cand{s.top, tab.arena.data() + s.off, s.len});
      }
      return;
    }
    const Unit& unit = units_[u];
    const int tops = g_.num_tops();
    if (unit.allowed.empty()) {
      for (int t = 0; t < tops; ++t) {
        if (LazyLive(u, t)) f(Cand{t, nullptr, 0});
      }
      return;
    }
    for (int t : unit.allowed) {
      if (t >= 0 && t < tops && LazyLive(u, t)) f(Cand{t, nullptr, 0});
    }
  }
  // The same candidates in a list.
  void Cands(size_t u, std::vector<Cand>* out) const {
    out->clear();
    ForEachCand(u, [&](const Cand& c) { out->push_back(c); });
  }

  // The candidate of unit u on top t; false when t is not one.
  bool Find(size_t u, int t, Cand* c) const {
    const Tables& tab = *tab_;
    if (!tab.info[u].lazy) {
      for (size_t i = tab.off[u]; i < tab.off[u + 1]; ++i) {
        const Stored& s = tab.cand[i];
        if (s.top == t) {
          *c = Cand{s.top, tab.arena.data() + s.off, s.len};
          return true;
        }
      }
      return false;
    }
    const Unit& unit = units_[u];
    if (t < 0 || t >= g_.num_tops()) return false;
    if (!unit.allowed.empty() &&
        std::find(unit.allowed.begin(), unit.allowed.end(), t) == unit.allowed.end()) {
      return false;
    }
    if (!LazyLive(u, t)) return false;
    *c = Cand{t, nullptr, 0};
    return true;
  }
  bool Has(size_t u, int t) const {
    Cand c;
    return Find(u, t, &c);
  }

  // Calls f(edge, bits/s) for each entry of candidate c of unit u, in edge id order.
  template <class F>
  void Edges(size_t u, const Cand& c, F&& f) const {
    if (c.edges) {
      for (size_t i = 0; i < c.len; ++i) f(c.edges[i].first, c.edges[i].second);
      return;
    }
    const Unit& unit = units_[u];
    const UnitInfo& in = tab_->info[u];
    const auto& src = unit.sources;
    size_t i = 0;
    for (; i < in.split; ++i) f(g_.UpEdge(src[i].first, c.top), src[i].second);
    f(g_.DownEdge(unit.dst_leaf, c.top), in.down_rate);
    for (; i < src.size(); ++i) f(g_.UpEdge(src[i].first, c.top), src[i].second);
  }

  // Load only (trial moves); Assign keeps the index and the maximum.
  void Apply(size_t u, const Cand& c, double sign) {
    Edges(u, c, [&](int e, double r) { load_[static_cast<size_t>(e)] += sign * r; });
  }
  // Places unit u on candidate c (nullptr: nowhere).
  void Assign(size_t u, const Cand* c) {
    if (top_[u] >= 0) {
      Cand old;
      Find(u, top_[u], &old);
      Apply(u, old, -1);
      Edges(u, old, [&](int e, double) {
        auto& v = on_edge_[static_cast<size_t>(e)];
        auto it = std::find(v.begin(), v.end(), u);
        if (it != v.end()) {
          *it = v.back();
          v.pop_back();
        }
        tree_.Set(e, Util(e));
      });
    }
    top_[u] = c ? c->top : -1;
    if (c) {
      Apply(u, *c, +1);
      Edges(u, *c, [&](int e, double) {
        auto& v = on_edge_[static_cast<size_t>(e)];
        if (v.empty()) dirty_.push_back(e);
        v.push_back(u);
        tree_.Set(e, Util(e));
      });
    }
  }
  // Places unit u (unplaced) on c without keeping the maximum: for placing many units
  // at once, followed by RebuildMax (O(edges) instead of O(log edges) per entry).
  void AssignQuiet(size_t u, const Cand& c) {
    top_[u] = c.top;
    Edges(u, c, [&](int e, double r) {
      load_[static_cast<size_t>(e)] += r;
      auto& v = on_edge_[static_cast<size_t>(e)];
      if (v.empty()) dirty_.push_back(e);
      v.push_back(u);
    });
  }
  void RebuildMax() {
    tree_.Build(load_.size(), [&](size_t e) { return Util(static_cast<int>(e)); });
  }
  double Util(int e) const {
    double cap = g_.capacity(e);
    return cap > 0 ? load_[static_cast<size_t>(e)] / cap : 0;
  }
  double MaxUtil(int* hottest = nullptr) const {
    double m = g_.num_edges() > 0 ? tree_.max() : 0;
    int h = m > kEps ? tree_.argmax() : -1;
    if (hottest) *hottest = h;
    return h >= 0 ? m : 0;
  }
  // Max utilization on c's edges after adding it.
  double ScoreMax(size_t u, const Cand& c) const {
    double mx = 0;
    Edges(u, c, [&](int e, double r) {
      mx = std::max(mx, (load_[static_cast<size_t>(e)] + r) / g_.capacity(e));
    });
    return mx;
  }
  // Sum of squared utilizations' delta on c's edges after adding it.
  double ScoreSq(size_t u, const Cand& c) const {
    double sq = 0;
    Edges(u, c, [&](int e, double r) {
      double cap = g_.capacity(e);
      double before = load_[static_cast<size_t>(e)] / cap;
      double after = (load_[static_cast<size_t>(e)] + r) / cap;
      sq += after * after - before * before;
    });
    return sq;
  }

  // Max utilization on c's edges after adding it on top of `extra` (per edge: load
  // other units would move there if their primary top failed).
  double ScoreWith(size_t u, const Cand& c, const std::vector<double>& extra) const {
    double mx = 0;
    Edges(u, c, [&](int e, double r) {
      mx = std::max(
          mx, (load_[static_cast<size_t>(e)] + extra[static_cast<size_t>(e)] + r) / g_.capacity(e));
    });
    return mx;
  }

  // Churn budget (Rebalance): units of at most `max_groups` distinct groups move.
  void SetBudget(const std::vector<uint32_t>* group, size_t max_groups) {
    group_ = group;
    max_groups_ = max_groups;
    groups_moved_ = 0;
    uint32_t n = 0;
    if (group_) {
      for (uint32_t x : *group_) n = std::max(n, x + 1);
    }
    group_moved_.assign(n, 0);
  }
  // Whether unit u may move within the budget.
  bool MayMove(size_t u) const {
    return !group_ || group_moved_[(*group_)[u]] || groups_moved_ < max_groups_;
  }
  // Whether units `us` may all move together within the budget.
  bool Fits(const std::vector<size_t>& us) const {
    if (!group_) return true;
    std::vector<uint32_t> fresh;
    for (size_t u : us) {
      const uint32_t x = (*group_)[u];
      if (!group_moved_[x] && std::find(fresh.begin(), fresh.end(), x) == fresh.end()) {
        fresh.push_back(x);
      }
    }
    return groups_moved_ + fresh.size() <= max_groups_;
  }
  void NoteMoved(size_t u) {
    if (!group_) return;
    char& m = group_moved_[(*group_)[u]];
    if (!m) {
      m = 1;
      ++groups_moved_;
    }
  }

  // Greedy placement of `order` (unit indexes). Among equally good tops a unit joins
  // the top its job already uses most (affinity), so a job whose units do not
  // compete for links (a ring: one flow per leaf) lands on as few spine planes as
  // possible and leaves whole planes to the jobs placed after it; the rest of the
  // ties rotate by destination.
  void Greedy(const std::vector<size_t>& order) {
    const size_t tops = static_cast<size_t>(g_.num_tops());
    std::unordered_map<std::string_view, std::vector<int>> uses;
    for (size_t u : order) uses.try_emplace(units_[u].job_id, tops, 0);
    for (size_t u = 0; u < units_.size(); ++u) {
      if (top_[u] < 0) continue;
      auto it = uses.find(units_[u].job_id);
      if (it != uses.end()) it->second[static_cast<size_t>(top_[u])]++;
    }
    std::string_view job;
    std::vector<int>* job_uses = nullptr;
    for (size_t u : order) {
      if (!job_uses || units_[u].job_id != job) {
        job = units_[u].job_id;
        job_uses = &uses[job];
      }
      // Key (rounded maximum, rounded sum of squares, -uses, rotation), smallest wins;
      // a candidate's sum of squares is computed only when its maximum ties the best.
      // Parts of one destination (QP split) start their rotation one top apart.
      const uint64_t rot = Fnv1a64(units_[u].dst_nic) + units_[u].qp_value;
      const bool wraps = rot > UINT64_MAX - tops;  // (top + rot) overflows for some top
      const uint64_t rot_mod = tops > 0 ? rot % tops : 0;
      auto rotation = [&](int t) {
        if (wraps) return (static_cast<uint64_t>(t) + rot) % tops;
        uint64_t v = static_cast<uint64_t>(t) + rot_mod;
        return v >= tops ? v - tops : v;
      };
      bool have = false, best_sq_known = false;
      Cand best;
      double best_mx = 0, best_sq = 0;
      int best_use = 0;
      uint64_t best_rot = 0;
      ForEachCand(u, [&](const Cand& c) {
        const double mx = Round(ScoreMax(u, c) * 1e9) / 1e9;
        if (have && mx > best_mx) return;
        const int use = -(*job_uses)[static_cast<size_t>(c.top)];
        const uint64_t r = rotation(c.top);
        if (!have || mx < best_mx) {
          have = true;
          best_sq_known = false;
          best = c;
          best_mx = mx;
          best_use = use;
          best_rot = r;
          return;
        }
        if (!best_sq_known) {
          best_sq = Round(ScoreSq(u, best) * 1e9) / 1e9;
          best_sq_known = true;
        }
        const double sq = Round(ScoreSq(u, c) * 1e9) / 1e9;
        if (std::tie(sq, use, r) < std::tie(best_sq, best_use, best_rot)) {
          best = c;
          best_sq = sq;
          best_use = use;
          best_rot = r;
        }
      });
      Assign(u, have ? &best : nullptr);
      if (have) (*job_uses)[static_cast<size_t>(best.top)]++;
    }
  }

  // Moves units off the hottest edge while that lowers the maximum.
  void Improve(const std::vector<bool>& movable, int rounds) {
    std::vector<size_t> on_hot;
    std::vector<Cand> cands;
    int chains = 0;
    for (int r = 0; r < rounds; ++r) {
      int hot = -1;
      double global = MaxUtil(&hot);
      if (hot < 0) return;
      size_t best_u = 0;
      bool have = false;
      Cand best_c;
      double best_after = global - 1e-7;
      on_hot = on_edge_[static_cast<size_t>(hot)];
      std::sort(on_hot.begin(), on_hot.end());
      for (size_t u : on_hot) {
        if (!movable[u] || top_[u] < 0 || !MayMove(u)) continue;
        Cand cur;
        Find(u, top_[u], &cur);
        Apply(u, cur, -1);
        // Every move of u leaves the hot edge at least at Util(hot): when that is not
        // below the best found, no candidate of u can win (the same choice, without
        // scoring them; on an edge of many similar units most are skipped).
        if (Util(hot) >= best_after) {
          Apply(u, cur, +1);
          continue;
        }
        Cands(u, &cands);
        for (const auto& c : cands) {
          if (c.top == top_[u]) continue;
          double after = std::max(ScoreMax(u, c), Util(hot));
          if (after < best_after) {
            best_after = after;
            best_u = u;
            best_c = c;
            have = true;
          }
        }
        Apply(u, cur, +1);
      }
      if (have) {
        Assign(best_u, &best_c);
        NoteMoved(best_u);
      } else if (!Swap(hot, global, movable) &&
                 (global <= 1.0 + 1e-9 || ++chains > kMaxChains || !Chain(hot, global, movable))) {
        return;
      }
    }
  }

  // Longer Kempe chains, when no single or pair move helps and a link is over
  // capacity (whole flows that do not fit, as a permutation's 400G flows): u leaves
  // the hottest edge for a top blocked by exactly one edge, a unit on that edge moves
  // to a top blocked by exactly one other edge (the top its displacer left first),
  // and so on, up to kChainDepth moves, until a move is blocked by nothing. Depth-first, every move
  // tentative until the chain closes; every edge a moved unit loads stays below the maximum.
  // Bounded by kChainNodes expansions per call and kMaxChains calls per Improve.
  static constexpr int kChainDepth = 128;
  static constexpr int kChainNodes = 20000;
  static constexpr int kMaxChains = 64;
  struct Op {
    size_t u;
    Cand c;
    double sign;
  };
  std::vector<Op> ops_;
  std::vector<std::pair<size_t, Cand>> moves_;
  std::vector<char> in_chain_;
  int budget_ = 0;

  void Tent(size_t u, const Cand& c, double sign) {
    Apply(u, c, sign);
    ops_.push_back({u, c, sign});
  }
  void Undo(size_t mark) {
    while (ops_.size() > mark) {
      const Op& o = ops_.back();
      Apply(o.u, o.c, -o.sign);
      ops_.pop_back();
    }
  }

  // `u` is tentatively off its top; finds it a place (see Chain). `prefer` (the top
  // the unit that displaced u left) is tried first: swapping the two tops along the
  // chain is the Kempe path of a bipartite edge colouring, which always closes.
  bool ChainPlace(size_t u, double limit, int depth, const std::vector<bool>& movable, int prefer) {
    if (--budget_ < 0) return false;
    std::vector<Cand> cands;
    Cands(u, &cands);
    if (prefer >= 0) {
      std::stable_partition(cands.begin(), cands.end(),
                            [&](const Cand& c) { return c.top == prefer; });
    }
    for (const auto& c : cands) {
      if (c.top == top_[u]) continue;
      int block = -1;
      const int blocks = Blocking(u, c, limit, &block);
      if (blocks == 0) {
        Tent(u, c, +1);
        moves_.emplace_back(u, c);
        return true;
      }
      if (blocks != 1 || depth == 0) continue;
      const size_t mark = ops_.size();
      Tent(u, c, +1);
      moves_.emplace_back(u, c);
      std::vector<size_t> on_block = on_edge_[static_cast<size_t>(block)];
      std::sort(on_block.begin(), on_block.end());
      for (size_t v : on_block) {
        if (v == u || !movable[v] || top_[v] < 0 || in_chain_[v] || !MayMove(v)) continue;
        Cand vc;
        Find(v, top_[v], &vc);
        const size_t m2 = ops_.size();
        Tent(v, vc, -1);
        if (Util(block) < limit) {
          in_chain_[v] = 1;
          if (ChainPlace(v, limit, depth - 1, movable, top_[u])) return true;
          in_chain_[v] = 0;
        }
        Undo(m2);
        if (budget_ < 0) break;
      }
      moves_.pop_back();
      Undo(mark);
      if (budget_ < 0) return false;
    }
    return false;
  }

  bool Chain(int hot, double global, const std::vector<bool>& movable) {
    const double limit = global - 1e-7;
    std::vector<size_t> on_hot = on_edge_[static_cast<size_t>(hot)];
    std::sort(on_hot.begin(), on_hot.end());
    in_chain_.assign(units_.size(), 0);
    budget_ = kChainNodes;
    for (size_t u : on_hot) {
      if (!movable[u] || top_[u] < 0 || !MayMove(u)) continue;
      ops_.clear();
      moves_.clear();
      Cand cur;
      Find(u, top_[u], &cur);
      Tent(u, cur, -1);
      if (Util(hot) < limit) {
        in_chain_[u] = 1;
        if (ChainPlace(u, limit, kChainDepth, movable, -1)) {
          const auto moves = moves_;
          Undo(0);
          std::vector<size_t> who;
          for (const auto& [x, c] : moves) who.push_back(x);
          if (Fits(who)) {
            for (const auto& [x, c] : moves) {
              Assign(x, &c);
              NoteMoved(x);
            }
            return true;
          }
        }
        in_chain_[u] = 0;
      }
      Undo(0);
      if (budget_ < 0) break;
    }
    return false;
  }

  // Edges that would reach `limit` with u on c (the last one in *block).
  int Blocking(size_t u, const Cand& c, double limit, int* block) const {
    int blocks = 0;
    Edges(u, c, [&](int e, double r) {
      if ((load_[static_cast<size_t>(e)] + r) / g_.capacity(e) >= limit) {
        *block = e;
        ++blocks;
      }
    });
    return blocks;
  }

  // A pair move when no single move helps: a unit u leaves the hottest edge for a top
  // whose path is blocked by exactly one edge, and a unit v on that edge moves away to
  // make room. Accepted only when every edge it loads stays below the maximum, so the
  // number of edges at the maximum shrinks (Kempe-chain step of length two).
  bool Swap(int hot, double global, const std::vector<bool>& movable) {
    const double limit = global - 1e-7;
    std::vector<size_t> on_hot = on_edge_[static_cast<size_t>(hot)];
    std::sort(on_hot.begin(), on_hot.end());
    std::vector<size_t> on_block;
    std::vector<Cand> cands_u, cands_v;
    for (size_t u : on_hot) {
      if (!movable[u] || top_[u] < 0 || !MayMove(u)) continue;
      Cand cur;
      Find(u, top_[u], &cur);
      Apply(u, cur, -1);
      if (Util(hot) >= limit) {
        Apply(u, cur, +1);
        continue;
      }
      Cands(u, &cands_u);
      for (const auto& c : cands_u) {
        if (c.top == top_[u]) continue;
        int block = -1;
        const int blocks = Blocking(u, c, limit, &block);
        if (blocks != 1) continue;
        Apply(u, c, +1);
        on_block = on_edge_[static_cast<size_t>(block)];
        std::sort(on_block.begin(), on_block.end());
        for (size_t v : on_block) {
          if (v == u || !movable[v] || top_[v] < 0 || !Fits({u, v})) continue;
          Cand vc;
          Find(v, top_[v], &vc);
          Apply(v, vc, -1);
          if (Util(block) < limit) {
            Cands(v, &cands_v);
            for (const auto& d : cands_v) {
              if (d.top == top_[v] || ScoreMax(v, d) >= limit) continue;
              Apply(v, vc, +1);
              Apply(u, c, -1);
              Apply(u, cur, +1);
              const Cand cu = c, dv = d;
              Assign(u, &cu);
              Assign(v, &dv);
              NoteMoved(u);
              NoteMoved(v);
              return true;
            }
          }
          Apply(v, vc, +1);
        }
        Apply(u, c, -1);
      }
      Apply(u, cur, +1);
    }
    return false;
  }

  const FabricGraph& g_;
  const std::vector<Unit>& units_;
  std::vector<double> load_;
  std::vector<int> top_;

 private:
  struct UnitInfo {
    bool direct = false;   // 2-tier, sources on distinct leaves (see BuildTables)
    bool lazy = false;     // direct, entries read from the graph
    uint32_t split = 0;    // direct: sources on leaves numbered below the destination's
    double down_rate = 0;  // direct: the sources' summed rate
  };
  struct Stored {
    int top;
    size_t off, len;  // entries in arena
  };
  // Per unit; stored candidates of unit u: cand[off[u] .. off[u + 1]), their entries in
  // arena. Built once, shared by the solvers of one Place call.
  struct Tables {
    std::vector<UnitInfo> info;
    std::vector<Stored> cand;
    std::vector<size_t> off;
    std::vector<std::pair<int, double>> arena;
  };
  PlaceWorkspace::Buffers* buf_ = nullptr;
  const std::vector<uint32_t>* group_ = nullptr;  // churn budget (SetBudget)
  size_t max_groups_ = 0, groups_moved_ = 0;
  std::vector<char> group_moved_;
  std::shared_ptr<Tables> tab_ = std::make_shared<Tables>();
  std::vector<std::vector<size_t>> on_edge_;  // units placed over each edge
  std::vector<int> dirty_;                    // edges whose list was filled
  MaxTree tree_;
};

std::vector<size_t> ByDemand(const std::vector<Unit>& units, const std::vector<size_t>& idx) {
  std::vector<std::pair<double, size_t>> v;
  for (size_t u : idx) {
    double total = 0;
    for (const auto& s : units[u].sources) total += s.second;
    v.emplace_back(total, u);
  }
  // Ties by (job, destination); when the units are in that order already (as Placement
  // builds them), their index is the same order without string compares.
  bool in_order = true;
  for (size_t u = 1; in_order && u < units.size(); ++u) {
    in_order = std::tie(units[u - 1].job_id, units[u - 1].dst_nic, units[u - 1].qp_value) <
               std::tie(units[u].job_id, units[u].dst_nic, units[u].qp_value);
  }
  if (in_order) {
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
  } else {
    std::sort(v.begin(), v.end(), [&](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first > b.first;
      const Unit& ua = units[a.second];
      const Unit& ub = units[b.second];
      return std::tie(ua.job_id, ua.dst_nic, ua.qp_value) <
             std::tie(ub.job_id, ub.dst_nic, ub.qp_value);
    });
  }
  std::vector<size_t> out;
  for (const auto& p : v) out.push_back(p.second);
  return out;
}

}  // namespace

double MaxUtilization(const FabricGraph& g, const std::vector<Unit>& units,
                      const std::vector<int>& top) {
  PathCache paths(g);
  Solver s(g, units, paths);
  for (size_t u = 0; u < units.size(); ++u) {
    Solver::Cand c;
    if (top[u] >= 0 && s.Find(u, top[u], &c)) s.Assign(u, &c);
  }
  return s.MaxUtil();
}

PlacementResult Place(const FabricGraph& g, const std::vector<Unit>& units,
                      const PlacementParams& params, PlacementMode mode,
                      const std::vector<double>* base_load, PlaceWorkspace* ws) {
  // Placement keeping what is current where it is still feasible.
  PathCache paths(g);
  Solver keep(g, units, paths, base_load, ws ? ws->Get(0) : nullptr);
  std::vector<size_t> free_units;
  std::vector<bool> movable(units.size(), false);
  for (size_t u = 0; u < units.size(); ++u) {
    Solver::Cand c;
    if (units[u].current >= 0 && keep.Find(u, units[u].current, &c)) {
      keep.Assign(u, &c);
    } else {
      free_units.push_back(u);
      movable[u] = true;
    }
  }
  keep.Greedy(ByDemand(units, free_units));
  keep.Improve(movable, params.max_improvement_rounds);

  Solver* chosen = &keep;
  std::optional<Solver> fresh_solver;  // full recompute only
  bool adopted = false;
  if (mode == PlacementMode::kFull) {
    Solver& fresh = fresh_solver.emplace(keep, base_load, ws ? ws->Get(1) : nullptr);
    std::vector<size_t> all;
    std::vector<bool> all_movable(units.size(), true);
    for (size_t u = 0; u < units.size(); ++u) {
      if (units[u].pinned) {
        Solver::Cand c;
        if (units[u].current >= 0 && fresh.Find(u, units[u].current, &c)) {
          fresh.Assign(u, &c);
          all_movable[u] = false;
          continue;
        }
      }
      all.push_back(u);
    }
    fresh.Greedy(ByDemand(units, all));
    fresh.Improve(all_movable, params.max_improvement_rounds);
    double keep_max = keep.MaxUtil(), fresh_max = fresh.MaxUtil();
    // Moving jobs pays when it lowers the maximum by more than the stability gain, or
    // when links are predicted over capacity (traffic on them is being slowed down)
    // and the move takes at least one point of utilization off the maximum.
    const bool gain = fresh_max < keep_max * (1.0 - params.stability_gain) - kEps;
    const bool relieves = keep_max > 1.0 + kEps && fresh_max < keep_max - 0.01;
    if (gain || relieves) {
      chosen = &fresh;
      adopted = true;
    }
  }

  // Protection capacity (2-tier): backups with room for what a failed link sheds, and
  // moves of movable units that make that room (protection.h).
  // Not while links are predicted over capacity in normal operation: that comes first,
  // and a failure there only adds to congestion there is already.
  ProtectionResult prot;
  if (params.protect && chosen->MaxUtil() <= 1.0 + 1e-9) {
    std::vector<bool> may_move(units.size(), false);
    for (size_t u = 0; u < units.size(); ++u) {
      may_move[u] = mode == PlacementMode::kFull ? !units[u].pinned : movable[u];
    }
    ProtectionParams pp;
    pp.ceiling = params.protection_ceiling;
    pp.allow_moves = mode == PlacementMode::kFull;
    prot = Protect(g, units, chosen->top_, chosen->load_, may_move, pp);
    if (prot.computed) {
      for (size_t u = 0; u < units.size(); ++u) {
        if (!prot.moved[u]) continue;
        Solver::Cand c;
        if (chosen->Find(u, prot.top[u], &c)) {
          chosen->Assign(u, &c);
        } else {
          prot.moved[u] = 0;  // not a candidate after all: stays, without that backup
          prot.backup[u] = -1;
        }
      }
    }
  }

  PlacementResult r;
  r.top = chosen->top_;
  r.max_utilization = chosen->MaxUtil(&r.hottest_edge);
  r.adopted_new = adopted;
  r.reason.resize(units.size());
  r.backup.assign(units.size(), -1);
  r.protection_deficit_bps = prot.deficit_after;
  r.protection_worst_utilization = prot.worst_utilization;
  r.protection_moves = prot.moves;
  if (prot.computed) {
    r.protected_backups = true;
    r.backup = prot.backup;  // -1 where protection does not cover the unit
  }
  // Backups are chosen per failed top: the units that share a primary top
  // would all move at once when it fails, so each one's backup is scored
  // with the load the ones before it (largest first) would already have
  // moved there. One top's units spread over the others instead of piling
  // onto the least loaded one. Units of different primary tops do not see
  // each other's moves, so they are handled one top at a time with one
  // per-edge array.
  // Backups of the units protection does not cover (all of them without it): chosen
  // per failed top.
  {
    std::vector<size_t> all(units.size());
    for (size_t u = 0; u < units.size(); ++u) all[u] = u;
    const std::vector<size_t> order = ByDemand(units, all);
    const size_t tops = static_cast<size_t>(std::max(0, g.num_tops()));
    // Units by primary top (the last group: no top), in demand order within each.
    std::vector<size_t> group_begin(tops + 2, 0), by_top(order.size());
    auto group = [&](size_t u) {
      const int t = r.top[u];
      return t >= 0 && static_cast<size_t>(t) < tops ? static_cast<size_t>(t) : tops;
    };
    for (size_t u : order) group_begin[group(u) + 1]++;
    for (size_t k = 0; k + 1 < group_begin.size(); ++k) group_begin[k + 1] += group_begin[k];
    {
      std::vector<size_t> fill(group_begin.begin(), group_begin.end() - 1);
      for (size_t u : order) by_top[fill[group(u)]++] = u;
    }
    // Per-edge load of the backups chosen so far (zero again after each top).
    std::vector<double> local_extra;
    const size_t edges = static_cast<size_t>(g.num_edges());
    std::vector<double>& extra =
        ws ? ws->Zeros(edges) : (local_extra.assign(edges, 0.0), local_extra);
    std::vector<int> touched;
    for (size_t k = 0; k <= tops; ++k) {
      for (size_t i = group_begin[k]; i < group_begin[k + 1]; ++i) {
        const size_t u = by_top[i];
        if (r.backup[u] >= 0) continue;  // protected
        const int t = r.top[u];
        double best_backup = 0;
        bool have = false;
        Solver::Cand best;
        chosen->ForEachCand(u, [&](const Solver::Cand& c) {
          if (c.top == t) return;
          double score = chosen->ScoreWith(u, c, extra);
          if (!have || score < best_backup - kEps) {
            have = true;
            best = c;
            best_backup = score;
          }
        });
        if (!have) continue;
        r.backup[u] = best.top;
        if (k < tops) {
          chosen->Edges(u, best, [&](int e, double rate) {
            extra[static_cast<size_t>(e)] += rate;
            touched.push_back(e);
          });
        }
      }
      for (int e : touched) extra[static_cast<size_t>(e)] = 0;
      touched.clear();
    }
  }
  for (size_t u = 0; u < units.size(); ++u) {
    int t = r.top[u];
    if (t != units[u].current) ++r.moved;
    if (t < 0) {
      r.reason[u] = "no live path to " + units[u].dst_nic + " within the allowed spines";
      continue;
    }
    double worst = 0;
    int worst_edge = -1;
    Solver::Cand c;
    chosen->Find(u, t, &c);
    chosen->Edges(u, c, [&](int e, double) {
      if (chosen->Util(e) >= worst) {
        worst = chosen->Util(e);
        worst_edge = e;
      }
    });
    std::string via = "via " + g.top(t);
    if (t == units[u].current) {
      r.reason[u] = via + " (kept: current path is live" +
                    (mode == PlacementMode::kFull && !adopted
                         ? ", and a recompute would not lower the fabric maximum by more than " +
                               Percent(params.stability_gain)
                         : std::string()) +
                    ")";
    } else if (prot.computed && prot.moved[u]) {
      r.reason[u] =
          via + (units[u].current >= 0 ? " (moved from " + g.top(units[u].current) + ": " : " (") +
          "leaves room on the backup paths of traffic a link failure would move; "
          "the fabric maximum utilization does not rise)";
    } else if (units[u].current >= 0 && !keep.Has(u, units[u].current)) {
      r.reason[u] = via + " (moved from " + g.top(units[u].current) +
                    ": the old path lost its capacity or is no longer allowed)";
    } else if (units[u].current >= 0) {
      r.reason[u] = via + " (moved from " + g.top(units[u].current) +
                    ": recompute lowers the fabric maximum utilization)";
    } else {
      r.reason[u] = via + " (least-loaded path; busiest hop " +
                    (worst_edge >= 0 ? g.edge_name(worst_edge) : std::string()) + " at " +
                    Percent(worst) + ")";
    }
  }
  r.edge_load = std::move(chosen->load_);  // last use of the solver
  return r;
}

PlacementResult Rebalance(const FabricGraph& g, const std::vector<Unit>& units,
                          const std::vector<uint32_t>& group, size_t max_groups,
                          const PlacementParams& params, PlaceWorkspace* ws) {
  PathCache paths(g);
  Solver s(g, units, paths, nullptr, ws ? ws->Get(0) : nullptr);
  std::vector<bool> movable(units.size(), false);
  for (size_t u = 0; u < units.size(); ++u) {
    Solver::Cand c;
    if (units[u].current >= 0 && s.Find(u, units[u].current, &c)) {
      s.AssignQuiet(u, c);
      movable[u] = !units[u].pinned;
    }
  }
  s.RebuildMax();
  const double before = s.MaxUtil();
  s.SetBudget(group.size() == units.size() ? &group : nullptr, max_groups);
  const size_t rounds =
      std::min(static_cast<size_t>(std::max(0, params.max_improvement_rounds)), 16 * max_groups);
  s.Improve(movable, static_cast<int>(rounds));
  PlacementResult r;
  r.top = s.top_;
  r.max_utilization = s.MaxUtil(&r.hottest_edge);
  r.reason.resize(units.size());
  r.backup.assign(units.size(), -1);
  for (size_t u = 0; u < units.size(); ++u) {
    const int t = r.top[u];
    if (t == units[u].current || t < 0) continue;
    ++r.moved;
    // Backup: the allowed alternative with the least loaded path.
    bool have = false;
    double best = 0;
    Solver::Cand cur;
    s.ForEachCand(u, [&](const Solver::Cand& c) {
      if (c.top == t) return;
      const double score = s.ScoreMax(u, c);
      if (!have || score < best - kEps) {
        have = true;
        best = score;
        r.backup[u] = c.top;
      }
    });
    double worst = 0;
    int worst_edge = -1;
    if (s.Find(u, t, &cur)) {
      s.Edges(u, cur, [&](int e, double) {
        if (s.Util(e) >= worst) {
          worst = s.Util(e);
          worst_edge = e;
        }
      });
    }
    r.reason[u] = "via " + g.top(t) + " (moved from " +
                  (units[u].current >= 0 ? g.top(units[u].current) : std::string("nowhere")) +
                  ": a bounded re-placement of the over-capacity fabric takes traffic off its "
                  "hottest links, predicted maximum " +
                  Percent(before) + " -> " + Percent(r.max_utilization) + "; busiest hop " +
                  (worst_edge >= 0 ? g.edge_name(worst_edge) : std::string()) + " at " +
                  Percent(worst) + ")";
  }
  r.adopted_new = r.moved > 0;
  r.edge_load = std::move(s.load_);
  return r;
}

}  // namespace loom::te
