// AdapterSetDriver (southbound/gnmi/adapter_driver.h) against gNMI servers on
// 127.0.0.1:0: a recording fake (any origin; Set can be told to fail; Get
// answers a canned response) for the sonic and openconfig adapters, and the
// loom-schema TestGnmiTarget for the loom adapter. Checks: the adapter's
// SetRequest is what goes out; what the platform cannot express is a named
// failure and is not in `applied`; a rejected Set keeps the last applied
// state; `done` runs on the driver's thread; Read compares the read-back with
// the one taken after the Set (no false drift for parts that cannot be read).
//
//   topology:   spine-0     spine-1
//                 |   \      /   |
//            Eth0 |    \    /    | Eth4
//               leaf-0  \  /  leaf-1
//            Eth8 |      \/      | Eth8
//               nic-0          nic-9
#include "southbound/gnmi/adapter_driver.h"

#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "gnmi/gnmi.grpc.pb.h"
#include "southbound/gnmi/gnmi_config.h"
#include "tests/southbound/gnmi/test_target.h"

namespace loom::southbound::gnmi {
namespace {

namespace v1 = loom::v1;
using google::protobuf::util::MessageDifferencer;

constexpr auto kDeadline = std::chrono::seconds(20);

// Records every Set; fails the next ones when told; answers Get with a canned
// response (UNIMPLEMENTED when none is set). Thread: gRPC callback threads,
// state under a mutex.
class FakeGnmiServer final : public ::gnmi::gNMI::CallbackService {
 public:
  ~FakeGnmiServer() override { Shutdown(); }
  bool Start() {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(this);
    server_ = b.BuildAndStart();
    return server_ != nullptr && port_ > 0;
  }
  void Shutdown() {
    if (!server_) return;
    Release();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
    server_.reset();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  void FailNextSets(int n, grpc::StatusCode code, std::string message) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_sets_ = n;
    fail_code_ = code;
    fail_message_ = std::move(message);
  }
  void set_get_response(const ::gnmi::GetResponse& r) {
    std::lock_guard<std::mutex> lock(mu_);
    get_response_ = r;
    have_get_response_ = true;
  }
  std::vector<::gnmi::SetRequest> sets() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sets_;
  }
  int gets() const {
    std::lock_guard<std::mutex> lock(mu_);
    return gets_;
  }
  // Sets are recorded but not answered until Release().
  void HoldSets() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = true;
  }
  void Release() {
    std::vector<grpc::ServerUnaryReactor*> held;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hold_ = false;
      held.swap(held_);
    }
    for (auto* r : held) r->Finish(grpc::Status::OK);
  }
  // Blocks until `n` Sets have arrived (false after kDeadline).
  bool WaitForSets(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kDeadline, [&] { return sets_.size() >= n; });
  }
  std::string last_username() const {
    std::lock_guard<std::mutex> lock(mu_);
    return username_;
  }

  grpc::ServerUnaryReactor* Set(grpc::CallbackServerContext* ctx, const ::gnmi::SetRequest* req,
                                ::gnmi::SetResponse*) override {
    grpc::Status status;
    auto* reactor = ctx->DefaultReactor();
    {
      std::lock_guard<std::mutex> lock(mu_);
      sets_.push_back(*req);
      cv_.notify_all();
      if (hold_) {
        held_.push_back(reactor);
        return reactor;
      }
      auto it = ctx->client_metadata().find("username");
      username_ = it == ctx->client_metadata().end()
                      ? ""
                      : std::string(it->second.data(), it->second.size());
      if (fail_sets_ > 0) {
        --fail_sets_;
        status = grpc::Status(fail_code_, fail_message_);
      }
    }
    reactor->Finish(status);
    return reactor;
  }
  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* ctx, const ::gnmi::GetRequest*,
                                ::gnmi::GetResponse* resp) override {
    grpc::Status status;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++gets_;
      if (have_get_response_) {
        *resp = get_response_;
      } else {
        status = grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no Get here");
      }
    }
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

 private:
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false;
  std::vector<grpc::ServerUnaryReactor*> held_;
  std::vector<::gnmi::SetRequest> sets_;
  int gets_ = 0;
  std::string username_;
  int fail_sets_ = 0;
  grpc::StatusCode fail_code_ = grpc::StatusCode::INVALID_ARGUMENT;
  std::string fail_message_;
  ::gnmi::GetResponse get_response_;
  bool have_get_response_ = false;
};

