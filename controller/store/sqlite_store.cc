#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <functional>

#include "controller/store/store.h"

namespace loom::controller {

namespace {

// Forward migrations; index i migrates from version i to i+1.
const char* const kMigrations[] = {
    // 0 -> 1: jobs, drains, event log.
    "CREATE TABLE jobs(job_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, spec BLOB NOT NULL,"
    " revision INTEGER NOT NULL);"
    "CREATE TABLE drains(link_id TEXT PRIMARY KEY, reason TEXT NOT NULL,"
    " time_ns INTEGER NOT NULL, revision INTEGER NOT NULL);"
    "CREATE TABLE events(revision INTEGER PRIMARY KEY, type INTEGER NOT NULL,"
    " subject TEXT NOT NULL, body BLOB NOT NULL);",
    // 1 -> 2: idempotency records and a key/value table.
    "CREATE TABLE requests(request_id TEXT PRIMARY KEY, method TEXT NOT NULL,"
    " request_hash INTEGER NOT NULL, response BLOB NOT NULL, revision INTEGER NOT NULL);"
    "CREATE INDEX requests_by_revision ON requests(revision);"
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);",
    // 2 -> 3: versioned TELB policy sets (every version kept).
    "CREATE TABLE policies(version INTEGER PRIMARY KEY, body BLOB NOT NULL);",
    // 3 -> 4: fabric-wide settings each device was given (change safety).
    "CREATE TABLE accepted_settings(device TEXT PRIMARY KEY, state BLOB NOT NULL);",
    // 4 -> 5: the fingerprint scheme of each idempotency record (0: the serialized bytes'
    // hash of earlier versions, not canonical).
    "ALTER TABLE requests ADD COLUMN hash_scheme INTEGER NOT NULL DEFAULT 0;",
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == SqliteStore::kLatestSchemaVersion);

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Stmt() { sqlite3_finalize(s_); }
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return s_; }
  void Text(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void Blob(int i, const std::string& v) {
    sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void Int(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  int Step() { return sqlite3_step(s_); }
  void Reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  std::string ColText(int i) {
    auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, i));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, i))) : std::string();
  }
  std::string ColBlob(int i) {
    auto* p = static_cast<const char*>(sqlite3_column_blob(s_, i));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, i))) : std::string();
  }
  int64_t ColInt(int i) { return sqlite3_column_int64(s_, i); }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_;
};

}  // namespace

struct SqliteStore::Impl {
  sqlite3* db = nullptr;
  std::string path;
  ~Impl() {
    if (db) sqlite3_close_v2(db);
  }
  Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      Status s = Internal(path + ": " + (err ? err : "sqlite error"));
      sqlite3_free(err);
      return s;
    }
    return Status::Ok();
  }
  Status Err(const std::string& what) {
    return Internal(path + ": " + what + ": " + sqlite3_errmsg(db));
  }
};

SqliteStore::SqliteStore(std::unique_ptr<Impl> impl, int version)
    : impl_(std::move(impl)), schema_version_(version) {}
SqliteStore::~SqliteStore() = default;

