#include "api/services/auth.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cctype>
#include <chrono>
#include <jwt/jwt.hpp>
#include <nlohmann/json.hpp>

#include "common/file.h"
#include "common/log.h"
#include "common/text.h"
#include "common/tls_files.h"

namespace loom::api {

namespace {

using loom::controller::Caller;
using P = Permission;

constexpr size_t kMaxTokenBytes = 16 * 1024;
constexpr size_t kTokenCacheEntries = 4096;
constexpr size_t kMaxKeyFileBytes = 64 * 1024;

const std::map<std::string, MethodRule>& Rules() {
  static const std::map<std::string, MethodRule> rules = {
      {"GetTopology", {P::kTopologyRead, false}},
      {"ListLinks", {P::kLinksRead, false}},
      {"GetLink", {P::kLinksRead, false}},
      {"DrainLink", {P::kLinksDrain, true}},
      {"UndrainLink", {P::kLinksDrain, true}},
      {"WatchEvents", {P::kEventsWatch, false}},
      {"GetDeviceState", {P::kDevicesRead, false}},
      {"ListDevices", {P::kDevicesRead, false}},
      {"GetChangePlan", {P::kChangesRead, false}},
      {"ApplyChangePlan", {P::kChangesApply, true}},
      {"ClearChangeQuarantine", {P::kChangesApply, true}},
      {"RegisterJob", {P::kJobsWrite, true}},
      {"UpdateJob", {P::kJobsWrite, true}},
      {"ReleaseJob", {P::kJobsWrite, true}},
      {"GetJob", {P::kJobsRead, false}},
      {"ListJobs", {P::kJobsRead, false}},
      {"WatchJobs", {P::kJobsRead, false}},
      {"GetJobHealth", {P::kJobsRead, false}},
  };
  return rules;
}

// Permissions limited by a binding's tenants (the others are fabric-wide).
bool TenantScoped(Permission p) {
  return p == P::kJobsRead || p == P::kJobsWrite || p == P::kEventsWatch;
}

// The permissions of a role; `scoped` for a viewer limited to tenants (who then
// sees its tenants' jobs and events and the topology, not the fabric's state).
bool RolePermissions(const std::string& role, bool scoped,
                     std::array<bool, static_cast<size_t>(P::kCount)>* out) {
  std::vector<P> ps;
  if (role == "admin") {
    for (int i = 0; i < static_cast<int>(P::kCount); ++i) ps.push_back(static_cast<P>(i));
  } else if (role == "scheduler") {
    ps = {P::kTopologyRead, P::kJobsRead, P::kJobsWrite, P::kEventsWatch};
  } else if (role == "operator") {
    ps = {P::kTopologyRead, P::kLinksRead, P::kLinksDrain, P::kDevicesRead,
          P::kChangesRead,  P::kJobsRead,  P::kEventsWatch};
  } else if (role == "policy-admin") {
    ps = {P::kTopologyRead, P::kLinksRead, P::kDevicesRead, P::kChangesRead,
          P::kChangesApply, P::kJobsRead,  P::kEventsWatch};
  } else if (role == "viewer") {
    ps = scoped ? std::vector<P>{P::kTopologyRead, P::kJobsRead, P::kEventsWatch}
                : std::vector<P>{P::kTopologyRead, P::kLinksRead, P::kDevicesRead,
                                 P::kChangesRead,  P::kJobsRead,  P::kEventsWatch};
  } else {
    return false;
  }
  out->fill(false);
  for (P p : ps) (*out)[static_cast<size_t>(p)] = true;
  return true;
}

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

BioPtr MemBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

bool ReadSmallFile(const std::string& path, const std::string& field, std::string* out,
                   std::string* error) {
  if (loom::ReadFileCapped(path, kMaxKeyFileBytes, "PEM file", out, error)) return true;
  *error = field + ": " + *error;
  return false;
}

// The payload of a JWT, not verified (to find its issuer).
bool UnverifiedPayload(const std::string& token, nlohmann::json* out) {
  const size_t a = token.find('.');
  const size_t b = a == std::string::npos ? a : token.find('.', a + 1);
  if (b == std::string::npos) return false;
  try {
    std::string payload = jwt::base64_uri_decode(token.data() + a + 1, b - a - 1);
    *out = nlohmann::json::parse(payload);
    return out->is_object();
  } catch (const std::exception&) {
    return false;
  }
}

std::string Unauthenticated(const std::string& m) { return m; }

}  // namespace

const char* PermissionName(Permission p) {
  switch (p) {
    case P::kTopologyRead:
      return "topology.read";
    case P::kLinksRead:
      return "links.read";
    case P::kLinksDrain:
      return "links.drain";
    case P::kDevicesRead:
      return "devices.read";
    case P::kChangesRead:
      return "changes.read";
    case P::kChangesApply:
      return "changes.apply";
    case P::kJobsRead:
      return "jobs.read";
    case P::kJobsWrite:
      return "jobs.write";
    case P::kEventsWatch:
      return "events.watch";
    case P::kCount:
      break;
  }
  return "?";
}

const MethodRule* RuleOf(const std::string& method) {
  auto it = Rules().find(method);
  return it == Rules().end() ? nullptr : &it->second;
}

// ------------------------------------------------------------- policy ----

Status AuthPolicy::Create(const loom::v1::AuthConfig& config,
                          std::shared_ptr<const AuthPolicy>* out) {
  auto p = std::make_shared<AuthPolicy>();
  p->audit_log_path_ = config.audit_log_path();
  if (config.max_denied_events_per_minute() > 0) {
    p->max_denied_events_per_minute_ = config.max_denied_events_per_minute();
  }
  for (int i = 0; i < config.bindings_size(); ++i) {
    const auto& b = config.bindings(i);
    const std::string where = "auth.bindings[" + std::to_string(i) + "]";
    if (b.subjects_size() == 0) return InvalidArgument(where + ".subjects: name at least one");
    Binding bind;
    bind.role = b.role();
    const bool scoped = b.tenants_size() > 0;
    if (!RolePermissions(b.role(), scoped, &bind.allows)) {
      return InvalidArgument(where + ".role: " + QuoteInput(b.role()) +
                             " is not scheduler, operator, policy-admin, viewer or admin");
    }
    if (b.role() == "scheduler" && !scoped) {
      return InvalidArgument(where +
                             ".tenants: a scheduler is bound to tenants (\"*\" for every tenant)");
    }
    if (scoped && b.role() != "scheduler" && b.role() != "viewer") {
      return InvalidArgument(where + ".tenants: only scheduler and viewer bindings take tenants");
    }
    if (scoped) {
      std::set<std::string> t(b.tenants().begin(), b.tenants().end());
      if (t.count("*")) {
        if (t.size() > 1) return InvalidArgument(where + ".tenants: \"*\" stands alone");
        if (b.role() == "viewer") RolePermissions("viewer", false, &bind.allows);
      } else {
        if (t.count("")) return InvalidArgument(where + ".tenants: empty tenant name");
        bind.tenants = std::move(t);
      }
    }
    for (const auto& s : b.subjects()) {
      if (s.find(':') == std::string::npos || s.front() == ':' || s.back() == ':') {
        return InvalidArgument(where + ".subjects: " + QuoteInput(s) +
                               " is not \"cert:NAME\" or \"ISSUER:SUBJECT\"");
      }
      p->bindings_.emplace(s, bind);
    }
  }
  std::set<std::string> names, isses;
  for (int i = 0; i < config.jwt_size(); ++i) {
    const auto& j = config.jwt(i);
    const std::string where = "auth.jwt[" + std::to_string(i) + "]";
    Issuer is;
    is.name = j.name();
    is.iss = j.issuer();
    is.audience = j.audience();
    if (j.leeway_s() > 0) is.leeway_s = j.leeway_s();
    if (is.leeway_s > 600) return InvalidArgument(where + ".leeway_s: at most 600");
    if (is.name.empty() || is.name == "cert" || is.name.find(':') != std::string::npos) {
      return InvalidArgument(where + ".name: required, not \"cert\", without ':'");
    }
    if (!names.insert(is.name).second) return InvalidArgument(where + ".name: used twice");
    if (is.iss.empty()) return InvalidArgument(where + ".issuer: required (the tokens' iss)");
    if (!isses.insert(is.iss).second) return InvalidArgument(where + ".issuer: used twice");
    if (is.audience.empty()) {
      return InvalidArgument(where + ".audience: required (tokens for other services are refused)");
    }
    if (j.public_key_paths_size() == 0) return InvalidArgument(where + ".public_key_paths: empty");
    for (int k = 0; k < j.public_key_paths_size(); ++k) {
      const std::string field = where + ".public_key_paths[" + std::to_string(k) + "]";
      Key key;
      key.path = j.public_key_paths(k);
      std::string error;
      if (!ReadSmallFile(key.path, field, &key.pem, &error)) return InvalidArgument(error);
      BioPtr bio = MemBio(key.pem);
      PkeyPtr pk(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
      if (!pk) {
        return InvalidArgument(field + ": " + QuoteInput(key.path) +
                               " holds no PEM public key (\"-----BEGIN PUBLIC KEY-----\")");
      }
      const int type = EVP_PKEY_base_id(pk.get());
      if (type == EVP_PKEY_RSA) {
        key.algorithms = {"RS256", "RS384", "RS512"};
      } else if (type == EVP_PKEY_EC) {
        key.algorithms = {"ES256", "ES384", "ES512"};
      } else {
        return InvalidArgument(field + ": not an RSA or EC public key");
      }
      is.keys.push_back(std::move(key));
    }
    p->issuers_.push_back(std::move(is));
  }
  *out = std::move(p);
  return Status::Ok();
}

Status AuthPolicy::VerifyToken(const std::string& token, std::string* identity) const {
  if (token.size() > kMaxTokenBytes) {
    return {StatusCode::kUnauthenticated, "bearer token: " + std::to_string(token.size()) +
                                              " bytes, over the " + std::to_string(kMaxTokenBytes) +
                                              "-byte limit"};
  }
  const int64_t now = NowSeconds();
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = token_cache_.find(token);
    if (it != token_cache_.end()) {
      if (it->second.second >= now) {
        *identity = it->second.first;
        return Status::Ok();
      }
      token_cache_.erase(it);
    }
  }
  auto fail = [](const std::string& m) {
    return Status(StatusCode::kUnauthenticated, "bearer token: " + m);
  };
  // base64url and dots only, before anything decodes it.
  for (unsigned char c : token) {
    if (!std::isalnum(c) && c != '-' && c != '_' && c != '.') {
      return fail("not a JWT (characters outside base64url)");
    }
  }
  nlohmann::json claims;
  if (!UnverifiedPayload(token, &claims)) return fail("not a JWT (header.payload.signature)");
  if (!claims.contains("iss") || !claims["iss"].is_string()) return fail("no iss claim");
  const std::string iss = claims["iss"].get<std::string>();
  const Issuer* issuer = nullptr;
  for (const auto& is : issuers_) {
    if (is.iss == iss) issuer = &is;
  }
  if (issuer == nullptr) return fail("issuer " + QuoteInput(iss) + " is not trusted");
  std::string last_error = "no key of issuer " + issuer->name + " verifies its signature";
  bool verified = false;
  for (const auto& key : issuer->keys) {
    try {
      std::error_code ec;
      auto obj = jwt::decode(token, jwt::params::algorithms(key.algorithms), ec,
                             jwt::params::secret(key.pem), jwt::params::verify(true),
                             jwt::params::leeway(issuer->leeway_s));
      if (!ec) {
        claims = obj.payload().create_json_obj();
        verified = true;
        break;
      }
      last_error = ec.message();
      // Another key may verify it (a wrong signature, or an algorithm of the other key
      // type: issuers rotating from RSA to EC list both); time is the same for all.
      if (ec == jwt::VerificationErrc::TokenExpired ||
          ec == jwt::VerificationErrc::ImmatureSignature) {
        break;
      }
    } catch (const std::exception& e) {
      last_error = std::string("malformed: ") + e.what();
    }
  }
  if (!verified) return fail(last_error);
  // What cpp-jwt checks only when present or as a plain string: exp is required,
  // aud may be a list (Kubernetes, OIDC), sub names the caller.
  if (!claims.contains("exp") || !claims["exp"].is_number()) return fail("no exp claim");
  const int64_t exp = claims["exp"].get<int64_t>();
  if (exp + issuer->leeway_s < now) return fail("expired");
  bool aud_ok = false;
  if (claims.contains("aud")) {
    const auto& aud = claims["aud"];
    if (aud.is_string()) aud_ok = aud.get<std::string>() == issuer->audience;
    if (aud.is_array()) {
      for (const auto& a : aud) aud_ok |= a.is_string() && a.get<std::string>() == issuer->audience;
    }
  }
  if (!aud_ok) return fail("not for audience " + QuoteInput(issuer->audience));
  if (!claims.contains("sub") || !claims["sub"].is_string() ||
      claims["sub"].get<std::string>().empty()) {
    return fail("no sub claim");
  }
  *identity = issuer->name + ":" + claims["sub"].get<std::string>();
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (token_cache_.size() >= kTokenCacheEntries) token_cache_.clear();
  token_cache_[token] = {*identity, exp + issuer->leeway_s};
  return Status::Ok();
}

Status AuthPolicy::Authenticate(const grpc::ServerContextBase& ctx, Identity* out) const {
  out->peer = ctx.peer();
  // A bearer token, when sent, names the caller; otherwise the client certificate.
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  if (it != md.end()) {
    std::string value(it->second.data(), it->second.size());
    constexpr std::string_view kBearer = "Bearer ";
    if (value.size() <= kBearer.size() || value.compare(0, kBearer.size(), kBearer) != 0) {
      return {StatusCode::kUnauthenticated, "authorization: not \"Bearer TOKEN\""};
    }
    return VerifyToken(value.substr(kBearer.size()), &out->name);
  }
  auto auth = ctx.auth_context();
  if (auth && auth->IsPeerAuthenticated()) {
    std::string uri, dns, cn;
    for (const auto& v : auth->FindPropertyValues(GRPC_PEER_URI_PROPERTY_NAME)) {
      if (uri.empty()) uri = std::string(v.data(), v.size());
    }
    for (const auto& v : auth->FindPropertyValues(GRPC_PEER_DNS_PROPERTY_NAME)) {
      if (dns.empty()) dns = std::string(v.data(), v.size());
    }
    for (const auto& v : auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME)) {
      cn = std::string(v.data(), v.size());
    }
    // One name per certificate, by kind: a URI SAN (SPIFFE), else a DNS SAN, else the
    // CN. A binding matches that name only (a CA that lets requesters pick their CN
    // cannot make a DNS-named certificate match a CN binding).
    const std::string& shown = !uri.empty() ? uri : !dns.empty() ? dns : cn;
    if (!shown.empty()) {
      out->name = "cert:" + shown;
      return Status::Ok();
    }
  }
  return {StatusCode::kUnauthenticated,
          Unauthenticated("no client certificate and no bearer token (send "
                          "\"authorization: Bearer TOKEN\" or use a client certificate)")};
}

