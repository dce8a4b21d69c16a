#include "controller/core/controller.h"

#include <google/protobuf/util/time_util.h>

#include <boost/asio/post.hpp>
#include <chrono>

#include "api/proto_util/fingerprint.h"
#include "common/log.h"
#include "common/text.h"
#include "controller/core/job_validation.h"
#include "controller/core/sre_metrics.h"
#include "controller/te/next_hops.h"
#include "southbound/wire/device_state_util.h"
#include "telemetry/profile.h"

namespace loom::controller {

using google::protobuf::util::TimeUtil;
namespace v1 = loom::v1;

namespace {

std::string EventTypeLabel(v1::EventType t) {
  std::string name = v1::EventType_Name(t);
  const std::string prefix = "EVENT_TYPE_";
  if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

}  // namespace

Controller::Controller(boost::asio::io_context& io, const Clock& clock, Store& store,
                       std::shared_ptr<const loom::topology::TopologyIndex> topo,
                       prometheus::Registry& registry, ControllerOptions options)
    : strand_(boost::asio::make_strand(io)),
      clock_(clock),
      store_(store),
      topo_(std::move(topo)),
      options_(options),
      placement_(topo_, options.placement),
      adaptive_(*topo_, options.adaptive),
      prefix_plan_(topo_->topology()),
      reconciler_(
          clock, [this](std::function<void()> f) { boost::asio::post(strand_, std::move(f)); },
          options.reconciler),
      fabric_settings_(options.fabric_settings),
      gate_(
          clock, options.change_safety,
          [this](const std::vector<std::string>& devices) { return SampleLinks(devices); },
          [this](const std::string& device, std::string* error) {
            return DeviceInSync(device, error);
          }),
      jobs_gauge_(prometheus::BuildGauge()
                      .Name("loom_jobs")
                      .Help("Jobs currently registered")
                      .Register(registry)
                      .Add({})),
      drained_gauge_(prometheus::BuildGauge()
                         .Name("loom_links_drained")
                         .Help("Links administratively drained")
                         .Register(registry)
                         .Add({})),
      events_family_(prometheus::BuildCounter()
                         .Name("loom_events_total")
                         .Help("Events recorded, by type")
                         .Register(registry)),
      store_write_seconds_(
          prometheus::BuildHistogram()
              .Name("loom_store_write_seconds")
              .Help("Latency of durable store commits")
              .Register(registry)
              .Add({}, prometheus::Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001,
                                                               0.0025, 0.005, 0.01, 0.025, 0.05,
                                                               0.1, 0.25, 0.5, 1})),
      store_errors_(prometheus::BuildCounter()
                        .Name("loom_store_errors_total")
                        .Help("Store commits that failed (the change was not applied)")
                        .Register(registry)
                        .Add({})),
      watchers_gauge_(prometheus::BuildGauge()
                          .Name("loom_watchers")
                          .Help("Open WatchEvents/WatchJobs subscriptions")
                          .Register(registry)
                          .Add({})),
      max_util_gauge_(prometheus::BuildGauge()
                          .Name("loom_placement_max_utilization")
                          .Help("Predicted maximum link utilization of the TELB placement (0..1+)")
                          .Register(registry)
                          .Add({})),
      placement_seconds_(
          prometheus::BuildHistogram()
              .Name("loom_placement_seconds")
              .Help("Time to compute a placement (incremental or full)")
              .Register(registry)
              .Add({}, prometheus::Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001,
                                                               0.0025, 0.005, 0.01, 0.025, 0.05,
                                                               0.1, 0.25, 0.5, 1})),
      moves_counter_(prometheus::BuildCounter()
                         .Name("loom_assignment_changes_total")
                         .Help("Job assignments changed by recomputes (drains, failures, policy)")
                         .Register(registry)
                         .Add({})),
      link_util_family_(
          prometheus::BuildGauge()
              .Name("loom_link_utilization")
              .Help("Transmit utilization (0..1) of switch-to-switch link directions, "
                    "from telemetry")
              .Register(registry)),
      links_by_state_family_(prometheus::BuildGauge()
                                 .Name("loom_links")
                                 .Help("Links by operational state as telemetry reports them "
                                       "(up, down, unknown, stale)")
                                 .Register(registry)),
      fabric_max_util_gauge_(prometheus::BuildGauge()
                                 .Name("loom_fabric_max_link_utilization")
                                 .Help("Highest measured utilization of any fresh switch-to-switch "
                                       "link direction")
                                 .Register(registry)
                                 .Add({})),
      telemetry_stats_family_(prometheus::BuildCounter()
                                  .Name("loom_telemetry_ingest_total")
                                  .Help("Telemetry ingest counts by kind (notifications, "
                                        "updates, and the rejected: unknown_target, "
                                        "unknown_path, bad_value, missing_timestamp, "
                                        "future_timestamp, foreign_target; counter_resets)")
                                  .Register(registry)),
      change_state_family_(prometheus::BuildGauge()
                               .Name("loom_change_plan")
                               .Help("Fabric-wide change safety: {state=...} is 1 for the plan's "
                                     "current state; {field=revision}, {field=pending_devices}")
                               .Register(registry)) {
  if (options_.event_retention == 0) options_.event_retention = 1;
  sre_metrics_ = std::make_unique<SreMetrics>(registry, options_.link_series_top_k);
  auto counter = [&registry](const char* name, const char* help) {
    return &prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
  };
  auto gauge = [&registry](const char* name, const char* help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
  };
  watch_catchups_ = counter("loom_watch_catchups_total",
                            "Watchers whose send buffer filled and were caught up from the event "
                            "history instead of being fed live");
  watch_cuts_ = counter("loom_watch_cuts_total",
                        "Watchers ended RESOURCE_EXHAUSTED (slow_watcher_policy cut) with a "
                        "resume revision");
  watch_compacted_ = counter("loom_watch_compacted_total",
                             "Watches refused or ended OUT_OF_RANGE because the revision they "
                             "needed was compacted away");
  events_compacted_ =
      counter("loom_events_compacted_total", "Events removed from the store by retention");
  history_bytes_gauge_ = gauge("loom_event_history_memory_bytes",
                               "Memory used by the event history kept in memory (the newest "
                               "events; older ones are read from the store)");
  retained_events_gauge_ =
      gauge("loom_event_history_retained", "Events in the store's retained history");
}

Controller::~Controller() = default;

template <typename F>
void Controller::Post(F&& f) {
  boost::asio::post(strand_, std::forward<F>(f));
}

Status Controller::Start() {
  reconciler_.SetNoteCallback([this](const ReconcileNote& note) {
    Mutation m;
    v1::Event ev = NewEvent(v1::EVENT_TYPE_DEVICE_SYNC, note.device);
    switch (note.kind) {
      case ReconcileNote::Kind::kApplyFailed:
        ev.set_severity(v1::SEVERITY_WARNING);
        ev.set_cause("programming the device failed");
        ev.set_action("retrying with backoff");
        break;
      case ReconcileNote::Kind::kRecovered:
        ev.set_cause("device accepted its desired state");
        ev.set_action("back in sync");
        break;
      case ReconcileNote::Kind::kDriftRepaired:
        ev.set_severity(v1::SEVERITY_WARNING);
        ev.set_cause("device state drifted from what Loom programmed");
        ev.set_action("re-applying the desired state");
        break;
      case ReconcileNote::Kind::kNoDriver:
        ev.set_cause("no southbound driver handles the device");
        ev.set_action("none: the device is not programmed");
        break;
    }
    ev.set_result(note.detail);
    m.events.push_back(ev);
    CommitAndPublish(m);
  });
  StoredState state;
  if (Status s = store_.Load(options_.event_retention, &state, options_.event_cache_bytes);
      !s.ok()) {
    return s;
  }
  for (auto& job : state.jobs) {
    std::string id = job.job_id();
    jobs_.emplace(std::move(id), std::move(job));
  }
  for (auto& d : state.drains) {
    if (!topo_->FindLink(d.link_id)) {
      LOG_WARN("persisted drain names a link the topology no longer has; keeping it")
          .With("link", d.link_id);
    }
    drains_[d.link_id] = {d.reason, d.time_ns, d.revision};
  }
  for (auto& ev : state.events) {
    history_.push_back(MakeCached(std::move(ev)));
    history_bytes_ += history_.back().bytes;
  }
  RestoreBlastRadius(state);
  for (const auto& e : state.event_index) {
    retained_.push_back(e);
    retained_bytes_ += e.second;
  }
  std::sort(state.requests.begin(), state.requests.end(),
            [](const auto& a, const auto& b) { return a.revision < b.revision; });
  for (auto& r : state.requests) {
    request_order_.emplace_back(r.revision, r.request_id);
    request_bytes_ += r.response_bytes;
    requests_[r.request_id] = std::move(r);
  }
  revision_ = state.last_revision;
  next_revision_ = revision_;
  gate_.RestoreAccepted(std::move(state.accepted_settings));
  {
    uint64_t revision = 0;
    if (auto it = state.meta.find("change_revision"); it != state.meta.end()) {
      revision = std::strtoull(it->second.c_str(), nullptr, 10);
    }
    v1::QuarantinedChange q;
    auto it = state.meta.find("change_quarantine");
    const bool have_q = it != state.meta.end() && q.ParseFromString(it->second);
    gate_.RestorePlanState(revision, have_q ? &q : nullptr);
  }
  gate_.SetModeName(options_.change_mode);
  gate_.SetNoteCallback([this](const GateNote& n) { OnGateNote(n); });
  UpdateChangeGauges();
  if (state.policy) {
    policy_version_ = state.policy->version();
    placement_.SetPolicy(*state.policy);
  }
  placement_.SetDownLinks(DownLinks());
  // Reload assignments where they are: jobs keep their persisted routes
  // wherever those are still feasible, higher priority first.
  std::vector<v1::Job*> order;
  for (auto& [id, job] : jobs_) order.push_back(&job);
  std::stable_sort(order.begin(), order.end(), [](const v1::Job* a, const v1::Job* b) {
    return a->priority() > b->priority();
  });
  for (v1::Job* job : order) placement_.Upsert(*job);
  {
    // On an over-capacity fabric a recompute that does not lower the worst
    // link would only reshuffle jobs at every restart: keep them where they were.
    // There, the re-placement is the bounded one of an overloaded registration
    // (at most overload_max_moved_jobs jobs move).
    const double reloaded = placement_.max_utilization();
    if (reloaded > 1.0 + 1e-9) {
      loom::te::Placement::Undo undo;
      auto changed = placement_.Rebalance(options_.overload_max_moved_jobs, &undo);
      if (!changed.empty() &&
          placement_.max_utilization() > reloaded * (1.0 - options_.overload_min_gain) - 1e-9) {
        placement_.RollBack(std::move(undo));
      }
    } else {
      placement_.Recompute(loom::te::PlacementMode::kFull);
    }
  }

  // Only jobs whose routes differ from what was persisted change (and get an
  // event): a restart re-converges without touching what is still right.
  Mutation m;
  std::vector<v1::Job> updated;
  for (auto& [id, job] : jobs_) {
    v1::PathAssignment a = placement_.AssignmentOf(id);
    if (loom::te::Placement::RouteKey(a) ==
            loom::te::Placement::RouteKey(job.status().assignment()) &&
        job.status().has_assignment()) {
      continue;
    }
    v1::Job changed = job;
    v1::Event jev = NewEvent(v1::EVENT_TYPE_JOB_UPDATED, id);
    SetAssignment(&changed, a, jev.revision(), jev.time());
    jev.set_cause("controller restart: the persisted paths are no longer valid or were never set");
    jev.set_action("re-placed the job's traffic");
    jev.set_result(a.reason());
    *jev.mutable_job() = changed;
    m.events.push_back(jev);
    m.put_jobs.push_back(changed);
    updated.push_back(changed);
  }
  int moved = static_cast<int>(updated.size());
  v1::Event ev = NewEvent(v1::EVENT_TYPE_CONTROLLER_STARTED, "loomd");
  ev.set_cause("process start");
  ev.set_action("reloaded " + std::to_string(jobs_.size()) + " job(s) and " +
                std::to_string(drains_.size()) + " drain(s) from the store");
  ev.set_result("serving topology \"" + topo_->topology().name() + "\"; " + std::to_string(moved) +
                " assignment(s) changed on reload");
  m.events.push_back(ev);
  if (Status s = CommitAndPublish(m); !s.ok()) return s;
  for (auto& job : updated) jobs_[job.job_id()] = job;
  UpdateGauges();
  LOG_INFO("controller started")
      .With("jobs", static_cast<uint64_t>(jobs_.size()))
      .With("drains", static_cast<uint64_t>(drains_.size()))
      .With("revision", revision_);
  return Status::Ok();
}

