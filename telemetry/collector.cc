#include "telemetry/collector.h"

#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "common/log.h"
#include "common/text.h"
#include "gnmi/gnmi.grpc.pb.h"
#include "telemetry/path.h"
#include "telemetry/profile.h"

namespace loom::telemetry {

std::vector<SubscriptionSpec> SwitchSubscriptions(TimeNs interval) {
  const std::string pfc = "loom:/pfc/interfaces/interface[name=*]/priorities/priority[id=*]";
  const std::string wd = pfc + "/watchdog/state/";
  return {
      {"/interfaces/interface[name=*]/state/counters", gnmi::SAMPLE, interval},
      {"/interfaces/interface[name=*]/state/oper-status", gnmi::ON_CHANGE, 0},
      {"loom:/interfaces/interface[name=*]/ethernet/state/operational-speed-bps", gnmi::ON_CHANGE,
       0},
      {"/qos/interfaces/interface[interface-id=*]/output/queues/queue[name=*]/state", gnmi::SAMPLE,
       interval},
      {"loom:/qos/interfaces/interface[interface-id=*]/output/queues/queue[name=*]/state/"
       "current-queue-len",
       gnmi::SAMPLE, interval},
      {pfc + "/state", gnmi::SAMPLE, interval},
      {wd + "status", gnmi::ON_CHANGE, 0},
      {wd + "deadlock-detected", gnmi::SAMPLE, interval},
      {wd + "deadlock-restored", gnmi::SAMPLE, interval},
      {"loom:/alb/groups/group[name=*]/buckets/bucket[id=*]/state", gnmi::SAMPLE, interval},
  };
}

std::vector<SubscriptionSpec> NicSubscriptions(TimeNs interval) {
  return {
      {"/interfaces/interface[name=*]/state/counters", gnmi::SAMPLE, interval},
      {"/interfaces/interface[name=*]/state/oper-status", gnmi::ON_CHANGE, 0},
      {"loom:/pfc/interfaces/interface[name=*]/priorities/priority[id=*]/state", gnmi::SAMPLE,
       interval},
      {"loom:/nic/interfaces/interface[name=*]/roce/state", gnmi::SAMPLE, interval},
      {"loom:/nic/interfaces/interface[name=*]/roce/peers/peer[nic=*]/state", gnmi::SAMPLE,
       interval},
  };
}

TimeNs BackoffDelay(const BackoffPolicy& policy, int failures, double u) {
  double delay = static_cast<double>(policy.initial_ns);
  const double cap = static_cast<double>(policy.max_ns);
  for (int i = 1; i < failures && delay < cap; ++i) delay *= policy.multiplier;
  delay = std::min(delay, cap);
  delay *= 1.0 + policy.jitter * (2.0 * u - 1.0);
  return std::max<TimeNs>(0, static_cast<TimeNs>(delay));
}

const char* SignalStateName(SignalState s) {
  switch (s) {
    case SignalState::kPending:
      return "pending";
    case SignalState::kLive:
      return "live";
    case SignalState::kStale:
      return "stale";
    case SignalState::kUnavailable:
      return "unavailable";
  }
  return "?";
}

bool SameTarget(const TargetConfig& a, const TargetConfig& b) {
  auto subs_equal = [](const std::vector<SubscriptionSpec>& x,
                       const std::vector<SubscriptionSpec>& y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i].path != y[i].path || x[i].mode != y[i].mode ||
          x[i].sample_interval_ns != y[i].sample_interval_ns) {
        return false;
      }
    }
    return true;
  };
  const bool profiles_equal =
      (a.profile == nullptr) == (b.profile == nullptr) &&
      (a.profile == nullptr ||
       google::protobuf::util::MessageDifferencer::Equals(*a.profile, *b.profile));
  return a.name == b.name && a.address == b.address &&
         subs_equal(a.subscriptions, b.subscriptions) && profiles_equal &&
         a.encodings == b.encodings && a.request_target == b.request_target &&
         a.sample_interval_ns == b.sample_interval_ns && a.aliases == b.aliases &&
         a.username == b.username && a.password == b.password && a.signals == b.signals &&
         a.tls == b.tls;
}

namespace {

// A connection failure to a TLS target says so, with the settings in use
// (the handshake error gRPC reports does not name the CA or server name).
std::string WithTlsContext(const TargetConfig& c, int code, const std::string& error) {
  if (!c.tls.enabled || code != static_cast<int>(grpc::StatusCode::UNAVAILABLE)) return error;
  return error + " [connection over " + c.tls.Describe() + "]";
}

// Status codes with which a target refuses a request (as opposed to failing
// to serve it): the request will fail the same way if repeated.
bool IsRejection(int code) {
  switch (static_cast<grpc::StatusCode>(code)) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::UNIMPLEMENTED:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
      return true;
    default:
      return false;
  }
}

const char* CodeName(int code) { return StatusCodeName(code); }

bool ParseEncoding(const std::string& name, gnmi::Encoding* out) {
  if (name == "PROTO") {
    *out = gnmi::PROTO;
  } else if (name == "JSON_IETF") {
    *out = gnmi::JSON_IETF;
  } else if (name == "JSON") {
    *out = gnmi::JSON;
  } else {
    return false;
  }
  return true;
}

const char* EncodingName(gnmi::Encoding e) {
  switch (e) {
    case gnmi::PROTO:
      return "PROTO";
    case gnmi::JSON_IETF:
      return "JSON_IETF";
    case gnmi::JSON:
      return "JSON";
    default:
      return "?";
  }
}

}  // namespace

