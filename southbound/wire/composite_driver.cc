#include "southbound/wire/composite_driver.h"

#include <algorithm>
#include <memory>
#include <mutex>

#include "southbound/wire/device_state_util.h"

namespace loom::southbound {

namespace v1 = loom::v1;

void CopyRoutingParts(const v1::DeviceState& from, v1::DeviceState* into) {
  *into->mutable_colors() = from.colors();
  *into->mutable_routes() = from.routes();
  *into->mutable_weights() = from.weights();
  *into->mutable_next_hop_reach() = from.next_hop_reach();
}

void CopySettingsParts(const v1::DeviceState& from, v1::DeviceState* into) {
  if (from.has_dlb()) {
    *into->mutable_dlb() = from.dlb();
  } else {
    into->clear_dlb();
  }
  *into->mutable_alb_tables() = from.alb_tables();
  *into->mutable_spray_rules() = from.spray_rules();
  *into->mutable_thresholds() = from.thresholds();
}

void KeepRoutes(v1::DeviceState* state, bool split) {
  auto* routes = state->mutable_routes();
  routes->erase(
      std::remove_if(routes->begin(), routes->end(),
                     [split](const v1::ColoredRoute& r) { return IsSplitRoute(r) != split; }),
      routes->end());
}

std::string CompositeDriver::Name() const {
  return (routing_ ? routing_->Name() : std::string("-")) + "+" +
         (settings_ ? settings_->Name() : std::string("-"));
}

std::string CompositeDriver::NameFor(const std::string& device) const {
  const bool r = RoutingHandles(device), st = SettingsHandles(device);
  if (r && st) return routing_->NameFor(device) + "+" + settings_->NameFor(device);
  if (r) return routing_->NameFor(device);
  if (st) return settings_->NameFor(device);
  return Name();
}

bool CompositeDriver::Handles(const std::string& device) const {
  return RoutingHandles(device) || SettingsHandles(device);
}

namespace {

// Collects two results and merges them once both arrived.
struct Join {
  std::mutex mu;
  int pending = 0;
  v1::DeviceState applied;
  // Split routes the settings driver applied (split_routes_to_settings).
  google::protobuf::RepeatedPtrField<v1::ColoredRoute> split;
  std::vector<ApplyFailure> failures;
  Status read_status;
};

}  // namespace

void CompositeDriver::Apply(const v1::DeviceState& desired, std::function<void(ApplyResult)> done) {
  auto join = std::make_shared<Join>();
  join->applied.set_device(desired.device());
  join->applied.set_generation(desired.generation());
  const bool routing = RoutingHandles(desired.device());
  const bool settings = SettingsHandles(desired.device());
  join->pending = routing + settings;
  // A part no driver owns is applied trivially only when it is empty.
  if (!routing) {
    v1::DeviceState only;
    CopyRoutingParts(desired, &only);
    if (only.colors_size() || only.routes_size() || only.weights_size()) {
      join->failures.push_back(
          {"routes", Status(StatusCode::kUnimplemented, "no routing driver for this device")});
    }
  }
  if (!settings) {
    v1::DeviceState only;
    CopySettingsParts(desired, &only);
    if (only.ByteSizeLong() > 0) {
      join->failures.push_back(
          {"dlb", Status(StatusCode::kUnimplemented, "no settings driver for this device")});
    }
  }
  const bool split = split_routes_ && routing && settings;
  auto finish = [join, done, split](bool is_routing, ApplyResult r) {
    std::unique_lock<std::mutex> lock(join->mu);
    if (is_routing) {
      CopyRoutingParts(r.applied, &join->applied);
    } else {
      CopySettingsParts(r.applied, &join->applied);
      if (split) join->split = r.applied.routes();
    }
    for (auto& f : r.failures) join->failures.push_back(std::move(f));
    if (--join->pending > 0) return;
    ApplyResult out;
    out.applied = join->applied;
    for (const auto& route : join->split) *out.applied.add_routes() = route;
    out.failures = join->failures;
    lock.unlock();
    done(std::move(out));
  };
  if (!routing && !settings) {
    ApplyResult out;
    out.applied = join->applied;
    out.failures = join->failures;
    done(std::move(out));
    return;
  }
  if (split) {
    v1::DeviceState to_routing = desired, to_settings = desired;
    KeepRoutes(&to_routing, false);
    KeepRoutes(&to_settings, true);
    routing_->Apply(to_routing, [finish](ApplyResult r) { finish(true, std::move(r)); });
    settings_->Apply(to_settings, [finish](ApplyResult r) { finish(false, std::move(r)); });
    return;
  }
  if (routing) routing_->Apply(desired, [finish](ApplyResult r) { finish(true, std::move(r)); });
  if (settings) {
    settings_->Apply(desired, [finish](ApplyResult r) { finish(false, std::move(r)); });
  }
}

void CompositeDriver::Read(const std::string& device,
                           std::function<void(Status, v1::DeviceState)> done) {
  auto join = std::make_shared<Join>();
  join->applied.set_device(device);
  const bool routing = RoutingHandles(device);
  const bool settings = SettingsHandles(device);
  join->pending = routing + settings;
  if (join->pending == 0) {
    done(Status(StatusCode::kNotFound, "no driver handles " + device), {});
    return;
  }
  const bool split = split_routes_ && routing && settings;
  auto finish = [join, done, split](bool is_routing, Status s, v1::DeviceState st) {
    std::unique_lock<std::mutex> lock(join->mu);
    if (is_routing) {
      CopyRoutingParts(st, &join->applied);
    } else {
      CopySettingsParts(st, &join->applied);
      if (split) {
        KeepRoutes(&st, true);
        join->split = st.routes();
      }
    }
    if (!s.ok() && join->read_status.ok()) join->read_status = s;
    if (--join->pending > 0) return;
    Status status = join->read_status;
    v1::DeviceState merged = join->applied;
    if (split) {
      KeepRoutes(&merged, false);
      for (const auto& route : join->split) *merged.add_routes() = route;
    }
    lock.unlock();
    done(status, std::move(merged));
  };
  if (routing) {
    routing_->Read(device, [finish](Status s, v1::DeviceState st) {
      finish(true, std::move(s), std::move(st));
    });
  }
  if (settings) {
    settings_->Read(device, [finish](Status s, v1::DeviceState st) {
      finish(false, std::move(s), std::move(st));
    });
  }
}

void SettingsOnlyDriver::Apply(const loom::v1::DeviceState& desired,
                               std::function<void(ApplyResult)> done) {
  loom::v1::DeviceState settings = desired;
  settings.clear_colors();
  settings.clear_routes();
  settings.clear_weights();
  settings.clear_next_hop_reach();
  inner_->Apply(settings, std::move(done));
}

}  // namespace loom::southbound
