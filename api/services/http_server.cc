#include "api/services/http_server.h"

#include <google/protobuf/util/json_util.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <prometheus/text_serializer.h>

#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "api/web/web_assets.h"
#include "common/log.h"
#include "common/text.h"
#include "common/tls_files.h"
#include "controller/core/request_limits.h"

namespace loom::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
namespace v1 = loom::v1;

namespace {

constexpr size_t kMaxRequestBytes = 8 << 10;
// Events per /api/v1/events answer (default and cap).
constexpr uint64_t kDefaultEvents = 50;
constexpr uint64_t kMaxEvents = 500;
// Jobs per /api/v1/jobs answer (the page shows a list; the API has them all).
constexpr int kDefaultJobs = 200;
constexpr int kMaxJobs = 1000;

std::string JsonString(const std::string& s) {
  std::string out;
  AppendJsonString(out, s);
  return out;
}

std::string ToJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  return out;
}

http::status HttpStatusOf(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return http::status::ok;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return http::status::bad_request;
    case StatusCode::kNotFound:
      return http::status::not_found;
    case StatusCode::kResourceExhausted:
      return http::status::too_many_requests;
    case StatusCode::kUnimplemented:
      return http::status::not_implemented;
    case StatusCode::kUnavailable:
      return http::status::service_unavailable;
    case StatusCode::kPermissionDenied:
      return http::status::forbidden;
    default:
      return http::status::internal_server_error;
  }
}

// Query parameter `key` of a target ("/x?a=1&b=2"), undecoded; "" when absent.
std::string QueryParam(std::string_view target, std::string_view key) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return "";
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    std::string_view kv = rest.substr(0, amp);
    const size_t eq = kv.find('=');
    if (kv.substr(0, eq) == key)
      return std::string(eq == std::string_view::npos ? "" : kv.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return "";
}

// Parses an unsigned query number; false (with `error`) when present and bad.
bool NumberParam(std::string_view target, std::string_view key, uint64_t max, uint64_t* out,
                 std::string* error) {
  const std::string v = QueryParam(target, key);
  if (v.empty()) return true;
  uint64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || p != v.data() + v.size() || n > max) {
    *error = std::string(key) + ": " + QuoteInput(v, 32) + " is not a number in 0.." +
             std::to_string(max);
    return false;
  }
  *out = n;
  return true;
}

// "%2F" etc. in a path segment; false on a bad escape.
bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    unsigned v = 0;
    auto [p, ec] = std::from_chars(in.data() + i + 1, in.data() + i + 3, v, 16);
    if (ec != std::errc() || p != in.data() + i + 3) return false;
    out->push_back(static_cast<char>(v));
    i += 2;
  }
  return true;
}

struct HttpReply {
  http::status status = http::status::ok;
  std::string content_type = "application/json";
  std::string body;
};

// ------------------------------------------------------------ authentication

using Digest = std::array<unsigned char, 32>;

Digest Sha256(std::string_view data) {
  Digest d{};
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), d.data(), &len, EVP_sha256(), nullptr);
  return d;
}

bool SameDigest(const Digest& a, const Digest& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool ParseHexDigest(std::string_view hex, Digest* out) {
  if (hex.size() != 64) return false;
  for (size_t i = 0; i < 32; ++i) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, v, 16);
    if (ec != std::errc() || p != hex.data() + 2 * i + 2) return false;
    (*out)[i] = static_cast<unsigned char>(v);
  }
  return true;
}

// Standard base64 (RFC 4648, padding optional); false on a bad character.
bool Base64Decode(std::string_view in, std::string* out) {
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '+') {
      v = 62;
    } else if (c == '/') {
      v = 63;
    } else if (c == '=') {
      break;
    } else {
      return false;
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return true;
}

bool ReadTextFile(const std::string& path, std::string* out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot read " + path + ": " + std::strerror(errno);
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  if (out->size() > (1u << 20)) {
    *error = path + " is over 1 MiB";
    return false;
  }
  return true;
}

struct AuthConfig {
  struct User {
    Digest user;
    Digest password;
  };
  std::vector<User> users;
  std::optional<Digest> token;
  bool enabled() const { return !users.empty() || token.has_value(); }
};

