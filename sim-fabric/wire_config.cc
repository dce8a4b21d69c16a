#include "sim-fabric/wire_config.h"

#include <google/protobuf/util/message_differencer.h>

#include <chrono>
#include <tuple>
#include <utility>

namespace loom::sim {

namespace v1 = loom::v1;
namespace sgnmi = loom::southbound::gnmi;

namespace {

std::set<std::string> SwitchesOf(const v1::Topology& topo) {
  std::set<std::string> out;
  for (const auto& d : topo.devices()) {
    if (d.role() == v1::DEVICE_ROLE_LEAF || d.role() == v1::DEVICE_ROLE_SPINE ||
        d.role() == v1::DEVICE_ROLE_SUPER_SPINE) {
      out.insert(d.id());
    }
  }
  return out;
}

int64_t WallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A copy of `s` holding only field `f`.
v1::DeviceState OnlyField(const v1::DeviceState& s, const google::protobuf::FieldDescriptor* f) {
  v1::DeviceState out = s;
  const auto* desc = out.GetDescriptor();
  for (int i = 0; i < desc->field_count(); ++i) {
    if (desc->field(i) != f) out.GetReflection()->ClearField(&out, desc->field(i));
  }
  return out;
}

Status CheckTarget(const std::string& target, const std::set<std::string>& switches) {
  if (target.empty()) {
    return InvalidArgument("prefix.target: empty; name the switch (its device id)");
  }
  if (!switches.count(target)) {
    return NotFound("target \"" + target + "\" is not a switch of the emulator");
  }
  return Status::Ok();
}

}  // namespace

WireConfig::WireConfig(Fabric* fabric, const v1::Topology& topo, Runner run,
                       sgnmi::CodecLimits limits)
    : switches_(SwitchesOf(topo)),
      run_(std::move(run)),
      limits_(limits),
      driver_(std::make_unique<InProcessDriver>(fabric, topo)) {
  for (const std::string& s : switches_) {
    Device& d = devices_[s];
    d.config.set_device(s);
    d.learned.set_device(s);
    d.applied.set_device(s);
  }
}

v1::DeviceState WireConfig::Merge(const v1::DeviceState& config, const v1::DeviceState& learned) {
  v1::DeviceState out = config;
  std::set<uint32_t> colors;
  for (const auto& c : learned.colors()) colors.insert(c.color());
  // Routes are keyed by (destination, class, QP mask, QP value): a BGP-learned
  // route (never split: BGP-DPF has one color per prefix) replaces only the
  // gNMI route of the same key, gNMI-written QP-split parts stay.
  using RouteKey = std::tuple<std::string, uint32_t, uint32_t, uint32_t>;
  auto key = [](const v1::ColoredRoute& r) {
    return RouteKey{r.destination(), r.traffic_class(), r.qp_mask(), r.qp_value()};
  };
  std::set<RouteKey> routes;
  for (const auto& r : learned.routes()) routes.insert(key(r));
  std::set<std::string> weights;
  for (const auto& w : learned.weights()) weights.insert(w.destination());
  out.clear_colors();
  for (const auto& c : config.colors()) {
    if (!colors.count(c.color())) *out.add_colors() = c;
  }
  for (const auto& c : learned.colors()) *out.add_colors() = c;
  out.clear_routes();
  for (const auto& r : config.routes()) {
    if (!routes.count(key(r))) *out.add_routes() = r;
  }
  for (const auto& r : learned.routes()) *out.add_routes() = r;
  out.clear_weights();
  for (const auto& w : config.weights()) {
    if (!weights.count(w.destination())) *out.add_weights() = w;
  }
  for (const auto& w : learned.weights()) *out.add_weights() = w;
  return out;
}

void WireConfig::Set(const ::gnmi::SetRequest& request,
                     std::function<void(Status, ::gnmi::SetResponse)> done) {
  const std::string target = request.prefix().target();
  Status st = CheckTarget(target, switches_);
  // Validate and decode up front (on the caller's thread) so bad requests
  // never wait for the fabric thread and the fabric thread does not parse the
  // request again unless the config changed in between (another Set).
  auto pre = std::make_shared<Prepared>();
  if (st.ok()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      const Device& d = devices_[target];
      pre->old_config = d.config;
      pre->version = d.config_version;
    }
    pre->config = pre->old_config;
    st = sgnmi::ApplySetRequest(request, &pre->config, limits_, &pre->resp, 0);
  }
  if (!st.ok()) {
    done(st, ::gnmi::SetResponse());
    return;
  }
  pre->changed = sgnmi::DiffParts(pre->old_config, pre->config);
  // `request` outlives the closure: the caller keeps it until `done` runs
  // (a gRPC handler's request does), so it is not copied.
  run_([this, req = &request, target, pre, done = std::move(done)](Fabric&) {
    const ::gnmi::SetRequest& request = *req;
    v1::DeviceState learned;
    bool stale;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const Device& d = devices_[target];
      stale = d.config_version != pre->version;
      if (stale) pre->old_config = d.config;
      learned = d.learned;
    }
    if (stale) {
      // Another Set changed the config since validation: apply to the current one.
      pre->config = pre->old_config;
      pre->resp.Clear();
      Status s = sgnmi::ApplySetRequest(request, &pre->config, limits_, &pre->resp, 0);
      if (!s.ok()) {
        done(s, ::gnmi::SetResponse());
        return;
      }
      pre->changed = sgnmi::DiffParts(pre->old_config, pre->config);
    }
    pre->resp.set_timestamp(WallNs());
    const sgnmi::PartMask changed = pre->changed;
    Status s = Commit(target, pre->old_config, std::move(pre->config), learned,
                      [changed](const std::string& part) {
                        for (sgnmi::Part p : sgnmi::kEveryPart) {
                          if (part == sgnmi::PartName(p) && (changed & sgnmi::Mask(p)) != 0) {
                            return true;
                          }
                        }
                        return false;
                      });
    if (!s.ok()) {
      done(s, ::gnmi::SetResponse());
      return;
    }
    done(Status::Ok(), std::move(pre->resp));
  });
}

