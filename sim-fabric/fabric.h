// The fabric emulator: a whole RoCEv2 fabric in one object.
//
// Fabric is a hybrid fluid (flow-level) model: stepped at a fixed virtual-time step
// (FabricOptions::step_ns, default 1 us) wherever anything non-linear happens, and
// fast-forwarded (RunUntil/RunUntilJobsDone/Advance) over quiescent stretches — every
// queue empty, no ECN/PFC/CNP, constant rates — and idle ones, with every counter
// advanced as stepping would (FabricOptions::fast_forward). Each step:
//   1. due events fire in time order: CNP arrivals at senders, PFC frames at
//      upstream egress queues, faults, job iteration starts;
//   2. every NIC shares its line rate fairly (water-filling) among its active
//      QPs, each capped by its DCQCN rate, its application cap and its data
//      dependency (collective pipelining), and injects that many bytes;
//   3. every busy egress queue (port x priority) serves capacity x step bytes,
//      split among the flows in it in proportion to their bytes queued (a fluid
//      FIFO), and marks ECN with the RED probability of its depth;
//   4. served bytes move to the next hop (arriving there next step); arrivals are
//      admitted against PFC headroom (lossless) or the shared buffer (lossy);
//   5. per-ingress PFC accounting sends PAUSE/RESUME upstream (delayed by the
//      link), receivers turn marked bytes into CNPs (paced per QP), senders' DCQCN
//      state machines run their timers and byte counters exactly.
// See sim-fabric/README.md for the model and its limits.
//
// Threading contract: a Fabric is single-threaded and passive. The caller owns
// it and calls Step/RunUntil, the counter getters and the config setters from
// one thread (or serialises them). Nothing runs in the background. Several
// Fabrics may live in one process; they share nothing.
//
// Names: devices and interfaces are those of the loom.v1.Topology; queues are
// priorities 0..7; a "destination" of a per-destination setting is the id of a
// destination leaf switch.
#ifndef LOOM_SIM_FABRIC_FABRIC_H_
#define LOOM_SIM_FABRIC_FABRIC_H_

#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "loom/v1/topology.pb.h"
#include "sim-fabric/dcqcn.h"
#include "sim-fabric/rng.h"
#include "sim-fabric/types.h"

