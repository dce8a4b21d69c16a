#include "controller/te/next_hops.h"

#include <algorithm>
#include <optional>

namespace loom::te {

namespace v1 = loom::v1;

namespace {

int Rank(v1::DeviceRole role) {
  switch (role) {
    case v1::DEVICE_ROLE_LEAF:
      return 1;
    case v1::DEVICE_ROLE_SPINE:
      return 2;
    case v1::DEVICE_ROLE_SUPER_SPINE:
      return 3;
    default:
      return 0;
  }
}

// The switch graph with link liveness and, per switch, the leaves it reaches
// going down only.
class ReachIndex {
 public:
  ReachIndex(const loom::topology::TopologyIndex& topo, const std::set<std::string>& down) {
    for (const auto& d : topo.topology().devices()) {
      if (int r = Rank(d.role()); r > 0) rank_[d.id()] = r;
    }
    for (const auto& l : topo.topology().links()) {
      const std::string& a = l.a().device();
      const std::string& b = l.b().device();
      if (!rank_.count(a) || !rank_.count(b) || a == b) continue;
      const bool live = !down.count(l.id());
      bool& ab = adj_[a][b];
      ab = ab || live;
      bool& ba = adj_[b][a];
      ba = ba || live;
    }
    for (int r = 1; r <= 3; ++r) {
      for (const auto& [id, rank] : rank_) {
        if (rank != r) continue;
        std::set<std::string>& reach = down_reach_[id];
        if (r == 1) reach.insert(id);
        for (const auto& [m, live] : Neighbors(id)) {
          if (!live || rank_.at(m) >= r) continue;
          const auto& below = down_reach_[m];
          reach.insert(below.begin(), below.end());
        }
      }
    }
  }

  std::vector<v1::NextHopReach> Of(const std::string& x,
                                   const std::set<std::string>& egress) const {
    std::vector<v1::NextHopReach> out;
    auto rx = rank_.find(x);
    if (rx == rank_.end()) return out;
    for (const auto& [n, live] : Neighbors(x)) {
      if (rank_.at(n) <= rx->second) continue;
      // beyond set -> egress leaves; an empty set stands for "E itself".
      std::map<std::vector<std::string>, std::vector<std::string>> groups;
      if (live) {
        for (const std::string& e : egress) {
          if (e == x || !rank_.count(e)) continue;
          std::vector<std::string> beyond;
          if (!Beyond(x, n, e, &beyond)) continue;
          if (beyond.size() == 1 && beyond.front() == e) beyond.clear();
          groups[beyond].push_back(e);
        }
      }
      std::vector<v1::NextHopReach> entries;
      for (const auto& [beyond, leaves] : groups) {
        v1::NextHopReach r;
        r.set_next_hop(n);
        for (const auto& e : leaves) r.add_egress(e);
        for (const auto& b : beyond) r.add_beyond(b);
        entries.push_back(std::move(r));
      }
      std::sort(entries.begin(), entries.end(),
                [](const v1::NextHopReach& a, const v1::NextHopReach& b) {
                  return a.egress(0) < b.egress(0);
                });
      if (entries.empty()) entries.emplace_back().set_next_hop(n);
      for (auto& e : entries) out.push_back(std::move(e));
    }
    return out;
  }

 private:
  const std::map<std::string, bool>& Neighbors(const std::string& id) const {
    static const std::map<std::string, bool> kNone;
    auto it = adj_.find(id);
    return it == adj_.end() ? kNone : it->second;
  }

  bool Reaches(const std::string& m, const std::string& e) const {
    auto it = down_reach_.find(m);
    return it != down_reach_.end() && it->second.count(e) > 0;
  }

  // Devices one hop beyond `n` (seen from `x`) on live shortest paths to
  // leaf `e`, ascending; false when there are none.
  bool Beyond(const std::string& x, const std::string& n, const std::string& e,
              std::vector<std::string>* out) const {
    const int rn = rank_.at(n);
    const bool down_only = Reaches(n, e);
    for (const auto& [m, live] : Neighbors(n)) {
      if (!live || m == x) continue;
      const int rm = rank_.at(m);
      if (down_only ? rm >= rn : rm <= rn) continue;
      if (Reaches(m, e)) out->push_back(m);
    }
    return !out->empty();
  }

  std::map<std::string, int> rank_;
  std::map<std::string, std::map<std::string, bool>> adj_;  // device -> neighbor -> any live link
  std::map<std::string, std::set<std::string>> down_reach_;
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
  auto egress_of = [&topo](const std::string& dest) -> std::string {
    if (const v1::Device* d = topo.FindDevice(dest); d && d->role() == v1::DEVICE_ROLE_LEAF) {
      return dest;
    }
    return topo.NicLeaf(topo.EndpointNic(dest));
  };
  for (auto& [id, st] : *desired) {
    st.clear_next_hop_reach();
    if (st.routes_size() == 0 && st.weights_size() == 0) continue;
    std::set<std::string> egress;
    for (const auto& r : st.routes()) {
      if (std::string e = egress_of(r.destination()); !e.empty()) egress.insert(e);
    }
    for (const auto& w : st.weights()) {
      if (std::string e = egress_of(w.destination()); !e.empty()) egress.insert(e);
    }
    if (!index) index.emplace(topo, down_links);
    for (auto& r : index->Of(id, egress)) *st.add_next_hop_reach() = std::move(r);
  }
}

}  // namespace loom::te
