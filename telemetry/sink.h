// Hand-over from the gNMI collector to its consumers.
//
// TelemetrySink is what the collector calls with every decoded notification.
// Two implementations live here and in link_state.h:
//  - CoalescingSink: keeps the latest value per (target, path); the consumer
//    pulls TakeSnapshot(). Memory is bounded by the number of distinct paths,
//    however slowly the consumer pulls.
//  - LinkTelemetry (link_state.h): normalizes counters into per-link state and
//    quality; the controller pulls Snapshot().
//
// Threading contract: the collector calls a sink on its own threads (gRPC
// callback threads), never on the controller strand. Calls for one target are
// serialized and arrive in stream order; calls for different targets may run
// concurrently, so implementations must be thread-safe across targets. Calls
// must not block for long (no I/O): they run on the receive path.
#ifndef LOOM_TELEMETRY_SINK_H_
#define LOOM_TELEMETRY_SINK_H_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "gnmi/gnmi.pb.h"

namespace loom::telemetry {

// What the collector learned about one signal of one device (profile mode).
struct SignalAvailability {
  std::string target;
  std::string signal;  // Catalogue signal.
  bool available = true;
  std::string reason;  // When unavailable.
  // max(sample interval, device refresh interval); 0 = unknown.
  TimeNs effective_interval_ns = 0;
};

class TelemetrySink {
 public:
  virtual ~TelemetrySink() = default;
  // One notification from the target configured as `target`. `arrival_ns` is
  // the collector's Clock::Now() at receipt (local monotonic time); sample
  // time is n.timestamp(). Returns how many of its updates the sink rejected
  // (unknown path, wrong type, absurd value), for the target's health.
  virtual size_t OnNotification(const std::string& target, const gnmi::Notification& n,
                                TimeNs arrival_ns) = 0;
  // Stream lifecycle. A new stream starts with fresh initial data, so sinks
  // keep their counter baselines (a device restart shows as a counter reset).
  virtual void OnTargetConnected(const std::string& /*target*/) {}
  virtual void OnTargetSynced(const std::string& /*target*/) {}
  virtual void OnTargetDisconnected(const std::string& /*target*/) {}
  // A signal's availability or effective interval changed (profile mode).
  // Called from the collector's supervisor thread.
  virtual void OnSignalAvailability(const SignalAvailability& /*a*/) {}
};

// One path's latest value.
struct PathValue {
  std::string target;
  std::string path;  // FormatPath() of the full path (prefix joined), without target.
  gnmi::TypedValue value;
  TimeNs timestamp_ns = 0;  // Device time (Notification.timestamp).
  TimeNs arrival_ns = 0;    // Local time of receipt.
  bool deleted = false;     // The target deleted the path.
};

// Sink that coalesces updates: latest value wins per (target, path), keyed by
// the canonical text path. The consumer calls TakeSnapshot() from any thread
// (typically posts the result to the controller strand). Thread-safe.
// O(path length) per update, memory O(distinct paths).
class CoalescingSink final : public TelemetrySink {
 public:
  size_t OnNotification(const std::string& target, const gnmi::Notification& n,
                        TimeNs arrival_ns) override;
  // Values changed since the previous call (latest per path), in no order.
  std::vector<PathValue> TakeSnapshot();
  // Updates received in total (before coalescing).
  uint64_t updates_received() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, PathValue> pending_;  // key: target + '\n' + path
  uint64_t updates_received_ = 0;
};

}  // namespace loom::telemetry

#endif  // LOOM_TELEMETRY_SINK_H_