// One subscription path of a profile-mode target (shared by the signals that
// name the same origin, target and path), or a key map.
struct Collector::Entry {
  std::string origin;
  std::string target;  // "" = the device's request target.
  std::string path;
  gnmi::SubscriptionMode mode = gnmi::SAMPLE;
  TimeNs interval_ns = 0;
  TimeNs heartbeat_ns = 0;   // ON_CHANGE: heartbeat requested (0 = none).
  int key_map = -1;          // Index into profile.key_maps(), or -1.
  std::vector<int> signals;  // Indexes into profile.signals().
  bool fell_back = false;    // ON_CHANGE refused: now SAMPLE.
  bool rejected = false;
  std::string reason;
  int rejects = 0;
  TimeNs retry_at = 0;
};

// One Subscribe stream: a group of entries (profile mode) or the plain
// subscription list.
struct Collector::Stream {
  std::vector<int> entries;
  gnmi::SubscribeRequest request;
  Call* call = nullptr;
  bool cancelled = false;  // We cancelled it: its end is not a failure.
  bool dead = false;       // Split or rebuilt: never started again.
  bool connected = false;
  bool synced = false;
  bool got_data = false;
  TimeNs synced_at = -1;
  TimeNs next_attempt = 0;
  // Liveness: the window (0 = not watched), the Clock time of the call's start or
  // its last message, whether an update came after sync (arms the watch), and
  // cuts for silence since the group last delivered.
  TimeNs liveness_ns = 0;
  TimeNs last_message = -1;
  bool armed = false;
  bool silent_cut = false;     // We cancelled it for silence: a failure of this group.
  bool fresh_channel = false;  // Redial on a new connection.
  int silent_cuts = 0;
};

struct Collector::Target {
  TargetConfig config;
  TargetHealth health;
  bool profile_mode = false;
  enum class Phase { kCaps, kCapsInFlight, kStreams } phase = Phase::kStreams;
  gnmi::Encoding encoding = gnmi::PROTO;
  std::vector<Entry> entries;
  std::vector<std::unique_ptr<Stream>> streams;
  // The channel of the current / last attempt. Held here, never only by a
  // call: the last reference to a channel must not be dropped inside a gRPC
  // callback reaction (gRPC's callback CQ would then shut itself down from
  // its own thread, grpc/grpc#32584). It is replaced on the supervisor
  // thread; calls (whose stubs hold references) are deleted there or in
  // Stop(), so the last reference never goes inside a reaction.
  std::shared_ptr<grpc::Channel> channel;
  // Updates arrived since the last target failure: the next failure starts
  // the backoff over; without them the backoff keeps growing (a target
  // that accepts and drops every stream is not retried every 100 ms).
  bool delivered_since_failure = false;
  CapsCall* caps = nullptr;
  int active_calls = 0;
  bool removed = false;
  std::unique_ptr<ProfileTranslator> translator;
  std::mutex tr_mu;  // Guards translator and aliases (gRPC threads).
  std::map<std::string, gnmi::Path> aliases;
  std::map<std::string, std::pair<bool, TimeNs>> told;  // signal -> last availability told
  // Channel credentials, made once (a TLS file watcher re-reads the
  // certificates by itself); every channel of the target shares them.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  bool told_connected = false;
  TimeNs window_start = 0;  // Rate limit window (Clock time).
  uint64_t window_updates = 0;
};

// One Subscribe stream. Created by the supervisor, deleted off the gRPC
// threads after OnDone.
class Collector::Call final
    : public grpc::ClientBidiReactor<gnmi::SubscribeRequest, gnmi::SubscribeResponse> {
 public:
  Call(Collector* collector, Target* target, Stream* stream, std::shared_ptr<grpc::Channel> channel)
      : collector_(collector),
        target_(target),
        stream_(stream),
        stub_(gnmi::gNMI::NewStub(std::move(channel))) {
    if (!target->config.username.empty()) {
      ctx_.AddMetadata("username", target->config.username);
      ctx_.AddMetadata("password", target->config.password);
    }
  }

  void Start() {
    stub_->async()->Subscribe(&ctx_, this);
    StartWrite(&stream_->request);
    StartRead(&response_);
    StartCall();
  }
  void Cancel() { ctx_.TryCancel(); }

  void OnReadInitialMetadataDone(bool ok) override {
    if (ok) collector_->OnConnected(*target_, *stream_);
  }
  void OnWriteDone(bool /*ok*/) override {}
  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows.
    collector_->OnResponse(*target_, *stream_, response_);
    response_.Clear();
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override {
    std::string error = "stream ended by target";
    if (!status.ok()) {
      error = std::string(CodeName(status.error_code())) + ": " + status.error_message();
    }
    collector_->OnCallDone(*target_, *stream_, static_cast<int>(status.error_code()), error, this);
  }

 private:
  Collector* const collector_;
  Target* const target_;
  Stream* const stream_;
  std::unique_ptr<gnmi::gNMI::Stub> stub_;
  grpc::ClientContext ctx_;
  gnmi::SubscribeResponse response_;
};

// The Capabilities call that opens a profile-mode target.
class Collector::CapsCall {
 public:
  CapsCall(Collector* collector, Target* target, std::shared_ptr<grpc::Channel> channel,
           TimeNs timeout_ns)
      : collector_(collector), target_(target), stub_(gnmi::gNMI::NewStub(std::move(channel))) {
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::nanoseconds(timeout_ns));
    if (!target->config.username.empty()) {
      ctx_.AddMetadata("username", target->config.username);
      ctx_.AddMetadata("password", target->config.password);
    }
  }
  void Start() {
    stub_->async()->Capabilities(&ctx_, &request_, &response_, [this](grpc::Status s) {
      std::vector<int> encodings;
      for (int e : response_.supported_encodings()) encodings.push_back(e);
      std::string error;
      if (!s.ok()) error = std::string(CodeName(s.error_code())) + ": " + s.error_message();
      collector_->OnCaps(*target_, static_cast<int>(s.error_code()), error, std::move(encodings),
                         this);
    });
  }
  void Cancel() { ctx_.TryCancel(); }

 private:
  Collector* const collector_;
  Target* const target_;
  std::unique_ptr<gnmi::gNMI::Stub> stub_;
  grpc::ClientContext ctx_;
  gnmi::CapabilityRequest request_;
  gnmi::CapabilityResponse response_;
};