Controller::CachedEvent Controller::MakeCached(v1::Event ev, EventBytes wire) {
  CachedEvent c;
  c.wire = wire ? std::move(wire) : std::make_shared<const std::string>(ev.SerializeAsString());
  c.bytes = ev.SpaceUsedLong() + c.wire->capacity();
  c.ev = std::move(ev);
  return c;
}

v1::Event Controller::NewEvent(v1::EventType type, const std::string& subject) {
  v1::Event ev;
  ev.set_revision(++next_revision_);
  *ev.mutable_time() = TimeUtil::NanosecondsToTimestamp(clock_.WallNow());
  ev.set_type(type);
  ev.set_severity(v1::SEVERITY_INFO);
  ev.set_subject(subject);
  return ev;
}

Status Controller::CommitAndPublish(Mutation& m) {
  uint64_t last = m.events.empty() ? revision_ : m.events.back().revision();
  // Retention: compact what falls out of the window (count and bytes) in the
  // same transaction. Only older events go; the new ones are always kept.
  // Each event is serialized once: for the store, the budget and watchers.
  std::vector<uint32_t> sizes;
  sizes.reserve(m.events.size());
  m.event_wire.resize(m.events.size());
  size_t count = retained_.size(), bytes = retained_bytes_;
  for (size_t i = 0; i < m.events.size(); ++i) {
    if (!m.event_wire[i]) {
      m.event_wire[i] = std::make_shared<const std::string>(m.events[i].SerializeAsString());
    }
    sizes.push_back(static_cast<uint32_t>(m.event_wire[i]->size()));
    ++count;
    bytes += sizes.back();
  }
  size_t drop = 0;
  while (drop < retained_.size() &&
         (count > options_.event_retention || bytes > options_.event_retention_bytes)) {
    --count;
    bytes -= retained_[drop].second;
    ++drop;
  }
  if (drop > 0) {
    if (drop < retained_.size()) {
      m.prune_events_before = retained_[drop].first;
    } else {
      m.prune_events_before = m.events.empty() ? last + 1 : m.events.front().revision();
    }
  }
  {
    // Idempotency records: by count and by the bytes of their stored answers.
    size_t n = requests_.size() + m.requests.size(), b = request_bytes_, i = 0;
    for (const auto& r : m.requests) b += r.response.size();
    while (i < request_order_.size() &&
           (n > options_.request_retention || b > options_.request_retention_bytes)) {
      auto it = requests_.find(request_order_[i].second);
      if (it != requests_.end()) b -= it->second.response_bytes;
      --n;
      ++i;
    }
    if (i > 0) m.prune_requests_before = request_order_[i - 1].first + 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  Status s = store_.Commit(m);
  store_write_seconds_.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (!s.ok()) {
    store_errors_.Increment();
    next_revision_ = revision_;
    LOG_ERROR("store commit failed; change not applied").With("error", s.message());
    return Unavailable("could not persist the change: " + s.message());
  }
  revision_ = last;
  next_revision_ = revision_;
  if (!m.put_jobs.empty() || !m.delete_jobs.empty() || !m.put_drains.empty() ||
      !m.delete_drains.empty() || m.put_policy) {
    desired_dirty_ = true;  // assignments may have changed
  }
  if (m.prune_events_before) {
    size_t pruned = 0;
    while (!retained_.empty() && retained_.front().first < m.prune_events_before) {
      retained_bytes_ -= retained_.front().second;
      retained_.pop_front();
      ++pruned;
    }
    events_compacted_->Increment(static_cast<double>(pruned));
    while (!catchup_cache_.empty() && catchup_cache_.begin()->first < m.prune_events_before) {
      catchup_cache_bytes_ -= catchup_cache_.begin()->second.bytes;
      catchup_cache_.erase(catchup_cache_.begin());
    }
    // The insertion order keeps only what is still cached (bounded by the cache).
    if (catchup_order_.size() > 2 * catchup_cache_.size() + 64) {
      std::erase_if(catchup_order_, [&](uint64_t r) { return !catchup_cache_.count(r); });
    }
    while (!history_.empty() && history_.front().ev.revision() < m.prune_events_before) {
      history_bytes_ -= history_.front().bytes;
      history_.pop_front();
    }
    vacuum_due_ = true;
  }
  for (size_t i = 0; i < m.events.size(); ++i) {
    retained_.emplace_back(m.events[i].revision(), sizes[i]);
    retained_bytes_ += sizes[i];
  }
  if (m.prune_requests_before) {
    while (!request_order_.empty() && request_order_.front().first < m.prune_requests_before) {
      auto it = requests_.find(request_order_.front().second);
      if (it != requests_.end()) {
        request_bytes_ -= it->second.response_bytes;
        requests_.erase(it);
      }
      request_order_.pop_front();
    }
  }
  for (auto& r : m.requests) {
    request_order_.emplace_back(r.revision, r.request_id);
    RequestRecord index = r;  // the answer itself stays in the store
    index.response_bytes = r.response.size();
    index.response.clear();
    index.response.shrink_to_fit();
    request_bytes_ += index.response_bytes;
    requests_[r.request_id] = std::move(index);
  }
  for (size_t i = 0; i < m.events.size(); ++i) {
    const v1::Event& ev = m.events[i];
    history_.push_back(MakeCached(ev, m.event_wire[i]));
    history_bytes_ += history_.back().bytes;
    const EventBytes wire = history_.back().wire;
    events_family_.Add({{"type", EventTypeLabel(ev.type())}}).Increment();
    for (auto it = subscribers_.begin(); it != subscribers_.end();) {
      Subscriber& sub = it->second;
      const uint64_t id = it->first;
      ++it;
      if (sub.lagging || ev.revision() < sub.next) continue;
      switch (sub.watcher.offer(ev, wire)) {
        case Offer::kTaken:
          sub.next = ev.revision() + 1;
          break;
        case Offer::kClosed:
          subscribers_.erase(id);
          break;
        case Offer::kFull:
          if (options_.slow_watcher_policy == SlowWatcherPolicy::kCut) {
            watch_cuts_->Increment();
            WatchEnd end;
            end.resume_revision = sub.next;
            EndWatch(id,
                     {StatusCode::kResourceExhausted,
                      "watcher too slow: its send buffer is full; resume with start_revision=" +
                          std::to_string(sub.next)},
                     end);
          } else {
            watch_catchups_->Increment();
            sub.lagging = true;  // fed from the history once it has room (ResumeWatch)
          }
          break;
      }
    }
  }
  // The memory cache keeps the newest events within its budget (at least one).
  while (history_.size() > 1 && history_bytes_ > options_.event_cache_bytes) {
    history_bytes_ -= history_.front().bytes;
    history_.pop_front();
  }
  if (m.prune_events_before) EndCompactedWatchers();
  history_bytes_gauge_->Set(static_cast<double>(history_bytes_));
  retained_events_gauge_->Set(static_cast<double>(retained_.size()));
  watchers_gauge_.Set(static_cast<double>(subscribers_.size()));
  UpdateGauges();
  return Status::Ok();
}

std::string Controller::RequestKey(const Caller& caller, const std::string& request_id) {
  // Request ids are per caller: another identity reusing one (a guessable Slurm id)
  // neither replays nor blocks it. Loom itself and "anonymous" use the id as it is.
  if (request_id.empty() || caller.identity.empty() || caller.identity == "anonymous") {
    return request_id;
  }
  return caller.identity + '\x1f' + request_id;
}

namespace {
// The client's request id in a key made by RequestKey.
std::string ShownId(const std::string& key) { return key.substr(key.rfind('\x1f') + 1); }
}  // namespace

bool Controller::Replay(const std::string& method, const std::string& request_id,
                        const google::protobuf::Message& request,
                        google::protobuf::Message* response, Status* status) {
  if (request_id.empty()) return false;
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return false;
  // The fingerprint is canonical (maps by key, field by field) and carries its scheme; a
  // record made by an earlier scheme is checked by method only (its hash, of serialized
  // bytes, cannot be recomputed faithfully).
  const bool same_request = it->second.method == method &&
                            (it->second.hash_scheme != loom::proto::kFingerprintScheme ||
                             it->second.request_hash == loom::proto::CanonicalFingerprint(request));
  if (!same_request) {
    *status =
        InvalidArgument("request_id: \"" + ShownId(request_id) +
                        "\" was already used for a different request (" + it->second.method + ")");
    return true;
  }
  std::string bytes;
  if (Status s = store_.ReadResponse(request_id, &bytes); !s.ok()) {
    *status = Unavailable("reading the stored answer for request_id \"" + ShownId(request_id) +
                          "\": " + s.message());
    return true;
  }
  if (!response->ParseFromString(bytes)) {
    *status = Internal("stored answer for request_id \"" + ShownId(request_id) + "\" is corrupt");
    return true;
  }
  *status = Status::Ok();
  return true;
}

void Controller::Remember(Mutation& m, const std::string& method, const std::string& request_id,
                          const google::protobuf::Message& request,
                          const google::protobuf::Message& response) {
  if (request_id.empty()) return;
  m.requests.push_back({request_id, method, loom::proto::CanonicalFingerprint(request),
                        response.SerializeAsString(),
                        m.events.empty() ? next_revision_ : m.events.back().revision(),
                        loom::proto::kFingerprintScheme});
}

void Controller::UpdateGauges() {
  jobs_gauge_.Set(static_cast<double>(jobs_.size()));
  drained_gauge_.Set(static_cast<double>(drains_.size()));
  max_util_gauge_.Set(placement_.max_utilization());
}

std::set<std::string> Controller::DownLinks() const {
  std::set<std::string> down;
  for (const auto& [id, d] : drains_) down.insert(id);
  for (const auto& [id, st] : oper_) {
    if (st == v1::LINK_OPER_STATE_DOWN) down.insert(id);
  }
  for (const auto& id : adaptive_.removed_links()) down.insert(id);
  for (const auto& [id, why] : lldp_excluded_) down.insert(id);
  return down;
}

void Controller::SetAssignment(v1::Job* job, v1::PathAssignment a, uint64_t revision,
                               const google::protobuf::Timestamp& time) const {
  auto* st = job->mutable_status();
  bool complete = std::all_of(a.routes().begin(), a.routes().end(),
                              [](const v1::RouteAssignment& r) { return !r.via().empty(); });
  st->set_state(complete ? v1::JOB_STATE_ASSIGNED : v1::JOB_STATE_PENDING);
  st->set_message(a.reason());
  *st->mutable_assignment() = std::move(a);
  st->mutable_assignment()->set_revision(revision);
  st->set_revision(revision);
  *st->mutable_update_time() = time;
}

int Controller::RecomputeInto(Mutation& m, const std::string& cause,
                              std::map<std::string, v1::Job>* updated,
                              const loom::te::Placement* keep_unless_better,
                              const std::string& skip) {
  auto t0 = std::chrono::steady_clock::now();
  auto changed = placement_.Recompute(loom::te::PlacementMode::kFull);
  placement_seconds_.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (keep_unless_better && !changed.empty() &&
      placement_.max_utilization() >
          keep_unless_better->max_utilization() * (1.0 - options_.overload_min_gain) - 1e-9) {
    // An overload re-placement that does not lower the worst link moves jobs
    // for nothing (and, on a fabric that cannot fit its jobs, would reshuffle
    // them at every batch): keep the placement as it was.
    placement_ = *keep_unless_better;
    return 0;
  }
  for (const auto& [id, a] : changed) {
    // `skip` (the job being registered or updated) is reported by its own event.
    if (id == skip) continue;
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    v1::Job job = it->second;
    v1::Event ev = NewEvent(v1::EVENT_TYPE_JOB_UPDATED, id);
    SetAssignment(&job, a, ev.revision(), ev.time());
    ev.set_cause(cause);
    ev.set_action("recomputed the job's paths: " + std::to_string(a.routes_size()) +
                  " route(s) over " + std::to_string(a.primary_spines_size()) + " spine(s)");
    ev.set_result(a.reason());
    *ev.mutable_job() = job;
    m.events.push_back(ev);
    m.put_jobs.push_back(job);
    (*updated)[id] = job;
  }
  moves_counter_.Increment(static_cast<double>(changed.size()));
  return static_cast<int>(changed.size());
}

int Controller::RebalanceInto(Mutation& m, const std::string& cause,
                              std::map<std::string, v1::Job>* updated, const std::string& skip,
                              loom::te::Placement::Undo* undo) {
  const double before = placement_.max_utilization();
  auto t0 = std::chrono::steady_clock::now();
  auto changed = placement_.Rebalance(options_.overload_max_moved_jobs, undo);
  placement_seconds_.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (changed.empty()) {
    overload_fruitless_ = std::min(overload_fruitless_ + 1, 5);
    return 0;
  }
  if (placement_.max_utilization() > before * (1.0 - options_.overload_min_gain) - 1e-9) {
    // Not worth the moves (a fabric that cannot fit its jobs would reshuffle them at
    // every batch for a few percent): put it back, and wait longer before the next
    // try while they keep gaining too little.
    placement_.RollBack(std::move(*undo));
    overload_fruitless_ = std::min(overload_fruitless_ + 1, 5);
    return 0;
  }
  overload_fruitless_ = 0;
  int moved = 0;
  for (auto& [id, a] : changed) {
    if (id == skip) continue;  // reported by its own event
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    v1::Job job = it->second;
    v1::Event ev = NewEvent(v1::EVENT_TYPE_JOB_UPDATED, id);
    ev.set_cause(cause);
    ev.set_action("recomputed the job's paths: " + std::to_string(a.routes_size()) +
                  " route(s) over " + std::to_string(a.primary_spines_size()) + " spine(s)");
    ev.set_result(a.reason());
    SetAssignment(&job, std::move(a), ev.revision(), ev.time());
    m.put_jobs.push_back(job);
    *ev.mutable_job() = job;
    m.events.push_back(std::move(ev));
    (*updated)[id] = std::move(job);
    ++moved;
  }
  moves_counter_.Increment(static_cast<double>(changed.size()));
  return moved + (changed.count(skip) ? 1 : 0);
}

std::optional<loom::te::Placement::Undo> Controller::RecomputeIfOverloaded(
    const std::string& job_id, Mutation& m, std::map<std::string, v1::Job>* updated) {
  if (!options_.recompute_on_overload || placement_.max_utilization() <= 1.0 + 1e-9) {
    if (placement_.max_utilization() <= 1.0 + 1e-9) overload_fruitless_ = 0;
    return std::nullopt;
  }
  const TimeNs now = clock_.Now();
  if (!OverloadRecomputeDue(now)) {
    // Rate-limited: placed incrementally; Tick() re-places once for the batch.
    ++overload_deferred_;
    return std::nullopt;
  }
  last_overload_recompute_ns_ = now;
  overload_deferred_ = 0;
  const auto wall = std::chrono::steady_clock::now();
  const double max_before = placement_.max_utilization();
  std::optional<loom::te::Placement::Undo> before(std::in_place);
  int moved =
      RebalanceInto(m,
                    "placing job " + job_id + " around the others left links predicted at " +
                        std::to_string(std::lround(max_before * 100)) + "% of capacity",
                    updated, job_id, &*before);
  PaceOverloadRecompute(wall);
  if (moved == 0) return std::nullopt;  // nothing changed: no rollback needed
  LOG_INFO("re-placement after an overloaded incremental placement")
      .With("job", job_id)
      .With("moved", static_cast<int64_t>(moved))
      .With("before", max_before)
      .With("after", placement_.max_utilization());
  return before;
}

void Controller::AppendMutation(Mutation& into, Mutation&& from) {
  for (auto& e : from.events) into.events.push_back(std::move(e));
  for (auto& j : from.put_jobs) into.put_jobs.push_back(std::move(j));
}

// ---------------------------------------------------------------- jobs ----

Status Caller::DenyTenant(const std::string& what, const std::string& tenant) const {
  return PermissionDenied("missing permission " + (permission.empty() ? what : permission) +
                          " for tenant " + loom::QuoteInput(tenant) + " (" + identity +
                          " is limited to other tenants)");
}

void Controller::RegisterJob(v1::RegisterJobRequest req, Done<v1::RegisterJobResponse> done,
                             Caller caller) {
  {
    std::lock_guard<std::mutex> lock(registrations_mu_);
    registrations_.push_back({std::move(req), std::move(done), std::move(caller)});
    if (registrations_drain_posted_) return;  // the posted drain takes it
    registrations_drain_posted_ = true;
  }
  Post([this]() { DrainRegistrations(); });
}

void Controller::DrainRegistrations() {
  std::vector<PendingRegistration> batch;
  {
    std::lock_guard<std::mutex> lock(registrations_mu_);
    const size_t n = std::min(registrations_.size(), kMaxRegistrationBatch);
    for (size_t i = 0; i < n; ++i) {
      batch.push_back(std::move(registrations_.front()));
      registrations_.pop_front();
    }
    // What is left (over the batch limit) gets a drain of its own, behind what is
    // already on the strand.
    registrations_drain_posted_ = !registrations_.empty();
  }
  if (registrations_drain_posted_) Post([this]() { DrainRegistrations(); });
  // Each registration is placed as if alone, in arrival order, and applied in memory
  // at once (the next one is placed around it); the batch is committed in one
  // transaction. Undo: the placement before each overload recompute, the jobs each
  // one added, and the job records each one replaced, undone newest first.
  struct Staged {
    Done<v1::RegisterJobResponse> done;
    std::string job_id, tenant;
    v1::RegisterJobResponse resp;
    std::optional<loom::te::Placement::Undo> before;
  };
  std::vector<Staged> staged;
  std::vector<std::pair<std::string, std::optional<v1::Job>>> jobs_undo;
  // A failed commit leaves the placement, and the overload re-placement's rate
  // limit, as they were before the batch.
  std::vector<double> load_before = placement_.LoadSnapshot();
  const TimeNs last_overload_before = last_overload_recompute_ns_;
  const int overload_deferred_before = overload_deferred_;
  const int overload_fruitless_before = overload_fruitless_;
  std::set<std::string> batch_request_ids, batch_job_ids;
  std::vector<PendingRegistration> next;  // a retry of a request of this batch
  Mutation m;
  for (auto& p : batch) {
    v1::RegisterJobRequest& req = p.req;
    v1::RegisterJobResponse resp;
    Status st;
    // The request id is not part of what is compared across retries.
    std::string request_id = RequestKey(p.caller, req.request_id());
    if ((!request_id.empty() && batch_request_ids.count(request_id)) ||
        batch_job_ids.count(req.job().job_id())) {
      // A retry of a request of this batch, or the same job again: answered once the
      // first is committed (or failed), by the next drain.
      next.push_back(std::move(p));
      continue;
    }
    if (!p.caller.Allows(req.job().tenant())) {
      p.done(p.caller.DenyTenant("jobs.write", req.job().tenant()), {});
      continue;
    }
    req.clear_request_id();
    req.mutable_job()->clear_status();
    if (Replay("RegisterJob", request_id, req, &resp, &st)) {
      p.done(st, std::move(resp));
      continue;
    }
    if (Status s = ValidateJobSpec(req.job(), *topo_); !s.ok()) {
      p.done(s, {});
      continue;
    }
    if (jobs_.count(req.job().job_id())) {
      p.done(AlreadyExists("job.job_id: job \"" + req.job().job_id() + "\" is already registered"),
             {});
      continue;
    }
    v1::Job job = req.job();
    Mutation mine;
    v1::Event ev = NewEvent(v1::EVENT_TYPE_JOB_REGISTERED, job.job_id());
    ev.set_actor(p.caller.identity);
    ev.set_peer(p.caller.peer);
    auto t0 = std::chrono::steady_clock::now();
    v1::PathAssignment a = placement_.Upsert(job);
    placement_seconds_.Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    Mutation others;
    std::map<std::string, v1::Job> updated;
    std::optional<loom::te::Placement::Undo> before =
        RecomputeIfOverloaded(job.job_id(), others, &updated);
    if (before) a = placement_.AssignmentOf(job.job_id());
    *job.mutable_status()->mutable_create_time() = ev.time();
    ev.set_cause("scheduler request");
    ev.set_action("registered job of tenant " + job.tenant() + " with " +
                  std::to_string(job.endpoints_size()) + " endpoint(s)");
    ev.set_result(a.reason());
    SetAssignment(&job, std::move(a), ev.revision(), ev.time());
    *ev.mutable_job() = job;
    mine.events.push_back(std::move(ev));
    mine.put_jobs.push_back(job);
    AppendMutation(mine, std::move(others));
    *resp.mutable_job() = job;
    Remember(mine, "RegisterJob", request_id, req, resp);
    AppendMutation(m, std::move(mine));
    for (auto& r : mine.requests) m.requests.push_back(std::move(r));
    if (!request_id.empty()) batch_request_ids.insert(request_id);
    batch_job_ids.insert(job.job_id());
    for (auto& [id, j] : updated) {
      auto it = jobs_.find(id);
      jobs_undo.emplace_back(
          id, it == jobs_.end() ? std::nullopt : std::optional<v1::Job>(std::move(it->second)));
      jobs_[id] = std::move(j);
    }
    jobs_undo.emplace_back(job.job_id(), std::nullopt);
    staged.push_back(
        {std::move(p.done), job.job_id(), job.tenant(), std::move(resp), std::move(before)});
    jobs_[job.job_id()] = std::move(job);
  }
  if (!next.empty()) {
    bool post = false;
    {
      std::lock_guard<std::mutex> lock(registrations_mu_);
      for (auto it = next.rbegin(); it != next.rend(); ++it) {
        registrations_.push_front(std::move(*it));
      }
      post = !registrations_drain_posted_;
      registrations_drain_posted_ = true;
    }
    if (post) Post([this]() { DrainRegistrations(); });
  }
  if (staged.empty()) return;
  if (Status s = CommitAndPublish(m); !s.ok()) {
    for (auto it = jobs_undo.rbegin(); it != jobs_undo.rend(); ++it) {
      if (it->second) {
        jobs_[it->first] = std::move(*it->second);
      } else {
        jobs_.erase(it->first);
      }
    }
    for (auto it = staged.rbegin(); it != staged.rend(); ++it) {
      if (it->before) placement_.RollBack(std::move(*it->before));
      placement_.Remove(it->job_id);
    }
    placement_.RestoreLoad(std::move(load_before));
    last_overload_recompute_ns_ = last_overload_before;
    overload_deferred_ = overload_deferred_before;
    overload_fruitless_ = overload_fruitless_before;
    UpdateGauges();
    for (auto& x : staged) x.done(s, {});
    return;
  }
  UpdateGauges();
  for (auto& x : staged) {
    LOG_INFO("job registered").With("job", x.job_id).With("tenant", x.tenant);
    x.done(Status::Ok(), std::move(x.resp));
  }
}

void Controller::UpdateJob(v1::UpdateJobRequest req, Done<v1::UpdateJobResponse> done,
                           Caller caller) {
  Post([this, req = std::move(req), done = std::move(done), caller = std::move(caller)]() mutable {
    v1::UpdateJobResponse resp;
    Status st;
    if (!caller.Allows(req.job().tenant())) {
      return done(caller.DenyTenant("jobs.write", req.job().tenant()), {});
    }
    if (auto old = jobs_.find(req.job().job_id());
        old != jobs_.end() && !caller.Allows(old->second.tenant())) {
      return done(caller.DenyTenant("jobs.write", old->second.tenant()), {});
    }
    std::string request_id = RequestKey(caller, req.request_id());
    req.clear_request_id();
    req.mutable_job()->clear_status();
    if (Replay("UpdateJob", request_id, req, &resp, &st)) return done(st, std::move(resp));
    if (Status s = ValidateJobSpec(req.job(), *topo_); !s.ok()) return done(s, {});
    auto it = jobs_.find(req.job().job_id());
    if (it == jobs_.end()) {
      return done(NotFound("job.job_id: job \"" + req.job().job_id() + "\" is not registered"), {});
    }
    if (it->second.tenant() != req.job().tenant()) {
      return done(
          InvalidArgument("job.tenant: job \"" + req.job().job_id() + "\" belongs to tenant \"" +
                          it->second.tenant() + "\"; the tenant of a job cannot change"),
          {});
    }
    v1::Job job = req.job();
    *job.mutable_status() = it->second.status();
    Mutation m;
    v1::Event ev = NewEvent(v1::EVENT_TYPE_JOB_UPDATED, job.job_id());
    ev.set_actor(caller.identity);
    ev.set_peer(caller.peer);
    v1::PathAssignment a = placement_.Upsert(job);
    Mutation others;
    std::map<std::string, v1::Job> updated;
    std::optional<loom::te::Placement::Undo> before =
        RecomputeIfOverloaded(job.job_id(), others, &updated);
    if (before) a = placement_.AssignmentOf(job.job_id());
    SetAssignment(&job, a, ev.revision(), ev.time());
    ev.set_cause("scheduler request");
    ev.set_action("replaced the job's spec and re-placed its traffic");
    ev.set_result(a.reason());
    *ev.mutable_job() = job;
    m.events.push_back(ev);
    m.put_jobs.push_back(job);
    AppendMutation(m, std::move(others));
    *resp.mutable_job() = job;
    Remember(m, "UpdateJob", request_id, req, resp);
    if (Status s = CommitAndPublish(m); !s.ok()) {
      if (before) placement_.RollBack(std::move(*before));
      placement_.Upsert(it->second);  // back to the old spec and routes
      return done(s, {});
    }
    for (auto& [id, j] : updated) {
      if (id != job.job_id()) jobs_[id] = std::move(j);
    }
    traffic_meter_.Forget(job.job_id());  // measured for the old spec
    it->second = job;
    done(Status::Ok(), std::move(resp));
  });
}

void Controller::ReleaseJob(v1::ReleaseJobRequest req, Done<v1::ReleaseJobResponse> done,
                            Caller caller) {
  Post([this, req = std::move(req), done = std::move(done), caller = std::move(caller)]() mutable {
    v1::ReleaseJobResponse resp;
    Status st;
    std::string request_id = RequestKey(caller, req.request_id());
    req.clear_request_id();
    if (Replay("ReleaseJob", request_id, req, &resp, &st)) {
      if (st.ok() && !caller.Allows(resp.job().tenant())) {
        return done(caller.DenyTenant("jobs.write", resp.job().tenant()), {});
      }
      return done(st, std::move(resp));
    }
    if (req.job_id().empty()) return done(InvalidArgument("job_id: must not be empty"), {});
    auto it = jobs_.find(req.job_id());
    if (it == jobs_.end()) {
      return done(NotFound("job_id: job \"" + req.job_id() + "\" is not registered"), {});
    }
    if (!caller.Allows(it->second.tenant())) {
      return done(caller.DenyTenant("jobs.write", it->second.tenant()), {});
    }
    v1::Job job = it->second;
    Mutation m;
    v1::Event ev = NewEvent(v1::EVENT_TYPE_JOB_RELEASED, job.job_id());
    ev.set_actor(caller.identity);
    ev.set_peer(caller.peer);
    job.mutable_status()->set_state(v1::JOB_STATE_RELEASED);
    job.mutable_status()->set_revision(ev.revision());
    *job.mutable_status()->mutable_update_time() = ev.time();
    job.mutable_status()->set_message("released by the scheduler");
    ev.set_cause("scheduler request");
    ev.set_action("released the job");
    ev.set_result("removed");
    *ev.mutable_job() = job;
    m.events.push_back(ev);
    m.delete_jobs.push_back(job.job_id());
    *resp.mutable_job() = job;
    Remember(m, "ReleaseJob", request_id, req, resp);
    if (Status s = CommitAndPublish(m); !s.ok()) return done(s, {});
    jobs_.erase(it);
    placement_.Remove(job.job_id());
    UpdateGauges();
    LOG_INFO("job released").With("job", job.job_id());
    done(Status::Ok(), std::move(resp));
  });
}

void Controller::GetJob(v1::GetJobRequest req, Done<v1::GetJobResponse> done, Caller caller) {
  Post([this, req = std::move(req), done = std::move(done), caller = std::move(caller)]() {
    if (req.job_id().empty()) return done(InvalidArgument("job_id: must not be empty"), {});
    auto it = jobs_.find(req.job_id());
    if (it == jobs_.end()) {
      return done(NotFound("job_id: job \"" + req.job_id() + "\" is not registered"), {});
    }
    if (!caller.Allows(it->second.tenant())) {
      return done(caller.DenyTenant("jobs.read", it->second.tenant()), {});
    }
    v1::GetJobResponse resp;
    *resp.mutable_job() = it->second;
    done(Status::Ok(), std::move(resp));
  });
}

void Controller::GetJobHealth(v1::GetJobHealthRequest req, Done<v1::GetJobHealthResponse> done,
                              Caller caller) {
  Post([this, req = std::move(req), done = std::move(done), caller = std::move(caller)]() {
    if (req.job_id().empty()) return done(InvalidArgument("job_id: must not be empty"), {});
    auto it = jobs_.find(req.job_id());
    if (it == jobs_.end()) {
      return done(NotFound("job_id: job \"" + req.job_id() + "\" is not registered"), {});
    }
    if (!caller.Allows(it->second.tenant())) {
      return done(caller.DenyTenant("jobs.read", it->second.tenant()), {});
    }
    v1::GetJobHealthResponse resp = JobHealthOf(it->second);
    if (caller.tenants) {
      // What Loom did, as a tenant may see it: link events on the job's paths stay
      // (fabric facts about its own traffic) without who caused them; other
      // tenants' jobs, blast radii naming them and denials do not.
      google::protobuf::RepeatedPtrField<v1::Event> kept;
      for (const auto& ev : resp.actions()) {
        v1::Event mine;
        const bool fabric = !ev.has_job() && ev.type() != v1::EVENT_TYPE_FAULT_BLAST_RADIUS &&
                            ev.type() != v1::EVENT_TYPE_ACCESS_DENIED;
        if (fabric) {
          mine = ev;
          if (mine.actor() != caller.identity) {
            mine.clear_actor();
            mine.clear_peer();
          }
        } else {
          switch (ScopeEvent(ev, *caller.tenants, caller.identity, &mine)) {
            case Visibility::kHidden:
              continue;
            case Visibility::kWhole:
              mine = ev;
              break;
            case Visibility::kRedacted:
              break;
          }
        }
        *kept.Add() = std::move(mine);
      }
      resp.mutable_actions()->Swap(&kept);
    }
    done(Status::Ok(), std::move(resp));
  });
}

void Controller::RecordDenied(Caller caller, std::string method, std::string subject,
                              std::string missing, uint32_t max_per_minute) {
  Post([this, caller = std::move(caller), method = std::move(method), subject = std::move(subject),
        missing = std::move(missing), max_per_minute]() {
    const int64_t minute = clock_.WallNow() / 60'000'000'000LL;
    if (minute != denied_minute_) {
      denied_minute_ = minute;
      denied_in_minute_ = 0;
    }
    if (denied_in_minute_ >= max_per_minute) return;
    ++denied_in_minute_;
    Mutation m;
    v1::Event ev = NewEvent(v1::EVENT_TYPE_ACCESS_DENIED, subject);
    ev.set_severity(v1::SEVERITY_WARNING);
    ev.set_actor(caller.identity);
    ev.set_peer(caller.peer);
    ev.set_cause("API call " + method);
    ev.set_action("refused");
    ev.set_result(missing);
    m.events.push_back(std::move(ev));
    CommitAndPublish(m);
  });
}

void Controller::ListJobs(v1::ListJobsRequest req, Done<v1::ListJobsResponse> done, Caller caller) {
  Post([this, req = std::move(req), done = std::move(done), caller = std::move(caller)]() {
    if (req.page_size() < 0) {
      return done(InvalidArgument("page_size: must not be negative"), {});
    }
    if (!req.tenant().empty() && !caller.Allows(req.tenant())) {
      return done(caller.DenyTenant("jobs.read", req.tenant()), {});
    }
    v1::ListJobsResponse resp;
    resp.set_revision(revision_);
    auto it = req.page_token().empty() ? jobs_.begin() : jobs_.upper_bound(req.page_token());
    for (; it != jobs_.end(); ++it) {
      if (!req.tenant().empty() && it->second.tenant() != req.tenant()) continue;
      if (!caller.Allows(it->second.tenant())) continue;
      if (req.page_size() > 0 && resp.jobs_size() == req.page_size()) {
        resp.set_next_page_token(resp.jobs(resp.jobs_size() - 1).job_id());
        break;
      }
      *resp.add_jobs() = it->second;
    }
    done(Status::Ok(), std::move(resp));
  });
}

// --------------------------------------------------------------- links ----

v1::LinkStatus Controller::MakeLinkStatus(const v1::Link& link) const {
  v1::LinkStatus st;
  *st.mutable_link() = link;
  auto it = drains_.find(link.id());
  if (it != drains_.end()) {
    st.set_admin_state(v1::LINK_ADMIN_STATE_DRAINED);
    st.set_drain_reason(it->second.reason);
    *st.mutable_drain_time() = TimeUtil::NanosecondsToTimestamp(it->second.time_ns);
  } else {
    st.set_admin_state(v1::LINK_ADMIN_STATE_IN_SERVICE);
  }
  auto oper = oper_.find(link.id());
  st.set_oper_state(oper == oper_.end() ? v1::LINK_OPER_STATE_UNKNOWN : oper->second);
  if (snapshot_) {
    int index = topo_->LinkIndex(link.id());
    for (int dir = 0; dir < 2; ++dir) {
      size_t i = static_cast<size_t>(2 * index + dir);
      if (index < 0 || i >= snapshot_->links.size()) break;
      const auto& d = snapshot_->links[i];
      auto* out = st.add_directions();
      out->set_from_device(d.tx_device ? *d.tx_device : "");
      out->set_to_device(d.rx_device ? *d.rx_device : "");
      out->set_utilization(d.utilization);
      out->set_rate_bps(d.tx_bps);
      out->set_queue_depth_bytes(d.queue_depth_bytes);
      out->set_queue_peak_bytes(d.queue_peak_bytes);
      out->set_ecn_marked_pps(d.ecn_marked_pps);
      out->set_cnp_pps(d.cnp_pps);
      out->set_pfc_pause_ratio(d.pfc_pause_ratio);
      out->set_drops_pps(d.drops_pps);
      out->set_errors_pps(d.errors_pps);
      out->set_stale(d.stale);
      out->set_pfc_stormed(d.pfc_stormed);
      const auto& sigs = telemetry::CatalogueSignals();
      for (size_t b = 0; b < sigs.size(); ++b) {
        if (d.unavailable_signals & (1u << b)) out->add_unavailable_signals(sigs[b]);
      }
      if (d.stale) {
        // A quality judged from no data is no quality (never "7 = best").
        out->set_quality_unknown(true);
        out->set_quality_note(
            (d.unavailable_signals & 1u) != 0
                ? "interface counters unavailable on " + (d.tx_device ? *d.tx_device : "") +
                      " or " + (d.rx_device ? *d.rx_device : "")
                : std::string(d.has_rate ? "stale telemetry" : "no telemetry yet"));
      } else {
        out->set_quality(static_cast<uint32_t>(d.quality_band));
      }
      if (dir == 0) {
        st.set_lldp(static_cast<v1::LldpCheckState>(d.lldp));
        st.set_lldp_detail(d.lldp_detail);
      }
      if (d.last_sample_ns > 0) {
        *out->mutable_sample_time() = TimeUtil::NanosecondsToTimestamp(d.last_sample_ns);
      }
    }
  }
  return st;
}

void Controller::ListLinks(v1::ListLinksRequest req, Done<v1::ListLinksResponse> done) {
  Post([this, req = std::move(req), done = std::move(done)]() {
    if (req.page_size() < 0) {
      return done(InvalidArgument("page_size: must not be negative"), {});
    }
    if (!req.device().empty() && !topo_->FindDevice(req.device())) {
      return done(NotFound("device: \"" + req.device() + "\" is not in the topology"), {});
    }
    std::vector<const v1::Link*> links;
    for (const auto& l : topo_->topology().links()) {
      if (!req.device().empty() && l.a().device() != req.device() &&
          l.b().device() != req.device()) {
        continue;
      }
      if (req.drained_only() && !drains_.count(l.id())) continue;
      if (!req.page_token().empty() && l.id() <= req.page_token()) continue;
      links.push_back(&l);
    }
    std::sort(links.begin(), links.end(),
              [](const v1::Link* a, const v1::Link* b) { return a->id() < b->id(); });
    v1::ListLinksResponse resp;
    for (const auto* l : links) {
      if (req.page_size() > 0 && resp.links_size() == req.page_size()) {
        resp.set_next_page_token(resp.links(resp.links_size() - 1).link().id());
        break;
      }
      *resp.add_links() = MakeLinkStatus(*l);
    }
    done(Status::Ok(), std::move(resp));
  });
}

void Controller::GetLink(v1::GetLinkRequest req, Done<v1::GetLinkResponse> done) {
  Post([this, req = std::move(req), done = std::move(done)]() {
    if (req.link_id().empty()) return done(InvalidArgument("link_id: must not be empty"), {});
    const v1::Link* l = topo_->FindLink(req.link_id());
    if (!l)
      return done(NotFound("link_id: link \"" + req.link_id() + "\" is not in the topology"), {});
    v1::GetLinkResponse resp;
    *resp.mutable_link() = MakeLinkStatus(*l);
    done(Status::Ok(), std::move(resp));
  });
}

void Controller::DrainLink(v1::DrainLinkRequest req, Done<v1::DrainLinkResponse> done,
                           Caller caller) {
  Post([this, req = std::move(req), done = std::move(done), caller = std::move(caller)]() mutable {
    v1::DrainLinkResponse resp;
    Status st;
    std::string request_id = RequestKey(caller, req.request_id());
    req.clear_request_id();
    if (Replay("DrainLink", request_id, req, &resp, &st)) return done(st, std::move(resp));
    if (req.link_id().empty()) return done(InvalidArgument("link_id: must not be empty"), {});
    if (req.reason().empty()) {
      return done(InvalidArgument("reason: say why the link is drained (kept in the event log)"),
                  {});
    }
    const v1::Link* l = topo_->FindLink(req.link_id());
    if (!l)
      return done(NotFound("link_id: link \"" + req.link_id() + "\" is not in the topology"), {});
    if (drains_.count(l->id())) {
      *resp.mutable_link() = MakeLinkStatus(*l);
      return done(Status::Ok(), std::move(resp));
    }
    Mutation m;
    v1::Event ev = NewEvent(v1::EVENT_TYPE_LINK_DRAINED, l->id());
    ev.set_actor(caller.identity);
    ev.set_peer(caller.peer);
    ev.set_severity(v1::SEVERITY_WARNING);
    ev.set_cause("operator request: " + req.reason());
    ev.set_action("marked the link administratively out of service");
    ev.set_result("drained");
    m.events.push_back(ev);
    DrainRecord rec{l->id(), req.reason(), clock_.WallNow(), ev.revision()};
    m.put_drains.push_back(rec);
    loom::te::Placement saved = placement_;
    std::set<std::string> down = DownLinks();
    down.insert(l->id());
    placement_.SetDownLinks(down);
    std::map<std::string, v1::Job> updated;
    int moved = RecomputeInto(m, "link " + l->id() + " drained: " + req.reason(), &updated);
    ev.set_result("drained; " + std::to_string(moved) + " job(s) moved off the link");
    m.events[0] = ev;
    *resp.mutable_link() = MakeLinkStatus(*l);
    resp.mutable_link()->set_admin_state(v1::LINK_ADMIN_STATE_DRAINED);
    resp.mutable_link()->set_drain_reason(rec.reason);
    *resp.mutable_link()->mutable_drain_time() = TimeUtil::NanosecondsToTimestamp(rec.time_ns);
    resp.set_revision(ev.revision());
    Remember(m, "DrainLink", request_id, req, resp);
    if (Status s = CommitAndPublish(m); !s.ok()) {
      placement_ = std::move(saved);
      return done(s, {});
    }
    drains_[l->id()] = {rec.reason, rec.time_ns, rec.revision};
    for (auto& [id, job] : updated) jobs_[id] = job;
    UpdateGauges();
    LOG_INFO("link drained").With("link", l->id()).With("reason", req.reason());
    done(Status::Ok(), std::move(resp));
  });
}

void Controller::UndrainLink(v1::UndrainLinkRequest req, Done<v1::UndrainLinkResponse> done,
                             Caller caller) {
  Post([this, req = std::move(req), done = std::move(done), caller = std::move(caller)]() mutable {
    v1::UndrainLinkResponse resp;
    Status st;
    std::string request_id = RequestKey(caller, req.request_id());
    req.clear_request_id();
    if (Replay("UndrainLink", request_id, req, &resp, &st)) return done(st, std::move(resp));
    if (req.link_id().empty()) return done(InvalidArgument("link_id: must not be empty"), {});
    const v1::Link* l = topo_->FindLink(req.link_id());
    if (!l)
      return done(NotFound("link_id: link \"" + req.link_id() + "\" is not in the topology"), {});
    auto it = drains_.find(l->id());
    if (it == drains_.end()) {
      *resp.mutable_link() = MakeLinkStatus(*l);
      return done(Status::Ok(), std::move(resp));
    }
    LinkDrain saved_drain = it->second;
    Mutation m;
    v1::Event ev = NewEvent(v1::EVENT_TYPE_LINK_UNDRAINED, l->id());
    ev.set_actor(caller.identity);
    ev.set_peer(caller.peer);
    ev.set_cause("operator request");
    ev.set_action("returned the link to service");
    ev.set_result("in service");
    m.events.push_back(ev);
    m.delete_drains.push_back(l->id());
    drains_.erase(it);
    loom::te::Placement saved = placement_;
    placement_.SetDownLinks(DownLinks());
    std::map<std::string, v1::Job> updated;
    int moved = RecomputeInto(m, "link " + l->id() + " returned to service", &updated);
    ev.set_result("in service; " + std::to_string(moved) + " job(s) re-placed");
    m.events[0] = ev;
    *resp.mutable_link() = MakeLinkStatus(*l);
    resp.set_revision(ev.revision());
    Remember(m, "UndrainLink", request_id, req, resp);
    if (Status s = CommitAndPublish(m); !s.ok()) {
      drains_[l->id()] = saved_drain;
      placement_ = std::move(saved);
      return done(s, {});
    }
    for (auto& [id, job] : updated) jobs_[id] = job;
    UpdateGauges();
    LOG_INFO("link undrained").With("link", l->id());
    done(Status::Ok(), std::move(resp));
  });
}

// --------------------------------------------------------------- watch ----

void Controller::Subscribe(uint64_t start_revision, bool follow, EventSink sink,
                           Done<uint64_t> done) {
  // An in-process sink never runs out of room: its replay runs in one go on
  // the strand, so `done` comes after it.
  auto answered = std::make_shared<bool>(false);
  Watcher w;
  w.offer = [sink = std::move(sink)](const v1::Event& ev, const EventBytes&) {
    return sink(ev) ? Offer::kTaken : Offer::kClosed;
  };
  w.end = [done, answered](const Status& s, const WatchEnd&) {
    if (*answered) return;
    *answered = true;
    done(s, 0);
  };
  const uint64_t id = next_subscriber_++;
  Post([this, id, start_revision, follow, w = std::move(w), done, answered]() mutable {
    StartWatch(id, start_revision, follow, /*unbounded=*/true, std::move(w));
    if (*answered) return;
    *answered = true;
    // Still subscribed: following (or the sink ended it during the replay).
    done(Status::Ok(), subscribers_.count(id) ? id : 0);
  });
}

uint64_t Controller::Watch(uint64_t start_revision, bool follow, Watcher watcher) {
  const uint64_t id = next_subscriber_++;
  Post([this, id, start_revision, follow, w = std::move(watcher)]() mutable {
    StartWatch(id, start_revision, follow, /*unbounded=*/false, std::move(w));
  });
  return id;
}

void Controller::StartWatch(uint64_t id, uint64_t start_revision, bool follow, bool unbounded,
                            Watcher watcher) {
  WatchEnd end;
  end.current_revision = revision_;
  if (start_revision > revision_ + 1) {
    watcher.end(
        OutOfRange("start_revision: " + std::to_string(start_revision) +
                   " is ahead of the event log (newest revision is " + std::to_string(revision_) +
                   "); the log was replaced or this is another Loom: list again and "
                   "watch from the listing's revision + 1"),
        end);
    return;
  }
  const uint64_t oldest = OldestRetained();
  if (start_revision > 0 && start_revision < oldest) {
    watch_compacted_->Increment();
    end.compacted_revision = oldest - 1;
    watcher.end(OutOfRange("start_revision: " + std::to_string(start_revision) +
                           " is older than the retained history (revisions up to " +
                           std::to_string(oldest - 1) +
                           " were compacted away); list again and watch from the listing's "
                           "revision + 1, or start from " +
                           std::to_string(oldest) + " or 0"),
                end);
    return;
  }
  Subscriber sub;
  sub.watcher = std::move(watcher);
  sub.follow = follow;
  sub.unbounded = unbounded;
  sub.replay_end = revision_;
  if (start_revision == 0) {
    sub.next = revision_ + 1;
  } else {
    sub.next = start_revision;
    sub.lagging = true;
  }
  if (!follow && (start_revision == 0 || start_revision > revision_)) {
    sub.watcher.end(Status::Ok(), end);  // nothing to replay
    return;
  }
  subscribers_.emplace(id, std::move(sub));
  watchers_gauge_.Set(static_cast<double>(subscribers_.size()));
  if (subscribers_[id].lagging) Fill(id);
}

void Controller::ResumeWatch(uint64_t id) {
  Post([this, id]() {
    auto it = subscribers_.find(id);
    if (it != subscribers_.end() && it->second.lagging && !it->second.fill_posted) Fill(id);
  });
}

void Controller::EndWatch(uint64_t id, const Status& status, const WatchEnd& end) {
  auto it = subscribers_.find(id);
  if (it == subscribers_.end()) return;
  Watcher w = std::move(it->second.watcher);
  subscribers_.erase(it);
  watchers_gauge_.Set(static_cast<double>(subscribers_.size()));
  WatchEnd e = end;
  e.current_revision = revision_;
  w.end(status, e);
}

void Controller::EndCompactedWatchers() {
  const uint64_t oldest = OldestRetained();
  std::vector<uint64_t> gone;
  for (const auto& [id, sub] : subscribers_) {
    if (sub.lagging && sub.next < oldest) gone.push_back(id);
  }
  for (uint64_t id : gone) {
    watch_compacted_->Increment();
    WatchEnd end;
    end.compacted_revision = oldest - 1;
    EndWatch(id,
             OutOfRange("watcher fell behind the retained history: revisions up to " +
                        std::to_string(oldest - 1) +
                        " were compacted away before it read them; list again and watch from "
                        "the listing's revision + 1"),
             end);
  }
}

void Controller::Fill(uint64_t id) {
  // Work per strand turn for a bounded watcher: the strand also serves writes.
  constexpr size_t kTurnEvents = 64;
  constexpr size_t kTurnBytes = size_t{512} << 10;
  size_t sent = 0, sent_bytes = 0;
  while (true) {
    auto it = subscribers_.find(id);
    if (it == subscribers_.end()) return;
    Subscriber& sub = it->second;
    sub.fill_posted = false;
    if (!sub.lagging) return;
    if (!sub.follow && sub.next > sub.replay_end) {
      EndWatch(id, Status::Ok(), {});
      return;
    }
    if (sub.next > revision_) {
      sub.lagging = false;  // caught up: live from the next event on
      return;
    }
    if (sub.next < OldestRetained()) {
      EndCompactedWatchers();
      return;
    }
    if (!sub.unbounded && (sent >= kTurnEvents || sent_bytes >= kTurnBytes)) {
      sub.fill_posted = true;
      Post([this, id]() { Fill(id); });
      return;
    }
    const v1::Event* ev = nullptr;
    EventBytes wire;
    if (!history_.empty() && sub.next >= history_.front().ev.revision()) {
      // Revisions increase; a gap (a revision never committed) is skipped.
      auto at =
          std::lower_bound(history_.begin(), history_.end(), sub.next,
                           [](const CachedEvent& e, uint64_t r) { return e.ev.revision() < r; });
      if (at == history_.end()) {
        sub.next = revision_ + 1;
        continue;
      }
      ev = &at->ev;
      wire = at->wire;
    } else {
      // Older than the memory cache: from the catch-up cache, which holds the
      // pages lagging watchers read from the store (shared: watchers behind by
      // about as much read each page once).
      auto at = catchup_cache_.lower_bound(sub.next);
      if (at == catchup_cache_.end() || at->first != sub.next) {
        const uint64_t to =
            std::min(history_.empty() ? revision_ : history_.front().ev.revision() - 1,
                     sub.next + 2 * kTurnEvents - 1);
        std::vector<v1::Event> page;
        Status s = store_.ReadEvents(sub.next, to, kTurnBytes, &page);
        if (s.ok() && page.empty() && to < revision_) {
          sub.next = to + 1;  // revisions never committed (a gap)
          continue;
        }
        if (!s.ok() || page.empty()) {
          LOG_ERROR("watch catch-up could not read the event log")
              .With("revision", std::to_string(sub.next))
              .With("error", s.ok() ? "event missing" : s.message());
          EndWatch(id,
                   Unavailable("reading the event log at revision " + std::to_string(sub.next) +
                               " failed; resume with "
                               "start_revision=" +
                               std::to_string(sub.next)),
                   {sub.next, 0, 0});
          return;
        }
        const uint64_t first = page.front().revision();
        for (auto& e : page) {
          const uint64_t r = e.revision();
          if (catchup_cache_.count(r)) continue;
          CachedEvent c = MakeCached(std::move(e));
          catchup_cache_bytes_ += c.bytes;
          catchup_cache_.emplace(r, std::move(c));
          catchup_order_.push_back(r);
        }
        // Bounded: the pages read longest ago go first, never the one just read
        // (evicting by revision could drop it when other watchers' pages are
        // newer, and this watcher would then jump past it).
        while (catchup_cache_bytes_ > options_.catchup_cache_bytes &&
               catchup_order_.size() > page.size()) {
          auto old = catchup_cache_.find(catchup_order_.front());
          catchup_order_.pop_front();
          if (old == catchup_cache_.end()) continue;
          catchup_cache_bytes_ -= old->second.bytes;
          catchup_cache_.erase(old);
        }
        // Revisions between sub.next and the page's first were never committed.
        at = catchup_cache_.find(first);
        if (at == catchup_cache_.end()) continue;
      }
      ev = &at->second.ev;
      wire = at->second.wire;
    }
    const size_t ev_bytes = wire->size();
    switch (sub.watcher.offer(*ev, wire)) {
      case Offer::kTaken:
        sub.next = ev->revision() + 1;
        ++sent;
        sent_bytes += ev_bytes;
        break;
      case Offer::kFull:
        return;  // ResumeWatch when it has room
      case Offer::kClosed:
        subscribers_.erase(id);
        watchers_gauge_.Set(static_cast<double>(subscribers_.size()));
        return;
    }
  }
}

void Controller::Unsubscribe(uint64_t id) {
  Post([this, id]() {
    subscribers_.erase(id);
    watchers_gauge_.Set(static_cast<double>(subscribers_.size()));
  });
}

}  // namespace loom::controller

