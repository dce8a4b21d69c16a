// Closed-loop harness: the real controller core and the emulator in one
// process, on one thread, in shared virtual time.
//
// Every control period the harness steps the fabric (the in-process gNMI
// adapter samples it into LinkTelemetry, exactly what the collector feeds in
// production), moves the virtual clock the controller reads, hands the
// controller a link snapshot each telemetry interval, ticks it (the
// reconciler programs the fabric through the in-process driver) and runs
// the controller's strand until it is idle. Deterministic for a seed.
#ifndef LOOM_TESTS_CLOSEDLOOP_HARNESS_H_
#define LOOM_TESTS_CLOSEDLOOP_HARNESS_H_

#include <prometheus/registry.h>

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "controller/core/controller.h"
#include "controller/store/store.h"
#include "sim-fabric/fabric.h"
#include "sim-fabric/gnmi_adapter.h"
#include "sim-fabric/inprocess_driver.h"
#include "telemetry/link_state.h"

namespace loom::testing {

struct LoopOptions {
  loom::v1::Topology topology;
  loom::sim::FabricOptions fabric;
  // Loom programs the fabric (false: the fabric runs its own forwarding —
  // static ECMP, DLB... — and Loom only watches).
  bool loom_programs = true;
  TimeNs control_period_ns = 1 * kNsPerMs;
  TimeNs telemetry_interval_ns = 10 * kNsPerMs;
  // Subscribe to NIC telemetry too (RoCE counters, burst gaps for DLB tuning).
  bool subscribe_nics = true;
  // Every NIC tolerates reordering (as an inventory with nic.reorder_tolerance
  // FULL would say): Loom may spray jobs where pinning cannot fit, and the emulated NICs
  // place out-of-order packets (fabric.nic_reorder = kTolerant; else go-back-N).
  bool nics_reorder_tolerant = false;
  // Every NIC keeps out-of-order packets with selective repeat (a resend per reorder
  // event), the inventory says so: Loom may spray at that cost; the emulated NICs are
  // fabric.nic_reorder = kSelectiveRepeat.
  bool nics_selective_repeat = false;
  std::string db_path;  // SQLite file; the caller owns its directory
  loom::controller::ControllerOptions controller;
};

class ClosedLoop {
 public:
  explicit ClosedLoop(LoopOptions options);
  ~ClosedLoop();

  // Registers `spec` with Loom as a scheduler would (same endpoints, tenant,
  // collective) and adds the same workload to the emulator. Returns Loom's
  // answer.
  loom::v1::Job AddJob(const loom::sim::JobSpec& spec, int traffic_class = 3);
  // Registers `job` (what the scheduler tells Loom, which may differ from what the
  // job really does) and adds `spec` to the emulator (what it does).
  loom::v1::Job AddJobAs(const loom::sim::JobSpec& spec, const loom::v1::Job& job);
  // Runs the loop until virtual time `t`.
  void RunUntil(TimeNs t);
  // Runs until every emulated job is done (or `limit`); true when done.
  bool RunUntilJobsDone(TimeNs limit);
  // Restarts the controller on the same database (the fabric keeps running).
  void RestartController();

  loom::controller::Controller& controller() { return *controller_; }
  loom::sim::Fabric& fabric() { return *fabric_; }
  // Runs queued controller work to completion.
  void Drain();
  // Synchronous helpers over the controller's callback API.
  loom::v1::Job GetJob(const std::string& id);
  std::vector<loom::v1::Event> Events(uint64_t from = 1);
  Status Drain(const std::string& link, const std::string& reason);
  Status InstallPolicy(const loom::v1::PolicySet& set);

 private:
  void StartController();

  LoopOptions options_;
  std::shared_ptr<const loom::topology::TopologyIndex> index_;
  std::unique_ptr<loom::sim::Fabric> fabric_;
  VirtualClock clock_;
  std::unique_ptr<loom::telemetry::LinkTelemetry> link_telemetry_;
  std::unique_ptr<loom::sim::InProcessTelemetry> gnmi_;
  std::unique_ptr<loom::sim::InProcessDriver> driver_;
  boost::asio::io_context io_;
  std::unique_ptr<prometheus::Registry> registry_;
  std::unique_ptr<loom::controller::SqliteStore> store_;
  std::unique_ptr<loom::controller::Controller> controller_;
  TimeNs next_snapshot_ns_ = 0;
  uint64_t oper_changes_seen_ = 0;
};

// A small 2-tier test fabric: `leaves` x `spines`, 400G, hosts with 2 GPUs
// and 2 NICs ("hostHHH-gpuG"), named "clos-<leaves>x<spines>". Throws when
// the generator refuses the shape.
loom::v1::Topology SmallClos(int leaves, int spines, int hosts_per_leaf);
// SmallClos(2, 4, 2), 400G everywhere, 4 NICs per leaf (2 hosts x 2):
//
//    spine0  spine1  spine2  spine3
//       \  \  /  \  /  \  /  /
//        leaf0  ==========  leaf1
//     host000 host001      host002 host003
//
// Uplinks equal downlinks: non-blocking.
loom::v1::Topology TwoLeavesFourSpines();

// Maps an emulator collective to the API's hint.
loom::v1::CollectivePattern ToPattern(loom::sim::Collective c);
// The job a scheduler registers for `spec` (same endpoints, tenant, collective).
loom::v1::Job JobOf(const loom::sim::JobSpec& spec, int traffic_class = 3);

}  // namespace loom::testing

#endif  // LOOM_TESTS_CLOSEDLOOP_HARNESS_H_
