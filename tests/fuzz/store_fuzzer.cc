// libFuzzer target for store replay: what loomd does with its database on
// start (controller/loomd/main.cc): SqliteStore::Open (migrations to the
// latest schema), then Controller::Start (Load, jobs re-placed where they
// were, drains, events, idempotency records, policy, change-safety facts), on
// a corrupt or hostile database. After a successful start the controller must
// still serve: the stored idempotency records are exercised by retrying the
// requests that made them (kRequests), every job is read back, the event log
// replayed, links listed, a change plan computed, a Tick run, and new changes
// committed on top.
//
// Input: byte 0 selects the mode; bit 6 runs the controller with change
// safety in approve mode and fabric settings.
//   bit 7 set: the rest of the input is the database file itself.
//   bit 7 clear: a database created at schema version ((byte 0 & 63) % 6) by
//         SqliteStore, then filled by records (tests/fuzz/fuzz_util.h framing), tag % 9:
//         0 jobs, 1 drains, 2 events, 3 requests, 4 meta, 5 policies,
//         6 accepted_settings: a row (INSERT OR REPLACE; the payload is the
//           row's fields, each [type][length: 2 bytes LE][bytes], type % 4:
//           0 integer (up to 8 bytes LE), 1 text, 2 blob, 3 NULL)
//         7 drop table (payload[0] % 8, schema_version included)
//         8 set schema_version (first field)
//
// Properties: no crash, hang or sanitizer report; a refused database is
// refused with a message; once started, every request is answered (errors
// with a message).
#include <prometheus/registry.h>
#include <sqlite3.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/topology/topology_io.h"
#include "common/clock.h"
#include "controller/core/controller.h"
#include "controller/store/store.h"
#include "policy/policy_engine.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

namespace v1 = loom::v1;
using loom::Status;
using loom::controller::Controller;
using loom::fuzz::Check;
using loom::fuzz::Finding;

const char* const kTables[8] = {
    "jobs",          "drains", "events", "requests", "meta", "policies", "accepted_settings",
    "schema_version"};
const std::string kLink = "leaf0:Ethernet0--spine0:Ethernet0";

struct Fixture {
  std::shared_ptr<const loom::topology::TopologyIndex> topo;
  v1::PolicySet policy;
  std::vector<v1::FabricSetting> settings;
};

const Fixture& F() {
  static const Fixture* f = [] {
    auto* x = new Fixture;
    std::string error;
    v1::Topology t;
    if (!loom::topology::LoadTopologyFile(
            std::string(LOOM_SOURCE_DIR) + "/deploy/examples/topology-small.json", &t, &error)) {
      Finding(error);
    }
    x->topo = std::make_shared<const loom::topology::TopologyIndex>(std::move(t));
    if (!loom::policy::ParsePolicyJson(
            R"({"colors": [{"color": 1, "spines": ["spine0"]}, {"color": 2, "spines": ["spine1"]}],
                "rules": [{"name": "beta", "match": {"tenants": ["beta"]},
                           "action": {"colors": [2], "backupColor": 1}}]})",
            "fuzz", &x->policy, &error)) {
      Finding(error);
    }
    v1::FabricSetting s;
    s.set_name_pattern("leaf*");
    auto* th = s.add_thresholds();
    th->set_priority(3);
    th->set_ecn_kmin_bytes(100'000);
    th->set_ecn_kmax_bytes(400'000);
    x->settings.push_back(s);
    return x;
  }();
  return *f;
}

v1::Job MakeJob(const std::string& id, const std::string& tenant,
                std::initializer_list<const char*> endpoints) {
  v1::Job j;
  j.set_tenant(tenant);
  j.set_job_id(id);
  for (const char* e : endpoints) j.add_endpoints(e);
  return j;
}

// The requests whose idempotency records the seeds carry; retried after every
// start (a retry of a stored record answers from the store).
struct Requests {
  v1::RegisterJobRequest reg;
  v1::RegisterJobRequest reg2;
  v1::UpdateJobRequest upd;
  v1::DrainLinkRequest drain;
  v1::UndrainLinkRequest undrain;
  v1::ReleaseJobRequest rel;
};