Collector::Collector(CollectorOptions options, TelemetrySink* sink, const Clock* clock)
    : options_(std::move(options)), sink_(sink), clock_(clock) {
  rng_.seed(options_.seed != 0 ? options_.seed : std::random_device()());
}

Collector::~Collector() { Stop(); }

Status Collector::Validate(const std::vector<TargetConfig>& targets) const {
  std::set<std::string> names;
  for (const TargetConfig& cfg : targets) {
    if (cfg.name.empty()) return InvalidArgument("collector target with empty name");
    if (cfg.address.empty()) return InvalidArgument("target " + cfg.name + ": empty address");
    if (!names.insert(cfg.name).second) {
      return InvalidArgument("target " + cfg.name + ": duplicate name");
    }
    if (cfg.profile != nullptr) {
      if (std::string e = ValidateProfile(*cfg.profile); !e.empty()) {
        return InvalidArgument("target " + cfg.name + ": profile " + cfg.profile->name() + ": " +
                               e);
      }
      for (const auto& e : cfg.encodings) {
        gnmi::Encoding enc;
        if (!ParseEncoding(e, &enc)) {
          return InvalidArgument("target " + cfg.name + ": unknown encoding '" + e + "'");
        }
      }
      continue;
    }
    if (cfg.subscriptions.empty()) {
      return InvalidArgument("target " + cfg.name + ": no subscriptions");
    }
    for (const SubscriptionSpec& spec : cfg.subscriptions) {
      gnmi::Path p;
      if (Status s = ParsePath(spec.path, &p); !s.ok()) {
        return InvalidArgument("target " + cfg.name + ": " + s.message());
      }
    }
  }
  return Status::Ok();
}

std::unique_ptr<Collector::Target> Collector::MakeTarget(const TargetConfig& cfg, TimeNs now) {
  auto t = std::make_unique<Target>();
  t->config = cfg;
  t->health.name = cfg.name;
  t->health.address = cfg.address;
  t->health.next_attempt_ns = now;
  t->credentials = loom::TlsChannelCredentials(cfg.tls, nullptr);
  if (cfg.profile == nullptr) {
    auto s = std::make_unique<Stream>();
    s->next_attempt = now;
    gnmi::SubscriptionList* list = s->request.mutable_subscribe();
    list->mutable_prefix()->set_target(cfg.name);
    list->set_mode(gnmi::SubscriptionList::STREAM);
    list->set_encoding(gnmi::PROTO);
    for (const SubscriptionSpec& spec : cfg.subscriptions) {
      gnmi::Subscription* sub = list->add_subscription();
      (void)ParsePath(spec.path, sub->mutable_path());
      sub->mutable_path()->clear_target();
      sub->set_mode(spec.mode);
      if (spec.mode == gnmi::SAMPLE) {
        sub->set_sample_interval(
            static_cast<uint64_t>(std::max<TimeNs>(0, spec.sample_interval_ns)));
      }
    }
    t->streams.push_back(std::move(s));
    t->phase = Target::Phase::kStreams;
    return t;
  }
  const v1::TelemetryProfile& p = *cfg.profile;
  t->profile_mode = true;
  t->phase = Target::Phase::kCaps;
  t->health.platform = p.name();
  t->translator = std::make_unique<ProfileTranslator>(p, cfg.aliases);
  const TimeNs interval = std::max<TimeNs>(
      cfg.sample_interval_ns, static_cast<TimeNs>(p.min_sample_interval_ms()) * kNsPerMs);
  std::map<std::tuple<std::string, std::string, std::string, int>, int> by_key;
  for (int i = 0; i < p.signals_size(); ++i) {
    const auto& s = p.signals(i);
    const gnmi::SubscriptionMode mode = s.mode() == "ON_CHANGE" ? gnmi::ON_CHANGE : gnmi::SAMPLE;
    auto key = std::make_tuple(s.origin(), s.target(), s.path(), static_cast<int>(mode));
    auto [it, inserted] = by_key.emplace(key, static_cast<int>(t->entries.size()));
    if (inserted) {
      Entry e;
      e.origin = s.origin();
      e.target = s.target();
      e.path = s.path();
      e.mode = mode;
      e.interval_ns = interval;
      if (mode == gnmi::ON_CHANGE) {
        e.heartbeat_ns = static_cast<TimeNs>(p.heartbeat_interval_ms()) * kNsPerMs;
      }
      t->entries.push_back(std::move(e));
    }
    t->entries[it->second].signals.push_back(i);
  }
  for (int i = 0; i < p.key_maps_size(); ++i) {
    Entry e;
    e.origin = p.key_maps(i).origin();
    e.target = p.key_maps(i).target();
    e.path = p.key_maps(i).path();
    e.mode = gnmi::ON_CHANGE;
    e.interval_ns = interval;
    e.heartbeat_ns = static_cast<TimeNs>(p.heartbeat_interval_ms()) * kNsPerMs;
    e.key_map = i;
    t->entries.push_back(std::move(e));
  }
  // Signals in catalogue order, with what the profile says of each.
  for (const std::string& sig : CatalogueSignals()) {
    if (!cfg.signals.empty() &&
        std::find(cfg.signals.begin(), cfg.signals.end(), sig) == cfg.signals.end()) {
      continue;
    }
    SignalHealth h;
    h.signal = sig;
    bool mapped = false;
    for (int i = 0; i < p.signals_size(); ++i) {
      if (p.signals(i).signal() != sig) continue;
      mapped = true;
      h.mark = p.signals(i).mark();
      h.mode = p.signals(i).mode();
      h.effective_interval_ns = std::max<TimeNs>(
          interval, static_cast<TimeNs>(p.signals(i).refresh_interval_ms()) * kNsPerMs);
    }
    if (!mapped) {
      h.state = SignalState::kUnavailable;
      h.reason = "not mapped by profile " + p.name();
      for (const auto& u : p.unserved()) {
        if (u.signal() == sig) h.reason = u.reason();
      }
    }
    t->health.signals.push_back(std::move(h));
  }
  return t;
}

