#include "controller/reconciler/change_gate.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "southbound/wire/device_state_util.h"

namespace loom::controller {

namespace v1 = loom::v1;
using loom::southbound::ContentKey;

namespace {

std::string Fmt(double v, int digits = 3) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Seconds(TimeNs ns) { return Fmt(static_cast<double>(ns) / kNsPerSec, 1) + " s"; }

std::string Join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

v1::DeviceState Empty(const std::string& device) {
  v1::DeviceState s;
  s.set_device(device);
  return s;
}

std::string RouteContent(const v1::ColoredRoute& r) {
  return loom::southbound::DeterministicBytes(r);
}

std::string RouteKey(const v1::ColoredRoute& r) {
  return r.destination() + "|" + std::to_string(r.traffic_class()) + "|" +
         std::to_string(r.qp_mask()) + "|" + std::to_string(r.qp_value());
}

constexpr const char* kFabricWideParts[] = {"dlb", "alb_tables", "thresholds", "pfc_watchdog"};

// Content of one fabric-wide part of `s`.
std::string PartKey(const v1::DeviceState& s, const std::string& part) {
  v1::DeviceState x;
  if (part == "dlb" && s.has_dlb()) *x.mutable_dlb() = s.dlb();
  if (part == "alb_tables") *x.mutable_alb_tables() = s.alb_tables();
  if (part == "thresholds") *x.mutable_thresholds() = s.thresholds();
  if (part == "pfc_watchdog" && s.has_pfc_watchdog()) *x.mutable_pfc_watchdog() = s.pfc_watchdog();
  return ContentKey(x);
}

template <typename M>
std::string Short(const M& m) {
  std::string s = m.ShortDebugString();
  return s.empty() ? "{}" : "{" + s + "}";
}

}  // namespace

v1::DeviceState FabricWidePart(const v1::DeviceState& s) {
  v1::DeviceState g;
  g.set_device(s.device());
  if (s.has_dlb()) *g.mutable_dlb() = s.dlb();
  *g.mutable_alb_tables() = s.alb_tables();
  *g.mutable_thresholds() = s.thresholds();
  if (s.has_pfc_watchdog()) *g.mutable_pfc_watchdog() = s.pfc_watchdog();
  return g;
}

void StripFabricWide(v1::DeviceState* s) {
  s->clear_dlb();
  s->clear_alb_tables();
  s->clear_thresholds();
  s->clear_pfc_watchdog();
}

std::vector<std::string> DiffFabricWide(const v1::DeviceState& before,
                                        const v1::DeviceState& after) {
  std::vector<std::string> out;
  auto whole = [&](const char* name, bool had, bool has, const std::string& a,
                   const std::string& b) {
    if (had == has && a == b) return;
    if (!had) {
      out.push_back(std::string(name) + ": set " + b);
    } else if (!has) {
      out.push_back(std::string(name) + ": no longer set by Loom (was " + a + ")");
    } else {
      out.push_back(std::string(name) + ": " + a + " -> " + b);
    }
  };
  whole("dlb", before.has_dlb(), after.has_dlb(), Short(before.dlb()), Short(after.dlb()));
  whole("pfc_watchdog", before.has_pfc_watchdog(), after.has_pfc_watchdog(),
        Short(before.pfc_watchdog()), Short(after.pfc_watchdog()));
  auto th_key = [](const v1::QueueThresholds& t) {
    return "thresholds[" + (t.interface().empty() ? std::string("*") : t.interface()) +
           " priority " + std::to_string(t.priority()) + "]";
  };
  std::map<std::string, std::string> th_before, th_after;
  for (const auto& t : before.thresholds()) th_before[th_key(t)] = Short(t);
  for (const auto& t : after.thresholds()) th_after[th_key(t)] = Short(t);
  for (const auto& [k, v] : th_after) {
    auto it = th_before.find(k);
    whole(k.c_str(), it != th_before.end(), true, it == th_before.end() ? "" : it->second, v);
  }
  for (const auto& [k, v] : th_before) {
    if (!th_after.count(k)) whole(k.c_str(), true, false, v, "");
  }
  std::map<std::string, const v1::AlbTable*> alb_before, alb_after;
  for (const auto& t : before.alb_tables()) alb_before[t.group()] = &t;
  for (const auto& t : after.alb_tables()) alb_after[t.group()] = &t;
  for (const auto& [g, t] : alb_after) {
    auto it = alb_before.find(g);
    if (it == alb_before.end()) {
      out.push_back("alb[" + g + "]: set " + std::to_string(t->buckets_size()) + " bucket(s)");
      continue;
    }
    const auto& a = it->second->buckets();
    const auto& b = t->buckets();
    if (a.size() != b.size()) {
      out.push_back("alb[" + g + "]: " + std::to_string(a.size()) + " -> " +
                    std::to_string(b.size()) + " bucket(s)");
      continue;
    }
    int moved = 0;
    for (int i = 0; i < a.size(); ++i) moved += a[i] != b[i];
    if (moved > 0) {
      out.push_back("alb[" + g + "]: " + std::to_string(moved) + " of " + std::to_string(b.size()) +
                    " bucket(s) move");
    }
  }
  for (const auto& [g, t] : alb_before) {
    if (!alb_after.count(g)) out.push_back("alb[" + g + "]: no longer set by Loom");
  }
  return out;
}

ChangeGate::ChangeGate(const Clock& clock, ChangeSafetyOptions options, Sampler sampler,
                       InSync in_sync)
    : clock_(clock),
      options_(std::move(options)),
      sampler_(std::move(sampler)),
      in_sync_(std::move(in_sync)) {
  options_.canary_count = std::max<uint32_t>(1, options_.canary_count);
  device_tokens_ = options_.max_devices_per_minute;
  device_tokens_at_ = clock_.Now();
}

void ChangeGate::RestoreAccepted(std::map<std::string, v1::DeviceState> accepted) {
  accepted_ = std::move(accepted);
}

void ChangeGate::RestorePlanState(uint64_t revision, const v1::QuarantinedChange* quarantine) {
  revision_ = revision;
  quarantine_.reset();
  if (!quarantine || quarantine->revision() == 0) return;
  Quarantine q;
  q.revision = quarantine->revision();
  q.reason = quarantine->reason();
  q.stored = *quarantine;
  for (const auto& d : quarantine->devices()) {
    for (const auto& part : d.parts()) q.parts[{d.device(), part}] = PartKey(d.content(), part);
  }
  quarantine_ = std::move(q);
}

bool ChangeGate::TakePlanState(uint64_t* revision, v1::QuarantinedChange* quarantine) {
  if (!plan_state_dirty_) return false;
  plan_state_dirty_ = false;
  *revision = revision_;
  quarantine->Clear();
  if (quarantine_) *quarantine = quarantine_->stored;
  return true;
}

void ChangeGate::RecordGiven(const std::map<std::string, v1::DeviceState>& computed) {
  for (const auto& [dev, st] : computed) {
    v1::DeviceState fw = FabricWidePart(st);
    const bool empty = ContentKey(fw) == ContentKey(Empty(dev));
    auto it = accepted_.find(dev);
    if (it == accepted_.end()) {
      if (empty) continue;
    } else if (ContentKey(it->second) == ContentKey(fw)) {
      continue;
    }
    if (empty) {
      accepted_.erase(dev);
    } else {
      accepted_[dev] = std::move(fw);
    }
    accepted_changes_.insert(dev);
  }
}

bool ChangeGate::Blocked() const {
  if (!quarantine_) return false;
  for (const auto& [key, content] : quarantine_->parts) {
    const auto& [dev, part] = key;
    if (std::find(changed_.begin(), changed_.end(), dev) == changed_.end()) continue;
    auto c = candidate_.find(dev);
    if (c != candidate_.end() && PartKey(c->second, part) == content) return true;
  }
  return false;
}

std::vector<std::string> ChangeGate::TakeAcceptedChanges() {
  std::vector<std::string> out(accepted_changes_.begin(), accepted_changes_.end());
  accepted_changes_.clear();
  return out;
}

void ChangeGate::Note(bool warning, const std::string& cause, const std::string& action,
                      const std::string& result, uint64_t revision) {
  last_detail_ = cause + (action.empty() ? "" : ": " + action);
  if (!on_note_) return;
  GateNote n;
  n.kind = GateNote::Kind::kChange;
  n.warning = warning;
  n.subject = "change/" + std::to_string(revision);
  n.cause = cause;
  n.action = action;
  n.result = result;
  on_note_(n);
}

bool ChangeGate::Update(const std::map<std::string, v1::DeviceState>& computed) {
  if (!options_.enabled) RecordGiven(computed);
  if (pass_through()) {
    released_ = computed;
    return true;
  }
  computed_ = computed;
  if (options_.enabled) {
    candidate_.clear();
    for (const auto& [dev, st] : computed_) candidate_[dev] = FabricWidePart(st);
    Replan();
    MaybeStart();
    Advance();
  }
  return Compose();
}

void ChangeGate::Advance() {
  const bool had_rollout = rollout_.has_value();
  AdvanceRollout();
  if (had_rollout && !rollout_) {
    // The rollout ended: the next change may start.
    Replan();
    MaybeStart();
  }
}

bool ChangeGate::Tick() {
  if (pass_through()) return false;
  bool limited = false;
  for (const auto& [dev, b] : route_budget_) limited |= b.limited;
  Advance();
  if (!dirty_ && !limited) return false;
  return Compose();
}

void ChangeGate::Replan() {
  std::vector<std::string> changed;
  std::string key;
  for (const auto& [dev, cand] : candidate_) {
    auto it = accepted_.find(dev);
    std::string c = ContentKey(cand);
    std::string a = ContentKey(it == accepted_.end() ? Empty(dev) : it->second);
    if (a == c) continue;
    changed.push_back(dev);
    key += dev;
    key.push_back('\0');
    key += c;
    key.push_back('\1');
  }
  if (key != plan_key_) {
    plan_key_ = std::move(key);
    if (!changed.empty()) {
      ++revision_;
      plan_state_dirty_ = true;
    }
    approved_ = false;
    announced_ = false;
  }
  changed_ = std::move(changed);
  if (quarantine_ && !Blocked()) {
    uint64_t rev = quarantine_->revision;
    quarantine_.reset();
    plan_state_dirty_ = true;
    Note(false,
         "the inputs of the rolled-back change (revision " + std::to_string(rev) + ") changed",
         "quarantine lifted", changed_.empty() ? "no change pending" : "a new plan follows", rev);
  }
}

std::vector<std::string> ChangeGate::CanaryOf(const std::vector<std::string>& changed) const {
  std::vector<std::string> out;
  for (const auto& c : options_.canary) {
    if (std::find(changed.begin(), changed.end(), c) != changed.end()) out.push_back(c);
  }
  if (out.empty()) {
    for (size_t i = 0; i < changed.size() && i < options_.canary_count; ++i) {
      out.push_back(changed[i]);
    }
  }
  return out;
}

void ChangeGate::MaybeStart() {
  if (rollout_ || changed_.empty()) return;
  if (Blocked()) return;
  if (options_.approve && !approved_) {
    if (!announced_) {
      announced_ = true;
      Note(false,
           "fabric-wide settings differ on " + std::to_string(changed_.size()) +
               " device(s) (plan revision " + std::to_string(revision_) + ")",
           "waiting for `loomctl apply " + std::to_string(revision_) + "`", Join(changed_),
           revision_);
    }
    return;
  }
  StartRollout();
}

void ChangeGate::StartRollout() {
  Rollout r;
  r.revision = revision_;
  for (const auto& dev : changed_) {
    r.target[dev] = candidate_[dev];
    auto it = accepted_.find(dev);
    if (it != accepted_.end()) {
      r.previous[dev] = it->second;
      r.had_previous.insert(dev);
    } else {
      r.previous[dev] = Empty(dev);
    }
  }
  r.canary = CanaryOf(changed_);
  for (const auto& dev : changed_) {
    if (std::find(r.canary.begin(), r.canary.end(), dev) == r.canary.end()) r.rest.push_back(dev);
  }
  r.canary_given_ns = clock_.Now();
  for (auto& s : sampler_(r.canary)) r.baseline[s.link] = s;
  rollout_ = std::move(r);
  for (const auto& c : rollout_->canary) {
    TakeDeviceToken();  // the canary goes now; it still counts against the rate
    GiveDevice(c);
  }
  std::vector<std::string> diff = DiffFabricWide(rollout_->previous[rollout_->canary.front()],
                                                 rollout_->target[rollout_->canary.front()]);
  Note(false,
       "fabric-wide settings change on " + std::to_string(changed_.size()) + " device(s)" +
           (options_.approve ? " (approved)" : ""),
       "canary " + Join(rollout_->canary) + " gets it first; " +
           std::to_string(rollout_->rest.size()) + " device(s) wait for its telemetry check",
       rollout_->canary.front() + ": " + Join(diff, "; "), rollout_->revision);
}

void ChangeGate::GiveDevice(const std::string& device) {
  rollout_->given.insert(device);
  dirty_ = true;
}

bool ChangeGate::TakeDeviceToken() {
  if (options_.max_devices_per_minute == 0) return true;
  double cap = options_.max_devices_per_minute;
  TimeNs now = clock_.Now();
  device_tokens_ = std::min(cap, device_tokens_ + static_cast<double>(now - device_tokens_at_) *
                                                      cap / (60.0 * kNsPerSec));
  device_tokens_at_ = now;
  if (device_tokens_ >= 1) {
    device_tokens_ -= 1;
    return true;
  }
  return false;
}

void ChangeGate::AdvanceRollout() {
  if (!rollout_) return;
  Rollout& r = *rollout_;
  TimeNs now = clock_.Now();
  if (!r.canary_passed) {
    if (r.observe_from_ns < 0) {
      // The canary's new state must have been handed on before its sync
      // status says anything about it.
      if (!r.released) return;
      std::string err;
      bool all = true;
      for (const auto& c : r.canary) {
        std::string e;
        if (!in_sync_(c, &e)) {
          all = false;
          if (!e.empty()) err = c + ": " + e;
        }
      }
      if (!all) {
        if (now - r.canary_given_ns > options_.canary_apply_timeout_ns) {
          Fail("the canary did not run the change within " +
               Seconds(options_.canary_apply_timeout_ns) + (err.empty() ? "" : " (" + err + ")"));
        }
        return;
      }
      r.observe_from_ns = now;
      r.last_sample_ns = now;
      Note(false, "the canary runs the change",
           "watching " + std::to_string(r.baseline.size()) + " link direction(s) of " +
               Join(r.canary) + " for " + Seconds(options_.canary_wait_ns),
           "", r.revision);
    }
    for (const auto& s : sampler_(r.canary)) {
      auto b = r.baseline.find(s.link);
      if (s.down && !s.stale && (b == r.baseline.end() || !b->second.down)) {
        Fail(s.link + " went down on the canary");
        return;
      }
      if (s.stale) continue;
      // Time-weighted: each sample stands for the time since the last tick,
      // so the result does not depend on how often the gate is ticked.
      double w = static_cast<double>(now - r.last_sample_ns);
      auto& a = r.acc[s.link];
      a.util += s.utilization * w;
      a.pfc += s.pfc_pause * w;
      a.drops += s.drops_pps * w;
      a.w += w;
      ++a.n;
    }
    r.last_sample_ns = now;
    if (now - r.observe_from_ns < options_.canary_wait_ns) return;
    std::vector<std::string> bad;
    int checked = 0;
    for (const auto& [link, a] : r.acc) {
      if (a.w <= 0) continue;
      ++checked;
      LinkHealthSample base;
      if (auto it = r.baseline.find(link); it != r.baseline.end() && !it->second.stale) {
        base = it->second;
      }
      double util = a.util / a.w, pfc = a.pfc / a.w, drops = a.drops / a.w;
      if (pfc - base.pfc_pause > options_.max_pfc_pause_increase) {
        bad.push_back(link + ": PFC pause fraction " + Fmt(base.pfc_pause) + " -> " + Fmt(pfc));
      }
      if (drops - base.drops_pps > options_.max_drop_pps_increase) {
        bad.push_back(link + ": drops " + Fmt(base.drops_pps, 1) + " -> " + Fmt(drops, 1) +
                      " pkt/s");
      }
      if (options_.max_utilization_drop < 1 && base.utilization >= 0.1 &&
          util < base.utilization * (1 - options_.max_utilization_drop)) {
        bad.push_back(link + ": utilization " + Fmt(base.utilization) + " -> " + Fmt(util));
      }
    }
    if (checked == 0) {
      Fail("no fresh telemetry from the canary's links: the change cannot be checked");
      return;
    }
    if (!bad.empty()) {
      Fail(Join(bad, "; "));
      return;
    }
    r.canary_passed = true;
    Note(false,
         "the canary passed its telemetry check (" + std::to_string(checked) +
             " link direction(s), " + Seconds(options_.canary_wait_ns) + ")",
         "rolling out to the remaining " + std::to_string(r.rest.size()) + " device(s)" +
             (options_.max_devices_per_minute > 0
                  ? " at most " + std::to_string(options_.max_devices_per_minute) + " per minute"
                  : std::string()),
         "", r.revision);
  }
  size_t before = r.rest.size();
  while (!r.rest.empty() && TakeDeviceToken()) {
    GiveDevice(r.rest.front());
    r.rest.erase(r.rest.begin());
  }
  if (r.rest.empty()) {
    Finish();
  } else if (r.rest.size() != before) {
    last_detail_ = "rolling out: " + std::to_string(r.given.size()) + " of " +
                   std::to_string(r.target.size()) + " device(s) given the change";
  }
}

void ChangeGate::Fail(const std::string& reason) {
  Rollout r = std::move(*rollout_);
  rollout_.reset();
  Quarantine q;
  q.revision = r.revision;
  q.reason = reason;
  q.stored.set_revision(r.revision);
  q.stored.set_reason(reason);
  for (const auto& [dev, target] : r.target) {
    v1::QuarantinedChange::Device* d = nullptr;
    for (const char* part : kFabricWideParts) {
      const std::string content = PartKey(target, part);
      if (content == PartKey(r.previous.at(dev), part)) continue;
      q.parts[{dev, part}] = content;
      if (!d) {
        d = q.stored.add_devices();
        d->set_device(dev);
        *d->mutable_content() = target;
      }
      d->add_parts(part);
    }
  }
  quarantine_ = std::move(q);
  plan_state_dirty_ = true;
  dirty_ = true;
  std::vector<std::string> fresh;
  for (const auto& c : r.canary) {
    if (!r.had_previous.count(c)) fresh.push_back(c);
  }
  Note(true, "the canary failed its check: " + reason,
       "rolled back on " + Join(r.canary) + "; revision " + std::to_string(r.revision) +
           " is quarantined until its inputs change or `loomctl plan clear " +
           std::to_string(r.revision) + "`",
       fresh.empty() ? "the canary is given its previous settings again"
                     : Join(fresh) +
                           " had no settings from Loom before: Loom withdraws its own (platforms "
                           "that keep the last value need a manual check)",
       r.revision);
}

void ChangeGate::Finish() {
  Rollout r = std::move(*rollout_);
  rollout_.reset();
  dirty_ = true;
  for (auto& [dev, st] : r.target) {
    if (ContentKey(st) == ContentKey(Empty(dev))) {
      accepted_.erase(dev);
    } else {
      accepted_[dev] = std::move(st);
    }
    accepted_changes_.insert(dev);
  }
  Note(false, "fabric-wide change rolled out",
       std::to_string(r.given.size()) + " device(s) were given revision " +
           std::to_string(r.revision),
       "`loomctl device DEVICE` shows whether each one runs it", r.revision);
}

void ChangeGate::LimitRoutes(const std::string& device, v1::DeviceState* out) {
  std::map<std::string, v1::ColoredRoute> want;
  for (const auto& r : out->routes()) want[RouteKey(r)] = r;
  auto given_it = routes_given_.find(device);
  if (given_it == routes_given_.end()) {
    // First release: programming a device from scratch is not churn.
    routes_given_[device] = std::move(want);
    route_budget_[device] =
        RouteBudget{static_cast<double>(options_.route_churn_per_minute), clock_.Now(), false};
    return;
  }
  auto& given = given_it->second;
  std::vector<std::string> diff;
  auto g = given.begin();
  auto w = want.begin();
  while (g != given.end() || w != want.end()) {
    if (w == want.end() || (g != given.end() && g->first < w->first)) {
      diff.push_back((g++)->first);
    } else if (g == given.end() || w->first < g->first) {
      diff.push_back((w++)->first);
    } else {
      if (RouteContent(g->second) != RouteContent(w->second)) diff.push_back(g->first);
      ++g;
      ++w;
    }
  }
  // Make before break: additions and changes first, withdrawals last (a
  // budget cut short never leaves a destination without its route).
  std::stable_partition(diff.begin(), diff.end(),
                        [&want](const std::string& k) { return want.count(k) > 0; });
  RouteBudget& b = route_budget_[device];
  double cap = options_.route_churn_per_minute;
  TimeNs now = clock_.Now();
  b.tokens = std::min(cap, b.tokens + static_cast<double>(now - b.at) * cap / (60.0 * kNsPerSec));
  b.at = now;
  size_t n = diff.size();
  size_t allowed = n <= b.tokens ? n : static_cast<size_t>(b.tokens);
  for (size_t i = 0; i < allowed; ++i) {
    auto it = want.find(diff[i]);
    if (it == want.end()) {
      given.erase(diff[i]);
    } else {
      given[diff[i]] = it->second;
    }
  }
  b.tokens -= static_cast<double>(allowed);
  if (allowed < n && !b.limited && on_note_) {
    GateNote note;
    note.kind = GateNote::Kind::kRouteChurn;
    note.warning = true;
    note.subject = device;
    note.cause = std::to_string(n) + " route change(s) exceed the churn budget of " +
                 std::to_string(options_.route_churn_per_minute) + " per minute";
    note.action = std::to_string(allowed) + " applied now, the rest as the budget refills";
    on_note_(note);
  }
  b.limited = allowed < n;
  out->clear_routes();
  for (const auto& [k, r] : given) *out->add_routes() = r;
}

bool ChangeGate::Compose() {
  dirty_ = false;
  if (rollout_) rollout_->released = true;
  bool changed = false;
  for (const auto& [dev, st] : computed_) {
    v1::DeviceState out = st;
    if (options_.enabled) {
      StripFabricWide(&out);
      const v1::DeviceState* fw = nullptr;
      if (rollout_ && rollout_->given.count(dev)) {
        fw = &rollout_->target[dev];
      } else if (auto it = accepted_.find(dev); it != accepted_.end()) {
        fw = &it->second;
      }
      if (fw) {
        if (fw->has_dlb()) *out.mutable_dlb() = fw->dlb();
        *out.mutable_alb_tables() = fw->alb_tables();
        *out.mutable_thresholds() = fw->thresholds();
        if (fw->has_pfc_watchdog()) *out.mutable_pfc_watchdog() = fw->pfc_watchdog();
      }
    }
    if (options_.route_churn_per_minute > 0) LimitRoutes(dev, &out);
    std::string key = ContentKey(out);
    auto& old = released_keys_[dev];
    if (old != key) {
      old = std::move(key);
      changed = true;
    }
    released_[dev] = std::move(out);
  }
  for (auto it = released_.begin(); it != released_.end();) {
    if (computed_.count(it->first)) {
      ++it;
    } else {
      released_keys_.erase(it->first);
      it = released_.erase(it);
      changed = true;
    }
  }
  return changed;
}

v1::ChangeState ChangeGate::State() const {
  if (!options_.enabled) return v1::CHANGE_STATE_DISABLED;
  if (rollout_) {
    return rollout_->canary_passed ? v1::CHANGE_STATE_ROLLING_OUT : v1::CHANGE_STATE_CANARY;
  }
  if (changed_.empty()) return v1::CHANGE_STATE_IN_SYNC;
  if (Blocked()) return v1::CHANGE_STATE_QUARANTINED;
  return options_.approve ? v1::CHANGE_STATE_AWAITING_APPROVAL : v1::CHANGE_STATE_CANARY;
}

v1::ChangePlan ChangeGate::Plan() const {
  v1::ChangePlan p;
  p.set_revision(revision_);
  p.set_mode(mode_name_);
  if (!options_.enabled) {
    p.set_state(v1::CHANGE_STATE_DISABLED);
    p.set_detail(mode_name_ == "shadow"
                     ? "shadow mode: nothing is programmed"
                     : "change safety is off: changes are programmed as computed");
    return p;
  }
  if (quarantine_) {
    p.set_quarantined_revision(quarantine_->revision);
  }
  auto add = [&](const std::string& dev, const v1::DeviceState& before,
                 const v1::DeviceState& after, bool canary, const std::string& state) {
    auto* d = p.add_devices();
    d->set_device(dev);
    for (auto& line : DiffFabricWide(before, after)) d->add_changes(std::move(line));
    d->set_canary(canary);
    d->set_state(state);
  };
  if (rollout_) {
    const Rollout& r = *rollout_;
    p.set_state(r.canary_passed ? v1::CHANGE_STATE_ROLLING_OUT : v1::CHANGE_STATE_CANARY);
    p.set_rollout_revision(r.revision);
    for (const auto& [dev, target] : r.target) {
      bool canary = std::find(r.canary.begin(), r.canary.end(), dev) != r.canary.end();
      std::string state = "pending";
      if (r.given.count(dev)) {
        std::string err;
        state = in_sync_(dev, &err) ? "applied" : "applying";
      }
      add(dev, r.previous.at(dev), target, canary, state);
    }
  } else {
    bool quarantined = Blocked();
    p.set_state(State());
    std::vector<std::string> canary = CanaryOf(changed_);
    for (const auto& dev : changed_) {
      auto it = accepted_.find(dev);
      bool is_canary = std::find(canary.begin(), canary.end(), dev) != canary.end();
      add(dev, it == accepted_.end() ? Empty(dev) : it->second, candidate_.at(dev), is_canary,
          !quarantined ? "pending"
          : is_canary  ? "rolled back"
                       : "not given");
    }
  }
  p.set_detail(quarantine_ ? "revision " + std::to_string(quarantine_->revision) +
                                 " was rolled back: " + quarantine_->reason
                           : last_detail_);
  return p;
}

Status ChangeGate::Apply(uint64_t revision) {
  if (!options_.enabled || !options_.approve) {
    return FailedPrecondition("change_mode is \"" + mode_name_ +
                              "\": fabric-wide changes do not wait for approval");
  }
  if (rollout_ && rollout_->revision == revision) return Status::Ok();  // a retried apply
  if (changed_.empty()) {
    return FailedPrecondition("nothing to apply: every device was given the accepted settings");
  }
  if (revision != revision_) {
    return FailedPrecondition("stale plan: it was built on revision " + std::to_string(revision) +
                              " and the desired state is now at revision " +
                              std::to_string(revision_) + "; review `loomctl plan` again");
  }
  if (rollout_) {
    return FailedPrecondition("revision " + std::to_string(rollout_->revision) +
                              " is rolling out; apply after it ends");
  }
  if (Blocked()) {
    return FailedPrecondition("revision " + std::to_string(revision) +
                              " was rolled back and is quarantined (" + quarantine_->reason +
                              "); `loomctl plan clear " + std::to_string(revision) + "` first");
  }
  approved_ = true;
  MaybeStart();
  Compose();
  return Status::Ok();
}

Status ChangeGate::ClearQuarantine(uint64_t revision) {
  if (!quarantine_) return FailedPrecondition("no change is quarantined");
  if (quarantine_->revision != revision) {
    return FailedPrecondition("revision " + std::to_string(quarantine_->revision) +
                              " is quarantined, not " + std::to_string(revision));
  }
  quarantine_.reset();
  plan_state_dirty_ = true;
  Note(false, "an operator cleared the quarantine of revision " + std::to_string(revision),
       options_.approve ? "the plan waits for `loomctl apply` again" : "trying the change again",
       "", revision);
  approved_ = false;
  announced_ = true;
  MaybeStart();
  Compose();
  return Status::Ok();
}

}  // namespace loom::controller
