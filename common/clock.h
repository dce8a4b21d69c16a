// Time source for the controller and the emulator.
//
// Everything that needs "now" reads a Clock, so closed-loop tests can run the
// same code in virtual time. Threading: SteadyClock is thread-safe;
// VirtualClock is thread-safe for Now() and Advance() (atomic), but a test
// normally advances it from one thread only.
#ifndef LOOM_COMMON_CLOCK_H_
#define LOOM_COMMON_CLOCK_H_

#include <atomic>
#include <cstdint>

namespace loom {

// Nanoseconds on the clock's own time line.
using TimeNs = int64_t;

constexpr TimeNs kNsPerUs = 1000;
constexpr TimeNs kNsPerMs = 1000 * kNsPerUs;
constexpr TimeNs kNsPerSec = 1000 * kNsPerMs;

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time in nanoseconds.
  virtual TimeNs Now() const = 0;
  // Wall-clock time in nanoseconds since the Unix epoch, for timestamps shown
  // to people and stored in events.
  virtual TimeNs WallNow() const = 0;
};

// Production clock: std::chrono::steady_clock and system_clock.
class SteadyClock final : public Clock {
 public:
  TimeNs Now() const override;
  TimeNs WallNow() const override;
};

// Test clock that only moves when told to. WallNow() is a fixed epoch plus
// Now(), so runs are reproducible.
class VirtualClock final : public Clock {
 public:
  explicit VirtualClock(TimeNs start = 0, TimeNs wall_epoch = 1'700'000'000 * kNsPerSec)
      : now_(start), wall_epoch_(wall_epoch) {}
  TimeNs Now() const override { return now_.load(std::memory_order_acquire); }
  TimeNs WallNow() const override { return wall_epoch_ + Now(); }
  // Moves time forward by `delta` (>= 0).
  void Advance(TimeNs delta) { now_.fetch_add(delta, std::memory_order_acq_rel); }
  // Sets time; never moves it backwards.
  void Set(TimeNs t);

 private:
  std::atomic<TimeNs> now_;
  const TimeNs wall_epoch_;
};

}  // namespace loom

#endif  // LOOM_COMMON_CLOCK_H_