Status LoadAuth(const v1::MetricsSecurityConfig& sec, AuthConfig* out) {
  *out = AuthConfig();
  std::string text, error;
  if (!sec.basic_auth_users_path().empty()) {
    const std::string field = "metrics_security.basic_auth_users_path";
    if (!ReadTextFile(sec.basic_auth_users_path(), &text, &error)) {
      return InvalidArgument(field + ": " + error);
    }
    std::istringstream in(text);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
        line.pop_back();
      }
      if (line.empty() || line[0] == '#') continue;
      const size_t colon = line.find(':');
      if (colon == std::string::npos || colon == 0) {
        return InvalidArgument(field + ": line " + std::to_string(n) +
                               ": not user:password nor user:{SHA256}<hex>");
      }
      AuthConfig::User u;
      u.user = Sha256(std::string_view(line).substr(0, colon));
      const std::string_view pw = std::string_view(line).substr(colon + 1);
      constexpr std::string_view kSha = "{SHA256}";
      if (pw.substr(0, kSha.size()) == kSha) {
        if (!ParseHexDigest(pw.substr(kSha.size()), &u.password)) {
          return InvalidArgument(field + ": line " + std::to_string(n) +
                                 ": {SHA256} must be followed by 64 hex digits");
        }
      } else if (pw.empty()) {
        return InvalidArgument(field + ": line " + std::to_string(n) + ": empty password");
      } else {
        u.password = Sha256(pw);
      }
      out->users.push_back(u);
    }
    if (out->users.empty()) return InvalidArgument(field + ": no user in the file");
  }
  if (!sec.bearer_token_path().empty()) {
    const std::string field = "metrics_security.bearer_token_path";
    if (!ReadTextFile(sec.bearer_token_path(), &text, &error)) {
      return InvalidArgument(field + ": " + error);
    }
    std::string token = text.substr(0, text.find('\n'));
    while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
    if (token.size() < 16) {
      return InvalidArgument(field + ": the token (first line) must be at least 16 characters");
    }
    out->token = Sha256(token);
  }
  return Status();
}

// "" when `authorization` (the header's value) matches; else "missing" or "wrong".
const char* CheckAuthorization(const AuthConfig& auth, std::string_view authorization) {
  const size_t sp = authorization.find(' ');
  if (authorization.empty() || sp == std::string_view::npos) return "missing";
  std::string scheme(authorization.substr(0, sp));
  for (auto& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string_view value = authorization.substr(sp + 1);
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (scheme == "basic" && !auth.users.empty()) {
    std::string decoded;
    if (!Base64Decode(value, &decoded)) return "wrong";
    const size_t colon = decoded.find(':');
    if (colon == std::string::npos) return "wrong";
    const Digest user = Sha256(std::string_view(decoded).substr(0, colon));
    const Digest password = Sha256(std::string_view(decoded).substr(colon + 1));
    bool ok = false;
    for (const auto& u : auth.users) {  // Every entry: no early exit.
      ok |= SameDigest(u.user, user) & SameDigest(u.password, password);
    }
    return ok ? "" : "wrong";
  }
  if (scheme == "bearer" && auth.token) {
    return SameDigest(*auth.token, Sha256(value)) ? "" : "wrong";
  }
  return "wrong";
}

// ------------------------------------------------------------------- TLS

std::shared_ptr<asio::ssl::context> MakeTlsContext(const v1::MetricsSecurityConfig& sec,
                                                   std::string* error) {
  try {
    auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
    ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                     asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                     asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use);
    SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
    ctx->use_certificate_chain_file(sec.tls_cert_path());
    ctx->use_private_key_file(sec.tls_key_path(), asio::ssl::context::pem);
    if (!sec.tls_client_ca_path().empty()) {
      ctx->load_verify_file(sec.tls_client_ca_path());
      ctx->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
    }
    return ctx;
  } catch (const std::exception& e) {
    *error = e.what();
    return nullptr;
  }
}

std::filesystem::file_time_type MTime(const std::string& path) {
  std::error_code ec;
  auto t = std::filesystem::last_write_time(path, ec);
  return ec ? std::filesystem::file_time_type::min() : t;
}

HttpReply Error(http::status status, const std::string& message) {
  return {status, "application/json", "{\"error\":" + JsonString(message) + "}\n"};
}