namespace loom::sim {

struct FabricOptions {
  TimeNs step_ns = 1 * kNsPerUs;
  uint64_t seed = 1;
  double mtu_bytes = 4096;  // RoCE payload MTU; packet counters count these
  // The NIC model (the HPCC packet-level simulator's mlx DCQCN, its dcqcn configuration):
  // what RoCE NICs in the field run; tests/sim/packet_level_test.cc compares it with
  // reference runs.
  DcqcnParams dcqcn = Ns3MlxDcqcnParams();
  // Congestion control (congestion_control.h): every NIC's algorithm (nullptr: DCQCN with
  // `dcqcn`; SetCongestionControl / SetDcqcn per NIC) and the switches' congestion point
  // (nullptr: RED/ECN with each queue's Kmin/Kmax/Pmax).
  std::shared_ptr<const CongestionControl> congestion_control;
  std::shared_ptr<const CongestionPoint> congestion_point;
  // Every NIC's reorder behaviour (types.h ReorderMode; SetNicReorder per NIC).
  ReorderMode nic_reorder = ReorderMode::kGoBackN;
  SwitchConfig switch_defaults;              // applied to every switch
  double intra_host_bps = 2.4e12;            // GPU-to-GPU inside a host (NVLink), not on the fabric
  TimeNs cnp_hop_latency_ns = 1 * kNsPerUs;  // per switch, strict-priority CNP queue
  // Data: each switch forwards a packet this long after it has fully arrived (store and
  // forward: the packet's serialization at the ingress rate comes on top).
  TimeNs switch_latency_ns = 0;
  // Hybrid model: RunUntil/RunUntilJobsDone/Advance jump over quiescent stretches (every
  // queue empty, no PFC, no ECN marks, no CNP, every QP at a constant rate its path carries,
  // no DCQCN rate change due) to the next event, advancing every counter by rate x time,
  // and over idle stretches (no traffic at all) in O(1). Step() always does one step.
  // See sim-fabric/README.md ("Hybrid model").
  bool fast_forward = true;
  // Longest single fast-forward jump over busy periods (counters are exact at every
  // RunUntil/Advance return anyway; this keeps a sampler that does not stop at its ticks
  // seeing counters move at least every 10 ms). 0 disables busy jumps.
  TimeNs max_jump_ns = 10 * kNsPerMs;
};

// What fast-forwarding skipped (Fabric::fast_forward_stats()).
struct FastForwardStats {
  uint64_t jumps = 0;                     // busy (quiescent) jumps
  uint64_t idle_jumps = 0;                // jumps over stretches without any traffic
  uint64_t skipped_steps = 0;             // steps not executed (busy and idle)
  uint64_t skipped_flow_hop_updates = 0;  // flow-hop updates stepping would have done
  uint64_t checks = 0;                    // quiescence checks run (each O(active QP hops))
};

// Fault kinds for ScheduleFault.
enum class FaultKind {
  kLinkDown,
  kLinkUp,
  kLinkFlap,
  kSwitchDown,
  kSwitchUp,
  kDegradeLink,
  kRestoreLink,
  kPfcStormStart,
  kPfcStormStop
};
bool ParseFaultKind(const std::string& s, FaultKind* k);

struct FaultSpec {
  TimeNs at_ns = 0;
  FaultKind kind = FaultKind::kLinkDown;
  std::string target;            // link id, switch id or NIC id
  double capacity_factor = 1.0;  // kDegradeLink: fraction of nominal capacity kept
  double error_rate = 0;         // kDegradeLink: fraction of bytes lost to errors
  int priority = 3;              // kPfcStorm*
  TimeNs period_ns = 0;          // kLinkFlap: time down then up
  int count = 1;                 // kLinkFlap: number of down/up cycles
};

class Fabric {
 public:
  // Builds the fabric; returns nullptr and sets `error` when the topology cannot be used.
  static std::unique_ptr<Fabric> Create(const loom::v1::Topology& topo, const FabricOptions& opt,
                                        std::string* error);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  // ------------------------------------------------------------ running
  TimeNs now() const { return now_; }
  TimeNs step_ns() const { return opt_.step_ns; }
  void Step();
  // Steps (fast-forwarding where quiescent, see FabricOptions::fast_forward) until
  // now() >= t.
  void RunUntil(TimeNs t);
  // One step, or (fast_forward on and the fabric quiescent or idle) one jump of several
  // steps that never passes `limit`. Returns now().
  TimeNs Advance(TimeNs limit);
  // Steps until every job is done or `limit` is reached; true when all are done.
  bool RunUntilJobsDone(TimeNs limit);
  // Flow-hop updates done so far (cost measure for benchmarks).
  uint64_t flow_hop_updates() const { return flow_hop_updates_; }
  const FastForwardStats& fast_forward_stats() const { return ff_stats_; }

  // ------------------------------------------------------------ workloads
  // Adds a job; it starts at spec.start_ns (or now, if later). Returns its index.
  int AddJob(const JobSpec& spec, std::string* error);
  int job_count() const;
  JobStatus GetJob(int job) const;
  bool AllJobsDone() const;
  // Every QP (ordered by id).
  std::vector<QpInfo> GetQps() const;
  QpInfo GetQp(int qp) const;
  int qp_count() const;
  // Low-level: a single flow of `bytes` (0 = unbounded) from NIC/GPU src to dst.
  // Returns the QP id. `dest_qp` 0 = assigned.
  int AddFlow(const std::string& src, const std::string& dst, double bytes, int priority = 3,
              double max_rate_bps = 0, uint32_t dest_qp = 0, uint32_t color = 0);
  // Stops a flow started with AddFlow (its remaining bytes are abandoned).
  void StopFlow(int qp);