std::unique_ptr<SqliteStore> SqliteStore::Open(const std::string& path, Status* status,
                                               int target_version) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  if (sqlite3_open_v2(path.c_str(), &impl->db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    *status = Unavailable(path + ": cannot open database: " +
                          (impl->db ? sqlite3_errmsg(impl->db) : "out of memory"));
    return nullptr;
  }
  sqlite3_busy_timeout(impl->db, 5000);
  // Before the first table exists this makes a new database incremental-vacuum
  // capable; an older database is converted below. (A non-database file
  // ignores it and fails at journal_mode.)
  sqlite3_exec(impl->db, "PRAGMA auto_vacuum=INCREMENTAL", nullptr, nullptr, nullptr);
  // journal_mode returns a row; a non-database file fails here.
  {
    Stmt s(impl->db, "PRAGMA journal_mode=WAL");
    if (!s.ok() || s.Step() != SQLITE_ROW) {
      *status = impl->Err("not a usable SQLite database");
      return nullptr;
    }
    if (s.ColText(0) != "wal") {
      *status = Internal(path + ": cannot switch the database to WAL mode");
      return nullptr;
    }
  }
  // A database file is input: schema objects in it (views, triggers) must not
  // run code on Loom's queries.
  if (Status s = impl->Exec("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; "
                            "PRAGMA trusted_schema=OFF;");
      !s.ok()) {
    *status = s;
    return nullptr;
  }
  if (Status s = impl->Exec("CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL)");
      !s.ok()) {
    *status = s;
    return nullptr;
  }
  {
    // Loom's database holds tables and indexes only: a view or trigger (which
    // could loop forever or rewrite rows on Loom's queries) means it is not one.
    Stmt s(impl->db,
           "SELECT type, name FROM sqlite_master WHERE type NOT IN ('table', 'index') LIMIT 1");
    if (!s.ok()) {
      *status = impl->Err("reading the schema");
      return nullptr;
    }
    if (s.Step() == SQLITE_ROW) {
      *status = FailedPrecondition(path + ": not a Loom database: it has a " + s.ColText(0) +
                                   " (\"" + s.ColText(1) + "\")");
      return nullptr;
    }
  }
  int64_t stored_version = 0;
  {
    Stmt s(impl->db, "SELECT version FROM schema_version");
    if (!s.ok()) {
      *status = impl->Err("reading schema_version");
      return nullptr;
    }
    if (s.Step() == SQLITE_ROW) stored_version = s.ColInt(0);
  }
  if (stored_version < 0) {
    *status = FailedPrecondition(path + ": not a Loom database: schema version " +
                                 std::to_string(stored_version));
    return nullptr;
  }
  if (stored_version > kLatestSchemaVersion) {
    *status =
        FailedPrecondition(path + ": database schema version " + std::to_string(stored_version) +
                           " is newer than this loomd supports (" +
                           std::to_string(kLatestSchemaVersion) + "); upgrade loomd");
    return nullptr;
  }
  int version = static_cast<int>(stored_version);
  if (version > kLatestSchemaVersion) {
    *status = FailedPrecondition(path + ": database schema version " + std::to_string(version) +
                                 " is newer than this loomd supports (" +
                                 std::to_string(kLatestSchemaVersion) + "); upgrade loomd");
    return nullptr;
  }
  while (version < target_version) {
    std::string sql = std::string("BEGIN IMMEDIATE;") + kMigrations[version] +
                      "DELETE FROM schema_version; INSERT INTO schema_version VALUES(" +
                      std::to_string(version + 1) + "); COMMIT;";
    if (Status s = impl->Exec(sql.c_str()); !s.ok()) {
      impl->Exec("ROLLBACK");
      *status = Internal("migrating schema from version " + std::to_string(version) + " to " +
                         std::to_string(version + 1) + " failed: " + s.message());
      return nullptr;
    }
    ++version;
  }
  {
    // A database made before auto_vacuum was set keeps mode NONE until a full
    // VACUUM rewrites it: done once, here (its size is the retained history).
    int64_t mode = 2;
    {
      Stmt s(impl->db, "PRAGMA auto_vacuum");
      if (s.ok() && s.Step() == SQLITE_ROW) mode = s.ColInt(0);
    }
    if (mode != 2) {
      if (Status v = impl->Exec("PRAGMA auto_vacuum=INCREMENTAL; VACUUM;"); !v.ok()) {
        *status = Internal("converting the database to incremental vacuum: " + v.message());
        return nullptr;
      }
    }
  }
  *status = Status::Ok();
  return std::unique_ptr<SqliteStore>(new SqliteStore(std::move(impl), version));
}

