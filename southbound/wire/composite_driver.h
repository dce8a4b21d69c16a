// A device programmed by two drivers, each owning some parts of its
// DeviceState: e.g. BGP carries colors, colored routes, link-bandwidth
// weights and NNHN (next_hop_reach) while gNMI Set carries DLB, ALB,
// spraying and thresholds.
//
// Role: lets the reconciler keep one driver per device. Apply() gives each
// driver the full desired state (each applies only its parts), waits for
// both and merges: the applied state takes each part from the driver that
// owns it, failures are the union. Read() merges the same way. Threading:
// callbacks may come from the two drivers' threads; the merge is guarded and
// `done` runs on whichever thread completes last.
#ifndef LOOM_SOUTHBOUND_WIRE_COMPOSITE_DRIVER_H_
#define LOOM_SOUTHBOUND_WIRE_COMPOSITE_DRIVER_H_

#include <string>

#include "southbound/wire/driver.h"

namespace loom::southbound {

class CompositeDriver final : public Driver {
 public:
  // `routing` owns colors, routes, weights and next_hop_reach; `settings` owns
  // the rest. With `split_routes_to_settings`, routes split by destination QP
  // (qp_mask/qp_value != 0, which BGP-DPF cannot carry) go to `settings`
  // instead, as its only routes (a gNMI driver that owns the routes part),
  // on devices both drivers handle.
  // Either may be null. Neither is owned.
  CompositeDriver(Driver* routing, Driver* settings, bool split_routes_to_settings = false)
      : routing_(routing), settings_(settings), split_routes_(split_routes_to_settings) {}

  std::string Name() const override;
  std::string NameFor(const std::string& device) const override;
  bool Handles(const std::string& device) const override;
  void Apply(const loom::v1::DeviceState& desired, std::function<void(ApplyResult)> done) override;
  void Read(const std::string& device,
            std::function<void(Status, loom::v1::DeviceState)> done) override;

 private:
  bool RoutingHandles(const std::string& d) const { return routing_ && routing_->Handles(d); }
  bool SettingsHandles(const std::string& d) const { return settings_ && settings_->Handles(d); }

  Driver* routing_;
  Driver* settings_;
  bool split_routes_;
};

// SettingsOnlyDriver: role — hands `inner` only the settings parts (DLB,
// ALB, spraying, thresholds, PFC watchdog, disabled interfaces) of each
// desired state, so that a platform Set adapter beside BGP never programs
// routes BGP already carries. Trigger/thread: as `inner` (not owned).
class SettingsOnlyDriver final : public Driver {
 public:
  explicit SettingsOnlyDriver(Driver* inner) : inner_(inner) {}
  std::string Name() const override { return inner_->Name(); }
  std::string NameFor(const std::string& d) const override { return inner_->NameFor(d); }
  bool Handles(const std::string& device) const override { return inner_->Handles(device); }
  void Apply(const loom::v1::DeviceState& desired, std::function<void(ApplyResult)> done) override;
  void Read(const std::string& device,
            std::function<void(Status, loom::v1::DeviceState)> done) override {
    inner_->Read(device, std::move(done));
  }

 private:
  Driver* inner_;
};

// Keeps the routes of `state` for which IsSplitRoute(route) == `split`.
void KeepRoutes(loom::v1::DeviceState* state, bool split);

// Copies colors, routes, weights and next_hop_reach from `from` into `into`.
void CopyRoutingParts(const loom::v1::DeviceState& from, loom::v1::DeviceState* into);
// Copies dlb, alb_tables, spray_rules and thresholds.
void CopySettingsParts(const loom::v1::DeviceState& from, loom::v1::DeviceState* into);

}  // namespace loom::southbound

#endif  // LOOM_SOUTHBOUND_WIRE_COMPOSITE_DRIVER_H_
