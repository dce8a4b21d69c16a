// Policy engine: validation messages and first-match evaluation.
#include <gtest/gtest.h>

#include "policy/policy_engine.h"
#include "tests/unit/test_util.h"

namespace loom::policy {
namespace {

// SmallFabric: spine0, spine1; leaf0, leaf1; host000..003 with gpu0/gpu1.
constexpr char kPolicy[] = R"({
  "colors": [
    {"color": 1, "name": "red", "spines": ["spine0"]},
    {"color": 2, "name": "blue", "spines": ["spine1"]}
  ],
  "rules": [
    {"name": "acme-dedicated", "match": {"tenants": ["acme"]},
     "action": {"colors": [1], "isolation": "ISOLATION_DEDICATED", "dlbMode": "DLB_MODE_FLOWLET"}},
    {"name": "beta-qp", "match": {"tenants": ["beta"], "qpRanges": [{"first": 0, "last": 999}]},
     "action": {"colors": [2], "sprayEligible": true}}
  ],
  "defaultAction": {"isolation": "ISOLATION_SHARED"}
})";

class PolicyTest : public ::testing::Test {
 protected:
  v1::PolicySet Parse(const std::string& json) {
    v1::PolicySet s;
    std::string err;
    EXPECT_TRUE(ParsePolicyJson(json, "p.json", &s, &err)) << err;
    return s;
  }
  std::vector<Finding> Validate(const v1::PolicySet& s) { return ValidatePolicy(s, *topo_); }
  void ExpectError(const v1::PolicySet& s, const std::string& element, const std::string& text) {
    auto f = Validate(s);
    bool found = false;
    for (const auto& x : f) {
      if (x.severity == Finding::Severity::kError && x.element.find(element) != std::string::npos &&
          x.message.find(text) != std::string::npos) {
        found = true;
      }
    }
    EXPECT_TRUE(found) << "want error at " << element << ": " << text << "\ngot:\n"
                       << FormatFindings(f);
  }
  std::shared_ptr<const loom::topology::TopologyIndex> topo_ = loom::testing::SmallFabric();
};

TEST_F(PolicyTest, ValidSetHasNoErrors) {
  auto f = Validate(Parse(kPolicy));
  EXPECT_FALSE(HasErrors(f)) << FormatFindings(f);
}

TEST_F(PolicyTest, RejectsUndefinedColor) {
  auto s = Parse(kPolicy);
  s.mutable_rules(1)->mutable_action()->set_colors(0, 7);
  ExpectError(s, "rules[1] (\"beta-qp\")", "color 7, which is not defined");
}

TEST_F(PolicyTest, RejectsColorWithUnknownSpine) {
  auto s = Parse(kPolicy);
  s.mutable_colors(1)->add_spines("leaf0");
  ExpectError(s, "colors[1] (2)", "\"leaf0\" is not a spine");
}

TEST_F(PolicyTest, RejectsShadowedRule) {
  auto s = Parse(kPolicy);
  auto* r = s.add_rules();
  r->set_name("acme-tc3");
  r->mutable_match()->add_tenants("acme");
  r->mutable_match()->add_traffic_classes(3);
  r->mutable_action()->add_colors(1);
  ExpectError(s, "rules[2] (\"acme-tc3\")", "shadowed by rules[0] (\"acme-dedicated\")");
}

// Shadowing is found through the index whatever lists the covering rule sets:
// a catch-all rule, a rule naming several tenants (the later rule's tenant is
// not its first), a rule setting fewer lists than the shadowed one; the
// earliest covering rule is named.
TEST_F(PolicyTest, ShadowingFoundForEveryShapeOfCoveringRule) {
  auto rule = [](v1::PolicySet* s, const std::string& name) {
    auto* r = s->add_rules();
    r->set_name(name);
    r->mutable_action()->set_dlb_mode(v1::DLB_MODE_FLOWLET);
    return r->mutable_match();
  };
  v1::PolicySet s;
  auto* m = rule(&s, "multi");
  m->add_tenants("t1");
  m->add_tenants("t2");
  m = rule(&s, "t2-tc5-job");  // covered by "multi" (t2 is its second tenant)
  m->add_tenants("t2");
  m->add_traffic_classes(5);
  m->add_job_ids("j");
  m = rule(&s, "tc6");
  m->add_traffic_classes(6);
  m = rule(&s, "t9-tc6-ep");  // covered by "tc6", which sets only one of its lists
  m->add_tenants("t9");
  m->add_traffic_classes(6);
  m->add_endpoints("host000-gpu0");
  rule(&s, "all");
  m = rule(&s, "after-all");  // covered by "all" (sets nothing) and by nothing earlier
  m->add_job_ids("x");
  ExpectError(s, "rules[1] (\"t2-tc5-job\")", "shadowed by rules[0] (\"multi\")");
  ExpectError(s, "rules[3] (\"t9-tc6-ep\")", "shadowed by rules[2] (\"tc6\")");
  ExpectError(s, "rules[5] (\"after-all\")", "shadowed by rules[4] (\"all\")");
  int errors = 0;
  for (const auto& f : Validate(s)) errors += f.severity == Finding::Severity::kError;
  EXPECT_EQ(errors, 3) << FormatFindings(Validate(s));
}

