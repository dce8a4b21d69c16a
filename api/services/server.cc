#include "api/services/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "loom/v1/fabric_service.grpc.pb.h"

namespace loom::api {

namespace {

std::set<std::string> MethodsOf(const google::protobuf::ServiceDescriptor* svc,
                                std::set<std::string> into) {
  for (int i = 0; i < svc->method_count(); ++i) {
    into.insert("/" + svc->full_name() + "/" + svc->method(i)->name());
  }
  return into;
}

}  // namespace

ApiServer::ApiServer(loom::controller::Controller& controller, prometheus::Registry& registry,
                     ServiceOptions options)
    : fabric_(controller, options),
      scheduler_(controller, options),
      reflection_v1_({"loom.v1.FabricService", "loom.v1.SchedulerService", "grpc.health.v1.Health",
                      "grpc.reflection.v1.ServerReflection",
                      "grpc.reflection.v1alpha.ServerReflection"}) {
  std::set<std::string> known;
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  known = MethodsOf(pool->FindServiceByName("loom.v1.FabricService"), std::move(known));
  known = MethodsOf(pool->FindServiceByName("loom.v1.SchedulerService"), std::move(known));
  known.insert("/grpc.health.v1.Health/Check");
  known.insert("/grpc.health.v1.Health/Watch");
  known.insert("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo");
  known.insert("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo");
  metrics_ = std::make_unique<GrpcMetrics>(registry, std::move(known));
}

ApiServer::~ApiServer() { Shutdown(std::chrono::milliseconds(0)); }

namespace {

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const loom::v1::TlsConfig& tls) {
  if (tls.cert_path().empty()) return grpc::InsecureServerCredentials();
  namespace ex = grpc::experimental;
  const unsigned refresh = tls.refresh_interval_s() > 0 ? tls.refresh_interval_s() : 60;
  const std::string mode = !tls.client_auth().empty() ? tls.client_auth()
                           : tls.ca_path().empty()    ? "none"
                                                      : "require";
  auto provider = tls.ca_path().empty() || mode == "none"
                      ? std::make_shared<ex::FileWatcherCertificateProvider>(
                            tls.key_path(), tls.cert_path(), refresh)
                      : std::make_shared<ex::FileWatcherCertificateProvider>(
                            tls.key_path(), tls.cert_path(), tls.ca_path(), refresh);
  ex::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (mode != "none") {
    options.watch_root_certs();
    // gRPC core's TLS credentials negotiate TLS 1.2 or 1.3 only (its default
    // minimum; checked by the tests with openssl s_client -tls1_1).
    options.set_cert_request_type(mode == "require"
                                      ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                      : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return ex::TlsServerCredentials(options);
}

}  // namespace

Status ApiServer::Start(const std::string& address, const loom::v1::TlsConfig& tls) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, ServerCredentialsFor(tls), &port_);
  builder.RegisterService(&fabric_);
  builder.RegisterService(&scheduler_);
  builder.RegisterService(&reflection_v1_);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> factories;
  factories.push_back(std::make_unique<GrpcMetricsInterceptorFactory>(metrics_.get()));
  builder.experimental().SetInterceptorCreators(std::move(factories));
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    server_.reset();
    return Unavailable("cannot listen for gRPC on " + address +
                       " (address in use, or not a valid host:port)");
  }
  auto* health = server_->GetHealthCheckService();
  health->SetServingStatus("", true);
  health->SetServingStatus(loom::v1::FabricService::service_full_name(), true);
  health->SetServingStatus(loom::v1::SchedulerService::service_full_name(), true);
  return Status::Ok();
}

void ApiServer::Shutdown(std::chrono::milliseconds grace) {
  if (!server_) return;
  server_->GetHealthCheckService()->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
  server_.reset();
}

}  // namespace loom::api