namespace loom::controller {

// -------------------------------------------------------------- policy ----

void Controller::InstallPolicy(v1::PolicySet set, Done<PolicyInstallResult> done) {
  Post([this, set = std::move(set), done = std::move(done)]() mutable {
    PolicyInstallResult result;
    auto findings = loom::policy::ValidatePolicy(set, *topo_);
    result.findings = loom::policy::FormatFindings(findings);
    if (loom::policy::HasErrors(findings)) {
      return done(InvalidArgument("policy set refused:\n" + result.findings), result);
    }
    set.set_version(0);
    v1::PolicySet current = placement_.policy().set();
    current.set_version(0);
    if (policy_version_ > 0 && loom::proto::SameMessage(current, set)) {
      return done(Status::Ok(), result);  // already installed
    }
    set.set_version(policy_version_ + 1);
    loom::te::Placement saved = placement_;
    placement_.SetPolicy(set);
    Mutation m;
    v1::Event ev = NewEvent(v1::EVENT_TYPE_POLICY_UPDATED, "policy");
    ev.set_cause("operator installed policy version " + std::to_string(set.version()));
    ev.set_action("validated " + std::to_string(set.rules_size()) + " rule(s) and " +
                  std::to_string(set.colors_size()) + " color(s); re-evaluated every job");
    m.events.push_back(ev);
    m.put_policy = set;
    std::map<std::string, v1::Job> updated;
    result.jobs_moved =
        RecomputeInto(m, "policy version " + std::to_string(set.version()), &updated);
    m.events[0].set_result(std::to_string(result.jobs_moved) + " job(s) re-placed" +
                           (result.findings.empty() ? "" : "; warnings:\n" + result.findings));
    if (Status s = CommitAndPublish(m); !s.ok()) {
      placement_ = std::move(saved);
      return done(s, result);
    }
    for (auto& [id, job] : updated) jobs_[id] = job;
    policy_version_ = set.version();
    result.version = set.version();
    LOG_INFO("policy installed")
        .With("version", policy_version_)
        .With("jobs_moved", result.jobs_moved);
    done(Status::Ok(), result);
  });
}

void Controller::GetDesiredStates(Done<std::map<std::string, v1::DeviceState>> done) {
  Post([this, done = std::move(done)]() { done(Status::Ok(), DesiredStates()); });
}

void Controller::PushDesired(bool force) {
  if (!desired_dirty_ && desired_pending_.empty()) return;
  // Building every switch's desired state is O(jobs x routes); under a
  // registration storm it must not take the strand from the registrations.
  // Periodic pushes keep its share of the strand under ~20 %: the next one is
  // due 4 x the last build's duration after it (every tick on small fabrics,
  // every ~0.6 s for a 150 ms build). Explicit reads (GetDeviceState) force it.
  const auto wall = std::chrono::steady_clock::now();
  if (!force && options_.wall_clock_pacing) {
    if (wall < next_desired_push_) return;
    // A registration storm: answering the registrations comes first, and every push
    // deferred takes in more changed switches at once. At most kMaxPushDeferral after
    // the push was due, it runs whatever is queued.
    bool waiting = false;
    {
      std::lock_guard<std::mutex> lock(registrations_mu_);
      waiting = !registrations_.empty();
    }
    if (waiting && wall < next_desired_push_ + kMaxPushDeferral) return;
  }
  struct Pace {
    std::chrono::steady_clock::time_point start, *next;
    ~Pace() {
      const auto end = std::chrono::steady_clock::now();
      *next = end + 4 * (end - start);
    }
  } pace{wall, &next_desired_push_};
  if (desired_dirty_) {
    desired_dirty_ = false;
    // Switches whose placement changed since the last push; when what decorates the
    // states is as it was then, only those are rebuilt and handed over (the
    // reconciler keeps the others' states and content keys).
    const std::set<std::string> changed = placement_.TakeChangedDevices();
    std::string decoration = DecorationKey();
    const bool incremental = desired_pushed_ && decoration == desired_decoration_key_;
    desired_decoration_key_ = std::move(decoration);
    if (!gate_.pass_through()) {
      desired_pushed_ = false;  // the gate takes every switch's state at once
      desired_pending_.clear();
      ReleaseToReconciler(gate_.Update(DesiredStates()));
      return;
    }
    desired_pushed_ = true;
    desired_pending_.insert(changed.begin(), changed.end());
    if (!incremental) {
      for (auto& d : placement_.DesiredDevices()) desired_pending_.insert(std::move(d));
      std::map<std::string, v1::DeviceState> deco;
      adaptive_.Decorate(&deco);
      for (const auto& [d, st] : deco) desired_pending_.insert(d);
    }
  }
  // A few switches at a time (each turn of the strand at most ~20 ms of them when
  // paced), so one push of thousands of routes per switch does not stall the strand
  // for seconds; the rest follow at the next ticks. Each switch's state is whole and
  // built from the placement of its turn.
  const bool bounded = options_.wall_clock_pacing && !force;
  while (!desired_pending_.empty()) {
    std::set<std::string> chunk;
    while (!desired_pending_.empty() && chunk.size() < 8) {
      chunk.insert(chunk.end(), desired_pending_.extract(desired_pending_.begin()).value());
    }
    auto desired = DesiredStatesOf(chunk);
    // What the devices are given is what they run: a later switch to change
    // safety starts from it. Shadow mode gives nothing.
    if (!options_.reconciler.shadow) gate_.RecordGiven(desired);
    reconciler_.SetDesired(std::move(desired));  // no copy kept: the reconciler has it
    if (bounded && std::chrono::steady_clock::now() - wall > std::chrono::milliseconds(20)) break;
  }
  PersistChangeState();
}

std::string Controller::DecorationKey() const {
  // The decorations alone (adaptive results; fabric settings apply to the switches a
  // state is built for, so their version stands for them), and the links that are down.
  std::map<std::string, v1::DeviceState> deco;
  adaptive_.Decorate(&deco);
  std::string key = std::to_string(fabric_settings_version_) + "|";
  for (const auto& id : DownLinks()) key += id + ",";
  key += "|";
  for (const auto& [device, state] : deco) {
    key += device + ":" + loom::southbound::ContentKey(state) + "|";
  }
  return key;
}

std::map<std::string, v1::DeviceState> Controller::DesiredStatesOf(
    const std::set<std::string>& devices) const {
  std::map<std::string, v1::DeviceState> desired;
  for (const auto& d : devices)
    desired.emplace_hint(desired.end(), d, placement_.DesiredStateOf(d));
  adaptive_.Decorate(&desired);
  // Decorate adds the switches it decorates: only the ones asked for are rebuilt.
  for (auto it = desired.begin(); it != desired.end();) {
    it = devices.count(it->first) ? std::next(it) : desired.erase(it);
  }
  AddFabricSettings(&desired);
  loom::te::AddNextHopReach(*topo_, DownLinks(), &desired);
  for (auto& [device, state] : desired) prefix_plan_.FillPrefixes(&state);
  return desired;
}

std::map<std::string, v1::DeviceState> Controller::DesiredStates() const {
  auto desired = placement_.DesiredStates();
  adaptive_.Decorate(&desired);
  AddFabricSettings(&desired);
  loom::te::AddNextHopReach(*topo_, DownLinks(), &desired);
  for (auto& [device, state] : desired) prefix_plan_.FillPrefixes(&state);
  return desired;
}

}  // namespace loom::controller