Status Collector::Start() {
  if (Status s = Validate(options_.targets); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return FailedPrecondition("collector already started");
  started_ = true;
  const TimeNs now = clock_->Now();
  for (const auto& cfg : options_.targets) targets_.push_back(MakeTarget(cfg, now));
  supervisor_ = std::thread([this] { SupervisorLoop(); });
  LOG_INFO("telemetry collector started").With("targets", static_cast<uint64_t>(targets_.size()));
  return Status::Ok();
}

Status Collector::UpdateTargets(std::vector<TargetConfig> targets) {
  if (Status s = Validate(targets); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  if (!started_ || stopping_) return FailedPrecondition("collector not running");
  const TimeNs now = clock_->Now();
  std::map<std::string, std::unique_ptr<Target>> old;
  for (auto& t : targets_) old[t->config.name] = std::move(t);
  targets_.clear();
  int kept = 0, added = 0;
  for (const auto& cfg : targets) {
    auto it = old.find(cfg.name);
    if (it != old.end() && SameTarget(it->second->config, cfg)) {
      targets_.push_back(std::move(it->second));
      old.erase(it);
      ++kept;
      continue;
    }
    targets_.push_back(MakeTarget(cfg, now));
    ++added;
  }
  for (auto& [name, t] : old) {
    t->removed = true;
    for (auto& s : t->streams) {
      if (s->call != nullptr) {
        s->cancelled = true;
        s->call->Cancel();
      }
    }
    if (t->caps != nullptr) t->caps->Cancel();
    retired_.push_back(std::move(t));
  }
  options_.targets = std::move(targets);
  cv_.notify_all();
  LOG_INFO("telemetry targets reloaded")
      .With("kept", static_cast<uint64_t>(kept))
      .With("started", static_cast<uint64_t>(added))
      .With("removed", static_cast<uint64_t>(old.size()));
  return Status::Ok();
}

void Collector::Stop() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!started_ || stopping_) {
    // A second Stop() waits for the first to finish its work.
    cv_.wait(lock, [this] { return active_calls_ == 0; });
    return;
  }
  stopping_ = true;
  auto cancel = [](Target& t) {
    for (auto& s : t.streams) {
      if (s->call != nullptr) {
        s->cancelled = true;
        s->call->Cancel();
      }
    }
    if (t.caps != nullptr) t.caps->Cancel();
  };
  for (auto& t : targets_) cancel(*t);
  for (auto& t : retired_) cancel(*t);
  cv_.notify_all();
  lock.unlock();
  if (supervisor_.joinable()) supervisor_.join();
  lock.lock();
  cv_.wait(lock, [this] { return active_calls_ == 0; });
  DeleteFinishedCalls(lock);
}

std::vector<TargetHealth> Collector::Health() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TargetHealth> out;
  out.reserve(targets_.size());
  for (const auto& t : targets_) out.push_back(t->health);
  return out;
}

std::shared_ptr<grpc::Channel> Collector::NewChannel(const Target& t) const {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options_.max_message_bytes);
  // A private subchannel pool: a fresh channel per attempt connects at once
  // instead of inheriting gRPC's own reconnect backoff; ours governs.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (options_.keepalive_time_ns > 0) {
    // PINGs while a stream is open, with no limit on pings without data (a
    // Subscribe client sends no data after its request; gRPC's default of 2
    // would stop the pings on a quiet ON_CHANGE stream).
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(std::min<TimeNs>(
                                                options_.keepalive_time_ns / kNsPerMs, INT32_MAX)));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                static_cast<int>(std::min<TimeNs>(
                    std::max<TimeNs>(options_.keepalive_timeout_ns / kNsPerMs, 1), INT32_MAX)));
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  auto credentials = t.credentials;
  if (credentials == nullptr) credentials = grpc::InsecureChannelCredentials();
  if (t.config.tls.enabled && !t.config.tls.server_name.empty()) {
    args.SetSslTargetNameOverride(t.config.tls.server_name);
  }
  return grpc::CreateCustomChannel(t.config.address, credentials, args);
}

void Collector::SupervisorLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<Call*> to_start;
  std::vector<CapsCall*> caps_to_start;
  std::vector<SignalAvailability> changes;
  auto last_refresh = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  while (!stopping_) {
    const TimeNs now = clock_->Now();
    for (auto& tp : targets_) {
      Target& t = *tp;
      if (t.phase == Target::Phase::kCaps) {
        if (now >= t.health.next_attempt_ns) {
          StartCapsLocked(t, now);
          caps_to_start.push_back(t.caps);
        }
        continue;
      }
      if (t.phase != Target::Phase::kStreams) continue;
      for (auto& sp : t.streams) {
        Stream& s = *sp;
        if (s.dead || s.call != nullptr || now < s.next_attempt) continue;
        StartCallLocked(t, s, now);
        to_start.push_back(s.call);
      }
    }
    // Retired targets go once their calls have drained.
    retired_.erase(std::remove_if(retired_.begin(), retired_.end(),
                                  [](const auto& t) { return t->active_calls == 0; }),
                   retired_.end());
    DeleteFinishedCalls(lock);
    if (!to_start.empty() || !caps_to_start.empty()) {
      // Started outside the lock so that no reaction can run under it. A call
      // cannot finish (and be deleted) before it is started.
      lock.unlock();
      for (CapsCall* c : caps_to_start) c->Start();
      for (Call* c : to_start) c->Start();
      to_start.clear();
      caps_to_start.clear();
      lock.lock();
      continue;
    }
    const auto wall = std::chrono::steady_clock::now();
    if (wall - last_refresh >= std::chrono::milliseconds(100)) {
      last_refresh = wall;
      for (auto& t : targets_) {
        if (t->profile_mode) RefreshSignalsLocked(*t, now, &changes);
        CutSilentStreamsLocked(*t, now);
      }
      if (!changes.empty()) {
        lock.unlock();
        for (const auto& c : changes) sink_->OnSignalAvailability(c);
        changes.clear();
        lock.lock();
        continue;
      }
    }
    cv_.wait_for(lock, std::chrono::milliseconds(20));
  }
}