  // ------------------------------------------------------------ faults
  Status SetLinkUp(const std::string& link_id, bool up);
  Status SetSwitchUp(const std::string& device, bool up);
  // Keeps `capacity_factor` of the nominal capacity and loses `error_rate` of the bytes.
  Status DegradeLink(const std::string& link_id, double capacity_factor, double error_rate);
  // The NIC sends PFC pause for `priority` forever (a stuck receiver) until stopped.
  Status SetPfcStorm(const std::string& nic, int priority, bool on);
  // Runs a fault at spec.at_ns (or now, if in the past).
  Status ScheduleFault(const FaultSpec& spec);

  // ------------------------------------------------------------ counters (read)
  Status GetInterfaceCounters(const std::string& device, const std::string& iface,
                              InterfaceCounters* out) const;
  Status GetQueueCounters(const std::string& device, const std::string& iface, int queue,
                          QueueCounters* out) const;
  Status GetPfcCounters(const std::string& device, const std::string& iface, int priority,
                        PfcCounters* out) const;
  Status GetWatchdogCounters(const std::string& device, const std::string& iface, int queue,
                             WatchdogCounters* out) const;
  Status GetNicCounters(const std::string& nic, NicCounters* out) const;
  Status GetAlbCounters(const std::string& device, const std::string& dest,
                        std::vector<AlbBucketCounters>* out) const;
  // Bytes a NIC (or the NIC of a GPU) has sent over the fabric to each destination NIC
  // (NVLink transfers excluded), cumulative, by destination NIC id; a destination
  // appears once the NIC has a QP to it. The per-destination sum of the NIC's per-QP
  // send counters.
  Status GetNicPeerCounters(const std::string& nic, std::vector<PeerCounters>* out) const;
  // Every interface of a device, in topology order.
  std::vector<std::string> Interfaces(const std::string& device) const;
  // Every device id (switches and NICs), in topology order.
  std::vector<std::string> Devices() const;
  // Current utilisation (served / capacity over the last step) of an egress interface.
  double LinkUtilization(const std::string& device, const std::string& iface) const;

