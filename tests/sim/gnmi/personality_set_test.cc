// gNMI Set on loom-fabric's platform personalities (sim-fabric/personality.h,
// platform_config.h): the SetRequests Loom's real platform adapters produce
// (southbound/gnmi/set_adapter.h, sent by hand and through AdapterSetDriver
// with its read-back) are accepted by the sonic / openconfig /
// openconfig-json personalities, validated against the vendored YANG
// modules, and change the emulated switch; broken payloads are refused with
// the platform's status and libyang's message naming the data path, and
// change nothing (neither the switch nor the datastore).
//
// Real behaviour: personalities started with StartPersonalityTargets on
// 127.0.0.1:0 with a real gRPC client, a real Fabric behind WireConfig (its
// closures run inline under a mutex; the test thread steps the fabric
// between RPCs), the vendored YANG set loaded by libyang.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/json.h"
#include "gnmi/gnmi.grpc.pb.h"
#include "gtest/gtest.h"
#include "sim-fabric/personality.h"
#include "sim-fabric/wire_config.h"
#include "southbound/bgp/prefix_plan.h"
#include "southbound/gnmi/adapter_driver.h"
#include "southbound/gnmi/set_adapter.h"
#include "telemetry/path.h"
#include "tests/sim/gnmi/gnmi_test_util.h"

namespace loom::sim {
namespace {

namespace v1 = loom::v1;
namespace sg = loom::southbound::gnmi;
using testing::IfaceTo;
using testing::OutOctets;
using testing::SmallFabric;

constexpr auto kDeadline = std::chrono::seconds(30);
constexpr uint32_t kColor = 65536;

// One fabric with `kind` personalities on leaf0 (and, for the OpenConfig
// kinds, the JSON-only one on leaf1 too).
class PersonalitySetTest : public ::testing::Test {
 protected:
  void Start(PersonalityKind kind) {
    kind_ = kind;
    f_ = std::make_unique<SmallFabric>(10 * kNsPerUs);
    wire_ = std::make_unique<WireConfig>(f_->fabric.get(), f_->topo,
                                         [this](std::function<void(Fabric&)> fn) {
                                           std::lock_guard<std::recursive_mutex> lock(fab_mu_);
                                           fn(*f_->fabric);
                                         });
    GnmiOptions go;
    go.tick_ns = kNsPerMs;
    go.min_sample_interval_ns = kNsPerMs;
    PersonalitySetOptions pso;
    pso.wire = wire_.get();
    pso.topology = &f_->topo;
    std::vector<PersonalitySpec> specs = {{f_->leaf0, kind}};
    ASSERT_TRUE(StartPersonalityTargets(specs, {}, f_->fabric->Devices(), go, &targets_, pso).ok());
    builder_ = std::make_unique<SnapshotBuilder>(*f_->fabric, go);
    Publish();
    stub_ = gnmi::gNMI::NewStub(grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
    up0_ = IfaceTo(f_->topo, f_->leaf0, "spine0");
    up1_ = IfaceTo(f_->topo, f_->leaf0, "spine1");
    ASSERT_FALSE(up0_.empty());
    ASSERT_FALSE(up1_.empty());
    nic1_prefix_ = loom::southbound::bgp::PrefixPlan(f_->topo).PrefixOf(f_->nic1);
    ASSERT_FALSE(nic1_prefix_.empty());
  }
  void TearDown() override {
    for (auto& t : targets_) t->Stop();
  }
  void Publish() {
    std::lock_guard<std::recursive_mutex> lock(fab_mu_);
    auto snap = builder_->Capture();
    for (auto& t : targets_) t->Publish(snap);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(targets_[0]->port()); }

  grpc::Status Set(const gnmi::SetRequest& req, gnmi::SetResponse* resp = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kDeadline);
    gnmi::SetResponse r;
    grpc::Status s = stub_->Set(&ctx, req, &r);
    if (resp != nullptr) *resp = r;
    return s;
  }
  grpc::Status Get(const gnmi::GetRequest& req, gnmi::GetResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kDeadline);
    return stub_->Get(&ctx, req, resp);
  }

