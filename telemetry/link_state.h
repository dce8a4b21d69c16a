// Per-link, per-direction state and DLB-style quality from gNMI telemetry.
//
// LinkStateTable maps the telemetry catalogue (telemetry/README.md) onto the
// links of a loom.v1.Topology and normalizes counters into rates with
// CounterTracker (counters.h). Every link has two directions:
//   kUp   = a -> b (lower tier transmits: a's egress, b's ingress)
//   kDown = b -> a (upper tier transmits)
// Index of a direction in Compute()'s result: 2 * link_index + direction.
//
// Per direction (tx = transmitting port, rx = receiving port):
//   tx_bps           tx out-octets rate x 8 (falls back to rx in-octets)
//   utilization      tx_bps / link capacity_bps
//   tx_pps           tx out-pkts rate (falls back to rx in-pkts)
//   queue_depth      sum over tx egress queues of current-queue-len (bytes)
//   queue_peak       max over tx egress queues of max-queue-len, the per-interval
//                    watermark (bytes); at least queue_depth
//   ecn_marked_pps   sum over tx egress queues of ecn-marked-pkts rate
//   cnp_pps          NIC endpoints only: NIC->leaf = rp_cnp_handled rate of the
//                    sending NIC; leaf->NIC = np_cnp_sent rate of the receiving NIC
//   pfc_pause_ratio  max over priorities of the tx port's rx-pause-duration-us
//                    rate / 1e6 (share of the interval the tx port was paused);
//                    falls back to the rx port's tx-pause-duration-us. [0, 1]
//   pfc_pause_fps    PFC frames pausing this direction (tx rx-pkts, else rx tx-pkts)
//   pfc_stormed      PFC watchdog on any tx priority reports "stormed"
//   drops_pps        max(tx out-discards, sum of tx queue dropped-pkts) + rx in-discards
//   errors_pps       tx out-errors + rx in-errors
//   oper             DOWN if either end reports a non-UP status, UP if an end
//                    reports UP and none reports otherwise, else UNKNOWN
//   stale            the counter behind tx_bps was not refreshed within
//                    StalenessPolicy (local arrival time; see counters.h)
//   oper_fresh       not stale, or an end's oper-status update arrived within
//                    the same window (oper may be acted on)
//
// Quality band, 0 (worst) .. 7 (best), as switch DLB computes port quality:
//   load_level  = number of load_thresholds  <= utilization      (0..7)
//   queue_level = number of queue_thresholds <= queue_depth bytes (0..7)
//   pause_level = number of pause_thresholds <= pfc_pause_ratio  (0..7)
//   band = 7 - round((wl*load_level + wq*queue_level + wp*pause_level) / (wl+wq+wp))
// Defaults: load and queue weighted equally (wl = wq = 1), pause off (wp = 0);
// load thresholds every 12.5 % of link speed; queue thresholds 10 KB doubling
// to 640 KB. A direction that is oper DOWN has band 0.
//
// Path quality (ComputePathQualities), the GLB input: for every ordered pair of
// leaves and every spine both attach to, band = min(local uplink band, remote
// downlink band); when a leaf has parallel links to a spine the best
// non-stale one counts (DLB spreads over them). In a 3-tier fabric, leaves in
// different pods are joined through (spine, super-spine, spine) and the band is
// the min of the four hops. A path is stale if any hop it uses is stale; the
// controller must not act on stale paths.
//
// Threading: LinkStateTable is a plain single-threaded object (no locks, no
// clock; time comes in as arguments). LinkTelemetry wraps it with a mutex for
// use as the collector's sink. Complexity: Apply is O(updates x path depth)
// with two hash lookups per update; Compute is O(links + ports x queues);
// ComputePathQualities is O(leaves^2 x spines) for 2 tiers, O(leaves^2 x
// spines x super-spines) for 3 tiers.
#ifndef LOOM_TELEMETRY_LINK_STATE_H_
#define LOOM_TELEMETRY_LINK_STATE_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/topology/topology_index.h"
#include "common/clock.h"
#include "gnmi/gnmi.pb.h"
#include "telemetry/counters.h"
#include "telemetry/sink.h"