const Requests& R() {
  static const Requests* r = [] {
    auto* x = new Requests;
    *x->reg.mutable_job() = MakeJob("j1", "acme", {"host000-gpu0", "host002-gpu1"});
    x->reg.set_request_id("r-register");
    *x->reg2.mutable_job() = MakeJob("j2", "beta", {"host001-gpu0", "host003-gpu0"});
    x->reg2.set_request_id("r-register-2");
    *x->upd.mutable_job() = MakeJob("j1", "acme", {"host000-gpu0", "host002-gpu1", "host003-gpu1"});
    x->upd.set_request_id("r-update");
    x->drain.set_link_id(kLink);
    x->drain.set_reason("flapping");
    x->drain.set_request_id("r-drain");
    x->undrain.set_link_id(kLink);
    x->undrain.set_request_id("r-undrain");
    x->rel.set_job_id("j2");
    x->rel.set_request_id("r-release");
    return x;
  }();
  return *r;
}

void RemoveDb(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    std::error_code ec;
    std::filesystem::remove(path + suffix, ec);
  }
}

// A controller on a store, driven synchronously.
class Node {
 public:
  Node(loom::controller::Store& store, bool approve) : work_(boost::asio::make_work_guard(io_)) {
    loom::controller::ControllerOptions o;
    o.event_retention = 64;
    o.request_retention = 16;
    if (approve) {
      o.change_mode = "approve";
      o.change_safety.enabled = true;
      o.change_safety.approve = true;
      o.fabric_settings = F().settings;
    }
    controller_ = std::make_unique<Controller>(io_, clock_, store, F().topo, registry_, o);
  }
  ~Node() {
    Drain();
    controller_.reset();
  }
  Controller& c() { return *controller_; }

  void Drain() {
    for (int i = 0; i < 1'000'000; ++i) {
      if (io_.poll() == 0) return;
    }
    Finding("the controller never goes idle");
  }

  // Calls `fn(req, done)` and waits for the answer.
  template <class Req, class Resp>
  Status Call(void (Controller::*fn)(Req, Controller::Done<Resp>), const Req& req,
              Resp* out = nullptr) {
    bool answered = false;
    Status status;
    (controller_.get()->*fn)(req, [&](Status s, Resp r) {
      answered = true;
      status = s;
      if (out) *out = std::move(r);
    });
    Drain();
    Check(answered, "a request was never answered");
    if (!status.ok()) Check(!status.message().empty(), "an error without a message");
    return status;
  }

  void Tick() {
    clock_.Advance(loom::kNsPerSec);
    controller_->Tick();
    Drain();
  }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  loom::VirtualClock clock_{0};
  prometheus::Registry registry_;
  std::unique_ptr<Controller> controller_;
};

// What loomd does with the database at start, then serving on top of it.
void Recover(const std::string& path, bool approve) {
  Status st;
  auto store = loom::controller::SqliteStore::Open(path, &st);
  if (!store) {
    Check(!st.ok() && !st.message().empty(), "SqliteStore::Open refused without a message");
    return;
  }
  Node node(*store, approve);
  st = node.c().Start();
  if (!st.ok()) {
    Check(!st.message().empty(), "Controller::Start failed without a message");
    return;
  }
  const Requests& r = R();
  node.Call(&Controller::RegisterJob, r.reg);
  node.Call(&Controller::RegisterJob, r.reg2);
  node.Call(&Controller::UpdateJob, r.upd);
  node.Call(&Controller::DrainLink, r.drain);
  node.Call(&Controller::UndrainLink, r.undrain);
  node.Call(&Controller::ReleaseJob, r.rel);
  v1::ListJobsResponse jobs;
  if (node.Call(&Controller::ListJobs, v1::ListJobsRequest(), &jobs).ok()) {
    for (const auto& j : jobs.jobs()) {
      v1::GetJobRequest g;
      g.set_job_id(j.job_id());
      node.Call(&Controller::GetJob, g);
    }
  }
  node.Call(&Controller::ListLinks, v1::ListLinksRequest());
  bool replayed = false;
  node.c().Subscribe(
      1, /*follow=*/false, [](const v1::Event&) { return true; },
      [&](Status s, uint64_t) {
        replayed = true;
        if (!s.ok()) Check(!s.message().empty(), "replay refused without a message");
      });
  node.Drain();
  Check(replayed, "the event replay was never answered");
  bool planned = false;
  node.c().GetChangePlan([&](Status, v1::ChangePlan) { planned = true; });
  node.Drain();
  Check(planned, "GetChangePlan was never answered");
  node.Tick();
  v1::RegisterJobRequest fresh;
  *fresh.mutable_job() = MakeJob("fresh", "acme", {"host001-gpu1", "host002-gpu0"});
  node.Call(&Controller::RegisterJob, fresh);
  v1::DrainLinkRequest d;
  d.set_link_id("leaf1:Ethernet1--spine1:Ethernet1");
  d.set_reason("after recovery");
  node.Call(&Controller::DrainLink, d);
}