Status AuthPolicy::Authorize(const Identity& id, Permission p, Caller* caller) const {
  caller->identity = id.name;
  caller->peer = id.peer;
  caller->permission = PermissionName(p);
  caller->tenants.reset();
  bool any = false, unscoped = false;
  std::set<std::string> tenants;
  std::set<std::string> roles;
  auto consider = [&](const std::string& subject) {
    auto [lo, hi] = bindings_.equal_range(subject);
    for (auto it = lo; it != hi; ++it) {
      roles.insert(it->second.role);
      if (!it->second.allows[static_cast<size_t>(p)]) continue;
      any = true;
      if (!it->second.tenants) {
        unscoped = true;
      } else {
        tenants.insert(it->second.tenants->begin(), it->second.tenants->end());
      }
    }
  };
  consider(id.name);
  if (!any) {
    std::string have;
    for (const auto& r : roles) have += (have.empty() ? "" : ", ") + r;
    return PermissionDenied("missing permission " + std::string(PermissionName(p)) + " (" +
                            id.name + " has " +
                            (have.empty() ? std::string("no role") : "roles " + have) + ")");
  }
  if (TenantScoped(p) && !unscoped) caller->tenants = std::move(tenants);
  return Status::Ok();
}

// -------------------------------------------------------------- audit ----