HttpReply FromStatus(const Status& s) { return Error(HttpStatusOf(s.code()), s.message()); }

}  // namespace

class Session;

struct HttpServer::State : std::enable_shared_from_this<HttpServer::State> {
  State(loom::controller::Controller& c, prometheus::Registry& registry,
        std::vector<std::weak_ptr<prometheus::Collectable>> cs, HttpServerOptions o)
      : controller(c),
        collectables(std::move(cs)),
        options(std::move(o)),
        requests(prometheus::BuildCounter()
                     .Name("loom_http_requests_total")
                     .Help("Requests on the metrics port (/metrics, the live view and its JSON) "
                           "by handler and HTTP status class")
                     .Register(registry)),
        refused(prometheus::BuildCounter()
                    .Name("loom_http_connections_refused_total")
                    .Help("Connections to the metrics port closed at accept: over the limit")
                    .Register(registry)
                    .Add({})),
        auth_failures(prometheus::BuildCounter()
                          .Name("loom_http_auth_failures_total")
                          .Help("Requests on the metrics port answered 401: Authorization "
                                "header missing (or of a scheme not configured) or wrong")
                          .Register(registry)),
        tls_failures(prometheus::BuildCounter()
                         .Name("loom_http_tls_handshake_failures_total")
                         .Help("TLS handshakes on the metrics port that failed (bad client "
                               "certificate, plaintext client, protocol below TLS 1.2)")
                         .Register(registry)
                         .Add({})) {}

  // The TLS context for a new connection: re-made when the certificate, key
  // or client CA file changed (checked at most once a second). A change that
  // does not load keeps the previous context (logged). Null = plaintext.
  std::shared_ptr<asio::ssl::context> TlsContext() {
    std::lock_guard<std::mutex> lock(tls_mu);
    if (!tls) return nullptr;
    const auto now = std::chrono::steady_clock::now();
    if (now - tls_checked < std::chrono::seconds(1)) return tls;
    tls_checked = now;
    const auto& sec = options.security;
    std::array<std::filesystem::file_time_type, 3> m{
        MTime(sec.tls_cert_path()), MTime(sec.tls_key_path()), MTime(sec.tls_client_ca_path())};
    if (m == tls_mtimes) return tls;
    std::string error;
    if (auto ctx = MakeTlsContext(sec, &error)) {
      tls = std::move(ctx);
      tls_mtimes = m;
      LOG_INFO("metrics port: TLS certificate reloaded").With("cert", sec.tls_cert_path());
    } else if (m != tls_failed_mtimes) {
      tls_failed_mtimes = m;
      LOG_WARN("metrics port: changed TLS files do not load; keeping the previous ones")
          .With("error", error);
    }
    return tls;
  }

  void Count(const std::string& handler, http::status status) {
    const unsigned code = static_cast<unsigned>(status);
    requests.Add({{"handler", handler}, {"code", std::to_string(code / 100) + "xx"}}).Increment();
  }

  loom::controller::Controller& controller;
  std::vector<std::weak_ptr<prometheus::Collectable>> collectables;
  HttpServerOptions options;
  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Counter& refused;
  prometheus::Family<prometheus::Counter>& auth_failures;
  prometheus::Counter& tls_failures;
  AuthConfig auth;  // Set by Start(), read-only afterwards.

  std::mutex tls_mu;  // guards the TLS context and its reload state
  std::shared_ptr<asio::ssl::context> tls;
  std::chrono::steady_clock::time_point tls_checked;
  std::array<std::filesystem::file_time_type, 3> tls_mtimes{}, tls_failed_mtimes{};

  asio::io_context io;
  std::optional<tcp::acceptor> acceptor;
  std::thread thread;
  int port = 0;
  std::mutex mu;  // guards sessions, stopped
  bool stopped = false;
  std::set<std::shared_ptr<Session>> sessions;
};

