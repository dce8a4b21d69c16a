// Private to sim-fabric: the engine state (Fabric::Impl) shared by the files that make
// up the Fabric: fabric.cc (construction, the public API: counters and configuration),
// fabric_step.cc (one engine step: events, NIC sources, queues and ECN marking, hops and
// delivery, PFC, watchdog, jobs) and fabric_fastforward.cc (quiescent jumps). Building the
// model from a topology and routing (groups, colors, hashing, DLB/ALB choice, path walks)
// are the struct's inline members below. Not installed, not included outside sim-fabric.
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
    double step_oos = 0;  // out-of-sequence packets the receiver saw in the last step
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
    double path_latency_ns = 0;  // the route's physical latency (propagation, switches)
    TimeNs min_inactivity = kNever, last_send = -kNever, next_spray = 0;
    int spray_node = -1;
    std::vector<int> pfs;
    std::vector<double> w;
    TimeNs cnp_delay = 0, last_cnp = -kNever;
    double mark_acc = 0;
    DcqcnRp rp;
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

  explicit Impl(Fabric* fab) : f(fab), rng(fab->opt_.seed) {}

  const FabricOptions& opt() const { return f->opt_; }
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
  bool Build(const loom::v1::Topology& t, std::string* error) {
    topo = t;
    for (const auto& d : t.devices()) {
      if (d.role() == loom::v1::DEVICE_ROLE_HOST) continue;
      Node n;
      n.id = d.id();
      n.role = d.role();
      n.is_switch = d.role() != loom::v1::DEVICE_ROLE_NIC;
      n.cfg = opt().switch_defaults;
      n.hash_seed = SplitMix64(opt().seed ^ SplitMix64(nodes.size() + 17));
      node_by_id[n.id] = static_cast<int>(nodes.size());
      if (!n.is_switch) {
        Nic nic;
        nic.node = static_cast<int>(nodes.size());
        nic.host = d.host();
        nic.line_bps = static_cast<double>(d.line_rate_bps());
        nic.params = opt().dcqcn;
        nic.reorder = opt().nic_reorder;
        n.nic = static_cast<int>(nics.size());
        nics.push_back(nic);
      }
      nodes.push_back(std::move(n));
    }
    for (int li = 0; li < t.links_size(); ++li) {
      const auto& l = t.links(li);
      auto a = node_by_id.find(l.a().device()), b = node_by_id.find(l.b().device());
      if (a == node_by_id.end() || b == node_by_id.end()) {
        *error = "link " + l.id() + " names an unknown device";
        return false;
      }
      link_by_id[l.id()] = li;
      const int pa = static_cast<int>(ports.size()), pb = pa + 1;
      for (int side = 0; side < 2; ++side) {
        Port p;
        p.node = side == 0 ? a->second : b->second;
        p.peer_node = side == 0 ? b->second : a->second;
        p.peer_port = side == 0 ? pb : pa;
        p.link = li;
        p.iface = side == 0 ? l.a().interface() : l.b().interface();
        p.nominal_bps = p.cap_bps = static_cast<double>(l.capacity_bps());
        p.delay = l.propagation_delay_ns();
        nodes[p.node].ports.push_back(static_cast<int>(ports.size()));
        nodes[p.node].port_by_iface[p.iface] = static_cast<int>(ports.size());
        ports.push_back(p);
      }
      link_ports.push_back(pa);
    }
    for (auto& nic : nics) {
      Node& n = nodes[nic.node];
      if (n.ports.size() != 1) {
        *error = "NIC " + n.id + " must have exactly one link";
        return false;
      }
      nic.port = n.ports[0];
      nic.leaf_node = ports[nic.port].peer_node;
      if (nic.line_bps <= 0 || nic.line_bps > ports[nic.port].cap_bps) {
        nic.line_bps = ports[nic.port].cap_bps;
      }
      if (nodes[nic.leaf_node].leaf < 0) {
        nodes[nic.leaf_node].leaf = static_cast<int>(leaves.size());
        leaves.push_back(nic.leaf_node);
      }
    }
    for (const auto& g : t.gpus()) {
      auto it = node_by_id.find(g.nic());
      if (it == node_by_id.end() || nodes[it->second].nic < 0) {
        *error = "GPU " + g.id() + " names an unknown NIC";
        return false;
      }
      gpu_nic[g.id()] = nodes[it->second].nic;
      gpu_host[g.id()] = g.host();
    }
    buf.assign(nodes.size(), 0.0);
    RefreshLive();
    queues.resize(ports.size() * kPriorities);
    ingress.resize(ports.size() * kPriorities);
    active_q.Reset(queues.size());
    next_q.Reset(queues.size());
    active_ing.Reset(ingress.size());
    for (size_t n = 0; n < nodes.size(); ++n) ApplyPortThresholds(static_cast<int>(n));
    ArmWatchdog();
    return true;
  }

  // Derives per-port ECN/PFC thresholds from the node's config and port speeds.
  void ApplyPortThresholds(int node) {
    Node& n = nodes[node];
    for (int p : n.ports) {
      Port& pt = ports[p];
      const double speed = pt.nominal_bps / 100e9;
      double max_kmax = 0;
      for (int pr = 0; pr < kPriorities; ++pr) {
        const EcnConfig& e = n.cfg.ecn[pr];
        pt.ecn_on[pr] = n.is_switch && e.enabled;
        pt.kmin[pr] = e.kmin_bytes > 0 ? e.kmin_bytes : 100e3 * speed;
        pt.kmax[pr] = e.kmax_bytes > 0 ? e.kmax_bytes : 400e3 * speed;
        pt.pmax[pr] = e.pmax;
        for (const auto& b : e.by_speed) {
          if (b.speed_bps != pt.nominal_bps) continue;
          pt.kmin[pr] = b.kmin_bytes;
          pt.kmax[pr] = b.kmax_bytes;
          pt.pmax[pr] = b.pmax;
        }
        if (pt.ecn_on[pr]) max_kmax = std::max(max_kmax, pt.kmax[pr]);
      }
      const PfcConfig& c = n.cfg.pfc;
      pt.sw = n.is_switch;
      pt.pfc_on = c.enabled;
      pt.lossless = c.lossless_mask;
      pt.dyn_alpha = c.dynamic_alpha;
      pt.lossy_alpha = n.cfg.lossy_alpha;
      if (max_kmax == 0) max_kmax = 400e3 * speed;
      pt.xoff = c.xoff_bytes > 0 ? c.xoff_bytes : 1.25 * max_kmax;
      pt.xon = c.xon_bytes > 0 ? c.xon_bytes : std::max(0.0, pt.xoff - 4 * opt().mtu_bytes);
      pt.headroom = c.headroom_bytes > 0 ? c.headroom_bytes : MinHeadroom(pt);
      pt.quanta_ns = static_cast<TimeNs>(c.quanta * 512.0 * 1e9 / std::max(1.0, pt.nominal_bps));
      pt.ecn_mask = 0;
      for (int pr = 0; pr < kPriorities; ++pr) {
        if (pt.ecn_on[pr]) pt.ecn_mask |= static_cast<uint8_t>(1u << pr);
      }
      SetCap(pt, pt.cap_bps);
    }
    // Headroom is reserved per lossless ingress queue out of the buffer; the rest is the
    // shared pool that dynamic thresholds divide and the lossy classes use.
    n.reserved = 0;
    for (int p : n.ports) {
      const Port& pt = ports[p];
      if (!n.is_switch || !pt.pfc_on) continue;
      n.reserved += pt.headroom * static_cast<double>(__builtin_popcount(pt.lossless));
    }
    const double total = n.cfg.buffer_bytes > 0 ? n.cfg.buffer_bytes : n.reserved + 64e6;
    for (int p : n.ports) ports[p].buffer = std::max(0.0, total - n.reserved);
  }

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

  void ArmWatchdog() {
    next_wd_poll = kNever;
    for (const Node& n : nodes) {
      if (n.is_switch && n.cfg.watchdog.enabled) {
        next_wd_poll = std::min(next_wd_poll, now() + n.cfg.watchdog.poll_ns);
      }
    }
  }

  // ---------------------------------------------------------------- routing
  // Applies a pending routing change (static routes, links, colors, modes): distances,
  // groups, and every routed QP's path (a DLB flow keeps its member where it still may).
  void ApplyPendingRouting() {
    if (!routing_dirty) return;
    routing_dirty = false;
    RecomputeDistances();
    for (Qp& qp : qps) {
      if (qp.routed && !qp.local) Route(qp, /*keep_dlb=*/true);
    }
  }

  void RecomputeDistances() {
    const int nn = static_cast<int>(nodes.size());
    dist.assign(leaves.size() * nn, -1);
    std::vector<int> frontier;
    for (size_t l = 0; l < leaves.size(); ++l) {
      int* d = &dist[l * nn];
      if (!nodes[leaves[l]].up) continue;
      d[leaves[l]] = 0;
      frontier.assign(1, leaves[l]);
      for (size_t i = 0; i < frontier.size(); ++i) {
        const int u = frontier[i];
        for (int p : nodes[u].ports) {
          const int v = ports[p].peer_node;
          if (!nodes[v].is_switch || d[v] >= 0 || !PortLive(p)) continue;
          d[v] = d[u] + 1;
          frontier.push_back(v);
        }
      }
    }
    group_cache.assign(leaves.size() * nn, {});
    group_valid.assign(leaves.size() * nn, 0);
  }

  const std::vector<int>& Group(int node, int leaf) {
    const size_t k = static_cast<size_t>(leaf) * nodes.size() + node;
    if (!group_valid[k]) {
      group_valid[k] = 1;
      auto& g = group_cache[k];
      g.clear();
      const int* d = &dist[static_cast<size_t>(leaf) * nodes.size()];
      auto sr = static_routes.find(GroupKey(node, leaf));
      if (sr != static_routes.end()) {
        for (int p : sr->second) {
          const int v = ports[p].peer_node;
          if (!nodes[v].is_switch || !PortLive(p)) continue;
          if (up_down && !(d[node] > 0 && d[v] == d[node] - 1)) continue;
          g.push_back(p);
        }
      }
      if (g.empty() && d[node] > 0) {
        for (int p : nodes[node].ports) {
          const int v = ports[p].peer_node;
          if (nodes[v].is_switch && PortLive(p) && d[v] == d[node] - 1) g.push_back(p);
        }
      }
    }
    return group_cache[k];
  }

  const GroupCfg* FindGroup(int node, int leaf) const {
    auto it = groups.find(GroupKey(node, leaf));
    return it == groups.end() ? nullptr : &it->second;
  }
  GroupCfg* FindGroup(int node, int leaf) {
    auto it = groups.find(GroupKey(node, leaf));
    return it == groups.end() ? nullptr : &it->second;
  }

  uint64_t Hash(int node, const Qp& qp, int salt) const {
    const Node& n = nodes[node];
    uint64_t h = n.hash_seed;
    h = HashCombine(h, static_cast<uint64_t>(nics[qp.src].node));  // source IP
    h = HashCombine(h, static_cast<uint64_t>(nics[qp.dst].node));  // destination IP
    h = HashCombine(h, qp.sport);                                  // UDP source port
    h = HashCombine(h, 4791);                                      // RoCEv2 UDP port
    h = HashCombine(h, 17);
    if (n.cfg.hash_dest_qp) h = HashCombine(h, qp.dest_qp);
    if (salt) h = HashCombine(h, static_cast<uint64_t>(salt) * 0x51ed27);
    return h;
  }

  double PortLoadBps(int p) {
    Port& pt = ports[p];
    const DlbProfile& prof = nodes[pt.node].cfg.dlb;
    const TimeNs span = now() - pt.ewma_t;
    if (span >= prof.sample_ns && span > 0) {
      const double inst = (pt.out_octets - pt.ewma_bytes) * 8e9 / static_cast<double>(span);
      const double a = 1 - std::exp(-static_cast<double>(span) / prof.load_ewma_ns);
      pt.ewma_bps += a * (inst - pt.ewma_bps);
      pt.provisional_bps *= (1 - a);
      pt.ewma_t = now();
      pt.ewma_bytes = pt.out_octets;
    }
    return pt.ewma_bps + pt.provisional_bps;
  }

  // DLB quality band 0 (worst) .. 7 (best) of an egress port.
  int Quality(int p) {
    const Port& pt = ports[p];
    const DlbProfile& prof = nodes[pt.node].cfg.dlb;
    const double util = PortLoadBps(p) / std::max(1.0, pt.cap_bps);
    double depth = 0;
    for (int pr = 0; pr < kPriorities; ++pr) depth += queues[p * kPriorities + pr].q;
    const int lb = 7 - std::min(7, static_cast<int>(util * 8));
    const int qb = 7 - std::min(7, static_cast<int>(depth / std::max(1.0, prof.queue_band_bytes)));
    return std::clamp(static_cast<int>(std::lround(prof.load_weight * std::max(0, lb) +
                                                   (1 - prof.load_weight) * std::max(0, qb))),
                      0, 7);
  }

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
  void ColorFilter(int node, const Qp& qp, const std::vector<int>& members, std::vector<int>* out) {
    *out = members;
    const Node& n = nodes[node];
    const RouteEntry* route = nullptr;
    for (int cls : {qp.prio, -1}) {
      if (n.routes.empty() || route) break;
      auto r = n.routes.find(RouteKey(qp.dst, cls));
      if (r == n.routes.end()) continue;
      for (const RouteEntry& e : r->second) {
        if ((qp.dest_qp & e.qp_mask) == e.qp_value) {
          route = &e;
          break;
        }
      }
    }
    if (route) {
      std::vector<int> sel;
      for (uint32_t c : {route->color, route->backup_color}) {
        ColorMembers(n, c, members, &sel);
        if (!sel.empty()) {
          *out = std::move(sel);
          return;
        }
      }
      return;  // neither color has a live member here: every ECMP member
    }
    if (qp.color == 0) return;
    uint32_t color = qp.color;
    for (int depth = 0; depth < 8 && color != 0; ++depth) {
      auto it = n.colors.find(color);
      if (it == n.colors.end()) return;  // switch does not know the color: uncolored
      std::vector<int> sel;
      ColorMembers(n, color, members, &sel);
      if (!sel.empty()) {
        *out = std::move(sel);
        return;
      }
      color = it->second.second;
    }
  }

  ForwardingMode ModeFor(int node, int leaf, const Qp& qp) const {
    const Node& n = nodes[node];
    if (n.cfg.spray_mask & (1u << qp.prio)) return ForwardingMode::kDlbPerPacket;
    const GroupCfg* g = FindGroup(node, leaf);
    if (g && g->has_mode) return g->mode;
    return n.cfg.mode;
  }

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
  int Choose(int node, int leaf, Qp& qp, int salt, int prefer, int* alb_slot) {
    const std::vector<int>& members = Group(node, leaf);
    if (members.empty()) return -1;
    std::vector<int> allowed;
    ColorFilter(node, qp, members, &allowed);
    const uint64_t h = Hash(node, qp, salt);
    ForwardingMode mode = ModeFor(node, leaf, qp);
    GroupCfg* g = FindGroup(node, leaf);
    if (mode == ForwardingMode::kDlbPerPacket) mode = ForwardingMode::kStaticHash;  // salted
    switch (mode) {
      case ForwardingMode::kDlbFlowlet:
      case ForwardingMode::kDlbAlb: {
        qp.dlb = true;
        const TimeNs inactivity = nodes[node].cfg.dlb.inactivity_ns;
        qp.min_inactivity = std::min(qp.min_inactivity, inactivity);
        auto has = [](const std::vector<int>& v, int p) {
          return std::find(v.begin(), v.end(), p) != v.end();
        };
        // kDlbAlb: the flow's bucket (flowset entry); -1 = no table (plain flowlet DLB).
        GroupCfg* table = nullptr;
        size_t bucket = 0;
        int cur = -1;
        bool cur_colored = false;  // the bucket's member is live but outside the QP's colors
        if (mode == ForwardingMode::kDlbAlb && g && !g->alb.empty()) {
          table = g;
          bucket = h % table->alb.size();
          cur = table->alb[bucket];
          cur_colored = !has(allowed, cur) && has(members, cur);
        }
        // GLB weights: remote quality band per member (see above); max_w 0 = none.
        auto weight = [g](int p) {
          auto it = g->weights.find(p);
          return it == g->weights.end() ? 0.0 : it->second;
        };
        double max_w = 0;
        if (g && !g->weights.empty()) {
          for (int p : allowed) max_w = std::max(max_w, weight(p));
          if (max_w > 0) {
            allowed.erase(std::remove_if(allowed.begin(), allowed.end(),
                                         [&](int p) { return !(weight(p) > 0); }),
                          allowed.end());
          }
        }
        int slot = -1;
        if (table && !cur_colored) {
          slot = table->alb_base + static_cast<int>(bucket);
          if (has(allowed, cur) && (prefer >= 0 || now() - alb_seen[slot] < inactivity)) {
            *alb_slot = slot;
            return cur;  // follow the bucket
          }
        } else if (prefer >= 0 && has(allowed, prefer)) {
          return prefer;
        }
        const size_t n = allowed.size();
        int best = -1, best_q = -1;
        for (size_t i = 0; i < n; ++i) {
          const int p = allowed[(h + i) % n];
          int qv = Quality(p);
          if (max_w > 0) {
            qv = std::min(qv, static_cast<int>(std::floor(7.0 * weight(p) / max_w)));
          }
          if (qv > best_q) {
            best_q = qv;
            best = p;
          }
        }
        double r = qp.rp.rate_bps();
        if (qp.cap_bps > 0) r = std::min(r, qp.cap_bps);
        PortLoadBps(best);
        ports[best].provisional_bps += r;
        if (slot >= 0) {
          // DLB's choice becomes the bucket's member; the bucket is in use from now.
          table->alb[bucket] = best;
          alb_seen[slot] = now();
          *alb_slot = slot;
        }
        return best;
      }
      case ForwardingMode::kAlb:
        if (g && !g->alb.empty()) {
          const size_t b = h % g->alb.size();
          const int p = g->alb[b];
          if (std::find(allowed.begin(), allowed.end(), p) != allowed.end()) {
            *alb_slot = g->alb_base + static_cast<int>(b);
            return p;
          }
        }
        [[fallthrough]];
      default:
        break;
    }
    if (g && !g->weights.empty()) {
      double total = 0;
      for (int p : allowed) {
        auto it = g->weights.find(p);
        total += it == g->weights.end() ? 0 : it->second;
      }
      if (total > 0) {
        double x = static_cast<double>(h >> 11) * 0x1.0p-53 * total;
        for (int p : allowed) {
          auto it = g->weights.find(p);
          const double w = it == g->weights.end() ? 0 : it->second;
          if (x < w) return p;
          x -= w;
        }
      }
    }
    return allowed[h % allowed.size()];
  }

  // Walks from the QP's source to its destination; returns egress ports (first
  // is the NIC port) or empty when unreachable. `spray_at` receives the node
  // index where spraying applies (first such switch), or -1.
  std::vector<int> Walk(Qp& qp, int salt, int spray_member, const std::vector<int>* prefer,
                        int* spray_at, std::vector<int>* albs) {
    std::vector<int> out;
    const Nic& s = nics[qp.src];
    const Nic& d = nics[qp.dst];
    if (!PortLive(s.port) || !PortLive(d.port)) return out;
    out.push_back(s.port);
    albs->push_back(-1);
    int node = s.leaf_node;
    const int dleaf = nodes[d.leaf_node].leaf;
    for (int guard = 0; node != d.leaf_node; ++guard) {
      if (guard > kMaxHops - 2) return {};
      const std::vector<int>& members = Group(node, dleaf);
      if (members.empty()) return {};
      int alb = -1, p = -1;
      if (ModeFor(node, dleaf, qp) == ForwardingMode::kDlbPerPacket && members.size() > 1 &&
          (*spray_at < 0 || *spray_at == node)) {
        if (*spray_at < 0) *spray_at = node;
        if (spray_member >= 0) {
          std::vector<int> allowed;
          ColorFilter(node, qp, members, &allowed);
          p = allowed[static_cast<size_t>(spray_member) % allowed.size()];
        }
      }
      if (p < 0) {
        const size_t idx = out.size();
        const int pref = prefer && idx < prefer->size() ? (*prefer)[idx] : -1;
        p = Choose(node, dleaf, qp, salt, pref, &alb);
      }
      if (p < 0) return {};
      out.push_back(p);
      albs->push_back(alb);
      node = ports[p].peer_node;
    }
    // Last hop: leaf -> destination NIC.
    out.push_back(d.port);  // placeholder, replaced below
    out.back() = ports[d.port].peer_port;
    albs->push_back(-1);
    if (static_cast<int>(out.size()) > kMaxHops) return {};
    return out;
  }

  int AllocPf() {
    if (!free_pfs.empty()) {
      int i = free_pfs.back();
      free_pfs.pop_back();
      pfs[i] = PathFlow{};
      return i;
    }
    pfs.emplace_back();
    return static_cast<int>(pfs.size()) - 1;
  }

  // Removes a path flow's bytes from the network; returns them. Bytes on a dead
  // port are dropped (counted) and not returned.
  double Evacuate(PathFlow& pf, int from_hop, double* dropped) {
    double moved = 0;
    for (int h = from_hop; h < pf.n; ++h) {
      Hop& hp = pf.h[h];
      const double x = hp.b + hp.in;
      if (x <= 0) continue;
      Queue& q = queues[hp.q];
      q.q = std::max(0.0, q.q - hp.b);
      q.arr = std::max(0.0, q.arr - hp.in);
      const int port = hp.q / kPriorities;
      if (hp.ing >= 0) ReleaseIngress(hp.ing, ports[port].node, x);
      if (!PortLive(port)) {
        q.drop += x;
        ports[port].out_discards += x;
        *dropped += x;
      } else {
        moved += x;
      }
      hp.b = hp.in = 0;
    }
    return moved;
  }

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
  void Route(Qp& qp, bool keep_dlb) {
    qp.routed = true;
    unsteady = true;
    if (qp.local) return;
    qp.dlb = false;
    qp.min_inactivity = kNever;
    int spray_at = -1;
    std::vector<std::vector<int>> paths, albs(1);
    const std::vector<int>* prefer =
        keep_dlb && !qp.last_ports.empty() ? &qp.last_ports[0] : nullptr;
    paths.push_back(Walk(qp, 0, -1, prefer, &spray_at, &albs[0]));
    int k = 1;
    if (spray_at >= 0 && !paths[0].empty()) {
      const int dleaf = nodes[nics[qp.dst].leaf_node].leaf;
      std::vector<int> allowed;
      ColorFilter(spray_at, qp, Group(spray_at, dleaf), &allowed);
      k = static_cast<int>(allowed.size());
      paths.clear();
      albs.assign(k, {});
      for (int i = 0; i < k; ++i) {
        int sa = -1;
        paths.push_back(Walk(qp, i + 1, i, nullptr, &sa, &albs[i]));
      }
    }
    qp.spray_node = spray_at;
    // Gather what is in flight on the old path flows.
    double residual = 0, dropped = 0;
    std::vector<int> old = qp.pfs;
    qp.pfs.clear();
    qp.last_ports.clear();
    qp.w.clear();
    for (int i = 0; i < k; ++i) {
      if (paths[i].empty()) continue;
      int pi;
      int first_diff = 0;
      if (static_cast<size_t>(i) < old.size()) {
        pi = old[i];
        PathFlow& pf = pfs[pi];
        while (first_diff < pf.n && first_diff < static_cast<int>(paths[i].size()) &&
               pf.h[first_diff].q / kPriorities == paths[i][first_diff] &&
               PortLive(paths[i][first_diff])) {
          ++first_diff;
        }
        residual += Evacuate(pf, first_diff, &dropped);
      } else {
        pi = AllocPf();
      }
      PathFlow& pf = pfs[pi];
      pf.qp = qp.id;
      const int n = static_cast<int>(paths[i].size());
      // Unchanged hops keep their bytes; their bucket slot may still change (a resized
      // table, or a mode change), so the bucket counters follow the new choice.
      for (int h = 0; h < first_diff; ++h) pf.h[h].alb = albs[i][h];
      for (int h = first_diff; h < n; ++h) {
        pf.h[h] = Hop{};
        pf.h[h].q = paths[i][h] * kPriorities + qp.prio;
        pf.h[h].ing = h == 0 ? -1 : ports[paths[i][h - 1]].peer_port * kPriorities + qp.prio;
        pf.h[h].alb = albs[i][h];
      }
      pf.n = n;
      qp.pfs.push_back(pi);
      qp.last_ports.push_back(paths[i]);
      qp.w.push_back(1.0 / k);
    }
    MarkPrivateHops(qp);
    for (size_t i = qp.pfs.size(); i < old.size(); ++i) {
      residual += Evacuate(pfs[old[i]], 0, &dropped);
      free_pfs.push_back(old[i]);
    }
    if (!qp.pfs.empty() && residual > 0) {
      // Re-inject what was in flight at the first switch of the new path.
      PathFlow& pf = pfs[qp.pfs[0]];
      Admit(pf, std::min(1, pf.n - 1), residual, qp);
    } else {
      dropped += residual;
    }
    if (dropped > 0) {
      qp.sent = std::max(0.0, qp.sent - dropped);  // go-back-N resend
      // An idle QP of a gated job is re-activated by its gate update.
      if (!qp.active && qp.job >= 0 && qp.transfer >= 0 && jobs[qp.job].gated) {
        MarkTransfer(qp.job, qp.transfer);
      }
    }
    // Data: the links' propagation, each switch's latency and store and forward of one
    // MTU at its ingress rate, less the one step per hop after the first switch the
    // engine's pipeline already takes.
    qp.credit_delay = 0;
    if (!qp.last_ports.empty() && !qp.last_ports[0].empty()) {
      const auto& path = qp.last_ports[0];
      const int switches = static_cast<int>(path.size()) - 1;
      double phys = 0;
      for (size_t i = 0; i < path.size(); ++i) {
        phys += static_cast<double>(ports[path[i]].delay);
        if (static_cast<int>(i) < switches) {
          phys += static_cast<double>(opt().switch_latency_ns) +
                  opt().mtu_bytes * 8e9 / std::max(1.0, ports[path[i]].nominal_bps);
        }
      }
      qp.path_latency_ns = phys;
      const double inherent = static_cast<double>(std::max(0, switches - 1) * dt());
      qp.credit_delay = static_cast<TimeNs>(std::max(0.0, std::round(phys - inherent)));
    }
    // CNP return delay: propagation of every link plus the per-switch latency.
    qp.cnp_delay = 0;
    if (!qp.last_ports.empty()) {
      for (int p : qp.last_ports[0]) qp.cnp_delay += ports[p].delay + opt().cnp_hop_latency_ns;
    }
    if (k > 1) UpdateSprayWeights(qp);
  }

  // Sub-flows' stream variability and the hops not every sub-flow crosses.
  void MarkPrivateHops(Qp& qp) {
    const size_t k = qp.pfs.size();
    if (k > 1) spray_jitter = true;
    for (size_t i = 0; i < k; ++i) {
      PathFlow& pf = pfs[qp.pfs[i]];
      pf.c2 = k > 1 ? 1 - qp.w[i] : 0;
      pf.private_hops = 0;
      if (k < 2) continue;
      for (int h = 0; h < pf.n; ++h) {
        bool everywhere = true;
        for (size_t j = 0; j < k && everywhere; ++j) {
          if (j == i) continue;
          const PathFlow& o = pfs[qp.pfs[j]];
          bool found = false;
          for (int g = 0; g < o.n && !found; ++g) found = o.h[g].q == pf.h[h].q;
          everywhere = found;
        }
        if (!everywhere) pf.private_hops |= 1u << h;
      }
    }
  }

  void UpdateSprayWeights(Qp& qp) {
    if (qp.spray_node < 0 || qp.pfs.size() < 2) return;
    double total = 0;
    for (size_t i = 0; i < qp.pfs.size(); ++i) {
      const PathFlow& pf = pfs[qp.pfs[i]];
      int port = -1;
      for (int h = 0; h < pf.n; ++h) {
        if (ports[pf.h[h].q / kPriorities].node == qp.spray_node) port = pf.h[h].q / kPriorities;
      }
      qp.w[i] = port >= 0 ? Quality(port) + 1 : 1;
      total += qp.w[i];
    }
    for (size_t i = 0; i < qp.w.size(); ++i) {
      qp.w[i] /= total;
      pfs[qp.pfs[i]].c2 = 1 - qp.w[i];
    }
    qp.next_spray = now() + nodes[qp.spray_node].cfg.dlb.sample_ns;
  }

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
