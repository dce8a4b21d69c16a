// gRPC services of loom.v1 on the callback API.
//
// Handlers run on gRPC threads: they validate what needs no state, post the
// request to the controller strand and return at once; the controller's
// callback finishes the RPC. Nothing here blocks. Watch streams are fed by a
// controller watch through a queue of at most `watch_buffer_bytes`: a client
// that falls behind is caught up from the event history when it reads again
// (or, with the controller's kCut policy, ended RESOURCE_EXHAUSTED with the
// revision to resume from); docs/watch.md has the resume protocol.
//
// Every method is registered raw (request and response as bytes): the request
// is parsed here, so a body that is not a valid message of the method's request
// type is answered INVALID_ARGUMENT naming the type. (gRPC 1.51's callback
// server answers such a body UNIMPLEMENTED with no message, as if the method
// did not exist.)
#ifndef LOOM_API_SERVICES_SERVICES_H_
#define LOOM_API_SERVICES_SERVICES_H_

#include <grpcpp/grpcpp.h>

#include <functional>

#include "api/services/auth.h"
#include "common/status.h"
#include "controller/core/controller.h"
#include "loom/v1/fabric_service.grpc.pb.h"
#include "loom/v1/scheduler_service.grpc.pb.h"
#include "southbound/gnmi/set_adapter.h"

namespace loom::api {

grpc::Status ToGrpc(const Status& s);

// Finishes a raw unary call: the response is serialized into the call's
// response buffer, then the call is finished with the status.
template <typename Resp>
class Reply {
 public:
  Reply(grpc::ServerUnaryReactor* reactor, grpc::ByteBuffer* out) : reactor_(reactor), out_(out) {}
  // Runs `f` with the final status just before the call is finished (audit).
  void OnFinish(std::function<void(const grpc::Status&)> f) {
    on_finish_ = std::make_shared<std::function<void(const grpc::Status&)>>(std::move(f));
  }
  void operator()(const grpc::Status& s, const Resp& resp) const {
    if (on_finish_) (*on_finish_)(s);
    if (s.ok()) {
      grpc::ByteBuffer bb;
      bool own = false;
      grpc::Status w = grpc::SerializationTraits<Resp>::Serialize(resp, &bb, &own);
      if (!w.ok()) {
        reactor_->Finish(
            grpc::Status(grpc::StatusCode::INTERNAL, "response: " + w.error_message()));
        return;
      }
      out_->Swap(&bb);
    }
    reactor_->Finish(s);
  }
  void Fail(const grpc::Status& s) const {
    if (on_finish_) (*on_finish_)(s);
    reactor_->Finish(s);
  }

 private:
  grpc::ServerUnaryReactor* reactor_;
  grpc::ByteBuffer* out_;
  std::shared_ptr<std::function<void(const grpc::Status&)>> on_finish_;
};

namespace internal {
namespace fs = loom::v1;
using FabricBase = fs::FabricService::WithRawCallbackMethod_GetTopology<
    fs::FabricService::WithRawCallbackMethod_ListLinks<
        fs::FabricService::WithRawCallbackMethod_GetLink<
            fs::FabricService::WithRawCallbackMethod_DrainLink<
                fs::FabricService::WithRawCallbackMethod_UndrainLink<
                    fs::FabricService::WithRawCallbackMethod_WatchEvents<
                        fs::FabricService::WithRawCallbackMethod_GetDeviceState<
                            fs::FabricService::WithRawCallbackMethod_ListDevices<
                                fs::FabricService::WithRawCallbackMethod_GetChangePlan<
                                    fs::FabricService::WithRawCallbackMethod_ApplyChangePlan<
                                        fs::FabricService::
                                            WithRawCallbackMethod_ClearChangeQuarantine<
                                                fs::FabricService::CallbackService>>>>>>>>>>>;
using SchedulerBase = fs::SchedulerService::WithRawCallbackMethod_RegisterJob<
    fs::SchedulerService::WithRawCallbackMethod_UpdateJob<
        fs::SchedulerService::WithRawCallbackMethod_ReleaseJob<
            fs::SchedulerService::WithRawCallbackMethod_GetJob<
                fs::SchedulerService::WithRawCallbackMethod_ListJobs<
                    fs::SchedulerService::WithRawCallbackMethod_WatchJobs<
                        fs::SchedulerService::WithRawCallbackMethod_GetJobHealth<
                            fs::SchedulerService::CallbackService>>>>>>>;
}  // namespace internal

struct ServiceOptions {
  // Serialized bytes queued per watch stream (beyond gRPC's own flow-control
  // window) before the controller stops feeding it live events.
  size_t watch_buffer_bytes = size_t{1} << 20;
  // ListDevices: every device with its telemetry source and signal states
  // (filled by loomd from the inventory and the collector; any thread, must
  // not block). Unset = UNIMPLEMENTED.
  std::function<loom::v1::ListDevicesResponse(const std::string& device)> list_devices;
  // GetDeviceState with `adapter`: fills what the topology does not know
  // (next-hop addresses from the inventory's BGP sessions, gNMI target).
  // Unset = topology only (routes then show as not expressed: no address).
  std::function<void(const std::string& device, loom::southbound::gnmi::AdapterContext* ctx)>
      adapter_context;
  // Authentication, authorization and audit (auth.h). Unset: every caller may
  // do everything and nothing is audited (unit tests).
  std::shared_ptr<ApiGuard> guard;
};

class FabricServiceImpl final : public internal::FabricBase {
 public:
  FabricServiceImpl(loom::controller::Controller& controller, ServiceOptions options = {})
      : controller_(controller), options_(options) {}

