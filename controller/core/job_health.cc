// Controller::GetJobHealth and the per-job fabric slowdown: "is the fabric
// slowing this job, where, and what did Loom do about it", from the job's
// assignment, the latest link snapshot and the event history in memory.
//
// The job's paths: for each route (destination NIC, via spine), the uplink
// from every source leaf of the job (a leaf with one of its NICs, other than
// the destination's) to the spine, the spine's downlink to the destination
// leaf, and the destination leaf's port to the NIC; plus each NIC's own link
// towards its leaf. Where `via` is not adjacent to a leaf (three tiers, via =
// a super-spine) those hops are left out. O(routes x source leaves x parallel
// links) per call.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "controller/core/controller.h"

namespace loom::controller {

namespace v1 = loom::v1;

namespace {

// (link index, direction) for every link from `from` to `to`.
std::vector<std::pair<int, int>> Directed(const loom::topology::TopologyIndex& topo,
                                          const std::string& from, const std::string& to) {
  std::vector<std::pair<int, int>> out;
  const auto& links = topo.topology().links();
  for (int i : topo.LinksOf(from)) {
    const auto& l = links[i];
    if (l.a().device() == from && l.b().device() == to) out.push_back({i, 0});
    if (l.b().device() == from && l.a().device() == to) out.push_back({i, 1});
  }
  return out;
}

// Worst first: pause share, then ECN marks, then utilization.
bool Worse(const v1::JobLinkHealth& a, const v1::JobLinkHealth& b) {
  return std::make_tuple(!a.out_of_placement().empty(), a.pfc_pause_ratio(), a.ecn_marked_pps(),
                         a.utilization()) > std::make_tuple(!b.out_of_placement().empty(),
                                                            b.pfc_pause_ratio(), b.ecn_marked_pps(),
                                                            b.utilization());
}

}  // namespace

double Controller::JobFabricSlowdown(double predicted_max_utilization, double max_pause_ratio) {
  const double demand = std::max(1.0, predicted_max_utilization);
  return demand / (1.0 - std::clamp(max_pause_ratio, 0.0, 0.99));
}

v1::GetJobHealthResponse Controller::JobHealthOf(const v1::Job& job) const {
  v1::GetJobHealthResponse h;
  h.set_job_id(job.job_id());
  h.set_tenant(job.tenant());
  h.set_state(job.status().state());
  const auto& links = topo_->topology().links();
  const auto down = DownLinks();

  // The job's NICs and leaves.
  std::set<std::string> nics;
  for (const auto& e : job.endpoints()) {
    const std::string nic = topo_->EndpointNic(e);
    if (!nic.empty()) nics.insert(nic);
  }
  std::map<std::string, std::string> leaf_of;
  std::set<std::string> leaves;
  for (const auto& nic : nics) {
    leaf_of[nic] = topo_->NicLeaf(nic);
    if (!leaf_of[nic].empty()) leaves.insert(leaf_of[nic]);
  }
  h.set_nics(static_cast<int>(nics.size()));

  // Directions on the job's paths -> routes crossing them.
  std::map<std::pair<int, int>, int> on_path;
  std::map<std::pair<int, int>, int> uplink_routes;  // source-leaf uplinks only
  std::set<std::string> spines_used;
  const auto& a = job.status().assignment();
  int sprayed = 0, impaired = 0;
  for (const auto& r : a.routes()) {
    if (!r.sprayed_at().empty()) ++sprayed;
    const std::string dst_leaf = topo_->NicLeaf(r.destination());
    if (!r.via().empty()) spines_used.insert(r.via());
    bool route_impaired = false;
    auto note = [&](const std::vector<std::pair<int, int>>& dirs, bool uplink) {
      for (const auto& d : dirs) {
        ++on_path[d];
        if (uplink) ++uplink_routes[d];
        if (down.count(links[d.first].id())) route_impaired = true;
      }
    };
    for (const auto& leaf : leaves) {
      if (leaf == dst_leaf || r.via().empty()) continue;
      note(Directed(*topo_, leaf, r.via()), true);
    }
    if (!r.via().empty() && !dst_leaf.empty()) note(Directed(*topo_, r.via(), dst_leaf), false);
    if (!dst_leaf.empty()) note(Directed(*topo_, dst_leaf, r.destination()), false);
    impaired += route_impaired;
  }
  for (const auto& nic : nics) {
    if (!leaf_of[nic].empty()) {
      for (const auto& d : Directed(*topo_, nic, leaf_of[nic])) on_path.emplace(d, 0);
    }
  }
  h.set_impaired_routes(impaired);
  {
    std::set<std::string> ids;
    for (const auto& [d, routes] : on_path) ids.insert(links[d.first].id());
    for (const auto& id : ids) h.add_path_links(id);
  }
  h.set_predicted_max_utilization(a.predicted_max_utilization());

  // Telemetry on those directions.
  double max_pause = 0;
  bool have_worst = false;
  for (const auto& [d, routes] : on_path) {
    const auto& l = links[d.first];
    v1::JobLinkHealth lh;
    lh.set_link_id(l.id());
    lh.set_direction(d.second == 0 ? "up" : "down");
    lh.set_from_device(d.second == 0 ? l.a().device() : l.b().device());
    lh.set_to_device(d.second == 0 ? l.b().device() : l.a().device());
    lh.set_job_routes(routes);
    if (down.count(l.id())) {
      std::string why = adaptive_.RemovalReason(l.id());
      if (drains_.count(l.id())) why = "drained: " + drains_.at(l.id()).reason;
      auto op = oper_.find(l.id());
      if (why.empty() && op != oper_.end() && op->second == v1::LINK_OPER_STATE_DOWN) {
        why = "oper down";
      }
      lh.set_out_of_placement(why.empty() ? "out of placement" : why);
    }
    const size_t k = static_cast<size_t>(2 * d.first + d.second);
    lh.set_stale(true);
    if (snapshot_ && k < snapshot_->links.size()) {
      const auto& s = snapshot_->links[k];
      lh.set_stale(s.stale);
      if (!s.stale) {
        lh.set_utilization(s.utilization);
        lh.set_queue_bytes(static_cast<double>(s.queue_depth_bytes));
        lh.set_ecn_marked_pps(s.ecn_marked_pps);
        lh.set_cnp_pps(s.cnp_pps);
        lh.set_pfc_pause_ratio(s.pfc_pause_ratio);
        max_pause = std::max(max_pause, s.pfc_pause_ratio);
      }
      // Throughput from the NICs' own counters.
      if (nics.count(lh.from_device()) && s.has_nic_counters && !s.stale) {
        h.set_achieved_bps(h.achieved_bps() + s.tx_bps);
        h.set_nics_measured(h.nics_measured() + 1);
      }
      if (nics.count(lh.from_device())) {
        h.set_line_rate_bps(h.line_rate_bps() + static_cast<double>(s.capacity_bps));
      }
    }
    if (!have_worst || Worse(lh, h.worst_link())) {
      *h.mutable_worst_link() = lh;
      have_worst = true;
    }
    if (!lh.out_of_placement().empty() || lh.pfc_pause_ratio() > 0 || lh.ecn_marked_pps() > 0 ||
        lh.utilization() >= 0.9 || (lh.stale() && routes > 0)) {
      *h.add_problem_links() = lh;
    }
  }
  std::sort(h.mutable_problem_links()->begin(), h.mutable_problem_links()->end(), Worse);
  h.set_throughput_available(h.nics_measured() > 0);
  h.set_max_pause_ratio(max_pause);

  // Entropy audit.
  auto* en = h.mutable_entropy();
  en->set_routes(a.routes_size());
  en->set_sprayed_routes(sprayed);
  en->set_spines_used(static_cast<int>(spines_used.size()));
  std::set<std::string> spines;
  int available = 0, used = 0, shared = 0;
  for (const auto& leaf : leaves) {
    int leaf_idle = 0, leaf_shared = 0;
    for (int i : topo_->LinksOf(leaf)) {
      const auto& l = links[i];
      const std::string& other = l.a().device() == leaf ? l.b().device() : l.a().device();
      const auto* dev = topo_->FindDevice(other);
      if (dev == nullptr || dev->role() == v1::DEVICE_ROLE_NIC ||
          dev->role() == v1::DEVICE_ROLE_LEAF) {
        continue;
      }
      spines.insert(other);
      if (down.count(l.id())) continue;
      ++available;
      const std::pair<int, int> d{i, l.a().device() == leaf ? 0 : 1};
      auto u = uplink_routes.find(d);
      const int n = u == uplink_routes.end() ? 0 : u->second;
      used += n > 0;
      leaf_idle += n == 0;
      leaf_shared += n >= 2;
    }
    if (leaf_idle > 0) shared += leaf_shared;
  }
  en->set_spines_available(static_cast<int>(spines.size()));
  en->set_uplinks_available(available);
  en->set_uplinks_used(used);
  en->set_needlessly_shared_uplinks(shared);

  // Verdict.
  h.set_fabric_slowdown(JobFabricSlowdown(a.predicted_max_utilization(), max_pause));
  const auto& w = h.worst_link();
  const bool congested = w.utilization() >= 0.9 && w.ecn_marked_pps() > 0;
  h.set_slowed_by_fabric(h.fabric_slowdown() > 1.05 || impaired > 0 || congested ||
                         max_pause >= 0.05);
  char buf[256];
  if (job.status().state() != v1::JOB_STATE_ASSIGNED && a.routes_size() == 0) {
    h.set_verdict("no paths assigned yet: " + job.status().message());
  } else if (!h.slowed_by_fabric()) {
    h.set_verdict(
        "the fabric is not slowing this job: no pauses, congestion or failed links on "
        "its paths");
  } else {
    std::snprintf(buf, sizeof(buf),
                  "the fabric is slowing this job (about %.2fx): worst is %s %s->%s "
                  "(utilization %.0f%%, PFC paused %.0f%%, %.0f ECN marks/s)%s",
                  h.fabric_slowdown(), w.link_id().c_str(), w.from_device().c_str(),
                  w.to_device().c_str(), w.utilization() * 100, w.pfc_pause_ratio() * 100,
                  w.ecn_marked_pps(),
                  impaired > 0 ? "; some routes cross a link out of placement" : "");
    h.set_verdict(buf);
  }

  // What Loom did: events about the job or the links on its paths.
  std::set<std::string> subjects{job.job_id()};
  for (const auto& [d, routes] : on_path) subjects.insert(links[d.first].id());
  for (auto e = history_.rbegin(); e != history_.rend() && h.actions_size() < 20; ++e) {
    const auto& ev = e->ev;
    if (!subjects.count(ev.subject())) continue;
    if (ev.type() == v1::EVENT_TYPE_JOB_REGISTERED) continue;
    auto* out = h.add_actions();
    *out = ev;
    out->clear_job();  // the job itself is what GetJob returns
  }
  return h;
}

}  // namespace loom::controller
