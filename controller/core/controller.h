// The controller core: owns Loom's state (topology, drains, jobs, event log)
// and applies every change to it.
//
// Role: the single writer of controller state. Triggered by API requests
// (posted by the gRPC handlers) and, later, by telemetry snapshots and timers.
// Thread: every member function except the constructor, Start() and
// topology() posts its work to the controller strand and answers through the
// callback, which runs on the strand. A change is committed to the Store
// before it is applied in memory and acknowledged, so an acknowledged change
// survives a crash and a failed write changes nothing.
#ifndef LOOM_CONTROLLER_CORE_CONTROLLER_H_
#define LOOM_CONTROLLER_CORE_CONTROLLER_H_

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "api/topology/topology_index.h"
#include "common/clock.h"
#include "common/status.h"
#include "controller/core/adaptive_engine.h"
#include "controller/reconciler/change_gate.h"
#include "controller/reconciler/reconciler.h"
#include "controller/store/store.h"
#include "controller/te/placement.h"
#include "controller/te/traffic_meter.h"
#include "loom/v1/config.pb.h"
#include "loom/v1/fabric_service.pb.h"
#include "loom/v1/scheduler_service.pb.h"
#include "southbound/bgp/prefix_plan.h"
#include "telemetry/link_state.h"

namespace loom::controller {

class SreMetrics;

// What happens to a watcher whose send buffer is full (see Controller::Watch).
enum class SlowWatcherPolicy {
  // It stops being fed live events and is caught up from the event history
  // (memory, then the store) as its buffer drains; ended with OUT_OF_RANGE
  // only when the history it needs is compacted away.
  kCatchUp,
  // It is ended with RESOURCE_EXHAUSTED carrying the revision to resume from.
  kCut,
};

struct ControllerOptions {
  // The retained event history (the store's event log, for replay and watch
  // resume): at most this many events and this many bytes; older events are
  // compacted away in the commit that goes over.
  size_t event_retention = 100'000;
  size_t event_retention_bytes = size_t{256} << 20;
  // The newest part of that history kept in memory, in bytes of memory used
  // (not serialized size); older events are read from the store when a
  // watcher needs them.
  size_t event_cache_bytes = size_t{32} << 20;
  SlowWatcherPolicy slow_watcher_policy = SlowWatcherPolicy::kCatchUp;
  // Free database pages given back per Tick (incremental vacuum) after
  // compaction; 0 = never.
  int vacuum_pages_per_tick = 512;
  // Idempotency records kept (oldest dropped first): at most this many, and
  // at most this many bytes of stored answers (answers live in the store;
  // memory holds an index of about 100 bytes per record).
  size_t request_retention = 100'000;
  size_t request_retention_bytes = size_t{128} << 20;
  // TELB placement parameters.
  loom::te::PlacementParams placement;
  ReconcilerOptions reconciler;
  // Measured demand refines the model; a full recompute (with stability)
  // runs at most this often when it changed. 0 disables refinement.
  TimeNs reoptimize_interval_ns = 10 * kNsPerSec;
  // When placing a registered or updated job around the others leaves links
  // predicted over capacity, run a full recompute (same stability rule, plus:
  // removing a predicted overload is always worth a move) before answering —
  // at most once per overload_recompute_interval_ns: while the fabric stays
  // over capacity, further registrations are placed incrementally and one
  // batched full re-placement runs from Tick() when the interval has passed
  // (a registration storm on an overloaded fabric does not re-place every job
  // for every registration).
  bool recompute_on_overload = true;
  TimeNs overload_recompute_interval_ns = 1 * kNsPerSec;
  // Such a re-placement (and the one at a restart on an over-capacity fabric)
  // is kept only when it lowers the predicted worst link by at least this
  // fraction; otherwise nothing moves (moving thousands of jobs for a few
  // percent on a fabric that cannot fit them is churn, not progress).
  double overload_min_gain = 0.05;
  // Such a re-placement moves the traffic of at most this many jobs (those on
  // the hottest links whose move lowers the worst link; Placement::Rebalance):
  // bounded churn and bounded work however many jobs the fabric holds. A
  // fabric with at most this many jobs is re-placed in full.
  size_t overload_max_moved_jobs = 64;
  // Keep expensive strand work (full re-placements on overload, building every
  // switch's desired state) under ~20 % of the strand's wall time by spacing it
  // 4 x its last duration. Virtual-time runs (closed-loop tests, benchmarks)
  // turn it off: their results must not depend on the machine's speed.
  bool wall_clock_pacing = true;
  // Per-link rate families (ECN marks, CNPs, PFC pause ratio) keep this many
  // directions each, the highest values (docs/metrics.md).
  size_t link_series_top_k = 50;
  // Events lagging watchers read from the store, shared between them (bytes).
  size_t catchup_cache_bytes = size_t{16} << 20;
  // loom_job_fabric_slowdown: the jobs slowed most, plus those labelled
  // loom.io/metrics=true.
  size_t job_series_top_k = 50;
  // GLB, ALB, DLB tuning and remediation (controller/core/adaptive_engine.h).
  AdaptiveOptions adaptive;
  // LLDP check: keep links without LLDP data out of placement too, and
  // check NIC-leaf links (only where hosts send LLDP).
  bool lldp_exclude_unverified = false;
  bool lldp_check_host_links = false;
  // Change safety for fabric-wide settings (controller/reconciler/change_gate.h)
  // and the mode name plans show ("auto", "approve", "shadow").
  ChangeSafetyOptions change_safety;
  std::string change_mode = "auto";
  // Fabric-wide settings from configuration (SetFabricSettings replaces them).
  std::vector<loom::v1::FabricSetting> fabric_settings;
};

struct PolicyInstallResult {
  // Version of the installed set (0 when the same set was already installed).
  uint64_t version = 0;
  // Warnings (installed) or errors (refused), one per line.
  std::string findings;
  // Jobs whose assignment changed.
  int jobs_moved = 0;
};

// Who is calling, as the API layer authenticated and authorized it
// (api/services/auth.h). Default: Loom itself or an API without authorization.
struct Caller {
  // "cert:NAME", "ISSUER:SUB", "anonymous" (authorization off); "" = not an API call.
  std::string identity;
  // The peer address as gRPC reports it.
  std::string peer;
  // The tenants whose jobs this call may touch (the scope of the permission it
  // was granted); unset = every tenant.
  std::optional<std::set<std::string>> tenants;
  // The permission the call was granted ("jobs.write"), for denial messages.
  std::string permission;

