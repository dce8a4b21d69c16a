// Faults Loom cannot remediate in the fabric, and their blast radius for schedulers
// (issue 20 item 4). Re-placement routes around a spine link, a spine or a degraded
// uplink; it cannot route around a NIC whose only port is down, a leaf that lost
// every uplink, or a NIC Loom quarantined for storming PFC pauses. The hosts behind
// such a fault, and the jobs with endpoints there, are what a scheduler must act on
// (drain the nodes, requeue the jobs): a FAULT_BLAST_RADIUS event names them when the
// fault starts and again when it clears. The active set is kept in the store's
// metadata ("blast_radius") with the events that change it, so a restart neither
// repeats nor forgets one. loom-slurm-agent (api/python) follows these events and
// drains / resumes Slurm nodes.
#include <algorithm>

#include "common/log.h"
#include "controller/core/controller.h"

namespace loom::controller {

namespace v1 = loom::v1;

namespace {

std::string Join(const std::set<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

// "job1=tenantA,job2=tenantB".
std::string JoinPairs(const std::map<std::string, std::string>& pairs) {
  std::string out;
  for (const auto& [k, v] : pairs) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out;
}

std::set<std::string> Split(const std::string& list, char sep) {
  std::set<std::string> out;
  for (size_t pos = 0; pos < list.size();) {
    size_t end = list.find(sep, pos);
    if (end == std::string::npos) end = list.size();
    if (end > pos) out.insert(list.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

// One line per fault: subject, kind, cause, nodes, jobs, job=tenant pairs (absent in
// records written before tenants were kept), tab-separated (ids and our own
// causes hold no tabs or newlines; any that slipped in are replaced).
std::string Clean(std::string s) {
  std::replace(s.begin(), s.end(), '\t', ' ');
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

}  // namespace

std::string Controller::SerializeBlastRadius() const {
  std::string out;
  for (const auto& [subject, f] : blast_active_) {
    out += Clean(subject) + "\t" + Clean(f.kind) + "\t" + Clean(f.cause) + "\t" + Join(f.nodes) +
           "\t" + Join(f.jobs) + "\t" + JoinPairs(f.job_tenants) + "\n";
  }
  return out;
}

void Controller::CheckBlastRadius(std::vector<v1::Event>* events, Mutation* m, bool oper_changed) {
  std::set<std::string> down = DownLinks();
  const std::set<std::string>& quarantined = adaptive_.quarantined_nics();
  if (blast_checked_ && !oper_changed && down == blast_last_down_ &&
      quarantined == blast_last_quarantined_) {
    return;  // nothing a fault depends on changed
  }
  blast_checked_ = true;
  blast_last_down_ = down;
  blast_last_quarantined_ = quarantined;
  const v1::Topology& t = topo_->topology();
  auto oper = [&](const std::string& link) {
    auto it = oper_.find(link);
    return it == oper_.end() ? v1::LINK_OPER_STATE_UNKNOWN : it->second;
  };
  auto role = [&](const std::string& device) {
    const v1::Device* d = topo_->FindDevice(device);
    return d ? d->role() : v1::DEVICE_ROLE_UNSPECIFIED;
  };
  auto host_of = [&](const std::string& nic) {
    const v1::Device* d = topo_->FindDevice(nic);
    return d && !d->host().empty() ? d->host() : nic;
  };
  // Faults now, and the subjects whose fault is known to be over (fresh evidence).
  std::map<std::string, BlastFault> now;
  std::set<std::string> clear;
  std::map<std::string, std::vector<const v1::Link*>> uplinks;  // leaf -> its uplinks
  std::map<std::string, std::set<std::string>> leaf_hosts;
  for (const auto& link : t.links()) {
    // Either end may be listed first (the topology accepts both orders).
    std::string lower = link.a().device(), upper = link.b().device();
    auto rl = role(lower), ru = role(upper);
    if (rl > ru) {
      std::swap(lower, upper);
      std::swap(rl, ru);
    }
    if (rl == v1::DEVICE_ROLE_LEAF &&
        (ru == v1::DEVICE_ROLE_SPINE || ru == v1::DEVICE_ROLE_SUPER_SPINE)) {
      uplinks[lower].push_back(&link);
      continue;
    }
    // DeviceRole orders LEAF (1) < SPINE < SUPER_SPINE < HOST < NIC (5).
    if (!(rl == v1::DEVICE_ROLE_LEAF && ru == v1::DEVICE_ROLE_NIC)) continue;
    const std::string& leaf = lower;
    const std::string& nic = upper;
    leaf_hosts[leaf].insert(host_of(nic));
    const auto st = oper(link.id());
    if (st == v1::LINK_OPER_STATE_DOWN) {
      BlastFault& f = now[link.id()];
      f.kind = "nic-port-down";
      f.cause = "NIC port down: " + nic + " lost its link to " + leaf;
      f.nodes.insert(host_of(nic));
    } else if (st == v1::LINK_OPER_STATE_UP) {
      clear.insert(link.id());
    }
  }
  for (const auto& [leaf, ups] : uplinks) {
    const bool isolated = std::all_of(ups.begin(), ups.end(),
                                      [&](const v1::Link* l) { return down.count(l->id()) > 0; });
    if (isolated) {
      BlastFault& f = now[leaf];
      f.kind = "leaf-isolated";
      f.cause = "leaf isolated: all " + std::to_string(ups.size()) + " uplinks of " + leaf +
                " are down or out of service";
      f.nodes = leaf_hosts[leaf];
    } else if (std::any_of(ups.begin(), ups.end(), [&](const v1::Link* l) {
                 return oper(l->id()) == v1::LINK_OPER_STATE_UP && !down.count(l->id());
               })) {
      clear.insert(leaf);
    }
  }
  for (const auto& nic : quarantined) {
    BlastFault& f = now[nic];
    f.kind = "pfc-storm-origin-quarantined";
    f.cause = "PFC storm origin quarantined: " + nic + " is shut until an operator clears it";
    f.nodes.insert(host_of(nic));
  }
  for (const auto& [subject, f] : blast_active_) {
    if (f.kind == "pfc-storm-origin-quarantined" && !now.count(subject)) clear.insert(subject);
  }
  auto event = [&](const std::string& subject, const BlastFault& f, bool active) {
    v1::Event ev = NewEvent(v1::EVENT_TYPE_FAULT_BLAST_RADIUS, subject);
    ev.set_severity(active ? v1::SEVERITY_CRITICAL : v1::SEVERITY_INFO);
    ev.set_cause(active ? f.cause : "cleared: " + f.cause);
    ev.set_action(active ? "none in the fabric: re-placement cannot route around it; the "
                           "scheduler should drain these nodes"
                         : "the nodes may return to service");
    ev.set_result("nodes: " + (f.nodes.empty() ? std::string("none") : Join(f.nodes)) +
                  "; jobs: " + (f.jobs.empty() ? std::string("none") : Join(f.jobs)));
    auto& attrs = *ev.mutable_attributes();
    attrs["state"] = active ? "active" : "cleared";
    attrs["fault"] = f.kind;
    attrs["nodes"] = Join(f.nodes);
    attrs["jobs"] = Join(f.jobs);
    std::set<std::string> tenants;
    for (const auto& [job, tenant] : f.job_tenants) tenants.insert(tenant);
    attrs["tenants"] = Join(tenants);
    attrs["job_tenants"] = JoinPairs(f.job_tenants);
    events->push_back(std::move(ev));
  };
  // The jobs on each host, built once and only when a fault is new (this runs on every
  // telemetry snapshot; a leaf losing power starts dozens of faults at once).
  std::map<std::string, std::set<std::string>> host_jobs;
  bool host_jobs_built = false;
  bool changed = false;
  for (auto& [subject, f] : now) {
    auto it = blast_active_.find(subject);
    if (it != blast_active_.end() && it->second.kind == f.kind && it->second.nodes == f.nodes) {
      continue;  // known (the jobs on it may change: the event named those at its start)
    }
    if (!host_jobs_built) {
      host_jobs_built = true;
      for (const auto& [id, job] : jobs_) {
        for (const auto& ep : job.endpoints()) {
          const std::string nic = topo_->EndpointNic(ep);
          if (!nic.empty()) host_jobs[host_of(nic)].insert(id);
        }
      }
    }
    for (const auto& node : f.nodes) {
      if (auto h = host_jobs.find(node); h != host_jobs.end()) {
        f.jobs.insert(h->second.begin(), h->second.end());
      }
    }
    for (const auto& job : f.jobs) {
      if (auto j = jobs_.find(job); j != jobs_.end()) f.job_tenants[job] = j->second.tenant();
    }
    event(subject, f, true);
    blast_active_[subject] = f;
    changed = true;
  }
  for (auto it = blast_active_.begin(); it != blast_active_.end();) {
    if (!now.count(it->first) && clear.count(it->first)) {
      event(it->first, it->second, false);
      it = blast_active_.erase(it);
      changed = true;
    } else {
      ++it;
    }
  }
  if (changed) m->put_meta["blast_radius"] = SerializeBlastRadius();
}

void Controller::RestoreBlastRadius(const StoredState& state) {
  // The faults active at the last stop: they clear once telemetry shows them over (a
  // scheduler's drain is not left behind forever). A quarantine is not kept across a
  // restart (adaptive state is not persisted), so its fault clears at the first snapshot.
  auto it = state.meta.find("blast_radius");
  if (it == state.meta.end()) return;
  for (const auto& line : Split(it->second, '\n')) {
    std::vector<std::string> fields;
    for (size_t pos = 0;;) {
      size_t tab = line.find('\t', pos);
      fields.push_back(line.substr(pos, tab == std::string::npos ? tab : tab - pos));
      if (tab == std::string::npos) break;
      pos = tab + 1;
    }
    if ((fields.size() != 5 && fields.size() != 6) || fields[0].empty()) {
      LOG_WARN("ignoring a malformed blast-radius record in the store").With("record", line);
      continue;
    }
    BlastFault f;
    f.kind = fields[1];
    f.cause = fields[2];
    f.nodes = Split(fields[3], ',');
    f.jobs = Split(fields[4], ',');
    if (fields.size() == 6) {
      for (const auto& pair : Split(fields[5], ',')) {
        if (size_t eq = pair.find('='); eq != std::string::npos) {
          f.job_tenants[pair.substr(0, eq)] = pair.substr(eq + 1);
        }
      }
    }
    blast_active_[fields[0]] = std::move(f);
  }
}

Visibility ScopeEvent(const v1::Event& ev, const std::set<std::string>& tenants,
                      const std::string& viewer, v1::Event* mine) {
  // Who acted is shown only when it is the viewer itself.
  const bool other_actor =
      (!ev.actor().empty() && ev.actor() != viewer) || (!ev.peer().empty() && ev.actor() != viewer);
  if (ev.has_job()) {
    if (!tenants.count(ev.job().tenant())) return Visibility::kHidden;
    if (!other_actor) return Visibility::kWhole;
    *mine = ev;
    mine->clear_actor();
    mine->clear_peer();
    return Visibility::kRedacted;
  }
  if (ev.type() != v1::EVENT_TYPE_FAULT_BLAST_RADIUS) return Visibility::kHidden;
  auto it = ev.attributes().find("job_tenants");
  if (it == ev.attributes().end()) return Visibility::kHidden;
  std::map<std::string, std::string> kept;
  for (const auto& pair : Split(it->second, ',')) {
    const size_t eq = pair.find('=');
    if (eq != std::string::npos && tenants.count(pair.substr(eq + 1))) {
      kept[pair.substr(0, eq)] = pair.substr(eq + 1);
    }
  }
  if (kept.empty()) return Visibility::kHidden;
  *mine = ev;
  mine->clear_actor();
  mine->clear_peer();
  std::set<std::string> jobs, seen;
  for (const auto& [job, tenant] : kept) {
    jobs.insert(job);
    seen.insert(tenant);
  }
  auto& attrs = *mine->mutable_attributes();
  attrs["jobs"] = Join(jobs);
  attrs["job_tenants"] = JoinPairs(kept);
  attrs["tenants"] = Join(seen);
  const std::string& result = ev.result();
  const size_t j = result.find("; jobs: ");
  mine->set_result((j == std::string::npos ? result : result.substr(0, j)) +
                   "; jobs: " + Join(jobs));
  return Visibility::kRedacted;
}

}  // namespace loom::controller