  grpc::ServerUnaryReactor* GetTopology(grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* req,
                                        grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ListLinks(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                      grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* req,
                                        grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* GetLink(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                    grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* DrainLink(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                      grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* UndrainLink(grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* req,
                                        grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* GetDeviceState(grpc::CallbackServerContext* ctx,
                                           const grpc::ByteBuffer* req,
                                           grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* GetChangePlan(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* req,
                                          grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ApplyChangePlan(grpc::CallbackServerContext* ctx,
                                            const grpc::ByteBuffer* req,
                                            grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ClearChangeQuarantine(grpc::CallbackServerContext* ctx,
                                                  const grpc::ByteBuffer* req,
                                                  grpc::ByteBuffer* resp) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchEvents(grpc::CallbackServerContext* ctx,
                                                          const grpc::ByteBuffer* req) override;

 private:
  void DoGetTopology(loom::v1::GetTopologyRequest req, Reply<loom::v1::GetTopologyResponse> reply,
                     const loom::controller::Caller& caller);
  void DoListLinks(loom::v1::ListLinksRequest req, Reply<loom::v1::ListLinksResponse> reply,
                   const loom::controller::Caller& caller);
  void DoListDevices(loom::v1::ListDevicesRequest req, Reply<loom::v1::ListDevicesResponse> reply,
                     const loom::controller::Caller& caller);
  void DoGetLink(loom::v1::GetLinkRequest req, Reply<loom::v1::GetLinkResponse> reply,
                 const loom::controller::Caller& caller);
  void DoDrainLink(loom::v1::DrainLinkRequest req, Reply<loom::v1::DrainLinkResponse> reply,
                   const loom::controller::Caller& caller);
  void DoUndrainLink(loom::v1::UndrainLinkRequest req, Reply<loom::v1::UndrainLinkResponse> reply,
                     const loom::controller::Caller& caller);
  void DoGetDeviceState(loom::v1::GetDeviceStateRequest req,
                        Reply<loom::v1::GetDeviceStateResponse> reply,
                        const loom::controller::Caller& caller);
  void DoGetChangePlan(loom::v1::GetChangePlanRequest req,
                       Reply<loom::v1::GetChangePlanResponse> reply,
                       const loom::controller::Caller& caller);
  void DoApplyChangePlan(loom::v1::ApplyChangePlanRequest req,
                         Reply<loom::v1::ApplyChangePlanResponse> reply,
                         const loom::controller::Caller& caller);
  void DoClearChangeQuarantine(loom::v1::ClearChangeQuarantineRequest req,
                               Reply<loom::v1::ClearChangeQuarantineResponse> reply,
                               const loom::controller::Caller& caller);
  grpc::ServerWriteReactor<grpc::ByteBuffer>* DoWatchEvents(const loom::v1::WatchEventsRequest& req,
                                                            const loom::controller::Caller& caller);

  loom::controller::Controller& controller_;
  ServiceOptions options_;
};

class SchedulerServiceImpl final : public internal::SchedulerBase {
 public:
  SchedulerServiceImpl(loom::controller::Controller& controller, ServiceOptions options = {})
      : controller_(controller), options_(options) {}

  grpc::ServerUnaryReactor* RegisterJob(grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* req,
                                        grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* UpdateJob(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                      grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ReleaseJob(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* req,
                                       grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                   grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                     grpc::ByteBuffer* resp) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchJobs(grpc::CallbackServerContext* ctx,
                                                        const grpc::ByteBuffer* req) override;
  grpc::ServerUnaryReactor* GetJobHealth(grpc::CallbackServerContext* ctx,
                                         const grpc::ByteBuffer* req,
                                         grpc::ByteBuffer* resp) override;

 private:
  void DoRegisterJob(loom::v1::RegisterJobRequest req, Reply<loom::v1::RegisterJobResponse> reply,
                     const loom::controller::Caller& caller);
  void DoUpdateJob(loom::v1::UpdateJobRequest req, Reply<loom::v1::UpdateJobResponse> reply,
                   const loom::controller::Caller& caller);
  void DoReleaseJob(loom::v1::ReleaseJobRequest req, Reply<loom::v1::ReleaseJobResponse> reply,
                    const loom::controller::Caller& caller);
  void DoGetJob(loom::v1::GetJobRequest req, Reply<loom::v1::GetJobResponse> reply,
                const loom::controller::Caller& caller);
  void DoListJobs(loom::v1::ListJobsRequest req, Reply<loom::v1::ListJobsResponse> reply,
                  const loom::controller::Caller& caller);
  void DoGetJobHealth(loom::v1::GetJobHealthRequest req,
                      Reply<loom::v1::GetJobHealthResponse> reply,
                      const loom::controller::Caller& caller);
  grpc::ServerWriteReactor<grpc::ByteBuffer>* DoWatchJobs(const loom::v1::WatchJobsRequest& req,
                                                          const loom::controller::Caller& caller);

  loom::controller::Controller& controller_;
  ServiceOptions options_;
};

}  // namespace loom::api

#endif  // LOOM_API_SERVICES_SERVICES_H_