  bool Allows(const std::string& tenant) const { return !tenants || tenants->count(tenant) > 0; }
  // PERMISSION_DENIED naming the permission and tenant.
  Status DenyTenant(const std::string& what, const std::string& tenant) const;
};

// What a caller limited to `tenants` may see of an event (watch streams, job
// health): its tenants' job events (whole, or without another principal's actor
// and peer), a fault's blast radius naming its jobs (with only those listed);
// nothing else. `mine` holds the redacted copy for kRedacted. (blast_radius.cc)
enum class Visibility { kHidden, kWhole, kRedacted };
Visibility ScopeEvent(const loom::v1::Event& ev, const std::set<std::string>& tenants,
                      const std::string& viewer, loom::v1::Event* mine);

// A reconciler's view of one device as the API reports it (GetDeviceState, the
// live view's device list).
loom::v1::DeviceSyncStatus SyncStatusProto(const DeviceSync& d);

class Controller {
 public:
  template <typename T>
  using Done = std::function<void(Status, T)>;
  // Receives each event at or after the subscription's start revision, on
  // the strand. Returns false to end the subscription.
  using EventSink = std::function<bool(const loom::v1::Event&)>;

  // A watcher with a bounded buffer (watch streams). Both run on the strand.
  enum class Offer {
    kTaken,   // delivered (or filtered out)
    kFull,    // not taken: no room; offer again after ResumeWatch(id)
    kClosed,  // the watcher is gone
  };
  struct WatchEnd {
    uint64_t resume_revision = 0;     // RESOURCE_EXHAUSTED: resume from here
    uint64_t compacted_revision = 0;  // OUT_OF_RANGE: newest revision compacted away
    uint64_t current_revision = 0;    // the controller's revision when it ended
  };
  // An event's serialized bytes, made once and shared by every watcher.
  using EventBytes = std::shared_ptr<const std::string>;
  struct Watcher {
    std::function<Offer(const loom::v1::Event&, const EventBytes&)> offer;
    // Called once when the controller ends the watch: OK after a replay-only
    // watch's last event; OUT_OF_RANGE (start or position compacted away, or
    // a start revision ahead of the log); RESOURCE_EXHAUSTED (kCut policy);
    // UNAVAILABLE (the store could not be read). Not called after
    // Unsubscribe() or an offer answered kClosed.
    std::function<void(const Status&, const WatchEnd&)> end;
  };

