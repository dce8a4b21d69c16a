// Reconciler: desired vs applied, idempotent applies, retry with backoff,
// drift repair, device reset. A fake driver (tests only) stands in for a
// device; virtual time.
#include "controller/reconciler/reconciler.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "southbound/wire/device_state_util.h"

namespace loom::controller {
namespace {

namespace v1 = loom::v1;

// A device that applies what it is given, optionally failing the next N
// applies, and whose state can be changed behind the controller's back.
class FakeDriver : public loom::southbound::Driver {
 public:
  std::string Name() const override { return "fake"; }
  bool Handles(const std::string& device) const override { return device.rfind("leaf", 0) == 0; }
  void Apply(const v1::DeviceState& desired,
             std::function<void(loom::southbound::ApplyResult)> done) override {
    ++applies;
    loom::southbound::ApplyResult r;
    if (fail_next > 0) {
      --fail_next;
      r.applied = state[desired.device()];
      r.failures.push_back({"device", Status(StatusCode::kUnavailable, "device unreachable")});
    } else {
      state[desired.device()] = desired;
      r.applied = desired;
    }
    done(r);
  }
  void Read(const std::string& device, std::function<void(Status, v1::DeviceState)> done) override {
    ++reads;
    done(Status::Ok(), state[device]);
  }
  std::map<std::string, v1::DeviceState> state;
  int applies = 0, reads = 0, fail_next = 0;
};

v1::DeviceState Leaf(const std::string& id, uint32_t color) {
  v1::DeviceState s;
  s.set_device(id);
  auto* c = s.add_colors();
  c->set_color(color);
  c->add_next_hops("spine0");
  return s;
}

class ReconcilerTest : public ::testing::Test {
 protected:
  ReconcilerTest()
      : r_(
            clock_, [](std::function<void()> f) { f(); }, Options()) {
    r_.AddDriver(&drv_);
    r_.SetNoteCallback([this](const ReconcileNote& n) { notes_.push_back(n); });
  }
  static ReconcilerOptions Options() {
    ReconcilerOptions o;
    o.initial_backoff_ns = 100 * kNsPerMs;
    o.drift_check_interval_ns = 1 * kNsPerSec;
    return o;
  }
  VirtualClock clock_{0};
  FakeDriver drv_;
  Reconciler r_;
  std::vector<ReconcileNote> notes_;
};

TEST_F(ReconcilerTest, AppliesOnceAndOnlyWhenContentChanges) {
  r_.SetDesired({{"leaf0", Leaf("leaf0", 7)}, {"leaf1", Leaf("leaf1", 7)}});
  r_.Tick();
  EXPECT_EQ(drv_.applies, 2);
  EXPECT_EQ(r_.InSyncCount(), 2u);
  // Same content again (even reordered): nothing to do.
  r_.SetDesired({{"leaf0", Leaf("leaf0", 7)}});
  r_.Tick();
  EXPECT_EQ(drv_.applies, 2);
  r_.SetDesired({{"leaf0", Leaf("leaf0", 8)}});
  r_.Tick();
  EXPECT_EQ(drv_.applies, 3);
  EXPECT_EQ(drv_.state["leaf0"].colors(0).color(), 8u);
  EXPECT_EQ(drv_.state["leaf0"].generation(), 2u);
}

TEST_F(ReconcilerTest, RetriesWithBackoffAndRecovers) {
  drv_.fail_next = 2;
  r_.SetDesired({{"leaf0", Leaf("leaf0", 7)}});
  r_.Tick();
  EXPECT_EQ(drv_.applies, 1);
  EXPECT_EQ(r_.InSyncCount(), 0u);
  ASSERT_EQ(notes_.size(), 1u);
  EXPECT_EQ(notes_[0].kind, ReconcileNote::Kind::kApplyFailed);
  r_.Tick();  // backoff not expired
  EXPECT_EQ(drv_.applies, 1);
  clock_.Advance(100 * kNsPerMs);  // >= 0.75 x 100 ms
  r_.Tick();
  EXPECT_EQ(drv_.applies, 2);
  clock_.Advance(150 * kNsPerMs);  // not yet 0.75 x 200 ms
  r_.Tick();
  EXPECT_EQ(drv_.applies, 2);
  clock_.Advance(60 * kNsPerMs);
  r_.Tick();
  EXPECT_EQ(drv_.applies, 3);
  EXPECT_EQ(r_.InSyncCount(), 1u);
  EXPECT_EQ(notes_.back().kind, ReconcileNote::Kind::kRecovered);
  auto st = r_.Status();
  EXPECT_EQ(st[0].failures, 2u);
  EXPECT_EQ(st[0].consecutive_failures, 0);
}

TEST_F(ReconcilerTest, DetectsAndRepairsDrift) {
  r_.SetDesired({{"leaf0", Leaf("leaf0", 7)}});
  r_.Tick();
  drv_.state["leaf0"].mutable_colors(0)->set_color(99);  // someone changed the device
  clock_.Advance(999 * kNsPerMs);
  r_.Tick();
  EXPECT_EQ(drv_.reads, 0);  // drift check not due yet
  clock_.Advance(1 * kNsPerMs);
  r_.Tick();  // reads, finds drift
  EXPECT_EQ(drv_.reads, 1);
  EXPECT_EQ(notes_.back().kind, ReconcileNote::Kind::kDriftRepaired);
  EXPECT_NE(notes_.back().detail.find("colors"), std::string::npos);
  r_.Tick();  // repairs
  EXPECT_EQ(drv_.state["leaf0"].colors(0).color(), 7u);
  EXPECT_EQ(r_.Status()[0].drift_repairs, 1u);
}

// Shadow mode: the device is read and what Loom would change is reported;
// nothing is ever applied, and no failure or drift note fires.
TEST(ReconcilerShadowTest, ReadsReportsAndNeverApplies) {
  VirtualClock clock{0};
  FakeDriver drv;
  ReconcilerOptions o;
  o.drift_check_interval_ns = 1 * kNsPerSec;
  o.shadow = true;
  Reconciler r(
      clock, [](std::function<void()> f) { f(); }, o);
  r.AddDriver(&drv);
  std::vector<ReconcileNote> notes;
  r.SetNoteCallback([&](const ReconcileNote& n) { notes.push_back(n); });
  drv.state["leaf0"] = Leaf("leaf0", 5);  // what the fabric runs today
  r.SetDesired({{"leaf0", Leaf("leaf0", 7)}});
  for (int i = 0; i < 5; ++i) {
    r.Tick();
    clock.Advance(300 * kNsPerMs);
  }
  EXPECT_EQ(drv.applies, 0);
  EXPECT_EQ(drv.state["leaf0"].colors(0).color(), 5u);
  EXPECT_GE(drv.reads, 1);
  const DeviceSync s = r.Status()[0];
  EXPECT_TRUE(s.shadow);
  EXPECT_FALSE(s.in_sync);
  EXPECT_EQ(s.would_change, std::vector<std::string>{"colors"});
  EXPECT_TRUE(notes.empty());
  // The fabric converges by itself (or by hand): nothing left to change.
  drv.state["leaf0"] = Leaf("leaf0", 7);
  clock.Advance(1 * kNsPerSec);
  r.Tick();
  EXPECT_TRUE(r.Status()[0].in_sync);
  EXPECT_TRUE(r.Status()[0].would_change.empty());
  EXPECT_EQ(drv.applies, 0);
}

TEST_F(ReconcilerTest, DeviceThatComesBackGetsFullState) {
  r_.SetDesired({{"leaf0", Leaf("leaf0", 7)}});
  r_.Tick();
  drv_.state.erase("leaf0");  // rebooted, empty
  r_.DeviceReset("leaf0");
  r_.Tick();
  EXPECT_EQ(drv_.applies, 2);
  EXPECT_TRUE(loom::southbound::SameContent(drv_.state["leaf0"], Leaf("leaf0", 7)));
}

TEST_F(ReconcilerTest, DeviceWithoutDriverIsReported) {
  r_.SetDesired({{"spine0", Leaf("spine0", 1)}});
  r_.Tick();
  EXPECT_EQ(drv_.applies, 0);
  ASSERT_FALSE(notes_.empty());
  EXPECT_EQ(notes_.back().kind, ReconcileNote::Kind::kNoDriver);
}

TEST(DeviceStateUtilTest, CanonicalOrderAndDifferingParts) {
  v1::DeviceState a = Leaf("leaf0", 1), b;
  auto* c = a.add_colors();
  c->set_color(0);
  b.set_device("leaf0");
  *b.add_colors() = a.colors(1);
  *b.add_colors() = a.colors(0);
  b.set_generation(5);
  EXPECT_TRUE(loom::southbound::SameContent(a, b));
  b.mutable_dlb()->set_mode(v1::DLB_MODE_FLOWLET);
  EXPECT_EQ(loom::southbound::DifferingParts(a, b), std::vector<std::string>{"dlb"});
}

// QP-split routes of one destination, class and job differ only in
// qp_mask/qp_value: their order must not make equal states differ.
TEST(DeviceStateUtilTest, QpSplitRoutesCompareWhateverTheOrder) {
  v1::DeviceState a;
  a.set_device("leaf0");
  for (uint32_t v : {0u, 1u, 2u, 3u}) {
    auto* r = a.add_routes();
    r->set_destination("host001-nic0");
    r->set_traffic_class(3);
    r->set_job_id("job");
    r->set_qp_mask(3);
    r->set_qp_value(v);
    r->set_color(65536 + (v % 2));
  }
  v1::DeviceState b = a;
  std::reverse(b.mutable_routes()->begin(), b.mutable_routes()->end());
  EXPECT_TRUE(loom::southbound::SameContent(a, b));
  EXPECT_EQ(loom::southbound::ContentKey(a), loom::southbound::ContentKey(b));
  EXPECT_TRUE(loom::southbound::DifferingParts(a, b).empty());
  loom::southbound::Canonicalize(&b);
  for (int i = 0; i < b.routes_size(); ++i) EXPECT_EQ(b.routes(i).qp_value(), uint32_t(i));
  // One part recolored: routes differ.
  b.mutable_routes(2)->set_color(65537);
  EXPECT_EQ(loom::southbound::DifferingParts(a, b), std::vector<std::string>{"routes"});
}

}  // namespace
}  // namespace loom::controller

