#include "controller/adaptive/alb.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace loom::adaptive {
namespace {

std::string Pct(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", x * 100);
  return buf;
}

std::string Rate(double bps) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2fG", bps / 1e9);
  return buf;
}

struct Member {
  std::string name;
  double capacity = 0;
  double rate = 0;
  int buckets = 0;
  double util() const { return capacity > 0 ? rate / capacity : 0; }
};

double Spread(const std::vector<Member>& m) {
  double hi = 0, lo = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    hi = i == 0 ? m[i].util() : std::max(hi, m[i].util());
    lo = i == 0 ? m[i].util() : std::min(lo, m[i].util());
  }
  return hi - lo;
}

// Sum of squared utilizations: lower = more even (tie-breaker of Spread).
double SumSq(const std::vector<Member>& m) {
  double s = 0;
  for (const Member& x : m) s += x.util() * x.util();
  return s;
}

double Imbalance(const std::vector<Member>& m) {
  std::vector<double> u;
  for (const Member& x : m) u.push_back(x.util());
  return AlbImbalance(u);
}

size_t Busiest(const std::vector<Member>& m) {
  size_t b = 0;
  for (size_t i = 1; i < m.size(); ++i) {
    if (m[i].util() > m[b].util()) b = i;
  }
  return b;
}

size_t LeastBusy(const std::vector<Member>& m) {
  size_t l = 0;
  for (size_t i = 1; i < m.size(); ++i) {
    if (m[i].util() < m[l].util()) l = i;
  }
  return l;
}

}  // namespace

double AlbImbalance(const std::vector<double>& loads) {
  if (loads.empty()) return 0;
  const double hi = *std::max_element(loads.begin(), loads.end());
  const double lo = *std::min_element(loads.begin(), loads.end());
  return hi > 0 ? (hi - lo) / hi : 0;
}

std::string ValidateAlbParams(const AlbParams& p) {
  if (!(p.tolerance > 0 && p.tolerance < 1)) return "tolerance: must be in (0, 1)";
  if (p.trigger_scans < 1) return "trigger_scans: must be >= 1";
  if (!(p.utilization_floor >= 0 && p.utilization_floor <= 1)) {
    return "utilization_floor: must be in [0, 1]";
  }
  if (p.max_moves_per_round < 1) return "max_moves_per_round: must be >= 1";
  if (p.freeze_scans < 0) return "freeze_scans: must be >= 0";
  if (!(p.stop_margin >= 0 && p.stop_margin < p.tolerance)) {
    return "stop_margin: must be in [0, tolerance)";
  }
  if (p.idle_bucket_bps < 0) return "idle_bucket_bps: must be >= 0";
  if (p.scan_interval_ns < kNsPerSec) return "scan_interval_ns: must be >= 1 s";
  return "";
}

void AlbRatesFromTelemetry(const std::vector<telemetry::AlbBucketState>& rows,
                           const std::string& device, const std::string& group, size_t bucket_count,
                           std::vector<double>* bucket_bps, std::vector<bool>* bucket_stale) {
  bucket_bps->assign(bucket_count, 0.0);
  bucket_stale->assign(bucket_count, true);
  for (const auto& r : rows) {
    if (r.device != device || r.group != group || r.bucket >= bucket_count) continue;
    (*bucket_bps)[r.bucket] = r.bps;
    (*bucket_stale)[r.bucket] = r.stale;
  }
}

