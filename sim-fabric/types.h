// Configuration and counter types of the fabric emulator's in-process interface.
//
// Plain structs, no behaviour. Counters use the names telemetry will stream
// (OpenConfig interfaces/qos, SAI PFC and PFC-watchdog, mlx5 NIC counters);
// the comment on each field gives the name it maps to.
#ifndef LOOM_SIM_FABRIC_TYPES_H_
#define LOOM_SIM_FABRIC_TYPES_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "sim-fabric/dcqcn.h"

namespace loom::sim {

constexpr int kPriorities = 8;

// ---------------------------------------------------------------- configuration

// WRED/ECN marking on an egress queue: p = 0 below kmin, Pmax (q-kmin)/(kmax-kmin)
// between, 1 above kmax.
// WRED/ECN thresholds for the ports of one speed (KMIN_MAP/KMAX_MAP/PMAX_MAP of the
// packet-level simulator, per-speed WRED profiles of switch OSes).
struct EcnSpeedThresholds {
  double speed_bps = 0;
  double kmin_bytes = 0, kmax_bytes = 0, pmax = 0;
};

struct EcnConfig {
  bool enabled = true;
  double kmin_bytes = 0;  // 0 = default for the port speed (100 KB per 100 Gb/s)
  double kmax_bytes = 0;  // 0 = default for the port speed (400 KB per 100 Gb/s)
  double pmax = 0.2;
  // Ports whose nominal speed equals an entry's use its thresholds instead.
  std::vector<EcnSpeedThresholds> by_speed;
};

// PFC on a switch (per ingress port and priority accounting).
struct PfcConfig {
  bool enabled = true;
  uint8_t lossless_mask = 1u << 3;  // priorities that are lossless
  double xoff_bytes = 0;            // static threshold; 0 = 1.25 x Kmax of the port
  double xon_bytes = 0;             // 0 = xoff - 4 x MTU
  double dynamic_alpha = 0;         // > 0: xoff = alpha x free shared buffer
  double headroom_bytes = 0;        // 0 = auto: 2 x BDP + one engine step + 2 MTU
  uint16_t quanta = 65535;          // pause time in 512-bit quanta
};

// kAlert: detect and count storms (PFC_WD_STATUS stormed), keep honouring pause.
enum class WatchdogAction { kDrop, kForward, kAlert };

// PFC watchdog (SONiC semantics): poll, detection, restoration.
struct WatchdogConfig {
  bool enabled = false;
  TimeNs poll_ns = 100 * kNsPerMs;
  TimeNs detection_ns = 200 * kNsPerMs;
  TimeNs restoration_ns = 200 * kNsPerMs;
  WatchdogAction action = WatchdogAction::kDrop;
};

enum class ForwardingMode {
  kStaticHash,    // 5-tuple hash (optionally weighted per destination)
  kDlbFlowlet,    // DLB: best-quality member at each flowlet boundary
  kDlbPerPacket,  // DLB: packets sprayed over members, quality-weighted
  kAlb,           // ALB: fixed bucket table per group, hash -> bucket -> member
  kDlbAlb,        // DLB + ALB: DLB writes its flowlet choices into the group's shared
                  // bucket (flowset) table, ALB moves buckets (flows follow at once)
};
const char* ForwardingModeName(ForwardingMode m);
bool ParseForwardingMode(const std::string& s, ForwardingMode* m);

// DLB profile: flowlet timer and quality quantization.
struct DlbProfile {
  TimeNs inactivity_ns = 256 * kNsPerUs;
  TimeNs sample_ns = 16 * kNsPerUs;     // quality sampling / spray re-weighting period
  TimeNs load_ewma_ns = 64 * kNsPerUs;  // time constant of the port-load average
  double load_weight = 0.5;             // weight of the load band vs the queue band
  double queue_band_bytes = 64e3;       // queue depth per quality band
};

// Per-switch settings.
struct SwitchConfig {
  // Packet buffer; 0 = auto: the headroom the lossless ingress queues reserve plus 64 MB
  // shared (a switch with more ports has more buffer).
  double buffer_bytes = 0;
  std::array<EcnConfig, kPriorities> ecn{};
  PfcConfig pfc;
  WatchdogConfig watchdog;
  ForwardingMode mode = ForwardingMode::kStaticHash;
  bool hash_dest_qp = false;  // include RoCE BTH dest QP in the hash (entropy)
  uint8_t spray_mask = 0;     // selective spraying: these priorities use per-packet DLB
  DlbProfile dlb;
  double lossy_alpha = 1.0;  // lossy queue limit: alpha x free shared buffer
};

// A path color on a switch: the egress interfaces its traffic may use, and the
// color to fall back to when none of them is live (0 = none: use every member).
struct ColorConfig {
  std::vector<std::string> interfaces;
  uint32_t backup_color = 0;
};

// ---------------------------------------------------------------- workloads

enum class Collective {
  kRingAllReduce,
  kTreeAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kIncast,        // ranks[1..] -> ranks[0]
  kPermutation,   // each rank sends to a seeded random other rank
  kPointToPoint,  // ranks[2i] -> ranks[2i+1]
};
const char* CollectiveName(Collective c);
bool ParseCollective(const std::string& s, Collective* c);

struct JobSpec {
  std::string id;
  std::string tenant;
  Collective collective = Collective::kRingAllReduce;
  std::vector<std::string> ranks;  // GPU (or NIC) ids
  double message_bytes = 64e6;     // per-rank buffer (all-reduce) / per-flow size (p2p, incast)
  int qps_per_connection = 1;
  int iterations = 1;         // 0 = repeat until the run ends
  TimeNs compute_gap_ns = 0;  // idle time between iterations
  TimeNs start_ns = 0;
  int priority = 3;
  uint32_t color = 0;       // path color of the job's traffic (0 = uncolored)
  double max_rate_bps = 0;  // application rate cap per connection (0 = none)
};

// A switch's buffer as configured (Fabric::GetBufferInfo).
struct BufferInfo {
  double buffer_bytes = 0;        // total (the auto default resolved)
  double reserved_bytes = 0;      // headroom reserved for the lossless ingress queues
  double shared_bytes = 0;        // the rest: the pool dynamic thresholds divide
  double headroom_bytes = 0;      // per lossless ingress queue (largest over the ports)
  double min_headroom_bytes = 0;  // the least it may be (largest over the ports)
  int lossless_queues = 0;
};

// What a receiving NIC does with a packet that arrives before an earlier one of its QP
// (per-packet spraying: paths whose fluid queues differ, or packet-level queueing jitter
// where streams merge; sim-fabric/reorder.h has the model and its sources).
//   kGoBackN: the RoCE default without out-of-order placement: the first out-of-sequence
//     packet draws a NAK (sequence error) and every packet until the resend arrives is
//     discarded: per reorder event about one round trip of data is sent again (goodput
//     (1 - p) / (1 + (W - 1) p), W packets per round trip).
//   kSelectiveRepeat: the out-of-order packet is kept, the NAK has the missing one sent
//     again, and the late original makes it a duplicate (IRN-style): one packet per event.
//   kTolerant: out-of-order placement (NICs built for adaptive routing / spraying): no cost.
enum class ReorderMode { kGoBackN, kTolerant, kSelectiveRepeat };

struct JobStatus {
  std::string id, tenant;
  int iterations_done = 0;
  bool done = false;
  TimeNs start_ns = -1, end_ns = -1;
  std::vector<TimeNs> collective_ns;  // completion time of each iteration
};

// ---------------------------------------------------------------- counters

// /interfaces/interface[name]/state[/counters]
struct InterfaceCounters {
  uint64_t in_octets = 0, out_octets = 0, in_pkts = 0, out_pkts = 0;
  uint64_t in_discards = 0, out_discards = 0, in_errors = 0, out_errors = 0;
  bool oper_up = true;  // oper-status UP/DOWN
  uint64_t carrier_transitions = 0;
  double capacity_bps = 0;  // current (possibly degraded) speed
};

// /qos/interfaces/interface/output/queues/queue[name]/state + SAI queue stats.
struct QueueCounters {
  uint64_t transmit_pkts = 0, transmit_octets = 0;
  uint64_t dropped_pkts = 0, dropped_octets = 0;
  uint64_t ecn_marked_pkts = 0, ecn_marked_octets = 0;  // SAI_QUEUE_STAT_WRED_ECN_MARKED_*
  uint64_t current_depth_bytes = 0;                     // SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES
  uint64_t watermark_bytes = 0;                         // SAI_QUEUE_STAT_WATERMARK_BYTES
};

// SAI_PORT_STAT_PFC_n_{RX,TX}_PKTS and _PAUSE_DURATION_US for one priority.
struct PfcCounters {
  uint64_t rx_pkts = 0, tx_pkts = 0;
  uint64_t rx_pause_duration_us = 0, tx_pause_duration_us = 0;
  bool paused = false;     // the egress queue is paused by the peer now
  bool xoff_sent = false;  // this ingress is asserting pause now
};

enum class WatchdogState { kOperational, kStormed };

// PFC watchdog per queue (SONiC PFC_WD_QUEUE_STATS_*).
struct WatchdogCounters {
  WatchdogState state = WatchdogState::kOperational;
  uint64_t deadlock_detected = 0, deadlock_restored = 0;
};

// mlx5 ethtool / RDMA hw counters of one NIC.
struct NicCounters {
  uint64_t np_cnp_sent = 0;
  uint64_t np_ecn_marked_roce_packets = 0;
  uint64_t rp_cnp_handled = 0;
  uint64_t rp_cnp_ignored = 0;
  uint64_t out_of_sequence = 0;
  // Bytes a go-back-N receiver discarded because they arrived out of order (and were sent
  // again); loom leaf, no mlx5 equivalent (mlx5 counts the NACKs: out_of_sequence).
  uint64_t reorder_discarded_bytes = 0;
  uint64_t tx_bytes = 0, rx_bytes = 0;
  uint64_t tx_pause_storm_warning_events = 0;
  // Transmit bursts (loom leaves, no mlx5 equivalent; DLB flowlet-timer tuning input). A
  // burst is a run of engine steps in which the NIC puts bytes on the wire (intra-host
  // NVLink transfers do not count); it ends at the first step in which it sends nothing.
  // Counters are exact under fast-forward (idle jumps are idle time, busy jumps are busy).
  uint64_t tx_bursts = 0;   // counter: idle -> busy transitions, the NIC's first burst included
  uint64_t tx_idle_ns = 0;  // counter: idle time between bursts, added when the next burst
                            // starts (the time before the first burst and after the last
                            // one is not counted)
  // gauge: largest per-flow packet spacing in the NIC's latest burst (the one in
  // progress, else the last one): MTU x 8 / the lowest per-QP send rate in that burst
  // (fluid model; a transfer's last, partial step is not a rate); 0 = no burst yet.
  uint64_t tx_max_spacing_ns = 0;
};

struct PeerCounters {
  std::string peer_nic;  // destination NIC id
  uint64_t tx_bytes = 0;
};

struct AlbBucketCounters {
  std::string member;  // egress interface
  uint64_t bytes = 0, pkts = 0;
};

// A QP as observed from outside.
struct QpInfo {
  int id = 0;
  std::string job, src_nic, dst_nic;
  uint32_t dest_qp = 0;
  int priority = 0;
  double rate_bps = 0;    // DCQCN current rate RC
  double target_bps = 0;  // RT
  double alpha = 0;
  double send_bps = 0;  // what it actually sent in the last step
  double sent_bytes = 0, delivered_bytes = 0;
  uint64_t cnps = 0;
  // Egress interfaces "device:interface" of its (first) path.
  std::vector<std::string> path;
  int subflows = 1;
  // AddFlow flows: when added, and when the last byte arrived (the end of that engine step;
  // -1 = not yet, and always for job QPs).
  TimeNs start_ns = 0, finish_ns = -1;
  // AddFlow flows of a given size: alone on an idle fabric, size / line rate + its path's
  // propagation, switch latencies and store and forward (-1: not applicable).
  double ideal_fct_ns = -1;
};

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_TYPES_H_
