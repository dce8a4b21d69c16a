#include "telemetry/collector.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <utility>

#include "common/log.h"
#include "gnmi/gnmi.grpc.pb.h"
#include "telemetry/path.h"

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

struct Collector::Target {
  TargetConfig config;
  gnmi::SubscribeRequest request;
  TargetHealth health;
  Call* call = nullptr;  // The stream in flight, owned by gRPC until OnDone.
  // The channel of the current / last attempt. Held here, never only by the
  // Call: the last reference to a channel must not be dropped inside a gRPC
  // callback reaction (gRPC's callback CQ would then shut itself down from its
  // own thread, grpc/grpc#32584). Replaced on the supervisor thread, released
  // when the collector is destroyed.
  std::shared_ptr<grpc::Channel> channel;
  TimeNs window_start = 0;  // Rate limit window (Clock time).
  uint64_t window_updates = 0;
};

// One Subscribe stream. Created by the supervisor, deleted in OnDone.
class Collector::Call final
    : public grpc::ClientBidiReactor<gnmi::SubscribeRequest, gnmi::SubscribeResponse> {
 public:
  Call(Collector* collector, Target* target, std::shared_ptr<grpc::Channel> channel)
      : collector_(collector), target_(target), stub_(gnmi::gNMI::NewStub(std::move(channel))) {}

  void Start() {
    stub_->async()->Subscribe(&ctx_, this);
    StartWrite(&target_->request);
    StartRead(&response_);
    StartCall();
  }
  void Cancel() { ctx_.TryCancel(); }

  void OnReadInitialMetadataDone(bool ok) override {
    if (ok) collector_->OnConnected(*target_);
  }
  void OnWriteDone(bool /*ok*/) override {}
  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows.
    collector_->OnResponse(*target_, response_);
    response_.Clear();
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override {
    std::string error = "stream ended by target";
    if (!status.ok()) {
      error = std::to_string(static_cast<int>(status.error_code())) + ": " + status.error_message();
    }
    // Not deleted here: see Target::channel. The supervisor deletes it.
    collector_->OnCallDone(*target_, error, this);
  }

 private:
  Collector* const collector_;
  Target* const target_;
  std::unique_ptr<gnmi::gNMI::Stub> stub_;
  grpc::ClientContext ctx_;
  gnmi::SubscribeResponse response_;
};

Collector::Collector(CollectorOptions options, TelemetrySink* sink, const Clock* clock)
    : options_(std::move(options)), sink_(sink), clock_(clock) {
  rng_.seed(options_.seed != 0 ? options_.seed : std::random_device()());
}

Collector::~Collector() { Stop(); }

Status Collector::Start() {
  std::set<std::string> names;
  std::vector<std::unique_ptr<Target>> targets;
  for (const TargetConfig& cfg : options_.targets) {
    if (cfg.name.empty()) return InvalidArgument("collector target with empty name");
    if (cfg.address.empty()) return InvalidArgument("target " + cfg.name + ": empty address");
    if (!names.insert(cfg.name).second) {
      return InvalidArgument("target " + cfg.name + ": duplicate name");
    }
    if (cfg.subscriptions.empty()) {
      return InvalidArgument("target " + cfg.name + ": no subscriptions");
    }
    auto t = std::make_unique<Target>();
    t->config = cfg;
    t->health.name = cfg.name;
    t->health.address = cfg.address;
    gnmi::SubscriptionList* list = t->request.mutable_subscribe();
    list->mutable_prefix()->set_target(cfg.name);
    list->set_mode(gnmi::SubscriptionList::STREAM);
    list->set_encoding(gnmi::PROTO);
    for (const SubscriptionSpec& spec : cfg.subscriptions) {
      gnmi::Subscription* sub = list->add_subscription();
      Status s = ParsePath(spec.path, sub->mutable_path());
      if (!s.ok()) return InvalidArgument("target " + cfg.name + ": " + s.message());
      sub->mutable_path()->clear_target();
      sub->set_mode(spec.mode);
      if (spec.mode == gnmi::SAMPLE) {
        sub->set_sample_interval(
            static_cast<uint64_t>(std::max<TimeNs>(0, spec.sample_interval_ns)));
      }
    }
    targets.push_back(std::move(t));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return FailedPrecondition("collector already started");
  started_ = true;
  targets_ = std::move(targets);
  const TimeNs now = clock_->Now();
  for (auto& t : targets_) t->health.next_attempt_ns = now;
  supervisor_ = std::thread([this] { SupervisorLoop(); });
  LOG_INFO("telemetry collector started").With("targets", static_cast<uint64_t>(targets_.size()));
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
  for (auto& t : targets_) {
    if (t->call != nullptr) t->call->Cancel();
  }
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

void Collector::SupervisorLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<Call*> to_start;
  while (!stopping_) {
    const TimeNs now = clock_->Now();
    for (auto& t : targets_) {
      if (t->call == nullptr && now >= t->health.next_attempt_ns) {
        StartCallLocked(*t, now);
        to_start.push_back(t->call);
      }
    }
    DeleteFinishedCalls(lock);
    if (!to_start.empty()) {
      // Started outside the lock so that no reaction can run under it. A call
      // cannot finish (and be deleted) before it is started.
      lock.unlock();
      for (Call* c : to_start) c->Start();
      to_start.clear();
      lock.lock();
      continue;
    }
    cv_.wait_for(lock, std::chrono::milliseconds(20));
  }
}

void Collector::StartCallLocked(Target& t, TimeNs /*now*/) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options_.max_message_bytes);
  // A private subchannel pool: a fresh channel per attempt connects at once
  // instead of inheriting gRPC's own reconnect backoff; ours governs.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  t.channel = grpc::CreateCustomChannel(t.config.address, grpc::InsecureChannelCredentials(), args);
  if (t.health.connect_attempts > 0) ++t.health.reconnects;
  ++t.health.connect_attempts;
  ++active_calls_;
  t.call = new Call(this, &t, t.channel);
}