  Controller(boost::asio::io_context& io, const Clock& clock, Store& store,
             std::shared_ptr<const loom::topology::TopologyIndex> topo,
             prometheus::Registry& registry, ControllerOptions options = {});
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Reloads persisted state and records a CONTROLLER_STARTED event. Call once,
  // before the io_context runs requests.
  Status Start();

  // Adds a southbound driver (before Start). Drivers are tried in order.
  void AddDriver(loom::southbound::Driver* driver) { reconciler_.AddDriver(driver); }
  // What each switch's southbound can program (before Start): placement and
  // the adaptive engine never ask a device for what it cannot do.
  void SetDeviceLimits(const loom::te::DeviceLimitsMap& limits) {
    placement_.SetDeviceLimits(limits);
    adaptive_.SetDeviceLimits(limits);
    limits_ = limits;
  }
  // NICs whose transport tolerates reordering (inventory), before Start:
  // their jobs may be sprayed where pinning cannot fit (placement.h).
  void SetSelectiveRepeatNics(std::set<std::string> nics) {
    placement_.SetSelectiveRepeatNics(std::move(nics));
  }
  void SetReorderTolerantNics(std::set<std::string> nics) {
    placement_.SetReorderTolerantNics(std::move(nics));
  }
  // Configured fabric-wide settings a device cannot carry ("leaf0: thresholds
  // (programmed by bgp)"); they are not asked of it. For start-up and reload
  // logs.
  static std::vector<std::string> UncarriedSettings(
      const std::vector<loom::v1::FabricSetting>& settings, const loom::v1::Topology& topology,
      const loom::te::DeviceLimitsMap& limits);
  // Periodic work on the strand: pushes changed desired state to the
  // reconciler and lets it apply, retry and check drift. Production calls it
  // from a timer; closed-loop tests call it after advancing virtual time.
  void Tick();
  // Runs `f` on the strand with read access to the reconciler (status pages,
  // tests).
  void WithReconciler(std::function<void(const Reconciler&)> f);

  const loom::topology::TopologyIndex& topology() const { return *topo_; }

  // Group commit: registrations that arrive while the strand is busy are placed one
  // after the other and committed together in one transaction; each is answered
  // only after that commit, and a failed commit fails (and undoes) all of them.
  // `caller` names who asked in the events and limits the tenants the call may
  // touch (PERMISSION_DENIED otherwise).
  void RegisterJob(loom::v1::RegisterJobRequest req, Done<loom::v1::RegisterJobResponse> done,
                   Caller caller);
  void UpdateJob(loom::v1::UpdateJobRequest req, Done<loom::v1::UpdateJobResponse> done,
                 Caller caller);
  void ReleaseJob(loom::v1::ReleaseJobRequest req, Done<loom::v1::ReleaseJobResponse> done,
                  Caller caller);
  void GetJob(loom::v1::GetJobRequest req, Done<loom::v1::GetJobResponse> done, Caller caller);
  // Is the fabric slowing the job, where, and what Loom did (job_health.cc).
  void GetJobHealth(loom::v1::GetJobHealthRequest req, Done<loom::v1::GetJobHealthResponse> done,
                    Caller caller);
  // The estimated slowdown factor: max(1, predicted demand / capacity on the
  // job's worst link) / (1 - largest PFC pause share on its paths).
  static double JobFabricSlowdown(double predicted_max_utilization, double max_pause_ratio);
  // A caller limited to some tenants sees only their jobs.
  void ListJobs(loom::v1::ListJobsRequest req, Done<loom::v1::ListJobsResponse> done,
                Caller caller);

