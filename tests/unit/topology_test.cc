// Topology files: parsing, one test per validation rule, generator shapes.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "api/proto_util/fingerprint.h"
#include "api/topology/topology_generate.h"
#include "api/topology/topology_index.h"
#include "api/topology/topology_io.h"

namespace loom::topology {
namespace {

// A minimal valid fabric:
//
//        spine0
//        /    \     (l0, l1)
//    leaf0    leaf1
//      |        |
//   h0-nic0  h1-nic0
constexpr char kValid[] = R"({
  "name": "tiny",
  "devices": [
    {"id": "spine0", "role": "DEVICE_ROLE_SPINE", "asn": 65000},
    {"id": "leaf0", "role": "DEVICE_ROLE_LEAF", "asn": 65001},
    {"id": "leaf1", "role": "DEVICE_ROLE_LEAF", "asn": 65002},
    {"id": "h0", "role": "DEVICE_ROLE_HOST"},
    {"id": "h1", "role": "DEVICE_ROLE_HOST"},
    {"id": "h0-nic0", "role": "DEVICE_ROLE_NIC", "host": "h0"},
    {"id": "h1-nic0", "role": "DEVICE_ROLE_NIC", "host": "h1"}
  ],
  "links": [
    {"id": "l0", "a": {"device": "leaf0", "interface": "e1"},
     "b": {"device": "spine0", "interface": "e1"}, "capacityBps": "400000000000"},
    {"id": "l1", "a": {"device": "leaf1", "interface": "e1"},
     "b": {"device": "spine0", "interface": "e2"}, "capacityBps": "400000000000"},
    {"id": "n0", "a": {"device": "h0-nic0", "interface": "eth0"},
     "b": {"device": "leaf0", "interface": "e2"}, "capacityBps": "400000000000"},
    {"id": "n1", "a": {"device": "h1-nic0", "interface": "eth0"},
     "b": {"device": "leaf1", "interface": "e2"}, "capacityBps": "400000000000"}
  ],
  "gpus": [
    {"id": "h0-gpu0", "host": "h0", "nic": "h0-nic0"},
    {"id": "h1-gpu0", "host": "h1", "nic": "h1-nic0"}
  ]
})";

v1::Topology Valid() {
  v1::Topology t;
  std::string err;
  EXPECT_TRUE(ParseTopologyJson(kValid, "tiny.json", &t, &err)) << err;
  return t;
}

// Parses `json`, expects a failure whose message contains every `needle`.
void ExpectRejected(const std::string& json, std::vector<std::string> needles) {
  v1::Topology t;
  std::string err;
  ASSERT_FALSE(ParseTopologyJson(json, "t.json", &t, &err));
  for (const auto& n : needles)
    EXPECT_NE(err.find(n), std::string::npos) << err << "\n(want: " << n << ")";
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  auto pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return s.replace(pos, from.size(), to);
}

TEST(TopologyTest, ValidFileParses) {
  v1::Topology t = Valid();
  EXPECT_EQ(t.devices_size(), 7);
  EXPECT_EQ(t.links_size(), 4);
  EXPECT_TRUE(ValidateTopology(t).empty());
}

TEST(TopologyTest, RejectsDuplicateDeviceIdWithPosition) {
  std::string json = Replace(kValid, R"("id": "leaf1", "role")", R"("id": "leaf0", "role")");
  // The second "leaf0" is on line 6 of the document.
  ExpectRejected(json, {"t.json:6:", "devices[2]", "duplicate id \"leaf0\"", "devices[1]"});
}

TEST(TopologyTest, RejectsGpuIdClashingWithDevice) {
  ExpectRejected(Replace(kValid, R"("id": "h1-gpu0")", R"("id": "h1")"),
                 {"gpus[1]", "duplicate id \"h1\""});
}

TEST(TopologyTest, RejectsDanglingLinkEndpoint) {
  ExpectRejected(Replace(kValid, R"("device": "spine0", "interface": "e2")",
                         R"("device": "spine9", "interface": "e2")"),
                 {"links[1] (\"l1\")", "unknown device \"spine9\""});
}

