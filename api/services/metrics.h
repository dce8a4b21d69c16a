// Prometheus metrics for the API: gRPC requests by method and code, request
// latency, process metrics and build info.
//
// GrpcMetricsInterceptorFactory is installed on the gRPC server; its
// interceptors run on gRPC threads and only touch thread-safe prometheus-cpp
// metrics. Method labels are limited to the server's registered methods
// (anything else is "unknown") so label cardinality stays bounded.
#ifndef LOOM_API_SERVICES_METRICS_H_
#define LOOM_API_SERVICES_METRICS_H_

#include <grpcpp/support/server_interceptor.h>
#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <set>
#include <string>

namespace loom::api {

class GrpcMetrics {
 public:
  GrpcMetrics(prometheus::Registry& registry, std::set<std::string> known_methods);
  void Record(const std::string& method, int code, double seconds);

 private:
  std::set<std::string> known_methods_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& latency_;
};

class GrpcMetricsInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit GrpcMetricsInterceptorFactory(GrpcMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  GrpcMetrics* metrics_;
};

// Adds process_* metrics (CPU, RSS, virtual memory, open fds, start time)
// read from /proc/self and loom_build_info to the registry.
void RegisterProcessMetrics(prometheus::Registry& registry, const std::string& version,
                            const std::string& git_commit);

// Collectable exposing process metrics; registered with the Exposer.
std::shared_ptr<prometheus::Collectable> MakeProcessCollector();

}  // namespace loom::api

#endif  // LOOM_API_SERVICES_METRICS_H_
