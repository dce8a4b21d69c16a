// gNMI dial-in collector.
//
// Collector: role — keeps gNMI Subscribe streams (STREAM mode) open to every
// configured target, reconnects with jittered exponential backoff, tracks
// per-target and per-signal health, and hands every received notification to
// a TelemetrySink (sink.h), which coalesces (latest value wins) so a slow
// consumer cannot make memory grow.
//
// Two modes per target:
//  - Profile mode (TargetConfig.profile set; what loomd uses): Capabilities
//    first, the encoding chosen from what the target advertises (the
//    profile's preference order); the profile's signal paths subscribed in
//    one stream per (origin, prefix target) group, key maps in their own
//    streams; answers translated to the catalogue by a ProfileTranslator
//    (profile.h) before the sink sees them. gNMI rejects a whole Subscribe
//    for one bad path, so a group the target rejects (INVALID_ARGUMENT,
//    NOT_FOUND, UNIMPLEMENTED, FAILED_PRECONDITION, OUT_OF_RANGE, before any
//    data) is split in halves until the offending paths are isolated; a
//    rejected ON_CHANGE path is retried once as SAMPLE; a path still
//    rejected marks its signals unavailable with the target's status text
//    and is retried alone after the rejection backoff (30 s doubling to
//    10 min by default) — never in a tight loop. Signals the profile does
//    not map are unavailable from the start; a subscription that is accepted
//    but brings no data within a few refresh intervals after sync is
//    unavailable too ("no data"). Availability and each signal's effective
//    interval (max(sample interval, device refresh)) are passed to the sink.
//  - Plain mode (no profile): the given SubscriptionSpecs in one stream with
//    PROTO encoding, notifications passed through unchanged (tests, tools).
// Triggers — Start() opens the streams; gRPC delivers responses; a supervisor
// thread reopens failed streams when their backoff expires (judged on the
// injected Clock, polled every 20 ms of real time, so a VirtualClock controls
// reconnect timing in tests).
// Threads — the collector never runs on the controller strand. Responses are
// decoded and passed to the sink on gRPC callback threads (one read in flight
// per stream, so per-stream order is preserved; a profile-mode target has a
// few streams, translated under the target's own lock; different targets run
// concurrently). Ingest queues are per target and per stream, never shared:
// a stream has one read in flight and asks for the next only after the sink
// took the last, so a target's backlog waits in its own stream (gRPC's
// per-stream buffer, then HTTP/2 flow control back to the target) and a
// burst from one target never queues another target's notifications behind
// it (tests: CollectorTest.NoisyTargetDoesNotQueueOthersBehindIt, e2e
// noisy_gnmi_target). The supervisor thread starts calls and tells the sink about
// signal availability (OnSignalAvailability). Health(), UpdateTargets() and
// Stop() may be called from any thread. After Stop() returns the sink is not
// called again. Lock order: the collector's mutex, then a target's
// translator lock; never the reverse.
//
// Liveness, per subscription group (stream): once a stream has delivered an
// update after its sync_response, it must keep talking — a group with SAMPLE
// subscriptions at least every max(sample interval), an ON_CHANGE group every
// heartbeat when the profile says the platform honours heartbeats (they are
// then requested). Silent for liveness_intervals of that (at least
// liveness_floor_ns), the group's stream is cancelled and redialled on a new
// connection after the backoff, and counted (TargetHealth.silent_cuts); the
// other groups of the target keep their streams. ON_CHANGE groups without
// heartbeats, and dead connections generally, are caught by gRPC keepalive
// (keepalive_time_ns / keepalive_timeout_ns on every channel).
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
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/tls_channel.h"
#include "gnmi/gnmi.pb.h"
#include "loom/v1/telemetry_profile.pb.h"
#include "telemetry/sink.h"

namespace grpc {
class Channel;
}

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
  std::string name;                             // Device id; sent as the request's prefix target.
  std::string address;                          // "host:port".
  std::vector<SubscriptionSpec> subscriptions;  // Plain mode only.

  // Profile mode.
  std::shared_ptr<const v1::TelemetryProfile> profile;
  std::vector<std::string> encodings;  // Preference override ("" = the profile's).
  std::string request_target;          // prefix.target for device paths ("" = name).
  TimeNs sample_interval_ns = 0;       // Raised to the profile's minimum.
  std::unordered_map<std::string, std::string> aliases;  // Interface alias -> name.
  std::string username;  // gNMI "username"/"password" call metadata, if set.
  std::string password;
  // Plaintext or TLS (common/tls_channel.h). A connection that fails
  // over TLS is reported with the TLS settings in last_error.
  loom::TlsClientConfig tls;
  // Catalogue signals that apply to the device (its role); empty = all.
  // Others are neither subscribed nor reported.
  std::vector<std::string> signals;
};

// A plain-mode target.
inline TargetConfig PlainTarget(std::string name, std::string address,
                                std::vector<SubscriptionSpec> subscriptions) {
  TargetConfig t;
  t.name = std::move(name);
  t.address = std::move(address);
  t.subscriptions = std::move(subscriptions);
  return t;
}

// Equal configurations keep their streams across a reload.
bool SameTarget(const TargetConfig& a, const TargetConfig& b);