  void ListLinks(loom::v1::ListLinksRequest req, Done<loom::v1::ListLinksResponse> done);
  void GetLink(loom::v1::GetLinkRequest req, Done<loom::v1::GetLinkResponse> done);
  void DrainLink(loom::v1::DrainLinkRequest req, Done<loom::v1::DrainLinkResponse> done,
                 Caller caller);
  void UndrainLink(loom::v1::UndrainLinkRequest req, Done<loom::v1::UndrainLinkResponse> done,
                   Caller caller);
  // Records an API call authorization refused (EVENT_TYPE_ACCESS_DENIED), at most
  // `max_per_minute` a minute (the rest only counted by the API layer).
  void RecordDenied(Caller caller, std::string method, std::string subject, std::string missing,
                    uint32_t max_per_minute);

  // Replays retained events with revision >= start_revision (none when 0),
  // then delivers new ones until the sink returns false or Unsubscribe().
  // `done` gets the subscription id (0 when `follow` is false: replay only),
  // or OUT_OF_RANGE when start_revision is older than the retained history.
  void Subscribe(uint64_t start_revision, bool follow, EventSink sink, Done<uint64_t> done);
  void Unsubscribe(uint64_t id);

  // Starts a watch: events from `start_revision` (0: only new ones), in
  // revision order, each exactly once, then live ones while `follow`. A
  // watcher that answers kFull is no longer fed live events; after
  // ResumeWatch(id) it is caught up from the history in memory and then the
  // store (bounded work per strand turn) and rejoins the live feed when it
  // reaches the newest revision (kCatchUp), or it is ended with
  // RESOURCE_EXHAUSTED (kCut, live events only; a replay waits). Returns the
  // watch id at once (for ResumeWatch/Unsubscribe); refusals go to `end`.
  uint64_t Watch(uint64_t start_revision, bool follow, Watcher watcher);
  void ResumeWatch(uint64_t id);

  // Validates, persists (as a new version) and applies a TELB policy set:
  // every job is re-evaluated. INVALID_ARGUMENT with the findings when the
  // set has errors. Installing the current set again is a no-op.
  void InstallPolicy(loom::v1::PolicySet set, Done<PolicyInstallResult> done);

  // A fresh picture of the fabric from telemetry (computed off the strand;
  // the latest wins). Updates link oper states: a link that telemetry sees
  // down (and not stale) is taken out of placement and affected jobs are
  // re-placed; stale data changes nothing.
  void OnLinkSnapshot(std::shared_ptr<const loom::telemetry::LinkSnapshot> snapshot);

  // One switch's desired and applied state and sync status (no rendering).
  void GetDeviceState(loom::v1::GetDeviceStateRequest req,
                      Done<loom::v1::GetDeviceStateResponse> done);

  // The desired state of every switch, as computed from the current
  // assignments (for the reconciler and `loomctl render`).
  void GetDesiredStates(Done<std::map<std::string, loom::v1::DeviceState>> done);

  // Replaces the fabric-wide settings from configuration (SIGHUP reload);
  // a difference becomes a change plan.
  void SetFabricSettings(std::vector<loom::v1::FabricSetting> settings);
  // The pending fabric-wide change and where its rollout stands.
  void GetChangePlan(Done<loom::v1::ChangePlan> done);
  // approve mode: rolls out the plan built on `revision` (FAILED_PRECONDITION
  // when stale, quarantined or already rolling out).
  void ApplyChangePlan(uint64_t revision, Done<loom::v1::ChangePlan> done, Caller caller);
  // Lets the quarantined change `revision` be tried again.
  void ClearChangeQuarantine(uint64_t revision, Done<loom::v1::ChangePlan> done, Caller caller);

