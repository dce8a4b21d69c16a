// Private to sim-fabric: the engine state (Fabric::Impl) shared by the files that make
// up the Fabric, one per part of the model:
//   fabric.cc             construction and the public API (counters and configuration);
//   fabric_build.cc       nodes, ports and NICs from a topology; buffers, ECN/PFC
//                         thresholds per port speed and reserved headroom; the watchdog;
//   fabric_routing.cc     distances and ECMP groups, static / up-down routes, the member
//                         choice (hash, GLB weights, ALB, DLB, spraying, colors), path walks
//                         and a QP's path flows;
//   fabric_step.cc        one step: events (feedback, PFC frames, faults, jobs), NIC
//                         sources, queues and their congestion point, hops and delivery,
//                         reordering, the notification point, PFC, watchdog;
//   fabric_fastforward.cc quiescent jumps.
// Congestion control is behind congestion_control.h (DCQCN: dcqcn.h, called directly on
// the hot path); reordering is reorder.h. The hot per-step helpers (Admit, ingress
// release) stay inline here. Not installed, not included outside sim-fabric.
#ifndef LOOM_SIM_FABRIC_FABRIC_IMPL_H_
#define LOOM_SIM_FABRIC_FABRIC_IMPL_H_

#include <algorithm>
#include <bit>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim-fabric/fabric.h"
#include "sim-fabric/reorder.h"
#include "sim-fabric/workload.h"