Status AuditLog::Open(const std::string& path, AuthMetrics* metrics,
                      std::shared_ptr<AuditLog>* out) {
  auto log = std::make_shared<AuditLog>();
  log->path_ = path;
  log->metrics_ = metrics;
  if (!path.empty()) {
    log->file_ = std::fopen(path.c_str(), "a");
    if (log->file_ == nullptr) {
      return InvalidArgument("auth.audit_log_path: cannot open " + QuoteInput(path) +
                             " for appending: " + std::strerror(errno));
    }
    log->writer_ = std::thread([raw = log.get()] { raw->WriterLoop(); });
  }
  *out = std::move(log);
  return Status::Ok();
}

AuditLog::~AuditLog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  if (file_ != nullptr) std::fclose(file_);
}

void AuditLog::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty() && stop_) return;
    std::deque<std::string> batch;
    batch.swap(queue_);
    lock.unlock();
    bool failed = false;
    for (const auto& line : batch) {
      failed |= std::fwrite(line.data(), 1, line.size(), file_) != line.size();
    }
    failed |= std::fflush(file_) != 0;
    if (failed) {
      LOG_ERROR("audit log write failed").With("path", path_).With("error", std::strerror(errno));
    }
    if (metrics_) metrics_->Audited(batch.size(), failed);
    lock.lock();
  }
}