enum class SignalState : uint8_t { kPending, kLive, kStale, kUnavailable };
const char* SignalStateName(SignalState s);

// One catalogue signal of one target (profile mode).
struct SignalHealth {
  std::string signal;
  SignalState state = SignalState::kPending;
  std::string reason;  // Why unavailable / stale.
  std::string mode;    // "SAMPLE" / "ON_CHANGE" in use; "" when not subscribed.
  std::string mark;    // SOURCED / UNVERIFIED.
  TimeNs effective_interval_ns = 0;
  TimeNs last_arrival_ns = -1;
  uint64_t updates = 0;
  uint64_t rejects = 0;    // Subscribe attempts the target rejected.
  TimeNs retry_at_ns = 0;  // Next retry of a rejected subscription; 0 = none.
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
  // Retry of a subscription path the target rejected.
  BackoffPolicy reject_backoff{30 * kNsPerSec, 600 * kNsPerSec, 2.0, 0.2};
  // Data older than this many effective intervals makes a signal stale.
  int stale_after_intervals = 3;
  // Deadline of the Capabilities call (real time).
  TimeNs capabilities_timeout_ns = 5 * kNsPerSec;
  // Largest response message accepted; bigger ones fail the stream.
  int max_message_bytes = 16 * 1024 * 1024;
  // Per-target update budget per second of Clock time; 0 = unlimited.
  uint64_t max_updates_per_sec = 0;
  // Seed for backoff jitter; 0 = random.
  uint64_t seed = 0;
  // A subscription group silent for this many of its intervals (sample interval,
  // or heartbeat) is dead: cancelled and redialled. Never sooner than the floor.
  int liveness_intervals = 5;
  TimeNs liveness_floor_ns = 2 * kNsPerSec;
  // gRPC keepalive on every channel (HTTP/2 PING every keepalive_time_ns while a
  // stream is open; no answer within keepalive_timeout_ns fails the connection).
  // 0 = off. Servers that find pings too frequent answer GOAWAY too_many_pings,
  // after which gRPC doubles the interval by itself.
  TimeNs keepalive_time_ns = 30 * kNsPerSec;
  TimeNs keepalive_timeout_ns = 10 * kNsPerSec;
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
  // Subscription groups cut for silence (liveness) and redialled.
  uint64_t silent_cuts = 0;
  int consecutive_failures = 0;
  TimeNs next_attempt_ns = 0;  // When idle: the Clock time of the next attempt.
  std::string last_error;      // "UNAVAILABLE: ..." of the last failed stream.
  // Profile mode.
  std::string platform;               // Profile name.
  std::string encoding;               // Negotiated ("" before Capabilities).
  int streams = 0;                    // Subscribe streams (groups after splitting).
  uint64_t subscribe_rejects = 0;     // Subscribe requests the target rejected.
  uint64_t translate_errors = 0;      // Bad JSON / values in answers.
  std::vector<SignalHealth> signals;  // Catalogue order.
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
  // Replaces the target list (a configuration reload): targets whose
  // configuration is unchanged (SameTarget) keep their streams and state;
  // removed ones are cancelled; new ones start. Any thread, after Start().
  Status UpdateTargets(std::vector<TargetConfig> targets);

 private:
  class Call;
  class CapsCall;
  struct Entry;
  struct Stream;
  struct Target;

  Status Validate(const std::vector<TargetConfig>& targets) const;
  std::unique_ptr<Target> MakeTarget(const TargetConfig& cfg, TimeNs now);
  void SupervisorLoop();
  void StartCallLocked(Target& t, Stream& s, TimeNs now);
  TimeNs LivenessWindow(const Stream& s) const;
  void CutSilentStreamsLocked(Target& t, TimeNs now);
  void NoteMessageLocked(Stream& s, TimeNs arrival);
  void StartCapsLocked(Target& t, TimeNs now);
  void BuildStreamsLocked(Target& t, TimeNs now);
  void BuildRequest(const Target& t, Stream& s) const;
  void OnCaps(Target& t, int code, const std::string& error, std::vector<int> encodings,
              CapsCall* call);
  void OnConnected(Target& t, Stream& s);
  void OnResponse(Target& t, Stream& s, const gnmi::SubscribeResponse& r);
  void OnCallDone(Target& t, Stream& s, int code, const std::string& error, Call* call);
  void DeleteFinishedCalls(std::unique_lock<std::mutex>& lock);
  void RefreshSignalsLocked(Target& t, TimeNs now, std::vector<SignalAvailability>* changes);
  std::shared_ptr<grpc::Channel> NewChannel(const Target& t) const;

  CollectorOptions options_;
  TelemetrySink* const sink_;
  const Clock* const clock_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Target>> targets_;
  std::vector<std::unique_ptr<Target>> retired_;  // Removed by a reload, calls draining.
  std::mt19937_64 rng_;
  std::vector<Call*> finished_calls_;  // Done; deleted off the gRPC threads.
  std::vector<CapsCall*> finished_caps_;
  int active_calls_ = 0;
  bool started_ = false;
  bool stopping_ = false;
  std::thread supervisor_;
};

}  // namespace loom::telemetry

#endif  // LOOM_TELEMETRY_COLLECTOR_H_