namespace loom::sim {

namespace fabric_internal {

inline constexpr int kMaxHops = 8;
inline constexpr double kEps = 1e-6;
inline constexpr TimeNs kNever = std::numeric_limits<TimeNs>::max() / 4;
inline constexpr double kInf = std::numeric_limits<double>::infinity();

inline double BytesPerStep(double bps, TimeNs dt) { return bps * static_cast<double>(dt) / 8e9; }

// True when two per-step byte amounts differ by more than rounding noise.
inline bool Changed(double a, double b) {
  return std::abs(a - b) > 1e-9 * std::max(std::abs(a), std::abs(b));
}

}  // namespace fabric_internal
using namespace fabric_internal;  // NOLINT(google-build-using-namespace): private header

// ============================================================================ state

struct Fabric::Impl {
  // One direction of a link: the egress side at `node`, toward `peer_node`.
  struct Port {
    // Hot (step loop) fields first.
    int node = -1, peer_node = -1, peer_port = -1, link = -1;
    bool live = true;     // admin up and both ends up (cached)
    bool sw = false;      // `node` is a switch
    bool pfc_on = false;  // cached from the node's PfcConfig
    uint8_t lossless = 0;
    uint8_t ecn_mask = 0;              // priorities with ECN marking on (bit per priority)
    double cap_bps = 0, cap_step = 0;  // capacity and capacity x step in bytes (cached)
    double error_rate = 0;
    double out_octets = 0, in_octets = 0;
    TimeNs served_t = -1;
    double served = 0;
    double dyn_alpha = 0, lossy_alpha = 1, buffer = 0;
    double xoff = 0, xon = 0, headroom = 0;
    TimeNs quanta_ns = 0;  // PFC pause time of the node's quanta at this port's speed
    // Effective per-port thresholds (from the switch config and the port speed).
    double kmin[kPriorities] = {}, kmax[kPriorities] = {}, pmax[kPriorities] = {};
    bool ecn_on[kPriorities] = {};
    double nominal_bps = 0;
    TimeNs delay = 0;
    bool admin_up = true;
    double out_discards = 0, in_discards = 0, in_errors = 0;
    uint64_t carrier = 0;
    // DLB load estimate.
    double ewma_bps = 0, ewma_bytes = 0, provisional_bps = 0;
    TimeNs ewma_t = 0;
    std::string iface;
  };
  // Hot fields in the first cache line.
  struct alignas(64) Queue {
    double q = 0, arr = 0, s = 0, p = 0, tx = 0;
    TimeNs paused_until = 0;
    bool active = false, dropping = false;
    WatchdogState wd = WatchdogState::kOperational;
    double marked = 0;
    // Packet-level jitter (sim-fabric/reorder.h), kept only while a QP is sprayed: this
    // step's sum of squared stream arrivals and of arrivals x their c^2, and from the last
    // step that served the queue, its arrivals and waiting time.
    double arr_sq = 0, arr_c2 = 0;
    double jit_arr = 0;
    TimeNs jit_t = -1;
    reorder::Wait jit;
    double drop = 0, wm = 0;
    TimeNs pause_start = -1, last_pfc_rx = -kNever;
    double pause_ns = 0;
    uint64_t pfc_rx = 0;
    TimeNs wd_since = -1;
    uint64_t wd_detected = 0, wd_restored = 0;
  };
  struct Ingress {
    double bytes = 0;
    // Of `bytes`, what sits in this (port, lossless priority)'s reserved headroom (not in
    // the shared buffer).
    double hdrm = 0;
    bool active = false, asserted = false;
    TimeNs next_refresh = 0, assert_t = 0;
    uint64_t pfc_tx = 0;
    double tx_pause_ns = 0;
  };
  struct GroupCfg {
    bool has_mode = false;
    ForwardingMode mode = ForwardingMode::kStaticHash;
    std::map<int, double> weights;  // port -> weight
    std::vector<int> alb;           // bucket -> port
    int alb_base = -1;              // first slot in alb_bytes_
  };
  // One colored route: the destination's QPs q with (q & qp_mask) == qp_value.
  struct RouteEntry {
    uint32_t qp_mask = 0, qp_value = 0;
    uint32_t color = 0, backup_color = 0;
  };
  static int64_t RouteKey(int dest_nic, int traffic_class) {
    return static_cast<int64_t>(dest_nic) * 16 + (traffic_class + 1);
  }
  struct Node {
    std::string id;
    loom::v1::DeviceRole role = loom::v1::DEVICE_ROLE_UNSPECIFIED;
    bool is_switch = false, up = true;
    std::vector<int> ports;
    std::map<std::string, int> port_by_iface;
    SwitchConfig cfg;
    // Headroom reserved out of the buffer for the lossless ingress queues (bytes).
    double reserved = 0;
    int nic = -1, leaf = -1;
    uint64_t hash_seed = 0;
    std::map<uint32_t, std::pair<std::vector<int>, uint32_t>> colors;
    // Per-destination colored routes (SetRoute): RouteKey(dest NIC, class) -> entries,
    // the ones with more qp_mask bits first (the first that matches a QP wins).
    std::map<int64_t, std::vector<RouteEntry>> routes;
  };
  struct Nic {
    int node = -1, port = -1, leaf_node = -1;
    std::string host;
    double line_bps = 0;
    DcqcnParams params;
    // Congestion control (congestion_control.h): the algorithm, whether it is on, and what
    // its notification point needs from a delivery.
    std::shared_ptr<const CongestionControl> cc;
    bool cc_on = true, np_every = false, np_rtt = false;
    // The algorithm is DCQCN: the step calls its reaction point and notification point
    // directly (no virtual dispatch on the hot path; every QP of the NIC has a
    // DcqcnRateControl).
    bool dcqcn = false;
    ReorderMode reorder = ReorderMode::kGoBackN;
    std::vector<int> active;  // active QPs
    // QPs this NIC sends on over the fabric (not NVLink), in creation order
    // (GetNicPeerCounters); QPs are never removed.
    std::vector<int> fabric_qps;
    uint8_t storm_mask = 0;
    double np_cnp_sent = 0, np_marked = 0, rp_handled = 0, rp_ignored = 0, oos = 0, tx = 0, rx = 0,
           storm_events = 0, reorder_discarded = 0;
    // Transmit bursts (NicCounters::tx_bursts ...): end of the last step in which the NIC
    // sent on the wire (-1 = never), bursts started, idle ns between bursts, and the lowest
    // per-QP send rate of the latest burst (0 = none sampled yet).
    TimeNs tx_busy_until = -1;
    uint64_t tx_bursts = 0;
    TimeNs tx_idle_ns = 0;
    double tx_min_rate_bps = 0;
    // A step (or a jump) starting at `t` sends: a new burst when the NIC sent nothing in
    // the step before.
    void TxBusy(TimeNs t, TimeNs until) {
      if (tx_busy_until < t) {
        if (tx_busy_until >= 0) tx_idle_ns += t - tx_busy_until;
        ++tx_bursts;
        tx_min_rate_bps = 0;
      }
      tx_busy_until = until;
    }
    void TxRate(double bps) {
      if (bps > 0 && (tx_min_rate_bps == 0 || bps < tx_min_rate_bps)) tx_min_rate_bps = bps;
    }
  };
  struct Hop {
    int q = -1, ing = -1, alb = -1;
    double b = 0, in = 0;
  };
  struct PathFlow {
    int qp = -1, n = 0;
    Hop h[kMaxHops];
    double delivered = 0, marked_prob = 0;
    // Arrival variability of this stream (reorder.h): 1 - weight for a sub-flow of a
    // randomly sprayed QP, 0 for a paced flow; and the hops (bit h) that not every
    // sub-flow of the QP crosses (a queue all of them cross keeps their order).
    double c2 = 0;
    uint32_t private_hops = 0;
  };
  // Hot (step loop) fields first.
  struct Qp {
    int id = 0, job = -1, transfer = -1;
    int src = -1, dst = -1;  // NIC indexes
    int prio = 3;
    bool local = false, active = false, routed = false, dlb = false, stopped = false;
    double quota = 0, sent = 0, delivered = 0, cap_bps = 0, send_bps = 0;
    // Last step, for quiescence detection (fast-forward): bytes sent and delivered, the
    // demand before the NIC's fair sharing and the rate cap without the quota limit (b/s).
    double step_bytes = 0, step_got = 0, demand_bps = 0, rate_cap_bps = 0;
    double step_oos = 0;   // out-of-sequence packets the receiver saw in the last step
    double spray_bps = 0;  // the last rate it sent at (packet spacing of what arrives)
    double lifetime_sent = 0, lifetime_delivered = 0;
    // AddFlow flows: when added, and the end of the step that delivered the last byte.
    TimeNs start_ns = 0, finish_ns = -1;
    // Bytes that reached the last hop and are still on their way to the receiving NIC
    // (propagation, switch latency, store and forward beyond what the engine's one hop per
    // step already takes): credited at `due`. credit_delay is set with the route.
    struct Arrival {
      TimeNs due;
      double bytes, arrived, marked;  // kept, on the wire, ECN-marked
    };
    std::deque<Arrival> in_flight;
    TimeNs credit_delay = 0;
    // How much longer the engine's pipeline (one step per hop after the first switch) is
    // than the path's physical latency, when it is (steps longer than the path): the last
    // byte physically arrived that much before the engine delivers it (finish_ns).
    TimeNs pipeline_excess_ns = 0;
    double path_latency_ns = 0;  // the route's physical latency (propagation, switches)
    TimeNs min_inactivity = kNever, last_send = -kNever, next_spray = 0;
    int spray_node = -1;
    std::vector<int> pfs;
    std::vector<double> w;
    TimeNs cnp_delay = 0;  // the return path's latency (feedback)
    NpQpState np;          // the receiver's notification point for this QP
    // The reaction point: DCQCN's inline (the default algorithm, no pointer to chase in the
    // step), any other algorithm's behind `other_rp`. Rc() is the one in use.
    DcqcnRateControl dcqcn_rp{DcqcnParams{}, 0, 0};
    std::unique_ptr<RateControl> other_rp;
    RateControl& Rc() { return other_rp ? *other_rp : static_cast<RateControl&>(dcqcn_rp); }
    const RateControl& Rc() const {
      return other_rp ? *other_rp : static_cast<const RateControl&>(dcqcn_rp);
    }
    // Feedback in flight to the sender that is more than a bare CNP, oldest at fb_head;
    // its events carry fb_gen, bumped when the QP's algorithm is replaced (what was in
    // flight for the old one is dropped).
    std::vector<CcFeedback> feedback;
    size_t fb_head = 0;
    int fb_gen = 1;
    uint32_t dest_qp = 0, sport = 0;
    uint32_t color = 0;
    double total = 0;
    std::vector<std::vector<int>> last_ports;  // per subflow, for DLB stickiness
    uint64_t cnps = 0;
  };
  struct Transfer {
    TransferTemplate t;
    std::vector<int> qps;
    double delivered = 0;
    bool done = false;
  };
  struct Job {
    // Gated transfers whose gate delivered bytes this step (bit per transfer index),
    // and for each transfer the transfers it gates.
    std::vector<uint64_t> gate_dirty;
    std::vector<std::vector<int>> dependents;
    bool any_dirty = false;
    JobSpec spec;
    JobStatus st;
    std::vector<int> rank_nic;
    std::vector<std::string> rank_host;
    std::vector<TransferTemplate> tmpl;
    std::vector<std::vector<int>> tmpl_qps;
    std::vector<Transfer> cur;
    std::vector<double> rate;  // fast-forward scratch: bytes delivered per step, per transfer
    bool running = false, gated = false;
    int pending = 0;
    TimeNs iter_start = 0;
  };
  enum EventKind { kCnp, kPfcFrame, kFault, kJobIter };
  struct Event {
    TimeNs t;
    uint64_t seq;
    int kind, a, b;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };

