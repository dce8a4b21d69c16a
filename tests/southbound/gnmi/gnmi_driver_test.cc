// GnmiDriver against a real gNMI target (TestGnmiTarget on 127.0.0.1:0):
// one Set per change, no Set when nothing changed, confirmation with Get,
// per-part failures with the gRPC status, unreachable targets.
#include "southbound/gnmi/gnmi_driver.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "tests/southbound/gnmi/test_target.h"

namespace loom::southbound::gnmi {
namespace {

namespace v1 = loom::v1;
using testing::TestGnmiTarget;

constexpr auto kDeadline = std::chrono::seconds(20);

v1::DeviceState Desired(uint64_t generation) {
  v1::DeviceState s;
  s.set_device("leaf-0");
  s.set_generation(generation);
  auto* d = s.mutable_dlb();
  d->set_mode(v1::DLB_MODE_FLOWLET);
  d->set_inactivity_interval_ns(256000);
  d->set_load_weight_percent(50);
  auto* a = s.add_alb_tables();
  a->set_group("leaf-1");
  for (const char* m : {"spine-0", "spine-1", "spine-0", "spine-1"}) a->add_buckets(m);
  auto* w = s.add_weights();
  w->set_destination("leaf-1");
  (*w->mutable_weights())["spine-0"] = 2;
  (*w->mutable_weights())["spine-1"] = 1;
  auto* sp = s.add_spray_rules();
  sp->set_traffic_class(3);
  auto* t = s.add_thresholds();
  t->set_priority(3);
  t->set_ecn_kmin_bytes(100000);
  t->set_ecn_kmax_bytes(400000);
  t->set_ecn_pmax_percent(20);
  // Colors and routes: BGP's by default.
  auto* c = s.add_colors();
  c->set_color(7);
  c->add_next_hops("spine-0");
  auto* r = s.add_routes();
  r->set_destination("nic-1");
  r->set_color(7);
  return s;
}

ApplyResult ApplySync(GnmiDriver& driver, const v1::DeviceState& desired) {
  std::promise<ApplyResult> p;
  auto f = p.get_future();
  driver.Apply(desired, [&p](ApplyResult r) { p.set_value(std::move(r)); });
  EXPECT_EQ(f.wait_for(kDeadline), std::future_status::ready);
  return f.get();
}

std::pair<Status, v1::DeviceState> ReadSync(GnmiDriver& driver, const std::string& device) {
  std::promise<std::pair<Status, v1::DeviceState>> p;
  auto f = p.get_future();
  driver.Read(device, [&p](Status s, v1::DeviceState d) { p.set_value({s, std::move(d)}); });
  EXPECT_EQ(f.wait_for(kDeadline), std::future_status::ready);
  return f.get();
}

std::string Failures(const ApplyResult& r) {
  std::string out;
  for (const auto& f : r.failures) {
    out += f.part + ":" + std::to_string(static_cast<int>(f.status.code())) + " " +
           f.status.message() + "; ";
  }
  return out;
}

const ApplyFailure* FindFailure(const ApplyResult& r, const std::string& part) {
  for (const auto& f : r.failures) {
    if (f.part == part) return &f;
  }
  return nullptr;
}

GnmiDriverConfig Config(const std::string& address) {
  GnmiDriverConfig c;
  c.devices.push_back({"leaf-0", address, ""});
  c.rpc_timeout_ms = 10000;
  return c;
}

class GnmiDriverTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(target_.Start({"leaf-0", "leaf-1"})); }
  TestGnmiTarget target_;
};

TEST_F(GnmiDriverTest, AppliesWithOneSetAndConfirmsWithGet) {
  GnmiDriver driver(Config(target_.address()));
  ASSERT_TRUE(driver.Start().ok());
  ApplyResult r = ApplySync(driver, Desired(1));
  EXPECT_TRUE(r.ok()) << Failures(r);
  EXPECT_EQ(target_.sets("leaf-0"), 1);
  EXPECT_EQ(target_.gets("leaf-0"), 2);  // Learn the device, then confirm.
  EXPECT_EQ(r.applied.device(), "leaf-0");
  EXPECT_EQ(r.applied.generation(), 1u);
  EXPECT_EQ(DiffParts(r.applied, Desired(1), kGnmiDefaultParts), 0u);
  EXPECT_EQ(r.applied.colors_size(), 0);  // Not gNMI's.
  EXPECT_EQ(r.applied.routes_size(), 0);
  v1::DeviceState dev = target_.state("leaf-0");
  EXPECT_EQ(DiffParts(dev, Desired(1), kGnmiDefaultParts), 0u);
  EXPECT_EQ(dev.colors_size(), 0);
  EXPECT_EQ(target_.last_set("leaf-0").prefix().target(), "leaf-0");
}

