// Durable intent: jobs, drains, the event log and idempotency records.
//
// The controller writes one Mutation per accepted change and acknowledges the
// client only after Commit() returned OK, so an acknowledged write survives a
// crash of the process. Threading: a Store is used from the controller strand
// only (not thread-safe).
#ifndef LOOM_CONTROLLER_STORE_STORE_H_
#define LOOM_CONTROLLER_STORE_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "loom/v1/device_state.pb.h"
#include "loom/v1/event.pb.h"
#include "loom/v1/job.pb.h"
#include "loom/v1/policy.pb.h"

namespace loom::controller {

struct DrainRecord {
  std::string link_id;
  std::string reason;
  int64_t time_ns = 0;  // wall clock
  uint64_t revision = 0;
};

// The answer given to a request carrying a client request id, kept so a retry
// gets the same answer.
struct RequestRecord {
  std::string request_id;
  std::string method;
  // loom::proto::CanonicalFingerprint of the request, made by fingerprint scheme
  // `hash_scheme` (0: records of earlier versions, hashed from serialized bytes).
  uint64_t request_hash = 0;
  std::string response;  // serialized response message
  uint64_t revision = 0;
  int hash_scheme = 0;
};

struct StoredState {
  std::vector<loom::v1::Job> jobs;
  std::vector<DrainRecord> drains;
  std::vector<loom::v1::Event> events;  // oldest first
  std::vector<RequestRecord> requests;
  uint64_t last_revision = 0;
  // The newest policy set version, when one was ever installed.
  std::optional<loom::v1::PolicySet> policy;
  // Fabric-wide settings each device was given (change safety), by device.
  std::map<std::string, loom::v1::DeviceState> accepted_settings;
  // Small controller facts by key (change safety: "change_revision",
  // "change_quarantine"); values are opaque bytes.
  std::map<std::string, std::string> meta;
};

// One atomic change.
struct Mutation {
  std::vector<loom::v1::Job> put_jobs;
  std::vector<std::string> delete_jobs;
  std::vector<DrainRecord> put_drains;
  std::vector<std::string> delete_drains;
  std::vector<loom::v1::Event> events;
  std::vector<RequestRecord> requests;
  // A new policy set version (its `version` field is the key).
  std::optional<loom::v1::PolicySet> put_policy;
  // Accepted fabric-wide settings to store (by device) or forget.
  std::vector<loom::v1::DeviceState> put_settings;
  std::vector<std::string> delete_settings;
  // Controller facts to store (key -> bytes).
  std::map<std::string, std::string> put_meta;
  // Events with revision < this are deleted (0: keep all).
  uint64_t prune_events_before = 0;
  // Request records with revision < this are deleted (0: keep all).
  uint64_t prune_requests_before = 0;
};

class Store {
 public:
  virtual ~Store() = default;
  // Reads everything back; at most `max_events` newest events.
  virtual Status Load(size_t max_events, StoredState* out) = 0;
  // Applies the mutation atomically and durably, or not at all.
  virtual Status Commit(const Mutation& m) = 0;
};

// SQLite implementation: WAL mode, synchronous=FULL, a schema_version table
// and forward-only migrations applied in one transaction each on open.
class SqliteStore final : public Store {
 public:
  static constexpr int kLatestSchemaVersion = 5;

  // Opens (creating if needed) and migrates to `target_version` (tests use a
  // lower one to build old databases). Returns nullptr and sets `status` when
  // the file cannot be opened, is not a Loom database, or is newer than
  // this binary understands.
  static std::unique_ptr<SqliteStore> Open(const std::string& path, Status* status,
                                           int target_version = kLatestSchemaVersion);
  ~SqliteStore() override;

  Status Load(size_t max_events, StoredState* out) override;
  Status Commit(const Mutation& m) override;
  int schema_version() const { return schema_version_; }

 private:
  struct Impl;
  explicit SqliteStore(std::unique_ptr<Impl> impl, int version);
  std::unique_ptr<Impl> impl_;
  int schema_version_;
};

}  // namespace loom::controller

#endif  // LOOM_CONTROLLER_STORE_STORE_H_
