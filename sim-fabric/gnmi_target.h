// The emulator as a gNMI target over gRPC (service gnmi.gNMI), and the loop
// that steps a Fabric for it.
//
// GnmiTarget serves the telemetry catalogue (telemetry/README.md) of every
// device of one Fabric on one port; a request's prefix.target selects the
// device (one target name per switch and per NIC = its device id; "" or "*"
// selects all of them, each notification naming its device in
// prefix.target). RPCs:
//   Capabilities  models openconfig-interfaces, openconfig-qos and the loom
//                 extensions; encodings JSON_IETF, PROTO (and JSON).
// With a TargetBehaviour (SetBehaviour) the target serves that instead:
// Capabilities, Get, Subscribe and Set come from the behaviour (same
// threading, queueing and errors; a platform personality's Set validates
// against its platform's YANG models, personality.h).
//   Get           the latest snapshot's leaves under the paths (type ALL or
//                 STATE; see Set for CONFIG and OPERATIONAL).
//   Subscribe     STREAM (SAMPLE with sample_interval / suppress_redundant /
//                 heartbeat_interval, ON_CHANGE, TARGET_DEFINED = SAMPLE for
//                 counters and ON_CHANGE for state), ONCE (initial data,
//                 sync_response, OK) and POLL (initial data and sync, then one
//                 full update and sync per Poll); sync_response once after the
//                 initial data. The semantics are GnmiSession's
//                 (gnmi_adapter.h), shared with InProcessTelemetry.
//   Set           with a WireConfig attached (AttachConfig; loom-fabric always
//                 attaches one): the "loom" config schema of
//                 southbound/gnmi/gnmi_config.h for the switch in prefix.target
//                 (colors, routes, GLB weights, DLB, ALB tables, spraying,
//                 ECN/PFC thresholds), one transaction validated by the
//                 southbound codec (INVALID_ARGUMENT, nothing applied), applied
//                 to the fabric on the loop thread before the SetResponse is
//                 sent; unknown switch -> NOT_FOUND. Without one: UNIMPLEMENTED.
//   Get           type CONFIG: the gNMI-written config (the codec's
//                 EncodeGetResponse); type OPERATIONAL: what the switch runs,
//                 BGP-learned colors/routes/weights included (wire_config.h).
//                 Other types: telemetry as above.
// Errors follow the gNMI spec; see gnmi_adapter.h. A stream whose client
// falls more than GnmiTargetOptions::max_queued_responses behind is ended
// with RESOURCE_EXHAUSTED; bad requests never affect other streams.
//
// Threading contract: the Fabric is single-threaded, so the gRPC handlers
// never touch it. The thread that steps the Fabric (FabricLoop, or a test)
// builds an immutable FabricSnapshot at every sample tick and calls
// Publish(); Publish evaluates every STREAM subscription and queues its
// updates. Handlers (gRPC callback threads) read the latest snapshot under
// the target's mutex; each stream's delivery state is guarded by its own
// mutex (lock order: target, then stream). Writes are asynchronous (one in
// flight per stream), so Publish never waits for a client.
#ifndef LOOM_SIM_FABRIC_GNMI_TARGET_H_
#define LOOM_SIM_FABRIC_GNMI_TARGET_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "sim-fabric/fabric.h"
#include "sim-fabric/gnmi_adapter.h"
#include "sim-fabric/wire_config.h"

namespace grpc {
class Server;
}

namespace loom::sim {

// TargetBehaviour: role — what a GnmiTarget serves when it is not Loom's
// catalogue: a platform personality (personality.h) answering Capabilities,
// Get and Subscribe the way one switch OS does. Trigger — the target's gRPC
// handlers (Capabilities, Get, Subscribe) and Publish(). Thread —
// Capabilities(), Get(), Set() and CreateSession() on gRPC callback threads,
// concurrently; OnPublish() on the stepping thread with the target's mutex
// held, before the streams tick. Implementations guard their own state.
class TargetBehaviour {
 public:
  virtual ~TargetBehaviour() = default;
  virtual gnmi::CapabilityResponse Capabilities() const = 0;
  virtual Status Get(const FabricSnapshot& snap, const gnmi::GetRequest& req,
                     gnmi::GetResponse* resp) = 0;
  // Validates `list` (gNMI status codes, messages naming the path or field)
  // and compiles it against `snap`.
  virtual Status CreateSession(const gnmi::SubscriptionList& list, const FabricSnapshot& snap,
                               std::unique_ptr<SubscribeSession>* out) = 0;
  virtual void OnPublish(const std::shared_ptr<const FabricSnapshot>& snap) = 0;
  // gNMI Set. `done` is called exactly once, on any thread; `req` stays
  // valid until then. Default: UNIMPLEMENTED.
  virtual void Set(const gnmi::SetRequest& req,
                   std::function<void(Status, gnmi::SetResponse)> done) {
    (void)req;
    done(Status(StatusCode::kUnimplemented, "gNMI Set is not supported by this target"),
         gnmi::SetResponse());
  }
};

struct GnmiTargetOptions {
  // "host:port"; port 0 = any free port (see port()).
  std::string listen_address = "127.0.0.1:0";
  // Responses queued for one stream beyond which it is ended (slow client).
  size_t max_queued_responses = 65536;
  int max_receive_message_bytes = 4 * 1024 * 1024;
  // TLS: the server certificate (PEM chain) and its key; both empty =
  // plaintext. With tls_client_ca_path, clients must present a certificate
  // that CA signed (mutual TLS). The files are read at Start().
  std::string tls_cert_path;
  std::string tls_key_path;
  std::string tls_client_ca_path;
  // When `username` is set, every RPC must carry the gNMI "username" and
  // "password" metadata with these values; others end UNAUTHENTICATED.
  std::string username;
  std::string password;
};

// GnmiTarget: role — the gRPC gNMI server in front of a stepped Fabric.
// Trigger — gRPC requests (callback API) and Publish() from the stepping
// thread. Thread — see the threading contract above.
class GnmiTarget {
 public:
  GnmiTarget(GnmiOptions gnmi_options, GnmiTargetOptions options);
  ~GnmiTarget();  // Stop()s.
  GnmiTarget(const GnmiTarget&) = delete;
  GnmiTarget& operator=(const GnmiTarget&) = delete;

