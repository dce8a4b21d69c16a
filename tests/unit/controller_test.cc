// Controller core: jobs and drains are validated, persisted, evented, and
// reloaded after a restart; idempotent retries; event replay.
#include "controller/core/controller.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <future>
#include <random>
#include <set>
#include <thread>

#include "api/proto_util/fingerprint.h"
#include "southbound/wire/device_state_util.h"
#include "tests/unit/test_util.h"

namespace loom::controller {
namespace {

// A store that counts its transactions and fails them on request.
class FlakyStore final : public Store {
 public:
  explicit FlakyStore(Store& inner) : inner_(inner) {}
  Status Load(size_t max_events, StoredState* out, size_t max_event_bytes) override {
    return inner_.Load(max_events, out, max_event_bytes);
  }
  Status Commit(const Mutation& m) override {
    ++commits;
    if (fail) return Status(StatusCode::kInternal, "disk on fire");
    return inner_.Commit(m);
  }
  Status ReadResponse(const std::string& request_id, std::string* out) override {
    return inner_.ReadResponse(request_id, out);
  }
  Status ReadEvents(uint64_t from, uint64_t to, size_t max_bytes,
                    std::vector<v1::Event>* out) override {
    return inner_.ReadEvents(from, to, max_bytes, out);
  }
  Status Vacuum(int max_pages, int64_t* free_pages) override {
    return inner_.Vacuum(max_pages, free_pages);
  }
  std::atomic<int> commits{0};
  std::atomic<bool> fail{false};

