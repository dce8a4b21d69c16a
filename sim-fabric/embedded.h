// EmbeddedFabric: the emulator running live inside another process (loomd's
// default run), paced against the wall clock.
//
// Role: owns a Fabric built from a scenario and a thread that steps it. It
// offers the controller the same surfaces real switches do: gNMI-shaped
// telemetry delivered into a telemetry::TelemetrySink (the same notification
// generator as the gNMI target), and an in-process southbound Driver whose
// config changes are queued to the stepping thread. Virtual time follows the
// wall clock (at most real time; slower when the fabric is too big to keep
// up), and `clock()` reads it, so telemetry staleness is judged in the
// emulator's own time.
// Thread: Start() spawns the stepping thread, the only one that touches the
// Fabric; every other method is thread-safe.
#ifndef LOOM_SIM_FABRIC_EMBEDDED_H_
#define LOOM_SIM_FABRIC_EMBEDDED_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "loom/v1/job.pb.h"
#include "sim-fabric/fabric.h"
#include "sim-fabric/gnmi_adapter.h"
#include "sim-fabric/inprocess_driver.h"
#include "sim-fabric/scenario.h"
#include "telemetry/sink.h"

namespace loom::sim {

class EmbeddedFabric {
 public:
  // Loads the scenario (topology, jobs, faults, switch modes). Jobs with
  // iterations 0 repeat until the process stops.
  static std::unique_ptr<EmbeddedFabric> Load(const std::string& scenario_path, std::string* error);
  ~EmbeddedFabric();

  const loom::v1::Topology& topology() const { return scenario_.topology; }
  // The scenario's jobs as a scheduler would register them with Loom.
  std::vector<loom::v1::Job> Jobs() const;
  // The emulator's virtual time as a Clock (WallNow = epoch + virtual).
  const Clock& clock() const { return clock_; }
  // The southbound driver programming this fabric (config applied between
  // steps on the stepping thread).
  loom::southbound::Driver* driver() { return driver_.get(); }

  // Starts stepping; telemetry of every switch goes to `sink` every
  // `interval_ns` of virtual time.
  Status Start(telemetry::TelemetrySink* sink, TimeNs interval_ns);
  void Stop();

  // A NIC's reorder behaviour ("*": every NIC), as the device inventory gives it, so the
  // emulated NICs behave as loomd is told they do; applied on the stepping thread.
  void SetNicReorder(const std::string& nic, ReorderMode mode);

  // Simulated seconds per wall second over the last few seconds.
  double speed() const { return speed_.load(); }

 private:
  class VirtualTimeClock final : public Clock {
   public:
    TimeNs Now() const override { return now_.load(std::memory_order_acquire); }
    TimeNs WallNow() const override { return epoch_ + Now(); }
    std::atomic<TimeNs> now_{0};
    TimeNs epoch_ = 0;
  };

  EmbeddedFabric() = default;
  void Run();
  void Post(std::function<void()> f);

  LoadedScenario scenario_;
  std::unique_ptr<Fabric> fabric_;
  std::unique_ptr<InProcessDriver> driver_;
  std::unique_ptr<InProcessTelemetry> telemetry_;
  VirtualTimeClock clock_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> commands_;  // guarded by mu_
  bool stop_ = false;                           // guarded by mu_
  std::atomic<double> speed_{0};
};

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_EMBEDDED_H_
