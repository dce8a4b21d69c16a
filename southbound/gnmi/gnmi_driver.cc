#include "southbound/gnmi/gnmi_driver.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <utility>

#include "common/log.h"
#include "common/tls_channel.h"
#include "gnmi/gnmi.grpc.pb.h"
#include "southbound/gnmi/channel_keeper.h"

namespace loom::southbound::gnmi {
namespace {

namespace v1 = loom::v1;

void AddCredentials(const GnmiDeviceConfig& dc, grpc::ClientContext* ctx) {
  if (dc.username.empty()) return;
  ctx->AddMetadata("username", dc.username);
  ctx->AddMetadata("password", dc.password);
}

// Codes after which a Set may or may not have been applied.
bool OutcomeUnknown(StatusCode c) {
  return c == StatusCode::kUnavailable || c == StatusCode::kDeadlineExceeded ||
         c == StatusCode::kCancelled || c == StatusCode::kUnknown || c == StatusCode::kInternal ||
         c == StatusCode::kAborted;
}

bool PartPresent(const v1::DeviceState& s, Part p) {
  switch (p) {
    case Part::kColors:
      return s.colors_size() > 0;
    case Part::kRoutes:
      return s.routes_size() > 0;
    case Part::kWeights:
      return s.weights_size() > 0;
    case Part::kDlb:
      return s.has_dlb() && s.dlb().mode() != v1::DLB_MODE_UNSPECIFIED;
    case Part::kAlbTables:
      return s.alb_tables_size() > 0;
    case Part::kSprayRules:
      return s.spray_rules_size() > 0;
    case Part::kThresholds:
      return s.thresholds_size() > 0;
  }
  return false;
}

}  // namespace

struct GnmiDriver::Op {
  bool apply = true;
  v1::DeviceState desired;  // Apply: the full desired state.
  std::function<void(ApplyResult)> apply_done;
  std::function<void(Status, v1::DeviceState)> read_done;
};

struct GnmiDriver::Device {
  GnmiDeviceConfig config;
  std::string target;
  std::unique_ptr<::gnmi::gNMI::Stub> stub;
  std::atomic<uint64_t> sets{0}, set_failures{0}, gets{0}, get_failures{0};
  // Worker thread only.
  std::optional<v1::DeviceState> known;  // What the device runs (owned parts); unset = unknown.
  v1::DeviceState last_seen;             // Last state read from the device.
  uint64_t applied_generation = 0;
  bool busy = false;
  std::deque<Op> queue;
};

struct GnmiDriver::ApplyCtx {
  Op op;
  v1::DeviceState desired;  // Owned parts, canonical.
  PartMask valid = 0;       // Owned parts that passed local validation.
  PartMask sent = 0;        // Parts carried by the Set.
  v1::DeviceState target;   // What the device should run after the Set.
  std::vector<ApplyFailure> failures;
};

GnmiDriver::GnmiDriver(GnmiDriverConfig config) : config_(std::move(config)) {
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels;
  for (const auto& dc : config_.devices) {
    if (dc.device.empty() || devices_.count(dc.device)) continue;  // Start() reports it.
    auto d = std::make_unique<Device>();
    d->config = dc;
    d->target = dc.target.empty() ? dc.device : dc.target;
    d->last_seen.set_device(dc.device);
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

GnmiDriver::~GnmiDriver() { Stop(); }

Status GnmiDriver::Start() {
  std::set<std::string> seen;
  for (const auto& dc : config_.devices) {
    if (dc.device.empty()) return InvalidArgument("gnmi driver: device with an empty id");
    if (!seen.insert(dc.device).second) {
      return InvalidArgument("gnmi driver: device \"" + dc.device + "\" listed twice");
    }
    if (dc.address.empty()) {
      return InvalidArgument("gnmi driver: device \"" + dc.device + "\" has no address");
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return FailedPrecondition("gnmi driver: already started");
  started_ = true;
  worker_ = std::thread([this] { WorkerLoop(); });
  return Status::Ok();
}

void GnmiDriver::Stop() {
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

bool GnmiDriver::Handles(const std::string& device) const { return devices_.count(device) > 0; }

GnmiDriver::Counters GnmiDriver::counters(const std::string& device) const {
  Counters c;
  auto it = devices_.find(device);
  if (it == devices_.end()) return c;
  c.sets = it->second->sets.load();
  c.set_failures = it->second->set_failures.load();
  c.gets = it->second->gets.load();
  c.get_failures = it->second->get_failures.load();
  return c;
}

bool GnmiDriver::Post(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!started_ || exit_) return false;
  tasks_.push_back(std::move(task));
  cv_.notify_all();
  return true;
}

void GnmiDriver::WorkerLoop() {
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

void GnmiDriver::Apply(const v1::DeviceState& desired, std::function<void(ApplyResult)> done) {
  Op op;
  op.apply = true;
  op.desired = desired;
  op.apply_done = std::move(done);
  auto shared = std::make_shared<Op>(std::move(op));
  bool posted = Post([this, shared] {
    auto it = devices_.find(shared->desired.device());
    if (it == devices_.end()) {
      ApplyResult r;
      r.applied.set_device(shared->desired.device());
      r.failures.push_back(
          {"device", NotFound("device \"" + shared->desired.device() + "\" is not a gnmi device")});
      shared->apply_done(std::move(r));
      return;
    }
    Enqueue(*it->second, std::move(*shared));
  });
  if (!posted) {
    ApplyResult r;
    r.applied.set_device(shared->desired.device());
    r.failures.push_back({"device", Unavailable("gnmi driver is not running")});
    shared->apply_done(std::move(r));
  }
}

void GnmiDriver::Read(const std::string& device,
                      std::function<void(Status, v1::DeviceState)> done) {
  auto shared = std::make_shared<Op>();
  shared->apply = false;
  shared->desired.set_device(device);
  shared->read_done = std::move(done);
  bool posted = Post([this, shared] {
    auto it = devices_.find(shared->desired.device());
    if (it == devices_.end()) {
      shared->read_done(
          NotFound("device \"" + shared->desired.device() + "\" is not a gnmi device"),
          shared->desired);
      return;
    }
    Enqueue(*it->second, std::move(*shared));
  });
  if (!posted) {
    v1::DeviceState s;
    s.set_device(device);
    shared->read_done(Unavailable("gnmi driver is not running"), s);
  }
}

void GnmiDriver::Enqueue(Device& d, Op op) {
  d.queue.push_back(std::move(op));
  if (!d.busy) StartNext(d);
}

void GnmiDriver::StartNext(Device& d) {
  if (d.queue.empty()) {
    d.busy = false;
    return;
  }
  d.busy = true;
  Op op = std::move(d.queue.front());
  d.queue.pop_front();
  if (op.apply) {
    RunApply(d, std::move(op));
  } else {
    RunRead(d, std::move(op));
  }
}

void GnmiDriver::RunApply(Device& d, Op op) {
  auto c = std::make_shared<ApplyCtx>();
  c->op = std::move(op);
  c->desired = Canonical(Project(c->op.desired, config_.parts));
  for (Part p : kEveryPart) {
    if (!(config_.parts & Mask(p))) {
      if (config_.report_unowned_parts && PartPresent(c->op.desired, p)) {
        c->failures.push_back(
            {PartName(p), Status(StatusCode::kUnimplemented,
                                 std::string(PartName(p)) + " is not programmed over gNMI")});
      }
      continue;
    }
    Status s =
        config_.validate_before_send ? ValidatePart(c->desired, p, config_.limits) : Status::Ok();
    if (s.ok()) {
      c->valid |= Mask(p);
    } else {
      c->failures.push_back({PartName(p), s});
    }
  }
  if (d.known) {
    ContinueApply(d, c);
    return;
  }
  CallGet(d, config_.parts, [this, &d, c](Status s, v1::DeviceState) {
    if (!s.ok()) {
      PartMask pending = DiffParts(d.last_seen, c->desired, c->valid);
      for (Part p : kEveryPart) {
        if (pending & Mask(p)) c->failures.push_back({PartName(p), s});
      }
      if (!pending) c->failures.push_back({"device", s});
      FinishApply(d, c);
      return;
    }
    ContinueApply(d, c);
  });
}

void GnmiDriver::ContinueApply(Device& d, std::shared_ptr<ApplyCtx> c) {
  c->target = *d.known;
  CopyParts(c->desired, c->valid, &c->target);
  c->sent = DiffParts(*d.known, c->target, config_.parts);
  if (!c->sent) {
    FinishApply(d, c);
    return;
  }
  ::gnmi::SetRequest req = EncodeSetRequest(&*d.known, c->target, c->sent, d.target);
  CallSet(d, std::move(req), [this, &d, c](Status s) {
    if (!s.ok()) {
      for (Part p : kEveryPart) {
        if (c->sent & Mask(p)) c->failures.push_back({PartName(p), s});
      }
      if (OutcomeUnknown(s.code())) d.known.reset();
      FinishApply(d, c);
      return;
    }
    // Confirm with a Get of the parts the Set carried only (the rest is
    // known from earlier confirmed Gets and was not touched).
    CallGet(d, c->sent, [this, &d, c](Status gs, v1::DeviceState state) {
      if (!gs.ok()) {
        d.known.reset();
        for (Part p : kEveryPart) {
          if (c->sent & Mask(p)) {
            c->failures.push_back({PartName(p), Status(gs.code(),
                                                       "Set accepted but the "
                                                       "confirming Get failed: " +
                                                           gs.message())});
          }
        }
        FinishApply(d, c);
        return;
      }
      PartMask wrong = DiffParts(state, c->target, c->sent);
      for (Part p : kEveryPart) {
        if (wrong & Mask(p)) {
          c->failures.push_back({PartName(p), Internal(std::string("device reports different ") +
                                                       PartName(p) + " after an accepted Set")});
        }
      }
      FinishApply(d, c);
    });
  });
}

void GnmiDriver::FinishApply(Device& d, std::shared_ptr<ApplyCtx> c) {
  ApplyResult r;
  if (c->failures.empty()) d.applied_generation = c->op.desired.generation();
  r.applied = d.last_seen;
  r.applied.set_device(c->op.desired.device());
  r.applied.set_generation(d.applied_generation);
  r.failures = std::move(c->failures);
  auto done = std::move(c->op.apply_done);
  done(std::move(r));
  StartNext(d);
}

void GnmiDriver::RunRead(Device& d, Op op) {
  auto shared = std::make_shared<Op>(std::move(op));
  CallGet(d, config_.parts, [this, &d, shared](Status s, v1::DeviceState state) {
    v1::DeviceState out = s.ok() ? state : d.last_seen;
    out.set_device(d.config.device);
    out.set_generation(d.applied_generation);
    auto done = std::move(shared->read_done);
    done(s, std::move(out));
    StartNext(d);
  });
}

bool GnmiDriver::BeginRpc(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return false;
  rpcs_.insert(ctx);
  return true;
}

void GnmiDriver::EndRpc(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  rpcs_.erase(ctx);
  cv_.notify_all();
}

void GnmiDriver::CallGet(Device& d, PartMask parts,
                         std::function<void(Status, v1::DeviceState)> then) {
  struct Call {
    grpc::ClientContext ctx;
    ::gnmi::GetRequest req;
    ::gnmi::GetResponse resp;
  };
  auto call = std::make_shared<Call>();
  call->req = MakeGetRequest(parts, d.target);
  call->ctx.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(config_.rpc_timeout_ms));
  AddCredentials(d.config, &call->ctx);
  if (!d.stub || !BeginRpc(&call->ctx)) {
    then(Unavailable("gnmi driver stopping"), v1::DeviceState());
    return;
  }
  d.gets++;
  d.stub->async()->Get(&call->ctx, &call->req, &call->resp,
                       [this, &d, parts, call, then = std::move(then)](grpc::Status gs) {
                         Status s = ChannelStatus(gs, d.config.tls);
                         bool posted = Post([this, &d, parts, call, then, s] {
                           Status st = s;
                           v1::DeviceState state;
                           state.set_device(d.config.device);
                           if (st.ok()) {
                             st = DecodeGetResponse(call->resp, &state, config_.limits);
                             if (!st.ok()) {
                               st = Internal("undecodable Get response: " + st.message());
                             }
                           }
                           if (st.ok()) {
                             state = Project(state, parts);
                             if (parts == config_.parts) {
                               d.known = state;
                               d.last_seen = state;
                             } else {
                               // A Get of some parts: the others stay as known.
                               if (d.known) CopyParts(state, parts, &*d.known);
                               CopyParts(state, parts, &d.last_seen);
                             }
                           } else {
                             d.get_failures++;
                             LOG_WARN("gnmi get failed")
                                 .With("device", d.config.device)
                                 .With("code", static_cast<int>(st.code()))
                                 .With("error", st.message());
                           }
                           then(st, state);
                         });
                         (void)posted;  // Not posted only after Stop(): nobody waits.
                         EndRpc(&call->ctx);
                       });
}

void GnmiDriver::CallSet(Device& d, ::gnmi::SetRequest request, std::function<void(Status)> then) {
  struct Call {
    grpc::ClientContext ctx;
    ::gnmi::SetRequest req;
    ::gnmi::SetResponse resp;
  };
  auto call = std::make_shared<Call>();
  call->req = std::move(request);
  call->ctx.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(config_.rpc_timeout_ms));
  AddCredentials(d.config, &call->ctx);
  if (!d.stub || !BeginRpc(&call->ctx)) {
    then(Unavailable("gnmi driver stopping"));
    return;
  }
  d.sets++;
  d.stub->async()->Set(&call->ctx, &call->req, &call->resp,
                       [this, &d, call, then = std::move(then)](grpc::Status gs) {
                         Status s = ChannelStatus(gs, d.config.tls);
                         Post([this, &d, then, s] {
                           if (!s.ok()) {
                             d.set_failures++;
                             LOG_WARN("gnmi set failed")
                                 .With("device", d.config.device)
                                 .With("code", static_cast<int>(s.code()))
                                 .With("error", s.message());
                           }
                           then(s);
                         });
                         EndRpc(&call->ctx);
                       });
}

}  // namespace loom::southbound::gnmi