TEST_F(GnmiDriverTest, NoSetWhenNothingChanged) {
  GnmiDriver driver(Config(target_.address()));
  ASSERT_TRUE(driver.Start().ok());
  ASSERT_TRUE(ApplySync(driver, Desired(1)).ok());
  ApplyResult r = ApplySync(driver, Desired(2));  // New generation, same content.
  EXPECT_TRUE(r.ok()) << Failures(r);
  EXPECT_EQ(r.applied.generation(), 2u);
  EXPECT_EQ(target_.sets("leaf-0"), 1);
  EXPECT_EQ(target_.gets("leaf-0"), 2);
  EXPECT_EQ(driver.counters("leaf-0").sets, 1u);
}

TEST_F(GnmiDriverTest, OneSetPerChangeCarryingOnlyTheDifference) {
  GnmiDriver driver(Config(target_.address()));
  ASSERT_TRUE(driver.Start().ok());
  ASSERT_TRUE(ApplySync(driver, Desired(1)).ok());
  v1::DeviceState next = Desired(2);
  next.mutable_dlb()->set_mode(v1::DLB_MODE_PER_PACKET);
  next.mutable_alb_tables(0)->set_buckets(3, "spine-0");
  next.clear_spray_rules();
  ApplyResult r = ApplySync(driver, next);
  EXPECT_TRUE(r.ok()) << Failures(r);
  EXPECT_EQ(target_.sets("leaf-0"), 2);
  ::gnmi::SetRequest last = target_.last_set("leaf-0");
  EXPECT_EQ(last.replace_size(), 2);  // dlb, alb group.
  EXPECT_EQ(last.delete__size(), 1);  // The spray rule.
  EXPECT_EQ(DiffParts(target_.state("leaf-0"), next, kGnmiDefaultParts), 0u);
  EXPECT_EQ(r.applied.dlb().mode(), v1::DLB_MODE_PER_PACKET);
}

TEST_F(GnmiDriverTest, DevicesOnOneTargetAreProgrammedSeparately) {
  GnmiDriverConfig c = Config(target_.address());
  c.devices.push_back({"leaf-1", target_.address(), ""});
  GnmiDriver driver(c);
  ASSERT_TRUE(driver.Start().ok());
  v1::DeviceState other = Desired(4);
  other.set_device("leaf-1");
  other.mutable_dlb()->set_mode(v1::DLB_MODE_ASSIGNED_FLOW);
  std::promise<ApplyResult> p0, p1;
  driver.Apply(Desired(3), [&](ApplyResult r) { p0.set_value(std::move(r)); });
  driver.Apply(other, [&](ApplyResult r) { p1.set_value(std::move(r)); });
  auto f0 = p0.get_future(), f1 = p1.get_future();
  ASSERT_EQ(f0.wait_for(kDeadline), std::future_status::ready);
  ASSERT_EQ(f1.wait_for(kDeadline), std::future_status::ready);
  EXPECT_TRUE(f0.get().ok());
  EXPECT_TRUE(f1.get().ok());
  EXPECT_EQ(target_.state("leaf-0").dlb().mode(), v1::DLB_MODE_FLOWLET);
  EXPECT_EQ(target_.state("leaf-1").dlb().mode(), v1::DLB_MODE_ASSIGNED_FLOW);
  EXPECT_EQ(target_.sets("leaf-1"), 1);
}

