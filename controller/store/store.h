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
#include <utility>
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
  std::string response;  // serialized response message (empty as loaded: see response_bytes)
  uint64_t revision = 0;
  int hash_scheme = 0;
  // Size of `response`; Load() fills this and leaves `response` in the store
  // (ReadResponse reads it when a retry needs it).
  uint64_t response_bytes = 0;
};

struct StoredState {
  std::vector<loom::v1::Job> jobs;
  std::vector<DrainRecord> drains;
  std::vector<loom::v1::Event> events;  // oldest first
  // Every stored event's revision and serialized size, oldest first (the
  // retained history; `events` holds the bodies of its newest part).
  std::vector<std::pair<uint64_t, uint32_t>> event_index;
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
  // The events serialized, parallel to `events` (optional: the controller
  // serializes each event once for the store, the size budget and watchers;
  // the store serializes any that is missing).
  std::vector<std::shared_ptr<const std::string>> event_wire;
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
  // Reads everything back; the bodies of at most `max_events` newest events
  // and at most `max_event_bytes` of them (the newest one always).
  virtual Status Load(size_t max_events, StoredState* out,
                      size_t max_event_bytes = static_cast<size_t>(-1)) = 0;
  // Applies the mutation atomically and durably, or not at all.
  virtual Status Commit(const Mutation& m) = 0;
  // The stored answer of a request id (NOT_FOUND when it has none).
  virtual Status ReadResponse(const std::string& request_id, std::string* out) = 0;
  // Appends to `out` the stored events with revisions in [from, to], oldest
  // first, stopping once `max_bytes` of bodies were read (at least one event).
  virtual Status ReadEvents(uint64_t from, uint64_t to, size_t max_bytes,
                            std::vector<loom::v1::Event>* out) = 0;
  // Gives up to `max_pages` free pages back to the file system (incremental
  // vacuum); `free_pages` gets the free pages left. A no-op where the store
  // has none.
  virtual Status Vacuum(int /*max_pages*/, int64_t* free_pages) {
    *free_pages = 0;
    return Status::Ok();
  }
};

// SQLite implementation: WAL mode, synchronous=FULL, a schema_version table
// and forward-only migrations applied in one transaction each on open;
// auto_vacuum=INCREMENTAL (a database made before it is converted once, by a
// VACUUM at open), so pruned pages go back to the file system through Vacuum().
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

  Status Load(size_t max_events, StoredState* out,
              size_t max_event_bytes = static_cast<size_t>(-1)) override;
  Status Commit(const Mutation& m) override;
  Status ReadEvents(uint64_t from, uint64_t to, size_t max_bytes,
                    std::vector<loom::v1::Event>* out) override;
  Status ReadResponse(const std::string& request_id, std::string* out) override;
  Status Vacuum(int max_pages, int64_t* free_pages) override;
  int schema_version() const { return schema_version_; }

 private:
  struct Impl;
  explicit SqliteStore(std::unique_ptr<Impl> impl, int version);
  std::unique_ptr<Impl> impl_;
  int schema_version_;
};

}  // namespace loom::controller

#endif  // LOOM_CONTROLLER_STORE_STORE_H_