namespace loom::telemetry {

enum class OperStatus : uint8_t { kUnknown = 0, kUp = 1, kDown = 2 };
// What LLDP says of a link: no data, both reporting ends name the topology's
// neighbor, or an end names someone else.
enum class LldpCheck : uint8_t { kUnverified = 0, kVerified = 1, kContradicted = 2 };
enum class Direction : uint8_t { kUp = 0, kDown = 1 };

const char* OperStatusName(OperStatus s);

struct QualityParams {
  // Utilization fractions of link speed; ascending.
  std::array<double, 7> load_thresholds = {0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875};
  // Queue depth in bytes; ascending.
  std::array<double, 7> queue_thresholds = {10e3, 20e3, 40e3, 80e3, 160e3, 320e3, 640e3};
  // PFC pause ratio; ascending.
  std::array<double, 7> pause_thresholds = {0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.6};
  double load_weight = 1.0;
  double queue_weight = 1.0;
  double pause_weight = 0.0;
};

// Number of thresholds <= value (0..7). NaN counts as 0.
int QuantizeLevel(double value, const std::array<double, 7>& thresholds);
// The band formula above (without the oper-status rule). O(1).
int QualityBand(double utilization, double queue_bytes, double pause_ratio,
                const QualityParams& params);

struct LinkDirectionState {
  int link_index = -1;
  Direction direction = Direction::kUp;
  const std::string* link_id = nullptr;  // Points into the table's topology copy.
  const std::string* tx_device = nullptr;
  const std::string* rx_device = nullptr;
  int64_t capacity_bps = 0;