void Collector::OnConnected(Target& t) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (t.health.connected) return;
    t.health.connected = true;
    t.health.consecutive_failures = 0;
  }
  LOG_INFO("gnmi target connected").With("target", t.config.name).With("address", t.config.address);
  sink_->OnTargetConnected(t.config.name);
}

void Collector::OnResponse(Target& t, const gnmi::SubscribeResponse& r) {
  if (r.response_case() == gnmi::SubscribeResponse::kSyncResponse) {
    OnConnected(t);
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      first = !t.health.synced && r.sync_response();
      t.health.synced = t.health.synced || r.sync_response();
    }
    if (first) {
      LOG_INFO("gnmi target synced").With("target", t.config.name);
      sink_->OnTargetSynced(t.config.name);
    }
    return;
  }
  if (r.response_case() != gnmi::SubscribeResponse::kUpdate) return;
  OnConnected(t);
  const gnmi::Notification& n = r.update();
  const uint64_t count = static_cast<uint64_t>(n.update_size() + n.delete__size());
  const TimeNs arrival = clock_->Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
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
  const size_t rejected = sink_->OnNotification(t.config.name, n, arrival);
  std::lock_guard<std::mutex> lock(mu_);
  ++t.health.notifications;
  t.health.updates += count;
  t.health.rejected_updates += rejected;
  t.health.last_update_ns = arrival;
}

void Collector::OnCallDone(Target& t, const std::string& error, Call* call) {
  bool was_connected = false;
  TimeNs delay = 0;
  bool stopping = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was_connected = t.health.connected;
    stopping = stopping_;
    t.call = nullptr;
    t.health.connected = false;
    t.health.synced = false;
    if (!stopping) {
      ++t.health.stream_errors;
      t.health.last_error = error;
      t.health.consecutive_failures = was_connected ? 1 : t.health.consecutive_failures + 1;
      const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
      delay = BackoffDelay(options_.backoff, t.health.consecutive_failures, u);
      t.health.next_attempt_ns = clock_->Now() + delay;
    }
  }
  if (!stopping) {
    LOG_WARN("gnmi stream ended")
        .With("target", t.config.name)
        .With("error", error)
        .With("retry_in_ms", static_cast<int64_t>(delay / kNsPerMs));
  }
  if (was_connected) sink_->OnTargetDisconnected(t.config.name);
  std::lock_guard<std::mutex> lock(mu_);
  finished_calls_.push_back(call);
  --active_calls_;
  cv_.notify_all();
}

void Collector::DeleteFinishedCalls(std::unique_lock<std::mutex>& lock) {
  if (finished_calls_.empty()) return;
  std::vector<Call*> done;
  done.swap(finished_calls_);
  lock.unlock();
  for (Call* c : done) delete c;
  lock.lock();
}

}  // namespace loom::telemetry
