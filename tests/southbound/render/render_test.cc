// Renderer golden-file tests. Topology:
//
//        spine-0 (AS 65100)        spine-1 (AS 65101)
//        Eth1/1  Eth1/2            Eth1/1  Eth1/2
//          |        \              /         |
//          |         \____   ____/           |
//          |              \ /                |
//       Eth1/31  Eth1/32   X    Eth1/31  Eth1/32
//        leaf-0 (AS 65001)       leaf-1 (AS 65002)
//        Eth1/1                  Eth1/1
//          |                       |
//        nic-0                   nic-1
//
// With LOOM_UPDATE_GOLDEN=1 the tests rewrite the golden files instead of
// comparing.
#include "southbound/render/render.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

namespace loom::southbound::render {
namespace {

namespace v1 = loom::v1;

v1::Topology Topo() {
  v1::Topology t;
  t.set_name("render-test");
  auto dev = [&](const char* id, v1::DeviceRole role, uint32_t asn, const char* rid) {
    auto* d = t.add_devices();
    d->set_id(id);
    d->set_role(role);
    d->set_asn(asn);
    d->set_router_id(rid);
  };
  dev("leaf-0", v1::DEVICE_ROLE_LEAF, 65001, "10.0.0.1");
  dev("leaf-1", v1::DEVICE_ROLE_LEAF, 65002, "10.0.0.2");
  dev("spine-0", v1::DEVICE_ROLE_SPINE, 65100, "10.0.1.0");
  dev("spine-1", v1::DEVICE_ROLE_SPINE, 65101, "10.0.1.1");
  dev("nic-0", v1::DEVICE_ROLE_NIC, 0, "");
  dev("nic-1", v1::DEVICE_ROLE_NIC, 0, "");
  auto link = [&](const char* a, const char* ai, const char* b, const char* bi) {
    auto* l = t.add_links();
    l->set_id(std::string(a) + ":" + ai + "--" + b + ":" + bi);
    l->mutable_a()->set_device(a);
    l->mutable_a()->set_interface(ai);
    l->mutable_b()->set_device(b);
    l->mutable_b()->set_interface(bi);
    l->set_capacity_bps(400000000000);
  };
  link("nic-0", "eth0", "leaf-0", "Ethernet1/1");
  link("nic-1", "eth0", "leaf-1", "Ethernet1/1");
  link("leaf-0", "Ethernet1/31", "spine-0", "Ethernet1/1");
  link("leaf-0", "Ethernet1/32", "spine-1", "Ethernet1/1");
  link("leaf-1", "Ethernet1/31", "spine-0", "Ethernet1/2");
  link("leaf-1", "Ethernet1/32", "spine-1", "Ethernet1/2");
  return t;
}

v1::QueueThresholds Thresholds(const char* ifname, uint32_t prio) {
  v1::QueueThresholds q;
  q.set_interface(ifname);
  q.set_priority(prio);
  q.set_ecn_kmin_bytes(100000);
  q.set_ecn_kmax_bytes(400000);
  q.set_ecn_pmax_percent(20);
  q.set_pfc_xoff_bytes(600000);
  q.set_pfc_xon_bytes(500000);
  return q;
}

// A leaf with colors, colored routes, GLB weights and flowlet DLB.
v1::DeviceState LeafColors() {
  v1::DeviceState s;
  s.set_device("leaf-0");
  s.set_generation(12);
  auto* c = s.add_colors();
  c->set_color(101);
  c->add_next_hops("spine-0");
  c = s.add_colors();
  c->set_color(102);
  c->add_next_hops("spine-1");
  auto* r = s.add_routes();
  r->set_destination("nic-1");
  r->set_prefix("198.18.1.1/32");
  r->set_color(101);
  r->set_backup_color(102);
  r->set_job_id("job-a");
  r->set_traffic_class(3);
  auto* w = s.add_weights();
  w->set_destination("leaf-1");
  (*w->mutable_weights())["spine-0"] = 3;
  (*w->mutable_weights())["spine-1"] = 1;
  auto* d = s.mutable_dlb();
  d->set_mode(v1::DLB_MODE_FLOWLET);
  d->set_inactivity_interval_ns(256000);
  d->set_load_weight_percent(50);
  for (uint32_t v : {10, 20, 30, 40, 50, 60, 70}) d->add_load_thresholds_percent(v);
  *s.add_thresholds() = Thresholds("", 3);
  return s;
}

// A leaf spraying RoCE class 3 per packet, with an ALB bucket table.
v1::DeviceState LeafSpray() {
  v1::DeviceState s;
  s.set_device("leaf-1");
  s.set_generation(4);
  s.mutable_dlb()->set_mode(v1::DLB_MODE_PER_PACKET);
  auto* sp = s.add_spray_rules();
  sp->set_traffic_class(3);
  sp->set_qp_first(100);
  sp->set_qp_last(200);
  auto* a = s.add_alb_tables();
  a->set_group("leaf-0");
  for (int i = 0; i < 8; ++i) a->add_buckets(i % 3 == 0 ? "spine-1" : "spine-0");
  *s.add_thresholds() = Thresholds("Ethernet1/31", 3);
  return s;
}

// A spine: flowlet DLB and thresholds on every port.
v1::DeviceState Spine() {
  v1::DeviceState s;
  s.set_device("spine-0");
  s.set_generation(3);
  s.mutable_dlb()->set_mode(v1::DLB_MODE_FLOWLET);
  s.mutable_dlb()->set_inactivity_interval_ns(512000);
  *s.add_thresholds() = Thresholds("", 3);
  auto t4 = Thresholds("", 4);
  t4.set_pfc_xoff_bytes(0);
  t4.set_pfc_xon_bytes(0);
  *s.add_thresholds() = t4;
  return s;
}

std::string GoldenPath(const std::string& name, Vendor v) {
  std::string ext = v == Vendor::kSonic ? ".sonic.json" : std::string(".") + VendorName(v);
  return std::string(LOOM_RENDER_GOLDEN_DIR) + "/" + name + ext;
}

void CheckGolden(const std::string& name, Vendor v, const std::string& text) {
  const std::string path = GoldenPath(name, v);
  const char* update = std::getenv("LOOM_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << text;
    return;
  }
  std::ifstream f(path, std::ios::binary);
  ASSERT_TRUE(f.good()) << path << " missing; run with LOOM_UPDATE_GOLDEN=1";
  std::stringstream want;
  want << f.rdbuf();
  EXPECT_EQ(text, want.str()) << path << " differs; run with LOOM_UPDATE_GOLDEN=1 to accept";
}

struct Case {
  const char* name;
  v1::DeviceState (*state)();
};

class Golden : public ::testing::TestWithParam<std::tuple<Case, Vendor>> {};

TEST_P(Golden, MatchesFile) {
  auto [c, v] = GetParam();
  std::string text = Render(c.state(), Topo(), v);
  CheckGolden(c.name, v, text);
  if (v == Vendor::kSonic) {
    google::protobuf::Struct parsed;
    auto st = google::protobuf::util::JsonStringToMessage(text, &parsed);
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(parsed.fields().count("LOOM_META"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Render, Golden,
    ::testing::Combine(::testing::Values(Case{"leaf_colors", &LeafColors},
                                         Case{"leaf_spray", &LeafSpray}, Case{"spine", &Spine}),
                       ::testing::Values(Vendor::kJunos, Vendor::kNxos, Vendor::kSonic)),
    [](const auto& info) {
      return std::string(std::get<0>(info.param).name) + "_" + VendorName(std::get<1>(info.param));
    });

TEST(Render, JunosUsesTheDocumentedStatements) {
  std::string j = Render(LeafColors(), Topo(), Vendor::kJunos);
  EXPECT_NE(j.find("set forwarding-options enhanced-hash-key ecmp-dlb flowlet "
                   "inactivity-interval 256"),
            std::string::npos);
  EXPECT_NE(j.find("set protocols bgp group loom-color-101 fabric-color 101"), std::string::npos);
  EXPECT_NE(j.find("set protocols bgp fabric-advertise route 198.18.1.1/32 color 101 "
                   "backup-color 102"),
            std::string::npos);
  EXPECT_NE(j.find("members bandwidth:65001:3000000000"), std::string::npos);
  std::string p = Render(LeafSpray(), Topo(), Vendor::kJunos);
  EXPECT_NE(p.find("ecmp-dlb per-packet"), std::string::npos);
}

TEST(Render, NxosUsesTheDocumentedStatements) {
  std::string n = Render(LeafColors(), Topo(), Vendor::kNxos);
  EXPECT_NE(n.find("hardware profile dlb\n  dlb-interface Ethernet1/31\n  dlb-interface "
                   "Ethernet1/32\n  mode flowlet\n  flowlet-aging 256\n"),
            std::string::npos)
      << n;
  EXPECT_EQ(n.find("dlb-interface Ethernet1/1\n"), std::string::npos);  // Not the NIC port.
  EXPECT_NE(Render(LeafSpray(), Topo(), Vendor::kNxos).find("  mode per-packet\n"),
            std::string::npos);
}

// LeafColors plus nic-1's class 5 split by destination QP (mask 1).
v1::DeviceState LeafSplit() {
  v1::DeviceState s = LeafColors();
  for (uint32_t v : {1u, 0u}) {
    auto* r = s.add_routes();
    r->set_destination("nic-1");
    r->set_prefix("198.18.1.1/32");
    r->set_traffic_class(5);
    r->set_job_id("job-b");
    r->set_qp_mask(1);
    r->set_qp_value(v);
    r->set_color(v ? 102 : 101);
    r->set_backup_color(v ? 101 : 102);
  }
  return s;
}

TEST(Render, QpSplitRoutesRenderDistinctly) {
  const std::string j = Render(LeafSplit(), Topo(), Vendor::kJunos);
  // The unsplit route as before; each part a comment with its dest-qp match.
  EXPECT_NE(j.find("set protocols bgp fabric-advertise route 198.18.1.1/32 color 101 "
                   "backup-color 102  # nic-1 tc 3 job job-a\n"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("# fabric-advertise route 198.18.1.1/32 dest-qp 0/1 color 101 backup-color "
                   "102  # nic-1 tc 5 qp 0/1 job job-b: split by destination QP, not expressible "
                   "in BGP-DPF (one color per prefix); programmed over gNMI\n"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("# fabric-advertise route 198.18.1.1/32 dest-qp 1/1 color 102 backup-color 101"),
            std::string::npos)
      << j;
  EXPECT_LT(j.find("dest-qp 0/1"), j.find("dest-qp 1/1"));
  EXPECT_EQ(j.find("set protocols bgp fabric-advertise route 198.18.1.1/32 color 102"),
            std::string::npos);
  // Unsplit output unchanged.
  EXPECT_EQ(Render(LeafColors(), Topo(), Vendor::kJunos).find("dest-qp"), std::string::npos);

  const std::string n = Render(LeafSplit(), Topo(), Vendor::kNxos);
  EXPECT_NE(n.find("    network 198.18.1.1/32 route-map loom-color-101\n"), std::string::npos) << n;
  EXPECT_NE(n.find("    ! network 198.18.1.1/32 dest-qp 1/1 route-map loom-color-102 backup color "
                   "101: nic-1 tc 5 split by destination QP, no BGP equivalent (one color per "
                   "prefix); programmed over gNMI\n"),
            std::string::npos)
      << n;
  EXPECT_NE(n.find("    ! network 198.18.1.1/32 dest-qp 0/1 route-map loom-color-101"),
            std::string::npos);
  EXPECT_EQ(n.find("    network 198.18.1.1/32 route-map loom-color-102\n"), std::string::npos);

  const std::string j2 = Render(LeafSplit(), Topo(), Vendor::kSonic);
  google::protobuf::Struct db;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(j2, &db).ok()) << j2;
  const auto& routes = db.fields().at("LOOM_COLORED_ROUTE").struct_value().fields();
  ASSERT_EQ(routes.size(), 3u) << j2;
  auto field = [&](const std::string& key, const std::string& f) {
    const auto& row = routes.at(key).struct_value().fields();
    auto it = row.find(f);
    return it == row.end() ? std::string("<none>") : it->second.string_value();
  };
  EXPECT_EQ(field("nic-1|3", "color"), "101");
  EXPECT_EQ(field("nic-1|3", "qp_mask"), "<none>");
  EXPECT_EQ(field("nic-1|5|0/1", "color"), "101");
  EXPECT_EQ(field("nic-1|5|0/1", "qp_value"), "0");
  EXPECT_EQ(field("nic-1|5|1/1", "color"), "102");
  EXPECT_EQ(field("nic-1|5|1/1", "backup_color"), "101");
  EXPECT_EQ(field("nic-1|5|1/1", "qp_mask"), "1");
  EXPECT_EQ(field("nic-1|5|1/1", "qp_value"), "1");

  // Deterministic whatever the order of the parts.
  v1::DeviceState shuffled = LeafSplit();
  std::reverse(shuffled.mutable_routes()->begin(), shuffled.mutable_routes()->end());
  for (Vendor v : {Vendor::kJunos, Vendor::kNxos, Vendor::kSonic}) {
    EXPECT_EQ(Render(LeafSplit(), Topo(), v), Render(shuffled, Topo(), v)) << VendorName(v);
  }
}

TEST(Render, OutputIsDeterministicWhateverTheInputOrder) {
  v1::DeviceState s = LeafColors();
  auto* extra = s.add_weights();
  extra->set_destination("leaf-0");
  (*extra->mutable_weights())["spine-1"] = 2;
  v1::DeviceState shuffled = s;
  std::reverse(shuffled.mutable_colors()->begin(), shuffled.mutable_colors()->end());
  std::reverse(shuffled.mutable_weights()->begin(), shuffled.mutable_weights()->end());
  v1::Topology topo = Topo(), topo2 = Topo();
  std::reverse(topo2.mutable_links()->begin(), topo2.mutable_links()->end());
  for (Vendor v : {Vendor::kJunos, Vendor::kNxos, Vendor::kSonic}) {
    EXPECT_EQ(Render(s, topo, v), Render(shuffled, topo2, v)) << VendorName(v);
  }
}

TEST(Render, UnknownDeviceAndEmptyStateDoNotCrash) {
  v1::DeviceState s = LeafColors();
  s.set_device("nowhere");
  for (Vendor v : {Vendor::kJunos, Vendor::kNxos, Vendor::kSonic}) {
    std::string text = Render(s, Topo(), v);
    EXPECT_FALSE(text.empty());
    EXPECT_FALSE(Render(v1::DeviceState(), v1::Topology(), v).empty());
  }
  google::protobuf::Struct parsed;
  EXPECT_TRUE(
      google::protobuf::util::JsonStringToMessage(Render(s, Topo(), Vendor::kSonic), &parsed).ok());
}

TEST(Render, VendorNamesParse) {
  Vendor v;
  ASSERT_TRUE(ParseVendor("nxos", &v));
  EXPECT_EQ(v, Vendor::kNxos);
  EXPECT_FALSE(ParseVendor("eos", &v));
}

}  // namespace
}  // namespace loom::southbound::render