namespace {

using State = HttpServer::State;
using Respond = std::function<void(HttpReply)>;

// Runs on the controller strand or the HTTP thread; posts `reply` to the
// HTTP thread unless the server stopped.
Respond OnHttpThread(std::shared_ptr<State> st, std::function<void(HttpReply)> deliver) {
  return [st = std::move(st), deliver = std::move(deliver)](HttpReply r) mutable {
    {
      std::lock_guard<std::mutex> lock(st->mu);
      if (st->stopped) return;
    }
    asio::post(st->io, [deliver = std::move(deliver), r = std::move(r)]() mutable {
      deliver(std::move(r));
    });
  };
}

void ServeMetrics(State& st, const Respond& respond) {
  std::vector<prometheus::MetricFamily> families;
  for (const auto& weak : st.collectables) {
    if (auto c = weak.lock()) {
      auto f = c->Collect();
      families.insert(families.end(), std::make_move_iterator(f.begin()),
                      std::make_move_iterator(f.end()));
    }
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  respond({http::status::ok, "text/plain; version=0.0.4; charset=utf-8", out.str()});
}

void ServeDevices(const std::shared_ptr<State>& st, const Respond& respond) {
  v1::ListDevicesResponse telemetry;
  if (st->options.list_devices) telemetry = st->options.list_devices("");
  st->controller.WithReconciler(
      [st, respond, telemetry = std::move(telemetry)](const loom::controller::Reconciler& r) {
        std::map<std::string, std::string> sync;
        for (const auto& d : r.Status()) {
          sync[d.device] = ToJson(loom::controller::SyncStatusProto(d));
        }
        std::map<std::string, std::string> tel;
        for (const auto& d : telemetry.devices()) tel[d.id()] = ToJson(d);
        std::string body = "{\"devices\":[";
        bool first = true;
        const auto& topo = st->controller.topology().topology();
        for (const auto& dev : topo.devices()) {
          auto s = sync.find(dev.id());
          auto t = tel.find(dev.id());
          if (s == sync.end() && t == tel.end()) continue;
          body += first ? "" : ",";
          first = false;
          body += "{\"id\":" + JsonString(dev.id());
          if (s != sync.end()) body += ",\"sync\":" + s->second;
          if (t != tel.end()) body += ",\"telemetry\":" + t->second;
          body += "}";
        }
        body += "]}\n";
        respond({http::status::ok, "application/json", std::move(body)});
      });
}

// Events with revision >= `start` (at most `limit`), oldest first.
void WatchEventsFrom(const std::shared_ptr<State>& st, uint64_t start, uint64_t head,
                     uint64_t limit, bool retried, const Respond& respond) {
  struct Acc {
    std::string events;
    uint64_t count = 0;
    bool done = false;
  };
  auto acc = std::make_shared<Acc>();
  auto finish = [acc, head, respond] {
    if (acc->done) return;
    acc->done = true;
    respond({http::status::ok, "application/json",
             "{\"revision\":\"" + std::to_string(head) + "\",\"events\":[" + acc->events + "]}\n"});
  };
  loom::controller::Controller::Watcher w;
  w.offer = [acc, limit, finish](const v1::Event& e, const auto&) {
    if (acc->done) return loom::controller::Controller::Offer::kClosed;
    acc->events += (acc->count++ ? "," : "") + ToJson(e);
    if (acc->count >= limit) {
      finish();
      return loom::controller::Controller::Offer::kClosed;
    }
    return loom::controller::Controller::Offer::kTaken;
  };
  w.end = [st, acc, head, limit, retried, respond, finish](
              const Status& s, const loom::controller::Controller::WatchEnd& end) {
    if (s.ok()) return finish();
    if (s.code() == StatusCode::kOutOfRange && end.compacted_revision > 0 && !retried &&
        acc->count == 0) {
      // The page asked for history that is gone: from the oldest kept.
      acc->done = true;
      return WatchEventsFrom(st, end.compacted_revision + 1, head, limit, true, respond);
    }
    acc->done = true;
    respond(FromStatus(s));
  };
  st->controller.Watch(start, /*follow=*/false, std::move(w));
}

void ServeEvents(const std::shared_ptr<State>& st, const std::string& target,
                 const Respond& respond) {
  uint64_t from = 0, limit = kDefaultEvents;
  std::string err;
  if (!NumberParam(target, "from", UINT64_MAX, &from, &err) ||
      !NumberParam(target, "limit", kMaxEvents, &limit, &err)) {
    return respond(Error(http::status::bad_request, err));
  }
  if (limit == 0) limit = kDefaultEvents;
  // The head revision first (a watch from past the head is refused).
  v1::ListJobsRequest req;
  req.set_page_size(1);
  st->controller.ListJobs(req, [st, from, limit, respond](Status s, v1::ListJobsResponse resp) {
    if (!s.ok()) return respond(FromStatus(s));
    const uint64_t head = resp.revision();
    uint64_t start = from;
    if (start == 0) start = head > limit ? head - limit + 1 : 1;
    if (start > head || head == 0) {
      return respond({http::status::ok, "application/json",
                      "{\"revision\":\"" + std::to_string(head) + "\",\"events\":[]}\n"});
    }
    WatchEventsFrom(st, start, head, limit, false, respond);
  });
}

// Routes a GET; `handler` names it for the request counter.
void Route(const std::shared_ptr<State>& st, const std::string& target, std::string* handler,
           const Respond& respond) {
  const std::string path = target.substr(0, target.find('?'));
  if (path == "/metrics") {
    *handler = "metrics";
    return ServeMetrics(*st, respond);
  }
  if (const web::Asset* a = web::FindAsset(path == "/" ? "/index.html" : path)) {
    *handler = "page";
    return respond({http::status::ok, a->content_type, std::string(a->body)});
  }
  if (path == "/api/v1/topology") {
    *handler = "topology";
    v1::GetTopologyResponse resp;
    *resp.mutable_topology() = st->controller.topology().topology();
    return respond({http::status::ok, "application/json", ToJson(resp)});
  }
  if (path == "/api/v1/links") {
    *handler = "links";
    v1::ListLinksRequest req;
    return st->controller.ListLinks(req, [respond](Status s, v1::ListLinksResponse resp) {
      respond(s.ok() ? HttpReply{http::status::ok, "application/json", ToJson(resp)}
                     : FromStatus(s));
    });
  }
  if (path == "/api/v1/jobs") {
    *handler = "jobs";
    uint64_t n = kDefaultJobs;
    std::string err;
    if (!NumberParam(target, "page_size", kMaxJobs, &n, &err)) {
      return respond(Error(http::status::bad_request, err));
    }
    v1::ListJobsRequest req;
    req.set_page_size(static_cast<int>(n == 0 ? kDefaultJobs : n));
    req.set_page_token(QueryParam(target, "page_token"));
    if (Status s = loom::controller::ValidateRequest(req); !s.ok()) return respond(FromStatus(s));
    return st->controller.ListJobs(req, [respond](Status s, v1::ListJobsResponse resp) {
      respond(s.ok() ? HttpReply{http::status::ok, "application/json", ToJson(resp)}
                     : FromStatus(s));
    });
  }
  const std::string jobs_prefix = "/api/v1/jobs/";
  const std::string health_suffix = "/health";
  if (path.size() > jobs_prefix.size() + health_suffix.size() &&
      path.compare(0, jobs_prefix.size(), jobs_prefix) == 0 &&
      path.compare(path.size() - health_suffix.size(), health_suffix.size(), health_suffix) == 0) {
    *handler = "job_health";
    v1::GetJobHealthRequest req;
    std::string id;
    if (!PercentDecode(
            std::string_view(path).substr(jobs_prefix.size(),
                                          path.size() - jobs_prefix.size() - health_suffix.size()),
            &id)) {
      return respond(Error(http::status::bad_request, "job id: bad percent-encoding"));
    }
    req.set_job_id(id);
    if (Status s = loom::controller::ValidateRequest(req); !s.ok()) return respond(FromStatus(s));
    return st->controller.GetJobHealth(req, [respond](Status s, v1::GetJobHealthResponse resp) {
      respond(s.ok() ? HttpReply{http::status::ok, "application/json", ToJson(resp)}
                     : FromStatus(s));
    });
  }
  if (path == "/api/v1/devices") {
    *handler = "devices";
    return ServeDevices(st, respond);
  }
  if (path == "/api/v1/events") {
    *handler = "events";
    return ServeEvents(st, target, respond);
  }
  *handler = "not_found";
  respond(Error(http::status::not_found,
                "no such page: " + QuoteInput(path) + " (see docs/live-view.md)"));
}

}  // namespace

class Session : public std::enable_shared_from_this<Session> {
 public:
  virtual ~Session() = default;
  virtual void Start() = 0;
  virtual void Close() = 0;
};

namespace {

// One connection: plaintext (beast::tcp_stream) or TLS
// (beast::ssl_stream<beast::tcp_stream>, handshake first).
template <class Stream>
class HttpSession final : public Session {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  HttpSession(std::shared_ptr<State> st, tcp::socket socket,
              std::shared_ptr<asio::ssl::context> tls)
      : st_(std::move(st)), tls_(std::move(tls)), stream_(MakeStream(std::move(socket), tls_)) {}

