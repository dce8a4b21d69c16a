#include "controller/te/next_hops.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace loom::te {

namespace v1 = loom::v1;

namespace {

// The switch graph with link liveness and, per switch, the leaves it reaches
// going down only. Switches are numbered in id order, so sorting numbers sorts
// ids. Built once per call: O(links + sum over switches of the leaves below
// each live neighbor); a query is O(next hops x egress leaves x |beyond|).
class ReachIndex {
 public:
  ReachIndex(const loom::topology::TopologyIndex& topo, const std::set<std::string>& down) {
    std::map<std::string, int> rank;
    for (const auto& d : topo.topology().devices()) {
      if (int r = loom::topology::SwitchTier(d.role()); r > 0) rank[d.id()] = r;
    }
    for (const auto& [id, r] : rank) {
      index_[id] = static_cast<int>(ids_.size());
      ids_.push_back(id);
      rank_.push_back(r);
    }
    const size_t n = ids_.size();
    std::vector<std::map<int, bool>> adj(n);  // neighbor -> any live link
    for (const auto& l : topo.topology().links()) {
      auto a = index_.find(l.a().device());
      auto b = index_.find(l.b().device());
      if (a == index_.end() || b == index_.end() || a->second == b->second) continue;
      const bool live = !down.count(l.id());
      bool& ab = adj[static_cast<size_t>(a->second)][b->second];
      ab = ab || live;
      bool& ba = adj[static_cast<size_t>(b->second)][a->second];
      ba = ba || live;
    }
    adj_.resize(n);
    for (size_t i = 0; i < n; ++i) adj_[i].assign(adj[i].begin(), adj[i].end());
    // Leaves each switch reaches going down only (sorted), by rank.
    down_reach_.resize(n);
    for (int r = 1; r <= 3; ++r) {
      for (size_t i = 0; i < n; ++i) {
        if (rank_[i] != r) continue;
        std::vector<int>& reach = down_reach_[i];
        if (r == 1) reach.push_back(static_cast<int>(i));
        for (const auto& [m, live] : adj_[i]) {
          if (!live || rank_[static_cast<size_t>(m)] >= r) continue;
          const auto& below = down_reach_[static_cast<size_t>(m)];
          reach.insert(reach.end(), below.begin(), below.end());
        }
        std::sort(reach.begin(), reach.end());
        reach.erase(std::unique(reach.begin(), reach.end()), reach.end());
      }
    }
    // Per switch n and leaf e: the live neighbors of n below it that reach e going
    // down, and those above it that do (ascending).
    below_.resize(n);
    above_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      for (const auto& [m, live] : adj_[i]) {
        if (!live || rank_[static_cast<size_t>(m)] == rank_[i]) continue;
        auto& side = rank_[static_cast<size_t>(m)] < rank_[i] ? below_[i] : above_[i];
        if (side.empty()) side.resize(n);
        for (int e : down_reach_[static_cast<size_t>(m)]) {
          side[static_cast<size_t>(e)].push_back(m);
        }
      }
    }
  }

  std::vector<v1::NextHopReach> Of(const std::string& x_id,
                                   const std::set<std::string>& egress) const {
    std::vector<v1::NextHopReach> out;
    auto xi = index_.find(x_id);
    if (xi == index_.end()) return out;
    const int x = xi->second;
    std::vector<int> leaves;
    for (const std::string& e : egress) {
      auto it = index_.find(e);
      if (it != index_.end() && it->second != x) leaves.push_back(it->second);
    }
    std::sort(leaves.begin(), leaves.end());
    std::vector<int> beyond;
    for (const auto& [nb, live] : adj_[static_cast<size_t>(x)]) {
      if (rank_[static_cast<size_t>(nb)] <= rank_[static_cast<size_t>(x)]) continue;
      // beyond set -> egress leaves; an empty set stands for "E itself".
      std::map<std::vector<int>, std::vector<int>> groups;
      if (live) {
        std::vector<int>* last = nullptr;  // most leaves share the previous one's group
        const std::vector<int>* last_key = nullptr;
        for (int e : leaves) {
          if (!Beyond(x, nb, e, &beyond)) continue;
          if (beyond.size() == 1 && beyond.front() == e) beyond.clear();
          if (!last || *last_key != beyond) {
            auto it = groups.try_emplace(beyond).first;
            last_key = &it->first;
            last = &it->second;
          }
          last->push_back(e);
        }
      }
      std::vector<v1::NextHopReach> entries;
      for (const auto& [b, es] : groups) {
        v1::NextHopReach r;
        r.set_next_hop(ids_[static_cast<size_t>(nb)]);
        for (int e : es) r.add_egress(ids_[static_cast<size_t>(e)]);
        for (int m : b) r.add_beyond(ids_[static_cast<size_t>(m)]);
        entries.push_back(std::move(r));
      }
      std::sort(entries.begin(), entries.end(),
                [](const v1::NextHopReach& a, const v1::NextHopReach& b) {
                  return a.egress(0) < b.egress(0);
                });
      if (entries.empty()) entries.emplace_back().set_next_hop(ids_[static_cast<size_t>(nb)]);
      for (auto& e : entries) out.push_back(std::move(e));
    }
    return out;
  }

