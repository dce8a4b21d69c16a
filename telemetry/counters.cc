#include "telemetry/counters.h"

namespace loom::telemetry {

const char* CounterResultName(CounterResult r) {
  switch (r) {
    case CounterResult::kFirst:
      return "first";
    case CounterResult::kRate:
      return "rate";
    case CounterResult::kWrapped:
      return "wrapped";
    case CounterResult::kReset:
      return "reset";
    case CounterResult::kImplausible:
      return "implausible";
    case CounterResult::kOutOfOrder:
      return "out_of_order";
  }
  return "unknown";
}

CounterUpdate CounterTracker::Add(TimeNs timestamp_ns, uint64_t value) {
  CounterUpdate u;
  const int width = options_.width_bits;
  const uint64_t mask = width >= 64 ? ~uint64_t{0} : ((uint64_t{1} << width) - 1);
  value &= mask;
  if (!has_baseline_) {
    has_baseline_ = true;
    last_ts_ = timestamp_ns;
    last_value_ = value;
    u.result = CounterResult::kFirst;
    return u;
  }
  if (timestamp_ns <= last_ts_) {
    u.result = CounterResult::kOutOfOrder;
    return u;
  }
  const TimeNs dt = timestamp_ns - last_ts_;
  const double seconds = static_cast<double>(dt) / static_cast<double>(kNsPerSec);
  // Modular distance forward from last_value_ to value within `width` bits.
  const uint64_t delta = (value - last_value_) & mask;
  const double rate = static_cast<double>(delta) / seconds;
  const bool backwards = value < last_value_;
  last_ts_ = timestamp_ns;
  last_value_ = value;
  if (rate > options_.max_rate) {
    u.result = backwards ? CounterResult::kReset : CounterResult::kImplausible;
    return u;
  }
  if (backwards && width >= 64 && options_.max_rate == std::numeric_limits<double>::infinity()) {
    // Without a rate bound a 64-bit wrap is judged by magnitude: a wrap means
    // the counter was within the top half of its range and now is in the
    // bottom half; anything else is a restart.
    if (delta > (uint64_t{1} << 63)) {
      u.result = CounterResult::kReset;
      return u;
    }
  }
  u.result = backwards ? CounterResult::kWrapped : CounterResult::kRate;
  u.rate = rate;
  u.delta = delta;
  u.interval_ns = dt;
  return u;
}

bool IsStale(TimeNs last_fresh_ns, TimeNs now_ns, const StalenessPolicy& policy) {
  if (last_fresh_ns < 0) return true;
  const TimeNs window =
      policy.sample_interval_ns * static_cast<TimeNs>(policy.stale_after_intervals);
  return now_ns - last_fresh_ns > window;
}

}  // namespace loom::telemetry