  void Start() override {
    if constexpr (kTls) {
      beast::get_lowest_layer(stream_).expires_after(st_->options.io_timeout);
      stream_.async_handshake(
          asio::ssl::stream_base::server, [self = Self()](beast::error_code ec) {
            if (ec) {
              self->st_->tls_failures.Increment();
              LOG_DEBUG("metrics port: TLS handshake failed").With("error", ec.message());
              return self->Done();
            }
            self->Read();
          });
    } else {
      Read();
    }
  }
  void Close() override {
    beast::error_code ec;
    auto& lowest = beast::get_lowest_layer(stream_);
    lowest.socket().shutdown(tcp::socket::shutdown_both, ec);
    lowest.close();
  }

 private:
  static Stream MakeStream(tcp::socket socket, const std::shared_ptr<asio::ssl::context>& tls) {
    if constexpr (kTls) {
      return Stream(std::move(socket), *tls);
    } else {
      (void)tls;
      return Stream(std::move(socket));
    }
  }
  std::shared_ptr<HttpSession> Self() {
    return std::static_pointer_cast<HttpSession>(shared_from_this());
  }

  void Read() {
    parser_.emplace();
    parser_->header_limit(kMaxRequestBytes);
    parser_->body_limit(kMaxRequestBytes);
    beast::get_lowest_layer(stream_).expires_after(st_->options.io_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = Self()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec) {
      if (ec != http::error::end_of_stream && ec != beast::error::timeout &&
          ec != asio::error::operation_aborted && ec != asio::error::connection_reset &&
          ec != asio::ssl::error::stream_truncated) {
        // A malformed request: say what, then close.
        HttpReply r = Error(http::status::bad_request, "bad HTTP request: " + ec.message());
        st_->Count("bad_request", r.status);
        keep_alive_ = false;
        return Write(std::move(r), false);
      }
      return Done();
    }
    const auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    head_ = req.method() == http::verb::head;
    if (st_->auth.enabled()) {
      const auto it = req.find(http::field::authorization);
      const std::string_view value = it == req.end()
                                         ? std::string_view()
                                         : std::string_view(it->value().data(), it->value().size());
      if (const char* failure = CheckAuthorization(st_->auth, value); *failure != 0) {
        st_->auth_failures.Add({{"reason", failure}}).Increment();
        HttpReply r = Error(http::status::unauthorized,
                            std::string("authentication required: Authorization header ") +
                                (std::string_view(failure) == "missing" ? "missing" : "rejected"));
        const std::string challenge = st_->auth.users.empty()
                                          ? "Bearer realm=\"loomd\""
                                          : "Basic realm=\"loomd\", charset=\"UTF-8\"";
        st_->Count("unauthorized", r.status);
        return Write(std::move(r), false, challenge);
      }
    }
    if (req.method() != http::verb::get && !head_) {
      HttpReply r = Error(http::status::method_not_allowed,
                          "the live view is read-only: " + std::string(req.method_string()) +
                              " is not allowed (use loomctl or the gRPC API to change things)");
      st_->Count("method_not_allowed", r.status);
      return Write(std::move(r), true);
    }
    auto handler = std::make_shared<std::string>("unknown");
    auto self = Self();
    Route(st_, std::string(req.target()), handler.get(),
          OnHttpThread(st_, [self, handler](HttpReply r) {
            self->st_->Count(*handler, r.status);
            self->Write(std::move(r), true);
          }));
  }