  OperStatus oper = OperStatus::kUnknown;
  double tx_bps = 0;
  double utilization = 0;
  double tx_pps = 0;
  uint64_t queue_depth_bytes = 0;
  uint64_t queue_peak_bytes = 0;
  double ecn_marked_pps = 0;
  double cnp_pps = 0;
  // NIC -> leaf direction: the sending NIC's RoCE counters are fresh (so cnp_pps
  // = 0 means no congestion notification, not no data).
  bool has_nic_counters = false;
  double pfc_pause_ratio = 0;
  double pfc_pause_fps = 0;
  bool pfc_stormed = false;
  uint64_t pfc_deadlocks_detected = 0;  // Cumulative, as the device reports it.
  uint64_t pfc_deadlocks_restored = 0;
  double drops_pps = 0;
  double errors_pps = 0;
  uint64_t carrier_transitions = 0;  // Cumulative, both ends.
  uint32_t counter_resets = 0;       // Resets seen on either end's counters.
  bool has_rate = false;             // A tx rate was ever computed.
  TimeNs last_sample_ns = 0;         // Device timestamp behind tx_bps.
  TimeNs last_fresh_ns = -1;         // Local arrival time behind tx_bps.
  bool stale = true;
  // `oper` is current: the counters are fresh, or an end's oper-status update
  // arrived within the staleness window (a link reported down between samples,
  // or before its counters gave a first rate).
  bool oper_fresh = false;
  int quality_band = 0;
  // Operational capacity: capacity_bps unless the device reports a lower
  // negotiated speed (lanes lost, a degraded link); 0 when unknown.
  int64_t live_capacity_bps = 0;
  // NIC -> leaf direction only: mean idle gap between the NIC's transmit
  // bursts over the last interval (DLB timer tuning input); 0 = no burst seen.
  double burst_gap_ns = 0;
  // NIC -> leaf direction only: largest packet spacing inside a burst; 0 = unknown.
  double intra_burst_gap_ns = 0;
  // Catalogue signals (bit i = CatalogueSignals()[i], profile.h) that the tx
  // or rx device does not serve: decisions needing them are off here.
  uint32_t unavailable_signals = 0;
  LldpCheck lldp = LldpCheck::kUnverified;
  std::string lldp_detail;  // When contradicted.
};

struct AlbBucketState {
  std::string device;
  std::string group;
  uint32_t bucket = 0;
  std::string next_hop;  // Interface name on `device`.
  double pps = 0;
  double bps = 0;
  bool stale = true;
};

// What a NIC sent to one destination NIC (loom peers/peer[nic]/state/tx-octets):
// the demand measurement behind the controller's traffic matrices.
struct NicPeerRate {
  std::string nic, peer;
  double bps = 0;
  bool stale = true;
};

// Counts of what ingest saw; all cumulative.
struct IngestStats {
  uint64_t notifications = 0;
  uint64_t updates = 0;
  uint64_t applied = 0;
  uint64_t unknown_target = 0;
  uint64_t unknown_path = 0;  // Not in the catalogue, or an interface not in the topology.
  uint64_t bad_value = 0;     // Wrong type, negative, NaN, absurd.
  uint64_t missing_timestamp = 0;
  uint64_t out_of_order = 0;
  uint64_t resets = 0;
  uint64_t wraps = 0;
  uint64_t implausible = 0;
  uint64_t deletes = 0;
  uint64_t oper_changes = 0;  // A port's reported oper-status changed.
  // Updates in notifications stamped further in the future than the device's tolerance
  // (rejected: such a timestamp would make every later sample look old).
  uint64_t future_timestamp = 0;
  // Updates an aggregator session sent for a device outside its allow-list (rejected).
  uint64_t foreign_target = 0;
};

struct LinkStateOptions {
  StalenessPolicy staleness;
  QualityParams quality;
  // A counter rate above capacity x this factor is implausible (see counters.h).
  double max_rate_factor = 4.0;
  // A notification whose device timestamp is this far ahead of the local wall clock
  // is rejected and counted (per device: SetFutureTolerance); 0 = not checked (the
  // caller gives no wall clock it shares with the devices). loomd sets 60 s.
  TimeNs future_tolerance_ns = 0;
};

class LinkStateTable {
 public:
  LinkStateTable(const topology::TopologyIndex& index, LinkStateOptions options);
  ~LinkStateTable();
  LinkStateTable(const LinkStateTable&) = delete;
  LinkStateTable& operator=(const LinkStateTable&) = delete;

  // Applies one notification from the session of the target configured as `target`:
  // it speaks for that device whatever its prefix target says (SONiC names a database
  // there), except on an aggregator session (SetAggregator), which speaks for the
  // device its prefix target names when that device is on its allow-list.
  // `wall_now_ns` (local wall clock, 0 = unknown) judges future timestamps. Returns
  // rejected updates.
  size_t Apply(const std::string& target, const gnmi::Notification& n, TimeNs arrival_ns,
               TimeNs wall_now_ns = 0);
  // Declares `session` an aggregator (one session serving several devices, as
  // loom-fabric can) that may speak for `devices`.
  void SetAggregator(const std::string& session, std::set<std::string> devices);
  // A device's future-timestamp tolerance (its clock's allowed lead), over the default.
  void SetFutureTolerance(const std::string& device, TimeNs tolerance_ns);
  // Explicit counter reset for every counter of `device` (e.g. it restarted).
  void ResetDevice(const std::string& device);
  // What the collector learned about a signal of a device (profile mode):
  // availability, and for interface-counters the staleness interval.
  void SetSignalAvailability(const SignalAvailability& a);
  // The device's interface aliases (alias -> topology name; inventory), so
  // an LLDP port id given as an alias still verifies, and the system name it
  // announces in LLDP ("" = its id).
  void SetInterfaceAliases(const std::string& device,
                           std::unordered_map<std::string, std::string> aliases,
                           const std::string& lldp_name = "");
  // device -> signal -> reason, for the devices with unavailable signals.
  std::map<std::string, std::map<std::string, std::string>> UnavailableSignals() const;

