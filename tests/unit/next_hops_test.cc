#include "controller/te/next_hops.h"

#include <gtest/gtest.h>

#include "api/topology/topology_generate.h"
#include "southbound/wire/device_state_util.h"
#include "tests/unit/test_util.h"

namespace loom::te {
namespace {

namespace v1 = loom::v1;
using loom::topology::TopologyIndex;

using loom::testing::OneNicClos2;
using loom::testing::OneNicClos3;

// Ids of the links between a and b.
std::set<std::string> LinksBetween(const TopologyIndex& topo, const std::string& a,
                                   const std::string& b) {
  std::set<std::string> out;
  for (const auto& l : topo.topology().links()) {
    if ((l.a().device() == a && l.b().device() == b) ||
        (l.a().device() == b && l.b().device() == a)) {
      out.insert(l.id());
    }
  }
  EXPECT_FALSE(out.empty()) << a << " -- " << b;
  return out;
}

// "next_hop: egress... > beyond..." per entry, for compact expectations.
std::vector<std::string> Text(const std::vector<v1::NextHopReach>& reach) {
  std::vector<std::string> out;
  for (const auto& r : reach) {
    std::string s = r.next_hop() + ":";
    for (const auto& e : r.egress()) s += " " + e;
    if (r.beyond_size() > 0) s += " >";
    for (const auto& b : r.beyond()) s += " " + b;
    out.push_back(s);
  }
  return out;
}

std::vector<std::string> Text(const v1::DeviceState& st) {
  return Text(
      std::vector<v1::NextHopReach>(st.next_hop_reach().begin(), st.next_hop_reach().end()));
}

using Strings = std::vector<std::string>;

TEST(NextHopReachTest, TwoTierEverySpineReachesEveryLeafDirectly) {
  auto topo = OneNicClos2(3, 2);
  auto reach = NextHopReachOf(*topo, {}, "leaf0", {"leaf0", "leaf1", "leaf2"});
  EXPECT_EQ(Text(reach), (Strings{"spine0: leaf1 leaf2", "spine1: leaf1 leaf2"}));
}

TEST(NextHopReachTest, DownSpineToLeafLinkRemovesTheLeafFromThatSpineOnly) {
  auto topo = OneNicClos2(3, 2);
  auto reach =
      NextHopReachOf(*topo, LinksBetween(*topo, "spine1", "leaf2"), "leaf0", {"leaf1", "leaf2"});
  EXPECT_EQ(Text(reach), (Strings{"spine0: leaf1 leaf2", "spine1: leaf1"}));
}

TEST(NextHopReachTest, SpineThatReachesNoEgressLeafIsListedEmpty) {
  auto topo = OneNicClos2(3, 2);
  std::set<std::string> down = LinksBetween(*topo, "spine1", "leaf2");
  down.merge(LinksBetween(*topo, "spine1", "leaf1"));
  auto reach = NextHopReachOf(*topo, down, "leaf0", {"leaf1", "leaf2"});
  EXPECT_EQ(Text(reach), (Strings{"spine0: leaf1 leaf2", "spine1:"}));
}

TEST(NextHopReachTest, OwnUplinkDownMeansTheSpineReachesNothingFromHere) {
  auto topo = OneNicClos2(3, 2);
  auto reach =
      NextHopReachOf(*topo, LinksBetween(*topo, "leaf0", "spine0"), "leaf0", {"leaf1", "leaf2"});
  EXPECT_EQ(Text(reach), (Strings{"spine0:", "spine1: leaf1 leaf2"}));
}

TEST(NextHopReachTest, ParallelLinksKeepReachWhileOneIsUp) {
  loom::topology::Clos2Params p;
  p.leaves = 2;
  p.spines = 1;
  p.links_per_spine = 2;
  p.hosts_per_leaf = 1;
  p.host.gpus_per_host = 1;
  p.host.nics_per_host = 1;
  v1::Topology t;
  std::string err;
  ASSERT_TRUE(loom::topology::GenerateClos2(p, &t, &err)) << err;
  TopologyIndex topo(t);
  std::set<std::string> both = LinksBetween(topo, "spine0", "leaf1");
  ASSERT_EQ(both.size(), 2u);
  std::set<std::string> one = {*both.begin()};
  EXPECT_EQ(Text(NextHopReachOf(topo, one, "leaf0", {"leaf1"})), (Strings{"spine0: leaf1"}));
  EXPECT_EQ(Text(NextHopReachOf(topo, both, "leaf0", {"leaf1"})), (Strings{"spine0:"}));
}

TEST(NextHopReachTest, ThreeTierRemoteLeavesSitBehindTheSuperSpines) {
  auto topo = OneNicClos3();
  auto reach = NextHopReachOf(*topo, {}, "pod0-leaf0", {"pod0-leaf1", "pod1-leaf0", "pod1-leaf1"});
  EXPECT_EQ(Text(reach), (Strings{
                             "pod0-spine0: pod0-leaf1",
                             "pod0-spine0: pod1-leaf0 pod1-leaf1 > superspine0 superspine1",
                             "pod0-spine1: pod0-leaf1",
                             "pod0-spine1: pod1-leaf0 pod1-leaf1 > superspine2 superspine3",
                         }));
}

TEST(NextHopReachTest, ThreeTierDownLinksBeyondTheSpineNarrowItsList) {
  auto topo = OneNicClos3();
  // superspine0 loses pod1-spine0: it reaches no pod1 leaf any more.
  std::set<std::string> down = LinksBetween(*topo, "superspine0", "pod1-spine0");
  // pod1-spine1 loses pod1-leaf1: superspine2/3 still reach pod1-leaf0 only.
  down.merge(LinksBetween(*topo, "pod1-spine1", "pod1-leaf1"));
  auto reach = NextHopReachOf(*topo, down, "pod0-leaf0", {"pod1-leaf0", "pod1-leaf1"});
  EXPECT_EQ(Text(reach), (Strings{
                             "pod0-spine0: pod1-leaf0 pod1-leaf1 > superspine1",
                             "pod0-spine1: pod1-leaf0 > superspine2 superspine3",
                         }));
  // And with superspine1 gone too, pod0-spine0 reaches nothing in pod1.
  down.merge(LinksBetween(*topo, "superspine1", "pod1-spine0"));
  reach = NextHopReachOf(*topo, down, "pod0-leaf0", {"pod1-leaf0", "pod1-leaf1"});
  EXPECT_EQ(Text(reach), (Strings{
                             "pod0-spine0:",
                             "pod0-spine1: pod1-leaf0 > superspine2 superspine3",
                         }));
}

TEST(NextHopReachTest, ThreeTierPodSpineSeesTheEgressPodSpinesBeyondItsSuperSpines) {
  auto topo = OneNicClos3();
  auto reach = NextHopReachOf(*topo, LinksBetween(*topo, "superspine1", "pod1-spine0"),
                              "pod0-spine0", {"pod1-leaf0"});
  EXPECT_EQ(Text(reach), (Strings{"superspine0: pod1-leaf0 > pod1-spine0", "superspine1:"}));
}

TEST(NextHopReachTest, AddedOnlyWhereRoutesOrWeightsAreTowardsTheirEgressLeaves) {
  auto topo = OneNicClos2(3, 2);
  std::string nic_on_leaf2;
  for (const auto& d : topo->topology().devices()) {
    if (d.role() == v1::DEVICE_ROLE_NIC && topo->NicLeaf(d.id()) == "leaf2") nic_on_leaf2 = d.id();
  }
  ASSERT_FALSE(nic_on_leaf2.empty());
  std::map<std::string, v1::DeviceState> desired;
  desired["leaf0"].add_routes()->set_destination(nic_on_leaf2);
  desired["leaf1"].add_weights()->set_destination("leaf0");
  desired["spine0"].set_device("spine0");
  desired["leaf2"].add_next_hop_reach()->set_next_hop("stale");
  AddNextHopReach(*topo, LinksBetween(*topo, "spine1", "leaf2"), &desired);
  EXPECT_EQ(Text(desired["leaf0"]), (Strings{"spine0: leaf2", "spine1:"}));
  EXPECT_EQ(Text(desired["leaf1"]), (Strings{"spine0: leaf0", "spine1: leaf0"}));
  EXPECT_EQ(desired["spine0"].next_hop_reach_size(), 0);
  EXPECT_EQ(desired["leaf2"].next_hop_reach_size(), 0);
}

TEST(NextHopReachTest, ReconcilerContentSeesReachChangesButNotTheirOrder) {
  v1::DeviceState a;
  auto* r1 = a.add_next_hop_reach();
  r1->set_next_hop("spine1");
  r1->add_egress("leaf2");
  r1->add_egress("leaf1");
  a.add_next_hop_reach()->set_next_hop("spine0");
  v1::DeviceState b;
  b.add_next_hop_reach()->set_next_hop("spine0");
  auto* r2 = b.add_next_hop_reach();
  r2->set_next_hop("spine1");
  r2->add_egress("leaf1");
  r2->add_egress("leaf2");
  EXPECT_TRUE(loom::southbound::SameContent(a, b));
  b.mutable_next_hop_reach(1)->mutable_egress()->RemoveLast();
  EXPECT_FALSE(loom::southbound::SameContent(a, b));
  EXPECT_EQ(loom::southbound::DifferingParts(a, b), (Strings{"next_hop_reach"}));
}

}  // namespace
}  // namespace loom::te
