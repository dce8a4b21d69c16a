// The configuration the emulator's wire protocols own, per switch, and how it
// reaches the fabric.
//
// Role: each switch of the emulator has two sources of configuration, as a
// real switch does: what gNMI Set wrote (the intended config, every part of
// the "loom" schema, southbound/gnmi/gnmi_config.h) and what its BGP-DPF
// sessions taught it (colors, colored routes and link-bandwidth weights,
// sim-fabric/wire_bgp.h). WireConfig keeps both, merges them (BGP-learned
// entries win over gNMI entries with the same key: color id, (destination,
// traffic class, QP mask, QP value), destination; a learned route, never
// QP-split, leaves gNMI-written split parts in place) and applies the merged
// DeviceState to the fabric with InProcessDriver::ApplyNow — the one
// DeviceState -> Fabric mapping (split routes reach Fabric::SetRoute with
// their mask and value; the route table is replaced whole, so a removed part
// is gone).
//
// gNMI semantics: Set validates with the southbound codec (ApplySetRequest:
// INVALID_ARGUMENT for bad paths/values, nothing applied), applies on the
// fabric thread and completes once the fabric runs it; if the fabric refuses
// a part, the previous state is restored and the Set fails with the fabric's
// status (transaction). Get with type CONFIG answers the gNMI-written config;
// type OPERATIONAL answers what the fabric runs (merged, BGP-learned
// included) — that is how a client confirms BGP programming over gNMI.
// Unknown device -> NOT_FOUND.
//
// Trigger: gRPC handlers (Set/Get) and the BGP leaves (SetLearned).
// Thread: public methods are thread-safe; the fabric is touched only inside
// closures handed to `run` (FabricLoop::Post in loom-fabric), and Set's
// `done` is called on that thread.
#ifndef LOOM_SIM_FABRIC_WIRE_CONFIG_H_
#define LOOM_SIM_FABRIC_WIRE_CONFIG_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "gnmi/gnmi.pb.h"
#include "loom/v1/device_state.pb.h"
#include "loom/v1/topology.pb.h"
#include "sim-fabric/fabric.h"
#include "sim-fabric/inprocess_driver.h"
#include "southbound/gnmi/gnmi_config.h"

namespace loom::sim {

class WireConfig {
 public:
  // Runs a closure on the fabric's thread (FabricLoop::Post).
  using Runner = std::function<void(std::function<void(Fabric&)>)>;

  // `fabric` must outlive this object; it is only touched through `run`.
  WireConfig(Fabric* fabric, const loom::v1::Topology& topo, Runner run,
             loom::southbound::gnmi::CodecLimits limits = {});
  WireConfig(const WireConfig&) = delete;
  WireConfig& operator=(const WireConfig&) = delete;

  bool IsSwitch(const std::string& device) const { return switches_.count(device) > 0; }

  // gNMI Set for the device in request.prefix.target. `done` is called once
  // (on the fabric thread, or at once for a request rejected up front);
  // `request` must stay valid until then (it is not copied).
  void Set(const ::gnmi::SetRequest& request,
           std::function<void(Status, ::gnmi::SetResponse)> done);
  // Platform personalities (personality.h): replaces the fields named in
  // `fields` (DeviceState field names: "routes", "pfc_watchdog", ...) of the
  // gNMI-written config of `device` with those of `config`, as one
  // transaction like Set: applied on the fabric thread merged with the
  // BGP-learned state; if the fabric refuses a changed field, the previous
  // state is restored and `done` gets INVALID_ARGUMENT naming it. `done` is
  // called once, on the fabric thread (at once for an unknown switch:
  // NOT_FOUND).
  void Program(const std::string& device, const loom::v1::DeviceState& config,
               const std::vector<std::string>& fields, std::function<void(Status)> done);
  // gNMI Get of the config schema (origin "loom"): CONFIG or OPERATIONAL view.
  Status Get(const ::gnmi::GetRequest& request, ::gnmi::GetResponse* response) const;

  // Replaces the BGP-learned colors/routes/weights of `device` and applies
  // the merged state (coalesced: a burst of calls programs the fabric once).
  void SetLearned(const std::string& device, loom::v1::DeviceState learned);

  // Snapshots (any thread).
  loom::v1::DeviceState Configured(const std::string& device) const;
  loom::v1::DeviceState Applied(const std::string& device) const;
  uint64_t sets_applied() const;

 private:
  struct Device {
    loom::v1::DeviceState config;   // gNMI-written, canonical.
    loom::v1::DeviceState learned;  // BGP-learned (colors, routes, weights).
    loom::v1::DeviceState applied;  // What ApplyNow reported.
    bool learned_pending = false;
    uint64_t config_version = 0;   // Bumped whenever `config` changes.
    uint64_t applied_version = 0;  // Bumped whenever `applied` changes.
    // Canonical(config) / Canonical(applied) with device set, built by Get
    // (null until asked for, reset on change).
    mutable std::shared_ptr<const loom::v1::DeviceState> canon_config;
    mutable std::shared_ptr<const loom::v1::DeviceState> canon_applied;
    void AppliedChanged() {
      ++applied_version;
      canon_applied.reset();
    }
  };
  // A SetRequest decoded against the config of version `version`.
  struct Prepared {
    uint64_t version = 0;
    loom::v1::DeviceState old_config;
    loom::v1::DeviceState config;
    ::gnmi::SetResponse resp;
    loom::southbound::gnmi::PartMask changed = 0;
  };
  static loom::v1::DeviceState Merge(const loom::v1::DeviceState& config,
                                     const loom::v1::DeviceState& learned);
  // Fabric thread, mu_ not held by the caller.
  void ApplyLearned(const std::string& device);
  // Fabric thread: applies `config` (merged with the learned state) to
  // `device`; on a failure of a part `ours` accepts, restores `old_config`
  // and returns the refusal. On success makes `config` the device's config.
  Status Commit(const std::string& device, const loom::v1::DeviceState& old_config,
                loom::v1::DeviceState config, const loom::v1::DeviceState& learned,
                const std::function<bool(const std::string& part)>& ours);

  const std::set<std::string> switches_;
  const Runner run_;
  const loom::southbound::gnmi::CodecLimits limits_;
  std::unique_ptr<InProcessDriver> driver_;  // Fabric thread only (ApplyNow).

  mutable std::mutex mu_;
  std::map<std::string, Device> devices_;  // guarded by mu_
  uint64_t sets_applied_ = 0;              // guarded by mu_
};

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_WIRE_CONFIG_H_