  Fabric* f;
  loom::v1::Topology topo;
  std::vector<Node> nodes;
  std::vector<Port> ports;
  std::vector<Queue> queues;
  std::vector<Ingress> ingress;
  std::vector<Nic> nics;
  std::vector<Qp> qps;
  std::vector<PathFlow> pfs;
  std::vector<int> free_pfs;
  std::vector<Job> jobs;
  std::vector<FaultSpec> faults;
  std::map<std::string, int> node_by_id, link_by_id, gpu_nic;
  std::map<std::string, std::string> gpu_host;
  std::vector<int> link_ports;  // link -> port on side a (peer is side b)
  std::vector<int> leaves;      // leaf index -> node
  std::vector<int> dist;        // leaf * nodes + node
  std::vector<std::vector<int>> group_cache;
  std::vector<char> group_valid;
  std::map<int64_t, GroupCfg> groups;
  // Static routes (SetStaticRoute): GroupKey(switch, destination leaf) -> egress ports, in
  // place of the shortest-path members; `up_down` keeps only their minimal next hops (a
  // Clos's shortest paths go up, then down: no cyclic buffer dependency).
  std::map<int64_t, std::vector<int>> static_routes;
  bool up_down = false;
  std::vector<double> alb_bytes;
  // Per bucket slot (parallel to alb_bytes): when bytes last arrived for the bucket (kDlbAlb:
  // a bucket is idle, and DLB may re-choose its member, after the inactivity time).
  std::vector<TimeNs> alb_seen;
  std::vector<double> buf;  // shared buffer in use, per node
  // A list of distinct indexes with a fixed capacity (no allocation in the step loop).
  struct IndexList {
    std::vector<int> v;
    size_t n = 0;
    void Reset(size_t cap) {
      v.assign(cap, 0);
      n = 0;
    }
    void Push(int x) { v[n++] = x; }
    void Swap(IndexList& o) {
      v.swap(o.v);
      std::swap(n, o.n);
    }
  };
  IndexList active_q, next_q, active_ing;
  std::vector<int> active_qps, active_nics, storm_nics, dirty_jobs;
  struct Demand {
    double bps;
    int qp;
    double prev;  // bytes the QP sent in the previous step
  };
  std::vector<Demand> dem;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  uint64_t seq = 0;
  Rng rng;
  bool routing_dirty = true;
  // The switches' congestion point (FabricOptions::congestion_point, or RED/ECN).
  RedEcnPoint red_ecn;
  const CongestionPoint* cp = &red_ecn;
  // Some QP is (or was) sprayed: queues keep the arrival statistics of packet-level jitter.
  bool spray_jitter = false;
  // Deliver's scratch for a sprayed QP's paths.
  std::vector<double> sp_w, sp_base;
  std::vector<reorder::PathJitter> sp_jit;
  // Quiescence tracking for fast-forward: `unsteady` is set by anything in a step that is
  // not a linear continuation of the previous step; `streak` counts steps without it.
  bool unsteady = true;
  int streak = 0;
  TimeNs ff_retry_at = 0;
  int ff_backoff = 1;
  // The last check found steps [check time, ff_valid_until) quiescent; cleared by any
  // executed step and by any API write.
  bool ff_valid = false;
  TimeNs ff_valid_until = 0;
  TimeNs next_wd_poll = kNever;
  uint32_t next_dest_qp = 0x100;