std::shared_ptr<const v1::Topology> Topo() {
  auto t = std::make_shared<v1::Topology>();
  auto dev = [&t](const char* id, v1::DeviceRole role) {
    auto* d = t->add_devices();
    d->set_id(id);
    d->set_role(role);
  };
  dev("leaf-0", v1::DEVICE_ROLE_LEAF);
  dev("leaf-1", v1::DEVICE_ROLE_LEAF);
  dev("spine-0", v1::DEVICE_ROLE_SPINE);
  dev("spine-1", v1::DEVICE_ROLE_SPINE);
  dev("nic-0", v1::DEVICE_ROLE_NIC);
  dev("nic-9", v1::DEVICE_ROLE_NIC);
  auto link = [&t](const char* a, const char* ai, const char* b, const char* bi) {
    auto* l = t->add_links();
    l->mutable_a()->set_device(a);
    l->mutable_a()->set_interface(ai);
    l->mutable_b()->set_device(b);
    l->mutable_b()->set_interface(bi);
    l->set_capacity_bps(400'000'000'000);
  };
  link("leaf-0", "Ethernet0", "spine-0", "Ethernet0");
  link("leaf-0", "Ethernet4", "spine-1", "Ethernet0");
  link("nic-0", "eth0", "leaf-0", "Ethernet8");
  link("leaf-1", "Ethernet0", "spine-0", "Ethernet4");
  link("leaf-1", "Ethernet4", "spine-1", "Ethernet4");
  link("nic-9", "eth0", "leaf-1", "Ethernet8");
  return t;
}

// Everything here is expressible on SONiC.
v1::DeviceState Leaf(uint64_t generation) {
  v1::DeviceState s;
  s.set_device("leaf-0");
  s.set_generation(generation);
  auto* c = s.add_colors();
  c->set_color(101);
  c->add_next_hops("spine-0");
  c->add_next_hops("spine-1");
  auto* r = s.add_routes();
  r->set_destination("nic-9");
  r->set_prefix("198.18.0.9/32");
  r->set_color(101);
  auto* d = s.mutable_dlb();
  d->set_mode(v1::DLB_MODE_FLOWLET);
  d->set_inactivity_interval_ns(256000);
  auto* w = s.mutable_pfc_watchdog();
  w->set_action(v1::PFC_WATCHDOG_ACTION_DROP);
  w->set_detection_time_ms(400);
  w->set_restoration_time_ms(2000);
  w->set_poll_interval_ms(200);
  w->add_interfaces("Ethernet8");
  auto* t = s.add_thresholds();
  t->set_interface("Ethernet8");
  t->set_priority(3);
  t->set_ecn_kmin_bytes(100000);
  t->set_ecn_kmax_bytes(400000);
  t->set_ecn_pmax_percent(20);
  return s;
}

AdapterDeviceConfig Device(const std::string& address, const std::string& adapter) {
  AdapterDeviceConfig d;
  d.device = "leaf-0";
  d.address = address;
  d.adapter = adapter;
  d.next_hop_addresses = {{"spine-0", "10.0.0.1"}, {"spine-1", "10.0.0.3"}};
  return d;
}

AdapterSetDriverConfig Config(const std::string& address, const std::string& adapter) {
  AdapterSetDriverConfig c;
  c.devices.push_back(Device(address, adapter));
  c.topology = Topo();
  c.rpc_timeout_ms = 10000;
  return c;
}

AdapterContext Ctx(const v1::Topology* topo) {
  AdapterContext ctx;
  ctx.topology = topo;
  ctx.next_hop_addresses = {{"spine-0", "10.0.0.1"}, {"spine-1", "10.0.0.3"}};
  ctx.target = "leaf-0";
  return ctx;
}

struct Applied {
  ApplyResult result;
  std::thread::id thread;
};

Applied ApplySync(AdapterSetDriver& driver, const v1::DeviceState& desired) {
  std::promise<Applied> p;
  auto f = p.get_future();
  driver.Apply(desired, [&p](ApplyResult r) {
    p.set_value({std::move(r), std::this_thread::get_id()});
  });
  EXPECT_EQ(f.wait_for(kDeadline), std::future_status::ready);
  return f.get();
}

std::pair<Status, v1::DeviceState> ReadSync(AdapterSetDriver& driver) {
  std::promise<std::pair<Status, v1::DeviceState>> p;
  auto f = p.get_future();
  driver.Read("leaf-0", [&p](Status s, v1::DeviceState d) {
    p.set_value({std::move(s), std::move(d)});
  });
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

bool Same(const v1::DeviceState& a, const v1::DeviceState& b) {
  v1::DeviceState x = Canonical(a), y = Canonical(b);
  x.set_generation(0);
  y.set_generation(0);
  return MessageDifferencer::Equals(x, y);
}

// SONiC read-back of `mode` ("per_flowlet_quality") and the watchdog of Leaf().
::gnmi::GetResponse SonicGet(const std::string& mode) {
  ::gnmi::GetResponse resp;
  auto* n = resp.add_notification();
  n->mutable_prefix()->set_origin("sonic-db");
  auto add = [n](const char* table, const std::string& json) {
    auto* u = n->add_update();
    for (const char* e : {"CONFIG_DB", "localhost", table}) {
      u->mutable_path()->add_elem()->set_name(e);
    }
    u->mutable_val()->set_json_ietf_val(json);
  };
  add("ARS_OBJECT", R"({"loom": {"assign_mode": ")" + mode + R"(", "flowlet_idle_time": "256"}})");
  add("PFC_WD", R"({"GLOBAL": {"POLL_INTERVAL": "200"},
       "Ethernet8": {"action": "drop", "detection_time": "400", "restoration_time": "2000"}})");
  return resp;
}

class AdapterDriverTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.Start()); }
  FakeGnmiServer server_;
};