Status WireConfig::Commit(const std::string& target, const v1::DeviceState& old_config,
                          v1::DeviceState config, const v1::DeviceState& learned,
                          const std::function<bool(const std::string& part)>& ours) {
  loom::southbound::ApplyResult r = driver_->ApplyNow(Merge(config, learned));
  for (const auto& f : r.failures) {
    if (f.part != "device" && !ours(f.part)) continue;
    // Roll back: the Set is one transaction.
    loom::southbound::ApplyResult back = driver_->ApplyNow(Merge(old_config, learned));
    {
      std::lock_guard<std::mutex> lock(mu_);
      Device& d = devices_[target];
      d.applied = std::move(back.applied);
      d.AppliedChanged();
    }
    return InvalidArgument("the fabric refused " + f.part + ": " + f.status.message());
  }
  std::lock_guard<std::mutex> lock(mu_);
  Device& d = devices_[target];
  d.config = std::move(config);
  ++d.config_version;
  d.canon_config.reset();
  d.applied = std::move(r.applied);
  d.AppliedChanged();
  ++sets_applied_;
  return Status::Ok();
}

void WireConfig::Program(const std::string& device, const v1::DeviceState& config,
                         const std::vector<std::string>& fields, std::function<void(Status)> done) {
  if (!switches_.count(device)) {
    done(NotFound("\"" + device + "\" is not a switch of the emulator"));
    return;
  }
  run_([this, device, config, fields, done = std::move(done)](Fabric&) {
    v1::DeviceState old_config, learned;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const Device& d = devices_[device];
      old_config = d.config;
      learned = d.learned;
    }
    v1::DeviceState next = old_config;
    const auto* desc = v1::DeviceState::descriptor();
    std::set<std::string> changed;
    for (const std::string& name : fields) {
      const auto* f = desc->FindFieldByName(name);
      if (f == nullptr || name == "device" || name == "generation") continue;
      next.GetReflection()->ClearField(&next, f);
      const v1::DeviceState src = OnlyField(config, f);
      next.MergeFrom(src);
      if (!google::protobuf::util::MessageDifferencer::Equivalent(src, OnlyField(old_config, f))) {
        changed.insert(name);
      }
    }
    next.set_device(device);
    Status s = Commit(device, old_config, sgnmi::Canonical(std::move(next)), learned,
                      [&changed](const std::string& part) { return changed.count(part) > 0; });
    done(s);
  });
}

Status WireConfig::Get(const ::gnmi::GetRequest& request, ::gnmi::GetResponse* response) const {
  const std::string target = request.prefix().target();
  Status st = CheckTarget(target, switches_);
  if (!st.ok()) return st;
  const bool operational = request.type() == ::gnmi::GetRequest::OPERATIONAL;
  // The canonical form of the state is cached per version (polling clients
  // ask again and again for a state that has not changed).
  std::shared_ptr<const v1::DeviceState> canon;
  v1::DeviceState state;
  uint64_t version = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = devices_.find(target);
    const Device& d = it->second;
    canon = operational ? d.canon_applied : d.canon_config;
    if (!canon) {
      state = operational ? d.applied : d.config;
      version = operational ? d.applied_version : d.config_version;
    }
  }
  if (!canon) {
    state.set_device(target);
    auto c = std::make_shared<const v1::DeviceState>(sgnmi::Canonical(std::move(state)));
    canon = c;
    std::lock_guard<std::mutex> lock(mu_);
    const Device& d = devices_.find(target)->second;
    if (operational && d.applied_version == version) d.canon_applied = std::move(c);
    if (!operational && d.config_version == version) d.canon_config = std::move(c);
  }
  return sgnmi::EncodeGetResponse(request, *canon, WallNs(), response);
}

void WireConfig::SetLearned(const std::string& device, v1::DeviceState learned) {
  if (!IsSwitch(device)) return;
  learned.set_device(device);
  bool post = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Device& d = devices_[device];
    d.learned = std::move(learned);
    post = !d.learned_pending;
    d.learned_pending = true;
  }
  if (post) run_([this, device](Fabric&) { ApplyLearned(device); });
}

void WireConfig::ApplyLearned(const std::string& device) {
  v1::DeviceState merged;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Device& d = devices_[device];
    d.learned_pending = false;
    merged = Merge(d.config, d.learned);
  }
  loom::southbound::ApplyResult r = driver_->ApplyNow(merged);
  std::lock_guard<std::mutex> lock(mu_);
  Device& d = devices_[device];
  d.applied = std::move(r.applied);
  d.AppliedChanged();
}

v1::DeviceState WireConfig::Configured(const std::string& device) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = devices_.find(device);
  return it == devices_.end() ? v1::DeviceState() : it->second.config;
}

v1::DeviceState WireConfig::Applied(const std::string& device) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = devices_.find(device);
  return it == devices_.end() ? v1::DeviceState() : it->second.applied;
}

uint64_t WireConfig::sets_applied() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sets_applied_;
}

}  // namespace loom::sim
