#include "api/services/services.h"

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/text.h"
#include "controller/core/job_validation.h"
#include "controller/core/request_limits.h"
#include "loom/v1/error_details.pb.h"
#include "southbound/gnmi/set_adapter.h"
#include "southbound/render/render.h"

namespace loom::api {

namespace v1 = loom::v1;
using loom::controller::Caller;
using loom::controller::Controller;

namespace {

// "job.endpoints[2]" from "job.endpoints[2]: not in the topology"; "" when the
// message does not start with a field path.
std::string FieldOf(const std::string& message) {
  const size_t colon = message.find(": ");
  if (colon == std::string::npos || colon == 0 || colon > 200) return "";
  for (size_t i = 0; i < colon; ++i) {
    const char c = message[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                    c == '[' || c == ']';
    if (!ok) return "";
  }
  return message.front() >= 'a' && message.front() <= 'z' ? message.substr(0, colon) : "";
}

}  // namespace

grpc::Status ToGrpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  const auto code = static_cast<grpc::StatusCode>(s.code());
  const std::string field =
      s.code() == StatusCode::kInvalidArgument ? FieldOf(s.message()) : std::string();
  if (field.empty()) return grpc::Status(code, s.message());
  // The richer error model (AIP-193): a BadRequest naming the field, for clients
  // that read google.rpc details (grpcio-status, grpc-go status.Details).
  v1::BadRequest bad;
  auto* v = bad.add_field_violations();
  v->set_field(field);
  v->set_description(s.message().substr(field.size() + 2));
  v1::RpcStatus rpc;
  rpc.set_code(static_cast<int>(s.code()));
  rpc.set_message(s.message());
  auto* any = rpc.add_details();
  any->set_type_url("type.googleapis.com/google.rpc.BadRequest");
  any->set_value(bad.SerializeAsString());
  return grpc::Status(code, s.message(), rpc.SerializeAsString());
}

namespace {

// Runs `call(request, done)` on the controller and finishes the unary RPC
// with the answer. The request is copied because the controller runs later.
template <typename T>
using Done = std::function<void(Status, T)>;

template <typename Req, typename Resp, typename Call>
void Unary(Req req, Reply<Resp> reply, Call call) {
  call(std::move(req), [reply](Status s, Resp answer) { reply(ToGrpc(s), answer); });
}

// Parses a raw request body as `Req`; INVALID_ARGUMENT naming the type when it
// is not one.
template <typename Req>
Status ParseRequest(const grpc::ByteBuffer* in, Req* req) {
  std::string bytes;
  if (in != nullptr && in->Length() > 0) {
    std::vector<grpc::Slice> slices;
    if (!in->Dump(&slices).ok()) return InvalidArgument("request body: unreadable");
    bytes.reserve(in->Length());
    for (const auto& sl : slices) {
      bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
    }
  }
  if (!req->ParseFromString(bytes)) {
    return InvalidArgument("request body: not a valid " +
                           std::string(Req::descriptor()->full_name()) + " (" +
                           std::to_string(bytes.size()) + " bytes of malformed protobuf)");
  }
  return Status::Ok();
}

// What an audit record names of a request: its subject and tenant.
template <typename Req>
std::pair<std::string, std::string> AuditSubject(const Req&) {
  return {};
}
std::pair<std::string, std::string> AuditSubject(const v1::RegisterJobRequest& r) {
  return {r.job().job_id(), r.job().tenant()};
}
std::pair<std::string, std::string> AuditSubject(const v1::UpdateJobRequest& r) {
  return {r.job().job_id(), r.job().tenant()};
}
std::pair<std::string, std::string> AuditSubject(const v1::ReleaseJobRequest& r) {
  return {r.job_id(), ""};
}
std::pair<std::string, std::string> AuditSubject(const v1::GetJobRequest& r) {
  return {r.job_id(), ""};
}
std::pair<std::string, std::string> AuditSubject(const v1::GetJobHealthRequest& r) {
  return {r.job_id(), ""};
}
std::pair<std::string, std::string> AuditSubject(const v1::ListJobsRequest& r) {
  return {"", r.tenant()};
}
std::pair<std::string, std::string> AuditSubject(const v1::DrainLinkRequest& r) {
  return {r.link_id(), ""};
}
std::pair<std::string, std::string> AuditSubject(const v1::UndrainLinkRequest& r) {
  return {r.link_id(), ""};
}
std::pair<std::string, std::string> AuditSubject(const v1::ApplyChangePlanRequest& r) {
  return {"change-" + std::to_string(r.revision()), ""};
}
std::pair<std::string, std::string> AuditSubject(const v1::ClearChangeQuarantineRequest& r) {
  return {"change-" + std::to_string(r.revision()), ""};
}

// Admits the call (authentication, the method's permission); fills `caller`.
// Without a guard every caller is "anonymous" with every permission.
Status AdmitCall(const ApiGuard* guard, const grpc::CallbackServerContext* ctx, const char* method,
                 const std::string& subject, Caller* caller) {
  if (guard == nullptr) {
    caller->identity = "anonymous";
    caller->peer = ctx->peer();
    return Status::Ok();
  }
  return guard->Admit(*ctx, method, subject, caller);
}

template <typename Req, typename Resp, typename Handler>
grpc::ServerUnaryReactor* RawUnary(const ApiGuard* guard, const char* method,
                                   grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* in,
                                   grpc::ByteBuffer* out, Handler handler) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  Req req;
  const Status parsed = ParseRequest(in, &req);
  // Authentication comes first: an unauthenticated caller learns nothing, not
  // even whether its request parses.
  auto [subject, tenant] = parsed.ok() ? AuditSubject(req) : std::pair<std::string, std::string>();
  if (subject.size() > 128) subject = subject.substr(0, 128) + "...";
  Caller caller;
  if (Status s = AdmitCall(guard, ctx, method, subject, &caller); !s.ok()) {
    reactor->Finish(ToGrpc(s));
    return reactor;
  }
  Reply<Resp> reply(reactor, out);
  if (guard != nullptr) {
    reply.OnFinish([guard, caller, method, subject = std::move(subject),
                    tenant = std::move(tenant)](const grpc::Status& st) {
      guard->Finished(caller, method, subject, tenant, st);
    });
  }
  if (!parsed.ok()) {
    reply.Fail(ToGrpc(parsed));
    return reactor;
  }
  handler(std::move(req), reply, caller);
  return reactor;
}

// A stream that ends at once with `status` (its request was not valid).
class FailedStream final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit FailedStream(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

template <typename Req, typename Handler>
grpc::ServerWriteReactor<grpc::ByteBuffer>* RawStream(const ApiGuard* guard, const char* method,
                                                      grpc::CallbackServerContext* ctx,
                                                      const grpc::ByteBuffer* in, Handler handler) {
  Caller caller;
  if (Status s = AdmitCall(guard, ctx, method, "", &caller); !s.ok()) {
    return new FailedStream(ToGrpc(s));
  }
  Req req;
  if (Status s = ParseRequest(in, &req); !s.ok()) return new FailedStream(ToGrpc(s));
  if (Status s = loom::controller::ValidateRequest(req); !s.ok()) {
    return new FailedStream(ToGrpc(s));
  }
  return handler(req, caller);
}

// The status a watch ends with, details included: an ErrorInfo (wire-identical
// to google.rpc.ErrorInfo) in grpc-status-details-bin naming the revision to
// resume from or the compacted one (error_details.proto).
grpc::Status WatchEndStatus(const Status& s, const Controller::WatchEnd& end) {
  if (s.ok()) return grpc::Status::OK;
  v1::ErrorInfo info;
  info.set_domain("loom.v1");
  auto& md = *info.mutable_metadata();
  md["current_revision"] = std::to_string(end.current_revision);
  if (s.code() == StatusCode::kOutOfRange) {
    if (end.compacted_revision > 0) {
      info.set_reason("REVISION_COMPACTED");
      md["compacted_revision"] = std::to_string(end.compacted_revision);
    } else {
      info.set_reason("REVISION_AHEAD");
    }
  } else if (end.resume_revision > 0) {
    info.set_reason(s.code() == StatusCode::kResourceExhausted ? "WATCHER_TOO_SLOW"
                                                               : "EVENT_LOG_UNREADABLE");
    md["resume_revision"] = std::to_string(end.resume_revision);
  } else {
    return ToGrpc(s);
  }
  v1::RpcStatus rpc;
  rpc.set_code(static_cast<int>(s.code()));
  rpc.set_message(s.message());
  auto* any = rpc.add_details();
  any->set_type_url("type.googleapis.com/google.rpc.ErrorInfo");
  any->set_value(info.SerializeAsString());
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), s.message(),
                      rpc.SerializeAsString());
}

