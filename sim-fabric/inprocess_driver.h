// The emulator as a southbound device: applies Loom's per-device desired
// state (loom.v1.DeviceState) to a sim::Fabric through its config interface,
// the way a real switch applies BGP-DPF colors and gNMI settings.
//
// Role: implements loom::southbound::Driver for every switch of one Fabric,
// so the controller's reconciler programs the emulator exactly as it programs
// real devices. Triggered by the reconciler. Thread: the Fabric is
// single-threaded, so Apply()/Read() touch it only through `run`, a function
// that executes a closure on the thread that owns the Fabric (in virtual-time
// tests: inline; in loomd's embedded mode: the emulator thread). `done` is
// called on that thread.
//
// Mapping: colors -> SetColor (next-hop devices become the interfaces that
// reach them, parallel links included); routes -> SetRoute; weights ->
// SetEcmpWeights (a destination NIC maps to its leaf); dlb -> forwarding mode
// and DLB profile; alb_tables -> SetAlbTable; spray_rules -> spray priority
// mask; thresholds -> ECN/PFC; disabled_interfaces -> the interface's link
// goes down (SetLinkUp false), and up again when it leaves the list;
// pfc_watchdog -> the switch's PFC watchdog (SetWatchdog: drop, forward or
// alert), and back to the switch's earlier watchdog when it leaves the state;
// next_hop_reach (NNHN data) -> nothing to program (the emulator forwards by
// its own topology), echoed as applied. Parts the emulator refuses are
// reported as failures with the emulator's status; what was applied is the
// desired state minus the failed parts.
#ifndef LOOM_SIM_FABRIC_INPROCESS_DRIVER_H_
#define LOOM_SIM_FABRIC_INPROCESS_DRIVER_H_

#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "loom/v1/topology.pb.h"
#include "sim-fabric/fabric.h"
#include "southbound/wire/driver.h"

namespace loom::sim {

class InProcessDriver final : public loom::southbound::Driver {
 public:
  using Runner = std::function<void(std::function<void()>)>;
  // `run` defaults to calling the closure inline.
  InProcessDriver(Fabric* fabric, const loom::v1::Topology& topo, Runner run = nullptr);

  std::string Name() const override { return "emulator"; }
  bool Handles(const std::string& device) const override;
  void Apply(const loom::v1::DeviceState& desired,
             std::function<void(loom::southbound::ApplyResult)> done) override;
  void Read(const std::string& device,
            std::function<void(loom::Status, loom::v1::DeviceState)> done) override;

  // Applies synchronously on the calling thread (which must own the Fabric).
  loom::southbound::ApplyResult ApplyNow(const loom::v1::DeviceState& desired);

 private:
  // Interfaces of `device` that lead to `neighbor` (parallel links included).
  std::vector<std::string> InterfacesTowards(const std::string& device,
                                             const std::string& neighbor) const;

  Fabric* fabric_;
  Runner run_;
  std::set<std::string> switches_;
  std::map<std::string, std::string> nic_leaf_;
  // (device, interface) -> link id
  std::map<std::pair<std::string, std::string>, std::string> link_of_;
  // (device, neighbor) -> interfaces
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> towards_;
  mutable std::mutex mu_;
  std::map<std::string, loom::v1::DeviceState> applied_;  // guarded by mu_
  // The watchdog each switch ran before Loom's first one.
  std::map<std::string, WatchdogConfig> boot_watchdog_;  // guarded by mu_
};

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_INPROCESS_DRIVER_H_
