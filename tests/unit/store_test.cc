// SQLite store: migrations, durability of commits, refusal of bad files.
#include "controller/store/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>

#include "tests/unit/test_util.h"

namespace loom::controller {
namespace {

v1::Job MakeJob(const std::string& id, uint64_t rev) {
  v1::Job j;
  j.set_job_id(id);
  j.set_tenant("t1");
  j.add_endpoints("host000-gpu0");
  j.mutable_status()->set_revision(rev);
  return j;
}

v1::Event MakeEvent(uint64_t rev) {
  v1::Event e;
  e.set_revision(rev);
  e.set_type(v1::EVENT_TYPE_JOB_REGISTERED);
  e.set_subject("j" + std::to_string(rev));
  return e;
}

int UserVersion(const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db, "SELECT version FROM schema_version", -1, &s, nullptr);
  int v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int(s, 0) : -1;
  sqlite3_finalize(s);
  sqlite3_close(db);
  return v;
}

TEST(StoreTest, FreshDatabaseIsAtLatestVersionInWalMode) {
  testing::TempDir dir;
  Status st;
  auto store = SqliteStore::Open(dir.File("a.db"), &st);
  ASSERT_TRUE(store) << st.message();
  EXPECT_EQ(store->schema_version(), SqliteStore::kLatestSchemaVersion);
  store.reset();
  EXPECT_EQ(UserVersion(dir.File("a.db")), SqliteStore::kLatestSchemaVersion);
  std::ifstream wal_probe(dir.File("a.db"), std::ios::binary);
  char header[20] = {};
  wal_probe.read(header, sizeof(header));
  // SQLite header bytes 18/19 are 2 when the file is in WAL mode.
  EXPECT_EQ(header[18], 2);
  EXPECT_EQ(header[19], 2);
}

TEST(StoreTest, MigratesVersion1DatabaseKeepingData) {
  testing::TempDir dir;
  Status st;
  {
    auto v1store = SqliteStore::Open(dir.File("m.db"), &st, /*target_version=*/1);
    ASSERT_TRUE(v1store) << st.message();
    EXPECT_EQ(v1store->schema_version(), 1);
    Mutation m;
    m.put_jobs.push_back(MakeJob("old-job", 1));
    m.events.push_back(MakeEvent(1));
    m.put_drains.push_back({"link-a", "maintenance", 123, 1});
    ASSERT_TRUE(v1store->Commit(m).ok());
    // Version 1 has no idempotency table: recording a request id fails whole.
    Mutation bad;
    bad.events.push_back(MakeEvent(2));
    bad.requests.push_back({"r1", "RegisterJob", 1, "x", 2});
    EXPECT_FALSE(v1store->Commit(bad).ok());
  }
  EXPECT_EQ(UserVersion(dir.File("m.db")), 1);
  auto store = SqliteStore::Open(dir.File("m.db"), &st);
  ASSERT_TRUE(store) << st.message();
  EXPECT_EQ(store->schema_version(), SqliteStore::kLatestSchemaVersion);
  StoredState state;
  ASSERT_TRUE(store->Load(100, &state).ok());
  ASSERT_EQ(state.jobs.size(), 1u);
  EXPECT_EQ(state.jobs[0].job_id(), "old-job");
  ASSERT_EQ(state.drains.size(), 1u);
  EXPECT_EQ(state.drains[0].reason, "maintenance");
  // The failed commit left nothing behind.
  EXPECT_EQ(state.last_revision, 1u);
  EXPECT_EQ(state.events.size(), 1u);
}

TEST(StoreTest, RefusesNewerSchema) {
  testing::TempDir dir;
  Status st;
  ASSERT_TRUE(SqliteStore::Open(dir.File("n.db"), &st));
  sqlite3* db = nullptr;
  sqlite3_open(dir.File("n.db").c_str(), &db);
  sqlite3_exec(db, "UPDATE schema_version SET version = 99", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  EXPECT_FALSE(SqliteStore::Open(dir.File("n.db"), &st));
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("schema version 99 is newer"), std::string::npos) << st.message();
}

// Found by the store fuzzer (tests/fuzz/crashes/store): a negative or
// 2^31-wrapping schema version indexed the migrations array out of bounds; a
// `jobs` view over an endless recursive query hung the start-up.
TEST(StoreTest, RefusesNegativeVersionsAndViewsOrTriggers) {
  for (const char* sql :
       {"UPDATE schema_version SET version = -1", "UPDATE schema_version SET version = 2334798181",
        "DROP TABLE jobs; CREATE VIEW jobs(job_id, spec) AS WITH RECURSIVE r(x) AS (SELECT 1 "
        "UNION ALL SELECT x + 1 FROM r) SELECT x, x FROM r",
        "CREATE TRIGGER t AFTER INSERT ON events BEGIN DELETE FROM jobs; END"}) {
    testing::TempDir dir;
    Status st;
    ASSERT_TRUE(SqliteStore::Open(dir.File("v.db"), &st));
    sqlite3* db = nullptr;
    sqlite3_open(dir.File("v.db").c_str(), &db);
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql;
    sqlite3_close(db);
    EXPECT_FALSE(SqliteStore::Open(dir.File("v.db"), &st)) << sql;
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << sql;
    const bool named = st.message().find("not a Loom database") != std::string::npos ||
                       st.message().find("is newer than") != std::string::npos;
    EXPECT_TRUE(named) << st.message();
  }
}

TEST(StoreTest, RefusesFileThatIsNotADatabase) {
  testing::TempDir dir;
  {
    std::ofstream f(dir.File("junk.db"));
    f << "this is not an sqlite database, it is a text file that is long enough\n";
  }
  Status st;
  EXPECT_FALSE(SqliteStore::Open(dir.File("junk.db"), &st));
  EXPECT_NE(st.message().find("junk.db"), std::string::npos) << st.message();
}

TEST(StoreTest, CommitRoundTripAndPruning) {
  testing::TempDir dir;
  Status st;
  auto store = SqliteStore::Open(dir.File("r.db"), &st);
  ASSERT_TRUE(store);
  for (uint64_t r = 1; r <= 10; ++r) {
    Mutation m;
    m.events.push_back(MakeEvent(r));
    m.put_jobs.push_back(MakeJob("j" + std::to_string(r), r));
    if (r == 10) {
      m.prune_events_before = 6;
      m.delete_jobs.push_back("j1");
    }
    ASSERT_TRUE(store->Commit(m).ok());
  }
  StoredState state;
  ASSERT_TRUE(store->Load(3, &state).ok());
  EXPECT_EQ(state.jobs.size(), 9u);
  ASSERT_EQ(state.events.size(), 3u);  // newest 3 of the 5 kept
  EXPECT_EQ(state.events.front().revision(), 8u);
  EXPECT_EQ(state.last_revision, 10u);
  ASSERT_TRUE(store->Load(100, &state).ok());
  EXPECT_EQ(state.events.size(), 5u);
}

TEST(StoreTest, DuplicateRevisionFailsAtomically) {
  testing::TempDir dir;
  Status st;
  auto store = SqliteStore::Open(dir.File("d.db"), &st);
  Mutation m;
  m.events.push_back(MakeEvent(1));
  ASSERT_TRUE(store->Commit(m).ok());
  Mutation again;
  again.put_jobs.push_back(MakeJob("ghost", 1));
  again.events.push_back(MakeEvent(1));
  EXPECT_FALSE(store->Commit(again).ok());
  StoredState state;
  ASSERT_TRUE(store->Load(10, &state).ok());
  EXPECT_TRUE(state.jobs.empty());
}

}  // namespace
}  // namespace loom::controller

