// Helpers for the emulator's gNMI tests: a small fabric with one flow, a
// recording sink and notification flattening.
#ifndef LOOM_TESTS_SIM_GNMI_GNMI_TEST_UTIL_H_
#define LOOM_TESTS_SIM_GNMI_GNMI_TEST_UTIL_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gnmi/gnmi.pb.h"
#include "gtest/gtest.h"
#include "sim-fabric/fabric.h"
#include "telemetry/path.h"
#include "telemetry/sink.h"
#include "tests/sim/sim_test_util.h"

namespace loom::sim::testing {

constexpr int64_t kEpochNs = 1'700'000'000 * kNsPerSec;
constexpr double kFlowBps = 40e9;

//   spine-0   spine-1
//     |  \   /  |
//     |   \ /   |        2 leaves x 2 spines, 100G everywhere
//     |   / \   |
//   leaf-0    leaf-1
//     |         |
//  host000    host001    one 100G NIC each; one flow host000 -> host001 capped at 40G
struct SmallFabric {
  loom::v1::Topology topo;
  std::unique_ptr<Fabric> fabric;
  std::string nic0, nic1, nic0_if, leaf0, leaf0_down_if, uplink_id, uplink_leaf_if;
  int qp = -1;

  explicit SmallFabric(TimeNs step_ns = 1 * kNsPerUs) {
    topo = Clos(2, 2, 1, 100e9, 100e9);
    FabricOptions o;
    o.step_ns = step_ns;
    fabric = Make(topo, o);
    nic0 = Nic(0);
    nic1 = Nic(1);
    nic0_if = fabric->Interfaces(nic0).at(0);
    for (const auto& l : topo.links()) {
      if (l.a().device() == nic0) {
        leaf0 = l.b().device();
        leaf0_down_if = l.b().interface();
      } else if (l.b().device() == nic0) {
        leaf0 = l.a().device();
        leaf0_down_if = l.a().interface();
      }
    }
    for (const auto& l : topo.links()) {
      if (l.a().device() == leaf0 && l.b().device() != nic0) {
        uplink_id = l.id();
        uplink_leaf_if = l.a().interface();
        break;
      }
      if (l.b().device() == leaf0 && l.a().device() != nic0) {
        uplink_id = l.id();
        uplink_leaf_if = l.b().interface();
        break;
      }
    }
    qp = fabric->AddFlow(nic0, nic1, 0, 3, kFlowBps);
  }
};

// Canonical text of update `u` of notification `n` (prefix joined, no target).
inline std::string FullPath(const gnmi::Notification& n, const gnmi::Update& u) {
  gnmi::Path p = telemetry::JoinPath(n.prefix(), u.path());
  p.clear_target();
  return telemetry::FormatPath(p);
}

// One received value.
struct Sample {
  std::string target;
  std::string path;
  gnmi::TypedValue value;
  int64_t timestamp_ns = 0;
};

inline std::vector<Sample> Flatten(const std::string& target, const gnmi::Notification& n) {
  std::vector<Sample> out;
  for (const auto& u : n.update()) {
    Sample s;
    s.target = n.prefix().target().empty() ? target : n.prefix().target();
    s.path = FullPath(n, u);
    s.value = u.val();
    s.timestamp_ns = n.timestamp();
    out.push_back(std::move(s));
  }
  return out;
}

// Sink that records everything, thread-safe.
class RecordingSink final : public telemetry::TelemetrySink {
 public:
  size_t OnNotification(const std::string& target, const gnmi::Notification& n,
                        TimeNs /*arrival_ns*/) override {
    std::lock_guard<std::mutex> lock(mu_);
    notifications_.emplace_back(target, n);
    return 0;
  }
  void OnTargetConnected(const std::string& t) override { Event("connected " + t); }
  void OnTargetSynced(const std::string& t) override { Event("synced " + t); }

  std::vector<std::pair<std::string, gnmi::Notification>> notifications() const {
    std::lock_guard<std::mutex> lock(mu_);
    return notifications_;
  }
  std::vector<Sample> samples() const {
    std::vector<Sample> out;
    for (const auto& [t, n] : notifications()) {
      for (auto& s : Flatten(t, n)) out.push_back(std::move(s));
    }
    return out;
  }
  std::vector<std::string> events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    notifications_.clear();
  }

 private:
  void Event(const std::string& e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(e);
  }
  mutable std::mutex mu_;
  std::vector<std::pair<std::string, gnmi::Notification>> notifications_;
  std::vector<std::string> events_;
};

// Values of `path` for `target`, in arrival order.
inline std::vector<Sample> Select(const std::vector<Sample>& all, const std::string& target,
                                  const std::string& path) {
  std::vector<Sample> out;
  for (const auto& s : all) {
    if (s.target == target && s.path == path) out.push_back(s);
  }
  return out;
}

inline std::string IfLeaf(const std::string& ifc, const std::string& leaf) {
  return "/interfaces/interface[name=" + ifc + "]/state/" + leaf;
}

}  // namespace loom::sim::testing

#endif  // LOOM_TESTS_SIM_GNMI_GNMI_TEST_UTIL_H_
