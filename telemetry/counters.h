// Counter normalization: cumulative device counters -> per-second rates.
//
// CounterTracker follows one cumulative counter (octets, packets, pause
// microseconds, ...) sample by sample. Each sample carries the device's own
// timestamp (gNMI Notification.timestamp, ns since the epoch), never the
// arrival time, so network and queueing jitter do not distort rates.
//
// Rules, in order, for a sample (t, v) after the previous accepted (t0, v0):
//  - t <= t0: out of order or duplicate. Ignored (kOutOfOrder): a cumulative
//    counter's older sample adds nothing the newer one has not, and re-ordering
//    would need a window that delays every rate. Counted by the caller.
//  - v >= v0: rate = (v - v0) / (t - t0). If the rate exceeds max_rate, the
//    sample is implausible (garbage or a restart that came back above v0): no
//    rate, re-baseline on (t, v) (kImplausible).
//  - v < v0: a wrap if the counter is narrower than 64 bits or the distance
//    around the wrap, (2^width - v0) + v, gives a rate <= max_rate (kWrapped,
//    with that rate); otherwise a device restart / counter clear (kReset): no
//    rate for this interval, re-baseline on (t, v). With no max_rate set
//    (infinite), a 64-bit backwards step counts as a wrap only when the forward
//    distance is below 2^63 (the counter was near the top of its range);
//    otherwise it is a reset. With a sensible max_rate (link_state sets one
//    from link capacity) a 64-bit wrap is practically impossible, so any
//    backwards step is a reset.
//  - Reset() (explicit: target restarted, counters cleared, collector
//    reconnected to a fresh device session) forgets the baseline; the next
//    sample is kFirst.
//
// Pure value type, no clock, no threads; O(1) per sample, 48 bytes.
//
// Staleness: IsStale(last_fresh, now, policy) says whether data last refreshed
// at `last_fresh` (local monotonic time of the arrival that advanced the
// device timestamp) is older than policy.stale_after_intervals sample
// intervals. Local arrival time is used, not device time, so device clock skew
// cannot make data look fresh or stale. The controller asks and refuses to act
// on stale data.
#ifndef LOOM_TELEMETRY_COUNTERS_H_
#define LOOM_TELEMETRY_COUNTERS_H_

#include <cstdint>
#include <limits>

#include "common/clock.h"

namespace loom::telemetry {

struct CounterOptions {
  // Counter width in bits (64 for gNMI counter64; 32 for legacy counters).
  int width_bits = 64;
  // Highest believable rate in units per second. A rate above it marks the
  // sample implausible (or a backwards step as a reset rather than a wrap).
  // Default: effectively unlimited, so only backwards steps are judged.
  double max_rate = std::numeric_limits<double>::infinity();
};

enum class CounterResult {
  kFirst,        // First sample (or first after Reset()): baseline only.
  kRate,         // Normal increase; rate valid.
  kWrapped,      // Wrapped around 2^width; rate valid.
  kReset,        // Went backwards beyond what a wrap explains: restart; no rate.
  kImplausible,  // Increase faster than max_rate; no rate, re-baselined.
  kOutOfOrder,   // Timestamp not after the last accepted one; ignored.
};

// True when the result carries a valid rate.
inline bool HasRate(CounterResult r) {
  return r == CounterResult::kRate || r == CounterResult::kWrapped;
}
const char* CounterResultName(CounterResult r);

struct CounterUpdate {
  CounterResult result = CounterResult::kFirst;
  // Units per second over (previous sample, this sample]; 0 without a rate.
  double rate = 0;
  // Increase over the interval; 0 without a rate.
  uint64_t delta = 0;
  // Interval length in ns; 0 without a rate.
  TimeNs interval_ns = 0;
};

class CounterTracker {
 public:
  CounterTracker() = default;
  explicit CounterTracker(CounterOptions options) : options_(options) {}

  // Feeds one sample: device timestamp (ns) and cumulative value.
  CounterUpdate Add(TimeNs timestamp_ns, uint64_t value);
  // Forgets the baseline (explicit counter reset).
  void Reset() { has_baseline_ = false; }

  bool has_baseline() const { return has_baseline_; }
  TimeNs last_timestamp() const { return last_ts_; }
  uint64_t last_value() const { return last_value_; }
  const CounterOptions& options() const { return options_; }

 private:
  CounterOptions options_;
  bool has_baseline_ = false;
  TimeNs last_ts_ = 0;
  uint64_t last_value_ = 0;
};

struct StalenessPolicy {
  // Expected interval between samples (the SAMPLE subscription interval).
  TimeNs sample_interval_ns = 100 * kNsPerMs;
  // Data older than this many intervals is stale.
  int stale_after_intervals = 3;
};

// True when data last refreshed at local time `last_fresh_ns` is stale at
// `now_ns`. `last_fresh_ns` < 0 means "never refreshed" (always stale).
bool IsStale(TimeNs last_fresh_ns, TimeNs now_ns, const StalenessPolicy& policy);

}  // namespace loom::telemetry

#endif  // LOOM_TELEMETRY_COUNTERS_H_