void Collector::CutSilentStreamsLocked(Target& t, TimeNs now) {
  for (auto& sp : t.streams) {
    Stream& s = *sp;
    if (s.call == nullptr || s.dead || s.cancelled || s.silent_cut || !s.armed ||
        s.liveness_ns <= 0 || now - s.last_message <= s.liveness_ns) {
      continue;
    }
    s.silent_cut = true;
    ++t.health.silent_cuts;
    LOG_WARN("gnmi subscription group silent; cancelling it to redial")
        .With("target", t.config.name)
        .With("silent_ms", static_cast<int64_t>((now - s.last_message) / kNsPerMs))
        .With("window_ms", static_cast<int64_t>(s.liveness_ns / kNsPerMs));
    s.call->Cancel();
  }
}

void Collector::StartCapsLocked(Target& t, TimeNs /*now*/) {
  t.channel = NewChannel(t);
  if (t.health.connect_attempts > 0) ++t.health.reconnects;
  ++t.health.connect_attempts;
  ++active_calls_;
  ++t.active_calls;
  t.phase = Target::Phase::kCapsInFlight;
  t.caps = new CapsCall(this, &t, t.channel, options_.capabilities_timeout_ns);
}

void Collector::OnCaps(Target& t, int code, const std::string& error, std::vector<int> encodings,
                       CapsCall* call) {
  std::lock_guard<std::mutex> lock(mu_);
  finished_caps_.push_back(call);
  --active_calls_;
  --t.active_calls;
  t.caps = nullptr;
  cv_.notify_all();
  if (stopping_ || t.removed) return;
  const TimeNs now = clock_->Now();
  // Preference: the inventory's override, else the profile's list.
  std::vector<std::string> prefs = t.config.encodings;
  if (prefs.empty()) {
    for (const auto& e : t.config.profile->encodings()) prefs.push_back(e);
  }
  if (prefs.empty()) prefs.push_back("PROTO");
  std::string fail;
  if (code == static_cast<int>(grpc::StatusCode::OK)) {
    bool chosen = false;
    for (const auto& name : prefs) {
      gnmi::Encoding e;
      if (!ParseEncoding(name, &e)) continue;
      if (std::find(encodings.begin(), encodings.end(), static_cast<int>(e)) != encodings.end()) {
        t.encoding = e;
        chosen = true;
        break;
      }
    }
    if (!chosen && !encodings.empty()) {
      std::string offered;
      for (int e : encodings) {
        if (!offered.empty()) offered += ", ";
        offered += EncodingName(static_cast<gnmi::Encoding>(e));
      }
      fail = "no common encoding: target offers " + offered;
    } else if (!chosen) {
      ParseEncoding(prefs[0], &t.encoding);  // The target lists none.
    }
  } else if (code == static_cast<int>(grpc::StatusCode::UNIMPLEMENTED)) {
    ParseEncoding(prefs[0], &t.encoding);  // No Capabilities: assume the preferred one.
  } else {
    fail = "Capabilities: " + WithTlsContext(t.config, code, error);
  }
  if (!fail.empty()) {
    ++t.health.stream_errors;
    t.health.last_error = fail;
    ++t.health.consecutive_failures;
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
    t.health.next_attempt_ns =
        now + BackoffDelay(options_.backoff, t.health.consecutive_failures, u);
    t.phase = Target::Phase::kCaps;
    LOG_WARN("gnmi target not usable")
        .With("target", t.config.name)
        .With("error", fail)
        .With("retry_in_ms", static_cast<int64_t>((t.health.next_attempt_ns - now) / kNsPerMs));
    return;
  }
  t.health.encoding = EncodingName(t.encoding);
  BuildStreamsLocked(t, now);
  t.phase = Target::Phase::kStreams;
}

void Collector::BuildStreamsLocked(Target& t, TimeNs now) {
  for (auto& s : t.streams) s->dead = true;
  // One stream per (origin, prefix target), key maps apart; entries whose
  // rejection retry is still ahead wait in streams of their own.
  std::map<std::tuple<bool, std::string, std::string>, Stream*> groups;
  std::vector<std::unique_ptr<Stream>> fresh;
  for (int i = 0; i < static_cast<int>(t.entries.size()); ++i) {
    const Entry& e = t.entries[i];
    if (e.rejected) {
      auto s = std::make_unique<Stream>();
      s->entries.push_back(i);
      s->next_attempt = std::max(now, e.retry_at);
      fresh.push_back(std::move(s));
      continue;
    }
    auto key = std::make_tuple(e.key_map >= 0, e.origin, e.target);
    auto it = groups.find(key);
    if (it == groups.end()) {
      auto s = std::make_unique<Stream>();
      s->next_attempt = now;
      it = groups.emplace(key, s.get()).first;
      fresh.push_back(std::move(s));
    }
    it->second->entries.push_back(i);
  }
  for (auto& s : fresh) t.streams.push_back(std::move(s));
  // Forget dead streams without a call.
  t.streams.erase(std::remove_if(t.streams.begin(), t.streams.end(),
                                 [](const auto& s) { return s->dead && s->call == nullptr; }),
                  t.streams.end());
}