  // State of every link direction at local time `now_ns`; index 2*link + dir.
  std::vector<LinkDirectionState> Compute(TimeNs now_ns) const;
  std::vector<AlbBucketState> AlbBuckets(TimeNs now_ns) const;
  // Every fresh (NIC, destination NIC) send rate, by (nic, peer).
  std::vector<NicPeerRate> NicPeers(TimeNs now_ns) const;
  const IngestStats& stats() const { return stats_; }
  const topology::TopologyIndex& index() const { return index_; }
  const LinkStateOptions& options() const { return options_; }

  struct Impl;

 private:
  const topology::TopologyIndex& index_;
  LinkStateOptions options_;
  IngestStats stats_;
  std::unique_ptr<Impl> impl_;
  std::map<std::string, std::set<std::string>> aggregators_;  // session -> devices
  std::map<std::string, TimeNs> future_tolerance_;            // device -> tolerance
};

// One leaf-to-leaf path and its quality. Devices are indexes into
// topology().devices(); unused hops are -1.
struct PathQuality {
  int ingress_leaf = -1;
  int spine = -1;         // Ingress-side spine.
  int super_spine = -1;   // 3-tier only.
  int egress_spine = -1;  // 3-tier only (== spine in 2-tier paths).
  int egress_leaf = -1;
  int local_band = 0;   // Ingress leaf uplink.
  int remote_band = 0;  // Downlink into the egress leaf.
  int band = 0;         // min over all hops.
  bool stale = true;
};

// Path quality for every ordered leaf pair (see the header comment). `links`
// is Compute()'s result for the same topology.
std::vector<PathQuality> ComputePathQualities(const topology::TopologyIndex& index,
                                              const std::vector<LinkDirectionState>& links);

// Everything the controller reads, taken at one instant.
struct LinkSnapshot {
  TimeNs taken_at_ns = 0;
  std::vector<LinkDirectionState> links;  // Index 2*link + direction.
  std::vector<AlbBucketState> alb_buckets;
  std::vector<NicPeerRate> nic_peers;  // by (nic, peer)
  IngestStats stats;
  // device -> signal -> reason (profile mode).
  std::map<std::string, std::map<std::string, std::string>> unavailable_signals;
};

// LinkTelemetry: the collector's sink that keeps link state current.
// Role: owns a LinkStateTable; OnNotification (collector threads) applies
// updates under a mutex; the controller pulls Snapshot() whenever it wants a
// picture (a copy; the latest value wins, so a slow puller cannot make memory
// grow). Time for staleness comes from the injected Clock.
// Thread-safe. The TopologyIndex must outlive this object.
class LinkTelemetry final : public TelemetrySink {
 public:
  LinkTelemetry(const topology::TopologyIndex& index, LinkStateOptions options, const Clock* clock);

  size_t OnNotification(const std::string& target, const gnmi::Notification& n,
                        TimeNs arrival_ns) override;
  // See LinkStateTable.
  void SetAggregator(const std::string& session, std::set<std::string> devices);
  void SetFutureTolerance(const std::string& device, TimeNs tolerance_ns);
  LinkSnapshot Snapshot() const;
  void ResetDevice(const std::string& device);
  void OnSignalAvailability(const SignalAvailability& a) override;
  void SetInterfaceAliases(const std::string& device,
                           std::unordered_map<std::string, std::string> aliases,
                           const std::string& lldp_name = "");
  // Called (on the collector's thread, without the lock) after a notification that
  // changed a port's oper-status: the owner takes a snapshot at once instead of at
  // its next interval, so a link failure is acted on within milliseconds.
  void SetOnOperChange(std::function<void()> f);
  uint64_t OperChanges() const;

 private:
  const Clock* clock_;
  mutable std::mutex mu_;
  LinkStateTable table_;
  std::function<void()> on_oper_change_;
};

}  // namespace loom::telemetry

#endif  // LOOM_TELEMETRY_LINK_STATE_H_