  // leaf0's desired state: everything Loom programs that the platforms can
  // express, plus a route towards host001 over the uplink the flow does NOT
  // use today (so forwarding visibly moves).
  v1::DeviceState Desired(const std::string& spine) const {
    v1::DeviceState s;
    s.set_device(f_->leaf0);
    auto* c = s.add_colors();
    c->set_color(kColor);
    c->add_next_hops(spine);
    auto* r = s.add_routes();
    r->set_destination(f_->nic1);
    r->set_prefix(nic1_prefix_);
    r->set_color(kColor);
    auto* d = s.mutable_dlb();
    d->set_mode(v1::DLB_MODE_FLOWLET);
    d->set_inactivity_interval_ns(300 * kNsPerUs);
    auto* t = s.add_thresholds();
    t->set_priority(3);
    t->set_ecn_kmin_bytes(40000);
    t->set_ecn_kmax_bytes(160000);
    t->set_ecn_pmax_percent(15);
    auto* w = s.mutable_pfc_watchdog();
    w->set_action(v1::PFC_WATCHDOG_ACTION_FORWARD);
    w->set_detection_time_ms(300);
    w->set_restoration_time_ms(500);
    w->set_poll_interval_ms(150);
    return s;
  }
  sg::AdapterContext Context() const {
    sg::AdapterContext ctx;
    ctx.topology = &f_->topo;
    ctx.next_hop_addresses = {{"spine0", "10.1.0.1"}, {"spine1", "10.1.0.5"}};
    return ctx;
  }
  sg::AdapterOutput Encode(const std::string& adapter, const v1::DeviceState& s) const {
    return sg::MakeSetAdapter(adapter)->Encode(s, Context());
  }

  // Bytes leaving leaf0 on each uplink over 5 ms of virtual time.
  void Window(double* on0, double* on1) {
    std::lock_guard<std::recursive_mutex> lock(fab_mu_);
    Fabric& fab = *f_->fabric;
    fab.RunUntil(fab.now() + 2 * kNsPerMs);
    const double a0 = OutOctets(fab, f_->leaf0, up0_), a1 = OutOctets(fab, f_->leaf0, up1_);
    fab.RunUntil(fab.now() + 5 * kNsPerMs);
    *on0 = OutOctets(fab, f_->leaf0, up0_) - a0;
    *on1 = OutOctets(fab, f_->leaf0, up1_) - a1;
  }
  // The spine the flow host000 -> host001 does not use now.
  std::string IdleSpine() {
    double on0 = 0, on1 = 0;
    Window(&on0, &on1);
    EXPECT_GT(on0 + on1, 0);
    return on0 > on1 ? "spine1" : "spine0";
  }
  SwitchConfig Config() {
    std::lock_guard<std::recursive_mutex> lock(fab_mu_);
    return *f_->fabric->GetSwitchConfig(f_->leaf0);
  }
  size_t Routes() {
    std::lock_guard<std::recursive_mutex> lock(fab_mu_);
    return f_->fabric->RouteCount(f_->leaf0);
  }
  bool LinkUp(const std::string& ifc) {
    std::lock_guard<std::recursive_mutex> lock(fab_mu_);
    InterfaceCounters c;
    EXPECT_TRUE(f_->fabric->GetInterfaceCounters(f_->leaf0, ifc, &c).ok());
    return c.oper_up;
  }