TEST_F(AdapterDriverTest, SonicApplySendsTheAdapterRequestAndReportsAlbAsUnimplemented) {
  AdapterSetDriverConfig config = Config(server_.address(), "sonic");
  config.username = "admin";
  config.password = "secret";
  AdapterSetDriver driver(config);
  ASSERT_TRUE(driver.Start().ok());
  EXPECT_EQ(driver.NameFor("leaf-0"), "gnmi:sonic");
  v1::DeviceState desired = Leaf(5);
  auto* alb = desired.add_alb_tables();
  alb->set_group("leaf-1");
  alb->add_buckets("spine-0");
  alb->add_buckets("spine-1");

  ApplyResult r = ApplySync(driver, desired).result;

  auto sets = server_.sets();
  ASSERT_EQ(sets.size(), 1u);
  auto topo = Topo();
  AdapterOutput expected = MakeSetAdapter("sonic")->Encode(desired, Ctx(topo.get()));
  EXPECT_TRUE(MessageDifferencer::Equals(sets[0], expected.request)) << sets[0].DebugString();
  EXPECT_EQ(sets[0].prefix().origin(), "sonic-db");
  ASSERT_GT(sets[0].replace_size(), 0);
  for (const auto& u : sets[0].replace()) EXPECT_EQ(u.path().elem(0).name(), "CONFIG_DB");
  EXPECT_EQ(server_.last_username(), "admin");

  ASSERT_EQ(r.failures.size(), 1u) << Failures(r);
  EXPECT_EQ(r.failures[0].part, "alb_tables");
  EXPECT_EQ(r.failures[0].status.code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.failures[0].status.message().find("sonic cannot express alb_tables \"leaf-1\""),
            std::string::npos)
      << r.failures[0].status.message();
  EXPECT_EQ(r.applied.alb_tables_size(), 0);
  EXPECT_TRUE(Same(r.applied, Leaf(5))) << r.applied.DebugString();
  EXPECT_EQ(r.applied.generation(), 0u);  // Not everything applied.
}