 private:
  Store& inner_;
};

// Runs a Controller on its own io_context thread; calls are made synchronous.
class Harness {
 public:
  Harness(const std::string& db, std::shared_ptr<const loom::topology::TopologyIndex> topo,
          ControllerOptions opts = {})
      : work_(boost::asio::make_work_guard(io_)) {
    Status st;
    store_ = SqliteStore::Open(db, &st);
    EXPECT_TRUE(store_) << st.message();
    flaky_ = std::make_unique<FlakyStore>(*store_);
    controller_ = std::make_unique<Controller>(io_, clock_, *flaky_, topo, registry_, opts);
    start_status_ = controller_->Start();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Harness() {
    work_.reset();
    io_.stop();
    thread_.join();
  }

  template <typename Req, typename Resp>
  std::pair<Status, Resp> Call(void (Controller::*fn)(Req, Controller::Done<Resp>), Req req) {
    std::promise<std::pair<Status, Resp>> p;
    (controller_.get()->*fn)(std::move(req), [&p](Status s, Resp r) {
      p.set_value({s, std::move(r)});
    });
    return p.get_future().get();
  }

  // Collects replayed events from `from` (replay only).
  std::vector<v1::Event> Replay(uint64_t from, Status* status = nullptr) {
    std::vector<v1::Event> out;
    std::promise<Status> p;
    controller_->Subscribe(
        from, /*follow=*/false,
        [&out](const v1::Event& e) {
          out.push_back(e);
          return true;
        },
        [&p](Status s, uint64_t) { p.set_value(s); });
    Status s = p.get_future().get();
    if (status) *status = s;
    return out;
  }

  Controller& c() { return *controller_; }
  FlakyStore& store() { return *flaky_; }
  // Holds the controller strand until the returned promise is set (what arrives
  // meanwhile waits, as behind a long placement).
  std::shared_ptr<std::promise<void>> HoldStrand() {
    auto release = std::make_shared<std::promise<void>>();
    std::promise<void> held;
    auto wait = release->get_future().share();
    controller_->WithReconciler([wait, &held](const Reconciler&) {
      held.set_value();
      wait.wait();
    });
    held.get_future().wait();
    return release;
  }
  prometheus::Registry& registry() { return registry_; }
  VirtualClock clock_{0};
  Status start_status_;

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  prometheus::Registry registry_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<FlakyStore> flaky_;
  std::unique_ptr<Controller> controller_;
  std::thread thread_;
};

v1::RegisterJobRequest JobReq(const std::string& id, const std::string& request_id = "") {
  v1::RegisterJobRequest r;
  r.mutable_job()->set_tenant("acme");
  r.mutable_job()->set_job_id(id);
  r.mutable_job()->add_endpoints("host000-gpu0");
  r.mutable_job()->add_endpoints("host002-gpu1");
  r.set_request_id(request_id);
  return r;
}

const std::string kLink = "leaf0:Ethernet0--spine0:Ethernet0";

class ControllerTest : public ::testing::Test {
 protected:
  loom::testing::TempDir dir_;
  std::shared_ptr<const loom::topology::TopologyIndex> topo_ = loom::testing::SmallFabric();
  std::string db_ = dir_.File("loom.db");
};

TEST_F(ControllerTest, RegisterGetListRelease) {
  Harness h(db_, topo_);
  ASSERT_TRUE(h.start_status_.ok());
  auto [s1, r1] = h.Call(&Controller::RegisterJob, JobReq("j1"));
  ASSERT_TRUE(s1.ok()) << s1.message();
  // host000 (leaf0) <-> host002 (leaf1): two destinations, each pinned to a spine.
  EXPECT_EQ(r1.job().status().state(), v1::JOB_STATE_ASSIGNED);
  ASSERT_EQ(r1.job().status().assignment().routes_size(), 2);
  for (const auto& r : r1.job().status().assignment().routes()) {
    EXPECT_TRUE(r.via() == "spine0" || r.via() == "spine1") << r.via();
    EXPECT_NE(r.backup_via(), r.via());
    EXPECT_FALSE(r.reason().empty());
  }
  EXPECT_EQ(r1.job().status().revision(), 2u);  // 1 is CONTROLLER_STARTED
  h.Call(&Controller::RegisterJob, JobReq("j0"));

  v1::GetJobRequest g;
  g.set_job_id("j1");
  auto [s2, r2] = h.Call(&Controller::GetJob, g);
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(r2.job().tenant(), "acme");

  auto [s3, r3] = h.Call(&Controller::ListJobs, v1::ListJobsRequest());
  ASSERT_EQ(r3.jobs_size(), 2);
  EXPECT_EQ(r3.jobs(0).job_id(), "j0");  // ordered by id

  v1::ReleaseJobRequest rel;
  rel.set_job_id("j1");
  auto [s4, r4] = h.Call(&Controller::ReleaseJob, rel);
  ASSERT_TRUE(s4.ok());
  EXPECT_EQ(r4.job().status().state(), v1::JOB_STATE_RELEASED);
  auto [s5, r5] = h.Call(&Controller::GetJob, g);
  EXPECT_EQ(s5.code(), StatusCode::kNotFound);
  EXPECT_NE(s5.message().find("job_id"), std::string::npos);
}

TEST_F(ControllerTest, DuplicateJobIdIsAlreadyExists) {
  Harness h(db_, topo_);
  ASSERT_TRUE(h.Call(&Controller::RegisterJob, JobReq("j1")).first.ok());
  auto [s, r] = h.Call(&Controller::RegisterJob, JobReq("j1"));
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(s.message().find("job.job_id"), std::string::npos);
}

TEST_F(ControllerTest, RetryWithSameRequestIdReturnsFirstAnswer) {
  Harness h(db_, topo_);
  auto [s1, r1] = h.Call(&Controller::RegisterJob, JobReq("j1", "req-1"));
  ASSERT_TRUE(s1.ok());
  auto [s2, r2] = h.Call(&Controller::RegisterJob, JobReq("j1", "req-1"));
  ASSERT_TRUE(s2.ok()) << s2.message();
  EXPECT_TRUE(loom::proto::SameMessage(r1, r2));
  // Only one registration event exists.
  int registered = 0;
  for (const auto& e : h.Replay(1)) registered += e.type() == v1::EVENT_TYPE_JOB_REGISTERED;
  EXPECT_EQ(registered, 1);
  // The same request id for a different request is refused.
  auto [s3, r3] = h.Call(&Controller::RegisterJob, JobReq("j2", "req-1"));
  EXPECT_EQ(s3.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s3.message().find("request_id"), std::string::npos);
}

// Labels are a map: two equal requests may serialize their entries in different orders.
// A scheduler that retries must get its first answer, in the same process and after a
// restart; a request that differs only in one label value is another request.
v1::RegisterJobRequest LabelledJobReq(bool reverse, int labels = 40) {
  v1::RegisterJobRequest r = JobReq("jl", "req-labels");
  std::vector<int> order(static_cast<size_t>(labels));
  for (int i = 0; i < labels; ++i) order[static_cast<size_t>(i)] = reverse ? labels - 1 - i : i;
  for (int i : order) {
    (*r.mutable_job()->mutable_labels())["team-" + std::to_string(i)] = std::to_string(i * 7);
  }
  return r;
}

TEST_F(ControllerTest, RetriesOfAJobWithManyLabelsGetTheFirstAnswerAlsoAfterRestart) {
  v1::RegisterJobResponse first;
  {
    Harness h(db_, topo_);
    auto [s, r] = h.Call(&Controller::RegisterJob, LabelledJobReq(false));
    ASSERT_TRUE(s.ok()) << s.message();
    first = r;
    for (int k = 0; k < 20; ++k) {
      auto [sk, rk] = h.Call(&Controller::RegisterJob, LabelledJobReq(k % 2 == 0));
      ASSERT_TRUE(sk.ok()) << "retry " << k << ": " << sk.message();
      EXPECT_TRUE(loom::proto::SameMessage(rk, first));
    }
  }
  Harness h(db_, topo_);
  for (int k = 0; k < 20; ++k) {
    auto [sk, rk] = h.Call(&Controller::RegisterJob, LabelledJobReq(k % 2 == 1));
    ASSERT_TRUE(sk.ok()) << "retry after restart " << k << ": " << sk.message();
    EXPECT_TRUE(loom::proto::SameMessage(rk, first));
  }
  v1::RegisterJobRequest other = LabelledJobReq(false);
  (*other.mutable_job()->mutable_labels())["team-3"] = "changed";
  auto [so, ro] = h.Call(&Controller::RegisterJob, other);
  EXPECT_EQ(so.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(so.message().find("request_id"), std::string::npos) << so.message();
}

TEST_F(ControllerTest, RequestIdsSurviveRestart) {
  v1::RegisterJobResponse first;
  {
    Harness h(db_, topo_);
    first = h.Call(&Controller::RegisterJob, JobReq("j1", "req-9")).second;
  }
  Harness h(db_, topo_);
  auto [s, r] = h.Call(&Controller::RegisterJob, JobReq("j1", "req-9"));
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(loom::proto::SameMessage(r, first));
}

TEST_F(ControllerTest, UpdateJobKeepsTenantAndBumpsRevision) {
  Harness h(db_, topo_);
  auto reg = h.Call(&Controller::RegisterJob, JobReq("j1")).second;
  v1::UpdateJobRequest u;
  *u.mutable_job() = JobReq("j1").job();
  u.mutable_job()->add_endpoints("host001-gpu0");
  auto [s, r] = h.Call(&Controller::UpdateJob, u);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(r.job().endpoints_size(), 3);
  EXPECT_GT(r.job().status().revision(), reg.job().status().revision());
  u.mutable_job()->set_tenant("other");
  auto [s2, r2] = h.Call(&Controller::UpdateJob, u);
  EXPECT_EQ(s2.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s2.message().find("job.tenant"), std::string::npos);
  u.mutable_job()->set_job_id("missing");
  u.mutable_job()->set_tenant("acme");
  EXPECT_EQ(h.Call(&Controller::UpdateJob, u).first.code(), StatusCode::kNotFound);
}

TEST_F(ControllerTest, DrainUndrainAreEventedAndIdempotent) {
  Harness h(db_, topo_);
  v1::DrainLinkRequest d;
  d.set_link_id(kLink);
  d.set_reason("optics swap");
  auto [s1, r1] = h.Call(&Controller::DrainLink, d);
  ASSERT_TRUE(s1.ok()) << s1.message();
  EXPECT_EQ(r1.link().admin_state(), v1::LINK_ADMIN_STATE_DRAINED);
  EXPECT_GT(r1.revision(), 0u);
  auto [s2, r2] = h.Call(&Controller::DrainLink, d);  // already drained
  ASSERT_TRUE(s2.ok());
  EXPECT_EQ(r2.revision(), 0u);

  v1::ListLinksRequest ll;
  ll.set_drained_only(true);
  auto [s3, r3] = h.Call(&Controller::ListLinks, ll);
  ASSERT_EQ(r3.links_size(), 1);
  EXPECT_EQ(r3.links(0).drain_reason(), "optics swap");

  v1::UndrainLinkRequest u;
  u.set_link_id(kLink);
  auto [s4, r4] = h.Call(&Controller::UndrainLink, u);
  ASSERT_TRUE(s4.ok());
  EXPECT_EQ(r4.link().admin_state(), v1::LINK_ADMIN_STATE_IN_SERVICE);

  auto events = h.Replay(1);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1].type(), v1::EVENT_TYPE_LINK_DRAINED);
  EXPECT_EQ(events[1].subject(), kLink);
  EXPECT_NE(events[1].cause().find("optics swap"), std::string::npos);
  EXPECT_EQ(events[2].type(), v1::EVENT_TYPE_LINK_UNDRAINED);
}

TEST_F(ControllerTest, DrainErrors) {
  Harness h(db_, topo_);
  v1::DrainLinkRequest d;
  d.set_link_id("no-such-link");
  d.set_reason("x");
  EXPECT_EQ(h.Call(&Controller::DrainLink, d).first.code(), StatusCode::kNotFound);
  d.set_link_id(kLink);
  d.clear_reason();
  auto [s, r] = h.Call(&Controller::DrainLink, d);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("reason:", 0), 0u);
}

TEST_F(ControllerTest, StateIsReloadedAfterRestart) {
  size_t events_before = 0;
  std::map<std::string, v1::PathAssignment> routes_before;
  {
    Harness h(db_, topo_);
    h.Call(&Controller::RegisterJob, JobReq("j1"));
    h.Call(&Controller::RegisterJob, JobReq("j2"));
    v1::DrainLinkRequest d;
    d.set_link_id(kLink);
    d.set_reason("maintenance");
    h.Call(&Controller::DrainLink, d);
    events_before = h.Replay(1).size();
    auto listed = h.Call(&Controller::ListJobs, v1::ListJobsRequest()).second;
    for (const auto& j : listed.jobs()) {
      routes_before[j.job_id()] = j.status().assignment();
    }
  }
  Harness h(db_, topo_);
  auto jobs = h.Call(&Controller::ListJobs, v1::ListJobsRequest()).second;
  EXPECT_EQ(jobs.jobs_size(), 2);
  // Assignments that were right are not touched by the restart.
  for (const auto& j : jobs.jobs()) {
    EXPECT_TRUE(loom::proto::SameMessage(j.status().assignment(), routes_before[j.job_id()]));
  }
  v1::GetLinkRequest g;
  g.set_link_id(kLink);
  EXPECT_EQ(h.Call(&Controller::GetLink, g).second.link().admin_state(),
            v1::LINK_ADMIN_STATE_DRAINED);
  // Revisions continue where they stopped; the restart adds only its own event.
  auto events = h.Replay(1);
  ASSERT_EQ(events.size(), events_before + 1);
  EXPECT_EQ(events.back().type(), v1::EVENT_TYPE_CONTROLLER_STARTED);
  EXPECT_EQ(events.back().revision(), events_before + 1);
}

TEST_F(ControllerTest, ReplayOlderThanRetentionIsOutOfRange) {
  ControllerOptions opts;
  opts.event_retention = 3;
  Harness h(db_, topo_, opts);
  for (int i = 0; i < 5; ++i) h.Call(&Controller::RegisterJob, JobReq("j" + std::to_string(i)));
  Status st;
  h.Replay(1, &st);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("start from 4 or 0"), std::string::npos) << st.message();
  auto events = h.Replay(4, &st);
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(events.size(), 3u);
}

