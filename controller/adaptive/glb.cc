#include "controller/adaptive/glb.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>

namespace loom::adaptive {
namespace {

struct HopInput {
  double band_sum = 0;
  int paths = 0;
  int local_band = 7;
  int remote_band = 7;
  double capacity_bps = 0;
  bool stale = false;
  double band() const { return paths > 0 ? band_sum / paths : 0.0; }
};

std::string Fmt(const char* fmt, double a) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, a);
  return buf;
}

std::string Gbps(double bps) { return Fmt("%.0fG", bps / 1e9); }
std::string Band(double b) { return Fmt(std::floor(b) == b ? "%.0f" : "%.2f", b); }

// Largest-remainder split of `total` over `shares` (>= 0), each result at
// least `floor_weight`.
std::vector<uint32_t> Apportion(const std::vector<double>& shares, uint32_t total,
                                uint32_t floor_weight) {
  const size_t n = shares.size();
  std::vector<uint32_t> out(n, floor_weight);
  if (n == 0) return out;
  const uint64_t floors = static_cast<uint64_t>(floor_weight) * n;
  if (floors >= total) return out;
  const double sum = std::accumulate(shares.begin(), shares.end(), 0.0);
  const double spare = static_cast<double>(total - floors);
  std::vector<double> exact(n);
  for (size_t i = 0; i < n; ++i) {
    exact[i] = sum > 0 ? shares[i] / sum * static_cast<double>(total) : spare / n + floor_weight;
  }
  // Hops whose exact share is below the floor sit at the floor; the rest
  // split what remains in proportion.
  std::vector<bool> pinned(n, false);
  for (bool again = true; again;) {
    again = false;
    double free_share = 0;
    uint64_t pinned_total = 0;
    for (size_t i = 0; i < n; ++i) {
      if (pinned[i]) {
        pinned_total += floor_weight;
      } else {
        free_share += shares[i];
      }
    }
    const double free_total = static_cast<double>(total) - static_cast<double>(pinned_total);
    for (size_t i = 0; i < n; ++i) {
      if (pinned[i]) continue;
      exact[i] = free_share > 0 ? shares[i] / free_share * free_total : 0;
      if (exact[i] < floor_weight) {
        pinned[i] = true;
        again = true;
      }
    }
  }
  uint64_t assigned = 0;
  std::vector<std::pair<double, size_t>> rem;
  for (size_t i = 0; i < n; ++i) {
    if (pinned[i]) {
      out[i] = floor_weight;
    } else {
      out[i] = static_cast<uint32_t>(std::floor(exact[i]));
      rem.emplace_back(exact[i] - std::floor(exact[i]), i);
    }
    assigned += out[i];
  }
  std::sort(rem.begin(), rem.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (size_t k = 0; assigned < total && k < rem.size(); ++k, ++assigned) ++out[rem[k].second];
  return out;
}

bool SameCapacity(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)});
}

}  // namespace

std::string ValidateGlbParams(const GlbParams& p) {
  if (p.weight_scale < 2) return "weight_scale: must be >= 2";
  if (p.min_weight < 1) return "min_weight: must be >= 1 (a live next hop keeps some traffic)";
  if (p.min_weight * 2 > p.weight_scale) return "min_weight: must be <= weight_scale / 2";
  if (p.min_band_gap < 1 || p.min_band_gap > 7) return "min_band_gap: must be in 1..7";
  if (!(p.decrease_factor > 0 && p.decrease_factor < 1))
    return "decrease_factor: must be in (0, 1)";
  if (!(p.min_multiplier > 0 && p.min_multiplier <= 1)) return "min_multiplier: must be in (0, 1]";
  if (p.good_band < 0 || p.good_band > 7) return "good_band: must be in 0..7";
  if (p.relax_after_rounds < 1) return "relax_after_rounds: must be >= 1";
  if (p.max_relax_backoff < 1) return "max_relax_backoff: must be >= 1";
  if (p.min_rounds_between_changes < 1) return "min_rounds_between_changes: must be >= 1";
  if (p.max_weight_step < 1) return "max_weight_step: must be >= 1";
  return "";
}

