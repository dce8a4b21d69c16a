// Job spec validation: every rejection names the field and the reason.
#include "controller/core/job_validation.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/text.h"
#include "controller/core/request_limits.h"
#include "tests/unit/test_util.h"

namespace loom::controller {
namespace {

class JobValidationTest : public ::testing::Test {
 protected:
  JobValidationTest() : topo_(loom::testing::SmallFabric()) {
    job_.set_tenant("acme");
    job_.set_job_id("j1");
    job_.add_endpoints("host000-gpu0");
    job_.add_endpoints("host003-nic1");
  }
  void ExpectInvalid(const std::string& field, const std::string& reason) {
    Status s = ValidateJobSpec(job_, *topo_);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message().rfind(field + ":", 0), 0u) << s.message();
    EXPECT_NE(s.message().find(reason), std::string::npos) << s.message();
  }
  std::shared_ptr<const loom::topology::TopologyIndex> topo_;
  v1::Job job_;
};

TEST_F(JobValidationTest, AcceptsGpuAndNicEndpoints) {
  EXPECT_TRUE(ValidateJobSpec(job_, *topo_).ok());
}

TEST_F(JobValidationTest, TrafficMatrixNamesTheBadEntry) {
  auto add = [&](const std::string& src, const std::string& dst, double w) {
    auto* f = job_.add_traffic();
    f->set_src(src);
    f->set_dst(dst);
    f->set_weight(w);
  };
  add("host000-gpu0", "host003-nic1", 2.5);
  EXPECT_TRUE(ValidateJobSpec(job_, *topo_).ok());
  add("host000-gpu0", "host001-gpu0", 1);
  ExpectInvalid("job.traffic[1].dst", "\"host001-gpu0\" is not an endpoint of the job");
  job_.mutable_traffic()->RemoveLast();
  add(std::string(300, 'x'), "host003-nic1", 1);
  Status s = ValidateJobSpec(job_, *topo_);
  EXPECT_LT(s.message().size(), 200u) << "a long input is not echoed whole";
  ExpectInvalid("job.traffic[1].src", "is not an endpoint of the job");
  job_.mutable_traffic()->RemoveLast();
  add("host000-gpu0", "host000-gpu0", 1);
  ExpectInvalid("job.traffic[1]", "src and dst are the same endpoint");
  job_.mutable_traffic()->RemoveLast();
  for (double bad : {0.0, -1.0, std::nan(""), static_cast<double>(INFINITY)}) {
    add("host000-gpu0", "host003-nic1", bad);
    ExpectInvalid("job.traffic[1].weight", "must be a finite number > 0");
    job_.mutable_traffic()->RemoveLast();
  }
}

TEST_F(JobValidationTest, RejectsEmptyTenant) {
  job_.clear_tenant();
  ExpectInvalid("job.tenant", "must not be empty");
}

TEST_F(JobValidationTest, RejectsEmptyJobId) {
  job_.clear_job_id();
  ExpectInvalid("job.job_id", "must not be empty");
}

TEST_F(JobValidationTest, RejectsUnknownEndpoint) {
  job_.add_endpoints("host999-gpu0");
  ExpectInvalid("job.endpoints[2]", "unknown endpoint \"host999-gpu0\"");
}

TEST_F(JobValidationTest, RejectsSwitchAsEndpoint) {
  job_.add_endpoints("leaf0");
  ExpectInvalid("job.endpoints[2]", "unknown endpoint \"leaf0\"");
}

TEST_F(JobValidationTest, RejectsDuplicateEndpoint) {
  job_.add_endpoints("host000-gpu0");
  ExpectInvalid("job.endpoints[2]", "listed twice");
}

TEST_F(JobValidationTest, RejectsNoEndpoints) {
  job_.clear_endpoints();
  ExpectInvalid("job.endpoints", "at least one");
}

TEST_F(JobValidationTest, RejectsOverlappingQpRanges) {
  auto* a = job_.add_qp_ranges();
  a->set_first(100);
  a->set_last(200);
  auto* b = job_.add_qp_ranges();
  b->set_first(300);
  b->set_last(400);
  auto* c = job_.add_qp_ranges();
  c->set_first(200);
  c->set_last(250);
  ExpectInvalid("job.qp_ranges[2]", "[200, 250] overlaps job.qp_ranges[0] [100, 200]");
}

TEST_F(JobValidationTest, RejectsInvertedRange) {
  auto* a = job_.add_qp_ranges();
  a->set_first(10);
  a->set_last(5);
  ExpectInvalid("job.qp_ranges[0]", "first 10 is greater than last 5");
}

TEST_F(JobValidationTest, RejectsQpnAbove24Bits) {
  auto* a = job_.add_qp_ranges();
  a->set_first(1);
  a->set_last(0x1000000);
  ExpectInvalid("job.qp_ranges[0]", "exceeds 16777215");
}

TEST_F(JobValidationTest, RejectsPortAbove65535AndOverlap) {
  auto* a = job_.add_udp_source_port_ranges();
  a->set_first(49152);
  a->set_last(70000);
  ExpectInvalid("job.udp_source_port_ranges[0]", "exceeds 65535");
  a->set_last(50000);
  auto* b = job_.add_udp_source_port_ranges();
  b->set_first(49999);
  b->set_last(49999);
  ExpectInvalid("job.udp_source_port_ranges[1]", "overlaps");
}

TEST_F(JobValidationTest, RejectsTrafficClassAbove7) {
  job_.set_traffic_class(8);
  ExpectInvalid("job.traffic_class", "0..7");
}

TEST(RequestIdTest, EmptyIsFineSpacesAreNot) {
  EXPECT_TRUE(ValidateRequestId("").ok());
  EXPECT_TRUE(ValidateRequestId("abc-123").ok());
  EXPECT_FALSE(ValidateRequestId("a b").ok());
  EXPECT_FALSE(ValidateRequestId(std::string(200, 'x')).ok());
}

TEST(QuoteInputTest, ClipsEscapesAndStatesTheSize) {
  EXPECT_EQ(QuoteInput("abc"), "\"abc\"");
  EXPECT_EQ(QuoteInput(std::string("a\nb\"", 4)), "\"a\\x0ab\\\"\"");
  const std::string big(1 << 20, 'z');
  const std::string q = QuoteInput(big);
  EXPECT_EQ(q, "\"" + std::string(64, 'z') + "\"... (1048576 bytes)");
}

TEST(RequestLimitsTest, EachLimitIsEnforcedAndNamed) {
  v1::DrainLinkRequest drain;
  drain.set_link_id("a:e0--b:e0");
  drain.set_reason(std::string(kMaxReasonLength, 'r'));
  EXPECT_TRUE(ValidateRequest(drain).ok());
  drain.set_reason(std::string(kMaxReasonLength + 1, 'r'));
  Status s = ValidateRequest(drain);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("reason: 1025 bytes, at most 1024"), std::string::npos) << s.message();
  EXPECT_LT(s.message().size(), 200u);
  drain.set_reason("optics\x1b[2J swap");
  EXPECT_NE(ValidateRequest(drain).message().find("control characters"), std::string::npos);
  drain.set_reason("ok");
  drain.set_link_id(std::string(kMaxLinkIdLength + 1, 'l'));
  EXPECT_NE(ValidateRequest(drain).message().find("link_id: 513 characters"), std::string::npos);