  // Without a caller: Loom itself, tests (no tenant limit, no actor in events).
  void RegisterJob(loom::v1::RegisterJobRequest req, Done<loom::v1::RegisterJobResponse> done) {
    RegisterJob(std::move(req), std::move(done), Caller{});
  }
  void UpdateJob(loom::v1::UpdateJobRequest req, Done<loom::v1::UpdateJobResponse> done) {
    UpdateJob(std::move(req), std::move(done), Caller{});
  }
  void ReleaseJob(loom::v1::ReleaseJobRequest req, Done<loom::v1::ReleaseJobResponse> done) {
    ReleaseJob(std::move(req), std::move(done), Caller{});
  }
  void GetJob(loom::v1::GetJobRequest req, Done<loom::v1::GetJobResponse> done) {
    GetJob(std::move(req), std::move(done), Caller{});
  }
  void GetJobHealth(loom::v1::GetJobHealthRequest req, Done<loom::v1::GetJobHealthResponse> done) {
    GetJobHealth(std::move(req), std::move(done), Caller{});
  }
  void ListJobs(loom::v1::ListJobsRequest req, Done<loom::v1::ListJobsResponse> done) {
    ListJobs(std::move(req), std::move(done), Caller{});
  }
  void DrainLink(loom::v1::DrainLinkRequest req, Done<loom::v1::DrainLinkResponse> done) {
    DrainLink(std::move(req), std::move(done), Caller{});
  }
  void UndrainLink(loom::v1::UndrainLinkRequest req, Done<loom::v1::UndrainLinkResponse> done) {
    UndrainLink(std::move(req), std::move(done), Caller{});
  }
  void ApplyChangePlan(uint64_t revision, Done<loom::v1::ChangePlan> done) {
    ApplyChangePlan(revision, std::move(done), Caller{});
  }
  void ClearChangeQuarantine(uint64_t revision, Done<loom::v1::ChangePlan> done) {
    ClearChangeQuarantine(revision, std::move(done), Caller{});
  }

 private:
  struct LinkDrain {
    std::string reason;
    int64_t time_ns = 0;
    uint64_t revision = 0;
  };

  template <typename F>
  void Post(F&& f);
  // The key a request id is remembered under: per caller identity.
  static std::string RequestKey(const Caller& caller, const std::string& request_id);
  // An approval or quarantine clearing through the API, in the event log with
  // who gave it (nothing when `caller` is not an API caller).
  void RecordApproval(const Caller& caller, const std::string& action, uint64_t revision);
  // Builds an event with the next revision (not yet committed).
  loom::v1::Event NewEvent(loom::v1::EventType type, const std::string& subject);
  // Commits `m` (plus retention pruning) and on success publishes its events.
  Status CommitAndPublish(Mutation& m);
  // Idempotency: true when `request_id` was seen; fills `response` or `status`.
  bool Replay(const std::string& method, const std::string& request_id,
              const google::protobuf::Message& request, google::protobuf::Message* response,
              Status* status);
  void Remember(Mutation& m, const std::string& method, const std::string& request_id,
                const google::protobuf::Message& request,
                const google::protobuf::Message& response);
  loom::v1::LinkStatus MakeLinkStatus(const loom::v1::Link& link) const;
  void UpdateGauges();
  // Sets a job's status from a fresh assignment.
  void SetAssignment(loom::v1::Job* job, loom::v1::PathAssignment a, uint64_t revision,
                     const google::protobuf::Timestamp& time) const;
  // Full recompute after a change of topology, drains or policy; adds the
  // changed jobs and their JOB_UPDATED events to `m`. Returns jobs moved.
  // With `keep_unless_better`: when the recompute does not lower the predicted
  // maximum utilization by options_.overload_min_gain of that placement's, it
  // is restored and nothing moves. `skip` is left out of the events (its caller reports it).
  int RecomputeInto(Mutation& m, const std::string& cause,
                    std::map<std::string, loom::v1::Job>* updated,
                    const loom::te::Placement* keep_unless_better = nullptr,
                    const std::string& skip = "");
  // After an incremental placement of `job_id` that leaves links over
  // capacity: a full recompute, its other moved jobs' events in `m` and
  // their new specs in `updated`. Returns the placement before it (to roll
  // back when the commit fails), or nullopt when nothing moved.
  void RunDeferredOverloadRecompute();
  bool OverloadRecomputeDue(TimeNs now) const;
  void PaceOverloadRecompute(std::chrono::steady_clock::time_point start);
  std::chrono::steady_clock::time_point next_overload_recompute_{};
  // The bounded overload re-placement (Placement::Rebalance) with the
  // overload_min_gain rule: when it does not lower the worst link enough it is
  // rolled back and nothing moves. Adds the moved jobs' events to `m` and their
  // specs to `updated` (except `skip`); `undo` puts it back. Returns jobs moved.
  int RebalanceInto(Mutation& m, const std::string& cause,
                    std::map<std::string, loom::v1::Job>* updated, const std::string& skip,
                    loom::te::Placement::Undo* undo);
  std::optional<loom::te::Placement::Undo> RecomputeIfOverloaded(
      const std::string& job_id, Mutation& m, std::map<std::string, loom::v1::Job>* updated);
  static void AppendMutation(Mutation& into, Mutation&& from);
  std::set<std::string> DownLinks() const;
  loom::v1::GetJobHealthResponse JobHealthOf(const loom::v1::Job& job) const;
  // The SRE metric families (sre_metrics.h), at most once a second unless forced.
  void ExportSreMetrics(bool force = false);
  void ApplySnapshot(std::shared_ptr<const loom::telemetry::LinkSnapshot> snapshot);
  loom::v1::Event AdaptiveToEvent(const AdaptiveEvent& a);
  void UpdateLinkGauges();

  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  const Clock& clock_;
  Store& store_;
  std::shared_ptr<const loom::topology::TopologyIndex> topo_;
  ControllerOptions options_;