Status SqliteStore::Load(size_t max_events, StoredState* out, size_t max_event_bytes) {
  *out = StoredState{};
  sqlite3* db = impl_->db;
  {
    Stmt s(db, "SELECT job_id, spec FROM jobs ORDER BY job_id");
    while (s.Step() == SQLITE_ROW) {
      loom::v1::Job job;
      if (!job.ParseFromString(s.ColBlob(1))) {
        return {StatusCode::kDataLoss, impl_->path + ": job " + s.ColText(0) + " is corrupt"};
      }
      out->jobs.push_back(std::move(job));
    }
  }
  {
    Stmt s(db, "SELECT link_id, reason, time_ns, revision FROM drains ORDER BY link_id");
    while (s.Step() == SQLITE_ROW) {
      out->drains.push_back(
          {s.ColText(0), s.ColText(1), s.ColInt(2), static_cast<uint64_t>(s.ColInt(3))});
    }
  }
  {
    // The index of the whole retained history (length() of a blob is read
    // from the record header, not the body).
    Stmt s(db, "SELECT revision, length(body) FROM events ORDER BY revision");
    while (s.Step() == SQLITE_ROW) {
      out->event_index.emplace_back(static_cast<uint64_t>(s.ColInt(0)),
                                    static_cast<uint32_t>(s.ColInt(1)));
    }
  }
  {
    // Bodies of the newest events, within the count and byte budgets.
    size_t count = 0, bytes = 0;
    uint64_t first = 0;
    for (auto it = out->event_index.rbegin(); it != out->event_index.rend(); ++it) {
      if (count > 0 && (count >= max_events || bytes + it->second > max_event_bytes)) break;
      ++count;
      bytes += it->second;
      first = it->first;
    }
    if (count > 0) {
      Stmt s(db, "SELECT body FROM events WHERE revision >= ? ORDER BY revision");
      s.Int(1, static_cast<int64_t>(first));
      while (s.Step() == SQLITE_ROW) {
        loom::v1::Event ev;
        if (!ev.ParseFromString(s.ColBlob(0))) {
          return {StatusCode::kDataLoss, impl_->path + ": an event is corrupt"};
        }
        out->events.push_back(std::move(ev));
      }
    }
  }
  {
    Stmt s(db, "SELECT MAX(revision) FROM events");
    if (s.Step() == SQLITE_ROW) out->last_revision = static_cast<uint64_t>(s.ColInt(0));
  }
  if (schema_version_ >= 3) {
    Stmt s(db, "SELECT body FROM policies ORDER BY version DESC LIMIT 1");
    if (s.Step() == SQLITE_ROW) {
      loom::v1::PolicySet p;
      if (!p.ParseFromString(s.ColBlob(0))) {
        return {StatusCode::kDataLoss, impl_->path + ": the newest policy set is corrupt"};
      }
      out->policy = std::move(p);
    }
  }
  if (schema_version_ >= 2) {
    Stmt s(db, "SELECT key, value FROM meta");
    while (s.Step() == SQLITE_ROW) out->meta[s.ColText(0)] = s.ColBlob(1);
  }
  if (schema_version_ >= 4) {
    Stmt s(db, "SELECT device, state FROM accepted_settings");
    while (s.Step() == SQLITE_ROW) {
      loom::v1::DeviceState st;
      if (!st.ParseFromString(s.ColBlob(1))) {
        return {StatusCode::kDataLoss,
                impl_->path + ": the accepted settings of " + s.ColText(0) + " are corrupt"};
      }
      out->accepted_settings[s.ColText(0)] = std::move(st);
    }
  }
  if (schema_version_ >= 2) {
    // Answers stay in the database (ReadResponse); only their sizes are read.
    Stmt s(db, schema_version_ >= 5 ? "SELECT request_id, method, request_hash, length(response), "
                                      "revision, hash_scheme FROM requests"
                                    : "SELECT request_id, method, request_hash, length(response), "
                                      "revision, 0 FROM requests");
    while (s.Step() == SQLITE_ROW) {
      RequestRecord r{s.ColText(0),
                      s.ColText(1),
                      static_cast<uint64_t>(s.ColInt(2)),
                      std::string(),
                      static_cast<uint64_t>(s.ColInt(4)),
                      static_cast<int>(s.ColInt(5))};
      r.response_bytes = static_cast<uint64_t>(s.ColInt(3));
      out->requests.push_back(std::move(r));
    }
  }
  return Status::Ok();
}

