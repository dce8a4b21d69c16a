// Routing in the engine (fabric_impl.h): hop-count distances and ECMP groups (or static /
// up-down routes), the per-switch member choice (static hash with GLB weights, ALB buckets,
// DLB flowlet quality, per-packet spraying, colors and colored routes), path walks, and a
// QP's path flows (re-routing moves what is in flight; sprayed sub-flows and their weights).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sim-fabric/fabric_impl.h"

namespace loom::sim {

void Fabric::Impl::ApplyPendingRouting() {
  if (!routing_dirty) return;
  routing_dirty = false;
  RecomputeDistances();
  for (Qp& qp : qps) {
    if (qp.routed && !qp.local) Route(qp, /*keep_dlb=*/true);
  }
}

void Fabric::Impl::RecomputeDistances() {
  const int nn = static_cast<int>(nodes.size());
  dist.assign(leaves.size() * nn, -1);
  std::vector<int> frontier;
  for (size_t l = 0; l < leaves.size(); ++l) {
    int* d = &dist[l * nn];
    if (!nodes[leaves[l]].up) continue;
    d[leaves[l]] = 0;
    frontier.assign(1, leaves[l]);
    for (size_t i = 0; i < frontier.size(); ++i) {
      const int u = frontier[i];
      for (int p : nodes[u].ports) {
        const int v = ports[p].peer_node;
        if (!nodes[v].is_switch || d[v] >= 0 || !PortLive(p)) continue;
        d[v] = d[u] + 1;
        frontier.push_back(v);
      }
    }
  }
  group_cache.assign(leaves.size() * nn, {});
  group_valid.assign(leaves.size() * nn, 0);
}

const std::vector<int>& Fabric::Impl::Group(int node, int leaf) {
  const size_t k = static_cast<size_t>(leaf) * nodes.size() + node;
  if (!group_valid[k]) {
    group_valid[k] = 1;
    auto& g = group_cache[k];
    g.clear();
    const int* d = &dist[static_cast<size_t>(leaf) * nodes.size()];
    auto sr = static_routes.find(GroupKey(node, leaf));
    if (sr != static_routes.end()) {
      for (int p : sr->second) {
        const int v = ports[p].peer_node;
        if (!nodes[v].is_switch || !PortLive(p)) continue;
        if (up_down && !(d[node] > 0 && d[v] == d[node] - 1)) continue;
        g.push_back(p);
      }
    }
    if (g.empty() && d[node] > 0) {
      for (int p : nodes[node].ports) {
        const int v = ports[p].peer_node;
        if (nodes[v].is_switch && PortLive(p) && d[v] == d[node] - 1) g.push_back(p);
      }
    }
  }
  return group_cache[k];
}

uint64_t Fabric::Impl::Hash(int node, const Qp& qp, int salt) const {
  const Node& n = nodes[node];
  uint64_t h = n.hash_seed;
  h = HashCombine(h, static_cast<uint64_t>(nics[qp.src].node));  // source IP
  h = HashCombine(h, static_cast<uint64_t>(nics[qp.dst].node));  // destination IP
  h = HashCombine(h, qp.sport);                                  // UDP source port
  h = HashCombine(h, 4791);                                      // RoCEv2 UDP port
  h = HashCombine(h, 17);
  if (n.cfg.hash_dest_qp) h = HashCombine(h, qp.dest_qp);
  if (salt) h = HashCombine(h, static_cast<uint64_t>(salt) * 0x51ed27);
  return h;
}

double Fabric::Impl::PortLoadBps(int p) {
  Port& pt = ports[p];
  const DlbProfile& prof = nodes[pt.node].cfg.dlb;
  const TimeNs span = now() - pt.ewma_t;
  if (span >= prof.sample_ns && span > 0) {
    const double inst = (pt.out_octets - pt.ewma_bytes) * 8e9 / static_cast<double>(span);
    const double a = 1 - std::exp(-static_cast<double>(span) / prof.load_ewma_ns);
    pt.ewma_bps += a * (inst - pt.ewma_bps);
    pt.provisional_bps *= (1 - a);
    pt.ewma_t = now();
    pt.ewma_bytes = pt.out_octets;
  }
  return pt.ewma_bps + pt.provisional_bps;
}

int Fabric::Impl::Quality(int p) {
  const Port& pt = ports[p];
  const DlbProfile& prof = nodes[pt.node].cfg.dlb;
  const double util = PortLoadBps(p) / std::max(1.0, pt.cap_bps);
  double depth = 0;
  for (int pr = 0; pr < kPriorities; ++pr) depth += queues[p * kPriorities + pr].q;
  const int lb = 7 - std::min(7, static_cast<int>(util * 8));
  const int qb = 7 - std::min(7, static_cast<int>(depth / std::max(1.0, prof.queue_band_bytes)));
  return std::clamp(static_cast<int>(std::lround(prof.load_weight * std::max(0, lb) +
                                                 (1 - prof.load_weight) * std::max(0, qb))),
                    0, 7);
}

void Fabric::Impl::ColorFilter(int node, const Qp& qp, const std::vector<int>& members,
                               std::vector<int>* out) {
  *out = members;
  const Node& n = nodes[node];
  const RouteEntry* route = nullptr;
  for (int cls : {qp.prio, -1}) {
    if (n.routes.empty() || route) break;
    auto r = n.routes.find(RouteKey(qp.dst, cls));
    if (r == n.routes.end()) continue;
    for (const RouteEntry& e : r->second) {
      if ((qp.dest_qp & e.qp_mask) == e.qp_value) {
        route = &e;
        break;
      }
    }
  }
  if (route) {
    std::vector<int> sel;
    for (uint32_t c : {route->color, route->backup_color}) {
      ColorMembers(n, c, members, &sel);
      if (!sel.empty()) {
        *out = std::move(sel);
        return;
      }
    }
    return;  // neither color has a live member here: every ECMP member
  }
  if (qp.color == 0) return;
  uint32_t color = qp.color;
  for (int depth = 0; depth < 8 && color != 0; ++depth) {
    auto it = n.colors.find(color);
    if (it == n.colors.end()) return;  // switch does not know the color: uncolored
    std::vector<int> sel;
    ColorMembers(n, color, members, &sel);
    if (!sel.empty()) {
      *out = std::move(sel);
      return;
    }
    color = it->second.second;
  }
}

ForwardingMode Fabric::Impl::ModeFor(int node, int leaf, const Qp& qp) const {
  const Node& n = nodes[node];
  if (n.cfg.spray_mask & (1u << qp.prio)) return ForwardingMode::kDlbPerPacket;
  const GroupCfg* g = FindGroup(node, leaf);
  if (g && g->has_mode) return g->mode;
  return n.cfg.mode;
}

int Fabric::Impl::Choose(int node, int leaf, Qp& qp, int salt, int prefer, int* alb_slot) {
  const std::vector<int>& members = Group(node, leaf);
  if (members.empty()) return -1;
  std::vector<int> allowed;
  ColorFilter(node, qp, members, &allowed);
  const uint64_t h = Hash(node, qp, salt);
  ForwardingMode mode = ModeFor(node, leaf, qp);
  GroupCfg* g = FindGroup(node, leaf);
  if (mode == ForwardingMode::kDlbPerPacket) mode = ForwardingMode::kStaticHash;  // salted
  switch (mode) {
    case ForwardingMode::kDlbFlowlet:
    case ForwardingMode::kDlbAlb: {
      qp.dlb = true;
      const TimeNs inactivity = nodes[node].cfg.dlb.inactivity_ns;
      qp.min_inactivity = std::min(qp.min_inactivity, inactivity);
      auto has = [](const std::vector<int>& v, int p) {
        return std::find(v.begin(), v.end(), p) != v.end();
      };
      // kDlbAlb: the flow's bucket (flowset entry); -1 = no table (plain flowlet DLB).
      GroupCfg* table = nullptr;
      size_t bucket = 0;
      int cur = -1;
      bool cur_colored = false;  // the bucket's member is live but outside the QP's colors
      if (mode == ForwardingMode::kDlbAlb && g && !g->alb.empty()) {
        table = g;
        bucket = h % table->alb.size();
        cur = table->alb[bucket];
        cur_colored = !has(allowed, cur) && has(members, cur);
      }
      // GLB weights: remote quality band per member (see above); max_w 0 = none.
      auto weight = [g](int p) {
        auto it = g->weights.find(p);
        return it == g->weights.end() ? 0.0 : it->second;
      };
      double max_w = 0;
      if (g && !g->weights.empty()) {
        for (int p : allowed) max_w = std::max(max_w, weight(p));
        if (max_w > 0) {
          allowed.erase(std::remove_if(allowed.begin(), allowed.end(),
                                       [&](int p) { return !(weight(p) > 0); }),
                        allowed.end());
        }
      }
      int slot = -1;
      if (table && !cur_colored) {
        slot = table->alb_base + static_cast<int>(bucket);
        if (has(allowed, cur) && (prefer >= 0 || now() - alb_seen[slot] < inactivity)) {
          *alb_slot = slot;
          return cur;  // follow the bucket
        }
      } else if (prefer >= 0 && has(allowed, prefer)) {
        return prefer;
      }
      const size_t n = allowed.size();
      int best = -1, best_q = -1;
      for (size_t i = 0; i < n; ++i) {
        const int p = allowed[(h + i) % n];
        int qv = Quality(p);
        if (max_w > 0) {
          qv = std::min(qv, static_cast<int>(std::floor(7.0 * weight(p) / max_w)));
        }
        if (qv > best_q) {
          best_q = qv;
          best = p;
        }
      }
      double r = qp.Rc().rate_bps();
      if (qp.cap_bps > 0) r = std::min(r, qp.cap_bps);
      PortLoadBps(best);
      ports[best].provisional_bps += r;
      if (slot >= 0) {
        // DLB's choice becomes the bucket's member; the bucket is in use from now.
        table->alb[bucket] = best;
        alb_seen[slot] = now();
        *alb_slot = slot;
      }
      return best;
    }
    case ForwardingMode::kAlb:
      if (g && !g->alb.empty()) {
        const size_t b = h % g->alb.size();
        const int p = g->alb[b];
        if (std::find(allowed.begin(), allowed.end(), p) != allowed.end()) {
          *alb_slot = g->alb_base + static_cast<int>(b);
          return p;
        }
      }
      [[fallthrough]];
    default:
      break;
  }
  if (g && !g->weights.empty()) {
    double total = 0;
    for (int p : allowed) {
      auto it = g->weights.find(p);
      total += it == g->weights.end() ? 0 : it->second;
    }
    if (total > 0) {
      double x = static_cast<double>(h >> 11) * 0x1.0p-53 * total;
      for (int p : allowed) {
        auto it = g->weights.find(p);
        const double w = it == g->weights.end() ? 0 : it->second;
        if (x < w) return p;
        x -= w;
      }
    }
  }
  return allowed[h % allowed.size()];
}

std::vector<int> Fabric::Impl::Walk(Qp& qp, int salt, int spray_member,
                                    const std::vector<int>* prefer, int* spray_at,
                                    std::vector<int>* albs) {
  std::vector<int> out;
  const Nic& s = nics[qp.src];
  const Nic& d = nics[qp.dst];
  if (!PortLive(s.port) || !PortLive(d.port)) return out;
  out.push_back(s.port);
  albs->push_back(-1);
  int node = s.leaf_node;
  const int dleaf = nodes[d.leaf_node].leaf;
  for (int guard = 0; node != d.leaf_node; ++guard) {
    if (guard > kMaxHops - 2) return {};
    const std::vector<int>& members = Group(node, dleaf);
    if (members.empty()) return {};
    int alb = -1, p = -1;
    if (ModeFor(node, dleaf, qp) == ForwardingMode::kDlbPerPacket && members.size() > 1 &&
        (*spray_at < 0 || *spray_at == node)) {
      if (*spray_at < 0) *spray_at = node;
      if (spray_member >= 0) {
        std::vector<int> allowed;
        ColorFilter(node, qp, members, &allowed);
        p = allowed[static_cast<size_t>(spray_member) % allowed.size()];
      }
    }
    if (p < 0) {
      const size_t idx = out.size();
      const int pref = prefer && idx < prefer->size() ? (*prefer)[idx] : -1;
      p = Choose(node, dleaf, qp, salt, pref, &alb);
    }
    if (p < 0) return {};
    out.push_back(p);
    albs->push_back(alb);
    node = ports[p].peer_node;
  }
  // Last hop: leaf -> destination NIC.
  out.push_back(d.port);  // placeholder, replaced below
  out.back() = ports[d.port].peer_port;
  albs->push_back(-1);
  if (static_cast<int>(out.size()) > kMaxHops) return {};
  return out;
}

int Fabric::Impl::AllocPf() {
  if (!free_pfs.empty()) {
    int i = free_pfs.back();
    free_pfs.pop_back();
    pfs[i] = PathFlow{};
    return i;
  }
  pfs.emplace_back();
  return static_cast<int>(pfs.size()) - 1;
}

double Fabric::Impl::Evacuate(PathFlow& pf, int from_hop, double* dropped) {
  double moved = 0;
  for (int h = from_hop; h < pf.n; ++h) {
    Hop& hp = pf.h[h];
    const double x = hp.b + hp.in;
    if (x <= 0) continue;
    Queue& q = queues[hp.q];
    q.q = std::max(0.0, q.q - hp.b);
    q.arr = std::max(0.0, q.arr - hp.in);
    const int port = hp.q / kPriorities;
    if (hp.ing >= 0) ReleaseIngress(hp.ing, ports[port].node, x);
    if (!PortLive(port)) {
      q.drop += x;
      ports[port].out_discards += x;
      *dropped += x;
    } else {
      moved += x;
    }
    hp.b = hp.in = 0;
  }
  return moved;
}

void Fabric::Impl::Route(Qp& qp, bool keep_dlb) {
  qp.routed = true;
  unsteady = true;
  if (qp.local) return;
  qp.dlb = false;
  qp.min_inactivity = kNever;
  int spray_at = -1;
  std::vector<std::vector<int>> paths, albs(1);
  const std::vector<int>* prefer = keep_dlb && !qp.last_ports.empty() ? &qp.last_ports[0] : nullptr;
  paths.push_back(Walk(qp, 0, -1, prefer, &spray_at, &albs[0]));
  int k = 1;
  if (spray_at >= 0 && !paths[0].empty()) {
    const int dleaf = nodes[nics[qp.dst].leaf_node].leaf;
    std::vector<int> allowed;
    ColorFilter(spray_at, qp, Group(spray_at, dleaf), &allowed);
    k = static_cast<int>(allowed.size());
    paths.clear();
    albs.assign(k, {});
    for (int i = 0; i < k; ++i) {
      int sa = -1;
      paths.push_back(Walk(qp, i + 1, i, nullptr, &sa, &albs[i]));
    }
  }
  qp.spray_node = spray_at;
  // Gather what is in flight on the old path flows.
  double residual = 0, dropped = 0;
  std::vector<int> old = qp.pfs;
  qp.pfs.clear();
  qp.last_ports.clear();
  qp.w.clear();
  for (int i = 0; i < k; ++i) {
    if (paths[i].empty()) continue;
    int pi;
    int first_diff = 0;
    if (static_cast<size_t>(i) < old.size()) {
      pi = old[i];
      PathFlow& pf = pfs[pi];
      while (first_diff < pf.n && first_diff < static_cast<int>(paths[i].size()) &&
             pf.h[first_diff].q / kPriorities == paths[i][first_diff] &&
             PortLive(paths[i][first_diff])) {
        ++first_diff;
      }
      residual += Evacuate(pf, first_diff, &dropped);
    } else {
      pi = AllocPf();
    }
    PathFlow& pf = pfs[pi];
    pf.qp = qp.id;
    const int n = static_cast<int>(paths[i].size());
    // Unchanged hops keep their bytes; their bucket slot may still change (a resized
    // table, or a mode change), so the bucket counters follow the new choice.
    for (int h = 0; h < first_diff; ++h) pf.h[h].alb = albs[i][h];
    for (int h = first_diff; h < n; ++h) {
      pf.h[h] = Hop{};
      pf.h[h].q = paths[i][h] * kPriorities + qp.prio;
      pf.h[h].ing = h == 0 ? -1 : ports[paths[i][h - 1]].peer_port * kPriorities + qp.prio;
      pf.h[h].alb = albs[i][h];
    }
    pf.n = n;
    qp.pfs.push_back(pi);
    qp.last_ports.push_back(paths[i]);
    qp.w.push_back(1.0 / k);
  }
  MarkPrivateHops(qp);
  for (size_t i = qp.pfs.size(); i < old.size(); ++i) {
    residual += Evacuate(pfs[old[i]], 0, &dropped);
    free_pfs.push_back(old[i]);
  }
  if (!qp.pfs.empty() && residual > 0) {
    // Re-inject what was in flight at the first switch of the new path.
    PathFlow& pf = pfs[qp.pfs[0]];
    Admit(pf, std::min(1, pf.n - 1), residual, qp);
  } else {
    dropped += residual;
  }
  if (dropped > 0) {
    qp.sent = std::max(0.0, qp.sent - dropped);  // go-back-N resend
    // An idle QP of a gated job is re-activated by its gate update.
    if (!qp.active && qp.job >= 0 && qp.transfer >= 0 && jobs[qp.job].gated) {
      MarkTransfer(qp.job, qp.transfer);
    }
  }
  // Data: the links' propagation, each switch's latency and store and forward of one
  // MTU at its ingress rate, less the one step per hop after the first switch the
  // engine's pipeline already takes.
  qp.credit_delay = 0;
  if (!qp.last_ports.empty() && !qp.last_ports[0].empty()) {
    const auto& path = qp.last_ports[0];
    const int switches = static_cast<int>(path.size()) - 1;
    double phys = 0;
    for (size_t i = 0; i < path.size(); ++i) {
      phys += static_cast<double>(ports[path[i]].delay);
      if (static_cast<int>(i) < switches) {
        phys += static_cast<double>(opt().switch_latency_ns) +
                opt().mtu_bytes * 8e9 / std::max(1.0, ports[path[i]].nominal_bps);
      }
    }
    qp.path_latency_ns = phys;
    const double inherent = static_cast<double>(std::max(0, switches - 1) * dt());
    qp.credit_delay = static_cast<TimeNs>(std::max(0.0, std::round(phys - inherent)));
    qp.pipeline_excess_ns = static_cast<TimeNs>(std::max(0.0, std::round(inherent - phys)));
  }
  // CNP return delay: propagation of every link plus the per-switch latency.
  qp.cnp_delay = 0;
  if (!qp.last_ports.empty()) {
    for (int p : qp.last_ports[0]) qp.cnp_delay += ports[p].delay + opt().cnp_hop_latency_ns;
  }
  if (k > 1) UpdateSprayWeights(qp);
}

void Fabric::Impl::MarkPrivateHops(Qp& qp) {
  const size_t k = qp.pfs.size();
  if (k > 1) spray_jitter = true;
  // A queue is shared when it is on every sub-flow's path (a path crosses a queue once).
  std::vector<int> all;
  if (k > 1) {
    for (int pi : qp.pfs) {
      for (int h = 0; h < pfs[pi].n; ++h) all.push_back(pfs[pi].h[h].q);
    }
    std::sort(all.begin(), all.end());
  }
  for (size_t i = 0; i < k; ++i) {
    PathFlow& pf = pfs[qp.pfs[i]];
    pf.c2 = k > 1 ? 1 - qp.w[i] : 0;
    pf.private_hops = 0;
    if (k < 2) continue;
    for (int h = 0; h < pf.n; ++h) {
      const auto [lo, hi] = std::equal_range(all.begin(), all.end(), pf.h[h].q);
      if (static_cast<size_t>(hi - lo) < k) pf.private_hops |= 1u << h;
    }
  }
}

void Fabric::Impl::UpdateSprayWeights(Qp& qp) {
  if (qp.spray_node < 0 || qp.pfs.size() < 2) return;
  double total = 0;
  for (size_t i = 0; i < qp.pfs.size(); ++i) {
    const PathFlow& pf = pfs[qp.pfs[i]];
    int port = -1;
    for (int h = 0; h < pf.n; ++h) {
      if (ports[pf.h[h].q / kPriorities].node == qp.spray_node) port = pf.h[h].q / kPriorities;
    }
    qp.w[i] = port >= 0 ? Quality(port) + 1 : 1;
    total += qp.w[i];
  }
  for (size_t i = 0; i < qp.w.size(); ++i) {
    qp.w[i] /= total;
    pfs[qp.pfs[i]].c2 = 1 - qp.w[i];
  }
  qp.next_spray = now() + nodes[qp.spray_node].cfg.dlb.sample_ns;
}

}  // namespace loom::sim
