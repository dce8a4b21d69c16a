#include "southbound/gnmi/adapter_driver.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "common/log.h"
#include "common/tls_channel.h"
#include "gnmi/gnmi.grpc.pb.h"
#include "southbound/gnmi/channel_keeper.h"
#include "southbound/gnmi/gnmi_config.h"
#include "southbound/wire/device_state_util.h"

namespace loom::southbound::gnmi {
namespace {

namespace v1 = loom::v1;
using google::protobuf::FieldDescriptor;

// The DeviceState field named like a part ("routes", "pfc_watchdog"), or
// nullptr (device and generation are not parts).
const FieldDescriptor* PartField(const std::string& part) {
  const FieldDescriptor* f = v1::DeviceState::descriptor()->FindFieldByName(part);
  if (f == nullptr || f->name() == "device" || f->name() == "generation") return nullptr;
  return f;
}

// A copy of `s` holding only field `f`.
v1::DeviceState OnlyField(const v1::DeviceState& s, const FieldDescriptor* f) {
  v1::DeviceState out = s;
  const auto* refl = out.GetReflection();
  const auto* desc = out.GetDescriptor();
  for (int i = 0; i < desc->field_count(); ++i) {
    if (desc->field(i) != f) refl->ClearField(&out, desc->field(i));
  }
  return out;
}

// Removes the entries of `list` whose name is `entry`; how many.
template <typename T, typename NameFn>
int RemoveNamed(google::protobuf::RepeatedPtrField<T>* list, const std::string& entry,
                NameFn name) {
  int before = list->size();
  list->erase(
      std::remove_if(list->begin(), list->end(), [&](const T& x) { return name(x) == entry; }),
      list->end());
  return before - list->size();
}

// Removes the entry the adapters name `entry` (adapter_sonic.cc,
// adapter_openconfig.cc, adapter_loom.cc) from `part`. -1 when the part has
// no entry naming (a single message: dlb, pfc_watchdog) or is unknown.
int RemoveEntry(const std::string& part, const std::string& entry, v1::DeviceState* s) {
  auto n = [](uint64_t v) { return std::to_string(v); };
  if (part == "routes") {
    return RemoveNamed(s->mutable_routes(), entry, [&](const v1::ColoredRoute& r) {
      std::string name = r.destination() + " class " + n(r.traffic_class());
      if (IsSplitRoute(r)) name += " qp " + n(r.qp_value()) + "/" + n(r.qp_mask());
      return name;
    });
  }
  if (part == "colors") {
    return RemoveNamed(s->mutable_colors(), entry,
                       [&](const v1::ColorGroup& c) { return n(c.color()); });
  }
  if (part == "weights") {
    return RemoveNamed(s->mutable_weights(), entry,
                       [](const v1::WeightSet& w) { return w.destination(); });
  }
  if (part == "alb_tables") {
    return RemoveNamed(s->mutable_alb_tables(), entry,
                       [](const v1::AlbTable& t) { return t.group(); });
  }
  if (part == "spray_rules") {
    return RemoveNamed(s->mutable_spray_rules(), entry, [&](const v1::SprayRule& r) {
      return "traffic-class " + n(r.traffic_class());
    });
  }
  if (part == "thresholds") {
    return RemoveNamed(s->mutable_thresholds(), entry, [&](const v1::QueueThresholds& t) {
      return (t.interface().empty() ? "every port" : t.interface()) + " priority " +
             n(t.priority());
    });
  }
  if (part == "disabled_interfaces") {
    return RemoveNamed(s->mutable_disabled_interfaces(), entry,
                       [](const std::string& i) { return i; });
  }
  return -1;
}

}  // namespace

ApplyResult StripUnexpressed(const v1::DeviceState& desired,
                             const std::vector<Unexpressed>& unexpressed,
                             const std::string& adapter) {
  ApplyResult r;
  r.applied = desired;
  for (const auto& u : unexpressed) {
    if (u.partial) continue;
    int removed = u.entry.empty() ? -1 : RemoveEntry(u.part, u.entry, &r.applied);
    if (removed <= 0) {
      // The whole part (dlb, pfc_watchdog: never sent half), or an entry
      // that names nothing found: claim nothing of the part.
      if (const FieldDescriptor* f = PartField(u.part)) {
        r.applied.GetReflection()->ClearField(&r.applied, f);
      }
      if (removed == 0) {
        LOG_WARN("gnmi set: unexpressed entry matches nothing; part not claimed")
            .With("device", desired.device())
            .With("part", u.part)
            .With("entry", u.entry);
      }
    }
    std::string what = u.part + (u.entry.empty() ? "" : " \"" + u.entry + "\"");
    r.failures.push_back({u.part, Status(u.status.code(), adapter + " cannot express " + what +
                                                              ": " + u.status.message())});
  }
  return r;
}

struct AdapterSetDriver::Op {
  bool apply = true;
  v1::DeviceState desired;  // Apply: the full desired state; Read: the device id.
  std::function<void(ApplyResult)> apply_done;
  std::function<void(Status, v1::DeviceState)> read_done;
};

struct AdapterSetDriver::Device {
  AdapterDeviceConfig config;
  std::unique_ptr<SetAdapter> adapter;
  std::unique_ptr<::gnmi::gNMI::Stub> stub;
  // Worker thread only.
  v1::DeviceState applied;                  // Last successfully applied (with generation).
  std::optional<v1::DeviceState> baseline;  // Read-back of `applied`; unset = unknown.
  // The last request the device accepted (its writes only), for stale deletes.
  std::shared_ptr<const ::gnmi::SetRequest> last_request;
  // What the device had in entries Loom updates, before Loom wrote them.
  PristineValues pristine;
  std::set<std::string> pristine_known;
  bool busy = false;
  std::deque<Op> queue;
};

AdapterSetDriver::AdapterSetDriver(AdapterSetDriverConfig config)
    : config_(std::move(config)), topology_(config_.topology) {
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels;
  for (const auto& dc : config_.devices) {
    if (dc.device.empty() || devices_.count(dc.device)) continue;  // Start() reports it.
    auto d = std::make_unique<Device>();
    d->config = dc;
    if (d->config.target.empty()) d->config.target = dc.device;
    d->adapter = MakeSetAdapter(dc.adapter);
    d->applied.set_device(dc.device);
    auto& ch = channels[dc.address + "|" + dc.tls.Describe()];
    if (!ch && !dc.address.empty()) {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
      ch = grpc::CreateCustomChannel(dc.address, TlsChannelCredentials(dc.tls, &args), args);
      KeepChannelForever(ch);  // see channel_keeper.h
    }
    if (ch) d->stub = ::gnmi::gNMI::NewStub(ch);
    devices_[dc.device] = std::move(d);
  }
}

AdapterSetDriver::~AdapterSetDriver() { Stop(); }

Status AdapterSetDriver::Start() {
  std::set<std::string> seen;
  for (const auto& dc : config_.devices) {
    if (dc.device.empty()) return InvalidArgument("gnmi set driver: device with an empty id");
    if (!seen.insert(dc.device).second) {
      return InvalidArgument("gnmi set driver: device \"" + dc.device + "\" listed twice");
    }
    if (dc.address.empty()) {
      return InvalidArgument("gnmi set driver: device \"" + dc.device + "\" has no address");
    }
    if (!devices_.at(dc.device)->adapter) {
      return InvalidArgument("gnmi set driver: device \"" + dc.device +
                             "\" has unknown adapter \"" + dc.adapter +
                             "\" (sonic, openconfig, loom)");
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return FailedPrecondition("gnmi set driver: already started");
  started_ = true;
  worker_ = std::thread([this] { WorkerLoop(); });
  return Status::Ok();
}

void AdapterSetDriver::Stop() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!started_ || exit_) return;
  stopping_ = true;
  for (grpc::ClientContext* ctx : rpcs_) ctx->TryCancel();
  cv_.wait(lock, [&] { return rpcs_.empty(); });
  exit_ = true;
  cv_.notify_all();
  lock.unlock();
  worker_.join();
}

void AdapterSetDriver::SetTopology(std::shared_ptr<const v1::Topology> topology) {
  std::lock_guard<std::mutex> lock(mu_);
  topology_ = std::move(topology);
}

std::string AdapterSetDriver::NameFor(const std::string& device) const {
  auto it = devices_.find(device);
  if (it == devices_.end()) return Name();
  return "gnmi:" + it->second->config.adapter;
}

bool AdapterSetDriver::Handles(const std::string& device) const {
  return devices_.count(device) > 0;
}

bool AdapterSetDriver::Post(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!started_ || exit_) return false;
  tasks_.push_back(std::move(task));
  cv_.notify_all();
  return true;
}