TEST_F(AdapterDriverTest, RowsLoomNoLongerWantsAreDeletedOnTheNextSet) {
  AdapterSetDriver driver(Config(server_.address(), "sonic"));
  ASSERT_TRUE(driver.Start().ok());
  v1::DeviceState first = Leaf(1);
  auto* r2 = first.add_routes();
  r2->set_destination("nic-10");
  r2->set_prefix("198.18.0.10/32");
  r2->set_color(101);
  ASSERT_TRUE(ApplySync(driver, first).result.ok());
  // The second desired state drops nic-10's route and the ECN thresholds.
  v1::DeviceState second = Leaf(2);
  second.clear_thresholds();
  ASSERT_TRUE(ApplySync(driver, second).result.ok());

  auto sets = server_.sets();
  ASSERT_EQ(sets.size(), 2u);
  EXPECT_EQ(sets[0].delete__size(), 0);
  std::set<std::string> deleted;
  for (const auto& p : sets[1].delete_()) deleted.insert(PathString(sets[1].prefix(), p));
  std::set<std::string> replaced_before;
  for (const auto& u : sets[0].replace()) {
    replaced_before.insert(PathString(sets[0].prefix(), u.path()));
  }
  // nic-10's STATIC_ROUTE row and Loom's WRED profile go; nic-9's route stays.
  int routes_deleted = 0, wred_deleted = 0;
  for (const auto& d : deleted) {
    EXPECT_TRUE(d.find("STATIC_ROUTE") == std::string::npos ||
                d.find("198.18.0.10") != std::string::npos)
        << d;
    routes_deleted += d.find("STATIC_ROUTE") != std::string::npos;
    wred_deleted += d.find("WRED_PROFILE") != std::string::npos;
    // Whole rows only where Loom replaced them; elsewhere single fields.
    if (!replaced_before.count(d)) {
      EXPECT_NE(d.find("QUEUE"), std::string::npos) << "a field of a row Loom does not own: " << d;
    }
  }
  EXPECT_EQ(routes_deleted, 1) << sets[1].DebugString();
  EXPECT_EQ(wred_deleted, 1) << sets[1].DebugString();
  // A third identical Set deletes nothing more.
  ASSERT_TRUE(ApplySync(driver, Leaf(3)).result.ok());
  EXPECT_EQ(server_.sets().back().delete__size(), 0) << server_.sets().back().DebugString();
}

TEST_F(AdapterDriverTest, AFieldTheDeviceHadBeforeLoomIsRestoredNotDeleted) {
  // The platform bound its own lossless profile to Ethernet8 queue 3 before
  // Loom took the queue over for its ECN thresholds.
  auto topo = Topo();
  AdapterOutput planned = MakeSetAdapter("sonic")->Encode(Leaf(1), Ctx(topo.get()));
  const ::gnmi::Update* queue = nullptr;
  for (const auto& u : planned.request.update()) {
    if (PathString(planned.request.prefix(), u.path()).find("QUEUE") != std::string::npos) {
      queue = &u;
    }
  }
  ASSERT_NE(queue, nullptr) << planned.request.DebugString();
  ::gnmi::GetResponse before;
  auto* n = before.add_notification();
  *n->mutable_prefix() = planned.request.prefix();
  auto* u = n->add_update();
  *u->mutable_path() = queue->path();
  u->mutable_val()->set_json_ietf_val(
      R"({"wred_profile": "AZURE_LOSSLESS", "scheduler": "scheduler.1"})");
  server_.set_get_response(before);
  AdapterSetDriver driver(Config(server_.address(), "sonic"));
  ASSERT_TRUE(driver.Start().ok());
  ASSERT_TRUE(ApplySync(driver, Leaf(1)).result.ok());
  // Loom stops setting thresholds: the binding goes back to the platform's
  // profile; Loom's own WRED profile row is deleted.
  v1::DeviceState no_ecn = Leaf(2);
  no_ecn.clear_thresholds();
  ASSERT_TRUE(ApplySync(driver, no_ecn).result.ok());
  const auto sets = server_.sets();
  ASSERT_EQ(sets.size(), 2u);
  const std::string queue_key = PathString(planned.request.prefix(), queue->path());
  bool restored = false;
  for (const auto& up : sets[1].update()) {
    if (PathString(sets[1].prefix(), up.path()) != queue_key) continue;
    EXPECT_EQ(up.val().json_ietf_val(), R"({"wred_profile":"AZURE_LOSSLESS"})");
    restored = true;
  }
  EXPECT_TRUE(restored) << sets[1].DebugString();
  for (const auto& d : sets[1].delete_()) {
    EXPECT_EQ(PathString(sets[1].prefix(), d).find(queue_key), std::string::npos)
        << "the binding is restored, not deleted";
  }
}