TEST_F(ControllerTest, LiveSubscribersSeeNewEventsInOrder) {
  Harness h(db_, topo_);
  std::mutex mu;
  std::vector<uint64_t> seen;
  std::promise<uint64_t> id;
  h.c().Subscribe(
      0, true,
      [&](const v1::Event& e) {
        std::lock_guard<std::mutex> l(mu);
        seen.push_back(e.revision());
        return true;
      },
      [&](Status, uint64_t i) { id.set_value(i); });
  EXPECT_GT(id.get_future().get(), 0u);
  h.Call(&Controller::RegisterJob, JobReq("a"));
  h.Call(&Controller::RegisterJob, JobReq("b"));
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(seen, (std::vector<uint64_t>{2, 3}));
}

TEST_F(ControllerTest, PaginatesLinks) {
  Harness h(db_, topo_);
  v1::ListLinksRequest req;
  req.set_page_size(5);
  std::set<std::string> all;
  for (int pages = 0; pages < 10; ++pages) {
    auto resp = h.Call(&Controller::ListLinks, req).second;
    for (const auto& l : resp.links()) EXPECT_TRUE(all.insert(l.link().id()).second);
    if (resp.next_page_token().empty()) break;
    req.set_page_token(resp.next_page_token());
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(topo_->topology().links_size()));
}

}  // namespace
}  // namespace loom::controller