void AdapterSetDriver::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !tasks_.empty() || exit_; });
      if (tasks_.empty()) return;  // exit_ and drained.
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void AdapterSetDriver::Apply(const v1::DeviceState& desired,
                             std::function<void(ApplyResult)> done) {
  auto shared = std::make_shared<Op>();
  shared->desired = desired;
  shared->apply_done = std::move(done);
  bool posted = Post([this, shared] {
    auto it = devices_.find(shared->desired.device());
    if (it == devices_.end()) {
      ApplyResult r;
      r.applied.set_device(shared->desired.device());
      r.failures.push_back({"device", NotFound("device \"" + shared->desired.device() +
                                               "\" is not a gnmi set device")});
      shared->apply_done(std::move(r));
      return;
    }
    Enqueue(*it->second, std::move(*shared));
  });
  if (!posted) {
    ApplyResult r;
    r.applied.set_device(shared->desired.device());
    r.failures.push_back({"device", Unavailable("gnmi set driver is not running")});
    shared->apply_done(std::move(r));
  }
}

void AdapterSetDriver::Read(const std::string& device,
                            std::function<void(Status, v1::DeviceState)> done) {
  auto shared = std::make_shared<Op>();
  shared->apply = false;
  shared->desired.set_device(device);
  shared->read_done = std::move(done);
  bool posted = Post([this, shared] {
    auto it = devices_.find(shared->desired.device());
    if (it == devices_.end()) {
      shared->read_done(
          NotFound("device \"" + shared->desired.device() + "\" is not a gnmi set device"),
          shared->desired);
      return;
    }
    Enqueue(*it->second, std::move(*shared));
  });
  if (!posted) {
    v1::DeviceState s;
    s.set_device(device);
    shared->read_done(Unavailable("gnmi set driver is not running"), s);
  }
}