// --- building the database from records ---------------------------------------

struct Field {
  int type = 3;  // 0 integer, 1 text, 2 blob, 3 NULL
  std::string bytes;
};

std::vector<Field> Fields(const std::string& payload) {
  loom::fuzz::Reader in(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  std::vector<Field> out;
  uint8_t type;
  std::string bytes;
  while (out.size() < 16 && in.Next(&type, &bytes)) out.push_back({type % 4, bytes});
  return out;
}

int64_t IntOf(const std::string& b) {
  uint64_t v = 0;
  for (size_t i = 0; i < b.size() && i < 8; ++i)
    v |= static_cast<uint64_t>(uint8_t(b[i])) << (8 * i);
  return static_cast<int64_t>(v);
}

void Bind(sqlite3_stmt* s, int i, const Field& f) {
  switch (f.type) {
    case 0:
      sqlite3_bind_int64(s, i, IntOf(f.bytes));
      break;
    case 1:
      sqlite3_bind_text(s, i, f.bytes.data(), static_cast<int>(f.bytes.size()), SQLITE_TRANSIENT);
      break;
    case 2:
      sqlite3_bind_blob(s, i, f.bytes.data(), static_cast<int>(f.bytes.size()), SQLITE_TRANSIENT);
      break;
    default:
      sqlite3_bind_null(s, i);
      break;
  }
}

int Columns(sqlite3* db, const std::string& table) {
  sqlite3_stmt* s = nullptr;
  int n = 0;
  if (sqlite3_prepare_v2(db, ("SELECT * FROM " + table + " LIMIT 0").c_str(), -1, &s, nullptr) ==
      SQLITE_OK) {
    n = sqlite3_column_count(s);
  }
  sqlite3_finalize(s);
  return n;
}

void ApplyRecord(sqlite3* db, uint8_t tag, const std::string& payload) {
  const int op = tag % 9;
  if (op == 7) {
    const std::string t = kTables[(payload.empty() ? 0 : uint8_t(payload[0])) % 8];
    sqlite3_exec(db, ("DROP TABLE IF EXISTS " + t).c_str(), nullptr, nullptr, nullptr);
    return;
  }
  std::vector<Field> fields = Fields(payload);
  if (op == 8) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, "UPDATE schema_version SET version = ?", -1, &s, nullptr) ==
        SQLITE_OK) {
      if (!fields.empty()) Bind(s, 1, fields[0]);
      sqlite3_step(s);
    }
    sqlite3_finalize(s);
    return;
  }
  const std::string table = kTables[op];
  const int n = Columns(db, table);
  if (n == 0) return;
  std::string sql = "INSERT OR REPLACE INTO " + table + " VALUES(";
  for (int i = 0; i < n; ++i) sql += i ? ",?" : "?";
  sql += ")";
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK) {
    for (int i = 0; i < n && i < static_cast<int>(fields.size()); ++i) Bind(s, i + 1, fields[i]);
    sqlite3_step(s);
  }
  sqlite3_finalize(s);
}

// Creates the database at `version` (SqliteStore's own migrations) and adds
// the records' rows.
void BuildDatabase(const std::string& path, int version, loom::fuzz::Reader& in) {
  {
    Status st;
    auto store = loom::controller::SqliteStore::Open(path, &st, version);
    Check(store != nullptr,
          "cannot create a database at version " + std::to_string(version) + ": " + st.message());
  }
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) Finding("sqlite3_open");
  sqlite3_exec(db, "PRAGMA synchronous=OFF; BEGIN", nullptr, nullptr, nullptr);
  uint8_t tag;
  std::string payload;
  int records = 0;
  while (records++ < 256 && in.Next(&tag, &payload)) ApplyRecord(db, tag, payload);
  sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close(db);
}

// --- seeds -------------------------------------------------------------------