  explicit Impl(Fabric* fab) : f(fab), rng(fab->opt_.seed) {
    if (fab->opt_.congestion_point) cp = fab->opt_.congestion_point.get();
  }

  const FabricOptions& opt() const { return f->opt_; }
  static void SetNicCc(Nic& nic, std::shared_ptr<const CongestionControl> cc) {
    nic.cc = std::move(cc);
    nic.cc_on = nic.cc->enabled();
    nic.np_every = nic.cc->notification_point().every_delivery();
    nic.np_rtt = nic.cc->notification_point().needs_rtt();
    const auto* d = dynamic_cast<const DcqcnCongestionControl*>(nic.cc.get());
    nic.dcqcn = d != nullptr;
    if (d) nic.params = d->params();  // NewRp builds DCQCN's reaction points from these
  }
  TimeNs now() const { return f->now_; }
  TimeNs dt() const { return f->opt_.step_ns; }

  void Push(TimeNs t, int kind, int a, int b) { events.push({t, seq++, kind, a, b}); }

  bool PortLive(int p) const { return ports[p].live; }
  void RefreshLive() {
    for (Port& pt : ports) pt.live = pt.admin_up && nodes[pt.node].up && nodes[pt.peer_node].up;
  }
  int64_t GroupKey(int node, int leaf) const {
    return static_cast<int64_t>(node) * 1'000'003 + leaf;
  }