  // Enables Set and config Get (call before Start()). `config` must outlive
  // the target.
  void AttachConfig(WireConfig* config) { config_ = config; }
  // Serves `behaviour` instead of the loom catalogue (call before Start()).
  void SetBehaviour(std::shared_ptr<TargetBehaviour> behaviour) {
    behaviour_ = std::move(behaviour);
  }
  // Binds and starts serving. Requests before the first Publish() get
  // UNAVAILABLE. INVALID_ARGUMENT names a TLS file that cannot be used.
  Status Start();
  // Cancels every stream and stops the server. Idempotent.
  void Stop();
  // The bound port (after Start()).
  int port() const { return port_; }
  const GnmiOptions& gnmi_options() const { return gnmi_options_; }

  // Stepping thread: makes `snap` the latest and runs every STREAM
  // subscription's tick on it.
  void Publish(std::shared_ptr<const FabricSnapshot> snap);
  std::shared_ptr<const FabricSnapshot> latest() const;
  int open_streams() const;

 private:
  class Service;
  class SubscribeReactor;
  class RejectReactor;
  friend class Service;
  friend class SubscribeReactor;

  // Validates `list` against the latest snapshot, queues the initial data and
  // registers STREAM subscriptions for ticks. False when the RPC was ended.
  bool OpenSubscription(SubscribeReactor* r, const gnmi::SubscriptionList& list);
  void CloseSubscription(SubscribeReactor* r);

  const GnmiOptions gnmi_options_;
  const GnmiTargetOptions options_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  WireConfig* config_ = nullptr;                // Set before Start(); not owned.
  std::shared_ptr<TargetBehaviour> behaviour_;  // Set before Start(); null = catalogue.

  mutable std::mutex mu_;
  std::shared_ptr<const FabricSnapshot> latest_;
  std::set<SubscribeReactor*> streams_;  // STREAM subscriptions receiving ticks
  int open_ = 0;                         // all Subscribe RPCs in progress
};

struct FabricLoopOptions {
  // Virtual seconds per wall-clock second: 1 = real time (a collector sees
  // real rates); 0 = as fast as possible.
  double speed = 1.0;
  // Stop when the fabric reaches this virtual time; 0 = run until Stop().
  TimeNs duration_ns = 0;
  // Called after every Fabric::Advance() (a step or a fast-forward jump that
  // never passes a sample tick) on the loop thread (e.g. a Recorder).
  std::function<void(Fabric&)> on_step;
  // Further targets that receive every snapshot (platform personalities);
  // the snapshots are built with the main target's GnmiOptions. Not owned.
  std::vector<GnmiTarget*> more_targets;
};

// FabricLoop: role — owns the stepping of a Fabric for a GnmiTarget: paces
// virtual time against the wall clock, captures a snapshot at every sample
// tick and publishes it. Trigger — Run() (blocks); Stop() and Post() from any
// thread. Thread — Run()'s thread is the Fabric's only thread; Post() is how
// other threads change the fabric (faults, flows) safely.
class FabricLoop {
 public:
  // `fabric` and `target` must outlive the loop. `target` may be null (pacing
  // only, nothing published).
  FabricLoop(Fabric* fabric, GnmiTarget* target, FabricLoopOptions options);
  ~FabricLoop();

  // Steps until Stop() or duration. Publishes a first snapshot immediately.
  void Run();
  // Any thread; async-signal-safe (one lock-free atomic store).
  void Stop() { stop_.store(true); }
  // Runs `fn` on the loop thread before the next step; once Run() has
  // returned, runs it at once on the caller's thread (serialized).
  void Post(std::function<void(Fabric&)> fn);
  // The fabric's virtual time as of the last step (any thread).
  TimeNs virtual_now() const { return virtual_now_.load(); }
  // Snapshots published so far (any thread).
  uint64_t published() const { return published_.load(); }

 private:
  void RunPosted();

  Fabric* fabric_;
  GnmiTarget* target_;
  FabricLoopOptions options_;
  std::atomic<bool> stop_{false};
  std::atomic<TimeNs> virtual_now_{0};
  std::atomic<uint64_t> published_{0};
  std::mutex mu_;
  std::vector<std::function<void(Fabric&)>> posted_;  // guarded by mu_
  bool finished_ = false;                             // guarded by mu_
  // Serializes the closures run after Run() has returned (re-entrant).
  std::recursive_mutex after_mu_;
  std::atomic<bool> has_posted_{false};
};

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_GNMI_TARGET_H_
