#include "api/services/services.h"

#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include "common/log.h"
#include "controller/core/job_validation.h"
#include "southbound/gnmi/set_adapter.h"
#include "southbound/render/render.h"

namespace loom::api {

namespace v1 = loom::v1;
using loom::controller::Controller;

grpc::Status ToGrpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), s.message());
}

namespace {

// Runs `call(request, done)` on the controller and finishes the unary RPC
// with the answer. The request is copied because the controller runs later.
template <typename T>
using Done = std::function<void(Status, T)>;

template <typename Req, typename Resp, typename Call>
grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* ctx, const Req* req, Resp* resp,
                                Call call) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  call(Req(*req), [reactor, resp](Status s, Resp answer) {
    if (s.ok()) *resp = std::move(answer);
    reactor->Finish(ToGrpc(s));
  });
  return reactor;
}

// A server stream fed by a controller subscription through a bounded queue.
// The queue and flags live in a shared State so the controller's sink can
// outlive the reactor (gRPC deletes the reactor in OnDone).
template <typename Resp>
class WatchReactor final : public grpc::ServerWriteReactor<Resp> {
 public:
  // Fills the response for an event; returns false to skip the event.
  using Convert = std::function<bool(const v1::Event&, Resp*)>;

  WatchReactor(Controller& controller, uint64_t start_revision, bool follow, Convert convert,
               size_t limit)
      : state_(std::make_shared<State>()) {
    state_->reactor = this;
    state_->convert = std::move(convert);
    state_->limit = limit;
    state_->controller = &controller;
    std::shared_ptr<State> st = state_;
    controller.Subscribe(
        start_revision, follow, [st](const v1::Event& ev) { return st->Push(ev); },
        [st](Status s, uint64_t id) {
          std::unique_lock<std::mutex> lock(st->mu);
          st->subscription = id;
          if (!s.ok()) {
            st->FinishLocked(ToGrpc(s), lock);
          } else if (id == 0) {
            // Replay-only stream: complete once the queued replay is written.
            st->FinishLocked(grpc::Status::OK, lock, /*drain=*/true);
          } else if (st->done) {
            st->controller->Unsubscribe(id);
          }
        });
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->writing = false;
    if (!ok) {
      state_->FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"), lock);
      return;
    }
    state_->queue.pop_front();
    state_->Pump(lock);
  }

  void OnCancel() override {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"), lock);
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->done = true;
      state_->reactor = nullptr;
      if (state_->subscription) state_->controller->Unsubscribe(state_->subscription);
    }
    delete this;
  }

 private:
  struct State {
    std::mutex mu;
    WatchReactor* reactor = nullptr;
    Controller* controller = nullptr;
    Convert convert;
    size_t limit = 0;
    std::deque<Resp> queue;  // front() is being written while `writing`
    bool writing = false;
    bool finish_requested = false;
    bool drain_before_finish = false;
    bool finished = false;
    bool done = false;
    grpc::Status final_status;
    uint64_t subscription = 0;

    // Called on the controller strand for every event.
    bool Push(const v1::Event& ev) {
      std::unique_lock<std::mutex> lock(mu);
      if (finish_requested || done) return false;
      Resp resp;
      if (!convert(ev, &resp)) return true;
      if (queue.size() >= limit) {
        FinishLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                  "watcher fell more than " + std::to_string(limit) +
                                      " events behind; resume with start_revision=" +
                                      std::to_string(ev.revision())),
                     lock);
        return false;
      }
      queue.push_back(std::move(resp));
      Pump(lock);
      return true;
    }

    void Pump(std::unique_lock<std::mutex>& lock) {
      if (writing || !reactor) return;
      if (!queue.empty() && (!finish_requested || drain_before_finish)) {
        writing = true;
        const Resp* msg = &queue.front();
        WatchReactor* r = reactor;
        lock.unlock();
        r->StartWrite(msg);
        lock.lock();
        return;
      }
      if (finish_requested && !finished) {
        finished = true;
        WatchReactor* r = reactor;
        grpc::Status s = final_status;
        lock.unlock();
        r->Finish(s);
        lock.lock();
      }
    }

    // Ends the stream with `s`; with `drain` after writing what is queued.
    void FinishLocked(grpc::Status s, std::unique_lock<std::mutex>& lock, bool drain = false) {
      if (finish_requested) return;
      finish_requested = true;
      drain_before_finish = drain;
      final_status = std::move(s);
      Pump(lock);
    }
  };

  std::shared_ptr<State> state_;
};

}  // namespace