TEST_F(AdapterDriverTest, ARefusedStaleDeleteDoesNotWedgeTheDevice) {
  AdapterSetDriver driver(Config(server_.address(), "sonic"));
  ASSERT_TRUE(driver.Start().ok());
  v1::DeviceState first = Leaf(1);
  auto* r2 = first.add_routes();
  r2->set_destination("nic-10");
  r2->set_prefix("198.18.0.10/32");
  r2->set_color(101);
  ASSERT_TRUE(ApplySync(driver, first).result.ok());
  // The target refuses the request carrying the stale delete (say the row
  // was removed by hand); the driver sends the desired state without it.
  server_.FailNextSets(1, grpc::StatusCode::NOT_FOUND, "STATIC_ROUTE row not found");
  ApplyResult r = ApplySync(driver, Leaf(2)).result;
  EXPECT_TRUE(r.ok()) << Failures(r);
  auto sets = server_.sets();
  ASSERT_EQ(sets.size(), 3u);
  EXPECT_GT(sets[1].delete__size(), 0);
  EXPECT_EQ(sets[2].delete__size(), 0);
  // And it is not retried forever: the next Set carries no stale delete.
  ASSERT_TRUE(ApplySync(driver, Leaf(3)).result.ok());
  EXPECT_EQ(server_.sets().back().delete__size(), 0);
}

TEST_F(AdapterDriverTest, QpSplitRouteIsAFailureNamingTheRouteAndNotApplied) {
  AdapterSetDriver driver(Config(server_.address(), "sonic"));
  ASSERT_TRUE(driver.Start().ok());
  v1::DeviceState desired = Leaf(2);
  auto* split = desired.add_routes();
  split->set_destination("nic-9");
  split->set_prefix("198.18.0.9/32");
  split->set_qp_mask(3);
  split->set_qp_value(1);
  split->set_color(101);

  ApplyResult r = ApplySync(driver, desired).result;

  ASSERT_EQ(r.failures.size(), 1u) << Failures(r);
  EXPECT_EQ(r.failures[0].part, "routes");
  EXPECT_EQ(r.failures[0].status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.failures[0].status.message().find("nic-9 class 0 qp 1/3"), std::string::npos)
      << r.failures[0].status.message();
  ASSERT_EQ(r.applied.routes_size(), 1);
  EXPECT_EQ(r.applied.routes(0).qp_mask(), 0u);  // The unsplit route is applied.
  EXPECT_TRUE(Same(r.applied, Leaf(2))) << r.applied.DebugString();
  EXPECT_EQ(server_.sets().size(), 1u);
}

TEST_F(AdapterDriverTest, TargetRejectionIsADeviceFailureAndKeepsTheLastAppliedState) {
  AdapterSetDriver driver(Config(server_.address(), "sonic"));
  ASSERT_TRUE(driver.Start().ok());
  ApplyResult first = ApplySync(driver, Leaf(3)).result;
  ASSERT_TRUE(first.ok()) << Failures(first);
  EXPECT_EQ(first.applied.generation(), 3u);

  server_.FailNextSets(1, grpc::StatusCode::INVALID_ARGUMENT, "ARS_OBJECT: bad assign_mode");
  v1::DeviceState next = Leaf(4);
  next.mutable_dlb()->set_mode(v1::DLB_MODE_PER_PACKET);
  ApplyResult r = ApplySync(driver, next).result;

  ASSERT_EQ(r.failures.size(), 1u) << Failures(r);
  EXPECT_EQ(r.failures[0].part, "device");
  EXPECT_EQ(r.failures[0].status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.failures[0].status.message(), "ARS_OBJECT: bad assign_mode");
  EXPECT_TRUE(MessageDifferencer::Equals(r.applied, first.applied)) << r.applied.DebugString();
  EXPECT_EQ(server_.sets().size(), 2u);

  // The same state goes through once the target accepts it.
  ApplyResult retry = ApplySync(driver, next).result;
  EXPECT_TRUE(retry.ok()) << Failures(retry);
  EXPECT_EQ(retry.applied.dlb().mode(), v1::DLB_MODE_PER_PACKET);
  EXPECT_EQ(retry.applied.generation(), 4u);
}