void AdapterSetDriver::Enqueue(Device& d, Op op) {
  d.queue.push_back(std::move(op));
  if (!d.busy) StartNext(d);
}

void AdapterSetDriver::StartNext(Device& d) {
  if (d.queue.empty()) {
    d.busy = false;
    return;
  }
  d.busy = true;
  auto op = std::make_shared<Op>(std::move(d.queue.front()));
  d.queue.pop_front();
  if (op->apply) {
    RunApply(d, std::move(op));
  } else {
    RunRead(d, std::move(op));
  }
}

AdapterContext AdapterSetDriver::Context(const Device& d,
                                         std::shared_ptr<const v1::Topology>* hold) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    *hold = topology_;
  }
  AdapterContext ctx;
  ctx.topology = hold->get();
  ctx.next_hop_addresses = d.config.next_hop_addresses;
  ctx.target = d.config.target;
  ctx.vrf = d.config.vrf;
  ctx.static_protocol_name = d.config.static_protocol_name;
  return ctx;
}

void AdapterSetDriver::RunApply(Device& d, std::shared_ptr<Op> op) {
  std::shared_ptr<const v1::Topology> hold;
  AdapterOutput out = d.adapter->Encode(op->desired, Context(d, &hold));
  for (const auto& u : out.unexpressed) {
    if (!u.partial) continue;
    LOG_INFO("gnmi set: sent without part of its meaning")
        .With("device", d.config.device)
        .With("adapter", d.adapter->Name())
        .With("part", u.part)
        .With("entry", u.entry)
        .With("reason", u.status.message());
  }
  auto stripped = std::make_shared<ApplyResult>(
      StripUnexpressed(op->desired, out.unexpressed, d.adapter->Name()));
  auto finish = [this, &d, op, stripped](Status s) {
    ApplyResult r;
    if (s.ok()) {
      r = std::move(*stripped);
      if (!r.ok()) r.applied.set_generation(d.applied.generation());
      d.applied = r.applied;
    } else {
      r.applied = d.applied;
      r.failures.push_back({"device", s});
    }
    r.applied.set_device(d.config.device);
    auto done = std::move(op->apply_done);
    done(std::move(r));
    StartNext(d);
  };
  // Before Loom first writes into an entry it does not own, read what the
  // device had there: when Loom stops writing a member, it is restored.
  auto pending = std::make_shared<::gnmi::SetRequest>(std::move(out.request));
  auto send = [this, &d, finish, pending]() { SendApply(d, std::move(*pending), finish); };
  ::gnmi::GetRequest get = PristineGetRequest(*pending, d.pristine_known);
  if (get.path_size() == 0) {
    send();
    return;
  }
  auto req = std::make_shared<::gnmi::GetRequest>(std::move(get));
  CallGetRaw(d, *req, [&d, req, send, finish](Status s, ::gnmi::GetResponse resp) {
    if (!s.ok()) {
      LOG_INFO("gnmi set: cannot read what Loom is about to overwrite")
          .With("device", d.config.device)
          .With("error", s.message());
      resp.Clear();
      if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded ||
          s.code() == StatusCode::kCancelled) {
        finish(s);  // unreachable: the reconciler retries, read first again
        return;
      }
      // The target cannot say: these members will be deleted, not restored.
    }
    RecordPristine(*req, resp, &d.pristine, &d.pristine_known);
    send();
  });
}

