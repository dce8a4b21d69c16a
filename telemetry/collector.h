// gNMI dial-in collector.
//
// Collector: role — keeps one gNMI Subscribe stream (STREAM mode; SAMPLE for
// counters, ON_CHANGE for oper-status and PFC watchdog state) open to every
// configured target, reconnects with jittered exponential backoff, tracks
// per-target health, and hands every received notification to a
// TelemetrySink (sink.h), which coalesces (latest value wins) so a slow
// consumer cannot make memory grow.
// Triggers — Start() opens the streams; gRPC delivers responses; a supervisor
// thread reopens failed streams when their backoff expires (judged on the
// injected Clock, polled every 20 ms of real time, so a VirtualClock controls
// reconnect timing in tests).
// Threads — the collector never runs on the controller strand. Responses are
// decoded and passed to the sink on gRPC callback threads (one read in flight
// per target, so per-target order is preserved; different targets run
// concurrently). The supervisor thread only starts calls. Health() and Stop()
// may be called from any thread. After Stop() returns the sink is not called
// again.
//
// Bad input: a target whose stream fails (bad message, message over the size
// limit, protocol error) is counted and reconnected with backoff; updates the
// sink rejects are counted per target; notifications beyond the per-target
// update-rate limit are dropped and counted. None of it affects other targets.
#ifndef LOOM_TELEMETRY_COLLECTOR_H_
#define LOOM_TELEMETRY_COLLECTOR_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "gnmi/gnmi.pb.h"
#include "telemetry/sink.h"

namespace loom::telemetry {

struct SubscriptionSpec {
  std::string path;  // Text form (path.h), may carry an origin ("loom:/pfc/...").
  gnmi::SubscriptionMode mode = gnmi::SAMPLE;
  TimeNs sample_interval_ns = 0;  // SAMPLE only; 0 = target's fastest.
};

// The catalogue subscriptions (telemetry/README.md) for a switch and a NIC.
std::vector<SubscriptionSpec> SwitchSubscriptions(TimeNs sample_interval_ns);
std::vector<SubscriptionSpec> NicSubscriptions(TimeNs sample_interval_ns);

struct TargetConfig {
  std::string name;     // Device id; sent as the request's prefix target.
  std::string address;  // "host:port". Plaintext for now (TLS later).
  std::vector<SubscriptionSpec> subscriptions;
};

struct BackoffPolicy {
  TimeNs initial_ns = 100 * kNsPerMs;
  TimeNs max_ns = 30 * kNsPerSec;
  double multiplier = 2.0;
  double jitter = 0.2;  // Delay is scaled by a uniform factor in [1 - jitter, 1 + jitter].
};

// Delay before the next attempt after `failures` (>= 1) consecutive failed
// attempts: min(max, initial * multiplier^(failures-1)) * (1 + jitter*(2u-1)),
// with `u` uniform in [0, 1). Pure, O(1).
TimeNs BackoffDelay(const BackoffPolicy& policy, int failures, double u);

struct CollectorOptions {
  std::vector<TargetConfig> targets;
  BackoffPolicy backoff;
  // Largest response message accepted; bigger ones fail the stream.
  int max_message_bytes = 16 * 1024 * 1024;
  // Per-target update budget per second of Clock time; 0 = unlimited.
  uint64_t max_updates_per_sec = 0;
  // Seed for backoff jitter; 0 = random.
  uint64_t seed = 0;
};

struct TargetHealth {
  std::string name;
  std::string address;
  bool connected = false;      // The current stream has heard from the target.
  bool synced = false;         // The current stream has seen sync_response.
  TimeNs last_update_ns = -1;  // Local Clock time of the last notification.
  uint64_t notifications = 0;
  uint64_t updates = 0;
  uint64_t rejected_updates = 0;  // Refused by the sink (unknown path, bad value).
  uint64_t dropped_updates = 0;   // Over the update-rate limit.
  uint64_t stream_errors = 0;     // Streams that ended (failed to connect or broke).
  uint64_t connect_attempts = 0;
  uint64_t reconnects = 0;  // Attempts after the first.
  int consecutive_failures = 0;
  TimeNs next_attempt_ns = 0;  // When idle: the Clock time of the next attempt.
  std::string last_error;      // "UNAVAILABLE: ..." of the last failed stream.
};

class Collector {
 public:
  // `sink` and `clock` must outlive the collector.
  Collector(CollectorOptions options, TelemetrySink* sink, const Clock* clock);
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // Validates the configuration (names unique and non-empty, subscription
  // paths parse) and starts. INVALID_ARGUMENT names the offending target/path.
  Status Start();
  // Cancels every stream and waits for them to finish. Idempotent.
  void Stop();
  // A copy of every target's health, in configuration order.
  std::vector<TargetHealth> Health() const;

 private:
  class Call;
  struct Target;

  void SupervisorLoop();
  void StartCallLocked(Target& t, TimeNs now);
  void OnConnected(Target& t);
  void OnResponse(Target& t, const gnmi::SubscribeResponse& r);
  void OnCallDone(Target& t, const std::string& error, Call* call);
  void DeleteFinishedCalls(std::unique_lock<std::mutex>& lock);

  const CollectorOptions options_;
  TelemetrySink* const sink_;
  const Clock* const clock_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Target>> targets_;
  std::mt19937_64 rng_;
  std::vector<Call*> finished_calls_;  // Done; deleted off the gRPC threads.
  int active_calls_ = 0;
  bool started_ = false;
  bool stopping_ = false;
  std::thread supervisor_;
};

}  // namespace loom::telemetry

#endif  // LOOM_TELEMETRY_COLLECTOR_H_