GlbResult ComputeGlbWeights(const std::vector<GlbPath>& paths, const GlbState& previous,
                            const GlbParams& params) {
  using Key = std::pair<std::string, std::string>;
  std::map<Key, std::map<std::string, HopInput>> sets;
  for (const GlbPath& p : paths) {
    HopInput& h = sets[{p.device, p.destination}][p.next_hop];
    h.band_sum += std::clamp(p.band, 0, 7);
    ++h.paths;
    h.local_band = std::min(h.local_band, p.local_band);
    h.remote_band = std::min(h.remote_band, p.remote_band);
    h.capacity_bps = std::max(h.capacity_bps, p.live_capacity_bps);
    h.stale = h.stale || p.stale;
  }

  GlbResult out;
  const int64_t round = previous.round;
  out.state.round = round + 1;
  const double f = params.decrease_factor;

  for (const auto& [key, hops] : sets) {
    ++out.sets;
    const auto& [device, destination] = key;
    auto prev_it = previous.sets.find(key);
    const bool is_new = prev_it == previous.sets.end();
    GlbSetState s = is_new ? GlbSetState{} : prev_it->second;
    std::map<std::string, std::string> hop_reason;
    std::string set_reason;
    bool structural = is_new;
    bool acted = false;

    // Next hops that are no longer paths.
    std::map<std::string, uint32_t> old_weight;
    for (const auto& [hop, hs] : s.hops) old_weight[hop] = hs.weight;
    for (auto it = s.hops.begin(); it != s.hops.end();) {
      if (!hops.count(it->first)) {
        hop_reason[it->first] = "next hop " + it->first + " no longer reaches " + destination;
        structural = true;
        it = s.hops.erase(it);
      } else {
        ++it;
      }
    }

    // Capacity and liveness.
    double best = -1;
    int fresh = 0, stale_live = 0;
    for (const auto& [hop, in] : hops) {
      auto [it, inserted] = s.hops.try_emplace(hop);
      GlbHopState& hs = it->second;
      const bool live = in.capacity_bps > 0;
      if (!live) {
        if (hs.weight > 0 || inserted) {
          hop_reason[hop] = "next hop " + hop + " down (no live capacity)";
          structural = true;
        }
        hs.capacity_bps = 0;
        continue;
      }
      if (in.stale) {
        ++stale_live;
        if (hs.weight > 0) continue;  // Keeps its weight and multiplier.
      } else {
        ++fresh;
        best = std::max(best, in.band());
      }
      if (!inserted && !SameCapacity(hs.capacity_bps, in.capacity_bps)) {
        hop_reason[hop] = "live capacity of " + hop + " " + Gbps(hs.capacity_bps) + " -> " +
                          Gbps(in.capacity_bps);
        structural = true;
      } else if (inserted && !is_new) {
        hop_reason[hop] = "new next hop " + hop + " (" + Gbps(in.capacity_bps) + ")";
        structural = true;
      }
      hs.capacity_bps = in.capacity_bps;
    }
    if (fresh == 0 && stale_live > 0 && !structural) {
      ++out.stale_sets;
      s.good_rounds = 0;
    }

    // The quality controller (fresh, live hops only).
    const bool hold = !is_new && s.last_change_round >= 0 &&
                      round - s.last_change_round < params.min_rounds_between_changes;
    if (fresh > 0) {
      std::vector<std::string> congested;
      bool all_good = true;
      for (const auto& [hop, in] : hops) {
        if (in.stale || in.capacity_bps <= 0) continue;
        if (best - in.band() >= params.min_band_gap) congested.push_back(hop);
        if (in.band() < params.good_band) all_good = false;
      }
      if (!congested.empty()) {
        s.good_rounds = 0;
        if (!hold) {
          for (const std::string& hop : congested) {
            const HopInput& in = hops.at(hop);
            GlbHopState& hs = s.hops[hop];
            const double m0 = hs.multiplier;
            hs.multiplier = std::max(params.min_multiplier, m0 * f);
            if (hs.multiplier == m0) continue;
            acted = true;
            const bool remote = in.remote_band < in.local_band;
            hop_reason[hop] = std::string(remote ? "remote" : "path") + " congestion via " + hop +
                              " to " + destination + ": band " + Band(in.band()) + " (local " +
                              std::to_string(in.local_band) + ", remote " +
                              std::to_string(in.remote_band) + ") vs best " + Band(best) +
                              "; quality factor " + Fmt("%.2f", m0) + " -> " +
                              Fmt("%.2f", hs.multiplier);
            set_reason += (set_reason.empty() ? "" : "; ") + hop + " band " + Band(in.band());
          }
          if (acted) {
            if (s.last_relax_round >= 0 &&
                round - s.last_relax_round <= params.relax_after_rounds) {
              s.relax_backoff = std::min(params.max_relax_backoff, s.relax_backoff * 2);
            }
            s.relaxed_since_decrease = false;
          }
          for (const auto& [hop, in] : hops) {
            if (in.stale || in.capacity_bps <= 0 || best - in.band() >= 1) continue;
            GlbHopState& hs = s.hops[hop];
            if (hs.multiplier >= 1) continue;
            const double m0 = hs.multiplier;
            hs.multiplier = std::min(1.0, m0 / f);
            acted = true;
            hop_reason[hop] = "best path via " + hop + " (band " + Band(in.band()) +
                              ") regains share; quality factor " + Fmt("%.2f", m0) + " -> " +
                              Fmt("%.2f", hs.multiplier);
          }
        }
      } else if (all_good) {
        ++s.good_rounds;
        bool lowered = false;
        for (const auto& [hop, in] : hops) {
          if (!in.stale && in.capacity_bps > 0 && s.hops[hop].multiplier < 1) lowered = true;
        }
        if (!lowered) {
          s.good_rounds = 0;
        } else if (!hold && s.good_rounds >= params.relax_after_rounds * s.relax_backoff) {
          if (s.relaxed_since_decrease) s.relax_backoff = std::max(1, s.relax_backoff / 2);
          s.relaxed_since_decrease = true;
          s.last_relax_round = round;
          for (const auto& [hop, in] : hops) {
            if (in.stale || in.capacity_bps <= 0) continue;
            GlbHopState& hs = s.hops[hop];
            if (hs.multiplier >= 1) continue;
            const double m0 = hs.multiplier;
            hs.multiplier = std::min(1.0, m0 / f);
            hop_reason[hop] = "all paths to " + destination +
                              " good (band >= " + std::to_string(params.good_band) + ") for " +
                              std::to_string(s.good_rounds) + " rounds: relaxing " + hop +
                              " towards its capacity share; quality factor " + Fmt("%.2f", m0) +
                              " -> " + Fmt("%.2f", hs.multiplier);
          }
          acted = true;
          s.good_rounds = 0;
        }
      } else {
        s.good_rounds = 0;
      }
    }

    // Integer weights: stale hops with a weight keep it; the others share the rest.
    std::vector<std::string> part;
    std::vector<double> shares;
    uint64_t kept = 0;
    for (const auto& [hop, in] : hops) {
      const GlbHopState& hs = s.hops[hop];
      if (in.capacity_bps <= 0) continue;
      if (in.stale && hs.weight > 0) {
        kept += hs.weight;
        continue;
      }
      part.push_back(hop);
      shares.push_back(in.capacity_bps * hs.multiplier);
    }
    const uint64_t floor_total = static_cast<uint64_t>(params.min_weight) * part.size();
    const uint32_t pool = static_cast<uint32_t>(std::max<uint64_t>(
        floor_total, params.weight_scale > kept ? params.weight_scale - kept : 0));
    const std::vector<uint32_t> target = Apportion(shares, pool, params.min_weight);
    // Dead band over the whole set (rounding jitter keeps the old weights),
    // then a bounded step per hop.
    long long max_delta = 0;
    for (size_t i = 0; i < part.size(); ++i) {
      max_delta = std::max(max_delta, std::llabs(static_cast<int64_t>(target[i]) -
                                                 static_cast<int64_t>(s.hops[part[i]].weight)));
    }
    const bool damped = !structural;
    if (!damped || max_delta >= static_cast<long long>(params.min_weight_delta)) {
      for (size_t i = 0; i < part.size(); ++i) {
        GlbHopState& hs = s.hops[part[i]];
        const uint32_t old = hs.weight;
        uint32_t w = target[i];
        if (damped && old > 0) {
          const int64_t delta = static_cast<int64_t>(w) - static_cast<int64_t>(old);
          if (std::llabs(delta) > static_cast<int64_t>(params.max_weight_step)) {
            w = delta > 0 ? old + params.max_weight_step : old - params.max_weight_step;
          }
        }
        hs.weight = w;
      }
    }
    for (auto& [hop, hs] : s.hops) {
      if (hops.at(hop).capacity_bps <= 0) {
        hs.weight = 0;
        hs.multiplier = 1.0;
      }
    }

    // Changes and reasons.
    bool changed = false;
    std::set<std::string> all;
    for (const auto& [hop, w] : old_weight) all.insert(hop);
    for (const auto& [hop, hs] : s.hops) all.insert(hop);
    for (const std::string& hop : all) {
      const uint32_t ow = old_weight.count(hop) ? old_weight[hop] : 0;
      const uint32_t nw = s.hops.count(hop) ? s.hops[hop].weight : 0;
      if (ow == nw) continue;
      changed = true;
      GlbWeightChange& c = out.changes.emplace_back();
      c.device = device;
      c.destination = destination;
      c.next_hop = hop;
      c.old_weight = ow;
      c.new_weight = nw;
      if (auto r = hop_reason.find(hop); r != hop_reason.end()) {
        c.reason = r->second;
      } else if (!set_reason.empty()) {
        c.reason = "share moves away from congested next hops (" + set_reason + ")";
      } else if (is_new) {
        c.reason = "initial weight: live capacity share (" + Gbps(s.hops[hop].capacity_bps) + ")";
      } else if (!hop_reason.empty()) {
        c.reason = "share follows other next hops:";
        for (const auto& [h, why] : hop_reason) c.reason += " [" + why + "]";
      } else {
        c.reason = "bounded step towards the target share of " + destination;
      }
      c.reason += "; weight " + std::to_string(ow) + " -> " + std::to_string(nw);
    }
    if (acted || structural) s.last_change_round = round;
    if (changed) ++out.changed_sets;

    loom::v1::WeightSet ws;
    ws.set_destination(destination);
    for (const auto& [hop, hs] : s.hops) {
      if (hs.weight > 0) (*ws.mutable_weights())[hop] = hs.weight;
    }
    if (!ws.weights().empty()) out.weights[device].push_back(std::move(ws));
    out.state.sets.emplace(key, std::move(s));
  }
  return out;
}

std::vector<GlbPath> GlbPathsFromQualities(const topology::TopologyIndex& index,
                                           const te::FabricGraph& graph,
                                           const std::vector<telemetry::PathQuality>& qualities) {
  const auto& topo = index.topology();
  auto name = [&](int d) -> const std::string& { return topo.devices(d).id(); };
  std::vector<GlbPath> out;
  out.reserve(qualities.size());
  for (const telemetry::PathQuality& q : qualities) {
    if (q.ingress_leaf < 0 || q.egress_leaf < 0 || q.spine < 0) continue;
    GlbPath& p = out.emplace_back();
    p.device = name(q.ingress_leaf);
    p.destination = name(q.egress_leaf);
    p.next_hop = name(q.spine);
    p.band = q.band;
    p.local_band = q.local_band;
    p.remote_band = q.remote_band;
    const int e = graph.Edge(p.device, p.next_hop);
    p.live_capacity_bps = e >= 0 ? graph.capacity(e) : 0;
    p.stale = q.stale;
  }
  return out;
}

}  // namespace loom::adaptive
