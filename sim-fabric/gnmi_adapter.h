// The emulator's telemetry as gNMI: the notification generator shared by the
// gRPC target (gnmi_target.h) and the in-process adapter below.
//
// Pieces, in data-flow order:
//
//   Fabric --SnapshotBuilder (stepping thread)--> FabricSnapshot (immutable)
//          --GnmiSession (per Subscribe stream)--> gnmi::Notification
//
// - SnapshotBuilder reads every catalogue leaf (telemetry/README.md) of every
//   device from a Fabric at each sample tick (every GnmiOptions::tick_ns of
//   virtual time) into an immutable FabricSnapshot. Only it touches the Fabric.
// - FabricSnapshot: one value per leaf per device at one virtual instant, with
//   the leaf layout (DeviceSchema) shared between snapshots. Sample time of a
//   snapshot = epoch_ns + virtual time (ns since the Unix epoch, > 0).
// - GnmiSession: one validated gnmi::SubscriptionList (STREAM / ONCE / POLL;
//   SAMPLE, ON_CHANGE, TARGET_DEFINED) compiled against the snapshot layout.
//   It produces the initial data, the updates due at each tick (sample
//   intervals, suppress_redundant, heartbeat_interval, ON_CHANGE) and full
//   POLL updates. Its notifications group the leaves of one container under a
//   prefix (`target` = device id, origin, container elements) with relative
//   leaf paths.
// - GetNotifications / CapabilitiesResponse: the unary RPCs' contents.
// - InProcessTelemetry: the same sessions driven in virtual time, delivering
//   into a telemetry::TelemetrySink (no gRPC, no threads).
//
// Catalogue served (telemetry/README.md, plus the loom port speed below):
// OpenConfig interface state and counters (switches and NICs); loom
// operational port speed, loom:/interfaces/interface[name=*]/ethernet/state/
// operational-speed-bps (b/s, the current speed: Fabric::DegradeLink lowers it;
// a state leaf, ON_CHANGE under TARGET_DEFINED); OpenConfig qos output queues "0".."7"
// (transmit-pkts, transmit-octets, dropped-pkts, ecn-marked-pkts,
// max-queue-len) and loom current-queue-len (switches); loom PFC per priority
// (switches and NICs) and PFC watchdog (switches); loom NIC RoCE counters
// (NICs, under the NIC's first interface; packet_seq_err and
// local_ack_timeout_err are always 0: the fluid model has no such events),
// with the loom transmit-burst leaves tx_bursts and tx_idle_ns (counters) and
// tx_max_spacing_ns (NicCounters; a SAMPLE subscription reports the peak over
// its interval of the per-tick values, like max-queue-len); loom ALB buckets
// per configured ALB group (group name = destination leaf).
//
// max-queue-len is a per-interval watermark: the snapshot holds the peak since
// the previous tick (exact when the queue reached a new all-time high in the
// tick, else the highest depth seen by Observe() polls and at the two ticks);
// a SAMPLE subscription reports the peak over its own interval.
//
// Errors (gNMI spec): a malformed request (no subscription, bad mode, sample
// or heartbeat interval below GnmiOptions::min_sample_interval_ns, unknown
// encoding value) -> INVALID_ARGUMENT; BYTES/ASCII encoding -> UNIMPLEMENTED;
// an unknown target, or a path outside the served schema -> NOT_FOUND. A
// schema path that matches no current data (ALB before ALB is configured) is
// not an error: Subscribe sends nothing for it; Get returns NOT_FOUND only for
// a path without wildcards.
//
// Threading: SnapshotBuilder follows the Fabric's contract (the thread that
// steps the Fabric). FabricSnapshot is immutable and shared freely. A
// GnmiSession is not thread-safe (its owner serialises calls). Free functions
// are pure. InProcessTelemetry runs on the thread that steps the Fabric.
#ifndef LOOM_SIM_FABRIC_GNMI_ADAPTER_H_
#define LOOM_SIM_FABRIC_GNMI_ADAPTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "gnmi/gnmi.pb.h"
#include "sim-fabric/fabric.h"
#include "telemetry/collector.h"
#include "telemetry/sink.h"