 private:
  bool Reaches(int m, int e) const {
    const auto& r = down_reach_[static_cast<size_t>(m)];
    return std::binary_search(r.begin(), r.end(), e);
  }

  // Devices one hop beyond `n` (seen from `x`) on live valley-free paths to
  // leaf `e`, ascending; false when there are none.
  bool Beyond(int x, int n, int e, std::vector<int>* out) const {
    out->clear();
    const auto& side =
        Reaches(n, e) ? below_[static_cast<size_t>(n)] : above_[static_cast<size_t>(n)];
    if (side.empty()) return false;
    for (int m : side[static_cast<size_t>(e)]) {
      if (m != x) out->push_back(m);
    }
    return !out->empty();
  }

  std::map<std::string, int> index_;
  std::vector<std::string> ids_;
  std::vector<int> rank_;
  std::vector<std::vector<std::pair<int, bool>>> adj_;  // ascending neighbor -> any live link
  std::vector<std::vector<int>> down_reach_;
  // [switch][leaf]: empty outer vector = no such neighbors at all.
  std::vector<std::vector<std::vector<int>>> below_, above_;
};

}  // namespace

std::vector<v1::NextHopReach> NextHopReachOf(const loom::topology::TopologyIndex& topo,
                                             const std::set<std::string>& down_links,
                                             const std::string& device,
                                             const std::set<std::string>& egress) {
  return ReachIndex(topo, down_links).Of(device, egress);
}

void AddNextHopReach(const loom::topology::TopologyIndex& topo,
                     const std::set<std::string>& down_links,
                     std::map<std::string, v1::DeviceState>* desired) {
  std::optional<ReachIndex> index;
  // destination -> egress leaf number (-1: none); leaves numbered as first seen.
  std::unordered_map<std::string, int> memo;
  std::vector<std::string> leaves;
  std::unordered_map<std::string, int> leaf_number;
  auto egress_of = [&](const std::string& dest) {
    auto [it, inserted] = memo.try_emplace(dest, -1);
    if (inserted) {
      std::string leaf;
      if (const v1::Device* d = topo.FindDevice(dest); d && d->role() == v1::DEVICE_ROLE_LEAF) {
        leaf = dest;
      } else {
        leaf = topo.NicLeaf(topo.EndpointNic(dest));
      }
      if (!leaf.empty()) {
        auto [lt, added] = leaf_number.try_emplace(leaf, static_cast<int>(leaves.size()));
        if (added) leaves.push_back(leaf);
        it->second = lt->second;
      }
    }
    return it->second;
  };
  std::vector<char> seen;
  for (auto& [id, st] : *desired) {
    st.clear_next_hop_reach();
    if (st.routes_size() == 0 && st.weights_size() == 0) continue;
    std::vector<int> found;
    auto note = [&](const std::string& dest) {
      const int e = egress_of(dest);
      if (e < 0) return;
      if (seen.size() <= static_cast<size_t>(e)) seen.resize(static_cast<size_t>(e) + 1, 0);
      if (!seen[static_cast<size_t>(e)]) {
        seen[static_cast<size_t>(e)] = 1;
        found.push_back(e);
      }
    };
    for (const auto& r : st.routes()) note(r.destination());
    for (const auto& w : st.weights()) note(w.destination());
    std::set<std::string> egress;
    for (int e : found) {
      egress.insert(leaves[static_cast<size_t>(e)]);
      seen[static_cast<size_t>(e)] = 0;
    }
    if (!index) index.emplace(topo, down_links);
    for (auto& r : index->Of(id, egress)) *st.add_next_hop_reach() = std::move(r);
  }
}

}  // namespace loom::te