// A server stream fed by a controller watch through a queue bounded in bytes.
// When the queue is full the controller stops feeding it live events; once
// half of it is written the controller catches it up from the event history
// (Controller::Watch). The queue and flags live in a shared State so the
// controller's callbacks can outlive the reactor (gRPC deletes it in OnDone).
// Encodes a watch response for an event into `out` (its size in `size`);
// returns false to skip the event.
using WatchEncode = std::function<bool(const v1::Event&, const Controller::EventBytes&,
                                       grpc::ByteBuffer* out, size_t* size)>;

// A response message `Resp` built by `fill` and serialized.
template <typename Resp>
WatchEncode EncodeMessage(std::function<bool(const v1::Event&, Resp*)> fill) {
  return [fill](const v1::Event& ev, const Controller::EventBytes&, grpc::ByteBuffer* out,
                size_t* size) {
    Resp resp;
    if (!fill(ev, &resp)) return false;
    *size = resp.ByteSizeLong();
    bool own = false;
    return grpc::SerializationTraits<Resp>::Serialize(resp, out, &own).ok();
  };
}

// WatchEventsResponse{event = 1}: a two-byte-ish header and the event's shared
// serialized bytes, referenced (not copied) by the outgoing buffer.
bool EncodeWatchEventsResponse(const Controller::EventBytes& wire, grpc::ByteBuffer* out,
                               size_t* size) {
  std::string header(1, '\x0a');  // field 1, length-delimited
  for (uint64_t n = wire->size();; n >>= 7) {
    if (n < 0x80) {
      header.push_back(static_cast<char>(n));
      break;
    }
    header.push_back(static_cast<char>((n & 0x7f) | 0x80));
  }
  auto* keep = new Controller::EventBytes(wire);
  grpc::Slice slices[2] = {
      grpc::Slice(header),
      grpc::Slice(
          const_cast<char*>((*keep)->data()), (*keep)->size(),
          [](void* p) { delete static_cast<Controller::EventBytes*>(p); }, keep)};
  *out = grpc::ByteBuffer(slices, 2);
  *size = header.size() + wire->size();
  return true;
}

class WatchReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  using Convert = WatchEncode;

  WatchReactor(Controller& controller, uint64_t start_revision, bool follow, Convert convert,
               size_t limit_bytes)
      : state_(std::make_shared<State>()) {
    state_->reactor = this;
    state_->convert = std::move(convert);
    state_->limit = limit_bytes;
    state_->controller = &controller;
    std::shared_ptr<State> st = state_;
    Controller::Watcher w;
    w.offer = [st](const v1::Event& ev, const Controller::EventBytes& wire) {
      return st->Offer(ev, wire);
    };
    w.end = [st](const Status& s, const Controller::WatchEnd& end) { st->End(s, end); };
    std::lock_guard<std::mutex> lock(st->mu);
    st->subscription = controller.Watch(start_revision, follow, std::move(w));
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->writing = false;
    if (!ok) {
      // The stream is dead (client gone, call cancelled, server shutting down):
      // drop what is queued and finish now. The finish may already have been
      // requested (OnCancel during the write): it must still happen, or the
      // reactor never completes and grpc::Server::Shutdown waits forever.
      state_->queue.clear();
      state_->queue_bytes = 0;
      state_->drain_before_finish = false;
      if (!state_->finish_requested) {
        state_->finish_requested = true;
        state_->final_status = grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      }
      state_->Pump(lock);
      return;
    }
    state_->queue_bytes -= state_->queue.front().bytes;
    state_->queue.pop_front();
    if (state_->wants_resume && state_->queue_bytes <= state_->limit / 2 &&
        !state_->finish_requested) {
      state_->wants_resume = false;
      state_->controller->ResumeWatch(state_->subscription);  // posts; never blocks
    }
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
      state_->controller->Unsubscribe(state_->subscription);
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
    // front() is being written while `writing`
    struct Item {
      grpc::ByteBuffer buffer;
      uint64_t revision = 0;
      size_t bytes = 0;
    };
    std::deque<Item> queue;
    size_t queue_bytes = 0;
    bool wants_resume = false;  // answered kFull: ResumeWatch once half is written
    bool writing = false;
    bool finish_requested = false;
    bool drain_before_finish = false;
    bool finished = false;
    bool done = false;
    grpc::Status final_status;
    uint64_t subscription = 0;

    // Called on the controller strand for every event.
    Controller::Offer Offer(const v1::Event& ev, const Controller::EventBytes& wire) {
      std::unique_lock<std::mutex> lock(mu);
      if (finish_requested || done) return Controller::Offer::kClosed;
      if (!queue.empty() && queue_bytes + wire->size() > limit) {
        // Full (judged by the event's size, known before encoding). The queue
        // must be moving for a resume to come: make sure a write is in flight.
        wants_resume = true;
        Pump(lock);
        return Controller::Offer::kFull;
      }
      grpc::ByteBuffer bytes;
      size_t size = 0;
      if (!convert(ev, wire, &bytes, &size)) return Controller::Offer::kTaken;
      queue.push_back({std::move(bytes), ev.revision(), size});
      queue_bytes += size;
      Pump(lock);
      return Controller::Offer::kTaken;
    }

    // Called on the strand when the controller ends the watch.
    void End(const Status& s, Controller::WatchEnd end) {
      std::unique_lock<std::mutex> lock(mu);
      if (s.ok()) {
        // A replay-only watch: complete once the queued replay is written.
        FinishLocked(grpc::Status::OK, lock, /*drain=*/true);
        return;
      }
      if (end.resume_revision > 0 && !queue.empty()) {
        // Ended at once (a slow client may never drain its queue): it resumes
        // from the first event it may not have received, the one in flight.
        end.resume_revision = std::min(end.resume_revision, queue.front().revision);
      }
      // What is queued is dropped; the event being written stays until its
      // write completes (gRPC holds a pointer to it).
      while (queue.size() > (writing ? 1 : 0)) {
        queue_bytes -= queue.back().bytes;
        queue.pop_back();
      }
      Status msg = s;
      if (s.code() == StatusCode::kResourceExhausted || s.code() == StatusCode::kUnavailable) {
        msg = Status(s.code(), s.message().substr(0, s.message().rfind("start_revision=")) +
                                   "start_revision=" + std::to_string(end.resume_revision));
      }
      FinishLocked(WatchEndStatus(msg, end), lock);
    }

    void Pump(std::unique_lock<std::mutex>& lock) {
      if (writing || !reactor) return;
      if (!queue.empty() && (!finish_requested || drain_before_finish)) {
        writing = true;
        const grpc::ByteBuffer* msg = &queue.front().buffer;
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

// Raw entry points: parse, then the typed handler.
#define LOOM_RAW_UNARY(Class, Method)                                                              \
  grpc::ServerUnaryReactor* Class::Method(grpc::CallbackServerContext* ctx,                        \
                                          const grpc::ByteBuffer* in, grpc::ByteBuffer* out) {     \
    return RawUnary<v1::Method##Request, v1::Method##Response>(                                    \
        options_.guard.get(), #Method, ctx, in, out,                                               \
        [this](v1::Method##Request req, Reply<v1::Method##Response> reply, const Caller& caller) { \
          Do##Method(std::move(req), reply, caller);                                               \
        });                                                                                        \
  }
LOOM_RAW_UNARY(FabricServiceImpl, GetTopology)
LOOM_RAW_UNARY(FabricServiceImpl, ListLinks)
LOOM_RAW_UNARY(FabricServiceImpl, ListDevices)
LOOM_RAW_UNARY(FabricServiceImpl, GetLink)
LOOM_RAW_UNARY(FabricServiceImpl, DrainLink)
LOOM_RAW_UNARY(FabricServiceImpl, UndrainLink)
LOOM_RAW_UNARY(FabricServiceImpl, GetDeviceState)
LOOM_RAW_UNARY(FabricServiceImpl, GetChangePlan)
LOOM_RAW_UNARY(FabricServiceImpl, ApplyChangePlan)
LOOM_RAW_UNARY(FabricServiceImpl, ClearChangeQuarantine)
LOOM_RAW_UNARY(SchedulerServiceImpl, RegisterJob)
LOOM_RAW_UNARY(SchedulerServiceImpl, UpdateJob)
LOOM_RAW_UNARY(SchedulerServiceImpl, ReleaseJob)
LOOM_RAW_UNARY(SchedulerServiceImpl, GetJob)
LOOM_RAW_UNARY(SchedulerServiceImpl, ListJobs)
LOOM_RAW_UNARY(SchedulerServiceImpl, GetJobHealth)
#undef LOOM_RAW_UNARY

grpc::ServerWriteReactor<grpc::ByteBuffer>* FabricServiceImpl::WatchEvents(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* in) {
  return RawStream<v1::WatchEventsRequest>(
      options_.guard.get(), "WatchEvents", ctx, in,
      [this](const v1::WatchEventsRequest& req, const Caller& caller) {
        return DoWatchEvents(req, caller);
      });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* SchedulerServiceImpl::WatchJobs(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* in) {
  return RawStream<v1::WatchJobsRequest>(
      options_.guard.get(), "WatchJobs", ctx, in,
      [this](const v1::WatchJobsRequest& req, const Caller& caller) {
        if (!req.tenant().empty() && !caller.Allows(req.tenant())) {
          Status s = caller.DenyTenant("jobs.read", req.tenant());
          if (options_.guard)
            options_.guard->Finished(caller, "WatchJobs", "", req.tenant(), ToGrpc(s));
          return static_cast<grpc::ServerWriteReactor<grpc::ByteBuffer>*>(
              new FailedStream(ToGrpc(s)));
        }
        return DoWatchJobs(req, caller);
      });
}

// ---------------------------------------------------------------- fabric --

void FabricServiceImpl::DoGetTopology(v1::GetTopologyRequest, Reply<v1::GetTopologyResponse> reply,
                                      const Caller&) {
  // The topology is immutable after load: answer directly.
  v1::GetTopologyResponse resp;
  *resp.mutable_topology() = controller_.topology().topology();
  reply(grpc::Status::OK, resp);
}

void FabricServiceImpl::DoListLinks(v1::ListLinksRequest req, Reply<v1::ListLinksResponse> reply,
                                    const Caller&) {
  if (Status s = loom::controller::ValidateRequest(req); !s.ok()) return reply.Fail(ToGrpc(s));
  Unary(std::move(req), reply,
        [this](auto r, auto done) { controller_.ListLinks(std::move(r), std::move(done)); });
}

void FabricServiceImpl::DoGetLink(v1::GetLinkRequest req, Reply<v1::GetLinkResponse> reply,
                                  const Caller&) {
  if (Status s = loom::controller::ValidateRequest(req); !s.ok()) return reply.Fail(ToGrpc(s));
  Unary(std::move(req), reply,
        [this](auto r, auto done) { controller_.GetLink(std::move(r), std::move(done)); });
}

void FabricServiceImpl::DoDrainLink(v1::DrainLinkRequest req, Reply<v1::DrainLinkResponse> reply,
                                    const Caller& caller) {
  if (Status s = loom::controller::ValidateRequest(req); !s.ok()) return reply.Fail(ToGrpc(s));
  Unary(std::move(req), reply, [this, caller](auto r, auto done) {
    controller_.DrainLink(std::move(r), std::move(done), caller);
  });
}

void FabricServiceImpl::DoUndrainLink(v1::UndrainLinkRequest req,
                                      Reply<v1::UndrainLinkResponse> reply, const Caller& caller) {
  if (Status s = loom::controller::ValidateRequest(req); !s.ok()) return reply.Fail(ToGrpc(s));
  Unary(std::move(req), reply, [this, caller](auto r, auto done) {
    controller_.UndrainLink(std::move(r), std::move(done), caller);
  });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* FabricServiceImpl::DoWatchEvents(
    const v1::WatchEventsRequest& req, const Caller& caller) {
  std::set<int> types(req.types().begin(), req.types().end());
  std::string subject = req.subject();
  std::optional<std::set<std::string>> scope = caller.tenants;
  std::string identity = caller.identity;
  return new WatchReactor(
      controller_, req.start_revision(), !req.replay_only(),
      [types, subject, scope, identity](const v1::Event& ev, const Controller::EventBytes& wire,
                                        grpc::ByteBuffer* out, size_t* size) {
        if (!types.empty() && !types.count(ev.type())) return false;
        if (!subject.empty() && ev.subject() != subject) return false;
        if (!scope) return EncodeWatchEventsResponse(wire, out, size);
        v1::Event mine;
        switch (loom::controller::ScopeEvent(ev, *scope, identity, &mine)) {
          case loom::controller::Visibility::kHidden:
            return false;
          case loom::controller::Visibility::kWhole:
            return EncodeWatchEventsResponse(wire, out, size);
          case loom::controller::Visibility::kRedacted:
            break;
        }
        v1::WatchEventsResponse resp;
        *resp.mutable_event() = std::move(mine);
        *size = resp.ByteSizeLong();
        bool own = false;
        return grpc::SerializationTraits<v1::WatchEventsResponse>::Serialize(resp, out, &own).ok();
      },
      options_.watch_buffer_bytes);
}

void FabricServiceImpl::DoListDevices(v1::ListDevicesRequest req,
                                      Reply<v1::ListDevicesResponse> reply, const Caller&) {
  if (Status s = loom::controller::ValidateRequest(req); !s.ok()) return reply.Fail(ToGrpc(s));
  if (!options_.list_devices) {
    return reply.Fail(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no device inventory"));
  }
  if (!req.device().empty() && controller_.topology().FindDevice(req.device()) == nullptr) {
    return reply.Fail(grpc::Status(grpc::StatusCode::NOT_FOUND,
                                   "device: \"" + req.device() + "\" is not in the topology"));
  }
  reply(grpc::Status::OK, options_.list_devices(req.device()));
}

// A change plan answered as the response `Resp` (its `plan` field).
template <typename Resp>
Controller::Done<v1::ChangePlan> PlanAnswer(Done<Resp> done) {
  return [done = std::move(done)](Status s, v1::ChangePlan plan) {
    Resp out;
    *out.mutable_plan() = std::move(plan);
    done(s, std::move(out));
  };
}

void FabricServiceImpl::DoGetChangePlan(v1::GetChangePlanRequest req,
                                        Reply<v1::GetChangePlanResponse> reply, const Caller&) {
  Unary(std::move(req), reply, [this](auto, Done<v1::GetChangePlanResponse> done) {
    controller_.GetChangePlan(PlanAnswer(std::move(done)));
  });
}

void FabricServiceImpl::DoApplyChangePlan(v1::ApplyChangePlanRequest req,
                                          Reply<v1::ApplyChangePlanResponse> reply,
                                          const Caller& caller) {
  Unary(std::move(req), reply, [this, caller](auto r, Done<v1::ApplyChangePlanResponse> done) {
    controller_.ApplyChangePlan(r.revision(), PlanAnswer(std::move(done)), caller);
  });
}

void FabricServiceImpl::DoClearChangeQuarantine(v1::ClearChangeQuarantineRequest req,
                                                Reply<v1::ClearChangeQuarantineResponse> reply,
                                                const Caller& caller) {
  Unary(std::move(req), reply,
        [this, caller](auto r, Done<v1::ClearChangeQuarantineResponse> done) {
          controller_.ClearChangeQuarantine(r.revision(), PlanAnswer(std::move(done)), caller);
        });
}

void FabricServiceImpl::DoGetDeviceState(v1::GetDeviceStateRequest req,
                                         Reply<v1::GetDeviceStateResponse> reply, const Caller&) {
  if (Status s = loom::controller::ValidateRequest(req); !s.ok()) return reply.Fail(ToGrpc(s));
  if (!v1::ConfigFormat_IsValid(req.format())) {
    return reply.Fail(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                   "format: unknown value " + std::to_string(req.format())));
  }
  v1::ConfigFormat format = req.format();
  std::shared_ptr<loom::southbound::gnmi::SetAdapter> adapter;
  if (!req.adapter().empty()) {
    adapter = loom::southbound::gnmi::MakeSetAdapter(req.adapter());
    if (adapter == nullptr) {
      return reply.Fail(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          "adapter: " + loom::QuoteInput(req.adapter()) + " is not loom, sonic or openconfig"));
    }
  }
  controller_.GetDeviceState(req, [this, reply, format, adapter, device = req.device()](
                                      Status s, v1::GetDeviceStateResponse resp) {
    if (s.ok()) {
      std::string preview;
      if (adapter != nullptr) {
        // What the platform adapter would send, with the mark per block.
        loom::southbound::gnmi::AdapterContext actx;
        actx.topology = &controller_.topology().topology();
        if (options_.adapter_context) options_.adapter_context(device, &actx);
        v1::DeviceState desired = resp.desired();
        desired.set_device(device);
        preview = loom::southbound::gnmi::FormatPreview(*adapter, adapter->Encode(desired, actx));
        resp.set_rendered(preview);
      }
      // The callback runs on the controller strand; rendering one device
      // is a few microseconds of string building.
      using loom::southbound::render::Vendor;
      if (format != v1::CONFIG_FORMAT_UNSPECIFIED) {
        Vendor v = format == v1::CONFIG_FORMAT_JUNOS  ? Vendor::kJunos
                   : format == v1::CONFIG_FORMAT_NXOS ? Vendor::kNxos
                                                      : Vendor::kSonic;
        resp.set_rendered(
            preview + (preview.empty() ? "" : "\n") +
            loom::southbound::render::Render(resp.desired(), controller_.topology().topology(), v));
      }
    }
    reply(ToGrpc(s), resp);
  });
}

// ------------------------------------------------------------- scheduler --

void SchedulerServiceImpl::DoRegisterJob(v1::RegisterJobRequest req,
                                         Reply<v1::RegisterJobResponse> reply,
                                         const Caller& caller) {
  if (Status s = loom::controller::ValidateRequestId(req.request_id()); !s.ok()) {
    return reply.Fail(ToGrpc(s));
  }
  if (!req.has_job()) {
    return reply.Fail(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job: required"));
  }
  // Stateless checks happen here, off the strand.
  if (Status s = loom::controller::ValidateJobSpec(req.job(), controller_.topology()); !s.ok()) {
    return reply.Fail(ToGrpc(s));
  }
  Unary(std::move(req), reply, [this, caller](auto r, auto done) {
    controller_.RegisterJob(std::move(r), std::move(done), caller);
  });
}

void SchedulerServiceImpl::DoUpdateJob(v1::UpdateJobRequest req, Reply<v1::UpdateJobResponse> reply,
                                       const Caller& caller) {
  if (Status s = loom::controller::ValidateRequestId(req.request_id()); !s.ok()) {
    return reply.Fail(ToGrpc(s));
  }
  if (!req.has_job()) {
    return reply.Fail(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job: required"));
  }
  Unary(std::move(req), reply, [this, caller](auto r, auto done) {
    controller_.UpdateJob(std::move(r), std::move(done), caller);
  });
}

void SchedulerServiceImpl::DoReleaseJob(v1::ReleaseJobRequest req,
                                        Reply<v1::ReleaseJobResponse> reply, const Caller& caller) {
  if (Status s = loom::controller::ValidateRequest(req); !s.ok()) return reply.Fail(ToGrpc(s));
  Unary(std::move(req), reply, [this, caller](auto r, auto done) {
    controller_.ReleaseJob(std::move(r), std::move(done), caller);
  });
}

void SchedulerServiceImpl::DoGetJob(v1::GetJobRequest req, Reply<v1::GetJobResponse> reply,
                                    const Caller& caller) {
  if (Status s = loom::controller::ValidateRequest(req); !s.ok()) return reply.Fail(ToGrpc(s));
  Unary(std::move(req), reply, [this, caller](auto r, auto done) {
    controller_.GetJob(std::move(r), std::move(done), caller);
  });
}

void SchedulerServiceImpl::DoGetJobHealth(v1::GetJobHealthRequest req,
                                          Reply<v1::GetJobHealthResponse> reply,
                                          const Caller& caller) {
  if (Status s = loom::controller::ValidateRequest(req); !s.ok()) return reply.Fail(ToGrpc(s));
  Unary(std::move(req), reply, [this, caller](auto r, auto done) {
    controller_.GetJobHealth(std::move(r), std::move(done), caller);
  });
}

void SchedulerServiceImpl::DoListJobs(v1::ListJobsRequest req, Reply<v1::ListJobsResponse> reply,
                                      const Caller& caller) {
  if (Status s = loom::controller::ValidateRequest(req); !s.ok()) return reply.Fail(ToGrpc(s));
  Unary(std::move(req), reply, [this, caller](auto r, auto done) {
    controller_.ListJobs(std::move(r), std::move(done), caller);
  });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* SchedulerServiceImpl::DoWatchJobs(
    const v1::WatchJobsRequest& req, const Caller& caller) {
  std::string tenant = req.tenant();
  std::optional<std::set<std::string>> scope = caller.tenants;
  return new WatchReactor(controller_, req.start_revision(), !req.replay_only(),
                          EncodeMessage<v1::WatchJobsResponse>(
                              [tenant, scope](const v1::Event& ev, v1::WatchJobsResponse* out) {
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
                                if (scope && !scope->count(ev.job().tenant())) return false;
                                out->set_revision(ev.revision());
                                out->set_change(change);
                                *out->mutable_job() = ev.job();
                                return true;
                              }),
                          options_.watch_buffer_bytes);
}

}  // namespace loom::api