void Collector::BuildRequest(const Target& t, Stream& s) const {
  if (!t.profile_mode) return;  // Built once in MakeTarget.
  s.request.Clear();
  gnmi::SubscriptionList* list = s.request.mutable_subscribe();
  const Entry& first = t.entries[s.entries.front()];
  const std::string device =
      t.config.request_target.empty() ? t.config.name : t.config.request_target;
  list->mutable_prefix()->set_target(first.target.empty() ? device : first.target);
  if (!first.origin.empty()) list->mutable_prefix()->set_origin(first.origin);
  list->set_mode(gnmi::SubscriptionList::STREAM);
  list->set_encoding(t.encoding);
  for (int i : s.entries) {
    const Entry& e = t.entries[i];
    gnmi::Subscription* sub = list->add_subscription();
    (void)ParsePath(e.path, sub->mutable_path());
    sub->mutable_path()->clear_target();
    sub->mutable_path()->clear_origin();
    sub->set_mode(e.mode);
    if (e.mode == gnmi::SAMPLE) sub->set_sample_interval(static_cast<uint64_t>(e.interval_ns));
    if (e.mode == gnmi::ON_CHANGE && e.heartbeat_ns > 0) {
      sub->set_heartbeat_interval(static_cast<uint64_t>(e.heartbeat_ns));
    }
  }
}

TimeNs Collector::LivenessWindow(const Stream& s) const {
  // The longest interval at which the group's subscriptions promise data.
  TimeNs base = 0;
  for (const auto& sub : s.request.subscribe().subscription()) {
    if (sub.mode() == gnmi::SAMPLE) {
      // 0 = the target's fastest: counted as the floor.
      base = std::max<TimeNs>(base, static_cast<TimeNs>(sub.sample_interval()));
      if (sub.sample_interval() == 0) base = std::max<TimeNs>(base, 1);
    } else if (sub.mode() == gnmi::ON_CHANGE && sub.heartbeat_interval() > 0) {
      base = std::max<TimeNs>(base, static_cast<TimeNs>(sub.heartbeat_interval()));
    }
  }
  if (base == 0 || options_.liveness_intervals <= 0) return 0;
  return std::max<TimeNs>(base * options_.liveness_intervals, options_.liveness_floor_ns);
}

void Collector::StartCallLocked(Target& t, Stream& s, TimeNs now) {
  if (!t.profile_mode) {
    t.channel = NewChannel(t);
    if (t.health.connect_attempts > 0) ++t.health.reconnects;
    ++t.health.connect_attempts;
  } else if (s.fresh_channel) {
    // A group cut for silence is redialled on a connection of its own (the
    // old one may be the hung part); the other groups keep theirs.
    t.channel = NewChannel(t);
    ++t.health.reconnects;
  }
  s.fresh_channel = false;
  BuildRequest(t, s);
  s.connected = s.synced = s.got_data = false;
  s.synced_at = -1;
  s.cancelled = false;
  s.silent_cut = false;
  s.armed = false;
  s.last_message = now;
  s.liveness_ns = LivenessWindow(s);
  ++active_calls_;
  ++t.active_calls;
  s.call = new Call(this, &t, &s, t.channel);
  int live = 0;
  for (const auto& st : t.streams) live += !st->dead;
  t.health.streams = live;
}

void Collector::OnConnected(Target& t, Stream& s) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.connected = true;
    if (t.told_connected || t.removed) return;
    t.told_connected = first = true;
    t.health.connected = true;
  }
  if (first) {
    LOG_INFO("gnmi target connected")
        .With("target", t.config.name)
        .With("address", t.config.address);
    sink_->OnTargetConnected(t.config.name);
  }
}