// ---------------------------------------------------------------- fabric --

grpc::ServerUnaryReactor* FabricServiceImpl::GetTopology(grpc::CallbackServerContext* ctx,
                                                         const v1::GetTopologyRequest*,
                                                         v1::GetTopologyResponse* resp) {
  // The topology is immutable after load: answer directly.
  *resp->mutable_topology() = controller_.topology().topology();
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* FabricServiceImpl::ListLinks(grpc::CallbackServerContext* ctx,
                                                       const v1::ListLinksRequest* req,
                                                       v1::ListLinksResponse* resp) {
  return Unary(ctx, req, resp,
               [this](auto r, auto done) { controller_.ListLinks(std::move(r), std::move(done)); });
}

grpc::ServerUnaryReactor* FabricServiceImpl::GetLink(grpc::CallbackServerContext* ctx,
                                                     const v1::GetLinkRequest* req,
                                                     v1::GetLinkResponse* resp) {
  return Unary(ctx, req, resp,
               [this](auto r, auto done) { controller_.GetLink(std::move(r), std::move(done)); });
}

grpc::ServerUnaryReactor* FabricServiceImpl::DrainLink(grpc::CallbackServerContext* ctx,
                                                       const v1::DrainLinkRequest* req,
                                                       v1::DrainLinkResponse* resp) {
  if (Status s = loom::controller::ValidateRequestId(req->request_id()); !s.ok()) {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpc(s));
    return reactor;
  }
  return Unary(ctx, req, resp,
               [this](auto r, auto done) { controller_.DrainLink(std::move(r), std::move(done)); });
}

grpc::ServerUnaryReactor* FabricServiceImpl::UndrainLink(grpc::CallbackServerContext* ctx,
                                                         const v1::UndrainLinkRequest* req,
                                                         v1::UndrainLinkResponse* resp) {
  if (Status s = loom::controller::ValidateRequestId(req->request_id()); !s.ok()) {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpc(s));
    return reactor;
  }
  return Unary(ctx, req, resp, [this](auto r, auto done) {
    controller_.UndrainLink(std::move(r), std::move(done));
  });
}

grpc::ServerWriteReactor<v1::WatchEventsResponse>* FabricServiceImpl::WatchEvents(
    grpc::CallbackServerContext*, const v1::WatchEventsRequest* req) {
  std::set<int> types(req->types().begin(), req->types().end());
  std::string subject = req->subject();
  return new WatchReactor<v1::WatchEventsResponse>(
      controller_, req->start_revision(), !req->replay_only(),
      [types, subject](const v1::Event& ev, v1::WatchEventsResponse* out) {
        if (!types.empty() && !types.count(ev.type())) return false;
        if (!subject.empty() && ev.subject() != subject) return false;
        *out->mutable_event() = ev;
        return true;
      },
      options_.watch_queue_limit);
}

grpc::ServerUnaryReactor* FabricServiceImpl::ListDevices(grpc::CallbackServerContext* ctx,
                                                         const v1::ListDevicesRequest* req,
                                                         v1::ListDevicesResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!options_.list_devices) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no device inventory"));
    return reactor;
  }
  if (!req->device().empty() && controller_.topology().FindDevice(req->device()) == nullptr) {
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                                 "device: \"" + req->device() + "\" is not in the topology"));
    return reactor;
  }
  *resp = options_.list_devices(req->device());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* FabricServiceImpl::GetChangePlan(grpc::CallbackServerContext* ctx,
                                                           const v1::GetChangePlanRequest* req,
                                                           v1::GetChangePlanResponse* resp) {
  return Unary(ctx, req, resp, [this](auto, Done<v1::GetChangePlanResponse> done) {
    controller_.GetChangePlan([done = std::move(done)](Status s, v1::ChangePlan plan) {
      v1::GetChangePlanResponse r;
      *r.mutable_plan() = std::move(plan);
      done(s, std::move(r));
    });
  });
}