namespace loom::sim {

struct GnmiOptions {
  // Snapshot period (virtual time) = the smallest supported sample interval;
  // sample_interval 0 ("fastest") means this.
  TimeNs tick_ns = 1 * kNsPerMs;
  // SAMPLE intervals (and heartbeats) below this are INVALID_ARGUMENT.
  TimeNs min_sample_interval_ns = 1 * kNsPerMs;
  // Counter interval of TARGET_DEFINED subscriptions without sample_interval.
  TimeNs default_sample_interval_ns = 100 * kNsPerMs;
  // Wall-clock time (ns since the Unix epoch) of virtual time 0; 0 = the
  // system clock when the SnapshotBuilder is created.
  int64_t epoch_ns = 0;
  // Queue-depth poll period for max-queue-len between ticks (virtual time);
  // 0 = only at ticks. Costs one counter read per switch queue per poll.
  TimeNs watermark_poll_ns = 0;
  // How often ALB groups are rediscovered (virtual time).
  TimeNs alb_rescan_ns = 1 * kNsPerSec;
};

enum class LeafKind : uint8_t {
  kCounter,  // counter64, sampled
  kGauge,    // gauge64, sampled
  kPeak,     // per-interval watermark (max-queue-len)
  kState,    // enumeration / string / rarely changing number; ON_CHANGE under TARGET_DEFINED
};

struct LeafValue {
  uint64_t u = 0;
  std::string s;
  bool is_string = false;
  bool operator==(const LeafValue& o) const {
    return is_string == o.is_string && u == o.u && s == o.s;
  }
  bool operator!=(const LeafValue& o) const { return !(*this == o); }
};

// The leaf layout of one device; immutable once built.
struct DeviceSchema {
  struct Container {
    gnmi::Path prefix;  // origin + elements, no target
    int first_leaf = 0;
    int leaf_count = 0;
  };
  struct Leaf {
    gnmi::Path rel;  // elements relative to the container
    LeafKind kind = LeafKind::kCounter;
    int container = 0;
  };
  std::string device;
  bool is_switch = false;
  std::vector<Container> containers;
  std::vector<Leaf> leaves;
  std::vector<std::string> alb_groups;  // destination leaves with an ALB table
  std::vector<int> alb_sizes;           // buckets per group
};

// Every device's leaf values at one virtual instant. Immutable.
struct FabricSnapshot {
  TimeNs virtual_ns = 0;
  int64_t timestamp_ns = 0;                                  // epoch_ns + virtual_ns
  uint64_t seq = 0;                                          // 1, 2, ... per builder
  std::vector<std::shared_ptr<const DeviceSchema>> schemas;  // Fabric::Devices() order
  std::vector<std::vector<LeafValue>> values;                // [device][leaf]
  std::shared_ptr<const std::unordered_map<std::string, int>> device_index;

  // Index of `device` or -1.
  int Find(const std::string& device) const;
};

// SnapshotBuilder: role — turns a Fabric's counters into FabricSnapshots at
// sample ticks. Trigger — OnStep() after every Fabric::Step() (captures when a
// tick is due), or Capture() to force one. Thread — the Fabric's stepping
// thread. O(devices x leaves) per capture.
class SnapshotBuilder {
 public:
  SnapshotBuilder(const Fabric& fabric, GnmiOptions options);
  ~SnapshotBuilder();
  SnapshotBuilder(const SnapshotBuilder&) = delete;
  SnapshotBuilder& operator=(const SnapshotBuilder&) = delete;