  // ---------------------------------------------------------------- building
  bool Build(const loom::v1::Topology& t, std::string* error);

  // Derives per-port ECN/PFC thresholds from the node's config and port speeds.
  void ApplyPortThresholds(int node);

  // The least headroom for port `p`: what arrives while a PAUSE takes effect, two
  // propagation delays and two engine steps at line rate, plus two MTUs.
  double MinHeadroom(const Port& pt) const {
    return BytesPerStep(pt.nominal_bps, 2 * pt.delay + 2 * dt()) + 2 * opt().mtu_bytes;
  }

  // Bytes leave ingress queue `ing` of switch `node`: headroom first, then the shared pool.
  void ReleaseIngress(int ing, int node, double x) {
    Ingress& in = ingress[ing];
    const double h = std::min(in.hdrm, x);
    in.hdrm -= h;
    in.bytes = std::max(0.0, in.bytes - x);
    buf[node] = std::max(0.0, buf[node] - (x - h));
  }

  void SetCap(Port& pt, double bps) {
    pt.cap_bps = bps;
    pt.cap_step = BytesPerStep(bps, dt());
  }

  void ArmWatchdog();

  // ---------------------------------------------------------------- routing
  // Applies a pending routing change (static routes, links, colors, modes): distances,
  // groups, and every routed QP's path (a DLB flow keeps its member where it still may).
  void ApplyPendingRouting();

  void RecomputeDistances();

  const std::vector<int>& Group(int node, int leaf);

  const GroupCfg* FindGroup(int node, int leaf) const {
    auto it = groups.find(GroupKey(node, leaf));
    return it == groups.end() ? nullptr : &it->second;
  }
  GroupCfg* FindGroup(int node, int leaf) {
    auto it = groups.find(GroupKey(node, leaf));
    return it == groups.end() ? nullptr : &it->second;
  }

