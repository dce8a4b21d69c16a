// The emulator's gNMI config side (WireConfig) with routes split by
// destination QP: a gNMI Set of the parts reaches Fabric::SetRoute per part
// (RouteCount and forwarding), BGP-learned routes replace only the unsplit
// route, and a deleted part is gone from the fabric. In process: the fabric
// runner runs closures at once, virtual time.
#include "sim-fabric/wire_config.h"

#include <string>

#include "gtest/gtest.h"
#include "southbound/gnmi/gnmi_config.h"
#include "tests/sim/gnmi/gnmi_test_util.h"

namespace loom::sim {
namespace {

namespace v1 = loom::v1;
namespace sg = loom::southbound::gnmi;
using testing::IfaceTo;
using testing::kFlowBps;
using testing::OutOctets;
using testing::SmallFabric;

constexpr uint32_t kViaSpine0 = 65536, kViaSpine1 = 65537;

v1::ColoredRoute Route(const std::string& dest, uint32_t mask, uint32_t value, uint32_t color,
                       uint32_t backup) {
  v1::ColoredRoute r;
  r.set_destination(dest);
  r.set_traffic_class(3);
  r.set_qp_mask(mask);
  r.set_qp_value(value);
  r.set_color(color);
  r.set_backup_color(backup);
  return r;
}

Status SetSync(WireConfig* wc, const ::gnmi::SetRequest& req) {
  Status out = Internal("not done");
  wc->Set(req, [&](Status s, ::gnmi::SetResponse) { out = s; });
  return out;
}

TEST(WireConfigTest, QpSplitRoutesReachTheFabricPerPart) {
  SmallFabric f;
  Fabric& fab = *f.fabric;
  // Two QPs host000 -> host001, class 3: destination QPs of both parities.
  const uint32_t qp_a = fab.GetQp(f.qp).dest_qp;
  const int second = fab.AddFlow(f.nic0, f.nic1, 0, 3, kFlowBps, qp_a ^ 1u);
  ASSERT_EQ(fab.GetQp(second).dest_qp & 1u, (qp_a & 1u) ^ 1u);
  WireConfig wc(&fab, f.topo, [&](std::function<void(Fabric&)> fn) { fn(fab); });

  const std::string up0 = IfaceTo(f.topo, f.leaf0, "spine0");
  const std::string up1 = IfaceTo(f.topo, f.leaf0, "spine1");
  ASSERT_FALSE(up0.empty());
  ASSERT_FALSE(up1.empty());
  v1::DeviceState want;
  want.set_device(f.leaf0);
  auto* c0 = want.add_colors();
  c0->set_color(kViaSpine0);
  c0->add_next_hops("spine0");
  auto* c1 = want.add_colors();
  c1->set_color(kViaSpine1);
  c1->add_next_hops("spine1");
  // Unsplit fallback on spine0, then parity 0 -> spine0 and parity 1 -> spine1.
  *want.add_routes() = Route(f.nic1, 0, 0, kViaSpine0, 0);
  *want.add_routes() = Route(f.nic1, 1, 0, kViaSpine0, kViaSpine1);
  *want.add_routes() = Route(f.nic1, 1, 1, kViaSpine1, kViaSpine0);
  const sg::PartMask parts = sg::Mask(sg::Part::kColors) | sg::Mask(sg::Part::kRoutes);
  Status st = SetSync(&wc, sg::EncodeSetRequest(nullptr, want, parts, f.leaf0));
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(fab.RouteCount(f.leaf0), 3u);
  EXPECT_EQ(wc.Applied(f.leaf0).routes_size(), 3);

  // Forwarding: each part on its spine, so both uplinks carry one flow.
  auto window = [&](double* on0, double* on1) {
    fab.RunUntil(fab.now() + 2 * kNsPerMs);  // Settle.
    const double a0 = OutOctets(fab, f.leaf0, up0), a1 = OutOctets(fab, f.leaf0, up1);
    fab.RunUntil(fab.now() + 5 * kNsPerMs);
    *on0 = OutOctets(fab, f.leaf0, up0) - a0;
    *on1 = OutOctets(fab, f.leaf0, up1) - a1;
  };
  double on0 = 0, on1 = 0;
  window(&on0, &on1);
  ASSERT_GT(on0 + on1, 0);
  EXPECT_GT(on0, 0.35 * (on0 + on1)) << on0 << " vs " << on1;
  EXPECT_GT(on1, 0.35 * (on0 + on1)) << on0 << " vs " << on1;

  // A BGP-learned route (never split) replaces only the unsplit one.
  v1::DeviceState learned;
  *learned.add_routes() = Route(f.nic1, 0, 0, kViaSpine1, 0);
  wc.SetLearned(f.leaf0, learned);
  EXPECT_EQ(fab.RouteCount(f.leaf0), 3u);
  ASSERT_EQ(wc.Applied(f.leaf0).routes_size(), 3);

  // The parity-1 part is removed over gNMI: its QP falls to the learned
  // unsplit route (spine1); the parity-0 part stays on spine0.
  v1::DeviceState fewer = want;
  fewer.mutable_routes()->DeleteSubrange(2, 1);
  ::gnmi::SetRequest del = sg::EncodeSetRequest(&want, fewer, parts, f.leaf0);
  ASSERT_EQ(del.delete__size(), 1);
  st = SetSync(&wc, del);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(fab.RouteCount(f.leaf0), 2u);
  EXPECT_EQ(wc.Configured(f.leaf0).routes_size(), 2);
  window(&on0, &on1);
  EXPECT_GT(on0, 0.35 * (on0 + on1)) << on0 << " vs " << on1;
  EXPECT_GT(on1, 0.35 * (on0 + on1)) << on0 << " vs " << on1;
  // Then the parity-0 part: both QPs follow the learned route to spine1.
  v1::DeviceState none = fewer;
  none.mutable_routes()->DeleteSubrange(1, 1);
  st = SetSync(&wc, sg::EncodeSetRequest(&fewer, none, parts, f.leaf0));
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(fab.RouteCount(f.leaf0), 1u);  // The learned route (it replaced the gNMI 0/0).
  window(&on0, &on1);
  EXPECT_LT(on0, 0.01 * (on0 + on1)) << on0 << " vs " << on1;
}

TEST(WireConfigTest, QpValueOutsideMaskIsRejectedAndNothingApplied) {
  SmallFabric f;
  Fabric& fab = *f.fabric;
  WireConfig wc(&fab, f.topo, [&](std::function<void(Fabric&)> fn) { fn(fab); });
  v1::DeviceState bad;
  bad.set_device(f.leaf0);
  *bad.add_routes() = Route(f.nic1, 1, 2, kViaSpine0, 0);
  Status st =
      SetSync(&wc, sg::EncodeSetRequest(nullptr, bad, sg::Mask(sg::Part::kRoutes), f.leaf0));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("qp-value 2 has bits outside qp-mask 1"), std::string::npos)
      << st.message();
  EXPECT_EQ(fab.RouteCount(f.leaf0), 0u);
}

}  // namespace
}  // namespace loom::sim