namespace loom::controller {

// ------------------------------------------------------------ telemetry ----

void Controller::OnLinkSnapshot(std::shared_ptr<const loom::telemetry::LinkSnapshot> snapshot) {
  Post([this, snapshot = std::move(snapshot)]() mutable { ApplySnapshot(std::move(snapshot)); });
}

void Controller::ApplySnapshot(std::shared_ptr<const loom::telemetry::LinkSnapshot> snapshot) {
  snapshot_ = std::move(snapshot);
  RefineDemand();
  const auto& links = topo_->topology().links();
  Mutation m;
  std::vector<std::pair<std::string, v1::LinkOperState>> changes;
  for (int i = 0; i < links.size(); ++i) {
    size_t a = static_cast<size_t>(2 * i), b = a + 1;
    if (b >= snapshot_->links.size()) break;
    const auto& up = snapshot_->links[a];
    const auto& down = snapshot_->links[b];
    // Act only on fresh data: a stale direction says nothing (an oper-status
    // notification that just arrived is fresh even before the counters are).
    bool any_fresh = false, any_down = false, any_up = false;
    for (const auto* d : {&up, &down}) {
      if (!d->oper_fresh) continue;
      any_fresh = true;
      any_down |= d->oper == loom::telemetry::OperStatus::kDown;
      any_up |= d->oper == loom::telemetry::OperStatus::kUp;
    }
    if (!any_fresh) continue;
    v1::LinkOperState state = any_down ? v1::LINK_OPER_STATE_DOWN
                              : any_up ? v1::LINK_OPER_STATE_UP
                                       : v1::LINK_OPER_STATE_UNKNOWN;
    auto it = oper_.find(links[i].id());
    v1::LinkOperState before = it == oper_.end() ? v1::LINK_OPER_STATE_UNKNOWN : it->second;
    if (state == before) continue;
    changes.emplace_back(links[i].id(), state);
  }
  UpdateLinkGauges();
  // Only transitions to or from DOWN matter to placement; first sightings
  // (UNKNOWN -> UP) are recorded quietly.
  bool placement_relevant = false;
  auto saved_oper = oper_;
  std::vector<std::pair<std::string, bool>> transitions;  // (link, up) for dampening
  for (const auto& [id, state] : changes) {
    v1::LinkOperState before = oper_.count(id) ? oper_[id] : v1::LINK_OPER_STATE_UNKNOWN;
    oper_[id] = state;
    if (state == v1::LINK_OPER_STATE_DOWN || before == v1::LINK_OPER_STATE_DOWN) {
      placement_relevant = true;
      transitions.emplace_back(id, state != v1::LINK_OPER_STATE_DOWN);
      v1::Event ev = NewEvent(v1::EVENT_TYPE_LINK_OPER_CHANGED, id);
      ev.set_severity(state == v1::LINK_OPER_STATE_DOWN ? v1::SEVERITY_CRITICAL
                                                        : v1::SEVERITY_INFO);
      ev.set_cause(std::string("telemetry: oper-status ") +
                   (state == v1::LINK_OPER_STATE_DOWN ? "DOWN" : "UP"));
      ev.set_action(state == v1::LINK_OPER_STATE_DOWN ? "took the link out of placement"
                                                      : "returned the link to placement");
      m.events.push_back(ev);
    }
  }
  // Remediation and dampening decide which further links leave placement.
  std::vector<size_t> placement_events;
  for (size_t i = 0; i < m.events.size(); ++i) placement_events.push_back(i);
  auto assess = adaptive_.Assess(*snapshot_, clock_.Now(), transitions);
  // A link that came up but remediation keeps out (flap dampening
  // suppresses it) did not return to placement: say so.
  for (auto& ev : m.events) {
    if (ev.type() != v1::EVENT_TYPE_LINK_OPER_CHANGED) continue;
    if (oper_[ev.subject()] == v1::LINK_OPER_STATE_DOWN) continue;
    if (!adaptive_.removed_links().count(ev.subject())) continue;
    ev.set_action("kept the link out of placement: " + adaptive_.RemovalReason(ev.subject()));
  }
  for (const auto& a : assess.events) {
    if (a.placement_result) placement_events.push_back(m.events.size());
    m.events.push_back(AdaptiveToEvent(a));
  }
  placement_relevant |= assess.removed_changed;
  {
    const size_t first = m.events.size();
    if (CheckTelemetrySources(&m.events)) {
      placement_relevant = true;
      for (size_t i = first; i < m.events.size(); ++i) {
        if (m.events[i].type() == v1::EVENT_TYPE_LLDP_CHECK_CHANGED) placement_events.push_back(i);
      }
    }
  }
  if (assess.hotspot_onset && options_.reoptimize_interval_ns > 0) reoptimize_pending_ = true;
  loom::te::Placement saved = placement_;
  std::map<std::string, v1::Job> updated;
  if (placement_relevant) {
    placement_.SetDownLinks(DownLinks());
    desired_dirty_ = true;  // Next-hop reach follows the live links.
    std::string cause;
    for (const auto& [id, state] : changes) {
      if (state != v1::LINK_OPER_STATE_DOWN && saved_oper[id] != v1::LINK_OPER_STATE_DOWN) continue;
      cause += (cause.empty() ? "" : ", ") + std::string("link ") + id +
               (state == v1::LINK_OPER_STATE_DOWN ? " down" : " up");
    }
    if (assess.removed_changed) cause += std::string(cause.empty() ? "" : ", ") + "remediation";
    if (!lldp_excluded_.empty()) cause += std::string(cause.empty() ? "" : ", ") + "LLDP check";
    int moved = RecomputeInto(m, cause + " (telemetry)", &updated);
    for (size_t i : placement_events) {
      m.events[i].set_result(std::to_string(moved) + " job(s) re-placed");
    }
  }
  // Balancing with the fabric as placement now sees it.
  std::map<std::string, std::vector<LeafJob>> leaf_jobs;
  for (const auto& [id, job] : jobs_) {
    auto decision = placement_.policy().Evaluate(job);
    std::map<std::string, LeafJob> mine;
    for (const auto& ep : job.endpoints()) {
      const std::string nic = topo_->EndpointNic(ep);
      const std::string leaf = topo_->NicLeaf(nic);
      if (leaf.empty()) continue;
      LeafJob& lj = mine[leaf];
      lj.job_id = id;
      if (std::find(lj.nics.begin(), lj.nics.end(), nic) == lj.nics.end()) lj.nics.push_back(nic);
      lj.spray_eligible = decision.action.spray_eligible();
      lj.traffic_class = job.traffic_class();
      if (job.qp_ranges_size() > 0) {
        lj.qp_first = job.qp_ranges(0).first();
        lj.qp_last = job.qp_ranges(0).last();
      }
    }
    for (auto& [leaf, lj] : mine) leaf_jobs[leaf].push_back(std::move(lj));
  }
  auto balance = adaptive_.Balance(*snapshot_, clock_.Now(), placement_.graph(), leaf_jobs);
  for (const auto& a : balance.events) m.events.push_back(AdaptiveToEvent(a));
  if (assess.desired_changed || balance.desired_changed) desired_dirty_ = true;
  auto saved_blast = blast_active_;
  CheckBlastRadius(&m.events, &m, !changes.empty());
  if (m.events.empty()) return;
  if (Status s = CommitAndPublish(m); !s.ok()) {
    blast_active_ = std::move(saved_blast);
    blast_checked_ = false;  // evaluated again at the next snapshot
    if (placement_relevant) {
      placement_ = std::move(saved);
      oper_ = std::move(saved_oper);
    }
    return;
  }
  for (auto& [id, job] : updated) jobs_[id] = job;
}

v1::Event Controller::AdaptiveToEvent(const AdaptiveEvent& a) {
  v1::Event ev = NewEvent(a.type, a.subject);
  ev.set_severity(a.severity);
  ev.set_cause(a.cause);
  ev.set_action(a.action);
  ev.set_result(a.result);
  return ev;
}

void Controller::UpdateLinkGauges() {
  if (!snapshot_) return;
  const auto& links = topo_->topology().links();
  std::map<std::string, int> by_state{{"up", 0}, {"down", 0}, {"unknown", 0}, {"stale", 0}};
  double max_util = 0;
  size_t series = 0;
  for (int i = 0; i < links.size(); ++i) {
    const auto* a = topo_->FindDevice(links[i].a().device());
    const auto* b = topo_->FindDevice(links[i].b().device());
    bool fabric = a && b && a->role() != v1::DEVICE_ROLE_NIC && b->role() != v1::DEVICE_ROLE_NIC;
    auto it = oper_.find(links[i].id());
    v1::LinkOperState st = it == oper_.end() ? v1::LINK_OPER_STATE_UNKNOWN : it->second;
    bool stale = true;
    for (int dir = 0; dir < 2; ++dir) {
      size_t k = static_cast<size_t>(2 * i + dir);
      if (k >= snapshot_->links.size()) continue;
      const auto& d = snapshot_->links[k];
      stale &= d.stale;
      if (!fabric) continue;
      if (!d.stale) max_util = std::max(max_util, d.utilization);
      if (series < max_link_series_) {
        link_util_family_.Add({{"link", links[i].id()}, {"direction", dir == 0 ? "up" : "down"}})
            .Set(d.utilization);
        ++series;
      }
    }
    by_state[stale                            ? "stale"
             : st == v1::LINK_OPER_STATE_UP   ? "up"
             : st == v1::LINK_OPER_STATE_DOWN ? "down"
                                              : "unknown"]++;
  }
  for (const auto& [state, n] : by_state) {
    links_by_state_family_.Add({{"state", state}}).Set(n);
  }
  fabric_max_util_gauge_.Set(max_util);
  const auto& stats = snapshot_->stats;
  const std::pair<const char*, uint64_t> kinds[] = {{"notifications", stats.notifications},
                                                    {"updates", stats.updates},
                                                    {"unknown_target", stats.unknown_target},
                                                    {"unknown_path", stats.unknown_path},
                                                    {"bad_value", stats.bad_value},
                                                    {"missing_timestamp", stats.missing_timestamp},
                                                    {"future_timestamp", stats.future_timestamp},
                                                    {"foreign_target", stats.foreign_target},
                                                    {"counter_resets", stats.resets}};
  for (const auto& [kind, value] : kinds) {
    auto& c = telemetry_stats_family_.Add({{"kind", kind}});
    uint64_t& seen = telemetry_stats_seen_[kind];
    if (value > seen) c.Increment(static_cast<double>(value - seen));
    seen = std::max(seen, value);
  }
  ExportSreMetrics();
}

}  // namespace loom::controller

