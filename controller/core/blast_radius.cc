// Faults Loom cannot remediate in the fabric, and their blast radius for schedulers
// (issue 20 item 4). Re-placement routes around a spine link, a spine or a degraded
// uplink; it cannot route around a NIC whose only port is down, a leaf that lost
// every uplink, or a NIC Loom quarantined for storming PFC pauses. The hosts behind
// such a fault, and the jobs with endpoints there, are what a scheduler must act on
// (drain the nodes, requeue the jobs): a FAULT_BLAST_RADIUS event names them when the
// fault starts and again when it clears. loom-slurm-agent (api/python) follows these
// events and drains / resumes Slurm nodes.
#include <algorithm>

#include "controller/core/controller.h"

namespace loom::controller {

namespace v1 = loom::v1;

namespace {

std::string Join(const std::set<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

void Controller::CheckBlastRadius(std::vector<v1::Event>* events) {
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
    const auto ra = role(link.a().device()), rb = role(link.b().device());
    if (ra == v1::DEVICE_ROLE_NIC && rb == v1::DEVICE_ROLE_LEAF) {
      leaf_hosts[link.b().device()].insert(host_of(link.a().device()));
      const auto st = oper(link.id());
      if (st == v1::LINK_OPER_STATE_DOWN) {
        BlastFault& f = now[link.id()];
        f.kind = "nic-port-down";
        f.cause = "NIC port down: " + link.a().device() + " lost its link to " + link.b().device();
        f.nodes.insert(host_of(link.a().device()));
      } else if (st == v1::LINK_OPER_STATE_UP) {
        clear.insert(link.id());
      }
    } else if (ra == v1::DEVICE_ROLE_LEAF &&
               (rb == v1::DEVICE_ROLE_SPINE || rb == v1::DEVICE_ROLE_SUPER_SPINE)) {
      uplinks[link.a().device()].push_back(&link);
    }
  }
  const std::set<std::string> down = DownLinks();
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
  for (const auto& nic : adaptive_.quarantined_nics()) {
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
    events->push_back(std::move(ev));
  };
  for (auto& [subject, f] : now) {
    auto it = blast_active_.find(subject);
    if (it != blast_active_.end() && it->second.kind == f.kind && it->second.nodes == f.nodes) {
      continue;  // known (the jobs on it may change: the event named those at its start)
    }
    // The jobs with an endpoint on an affected host (only for a new fault: this runs
    // on every telemetry snapshot).
    for (const auto& [id, job] : jobs_) {
      for (const auto& ep : job.endpoints()) {
        const std::string nic = topo_->EndpointNic(ep);
        if (!nic.empty() && f.nodes.count(host_of(nic))) {
          f.jobs.insert(id);
          break;
        }
      }
    }
    event(subject, f, true);
    blast_active_[subject] = f;
  }
  for (auto it = blast_active_.begin(); it != blast_active_.end();) {
    if (!now.count(it->first) && clear.count(it->first)) {
      event(it->first, it->second, false);
      it = blast_active_.erase(it);
    } else {
      ++it;
    }
  }
}

void Controller::RestoreBlastRadius() {
  // The faults active at the last stop, from the event history in memory: they clear
  // once telemetry shows them over (a scheduler's drain is not left behind forever).
  for (const auto& c : history_) {
    const v1::Event& ev = c.ev;
    if (ev.type() != v1::EVENT_TYPE_FAULT_BLAST_RADIUS) continue;
    auto state = ev.attributes().find("state");
    if (state != ev.attributes().end() && state->second == "active") {
      BlastFault f;
      auto get = [&](const char* key) {
        auto it = ev.attributes().find(key);
        return it == ev.attributes().end() ? std::string() : it->second;
      };
      f.kind = get("fault");
      f.cause = ev.cause();
      for (const auto* key : {"nodes", "jobs"}) {
        std::string list = get(key);
        auto& out = std::string(key) == "nodes" ? f.nodes : f.jobs;
        for (size_t pos = 0; pos < list.size();) {
          size_t comma = list.find(',', pos);
          if (comma == std::string::npos) comma = list.size();
          if (comma > pos) out.insert(list.substr(pos, comma - pos));
          pos = comma + 1;
        }
      }
      blast_active_[ev.subject()] = std::move(f);
    } else {
      blast_active_.erase(ev.subject());
    }
  }
}

}  // namespace loom::controller