namespace loom::controller {
namespace {

TEST_F(ControllerTest, DrainMovesAssignmentsOffTheLinkWithReason) {
  Harness h(db_, topo_);
  auto reg = h.Call(&Controller::RegisterJob, JobReq("j1")).second;
  // The route towards host000 (leaf0) from leaf1 uses some spine S; drain
  // leaf1's link to S.
  std::string dest_on_leaf0, spine;
  for (const auto& r : reg.job().status().assignment().routes()) {
    if (r.destination().rfind("host000", 0) == 0) {
      dest_on_leaf0 = r.destination();
      spine = r.via();
    }
  }
  ASSERT_FALSE(spine.empty());
  std::string link =
      spine == "spine0" ? "leaf1:Ethernet0--spine0:Ethernet1" : "leaf1:Ethernet1--spine1:Ethernet1";
  v1::DrainLinkRequest d;
  d.set_link_id(link);
  d.set_reason("optics");
  auto [s, resp] = h.Call(&Controller::DrainLink, d);
  ASSERT_TRUE(s.ok()) << s.message();
  v1::GetJobRequest g;
  g.set_job_id("j1");
  auto job = h.Call(&Controller::GetJob, g).second.job();
  for (const auto& r : job.status().assignment().routes()) {
    if (r.destination() == dest_on_leaf0) {
      EXPECT_NE(r.via(), spine);
      EXPECT_NE(r.reason().find("lost its capacity"), std::string::npos) << r.reason();
    }
  }
  bool evented = false;
  for (const auto& e : h.Replay(1)) {
    evented |= e.type() == v1::EVENT_TYPE_JOB_UPDATED && e.subject() == "j1" &&
               e.cause().find("drained") != std::string::npos;
  }
  EXPECT_TRUE(evented);
}

TEST_F(ControllerTest, DedicatedTenantNeverSharesSpines) {
  Harness h(db_, topo_);
  v1::PolicySet p;
  auto* red = p.add_colors();
  red->set_color(1);
  red->add_spines("spine0");
  auto* rule = p.add_rules();
  rule->set_name("acme-dedicated");
  rule->mutable_match()->add_tenants("acme");
  rule->mutable_action()->add_colors(1);
  rule->mutable_action()->set_isolation(v1::ISOLATION_DEDICATED);
  std::promise<std::pair<Status, PolicyInstallResult>> done;
  h.c().InstallPolicy(p, [&](Status s, PolicyInstallResult r) { done.set_value({s, r}); });
  auto [s, r] = done.get_future().get();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(r.version, 1u);
  auto acme = h.Call(&Controller::RegisterJob, JobReq("a1")).second;
  auto other = JobReq("b1");
  other.mutable_job()->set_tenant("beta");
  auto beta = h.Call(&Controller::RegisterJob, other).second;
  for (const auto& route : acme.job().status().assignment().routes()) {
    EXPECT_EQ(route.via(), "spine0");
  }
  for (const auto& route : beta.job().status().assignment().routes()) {
    EXPECT_EQ(route.via(), "spine1");
  }
  EXPECT_EQ(acme.job().status().assignment().policy_rule(), "acme-dedicated");
  // A set with errors is refused with the findings.
  rule->mutable_action()->set_colors(0, 9);
  std::promise<Status> bad;
  h.c().InstallPolicy(p, [&](Status s2, PolicyInstallResult) { bad.set_value(s2); });
  Status st = bad.get_future().get();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("color 9"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace loom::controller

namespace loom::controller {
namespace {

TEST(ControllerPlacementTest, RegistrationThatOverloadsALinkTriggersAFullRecompute) {
  loom::testing::TempDir dir;
  loom::testing::MixedJobs m = loom::testing::MakeMixedJobs();
  Harness h(dir.File("loom.db"), m.topo);
  ASSERT_TRUE(h.start_status_.ok());
  v1::RegisterJobResponse last;
  for (const auto& job : m.jobs) {
    v1::RegisterJobRequest req;
    *req.mutable_job() = job;
    auto [s, r] = h.Call(&Controller::RegisterJob, req);
    ASSERT_TRUE(s.ok()) << s.message();
    last = r;
  }
  // The last ring, placed around the all-to-all, would overload links; the
  // controller recomputed before answering: the answer is the final assignment,
  // the ring in a spine plane of its own, nothing over capacity.
  const auto& a = last.job().status().assignment();
  ASSERT_EQ(a.primary_spines_size(), 1) << a.reason();
  EXPECT_LE(a.predicted_max_utilization(), 1.0 + 1e-9) << a.reason();
  // The jobs that moved for it are evented with the cause, and what GetJob says
  // is what the events say.
  int moved = 0;
  for (const auto& e : h.Replay(1)) {
    if (e.type() != v1::EVENT_TYPE_JOB_UPDATED) continue;
    ++moved;
    EXPECT_NE(e.subject(), "job3");
    EXPECT_NE(e.cause().find("placing job job3 around the others left links predicted at"),
              std::string::npos)
        << e.cause();
    v1::GetJobRequest get;
    get.set_job_id(e.subject());
    auto [gs, gr] = h.Call(&Controller::GetJob, get);
    ASSERT_TRUE(gs.ok());
    EXPECT_EQ(loom::te::Placement::RouteKey(gr.job().status().assignment()),
              loom::te::Placement::RouteKey(e.job().status().assignment()));
    EXPECT_LE(gr.job().status().assignment().predicted_max_utilization(), 1.0 + 1e-9);
  }
  EXPECT_GT(moved, 0);
}

// Group commit: registrations that arrive while the strand is busy.
using RegisterResult = std::future<std::pair<Status, v1::RegisterJobResponse>>;
RegisterResult RegisterAsync(Controller& c, v1::RegisterJobRequest req) {
  auto p = std::make_shared<std::promise<std::pair<Status, v1::RegisterJobResponse>>>();
  RegisterResult f = p->get_future();
  c.RegisterJob(std::move(req), [p](Status s, v1::RegisterJobResponse r) {
    p->set_value({s, std::move(r)});
  });
  return f;
}

// Registrations that wait for the strand are committed in one transaction, each
// answered after it, with its own event and revision; a retry of one of them (same
// request id) in the same batch gets the first answer, and the same job id again is
// refused; everything is there after a restart; placement is what one-by-one gives.
TEST_F(ControllerTest, RegistrationsArrivingTogetherAreCommittedTogether) {
  const std::vector<std::string> ids = {"a", "b", "c", "d", "e"};
  std::vector<v1::PathAssignment> one_by_one;
  {
    loom::testing::TempDir other;
    Harness h(other.File("loom.db"), topo_);
    for (const auto& id : ids) {
      auto [s, r] = h.Call(&Controller::RegisterJob, JobReq(id, "req-" + id));
      ASSERT_TRUE(s.ok()) << s.message();
      one_by_one.push_back(r.job().status().assignment());
    }
  }
  {
    Harness h(db_, topo_);
    ASSERT_TRUE(h.start_status_.ok());
    const int commits_before = h.store().commits;
    auto release = h.HoldStrand();
    std::vector<RegisterResult> results;
    for (const auto& id : ids) results.push_back(RegisterAsync(h.c(), JobReq(id, "req-" + id)));
    RegisterResult retry = RegisterAsync(h.c(), JobReq("b", "req-b"));
    RegisterResult again = RegisterAsync(h.c(), JobReq("c", "another-request"));
    release->set_value();
    std::set<uint64_t> revisions;
    uint64_t revision_of_b = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      auto [s, r] = results[i].get();
      ASSERT_TRUE(s.ok()) << ids[i] << ": " << s.message();
      EXPECT_EQ(r.job().job_id(), ids[i]);
      EXPECT_EQ(loom::te::Placement::RouteKey(r.job().status().assignment()),
                loom::te::Placement::RouteKey(one_by_one[i]))
          << ids[i];
      revisions.insert(r.job().status().revision());
      if (ids[i] == "b") revision_of_b = r.job().status().revision();
    }
    EXPECT_EQ(revisions.size(), ids.size());
    auto [rs, rr] = retry.get();
    ASSERT_TRUE(rs.ok()) << rs.message();
    EXPECT_EQ(rr.job().status().revision(), revision_of_b);
    auto [as, ar] = again.get();
    EXPECT_EQ(as.code(), StatusCode::kAlreadyExists) << as.message();
    // One transaction for the five; the retry and the duplicate are answered from
    // the committed state without writing.
    EXPECT_EQ(h.store().commits - commits_before, 1);
    int registered = 0;
    for (const auto& e : h.Replay(1)) registered += e.type() == v1::EVENT_TYPE_JOB_REGISTERED;
    EXPECT_EQ(registered, 5);
  }
  Harness h(db_, topo_);
  ASSERT_TRUE(h.start_status_.ok());
  auto [s, list] = h.Call(&Controller::ListJobs, v1::ListJobsRequest());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(list.jobs_size(), 5);
  auto [rs, rr] = h.Call(&Controller::RegisterJob, JobReq("d", "req-d"));
  EXPECT_TRUE(rs.ok()) << rs.message();  // the retry after a restart: the first answer
  EXPECT_EQ(rr.job().job_id(), "d");
}

// A failed group commit fails every registration of the batch and undoes them all:
// nothing is registered, evented or remembered, and registering them again places
// them as on a fresh controller.
TEST_F(ControllerTest, AFailedGroupCommitFailsAndUndoesEveryRegistrationOfTheBatch) {
  loom::testing::MixedJobs mixed = loom::testing::MakeMixedJobs();
  // The last job overloads the fabric: the batch runs a full re-placement too.
  ControllerOptions opts;
  opts.wall_clock_pacing = false;
  std::vector<v1::PathAssignment> fresh;
  {
    loom::testing::TempDir other;
    Harness h(other.File("loom.db"), mixed.topo, opts);
    for (const auto& job : mixed.jobs) {
      v1::RegisterJobRequest req;
      *req.mutable_job() = job;
      req.set_request_id("req-" + job.job_id());
      auto [s, r] = h.Call(&Controller::RegisterJob, req);
      ASSERT_TRUE(s.ok()) << s.message();
      fresh.push_back(r.job().status().assignment());
    }
  }
  Harness h(db_, mixed.topo, opts);
  ASSERT_TRUE(h.start_status_.ok());
  const uint64_t events_before = h.Replay(1).size();
  auto release = h.HoldStrand();
  std::vector<RegisterResult> results;
  for (const auto& job : mixed.jobs) {
    v1::RegisterJobRequest req;
    *req.mutable_job() = job;
    req.set_request_id("req-" + job.job_id());
    results.push_back(RegisterAsync(h.c(), req));
  }
  h.store().fail = true;
  release->set_value();
  for (auto& f : results) {
    auto [s, r] = f.get();
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.message();
  }
  h.store().fail = false;
  auto [ls, list] = h.Call(&Controller::ListJobs, v1::ListJobsRequest());
  ASSERT_TRUE(ls.ok());
  EXPECT_EQ(list.jobs_size(), 0);
  EXPECT_EQ(h.Replay(1).size(), events_before);
  // Again, one by one: the same requests are new (nothing was remembered) and land
  // where they land on a fresh controller (the placement was undone).
  for (size_t i = 0; i < mixed.jobs.size(); ++i) {
    v1::RegisterJobRequest req;
    *req.mutable_job() = mixed.jobs[i];
    req.set_request_id("req-" + mixed.jobs[i].job_id());
    auto [s, r] = h.Call(&Controller::RegisterJob, req);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(loom::te::Placement::RouteKey(r.job().status().assignment()),
              loom::te::Placement::RouteKey(fresh[i]))
        << mixed.jobs[i].job_id();
  }
}

}  // namespace
}  // namespace loom::controller

// --------------------------------------------------- watches (issue 18) ----

namespace loom::controller {
namespace {

// A watcher with room for `capacity` events, drained by the test thread.
class TestWatcher {
 public:
  TestWatcher(Controller& c, uint64_t start, size_t capacity, bool follow = true)
      : c_(c), capacity_(capacity) {
    Controller::Watcher w;
    w.offer = [this](const v1::Event& ev, const Controller::EventBytes&) {
      std::lock_guard<std::mutex> l(mu_);
      if (queue_.size() >= capacity_) {
        full_ = true;
        return Controller::Offer::kFull;
      }
      queue_.push_back(ev.revision());
      return Controller::Offer::kTaken;
    };
    w.end = [this](const Status& s, const Controller::WatchEnd& e) {
      std::lock_guard<std::mutex> l(mu_);
      ended_ = true;
      status_ = s;
      end_ = e;
    };
    id_ = c.Watch(start, follow, std::move(w));
  }
  ~TestWatcher() { c_.Unsubscribe(id_); }
  // Takes what is queued (a reader); resumes the watch when it had been full.
  void Read() {
    bool resume;
    {
      std::lock_guard<std::mutex> l(mu_);
      seen_.insert(seen_.end(), queue_.begin(), queue_.end());
      queue_.clear();
      resume = full_;
      full_ = false;
    }
    if (resume) c_.ResumeWatch(id_);
  }
  // Reads until `last` was seen, the watch ended or ~10 s passed.
  void ReadUntil(uint64_t last) {
    for (int i = 0; i < 10000; ++i) {
      Read();
      {
        std::lock_guard<std::mutex> l(mu_);
        if (ended_ || (!seen_.empty() && seen_.back() >= last)) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  bool WaitEnded() {
    for (int i = 0; i < 10000; ++i) {
      {
        std::lock_guard<std::mutex> l(mu_);
        if (ended_) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }
  std::vector<uint64_t> seen() {
    std::lock_guard<std::mutex> l(mu_);
    return seen_;
  }
  Status status() {
    std::lock_guard<std::mutex> l(mu_);
    return status_;
  }
  Controller::WatchEnd end() {
    std::lock_guard<std::mutex> l(mu_);
    return end_;
  }
  bool full() {
    std::lock_guard<std::mutex> l(mu_);
    return full_;
  }

 private:
  Controller& c_;
  size_t capacity_;
  uint64_t id_ = 0;
  std::mutex mu_;
  std::vector<uint64_t> queue_, seen_;
  bool full_ = false, ended_ = false;
  Status status_;
  Controller::WatchEnd end_;
};

std::vector<uint64_t> Range(uint64_t from, uint64_t to) {
  std::vector<uint64_t> v;
  for (uint64_t r = from; r <= to; ++r) v.push_back(r);
  return v;
}

double GaugeValue(prometheus::Registry& registry, const std::string& name) {
  for (const auto& f : registry.Collect()) {
    if (f.name == name && !f.metric.empty()) return f.metric[0].gauge.value;
  }
  return -1;
}

class WatchTest : public ControllerTest {};

// A watcher with room for 3 events replays 60 from revision 1 while only
// ~1 event fits in memory: the rest come from the store, each exactly once and
// in order, and writes made during the catch-up follow without a gap.
TEST_F(WatchTest, SlowWatcherIsCaughtUpFromTheStoreWithoutLossOrDuplicates) {
  ControllerOptions opts;
  opts.event_cache_bytes = 1;  // the newest event only
  Harness h(db_, topo_, opts);
  for (int i = 0; i < 30; ++i) h.Call(&Controller::RegisterJob, JobReq("a" + std::to_string(i)));
  TestWatcher w(h.c(), 1, 3);
  std::thread writer([&] {
    for (int i = 0; i < 30; ++i) h.Call(&Controller::RegisterJob, JobReq("b" + std::to_string(i)));
  });
  // Reads slowly while the writer runs: the watcher is full most of the time.
  for (int i = 0; i < 20; ++i) {
    w.Read();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  writer.join();
  w.ReadUntil(61);  // 1 start + 60 registrations
  EXPECT_EQ(w.seen(), Range(1, 61));
  EXPECT_LE(GaugeValue(h.registry(), "loom_event_history_memory_bytes"), 10000);  // one event
  // Caught up: it is live again and sees the next write.
  h.Call(&Controller::RegisterJob, JobReq("c"));
  w.ReadUntil(62);
  EXPECT_EQ(w.seen().back(), 62u);
}

// Watchers far apart share a small catch-up cache: the page one of them has
// just read from the store must not be evicted before it is sent (evicting by
// revision dropped it when another watcher's newer pages filled the cache,
// and the watcher jumped past the events as if they were a gap).
TEST_F(WatchTest, WatchersFarApartShareASmallCatchUpCacheWithoutSkipping) {
  ControllerOptions opts;
  opts.event_cache_bytes = 1;          // the newest event only: the rest from the store
  opts.catchup_cache_bytes = 8 << 10;  // a few events' worth
  Harness h(db_, topo_, opts);
  for (int i = 0; i < 300; ++i) h.Call(&Controller::RegisterJob, JobReq("a" + std::to_string(i)));
  // `ahead` reads from revision 200 first, filling the cache with newer pages;
  // `behind` then starts at 1; they take turns.
  TestWatcher ahead(h.c(), 200, 4, /*follow=*/false);
  ahead.ReadUntil(230);
  TestWatcher behind(h.c(), 1, 4, /*follow=*/false);
  auto done = [](const std::vector<uint64_t>& v) { return !v.empty() && v.back() >= 301; };
  for (int i = 0; i < 20000 && !(done(ahead.seen()) && done(behind.seen())); ++i) {
    behind.Read();
    ahead.Read();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ASSERT_TRUE(ahead.WaitEnded());
  ASSERT_TRUE(behind.WaitEnded());
  ahead.Read();
  behind.Read();
  EXPECT_EQ(ahead.seen(), Range(200, 301));
  EXPECT_EQ(behind.seen(), Range(1, 301));
}

// A live watcher that stops reading is not fed (its buffer stays at its
// capacity) and, when it reads again, gets everything it missed.
TEST_F(WatchTest, LiveWatcherThatStopsReadingResumesWhereItStopped) {
  Harness h(db_, topo_);
  TestWatcher w(h.c(), 0, 4);
  for (int i = 0; i < 40; ++i) h.Call(&Controller::RegisterJob, JobReq("j" + std::to_string(i)));
  EXPECT_TRUE(w.full());
  w.ReadUntil(41);
  EXPECT_EQ(w.seen(), Range(2, 41));
}

// Cut policy: a full live watcher is ended RESOURCE_EXHAUSTED naming the first
// revision it did not take; resuming there loses nothing.
TEST_F(WatchTest, CutPolicyEndsASlowWatcherWithItsResumeRevision) {
  ControllerOptions opts;
  opts.slow_watcher_policy = SlowWatcherPolicy::kCut;
  Harness h(db_, topo_, opts);
  TestWatcher w(h.c(), 0, 5);
  for (int i = 0; i < 10; ++i) h.Call(&Controller::RegisterJob, JobReq("j" + std::to_string(i)));
  ASSERT_TRUE(w.WaitEnded());
  EXPECT_EQ(w.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(w.end().resume_revision, 7u);  // took 2..6
  w.Read();
  TestWatcher again(h.c(), w.end().resume_revision, 100, /*follow=*/false);
  ASSERT_TRUE(again.WaitEnded());
  again.Read();
  std::vector<uint64_t> all = w.seen();
  for (uint64_t r : again.seen()) all.push_back(r);
  EXPECT_EQ(all, Range(2, 11));
}

// Compaction by count and by bytes; a watch from before the retained history
// and a lagging watcher whose position is compacted away get OUT_OF_RANGE with
// the compacted revision; a start revision ahead of the log is refused.
TEST_F(WatchTest, CompactedPositionsAreOutOfRangeWithTheCompactedRevision) {
  ControllerOptions opts;
  opts.event_retention = 10;
  Harness h(db_, topo_, opts);
  TestWatcher lagging(h.c(), 1, 2);
  for (int i = 0; i < 20; ++i) h.Call(&Controller::RegisterJob, JobReq("j" + std::to_string(i)));
  // 21 revisions, 10 retained: 12..21.
  ASSERT_TRUE(lagging.WaitEnded());
  EXPECT_EQ(lagging.status().code(), StatusCode::kOutOfRange);
  EXPECT_GE(lagging.end().compacted_revision, 3u);
  TestWatcher old(h.c(), 5, 100);
  ASSERT_TRUE(old.WaitEnded());
  EXPECT_EQ(old.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(old.end().compacted_revision, 11u);
  TestWatcher ok(h.c(), 12, 100, /*follow=*/false);
  ASSERT_TRUE(ok.WaitEnded());
  EXPECT_TRUE(ok.status().ok());
  ok.Read();
  EXPECT_EQ(ok.seen(), Range(12, 21));
  TestWatcher ahead(h.c(), 40, 100);
  ASSERT_TRUE(ahead.WaitEnded());
  EXPECT_EQ(ahead.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(ahead.end().compacted_revision, 0u);
  EXPECT_EQ(ahead.end().current_revision, 21u);
  // The next revision is not ahead: it waits for it.
  TestWatcher next(h.c(), 22, 100);
  h.Call(&Controller::RegisterJob, JobReq("k"));
  next.ReadUntil(22);
  EXPECT_EQ(next.seen(), Range(22, 22));
}

// Idempotency records are bounded by the bytes of their stored answers; the
// answers are read back from the store (also after a restart).
TEST_F(WatchTest, IdempotencyRecordsAreBoundedByBytesAndAnsweredFromTheStore) {
  ControllerOptions opts;
  opts.request_retention_bytes = 3000;  // a registration answer is a few hundred bytes
  {
    Harness h(db_, topo_, opts);
    for (int i = 0; i < 30; ++i) {
      auto [s, r] = h.Call(&Controller::RegisterJob,
                           JobReq("j" + std::to_string(i), "req-" + std::to_string(i)));
      ASSERT_TRUE(s.ok()) << s.message();
    }
    // The oldest record was dropped: the retry is a new request for an existing job.
    EXPECT_EQ(h.Call(&Controller::RegisterJob, JobReq("j0", "req-0")).first.code(),
              StatusCode::kAlreadyExists);
  }
  Harness h(db_, topo_, opts);
  auto [s, r] = h.Call(&Controller::RegisterJob, JobReq("j29", "req-29"));
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(r.job().job_id(), "j29");
  EXPECT_EQ(r.job().status().revision(), 31u);  // the first answer, from the store
}

TEST_F(WatchTest, RetentionByBytesSurvivesARestart) {
  ControllerOptions opts;
  opts.event_retention_bytes = 4000;  // a registration event is a few hundred bytes
  size_t retained = 0;
  {
    Harness h(db_, topo_, opts);
    for (int i = 0; i < 60; ++i) h.Call(&Controller::RegisterJob, JobReq("j" + std::to_string(i)));
    retained = static_cast<size_t>(GaugeValue(h.registry(), "loom_event_history_retained"));
    EXPECT_GT(retained, 3u);
    EXPECT_LT(retained, 40u);
  }
  Harness h(db_, topo_, opts);
  // One more event (CONTROLLER_STARTED) and maybe one compacted.
  const size_t after = static_cast<size_t>(GaugeValue(h.registry(), "loom_event_history_retained"));
  EXPECT_GE(after + 1, retained);
  EXPECT_LE(after, retained + 1);
  Status st;
  auto events = h.Replay(62 - after + 1, &st);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(events.size(), after);
  EXPECT_EQ(events.back().revision(), 62u);
}

// Desired state pushed incrementally (only the switches whose placement changed
// are rebuilt and handed to the reconciler): after every push of a random
// sequence of registrations, updates, releases and drains, what the reconciler
// holds for every switch is a full rebuild's.
TEST(ControllerDesiredTest, IncrementalPushesEqualAFullRebuild) {
  loom::testing::TempDir dir;
  auto topo = loom::testing::OneNicClos2(8, 4, 2);
  ControllerOptions opts;
  opts.wall_clock_pacing = false;
  Harness h(dir.File("loom.db"), topo, opts);
  ASSERT_TRUE(h.start_status_.ok());
  std::mt19937 rng(17);
  std::set<std::string> live;
  int partial_pushes = 0;
  for (int step = 0; step < 60; ++step) {
    const int action = std::uniform_int_distribution<int>(0, 9)(rng);
    const std::string id = "j" + std::to_string(std::uniform_int_distribution<int>(0, 14)(rng));
    if (action == 0 && live.count(id)) {
      v1::ReleaseJobRequest req;
      req.set_job_id(id);
      auto [s, r] = h.Call(&Controller::ReleaseJob, req);
      ASSERT_TRUE(s.ok()) << s.message();
      live.erase(id);
    } else if (action == 1 && step % 7 == 0) {
      v1::DrainLinkRequest req;
      req.set_link_id(
          topo->topology()
              .links(std::uniform_int_distribution<int>(0, topo->topology().links_size() - 1)(rng))
              .id());
      req.set_reason("test");
      h.Call(&Controller::DrainLink, req);
    } else {
      v1::RegisterJobRequest req;
      auto* job = req.mutable_job();
      job->set_job_id(id);
      job->set_tenant("acme");
      std::set<int> hosts;
      while (hosts.size() < 3) hosts.insert(std::uniform_int_distribution<int>(0, 15)(rng));
      for (int host : hosts) {
        char gpu[32];
        std::snprintf(gpu, sizeof(gpu), "host%03d-gpu0", host);
        job->add_endpoints(gpu);
      }
      if (live.count(id)) {
        v1::UpdateJobRequest up;
        *up.mutable_job() = *job;
        auto [s, r] = h.Call(&Controller::UpdateJob, up);
        ASSERT_TRUE(s.ok()) << s.message();
      } else {
        auto [s, r] = h.Call(&Controller::RegisterJob, req);
        ASSERT_TRUE(s.ok()) << s.message();
        live.insert(id);
      }
    }
    if (step % 2 == 1) continue;  // changes accumulate between pushes
    h.c().Tick();
    std::promise<std::map<std::string, v1::DeviceState>> got;
    h.c().GetDesiredStates(
        [&got](Status, std::map<std::string, v1::DeviceState> d) { got.set_value(std::move(d)); });
    const auto full = got.get_future().get();
    std::promise<void> checked;
    h.c().WithReconciler([&](const Reconciler& rec) {
      for (const auto& [device, state] : full) {
        const v1::DeviceState* held = rec.Desired(device);
        EXPECT_TRUE(held != nullptr) << device;
        if (!held) continue;
        v1::DeviceState a = *held, b = state;
        a.set_generation(0);
        b.set_generation(0);
        EXPECT_EQ(loom::southbound::ContentKey(a), loom::southbound::ContentKey(b))
            << "step " << step << ": " << device;
      }
      checked.set_value();
    });
    checked.get_future().wait();
    ++partial_pushes;
  }
  EXPECT_GT(partial_pushes, 10);
}

}  // namespace
}  // namespace loom::controller