grpc::ServerUnaryReactor* FabricServiceImpl::ApplyChangePlan(grpc::CallbackServerContext* ctx,
                                                             const v1::ApplyChangePlanRequest* req,
                                                             v1::ApplyChangePlanResponse* resp) {
  return Unary(ctx, req, resp, [this](auto r, Done<v1::ApplyChangePlanResponse> done) {
    controller_.ApplyChangePlan(r.revision(),
                                [done = std::move(done)](Status s, v1::ChangePlan plan) {
                                  v1::ApplyChangePlanResponse out;
                                  *out.mutable_plan() = std::move(plan);
                                  done(s, std::move(out));
                                });
  });
}

grpc::ServerUnaryReactor* FabricServiceImpl::ClearChangeQuarantine(
    grpc::CallbackServerContext* ctx, const v1::ClearChangeQuarantineRequest* req,
    v1::ClearChangeQuarantineResponse* resp) {
  return Unary(ctx, req, resp, [this](auto r, Done<v1::ClearChangeQuarantineResponse> done) {
    controller_.ClearChangeQuarantine(r.revision(),
                                      [done = std::move(done)](Status s, v1::ChangePlan plan) {
                                        v1::ClearChangeQuarantineResponse out;
                                        *out.mutable_plan() = std::move(plan);
                                        done(s, std::move(out));
                                      });
  });
}

grpc::ServerUnaryReactor* FabricServiceImpl::GetDeviceState(grpc::CallbackServerContext* ctx,
                                                            const v1::GetDeviceStateRequest* req,
                                                            v1::GetDeviceStateResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!v1::ConfigFormat_IsValid(req->format())) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "format: unknown value " + std::to_string(req->format())));
    return reactor;
  }
  v1::ConfigFormat format = req->format();
  std::shared_ptr<loom::southbound::gnmi::SetAdapter> adapter;
  if (!req->adapter().empty()) {
    adapter = loom::southbound::gnmi::MakeSetAdapter(req->adapter());
    if (adapter == nullptr) {
      reactor->Finish(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                       "adapter: \"" + req->adapter() + "\" is not loom, sonic or openconfig"));
      return reactor;
    }
  }
  controller_.GetDeviceState(*req, [this, reactor, resp, format, adapter, device = req->device()](
                                       Status s, v1::GetDeviceStateResponse answer) {
    if (s.ok()) {
      *resp = std::move(answer);
      std::string preview;
      if (adapter != nullptr) {
        // What the platform adapter would send, with the mark per block.
        loom::southbound::gnmi::AdapterContext actx;
        actx.topology = &controller_.topology().topology();
        if (options_.adapter_context) options_.adapter_context(device, &actx);
        v1::DeviceState desired = resp->desired();
        desired.set_device(device);
        preview = loom::southbound::gnmi::FormatPreview(*adapter, adapter->Encode(desired, actx));
        resp->set_rendered(preview);
      }
      // The callback runs on the controller strand; rendering one device
      // is a few microseconds of string building.
      using loom::southbound::render::Vendor;
      if (format != v1::CONFIG_FORMAT_UNSPECIFIED) {
        Vendor v = format == v1::CONFIG_FORMAT_JUNOS  ? Vendor::kJunos
                   : format == v1::CONFIG_FORMAT_NXOS ? Vendor::kNxos
                                                      : Vendor::kSonic;
        resp->set_rendered(preview + (preview.empty() ? "" : "\n") +
                           loom::southbound::render::Render(resp->desired(),
                                                            controller_.topology().topology(), v));
      }
    }
    reactor->Finish(ToGrpc(s));
  });
  return reactor;
}

// ------------------------------------------------------------- scheduler --