  // --- state, touched on the strand only ---
  uint64_t revision_ = 0;       // last committed revision
  uint64_t next_revision_ = 0;  // revision handed out to the mutation in progress
  std::map<std::string, loom::v1::Job> jobs_;
  std::map<std::string, LinkDrain> drains_;
  // An event kept in memory with its serialized bytes (shared by every
  // watch stream) and the memory both use.
  struct CachedEvent {
    loom::v1::Event ev;
    EventBytes wire;
    size_t bytes = 0;
  };
  // `wire`: the event already serialized (made here when null).
  static CachedEvent MakeCached(loom::v1::Event ev, EventBytes wire = nullptr);
  // The newest events (at most event_cache_bytes of them), oldest first.
  std::deque<CachedEvent> history_;
  size_t history_bytes_ = 0;
  // Every event in the store: (revision, serialized bytes), oldest first.
  std::deque<std::pair<uint64_t, uint32_t>> retained_;
  size_t retained_bytes_ = 0;
  // The oldest revision a watch can start from.
  uint64_t OldestRetained() const {
    return retained_.empty() ? revision_ + 1 : retained_.front().first;
  }
  // Events read from the store for lagging watchers (at most 16 MiB, oldest
  // evicted first), shared by every watcher catching up through them.
  std::map<uint64_t, CachedEvent> catchup_cache_;
  std::deque<uint64_t> catchup_order_;  // revisions in the order they were read
  size_t catchup_cache_bytes_ = 0;
  // Compaction left free pages to give back (Tick).
  bool vacuum_due_ = false;
  void VacuumSome();
  std::unordered_map<std::string, RequestRecord> requests_;
  std::deque<std::pair<uint64_t, std::string>> request_order_;  // (revision, id)
  size_t request_bytes_ = 0;  // stored answers' bytes of the records in requests_
  struct Subscriber {
    Watcher watcher;
    uint64_t next = 0;     // the next revision it needs
    bool lagging = false;  // fed by Fill() from the history, not live
    bool follow = true;
    uint64_t replay_end = 0;  // !follow: the last revision to deliver
    bool unbounded = false;   // in-process sink: replayed in one go
    bool fill_posted = false;
  };
  std::map<uint64_t, Subscriber> subscribers_;
  std::atomic<uint64_t> next_subscriber_{1};
  // Adds a watch (on the strand) and starts its replay.
  void StartWatch(uint64_t id, uint64_t start_revision, bool follow, bool unbounded,
                  Watcher watcher);
  // Feeds a lagging watcher from the history until it is full, caught up
  // or out of its budget for this strand turn (then it posts itself again).
  void Fill(uint64_t id);
  void EndWatch(uint64_t id, const Status& status, const WatchEnd& end);
  // Ends lagging watchers whose position was compacted away.
  void EndCompactedWatchers();
  prometheus::Counter* watch_catchups_ = nullptr;
  prometheus::Counter* watch_cuts_ = nullptr;
  prometheus::Counter* watch_compacted_ = nullptr;
  prometheus::Counter* events_compacted_ = nullptr;
  prometheus::Gauge* history_bytes_gauge_ = nullptr;
  prometheus::Gauge* retained_events_gauge_ = nullptr;
  loom::te::Placement placement_;
  AdaptiveEngine adaptive_;
  // NIC prefixes (198.18.0.0/15 plan) for colored routes and renderers.
  loom::southbound::bgp::PrefixPlan prefix_plan_;
  // Desired state of every switch with prefixes filled in.
  std::map<std::string, loom::v1::DeviceState> DesiredStates() const;
  // Desired state of the given switches only, decorated as DesiredStates()
  // decorates them (every decoration is per device).
  std::map<std::string, loom::v1::DeviceState> DesiredStatesOf(
      const std::set<std::string>& devices) const;
  // What decorates the placement's desired states (adaptive results, fabric
  // settings, down links): when it is what it was at the last push, only the
  // switches whose placement changed are rebuilt and handed over.
  std::string DecorationKey() const;
  std::string desired_decoration_key_;
  // Switches whose desired state is still to be rebuilt and handed over (a push
  // does a few at a time).
  std::set<std::string> desired_pending_;
  bool desired_pushed_ = false;  // a full desired state was handed over
  uint64_t fabric_settings_version_ = 0;
  // Hands the reconciler the current desired state when assignments changed.
  void PushDesired(bool force = false);
  std::chrono::steady_clock::time_point next_desired_push_{};
  uint64_t policy_version_ = 0;
  std::shared_ptr<const loom::telemetry::LinkSnapshot> snapshot_;
  // Telemetry signals devices do not serve (device -> signal -> reason), as
  // last reported in events.
  std::map<std::string, std::map<std::string, std::string>> unavailable_signals_;
  // Links LLDP keeps out of placement (link -> why).
  std::map<std::string, std::string> lldp_excluded_;
  // Events for signal availability changes; true when placement must be
  // recomputed (LLDP exclusions changed).
  bool CheckTelemetrySources(std::vector<v1::Event>* events);
  // Faults the fabric cannot route around (a NIC port down, a leaf with every
  // uplink down, a quarantined storming NIC), keyed by subject, with the nodes
  // and jobs behind them (blast_radius.cc). A FAULT_BLAST_RADIUS event marks
  // each start and clear; a fault clears only on fresh evidence (its link seen
  // up), so a restart, which knows no link state yet, clears nothing. The set
  // is kept in the store's metadata, written with the events that change it.
  struct BlastFault {
    std::string kind;
    std::string cause;
    std::set<std::string> nodes;
    std::set<std::string> jobs;
    // Each job's tenant when the fault started (tenant-scoped watchers see the
    // fault, and its clearing, only for their jobs).
    std::map<std::string, std::string> job_tenants;
  };
  std::map<std::string, BlastFault> blast_active_;
  // Runs on every telemetry snapshot; scans the topology only when a link's state,
  // the set of links out of service or the quarantined NICs changed (or the last
  // commit failed: blast_checked_ false).
  void CheckBlastRadius(std::vector<v1::Event>* events, Mutation* m, bool oper_changed);
  bool blast_checked_ = false;
  std::set<std::string> blast_last_down_, blast_last_quarantined_;
  void RestoreBlastRadius(const StoredState& state);
  std::string SerializeBlastRadius() const;
  Reconciler reconciler_;
  bool desired_dirty_ = true;
  // Change safety (change_control.cc).
  std::vector<loom::v1::FabricSetting> fabric_settings_;
  loom::te::DeviceLimitsMap limits_;
  ChangeGate gate_;
  void AddFabricSettings(std::map<std::string, loom::v1::DeviceState>* desired) const;
  std::vector<LinkHealthSample> SampleLinks(const std::vector<std::string>& devices) const;
  bool DeviceInSync(const std::string& device, std::string* error) const;
  void OnGateNote(const GateNote& n);
  // Hands the gate's released state to the reconciler (when `changed`) and
  // persists accepted settings that changed.
  void ReleaseToReconciler(bool changed);
  // Accepted settings, plan revision and quarantine to the store.
  void PersistChangeState();
  // Measured demand: EWMA of measured / modelled NIC send rate per job.
  std::map<std::string, double> measured_ratio_;
  bool reoptimize_pending_ = false;
  TimeNs last_reoptimize_ns_ = 0;
  // Overload re-placement: the last one (-1 = never) and registrations since
  // that were placed incrementally on an overloaded fabric (batched in Tick).
  TimeNs last_overload_recompute_ns_ = -1;
  // Overload re-placements in a row that gained less than overload_min_gain (the
  // interval doubles with each, up to 32 x).
  int overload_fruitless_ = 0;
  int overload_deferred_ = 0;
  // Registrations waiting for the strand (group commit, RegisterJob): queued by
  // any thread; one drain on the strand takes them all.
  struct PendingRegistration {
    loom::v1::RegisterJobRequest req;
    Done<loom::v1::RegisterJobResponse> done;
    Caller caller;
  };
  static constexpr size_t kMaxRegistrationBatch = 256;
  // RecordDenied's rate limit: the current minute and denials recorded in it.
  int64_t denied_minute_ = -1;
  uint32_t denied_in_minute_ = 0;
  // How long a due desired-state push waits while registrations are queued.
  static constexpr std::chrono::milliseconds kMaxPushDeferral{1000};
  std::mutex registrations_mu_;
  std::deque<PendingRegistration> registrations_;  // guarded by registrations_mu_
  bool registrations_drain_posted_ = false;        // guarded by registrations_mu_
  void DrainRegistrations();
  void RefineDemand();
  // Measured traffic matrices (per-destination NIC counters) and the jobs whose
  // matrix was just replaced by a measurement, with why (re-placed at the next Tick).
  loom::te::TrafficMeter traffic_meter_;
  std::map<std::string, std::string> traffic_pending_;
  double last_traffic_signature_ = -1;
  void MeasureTraffic();
  void ReplaceOnMeasuredTraffic();
  // Operational state per link id as telemetry last reported it (fresh data only).
  std::map<std::string, loom::v1::LinkOperState> oper_;

