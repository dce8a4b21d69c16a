// The HTTP server on loomd's metrics port: Prometheus' `/metrics`, the live
// fabric view (`/`, static files compiled in from api/web/) and the read-only
// JSON the page polls (`/api/v1/...`, loom.v1 messages in proto3 JSON).
// docs/live-view.md lists the endpoints.
//
// Boost.Beast on an io_context of its own, one thread: connections are read
// and written asynchronously with a deadline each; a request that needs the
// controller posts to its strand and the answer comes back to this thread.
// Nothing blocks here, and only GET/HEAD are served (405 otherwise): the page
// cannot change anything. Optional TLS and authentication (HttpServerOptions
// security; docs/security-gnmi-metrics.md). Stop() closes the listener and every connection and
// returns within a bound whatever the clients do; controller answers that
// arrive afterwards are dropped.
#ifndef LOOM_API_SERVICES_HTTP_SERVER_H_
#define LOOM_API_SERVICES_HTTP_SERVER_H_

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "controller/core/controller.h"
#include "loom/v1/config.pb.h"
#include "loom/v1/fabric_service.pb.h"

namespace loom::api {

struct HttpServerOptions {
  // Open connections beyond this are closed at accept (counted).
  size_t max_connections = 64;
  // Deadline for reading one request and for writing one response.
  std::chrono::milliseconds io_timeout{10000};
  // Devices' telemetry sources for /api/v1/devices (loomd's inventory); unset
  // = sync status only.
  std::function<loom::v1::ListDevicesResponse(const std::string& device)> list_devices;
  // TLS and authentication (LoomdConfig.metrics_security): with a
  // certificate every connection is TLS 1.2+ (the key and certificate are
  // re-read when their files change, checked at most once a second as
  // connections arrive); with users and/or a bearer token every request
  // needs an Authorization header that matches one of them, else 401 with
  // WWW-Authenticate (counted in loom_http_auth_failures_total). Passwords
  // and tokens are compared as SHA-256 digests with CRYPTO_memcmp (no early
  // exit), against every user.
  loom::v1::MetricsSecurityConfig security;
};

// Checks the files `security` names (readable, PEM certificate and matching
// key, CA, users file syntax, non-empty token) and the pairs (certificate
// with key, client CA only with TLS). OK or INVALID_ARGUMENT naming the field
// ("metrics_security.basic_auth_users_path: line 3: ...").
Status CheckMetricsSecurity(const loom::v1::MetricsSecurityConfig& security);

class HttpServer {
 public:
  // `collectables` are serialized on /metrics in order (weak: the caller
  // keeps them alive). The registry also gets loom_http_requests_total.
  HttpServer(loom::controller::Controller& controller, prometheus::Registry& registry,
             std::vector<std::weak_ptr<prometheus::Collectable>> collectables,
             HttpServerOptions options = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds "host:port" (port 0 = any free port) and starts serving.
  // INVALID_ARGUMENT when options.security does not pass CheckMetricsSecurity.
  Status Start(const std::string& address);
  int port() const;
  void Stop();

  struct State;  // shared with connections and controller callbacks

 private:
  std::shared_ptr<State> state_;
};

}  // namespace loom::api

#endif  // LOOM_API_SERVICES_HTTP_SERVER_H_
