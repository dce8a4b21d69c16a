#include "southbound/wire/budget_driver.h"

#include <set>

namespace loom::southbound {
namespace {

Status ResourceExhaustedStatus(std::string m) {
  return Status(StatusCode::kResourceExhausted, std::move(m));
}

}  // namespace

size_t PrefixCount(const loom::v1::DeviceState& state) {
  std::set<std::string> prefixes;
  for (const auto& r : state.routes()) prefixes.insert(r.prefix());
  return prefixes.size();
}

void BudgetDriver::Apply(const loom::v1::DeviceState& desired,
                         std::function<void(ApplyResult)> done) {
  auto it = max_prefixes_.find(desired.device());
  const size_t count = PrefixCount(desired);
  if (it != max_prefixes_.end() && count > it->second) {
    ApplyResult r;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto last = last_applied_.find(desired.device());
      if (last != last_applied_.end()) r.applied = last->second;
    }
    r.applied.set_device(desired.device());
    r.failures.push_back({"routes", ResourceExhaustedStatus(
                                        "route budget exceeded: " + std::to_string(count) +
                                        " prefixes > max_prefixes " + std::to_string(it->second) +
                                        "; the change was not applied (failed closed, the "
                                        "device keeps what it ran)")});
    done(std::move(r));
    return;
  }
  inner_->Apply(desired, [this, device = desired.device(), done = std::move(done)](ApplyResult r) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_applied_[device] = r.applied;
    }
    done(std::move(r));
  });
}

}  // namespace loom::southbound