namespace loom::controller {
namespace {

// A driver that reports success but applies something else (e.g. it drops a
// part it does not support) must not make the reconciler spin.
class LyingDriver : public FakeDriver {
 public:
  void Apply(const v1::DeviceState& desired,
             std::function<void(loom::southbound::ApplyResult)> done) override {
    ++applies;
    loom::southbound::ApplyResult r;
    r.applied = desired;
    r.applied.clear_colors();
    done(r);
  }
};

TEST(ReconcilerMismatchTest, OkButDifferentIsAFailureWithBackoff) {
  VirtualClock clock(0);
  LyingDriver drv;
  std::vector<ReconcileNote> notes;
  Reconciler r(clock, [](std::function<void()> f) { f(); }, {});
  r.AddDriver(&drv);
  r.SetNoteCallback([&](const ReconcileNote& n) { notes.push_back(n); });
  r.SetDesired({{"leaf0", Leaf("leaf0", 7)}});
  for (int i = 0; i < 10; ++i) r.Tick();
  EXPECT_EQ(drv.applies, 1);  // backoff, not a busy loop
  ASSERT_FALSE(notes.empty());
  EXPECT_NE(notes[0].detail.find("differs from the desired one in: colors"), std::string::npos)
      << notes[0].detail;
}

}  // namespace
}  // namespace loom::controller
