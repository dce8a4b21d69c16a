// Authentication, authorization and audit of loomd's gRPC API (docs/security.md).
//
// Who is calling: the client certificate's identity (mTLS: its URI or DNS SAN, else
// its CN; "cert:NAME") or a bearer token, a JWT signed by a configured issuer's key
// ("ISSUER:SUB"). What they may do: the roles their identity is bound to in the
// configuration (scheduler, operator, policy-admin, viewer, admin), each a set of
// permissions, some limited to tenants. Every method needs one permission; a
// missing one is PERMISSION_DENIED naming it, counted, written to the audit log and
// (rate-limited) to the event log. Every mutating call is audited with its result.
//
// Everything here runs on gRPC threads and never blocks on the controller.
#ifndef LOOM_API_SERVICES_AUTH_H_
#define LOOM_API_SERVICES_AUTH_H_

#include <grpcpp/grpcpp.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <array>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "controller/core/controller.h"
#include "loom/v1/config.pb.h"

namespace loom::api {

enum class Permission {
  kTopologyRead,  // GetTopology
  kLinksRead,     // ListLinks, GetLink
  kLinksDrain,    // DrainLink, UndrainLink
  kDevicesRead,   // ListDevices, GetDeviceState
  kChangesRead,   // GetChangePlan
  kChangesApply,  // ApplyChangePlan, ClearChangeQuarantine
  kJobsRead,      // GetJob, ListJobs, GetJobHealth, WatchJobs (tenant-scoped)
  kJobsWrite,     // RegisterJob, UpdateJob, ReleaseJob (tenant-scoped)
  kEventsWatch,   // WatchEvents (tenant-scoped callers see their jobs' events only)
  kCount,
};
const char* PermissionName(Permission p);

// What a method needs, and whether it changes state (audited whatever its result).
struct MethodRule {
  Permission permission;
  bool mutating;
};
// The rule of a loom.v1 method by its short name ("ReleaseJob"); nullptr if unknown.
const MethodRule* RuleOf(const std::string& method);

struct Identity {
  std::string name;  // "cert:NAME", "ISSUER:SUB", "anonymous"
  std::string peer;  // gRPC's peer string
};

// Roles, bindings and JWT issuers, built once from the configuration (immutable;
// reload builds a new one).
class AuthPolicy {
 public:
  // Validates and loads `config` (keys read from their files). Error names the field.
  static Status Create(const loom::v1::AuthConfig& config, std::shared_ptr<const AuthPolicy>* out);

  // The caller's identity from its certificate or bearer token; UNAUTHENTICATED
  // naming what is wrong (no credentials, bad or expired token, unknown issuer).
  Status Authenticate(const grpc::ServerContextBase& ctx, Identity* out) const;
  // Grants `p` to `id`: fills `caller` (identity, peer, tenant scope) or returns
  // PERMISSION_DENIED naming the missing permission.
  Status Authorize(const Identity& id, Permission p, loom::controller::Caller* caller) const;
  // Verifies a bearer token (exposed for tests); fills the identity name.
  Status VerifyToken(const std::string& token, std::string* identity) const;

  uint32_t max_denied_events_per_minute() const { return max_denied_events_per_minute_; }
  const std::string& audit_log_path() const { return audit_log_path_; }

 private:
  struct Grant {
    std::optional<std::set<std::string>> tenants;  // unset = every tenant
  };
  struct Binding {
    std::string role;
    std::array<bool, static_cast<size_t>(Permission::kCount)> allows{};
    std::optional<std::set<std::string>> tenants;
  };
  struct Key {
    std::string pem;
    std::vector<std::string> algorithms;  // RS* or ES* by the key's type
    std::string path;
  };
  struct Issuer {
    std::string name, iss, audience;
    uint32_t leeway_s = 30;
    std::vector<Key> keys;
  };
  std::multimap<std::string, Binding> bindings_;  // subject -> binding
  std::vector<Issuer> issuers_;
  uint32_t max_denied_events_per_minute_ = 60;
  std::string audit_log_path_;
  // Verified tokens (token -> identity, expiry), bounded; a token is verified once.
  mutable std::mutex cache_mu_;
  mutable std::map<std::string, std::pair<std::string, int64_t>> token_cache_;
};

// The structured audit log: one JSON object per line, appended and flushed per
// record (also mirrored to loomd's log when no file is configured).
class AuthMetrics;

class AuditLog {
 public:
  // Opens (appends to) `path`; "" = loomd's log only. Records are written and
  // flushed by a thread of its own (callers never wait for the disk); failures and
  // records dropped when its backlog is full are counted in `metrics`.
  static Status Open(const std::string& path, AuthMetrics* metrics, std::shared_ptr<AuditLog>* out);
  ~AuditLog();
  struct Record {
    std::string identity, peer, method, subject, tenant;
    bool denied = false;
    grpc::StatusCode code = grpc::StatusCode::OK;
    std::string message;
  };
  void Write(const Record& r);

 private:
  static constexpr size_t kMaxQueued = 100000;
  void WriterLoop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  bool stop_ = false;
  std::thread writer_;
  FILE* file_ = nullptr;
  std::string path_;
  AuthMetrics* metrics_ = nullptr;
};

// Counters of refused calls and audit records.
class AuthMetrics {
 public:
  explicit AuthMetrics(prometheus::Registry& registry);
  // reason: "unauthenticated" or "permission-denied".
  void Denied(const std::string& method, const std::string& reason);
  void Audited(size_t records, bool failed);

 private:
  prometheus::Family<prometheus::Counter>& denied_;
  prometheus::Family<prometheus::Counter>& audit_;
};

// What the services need to admit a call; shared by every handler. `policy`
// unset = authorization off (every caller is "anonymous" with every permission;
// mutating calls are still audited).
class ApiGuard {
 public:
  ApiGuard(loom::controller::Controller* controller, std::shared_ptr<AuditLog> audit,
           AuthMetrics* metrics)
      : controller_(controller), audit_(std::move(audit)), metrics_(metrics) {}
  void SetPolicy(std::shared_ptr<const AuthPolicy> policy);
  std::shared_ptr<const AuthPolicy> policy() const;

  // Authenticates and authorizes `method` (its rule's permission). On refusal the
  // status to finish with (the denial already counted and audited).
  Status Admit(const grpc::ServerContextBase& ctx, const std::string& method,
               const std::string& subject, loom::controller::Caller* caller) const;
  // After a call: audits mutating calls and every PERMISSION_DENIED result (a
  // tenant the controller refused), and records denials in the event log.
  void Finished(const loom::controller::Caller& caller, const std::string& method,
                const std::string& subject, const std::string& tenant,
                const grpc::Status& status) const;

 private:
  void Deny(const loom::controller::Caller& caller, const std::string& method,
            const std::string& subject, const std::string& tenant, const Status& why,
            const char* reason) const;

  static constexpr uint64_t kMaxDeniedAuditsPerMinute = 1000;
  loom::controller::Controller* controller_;
  std::shared_ptr<AuditLog> audit_;
  AuthMetrics* metrics_;
  mutable std::mutex mu_;
  std::shared_ptr<const AuthPolicy> policy_;
  // Denial budgets of the current minute (Deny).
  mutable int64_t denied_minute_ = -1;
  mutable uint64_t denied_audits_ = 0, denied_events_ = 0, denied_suppressed_ = 0;
};

// Validates TLS files at start-up (readable PEM, the key matches the
// certificate); error names the field.
Status CheckTlsFiles(const loom::v1::TlsConfig& tls);

}  // namespace loom::api

#endif  // LOOM_API_SERVICES_AUTH_H_