namespace loom::controller {

void Controller::MeasureTraffic() {
  std::vector<loom::te::NicDemand> rates;
  for (const auto& r : snapshot_->nic_peers) {
    if (!r.stale && r.bps > 0) rates.push_back({r.nic, r.peer, r.bps});
  }
  if (rates.empty()) return;
  // A snapshot taken between counter samples (an oper-status change wakes the
  // snapshot thread) repeats the last rates: not a new sample.
  double signature = static_cast<double>(rates.size());
  for (const auto& r : rates) signature = signature * 1.000001 + r.rate_bps;
  if (signature == last_traffic_signature_) return;
  last_traffic_signature_ = signature;
  std::map<std::string, std::vector<std::string>> job_nics;
  for (const auto& [id, job] : jobs_) {
    auto& nics = job_nics[id];
    for (const auto& ep : job.endpoints()) nics.push_back(topo_->EndpointNic(ep));
    std::sort(nics.begin(), nics.end());
    nics.erase(std::unique(nics.begin(), nics.end()), nics.end());
  }
  traffic_meter_.Observe(rates, job_nics);
  std::vector<std::string> confirmed;
  for (auto& v : traffic_meter_.Judge(
           [this](const std::string& id) { return placement_.DemandInUse(id); }, &confirmed)) {
    LOG_INFO("measured traffic differs from the demand model")
        .With("job", v.job_id)
        .With("distance", std::to_string(v.distance));
    placement_.SetMeasuredDemand(v.job_id, std::move(v.measured));
    traffic_pending_[v.job_id] = v.why;
  }
  for (const auto& id : confirmed) {
    if (placement_.SetDemandConfirmed(id)) {
      traffic_pending_[id] = "measured traffic of job " + id +
                             " goes where its demand model says: pinned where pinning fits "
                             "instead of sprayed";
    }
  }
}

void Controller::ReplaceOnMeasuredTraffic() {
  if (traffic_pending_.empty()) return;
  std::map<std::string, std::string> pending;
  pending.swap(traffic_pending_);
  Mutation m;
  std::map<std::string, v1::Job> updated;
  loom::te::Placement saved = placement_;
  const int moved =
      RecomputeInto(m, "measured traffic differs from the job's demand model", &updated);
  // Each corrected job's own event says why; a moved job's update carries the reason.
  for (auto& ev : m.events) {
    if (auto it = pending.find(ev.subject()); it != pending.end()) ev.set_cause(it->second);
  }
  for (const auto& [id, why] : pending) {
    if (!jobs_.count(id)) continue;
    v1::Event ev = NewEvent(v1::EVENT_TYPE_PATHS_RECOMPUTED, id);
    ev.set_cause(why);
    ev.set_action("placement uses the measured traffic matrix of job " + id +
                  " instead of its model; full recompute");
    ev.set_result(updated.count(id)
                      ? "job re-placed; " + std::to_string(moved) + " job(s) moved in all"
                      : "the job's paths already fit the measurement; " + std::to_string(moved) +
                            " job(s) moved in all");
    m.events.push_back(ev);
  }
  if (CommitAndPublish(m).ok()) {
    for (auto& [id, job] : updated) jobs_[id] = job;
    // Spray rules and routes follow the new demand even when no job moved.
    desired_dirty_ = true;
  } else {
    placement_ = std::move(saved);
  }
}

void Controller::RefineDemand() {
  if (options_.reoptimize_interval_ns <= 0 || !snapshot_) return;
  MeasureTraffic();
  // Measured send rate per NIC: the NIC->leaf direction of its link.
  // A NIC that sends less than the model while the fabric pushes back (CNPs, PFC
  // pauses) is held back by congestion, not asking for less: planning for its
  // measured rate would pack more onto the links that hold it back. Only NICs whose
  // RoCE counters say they are unhindered count.
  std::map<std::string, double> nic_tx;
  std::map<std::string, int> nic_jobs;
  for (const auto& [id, job] : jobs_) {
    for (const auto& ep : job.endpoints()) nic_jobs[topo_->EndpointNic(ep)]++;
  }
  for (size_t i = 0; i < snapshot_->links.size(); ++i) {
    const auto& d = snapshot_->links[i];
    if (d.stale || !d.has_rate || !d.tx_device) continue;
    const auto* dev = topo_->FindDevice(*d.tx_device);
    if (!dev || dev->role() != v1::DEVICE_ROLE_NIC) continue;
    if (!d.has_nic_counters || d.cnp_pps >= 1 || d.pfc_pause_ratio >= 0.01) continue;
    nic_tx[dev->id()] += d.tx_bps;
  }
  if (nic_tx.empty()) return;
  for (const auto& [id, job] : jobs_) {
    auto modelled = placement_.ModelledNicRates(id);
    double model = 0, measured = 0;
    bool exclusive = true, seen = true;
    for (const auto& [nic, rate] : modelled) {
      model += rate;
      exclusive &= nic_jobs[nic] == 1;
      auto it = nic_tx.find(nic);
      if (it == nic_tx.end()) {
        seen = false;
        break;
      }
      measured += it->second;
    }
    // Only jobs whose NICs are theirs alone, seen by fresh telemetry, and
    // active (not in a compute gap) say something about their demand.
    if (!exclusive || !seen || model <= 0 || measured < 0.05 * model) continue;
    double ratio = std::min(1.0, measured / model);
    auto [it, inserted] = measured_ratio_.emplace(id, ratio);
    if (!inserted) it->second = 0.8 * it->second + 0.2 * ratio;
    if (placement_.SetDemandScale(id, it->second)) reoptimize_pending_ = true;
  }
}

void Controller::Tick() {
  Post([this]() {
    ReplaceOnMeasuredTraffic();
    if (reoptimize_pending_ &&
        clock_.Now() - last_reoptimize_ns_ >= options_.reoptimize_interval_ns) {
      reoptimize_pending_ = false;
      last_reoptimize_ns_ = clock_.Now();
      Mutation m;
      std::map<std::string, v1::Job> updated;
      loom::te::Placement saved = placement_;
      int moved = RecomputeInto(m, "measured demand differs from the model", &updated);
      if (moved > 0) {
        v1::Event ev = NewEvent(v1::EVENT_TYPE_PATHS_RECOMPUTED, "fabric");
        ev.set_cause("measured demand differs from the collective model");
        ev.set_action("re-optimized all jobs with the measured demand");
        ev.set_result(std::to_string(moved) + " job(s) moved");
        m.events.push_back(ev);
        if (CommitAndPublish(m).ok()) {
          for (auto& [id, job] : updated) jobs_[id] = job;
        } else {
          placement_ = std::move(saved);
        }
      }
    }
    RunDeferredOverloadRecompute();
    PushDesired();
    ReleaseToReconciler(gate_.Tick());
    reconciler_.Tick();
    ExportSreMetrics();
    if (vacuum_due_) VacuumSome();
  });
}

void Controller::VacuumSome() {
  if (options_.vacuum_pages_per_tick <= 0) {
    vacuum_due_ = false;
    return;
  }
  int64_t left = 0;
  if (Status s = store_.Vacuum(options_.vacuum_pages_per_tick, &left); !s.ok()) {
    LOG_WARN("incremental vacuum failed; retrying at the next tick").With("error", s.message());
    return;
  }
  vacuum_due_ = left > 0;
}

bool Controller::OverloadRecomputeDue(TimeNs now) const {
  // The interval doubles with each re-placement in a row that gained too little
  // (up to 32 x): a fabric that cannot be helped is not searched every second.
  if (last_overload_recompute_ns_ >= 0 &&
      now - last_overload_recompute_ns_ <
          options_.overload_recompute_interval_ns * (TimeNs{1} << overload_fruitless_)) {
    return false;
  }
  return !options_.wall_clock_pacing ||
         std::chrono::steady_clock::now() >= next_overload_recompute_;
}

void Controller::PaceOverloadRecompute(std::chrono::steady_clock::time_point start) {
  // A full re-placement of many jobs can take seconds: keep its share of the
  // strand under ~20 % so registrations keep flowing.
  const auto end = std::chrono::steady_clock::now();
  next_overload_recompute_ = end + 4 * (end - start);
}

void Controller::RunDeferredOverloadRecompute() {
  if (overload_deferred_ == 0 || !OverloadRecomputeDue(clock_.Now())) return;
  const int batch = overload_deferred_;
  overload_deferred_ = 0;
  if (placement_.max_utilization() <= 1.0 + 1e-9) return;  // resolved meanwhile
  last_overload_recompute_ns_ = clock_.Now();
  const auto wall = std::chrono::steady_clock::now();
  struct Paced {
    Controller* c;
    std::chrono::steady_clock::time_point start;
    ~Paced() { c->PaceOverloadRecompute(start); }
  } paced{this, wall};
  Mutation m;
  std::map<std::string, v1::Job> updated;
  loom::te::Placement::Undo saved;
  const double before = placement_.max_utilization();
  int moved = RebalanceInto(
      m,
      "batched re-placement: " + std::to_string(batch) +
          " registration(s) or update(s) placed incrementally on an overloaded fabric left "
          "links predicted at " +
          std::to_string(std::lround(before * 100)) + "% of capacity",
      &updated, "", &saved);
  if (moved == 0) return;
  if (CommitAndPublish(m).ok()) {
    for (auto& [id, job] : updated) jobs_[id] = job;
    UpdateGauges();
    LOG_INFO("batched re-placement on an overloaded fabric")
        .With("registrations", static_cast<int64_t>(batch))
        .With("moved", static_cast<int64_t>(moved))
        .With("before", before)
        .With("after", placement_.max_utilization());
  } else {
    placement_.RollBack(std::move(saved));
  }
}

void Controller::WithReconciler(std::function<void(const Reconciler&)> f) {
  Post([this, f = std::move(f)]() { f(reconciler_); });
}

}  // namespace loom::controller