  // ------------------------------------------------------------ config (write)
  // Applied at the next step. `device` "*" = every switch.
  Status SetForwardingMode(const std::string& device, ForwardingMode mode);
  // Mode for one ECMP group (device, destination leaf); overrides the switch mode.
  Status SetGroupMode(const std::string& device, const std::string& dest, ForwardingMode mode);
  Status SetDlbProfile(const std::string& device, const DlbProfile& profile);
  Status SetHashDestQp(const std::string& device, bool on);
  Status SetSprayPriorities(const std::string& device, uint8_t mask);
  // Replaces the ALB bucket table of group (device, dest): bucket i -> interface.
  Status SetAlbTable(const std::string& device, const std::string& dest,
                     const std::vector<std::string>& buckets);
  // An ALB table of `buckets` buckets spread round-robin over the group members.
  Status InitAlbTable(const std::string& device, const std::string& dest, int buckets);
  // Weighted ECMP for group (device, dest): interface -> weight (GLB). Empty = clear.
  Status SetEcmpWeights(const std::string& device, const std::string& dest,
                        const std::map<std::string, double>& weights);
  // Static route: at switch `device`, traffic towards leaf `dest_leaf` leaves by
  // `interfaces` (ECMP over the live ones; links to switches) instead of the shortest-path
  // members; empty `interfaces` removes it. A route may be non-minimal (down to another
  // leaf and up again: a scenario can build a cyclic buffer dependency); a path that loops
  // is unreachable. Colors, DLB and weights then choose among these members.
  Status SetStaticRoute(const std::string& device, const std::string& dest_leaf,
                        const std::vector<std::string>& interfaces);
  // Up-down routing: static routes keep only their minimal next hops (in a Clos every
  // shortest path goes up, then down, so no cyclic buffer dependency can form); a static
  // route left with none falls back to the shortest-path members.
  void SetUpDownRouting(bool on);
  Status SetColor(const std::string& device, uint32_t color, const ColorConfig& cfg);
  Status RemoveColor(const std::string& device, uint32_t color);
  // Colors the traffic of a job (0 = uncolored).
  Status SetJobColor(const std::string& job_id, uint32_t color);
  // Per-destination colored route (BGP-DPF colored routes, used by TELB to pin each
  // (job, destination NIC) to a spine): at switch `device`, traffic towards NIC (or GPU)
  // `dest_nic` of priority `traffic_class` (-1 = any class) uses only the ECMP members
  // that belong to `color` (a color defined on `device` with SetColor: its
  // ColorConfig.interfaces); when none of them is live (or the device does not know the
  // color) it uses `backup_color`'s members (0 = no backup); when neither has a live
  // member, every ECMP member. A route wins over the QP/job color; a class-specific
  // route wins over a -1 route for the same destination. Replaces an existing route for
  // (device, dest_nic, traffic_class, qp_mask, qp_value). Applied at the next step
  // (traffic re-routes). QP split: a route with qp_mask != 0 covers only the QPs whose
  // destination QP number q has (q & qp_mask) == qp_value; among a destination's routes
  // of one class the one with the most mask bits that matches wins, and a QP no route
  // of its class matches falls to the -1 routes, then to its QP/job color.
  // kNotFound for an unknown switch or NIC, kInvalidArgument for color 0, a class
  // outside -1..7 or a qp_value with bits outside qp_mask.
  Status SetRoute(const std::string& device, const std::string& dest_nic, uint32_t color,
                  uint32_t backup_color, int traffic_class = -1, uint32_t qp_mask = 0,
                  uint32_t qp_value = 0);
  // Removes the route for (device, dest_nic, traffic_class, qp_mask, qp_value);
  // kNotFound when there is none.
  Status RemoveRoute(const std::string& device, const std::string& dest_nic, int traffic_class = -1,
                     uint32_t qp_mask = 0, uint32_t qp_value = 0);
  // Removes every route of `device` ("*" = every switch).
  Status ClearRoutes(const std::string& device);
  // Number of routes installed on `device` (0 for an unknown device).
  size_t RouteCount(const std::string& device) const;
  Status SetEcn(const std::string& device, int priority, const EcnConfig& cfg);
  Status SetPfc(const std::string& device, const PfcConfig& cfg);
  // The shared packet buffer of `device` (or "*"), bytes (dynamic thresholds use it).
  Status SetBuffer(const std::string& device, double bytes);
  // How switch `device`'s buffer divides into reserved headroom and the shared pool, and
  // the minimum headroom its ports need (2 x propagation and 2 steps at line rate + 2 MTU).
  Status GetBufferInfo(const std::string& device, BufferInfo* out) const;
  Status SetWatchdog(const std::string& device, const WatchdogConfig& cfg);
  Status SetDcqcn(const std::string& nic, const DcqcnParams& params);
  // A NIC's ("*": every NIC's) congestion-control algorithm; its QPs keep their state
  // where the algorithm allows, else start afresh at line rate.
  Status SetCongestionControl(const std::string& nic, std::shared_ptr<const CongestionControl> cc);
  // How `nic` (or "*") treats out-of-order arrivals of sprayed packets.
  Status SetNicReorder(const std::string& nic, ReorderMode mode);
  const SwitchConfig* GetSwitchConfig(const std::string& device) const;

  // ------------------------------------------------------------ helpers
  // The static 5-tuple hash a switch computes (exposed for tests and tools).
  uint64_t FlowHash(const std::string& device, int qp) const;
  // Egress members (interfaces) of group (device, dest leaf), live ones only.
  std::vector<std::string> GroupMembers(const std::string& device, const std::string& dest);
  const FabricOptions& options() const { return opt_; }

  // Implementation state (opaque; defined in fabric.cc).
  struct Impl;

 private:
  explicit Fabric(const FabricOptions& opt);

  FabricOptions opt_;
  TimeNs now_ = 0;
  uint64_t flow_hop_updates_ = 0;
  FastForwardStats ff_stats_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_FABRIC_H_