  // Captures when fabric.now() reached the next tick (polls queue depths when
  // watermark_poll_ns is due); otherwise nullptr.
  std::shared_ptr<const FabricSnapshot> OnStep();
  // Captures now, whatever the tick schedule.
  std::shared_ptr<const FabricSnapshot> Capture();
  // Reads every switch queue's depth into the per-interval peak.
  void Observe();
  const GnmiOptions& options() const { return options_; }
  TimeNs next_tick_ns() const { return next_tick_; }

 private:
  struct DeviceState;
  void RescanAlb();

  const Fabric& fabric_;
  GnmiOptions options_;
  std::vector<std::unique_ptr<DeviceState>> devices_;
  std::shared_ptr<const std::unordered_map<std::string, int>> device_index_;
  uint64_t seq_ = 0;
  TimeNs next_tick_ = 0;
  TimeNs next_observe_ = 0;
  TimeNs next_alb_scan_ = 0;
};

// The catalogue leaf templates ("*" key values), e.g. for docs and tests.
std::vector<std::string> CatalogueLeafPaths();

// True when `path` (a subscription or Get path, prefix joined) may select a
// catalogue leaf: origin matches and the elements are a prefix-pattern of a
// catalogue path ("*" / "..." / "*" key values allowed).
bool InCatalogue(const gnmi::Path& path);

// SubscribeSession: role — the interface GnmiTarget drives for one Subscribe
// stream: GnmiSession (the loom catalogue) or a platform personality's
// session (personality.h). Trigger — its owner calls Initial() once, then
// Tick() with every published snapshot (STREAM) or Poll() per Poll request
// (POLL). Thread — not thread-safe; one owner at a time.
class SubscribeSession {
 public:
  virtual ~SubscribeSession() = default;
  virtual gnmi::SubscriptionList::Mode mode() const = 0;
  // Initial data (nothing with updates_only); the caller sends sync_response
  // after it.
  virtual void Initial(const FabricSnapshot& snap, std::vector<gnmi::Notification>* out) = 0;
  // STREAM: what is due at this snapshot.
  virtual void Tick(const FabricSnapshot& snap, std::vector<gnmi::Notification>* out) = 0;
  // POLL: every subscribed value.
  virtual void Poll(const FabricSnapshot& snap, std::vector<gnmi::Notification>* out) = 0;
};

// GnmiSession: role — one Subscribe stream's subscriptions, compiled against
// the snapshot layout, with per-leaf delivery state. Trigger — its owner calls
// Initial() once, then Tick() with every published snapshot (STREAM) or Poll()
// per Poll request (POLL). Thread — not thread-safe; one owner at a time.
class GnmiSession final : public SubscribeSession {
 public:
  // Validates `list` (see the header comment for the error codes) against the
  // devices of `snap` and `options`.
  static Status Create(const gnmi::SubscriptionList& list, const FabricSnapshot& snap,
                       const GnmiOptions& options, std::unique_ptr<GnmiSession>* out);

  gnmi::SubscriptionList::Mode mode() const override { return mode_; }
  // Initial data for the subscription (nothing with updates_only); the caller
  // sends sync_response after it.
  void Initial(const FabricSnapshot& snap, std::vector<gnmi::Notification>* out) override;
  // STREAM: what is due at this snapshot (sample intervals, changes, heartbeats).
  void Tick(const FabricSnapshot& snap, std::vector<gnmi::Notification>* out) override;
  // POLL: every subscribed leaf's current value.
  void Poll(const FabricSnapshot& snap, std::vector<gnmi::Notification>* out) override;
  // Device names this session serves.
  std::vector<std::string> targets() const;

