// Reconciler: drives every device to its desired state through southbound
// drivers and records what each device really runs.
//
// Role: keeps, per device, the desired DeviceState (with a generation that
// grows whenever its content changes) and the applied state the driver
// reported. Triggered by SetDesired() (new assignments) and Tick() (the
// controller's periodic timer): a device is applied when its desired content
// differs from what was applied, retried with exponential backoff (and
// jitter) after a failure, re-read every `drift_check_interval` and repaired
// when the device drifted, and given its full desired state again when it
// comes back (DeviceReset). Applies are idempotent per device: the driver
// gets the full desired state, never a diff.
// Thread: the controller strand. Driver completions may arrive on any
// thread; they are posted back to the strand through `post`.
#ifndef LOOM_CONTROLLER_RECONCILER_RECONCILER_H_
#define LOOM_CONTROLLER_RECONCILER_RECONCILER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "loom/v1/device_state.pb.h"
#include "southbound/wire/driver.h"

namespace loom::controller {

struct ReconcilerOptions {
  TimeNs initial_backoff_ns = 100 * kNsPerMs;
  TimeNs max_backoff_ns = 30 * kNsPerSec;
  // 0 disables periodic drift checks.
  TimeNs drift_check_interval_ns = 30 * kNsPerSec;
  uint64_t seed = 1;  // jitter
  // Shadow mode: compute and report, program nothing. Devices are read (what
  // they run now, for the report) but never applied to; a difference is
  // "would change", not a failure, and fires no alarm.
  bool shadow = false;
};

// What the reconciler knows about one device.
struct DeviceSync {
  std::string device;
  std::string driver;  // driver name, empty when no driver handles it
  uint64_t desired_generation = 0;
  uint64_t applied_generation = 0;  // generation of the last fully applied state
  bool in_sync = false;             // applied content == desired content
  bool in_flight = false;
  int consecutive_failures = 0;
  TimeNs next_attempt_ns = 0;
  std::string last_error;
  uint64_t applies = 0, failures = 0, drift_repairs = 0;
  // Shadow mode: the parts Loom would change on the device ("routes", "dlb").
  bool shadow = false;
  std::vector<std::string> would_change;
};

// Notable outcomes, for the controller's event log.
struct ReconcileNote {
  enum class Kind { kApplyFailed, kRecovered, kDriftRepaired, kNoDriver };
  Kind kind;
  std::string device;
  std::string detail;
};

class Reconciler {
 public:
  // `post` runs a closure on the controller strand.
  Reconciler(const Clock& clock, std::function<void(std::function<void()>)> post,
             ReconcilerOptions options = {});

  // Drivers are tried in order; the first that Handles() a device owns it.
  void AddDriver(loom::southbound::Driver* driver);
  // Replaces the desired state of every device (devices absent from `desired`
  // are left as they are). Devices whose content changed are applied at the
  // next Tick.
  void SetDesired(const std::map<std::string, loom::v1::DeviceState>& desired);
  // The same, taking the states (no copy).
  void SetDesired(std::map<std::string, loom::v1::DeviceState>&& desired);
  // Starts what is due: changed devices, retries whose backoff expired,
  // drift checks.
  void Tick();
  // The device restarted or reconnected: its applied state is unknown, so
  // it gets its full desired state at the next Tick.
  void DeviceReset(const std::string& device);
  // Called for notable outcomes (on the strand).
  void SetNoteCallback(std::function<void(const ReconcileNote&)> cb) { on_note_ = std::move(cb); }

  std::vector<DeviceSync> Status() const;
  // One device's sync status (nullptr when the reconciler never saw it).
  const DeviceSync* Sync(const std::string& device) const {
    auto it = devices_.find(device);
    return it == devices_.end() ? nullptr : &it->second.sync;
  }
  const loom::v1::DeviceState* Applied(const std::string& device) const;
  // The desired state last handed in by SetDesired (nullptr when unknown).
  const loom::v1::DeviceState* Desired(const std::string& device) const;
  // Devices whose applied content equals the desired content.
  size_t InSyncCount() const;
  size_t DeviceCount() const { return devices_.size(); }

 private:
  struct Dev {
    DeviceSync sync;
    loom::v1::DeviceState desired;
    std::string desired_key;
    loom::v1::DeviceState applied;
    bool have_applied = false;
    loom::southbound::Driver* driver = nullptr;
    TimeNs last_check_ns = 0;
    bool checking = false;
    uint64_t shadow_read_generation = 0;  // desired generation last compared (shadow)
    bool shadow_read = false;
  };
  void SetOne(const std::string& id, loom::v1::DeviceState state);
  void StartApply(Dev& d);
  void StartCheck(Dev& d);
  void OnApplied(const std::string& device, uint64_t generation,
                 loom::southbound::ApplyResult result);
  void OnRead(const std::string& device, loom::Status status, loom::v1::DeviceState state);
  TimeNs Backoff(int failures);
  void Note(ReconcileNote::Kind kind, const std::string& device, const std::string& detail);

  const Clock& clock_;
  std::function<void(std::function<void()>)> post_;
  ReconcilerOptions options_;
  std::vector<loom::southbound::Driver*> drivers_;
  std::map<std::string, Dev> devices_;
  std::function<void(const ReconcileNote&)> on_note_;
  uint64_t rng_;
  // Guards callbacks that arrive after destruction.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace loom::controller

#endif  // LOOM_CONTROLLER_RECONCILER_RECONCILER_H_