void AuditLog::Write(const Record& r) {
  nlohmann::json j;
  const auto now = std::chrono::system_clock::now();
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  char ts[64];
  const time_t secs = static_cast<time_t>(ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  std::snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  j["time"] = ts;
  j["identity"] = r.identity;
  j["peer"] = r.peer;
  j["method"] = r.method;
  if (!r.subject.empty()) j["subject"] = r.subject;
  if (!r.tenant.empty()) j["tenant"] = r.tenant;
  j["result"] = r.denied ? "denied" : r.code == grpc::StatusCode::OK ? "ok" : "error";
  j["code"] = static_cast<int>(r.code);
  if (!r.message.empty()) {
    j["message"] = r.message.size() > 512 ? r.message.substr(0, 512) + "..." : r.message;
  }
  LOG_INFO("audit")
      .With("identity", r.identity)
      .With("peer", r.peer)
      .With("method", r.method)
      .With("subject", r.subject)
      .With("result", j["result"].get<std::string>());
  if (file_ == nullptr) {
    if (metrics_) metrics_->Audited(1, false);
    return;
  }
  // Written by the writer thread: callers (gRPC threads, the controller strand)
  // never wait for the disk.
  std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= kMaxQueued) {
      if (metrics_) metrics_->Audited(1, true);
      LOG_ERROR("audit log backlog full: record dropped").With("path", path_);
      return;
    }
    queue_.push_back(std::move(line));
  }
  cv_.notify_one();
}