void AdapterSetDriver::SendApply(Device& d, ::gnmi::SetRequest request,
                                 std::function<void(Status)> finish) {
  // Rows an earlier Set wrote that Loom no longer wants are deleted.
  std::shared_ptr<::gnmi::SetRequest> without_stale;
  if (d.last_request) {
    auto plain = std::make_shared<::gnmi::SetRequest>(request);
    int stale = AddStaleDeletes(*d.last_request, &request, &d.pristine);
    if (stale > 0) {
      without_stale = std::move(plain);
      LOG_INFO("gnmi set: deleting entries Loom no longer wants")
          .With("device", d.config.device)
          .With("deletes", static_cast<uint64_t>(stale));
    }
  }
  if (IsEmptySet(request)) {  // Nothing the platform can express: the device is untouched.
    finish(Status::Ok());
    return;
  }
  auto sent = std::make_shared<::gnmi::SetRequest>(request);
  // What this request's deletes removed is gone: only its writes can go stale.
  sent->clear_delete_();
  auto after_set = [this, &d, finish, sent](Status s) {
    d.baseline.reset();
    if (s.ok()) d.last_request = sent;
    if (!s.ok() || !d.adapter->capabilities().read_back) {
      finish(s);
      return;
    }
    // The device's rendering of what it now runs: Read compares against it.
    CallGet(d, [&d, finish](Status gs, v1::DeviceState state) {
      if (gs.ok()) d.baseline = std::move(state);
      finish(Status::Ok());  // The Set was accepted whatever the Get says.
    });
  };
  CallSet(d, std::move(request), [this, &d, after_set, without_stale](Status s) mutable {
    if (s.ok() || !without_stale || IsEmptySet(*without_stale)) {
      after_set(s);
      return;
    }
    // A target that refuses one of the stale deletes (an entry already
    // removed by hand, a path it no longer has) must not wedge the
    // device: the desired state goes without them, and they are
    // forgotten (said in the log).
    LOG_WARN("gnmi set: refused with stale deletes; sending without them")
        .With("device", d.config.device)
        .With("error", s.message());
    CallSet(d, std::move(*without_stale), after_set);
  });
}

void AdapterSetDriver::RunRead(Device& d, std::shared_ptr<Op> op) {
  auto complete = [this, &d, op](Status s, v1::DeviceState state) {
    state.set_device(d.config.device);
    auto done = std::move(op->read_done);
    done(std::move(s), std::move(state));
    StartNext(d);
  };
  if (!d.adapter->capabilities().read_back) {
    complete(Status::Ok(), d.applied);
    return;
  }
  CallGet(d, [&d, complete](Status s, v1::DeviceState state) {
    v1::DeviceState out = d.applied;
    if (s.code() == StatusCode::kUnimplemented) {  // The adapter cannot decode after all.
      complete(Status::Ok(), std::move(out));
      return;
    }
    if (!s.ok()) {
      complete(std::move(s), std::move(out));
      return;
    }
    if (!d.baseline) {
      d.baseline = std::move(state);
      complete(Status::Ok(), std::move(out));
      return;
    }
    google::protobuf::util::MessageDifferencer diff;
    diff.set_repeated_field_comparison(google::protobuf::util::MessageDifferencer::AS_SET);
    const auto* desc = v1::DeviceState::descriptor();
    for (int i = 0; i < desc->field_count(); ++i) {
      const FieldDescriptor* f = desc->field(i);
      if (f->name() == "device" || f->name() == "generation") continue;
      v1::DeviceState now = OnlyField(state, f);
      if (diff.Compare(now, OnlyField(*d.baseline, f))) continue;
      LOG_WARN("gnmi set: device drifted from its last applied state")
          .With("device", d.config.device)
          .With("part", f->name());
      out.GetReflection()->ClearField(&out, f);
      out.MergeFrom(now);
    }
    complete(Status::Ok(), std::move(out));
  });
}