void Collector::OnResponse(Target& t, Stream& s, const gnmi::SubscribeResponse& r) {
  if (r.response_case() == gnmi::SubscribeResponse::kSyncResponse) {
    OnConnected(t, s);
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      s.last_message = clock_->Now();
      if (!s.synced && r.sync_response()) {
        s.synced = true;
        s.got_data = true;
        s.synced_at = clock_->Now();
        for (int i : s.entries) {
          if (i < static_cast<int>(t.entries.size()) && t.entries[i].rejected) {
            t.entries[i].rejected = false;  // A retried path was accepted.
            t.entries[i].reason.clear();
            t.entries[i].retry_at = 0;
          }
        }
      }
      bool all = true;
      for (const auto& st : t.streams) {
        if (st->dead) continue;
        bool waiting_retry =
            st->entries.size() == 1 && !t.entries.empty() && t.entries[st->entries[0]].rejected;
        if (!waiting_retry && !st->synced) all = false;
      }
      if (t.profile_mode == false) all = s.synced;
      first = all && !t.health.synced;
      t.health.synced = t.health.synced || all;
    }
    if (first) {
      LOG_INFO("gnmi target synced").With("target", t.config.name);
      sink_->OnTargetSynced(t.config.name);
    }
    return;
  }
  if (r.response_case() != gnmi::SubscribeResponse::kUpdate) return;
  OnConnected(t, s);
  const gnmi::Notification& raw = r.update();
  const TimeNs arrival = clock_->Now();
  gnmi::Notification translated;
  const gnmi::Notification* n = &raw;
  size_t bad = 0;
  bool key_map = false;
  std::string first_error;
  {
    std::lock_guard<std::mutex> tl(t.tr_mu);
    // Target-defined aliases (gNMI 2.4.2): a declaration, or a use in the prefix.
    if (!raw.alias().empty()) {
      if (t.aliases.size() < 10'000 || t.aliases.count(raw.alias())) {
        t.aliases[raw.alias()] = raw.prefix();
      }
      if (raw.update_size() == 0 && raw.delete__size() == 0) return;
    }
    gnmi::Notification resolved;
    if (raw.prefix().elem_size() > 0 && !raw.prefix().elem(0).name().empty() &&
        raw.prefix().elem(0).name()[0] == '#') {
      auto it = t.aliases.find(raw.prefix().elem(0).name());
      if (it != t.aliases.end()) {
        resolved = raw;
        gnmi::Path p = it->second;
        for (int i = 1; i < raw.prefix().elem_size(); ++i) *p.add_elem() = raw.prefix().elem(i);
        *resolved.mutable_prefix() = p;
        n = &resolved;
      }
    }
    if (t.profile_mode) {
      const Entry& e0 = t.entries[s.entries.front()];
      if (e0.key_map >= 0) {
        t.translator->UpdateKeyMap(e0.key_map, *n);
        key_map = true;
      }
      if (!key_map) {
        std::vector<int> signals;
        for (int i : s.entries) {
          for (int sig : t.entries[i].signals) signals.push_back(sig);
        }
        bad = t.translator->Translate(signals, *n, arrival, &translated, &first_error);
        n = &translated;
      }
    } else if (n == &resolved) {
      translated = std::move(resolved);
      n = &translated;
    }
  }
  if (key_map) {  // Never take mu_ under tr_mu (the supervisor's order is mu_, then tr_mu).
    std::lock_guard<std::mutex> lock(mu_);
    s.got_data = true;
    NoteMessageLocked(s, arrival);
    return;
  }
  const uint64_t count = static_cast<uint64_t>(n->update_size() + n->delete__size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.got_data = true;
    NoteMessageLocked(s, arrival);
    if (!t.delivered_since_failure) {
      t.delivered_since_failure = true;
      t.health.consecutive_failures = 0;
    }
    if (bad > 0) {
      t.health.translate_errors += bad;
      t.health.last_error = "bad data: " + first_error;
    }
    if (options_.max_updates_per_sec > 0) {
      if (arrival - t.window_start >= kNsPerSec || arrival < t.window_start) {
        t.window_start = arrival;
        t.window_updates = 0;
      }
      if (t.window_updates + count > options_.max_updates_per_sec) {
        t.health.dropped_updates += count;
        return;
      }
      t.window_updates += count;
    }
  }
  size_t rejected = 0;
  if (count > 0 || !t.profile_mode) rejected = sink_->OnNotification(t.config.name, *n, arrival);
  std::lock_guard<std::mutex> lock(mu_);
  ++t.health.notifications;
  t.health.updates += count;
  t.health.rejected_updates += rejected + bad;
  t.health.last_update_ns = arrival;
}

void Collector::NoteMessageLocked(Stream& s, TimeNs arrival) {
  s.last_message = std::max(s.last_message, arrival);
  if (s.synced) {
    s.armed = true;  // Data after sync: the group is expected to keep talking.
    s.silent_cuts = 0;
  }
}

void Collector::OnCallDone(Target& t, Stream& s, int code, const std::string& error_in,
                           Call* call) {
  std::string error = error_in;
  bool tell_disconnected = false;
  TimeNs delay = 0;
  bool log_failure = false;
  std::string log_what;
  std::string name;
  {
    std::lock_guard<std::mutex> lock(mu_);
    name = t.config.name;  // `t` may be retired and deleted once the lock is released.
    finished_calls_.push_back(call);
    --active_calls_;
    --t.active_calls;
    s.call = nullptr;
    cv_.notify_all();
    const bool ours = s.cancelled || stopping_ || t.removed;
    const bool was_connected = s.connected;
    s.connected = s.synced = false;
    if (ours || s.dead) {
      // Cancelled by us (reconnect of the target, reload, stop).
    } else if (s.silent_cut) {
      // Cut for silence: this group alone is redialled, on a new connection,
      // after the backoff (growing while it keeps going silent).
      const TimeNs now = clock_->Now();
      ++s.silent_cuts;
      error = "no update for " + std::to_string((now - s.last_message) / kNsPerMs) +
              " ms (liveness window " + std::to_string(s.liveness_ns / kNsPerMs) +
              " ms): subscription group redialled";
      t.health.last_error = error;
      ++t.health.stream_errors;
      const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
      delay = BackoffDelay(options_.backoff, s.silent_cuts, u);
      s.next_attempt = now + delay;
      s.fresh_channel = true;
      if (!t.profile_mode) {
        t.health.next_attempt_ns = s.next_attempt;
        t.health.connected = false;
        t.health.synced = false;
        tell_disconnected = t.told_connected;
        t.told_connected = false;
      }
      log_failure = true;
      log_what = "gnmi subscription group silent; redialling";
    } else if (t.profile_mode && !s.got_data && IsRejection(code)) {
      const TimeNs now = clock_->Now();
      ++t.health.subscribe_rejects;
      if (s.entries.size() > 1) {
        // Isolate the offending paths: split the group in halves, both
        // tried at once (a different request, not a retry of this one).
        s.dead = true;
        const size_t half = s.entries.size() / 2;
        for (int part = 0; part < 2; ++part) {
          auto ns = std::make_unique<Stream>();
          ns->entries.assign(s.entries.begin() + (part == 0 ? 0 : half),
                             part == 0 ? s.entries.begin() + half : s.entries.end());
          ns->next_attempt = now;
          t.streams.push_back(std::move(ns));
        }
        log_what = "subscription group rejected; splitting to isolate the offending paths";
      } else {
        Entry& e = t.entries[s.entries[0]];
        if (e.mode == gnmi::ON_CHANGE && !e.fell_back) {
          e.mode = gnmi::SAMPLE;
          e.fell_back = true;
          s.next_attempt = now;
          log_what = "ON_CHANGE rejected; retrying as SAMPLE";
        } else {
          e.rejected = true;
          e.reason = error;
          ++e.rejects;
          const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
          e.retry_at = now + BackoffDelay(options_.reject_backoff, e.rejects, u);
          s.next_attempt = e.retry_at;
          log_what = "subscription rejected; its signals are unavailable";
        }
      }
      log_failure = true;
      delay = s.next_attempt - now;
    } else {
      // The target failed (unreachable, broke the stream): reconnect the
      // whole target after the backoff, every stream with it.
      const TimeNs now = clock_->Now();
      const bool target_was_connected = t.health.connected;
      ++t.health.stream_errors;
      error = WithTlsContext(t.config, code, error);
      t.health.last_error = error;
      (void)was_connected;
      t.health.consecutive_failures =
          t.delivered_since_failure ? 1 : t.health.consecutive_failures + 1;
      t.delivered_since_failure = false;
      const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
      delay = BackoffDelay(options_.backoff, t.health.consecutive_failures, u);
      t.health.next_attempt_ns = now + delay;
      t.health.connected = false;
      t.health.synced = false;
      tell_disconnected = target_was_connected && t.told_connected;
      t.told_connected = false;
      if (t.profile_mode) {
        for (auto& other : t.streams) {
          if (other.get() != &s && other->call != nullptr) {
            other->cancelled = true;
            other->call->Cancel();
          }
        }
        t.phase = Target::Phase::kCaps;
      } else {
        s.next_attempt = t.health.next_attempt_ns;
      }
      log_failure = true;
      log_what = "gnmi stream ended";
    }
    if (!t.profile_mode && (ours || s.dead)) {
      t.health.connected = false;
      t.health.synced = false;
    }
  }
  if (log_failure) {
    LOG_WARN(log_what.c_str())
        .With("target", name)
        .With("error", error)
        .With("retry_in_ms", static_cast<int64_t>(delay / kNsPerMs));
  }
  if (tell_disconnected) sink_->OnTargetDisconnected(name);
}

