// Small fabrics and notification builders for telemetry tests.
#ifndef LOOM_TESTS_TELEMETRY_TEST_FABRIC_H_
#define LOOM_TESTS_TELEMETRY_TEST_FABRIC_H_

#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "gnmi/gnmi.pb.h"
#include "loom/v1/topology.pb.h"
#include "telemetry/path.h"

namespace loom::telemetry::testing {

constexpr int64_t k400G = 400'000'000'000;

inline void AddDevice(loom::v1::Topology* t, const std::string& id, loom::v1::DeviceRole role,
                      const std::string& pod = "") {
  auto* d = t->add_devices();
  d->set_id(id);
  d->set_role(role);
  d->set_pod(pod);
}

// Interface naming: the lower device's port towards upper device u is
// "Ethernet<u>", the upper device's port towards lower device l is "Ethernet<l>".
inline void AddLink(loom::v1::Topology* t, const std::string& a, const std::string& a_if,
                    const std::string& b, const std::string& b_if, int64_t cap = k400G) {
  auto* l = t->add_links();
  l->set_id(a + ":" + a_if + "--" + b + ":" + b_if);
  l->mutable_a()->set_device(a);
  l->mutable_a()->set_interface(a_if);
  l->mutable_b()->set_device(b);
  l->mutable_b()->set_interface(b_if);
  l->set_capacity_bps(cap);
}

//        spine-0            spine-1
//       /   |   \          /   |   \   (full mesh)
//   leaf-0 leaf-1 leaf-2 (every leaf to every spine)
//     |
//   nic-0  (host-0)
// Links: leaf-i:Ethernet<s> -- spine-s:Ethernet<i>, nic-0:eth0 -- leaf-0:Ethernet10.
inline loom::v1::Topology TwoTier(int leaves = 3, int spines = 2) {
  using loom::v1::DeviceRole;
  loom::v1::Topology t;
  t.set_name("test-2tier");
  for (int s = 0; s < spines; ++s)
    AddDevice(&t, "spine-" + std::to_string(s), DeviceRole::DEVICE_ROLE_SPINE);
  for (int l = 0; l < leaves; ++l)
    AddDevice(&t, "leaf-" + std::to_string(l), DeviceRole::DEVICE_ROLE_LEAF);
  AddDevice(&t, "host-0", DeviceRole::DEVICE_ROLE_HOST);
  AddDevice(&t, "nic-0", DeviceRole::DEVICE_ROLE_NIC);
  t.mutable_devices(t.devices_size() - 1)->set_host("host-0");
  for (int l = 0; l < leaves; ++l) {
    for (int s = 0; s < spines; ++s) {
      AddLink(&t, "leaf-" + std::to_string(l), "Ethernet" + std::to_string(s),
              "spine-" + std::to_string(s), "Ethernet" + std::to_string(l));
    }
  }
  AddLink(&t, "nic-0", "eth0", "leaf-0", "Ethernet10");
  return t;
}

// Builds a notification: `prefix` in text form (may carry target@origin:),
// updates as (relative path text, value).
inline gnmi::Notification Note(TimeNs ts, const std::string& prefix,
                               const std::vector<std::pair<std::string, gnmi::TypedValue>>& ups) {
  gnmi::Notification n;
  n.set_timestamp(ts);
  if (!ParsePath(prefix, n.mutable_prefix()).ok()) std::abort();
  for (const auto& [path, val] : ups) {
    gnmi::Update* u = n.add_update();
    if (!ParsePath(path, u->mutable_path()).ok()) std::abort();
    *u->mutable_val() = val;
  }
  return n;
}

inline gnmi::TypedValue U(uint64_t v) {
  gnmi::TypedValue t;
  t.set_uint_val(v);
  return t;
}
inline gnmi::TypedValue S(const std::string& v) {
  gnmi::TypedValue t;
  t.set_string_val(v);
  return t;
}

}  // namespace loom::telemetry::testing

#endif  // LOOM_TESTS_TELEMETRY_TEST_FABRIC_H_