namespace loom::controller {
namespace {

TEST(StoreTest, PolicyVersionsAreKeptAndNewestLoaded) {
  testing::TempDir dir;
  Status st;
  auto store = SqliteStore::Open(dir.File("p.db"), &st);
  ASSERT_TRUE(store);
  for (uint64_t v = 1; v <= 3; ++v) {
    Mutation m;
    m.events.push_back(MakeEvent(v));
    v1::PolicySet p;
    p.set_version(v);
    p.add_rules()->set_name("r" + std::to_string(v));
    m.put_policy = p;
    ASSERT_TRUE(store->Commit(m).ok());
  }
  StoredState state;
  ASSERT_TRUE(store->Load(10, &state).ok());
  ASSERT_TRUE(state.policy.has_value());
  EXPECT_EQ(state.policy->version(), 3u);
  EXPECT_EQ(state.policy->rules(0).name(), "r3");
}

}  // namespace
}  // namespace loom::controller

namespace loom::controller {
namespace {

int64_t PragmaInt(const std::string& path, const char* pragma) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db, pragma, -1, &s, nullptr);
  int64_t v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
  sqlite3_finalize(s);
  sqlite3_close(db);
  return v;
}

v1::Event FatEvent(uint64_t rev) {
  v1::Event e = MakeEvent(rev);
  e.set_cause(std::string(3000, 'x'));
  return e;
}