TEST(TopologyTest, RejectsInterfaceUsedTwice) {
  ExpectRejected(Replace(kValid, R"("device": "spine0", "interface": "e2")",
                         R"("device": "spine0", "interface": "e1")"),
                 {"links[1] (\"l1\")", "interface \"spine0\" \"e1\" is already used by links[0]"});
}

TEST(TopologyTest, RejectsZeroCapacity) {
  ExpectRejected(Replace(kValid, R"("id": "l1", "a": {"device": "leaf1", "interface": "e1"},
     "b": {"device": "spine0", "interface": "e2"}, "capacityBps": "400000000000")",
                         R"("id": "l1", "a": {"device": "leaf1", "interface": "e1"},
     "b": {"device": "spine0", "interface": "e2"}, "capacityBps": "0")"),
                 {"links[1] (\"l1\")", "capacity_bps must be positive, got 0"});
}

TEST(TopologyTest, RejectsNegativeCapacity) {
  ExpectRejected(Replace(kValid, R"("interface": "e2"}, "capacityBps": "400000000000"},
    {"id": "n0")",
                         R"("interface": "e2"}, "capacityBps": "-5"},
    {"id": "n0")"),
                 {"links[1]", "capacity_bps must be positive, got -5"});
}

TEST(TopologyTest, RejectsLeafWithoutUplink) {
  v1::Topology t = Valid();
  t.mutable_links()->DeleteSubrange(1, 1);  // l1: leaf1 -- spine0
  auto errs = ValidateTopology(t);
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].element, "devices[2] (\"leaf1\")");
  EXPECT_NE(errs[0].message.find("has no uplink to a spine"), std::string::npos);
}

TEST(TopologyTest, RejectsUnknownRoleName) {
  // Protobuf's JSON parser refuses enum names it does not know.
  ExpectRejected(Replace(kValid, "DEVICE_ROLE_SPINE", "DEVICE_ROLE_ROUTER"),
                 {"not a valid loom.v1.Topology", "DEVICE_ROLE_ROUTER"});
}

TEST(TopologyTest, RejectsUnknownRoleNumber) {
  ExpectRejected(Replace(kValid, R"("role": "DEVICE_ROLE_SPINE")", R"("role": 42)"),
                 {"devices[0] (\"spine0\")", "unknown role 42"});
}

TEST(TopologyTest, RejectsMissingRole) {
  ExpectRejected(Replace(kValid, R"(, "role": "DEVICE_ROLE_SPINE")", ""),
                 {"devices[0] (\"spine0\")", "role is not set"});
}

TEST(TopologyTest, RejectsUnknownField) {
  ExpectRejected(Replace(kValid, R"("name": "tiny")", R"("name": "tiny", "colour": 3)"),
                 {"colour"});
}

TEST(TopologyTest, RejectsLinkBetweenLeaves) {
  ExpectRejected(Replace(kValid, R"("device": "spine0", "interface": "e2")",
                         R"("device": "leaf0", "interface": "e9")"),
                 {"links[1]", "supported pairs"});
}

TEST(TopologyTest, RejectsGpuOnForeignNic) {
  ExpectRejected(Replace(kValid, R"("id": "h1-gpu0", "host": "h1", "nic": "h1-nic0")",
                         R"("id": "h1-gpu0", "host": "h1", "nic": "h0-nic0")"),
                 {"gpus[1]", "belongs to host \"h0\""});
}

TEST(TopologyTest, RejectsMalformedJsonWithMessage) {
  ExpectRejected("{\"devices\": [", {"t.json", "not a valid loom.v1.Topology"});
}

TEST(TopologyTest, ReportsEveryProblemAtOnce) {
  v1::Topology t = Valid();
  t.mutable_links(0)->set_capacity_bps(0);
  t.mutable_links(3)->mutable_b()->set_device("nowhere");
  EXPECT_GE(ValidateTopology(t).size(), 2u);
}