  PersonalityKind kind_ = PersonalityKind::kSonic;
  std::recursive_mutex fab_mu_;  // re-entrant: a Set's completion may start the next one
  std::unique_ptr<SmallFabric> f_;
  std::unique_ptr<WireConfig> wire_;
  std::vector<std::unique_ptr<GnmiTarget>> targets_;
  std::unique_ptr<SnapshotBuilder> builder_;
  std::unique_ptr<gnmi::gNMI::Stub> stub_;
  std::string up0_, up1_, nic1_prefix_;
};

// The JSON value of replace/update `i` of `req` (by path text suffix).
gnmi::Update* FindUpdate(gnmi::SetRequest* req, const std::string& suffix, bool replace = true) {
  auto* list = replace ? req->mutable_replace() : req->mutable_update();
  for (auto& u : *list) {
    const std::string text = telemetry::FormatPath(u.path());
    if (text.size() >= suffix.size() &&
        text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return &u;
    }
  }
  ADD_FAILURE() << "no operation ending in " << suffix;
  return nullptr;
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from << " not in " << s;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

gnmi::Path P(const std::string& text) {
  gnmi::Path p;
  EXPECT_TRUE(telemetry::ParsePath(text, &p).ok()) << text;
  return p;
}

// ------------------------------------------------------------------ sonic

TEST_F(PersonalitySetTest, SonicAcceptsTheSonicAdapterAndProgramsTheSwitch) {
  Start(PersonalityKind::kSonic);
  const std::string spine = IdleSpine();
  const sg::AdapterOutput out = Encode("sonic", Desired(spine));
  ASSERT_TRUE(out.FirstError().ok()) << out.FirstError().message();
  gnmi::SetResponse resp;
  grpc::Status st = Set(out.request, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.response_size(),
            out.request.replace_size() + out.request.update_size() + out.request.delete__size());

  // ARS -> DLB flowlet with the idle time; WRED on queue 3 -> ECN of
  // priority 3; PFC_WD -> the watchdog.
  const SwitchConfig cfg = Config();
  EXPECT_EQ(cfg.mode, ForwardingMode::kDlbFlowlet);
  EXPECT_EQ(cfg.dlb.inactivity_ns, 300 * kNsPerUs);
  EXPECT_DOUBLE_EQ(cfg.ecn[3].kmin_bytes, 40000);
  EXPECT_DOUBLE_EQ(cfg.ecn[3].kmax_bytes, 160000);
  EXPECT_DOUBLE_EQ(cfg.ecn[3].pmax, 0.15);
  EXPECT_TRUE(cfg.watchdog.enabled);
  EXPECT_EQ(cfg.watchdog.action, WatchdogAction::kForward);
  EXPECT_EQ(cfg.watchdog.detection_ns, 300 * kNsPerMs);
  EXPECT_EQ(cfg.watchdog.restoration_ns, 500 * kNsPerMs);
  EXPECT_EQ(cfg.watchdog.poll_ns, 150 * kNsPerMs);
  // STATIC_ROUTE with ifname -> a route to host001 over `spine`.
  EXPECT_EQ(Routes(), 1u);
  double on0 = 0, on1 = 0;
  Window(&on0, &on1);
  const double want = spine == "spine0" ? on0 : on1;
  EXPECT_GT(want, 0.95 * (on0 + on1)) << on0 << " vs " << on1;

  // Get of CONFIG_DB answers the rows as written (CONFIG_DB strings).
  gnmi::GetRequest get;
  get.mutable_prefix()->set_origin("sonic-db");
  *get.add_path() = P("/CONFIG_DB/localhost/PFC_WD");
  *get.add_path() = P("/CONFIG_DB/localhost/STATIC_ROUTE");
  get.set_encoding(gnmi::JSON_IETF);
  gnmi::GetResponse gr;
  st = Get(get, &gr);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(gr.notification_size(), 2);
  JsonValue wd;
  std::string err;
  ASSERT_TRUE(ParseJson(gr.notification(0).update(0).val().json_ietf_val(), &wd, &err)) << err;
  const std::string json = gr.notification(0).update(0).val().json_ietf_val();
  EXPECT_NE(json.find("\"GLOBAL\":{\"POLL_INTERVAL\":\"150\"}"), std::string::npos) << json;
  EXPECT_NE(json.find("\"action\":\"forward\""), std::string::npos) << json;
  const std::string routes = gr.notification(1).update(0).val().json_ietf_val();
  EXPECT_NE(routes.find("default|" + nic1_prefix_), std::string::npos) << routes;
}

// AdapterSetDriver as loomd runs it: Apply (encode + Set + read-back
// baseline), then Read sees no drift; the device state it reports matches.
TEST_F(PersonalitySetTest, SonicProgrammedByTheAdapterDriverReadsBackInSync) {
  Start(PersonalityKind::kSonic);
  sg::AdapterSetDriverConfig dc;
  sg::AdapterDeviceConfig dev;
  dev.device = f_->leaf0;
  dev.address = address();
  dev.adapter = "sonic";
  dev.next_hop_addresses = Context().next_hop_addresses;
  dc.devices.push_back(dev);
  dc.topology = std::make_shared<v1::Topology>(f_->topo);
  sg::AdapterSetDriver driver(dc);
  ASSERT_TRUE(driver.Start().ok());
  v1::DeviceState desired = Desired("spine0");
  desired.set_generation(7);
  std::promise<loom::southbound::ApplyResult> applied;
  driver.Apply(desired, [&](loom::southbound::ApplyResult r) { applied.set_value(std::move(r)); });
  loom::southbound::ApplyResult r = applied.get_future().get();
  for (const auto& f : r.failures) ADD_FAILURE() << f.part << ": " << f.status.message();
  EXPECT_EQ(r.applied.generation(), 7u);
  EXPECT_EQ(Config().mode, ForwardingMode::kDlbFlowlet);
  std::promise<std::pair<Status, v1::DeviceState>> read;
  driver.Read(f_->leaf0, [&](Status s, v1::DeviceState d) {
    read.set_value({std::move(s), std::move(d)});
  });
  auto [rs, state] = read.get_future().get();
  ASSERT_TRUE(rs.ok()) << rs.message();
  EXPECT_EQ(state.dlb().mode(), v1::DLB_MODE_FLOWLET);
  EXPECT_EQ(state.pfc_watchdog().action(), v1::PFC_WATCHDOG_ACTION_FORWARD);
  EXPECT_EQ(state.generation(), 7u);
  driver.Stop();
}

// Each broken payload: refused with the status a SONiC target gives and a
// message naming the problem; the switch and CONFIG_DB are unchanged.
TEST_F(PersonalitySetTest, SonicRefusesInvalidPayloadsAndChangesNothing) {
  Start(PersonalityKind::kSonic);
  const sg::AdapterOutput good = Encode("sonic", Desired("spine0"));
  ASSERT_TRUE(Set(good.request).ok());
  const SwitchConfig before = Config();
  ASSERT_EQ(before.mode, ForwardingMode::kDlbFlowlet);
  gnmi::GetRequest get;
  get.mutable_prefix()->set_origin("sonic-db");
  for (const char* t : {"ARS_OBJECT", "WRED_PROFILE", "PFC_WD", "STATIC_ROUTE", "QUEUE"}) {
    *get.add_path() = P(std::string("/CONFIG_DB/localhost/") + t);
  }
  gnmi::GetResponse db_before;
  ASSERT_TRUE(Get(get, &db_before).ok());

  // A change that alone would be accepted (ECN kmin 40000 -> 80000), so a
  // refusal below proves the whole request was dropped.
  v1::DeviceState other = Desired("spine0");
  other.mutable_thresholds(0)->set_ecn_kmin_bytes(80000);
  const gnmi::SetRequest base = Encode("sonic", other).request;

  struct Case {
    std::string name;
    gnmi::SetRequest req;
    grpc::StatusCode code;
    std::vector<std::string> says;
  };
  std::vector<Case> cases;
  {
    Case c{"WRED threshold not a number", base, grpc::StatusCode::INVALID_ARGUMENT, {}};
    gnmi::Update* u = FindUpdate(&c.req, "/WRED_PROFILE/LOOM_ECN_0");
    u->mutable_val()->set_json_ietf_val(
        Replace(u->val().json_ietf_val(), "\"80000\"", "\"eighty-thousand\""));
    c.says = {"eighty-thousand", "WRED_PROFILE_LIST[name='LOOM_ECN_0']/green_min_threshold"};
    cases.push_back(std::move(c));
  }
  {
    Case c{"PFC_WD action outside the enum", base, grpc::StatusCode::INVALID_ARGUMENT, {}};
    gnmi::Update* u = FindUpdate(&c.req, "/PFC_WD/" + up0_);
    u->mutable_val()->set_json_ietf_val(
        Replace(u->val().json_ietf_val(), "\"forward\"", "\"explode\""));
    c.says = {"explode", "PFC_WD_LIST[ifname='" + up0_ + "']/action"};
    cases.push_back(std::move(c));
  }
  {
    Case c{"ARS flowlet_idle_time out of range", base, grpc::StatusCode::INVALID_ARGUMENT, {}};
    gnmi::Update* u = FindUpdate(&c.req, "/ARS_OBJECT/loom");
    u->mutable_val()->set_json_ietf_val(Replace(u->val().json_ietf_val(), "\"300\"", "\"5000\""));
    c.says = {"5000", "ARS_OBJECT_LIST[ars_obj_name='loom']/flowlet_idle_time"};
    cases.push_back(std::move(c));
  }
  {
    Case c{"PFC_WD on a port the switch does not have (leafref)",
           base,
           grpc::StatusCode::INVALID_ARGUMENT,
           {}};
    gnmi::Update* u = c.req.add_replace();
    *u->mutable_path() = P("/CONFIG_DB/localhost/PFC_WD/Ethernet99");
    u->mutable_val()->set_json_ietf_val(
        R"({"action":"drop","detection_time":"200","restoration_time":"200"})");
    c.says = {"Ethernet99", "PFC_WD_LIST[ifname='Ethernet99']"};
    cases.push_back(std::move(c));
  }
  {
    Case c{"QUEUE bound to a WRED profile that does not exist",
           base,
           grpc::StatusCode::INVALID_ARGUMENT,
           {}};
    gnmi::Update* u = c.req.add_update();
    *u->mutable_path() = P("/CONFIG_DB/localhost/QUEUE/" + up0_ + "|4");
    u->mutable_val()->set_json_ietf_val(R"({"wred_profile":"NO_SUCH_PROFILE"})");
    c.says = {"NO_SUCH_PROFILE", "QUEUE_LIST[ifname='" + up0_ + "'][qindex='4']/wred_profile"};
    cases.push_back(std::move(c));
  }
  {
    Case c{
        "unknown table", base, grpc::StatusCode::INVALID_ARGUMENT, {"LOOM_MAGIC", "no YANG model"}};
    gnmi::Update* u = c.req.add_replace();
    *u->mutable_path() = P("/CONFIG_DB/localhost/LOOM_MAGIC/x");
    u->mutable_val()->set_json_ietf_val(R"({"a":"b"})");
    cases.push_back(std::move(c));
  }
  {
    Case c{"unknown field", base, grpc::StatusCode::INVALID_ARGUMENT, {}};
    gnmi::Update* u = FindUpdate(&c.req, "/ARS_OBJECT/loom");
    u->mutable_val()->set_json_ietf_val(
        Replace(u->val().json_ietf_val(), "\"flowlet_idle_time\"", "\"flowlet_idle_timer\""));
    c.says = {"flowlet_idle_timer"};
    cases.push_back(std::move(c));
  }
  {
    // sonic-gnmi server.go: a non-native origin goes to translib, whose
    // writes are off on this target.
    Case c{"wrong origin",
           base,
           grpc::StatusCode::UNIMPLEMENTED,
           {"Translib write is disabled", "openconfig"}};
    c.req.mutable_prefix()->set_origin("openconfig");
    cases.push_back(std::move(c));
  }
  {
    Case c{
        "a database this target does not write", {}, grpc::StatusCode::UNIMPLEMENTED, {"APPL_DB"}};
    c.req.mutable_prefix()->set_origin("sonic-db");
    gnmi::Update* u = c.req.add_update();
    *u->mutable_path() = P("/APPL_DB/localhost/ROUTE_TABLE/x");
    u->mutable_val()->set_json_ietf_val("{}");
    cases.push_back(std::move(c));
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    grpc::Status st = Set(c.req);
    EXPECT_EQ(st.error_code(), c.code) << st.error_message();
    for (const auto& s : c.says) {
      EXPECT_NE(st.error_message().find(s), std::string::npos)
          << "\"" << s << "\" not in: " << st.error_message();
    }
    const SwitchConfig now = Config();
    EXPECT_EQ(now.mode, ForwardingMode::kDlbFlowlet);
    EXPECT_EQ(now.dlb.inactivity_ns, before.dlb.inactivity_ns);
    EXPECT_DOUBLE_EQ(now.ecn[3].kmin_bytes, before.ecn[3].kmin_bytes);
    EXPECT_EQ(now.watchdog.action, before.watchdog.action);
    gnmi::GetResponse db_now;
    ASSERT_TRUE(Get(get, &db_now).ok());
    for (int i = 0; i < db_before.notification_size(); ++i) {
      EXPECT_EQ(db_now.notification(i).update(0).val().json_ietf_val(),
                db_before.notification(i).update(0).val().json_ietf_val());
    }
  }
  // The same change without the broken part is accepted.
  ASSERT_TRUE(Set(base).ok());
  EXPECT_DOUBLE_EQ(Config().ecn[3].kmin_bytes, 80000);
}

// Deleting the rows takes the settings off the switch: ARS rows gone ->
// static hashing; PFC_WD rows gone -> the switch's earlier watchdog; a PORT
// admin down takes the link down.
TEST_F(PersonalitySetTest, SonicDeletesAndPortAdminStatusReachTheSwitch) {
  Start(PersonalityKind::kSonic);
  const bool wd_before = Config().watchdog.enabled;
  v1::DeviceState alert = Desired("spine0");
  alert.mutable_pfc_watchdog()->set_action(v1::PFC_WATCHDOG_ACTION_ALERT);
  ASSERT_TRUE(Set(Encode("sonic", alert).request).ok());
  ASSERT_TRUE(Config().watchdog.enabled);
  EXPECT_EQ(Config().watchdog.action, WatchdogAction::kAlert);
  v1::DeviceState off = Desired("spine0");
  off.mutable_dlb()->set_mode(v1::DLB_MODE_STATIC);  // the adapter deletes the ARS rows
  off.add_disabled_interfaces(up1_);
  gnmi::SetRequest req = Encode("sonic", off).request;
  *req.add_delete_() = P("/CONFIG_DB/localhost/PFC_WD");
  // The adapter re-sends PFC_WD rows: drop them so the delete stands.
  gnmi::SetRequest pruned = req;
  pruned.clear_replace();
  for (const auto& u : req.replace()) {
    if (telemetry::FormatPath(u.path()).find("/PFC_WD/") == std::string::npos) {
      *pruned.add_replace() = u;
    }
  }
  grpc::Status st = Set(pruned);
  ASSERT_TRUE(st.ok()) << st.error_message();
  const SwitchConfig cfg = Config();
  EXPECT_EQ(cfg.mode, ForwardingMode::kStaticHash);
  EXPECT_EQ(cfg.watchdog.enabled, wd_before);
  EXPECT_FALSE(LinkUp(up1_));
  EXPECT_TRUE(LinkUp(up0_));
  EXPECT_EQ(wire_->Applied(f_->leaf0).disabled_interfaces_size(), 1);
}

// Sets arriving together run one at a time, each validated against the
// datastore the previous one committed: all succeed and the switch ends with
// the datastore's values.
TEST_F(PersonalitySetTest, SonicSerializesConcurrentSets) {
  Start(PersonalityKind::kSonic);
  std::vector<std::future<grpc::Status>> done;
  for (int i = 0; i < 8; ++i) {
    v1::DeviceState s = Desired("spine0");
    s.mutable_thresholds(0)->set_ecn_kmin_bytes(10000 * (i + 1));
    gnmi::SetRequest req = Encode("sonic", s).request;
    done.push_back(std::async(std::launch::async, [this, req] { return Set(req); }));
  }
  for (auto& d : done) {
    grpc::Status st = d.get();
    EXPECT_TRUE(st.ok()) << st.error_message();
  }
  gnmi::GetRequest get;
  get.mutable_prefix()->set_origin("sonic-db");
  *get.add_path() = P("/CONFIG_DB/localhost/WRED_PROFILE/LOOM_ECN_0/green_min_threshold");
  get.set_encoding(gnmi::JSON_IETF);
  gnmi::GetResponse gr;
  ASSERT_TRUE(Get(get, &gr).ok());
  JsonValue v;
  std::string err;
  ASSERT_TRUE(ParseJson(gr.notification(0).update(0).val().json_ietf_val(), &v, &err)) << err;
  EXPECT_DOUBLE_EQ(Config().ecn[3].kmin_bytes, std::stod(v.text));
}

// ------------------------------------------------------------------ openconfig

TEST_F(PersonalitySetTest, OpenConfigAcceptsTheOpenConfigAdapterAndProgramsTheSwitch) {
  for (PersonalityKind kind : {PersonalityKind::kOpenConfig, PersonalityKind::kOpenConfigJson}) {
    SCOPED_TRACE(PersonalityName(kind));
    Start(kind);
    const std::string spine = IdleSpine();
    v1::DeviceState want = Desired(spine);
    want.clear_dlb();  // no OpenConfig model
    want.clear_pfc_watchdog();
    auto* w = want.add_weights();  // GLB weights -> wecmp-weight
    w->set_destination(f_->nic1);
    (*w->mutable_weights())[spine] = 3;
    const sg::AdapterOutput out = Encode("openconfig", want);
    ASSERT_TRUE(out.FirstError().ok()) << out.FirstError().message();
    grpc::Status st = Set(out.request);
    ASSERT_TRUE(st.ok()) << st.error_message();
    const SwitchConfig cfg = Config();
    EXPECT_DOUBLE_EQ(cfg.ecn[3].kmin_bytes, 40000);
    EXPECT_DOUBLE_EQ(cfg.ecn[3].kmax_bytes, 160000);
    EXPECT_DOUBLE_EQ(cfg.ecn[3].pmax, 0.15);
    EXPECT_EQ(Routes(), 1u);
    const v1::DeviceState applied = wire_->Applied(f_->leaf0);
    ASSERT_EQ(applied.weights_size(), 1);
    EXPECT_EQ(applied.weights(0).weights().at(spine), 3u);
    double on0 = 0, on1 = 0;
    Window(&on0, &on1);
    const double on_spine = spine == "spine0" ? on0 : on1;
    EXPECT_GT(on_spine, 0.95 * (on0 + on1)) << on0 << " vs " << on1;

    // Get CONFIG answers the static route and the profile, as RFC 7951.
    gnmi::GetRequest get;
    get.set_type(gnmi::GetRequest::CONFIG);
    get.set_encoding(gnmi::JSON_IETF);
    *get.add_path() =
        P("/network-instances/network-instance[name=default]/protocols/"
          "protocol[identifier=STATIC][name=DEFAULT]/static-routes/static[prefix=" +
          nic1_prefix_ + "]");
    *get.add_path() = P("/qos/queue-management-profiles");
    gnmi::GetResponse gr;
    st = Get(get, &gr);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ASSERT_EQ(gr.notification_size(), 2);
    const std::string route = gr.notification(0).update(0).val().json_ietf_val();
    EXPECT_NE(route.find("\"wecmp-weight\":\"3\""), std::string::npos) << route;
    const std::string qos = gr.notification(1).update(0).val().json_ietf_val();
    EXPECT_NE(qos.find("LOOM_ECN_0"), std::string::npos) << qos;
    EXPECT_NE(qos.find("\"max-drop-probability-percent\":15"), std::string::npos) << qos;
    TearDown();
    targets_.clear();
  }
}

TEST_F(PersonalitySetTest, OpenConfigRefusesInvalidPayloadsAndChangesNothing) {
  Start(PersonalityKind::kOpenConfig);
  v1::DeviceState want = Desired("spine0");
  want.clear_dlb();
  want.clear_pfc_watchdog();
  ASSERT_TRUE(Set(Encode("openconfig", want).request).ok());
  const SwitchConfig before = Config();
  gnmi::GetRequest get;
  get.set_type(gnmi::GetRequest::CONFIG);
  *get.add_path() = P("/qos");
  *get.add_path() = P("/network-instances");
  gnmi::GetResponse db_before;
  ASSERT_TRUE(Get(get, &db_before).ok());

  v1::DeviceState other = want;
  other.mutable_thresholds(0)->set_ecn_kmin_bytes(80000);  // alone, this would be accepted
  const gnmi::SetRequest base = Encode("openconfig", other).request;
  struct Case {
    std::string name;
    gnmi::SetRequest req;
    grpc::StatusCode code;
    std::vector<std::string> says;
  };
  std::vector<Case> cases;
  {
    Case c{"drop probability above 100 %", base, grpc::StatusCode::INVALID_ARGUMENT, {}};
    gnmi::Update* u = FindUpdate(&c.req, "/queue-management-profile[name=LOOM_ECN_0]");
    u->mutable_val()->set_json_ietf_val(Replace(u->val().json_ietf_val(),
                                                "\"max-drop-probability-percent\":15",
                                                "\"max-drop-probability-percent\":150"));
    c.says = {"150", "max-drop-probability-percent"};
    cases.push_back(std::move(c));
  }
  {
    Case c{"wecmp-weight not a number", base, grpc::StatusCode::INVALID_ARGUMENT, {}};
    gnmi::Update* u = c.req.add_update();
    *u->mutable_path() =
        P("/network-instances/network-instance[name=default]/protocols/"
          "protocol[identifier=STATIC][name=DEFAULT]/static-routes/static[prefix=" +
          nic1_prefix_ + "]/next-hops/next-hop[index=spine0]/config");
    u->mutable_val()->set_json_ietf_val(R"({"index":"spine0","wecmp-weight":"heavy"})");
    c.says = {"heavy", "wecmp-weight"};
    cases.push_back(std::move(c));
  }
  {
    Case c{"queue bound to a profile that does not exist (leafref)",
           base,
           grpc::StatusCode::INVALID_ARGUMENT,
           {}};
    gnmi::Update* u = c.req.add_update();
    *u->mutable_path() = P("/qos/interfaces/interface[interface-id=" + up0_ +
                           "]/output/queues/queue[name=5]/config");
    u->mutable_val()->set_json_ietf_val(R"({"name":"5","queue-management-profile":"NOPE"})");
    c.says = {"NOPE", "queue-management-profile"};
    cases.push_back(std::move(c));
  }
  {
    Case c{"a path the models do not have", base, grpc::StatusCode::NOT_FOUND, {"turbo"}};
    gnmi::Update* u = c.req.add_update();
    *u->mutable_path() = P("/qos/turbo/config");
    u->mutable_val()->set_json_ietf_val("{}");
    cases.push_back(std::move(c));
  }
  {
    Case c{
        "a model this target does not serve", base, grpc::StatusCode::NOT_FOUND, {"/components"}};
    gnmi::Update* u = c.req.add_update();
    *u->mutable_path() = P("/components/component[name=x]/config");
    u->mutable_val()->set_json_ietf_val(R"({"name":"x"})");
    cases.push_back(std::move(c));
  }
  {
    Case c{"key in the value contradicts the path",
           base,
           grpc::StatusCode::INVALID_ARGUMENT,
           {"contradicts"}};
    gnmi::Update* u = FindUpdate(&c.req, "/queue-management-profile[name=LOOM_ECN_0]");
    u->mutable_val()->set_json_ietf_val(
        Replace(u->val().json_ietf_val(), "{\"name\":\"LOOM_ECN_0\"", "{\"name\":\"OTHER\""));
    cases.push_back(std::move(c));
  }
  {
    Case c{"wrong origin", base, grpc::StatusCode::INVALID_ARGUMENT, {"sonic-db"}};
    c.req.mutable_prefix()->set_origin("sonic-db");
    cases.push_back(std::move(c));
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    grpc::Status st = Set(c.req);
    EXPECT_EQ(st.error_code(), c.code) << st.error_message();
    for (const auto& s : c.says) {
      EXPECT_NE(st.error_message().find(s), std::string::npos)
          << "\"" << s << "\" not in: " << st.error_message();
    }
    EXPECT_DOUBLE_EQ(Config().ecn[3].kmin_bytes, before.ecn[3].kmin_bytes);
    gnmi::GetResponse db_now;
    ASSERT_TRUE(Get(get, &db_now).ok());
    ASSERT_EQ(db_now.notification_size(), db_before.notification_size());
    for (int i = 0; i < db_before.notification_size(); ++i) {
      EXPECT_EQ(db_now.notification(i).update(0).DebugString(),
                db_before.notification(i).update(0).DebugString());
    }
  }
  ASSERT_TRUE(Set(base).ok());
  EXPECT_DOUBLE_EQ(Config().ecn[3].kmin_bytes, 80000);
}

TEST_F(PersonalitySetTest, OpenConfigJsonRefusesJsonValuesAndDisablesInterfaces) {
  Start(PersonalityKind::kOpenConfigJson);
  v1::DeviceState want;
  want.set_device(f_->leaf0);
  want.add_disabled_interfaces(up1_);
  gnmi::SetRequest req = Encode("openconfig", want).request;
  ASSERT_EQ(req.update_size(), 1);
  gnmi::SetRequest as_json = req;
  as_json.mutable_update(0)->mutable_val()->set_json_val(req.update(0).val().json_ietf_val());
  grpc::Status st = Set(as_json);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNIMPLEMENTED) << st.error_message();
  EXPECT_TRUE(LinkUp(up1_));
  st = Set(req);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(LinkUp(up1_));
  // enabled is a boolean: a string is refused.
  gnmi::SetRequest bad = req;
  bad.mutable_update(0)->mutable_val()->set_json_ietf_val(R"({"enabled":"no"})");
  st = Set(bad);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("enabled"), std::string::npos) << st.error_message();
}

}  // namespace
}  // namespace loom::sim
