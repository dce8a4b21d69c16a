// Change safety closed loop (issue 15): a fabric-wide settings change goes
// to the canary first; when the canary's links degrade under it, Loom rolls
// it back and quarantines it, and the rest of the fabric never runs it.
// The real controller core programs the emulator through the in-process
// driver and reads it through the in-process gNMI adapter, in virtual time.
//
//   spine0 spine1 spine2 spine3
//      \     \    /     /
//      leaf0          leaf1       4 senders under leaf0 -> 1 receiver
//      host000,001    host002,003 under leaf1 (4:1 incast at leaf1)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/closedloop/harness.h"
#include "tests/unit/test_util.h"

namespace loom::testing {
namespace {

namespace v1 = loom::v1;
using loom::sim::Collective;
using loom::sim::JobSpec;

v1::FabricSetting LeafThresholds(uint64_t kmin, uint64_t kmax, uint64_t xoff) {
  v1::FabricSetting f;
  f.set_role(v1::DEVICE_ROLE_LEAF);
  auto* t = f.add_thresholds();
  t->set_priority(3);
  t->set_ecn_kmin_bytes(kmin);
  t->set_ecn_kmax_bytes(kmax);
  t->set_ecn_pmax_percent(20);
  t->set_pfc_xoff_bytes(xoff);
  t->set_pfc_xon_bytes(xoff / 2);
  return f;
}

JobSpec Incast() {
  JobSpec s;
  s.id = "incast";
  s.tenant = "acme";
  s.collective = Collective::kIncast;  // ranks[1..] -> ranks[0]
  s.ranks = {"host002-gpu0", "host000-gpu0", "host000-gpu1", "host001-gpu0", "host001-gpu1"};
  s.message_bytes = 1e11;  // outlasts the test
  s.start_ns = 1 * kNsPerMs;
  return s;
}

v1::ChangePlan PlanOf(ClosedLoop& loop) {
  v1::ChangePlan out;
  loop.controller().GetChangePlan([&](Status, v1::ChangePlan p) { out = std::move(p); });
  loop.Drain();
  return out;
}

double KminOn(ClosedLoop& loop, const std::string& dev) {
  const auto* cfg = loop.fabric().GetSwitchConfig(dev);
  return cfg ? cfg->ecn[3].kmin_bytes : -1;
}

int CountEvents(ClosedLoop& loop, const std::string& text) {
  int n = 0;
  for (const auto& ev : loop.Events()) {
    if (ev.type() != v1::EVENT_TYPE_CHANGE_ROLLOUT) continue;
    if ((ev.cause() + " " + ev.action()).find(text) != std::string::npos) ++n;
  }
  return n;
}

TEST(ChangeSafetyClosedLoopTest, CanaryDegradesUnderAFabricWideChangeAndItRollsBack) {
  TempDir dir;
  LoopOptions o;
  o.topology = TwoLeavesFourSpines();
  o.fabric.seed = 7;
  o.db_path = dir.File("change.db");
  // Only the configured settings change here (DLB tuning's changes take the
  // same path; they would add rollouts of their own).
  o.controller.adaptive.dlb_tuning = false;
  auto& cs = o.controller.change_safety;
  cs.enabled = true;
  cs.canary = {"leaf1"};  // the incast's egress leaf
  cs.canary_wait_ns = 100 * kNsPerMs;
  cs.canary_apply_timeout_ns = 500 * kNsPerMs;
  // Good settings: ECN marks early (400 KB per 400G port), PFC well above.
  o.controller.fabric_settings = {LeafThresholds(400'000, 1'600'000, 4'000'000)};
  ClosedLoop loop(o);
  loop.AddJob(Incast());

  // The first settings go canary-first too, pass and reach both leaves.
  loop.RunUntil(400 * kNsPerMs);
  ASSERT_EQ(PlanOf(loop).state(), v1::CHANGE_STATE_IN_SYNC) << PlanOf(loop).DebugString();
  EXPECT_EQ(KminOn(loop, "leaf0"), 400'000);
  EXPECT_EQ(KminOn(loop, "leaf1"), 400'000);
  EXPECT_EQ(CountEvents(loop, "canary passed"), 1);

  // A bad change: ECN effectively off and PFC at 20 KB. Under the incast
  // the canary's queues now pause their upstream most of the time.
  loop.controller().SetFabricSettings({LeafThresholds(40'000'000, 60'000'000, 20'000)});
  loop.RunUntil(420 * kNsPerMs);
  v1::ChangePlan during = PlanOf(loop);
  EXPECT_EQ(during.state(), v1::CHANGE_STATE_CANARY) << during.DebugString();
  EXPECT_EQ(KminOn(loop, "leaf1"), 40'000'000) << "the canary runs the change";
  EXPECT_EQ(KminOn(loop, "leaf0"), 400'000) << "the rest waits for the canary's check";

  loop.RunUntil(800 * kNsPerMs);
  v1::ChangePlan after = PlanOf(loop);
  EXPECT_EQ(after.state(), v1::CHANGE_STATE_QUARANTINED) << after.DebugString();
  EXPECT_EQ(after.quarantined_revision(), after.revision());
  EXPECT_NE(after.detail().find("PFC pause fraction"), std::string::npos) << after.detail();
  EXPECT_EQ(KminOn(loop, "leaf1"), 400'000) << "rolled back";
  EXPECT_EQ(KminOn(loop, "leaf0"), 400'000) << "never given the change";
  EXPECT_EQ(CountEvents(loop, "canary failed"), 1);

  // Quarantined: the reconciler does not try it again.
  loop.RunUntil(1200 * kNsPerMs);
  EXPECT_EQ(KminOn(loop, "leaf1"), 400'000);
  EXPECT_EQ(CountEvents(loop, "gets it first"), 2);

  // Accepted settings survive a restart: no new canary for what runs.
  loop.RestartController();
  loop.RunUntil(1300 * kNsPerMs);
  EXPECT_EQ(PlanOf(loop).state(), v1::CHANGE_STATE_IN_SYNC);
  EXPECT_EQ(CountEvents(loop, "gets it first"), 2);
  EXPECT_EQ(KminOn(loop, "leaf0"), 400'000);
}

}  // namespace
}  // namespace loom::testing