 private:
  struct Sub {
    gnmi::Path path;  // prefix joined, no target
    gnmi::SubscriptionMode mode = gnmi::TARGET_DEFINED;
    TimeNs interval_ns = 0;
    TimeNs heartbeat_ns = 0;
    bool suppress = false;
    TimeNs next_due = 0;
  };
  struct Entry {
    int leaf = 0;
    int sub = 0;
    bool on_change = false;
  };
  struct LeafState {
    LeafValue last;
    TimeNs last_sent = 0;
    bool sent = false;
    uint64_t peak = 0;
  };
  struct DeviceSub {
    int device = 0;
    std::shared_ptr<const DeviceSchema> schema;
    std::vector<Entry> entries;  // sorted by (leaf, sub)
    std::vector<LeafState> state;
  };
  enum class Pass { kInitial, kTick, kPoll };

  GnmiSession() = default;
  void Compile(DeviceSub& d, const FabricSnapshot& snap);
  void Run(const FabricSnapshot& snap, Pass pass, std::vector<gnmi::Notification>* out);

  gnmi::SubscriptionList::Mode mode_ = gnmi::SubscriptionList::STREAM;
  bool updates_only_ = false;
  std::vector<Sub> subs_;
  std::vector<DeviceSub> devices_;
};

// Get: one notification per (requested path, device) with data; errors as in
// the header comment (CONFIG data type: no data).
Status GetNotifications(const FabricSnapshot& snap, const gnmi::GetRequest& req,
                        gnmi::GetResponse* resp);
// Capabilities: supported models and encodings, gNMI version.
gnmi::CapabilityResponse CapabilitiesResponse();
// OK for JSON, JSON_IETF, PROTO; UNIMPLEMENTED for BYTES/ASCII; else INVALID_ARGUMENT.
Status CheckEncoding(int encoding);

// One device and what to subscribe on it (collector-style specs).
struct InProcessTarget {
  std::string name;
  std::vector<telemetry::SubscriptionSpec> subscriptions;
};

// The collector's catalogue subscriptions for every device of `fabric`:
// telemetry::SwitchSubscriptions for switches, NicSubscriptions for NICs.
std::vector<InProcessTarget> DefaultInProcessTargets(const Fabric& fabric, TimeNs interval_ns);

// InProcessTelemetry: role — the emulator as a gNMI target without gRPC, for
// deterministic virtual-time tests: the same SnapshotBuilder and GnmiSessions
// as GnmiTarget, one STREAM subscription per target built exactly as the
// collector builds it, delivering into a TelemetrySink. Trigger — the test
// calls OnStep() after stepping the fabric (or RunUntil()). Thread — the
// Fabric's stepping thread; no threads of its own. The sink sees
// OnTargetConnected, the initial data, OnTargetSynced, then updates, with
// arrival_ns = `arrival_clock`->Now() (default: the fabric's virtual time).
class InProcessTelemetry {
 public:
  // `fabric` and `sink` (and `arrival_clock` when given) must outlive this.
  InProcessTelemetry(Fabric* fabric, GnmiOptions options, std::vector<InProcessTarget> targets,
                     telemetry::TelemetrySink* sink, const Clock* arrival_clock = nullptr);
  ~InProcessTelemetry();

  // Validates the subscriptions (same errors as the gRPC target) and delivers
  // the initial data and sync. Call once.
  Status Start();
  // After Fabric::Step(): on a tick, captures and delivers what is due.
  // Returns the notifications delivered.
  size_t OnStep();
  // Advances the fabric until now() >= t (Fabric::Advance: steps, or
  // fast-forward jumps that never pass a sample tick), calling OnStep() after each.
  void RunUntil(TimeNs t);
  uint64_t notifications_delivered() const { return delivered_; }

 private:
  void Deliver(size_t target, const std::vector<gnmi::Notification>& ns);

  Fabric* fabric_;
  GnmiOptions options_;
  std::vector<InProcessTarget> targets_;
  telemetry::TelemetrySink* sink_;
  const Clock* arrival_clock_;
  std::unique_ptr<SnapshotBuilder> builder_;
  std::vector<std::unique_ptr<GnmiSession>> sessions_;
  uint64_t delivered_ = 0;
};

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_GNMI_ADAPTER_H_