TEST_F(AdapterDriverTest, DoneRunsOnTheDriverThreadAlsoWhenNothingIsSent) {
  AdapterSetDriver driver(Config(server_.address(), "sonic"));
  ASSERT_TRUE(driver.Start().ok());
  // Only ALB tables: SONiC cannot express any of it, and nothing was sent
  // before (so nothing is stale): the request is empty.
  v1::DeviceState alb_only;
  alb_only.set_device("leaf-0");
  alb_only.set_generation(1);
  alb_only.add_alb_tables()->set_group("leaf-1");
  Applied none = ApplySync(driver, alb_only);
  EXPECT_NE(none.thread, std::this_thread::get_id());
  EXPECT_EQ(server_.sets().size(), 0u);
  ASSERT_EQ(none.result.failures.size(), 1u) << Failures(none.result);
  EXPECT_EQ(none.result.failures[0].part, "alb_tables");
  EXPECT_EQ(none.result.applied.alb_tables_size(), 0);
  EXPECT_EQ(none.result.applied.generation(), 0u);

  Applied sent = ApplySync(driver, Leaf(2));
  EXPECT_NE(sent.thread, std::this_thread::get_id());
  EXPECT_EQ(server_.sets().size(), 1u);
}

TEST_F(AdapterDriverTest, SonicReadReportsDriftOnlyInWhatTheDeviceCanShow) {
  server_.set_get_response(SonicGet("per_flowlet_quality"));
  AdapterSetDriver driver(Config(server_.address(), "sonic"));
  ASSERT_TRUE(driver.Start().ok());
  ApplyResult r = ApplySync(driver, Leaf(1)).result;
  ASSERT_TRUE(r.ok()) << Failures(r);
  // What the QUEUE binding held before Loom's first write, and the read-back
  // baseline after the Set.
  EXPECT_EQ(server_.gets(), 2);

  // Routes cannot be read back (no color): the last applied state stands.
  auto [s, state] = ReadSync(driver);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(MessageDifferencer::Equals(state, r.applied)) << state.DebugString();

  // Someone switches ARS to per-packet: Read shows it, the rest as applied.
  server_.set_get_response(SonicGet("per_packet_quality"));
  auto [s2, drifted] = ReadSync(driver);
  ASSERT_TRUE(s2.ok()) << s2.message();
  EXPECT_EQ(drifted.dlb().mode(), v1::DLB_MODE_PER_PACKET);
  EXPECT_EQ(drifted.routes_size(), 1);
  EXPECT_TRUE(MessageDifferencer::Equals(drifted.pfc_watchdog(), r.applied.pfc_watchdog()));
}

TEST_F(AdapterDriverTest, OpenConfigReadIsTheLastAppliedStateWithoutAGet) {
  AdapterSetDriver driver(Config(server_.address(), "openconfig"));
  ASSERT_TRUE(driver.Start().ok());
  v1::DeviceState desired = Leaf(1);
  desired.clear_dlb();
  desired.clear_pfc_watchdog();
  ApplyResult r = ApplySync(driver, desired).result;
  ASSERT_TRUE(r.ok()) << Failures(r);
  EXPECT_EQ(server_.sets().at(0).prefix().origin(), "openconfig");
  const int gets = server_.gets();  // the queue bindings' values before Loom's first write
  auto [s, state] = ReadSync(driver);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(MessageDifferencer::Equals(state, r.applied));
  EXPECT_EQ(server_.gets(), gets);
}

