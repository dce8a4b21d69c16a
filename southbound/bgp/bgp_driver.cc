#include "southbound/bgp/bgp_driver.h"

#include <algorithm>

#include "api/proto_util/fingerprint.h"
#include "common/log.h"
#include "southbound/wire/device_state_util.h"

namespace loom::southbound::bgp {

namespace {
std::set<std::string> DevicesOf(const BgpDriverConfig& c) {
  std::set<std::string> out;
  for (const PeerConfig& p : c.sessions) {
    if (!p.device.empty()) out.insert(p.device);
  }
  return out;
}
}  // namespace

BgpDriver::BgpDriver(boost::asio::io_context& io, Speaker* speaker, BgpDriverConfig config)
    : io_(io), speaker_(speaker), config_(std::move(config)), devices_(DevicesOf(config_)) {}

void BgpDriver::Start() {
  boost::asio::post(io_, [this] {
    for (const PeerConfig& p : config_.sessions) {
      Status s = speaker_->AddPeer(p);
      if (!s.ok())
        LOG_ERROR("bgp driver: bad session").With("peer", p.name).With("error", s.message());
    }
  });
}

bool BgpDriver::Handles(const std::string& device) const { return devices_.count(device) > 0; }

std::vector<OriginatedRoute> BgpDriver::Translate(const loom::v1::DeviceState& desired,
                                                  std::vector<ApplyFailure>* failures,
                                                  loom::v1::DeviceState* applied) const {
  std::map<Prefix, OriginatedRoute> routes;
  std::map<std::string, std::vector<Prefix>> prefixes_of;  // destination -> prefixes
  std::map<Prefix, std::string> egress_of;                 // prefix -> egress leaf
  auto egress = [this](const std::string& destination) {
    auto it = config_.egress_leaves.find(destination);
    return it == config_.egress_leaves.end() ? destination : it->second;
  };
  std::vector<std::string> bad;
  uint32_t local_as = 0;
  std::set<std::string> vias;
  for (const PeerConfig& p : config_.sessions) {
    if (p.device != desired.device()) continue;
    local_as = p.local_as;
    if (!p.via.empty()) vias.insert(p.via);
  }
  std::vector<std::string> split;  // Routes split by destination QP: not expressible.
  for (const loom::v1::ColoredRoute& cr : desired.routes()) {
    // Checked first: the parts of a split destination share its prefix, so the
    // duplicate-prefix check below would otherwise name all but one of them.
    if (IsSplitRoute(cr)) {
      split.push_back(cr.destination() + " qp " + std::to_string(cr.qp_value()) + "/" +
                      std::to_string(cr.qp_mask()));
      continue;
    }
    std::optional<Prefix> prefix = Prefix::Parse(cr.prefix());
    if (!prefix || cr.prefix().empty()) {
      bad.push_back(cr.destination() + " (prefix '" + cr.prefix() + "')");
      continue;
    }
    if (routes.count(*prefix)) {
      bad.push_back(cr.destination() + " (duplicate prefix " + cr.prefix() + ")");
      continue;
    }
    OriginatedRoute r;
    r.prefix = *prefix;
    r.color = cr.color();
    r.backup_color = cr.backup_color();
    r.large_communities.push_back({local_as, 1, cr.traffic_class()});
    routes[*prefix] = r;
    prefixes_of[cr.destination()].push_back(*prefix);
    egress_of[*prefix] = egress(cr.destination());
    *applied->add_routes() = cr;
  }
  if (!split.empty()) {
    std::string msg =
        "routes split by destination QP cannot be carried by BGP-DPF (one color per prefix); "
        "program these devices over gNMI or remove qp_split from the policy:";
    for (const std::string& b : split) msg += " " + b;
    failures->push_back({"routes", InvalidArgument(msg)});
  }
  if (!bad.empty()) {
    std::string msg = "routes without a usable prefix:";
    for (const std::string& b : bad) msg += " " + b;
    failures->push_back({"routes", InvalidArgument(msg)});
  }
  std::vector<std::string> bad_weights;
  for (const loom::v1::WeightSet& ws : desired.weights()) {
    std::vector<Prefix> targets;
    if (auto it = prefixes_of.find(ws.destination()); it != prefixes_of.end()) {
      targets = it->second;
    } else if (auto jt = config_.destination_prefixes.find(ws.destination());
               jt != config_.destination_prefixes.end()) {
      for (const std::string& s : jt->second) {
        if (auto p = Prefix::Parse(s)) targets.push_back(*p);
      }
    } else if (auto p = Prefix::Parse(ws.destination())) {
      targets.push_back(*p);
    }
    if (targets.empty()) {
      bad_weights.push_back(ws.destination());
      continue;
    }
    for (const Prefix& t : targets) {
      OriginatedRoute& r = routes[t];
      r.prefix = t;
      egress_of.emplace(t, egress(ws.destination()));
      for (const auto& [nh, w] : ws.weights()) {
        if (w > 0) r.bandwidth_by_via[nh] = static_cast<float>(w) * config_.bandwidth_per_weight;
      }
    }
    *applied->add_weights() = ws;
  }
  if (!bad_weights.empty()) {
    std::string msg = "weights for unknown destinations:";
    for (const std::string& b : bad_weights) msg += " " + b;
    failures->push_back({"weights", InvalidArgument(msg)});
  }
  if (desired.next_hop_reach_size() > 0) AddNnhn(desired, vias, egress_of, &routes);
  *applied->mutable_next_hop_reach() = desired.next_hop_reach();
  std::vector<OriginatedRoute> out;
  out.reserve(routes.size());
  for (auto& [p, r] : routes) out.push_back(std::move(r));
  return out;
}

std::shared_ptr<const BgpDriver::NnhnPlan> BgpDriver::PlanNnhn(
    const loom::v1::DeviceState& desired, const std::set<std::string>& vias) const {
  // The reach rarely changes between two applies of a device (a recolor keeps it):
  // reuse the plan while the serialized reach is the same.
  std::string key;
  for (const loom::v1::NextHopReach& r : desired.next_hop_reach()) {
    key += loom::proto::CanonicalBytes(r);
  }
  auto& cached = nnhn_plans_[desired.device()];
  if (cached.second && cached.first == key) return cached.second;
  auto id_of = [this](const std::string& device) -> uint32_t {
    auto it = config_.router_ids.find(device);
    return it == config_.router_ids.end() ? 0 : it->second;
  };
  // next hop -> egress leaf -> its entry; the egress leaves any entry names.
  std::map<std::string, std::map<std::string, const loom::v1::NextHopReach*>> reach;
  std::set<std::string> covered;
  for (const loom::v1::NextHopReach& r : desired.next_hop_reach()) {
    auto& by_egress = reach[r.next_hop()];
    for (const std::string& e : r.egress()) {
      by_egress[e] = &r;
      covered.insert(e);
    }
  }
  auto plan = std::make_shared<NnhnPlan>();
  for (const std::string& egress : covered) {
    NnhnPlan::Entry entry;
    for (const std::string& via : vias) {
      auto rv = reach.find(via);
      if (rv == reach.end()) {
        entry.by_via[via];  // Not a listed next hop: sent without NNHN.
        continue;
      }
      auto re = rv->second.find(egress);
      if (re == rv->second.end()) continue;  // The via cannot reach the egress leaf.
      NextNextHops n;
      n.next_hop_bgp_id = id_of(via);
      if (re->second->beyond().empty()) {
        n.next_next_hop_bgp_ids.push_back(id_of(egress));
      } else {
        for (const std::string& b : re->second->beyond()) {
          n.next_next_hop_bgp_ids.push_back(id_of(b));
        }
      }
      auto& ids = n.next_next_hop_bgp_ids;
      ids.erase(std::remove(ids.begin(), ids.end(), 0u), ids.end());
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      entry.by_via[via] = std::move(n);
    }
    if (entry.by_via.empty()) {
      entry.drop = true;  // No session's next hop reaches it.
    } else {
      bool needed = config_.nnhn == BgpDriverConfig::NnhnMode::kAlways;
      if (config_.nnhn == BgpDriverConfig::NnhnMode::kWhereNeeded) {
        for (const auto& [next_hop, by_egress] : reach) {
          auto re = by_egress.find(egress);
          needed |= re == by_egress.end() || !re->second->beyond().empty();
        }
      }
      if (!needed) {
        // Every session whose via reaches E gets the route, without NNHN; when that
        // is every session, the route is an ordinary one (the cheap common case).
        if (entry.by_via.size() == vias.size()) {
          entry.by_via.clear();
        } else {
          for (auto& [via, n] : entry.by_via) n = NextNextHops{};
        }
      }
    }
    plan->by_egress.emplace(egress, std::move(entry));
  }
  cached = {std::move(key), plan};
  return plan;
}

void BgpDriver::AddNnhn(const loom::v1::DeviceState& desired, const std::set<std::string>& vias,
                        const std::map<Prefix, std::string>& egress_of,
                        std::map<Prefix, OriginatedRoute>* routes) const {
  std::shared_ptr<const NnhnPlan> plan = PlanNnhn(desired, vias);
  for (auto it = routes->begin(); it != routes->end();) {
    auto e = egress_of.find(it->first);
    auto entry = e == egress_of.end() ? plan->by_egress.end() : plan->by_egress.find(e->second);
    if (entry == plan->by_egress.end()) {
      ++it;  // Nothing known about this destination: no NNHN, no filtering.
      continue;
    }
    if (entry->second.drop) {
      it = routes->erase(it);
      continue;
    }
    it->second.nnhn_by_via = entry->second.by_via;
    ++it;
  }
}

void BgpDriver::Apply(const loom::v1::DeviceState& desired, std::function<void(ApplyResult)> done) {
  boost::asio::post(io_, [this, desired, done = std::move(done)]() mutable {
    std::vector<ApplyFailure> failures;
    loom::v1::DeviceState applied;
    applied.set_device(desired.device());
    applied.set_generation(desired.generation());
    if (!Handles(desired.device())) {
      failures.push_back({"device", NotFound("no BGP session for device " + desired.device())});
      ApplyResult r;
      r.applied = applied;
      r.failures = std::move(failures);
      done(std::move(r));
      return;
    }
    std::vector<OriginatedRoute> routes = Translate(desired, &failures, &applied);
    const std::string device = desired.device();
    speaker_->SetRoutes(device, std::move(routes));
    speaker_->Flush(device, [this, desired = std::move(desired), applied = std::move(applied),
                             failures = std::move(failures), done = std::move(done)]() mutable {
      Report(desired, std::move(applied), std::move(failures), std::move(done));
    });
  });
}

void BgpDriver::Report(const loom::v1::DeviceState& desired, loom::v1::DeviceState applied,
                       std::vector<ApplyFailure> failures, std::function<void(ApplyResult)> done) {
  std::set<uint32_t> colors_up;
  bool uncolored_up = false;
  bool any_up = false;
  for (const Session* s : speaker_->SessionsOf(desired.device())) {
    if (s->state() != SessionState::kEstablished) continue;
    any_up = true;
    if (s->config().fabric_color == 0) {
      uncolored_up = true;
    } else {
      colors_up.insert(s->config().fabric_color);
    }
  }
  if (!any_up) {
    applied.clear_routes();
    applied.clear_weights();
    applied.clear_next_hop_reach();
    failures.push_back(
        {"device", Unavailable("no Established BGP session to " + desired.device())});
  } else {
    std::string missing;
    for (const loom::v1::ColorGroup& g : desired.colors()) {
      if (uncolored_up || colors_up.count(g.color())) {
        *applied.add_colors() = g;
      } else {
        missing += " " + std::to_string(g.color());
      }
    }
    if (!missing.empty()) {
      failures.push_back(
          {"colors", FailedPrecondition("no Established session with fabric color" + missing)});
    }
  }
  if (!config_.ignore_non_bgp_parts) {
    auto unsupported = [&](const char* part, bool present) {
      if (present) {
        failures.push_back({part, Status(StatusCode::kUnimplemented,
                                         std::string(part) + " is not carried by BGP")});
      }
    };
    unsupported("dlb", desired.has_dlb() && desired.dlb().mode() != loom::v1::DLB_MODE_UNSPECIFIED);
    unsupported("alb_tables", desired.alb_tables_size() > 0);
    unsupported("spray_rules", desired.spray_rules_size() > 0);
    unsupported("thresholds", desired.thresholds_size() > 0);
  }
  if (any_up) applied_[desired.device()] = applied;
  ApplyResult r;
  r.applied = std::move(applied);
  r.failures = std::move(failures);
  done(std::move(r));
}

void BgpDriver::Read(const std::string& device,
                     std::function<void(Status, loom::v1::DeviceState)> done) {
  boost::asio::post(io_, [this, device, done = std::move(done)] {
    bool any_up = false;
    for (const Session* s : speaker_->SessionsOf(device)) {
      any_up |= s->state() == SessionState::kEstablished;
    }
    if (!any_up) {
      done(Unavailable("no Established BGP session to " + device), loom::v1::DeviceState());
      return;
    }
    auto it = applied_.find(device);
    loom::v1::DeviceState state;
    state.set_device(device);
    if (it != applied_.end()) state = it->second;
    done(Status::Ok(), state);
  });
}

}  // namespace loom::southbound::bgp