void Collector::RefreshSignalsLocked(Target& t, TimeNs now,
                                     std::vector<SignalAvailability>* changes) {
  const v1::TelemetryProfile& p = *t.config.profile;
  // The translator's counters are atomics: no tr_mu here (lock order).
  for (SignalHealth& h : t.health.signals) {
    std::vector<int> idx;
    for (int i = 0; i < p.signals_size(); ++i) {
      if (p.signals(i).signal() == h.signal) idx.push_back(i);
    }
    if (idx.empty()) continue;  // Unmapped: unavailable from the start.
    const int si = idx[0];
    const Entry* entry = nullptr;
    const Stream* stream = nullptr;
    for (const auto& e : t.entries) {
      if (std::find(e.signals.begin(), e.signals.end(), si) != e.signals.end()) entry = &e;
    }
    if (entry != nullptr) {
      const int ei = static_cast<int>(entry - t.entries.data());
      for (const auto& st : t.streams) {
        if (!st->dead &&
            std::find(st->entries.begin(), st->entries.end(), ei) != st->entries.end()) {
          stream = st.get();
        }
      }
      h.mode = entry->mode == gnmi::ON_CHANGE ? "ON_CHANGE" : "SAMPLE";
      h.rejects = static_cast<uint64_t>(entry->rejects);
    }
    uint64_t updates = 0;
    TimeNs last_arrival = -1;
    for (int i : idx) {
      const auto& c = t.translator->signal_counters(i);
      updates += c.updates.load(std::memory_order_relaxed);
      last_arrival = std::max(last_arrival, c.last_arrival_ns.load(std::memory_order_relaxed));
    }
    struct {
      uint64_t updates;
      TimeNs last_arrival_ns;
    } c{updates, last_arrival};
    h.updates = c.updates;
    h.last_arrival_ns = c.last_arrival_ns;
    h.retry_at_ns = entry != nullptr && entry->rejected ? entry->retry_at : 0;
    if (entry != nullptr && entry->rejected) {
      h.state = SignalState::kUnavailable;
      h.reason = "rejected by target: " + entry->reason;
    } else if (c.last_arrival_ns >= 0) {
      const TimeNs limit =
          options_.stale_after_intervals * std::max<TimeNs>(h.effective_interval_ns, 1);
      // ON_CHANGE signals are fresh as long as their stream is up.
      const bool on_change = h.mode == "ON_CHANGE";
      if ((on_change && stream != nullptr && stream->synced) ||
          (!on_change && now - c.last_arrival_ns <= limit)) {
        h.state = SignalState::kLive;
        h.reason.clear();
      } else {
        h.state = SignalState::kStale;
        h.reason = stream != nullptr && stream->synced ? "no fresh sample" : "stream down";
      }
    } else if (stream != nullptr && stream->synced && stream->synced_at >= 0 &&
               now - stream->synced_at >
                   std::max<TimeNs>(3 * h.effective_interval_ns, 5 * kNsPerSec)) {
      h.state = SignalState::kUnavailable;
      h.reason = "subscription accepted, but the target sent no data for it";
    } else {
      h.state = SignalState::kPending;
      h.reason = t.phase == Target::Phase::kStreams ? "" : "connecting";
    }
  }
  // Tell the sink what changed (and everything once).
  for (const SignalHealth& h : t.health.signals) {
    const bool available = h.state != SignalState::kUnavailable;
    auto it = t.told.find(h.signal);
    const auto value = std::make_pair(available, h.effective_interval_ns);
    if (it != t.told.end() && it->second == value) continue;
    t.told[h.signal] = value;
    SignalAvailability a;
    a.target = t.config.name;
    a.signal = h.signal;
    a.available = available;
    a.reason = h.reason;
    a.effective_interval_ns = h.effective_interval_ns;
    changes->push_back(std::move(a));
  }
}

void Collector::DeleteFinishedCalls(std::unique_lock<std::mutex>& lock) {
  if (finished_calls_.empty() && finished_caps_.empty()) return;
  std::vector<Call*> done;
  std::vector<CapsCall*> caps;
  done.swap(finished_calls_);
  caps.swap(finished_caps_);
  lock.unlock();
  for (Call* c : done) delete c;
  for (CapsCall* c : caps) delete c;
  lock.lock();
}

}  // namespace loom::telemetry