  uint64_t Hash(int node, const Qp& qp, int salt) const;

  double PortLoadBps(int p);

  // DLB quality band 0 (worst) .. 7 (best) of an egress port.
  int Quality(int p);

  // The members of `members` that belong to `color` on `node` (empty when the node
  // does not know the color or none of its members is in the group).
  void ColorMembers(const Node& n, uint32_t color, const std::vector<int>& members,
                    std::vector<int>* sel) const {
    sel->clear();
    if (color == 0) return;
    auto it = n.colors.find(color);
    if (it == n.colors.end()) return;
    for (int p : members) {
      if (std::find(it->second.first.begin(), it->second.first.end(), p) !=
          it->second.first.end()) {
        sel->push_back(p);
      }
    }
  }

  // Members of a group allowed for a QP: a per-destination route (SetRoute) of the
  // node for the QP's destination NIC and class wins (its color, else its backup
  // color, else every member); otherwise the QP's color (backup colors followed).
  void ColorFilter(int node, const Qp& qp, const std::vector<int>& members, std::vector<int>* out);

  ForwardingMode ModeFor(int node, int leaf, const Qp& qp) const;

  // Picks the egress port at `node` toward `leaf`; -1 when unreachable.
  // Members are first narrowed to those the QP may use (ColorFilter). Then by mode:
  //  - kDlbFlowlet: the flowlet's current member (`prefer`) if still allowed, else the
  //    allowed member of best quality (ties: first in hash order). With group weights
  //    (SetEcmpWeights, Loom's GLB) the switch combines its local port quality with the
  //    remote path quality the weights carry, as global load balancing does: a member's
  //    effective quality is min(Quality(p), floor(7 x w(p) / max w over the allowed
  //    members)); members of weight 0 (or without a weight) are not allowed while
  //    another allowed member has a weight > 0. Without weights (or all 0): unchanged.
  //  - kAlb: the hash's bucket's member when allowed, else as static hash.
  //  - kDlbAlb (DLB and ALB on one group; without a bucket table, as kDlbFlowlet): the
  //    hash's bucket of the group's table is the flowset entry, shared by every flow that
  //    hashes to it. Its member is followed while it is allowed (after the GLB weight
  //    filter) and either the QP is between flowlet boundaries (`prefer` >= 0: a reroute,
  //    e.g. after SetAlbTable moved the bucket, so the flow moves at once) or bytes
  //    arrived for the bucket within the inactivity time (another flow keeps it busy). Otherwise
  //    (an idle bucket at a flowlet boundary or for a new flow, or a member that died or
  //    lost its GLB weight) the member is chosen as in kDlbFlowlet and written into the
  //    bucket. A bucket member that is live but outside the QP's colors: kDlbFlowlet
  //    without the bucket (nothing written or counted).
  //  - kStaticHash (and kDlbPerPacket subflows, salted): weighted by the group weights
  //    when they sum to > 0 over the allowed members, else plain hash over them.
  int Choose(int node, int leaf, Qp& qp, int salt, int prefer, int* alb_slot);

  // Walks from the QP's source to its destination; returns egress ports (first
  // is the NIC port) or empty when unreachable. `spray_at` receives the node
  // index where spraying applies (first such switch), or -1.
  std::vector<int> Walk(Qp& qp, int salt, int spray_member, const std::vector<int>* prefer,
                        int* spray_at, std::vector<int>* albs);

  int AllocPf();

  // Removes a path flow's bytes from the network; returns them. Bytes on a dead
  // port are dropped (counted) and not returned.
  double Evacuate(PathFlow& pf, int from_hop, double* dropped);