// A rule overlapping many earlier ones gets at most three warnings, not one per pair.
TEST_F(PolicyTest, OverlapWarningsPerRuleAreBounded) {
  v1::PolicySet s;
  for (int i = 0; i < 50; ++i) {
    auto* r = s.add_rules();
    r->set_name("tc-" + std::to_string(i));
    r->mutable_match()->add_traffic_classes(static_cast<uint32_t>(i % 8));
    r->mutable_match()->add_job_ids("job-" + std::to_string(i));
    r->mutable_action()->set_dlb_mode(v1::DLB_MODE_FLOWLET);
  }
  auto* r = s.add_rules();
  r->set_name("acme");
  r->mutable_match()->add_tenants("acme");
  auto f = Validate(s);
  int warnings = 0;
  for (const auto& x : f) warnings += x.element.find("acme") != std::string::npos;
  EXPECT_EQ(warnings, 3) << FormatFindings(f);
  EXPECT_NE(FormatFindings(f).find("further overlaps not listed"), std::string::npos);
}

TEST_F(PolicyTest, WarnsOnOverlapWithDifferentAction) {
  auto s = Parse(kPolicy);
  auto* r = s.add_rules();
  r->set_name("tc3-spray");
  r->mutable_match()->add_traffic_classes(3);
  r->mutable_action()->set_spray_eligible(true);
  auto f = Validate(s);
  EXPECT_FALSE(HasErrors(f)) << FormatFindings(f);
  bool warned = false;
  for (const auto& x : f) {
    warned |= x.severity == Finding::Severity::kWarning &&
              x.element.find("tc3-spray") != std::string::npos &&
              x.message.find("acme-dedicated") != std::string::npos;
  }
  EXPECT_TRUE(warned) << FormatFindings(f);
}

TEST_F(PolicyTest, RejectsDedicatedSpineUsedByAnotherTenant) {
  auto s = Parse(kPolicy);
  s.mutable_rules(1)->mutable_action()->set_colors(0, 1);  // beta pinned to red = acme's
  ExpectError(s, "rules[1] (\"beta-qp\")", "dedicated to tenant \"acme\"");
}

TEST_F(PolicyTest, RejectsUnsatisfiableIsolation) {
  auto s = Parse(kPolicy);
  // Two more dedicated tenants without pinned colors: 1 free spine left for
  // them and shared traffic.
  for (const char* t : {"x", "y"}) {
    auto* r = s.add_rules();
    r->set_name(std::string(t) + "-dedicated");
    r->mutable_match()->add_tenants(t);
    r->mutable_action()->set_isolation(v1::ISOLATION_DEDICATED);
  }
  ExpectError(s, "rules", "dedicated isolation is unsatisfiable");
}

TEST_F(PolicyTest, RejectsBadRangesAndDuplicateNames) {
  auto s = Parse(kPolicy);
  s.mutable_rules(1)->set_name("acme-dedicated");
  s.mutable_rules(1)->mutable_match()->mutable_qp_ranges(0)->set_first(5000);
  ExpectError(s, "rules[1]", "duplicate rule name");
  ExpectError(s, "rules[1]", "match.qp_ranges[0]");
}

TEST_F(PolicyTest, QpSplitMustBeAPowerOfTwoUpTo64) {
  auto s = Parse(kPolicy);
  s.mutable_rules(1)->mutable_action()->set_qp_split(8);
  s.mutable_default_action()->set_qp_split(1);  // 1 = no split
  auto f = Validate(s);
  EXPECT_FALSE(HasErrors(f)) << FormatFindings(f);
  s.mutable_rules(1)->mutable_action()->set_qp_split(6);
  ExpectError(s, "rules[1] (\"beta-qp\")", "qp_split 6 is not a power of two between 2 and 64");
  s.mutable_rules(1)->mutable_action()->set_qp_split(128);
  ExpectError(s, "rules[1]", "qp_split 128");
  s.mutable_rules(1)->mutable_action()->set_qp_split(0);
  s.mutable_default_action()->set_qp_split(3);
  ExpectError(s, "default", "qp_split 3");
}

TEST_F(PolicyTest, FirstMatchWins) {
  PolicyEngine engine(Parse(kPolicy));
  v1::Job job;
  job.set_tenant("beta");
  job.set_job_id("b1");
  auto* q = job.add_qp_ranges();
  q->set_first(10);
  q->set_last(20);
  auto d = engine.Evaluate(job);
  EXPECT_EQ(d.rule_name, "beta-qp");
  EXPECT_TRUE(d.action.spray_eligible());
  q->set_last(2000);  // outside the rule's QP range
  d = engine.Evaluate(job);
  EXPECT_EQ(d.rule_index, -1);
  EXPECT_EQ(d.rule_name, "default");
  job.set_tenant("acme");
  d = engine.Evaluate(job);
  EXPECT_EQ(d.rule_name, "acme-dedicated");
  EXPECT_EQ(d.action.isolation(), v1::ISOLATION_DEDICATED);
}

TEST_F(PolicyTest, EndpointMatchNeedsAllEndpointsInSet) {
  v1::PolicyMatch m;
  m.add_endpoints("host000-gpu0");
  m.add_endpoints("host001-gpu0");
  v1::Job job;
  job.add_endpoints("host000-gpu0");
  EXPECT_TRUE(PolicyEngine::Matches(m, job));
  job.add_endpoints("host002-gpu0");
  EXPECT_FALSE(PolicyEngine::Matches(m, job));
}

}  // namespace
}  // namespace loom::policy
