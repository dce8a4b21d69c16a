// The gRPC server of loomd: loom.v1 services, grpc.health.v1, server
// reflection and request metrics.
//
// Start() binds and returns; gRPC runs handlers on its own threads. Shutdown()
// stops accepting, cancels open streams after `grace` and waits for handlers.
#ifndef LOOM_API_SERVICES_SERVER_H_
#define LOOM_API_SERVICES_SERVER_H_

#include <grpcpp/grpcpp.h>
#include <prometheus/registry.h>

#include <chrono>
#include <memory>
#include <string>

#include "api/services/metrics.h"
#include "api/services/reflection_v1.h"
#include "api/services/services.h"
#include "common/status.h"
#include "loom/v1/config.pb.h"

namespace loom::api {

class ApiServer {
 public:
  ApiServer(loom::controller::Controller& controller, prometheus::Registry& registry,
            ServiceOptions options);
  ~ApiServer();

  // Binds `address` ("host:port", port 0 = any free port). With `tls` (its
  // cert_path set): TLS 1.2+ with gRPC's TLS credentials and a file-watching
  // certificate provider (renewed files are picked up without a restart; open
  // streams are kept), client certificates per tls.client_auth.
  Status Start(const std::string& address, const loom::v1::TlsConfig& tls = {});
  int port() const { return port_; }
  void Shutdown(std::chrono::milliseconds grace);

 private:
  FabricServiceImpl fabric_;
  SchedulerServiceImpl scheduler_;
  ReflectionV1Service reflection_v1_;
  std::unique_ptr<GrpcMetrics> metrics_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace loom::api

#endif  // LOOM_API_SERVICES_SERVER_H_
