// Route budgets: a device never gets more prefixes than it takes.
//
// BudgetDriver: role — wraps the driver(s) of a set of devices; before an
// Apply() it counts the desired state's distinct route prefixes and, when a
// device's budget (inventory route_budget.max_prefixes) would be exceeded,
// fails the change closed: nothing is sent, the result reports the
// "routes" part failed with the count and the budget, and the applied state
// stays what the device last ran. A switch is thus never pushed into tearing
// its session down on max-prefix. Trigger — the reconciler's Apply()/Read().
// Thread — the caller's (the controller strand); the inner driver's
// callbacks pass through unchanged.
#ifndef LOOM_SOUTHBOUND_WIRE_BUDGET_DRIVER_H_
#define LOOM_SOUTHBOUND_WIRE_BUDGET_DRIVER_H_

#include <map>
#include <mutex>
#include <string>

#include "southbound/wire/driver.h"

namespace loom::southbound {

class BudgetDriver final : public Driver {
 public:
  // `inner` is not owned. `max_prefixes`: device -> budget (absent = none).
  BudgetDriver(Driver* inner, std::map<std::string, uint32_t> max_prefixes)
      : inner_(inner), max_prefixes_(std::move(max_prefixes)) {}

  std::string Name() const override { return inner_->Name(); }
  std::string NameFor(const std::string& device) const override { return inner_->NameFor(device); }
  bool Handles(const std::string& device) const override { return inner_->Handles(device); }
  void Apply(const loom::v1::DeviceState& desired, std::function<void(ApplyResult)> done) override;
  void Read(const std::string& device,
            std::function<void(Status, loom::v1::DeviceState)> done) override {
    inner_->Read(device, std::move(done));
  }

 private:
  Driver* inner_;
  const std::map<std::string, uint32_t> max_prefixes_;
  std::mutex mu_;
  std::map<std::string, loom::v1::DeviceState> last_applied_;  // guarded by mu_
};

// Distinct route prefixes of a desired state (what a device installs).
size_t PrefixCount(const loom::v1::DeviceState& state);

}  // namespace loom::southbound

#endif  // LOOM_SOUTHBOUND_WIRE_BUDGET_DRIVER_H_