void AdapterSetDriver::PrepareContext(const Device& d, grpc::ClientContext* ctx) const {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(config_.rpc_timeout_ms));
  if (!d.config.username.empty()) {
    ctx->AddMetadata("username", d.config.username);
    ctx->AddMetadata("password", d.config.password);
  } else if (!config_.username.empty()) {
    ctx->AddMetadata("username", config_.username);
    ctx->AddMetadata("password", config_.password);
  }
}

bool AdapterSetDriver::BeginRpc(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return false;
  rpcs_.insert(ctx);
  return true;
}

void AdapterSetDriver::EndRpc(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  rpcs_.erase(ctx);
  cv_.notify_all();
}

void AdapterSetDriver::CallGet(Device& d, std::function<void(Status, v1::DeviceState)> then) {
  ::gnmi::GetRequest req;
  {
    std::shared_ptr<const v1::Topology> hold;
    req = d.adapter->MakeGetRequest(Context(d, &hold));
  }
  CallGetRaw(d, req, [this, &d, then = std::move(then)](Status st, ::gnmi::GetResponse resp) {
    v1::DeviceState state;
    state.set_device(d.config.device);
    if (st.ok()) {
      std::shared_ptr<const v1::Topology> hold;
      st = d.adapter->ReadBack(resp, Context(d, &hold), &state);
      if (!st.ok() && st.code() != StatusCode::kUnimplemented) {
        st = Internal("undecodable Get response: " + st.message());
      }
    }
    if (!st.ok() && st.code() != StatusCode::kUnimplemented) {
      LOG_WARN("gnmi get failed")
          .With("device", d.config.device)
          .With("code", static_cast<int64_t>(st.code()))
          .With("error", st.message());
    }
    then(st, std::move(state));
  });
}

void AdapterSetDriver::CallGetRaw(Device& d, const ::gnmi::GetRequest& request,
                                  std::function<void(Status, ::gnmi::GetResponse)> then) {
  struct Call {
    grpc::ClientContext ctx;
    ::gnmi::GetRequest req;
    ::gnmi::GetResponse resp;
  };
  auto call = std::make_shared<Call>();
  call->req = request;
  PrepareContext(d, &call->ctx);
  if (!d.stub || !BeginRpc(&call->ctx)) {
    then(Unavailable("gnmi set driver stopping"), {});
    return;
  }
  d.stub->async()->Get(&call->ctx, &call->req, &call->resp,
                       [this, &d, call, then = std::move(then)](grpc::Status gs) {
                         Status s = ChannelStatus(gs, d.config.tls);
                         bool posted = Post([call, then, s] { then(s, std::move(call->resp)); });
                         (void)posted;  // Not posted only after Stop(): nobody waits.
                         EndRpc(&call->ctx);
                       });
}

void AdapterSetDriver::CallSet(Device& d, ::gnmi::SetRequest request,
                               std::function<void(Status)> then) {
  struct Call {
    grpc::ClientContext ctx;
    ::gnmi::SetRequest req;
    ::gnmi::SetResponse resp;
  };
  auto call = std::make_shared<Call>();
  call->req = std::move(request);
  PrepareContext(d, &call->ctx);
  if (!d.stub || !BeginRpc(&call->ctx)) {
    then(Unavailable("gnmi set driver stopping"));
    return;
  }
  d.stub->async()->Set(&call->ctx, &call->req, &call->resp,
                       [this, &d, call, then = std::move(then)](grpc::Status gs) {
                         Status s = ChannelStatus(gs, d.config.tls);
                         bool posted = Post([&d, then, s] {
                           if (!s.ok()) {
                             LOG_WARN("gnmi set failed")
                                 .With("device", d.config.device)
                                 .With("code", static_cast<int64_t>(s.code()))
                                 .With("error", s.message());
                           }
                           then(s);
                         });
                         (void)posted;  // Not posted only after Stop(): nobody waits.
                         EndRpc(&call->ctx);
                       });
}

}  // namespace loom::southbound::gnmi
