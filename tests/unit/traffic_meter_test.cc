// Demand from what the scheduler states and what the fabric measures:
// JobDemand with a traffic matrix, TrafficMeter's attribution and hysteresis,
// Placement with a measured matrix.
#include "controller/te/traffic_meter.h"

#include <gtest/gtest.h>

#include "controller/te/demand.h"
#include "controller/te/placement.h"
#include "tests/unit/test_util.h"

namespace loom::te {
namespace {

namespace v1 = loom::v1;

// SmallFabric: leaf0 (host000, host001), leaf1 (host002, host003), 2 NICs per host,
// 400G, two spines.

v1::Job Job(const std::string& id, std::vector<std::string> endpoints, v1::CollectivePattern c) {
  v1::Job job;
  job.set_job_id(id);
  job.set_tenant("t");
  job.set_collective(c);
  for (auto& e : endpoints) job.add_endpoints(e);
  return job;
}

void AddFlow(v1::Job* job, const std::string& src, const std::string& dst, double w) {
  auto* f = job->add_traffic();
  f->set_src(src);
  f->set_dst(dst);
  f->set_weight(w);
}

TEST(DemandTest, StatedTrafficReplacesThePatternAndRunsTheBusiestNicAtLineRate) {
  auto topo = loom::testing::SmallFabric();
  // Endpoint order says ring 0 -> 1 -> 2 -> 0; NCCL's real ring is 0 -> 2 -> 1 -> 0,
  // and a second channel doubles the 0 -> 2 hop. Same-host pairs (NVLink) drop out.
  v1::Job job = Job("j", {"host000-gpu0", "host001-gpu0", "host002-gpu0"},
                    v1::COLLECTIVE_PATTERN_RING_ALLREDUCE);
  AddFlow(&job, "host000-gpu0", "host002-gpu0", 1);
  AddFlow(&job, "host002-gpu0", "host001-gpu0", 1);
  AddFlow(&job, "host001-gpu0", "host000-gpu0", 1);
  AddFlow(&job, "host000-gpu0", "host002-gpu0", 1);  // adds up: weight 2
  auto d = JobDemand(job, *topo);
  ASSERT_EQ(d.size(), 3u);
  std::map<std::pair<std::string, std::string>, double> rate;
  for (const auto& x : d) rate[{x.src_nic, x.dst_nic}] = x.rate_bps;
  // host000-nic0 sends weight 2 and host002-nic0 receives 2: that is line rate.
  EXPECT_DOUBLE_EQ((rate[{"host000-nic0", "host002-nic0"}]), 400e9);
  EXPECT_DOUBLE_EQ((rate[{"host002-nic0", "host001-nic0"}]), 200e9);
  EXPECT_DOUBLE_EQ((rate[{"host001-nic0", "host000-nic0"}]), 200e9);
  EXPECT_EQ(rate.count({"host001-nic0", "host002-nic0"}), 0u) << "the endpoint-order hop is gone";
  // Without the matrix: the pattern's endpoint-order ring.
  job.clear_traffic();
  auto p = JobDemand(job, *topo);
  std::set<std::pair<std::string, std::string>> pairs;
  for (const auto& x : p) pairs.insert({x.src_nic, x.dst_nic});
  EXPECT_TRUE(pairs.count({"host001-nic0", "host002-nic0"}));
}

TEST(TrafficMeterTest, DistanceIsTheShareOfBytesThatWouldMove) {
  std::vector<NicDemand> a = {{"n0", "n1", 1}, {"n2", "n3", 1}};
  std::vector<NicDemand> b = {{"n0", "n3", 5}, {"n2", "n1", 5}};
  std::vector<NicDemand> c = {{"n0", "n1", 3}, {"n2", "n3", 3}};
  EXPECT_DOUBLE_EQ(TrafficDistance(a, b), 1.0);
  EXPECT_DOUBLE_EQ(TrafficDistance(a, c), 0.0);  // shapes, not rates
  EXPECT_DOUBLE_EQ(TrafficDistance(a, {{"n0", "n1", 1}, {"n2", "n1", 1}}), 0.5);
  EXPECT_DOUBLE_EQ(TrafficDistance({}, a), 1.0);
  EXPECT_DOUBLE_EQ(TrafficDistance({}, {}), 0.0);
}

TEST(TrafficMeterTest, AttributesPairsToTheOneJobWithBothNicsAndWaitsForEvidence) {
  TrafficMeter m({.min_samples = 3, .min_distance = 0.3});
  std::map<std::string, std::vector<std::string>> jobs = {{"a", {"n0", "n1", "n2", "n3"}},
                                                          {"b", {"n2", "n3", "n4"}}};
  // Modelled: a sends n0 -> n1, n1 -> n0; it really sends n0 -> n3 and n1 -> n2.
  // n2 -> n3 belongs to both jobs (not attributable); n4 -> n9 to none.
  auto model = [](const std::string& id) {
    if (id == "a") return std::vector<NicDemand>{{"n0", "n1", 400e9}, {"n1", "n0", 400e9}};
    return std::vector<NicDemand>{{"n4", "n2", 400e9}};
  };
  std::vector<NicDemand> rates = {{"n0", "n3", 200e9},
                                  {"n1", "n2", 390e9},
                                  {"n2", "n3", 100e9},
                                  {"n4", "n9", 100e9},
                                  {"n4", "n2", 300e9}};
  for (int i = 0; i < 2; ++i) m.Observe(rates, jobs);
  EXPECT_TRUE(m.Judge(model).empty()) << "two samples are not enough";
  m.Observe(rates, jobs);
  auto v = m.Judge(model);
  ASSERT_EQ(v.size(), 1u) << "b's measured n4 -> n2 matches its model";
  EXPECT_EQ(v[0].job_id, "a");
  EXPECT_DOUBLE_EQ(v[0].distance, 1.0);
  ASSERT_EQ(v[0].measured.size(), 2u);
  // Rows are shares: n0 -> n3 got half the rate of n1 -> n2, but each is all its NIC sends.
  EXPECT_EQ(v[0].measured[0].src_nic, "n0");
  EXPECT_EQ(v[0].measured[0].dst_nic, "n3");
  EXPECT_DOUBLE_EQ(v[0].measured[0].rate_bps, 1.0);
  EXPECT_DOUBLE_EQ(v[0].measured[1].rate_bps, 1.0);
  EXPECT_NE(v[0].why.find("100% go to pairs the model does not have"), std::string::npos)
      << v[0].why;
  // A verdict needs fresh evidence; once the matrix in use is the measurement,
  // the same traffic moves nothing.
  EXPECT_TRUE(m.Judge(model).empty());
  auto now = [&](const std::string& id) { return id == "a" ? v[0].measured : model(id); };
  for (int i = 0; i < 5; ++i) m.Observe(rates, jobs);
  EXPECT_TRUE(m.Judge(now).empty());
  // A released job is forgotten.
  jobs.erase("a");
  m.Observe(rates, jobs);
  EXPECT_EQ(m.samples("a"), 0);
}

TEST(TrafficMeterTest, SourcesThatSentNothingSayNothing) {
  TrafficMeter m({.min_samples = 1, .min_distance = 0.3, .min_coverage = 0});
  std::map<std::string, std::vector<std::string>> jobs = {{"a", {"n0", "n1", "n2", "n3"}}};
  auto model = [](const std::string&) {
    return std::vector<NicDemand>{
        {"n0", "n1", 1}, {"n1", "n2", 1}, {"n2", "n3", 1}, {"n3", "n0", 1}};
  };
  // Only n0 and n1 send (the others finished their part): what they send matches.
  m.Observe({{"n0", "n1", 400e9}, {"n1", "n2", 100e9}}, jobs);
  EXPECT_TRUE(m.Judge(model).empty());
  // n2 sends elsewhere than modelled: one of the two sending rows is wrong.
  m.Observe({{"n0", "n1", 400e9}, {"n2", "n0", 100e9}}, jobs);
  auto v = m.Judge(model);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_DOUBLE_EQ(v[0].distance, 0.5);
  // The new matrix keeps the model's rows of the sources that were not seen (n1, n3).
  std::set<std::pair<std::string, std::string>> pairs;
  for (const auto& p : v[0].measured) pairs.insert({p.src_nic, p.dst_nic});
  EXPECT_EQ(pairs, (std::set<std::pair<std::string, std::string>>{
                       {"n0", "n1"}, {"n2", "n0"}, {"n1", "n2"}, {"n3", "n0"}}));
}

TEST(TrafficMeterTest, WaitsUntilMostSourcesWereSeenAndConfirmsAMatch) {
  TrafficMeter m({.min_samples = 2, .min_distance = 0.3, .min_coverage = 0.9});
  std::map<std::string, std::vector<std::string>> jobs = {{"a", {"n0", "n1", "n2", "n3"}}};
  auto model = [](const std::string&) {
    return std::vector<NicDemand>{
        {"n0", "n1", 1}, {"n1", "n2", 1}, {"n2", "n3", 1}, {"n3", "n0", 1}};
  };
  // Half the sources seen (their counters have no rate yet): no judgement.
  m.Observe({{"n0", "n1", 400e9}, {"n1", "n2", 400e9}}, jobs);
  m.Observe({{"n0", "n1", 400e9}, {"n1", "n2", 400e9}}, jobs);
  std::vector<std::string> confirmed;
  EXPECT_TRUE(m.Judge(model, &confirmed).empty());
  EXPECT_TRUE(confirmed.empty());
  // Everyone seen, where the model says: confirmed, nothing to re-place.
  m.Observe({{"n0", "n1", 1e9}, {"n1", "n2", 2e9}, {"n2", "n3", 3e9}, {"n3", "n0", 4e9}}, jobs);
  EXPECT_TRUE(m.Judge(model, &confirmed).empty());
  EXPECT_EQ(confirmed, std::vector<std::string>{"a"});
  // Coverage is waived once the evidence keeps not coming (4 x min_samples).
  confirmed.clear();
  for (int i = 0; i < 8; ++i) m.Observe({{"n0", "n2", 400e9}}, jobs);
  auto v = m.Judge(model, &confirmed);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_DOUBLE_EQ(v[0].distance, 1.0);
}

TEST(PlacementTest, MeasuredMatrixReplacesTheModelAndTheReasonSaysSo) {
  auto topo = loom::testing::SmallFabric();
  Placement p(topo, {});
  // Told point-to-point host000-gpu0 -> host000-gpu1 (NVLink: nothing on the fabric).
  v1::Job job = Job("j", {"host000-gpu0", "host000-gpu1", "host002-gpu0", "host002-gpu1"},
                    v1::COLLECTIVE_PATTERN_POINT_TO_POINT);
  auto a = p.Upsert(job);
  EXPECT_EQ(a.routes_size(), 0);
  EXPECT_NEAR(p.max_utilization(), 0.0, 1e-9);
  // Measured: both host000 NICs send to host002's, crossing leaves.
  EXPECT_TRUE(p.SetMeasuredDemand(
      "j", {{"host000-nic0", "host002-nic0", 1}, {"host000-nic1", "host002-nic1", 1}}));
  auto changed = p.Recompute(PlacementMode::kFull);
  ASSERT_TRUE(changed.count("j"));
  a = changed.at("j");
  EXPECT_EQ(a.routes_size(), 2);
  EXPECT_NE(a.reason().find("demand: measured"), std::string::npos) << a.reason();
  // Two 400G flows over two spines: each on its own.
  EXPECT_NEAR(p.max_utilization(), 1.0, 1e-9);
  auto in_use = p.DemandInUse("j");
  ASSERT_EQ(in_use.size(), 2u);
  EXPECT_DOUBLE_EQ(in_use[0].rate_bps, 400e9);
  // New endpoints: the measurement no longer applies.
  job.add_endpoints("host001-gpu0");
  p.Upsert(job);
  EXPECT_EQ(p.MeasuredDemand("j"), nullptr);
  // A stated matrix is the prior and the reason says so.
  AddFlow(&job, "host000-gpu0", "host002-gpu0", 1);
  a = p.Upsert(job);
  EXPECT_NE(a.reason().find("demand: the scheduler's traffic matrix (1 entries)"),
            std::string::npos)
      << a.reason();
}

// Routes of an assignment sprayed somewhere.
int Sprayed(const v1::PathAssignment& a) {
  int n = 0;
  for (const auto& r : a.routes()) n += r.sprayed_at_size() > 0;
  return n;
}

TEST(PlacementTest, UnknownPairingIsSprayedUntilConfirmedWhenTheNicsTolerateReordering) {
  auto topo = loom::testing::SmallFabric();
  const std::vector<std::string> eps = {"host000-gpu0", "host000-gpu1", "host002-gpu0",
                                        "host002-gpu1"};
  for (bool tolerant : {false, true}) {
    Placement p(topo, {});
    if (tolerant) {
      p.SetReorderTolerantNics({"host000-nic0", "host000-nic1", "host002-nic0", "host002-nic1"});
    }
    // A permutation: who sends to whom is the model's guess.
    auto a = p.Upsert(Job("perm", eps, v1::COLLECTIVE_PATTERN_PERMUTATION));
    ASSERT_GT(a.routes_size(), 0);
    EXPECT_EQ(Sprayed(a), tolerant ? a.routes_size() : 0);
    if (tolerant) {
      EXPECT_NE(a.reason().find("does not fix who sends to whom"), std::string::npos) << a.reason();
      // No colored route on the leaves: the leaf sprays the class.
      auto leaf0 = p.DesiredStateOf("leaf0");
      EXPECT_EQ(leaf0.routes_size(), 0);
      EXPECT_GE(leaf0.spray_rules_size(), 1);
    }
    // Measurement confirms the prior: pinned from then on.
    EXPECT_EQ(p.SetDemandConfirmed("perm"), tolerant);
    a = p.AssignmentOf("perm");
    EXPECT_EQ(Sprayed(a), 0);
    EXPECT_GT(p.DesiredStateOf("leaf0").routes_size(), 0);
    // A ring's pairing is its endpoint order: pinned at once either way.
    auto r = p.Upsert(
        Job("ring", {"host001-gpu0", "host003-gpu0"}, v1::COLLECTIVE_PATTERN_RING_ALLREDUCE));
    EXPECT_EQ(Sprayed(r), 0);
  }
}

// Selective-repeat NICs keep out-of-order packets but resend one per reorder event:
// a job whose NICs are all selective repeat (or tolerant) is sprayed while its pairing is
// unknown, with the cost in its reason; one NIC that goes back N keeps the job pinned.
TEST(PlacementTest, SelectiveRepeatNicsAreSprayedWithTheirCostCountedGoBackNOnesAreNot) {
  auto topo = loom::testing::SmallFabric();
  const std::vector<std::string> eps = {"host000-gpu0", "host000-gpu1", "host002-gpu0",
                                        "host002-gpu1"};
  {
    Placement p(topo, {});
    p.SetSelectiveRepeatNics({"host000-nic0", "host000-nic1", "host002-nic0"});
    p.SetReorderTolerantNics({"host002-nic1"});
    auto a = p.Upsert(Job("perm", eps, v1::COLLECTIVE_PATTERN_PERMUTATION));
    ASSERT_GT(a.routes_size(), 0);
    EXPECT_EQ(Sprayed(a), a.routes_size());
    EXPECT_NE(a.reason().find("selective repeat"), std::string::npos) << a.reason();
    EXPECT_NE(a.reason().find("1.33x longer"), std::string::npos) << a.reason();
  }
  {
    Placement p(topo, {});
    p.SetSelectiveRepeatNics(
        {"host000-nic0", "host000-nic1", "host002-nic0"});  // host002-nic1: GBN
    auto a = p.Upsert(Job("perm", eps, v1::COLLECTIVE_PATTERN_PERMUTATION));
    EXPECT_EQ(Sprayed(a), 0);
  }
}

}  // namespace
}  // namespace loom::te