// Field encoding of one column value of a dumped row.
void AddField(std::string* out, sqlite3_stmt* s, int i) {
  switch (sqlite3_column_type(s, i)) {
    case SQLITE_INTEGER: {
      const uint64_t v = static_cast<uint64_t>(sqlite3_column_int64(s, i));
      std::string b;
      for (int k = 0; k < 8 && (k == 0 || (v >> (8 * k)) != 0); ++k) {
        b.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
      }
      loom::fuzz::AddRecord(out, 0, b);
      break;
    }
    case SQLITE_TEXT:
      loom::fuzz::AddRecord(out, 1,
                            std::string(reinterpret_cast<const char*>(sqlite3_column_text(s, i)),
                                        static_cast<size_t>(sqlite3_column_bytes(s, i))));
      break;
    case SQLITE_BLOB:
      loom::fuzz::AddRecord(out, 2,
                            std::string(static_cast<const char*>(sqlite3_column_blob(s, i)),
                                        static_cast<size_t>(sqlite3_column_bytes(s, i))));
      break;
    default:
      loom::fuzz::AddRecord(out, 3, "");
      break;
  }
}

// Every row of the tables `upto` (index into kTables) as records.
std::string Dump(const std::string& path, int upto, size_t max_events) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) Finding("sqlite3_open");
  std::string out;
  for (int t = 0; t < upto; ++t) {
    std::string sql = std::string("SELECT * FROM ") + kTables[t];
    if (std::string(kTables[t]) == "events") {
      sql += " ORDER BY revision DESC LIMIT " + std::to_string(max_events);
    }
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) Finding(sql);
    while (sqlite3_step(s) == SQLITE_ROW) {
      std::string row;
      for (int i = 0; i < sqlite3_column_count(s); ++i) AddField(&row, s, i);
      if (row.size() < 0xffff) loom::fuzz::AddRecord(&out, static_cast<uint8_t>(t), row);
    }
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  return out;
}

// Runs a controller through the seed requests (and a few more changes) on a
// fresh database at `path`.
void Populate(const std::string& path, bool approve) {
  Status st;
  auto store = loom::controller::SqliteStore::Open(path, &st);
  Check(store != nullptr, st.message());
  Node node(*store, approve);
  Check(node.c().Start().ok(), "seed: start");
  const Requests& r = R();
  Check(node.Call(&Controller::RegisterJob, r.reg).ok(), "seed: register");
  Check(node.Call(&Controller::RegisterJob, r.reg2).ok(), "seed: register 2");
  Check(node.Call(&Controller::UpdateJob, r.upd).ok(), "seed: update");
  Check(node.Call(&Controller::DrainLink, r.drain).ok(), "seed: drain");
  Check(node.Call(&Controller::UndrainLink, r.undrain).ok(), "seed: undrain");
  v1::DrainLinkRequest d2;
  d2.set_link_id("leaf1:Ethernet0--spine0:Ethernet1");
  d2.set_reason("optics");
  Check(node.Call(&Controller::DrainLink, d2).ok(), "seed: drain 2");
  bool installed = false;
  node.c().InstallPolicy(
      F().policy, [&](Status s, loom::controller::PolicyInstallResult) { installed = s.ok(); });
  node.Drain();
  Check(installed, "seed: policy");
  node.Tick();
  if (approve) {
    node.c().GetChangePlan([](Status, v1::ChangePlan) {});
    node.Drain();
    node.Tick();
  }
  Check(node.Call(&Controller::ReleaseJob, r.rel).ok(), "seed: release");
}

