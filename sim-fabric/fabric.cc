#include "sim-fabric/fabric.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <deque>
#include <limits>
#include <queue>
#include <set>
#include <utility>

#include "sim-fabric/workload.h"

namespace loom::sim {

namespace {

constexpr int kMaxHops = 8;
constexpr double kEps = 1e-6;
constexpr TimeNs kNever = std::numeric_limits<TimeNs>::max() / 4;
constexpr double kInf = std::numeric_limits<double>::infinity();

double BytesPerStep(double bps, TimeNs dt) { return bps * static_cast<double>(dt) / 8e9; }

// True when two per-step byte amounts differ by more than rounding noise.
bool Changed(double a, double b) {
  return std::abs(a - b) > 1e-9 * std::max(std::abs(a), std::abs(b));
}

}  // namespace

const char* ForwardingModeName(ForwardingMode m) {
  switch (m) {
    case ForwardingMode::kStaticHash:
      return "static";
    case ForwardingMode::kDlbFlowlet:
      return "dlb-flowlet";
    case ForwardingMode::kDlbPerPacket:
      return "dlb-per-packet";
    case ForwardingMode::kAlb:
      return "alb";
    case ForwardingMode::kDlbAlb:
      return "dlb-alb";
  }
  return "?";
}

bool ParseForwardingMode(const std::string& s, ForwardingMode* m) {
  if (s == "static" || s == "hash" || s == "ecmp")
    *m = ForwardingMode::kStaticHash;
  else if (s == "dlb-flowlet" || s == "flowlet" || s == "dlb")
    *m = ForwardingMode::kDlbFlowlet;
  else if (s == "dlb-per-packet" || s == "per-packet" || s == "spray")
    *m = ForwardingMode::kDlbPerPacket;
  else if (s == "alb")
    *m = ForwardingMode::kAlb;
  else if (s == "dlb-alb" || s == "dlb+alb")
    *m = ForwardingMode::kDlbAlb;
  else
    return false;
  return true;
}

const char* CollectiveName(Collective c) {
  switch (c) {
    case Collective::kRingAllReduce:
      return "ring-allreduce";
    case Collective::kTreeAllReduce:
      return "tree-allreduce";
    case Collective::kAllGather:
      return "allgather";
    case Collective::kReduceScatter:
      return "reduce-scatter";
    case Collective::kAllToAll:
      return "alltoall";
    case Collective::kIncast:
      return "incast";
    case Collective::kPermutation:
      return "permutation";
    case Collective::kPointToPoint:
      return "p2p";
  }
  return "?";
}

bool ParseCollective(const std::string& s, Collective* c) {
  for (int i = 0; i <= static_cast<int>(Collective::kPointToPoint); ++i) {
    if (s == CollectiveName(static_cast<Collective>(i))) {
      *c = static_cast<Collective>(i);
      return true;
    }
  }
  return false;
}

bool ParseFaultKind(const std::string& s, FaultKind* k) {
  static const std::pair<const char*, FaultKind> kNames[] = {
      {"link-down", FaultKind::kLinkDown},         {"link-up", FaultKind::kLinkUp},
      {"link-flap", FaultKind::kLinkFlap},         {"switch-down", FaultKind::kSwitchDown},
      {"switch-up", FaultKind::kSwitchUp},         {"degrade-link", FaultKind::kDegradeLink},
      {"restore-link", FaultKind::kRestoreLink},   {"pfc-storm-start", FaultKind::kPfcStormStart},
      {"pfc-storm-stop", FaultKind::kPfcStormStop}};
  for (const auto& [n, kind] : kNames) {
    if (s == n) {
      *k = kind;
      return true;
    }
  }
  return false;
}

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
    double lifetime_sent = 0, lifetime_delivered = 0;
    // AddFlow flows: when added, and the end of the step that delivered the last byte.
    TimeNs start_ns = 0, finish_ns = -1;
    // Bytes that reached the last hop and are still on their way to the receiving NIC
    // (propagation, switch latency, store and forward beyond what the engine's one hop per
    // step already takes): credited at `due`. credit_delay is set with the route.
    struct Arrival {
      TimeNs due;
      double bytes, marked;
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
    for (int p : n.ports) ports[p].buffer = std::max(0.0, n.cfg.buffer_bytes - n.reserved);
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
      if (d[node] > 0) {
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
    for (double& w : qp.w) w /= total;
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
  inline void Credit(Qp& qp, double got, double marked);
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

// ============================================================================ step

void Fabric::Impl::Step() {
  unsteady = false;
  ff_valid = false;
  ProcessEvents();
  if (routing_dirty) {
    routing_dirty = false;
    RecomputeDistances();
    for (Qp& qp : qps) {
      if (qp.routed && !qp.local) Route(qp, /*keep_dlb=*/true);
    }
  }
  if (now() >= next_wd_poll) WatchdogPoll();
  RunDirtyGates();
  Sources();
  QueuePass();
  FlowPass();
  PfcPass();
  streak = unsteady ? 0 : streak + 1;
}

void Fabric::Impl::RunDirtyGates() {
  // Gates: only the transfers whose gate delivered bytes last step (in transfer order).
  for (int ji : dirty_jobs) {
    Job& j = jobs[ji];
    j.any_dirty = false;
    const bool live = j.running && j.gated;
    for (size_t w = 0; w < j.gate_dirty.size(); ++w) {
      uint64_t bits = j.gate_dirty[w];
      j.gate_dirty[w] = 0;
      while (live && bits) {
        const int ti = static_cast<int>(w * 64) + __builtin_ctzll(bits);
        bits &= bits - 1;
        UpdateGate(j, ti);
      }
    }
  }
  dirty_jobs.clear();
}

void Fabric::Impl::ProcessEvents() {
  while (!events.empty() && events.top().t <= now()) {
    const Event e = events.top();
    events.pop();
    unsteady = true;
    switch (e.kind) {
      case kCnp: {
        Qp& qp = qps[e.a];
        qp.rp.AdvanceTo(now());
        Nic& n = nics[qp.src];
        if (qp.rp.OnCnp(now())) {
          n.rp_handled += 1;
          ++qp.cnps;
        } else {
          n.rp_ignored += 1;
        }
        break;
      }
      case kPfcFrame:
        OnPfcFrame(e.a, e.b);
        break;
      case kFault:
        RunFault(FaultSpec(faults[e.a]));  // a copy: RunFault may append to faults
        break;
      case kJobIter:
        StartIteration(e.a);
        break;
    }
  }
}

void Fabric::Impl::UpdateGate(Job& j, int ti) {
  Transfer& t = j.cur[ti];
  double allowed = t.t.bytes;
  if (!t.t.gates.empty()) {
    double m = kInf;
    for (int g : t.t.gates) m = std::min(m, j.cur[g].delivered);
    allowed = std::min(allowed, t.t.base + m);
  }
  const double per = allowed / static_cast<double>(t.qps.size());
  for (int id : t.qps) {
    Qp& qp = qps[id];
    qp.quota = per;
    if (!qp.active && qp.sent < per - kEps) ActivateQp(qp);
  }
}

void Fabric::Impl::UpdateGates(Job& j) {
  for (size_t ti = 0; ti < j.cur.size(); ++ti) UpdateGate(j, static_cast<int>(ti));
}

inline void Fabric::Impl::Deliver(Qp& qp) {
  double got = 0, marked = 0, lat_max = 0;
  const bool sprayed = qp.pfs.size() > 1;
  for (int pi : qp.pfs) {
    const PathFlow& pf = pfs[pi];
    got += pf.delivered;
    marked += pf.delivered * pf.marked_prob;
    if (sprayed && pf.delivered > 0) {
      double lat = 0;
      for (int h = 0; h < pf.n; ++h) {
        lat += queues[pf.h[h].q].q / std::max(1.0, ports[pf.h[h].q / kPriorities].cap_bps);
      }
      lat_max = std::max(lat_max, lat);
    }
  }
  qp.step_got = got;
  if (got <= 0) {
    if (!qp.in_flight.empty()) CreditDue(qp);
    return;
  }
  const double mtu = opt().mtu_bytes;
  Nic& dn = nics[qp.dst];
  double discarded = 0;
  if (sprayed) {
    // Packets of a faster path overtake those of the slowest: count them out of sequence;
    // a go-back-N receiver discards them and they are sent again.
    for (int pi : qp.pfs) {
      const PathFlow& pf = pfs[pi];
      if (pf.delivered <= 0) continue;
      double lat = 0;
      for (int h = 0; h < pf.n; ++h) {
        lat += queues[pf.h[h].q].q / std::max(1.0, ports[pf.h[h].q / kPriorities].cap_bps);
      }
      if (lat_max - lat > mtu / std::max(1.0, nics[qp.src].line_bps)) {
        dn.oos += pf.delivered / mtu;
        if (dn.reorder == ReorderMode::kGoBackN) discarded += pf.delivered;
      }
    }
  }
  if (discarded > 0) {
    unsteady = true;
    got -= discarded;
    dn.reorder_discarded += discarded;
    qp.sent = std::max(0.0, qp.sent - discarded);  // go-back-N resend
    if (!qp.active && qp.job >= 0 && qp.transfer >= 0 && jobs[qp.job].gated) {
      MarkTransfer(qp.job, qp.transfer);
    }
  }
  if (qp.credit_delay > 0) {
    qp.in_flight.push_back({now() + qp.credit_delay, got, marked});
    CreditDue(qp);
    return;
  }
  Credit(qp, got, marked);
}

inline void Fabric::Impl::CreditDue(Qp& qp) {
  // Credited in the step that contains the due instant (the engine reports a step's
  // arrivals at its end).
  while (!qp.in_flight.empty() && qp.in_flight.front().due < now() + dt()) {
    const Qp::Arrival a = qp.in_flight.front();
    qp.in_flight.pop_front();
    Credit(qp, a.bytes, a.marked);
  }
}

// Bytes (and the marked part of them) reach the receiving NIC: progress, completion, and
// the notification point.
inline void Fabric::Impl::Credit(Qp& qp, double got, double marked) {
  const double mtu = opt().mtu_bytes;
  Nic& dn = nics[qp.dst];
  dn.rx += got;
  qp.delivered += got;
  qp.lifetime_delivered += got;
  TransferProgress(qp, got);
  if (qp.job < 0 && qp.finish_ns < 0 && qp.lifetime_delivered >= qp.total - kEps) {
    qp.finish_ns = now() + dt();
  }
  if (marked <= 0) return;
  unsteady = true;
  const double pkts = got / mtu, mpkts = marked / mtu;
  dn.np_marked += mpkts;
  const DcqcnParams& np = dn.params;
  int cnps = 0;
  if (np.cnp_interval_ns <= 0) {
    qp.mark_acc += mpkts;
    cnps = static_cast<int>(std::min(16.0, std::floor(qp.mark_acc)));
    qp.mark_acc -= std::floor(qp.mark_acc);
  } else if (now() - qp.last_cnp >= np.cnp_interval_ns) {
    const double pm = marked / got;
    const double p_any = 1 - std::pow(1 - pm, pkts);
    if (rng.Uniform() < p_any) cnps = 1;
  }
  for (int i = 0; i < cnps; ++i) {
    qp.last_cnp = now();
    dn.np_cnp_sent += 1;
    if (nics[qp.src].params.enabled) Push(now() + qp.cnp_delay, kCnp, qp.id, 0);
  }
}

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

void Fabric::Impl::Sources() {
  const TimeNs t = now(), step = dt();
  const double intra_step = BytesPerStep(opt().intra_host_bps, step);
  size_t keep_nics = 0;
  for (size_t ni = 0; ni < active_nics.size(); ++ni) {
    const int nic_index = active_nics[ni];
    Nic& nic = nics[nic_index];
    Port& np = ports[nic.port];
    const bool nic_live = np.live;
    const Queue* nq = &queues[static_cast<size_t>(nic.port) * kPriorities];
    const bool rp_on = nic.params.enabled;
    dem.clear();
    // One pass: drop finished QPs from the NIC's active list and collect the demands
    // of the others.
    size_t keep = 0;
    for (size_t k = 0; k < nic.active.size(); ++k) {
      const int id = nic.active[k];
      Qp& qp = qps[id];
      const bool busy = !qp.stopped && (qp.sent < qp.quota - kEps || qp.sent - qp.delivered > kEps);
      if (!busy) {
        qp.active = false;
        qp.send_bps = 0;
        qp.step_bytes = qp.step_got = 0;
        unsteady = true;
        continue;
      }
      nic.active[keep++] = id;
      qp.send_bps = 0;
      const double prev = qp.step_bytes;
      qp.step_bytes = 0;
      qp.demand_bps = 0;
      if (!qp.routed) Route(qp, false);
      const double left = qp.quota - qp.sent;
      if (left <= kEps) {
        if (prev != 0) unsteady = true;
        continue;
      }
      if (qp.local) {
        const double b = std::min(left, intra_step);
        qp.rate_cap_bps = opt().intra_host_bps;
        qp.demand_bps = b == intra_step ? qp.rate_cap_bps : b * 8e9 / static_cast<double>(step);
        qp.step_bytes = qp.step_got = b;
        if (b != prev && Changed(b, prev)) unsteady = true;
        qp.sent += b;
        qp.delivered += b;
        qp.lifetime_sent += b;
        qp.lifetime_delivered += b;
        TransferProgress(qp, b);
        if (qp.job < 0 && qp.finish_ns < 0 && qp.lifetime_delivered >= qp.total - kEps) {
          qp.finish_ns = t + step;
        }
        continue;
      }
      if (qp.pfs.empty()) {
        if (prev != 0) unsteady = true;
        continue;
      }
      if (nq[qp.prio].paused_until > t || !nic_live) {
        unsteady = true;  // a pause expires without an event
        continue;
      }
      if (qp.rp.next_event_ns() <= t) qp.rp.AdvanceTo(t);
      double r = rp_on ? qp.rp.rate_bps() : std::min(nic.line_bps, np.cap_bps);
      if (qp.cap_bps > 0) r = std::min(r, qp.cap_bps);
      qp.rate_cap_bps = r;
      r = std::min(r, left * 8e9 / static_cast<double>(step));
      if (r > 0) {
        qp.demand_bps = r;
        dem.push_back({r, id, prev});
      } else if (prev != 0) {
        unsteady = true;
      }
    }
    nic.active.resize(keep);
    if (keep == 0) continue;
    active_nics[keep_nics++] = nic_index;
    if (dem.empty()) continue;
    nic.TxBusy(t, t + step);  // every demand is > 0: the NIC sends in this step
    const double line = std::min(nic.line_bps, np.cap_bps);
    double np_out = 0;
    // Water-filling: fair share of the line among QPs, each capped by its demand.
    if (dem.size() == 1) {
      if (dem[0].bps > line) dem[0].bps = line;
    } else {
      double sum = 0;
      for (const Demand& d : dem) sum += d.bps;
      if (sum > line) {
        std::sort(dem.begin(), dem.end(), [](const Demand& a, const Demand& b) {
          return a.bps != b.bps ? a.bps < b.bps : a.qp < b.qp;
        });
        double rem = line;
        for (size_t i = 0; i < dem.size(); ++i) {
          const double share = rem / static_cast<double>(dem.size() - i);
          dem[i].bps = std::min(dem[i].bps, share);
          rem -= dem[i].bps;
        }
      }
    }
    for (const Demand& d : dem) {
      Qp& qp = qps[d.qp];
      if (qp.dlb && t - qp.last_send >= qp.min_inactivity) Route(qp, false);  // flowlet boundary
      if (qp.spray_node >= 0 && t >= qp.next_spray) UpdateSprayWeights(qp);
      const double bytes = BytesPerStep(d.bps, step);
      qp.step_bytes = bytes;
      if (bytes != d.prev && Changed(bytes, d.prev)) unsteady = true;
      qp.last_send = t;
      qp.send_bps = d.bps;
      qp.sent += bytes;
      qp.lifetime_sent += bytes;
      nic.tx += bytes;
      // Packet spacing of this flow; a transfer's last (partial) step is no spacing.
      if (qp.sent < qp.total - kEps) nic.TxRate(d.bps);
      if (rp_on) qp.rp.OnBytesSent(bytes, t);
      // The NIC never queues (it sends at most its line rate and stops when
      // paused), so its egress hop is accounted here and bytes go straight to
      // the first switch.
      queues[nic.port * kPriorities + qp.prio].tx += bytes;
      np_out += bytes;
      if (qp.pfs.size() == 1) {
        Admit(pfs[qp.pfs[0]], 1, bytes * qp.w[0], qp);
      } else {
        for (size_t k = 0; k < qp.pfs.size(); ++k) {
          PathFlow& pf = pfs[qp.pfs[k]];
          Admit(pf, 1, bytes * qp.w[k], qp);
        }
      }
    }
    np.out_octets += np_out;
    ports[np.peer_port].in_octets += np_out;
    np.served_t = t;
    np.served = np_out;
  }
  active_nics.resize(keep_nics);
}

void Fabric::Impl::QueuePass() {
  const TimeNs t = now();
  active_q.Swap(next_q);
  next_q.n = 0;
  const int* list = active_q.v.data();
  const size_t count = active_q.n;
  for (size_t i = 0; i < count; ++i) {
    const int qi = list[i];
    Queue& q = queues[qi];
    q.active = false;
    const int port = qi / kPriorities, prio = qi % kPriorities;
    Port& pt = ports[port];
    const double total = q.q + q.arr;
    q.arr = 0;
    if (total <= 0) {
      q.s = 0;
      q.p = 0;
      q.q = 0;
      continue;
    }
    bool stormed = false;
    q.dropping = false;
    if (q.wd == WatchdogState::kStormed) {
      unsteady = true;
      const WatchdogAction action = nodes[pt.node].cfg.watchdog.action;
      stormed = action != WatchdogAction::kAlert;  // alert: detected, still paused
      q.dropping = action == WatchdogAction::kDrop;
    }
    double cap = pt.live ? pt.cap_step : 0;
    if (q.paused_until > t && !stormed) cap = 0;
    if (cap == 0) unsteady = true;
    if (q.dropping) cap = total;
    const double served = std::min(total, cap);
    q.s = served / total;
    q.q = total - served;
    if (q.dropping) {
      q.drop += served;
      pt.out_discards += served;
    } else if (served > 0) {
      q.tx += served;
      pt.out_octets += served;
      Port& peer = ports[pt.peer_port];
      if (pt.error_rate == 0) {
        peer.in_octets += served;  // served - served * 0
      } else {
        const double lost = served * pt.error_rate;
        peer.in_octets += served - lost;
        peer.in_errors += lost;
      }
      if (pt.served_t != t) {
        pt.served_t = t;
        pt.served = 0;
      }
      pt.served += served;
    }
    // RED/ECN on the depth left after this step's service.
    q.p = 0;
    if (q.q > 0) {
      double p = 0;
      if ((pt.ecn_mask & (1u << prio)) && q.q > pt.kmin[prio]) {
        p = q.q >= pt.kmax[prio]
                ? 1.0
                : pt.pmax[prio] * (q.q - pt.kmin[prio]) / (pt.kmax[prio] - pt.kmin[prio]);
      }
      q.p = p;
      q.marked += served * p;
      if (q.q > q.wm) q.wm = q.q;
      if (p > 0) unsteady = true;
      if (q.q > kEps) {
        unsteady = true;  // a standing queue: not quiescent
        q.active = true;
        next_q.Push(qi);
      }
    }
  }
}

void Fabric::Impl::FlowPass() {
  size_t keep = 0;
  uint64_t updates = 0;
  for (size_t i = 0; i < active_qps.size(); ++i) {
    Qp& qp = qps[active_qps[i]];
    if (!qp.active) continue;
    active_qps[keep++] = qp.id;
    if (qp.local) continue;
    for (int pi : qp.pfs) {
      PathFlow& pf = pfs[pi];
      pf.delivered = 0;
      for (int h = pf.n - 1; h >= 1; --h) {
        Hop& hp = pf.h[h];
        const double x = hp.b + hp.in;
        hp.in = 0;
        if (x <= 0) continue;
        ++updates;
        const Queue& q = queues[hp.q];
        const double d = x * q.s;
        hp.b = x - d;
        if (d <= 0) continue;
        const Port& pt = ports[hp.q / kPriorities];
        if (hp.ing >= 0) ReleaseIngress(hp.ing, pt.node, d);
        if (hp.alb >= 0) alb_bytes[hp.alb] += d;
        if (q.dropping) {
          unsteady = true;
          qp.sent = std::max(0.0, qp.sent - d);
          continue;
        }
        double ok = d;
        if (pt.error_rate != 0) {
          unsteady = true;
          const double lost = d * pt.error_rate;
          if (lost > 0) qp.sent = std::max(0.0, qp.sent - lost);
          ok = d - lost;
        }
        if (h == pf.n - 1) {
          pf.delivered += ok;
        } else {
          Admit(pf, h + 1, ok, qp);
        }
      }
      if (pf.delivered > 0) {
        double survive = 1;
        for (int h = 0; h < pf.n; ++h) survive *= 1 - queues[pf.h[h].q].p;
        pf.marked_prob = 1 - survive;
      }
    }
    Deliver(qp);
  }
  active_qps.resize(keep);
  f->flow_hop_updates_ += updates;
}

void Fabric::Impl::SendPfc(int ii, int quanta) {
  const int port = ii / kPriorities, prio = ii % kPriorities;
  Ingress& in = ingress[ii];
  ++in.pfc_tx;
  const Port& pt = ports[port];
  Push(now() + pt.delay, kPfcFrame, pt.peer_port * kPriorities + prio, quanta);
}

void Fabric::Impl::OnPfcFrame(int qi, int quanta) {
  Queue& q = queues[qi];
  const TimeNs t = now();
  ++q.pfc_rx;
  q.last_pfc_rx = t;
  if (q.pause_start >= 0 && q.paused_until <= t) {
    q.pause_ns += static_cast<double>(q.paused_until - q.pause_start);
    q.pause_start = -1;
  }
  if (quanta > 0) {
    if (q.pause_start < 0) q.pause_start = t;
    const double cap = std::max(1.0, ports[qi / kPriorities].nominal_bps);
    q.paused_until = t + static_cast<TimeNs>(quanta * 512.0 * 1e9 / cap);
  } else {
    if (q.pause_start >= 0) q.pause_ns += static_cast<double>(t - q.pause_start);
    q.pause_start = -1;
    q.paused_until = t;
  }
}

void Fabric::Impl::PfcPass() {
  const TimeNs t = now();
  size_t keep = 0;
  int* list = active_ing.v.data();
  for (size_t i = 0; i < active_ing.n; ++i) {
    const int ii = list[i];
    Ingress& in = ingress[ii];
    const Port& pt = ports[ii / kPriorities];
    const int prio = ii % kPriorities;
    if (pt.sw && pt.pfc_on && (pt.lossless & (1u << prio))) {
      double xoff = pt.xoff, xon = pt.xon;
      if (pt.dyn_alpha > 0) {
        xoff = pt.dyn_alpha * std::max(0.0, pt.buffer - buf[pt.node]);
        xon = std::max(0.0, xoff - (pt.xoff - pt.xon));
      }
      if (!in.asserted) {
        if (in.bytes > xoff) {
          const PfcConfig& pfc = nodes[pt.node].cfg.pfc;
          in.asserted = true;
          in.assert_t = t;
          SendPfc(ii, pfc.quanta);
          in.next_refresh = t + pt.quanta_ns / 2;
        }
      } else if (in.bytes < xon) {
        in.asserted = false;
        in.tx_pause_ns += static_cast<double>(t - in.assert_t);
        SendPfc(ii, 0);
      } else if (t >= in.next_refresh) {
        SendPfc(ii, nodes[pt.node].cfg.pfc.quanta);
        in.next_refresh = t + pt.quanta_ns / 2;
      }
    }
    if (in.asserted) unsteady = true;
    if (in.bytes > kEps || in.asserted) {
      list[keep++] = ii;
    } else {
      in.active = false;
    }
  }
  active_ing.n = keep;
  // Storming NICs keep pausing their leaf.
  if (!storm_nics.empty()) unsteady = true;
  for (int ni : storm_nics) {
    Nic& nic = nics[ni];
    for (int prio = 0; prio < kPriorities; ++prio) {
      if (!(nic.storm_mask & (1u << prio))) continue;
      Ingress& in = ingress[nic.port * kPriorities + prio];
      const TimeNs quanta_ns =
          static_cast<TimeNs>(65535 * 512.0 * 1e9 / std::max(1.0, ports[nic.port].nominal_bps));
      if (!in.asserted || t >= in.next_refresh) {
        if (!in.asserted) {
          in.assert_t = t;
          nic.storm_events += 1;
        }
        in.asserted = true;
        SendPfc(nic.port * kPriorities + prio, 65535);
        in.next_refresh = t + quanta_ns / 2;
      }
    }
  }
}

void Fabric::Impl::WatchdogPoll() {
  const TimeNs t = now();
  next_wd_poll = kNever;
  for (Node& n : nodes) {
    if (!n.is_switch || !n.cfg.watchdog.enabled) continue;
    const WatchdogConfig& wd = n.cfg.watchdog;
    next_wd_poll = std::min(next_wd_poll, t + wd.poll_ns);
    for (int p : n.ports) {
      for (int prio = 0; prio < kPriorities; ++prio) {
        if (!(n.cfg.pfc.lossless_mask & (1u << prio))) continue;
        Queue& q = queues[p * kPriorities + prio];
        if (q.wd == WatchdogState::kOperational) {
          if (q.paused_until > t && q.q > kEps) {
            if (q.wd_since < 0) {
              q.wd_since = t;
            } else if (t - q.wd_since >= wd.detection_ns) {
              q.wd = WatchdogState::kStormed;
              ++q.wd_detected;
              if (q.q > kEps) ActivateQueue(p * kPriorities + prio);
            }
          } else {
            q.wd_since = -1;
          }
        } else if (t - q.last_pfc_rx >= wd.restoration_ns) {
          q.wd = WatchdogState::kOperational;
          ++q.wd_restored;
          q.wd_since = -1;
        }
      }
    }
  }
}

void Fabric::Impl::StartIteration(int ji) {
  Job& j = jobs[ji];
  if (j.st.start_ns < 0) j.st.start_ns = now();
  j.running = true;
  j.iter_start = now();
  j.cur.clear();
  j.pending = 0;
  j.gated = false;
  std::fill(j.gate_dirty.begin(), j.gate_dirty.end(), 0);
  for (size_t ti = 0; ti < j.tmpl.size(); ++ti) {
    Transfer tr;
    tr.t = j.tmpl[ti];
    tr.qps = j.tmpl_qps[ti];
    if (!tr.t.gates.empty()) j.gated = true;
    j.cur.push_back(tr);
  }
  for (size_t ti = 0; ti < j.cur.size(); ++ti) {
    Transfer& tr = j.cur[ti];
    const double per = tr.t.bytes / static_cast<double>(tr.qps.size());
    for (int id : tr.qps) {
      Qp& qp = qps[id];
      qp.transfer = static_cast<int>(ti);
      qp.total = per;
      qp.quota = per;
      qp.sent = qp.delivered = 0;
      qp.in_flight.clear();
      ActivateQp(qp);
    }
    if (tr.t.bytes <= 0)
      tr.done = true;
    else
      ++j.pending;
  }
  if (j.gated) UpdateGates(j);
  if (j.pending == 0) {
    j.running = false;
    j.st.collective_ns.push_back(0);
    ++j.st.iterations_done;
    if (j.spec.iterations > 0 && j.st.iterations_done >= j.spec.iterations) {
      j.st.done = true;
      j.st.end_ns = now();
    } else {
      Push(now() + std::max(dt(), j.spec.compute_gap_ns), kJobIter, ji, 0);
    }
  }
}

void Fabric::Impl::RunFault(const FaultSpec& fs) {
  switch (fs.kind) {
    case FaultKind::kLinkDown:
      (void)f->SetLinkUp(fs.target, false);
      break;
    case FaultKind::kLinkUp:
      (void)f->SetLinkUp(fs.target, true);
      break;
    case FaultKind::kLinkFlap: {
      (void)f->SetLinkUp(fs.target, false);
      FaultSpec up = fs;
      up.kind = FaultKind::kLinkUp;
      up.at_ns = now() + fs.period_ns;
      (void)f->ScheduleFault(up);
      if (fs.count > 1) {
        FaultSpec next = fs;
        next.count = fs.count - 1;
        next.at_ns = now() + 2 * fs.period_ns;
        (void)f->ScheduleFault(next);
      }
      break;
    }
    case FaultKind::kSwitchDown:
      (void)f->SetSwitchUp(fs.target, false);
      break;
    case FaultKind::kSwitchUp:
      (void)f->SetSwitchUp(fs.target, true);
      break;
    case FaultKind::kDegradeLink:
      (void)f->DegradeLink(fs.target, fs.capacity_factor, fs.error_rate);
      break;
    case FaultKind::kRestoreLink:
      (void)f->DegradeLink(fs.target, 1.0, 0);
      break;
    case FaultKind::kPfcStormStart:
      (void)f->SetPfcStorm(fs.target, fs.priority, true);
      break;
    case FaultKind::kPfcStormStop:
      (void)f->SetPfcStorm(fs.target, fs.priority, false);
      break;
  }
}

// ============================================================================ fast-forward
//
// Quiescent fast-forward. After enough consecutive steps in which nothing but linear
// progress happened (no event, no reroute, no activation, no QP rate change, no standing
// queue, no ECN mark, no pause, no drop, no loss, no PFC assertion, no storm) — one more
// than the longest active path's hop count, since bytes advance one hop per step and every
// queue serves all it holds, so that everything in flight was sent in those steps — the step
// pipeline is stationary: every hop carries what its QP sends, every queue serves all it
// receives, and the next step differs from the last one only by counters growing. The
// horizon is the number of further steps over which that stays true: bounded by the next
// event (CNP, PFC frame, fault, iteration start), the watchdog poll, the caller's limit,
// max_jump_ns, a DCQCN increase that would change a rate (RC below line rate: timer T or
// byte counter B), a spray re-weighting, a transfer completing, and each QP's quota
// trajectory (a gated transfer's quota grows with its gate's delivery rate; the QP's
// demand must stay its rate cap, or stay exactly its quota-limited amount). Both are
// piecewise linear and concave in the step count, so checking the ends of the jump
// suffices. The jump then adds n x (last step's amount) to every counter stepping would
// have touched, in the same QP order, and runs the DCQCN timers to the last skipped step.

namespace {
constexpr int kFfMinStreak = 3;    // clean steps before a check (and path hops + 1 per QP)
constexpr int64_t kFfMinJump = 3;  // shorter horizons are stepped
constexpr int kFfMaxBackoff = 64;  // steps between failed checks, at most
}  // namespace

bool Fabric::Impl::TryFastForward(TimeNs limit) {
  const TimeNs t = now(), step = dt();
  if (t >= limit || routing_dirty) return false;
  TimeNs event_t = next_wd_poll;
  if (!events.empty()) event_t = std::min(event_t, events.top().t);
  const TimeNs bound = std::min(limit, event_t);
  if (bound <= t) return false;
  // Steps at t, t+step, ..., all before `bound` (an event at te runs in the first step
  // with now >= te; RunUntil(limit) stops at the first step time >= limit).
  // (Clamped so that a limit near the TimeNs maximum cannot overflow.)
  const int64_t n_bound = (std::min(bound - t, kNever) + step - 1) / step;
  FastForwardStats& st = f->ff_stats_;
  const int64_t max_steps = opt().max_jump_ns / step;
  if (active_qps.empty() && next_q.n == 0 && active_ing.n == 0 && storm_nics.empty() &&
      dirty_jobs.empty()) {
    // Idle: those steps would do nothing at all.
    f->now_ += n_bound * step;
    ++st.idle_jumps;
    st.skipped_steps += static_cast<uint64_t>(n_bound);
    return true;
  }
  if (max_steps < 1) return false;
  if (ff_valid && t < ff_valid_until) {
    // Still inside the quiescent stretch found by the last check (nothing ran since).
    ApplyJump(std::min({n_bound, max_steps, (ff_valid_until - t) / step}));
    return true;
  }
  ff_valid = false;
  if (streak < kFfMinStreak || t < ff_retry_at) return false;
  // The horizon is computed up to the next event (not the caller's limit nor the maximum
  // jump), so that later calls can continue the stretch without a new check.
  const int64_t n_event = (event_t - t + step - 1) / step;
  if (std::min(n_event, max_steps) < kFfMinJump) return false;
  ++st.checks;
  RunDirtyGates();  // what the next step would do first (no event, reroute or poll is due)
  int settle = 0;
  const int64_t n = QuiescentHorizon(std::min<int64_t>(n_event, int64_t{1} << 40), &settle);
  if (n < kFfMinJump) {
    if (settle > 0) {
      ff_retry_at = t + settle * step;
    } else {
      ff_retry_at = t + ff_backoff * step;
      ff_backoff = std::min(2 * ff_backoff, kFfMaxBackoff);
    }
    return false;
  }
  ff_backoff = 1;
  ff_valid = true;
  ff_valid_until = t + n * step;
  ApplyJump(std::min({n, n_bound, max_steps}));
  return true;
}

int64_t Fabric::Impl::QuiescentHorizon(int64_t n_max, int* settle) {
  const TimeNs t = now(), step = dt();
  int need_streak = 0;
  double nmax = static_cast<double>(n_max);
  auto steps_until = [&](TimeNs at) {
    return at <= t ? 0.0 : std::ceil(static_cast<double>(at - t) / static_cast<double>(step));
  };
  // Bytes delivered per step by every transfer of the running jobs.
  for (Job& j : jobs) {
    if (j.running) j.rate.assign(j.cur.size(), 0.0);
  }
  auto transfer_of = [&](const Qp& qp) -> int {
    if (qp.job < 0) return -1;
    const Job& j = jobs[qp.job];
    if (!j.running || qp.transfer < 0 || qp.transfer >= static_cast<int>(j.cur.size())) return -1;
    return qp.transfer;
  };
  for (int id : active_qps) {
    const Qp& qp = qps[id];
    if (!qp.active) return 0;
    const int ti = transfer_of(qp);
    if (ti >= 0) jobs[qp.job].rate[ti] += qp.step_got;
  }
  struct Term {
    double a, b;  // quota left before step k of the jump: a + b k
  };
  Term terms[16];
  for (int id : active_qps) {
    const Qp& qp = qps[id];
    const double beta = qp.step_bytes;
    if (!qp.local) {
      if (qp.pfs.empty()) continue;              // unreachable: stays so until a reroute
      if (Changed(qp.step_got, beta)) return 0;  // pipeline not stationary
      for (int pi : qp.pfs) need_streak = std::max(need_streak, pfs[pi].n + 1);
      if (qp.credit_delay > 0) {
        // Arrivals in flight must all be the steady ones.
        need_streak = std::max(need_streak, static_cast<int>(qp.in_flight.size()) + 2 +
                                                static_cast<int>(qp.credit_delay / dt()));
      }
      if (qp.spray_node >= 0) nmax = std::min(nmax, steps_until(qp.next_spray));
      if (beta > 0 && nics[qp.src].params.enabled &&
          (qp.rp.rate_bps() < qp.rp.line_rate_bps() || qp.rp.cut_pending())) {
        // RC may rise at the next timer or byte-counter event: stop before either.
        nmax = std::min(nmax, steps_until(qp.rp.next_timer_ns()));
        nmax = std::min(nmax, std::ceil(qp.rp.bytes_to_byte_event() / beta) - 1);
      }
    }
    // Quota trajectory: min over the transfer's size and each gate's delivered + base.
    int nt = 0;
    const int ti = transfer_of(qp);
    if (ti >= 0) {
      const Job& j = jobs[qp.job];
      const Transfer& tr = j.cur[ti];
      const double nq = static_cast<double>(tr.qps.size());
      if (tr.t.gates.size() + 1 > std::size(terms)) return 0;
      terms[nt++] = {tr.t.bytes / nq - qp.sent, -beta};
      for (int g : tr.t.gates) {
        terms[nt++] = {(tr.t.base + j.cur[g].delivered) / nq - qp.sent, j.rate[g] / nq - beta};
      }
    } else {
      terms[nt++] = {qp.quota - qp.sent, -beta};
    }
    double left0 = kInf;
    for (int i = 0; i < nt; ++i) left0 = std::min(left0, terms[i].a);
    // Steps k = 0..n-1 keep a + b k >= c: n <= floor((a - c) / -b) + 1.
    auto keep_above = [&](double c) {
      for (int i = 0; i < nt; ++i) {
        if (terms[i].a < c) return false;
        if (terms[i].b < 0) nmax = std::min(nmax, std::floor((terms[i].a - c) / -terms[i].b) + 1);
      }
      return true;
    };
    if (beta <= 0) {
      // Busy but not sending (waiting for its gate): the quota must not move.
      if (left0 > kEps) return 0;
      for (int i = 0; i < nt; ++i) {
        if (terms[i].a <= kEps && terms[i].b > 0) return 0;
      }
      continue;
    }
    if (!Changed(qp.demand_bps, qp.rate_cap_bps)) {
      // Rate-capped (DCQCN RC, line, application cap or NVLink): the quota must stay above.
      if (!keep_above(BytesPerStep(qp.rate_cap_bps, step) * (1 + 1e-9))) return 0;
    } else {
      // Quota-limited: what is left must stay exactly what the QP asked for last step.
      if (Changed(left0, BytesPerStep(qp.demand_bps, step))) return 0;
      for (int i = 0; i < nt; ++i) {
        if (terms[i].a <= left0 * (1 + 1e-12) && std::abs(terms[i].b) > 1e-9 * beta) return 0;
      }
      if (!keep_above(left0 * (1 - 1e-12))) return 0;
    }
  }
  // Bytes sent before the streak may still be in flight on a longer path: check again once
  // the streak covers it.
  if (need_streak > streak) {
    *settle = need_streak - streak;
    return 0;
  }
  // No transfer completes inside the jump (completion is an event of the next step).
  for (const Job& j : jobs) {
    if (!j.running) continue;
    for (size_t ti = 0; ti < j.cur.size(); ++ti) {
      if (j.rate[ti] <= 0 || j.cur[ti].done) continue;
      nmax = std::min(
          nmax, std::floor((j.cur[ti].t.bytes - 1e-3 - j.cur[ti].delivered) / j.rate[ti]) - 2);
    }
  }
  return nmax < 0 ? 0 : static_cast<int64_t>(nmax);
}

void Fabric::Impl::ApplyJump(int64_t n) {
  const TimeNs step = dt(), t0 = now(), t_last = t0 + (n - 1) * step;
  const double steps = static_cast<double>(n);
  uint64_t hops = 0;
  auto served = [&](Port& pt, double bytes) {
    pt.out_octets += bytes;
    ports[pt.peer_port].in_octets += bytes;
    if (pt.served_t == t0 - step) pt.served_t = t_last;  // LinkUtilization: the last step
  };
  for (int id : active_qps) {
    Qp& qp = qps[id];
    const double sent = steps * qp.step_bytes, got = steps * qp.step_got;
    if (sent <= 0 && got <= 0) continue;
    qp.sent += sent;
    qp.lifetime_sent += sent;
    if (qp.local) {
      qp.delivered += sent;
      qp.lifetime_delivered += sent;
      TransferProgress(qp, sent);
      continue;
    }
    if (sent > 0) {
      Nic& nic = nics[qp.src];
      nic.tx += sent;
      // The NIC sent in the step before the jump too (quiescent: same amounts), so this
      // continues its burst; a jump never contains a transfer's last step.
      nic.TxBusy(t0, t0 + n * step);
      nic.TxRate(qp.send_bps);
      qp.last_send = t_last;
      if (nic.params.enabled) {
        qp.rp.OnBytesSent(sent, t_last);
        qp.rp.AdvanceTo(t_last);
      }
      queues[nic.port * kPriorities + qp.prio].tx += sent;
      served(ports[nic.port], sent);
      for (size_t k = 0; k < qp.pfs.size(); ++k) {
        const PathFlow& pf = pfs[qp.pfs[k]];
        const double bytes = sent * qp.w[k];
        for (int h = 1; h < pf.n; ++h) {
          const Hop& hp = pf.h[h];
          queues[hp.q].tx += bytes;
          served(ports[hp.q / kPriorities], bytes);
          if (hp.alb >= 0) {
            alb_bytes[hp.alb] += bytes;
            if (bytes > 0) alb_seen[hp.alb] = t_last;
          }
        }
        hops += static_cast<uint64_t>(pf.n - 1);
      }
    }
    if (got > 0) {
      // Quiescent: every arrival in flight carries the same bytes, so as many are credited
      // during the jump as arrive; the ones in flight move with the clock.
      for (auto& a : qp.in_flight) a.due += n * step;
      qp.delivered += got;
      qp.lifetime_delivered += got;
      nics[qp.dst].rx += got;
      TransferProgress(qp, got);
    }
  }
  FastForwardStats& st = f->ff_stats_;
  ++st.jumps;
  st.skipped_steps += static_cast<uint64_t>(n);
  st.skipped_flow_hop_updates += hops * static_cast<uint64_t>(n);
  f->now_ += n * step;
}

// ============================================================================ Fabric

Fabric::Fabric(const FabricOptions& opt) : opt_(opt) {}
Fabric::~Fabric() = default;

std::unique_ptr<Fabric> Fabric::Create(const loom::v1::Topology& topo, const FabricOptions& opt,
                                       std::string* error) {
  if (opt.step_ns <= 0) {
    *error = "step_ns must be positive";
    return nullptr;
  }
  std::unique_ptr<Fabric> fab(new Fabric(opt));
  fab->impl_ = std::make_unique<Impl>(fab.get());
  if (!fab->impl_->Build(topo, error)) return nullptr;
  const std::string bad = DcqcnParamsError(opt.dcqcn);
  if (!bad.empty()) {
    *error = "dcqcn: " + bad;
    return nullptr;
  }
  // The switch defaults must hold their lossless headroom (SetPfc checks the same).
  const Status st = fab->SetPfc("*", opt.switch_defaults.pfc);
  if (!st.ok()) {
    *error = "switch_defaults: " + st.message();
    return nullptr;
  }
  return fab;
}

void Fabric::Step() {
  impl_->Step();
  now_ += opt_.step_ns;
}

TimeNs Fabric::Advance(TimeNs limit) {
  if (!opt_.fast_forward || !impl_->TryFastForward(limit)) Step();
  return now_;
}

void Fabric::RunUntil(TimeNs t) {
  while (now_ < t) Advance(t);
}

bool Fabric::RunUntilJobsDone(TimeNs limit) {
  while (now_ < limit) {
    if (AllJobsDone()) return true;
    Advance(limit);
  }
  return AllJobsDone();
}

int Fabric::job_count() const { return static_cast<int>(impl_->jobs.size()); }
int Fabric::qp_count() const { return static_cast<int>(impl_->qps.size()); }

bool Fabric::AllJobsDone() const {
  for (const auto& j : impl_->jobs) {
    if (!j.st.done) return false;
  }
  return true;
}

JobStatus Fabric::GetJob(int job) const {
  if (job < 0 || job >= job_count()) return {};
  return impl_->jobs[job].st;
}

namespace {
// Resolves a GPU or NIC id to a NIC index.
int ResolveNic(const Fabric::Impl& im, const std::string& id, std::string* host) {
  auto g = im.gpu_nic.find(id);
  if (g != im.gpu_nic.end()) {
    if (host) *host = im.gpu_host.at(id);
    return g->second;
  }
  auto n = im.node_by_id.find(id);
  if (n != im.node_by_id.end() && im.nodes[n->second].nic >= 0) {
    const int nic = im.nodes[n->second].nic;
    if (host) *host = im.nics[nic].host.empty() ? id : im.nics[nic].host;
    return nic;
  }
  return -1;
}
}  // namespace

int Fabric::AddJob(const JobSpec& spec, std::string* error) {
  Impl& im = *impl_;
  im.Touch();
  Impl::Job j;
  j.spec = spec;
  j.st.id = spec.id;
  j.st.tenant = spec.tenant;
  if (spec.qps_per_connection < 1 || spec.priority < 0 || spec.priority >= kPriorities) {
    *error = "job " + spec.id + ": qps_per_connection >= 1 and priority 0..7 required";
    return -1;
  }
  for (const auto& r : spec.ranks) {
    std::string host;
    const int nic = ResolveNic(im, r, &host);
    if (nic < 0) {
      *error = "job " + spec.id + ": unknown GPU or NIC " + r;
      return -1;
    }
    j.rank_nic.push_back(nic);
    j.rank_host.push_back(host);
  }
  const int ji = static_cast<int>(im.jobs.size());
  j.tmpl = BuildCollective(spec.collective, static_cast<int>(spec.ranks.size()), spec.message_bytes,
                           SplitMix64(opt_.seed ^ (ji + 1)));
  for (const auto& t : j.tmpl) {
    std::vector<int> ids;
    for (int k = 0; k < spec.qps_per_connection; ++k) {
      Impl::Qp qp;
      qp.id = static_cast<int>(im.qps.size());
      qp.job = ji;
      qp.src = j.rank_nic[t.src];
      qp.dst = j.rank_nic[t.dst];
      qp.local = qp.src == qp.dst || j.rank_host[t.src] == j.rank_host[t.dst];
      qp.dest_qp = im.next_dest_qp++;
      qp.sport = static_cast<uint32_t>(49152 + (SplitMix64(opt_.seed * 31 + qp.dest_qp) % 16384));
      qp.prio = spec.priority;
      qp.color = spec.color;
      qp.cap_bps = spec.max_rate_bps > 0 ? spec.max_rate_bps / spec.qps_per_connection : 0;
      Impl::Nic& n = im.nics[qp.src];
      qp.rp.Reset(n.params, n.line_bps, now_);
      if (!qp.local) n.fabric_qps.push_back(qp.id);
      ids.push_back(qp.id);
      im.qps.push_back(std::move(qp));
    }
    j.tmpl_qps.push_back(ids);
  }
  j.dependents.assign(j.tmpl.size(), {});
  for (size_t ti = 0; ti < j.tmpl.size(); ++ti) {
    for (int g : j.tmpl[ti].gates) j.dependents[g].push_back(static_cast<int>(ti));
  }
  j.gate_dirty.assign((j.tmpl.size() + 63) / 64, 0);
  im.jobs.push_back(std::move(j));
  im.Push(std::max(now_, spec.start_ns), Impl::kJobIter, ji, 0);
  return ji;
}

int Fabric::AddFlow(const std::string& src, const std::string& dst, double bytes, int priority,
                    double max_rate_bps, uint32_t dest_qp, uint32_t color) {
  Impl& im = *impl_;
  im.Touch();
  const int s = ResolveNic(im, src, nullptr), d = ResolveNic(im, dst, nullptr);
  if (s < 0 || d < 0 || s == d) return -1;
  Impl::Qp qp;
  qp.id = static_cast<int>(im.qps.size());
  qp.src = s;
  qp.dst = d;
  qp.dest_qp = dest_qp ? dest_qp : im.next_dest_qp++;
  qp.sport = static_cast<uint32_t>(49152 + (SplitMix64(opt_.seed * 31 + qp.dest_qp) % 16384));
  qp.prio = std::clamp(priority, 0, kPriorities - 1);
  qp.color = color;
  qp.cap_bps = max_rate_bps;
  qp.total = qp.quota = bytes > 0 ? bytes : kInf;
  qp.start_ns = now_;
  qp.rp.Reset(im.nics[s].params, im.nics[s].line_bps, now_);
  im.nics[s].fabric_qps.push_back(qp.id);
  im.qps.push_back(std::move(qp));
  im.ActivateQp(im.qps.back());
  return im.qps.back().id;
}

void Fabric::StopFlow(int qp) {
  impl_->Touch();
  if (qp >= 0 && qp < qp_count()) impl_->qps[qp].stopped = true;
}

QpInfo Fabric::GetQp(int id) const {
  const Impl& im = *impl_;
  QpInfo info;
  if (id < 0 || id >= qp_count()) return info;
  const Impl::Qp& qp = im.qps[id];
  info.id = id;
  info.job = qp.job >= 0 ? im.jobs[qp.job].spec.id : "";
  info.src_nic = im.nodes[im.nics[qp.src].node].id;
  info.dst_nic = im.nodes[im.nics[qp.dst].node].id;
  info.dest_qp = qp.dest_qp;
  info.priority = qp.prio;
  info.rate_bps = qp.rp.rate_bps();
  info.target_bps = qp.rp.target_bps();
  info.alpha = qp.rp.alpha();
  info.send_bps = qp.active ? qp.send_bps : 0;
  info.sent_bytes = qp.lifetime_sent;
  info.delivered_bytes = qp.lifetime_delivered;
  info.cnps = qp.cnps;
  info.start_ns = qp.start_ns;
  info.finish_ns = qp.finish_ns;
  if (qp.job < 0 && qp.total < kInf) {
    info.ideal_fct_ns =
        qp.total * 8e9 / std::max(1.0, im.nics[qp.src].line_bps) + qp.path_latency_ns;
  }
  info.subflows = static_cast<int>(qp.pfs.size());
  if (!qp.last_ports.empty()) {
    for (int p : qp.last_ports[0]) {
      info.path.push_back(im.nodes[im.ports[p].node].id + ":" + im.ports[p].iface);
    }
  }
  return info;
}

std::vector<QpInfo> Fabric::GetQps() const {
  std::vector<QpInfo> out;
  for (int i = 0; i < qp_count(); ++i) out.push_back(GetQp(i));
  return out;
}

// ---------------------------------------------------------------- faults

Status Fabric::SetLinkUp(const std::string& link_id, bool up) {
  Impl& im = *impl_;
  im.Touch();
  auto it = im.link_by_id.find(link_id);
  if (it == im.link_by_id.end()) return NotFound("no link " + link_id);
  const int pa = im.link_ports[it->second];
  for (int p : {pa, im.ports[pa].peer_port}) {
    if (im.ports[p].admin_up != up) ++im.ports[p].carrier;
    im.ports[p].admin_up = up;
  }
  im.RefreshLive();
  im.routing_dirty = true;
  return Status::Ok();
}

Status Fabric::SetSwitchUp(const std::string& device, bool up) {
  Impl& im = *impl_;
  im.Touch();
  auto it = im.node_by_id.find(device);
  if (it == im.node_by_id.end() || !im.nodes[it->second].is_switch) {
    return NotFound("no switch " + device);
  }
  Impl::Node& n = im.nodes[it->second];
  if (n.up != up) {
    for (int p : n.ports) {
      ++im.ports[p].carrier;
      ++im.ports[im.ports[p].peer_port].carrier;
    }
  }
  n.up = up;
  im.RefreshLive();
  im.routing_dirty = true;
  return Status::Ok();
}

Status Fabric::DegradeLink(const std::string& link_id, double factor, double error_rate) {
  Impl& im = *impl_;
  im.Touch();
  auto it = im.link_by_id.find(link_id);
  if (it == im.link_by_id.end()) return NotFound("no link " + link_id);
  if (factor <= 0 || factor > 1 || error_rate < 0 || error_rate >= 1) {
    return InvalidArgument("capacity_factor must be in (0,1], error_rate in [0,1)");
  }
  const int pa = im.link_ports[it->second];
  for (int p : {pa, im.ports[pa].peer_port}) {
    im.SetCap(im.ports[p], im.ports[p].nominal_bps * factor);
    im.ports[p].error_rate = error_rate;
  }
  return Status::Ok();
}

Status Fabric::SetPfcStorm(const std::string& nic, int priority, bool on) {
  Impl& im = *impl_;
  im.Touch();
  const int ni = ResolveNic(im, nic, nullptr);
  if (ni < 0) return NotFound("no NIC " + nic);
  if (priority < 0 || priority >= kPriorities) return InvalidArgument("priority must be 0..7");
  Impl::Nic& n = im.nics[ni];
  const uint8_t bit = static_cast<uint8_t>(1u << priority);
  if (on) {
    n.storm_mask |= bit;
    if (std::find(im.storm_nics.begin(), im.storm_nics.end(), ni) == im.storm_nics.end()) {
      im.storm_nics.push_back(ni);
    }
  } else if (n.storm_mask & bit) {
    n.storm_mask &= static_cast<uint8_t>(~bit);
    const int ii = n.port * kPriorities + priority;
    if (im.ingress[ii].asserted) {
      im.ingress[ii].asserted = false;
      im.ingress[ii].tx_pause_ns += static_cast<double>(now_ - im.ingress[ii].assert_t);
      im.SendPfc(ii, 0);
    }
    if (n.storm_mask == 0) {
      im.storm_nics.erase(std::find(im.storm_nics.begin(), im.storm_nics.end(), ni));
    }
  }
  return Status::Ok();
}

Status Fabric::ScheduleFault(const FaultSpec& spec) {
  Impl& im = *impl_;
  im.Touch();
  const bool link = spec.kind == FaultKind::kLinkDown || spec.kind == FaultKind::kLinkUp ||
                    spec.kind == FaultKind::kLinkFlap || spec.kind == FaultKind::kDegradeLink ||
                    spec.kind == FaultKind::kRestoreLink;
  if (link && !im.link_by_id.count(spec.target)) return NotFound("no link " + spec.target);
  if ((spec.kind == FaultKind::kSwitchDown || spec.kind == FaultKind::kSwitchUp) &&
      !im.node_by_id.count(spec.target)) {
    return NotFound("no switch " + spec.target);
  }
  if ((spec.kind == FaultKind::kPfcStormStart || spec.kind == FaultKind::kPfcStormStop) &&
      ResolveNic(im, spec.target, nullptr) < 0) {
    return NotFound("no NIC " + spec.target);
  }
  if (spec.kind == FaultKind::kLinkFlap && spec.period_ns <= 0) {
    return InvalidArgument("link-flap needs period_ns > 0");
  }
  im.faults.push_back(spec);
  im.Push(std::max(now_, spec.at_ns), Impl::kFault, static_cast<int>(im.faults.size()) - 1, 0);
  return Status::Ok();
}

// ---------------------------------------------------------------- counters

namespace {
uint64_t U(double x) { return x <= 0 ? 0 : static_cast<uint64_t>(x + 0.5); }
}  // namespace

#define LOOM_FIND_PORT(im, device, iface, pvar)                                \
  auto nit_ = (im).node_by_id.find(device);                                    \
  if (nit_ == (im).node_by_id.end()) return NotFound("no device " + (device)); \
  auto pit_ = (im).nodes[nit_->second].port_by_iface.find(iface);              \
  if (pit_ == (im).nodes[nit_->second].port_by_iface.end())                    \
    return NotFound("no interface " + (device) + ":" + (iface));               \
  const int pvar = pit_->second

Status Fabric::GetInterfaceCounters(const std::string& device, const std::string& iface,
                                    InterfaceCounters* out) const {
  const Impl& im = *impl_;
  LOOM_FIND_PORT(im, device, iface, p);
  const Impl::Port& pt = im.ports[p];
  const double mtu = opt_.mtu_bytes;
  out->in_octets = U(pt.in_octets);
  out->out_octets = U(pt.out_octets);
  out->in_pkts = U(pt.in_octets / mtu);
  out->out_pkts = U(pt.out_octets / mtu);
  out->in_discards = U(pt.in_discards / mtu);
  out->out_discards = U(pt.out_discards / mtu);
  out->in_errors = U(pt.in_errors / mtu);
  out->out_errors = 0;
  out->oper_up = im.PortLive(p);
  out->carrier_transitions = pt.carrier;
  out->capacity_bps = pt.cap_bps;
  return Status::Ok();
}

Status Fabric::GetQueueCounters(const std::string& device, const std::string& iface, int queue,
                                QueueCounters* out) const {
  const Impl& im = *impl_;
  if (queue < 0 || queue >= kPriorities) return InvalidArgument("queue must be 0..7");
  LOOM_FIND_PORT(im, device, iface, p);
  const Impl::Queue& q = im.queues[p * kPriorities + queue];
  const double mtu = opt_.mtu_bytes;
  out->transmit_octets = U(q.tx);
  out->transmit_pkts = U(q.tx / mtu);
  out->dropped_octets = U(q.drop);
  out->dropped_pkts = U(q.drop / mtu);
  out->ecn_marked_octets = U(q.marked);
  out->ecn_marked_pkts = U(q.marked / mtu);
  out->current_depth_bytes = U(q.q);
  out->watermark_bytes = U(q.wm);
  return Status::Ok();
}

Status Fabric::GetPfcCounters(const std::string& device, const std::string& iface, int prio,
                              PfcCounters* out) const {
  const Impl& im = *impl_;
  if (prio < 0 || prio >= kPriorities) return InvalidArgument("priority must be 0..7");
  LOOM_FIND_PORT(im, device, iface, p);
  const Impl::Queue& q = im.queues[p * kPriorities + prio];
  const Impl::Ingress& in = im.ingress[p * kPriorities + prio];
  out->rx_pkts = q.pfc_rx;
  out->tx_pkts = in.pfc_tx;
  double rx_ns = q.pause_ns;
  if (q.pause_start >= 0)
    rx_ns += static_cast<double>(std::min(now_, q.paused_until) - q.pause_start);
  double tx_ns = in.tx_pause_ns;
  if (in.asserted) tx_ns += static_cast<double>(now_ - in.assert_t);
  out->rx_pause_duration_us = U(rx_ns / 1e3);
  out->tx_pause_duration_us = U(tx_ns / 1e3);
  out->paused = q.paused_until > now_;
  out->xoff_sent = in.asserted;
  return Status::Ok();
}

Status Fabric::GetWatchdogCounters(const std::string& device, const std::string& iface, int queue,
                                   WatchdogCounters* out) const {
  const Impl& im = *impl_;
  if (queue < 0 || queue >= kPriorities) return InvalidArgument("queue must be 0..7");
  LOOM_FIND_PORT(im, device, iface, p);
  const Impl::Queue& q = im.queues[p * kPriorities + queue];
  out->state = q.wd;
  out->deadlock_detected = q.wd_detected;
  out->deadlock_restored = q.wd_restored;
  return Status::Ok();
}

Status Fabric::GetNicCounters(const std::string& nic, NicCounters* out) const {
  const Impl& im = *impl_;
  const int ni = ResolveNic(im, nic, nullptr);
  if (ni < 0) return NotFound("no NIC " + nic);
  const Impl::Nic& n = im.nics[ni];
  out->np_cnp_sent = U(n.np_cnp_sent);
  out->np_ecn_marked_roce_packets = U(n.np_marked);
  out->rp_cnp_handled = U(n.rp_handled);
  out->rp_cnp_ignored = U(n.rp_ignored);
  out->out_of_sequence = U(n.oos);
  out->reorder_discarded_bytes = U(n.reorder_discarded);
  out->tx_bytes = U(n.tx);
  out->rx_bytes = U(n.rx);
  out->tx_pause_storm_warning_events = U(n.storm_events);
  out->tx_bursts = n.tx_bursts;
  out->tx_idle_ns = static_cast<uint64_t>(n.tx_idle_ns);
  out->tx_max_spacing_ns =
      n.tx_min_rate_bps > 0 ? U(opt_.mtu_bytes * 8e9 / n.tx_min_rate_bps) : uint64_t{0};
  return Status::Ok();
}

namespace {
struct GroupRef {
  int node = -1, leaf = -1;
};
Status ResolveGroup(const Fabric::Impl& im, const std::string& device, const std::string& dest,
                    GroupRef* g) {
  auto n = im.node_by_id.find(device);
  if (n == im.node_by_id.end() || !im.nodes[n->second].is_switch) {
    return NotFound("no switch " + device);
  }
  auto d = im.node_by_id.find(dest);
  if (d == im.node_by_id.end() || im.nodes[d->second].leaf < 0) {
    return NotFound("no destination leaf " + dest);
  }
  g->node = n->second;
  g->leaf = im.nodes[d->second].leaf;
  return Status::Ok();
}
}  // namespace

Status Fabric::GetNicPeerCounters(const std::string& nic, std::vector<PeerCounters>* out) const {
  const Impl& im = *impl_;
  out->clear();
  const int ni = ResolveNic(im, nic, nullptr);
  if (ni < 0) return NotFound("no NIC " + nic);
  std::vector<std::pair<int, double>> by_dst;  // (destination NIC, bytes)
  for (int id : im.nics[ni].fabric_qps) {
    const Impl::Qp& qp = im.qps[id];
    by_dst.emplace_back(qp.dst, qp.lifetime_sent);
  }
  std::sort(by_dst.begin(), by_dst.end(),
            [&](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < by_dst.size();) {
    const int dst = by_dst[i].first;
    double bytes = 0;
    for (; i < by_dst.size() && by_dst[i].first == dst; ++i) bytes += by_dst[i].second;
    out->push_back({im.nodes[im.nics[dst].node].id, U(bytes)});
  }
  std::sort(out->begin(), out->end(),
            [](const PeerCounters& a, const PeerCounters& b) { return a.peer_nic < b.peer_nic; });
  return Status::Ok();
}

Status Fabric::GetAlbCounters(const std::string& device, const std::string& dest,
                              std::vector<AlbBucketCounters>* out) const {
  const Impl& im = *impl_;
  GroupRef g;
  Status s = ResolveGroup(im, device, dest, &g);
  if (!s.ok()) return s;
  out->clear();
  const Impl::GroupCfg* cfg = im.FindGroup(g.node, g.leaf);
  if (!cfg || cfg->alb.empty()) return NotFound("no ALB table on " + device + " for " + dest);
  for (size_t b = 0; b < cfg->alb.size(); ++b) {
    AlbBucketCounters c;
    c.member = im.ports[cfg->alb[b]].iface;
    c.bytes = U(im.alb_bytes[cfg->alb_base + b]);
    c.pkts = U(im.alb_bytes[cfg->alb_base + b] / opt_.mtu_bytes);
    out->push_back(c);
  }
  return Status::Ok();
}

std::vector<std::string> Fabric::Interfaces(const std::string& device) const {
  std::vector<std::string> out;
  auto it = impl_->node_by_id.find(device);
  if (it == impl_->node_by_id.end()) return out;
  for (int p : impl_->nodes[it->second].ports) out.push_back(impl_->ports[p].iface);
  return out;
}

std::vector<std::string> Fabric::Devices() const {
  std::vector<std::string> out;
  for (const auto& n : impl_->nodes) out.push_back(n.id);
  return out;
}

double Fabric::LinkUtilization(const std::string& device, const std::string& iface) const {
  auto it = impl_->node_by_id.find(device);
  if (it == impl_->node_by_id.end()) return 0;
  auto p = impl_->nodes[it->second].port_by_iface.find(iface);
  if (p == impl_->nodes[it->second].port_by_iface.end()) return 0;
  const Impl::Port& pt = impl_->ports[p->second];
  if (pt.served_t != now_ - opt_.step_ns) return 0;
  return pt.served / std::max(1.0, BytesPerStep(pt.cap_bps, opt_.step_ns));
}

// ---------------------------------------------------------------- config

namespace {
template <typename Fn>
Status ForSwitches(Fabric::Impl& im, const std::string& device, Fn fn);

// Applies `change` to the config of `device`'s switches, then checks the buffer can hold
// the lossless headroom it reserves, and that an explicit headroom is at least the
// minimum; on failure restores every config and says which field and by how much.
template <typename Change>
Status SetBufferConfig(Fabric::Impl& im, const std::string& device, Change change) {
  std::vector<std::pair<int, SwitchConfig>> saved;
  Status st = ForSwitches(im, device, [&](int n) {
    saved.emplace_back(n, im.nodes[n].cfg);
    change(im.nodes[n].cfg);
    im.ApplyPortThresholds(n);
  });
  if (!st.ok()) return st;
  std::string bad;
  for (const auto& [n, cfg] : saved) {
    const auto& node = im.nodes[n];
    for (int p : node.ports) {
      const auto& pt = im.ports[p];
      const double min = im.MinHeadroom(pt);
      if (bad.empty() && pt.pfc_on && pt.lossless && node.cfg.pfc.headroom_bytes > 0 &&
          node.cfg.pfc.headroom_bytes < min) {
        bad = "pfc headroom_bytes " +
              std::to_string(static_cast<int64_t>(node.cfg.pfc.headroom_bytes)) + " on " + node.id +
              " is below the minimum " + std::to_string(static_cast<int64_t>(std::ceil(min))) +
              " (2 x propagation delay and 2 engine steps at line rate + 2 MTU)";
      }
    }
    if (bad.empty() && node.reserved >= node.cfg.buffer_bytes) {
      bad = "buffer_bytes " + std::to_string(static_cast<int64_t>(node.cfg.buffer_bytes)) + " on " +
            node.id + " cannot hold the " +
            std::to_string(static_cast<int64_t>(std::ceil(node.reserved))) +
            " bytes of headroom its lossless ingress queues reserve";
    }
  }
  if (bad.empty()) return Status::Ok();
  for (const auto& [n, cfg] : saved) {
    im.nodes[n].cfg = cfg;
    im.ApplyPortThresholds(n);
  }
  return InvalidArgument(bad);
}

template <typename Fn>
Status ForSwitches(Fabric::Impl& im, const std::string& device, Fn fn) {
  if (device == "*") {
    for (size_t i = 0; i < im.nodes.size(); ++i) {
      if (im.nodes[i].is_switch) fn(static_cast<int>(i));
    }
    return Status::Ok();
  }
  auto it = im.node_by_id.find(device);
  if (it == im.node_by_id.end() || !im.nodes[it->second].is_switch) {
    return NotFound("no switch " + device);
  }
  fn(it->second);
  return Status::Ok();
}
}  // namespace

Status Fabric::SetForwardingMode(const std::string& device, ForwardingMode mode) {
  Impl& im = *impl_;
  im.Touch();
  im.routing_dirty = true;
  return ForSwitches(im, device, [&](int n) { im.nodes[n].cfg.mode = mode; });
}

Status Fabric::SetGroupMode(const std::string& device, const std::string& dest,
                            ForwardingMode mode) {
  Impl& im = *impl_;
  im.Touch();
  GroupRef g;
  Status s = ResolveGroup(im, device, dest, &g);
  if (!s.ok()) return s;
  auto& cfg = im.groups[im.GroupKey(g.node, g.leaf)];
  cfg.has_mode = true;
  cfg.mode = mode;
  im.routing_dirty = true;
  return Status::Ok();
}

Status Fabric::SetDlbProfile(const std::string& device, const DlbProfile& profile) {
  Impl& im = *impl_;
  im.Touch();
  if (profile.sample_ns <= 0 || profile.load_ewma_ns <= 0 || profile.inactivity_ns < 0 ||
      profile.load_weight < 0 || profile.load_weight > 1 || profile.queue_band_bytes <= 0) {
    return InvalidArgument("bad DLB profile");
  }
  return ForSwitches(im, device, [&](int n) { im.nodes[n].cfg.dlb = profile; });
}

Status Fabric::SetHashDestQp(const std::string& device, bool on) {
  Impl& im = *impl_;
  im.Touch();
  im.routing_dirty = true;
  return ForSwitches(im, device, [&](int n) { im.nodes[n].cfg.hash_dest_qp = on; });
}

Status Fabric::SetSprayPriorities(const std::string& device, uint8_t mask) {
  Impl& im = *impl_;
  im.Touch();
  im.routing_dirty = true;
  return ForSwitches(im, device, [&](int n) { im.nodes[n].cfg.spray_mask = mask; });
}

Status Fabric::SetAlbTable(const std::string& device, const std::string& dest,
                           const std::vector<std::string>& buckets) {
  Impl& im = *impl_;
  im.Touch();
  GroupRef g;
  Status s = ResolveGroup(im, device, dest, &g);
  if (!s.ok()) return s;
  if (buckets.empty()) return InvalidArgument("ALB table needs at least one bucket");
  std::vector<int> table;
  for (const auto& iface : buckets) {
    auto it = im.nodes[g.node].port_by_iface.find(iface);
    if (it == im.nodes[g.node].port_by_iface.end()) {
      return NotFound("no interface " + device + ":" + iface);
    }
    table.push_back(it->second);
  }
  auto& cfg = im.groups[im.GroupKey(g.node, g.leaf)];
  if (cfg.alb.size() != table.size()) {
    cfg.alb_base = static_cast<int>(im.alb_bytes.size());
    im.alb_bytes.resize(im.alb_bytes.size() + table.size(), 0.0);
    im.alb_seen.resize(im.alb_bytes.size(), -kNever);
  }
  cfg.alb = std::move(table);
  // A group in DLB + ALB mode (its own or its switch's) keeps it: the table is its shared
  // flowset table. Any other group becomes an ALB group.
  const ForwardingMode mode = cfg.has_mode ? cfg.mode : im.nodes[g.node].cfg.mode;
  if (mode != ForwardingMode::kDlbAlb) {
    cfg.has_mode = true;
    cfg.mode = ForwardingMode::kAlb;
  }
  im.routing_dirty = true;
  return Status::Ok();
}

Status Fabric::InitAlbTable(const std::string& device, const std::string& dest, int buckets) {
  Impl& im = *impl_;
  im.Touch();
  if (im.routing_dirty) {
    im.routing_dirty = false;
    im.RecomputeDistances();
    for (auto& qp : im.qps) {
      if (qp.routed && !qp.local) im.Route(qp, true);
    }
  }
  std::vector<std::string> members = GroupMembers(device, dest);
  if (members.empty() || buckets < 1) return InvalidArgument("group has no live members");
  std::vector<std::string> table;
  for (int b = 0; b < buckets; ++b) table.push_back(members[b % members.size()]);
  return SetAlbTable(device, dest, table);
}

Status Fabric::SetEcmpWeights(const std::string& device, const std::string& dest,
                              const std::map<std::string, double>& weights) {
  Impl& im = *impl_;
  im.Touch();
  GroupRef g;
  Status s = ResolveGroup(im, device, dest, &g);
  if (!s.ok()) return s;
  std::map<int, double> w;
  for (const auto& [iface, weight] : weights) {
    auto it = im.nodes[g.node].port_by_iface.find(iface);
    if (it == im.nodes[g.node].port_by_iface.end()) {
      return NotFound("no interface " + device + ":" + iface);
    }
    if (weight < 0) return InvalidArgument("weights must be >= 0");
    w[it->second] = weight;
  }
  im.groups[im.GroupKey(g.node, g.leaf)].weights = std::move(w);
  im.routing_dirty = true;
  return Status::Ok();
}

Status Fabric::SetColor(const std::string& device, uint32_t color, const ColorConfig& cfg) {
  Impl& im = *impl_;
  im.Touch();
  if (color == 0) return InvalidArgument("color 0 means uncolored");
  auto it = im.node_by_id.find(device);
  if (it == im.node_by_id.end() || !im.nodes[it->second].is_switch) {
    return NotFound("no switch " + device);
  }
  std::vector<int> ps;
  for (const auto& iface : cfg.interfaces) {
    auto p = im.nodes[it->second].port_by_iface.find(iface);
    if (p == im.nodes[it->second].port_by_iface.end()) {
      return NotFound("no interface " + device + ":" + iface);
    }
    ps.push_back(p->second);
  }
  im.nodes[it->second].colors[color] = {ps, cfg.backup_color};
  im.routing_dirty = true;
  return Status::Ok();
}

Status Fabric::RemoveColor(const std::string& device, uint32_t color) {
  Impl& im = *impl_;
  im.Touch();
  auto it = im.node_by_id.find(device);
  if (it == im.node_by_id.end()) return NotFound("no switch " + device);
  im.nodes[it->second].colors.erase(color);
  im.routing_dirty = true;
  return Status::Ok();
}

Status Fabric::SetJobColor(const std::string& job_id, uint32_t color) {
  Impl& im = *impl_;
  im.Touch();
  for (auto& j : im.jobs) {
    if (j.spec.id != job_id) continue;
    j.spec.color = color;
    for (const auto& ids : j.tmpl_qps) {
      for (int id : ids) im.qps[id].color = color;
    }
    im.routing_dirty = true;
    return Status::Ok();
  }
  return NotFound("no job " + job_id);
}

Status Fabric::SetRoute(const std::string& device, const std::string& dest_nic, uint32_t color,
                        uint32_t backup_color, int traffic_class, uint32_t qp_mask,
                        uint32_t qp_value) {
  Impl& im = *impl_;
  im.Touch();
  auto it = im.node_by_id.find(device);
  if (it == im.node_by_id.end() || !im.nodes[it->second].is_switch) {
    return NotFound("no switch " + device);
  }
  const int nic = ResolveNic(im, dest_nic, nullptr);
  if (nic < 0) return NotFound("no NIC " + dest_nic);
  if (color == 0) return InvalidArgument("route color must not be 0");
  if (traffic_class < -1 || traffic_class >= kPriorities) {
    return InvalidArgument("traffic_class must be -1 (any) or 0..7");
  }
  if ((qp_value & ~qp_mask) != 0) {
    return InvalidArgument("route to " + dest_nic + ": qp_value " + std::to_string(qp_value) +
                           " has bits outside qp_mask " + std::to_string(qp_mask));
  }
  auto& entries = im.nodes[it->second].routes[Impl::RouteKey(nic, traffic_class)];
  Impl::RouteEntry entry{qp_mask, qp_value, color, backup_color};
  auto same = std::find_if(entries.begin(), entries.end(), [&](const Impl::RouteEntry& e) {
    return e.qp_mask == qp_mask && e.qp_value == qp_value;
  });
  if (same != entries.end()) {
    *same = entry;
  } else {
    // Keep more specific masks first, then insertion order.
    auto pos = std::find_if(entries.begin(), entries.end(), [&](const Impl::RouteEntry& e) {
      return std::popcount(e.qp_mask) < std::popcount(qp_mask);
    });
    entries.insert(pos, entry);
  }
  im.routing_dirty = true;
  return Status::Ok();
}

Status Fabric::RemoveRoute(const std::string& device, const std::string& dest_nic,
                           int traffic_class, uint32_t qp_mask, uint32_t qp_value) {
  Impl& im = *impl_;
  im.Touch();
  auto it = im.node_by_id.find(device);
  if (it == im.node_by_id.end() || !im.nodes[it->second].is_switch) {
    return NotFound("no switch " + device);
  }
  const int nic = ResolveNic(im, dest_nic, nullptr);
  if (nic < 0) return NotFound("no NIC " + dest_nic);
  auto not_found = [&] {
    return NotFound("no route on " + device + " to " + dest_nic + " for traffic class " +
                    std::to_string(traffic_class) + " and QP mask/value " +
                    std::to_string(qp_mask) + "/" + std::to_string(qp_value));
  };
  auto& routes = im.nodes[it->second].routes;
  auto r = routes.find(Impl::RouteKey(nic, traffic_class));
  if (r == routes.end()) return not_found();
  auto& entries = r->second;
  auto same = std::find_if(entries.begin(), entries.end(), [&](const Impl::RouteEntry& e) {
    return e.qp_mask == qp_mask && e.qp_value == qp_value;
  });
  if (same == entries.end()) return not_found();
  entries.erase(same);
  if (entries.empty()) routes.erase(r);
  im.routing_dirty = true;
  return Status::Ok();
}

Status Fabric::ClearRoutes(const std::string& device) {
  Impl& im = *impl_;
  im.Touch();
  im.routing_dirty = true;
  return ForSwitches(im, device, [&](int n) { im.nodes[n].routes.clear(); });
}

size_t Fabric::RouteCount(const std::string& device) const {
  auto it = impl_->node_by_id.find(device);
  if (it == impl_->node_by_id.end()) return 0;
  size_t n = 0;
  for (const auto& [key, entries] : impl_->nodes[it->second].routes) n += entries.size();
  return n;
}

Status Fabric::SetEcn(const std::string& device, int priority, const EcnConfig& cfg) {
  Impl& im = *impl_;
  im.Touch();
  if (priority < 0 || priority >= kPriorities) return InvalidArgument("priority must be 0..7");
  if (cfg.pmax < 0 || cfg.pmax > 1 || (cfg.kmax_bytes > 0 && cfg.kmin_bytes > cfg.kmax_bytes)) {
    return InvalidArgument("need 0 <= pmax <= 1 and kmin <= kmax");
  }
  for (const auto& b : cfg.by_speed) {
    if (!(b.speed_bps > 0) || b.pmax < 0 || b.pmax > 1 || b.kmin_bytes < 0 ||
        b.kmin_bytes > b.kmax_bytes) {
      return InvalidArgument("ECN per speed: need speed > 0, 0 <= pmax <= 1, 0 <= kmin <= kmax");
    }
  }
  return ForSwitches(im, device, [&](int n) {
    im.nodes[n].cfg.ecn[priority] = cfg;
    im.ApplyPortThresholds(n);
  });
}

Status Fabric::SetPfc(const std::string& device, const PfcConfig& cfg) {
  Impl& im = *impl_;
  im.Touch();
  if (cfg.xon_bytes > 0 && cfg.xoff_bytes > 0 && cfg.xon_bytes > cfg.xoff_bytes) {
    return InvalidArgument("xon must not exceed xoff");
  }
  return SetBufferConfig(im, device, [&](SwitchConfig& c) { c.pfc = cfg; });
}

Status Fabric::SetBuffer(const std::string& device, double bytes) {
  Impl& im = *impl_;
  im.Touch();
  if (!(bytes > 0)) return InvalidArgument("buffer_bytes must be > 0");
  return SetBufferConfig(im, device, [&](SwitchConfig& c) { c.buffer_bytes = bytes; });
}

Status Fabric::SetWatchdog(const std::string& device, const WatchdogConfig& cfg) {
  Impl& im = *impl_;
  im.Touch();
  if (cfg.enabled && (cfg.poll_ns <= 0 || cfg.detection_ns <= 0 || cfg.restoration_ns <= 0)) {
    return InvalidArgument("watchdog times must be positive");
  }
  Status s = ForSwitches(im, device, [&](int n) { im.nodes[n].cfg.watchdog = cfg; });
  im.ArmWatchdog();
  return s;
}

Status Fabric::SetNicReorder(const std::string& nic, ReorderMode mode) {
  Impl& im = *impl_;
  im.Touch();
  if (nic == "*") {
    for (auto& n : im.nics) n.reorder = mode;
    return Status::Ok();
  }
  const int ni = ResolveNic(im, nic, nullptr);
  if (ni < 0) return NotFound("no NIC " + nic);
  im.nics[static_cast<size_t>(ni)].reorder = mode;
  return Status::Ok();
}

Status Fabric::SetDcqcn(const std::string& nic, const DcqcnParams& params) {
  const std::string bad = DcqcnParamsError(params);
  if (!bad.empty()) return InvalidArgument("dcqcn: " + bad);
  Impl& im = *impl_;
  im.Touch();
  auto apply = [&](int ni) {
    im.nics[ni].params = params;
    for (auto& qp : im.qps) {
      if (qp.src == ni) qp.rp.SetParams(params, now_);
    }
  };
  if (nic == "*") {
    for (size_t i = 0; i < im.nics.size(); ++i) apply(static_cast<int>(i));
    return Status::Ok();
  }
  const int ni = ResolveNic(im, nic, nullptr);
  if (ni < 0) return NotFound("no NIC " + nic);
  apply(ni);
  return Status::Ok();
}

const SwitchConfig* Fabric::GetSwitchConfig(const std::string& device) const {
  auto it = impl_->node_by_id.find(device);
  if (it == impl_->node_by_id.end() || !impl_->nodes[it->second].is_switch) return nullptr;
  return &impl_->nodes[it->second].cfg;
}

uint64_t Fabric::FlowHash(const std::string& device, int qp) const {
  auto it = impl_->node_by_id.find(device);
  if (it == impl_->node_by_id.end() || qp < 0 || qp >= qp_count()) return 0;
  return impl_->Hash(it->second, impl_->qps[qp], 0);
}

std::vector<std::string> Fabric::GroupMembers(const std::string& device, const std::string& dest) {
  Impl& im = *impl_;
  im.Touch();
  std::vector<std::string> out;
  GroupRef g;
  if (!ResolveGroup(im, device, dest, &g).ok()) return out;
  if (im.dist.empty()) im.RecomputeDistances();
  for (int p : im.Group(g.node, g.leaf)) out.push_back(im.ports[p].iface);
  return out;
}

}  // namespace loom::sim