// ------------------------------------------------------------ metrics ----

AuthMetrics::AuthMetrics(prometheus::Registry& registry)
    : denied_(prometheus::BuildCounter()
                  .Name("loom_api_denied_total")
                  .Help("API calls refused: reason unauthenticated (no or bad credentials) or "
                        "permission-denied (the caller's roles lack the permission or tenant)")
                  .Register(registry)),
      audit_(prometheus::BuildCounter()
                 .Name("loom_api_audit_records_total")
                 .Help("Audit records (mutating calls and denials) by result: written, or "
                       "failed (the audit file could not be written or its backlog was full)")
                 .Register(registry)) {}

void AuthMetrics::Denied(const std::string& method, const std::string& reason) {
  denied_.Add({{"method", RuleOf(method) ? method : "unknown"}, {"reason", reason}}).Increment();
}

void AuthMetrics::Audited(size_t records, bool failed) {
  audit_.Add({{"result", failed ? "failed" : "written"}}).Increment(static_cast<double>(records));
}

// -------------------------------------------------------------- guard ----

void ApiGuard::SetPolicy(std::shared_ptr<const AuthPolicy> policy) {
  std::lock_guard<std::mutex> lock(mu_);
  policy_ = std::move(policy);
}

std::shared_ptr<const AuthPolicy> ApiGuard::policy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return policy_;
}