TEST(GeneratorTest, Clos2Shape) {
  Clos2Params p;
  p.leaves = 4;
  p.spines = 3;
  p.hosts_per_leaf = 2;
  p.links_per_spine = 2;
  v1::Topology t;
  std::string err;
  ASSERT_TRUE(GenerateClos2(p, &t, &err)) << err;
  EXPECT_TRUE(ValidateTopology(t).empty());
  std::map<v1::DeviceRole, int> roles;
  for (const auto& d : t.devices()) roles[d.role()]++;
  EXPECT_EQ(roles[v1::DEVICE_ROLE_LEAF], 4);
  EXPECT_EQ(roles[v1::DEVICE_ROLE_SPINE], 3);
  EXPECT_EQ(roles[v1::DEVICE_ROLE_HOST], 8);
  EXPECT_EQ(roles[v1::DEVICE_ROLE_NIC], 64);
  EXPECT_EQ(t.gpus_size(), 64);
  // 4 leaves x 3 spines x 2 parallel links + 64 NIC links.
  EXPECT_EQ(t.links_size(), 4 * 3 * 2 + 64);
}

TEST(GeneratorTest, RailPutsNicKOnRailLeafK) {
  RailParams p;
  p.hosts = 8;
  p.hosts_per_stripe = 4;
  p.spines = 4;
  p.links_per_spine = 2;
  p.host.gpus_per_host = 8;
  p.host.nics_per_host = 8;
  v1::Topology t;
  std::string err;
  ASSERT_TRUE(GenerateRail(p, &t, &err)) << err;
  EXPECT_TRUE(ValidateTopology(t).empty());
  TopologyIndex idx(t);
  int leaves = 0;
  for (const auto& d : t.devices()) leaves += d.role() == v1::DEVICE_ROLE_LEAF;
  EXPECT_EQ(leaves, 2 * 8);  // 2 stripes x 8 rails
  for (const auto& g : t.gpus()) {
    std::string leaf = idx.NicLeaf(g.nic());
    const auto* dl = idx.FindDevice(leaf);
    ASSERT_NE(dl, nullptr);
    EXPECT_EQ(dl->rail(), g.index()) << g.id() << " on " << leaf;
  }
}

TEST(GeneratorTest, SharedNics) {
  Clos2Params p;
  p.host.gpus_per_host = 8;
  p.host.nics_per_host = 2;
  v1::Topology t;
  std::string err;
  ASSERT_TRUE(GenerateClos2(p, &t, &err)) << err;
  EXPECT_TRUE(ValidateTopology(t).empty());
  std::map<std::string, int> gpus_per_nic;
  for (const auto& g : t.gpus()) gpus_per_nic[g.nic()]++;
  for (const auto& [nic, n] : gpus_per_nic) EXPECT_EQ(n, 4) << nic;
}

TEST(GeneratorTest, Clos3SpinesConnectToTheirPlane) {
  Clos3Params p;
  p.pods = 3;
  p.leaves_per_pod = 2;
  p.spines_per_pod = 2;
  p.super_spines = 4;
  v1::Topology t;
  std::string err;
  ASSERT_TRUE(GenerateClos3(p, &t, &err)) << err;
  EXPECT_TRUE(ValidateTopology(t).empty()) << FormatErrors(ValidateTopology(t), "", "");
  // pod spine s connects exactly to super-spines 2s and 2s+1.
  std::map<std::string, std::set<std::string>> up;
  for (const auto& l : t.links()) {
    if (l.b().device().rfind("superspine", 0) == 0) up[l.a().device()].insert(l.b().device());
  }
  EXPECT_EQ(up.size(), 6u);
  EXPECT_EQ(up["pod2-spine1"], (std::set<std::string>{"superspine2", "superspine3"}));
  for (const auto& d : t.devices()) {
    if (d.role() == v1::DEVICE_ROLE_LEAF) {
      EXPECT_FALSE(d.pod().empty());
    }
  }
}

TEST(GeneratorTest, RejectsInconsistentParameters) {
  Clos3Params p;
  p.spines_per_pod = 3;
  p.super_spines = 4;
  v1::Topology t;
  std::string err;
  EXPECT_FALSE(GenerateClos3(p, &t, &err));
  EXPECT_NE(err.find("multiple"), std::string::npos);
}

TEST(GeneratorTest, JsonRoundTrip) {
  RailParams p;
  p.hosts = 4;
  v1::Topology t, back;
  std::string err;
  ASSERT_TRUE(GenerateRail(p, &t, &err));
  ASSERT_TRUE(ParseTopologyJson(TopologyToJson(t), "gen", &back, &err)) << err;
  EXPECT_TRUE(loom::proto::SameMessage(t, back));
}

}  // namespace
}  // namespace loom::topology