  void Write(HttpReply r, bool allow_methods_header, const std::string& www_authenticate = "") {
    auto res = std::make_shared<http::response<http::string_body>>(r.status, 11);
    res->set(http::field::server, "loomd");
    res->set(http::field::content_type, r.content_type);
    res->set(http::field::cache_control, "no-store");
    res->set("X-Content-Type-Options", "nosniff");
    if (!www_authenticate.empty()) res->set(http::field::www_authenticate, www_authenticate);
    if constexpr (kTls) res->set("Strict-Transport-Security", "max-age=31536000");
    if (r.content_type.rfind("text/html", 0) == 0) {
      res->set("Content-Security-Policy",
               "default-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors "
               "'none'");
    }
    if (r.status == http::status::method_not_allowed && allow_methods_header) {
      res->set(http::field::allow, "GET, HEAD");
    }
    res->keep_alive(keep_alive_);
    res->body() = std::move(r.body);
    res->prepare_payload();
    if (head_) res->body().clear();  // Content-Length stays the GET's
    beast::get_lowest_layer(stream_).expires_after(st_->options.io_timeout);
    http::async_write(stream_, *res, [self = Self(), res](beast::error_code ec, size_t) {
      if (ec || !self->keep_alive_) return self->Done();
      self->buffer_.consume(self->buffer_.size());
      self->Read();
    });
  }

