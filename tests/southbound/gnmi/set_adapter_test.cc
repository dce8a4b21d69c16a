// Platform Set adapters (southbound/gnmi/set_adapter.h): for loom, sonic and
// openconfig, a leaf with colored routes (ECMP over 2 spines), DLB flowlet
// settings, a PFC watchdog and ECN thresholds produces the expected
// SetRequest; the SONiC and OpenConfig payloads of VALIDATED blocks pass
// yanglint against reference/yang (validate.sh), and broken payloads fail it
// (so the check can fail); capabilities refuse what a platform cannot do.
#include "southbound/gnmi/set_adapter.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "southbound/gnmi/gnmi_config.h"

namespace loom::southbound::gnmi {
namespace {

namespace v1 = loom::v1;

v1::Topology Topo() {
  v1::Topology t;
  auto dev = [&t](const char* id, v1::DeviceRole role) {
    auto* d = t.add_devices();
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
    auto* l = t.add_links();
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

v1::DeviceState Leaf() {
  v1::DeviceState s;
  s.set_device("leaf-0");
  s.set_generation(3);
  auto* c = s.add_colors();
  c->set_color(101);
  c->add_next_hops("spine-0");
  c->add_next_hops("spine-1");
  c = s.add_colors();
  c->set_color(102);
  c->add_next_hops("spine-1");
  auto* r = s.add_routes();
  r->set_destination("nic-9");
  r->set_prefix("198.18.0.9/32");
  r->set_color(101);
  r = s.add_routes();
  r->set_destination("nic-10");
  r->set_prefix("198.18.0.10/32");
  r->set_color(102);
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

struct Fixture {
  v1::Topology topo = Topo();
  AdapterContext ctx;
  Fixture() {
    ctx.topology = &topo;
    ctx.next_hop_addresses = {{"spine-0", "10.0.0.1"}, {"spine-1", "10.0.0.3"}};
  }
};

// "path => json" for every replace (and "update path => json").
std::vector<std::string> Ops(const ::gnmi::SetRequest& req) {
  ::gnmi::Path origin;
  origin.set_origin(req.prefix().origin());
  std::vector<std::string> out;
  for (const auto& d : req.delete_()) out.push_back("delete " + PathString(origin, d));
  for (const auto& u : req.replace())
    out.push_back("replace " + PathString(origin, u.path()) + " => " + u.val().json_ietf_val());
  for (const auto& u : req.update())
    out.push_back("update " + PathString(origin, u.path()) + " => " + u.val().json_ietf_val());
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

const Unexpressed* FindUnexpressed(const AdapterOutput& out, const std::string& part) {
  for (const auto& u : out.unexpressed)
    if (u.part == part) return &u;
  return nullptr;
}

// ---- yanglint -------------------------------------------------------------------

std::string YangDir() {
  if (const char* e = std::getenv("LOOM_YANG_DIR")) return e;
  return LOOM_YANG_DIR;
}

bool HaveYanglint() {
  return std::system("command -v yanglint >/dev/null 2>&1") == 0 &&
         std::ifstream(YangDir() + "/validate.sh").good();
}

// Runs reference/yang/validate.sh SET on `json`; true when valid. `*log` gets
// its output (yanglint's error names the data path).
bool Validate(const std::string& set, const std::string& json, const std::string& type,
              std::string* log) {
  char name[] = "/tmp/loom_adapter_XXXXXX.json";
  int fd = mkstemps(name, 5);
  EXPECT_GE(fd, 0);
  FILE* f = fdopen(fd, "w");
  std::fputs(json.c_str(), f);
  std::fclose(f);
  std::string cmd =
      "/bin/bash '" + YangDir() + "/validate.sh' " + set + " " + name + " " + type + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  log->clear();
  char buf[512];
  while (p && std::fgets(buf, sizeof(buf), p)) *log += buf;
  int rc = p ? pclose(p) : -1;
  unlink(name);
  return rc == 0;
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from << " not in " << s;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

// ---- loom -----------------------------------------------------------------------

TEST(SetAdapterTest, LoomWrapsTheCodecAndReportsTheWatchdog) {
  Fixture fx;
  auto a = MakeSetAdapter("loom");
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->capabilities().qp_split_routes);
  EXPECT_FALSE(a->capabilities().pfc_watchdog);
  v1::DeviceState s = Leaf();
  AdapterOutput out = a->Encode(s, fx.ctx);
  google::protobuf::util::MessageDifferencer diff;
  EXPECT_TRUE(diff.Equals(out.request, EncodeSetRequest(nullptr, s, kAllParts, "leaf-0")));
  ASSERT_NE(FindUnexpressed(out, "pfc_watchdog"), nullptr);
  EXPECT_EQ(FindUnexpressed(out, "pfc_watchdog")->status.code(), StatusCode::kUnimplemented);
  for (const auto& b : out.blocks) EXPECT_EQ(b.mark, Mark::kSourced) << b.title;
  // Every operation belongs to one block.
  size_t ops = 0;
  for (const auto& b : out.blocks) ops += b.deletes.size() + b.replaces.size();
  EXPECT_EQ(ops, static_cast<size_t>(out.request.delete__size() + out.request.replace_size()));
  // A loom target applying it runs the desired state (less the watchdog).
  v1::DeviceState applied;
  applied.set_device("leaf-0");
  ASSERT_TRUE(ApplySetRequest(out.request, &applied).ok());
  v1::DeviceState want = Canonical(s);
  want.clear_pfc_watchdog();
  want.set_generation(0);
  applied.set_generation(0);
  EXPECT_TRUE(diff.Equals(applied, want)) << applied.DebugString();
}

// ---- sonic ----------------------------------------------------------------------

TEST(SetAdapterTest, SonicSetRequest) {
  Fixture fx;
  auto a = MakeSetAdapter("sonic");
  AdapterOutput out = a->Encode(Leaf(), fx.ctx);
  EXPECT_TRUE(out.FirstError().ok()) << out.FirstError().message();
  EXPECT_EQ(out.request.prefix().origin(), "sonic-db");
  auto ops = Ops(out.request);
  for (const auto& o : ops) std::cout << o << "\n";
  EXPECT_TRUE(Has(ops,
                  "replace sonic-db:/CONFIG_DB/localhost/STATIC_ROUTE/default|198.18.0.9/32 => "
                  "{\"nexthop\":\"10.0.0.1,10.0.0.3\",\"ifname\":\"Ethernet0,Ethernet4\"}"));
  EXPECT_TRUE(Has(ops,
                  "replace sonic-db:/CONFIG_DB/localhost/STATIC_ROUTE/default|198.18.0.10/32 => "
                  "{\"nexthop\":\"10.0.0.3\",\"ifname\":\"Ethernet4\"}"));
  EXPECT_TRUE(Has(ops,
                  "replace sonic-db:/CONFIG_DB/localhost/ARS_OBJECT/loom => "
                  "{\"assign_mode\":\"per_flowlet_quality\",\"flowlet_idle_time\":\"256\"}"));
  EXPECT_TRUE(Has(ops,
                  "replace sonic-db:/CONFIG_DB/localhost/ARS_INTERFACE/Ethernet0 => "
                  "{\"ars_obj_name\":\"loom\"}"));
  EXPECT_TRUE(Has(ops,
                  "replace sonic-db:/CONFIG_DB/localhost/ARS_INTERFACE/Ethernet4 => "
                  "{\"ars_obj_name\":\"loom\"}"));
  EXPECT_FALSE(Has(ops,
                   "replace sonic-db:/CONFIG_DB/localhost/ARS_INTERFACE/Ethernet8 => "
                   "{\"ars_obj_name\":\"loom\"}"));  // NIC-facing: not a DLB member
  EXPECT_TRUE(Has(ops,
                  "replace sonic-db:/CONFIG_DB/localhost/PFC_WD/GLOBAL => "
                  "{\"POLL_INTERVAL\":\"200\"}"));
  EXPECT_TRUE(
      Has(ops,
          "replace sonic-db:/CONFIG_DB/localhost/PFC_WD/Ethernet8 => "
          "{\"action\":\"drop\",\"detection_time\":\"400\",\"restoration_time\":\"2000\"}"));
  EXPECT_TRUE(Has(ops,
                  "replace sonic-db:/CONFIG_DB/localhost/WRED_PROFILE/LOOM_ECN_0 => "
                  "{\"ecn\":\"ecn_green\",\"wred_green_enable\":\"true\",\"green_min_threshold\":"
                  "\"100000\",\"green_max_threshold\":\"400000\",\"green_drop_probability\":"
                  "\"20\"}"));
  EXPECT_TRUE(Has(ops,
                  "update sonic-db:/CONFIG_DB/localhost/QUEUE/Ethernet8|3 => "
                  "{\"wred_profile\":\"LOOM_ECN_0\"}"));
  // Marks: table rows with a YANG module VALIDATED, the QUEUE binding UNVERIFIED.
  for (const auto& b : out.blocks) {
    if (b.title.rfind("QUEUE|", 0) == 0) {
      EXPECT_EQ(b.mark, Mark::kUnverified);
    } else {
      EXPECT_EQ(b.mark, Mark::kValidated) << b.title;
      EXPECT_FALSE(b.yang.empty()) << b.title;
    }
  }
  std::string preview = FormatPreview(*a, out);
  EXPECT_NE(preview.find("[VALIDATED] routes: STATIC_ROUTE|default|198.18.0.9/32"),
            std::string::npos)
      << preview;
  EXPECT_NE(preview.find("[UNVERIFIED] thresholds: QUEUE|Ethernet8|3"), std::string::npos);
}

TEST(SetAdapterTest, SonicPayloadPassesYanglintAndBrokenPayloadsFail) {
  if (!HaveYanglint()) GTEST_SKIP() << "yanglint or " << YangDir() << "/validate.sh missing";
  Fixture fx;
  AdapterOutput out = MakeSetAdapter("sonic")->Encode(Leaf(), fx.ctx);
  std::string doc = YangDocument(out), log;
  EXPECT_TRUE(Validate("sonic", doc, "config", &log)) << log << "\n" << doc;
  // The check can fail: a flowlet idle time outside 2..2047 us ...
  EXPECT_FALSE(Validate("sonic",
                        Replace(doc, "\"flowlet_idle_time\":256", "\"flowlet_idle_time\":5000"),
                        "config", &log));
  EXPECT_NE(log.find("flowlet_idle_time"), std::string::npos) << log;
  // ... a PFC watchdog detection time out of range, an unknown ECN mode.
  EXPECT_FALSE(Validate("sonic", Replace(doc, "\"detection_time\":400", "\"detection_time\":50"),
                        "config", &log));
  EXPECT_FALSE(Validate("sonic", Replace(doc, "\"ecn_green\"", "\"ecn_blue\""), "config", &log));
  // CONFIG_DB strings are not RFC 7951 numbers: the wire form does not pass as is.
  EXPECT_FALSE(Validate("sonic",
                        Replace(doc, "\"flowlet_idle_time\":256", "\"flowlet_idle_time\":\"256\""),
                        "config", &log));
}

TEST(SetAdapterTest, SonicRefusesWhatItCannotExpress) {
  Fixture fx;
  auto a = MakeSetAdapter("sonic");
  EXPECT_FALSE(a->capabilities().qp_split_routes);
  EXPECT_FALSE(a->capabilities().glb_weights);
  EXPECT_TRUE(a->capabilities().pfc_watchdog);
  v1::DeviceState s = Leaf();
  auto* r = s.add_routes();  // QP split
  r->set_destination("nic-9");
  r->set_prefix("198.18.0.9/32");
  r->set_traffic_class(3);
  r->set_qp_mask(3);
  r->set_qp_value(1);
  r->set_color(102);
  s.mutable_dlb()->set_inactivity_interval_ns(5'000'000);  // 5 ms: above 2047 us
  auto* w = s.add_weights();
  w->set_destination("leaf-1");
  (*w->mutable_weights())["spine-0"] = 3;
  s.add_alb_tables()->set_group("leaf-1");
  AdapterOutput out = a->Encode(s, fx.ctx);
  const Unexpressed* qp = nullptr;
  for (const auto& u : out.unexpressed)
    if (u.part == "routes" && u.entry.find("qp 1/3") != std::string::npos) qp = &u;
  ASSERT_NE(qp, nullptr);
  EXPECT_FALSE(qp->partial);
  EXPECT_EQ(qp->status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(qp->status.message().find("split by destination QP"), std::string::npos);
  EXPECT_NE(qp->status.message().find("nic-9 qp 1/3"), std::string::npos);
  // The unsplit route of the same prefix still goes out.
  EXPECT_TRUE(Has(Ops(out.request),
                  "replace sonic-db:/CONFIG_DB/localhost/STATIC_ROUTE/default|198.18.0.9/32 => "
                  "{\"nexthop\":\"10.0.0.1,10.0.0.3\",\"ifname\":\"Ethernet0,Ethernet4\"}"));
  const Unexpressed* dlb = FindUnexpressed(out, "dlb");
  ASSERT_NE(dlb, nullptr);
  EXPECT_NE(dlb->status.message().find("2..2047 us"), std::string::npos);
  for (const auto& b : out.blocks) EXPECT_NE(b.part, "dlb") << b.title;  // no half DLB
  ASSERT_NE(FindUnexpressed(out, "weights"), nullptr);
  ASSERT_NE(FindUnexpressed(out, "alb_tables"), nullptr);
  EXPECT_FALSE(out.FirstError().ok());
  std::string preview = FormatPreview(*a, out);
  EXPECT_NE(preview.find("not expressed on sonic"), std::string::npos);
}

TEST(SetAdapterTest, SonicRouteWithoutAddressIsRefusedNotDropped) {
  Fixture fx;
  fx.ctx.next_hop_addresses.erase("spine-1");
  AdapterOutput out = MakeSetAdapter("sonic")->Encode(Leaf(), fx.ctx);
  int refused = 0;
  for (const auto& u : out.unexpressed)
    if (u.part == "routes" && u.status.message().find("spine-1") != std::string::npos) ++refused;
  EXPECT_EQ(refused, 2);
}

TEST(SetAdapterTest, SonicReadBackDlbAndWatchdog) {
  Fixture fx;
  auto a = MakeSetAdapter("sonic");
  ::gnmi::GetResponse resp;
  auto* n = resp.add_notification();
  n->mutable_prefix()->set_origin("sonic-db");
  auto add = [n](const char* table, const char* json) {
    auto* u = n->add_update();
    for (const char* e : {"CONFIG_DB", "localhost", table})
      u->mutable_path()->add_elem()->set_name(e);
    u->mutable_val()->set_json_ietf_val(json);
  };
  add("ARS_OBJECT",
      R"({"loom": {"assign_mode": "per_flowlet_quality", "flowlet_idle_time": "256"}})");
  add("PFC_WD", R"({"GLOBAL": {"POLL_INTERVAL": "200"},
                    "Ethernet8": {"action": "drop", "detection_time": "400", "restoration_time": "2000"}})");
  v1::DeviceState got;
  got.set_device("leaf-0");
  ASSERT_TRUE(a->ReadBack(resp, fx.ctx, &got).ok());
  EXPECT_EQ(got.dlb().mode(), v1::DLB_MODE_FLOWLET);
  EXPECT_EQ(got.dlb().inactivity_interval_ns(), 256000u);
  google::protobuf::util::MessageDifferencer diff;
  EXPECT_TRUE(diff.Equals(got.pfc_watchdog(), Leaf().pfc_watchdog())) << got.DebugString();
}

// ---- openconfig -----------------------------------------------------------------

TEST(SetAdapterTest, OpenConfigSetRequest) {
  Fixture fx;
  auto a = MakeSetAdapter("openconfig");
  v1::DeviceState s = Leaf();
  auto* w = s.add_weights();  // GLB weights of nic-9's egress leaf
  w->set_destination("leaf-1");
  (*w->mutable_weights())["spine-0"] = 3;
  (*w->mutable_weights())["spine-1"] = 1;
  AdapterOutput out = a->Encode(s, fx.ctx);
  auto ops = Ops(out.request);
  for (const auto& o : ops) std::cout << o << "\n";
  const std::string statics =
      "replace openconfig:/network-instances/network-instance[name=default]/protocols/"
      "protocol[identifier=STATIC][name=DEFAULT]/static-routes/";
  EXPECT_TRUE(Has(ops, statics +
                           "static[prefix=198.18.0.9/32] => "
                           "{\"prefix\":\"198.18.0.9/32\",\"config\":{\"prefix\":\"198.18.0.9/"
                           "32\"},\"next-hops\":{\"next-hop\":[{\"index\":\"spine-0\",\"config\":"
                           "{\"index\":\"spine-0\",\"next-hop\":\"10.0.0.1\",\"wecmp-weight\":"
                           "\"3\"}},{\"index\":\"spine-1\",\"config\":{\"index\":\"spine-1\","
                           "\"next-hop\":\"10.0.0.3\",\"wecmp-weight\":\"1\"}}]}}"));
  EXPECT_TRUE(Has(ops, statics +
                           "static[prefix=198.18.0.10/32] => "
                           "{\"prefix\":\"198.18.0.10/32\",\"config\":{\"prefix\":\"198.18.0.10/"
                           "32\"},\"next-hops\":{\"next-hop\":[{\"index\":\"spine-1\",\"config\":"
                           "{\"index\":\"spine-1\",\"next-hop\":\"10.0.0.3\"}}]}}"));
  EXPECT_TRUE(Has(ops,
                  "update openconfig:/qos/interfaces/interface[interface-id=Ethernet8]/output/"
                  "queues/queue[name=3]/config => "
                  "{\"name\":\"3\",\"queue-management-profile\":\"LOOM_ECN_0\"}"));
  EXPECT_EQ(FindUnexpressed(out, "weights"), nullptr);
  for (const auto& b : out.blocks)
    EXPECT_EQ(b.mark, b.part == "routes" ? Mark::kSourced : Mark::kValidated) << b.title;
  ASSERT_NE(FindUnexpressed(out, "dlb"), nullptr);
  EXPECT_EQ(FindUnexpressed(out, "dlb")->status.code(), StatusCode::kUnimplemented);
  ASSERT_NE(FindUnexpressed(out, "pfc_watchdog"), nullptr);
  EXPECT_FALSE(a->capabilities().dlb_mode);
  EXPECT_FALSE(a->capabilities().alb_tables);
  EXPECT_FALSE(a->capabilities().pfc_watchdog);
}

TEST(SetAdapterTest, StaleDeletesRemoveLoomsRowsAndItsFieldsOnly) {
  Fixture fx;
  auto a = MakeSetAdapter("openconfig");
  AdapterOutput before = a->Encode(Leaf(), fx.ctx);
  v1::DeviceState s = Leaf();
  s.clear_thresholds();
  s.mutable_routes()->RemoveLast();
  AdapterOutput after = a->Encode(s, fx.ctx);
  ASSERT_EQ(after.request.delete__size(), 0);
  int added = AddStaleDeletes(before.request, &after.request);
  std::set<std::string> dels;
  for (const auto& p : after.request.delete_()) dels.insert(PathString(after.request.prefix(), p));
  for (const auto& d : dels) std::cout << "delete " << d << "\n";
  EXPECT_EQ(added, static_cast<int>(dels.size()));
  const std::string statics =
      "openconfig:/network-instances/network-instance[name=default]/protocols/"
      "protocol[identifier=STATIC][name=DEFAULT]/static-routes/";
  EXPECT_TRUE(dels.count(statics + "static[prefix=198.18.0.10/32]"));
  EXPECT_FALSE(dels.count(statics + "static[prefix=198.18.0.9/32]"));
  const std::string queue =
      "openconfig:/qos/interfaces/interface[interface-id=Ethernet8]/output/queues/queue[name=3]/"
      "config/";
  EXPECT_TRUE(dels.count(queue + "queue-management-profile"));
  EXPECT_FALSE(dels.count(queue + "name")) << "a list key mirror is not Loom's to delete";
  bool profile = false;
  for (const auto& d : dels)
    profile |= d.find("queue-management-profile[name=LOOM_ECN_0]") != std::string::npos;
  EXPECT_TRUE(profile);
  // Nothing stale between two encodes of the same state.
  AdapterOutput again = a->Encode(Leaf(), fx.ctx);
  EXPECT_EQ(AddStaleDeletes(before.request, &again.request), 0);
}

TEST(SetAdapterTest, OpenConfigPayloadPassesYanglintAndBrokenPayloadsFail) {
  if (!HaveYanglint()) GTEST_SKIP() << "yanglint or " << YangDir() << "/validate.sh missing";
  Fixture fx;
  AdapterOutput out = MakeSetAdapter("openconfig")->Encode(Leaf(), fx.ctx);
  std::string doc = YangDocument(out), log;
  ASSERT_NE(doc, "{}");
  EXPECT_TRUE(Validate("openconfig", doc, "config", &log)) << log << "\n" << doc;
  EXPECT_FALSE(Validate(
      "openconfig",
      Replace(doc, "\"max-drop-probability-percent\":20", "\"max-drop-probability-percent\":150"),
      "config", &log));
  EXPECT_FALSE(Validate("openconfig", Replace(doc, "\"enable-ecn\"", "\"enable-ecn-typo\""),
                        "config", &log));
  // The queue's profile must exist (leafref).
  EXPECT_FALSE(Validate("openconfig",
                        Replace(doc, "\"queue-management-profile\":\"LOOM_ECN_0\"",
                                "\"queue-management-profile\":\"NOPE\""),
                        "config", &log));
}

TEST(SetAdapterTest, OpenConfigRefusesQpSplitRoutes) {
  Fixture fx;
  auto a = MakeSetAdapter("openconfig");
  EXPECT_FALSE(a->capabilities().qp_split_routes);
  v1::DeviceState s = Leaf();
  auto* r = s.add_routes();
  r->set_destination("nic-9");
  r->set_prefix("198.18.0.9/32");
  r->set_qp_mask(1);
  r->set_qp_value(1);
  r->set_color(102);
  AdapterOutput out = a->Encode(s, fx.ctx);
  bool found = false;
  for (const auto& u : out.unexpressed)
    if (u.part == "routes" && u.status.message().find("nic-9 qp 1/1") != std::string::npos &&
        u.status.message().find("openconfig") != std::string::npos)
      found = true;
  EXPECT_TRUE(found) << FormatPreview(*a, out);
}

TEST(SetAdapterTest, UnknownAdapterName) {
  EXPECT_EQ(MakeSetAdapter("render-only"), nullptr);
  EXPECT_EQ(MakeSetAdapter("eos"), nullptr);
}

}  // namespace
}  // namespace loom::southbound::gnmi