Status SqliteStore::Commit(const Mutation& m) {
  sqlite3* db = impl_->db;
  if (Status s = impl_->Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  auto fail = [&](const std::string& what) {
    Status s = impl_->Err(what);
    impl_->Exec("ROLLBACK");
    return s;
  };
  if (!m.put_jobs.empty()) {
    Stmt s(db, "INSERT OR REPLACE INTO jobs(job_id, tenant, spec, revision) VALUES(?,?,?,?)");
    for (const auto& job : m.put_jobs) {
      s.Text(1, job.job_id());
      s.Text(2, job.tenant());
      s.Blob(3, job.SerializeAsString());
      s.Int(4, static_cast<int64_t>(job.status().revision()));
      if (s.Step() != SQLITE_DONE) return fail("writing job " + job.job_id());
      s.Reset();
    }
  }
  if (!m.delete_jobs.empty()) {
    Stmt s(db, "DELETE FROM jobs WHERE job_id = ?");
    for (const auto& id : m.delete_jobs) {
      s.Text(1, id);
      if (s.Step() != SQLITE_DONE) return fail("deleting job " + id);
      s.Reset();
    }
  }
  if (!m.put_drains.empty()) {
    Stmt s(db, "INSERT OR REPLACE INTO drains(link_id, reason, time_ns, revision) VALUES(?,?,?,?)");
    for (const auto& d : m.put_drains) {
      s.Text(1, d.link_id);
      s.Text(2, d.reason);
      s.Int(3, d.time_ns);
      s.Int(4, static_cast<int64_t>(d.revision));
      if (s.Step() != SQLITE_DONE) return fail("writing drain " + d.link_id);
      s.Reset();
    }
  }
  if (!m.delete_drains.empty()) {
    Stmt s(db, "DELETE FROM drains WHERE link_id = ?");
    for (const auto& id : m.delete_drains) {
      s.Text(1, id);
      if (s.Step() != SQLITE_DONE) return fail("deleting drain " + id);
      s.Reset();
    }
  }
  if (!m.events.empty()) {
    Stmt s(db, "INSERT INTO events(revision, type, subject, body) VALUES(?,?,?,?)");
    for (size_t i = 0; i < m.events.size(); ++i) {
      const auto& ev = m.events[i];
      s.Int(1, static_cast<int64_t>(ev.revision()));
      s.Int(2, ev.type());
      s.Text(3, ev.subject());
      if (i < m.event_wire.size() && m.event_wire[i]) {
        s.Blob(4, *m.event_wire[i]);
      } else {
        s.Blob(4, ev.SerializeAsString());
      }
      if (s.Step() != SQLITE_DONE) return fail("appending event");
      s.Reset();
    }
  }
  if (!m.requests.empty()) {
    Stmt s(db,
           "INSERT OR REPLACE INTO requests(request_id, method, request_hash, response, revision,"
           " hash_scheme) VALUES(?,?,?,?,?,?)");
    for (const auto& r : m.requests) {
      s.Text(1, r.request_id);
      s.Text(2, r.method);
      s.Int(3, static_cast<int64_t>(r.request_hash));
      s.Blob(4, r.response);
      s.Int(5, static_cast<int64_t>(r.revision));
      s.Int(6, r.hash_scheme);
      if (s.Step() != SQLITE_DONE) return fail("recording request id");
      s.Reset();
    }
  }
  if (m.put_policy) {
    Stmt s(db, "INSERT INTO policies(version, body) VALUES(?,?)");
    s.Int(1, static_cast<int64_t>(m.put_policy->version()));
    s.Blob(2, m.put_policy->SerializeAsString());
    if (s.Step() != SQLITE_DONE) return fail("writing policy version");
  }
  if (!m.put_settings.empty()) {
    Stmt s(db, "INSERT OR REPLACE INTO accepted_settings(device, state) VALUES(?,?)");
    for (const auto& st : m.put_settings) {
      s.Text(1, st.device());
      s.Blob(2, st.SerializeAsString());
      if (s.Step() != SQLITE_DONE) return fail("writing accepted settings");
      s.Reset();
    }
  }
  if (!m.put_meta.empty()) {
    Stmt s(db, "INSERT OR REPLACE INTO meta(key, value) VALUES(?,?)");
    for (const auto& [k, v] : m.put_meta) {
      s.Text(1, k);
      s.Blob(2, v);
      if (s.Step() != SQLITE_DONE) return fail("writing controller facts");
      s.Reset();
    }
  }
  if (!m.delete_settings.empty()) {
    Stmt s(db, "DELETE FROM accepted_settings WHERE device = ?");
    for (const auto& d : m.delete_settings) {
      s.Text(1, d);
      if (s.Step() != SQLITE_DONE) return fail("deleting accepted settings");
      s.Reset();
    }
  }
  if (m.prune_events_before > 0) {
    Stmt s(db, "DELETE FROM events WHERE revision < ?");
    s.Int(1, static_cast<int64_t>(m.prune_events_before));
    if (s.Step() != SQLITE_DONE) return fail("pruning events");
  }
  if (m.prune_requests_before > 0) {
    Stmt s(db, "DELETE FROM requests WHERE revision < ?");
    s.Int(1, static_cast<int64_t>(m.prune_requests_before));
    if (s.Step() != SQLITE_DONE) return fail("pruning request ids");
  }
  if (sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return fail("commit");
  }
  return Status::Ok();
}

Status SqliteStore::ReadEvents(uint64_t from, uint64_t to, size_t max_bytes,
                               std::vector<loom::v1::Event>* out) {
  Stmt s(impl_->db,
         "SELECT revision, body FROM events WHERE revision >= ? AND revision <= ?"
         " ORDER BY revision");
  if (!s.ok()) return impl_->Err("reading events");
  s.Int(1, static_cast<int64_t>(from));
  s.Int(2, static_cast<int64_t>(std::min<uint64_t>(to, INT64_MAX)));
  size_t bytes = 0;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    std::string body = s.ColBlob(1);
    loom::v1::Event ev;
    if (!ev.ParseFromString(body)) {
      return {StatusCode::kDataLoss,
              impl_->path + ": event " + std::to_string(s.ColInt(0)) + " is corrupt"};
    }
    bytes += body.size();
    out->push_back(std::move(ev));
    if (bytes >= max_bytes) return Status::Ok();
  }
  if (rc != SQLITE_DONE) return impl_->Err("reading events");
  return Status::Ok();
}

Status SqliteStore::ReadResponse(const std::string& request_id, std::string* out) {
  Stmt s(impl_->db, "SELECT response FROM requests WHERE request_id = ?");
  if (!s.ok()) return impl_->Err("reading a stored answer");
  s.Text(1, request_id);
  const int rc = s.Step();
  if (rc == SQLITE_ROW) {
    *out = s.ColBlob(0);
    return Status::Ok();
  }
  if (rc == SQLITE_DONE) return NotFound("no stored answer for this request id");
  return impl_->Err("reading a stored answer");
}

Status SqliteStore::Vacuum(int max_pages, int64_t* free_pages) {
  *free_pages = 0;
  const std::string sql = "PRAGMA incremental_vacuum(" + std::to_string(max_pages) + ")";
  if (Status s = impl_->Exec(sql.c_str()); !s.ok()) return s;
  Stmt s(impl_->db, "PRAGMA freelist_count");
  if (s.ok() && s.Step() == SQLITE_ROW) *free_pages = s.ColInt(0);
  return Status::Ok();
}

}  // namespace loom::controller