  void Done() {
    Close();
    std::lock_guard<std::mutex> lock(st_->mu);
    st_->sessions.erase(shared_from_this());
  }

  std::shared_ptr<State> st_;
  std::shared_ptr<asio::ssl::context> tls_;  // Outlives stream_ (declared first).
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool keep_alive_ = false;
  bool head_ = false;
};

}  // namespace

namespace {

void Accept(const std::shared_ptr<State>& st) {
  st->acceptor->async_accept(
      asio::make_strand(st->io), [st](beast::error_code ec, tcp::socket socket) {
        if (ec) {
          if (ec == asio::error::operation_aborted) return;
          // Out of file descriptors and the like: retry after a pause, not in a loop.
          LOG_WARN("metrics port: accept failed; retrying in 100 ms").With("error", ec.message());
          auto timer = std::make_shared<asio::steady_timer>(st->io, std::chrono::milliseconds(100));
          timer->async_wait([st, timer](beast::error_code) {
            {
              std::lock_guard<std::mutex> lock(st->mu);
              if (st->stopped) return;
            }
            Accept(st);
          });
          return;
        }
        std::shared_ptr<Session> s;
        {
          std::lock_guard<std::mutex> lock(st->mu);
          if (st->stopped) return;
          if (st->sessions.size() >= st->options.max_connections) {
            st->refused.Increment();
          } else if (auto tls = st->TlsContext()) {
            s = std::make_shared<HttpSession<beast::ssl_stream<beast::tcp_stream>>>(
                st, std::move(socket), std::move(tls));
            st->sessions.insert(s);
          } else {
            s = std::make_shared<HttpSession<beast::tcp_stream>>(st, std::move(socket), nullptr);
            st->sessions.insert(s);
          }
        }
        if (s) s->Start();
        Accept(st);
      });
}

}  // namespace

HttpServer::HttpServer(loom::controller::Controller& controller, prometheus::Registry& registry,
                       std::vector<std::weak_ptr<prometheus::Collectable>> collectables,
                       HttpServerOptions options)
    : state_(std::make_shared<State>(controller, registry, std::move(collectables),
                                     std::move(options))) {}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::port() const { return state_->port; }

Status CheckMetricsSecurity(const v1::MetricsSecurityConfig& sec) {
  const std::string p = "metrics_security.";
  if (sec.tls_cert_path().empty() != sec.tls_key_path().empty()) {
    return InvalidArgument(p + (sec.tls_cert_path().empty() ? "tls_cert_path" : "tls_key_path") +
                           ": required with " + p +
                           (sec.tls_cert_path().empty() ? "tls_key_path" : "tls_cert_path"));
  }
  if (!sec.tls_client_ca_path().empty() && sec.tls_cert_path().empty()) {
    return InvalidArgument(p + "tls_client_ca_path: needs tls_cert_path and tls_key_path");
  }
  if (!sec.tls_cert_path().empty()) {
    if (std::string e = loom::CheckPemKeyPair(p + "tls_cert_path", sec.tls_cert_path(),
                                              p + "tls_key_path", sec.tls_key_path());
        !e.empty()) {
      return InvalidArgument(e);
    }
    if (!sec.tls_client_ca_path().empty()) {
      if (std::string e =
              loom::CheckPemCertificates(p + "tls_client_ca_path", sec.tls_client_ca_path());
          !e.empty()) {
        return InvalidArgument(e);
      }
    }
    std::string error;
    if (!MakeTlsContext(sec, &error)) return InvalidArgument(p + "tls_cert_path: " + error);
  }
  AuthConfig auth;
  return LoadAuth(sec, &auth);
}

Status HttpServer::Start(const std::string& address) {
  if (Status s = CheckMetricsSecurity(state_->options.security); !s.ok()) return s;
  if (Status s = LoadAuth(state_->options.security, &state_->auth); !s.ok()) return s;
  if (!state_->options.security.tls_cert_path().empty()) {
    std::string error;
    state_->tls = MakeTlsContext(state_->options.security, &error);
    if (!state_->tls) return InvalidArgument("metrics_security.tls_cert_path: " + error);
    const auto& sec = state_->options.security;
    state_->tls_mtimes = {MTime(sec.tls_cert_path()), MTime(sec.tls_key_path()),
                          MTime(sec.tls_client_ca_path())};
    state_->tls_checked = std::chrono::steady_clock::now();
  }
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return Status(StatusCode::kInvalidArgument, "not HOST:PORT");
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  uint64_t port = 0;
  const std::string p = address.substr(colon + 1);
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  if (ec != std::errc() || end != p.data() + p.size() || port > 65535) {
    return Status(StatusCode::kInvalidArgument, "port \"" + p.substr(0, 16) + "\" is not 0..65535");
  }
  beast::error_code err;
  auto ip = asio::ip::make_address(host.empty() ? "0.0.0.0" : host, err);
  if (err) {
    // A host name ("localhost"): resolve it.
    tcp::resolver resolver(state_->io);
    auto results = resolver.resolve(host, p, err);
    if (err || results.empty()) {
      return Status(StatusCode::kInvalidArgument, "cannot resolve \"" + host + "\"");
    }
    ip = results.begin()->endpoint().address();
  }
  tcp::endpoint ep(ip, static_cast<unsigned short>(port));
  state_->acceptor.emplace(state_->io);
  if (state_->acceptor->open(ep.protocol(), err) ||
      state_->acceptor->set_option(asio::socket_base::reuse_address(true), err) ||
      state_->acceptor->bind(ep, err) ||
      state_->acceptor->listen(asio::socket_base::max_listen_connections, err)) {
    state_->acceptor.reset();
    return Status(StatusCode::kUnavailable, err.message());
  }
  state_->port = state_->acceptor->local_endpoint().port();
  if (!ip.is_loopback() && (!state_->tls || !state_->auth.enabled())) {
    LOG_WARN(
        "metrics port listens beyond loopback without TLS and authentication: anyone who "
        "reaches it reads the metrics and the live view (metrics_security)")
        .With("address", address)
        .With("tls", state_->tls ? "on" : "off")
        .With("auth", state_->auth.enabled() ? "on" : "off");
  }
  Accept(state_);
  state_->thread = std::thread([st = state_] {
    for (;;) {
      try {
        st->io.run();
        return;
      } catch (const std::exception& e) {
        LOG_ERROR("metrics port: handler failed").With("error", e.what());
      }
    }
  });
  return Status();
}

void HttpServer::Stop() {
  std::set<std::shared_ptr<Session>> sessions;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->stopped) return;
    state_->stopped = true;
    sessions.swap(state_->sessions);
  }
  if (!state_->thread.joinable()) return;
  asio::post(state_->io, [st = state_, sessions = std::move(sessions)] {
    beast::error_code ec;
    if (st->acceptor) st->acceptor->close(ec);
    for (const auto& s : sessions) s->Close();
  });
  // Closed sockets end every pending operation: run() returns when nothing
  // is left. A bound all the same, for handlers that never return.
  for (int i = 0; i < 50 && !state_->io.stopped(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  state_->io.stop();
  state_->thread.join();
}

}  // namespace loom::api