TEST_F(GnmiDriverTest, TargetRejectionIsReportedPerPartWithItsStatus) {
  TestGnmiTarget small([] {
    CodecLimits l;
    l.max_alb_buckets = 2;  // Stricter than the controller's limits.
    return l;
  }());
  ASSERT_TRUE(small.Start({"leaf-0"}));
  GnmiDriver driver(Config(small.address()));
  ASSERT_TRUE(driver.Start().ok());
  ApplyResult r = ApplySync(driver, Desired(1));
  ASSERT_FALSE(r.ok());
  const ApplyFailure* alb = FindFailure(r, "alb_tables");
  ASSERT_NE(alb, nullptr) << Failures(r);
  EXPECT_EQ(alb->status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(alb->status.message().find("need 1..2"), std::string::npos) << alb->status.message();
  // One transaction: the other parts it carried failed with it.
  const ApplyFailure* dlb = FindFailure(r, "dlb");
  ASSERT_NE(dlb, nullptr);
  EXPECT_EQ(dlb->status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.applied.generation(), 0u);
  EXPECT_EQ(DiffParts(small.state("leaf-0"), v1::DeviceState(), kAllParts), 0u);

  // Fixing the table applies everything.
  v1::DeviceState fixed = Desired(2);
  fixed.mutable_alb_tables(0)->mutable_buckets()->DeleteSubrange(2, 2);
  ApplyResult ok = ApplySync(driver, fixed);
  EXPECT_TRUE(ok.ok()) << Failures(ok);
  EXPECT_EQ(ok.applied.generation(), 2u);
}

TEST_F(GnmiDriverTest, InvalidPartIsRejectedLocallyAndTheRestApplies) {
  GnmiDriver driver(Config(target_.address()));
  ASSERT_TRUE(driver.Start().ok());
  v1::DeviceState s = Desired(1);
  s.mutable_dlb()->set_load_weight_percent(150);
  ApplyResult r = ApplySync(driver, s);
  ASSERT_EQ(r.failures.size(), 1u) << Failures(r);
  EXPECT_EQ(r.failures[0].part, "dlb");
  EXPECT_EQ(r.failures[0].status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.applied.generation(), 0u);
  EXPECT_FALSE(r.applied.has_dlb());
  EXPECT_EQ(r.applied.alb_tables_size(), 1);
  EXPECT_EQ(target_.state("leaf-0").alb_tables_size(), 1);
  EXPECT_FALSE(target_.state("leaf-0").has_dlb());
}

TEST_F(GnmiDriverTest, InvalidValueSentAnywayIsRejectedByTheTarget) {
  GnmiDriverConfig c = Config(target_.address());
  c.validate_before_send = false;
  GnmiDriver driver(c);
  ASSERT_TRUE(driver.Start().ok());
  v1::DeviceState s = Desired(1);
  s.mutable_thresholds(0)->set_ecn_pmax_percent(300);
  ApplyResult r = ApplySync(driver, s);
  const ApplyFailure* f = FindFailure(r, "thresholds");
  ASSERT_NE(f, nullptr) << Failures(r);
  EXPECT_EQ(f->status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f->status.message().find("ecn-pmax-percent"), std::string::npos);
  EXPECT_EQ(target_.sets("leaf-0"), 1);
  EXPECT_EQ(target_.state("leaf-0").thresholds_size(), 0);
}

TEST_F(GnmiDriverTest, UnconfirmedSetIsReportedAsInternal) {
  GnmiDriver driver(Config(target_.address()));
  ASSERT_TRUE(driver.Start().ok());
  target_.DropNextSets(1);
  ApplyResult r = ApplySync(driver, Desired(1));
  ASSERT_FALSE(r.ok());
  const ApplyFailure* f = FindFailure(r, "alb_tables");
  ASSERT_NE(f, nullptr) << Failures(r);
  EXPECT_EQ(f->status.code(), StatusCode::kInternal);
  EXPECT_EQ(r.applied.alb_tables_size(), 0);  // From the Get: nothing there.
  // The retry sends it again.
  ApplyResult again = ApplySync(driver, Desired(1));
  EXPECT_TRUE(again.ok()) << Failures(again);
  EXPECT_EQ(target_.sets("leaf-0"), 2);
}

TEST_F(GnmiDriverTest, SetFailureCarriesTheGrpcStatus) {
  GnmiDriver driver(Config(target_.address()));
  ASSERT_TRUE(driver.Start().ok());
  target_.FailNextSets(1, grpc::StatusCode::RESOURCE_EXHAUSTED);
  ApplyResult r = ApplySync(driver, Desired(1));
  const ApplyFailure* f = FindFailure(r, "weights");
  ASSERT_NE(f, nullptr) << Failures(r);
  EXPECT_EQ(f->status.code(), StatusCode::kResourceExhausted);
}

TEST_F(GnmiDriverTest, DriftIsReadAndRepairedOnTheNextApply) {
  GnmiDriver driver(Config(target_.address()));
  ASSERT_TRUE(driver.Start().ok());
  ASSERT_TRUE(ApplySync(driver, Desired(1)).ok());
  v1::DeviceState drifted = target_.state("leaf-0");
  drifted.mutable_dlb()->set_mode(v1::DLB_MODE_STATIC);
  target_.set_state("leaf-0", drifted);
  auto [st, read] = ReadSync(driver, "leaf-0");
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(read.dlb().mode(), v1::DLB_MODE_STATIC);
  EXPECT_EQ(read.generation(), 1u);
  ApplyResult r = ApplySync(driver, Desired(1));
  EXPECT_TRUE(r.ok()) << Failures(r);
  EXPECT_EQ(target_.sets("leaf-0"), 2);
  EXPECT_EQ(target_.last_set("leaf-0").replace_size(), 1);
  EXPECT_EQ(target_.state("leaf-0").dlb().mode(), v1::DLB_MODE_FLOWLET);
}

TEST_F(GnmiDriverTest, NewDriverDoesNotResendWhatTheDeviceRuns) {
  {
    GnmiDriver first(Config(target_.address()));
    ASSERT_TRUE(first.Start().ok());
    ASSERT_TRUE(ApplySync(first, Desired(1)).ok());
  }
  GnmiDriver second(Config(target_.address()));
  ASSERT_TRUE(second.Start().ok());
  ApplyResult r = ApplySync(second, Desired(1));
  EXPECT_TRUE(r.ok()) << Failures(r);
  EXPECT_EQ(target_.sets("leaf-0"), 1);
}

TEST_F(GnmiDriverTest, ColorsAndRoutesCarriedWhenConfigured) {
  GnmiDriverConfig c = Config(target_.address());
  c.parts = kAllParts;
  GnmiDriver driver(c);
  ASSERT_TRUE(driver.Start().ok());
  ApplyResult r = ApplySync(driver, Desired(1));
  EXPECT_TRUE(r.ok()) << Failures(r);
  EXPECT_EQ(r.applied.colors_size(), 1);
  EXPECT_EQ(target_.state("leaf-0").routes_size(), 1);
}

// Routes split by destination QP: the parts of one destination are applied,
// confirmed and later changed one by one.
TEST_F(GnmiDriverTest, QpSplitRoutesAppliedConfirmedAndChangedPerPart) {
  GnmiDriverConfig c = Config(target_.address());
  c.parts = kAllParts;
  GnmiDriver driver(c);
  ASSERT_TRUE(driver.Start().ok());
  v1::DeviceState want = Desired(1);
  want.add_colors()->set_color(8);
  want.mutable_colors(1)->add_next_hops("spine-1");
  for (uint32_t v : {0u, 1u}) {
    auto* r = want.add_routes();
    r->set_destination("nic-1");
    r->set_traffic_class(3);
    r->set_qp_mask(1);
    r->set_qp_value(v);
    r->set_color(v ? 8 : 7);
    r->set_backup_color(v ? 7 : 8);
  }
  ApplyResult r = ApplySync(driver, want);
  EXPECT_TRUE(r.ok()) << Failures(r);
  EXPECT_EQ(r.applied.generation(), 1u);
  ASSERT_EQ(r.applied.routes_size(), 3);
  v1::DeviceState dev = target_.state("leaf-0");
  ASSERT_EQ(dev.routes_size(), 3);
  EXPECT_EQ(dev.routes(0).destination(), "nic-1");  // The unsplit class-0 route.
  EXPECT_EQ(dev.routes(0).qp_mask(), 0u);
  EXPECT_EQ(dev.routes(1).qp_value(), 0u);
  EXPECT_EQ(dev.routes(1).color(), 7u);
  EXPECT_EQ(dev.routes(2).qp_value(), 1u);
  EXPECT_EQ(dev.routes(2).color(), 8u);
  EXPECT_EQ(DiffParts(dev, want), 0u);
  // The same again: nothing to send.
  const int sets = target_.sets("leaf-0");
  r = ApplySync(driver, want);
  EXPECT_TRUE(r.ok()) << Failures(r);
  EXPECT_EQ(target_.sets("leaf-0"), sets);
  // Both parts to color 8: one Set replacing only part 0.
  v1::DeviceState moved = want;
  moved.set_generation(2);
  moved.mutable_routes(1)->set_color(8);
  moved.mutable_routes(1)->set_backup_color(7);
  r = ApplySync(driver, moved);
  EXPECT_TRUE(r.ok()) << Failures(r);
  EXPECT_EQ(target_.sets("leaf-0"), sets + 1);
  const ::gnmi::SetRequest last = target_.last_set("leaf-0");
  EXPECT_EQ(last.delete__size(), 0);
  ASSERT_EQ(last.replace_size(), 1);
  EXPECT_EQ(last.replace(0).path().elem(1).key().at("qp-value"), "0");
  EXPECT_EQ(DiffParts(target_.state("leaf-0"), moved), 0u);
  // A part whose value lies outside its mask is refused locally.
  v1::DeviceState bad = moved;
  bad.set_generation(3);
  bad.mutable_routes(2)->set_qp_value(3);
  r = ApplySync(driver, bad);
  const ApplyFailure* f = FindFailure(r, "routes");
  ASSERT_NE(f, nullptr) << Failures(r);
  EXPECT_EQ(f->status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f->status.message().find("qp-value 3 has bits outside qp-mask 1"), std::string::npos)
      << f->status.message();
  EXPECT_EQ(DiffParts(target_.state("leaf-0"), moved), 0u);
}

TEST_F(GnmiDriverTest, UnownedPartsReportedWhenAsked) {
  GnmiDriverConfig c = Config(target_.address());
  c.report_unowned_parts = true;
  GnmiDriver driver(c);
  ASSERT_TRUE(driver.Start().ok());
  ApplyResult r = ApplySync(driver, Desired(1));
  ASSERT_EQ(r.failures.size(), 2u) << Failures(r);
  EXPECT_EQ(FindFailure(r, "colors")->status.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(FindFailure(r, "routes")->status.code(), StatusCode::kUnimplemented);
}

TEST_F(GnmiDriverTest, UnknownDeviceIsNotFound) {
  GnmiDriver driver(Config(target_.address()));
  ASSERT_TRUE(driver.Start().ok());
  EXPECT_FALSE(driver.Handles("spine-9"));
  v1::DeviceState s = Desired(1);
  s.set_device("spine-9");
  ApplyResult r = ApplySync(driver, s);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_EQ(r.failures[0].part, "device");
  EXPECT_EQ(r.failures[0].status.code(), StatusCode::kNotFound);
}

TEST_F(GnmiDriverTest, BadConfigurationIsRejected) {
  GnmiDriverConfig c = Config(target_.address());
  c.devices.push_back({"leaf-0", "127.0.0.1:1", ""});
  EXPECT_EQ(GnmiDriver(c).Start().code(), StatusCode::kInvalidArgument);
  GnmiDriverConfig d;
  d.devices.push_back({"leaf-0", "", ""});
  EXPECT_EQ(GnmiDriver(d).Start().code(), StatusCode::kInvalidArgument);
}

// A loopback port nobody listens on.
int ClosedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

TEST(GnmiDriverUnreachable, ReportsUnavailablePerPart) {
  GnmiDriver driver(Config("127.0.0.1:" + std::to_string(ClosedPort())));
  ASSERT_TRUE(driver.Start().ok());
  ApplyResult r = ApplySync(driver, Desired(1));
  ASSERT_FALSE(r.ok());
  for (const char* part : {"dlb", "alb_tables", "weights", "spray_rules", "thresholds"}) {
    const ApplyFailure* f = FindFailure(r, part);
    ASSERT_NE(f, nullptr) << part << ": " << Failures(r);
    EXPECT_EQ(f->status.code(), StatusCode::kUnavailable) << f->status.message();
  }
  EXPECT_EQ(r.applied.device(), "leaf-0");
  auto [st, state] = ReadSync(driver, "leaf-0");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_EQ(state.device(), "leaf-0");
}

TEST(GnmiDriverUnreachable, StopCompletesPendingCalls) {
  GnmiDriver driver(Config("127.0.0.1:" + std::to_string(ClosedPort())));
  ASSERT_TRUE(driver.Start().ok());
  std::atomic<int> done{0};
  for (int i = 0; i < 5; ++i) {
    driver.Apply(Desired(i + 1), [&done](ApplyResult r) {
      EXPECT_FALSE(r.ok());
      done++;
    });
  }
  driver.Stop();
  EXPECT_EQ(done.load(), 5);
  // After Stop, calls complete at once.
  ApplyResult r = ApplySync(driver, Desired(9));
  EXPECT_EQ(r.failures.at(0).status.code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace loom::southbound::gnmi
