#include "common/clock.h"

#include <chrono>

namespace loom {

TimeNs SteadyClock::Now() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TimeNs SteadyClock::WallNow() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void VirtualClock::Set(TimeNs t) {
  TimeNs cur = now_.load(std::memory_order_acquire);
  while (t > cur && !now_.compare_exchange_weak(cur, t, std::memory_order_acq_rel)) {
  }
}

}  // namespace loom