  // --- metrics ---
  prometheus::Gauge& jobs_gauge_;
  prometheus::Gauge& drained_gauge_;
  prometheus::Family<prometheus::Counter>& events_family_;
  prometheus::Histogram& store_write_seconds_;
  prometheus::Counter& store_errors_;
  prometheus::Gauge& watchers_gauge_;
  prometheus::Gauge& max_util_gauge_;
  prometheus::Histogram& placement_seconds_;
  prometheus::Counter& moves_counter_;
  prometheus::Family<prometheus::Gauge>& link_util_family_;
  prometheus::Family<prometheus::Gauge>& links_by_state_family_;
  prometheus::Gauge& fabric_max_util_gauge_;
  prometheus::Family<prometheus::Counter>& telemetry_stats_family_;
  std::map<std::string, uint64_t> telemetry_stats_seen_;  // Last cumulative value per kind.
  // Change safety: 1 for the plan's current state, 0 for the others; the
  // plan's revision and the devices it would change.
  prometheus::Family<prometheus::Gauge>& change_state_family_;
  void UpdateChangeGauges();
  // Per-link utilization series are exported for switch-to-switch links only,
  // at most this many, to keep label cardinality bounded.
  size_t max_link_series_ = 4096;
  std::unique_ptr<SreMetrics> sre_metrics_;
  std::chrono::steady_clock::time_point next_sre_export_{};
};

}  // namespace loom::controller

#endif  // LOOM_CONTROLLER_CORE_CONTROLLER_H_