  v1::ListLinksRequest list;
  list.set_page_size(-1);
  EXPECT_FALSE(ValidateRequest(list).ok());
  list.set_page_size(kMaxPageSize + 1);
  EXPECT_FALSE(ValidateRequest(list).ok());
  list.set_page_size(10);
  list.set_page_token(std::string(kMaxPageTokenLength + 1, 't'));
  EXPECT_FALSE(ValidateRequest(list).ok());

  v1::WatchEventsRequest watch;
  for (int i = 0; i <= kMaxEventTypes; ++i) watch.add_types(v1::EVENT_TYPE_LINK_DRAINED);
  EXPECT_NE(ValidateRequest(watch).message().find("types: 65 entries"), std::string::npos);
  watch.clear_types();
  watch.add_types(static_cast<v1::EventType>(9999));
  EXPECT_NE(ValidateRequest(watch).message().find("unknown event type 9999"), std::string::npos);

  v1::GetJobRequest get;
  get.set_job_id(std::string(1000000, 'j'));
  s = ValidateRequest(get);
  EXPECT_NE(s.message().find("(1000000 bytes)"), std::string::npos);
  EXPECT_LT(s.message().size(), 200u);
  v1::ListJobsRequest jobs;
  jobs.set_tenant("has space");
  EXPECT_FALSE(ValidateRequest(jobs).ok());
}

TEST_F(JobValidationTest, LabelAndRangeCountsAreBounded) {
  const auto& topo = *topo_;
  v1::Job job = job_;
  for (int i = 0; i < kMaxLabels; ++i) (*job.mutable_labels())["k" + std::to_string(i)] = "v";
  EXPECT_TRUE(ValidateJobSpec(job, topo).ok());
  (*job.mutable_labels())["one-more"] = "v";
  Status s = ValidateJobSpec(job, topo);
  EXPECT_NE(s.message().find("job.labels: 65 labels, at most 64"), std::string::npos)
      << s.message();
  job.clear_labels();
  (*job.mutable_labels())[std::string(100000, 'k')] = "v";
  s = ValidateJobSpec(job, topo);
  EXPECT_NE(s.message().find("(100000 bytes)"), std::string::npos);
  EXPECT_LT(s.message().size(), 200u);
  job.clear_labels();
  for (int i = 0; i <= kMaxRanges; ++i) {
    auto* r = job.add_qp_ranges();
    r->set_first(static_cast<uint32_t>(2 * i));
    r->set_last(static_cast<uint32_t>(2 * i));
  }
  EXPECT_NE(ValidateJobSpec(job, topo).message().find("1025 ranges, at most 1024"),
            std::string::npos);
}

}  // namespace
}  // namespace loom::controller