TEST(StoreTest, ReadsEventRangesWithinAByteBudgetAndIndexesTheHistory) {
  testing::TempDir dir;
  Status st;
  auto store = SqliteStore::Open(dir.File("e.db"), &st);
  ASSERT_TRUE(store);
  for (uint64_t r = 1; r <= 20; ++r) {
    Mutation m;
    m.events.push_back(FatEvent(r));
    ASSERT_TRUE(store->Commit(m).ok());
  }
  std::vector<v1::Event> out;
  ASSERT_TRUE(store->ReadEvents(5, 9, size_t{1} << 20, &out).ok());
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out.front().revision(), 5u);
  EXPECT_EQ(out.back().revision(), 9u);
  out.clear();
  // ~3 KB each: a 7 KB budget stops after the third.
  ASSERT_TRUE(store->ReadEvents(1, 20, 7000, &out).ok());
  EXPECT_EQ(out.size(), 3u);
  out.clear();
  ASSERT_TRUE(store->ReadEvents(1, 20, 1, &out).ok());
  EXPECT_EQ(out.size(), 1u);  // at least one
  StoredState state;
  ASSERT_TRUE(store->Load(100, &state, 10000).ok());
  ASSERT_EQ(state.event_index.size(), 20u);
  EXPECT_EQ(state.event_index.front().first, 1u);
  EXPECT_EQ(state.event_index.back().second, FatEvent(20).ByteSizeLong());
  EXPECT_EQ(state.events.size(), 3u);  // the newest within 10,000 bytes
  EXPECT_EQ(state.events.front().revision(), 18u);
  ASSERT_TRUE(store->Load(100, &state, 1).ok());
  EXPECT_EQ(state.events.size(), 1u);  // the newest always
}

TEST(StoreTest, CompactedEventsGoBackToTheFileSystemByIncrementalVacuum) {
  testing::TempDir dir;
  const std::string path = dir.File("v.db");
  Status st;
  auto store = SqliteStore::Open(path, &st);
  ASSERT_TRUE(store);
  EXPECT_EQ(PragmaInt(path, "PRAGMA auto_vacuum"), 2);  // incremental
  for (uint64_t r = 1; r <= 2000; ++r) {
    Mutation m;
    m.events.push_back(FatEvent(r));
    ASSERT_TRUE(store->Commit(m).ok());
  }
  Mutation prune;
  prune.events.push_back(FatEvent(2001));
  prune.prune_events_before = 1990;
  ASSERT_TRUE(store->Commit(prune).ok());
  const int64_t pages_before = PragmaInt(path, "PRAGMA page_count");
  int64_t left = -1;
  ASSERT_TRUE(store->Vacuum(100, &left).ok());
  EXPECT_GT(left, 1000);  // ~6 MB freed, 100 pages given back so far
  while (left > 0) ASSERT_TRUE(store->Vacuum(1000, &left).ok());
  EXPECT_LT(PragmaInt(path, "PRAGMA page_count"), pages_before / 10);
}

TEST(StoreTest, ADatabaseMadeWithoutAutoVacuumIsConvertedOnOpen) {
  testing::TempDir dir;
  const std::string path = dir.File("old.db");
  {
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    sqlite3_exec(db, "CREATE TABLE schema_version(version INTEGER NOT NULL);", nullptr, nullptr,
                 nullptr);
    sqlite3_close(db);
  }
  EXPECT_EQ(PragmaInt(path, "PRAGMA auto_vacuum"), 0);
  Status st;
  auto store = SqliteStore::Open(path, &st);
  ASSERT_TRUE(store) << st.message();
  EXPECT_EQ(PragmaInt(path, "PRAGMA auto_vacuum"), 2);
}

}  // namespace
}  // namespace loom::controller