AlbResult AlbScan(const AlbInput& in, const AlbGroupState& previous, const AlbParams& params) {
  AlbResult out;
  out.buckets = in.buckets;
  AlbGroupState& st = out.state;
  st = previous;
  const size_t nb = in.buckets.size();
  st.frozen_until.resize(nb, 0);
  const bool consecutive = previous.last_scan >= 0 && in.scan == previous.last_scan + 1;
  st.last_scan = in.scan;
  if (!consecutive) {
    st.over_scans = 0;
    st.rebalancing = false;
  }

  // Live members, in input order.
  std::vector<Member> members;
  std::map<std::string, size_t> idx;
  for (const AlbMember& m : in.members) {
    if (!m.up || idx.count(m.next_hop)) continue;
    idx[m.next_hop] = members.size();
    members.push_back({m.next_hop, m.capacity_bps, 0, 0});
  }
  if (members.empty()) {
    out.reason = "no live member: table unchanged";
    st.over_scans = 0;
    st.rebalancing = false;
    return out;
  }
  auto rate_of = [&](size_t b) {
    const double r = b < in.bucket_bps.size() ? in.bucket_bps[b] : 0.0;
    return std::isfinite(r) && r > 0 ? r : 0.0;
  };
  double total_capacity = 0;
  for (const Member& m : members) total_capacity += std::max(0.0, m.capacity);

  // Resilient hashing 1: buckets of a down or unknown member.
  std::vector<size_t> orphans;
  for (size_t b = 0; b < nb; ++b) {
    auto it = idx.find(in.buckets[b]);
    if (it == idx.end()) {
      orphans.push_back(b);
    } else {
      ++members[it->second].buckets;
    }
  }
  auto share_of = [&](const Member& m) {
    return total_capacity > 0 ? m.capacity / total_capacity : 1.0 / members.size();
  };
  if (!orphans.empty()) {
    for (size_t b : orphans) {
      size_t best = 0;
      for (size_t i = 1; i < members.size(); ++i) {
        const double fi = members[i].buckets / std::max(share_of(members[i]), 1e-12);
        const double fb = members[best].buckets / std::max(share_of(members[best]), 1e-12);
        if (fi < fb) best = i;
      }
      const std::string from = in.buckets[b];
      out.buckets[b] = members[best].name;
      ++members[best].buckets;
      out.moves.push_back({static_cast<uint32_t>(b), from, members[best].name, rate_of(b),
                           "member " + from + " down or removed: bucket " + std::to_string(b) +
                               " -> " + members[best].name + " (resilient hashing)"});
    }
    out.reason = "member down: " + std::to_string(orphans.size()) +
                 " bucket(s) redistributed, other buckets untouched";
    st.over_scans = 0;
    st.rebalancing = false;
    st.moves_total += static_cast<int64_t>(out.moves.size());
    return out;
  }

  // Resilient hashing 2: a live member with no bucket takes its share.
  std::vector<size_t> empty_members;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].buckets == 0) empty_members.push_back(i);
  }
  if (!empty_members.empty() && nb > 0) {
    for (size_t e : empty_members) {
      const int want = std::max(1, static_cast<int>(std::floor(nb * share_of(members[e]))));
      for (int k = 0; k < want; ++k) {
        // Donor: most buckets over its share.
        size_t donor = members.size();
        double over = 0;
        for (size_t i = 0; i < members.size(); ++i) {
          if (i == e || members[i].buckets <= 1) continue;
          const double o = members[i].buckets - nb * share_of(members[i]);
          if (donor == members.size() || o > over) {
            donor = i;
            over = o;
          }
        }
        if (donor == members.size()) break;
        // Its idlest bucket.
        size_t pick = nb;
        for (size_t b = 0; b < nb; ++b) {
          if (out.buckets[b] != members[donor].name) continue;
          if (pick == nb || rate_of(b) < rate_of(pick)) pick = b;
        }
        if (pick == nb) break;
        out.buckets[pick] = members[e].name;
        --members[donor].buckets;
        ++members[e].buckets;
        out.moves.push_back({static_cast<uint32_t>(pick), members[donor].name, members[e].name,
                             rate_of(pick),
                             "member " + members[e].name + " added: takes bucket " +
                                 std::to_string(pick) + " from " + members[donor].name +
                                 (rate_of(pick) <= params.idle_bucket_bps ? " (idle)" : "")});
      }
    }
    out.reason = "member added: " + std::to_string(out.moves.size()) + " bucket(s) handed over";
    st.over_scans = 0;
    st.rebalancing = false;
    st.moves_total += static_cast<int64_t>(out.moves.size());
    return out;
  }

  // Rates; never act on stale counters.
  for (size_t b = 0; b < nb; ++b) {
    if (b < in.bucket_stale.size() && in.bucket_stale[b]) {
      out.reason = "stale bucket counters: no decision";
      st.over_scans = 0;
      st.rebalancing = false;
      return out;
    }
    members[idx[in.buckets[b]]].rate += rate_of(b);
  }
  for (const Member& m : members) {
    if (!(m.capacity > 0)) {
      out.reason = "capacity of " + m.name + " unknown: no decision";
      st.over_scans = 0;
      st.rebalancing = false;
      return out;
    }
  }
  const size_t b0 = Busiest(members), l0 = LeastBusy(members);
  out.imbalance = Imbalance(members);
  out.projected_imbalance = out.imbalance;
  out.busiest = members[b0].name;
  out.least_busy = members[l0].name;
  out.busiest_utilization = members[b0].util();
  const double target = params.tolerance - params.stop_margin;
  const std::string summary = "imbalance " + Pct(out.imbalance) + " (busiest " + out.busiest + " " +
                              Pct(out.busiest_utilization) + ", least busy " + out.least_busy +
                              " " + Pct(members[l0].util()) + ")";
  const bool above_floor = out.busiest_utilization >= params.utilization_floor;

  if (st.rebalancing) {
    if (out.imbalance <= target) {
      st.rebalancing = false;
      st.over_scans = 0;
      out.reason = summary + " <= tolerance - margin " + Pct(target) + ": balanced, stop";
      return out;
    }
    if (!above_floor) {
      st.rebalancing = false;
      st.over_scans = 0;
      out.reason =
          summary + ": busiest below the floor " + Pct(params.utilization_floor) + ", stop";
      return out;
    }
  } else {
    if (out.imbalance > params.tolerance && above_floor) {
      ++st.over_scans;
    } else {
      st.over_scans = 0;
    }
    if (st.over_scans < params.trigger_scans) {
      out.reason = summary;
      if (out.imbalance <= params.tolerance) {
        out.reason += " within tolerance " + Pct(params.tolerance);
      } else if (!above_floor) {
        out.reason += ": busiest below the floor " + Pct(params.utilization_floor);
      } else {
        out.reason += " > tolerance " + Pct(params.tolerance) + " on " +
                      std::to_string(st.over_scans) + " of " +
                      std::to_string(params.trigger_scans) + " scans";
      }
      return out;
    }
    st.rebalancing = true;
  }
  out.triggered = true;

  // Greedy bin-packing moves.
  std::vector<size_t> on(nb);
  for (size_t b = 0; b < nb; ++b) on[b] = idx[out.buckets[b]];
  std::string stop_reason = "move bound reached";
  for (int k = 0; k < params.max_moves_per_round; ++k) {
    if (Imbalance(members) <= target) {
      stop_reason = "within tolerance - margin";
      break;
    }
    const size_t bi = Busiest(members), li = LeastBusy(members);
    const double spread = Spread(members);
    // Candidates: a bucket of the busiest member moves to another member
    // (the least busy first), or — when no single move helps — swaps with
    // a lighter bucket of another member (two moves). Best = lowest
    // resulting spread, then fewest bytes moved; a move that alone reaches
    // the target wins with the fewest bytes.
    const double sumsq = SumSq(members);
    struct Option {
      size_t b = SIZE_MAX, to = 0, b2 = SIZE_MAX;  // b2: swapped bucket (SIZE_MAX: none)
      double spread = 0, bytes = 0;
      bool fits = false;
      double sumsq = 0;
    };
    Option best;
    best.spread = spread;
    // Progress: a lower spread, or the same spread with a lower sum of
    // squares (ties at the top or bottom: two members equally busiest).
    auto better = [](double s1, double q1, double s2, double q2) {
      return s1 < s2 - 1e-12 || (s1 <= s2 + 1e-12 && q1 < q2 - 1e-12);
    };
    auto consider = [&](const Option& o) {
      if (!better(o.spread, o.sumsq, spread, sumsq)) return;
      if (best.b == SIZE_MAX) {
        best = o;
        return;
      }
      if (o.fits != best.fits) {
        if (o.fits) best = o;
        return;
      }
      if (o.fits) {
        if (o.bytes < best.bytes) best = o;
        return;
      }
      if (better(o.spread, o.sumsq, best.spread, best.sumsq) ||
          (std::fabs(o.spread - best.spread) <= 1e-12 && std::fabs(o.sumsq - best.sumsq) <= 1e-12 &&
           o.bytes < best.bytes)) {
        best = o;
      }
    };
    auto movable = [&](size_t b) {
      return st.frozen_until[b] <= in.scan && rate_of(b) > params.idle_bucket_bps;
    };
    // Single moves (a member keeps at least one bucket: an empty one would look added).
    for (size_t b = 0; b < nb && members[bi].buckets > 1; ++b) {
      if (on[b] != bi || !movable(b)) continue;
      const double r = rate_of(b);
      for (size_t to = 0; to < members.size(); ++to) {
        if (to == bi || !(members[to].capacity > 0)) continue;
        members[bi].rate -= r;
        members[to].rate += r;
        Option o{b, to, SIZE_MAX, Spread(members), r, Imbalance(members) <= target, SumSq(members)};
        members[bi].rate += r;
        members[to].rate -= r;
        consider(o);
      }
    }
    if (best.b == SIZE_MAX && k + 1 < params.max_moves_per_round) {
      for (size_t b = 0; b < nb; ++b) {
        if (on[b] != bi || !movable(b)) continue;
        const double r = rate_of(b);
        for (size_t b2 = 0; b2 < nb; ++b2) {
          if (on[b2] == bi || !movable(b2) || !(members[on[b2]].capacity > 0)) continue;
          const double r2 = rate_of(b2);
          if (!(r2 < r)) continue;
          const size_t to = on[b2];
          members[bi].rate += r2 - r;
          members[to].rate += r - r2;
          Option o{
              b, to, b2, Spread(members), r + r2, Imbalance(members) <= target, SumSq(members)};
          members[bi].rate -= r2 - r;
          members[to].rate -= r - r2;
          consider(o);
        }
      }
    }
    if (best.b == SIZE_MAX) {
      stop_reason = "no move or swap evens the load";
      if (out.moves.empty()) {
        st.rebalancing = false;
        st.over_scans = 0;
      }
      break;
    }
    auto apply = [&](size_t b, size_t from, size_t to) {
      const double r = rate_of(b);
      const double before = Imbalance(members);
      members[from].rate -= r;
      members[to].rate += r;
      --members[from].buckets;
      ++members[to].buckets;
      on[b] = to;
      out.buckets[b] = members[to].name;
      st.frozen_until[b] = in.scan + params.freeze_scans + 1;
      out.moves.push_back({static_cast<uint32_t>(b), members[from].name, members[to].name, r,
                           "imbalance " + Pct(before) + " > tolerance " + Pct(params.tolerance) +
                               ": bucket " + std::to_string(b) + " (" + Rate(r) + ") " +
                               members[from].name + " -> " + members[to].name + ", projected " +
                               Pct(Imbalance(members))});
    };
    const size_t to = best.to;
    apply(best.b, bi, to);
    if (best.b2 != SIZE_MAX) {
      apply(best.b2, to, bi);
      ++k;  // A swap is two moves.
    }
    (void)li;
  }
  out.projected_imbalance = Imbalance(members);
  st.moves_total += static_cast<int64_t>(out.moves.size());
  out.reason = summary + " > tolerance " + Pct(params.tolerance) + ": moved " +
               std::to_string(out.moves.size()) + " bucket(s), projected " +
               Pct(out.projected_imbalance) + " (" + stop_reason + ")";
  return out;
}

}  // namespace loom::adaptive