namespace {

template <typename Req>
grpc::ServerUnaryReactor* RejectBadRequestId(grpc::CallbackServerContext* ctx, const Req* req) {
  if (Status s = loom::controller::ValidateRequestId(req->request_id()); !s.ok()) {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpc(s));
    return reactor;
  }
  return nullptr;
}

}  // namespace

grpc::ServerUnaryReactor* SchedulerServiceImpl::RegisterJob(grpc::CallbackServerContext* ctx,
                                                            const v1::RegisterJobRequest* req,
                                                            v1::RegisterJobResponse* resp) {
  if (auto* r = RejectBadRequestId(ctx, req)) return r;
  if (!req->has_job()) {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job: required"));
    return reactor;
  }
  // Stateless checks happen here, off the strand.
  if (Status s = loom::controller::ValidateJobSpec(req->job(), controller_.topology()); !s.ok()) {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpc(s));
    return reactor;
  }
  return Unary(ctx, req, resp, [this](auto r, auto done) {
    controller_.RegisterJob(std::move(r), std::move(done));
  });
}

grpc::ServerUnaryReactor* SchedulerServiceImpl::UpdateJob(grpc::CallbackServerContext* ctx,
                                                          const v1::UpdateJobRequest* req,
                                                          v1::UpdateJobResponse* resp) {
  if (auto* r = RejectBadRequestId(ctx, req)) return r;
  if (!req->has_job()) {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job: required"));
    return reactor;
  }
  return Unary(ctx, req, resp,
               [this](auto r, auto done) { controller_.UpdateJob(std::move(r), std::move(done)); });
}

grpc::ServerUnaryReactor* SchedulerServiceImpl::ReleaseJob(grpc::CallbackServerContext* ctx,
                                                           const v1::ReleaseJobRequest* req,
                                                           v1::ReleaseJobResponse* resp) {
  if (auto* r = RejectBadRequestId(ctx, req)) return r;
  return Unary(ctx, req, resp, [this](auto r, auto done) {
    controller_.ReleaseJob(std::move(r), std::move(done));
  });
}

grpc::ServerUnaryReactor* SchedulerServiceImpl::GetJob(grpc::CallbackServerContext* ctx,
                                                       const v1::GetJobRequest* req,
                                                       v1::GetJobResponse* resp) {
  return Unary(ctx, req, resp,
               [this](auto r, auto done) { controller_.GetJob(std::move(r), std::move(done)); });
}

grpc::ServerUnaryReactor* SchedulerServiceImpl::ListJobs(grpc::CallbackServerContext* ctx,
                                                         const v1::ListJobsRequest* req,
                                                         v1::ListJobsResponse* resp) {
  return Unary(ctx, req, resp,
               [this](auto r, auto done) { controller_.ListJobs(std::move(r), std::move(done)); });
}

grpc::ServerWriteReactor<v1::WatchJobsResponse>* SchedulerServiceImpl::WatchJobs(
    grpc::CallbackServerContext*, const v1::WatchJobsRequest* req) {
  std::string tenant = req->tenant();
  return new WatchReactor<v1::WatchJobsResponse>(
      controller_, req->start_revision(), !req->replay_only(),
      [tenant](const v1::Event& ev, v1::WatchJobsResponse* out) {
        v1::JobChange change;
        switch (ev.type()) {
          case v1::EVENT_TYPE_JOB_REGISTERED:
            change = v1::JOB_CHANGE_REGISTERED;
            break;
          case v1::EVENT_TYPE_JOB_UPDATED:
            change = v1::JOB_CHANGE_UPDATED;
            break;
          case v1::EVENT_TYPE_JOB_RELEASED:
            change = v1::JOB_CHANGE_RELEASED;
            break;
          default:
            return false;
        }
        if (!tenant.empty() && ev.job().tenant() != tenant) return false;
        out->set_revision(ev.revision());
        out->set_change(change);
        *out->mutable_job() = ev.job();
        return true;
      },
      options_.watch_queue_limit);
}

}  // namespace loom::api
