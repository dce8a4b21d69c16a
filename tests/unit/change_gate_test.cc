// ChangeGate: fabric-wide settings go canary-first and roll back on a bad
// telemetry check; job-driven routes pass at once within a churn budget.
//
//   spine0   spine1
//     |  \   /  |
//   leaf0  leaf1  leaf2      (devices only: the gate sees device states and
//                             link samples, not the graph)
#include "controller/reconciler/change_gate.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace loom::controller {
namespace {

namespace v1 = loom::v1;

class Harness {
 public:
  explicit Harness(ChangeSafetyOptions o)
      : gate(
            clock, o,
            [this](const std::vector<std::string>& devices) {
              std::vector<LinkHealthSample> out;
              for (const auto& d : devices) {
                LinkHealthSample s;
                s.link = d + "->spine0";
                s.utilization = util[d];
                s.pfc_pause = pfc[d];
                s.drops_pps = drops[d];
                s.down = down.count(d) > 0;
                out.push_back(s);
              }
              return out;
            },
            [this](const std::string& device, std::string* error) {
              if (failing.count(device)) *error = "Set rejected";
              return !failing.count(device) && programmed[device];
            }) {
    gate.SetNoteCallback(
        [this](const GateNote& n) { notes.push_back(n.cause + " | " + n.action); });
  }

  // The reconciler's part: whatever was released is programmed.
  void Program() {
    for (const auto& [dev, st] : gate.Released()) {
      programmed[dev] = true;
      running[dev] = st;
    }
  }
  void Update(const std::map<std::string, v1::DeviceState>& computed) {
    gate.Update(computed);
    Program();
  }
  void Step(TimeNs dt) {
    clock.Advance(dt);
    gate.Tick();
    Program();
  }
  uint64_t KminOn(const std::string& dev) {
    const auto& st = running[dev];
    return st.thresholds().empty() ? 0 : st.thresholds(0).ecn_kmin_bytes();
  }
  bool Noted(const std::string& text) const {
    for (const auto& n : notes) {
      if (n.find(text) != std::string::npos) return true;
    }
    return false;
  }

