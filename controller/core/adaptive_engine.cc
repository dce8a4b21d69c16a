#include "controller/core/adaptive_engine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "api/proto_util/fingerprint.h"

namespace loom::controller {

namespace v1 = loom::v1;
namespace ad = loom::adaptive;
using loom::telemetry::LinkDirectionState;
using loom::telemetry::LinkSnapshot;
using loom::telemetry::OperStatus;

namespace {

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

std::string Us(TimeNs ns) { return Fmt("%.1f us", static_cast<double>(ns) / 1e3); }

bool IsSwitch(const v1::Device* d) {
  return d && (d->role() == v1::DEVICE_ROLE_LEAF || d->role() == v1::DEVICE_ROLE_SPINE ||
               d->role() == v1::DEVICE_ROLE_SUPER_SPINE);
}

}  // namespace

std::string ValidateAdaptiveOptions(const AdaptiveOptions& o) {
  if (auto e = ad::ValidateGlbParams(o.glb_params); !e.empty()) return "glb: " + e;
  if (auto e = ad::ValidateAlbParams(o.alb_params); !e.empty()) return "alb: " + e;
  if (auto e = ad::ValidateDlbTuningParams(o.dlb_params); !e.empty()) return "dlb: " + e;
  if (auto e = ad::ValidateDampeningParams(o.dampening); !e.empty()) return "dampening: " + e;
  if (auto e = ad::ValidateDampeningParams(o.dlb_dampening); !e.empty()) {
    return "dlb_dampening: " + e;
  }
  if (o.dlb_interval_ns <= 0) return "dlb_interval_ns: must be > 0";
  if (!(o.dlb_min_change >= 0)) return "dlb_min_change: must be >= 0";
  if (o.dlb_gap_window == 0) return "dlb_gap_window: must be > 0";
  if (o.dlb_confirm < 1) return "dlb_confirm: must be >= 1";
  if (o.restore_hold_ns < 0 || o.max_restore_hold_ns < o.restore_hold_ns) {
    return "restore_hold_ns: must be >= 0 and <= max_restore_hold_ns";
  }
  return "";
}

AdaptiveEngine::AdaptiveEngine(const loom::topology::TopologyIndex& topo, AdaptiveOptions options)
    : topo_(topo), options_(std::move(options)) {
  const auto& links = topo_.topology().links();
  rx_is_nic_.assign(static_cast<size_t>(2 * links.size()), false);
  tx_is_nic_.assign(static_cast<size_t>(2 * links.size()), false);
  util_history_.resize(static_cast<size_t>(2 * links.size()));
  for (int i = 0; i < links.size(); ++i) {
    const auto& l = links[i];
    const auto* a = topo_.FindDevice(l.a().device());
    const auto* b = topo_.FindDevice(l.b().device());
    const bool a_nic = a && a->role() == v1::DEVICE_ROLE_NIC;
    const bool b_nic = b && b->role() == v1::DEVICE_ROLE_NIC;
    // Direction 0: a -> b, direction 1: b -> a (telemetry's order).
    rx_is_nic_[static_cast<size_t>(2 * i)] = b_nic;
    tx_is_nic_[static_cast<size_t>(2 * i)] = a_nic;
    rx_is_nic_[static_cast<size_t>(2 * i + 1)] = a_nic;
    tx_is_nic_[static_cast<size_t>(2 * i + 1)] = b_nic;
    neighbor_[{l.a().device(), l.a().interface()}] = l.b().device();
    neighbor_[{l.b().device(), l.b().interface()}] = l.a().device();
  }
}

std::string AdaptiveEngine::RemovalReason(const std::string& link) const {
  auto it = removal_.find(link);
  return it == removal_.end() ? "" : it->second.cause;
}

std::string AdaptiveEngine::RemovalRule(const std::string& link) const {
  auto it = removal_.find(link);
  if (it == removal_.end()) return "";
  return it->second.by_dampening ? "flapping" : it->second.by_capacity ? "capacity_loss" : "errors";
}

// ------------------------------------------------------------ phase 1 ----

AssessOutcome AdaptiveEngine::Assess(
    const LinkSnapshot& snap, TimeNs now,
    const std::vector<std::pair<std::string, bool>>& oper_changes) {
  AssessOutcome out;
  if (!options_.remediation) return out;
  const auto& links = topo_.topology().links();
  const auto& dp = options_.dampening;

  // Flap dampening: oper transitions the controller saw, plus flaps shorter
  // than a telemetry interval (carrier transitions moved, state did not).
  std::set<std::string> changed_now;
  for (const auto& [id, up] : oper_changes) {
    changed_now.insert(id);
    LinkMemory& mem = links_[id];
    auto d = ad::Dampen(mem.damp, up ? ad::LinkEvent::kUp : ad::LinkEvent::kDown, now, dp);
    mem.damp = d.state;
    if (d.suppression_changed) {
      out.events.push_back({v1::EVENT_TYPE_REMEDIATION, v1::SEVERITY_WARNING, id,
                            "link " + id + " flapping: " + std::to_string(d.state.flaps) +
                                " flap(s), penalty " + Fmt("%.0f", d.state.penalty),
                            d.state.suppressed ? "suppressed by flap dampening" : "reused",
                            d.reason, false});
    }
  }
  for (int i = 0; i < links.size(); ++i) {
    uint64_t transitions = 0;
    bool fresh = false;
    TimeNs sample = -1;  // Oldest of the ends' latest counter samples.
    for (int dir = 0; dir < 2; ++dir) {
      const size_t k = static_cast<size_t>(2 * i + dir);
      if (k >= snap.links.size()) continue;
      transitions = std::max(transitions, snap.links[k].carrier_transitions);
      fresh |= !snap.links[k].stale;
      if (!snap.links[k].stale) {
        const TimeNs t = snap.links[k].last_sample_ns;
        sample = sample < 0 ? t : std::min(sample, t);
      }
    }
    if (!fresh) continue;
    const std::string& id = links[i].id();
    LinkMemory& mem = links_[id];
    // Oper-status is pushed on change, carrier counters are sampled: the
    // counters of a transition Loom saw arrive up to a sample interval
    // later. Their increase, up to the first counter sample newer than the
    // one at the change, is that transition's, not a flap the sampler missed
    // (counting it again would suppress a link after its first down/up).
    bool settling = false;
    if (changed_now.count(id)) {
      mem.settle_sample_ns = sample;
    } else if (mem.settle_sample_ns >= 0) {
      settling = true;
      if (sample > mem.settle_sample_ns) mem.settle_sample_ns = -1;  // Caught up now.
    }
    if (mem.seen && transitions > mem.carrier_transitions && !changed_now.count(id) && !settling &&
        mem.damp.up) {
      // A flap too short for the sampler to see the link down.
      auto d1 = ad::Dampen(mem.damp, ad::LinkEvent::kDown, now, dp);
      auto d2 = ad::Dampen(d1.state, ad::LinkEvent::kUp, now, dp);
      mem.damp = d2.state;
      if (d1.suppression_changed || d2.suppression_changed) {
        out.events.push_back({v1::EVENT_TYPE_REMEDIATION, v1::SEVERITY_WARNING, id,
                              "link " + id + " flapping: carrier transitions " +
                                  std::to_string(mem.carrier_transitions) + " -> " +
                                  std::to_string(transitions) + ", penalty " +
                                  Fmt("%.0f", mem.damp.penalty),
                              "suppressed by flap dampening", d2.reason, false});
      }
    }
    mem.carrier_transitions = transitions;
    mem.seen = true;
  }
  // Suppressed links learn about their reuse as time passes.
  for (auto& [id, mem] : links_) {
    if (!mem.damp.suppressed) continue;
    auto d = ad::Dampen(mem.damp, ad::LinkEvent::kNone, now, dp);
    mem.damp = d.state;
    if (d.suppression_changed) {
      out.events.push_back(
          {v1::EVENT_TYPE_REMEDIATION, v1::SEVERITY_INFO, id,
           "link " + id + " stable: dampening penalty decayed to " + Fmt("%.0f", d.state.penalty),
           "reused by flap dampening", d.reason, false});
    }
  }

  // Remediation rules per link direction.
  std::vector<ad::RemediationLink> rl;
  rl.reserve(snap.links.size());
  for (size_t k = 0; k < snap.links.size() && k < util_history_.size(); ++k) {
    const LinkDirectionState& s = snap.links[k];
    auto& hist = util_history_[k];
    if (!s.stale) {
      hist.push_back(s.utilization);
      while (hist.size() >
             static_cast<size_t>(std::max(1, options_.remediation_params.hotspot_snapshots))) {
        hist.pop_front();
      }
    }
    if (!s.link_id) continue;
    auto mem = links_.find(*s.link_id);
    const bool dampened = mem != links_.end() && mem->second.damp.suppressed;
    const double live = s.live_capacity_bps > 0 ? static_cast<double>(s.live_capacity_bps) : -1;
    rl.push_back(ad::RemediationLinkFromState(
        s, rx_is_nic_[k], std::vector<double>(hist.begin(), hist.end()), dampened, live));
  }
  auto actions = ad::DecideRemediation(rl, options_.remediation_params);

  std::map<std::string, std::pair<std::string, ad::RemediationCause>> want_removed;
  std::map<std::pair<std::string, std::string>, double> factors;
  std::map<std::string, std::string> hot, storms;
  std::set<std::string> quarantine;
  for (const auto& a : actions) {
    switch (a.kind) {
      case ad::RemediationKind::kRemoveFromPlacement:
        if (a.rule == ad::RemediationCause::kOperDown) break;  // The controller's own rule.
        want_removed.emplace(a.link_id, std::make_pair(a.cause, a.rule));
        break;
      case ad::RemediationKind::kLowerGlbWeight: {
        // The direction the action is about: find it by cause text order in
        // the input (actions follow the input order): use both directions'
        // devices as named in the cause.
        for (const auto& l : rl) {
          if (l.link_id != a.link_id) continue;
          if (a.cause.find(l.tx_device + " -> " + l.rx_device) == std::string::npos) continue;
          auto& f = factors[{l.tx_device, l.rx_device}];
          f = f == 0 ? a.weight_factor : std::min(f, a.weight_factor);
          if (a.rule == ad::RemediationCause::kHotspot)
            hot[l.tx_device + ">" + l.rx_device] = a.cause;
          if (a.rule == ad::RemediationCause::kCapacityLoss) {
            want_removed.emplace(a.link_id, std::make_pair(a.cause, a.rule));
          }
        }
        break;
      }
      case ad::RemediationKind::kReportNicPort:
        storms[a.target] = a.cause;
        break;
      case ad::RemediationKind::kQuarantineNicPort:
        quarantine.insert(a.target);
        break;
    }
  }

  // Placement removals: new ones now, restores after their hold. A link is
  // never removed when it is its leaf's last usable uplink: a degraded path
  // is better than none.
  auto usable = [&](int li) {
    const std::string& lid = links[li].id();
    if (removed_.count(lid) || want_removed.count(lid)) return false;
    for (int dir = 0; dir < 2; ++dir) {
      const size_t k = static_cast<size_t>(2 * li + dir);
      if (k < snap.links.size() && snap.links[k].oper == OperStatus::kDown) return false;
    }
    return true;
  };
  auto last_uplink = [&](const std::string& id) {
    const int li = topo_.LinkIndex(id);
    if (li < 0) return false;
    for (const auto* end : {&links[li].a(), &links[li].b()}) {
      const auto* d = topo_.FindDevice(end->device());
      if (!d || d->role() != v1::DEVICE_ROLE_LEAF) continue;
      int others = 0;
      for (int o : topo_.LinksOf(end->device())) {
        if (o == li) continue;
        const auto& ol = links[o];
        const std::string& peer =
            ol.a().device() == end->device() ? ol.b().device() : ol.a().device();
        const auto* pd = topo_.FindDevice(peer);
        if (pd && pd->role() != v1::DEVICE_ROLE_NIC && usable(o)) ++others;
      }
      if (others == 0) return true;
    }
    return false;
  };
  std::set<std::string> wanted_all;
  for (const auto& [id, why] : want_removed) wanted_all.insert(id);
  for (auto it = want_removed.begin(); it != want_removed.end();) {
    if (!removal_.count(it->first) && last_uplink(it->first)) {
      if (!kept_last_.count(it->first)) {
        out.events.push_back({v1::EVENT_TYPE_REMEDIATION, v1::SEVERITY_CRITICAL, it->first,
                              it->second.first,
                              "kept " + it->first +
                                  " in placement: it is its leaf's last usable "
                                  "uplink",
                              "traffic keeps the degraded path; operator action needed", false});
        kept_last_.insert(it->first);
      }
      it = want_removed.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = kept_last_.begin(); it != kept_last_.end();) {
    it = wanted_all.count(*it) ? std::next(it) : kept_last_.erase(it);
  }
  for (const auto& [id, why] : want_removed) {
    auto it = removal_.find(id);
    if (it != removal_.end()) {
      it->second.clean_since_ns = -1;
      continue;
    }
    Removal r;
    r.cause = why.first;
    r.by_capacity = why.second == ad::RemediationCause::kCapacityLoss;
    r.by_dampening = why.second == ad::RemediationCause::kFlapping;
    if (why.second == ad::RemediationCause::kErrors) links_[id].removals++;
    removal_[id] = r;
    removed_.insert(id);
    out.removed_changed = true;
    out.events.push_back({v1::EVENT_TYPE_REMEDIATION, v1::SEVERITY_CRITICAL, id, why.first,
                          "took " + id + " out of placement: its traffic moves to the backup " +
                              "color now and is re-placed",
                          "", true});
  }
  for (auto it = removal_.begin(); it != removal_.end();) {
    const std::string& id = it->first;
    if (want_removed.count(id)) {
      ++it;
      continue;
    }
    // Restore only on fresh evidence.
    const int li = topo_.LinkIndex(id);
    bool fresh = li >= 0;
    for (int dir = 0; dir < 2 && fresh; ++dir) {
      const size_t k = static_cast<size_t>(2 * li + dir);
      fresh = k < snap.links.size() && !snap.links[k].stale;
    }
    if (!fresh) {
      ++it;
      continue;
    }
    Removal& r = it->second;
    // A suppressed link that is down again is out for being down; it stays
    // removed until dampening reuses it.
    if (r.by_dampening && links_[id].damp.suppressed) {
      ++it;
      continue;
    }
    bool restore = r.by_capacity || r.by_dampening;
    std::string why = r.by_capacity    ? "live capacity restored"
                      : r.by_dampening ? "flap dampening reused the link"
                                       : "";
    if (!restore) {
      if (r.clean_since_ns < 0) r.clean_since_ns = now;
      const int n = std::max(1, links_[id].removals);
      TimeNs hold = options_.restore_hold_ns;
      for (int i = 1; i < n && hold < options_.max_restore_hold_ns; ++i) hold *= 2;
      hold = std::min(hold, options_.max_restore_hold_ns);
      if (now - r.clean_since_ns >= hold) {
        restore = true;
        why = "telemetry clean for " + Fmt("%.1f s", static_cast<double>(hold) / 1e9) +
              " (hold after removal #" + std::to_string(n) + ")";
      }
    }
    if (!restore) {
      ++it;
      continue;
    }
    out.events.push_back({v1::EVENT_TYPE_REMEDIATION, v1::SEVERITY_INFO, id,
                          why + " (was: " + r.cause + ")", "returned " + id + " to placement", "",
                          true});
    removed_.erase(id);
    it = removal_.erase(it);
    out.removed_changed = true;
  }

  // Hotspots: an event at onset; the GLB factor applies while it lasts.
  for (const auto& [key, cause] : hot) {
    if (hotspots_.count(key)) continue;
    out.hotspot_onset = true;
    out.events.push_back({v1::EVENT_TYPE_REMEDIATION, v1::SEVERITY_WARNING, key, cause,
                          "lowered GLB weights through it by factor " +
                              Fmt("%.2f", options_.remediation_params.hotspot_weight_factor) +
                              " and asked for a re-optimization with measured demand",
                          "new flowlets avoid it; placement re-optimizes at its next interval",
                          false});
  }
  hotspots_ = hot;

  // PFC storms from NIC ports: report (and quarantine when policy allows).
  for (const auto& [nic, cause] : storms) {
    if (storming_.count(nic)) continue;
    const bool q = quarantine.count(nic) > 0;
    out.events.push_back(
        {v1::EVENT_TYPE_REMEDIATION, v1::SEVERITY_CRITICAL, nic, cause,
         q ? "reported NIC port " + nic + " as the pause source and quarantined it"
           : "reported NIC port " + nic + " as the pause source (quarantine not allowed by policy)",
         q ? "the leaf port facing " + nic + " is shut (admin down); other ports are unaffected"
           : "operator action needed on " + nic +
                 " (a PFC watchdog on the leaf port, where enabled, drops its pauses)",
         false});
    if (q) out.desired_changed = true;
  }
  for (const auto& nic : storming_) {
    if (storms.count(nic)) continue;
    out.events.push_back({v1::EVENT_TYPE_REMEDIATION, v1::SEVERITY_INFO, nic,
                          "PFC pauses from " + nic + " stopped",
                          quarantined_.count(nic) ? "kept quarantined until an operator clears it"
                                                  : "cleared the report",
                          "", false});
  }
  storming_.clear();
  for (const auto& [nic, cause] : storms) storming_.insert(nic);
  for (const auto& nic : quarantine) quarantined_.insert(nic);

  if (factors != glb_factor_) {
    glb_factor_ = std::move(factors);
    out.desired_changed = true;  // GLB recomputes with the new capacities.
  }
  return out;
}

// ------------------------------------------------------------ phase 2 ----

BalanceOutcome AdaptiveEngine::Balance(
    const LinkSnapshot& snap, TimeNs now, const loom::te::FabricGraph& graph,
    const std::map<std::string, std::vector<LeafJob>>& leaf_jobs) {
  BalanceOutcome out;
  if (options_.glb) RunGlb(snap, graph, leaf_jobs, &out);
  if (options_.alb && now >= next_alb_ns_) {
    next_alb_ns_ = now + options_.alb_params.scan_interval_ns;
    ++alb_scan_;
    RunAlb(snap, graph, &out);
  }
  if (options_.dlb_tuning) {
    // Gap samples accumulate every round; decisions at the DLB interval.
    for (const auto& [leaf, jobs] : leaf_jobs) {
      for (const auto& j : jobs) {
        for (const auto& nic : j.nics) {
          for (int li : topo_.LinksOf(nic)) {
            for (int dir = 0; dir < 2; ++dir) {
              const size_t k = static_cast<size_t>(2 * li + dir);
              if (k >= snap.links.size() || !tx_is_nic_[k]) continue;
              const auto& s = snap.links[k];
              if (s.stale || !s.tx_device || *s.tx_device != nic) continue;
              if (s.burst_gap_ns > 0) {
                auto& g = job_gaps_[j.job_id];
                g.push_back(static_cast<TimeNs>(s.burst_gap_ns));
                while (g.size() > options_.dlb_gap_window) g.pop_front();
              }
              if (s.intra_burst_gap_ns > 0) {
                auto& sp = job_spacing_[j.job_id];
                sp = std::max(sp, static_cast<TimeNs>(s.intra_burst_gap_ns));
              }
            }
          }
        }
      }
    }
    if (now >= next_dlb_ns_) {
      next_dlb_ns_ = now + options_.dlb_interval_ns;
      RunDlb(snap, leaf_jobs, &out);
    }
  }
  return out;
}

void AdaptiveEngine::RunGlb(const LinkSnapshot& snap, const loom::te::FabricGraph& graph,
                            const std::map<std::string, std::vector<LeafJob>>& leaf_jobs,
                            BalanceOutcome* out) {
  auto qualities = loom::telemetry::ComputePathQualities(topo_, snap.links);
  auto paths = ad::GlbPathsFromQualities(topo_, graph, qualities);
  // Only leaf pairs that carry traffic get weight sets: leaves with jobs
  // and leaves whose NIC ports telemetry sees busy (traffic Loom does not
  // place, e.g. storage or unregistered jobs).
  std::set<std::string> active;
  for (const auto& [leaf, jobs] : leaf_jobs) active.insert(leaf);
  for (size_t k = 0; k < snap.links.size() && k < rx_is_nic_.size(); ++k) {
    const auto& s = snap.links[k];
    if (s.stale || !(s.utilization >= 0.01) || !s.tx_device || !s.rx_device) continue;
    if (tx_is_nic_[k]) active.insert(*s.rx_device);
    if (rx_is_nic_[k]) active.insert(*s.tx_device);
  }
  std::vector<ad::GlbPath> used;
  used.reserve(paths.size());
  for (auto& p : paths) {
    if (!active.count(p.device) || !active.count(p.destination)) continue;
    double f = 1.0;
    if (auto it = glb_factor_.find({p.device, p.next_hop}); it != glb_factor_.end()) {
      f = std::min(f, it->second);
    }
    if (auto it = glb_factor_.find({p.next_hop, p.destination}); it != glb_factor_.end()) {
      f = std::min(f, it->second);
    }
    p.live_capacity_bps *= f;
    used.push_back(std::move(p));
  }
  auto res = ad::ComputeGlbWeights(used, glb_state_, options_.glb_params);
  glb_state_ = std::move(res.state);
  // Compare by content: protobuf messages have no operator==.
  bool differs = res.weights.size() != weights_.size();
  for (auto a = res.weights.begin(), b = weights_.begin(); !differs && a != res.weights.end();
       ++a, ++b) {
    differs = a->first != b->first || a->second.size() != b->second.size();
    for (size_t i = 0; !differs && i < a->second.size(); ++i) {
      differs = !loom::proto::SameMessage(a->second[i], b->second[i]);
    }
  }
  weights_ = std::move(res.weights);
  if (differs) out->desired_changed = true;
  out->glb_changed_sets = res.changed_sets;
  if (res.changes.empty()) return;
  // One event per round that changed weights, with the first few changes.
  std::string action, cause;
  size_t shown = 0;
  for (const auto& c : res.changes) {
    if (shown++ >= 4) break;
    action += (action.empty() ? "" : "; ") + c.device + "->" + c.destination + " via " +
              c.next_hop + " " + std::to_string(c.old_weight) + "->" + std::to_string(c.new_weight);
    if (cause.empty()) cause = c.reason;
  }
  if (res.changes.size() > 4) {
    action += "; and " + std::to_string(res.changes.size() - 4) + " more";
  }
  out->events.push_back({v1::EVENT_TYPE_WEIGHTS_CHANGED, v1::SEVERITY_INFO, "glb",
                         "path quality: " + cause, "GLB weights: " + action,
                         std::to_string(res.changed_sets) + " of " + std::to_string(res.sets) +
                             " (ingress, egress) set(s) changed",
                         false});
}

void AdaptiveEngine::RunAlb(const LinkSnapshot& snap, const loom::te::FabricGraph& graph,
                            BalanceOutcome* out) {
  // Groups the switches report, leaves only.
  std::map<std::pair<std::string, std::string>, uint32_t> groups;  // -> bucket count
  for (const auto& b : snap.alb_buckets) {
    const auto* d = topo_.FindDevice(b.device);
    if (!d || d->role() != v1::DEVICE_ROLE_LEAF) continue;
    auto& n = groups[{b.device, b.group}];
    n = std::max(n, b.bucket + 1);
  }
  for (const auto& [key, count] : groups) {
    const auto& [device, group] = key;
    if (!loom::te::LimitsOf(limits_, device).alb) continue;  // its southbound cannot program ALB
    ad::AlbInput in;
    in.group = device + "/" + group;
    in.scan = alb_scan_;
    // Members: the leaf's uplink neighbors, capacity from the graph.
    std::map<std::string, double> cap;
    for (int li : topo_.LinksOf(device)) {
      const auto& l = topo_.topology().links(li);
      const std::string& peer = l.a().device() == device ? l.b().device() : l.a().device();
      const auto* pd = topo_.FindDevice(peer);
      if (!IsSwitch(pd) || pd->role() == v1::DEVICE_ROLE_LEAF) continue;
      const int e = graph.Edge(device, peer);
      cap[peer] = e >= 0 ? graph.capacity(e) : 0;
    }
    for (const auto& [hop, c] : cap) in.members.push_back({hop, c, c > 0});
    auto have = alb_tables_.find(key);
    if (have != alb_tables_.end() && have->second.size() == count) {
      in.buckets = have->second;
    } else {
      in.buckets.assign(count, "");
      for (const auto& b : snap.alb_buckets) {
        if (b.device != device || b.group != group || b.bucket >= count) continue;
        auto it = neighbor_.find({device, b.next_hop});
        in.buckets[b.bucket] = it == neighbor_.end() ? b.next_hop : it->second;
      }
    }
    std::vector<bool> stale;
    ad::AlbRatesFromTelemetry(snap.alb_buckets, device, group, count, &in.bucket_bps, &stale);
    in.bucket_stale = stale;
    auto res = ad::AlbScan(in, alb_state_[key], options_.alb_params);
    alb_state_[key] = res.state;
    const bool changed = have == alb_tables_.end() || have->second != res.buckets;
    if (!res.moves.empty() || (have != alb_tables_.end() && changed)) {
      out->alb_moves += static_cast<int>(res.moves.size());
      std::string moves;
      for (size_t i = 0; i < res.moves.size() && i < 4; ++i) {
        const auto& m = res.moves[i];
        moves += (moves.empty() ? "" : "; ") + std::string("bucket ") + std::to_string(m.bucket) +
                 " " + m.from + "->" + m.to + Fmt(" (%.1f Gb/s)", m.bps / 1e9);
      }
      out->events.push_back({v1::EVENT_TYPE_ALB_REBALANCED, v1::SEVERITY_INFO, device + "/" + group,
                             "ALB scan " + std::to_string(alb_scan_) + ": imbalance " +
                                 Fmt("%.0f%%", res.imbalance * 100) + " (busiest " + res.busiest +
                                 " at " + Fmt("%.0f%%", res.busiest_utilization * 100) + ")",
                             "moved " + std::to_string(res.moves.size()) + " bucket(s): " + moves,
                             "projected imbalance " + Fmt("%.0f%%", res.projected_imbalance * 100) +
                                 "; " + res.reason,
                             false});
    }
    if (changed) {
      alb_tables_[key] = res.buckets;
      // Tables Loom has not touched yet are adopted without reprogramming.
      if (have != alb_tables_.end() || !res.moves.empty()) out->desired_changed = true;
    }
  }
}

void AdaptiveEngine::RunDlb(const LinkSnapshot& snap,
                            const std::map<std::string, std::vector<LeafJob>>& leaf_jobs,
                            BalanceOutcome* out) {
  for (const auto& [leaf, jobs] : leaf_jobs) {
    const loom::te::DeviceLimits& lim = loom::te::LimitsOf(limits_, leaf);
    if (!lim.dlb) continue;  // its southbound cannot program DLB
    ad::DlbLeafInput in;
    in.leaf = leaf;
    // Path delay skew: queueing delay difference between the leaf's uplinks.
    double lo = -1, hi = 0;
    for (int li : topo_.LinksOf(leaf)) {
      for (int dir = 0; dir < 2; ++dir) {
        const size_t k = static_cast<size_t>(2 * li + dir);
        if (k >= snap.links.size()) continue;
        const auto& s = snap.links[k];
        if (s.stale || !s.tx_device || *s.tx_device != leaf || rx_is_nic_[k]) continue;
        if (s.capacity_bps <= 0) continue;
        const double delay =
            static_cast<double>(s.queue_depth_bytes) * 8e9 / static_cast<double>(s.capacity_bps);
        lo = lo < 0 ? delay : std::min(lo, delay);
        hi = std::max(hi, delay);
      }
    }
    in.path_delay_skew_ns = lo < 0 ? 0 : static_cast<TimeNs>(hi - lo);
    for (const auto& j : jobs) {
      ad::DlbJobTraffic t;
      t.job_id = j.job_id;
      t.spray_eligible = j.spray_eligible;
      if (auto it = job_gaps_.find(j.job_id); it != job_gaps_.end()) {
        t.burst_gaps_ns.assign(it->second.begin(), it->second.end());
      }
      if (auto it = job_spacing_.find(j.job_id); it != job_spacing_.end()) {
        t.max_intra_burst_gap_ns = it->second;
      }
      in.jobs.push_back(std::move(t));
    }
    auto d = ad::TuneDlb(in, options_.dlb_params);
    if (!lim.spray) d.spray_jobs.clear();
    std::vector<v1::SprayRule> spray;
    for (const auto& id : d.spray_jobs) {
      for (const auto& j : jobs) {
        if (j.job_id != id) continue;
        v1::SprayRule r;
        r.set_traffic_class(j.traffic_class);
        r.set_qp_first(j.qp_first);
        r.set_qp_last(j.qp_last);
        spray.push_back(r);
      }
    }
    auto it = dlb_.find(leaf);
    bool change = it == dlb_.end() || it->second.mode() != d.profile.mode();
    if (!change) {
      const double before = static_cast<double>(it->second.inactivity_interval_ns());
      const double after = static_cast<double>(d.profile.inactivity_interval_ns());
      change = before > 0 ? std::fabs(after - before) / before > options_.dlb_min_change
                          : after != before;
    }
    auto sp = spray_.find(leaf);
    bool spray_change = (sp == spray_.end() ? 0 : sp->second.size()) != spray.size();
    // Hysteresis: a leaf is reprogrammed only when the same kind of change
    // (mode, and timer within dlb_min_change) was decided dlb_confirm
    // intervals in a row; the first setting of a leaf applies at once.
    if ((change || spray_change) && it != dlb_.end()) {
      auto& pend = dlb_pending_[leaf];
      const bool same =
          pend.count > 0 && pend.profile.mode() == d.profile.mode() &&
          std::fabs(static_cast<double>(pend.profile.inactivity_interval_ns()) -
                    static_cast<double>(d.profile.inactivity_interval_ns())) <=
              options_.dlb_min_change *
                  static_cast<double>(std::max<uint64_t>(1, pend.profile.inactivity_interval_ns()));
      pend.count = same ? pend.count + 1 : 1;
      pend.profile = d.profile;
      if (pend.count < options_.dlb_confirm) continue;
    }
    dlb_pending_.erase(leaf);
    // Mode changes are dampened: every applied change is a flap of the leaf's mode
    // (RFC 2439 penalty). A change that brings the penalty to the suppress threshold
    // is the last one applied until the penalty decays below reuse (or max_suppress
    // passes); changes decided meanwhile are held and add nothing.
    if (it != dlb_.end() && it->second.mode() != d.profile.mode()) {
      auto& st = dlb_damp_[leaf];
      st = ad::Dampen(st, ad::LinkEvent::kNone, snap.taken_at_ns, options_.dlb_dampening).state;
      if (st.suppressed) continue;  // held: the event was raised when suppression began
      const auto flap =
          ad::Dampen(st, ad::LinkEvent::kDown, snap.taken_at_ns, options_.dlb_dampening);
      const auto now =
          ad::Dampen(flap.state, ad::LinkEvent::kUp, snap.taken_at_ns, options_.dlb_dampening);
      st = now.state;
      if (st.suppressed) {
        out->events.push_back(
            {v1::EVENT_TYPE_DLB_TUNED, v1::SEVERITY_WARNING, leaf,
             "DLB mode decisions on " + leaf + " keep reversing (" + std::to_string(st.flaps) +
                 " mode changes)",
             "this change to " + v1::DlbMode_Name(d.profile.mode()) +
                 " is applied; further mode changes are held",
             "until the decisions stay quiet (penalty " + Fmt("%.0f", st.penalty) +
                 ", reuse below " + Fmt("%.0f", options_.dlb_dampening.reuse_threshold) +
                 ", at most " + std::to_string(options_.dlb_dampening.max_suppress_ns / kNsPerSec) +
                 " s)",
             false});
      }
    }
    if (change || spray_change) {
      const std::string mode = v1::DlbMode_Name(d.profile.mode());
      out->events.push_back(
          {v1::EVENT_TYPE_DLB_TUNED, v1::SEVERITY_INFO, leaf,
           "traffic of " + std::to_string(jobs.size()) + " job(s) on " + leaf + ": bounds " +
               Us(d.lower_bound_ns) + " .. " +
               (d.upper_bound_ns < 0 ? std::string("none") : Us(d.upper_bound_ns)) +
               (d.bounding_job.empty() ? "" : " (job " + d.bounding_job + ")"),
           "set " + mode +
               (d.profile.inactivity_interval_ns() > 0
                    ? " with flowlet timer " +
                          Us(static_cast<TimeNs>(d.profile.inactivity_interval_ns()))
                    : "") +
               (spray.empty() ? "" : "; spraying " + std::to_string(spray.size()) + " job(s)"),
           d.reason, false});
      dlb_[leaf] = d.profile;
      spray_[leaf] = std::move(spray);
      out->dlb_changes++;
      out->desired_changed = true;
    }
  }
  // Leaves without jobs any more keep their last setting (harmless).
}

void AdaptiveEngine::Decorate(std::map<std::string, v1::DeviceState>* desired) const {
  for (const auto& [dev, sets] : weights_) {
    if (!loom::te::LimitsOf(limits_, dev).glb_weights) continue;
    auto& st = (*desired)[dev];
    st.set_device(dev);
    for (const auto& w : sets) *st.add_weights() = w;
  }
  for (const auto& [key, buckets] : alb_tables_) {
    auto& st = (*desired)[key.first];
    st.set_device(key.first);
    auto* t = st.add_alb_tables();
    t->set_group(key.second);
    for (const auto& b : buckets) t->add_buckets(b);
  }
  for (const auto& [leaf, profile] : dlb_) {
    auto& st = (*desired)[leaf];
    st.set_device(leaf);
    *st.mutable_dlb() = profile;
  }
  for (const auto& nic : quarantined_) {
    for (int li : topo_.LinksOf(nic)) {
      const auto& l = topo_.topology().links(li);
      const auto& leaf_end = l.a().device() == nic ? l.b() : l.a();
      auto& st = (*desired)[leaf_end.device()];
      st.set_device(leaf_end.device());
      st.add_disabled_interfaces(leaf_end.interface());
    }
  }
  for (const auto& [leaf, rules] : spray_) {
    auto& st = (*desired)[leaf];
    st.set_device(leaf);
    for (const auto& r : rules) *st.add_spray_rules() = r;
  }
}

}  // namespace loom::controller