void WriteSeeds() {
  const std::string db = loom::fuzz::ScratchDir() + "/seed.db";
  for (bool approve : {false, true}) {
    RemoveDb(db);
    Populate(db, approve);
    const std::string suffix = approve ? "_approve" : "";
    // Rows at each schema version (tables that version has).
    loom::fuzz::WriteSeed(
        "rows_v5" + suffix,
        std::string(1, static_cast<char>(approve ? 0x45 : 5)) + Dump(db, 7, 1000));
    if (!approve) {
      loom::fuzz::WriteSeed("rows_v4", std::string(1, 4) + Dump(db, 7, 1000));
      loom::fuzz::WriteSeed("rows_v2", std::string(1, 2) + Dump(db, 5, 1000));
      loom::fuzz::WriteSeed("rows_v1", std::string(1, 1) + Dump(db, 3, 1000));
      loom::fuzz::WriteSeed("rows_v5_few_events", std::string(1, 5) + Dump(db, 7, 3));
    }
  }
  // The database file itself (loomd closed it: no WAL left).
  {
    sqlite3* h = nullptr;
    sqlite3_open(db.c_str(), &h);
    sqlite3_exec(h, "PRAGMA journal_mode=DELETE; PRAGMA page_size=512; VACUUM", nullptr, nullptr,
                 nullptr);
    sqlite3_close(h);
    loom::fuzz::WriteSeed("raw_file", std::string(1, '\x80') + loom::fuzz::ReadFileOrDie(db));
  }
  // Hostile rows: a corrupt job, event and policy; a request record with a
  // response of another method; a future schema version; a missing table.
  {
    std::string s(1, 5);
    std::string job;
    loom::fuzz::AddRecord(&job, 1, "j1");
    loom::fuzz::AddRecord(&job, 1, "acme");
    loom::fuzz::AddRecord(&job, 2, std::string("\x0a\xff\x01", 3));
    loom::fuzz::AddRecord(&job, 0, std::string("\x02", 1));
    loom::fuzz::AddRecord(&s, 0, job);
    std::string ghost;  // a job on endpoints the topology does not have
    v1::Job g = MakeJob("ghost", "acme", {"host999-gpu0", "nowhere"});
    g.mutable_status()->set_state(v1::JOB_STATE_ASSIGNED);
    g.mutable_status()->mutable_assignment()->add_routes()->set_destination("nowhere");
    loom::fuzz::AddRecord(&ghost, 1, "ghost");
    loom::fuzz::AddRecord(&ghost, 1, "acme");
    loom::fuzz::AddRecord(&ghost, 2, g.SerializeAsString());
    loom::fuzz::AddRecord(&ghost, 0, std::string("\x03", 1));
    loom::fuzz::AddRecord(&s, 0, ghost);
    std::string req;
    loom::fuzz::AddRecord(&req, 1, "r-drain");
    loom::fuzz::AddRecord(&req, 1, "DrainLink");
    loom::fuzz::AddRecord(&req, 0, std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
    loom::fuzz::AddRecord(&req, 2, std::string("\x12\x03\x0a\x01", 4));
    loom::fuzz::AddRecord(&req, 0, std::string("\x09", 1));
    loom::fuzz::AddRecord(&req, 0, std::string("\x01", 1));
    loom::fuzz::AddRecord(&s, 3, req);
    std::string meta;
    loom::fuzz::AddRecord(&meta, 1, "change_quarantine");
    loom::fuzz::AddRecord(&meta, 2, std::string("\x08\x07\x12\x02", 4));
    loom::fuzz::AddRecord(&s, 4, meta);
    std::string drain;
    loom::fuzz::AddRecord(&drain, 1, "no-such-link");
    loom::fuzz::AddRecord(&drain, 1, "why");
    loom::fuzz::AddRecord(&drain, 0, std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8));
    loom::fuzz::AddRecord(&drain, 0, std::string("\x05", 1));
    loom::fuzz::AddRecord(&s, 1, drain);
    loom::fuzz::WriteSeed("hostile_rows", s);
    std::string v(1, 5);
    std::string ver;
    loom::fuzz::AddRecord(&ver, 0, std::string("\x06\0\0\0\0\0\0\0", 8));  // all 8 bytes
    loom::fuzz::AddRecord(&v, 8, ver);
    loom::fuzz::WriteSeed("future_version", v);
    std::string drop(1, 5);
    loom::fuzz::AddRecord(&drop, 7, std::string("\x02", 1));
    loom::fuzz::WriteSeed("missing_events_table", drop);
  }
  RemoveDb(db);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  loom::fuzz::QuietLogs();
  F();
  R();
  if (loom::fuzz::SeedDir() != nullptr) {
    WriteSeeds();
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string path = loom::fuzz::ScratchDir() + "/loom.db";
  RemoveDb(path);
  loom::fuzz::Reader in(data, size);
  const uint8_t mode = in.Byte();
  if (mode & 0x80) {
    loom::fuzz::WriteFileOrDie(path, in.Rest());
  } else {
    BuildDatabase(path, (mode & 0x3f) % 6, in);
  }
  Recover(path, (mode & 0x40) != 0);
  RemoveDb(path);
  return 0;
}