  VirtualClock clock;
  std::map<std::string, double> util, pfc, drops;
  std::set<std::string> down, failing;
  std::map<std::string, bool> programmed;
  std::map<std::string, v1::DeviceState> running;
  std::vector<std::string> notes;
  ChangeGate gate;
};

std::map<std::string, v1::DeviceState> Fabric(uint64_t kmin, int routes = 1) {
  std::map<std::string, v1::DeviceState> out;
  for (std::string d : {"leaf0", "leaf1", "leaf2"}) {
    auto& st = out[d];
    st.set_device(d);
    auto* t = st.add_thresholds();
    t->set_priority(3);
    t->set_ecn_kmin_bytes(kmin);
    t->set_ecn_kmax_bytes(kmin * 4);
    for (int i = 0; i < routes; ++i) {
      auto* r = st.add_routes();
      r->set_destination("nic" + std::to_string(i));
      r->set_color(1001);
    }
  }
  return out;
}

ChangeSafetyOptions Safety() {
  ChangeSafetyOptions o;
  o.enabled = true;
  o.canary_wait_ns = 10 * kNsPerSec;
  return o;
}

TEST(ChangeGateTest, DisabledPassesEverythingAtOnce) {
  Harness h(ChangeSafetyOptions{});
  h.Update(Fabric(100'000));
  EXPECT_EQ(h.KminOn("leaf2"), 100'000u);
  h.Update(Fabric(5'000));
  EXPECT_EQ(h.KminOn("leaf0"), 5'000u);
  EXPECT_EQ(h.gate.Plan().state(), v1::CHANGE_STATE_DISABLED);
}

TEST(ChangeGateTest, CanaryFirstThenTheRestWhenTelemetryHolds) {
  Harness h(Safety());
  for (auto d : {"leaf0", "leaf1", "leaf2"}) h.util[d] = 0.6;
  h.Update(Fabric(100'000));
  // Routes pass at once; the settings only to the canary.
  EXPECT_EQ(h.running["leaf1"].routes_size(), 1);
  EXPECT_EQ(h.KminOn("leaf0"), 100'000u);
  EXPECT_EQ(h.KminOn("leaf1"), 0u);
  v1::ChangePlan plan = h.gate.Plan();
  EXPECT_EQ(plan.state(), v1::CHANGE_STATE_CANARY);
  ASSERT_EQ(plan.devices_size(), 3);
  EXPECT_TRUE(plan.devices(0).canary());
  EXPECT_NE(plan.devices(1).changes(0).find("thresholds[* priority 3]: set"), std::string::npos);
  h.Step(kNsPerSec);      // canary runs it: observation starts
  h.Step(5 * kNsPerSec);  // still watching
  EXPECT_EQ(h.KminOn("leaf1"), 0u);
  h.Step(6 * kNsPerSec);
  EXPECT_EQ(h.KminOn("leaf1"), 100'000u);
  EXPECT_EQ(h.KminOn("leaf2"), 100'000u);
  EXPECT_EQ(h.gate.Plan().state(), v1::CHANGE_STATE_IN_SYNC);
  EXPECT_TRUE(h.Noted("canary passed"));
  EXPECT_EQ(h.gate.TakeAcceptedChanges().size(), 3u);
}

TEST(ChangeGateTest, PfcRiseOnTheCanaryRollsBackAndQuarantines) {
  Harness h(Safety());
  h.Update(Fabric(100'000));
  h.Step(kNsPerSec);
  h.Step(11 * kNsPerSec);
  ASSERT_EQ(h.KminOn("leaf2"), 100'000u);
  // A bad change: the canary's link starts pausing.
  h.Update(Fabric(2'000));
  EXPECT_EQ(h.KminOn("leaf0"), 2'000u);
  EXPECT_EQ(h.KminOn("leaf1"), 100'000u);
  h.Step(kNsPerSec);
  h.pfc["leaf0"] = 0.4;
  h.Step(11 * kNsPerSec);
  EXPECT_EQ(h.KminOn("leaf0"), 100'000u) << "the canary runs its previous settings again";
  EXPECT_EQ(h.KminOn("leaf1"), 100'000u) << "the rest never got the change";
  v1::ChangePlan plan = h.gate.Plan();
  EXPECT_EQ(plan.state(), v1::CHANGE_STATE_QUARANTINED);
  EXPECT_EQ(plan.quarantined_revision(), plan.revision());
  EXPECT_NE(plan.detail().find("PFC pause fraction 0.000 -> 0.400"), std::string::npos)
      << plan.detail();
  // The same inputs are not tried again.
  h.pfc["leaf0"] = 0;
  h.Update(Fabric(2'000));
  h.Step(30 * kNsPerSec);
  EXPECT_EQ(h.KminOn("leaf0"), 100'000u);
  // New inputs lift the quarantine.
  h.Update(Fabric(50'000));
  EXPECT_EQ(h.KminOn("leaf0"), 50'000u);
  EXPECT_TRUE(h.Noted("quarantine lifted"));
}

TEST(ChangeGateTest, OperatorClearsTheQuarantine) {
  Harness h(Safety());
  h.drops["leaf0"] = 0;
  h.Update(Fabric(100'000));
  h.Step(kNsPerSec);
  h.drops["leaf0"] = 500;
  h.Step(11 * kNsPerSec);
  v1::ChangePlan plan = h.gate.Plan();
  ASSERT_EQ(plan.state(), v1::CHANGE_STATE_QUARANTINED);
  EXPECT_NE(plan.detail().find("drops"), std::string::npos);
  EXPECT_EQ(h.KminOn("leaf0"), 0u) << "no earlier settings: Loom withdraws its own";
  EXPECT_FALSE(h.gate.ClearQuarantine(plan.revision() + 1).ok());
  h.drops["leaf0"] = 0;
  ASSERT_TRUE(h.gate.ClearQuarantine(plan.revision()).ok());
  h.Program();
  EXPECT_EQ(h.KminOn("leaf0"), 100'000u);
  h.Step(kNsPerSec);
  h.Step(11 * kNsPerSec);
  EXPECT_EQ(h.KminOn("leaf2"), 100'000u);
}

TEST(ChangeGateTest, LinkDownOrUtilizationCollapseOrNoApplyFailsTheCanary) {
  {
    Harness h(Safety());
    h.Update(Fabric(100'000));
    h.Step(kNsPerSec);
    h.down.insert("leaf0");
    h.Step(kNsPerSec);
    EXPECT_EQ(h.gate.Plan().state(), v1::CHANGE_STATE_QUARANTINED);
    EXPECT_NE(h.gate.Plan().detail().find("went down"), std::string::npos);
  }
  {
    Harness h(Safety());
    h.util["leaf0"] = 0.8;
    h.Update(Fabric(100'000));
    h.Step(kNsPerSec);
    h.util["leaf0"] = 0.2;
    h.Step(11 * kNsPerSec);
    EXPECT_NE(h.gate.Plan().detail().find("utilization 0.800 -> 0.200"), std::string::npos)
        << h.gate.Plan().detail();
  }
  {
    Harness h(Safety());
    h.failing.insert("leaf0");
    h.Update(Fabric(100'000));
    h.Step(61 * kNsPerSec);
    EXPECT_EQ(h.gate.Plan().state(), v1::CHANGE_STATE_QUARANTINED);
    EXPECT_NE(h.gate.Plan().detail().find("Set rejected"), std::string::npos);
  }
}

TEST(ChangeGateTest, ApproveModeWaitsAndRefusesAStalePlan) {
  ChangeSafetyOptions o = Safety();
  o.approve = true;
  Harness h(o);
  h.Update(Fabric(100'000));
  h.Step(60 * kNsPerSec);
  EXPECT_EQ(h.KminOn("leaf0"), 0u);
  v1::ChangePlan plan = h.gate.Plan();
  EXPECT_EQ(plan.state(), v1::CHANGE_STATE_AWAITING_APPROVAL);
  uint64_t seen = plan.revision();
  // The desired state moves on after the operator looked.
  h.Update(Fabric(80'000));
  Status stale = h.gate.Apply(seen);
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stale.message().find("stale plan"), std::string::npos);
  EXPECT_EQ(h.KminOn("leaf0"), 0u);
  ASSERT_TRUE(h.gate.Apply(h.gate.Plan().revision()).ok());
  h.Program();
  EXPECT_EQ(h.KminOn("leaf0"), 80'000u);
  EXPECT_EQ(h.KminOn("leaf1"), 0u);
  h.Step(kNsPerSec);
  h.Step(11 * kNsPerSec);
  EXPECT_EQ(h.KminOn("leaf2"), 80'000u);
}

TEST(ChangeGateTest, ConfiguredCanaryAndDeviceRateLimit) {
  ChangeSafetyOptions o = Safety();
  o.canary = {"leaf2"};
  o.max_devices_per_minute = 1;
  Harness h(o);
  h.Update(Fabric(100'000));
  EXPECT_EQ(h.KminOn("leaf2"), 100'000u);
  EXPECT_EQ(h.KminOn("leaf0"), 0u);
  h.Step(kNsPerSec);
  h.Step(11 * kNsPerSec);
  // 12 s after the canary: no token for another device yet.
  EXPECT_EQ(h.KminOn("leaf0"), 0u);
  h.Step(50 * kNsPerSec);
  EXPECT_EQ(h.KminOn("leaf0"), 100'000u);
  EXPECT_EQ(h.KminOn("leaf1"), 0u);
  h.Step(61 * kNsPerSec);
  EXPECT_EQ(h.KminOn("leaf1"), 100'000u);
  EXPECT_EQ(h.gate.Plan().state(), v1::CHANGE_STATE_IN_SYNC);
}

TEST(ChangeGateTest, RouteChurnBudgetDefersTheExcess) {
  ChangeSafetyOptions o;
  o.route_churn_per_minute = 60;  // one per second
  Harness h(o);
  h.Update(Fabric(100'000, 10));
  EXPECT_EQ(h.running["leaf0"].routes_size(), 10) << "first programming is not churn";
  h.Update(Fabric(100'000, 100));
  EXPECT_EQ(h.running["leaf0"].routes_size(), 70) << "60 tokens: 60 of 90 additions";
  EXPECT_TRUE(h.Noted("exceed the churn budget"));
  h.Step(10 * kNsPerSec);
  EXPECT_EQ(h.running["leaf0"].routes_size(), 80);
  h.Step(30 * kNsPerSec);
  EXPECT_EQ(h.running["leaf0"].routes_size(), 100);
  // Withdrawals count too.
  h.Step(60 * kNsPerSec);
  h.Update(Fabric(100'000, 0));
  EXPECT_EQ(h.running["leaf0"].routes_size(), 40);
}

TEST(ChangeGateTest, ARolloutEndingInsideUpdateStartsTheNextPlan) {
  Harness h(Safety());
  h.Update(Fabric(100'000));
  h.Step(kNsPerSec);  // canary runs it
  h.clock.Advance(11 * kNsPerSec);
  // The canary check completes inside this Update, which brings a new change.
  h.Update(Fabric(90'000));
  EXPECT_EQ(h.KminOn("leaf2"), 100'000u) << "revision 1 rolled out";
  v1::ChangePlan plan = h.gate.Plan();
  EXPECT_EQ(plan.state(), v1::CHANGE_STATE_CANARY) << plan.DebugString();
  EXPECT_EQ(plan.rollout_revision(), plan.revision());
  EXPECT_EQ(h.KminOn("leaf0"), 90'000u) << "the next change went to the canary";
}

TEST(ChangeGateTest, QuarantineHoldsWhileTheBadContentIsStillPlanned) {
  Harness h(Safety());
  h.Update(Fabric(100'000));
  h.Step(kNsPerSec);
  h.Step(11 * kNsPerSec);
  h.Update(Fabric(2'000));
  h.Step(kNsPerSec);
  h.pfc["leaf0"] = 0.5;
  h.Step(11 * kNsPerSec);
  ASSERT_EQ(h.gate.Plan().state(), v1::CHANGE_STATE_QUARANTINED);
  h.pfc["leaf0"] = 0;
  // Something else changes on leaf2 (an ALB table): the bad thresholds are
  // still in the plan, so nothing rolls out and leaf0 is not tried again.
  auto next = Fabric(2'000);
  auto* alb = next["leaf2"].add_alb_tables();
  alb->set_group("leaf0");
  alb->add_buckets("spine0");
  h.Update(next);
  h.Step(30 * kNsPerSec);
  EXPECT_EQ(h.gate.Plan().state(), v1::CHANGE_STATE_QUARANTINED);
  EXPECT_EQ(h.KminOn("leaf0"), 100'000u);
  EXPECT_FALSE(h.Noted("quarantine lifted"));
  // The bad value is gone from the inputs: lifted, and the rest rolls out.
  auto fixed = Fabric(100'000);
  *fixed["leaf2"].add_alb_tables() = *alb;
  h.Update(fixed);
  EXPECT_TRUE(h.Noted("quarantine lifted"));
  h.Step(kNsPerSec);
  h.Step(11 * kNsPerSec);
  EXPECT_EQ(h.running["leaf2"].alb_tables_size(), 1);
}

TEST(ChangeGateTest, RevisionQuarantineAndGivenSettingsSurviveARestart) {
  v1::QuarantinedChange stored;
  uint64_t revision = 0;
  std::map<std::string, v1::DeviceState> accepted;
  {
    Harness h(Safety());
    h.Update(Fabric(100'000));
    h.Step(kNsPerSec);
    h.Step(11 * kNsPerSec);
    h.Update(Fabric(2'000));
    h.Step(kNsPerSec);
    h.drops["leaf0"] = 100;
    h.Step(11 * kNsPerSec);
    ASSERT_EQ(h.gate.Plan().state(), v1::CHANGE_STATE_QUARANTINED);
    ASSERT_TRUE(h.gate.TakePlanState(&revision, &stored));
    EXPECT_EQ(revision, 2u);
    EXPECT_EQ(stored.revision(), 2u);
    accepted = h.gate.Accepted();
  }
  Harness h(Safety());
  h.gate.RestoreAccepted(accepted);
  h.gate.RestorePlanState(revision, &stored);
  h.Update(Fabric(2'000));
  h.Step(30 * kNsPerSec);
  v1::ChangePlan plan = h.gate.Plan();
  EXPECT_EQ(plan.state(), v1::CHANGE_STATE_QUARANTINED) << plan.DebugString();
  EXPECT_EQ(plan.quarantined_revision(), 2u);
  EXPECT_GT(plan.revision(), 2u) << "revisions are not reused after a restart";
  EXPECT_EQ(h.KminOn("leaf0"), 100'000u) << "the accepted settings, not the quarantined ones";
}

TEST(ChangeGateTest, SettingsGivenWithoutChangeSafetyAreTheBaselineWhenItIsTurnedOn) {
  std::map<std::string, v1::DeviceState> accepted;
  {
    Harness off(ChangeSafetyOptions{});
    off.gate.RecordGiven(Fabric(100'000));
    EXPECT_EQ(off.gate.TakeAcceptedChanges().size(), 3u);
    off.gate.RecordGiven(Fabric(100'000));
    EXPECT_TRUE(off.gate.TakeAcceptedChanges().empty()) << "nothing new to persist";
    accepted = off.gate.Accepted();
  }
  Harness on(Safety());
  on.gate.RestoreAccepted(accepted);
  on.Update(Fabric(100'000));
  EXPECT_EQ(on.gate.Plan().state(), v1::CHANGE_STATE_IN_SYNC);
  EXPECT_EQ(on.KminOn("leaf1"), 100'000u) << "nothing withdrawn";
}

TEST(ChangeGateTest, ChurnBudgetAddsBeforeItWithdraws) {
  ChangeSafetyOptions o;
  o.route_churn_per_minute = 2;
  Harness h(o);
  auto first = Fabric(100'000, 2);  // nic0, nic1
  h.Update(first);
  // Replace nic0 by nic5 and nic6: 3 changes, 2 allowed: both additions go
  // first, nic0's withdrawal waits.
  auto next = Fabric(100'000, 0);
  for (auto& [dev, st] : next) {
    for (const char* d : {"nic1", "nic5", "nic6"}) {
      auto* r = st.add_routes();
      r->set_destination(d);
      r->set_color(1001);
    }
  }
  h.Update(next);
  std::set<std::string> dests;
  for (const auto& r : h.running["leaf0"].routes()) dests.insert(r.destination());
  EXPECT_EQ(dests, (std::set<std::string>{"nic0", "nic1", "nic5", "nic6"}));
}

}  // namespace
}  // namespace loom::controller
