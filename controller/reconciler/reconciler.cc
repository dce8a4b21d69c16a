#include "controller/reconciler/reconciler.h"

#include <algorithm>

#include "common/log.h"
#include "southbound/wire/device_state_util.h"

namespace loom::controller {

namespace v1 = loom::v1;
using loom::southbound::ApplyResult;
using loom::southbound::ContentKey;

Reconciler::Reconciler(const Clock& clock, std::function<void(std::function<void()>)> post,
                       ReconcilerOptions options)
    : clock_(clock), post_(std::move(post)), options_(options), rng_(options.seed | 1) {}

void Reconciler::AddDriver(loom::southbound::Driver* driver) { drivers_.push_back(driver); }

void Reconciler::SetDesired(const std::map<std::string, v1::DeviceState>& desired) {
  for (const auto& [id, state] : desired) SetOne(id, state);
}

void Reconciler::SetDesired(std::map<std::string, v1::DeviceState>&& desired) {
  for (auto& [id, state] : desired) SetOne(id, std::move(state));
}

void Reconciler::SetOne(const std::string& id, v1::DeviceState state) {
  {
    Dev& d = devices_[id];
    d.sync.device = id;
    if (!d.driver) {
      for (auto* drv : drivers_) {
        if (drv->Handles(id)) {
          d.driver = drv;
          d.sync.driver = drv->NameFor(id);
          break;
        }
      }
    }
    std::string key = ContentKey(state);
    if (key == d.desired_key && d.sync.desired_generation > 0) return;
    d.desired = std::move(state);
    d.desired_key = std::move(key);
    d.desired.set_generation(++d.sync.desired_generation);
    d.sync.in_sync = d.have_applied && ContentKey(d.applied) == d.desired_key;
    if (options_.shadow && d.have_applied) {
      // The report follows the new desire at once (against the last read).
      d.sync.would_change = d.sync.in_sync ? std::vector<std::string>{}
                                           : loom::southbound::DifferingParts(d.applied, d.desired);
    }
    // A new desire is worth trying now, whatever the backoff said.
    d.sync.next_attempt_ns = 0;
  }
}

TimeNs Reconciler::Backoff(int failures) {
  TimeNs b = options_.initial_backoff_ns;
  for (int i = 1; i < failures && b < options_.max_backoff_ns; ++i) b *= 2;
  b = std::min(b, options_.max_backoff_ns);
  // Jitter: 0.75 .. 1.0 of the backoff (xorshift).
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 7;
  rng_ ^= rng_ << 17;
  double f = 0.75 + 0.25 * static_cast<double>(rng_ % 1000) / 1000.0;
  return static_cast<TimeNs>(static_cast<double>(b) * f);
}

void Reconciler::Tick() {
  TimeNs now = clock_.Now();
  for (auto& [id, d] : devices_) {
    if (d.sync.in_flight || d.checking) continue;
    if (!d.driver) {
      if (d.sync.last_error.empty()) {
        d.sync.last_error = "no southbound driver handles this device";
        Note(ReconcileNote::Kind::kNoDriver, id, d.sync.last_error);
      }
      continue;
    }
    if (options_.shadow) {
      // Read what the device runs once per desired generation (and then at
      // the drift interval) and report what Loom would change; never apply.
      d.sync.shadow = true;
      const bool stale_read = !d.shadow_read ||
                              d.shadow_read_generation != d.desired.generation() ||
                              (options_.drift_check_interval_ns > 0 &&
                               now - d.last_check_ns >= options_.drift_check_interval_ns);
      if (stale_read) StartCheck(d);
      continue;
    }
    if (!d.sync.in_sync) {
      if (now >= d.sync.next_attempt_ns) StartApply(d);
      continue;
    }
    if (options_.drift_check_interval_ns > 0 &&
        now - d.last_check_ns >= options_.drift_check_interval_ns) {
      StartCheck(d);
    }
  }
}

void Reconciler::DeviceReset(const std::string& device) {
  auto it = devices_.find(device);
  if (it == devices_.end()) return;
  it->second.have_applied = false;
  it->second.sync.in_sync = false;
  it->second.sync.next_attempt_ns = 0;
}

void Reconciler::StartApply(Dev& d) {
  d.sync.in_flight = true;
  ++d.sync.applies;
  std::weak_ptr<bool> alive = alive_;
  std::string device = d.sync.device;
  uint64_t generation = d.desired.generation();
  auto post = post_;
  d.driver->Apply(d.desired, [this, alive, device, generation, post](ApplyResult r) {
    post([this, alive, device, generation, r = std::move(r)]() mutable {
      if (alive.expired()) return;
      OnApplied(device, generation, std::move(r));
    });
  });
}

void Reconciler::StartCheck(Dev& d) {
  d.checking = true;
  d.last_check_ns = clock_.Now();
  std::weak_ptr<bool> alive = alive_;
  std::string device = d.sync.device;
  auto post = post_;
  d.driver->Read(device, [this, alive, device, post](loom::Status s, v1::DeviceState state) {
    post([this, alive, device, s = std::move(s), state = std::move(state)]() mutable {
      if (alive.expired()) return;
      OnRead(device, std::move(s), std::move(state));
    });
  });
}

void Reconciler::OnApplied(const std::string& device, uint64_t generation, ApplyResult r) {
  auto it = devices_.find(device);
  if (it == devices_.end()) return;
  Dev& d = it->second;
  d.sync.in_flight = false;
  d.applied = r.applied;
  d.have_applied = true;
  d.last_check_ns = clock_.Now();
  bool matches = ContentKey(d.applied) == d.desired_key;
  if (r.ok() && generation == d.desired.generation()) d.sync.applied_generation = generation;
  d.sync.in_sync = matches;
  if (r.ok() && matches) {
    if (d.sync.consecutive_failures > 0) {
      Note(ReconcileNote::Kind::kRecovered, device,
           "applied generation " + std::to_string(generation) + " after " +
               std::to_string(d.sync.consecutive_failures) + " failed attempt(s)");
    }
    d.sync.consecutive_failures = 0;
    d.sync.last_error.clear();
    return;
  }
  if (r.ok() && generation != d.desired.generation()) {
    return;  // a newer desire arrived meanwhile: the next Tick applies it
  }
  if (r.ok()) {
    // The driver says it applied everything, yet reports something else:
    // count it as a failure (with backoff), not as a reason to spin.
    std::string parts;
    for (const auto& p : loom::southbound::DifferingParts(d.applied, d.desired)) {
      parts += (parts.empty() ? "" : ",") + p;
    }
    r.failures.push_back({"device", loom::Status(loom::StatusCode::kInternal,
                                                 "the device reports a state that differs "
                                                 "from the desired one in: " +
                                                     parts)});
  }
  ++d.sync.failures;
  ++d.sync.consecutive_failures;
  std::string err;
  for (const auto& f : r.failures) {
    err += (err.empty() ? "" : "; ") + f.part + ": " + f.status.message();
  }
  d.sync.last_error = err;
  d.sync.next_attempt_ns = clock_.Now() + Backoff(d.sync.consecutive_failures);
  if (d.sync.consecutive_failures == 1 || d.sync.consecutive_failures % 10 == 0) {
    Note(ReconcileNote::Kind::kApplyFailed, device,
         "attempt " + std::to_string(d.sync.consecutive_failures) + " failed (" + err +
             "); retrying with backoff");
  }
}

void Reconciler::OnRead(const std::string& device, loom::Status s, v1::DeviceState state) {
  auto it = devices_.find(device);
  if (it == devices_.end()) return;
  Dev& d = it->second;
  d.checking = false;
  if (options_.shadow) {
    d.shadow_read = true;
    d.shadow_read_generation = d.desired.generation();
    if (!s.ok()) {
      // Nothing to compare with: everything desired is a would-be change.
      d.sync.last_error = "shadow: read failed (" + s.message() + "); nothing is programmed";
      state = v1::DeviceState();
      state.set_device(device);
    } else {
      d.sync.last_error.clear();
    }
    d.applied = state;
    d.have_applied = true;
    d.sync.in_sync = ContentKey(state) == d.desired_key;
    d.sync.would_change = d.sync.in_sync ? std::vector<std::string>{}
                                         : loom::southbound::DifferingParts(state, d.desired);
    return;
  }
  if (!s.ok()) {
    d.sync.last_error = "read back failed: " + s.message();
    return;
  }
  if (ContentKey(state) == d.desired_key) return;
  auto parts = loom::southbound::DifferingParts(state, d.desired);
  std::string what;
  for (const auto& p : parts) what += (what.empty() ? "" : ",") + p;
  d.applied = std::move(state);
  d.sync.in_sync = false;
  d.sync.next_attempt_ns = 0;
  ++d.sync.drift_repairs;
  Note(ReconcileNote::Kind::kDriftRepaired, device,
       "device drifted from the desired state (" + what + "); re-applying");
}

void Reconciler::Note(ReconcileNote::Kind kind, const std::string& device,
                      const std::string& detail) {
  LOG_INFO("reconciler").With("device", device).With("detail", detail);
  if (on_note_) on_note_({kind, device, detail});
}

std::vector<DeviceSync> Reconciler::Status() const {
  std::vector<DeviceSync> out;
  for (const auto& [id, d] : devices_) out.push_back(d.sync);
  return out;
}

const v1::DeviceState* Reconciler::Applied(const std::string& device) const {
  auto it = devices_.find(device);
  return it == devices_.end() || !it->second.have_applied ? nullptr : &it->second.applied;
}

const v1::DeviceState* Reconciler::Desired(const std::string& device) const {
  auto it = devices_.find(device);
  return it == devices_.end() ? nullptr : &it->second.desired;
}

size_t Reconciler::InSyncCount() const {
  return static_cast<size_t>(std::count_if(devices_.begin(), devices_.end(),
                                           [](const auto& p) { return p.second.sync.in_sync; }));
}

}  // namespace loom::controller