  // Admits `x` bytes of a path flow at hop `h` (ingress accounting, PFC headroom
  // or shared-buffer limit; the excess is a counted drop).
  [[gnu::always_inline]] inline void Admit(PathFlow& pf, int h, double x, Qp& qp) {
    Hop& hp = pf.h[h];
    // The switch looks the bytes up as they arrive: their bucket is in use now.
    if (hp.alb >= 0) alb_seen[hp.alb] = now();
    double accepted = x;
    if (hp.ing >= 0) {
      Port& ip = ports[hp.ing / kPriorities];  // ingress port, same switch as the egress
      if (ip.sw) {
        double& used = buf[ip.node];
        Ingress& in = ingress[hp.ing];
        double to_hdrm = 0;
        if (ip.pfc_on && (ip.lossless & (1u << qp.prio))) {
          // Up to xOFF in the shared pool, the rest in this queue's reserved headroom.
          const double xoff =
              ip.dyn_alpha > 0 ? ip.dyn_alpha * std::max(0.0, ip.buffer - used) : ip.xoff;
          const double to_shared = std::min(x, std::max(0.0, xoff - (in.bytes - in.hdrm)));
          to_hdrm = std::min(x - to_shared, std::max(0.0, ip.headroom - in.hdrm));
          accepted = to_shared + to_hdrm;
        } else {
          const Queue& q = queues[hp.q];
          const double limit = ip.lossy_alpha * std::max(0.0, ip.buffer - used);
          accepted = std::min(x, std::max(0.0, limit - q.q - q.arr));
        }
        if (accepted < x) {
          unsteady = true;
          const double drop = x - accepted;
          queues[hp.q].drop += drop;
          ip.in_discards += drop;
          qp.sent = std::max(0.0, qp.sent - drop);
        }
        if (accepted <= 0) return;
        in.bytes += accepted;
        in.hdrm += to_hdrm;
        used += accepted - to_hdrm;
        ActivateIngress(hp.ing);
      }
    }
    hp.in += accepted;
    Queue& q = queues[hp.q];
    q.arr += accepted;
    if (spray_jitter) {
      q.arr_sq += accepted * accepted;
      q.arr_c2 += accepted * pf.c2;
    }
    ActivateQueue(hp.q);
  }

  // (Re)builds the QP's path flows. Bytes in flight move to the new path at the
  // first hop that changed; bytes on dead ports are lost (and resent).
  void Route(Qp& qp, bool keep_dlb);

  // Sub-flows' stream variability and the hops not every sub-flow crosses.
  void MarkPrivateHops(Qp& qp);

  void UpdateSprayWeights(Qp& qp);

  // ---------------------------------------------------------------- step
  void ActivateQueue(int q) {
    if (!queues[q].active) {
      queues[q].active = true;
      next_q.Push(q);
    }
  }
  void ActivateIngress(int i) {
    if (!ingress[i].active) {
      ingress[i].active = true;
      active_ing.Push(i);
    }
  }
  // A gate of transfer `ti` of job `ji` moved: its dependents' quotas are
  // recomputed at the start of the next step (in transfer order).
  void MarkGateMoved(int ji, int ti) {
    Job& j = jobs[ji];
    for (int d : j.dependents[ti]) j.gate_dirty[d >> 6] |= uint64_t{1} << (d & 63);
    if (!j.any_dirty && !j.dependents[ti].empty()) {
      j.any_dirty = true;
      dirty_jobs.push_back(ji);
    }
  }
  void MarkTransfer(int ji, int ti) {
    Job& j = jobs[ji];
    if (ti >= static_cast<int>(j.cur.size())) return;
    j.gate_dirty[ti >> 6] |= uint64_t{1} << (ti & 63);
    if (!j.any_dirty) {
      j.any_dirty = true;
      dirty_jobs.push_back(ji);
    }
  }
  void UpdateGate(Job& j, int ti);
  void ActivateQp(Qp& qp) {
    if (qp.active) return;
    unsteady = true;
    qp.active = true;
    active_qps.push_back(qp.id);
    Nic& n = nics[qp.src];
    if (n.active.empty()) active_nics.push_back(qp.src);
    n.active.push_back(qp.id);
  }