Status ApiGuard::Admit(const grpc::ServerContextBase& ctx, const std::string& method,
                       const std::string& subject, Caller* caller) const {
  const MethodRule* rule = RuleOf(method);
  std::shared_ptr<const AuthPolicy> policy = this->policy();
  if (!policy) {
    caller->identity = "anonymous";
    caller->peer = ctx.peer();
    if (rule) caller->permission = PermissionName(rule->permission);
    return Status::Ok();
  }
  Identity id;
  if (Status s = policy->Authenticate(ctx, &id); !s.ok()) {
    caller->identity = "unauthenticated";
    caller->peer = ctx.peer();
    Deny(*caller, method, subject, "", s, "unauthenticated");
    return s;
  }
  if (rule == nullptr) return Internal("no permission rule for method " + method);
  if (Status s = policy->Authorize(id, rule->permission, caller); !s.ok()) {
    Deny(*caller, method, subject, "", s, "permission-denied");
    return s;
  }
  return Status::Ok();
}

void ApiGuard::Deny(const Caller& caller, const std::string& method, const std::string& subject,
                    const std::string& tenant, const Status& why, const char* reason) const {
  if (metrics_) metrics_->Denied(method, reason);
  std::shared_ptr<const AuthPolicy> policy = this->policy();
  // Budgets per minute: denials in the audit log (kMaxDeniedAuditsPerMinute: anyone who
  // can reach the port can cause them) and in the event log (the configured limit);
  // all are counted. What the audit log missed is noted in the next minute's first record.
  const int64_t minute = std::chrono::duration_cast<std::chrono::minutes>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  uint64_t audits = 0, events = 0, suppressed = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (minute != denied_minute_) {
      suppressed = denied_suppressed_;
      denied_minute_ = minute;
      denied_audits_ = denied_events_ = denied_suppressed_ = 0;
    }
    audits = ++denied_audits_;
    events = ++denied_events_;
    if (audits > kMaxDeniedAuditsPerMinute) ++denied_suppressed_;
  }
  if (audit_ && audits <= kMaxDeniedAuditsPerMinute) {
    std::string message = why.message();
    if (suppressed > 0) {
      message += " [" + std::to_string(suppressed) +
                 " denial(s) not audited in the previous minute: over the limit]";
    }
    audit_->Write({caller.identity, caller.peer, method, subject, tenant, true,
                   static_cast<grpc::StatusCode>(why.code()), message});
  }
  if (controller_ && policy && events <= policy->max_denied_events_per_minute()) {
    controller_->RecordDenied(caller, method, subject, why.message(),
                              policy->max_denied_events_per_minute());
  }
}

void ApiGuard::Finished(const Caller& caller, const std::string& method, const std::string& subject,
                        const std::string& tenant, const grpc::Status& status) const {
  if (status.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
    Deny(caller, method, subject, tenant,
         Status(StatusCode::kPermissionDenied, status.error_message()), "permission-denied");
    return;
  }
  const MethodRule* rule = RuleOf(method);
  if (!rule || !rule->mutating || !audit_) return;
  audit_->Write({caller.identity, caller.peer, method, subject, tenant, false, status.error_code(),
                 status.error_message()});
}

// ---------------------------------------------------------------- TLS ----

Status CheckTlsFiles(const loom::v1::TlsConfig& tls) {
  if (tls.cert_path().empty()) return InvalidArgument("tls.cert_path: required");
  if (tls.key_path().empty()) return InvalidArgument("tls.key_path: required");
  if (std::string e =
          loom::CheckPemKeyPair("tls.cert_path", tls.cert_path(), "tls.key_path", tls.key_path());
      !e.empty()) {
    return InvalidArgument(e);
  }
  if (std::string e = loom::CheckCertificateCurrent("tls.cert_path", tls.cert_path()); !e.empty()) {
    return InvalidArgument(e);
  }
  const std::string& mode = tls.client_auth();
  if (!mode.empty() && mode != "require" && mode != "optional" && mode != "none") {
    return InvalidArgument("tls.client_auth: " + QuoteInput(mode) +
                           " is not \"require\", \"optional\" or \"none\"");
  }
  if (tls.ca_path().empty()) {
    if (mode == "require" || mode == "optional") {
      return InvalidArgument("tls.ca_path: required to verify client certificates (client_auth " +
                             mode + ")");
    }
  } else if (std::string e = loom::CheckPemCertificates("tls.ca_path", tls.ca_path()); !e.empty()) {
    return InvalidArgument(e);
  }
  if (tls.refresh_interval_s() > 86400) {
    return InvalidArgument("tls.refresh_interval_s: at most 86400");
  }
  return Status::Ok();
}

}  // namespace loom::api