TEST_F(AdapterDriverTest, StopCancelsTheSetInFlightAndCompletesQueuedCalls) {
  server_.HoldSets();
  AdapterSetDriver driver(Config(server_.address(), "sonic"));
  ASSERT_TRUE(driver.Start().ok());
  std::promise<ApplyResult> first, second;
  driver.Apply(Leaf(1), [&](ApplyResult r) { first.set_value(std::move(r)); });
  driver.Apply(Leaf(2), [&](ApplyResult r) { second.set_value(std::move(r)); });
  ASSERT_TRUE(server_.WaitForSets(1));
  driver.Stop();
  auto f1 = first.get_future(), f2 = second.get_future();
  ASSERT_EQ(f1.wait_for(kDeadline), std::future_status::ready);
  ASSERT_EQ(f2.wait_for(kDeadline), std::future_status::ready);
  ApplyResult r1 = f1.get(), r2 = f2.get();
  ASSERT_EQ(r1.failures.size(), 1u) << Failures(r1);
  EXPECT_EQ(r1.failures[0].part, "device");
  EXPECT_EQ(r1.failures[0].status.code(), StatusCode::kCancelled);
  ASSERT_EQ(r2.failures.size(), 1u) << Failures(r2);
  EXPECT_EQ(r2.failures[0].status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(server_.sets().size(), 1u);
  server_.Release();
}

TEST(AdapterDriverLoomTest, LoomAdapterProgramsTheTargetAndReadsDriftBack) {
  testing::TestGnmiTarget target;
  ASSERT_TRUE(target.Start({"leaf-0"}));
  AdapterSetDriver driver(Config(target.address(), "loom"));
  ASSERT_TRUE(driver.Start().ok());
  v1::DeviceState desired = Leaf(7);
  desired.clear_pfc_watchdog();  // No path in the loom schema.
  ApplyResult r = ApplySync(driver, desired).result;
  ASSERT_TRUE(r.ok()) << Failures(r);
  EXPECT_EQ(r.applied.generation(), 7u);
  EXPECT_TRUE(Same(target.state("leaf-0"), desired)) << target.state("leaf-0").DebugString();

  auto [s, state] = ReadSync(driver);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(Same(state, desired));

  v1::DeviceState changed = target.state("leaf-0");
  changed.mutable_dlb()->set_mode(v1::DLB_MODE_STATIC);
  target.set_state("leaf-0", changed);
  auto [s2, drifted] = ReadSync(driver);
  ASSERT_TRUE(s2.ok()) << s2.message();
  EXPECT_EQ(drifted.dlb().mode(), v1::DLB_MODE_STATIC);
  EXPECT_EQ(drifted.routes_size(), 1);
}

TEST(AdapterDriverConfigTest, UnreachableTargetIsADeviceFailure) {
  // A port nothing listens on: bind one, then close it.
  FakeGnmiServer gone;
  ASSERT_TRUE(gone.Start());
  std::string address = gone.address();
  gone.Shutdown();
  AdapterSetDriverConfig config = Config(address, "sonic");
  config.rpc_timeout_ms = 2000;
  AdapterSetDriver driver(config);
  ASSERT_TRUE(driver.Start().ok());
  ApplyResult r = ApplySync(driver, Leaf(1)).result;
  ASSERT_EQ(r.failures.size(), 1u) << Failures(r);
  EXPECT_EQ(r.failures[0].part, "device");
  EXPECT_TRUE(r.failures[0].status.code() == StatusCode::kUnavailable ||
              r.failures[0].status.code() == StatusCode::kDeadlineExceeded)
      << Failures(r);
  EXPECT_EQ(r.applied.routes_size(), 0);
  EXPECT_EQ(r.applied.generation(), 0u);
}

TEST(AdapterDriverConfigTest, StartRejectsAnUnknownAdapterAndStoppedDriverAnswersUnavailable) {
  AdapterSetDriver bad(Config("127.0.0.1:1", "eos"));
  Status s = bad.Start();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("leaf-0"), std::string::npos) << s.message();

  AdapterSetDriver driver(Config("127.0.0.1:1", "sonic"));
  ASSERT_TRUE(driver.Start().ok());
  driver.Stop();
  ApplyResult r = ApplySync(driver, Leaf(1)).result;  // Synchronous: not running.
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_EQ(r.failures[0].status.code(), StatusCode::kUnavailable);
}

TEST(StripUnexpressedTest, WholePartsAndUnknownEntriesAreNotClaimed) {
  v1::DeviceState s = Leaf(1);
  s.add_weights()->set_destination("leaf-1");
  std::vector<Unexpressed> u = {
      {"dlb", "inactivity_interval_ns", InvalidArgument("out of range"), false},
      {"weights", "leaf-1", Status(StatusCode::kUnimplemented, "no weights"), false},
      {"routes", "nic-42 class 0", InvalidArgument("no such route?"), false},
      {"thresholds", "Ethernet8 priority 3", Status(StatusCode::kUnimplemented, "xoff"), true}};
  ApplyResult r = StripUnexpressed(s, u, "sonic");
  EXPECT_FALSE(r.applied.has_dlb());
  EXPECT_EQ(r.applied.weights_size(), 0);
  EXPECT_EQ(r.applied.routes_size(), 0);      // Entry matched nothing: the part is not claimed.
  EXPECT_EQ(r.applied.thresholds_size(), 1);  // Partial: kept, not a failure.
  ASSERT_EQ(r.failures.size(), 3u);
  EXPECT_EQ(r.failures[0].status.message(),
            "sonic cannot express dlb \"inactivity_interval_ns\": out of range");
}

}  // namespace
}  // namespace loom::southbound::gnmi