  void Step();
  void ProcessEvents();
  void Sources();
  void QueuePass();
  void FlowPass();
  void PfcPass();
  void WatchdogPoll();
  // The QP's round trip now: twice its path's physical latency plus its sub-flows'
  // (weighted) queueing.
  double RoundTripNs(const Qp& qp) const {
    double queueing = 0;
    for (size_t i = 0; i < qp.pfs.size(); ++i) {
      const PathFlow& pf = pfs[qp.pfs[i]];
      double ns = 0;
      for (int h = 0; h < pf.n; ++h) {
        ns += queues[pf.h[h].q].q * 8e9 / std::max(1.0, ports[pf.h[h].q / kPriorities].cap_bps);
      }
      queueing += (i < qp.w.size() ? qp.w[i] : 1.0) * ns;
    }
    return 2 * qp.path_latency_ns + queueing;
  }
  // A new QP's reaction point, from its sending NIC's algorithm.
  void NewRp(Qp& qp) {
    const Nic& n = nics[qp.src];
    if (n.dcqcn) {
      qp.other_rp.reset();
      qp.dcqcn_rp = DcqcnRateControl(n.params, n.line_bps, now());
    } else {
      qp.other_rp = n.cc->NewRateControl(n.line_bps, now());
    }
  }
  // Gives NIC `ni` the algorithm `cc`; its QPs keep their state where `cc` allows.
  void ApplyCc(int ni, const std::shared_ptr<const CongestionControl>& cc) {
    SetNicCc(nics[ni], cc);
    for (auto& qp : qps) {
      if (qp.src != ni) continue;
      if (!cc->Reconfigure(&qp.Rc(), now())) {
        NewRp(qp);
        qp.feedback.clear();
        qp.fb_head = 0;
        ++qp.fb_gen;
      } else if (nics[ni].dcqcn) {
        qp.other_rp.reset();  // DCQCN's state is the inline one
      }
    }
  }
  [[gnu::always_inline]] inline void Deliver(Qp& qp);
  inline void CreditDue(Qp& qp);
  inline void Credit(Qp& qp, double got, double arrived, double marked);
  void OnPfcFrame(int qi, int quanta);
  void SendPfc(int ing_idx, int quanta);
  void StartIteration(int job);
  [[gnu::always_inline]] inline void TransferProgress(Qp& qp, double bytes);
  void RunFault(const FaultSpec& fs);
  void UpdateGates(Job& j);
  void RunDirtyGates();
  // A config write or API call: the next steps are not a continuation of the last ones.
  void Touch() {
    unsteady = true;
    streak = 0;
    ff_valid = false;
  }
  // Fast-forward: jumps over idle or quiescent steps (never reaching `limit`'s step or
  // an event's step); returns false when nothing was skipped.
  bool TryFastForward(TimeNs limit);
  // Steps over which the state stays linear (0: not quiescent; then `settle` > 0 says how
  // many more clean steps the longest active path needs before it can be).
  int64_t QuiescentHorizon(int64_t n_max, int* settle);
  void ApplyJump(int64_t n);
};

// Used by the step and by fast-forward jumps.
inline void Fabric::Impl::TransferProgress(Qp& qp, double bytes) {
  if (qp.job < 0) return;
  Job& j = jobs[qp.job];
  if (!j.running || qp.transfer < 0 || qp.transfer >= static_cast<int>(j.cur.size())) return;
  Transfer& tr = j.cur[qp.transfer];
  tr.delivered += bytes;
  if (j.gated) MarkGateMoved(qp.job, qp.transfer);
  if (!tr.done && tr.delivered >= tr.t.bytes - std::max(1e-3, tr.t.bytes * 1e-9)) {
    tr.done = true;
    unsteady = true;
    if (--j.pending == 0) {
      j.running = false;
      j.st.collective_ns.push_back(now() + dt() - j.iter_start);
      ++j.st.iterations_done;
      const int iters = j.spec.iterations;
      if (iters > 0 && j.st.iterations_done >= iters) {
        j.st.done = true;
        j.st.end_ns = now() + dt();
      } else {
        Push(now() + dt() + j.spec.compute_gap_ns, kJobIter, qp.job, 0);
      }
    }
  }
}

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_FABRIC_IMPL_H_
