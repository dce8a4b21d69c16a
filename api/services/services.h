// gRPC services of loom.v1 on the callback API.
//
// Handlers run on gRPC threads: they validate what needs no state, post the
// request to the controller strand and return at once; the controller's
// callback finishes the RPC. Nothing here blocks. Watch streams are fed by a
// controller subscription through a bounded queue: a client that falls
// behind by more than `watch_queue_limit` events is ended with
// RESOURCE_EXHAUSTED and told which revision to resume from.
#ifndef LOOM_API_SERVICES_SERVICES_H_
#define LOOM_API_SERVICES_SERVICES_H_

#include <grpcpp/grpcpp.h>

#include <functional>

#include "common/status.h"
#include "controller/core/controller.h"
#include "loom/v1/fabric_service.grpc.pb.h"
#include "loom/v1/scheduler_service.grpc.pb.h"
#include "southbound/gnmi/set_adapter.h"

namespace loom::api {

grpc::Status ToGrpc(const Status& s);

struct ServiceOptions {
  size_t watch_queue_limit = 10'000;
  // ListDevices: every device with its telemetry source and signal states
  // (filled by loomd from the inventory and the collector; any thread, must
  // not block). Unset = UNIMPLEMENTED.
  std::function<loom::v1::ListDevicesResponse(const std::string& device)> list_devices;
  // GetDeviceState with `adapter`: fills what the topology does not know
  // (next-hop addresses from the inventory's BGP sessions, gNMI target).
  // Unset = topology only (routes then show as not expressed: no address).
  std::function<void(const std::string& device, loom::southbound::gnmi::AdapterContext* ctx)>
      adapter_context;
};

class FabricServiceImpl final : public loom::v1::FabricService::CallbackService {
 public:
  FabricServiceImpl(loom::controller::Controller& controller, ServiceOptions options = {})
      : controller_(controller), options_(options) {}

  grpc::ServerUnaryReactor* GetTopology(grpc::CallbackServerContext* ctx,
                                        const loom::v1::GetTopologyRequest* req,
                                        loom::v1::GetTopologyResponse* resp) override;
  grpc::ServerUnaryReactor* ListLinks(grpc::CallbackServerContext* ctx,
                                      const loom::v1::ListLinksRequest* req,
                                      loom::v1::ListLinksResponse* resp) override;
  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* ctx,
                                        const loom::v1::ListDevicesRequest* req,
                                        loom::v1::ListDevicesResponse* resp) override;
  grpc::ServerUnaryReactor* GetLink(grpc::CallbackServerContext* ctx,
                                    const loom::v1::GetLinkRequest* req,
                                    loom::v1::GetLinkResponse* resp) override;
  grpc::ServerUnaryReactor* DrainLink(grpc::CallbackServerContext* ctx,
                                      const loom::v1::DrainLinkRequest* req,
                                      loom::v1::DrainLinkResponse* resp) override;
  grpc::ServerUnaryReactor* UndrainLink(grpc::CallbackServerContext* ctx,
                                        const loom::v1::UndrainLinkRequest* req,
                                        loom::v1::UndrainLinkResponse* resp) override;
  grpc::ServerWriteReactor<loom::v1::WatchEventsResponse>* WatchEvents(
      grpc::CallbackServerContext* ctx, const loom::v1::WatchEventsRequest* req) override;
  grpc::ServerUnaryReactor* GetDeviceState(grpc::CallbackServerContext* ctx,
                                           const loom::v1::GetDeviceStateRequest* req,
                                           loom::v1::GetDeviceStateResponse* resp) override;
  grpc::ServerUnaryReactor* GetChangePlan(grpc::CallbackServerContext* ctx,
                                          const loom::v1::GetChangePlanRequest* req,
                                          loom::v1::GetChangePlanResponse* resp) override;
  grpc::ServerUnaryReactor* ApplyChangePlan(grpc::CallbackServerContext* ctx,
                                            const loom::v1::ApplyChangePlanRequest* req,
                                            loom::v1::ApplyChangePlanResponse* resp) override;
  grpc::ServerUnaryReactor* ClearChangeQuarantine(
      grpc::CallbackServerContext* ctx, const loom::v1::ClearChangeQuarantineRequest* req,
      loom::v1::ClearChangeQuarantineResponse* resp) override;

 private:
  loom::controller::Controller& controller_;
  ServiceOptions options_;
};

class SchedulerServiceImpl final : public loom::v1::SchedulerService::CallbackService {
 public:
  SchedulerServiceImpl(loom::controller::Controller& controller, ServiceOptions options = {})
      : controller_(controller), options_(options) {}

  grpc::ServerUnaryReactor* RegisterJob(grpc::CallbackServerContext* ctx,
                                        const loom::v1::RegisterJobRequest* req,
                                        loom::v1::RegisterJobResponse* resp) override;
  grpc::ServerUnaryReactor* UpdateJob(grpc::CallbackServerContext* ctx,
                                      const loom::v1::UpdateJobRequest* req,
                                      loom::v1::UpdateJobResponse* resp) override;
  grpc::ServerUnaryReactor* ReleaseJob(grpc::CallbackServerContext* ctx,
                                       const loom::v1::ReleaseJobRequest* req,
                                       loom::v1::ReleaseJobResponse* resp) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* ctx,
                                   const loom::v1::GetJobRequest* req,
                                   loom::v1::GetJobResponse* resp) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* ctx,
                                     const loom::v1::ListJobsRequest* req,
                                     loom::v1::ListJobsResponse* resp) override;
  grpc::ServerWriteReactor<loom::v1::WatchJobsResponse>* WatchJobs(
      grpc::CallbackServerContext* ctx, const loom::v1::WatchJobsRequest* req) override;

 private:
  loom::controller::Controller& controller_;
  ServiceOptions options_;
};

}  // namespace loom::api

#endif  // LOOM_API_SERVICES_SERVICES_H_