namespace loom::controller {

void Controller::GetDeviceState(v1::GetDeviceStateRequest req,
                                Done<v1::GetDeviceStateResponse> done) {
  Post([this, req = std::move(req), done = std::move(done)]() {
    if (req.device().empty()) return done(InvalidArgument("device: must not be empty"), {});
    const auto* d = topo_->FindDevice(req.device());
    if (!d || (d->role() != v1::DEVICE_ROLE_LEAF && d->role() != v1::DEVICE_ROLE_SPINE &&
               d->role() != v1::DEVICE_ROLE_SUPER_SPINE)) {
      return done(NotFound("device: \"" + req.device() + "\" is not a switch of the topology"), {});
    }
    // Report against what the reconciler is driving towards (the sync status
    // would otherwise describe an older desire than the one shown).
    PushDesired(/*force=*/true);
    v1::GetDeviceStateResponse resp;
    // The reconciler already holds every switch's desired state: no need to
    // recompute them all on the strand for one device.
    if (const auto* desired = reconciler_.Desired(req.device())) {
      *resp.mutable_desired() = *desired;
    } else {
      resp.mutable_desired()->set_device(req.device());
    }
    if (const auto* applied = reconciler_.Applied(req.device())) *resp.mutable_applied() = *applied;
    for (const auto& s : reconciler_.Status()) {
      if (s.device != req.device()) continue;
      *resp.mutable_sync() = SyncStatusProto(s);
      resp.mutable_desired()->set_generation(s.desired_generation);
    }
    done(Status::Ok(), std::move(resp));
  });
}

v1::DeviceSyncStatus SyncStatusProto(const DeviceSync& d) {
  v1::DeviceSyncStatus s;
  s.set_driver(d.driver);
  s.set_desired_generation(d.desired_generation);
  s.set_applied_generation(d.applied_generation);
  s.set_in_sync(d.in_sync);
  s.set_consecutive_failures(d.consecutive_failures);
  s.set_last_error(d.last_error);
  s.set_applies(d.applies);
  s.set_drift_repairs(d.drift_repairs);
  s.set_shadow(d.shadow);
  for (const auto& part : d.would_change) s.add_would_change(part);
  return s;
}

}  // namespace loom::controller
