#include "sim-fabric/gnmi_target.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>
#include <utility>

#include "common/log.h"
#include "common/tls_files.h"
#include "gnmi/gnmi.grpc.pb.h"

namespace loom::sim {
namespace {

grpc::Status ToGrpc(const Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), s.message());
}

const grpc::Status kNoData(grpc::StatusCode::UNAVAILABLE,
                           "the emulator has not published data yet");

// Compares without an early exit on the first differing byte.
bool SameSecret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

std::string Metadata(const grpc::CallbackServerContext* ctx, const char* key) {
  auto it = ctx->client_metadata().find(key);
  if (it == ctx->client_metadata().end()) return "";
  return std::string(it->second.data(), it->second.size());
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

}  // namespace

// ------------------------------------------------------------------ Subscribe

// One Subscribe RPC. Reads requests, answers from the target's snapshots and
// writes responses one at a time from its queue. Deleted in OnDone.
class GnmiTarget::SubscribeReactor final
    : public grpc::ServerBidiReactor<gnmi::SubscribeRequest, gnmi::SubscribeResponse> {
 public:
  explicit SubscribeReactor(GnmiTarget* target) : target_(target) { StartRead(&request_); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // Client half-closed or the RPC ended. STREAM keeps streaming.
      std::unique_lock<std::mutex> lock(mu_);
      if (!session_) {
        FinishLocked(lock, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                        "stream closed before a SubscriptionList was sent"));
      } else if (session_->mode() == gnmi::SubscriptionList::POLL) {
        FinishLocked(lock, grpc::Status::OK);
      }
      return;
    }
    if (request_.has_subscribe()) {
      bool first;
      {
        std::lock_guard<std::mutex> lock(mu_);
        first = !session_;
      }
      if (!first) {
        Fail(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "a SubscriptionList was already received on this stream"));
        return;
      }
      if (!target_->OpenSubscription(this, request_.subscribe())) return;
      std::lock_guard<std::mutex> lock(mu_);
      if (session_->mode() == gnmi::SubscriptionList::ONCE) return;  // finishing after the data
    } else if (request_.has_poll()) {
      std::unique_lock<std::mutex> lock(mu_);
      if (!session_) {
        FinishLocked(lock, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                        "Poll received before a SubscriptionList (no subscription "
                                        "exists on this stream)"));
        return;
      }
      if (session_->mode() != gnmi::SubscriptionList::POLL) {
        FinishLocked(lock, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                        "Poll received on a subscription whose mode is not POLL"));
        return;
      }
      std::shared_ptr<const FabricSnapshot> snap = target_->latest();
      std::vector<gnmi::Notification> ns;
      session_->Poll(*snap, &ns);
      EnqueueLocked(lock, std::move(ns), /*sync=*/true);
    } else {
      Fail(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "SubscribeRequest carries neither subscribe nor poll"));
      return;
    }
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok && !finish_pending_) {
      finish_pending_ = true;
      final_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "write failed");
      queue_.clear();
    }
    MaybeWriteLocked(lock);
  }

  void OnCancel() override {
    std::unique_lock<std::mutex> lock(mu_);
    FinishLocked(lock, grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }

  void OnDone() override {
    target_->CloseSubscription(this);
    delete this;
  }

  // Called with the target's mutex held: validates and installs the session,
  // queues the initial data. Returns false when the RPC was ended.
  Status Install(const gnmi::SubscriptionList& list, const FabricSnapshot& snap) {
    std::unique_ptr<SubscribeSession> session;
    Status s;
    if (target_->behaviour_) {
      s = target_->behaviour_->CreateSession(list, snap, &session);
    } else {
      std::unique_ptr<GnmiSession> g;
      s = GnmiSession::Create(list, snap, target_->gnmi_options_, &g);
      session = std::move(g);
    }
    if (!s.ok()) return s;
    std::unique_lock<std::mutex> lock(mu_);
    session_ = std::move(session);
    std::vector<gnmi::Notification> ns;
    session_->Initial(snap, &ns);
    EnqueueLocked(lock, std::move(ns), /*sync=*/true,
                  /*finish=*/session_->mode() == gnmi::SubscriptionList::ONCE);
    return Status::Ok();
  }

  // Target's mutex held (Publish): queue what is due at this tick.
  void Tick(const FabricSnapshot& snap) {
    std::unique_lock<std::mutex> lock(mu_);
    if (finish_pending_ || !session_) return;
    std::vector<gnmi::Notification> ns;
    session_->Tick(snap, &ns);
    if (!ns.empty()) EnqueueLocked(lock, std::move(ns), /*sync=*/false);
  }

  bool streaming() {
    std::lock_guard<std::mutex> lock(mu_);
    return session_ && session_->mode() == gnmi::SubscriptionList::STREAM && !finish_pending_;
  }

  void Fail(const grpc::Status& status) {
    std::unique_lock<std::mutex> lock(mu_);
    FinishLocked(lock, status);
  }

 private:
  // Queues `ns` (and sync_response), then, with `finish`, ends the RPC with OK
  // once they are written. Unlocks `lock`.
  void EnqueueLocked(std::unique_lock<std::mutex>& lock, std::vector<gnmi::Notification> ns,
                     bool sync, bool finish = false) {
    if (finish_pending_) {
      lock.unlock();
      return;
    }
    for (gnmi::Notification& n : ns) {
      gnmi::SubscribeResponse r;
      *r.mutable_update() = std::move(n);
      queue_.push_back(std::move(r));
    }
    if (sync) {
      gnmi::SubscribeResponse r;
      r.set_sync_response(true);
      queue_.push_back(std::move(r));
    }
    if (queue_.size() > target_->options_.max_queued_responses) {
      queue_.clear();
      LOG_WARN("gnmi target: slow subscriber dropped")
          .With("queued", static_cast<uint64_t>(target_->options_.max_queued_responses));
      FinishLocked(lock, grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                      "subscriber too slow: response queue limit exceeded"));
      return;
    }
    if (finish) {
      finish_pending_ = true;
      final_status_ = grpc::Status::OK;
    }
    MaybeWriteLocked(lock);
  }

  // Ends the RPC with `status` once the queued responses are written (at
  // once for errors: the queue is dropped). Unlocks `lock`.
  void FinishLocked(std::unique_lock<std::mutex>& lock, const grpc::Status& status) {
    if (finish_pending_) {
      lock.unlock();
      return;
    }
    finish_pending_ = true;
    final_status_ = status;
    if (!status.ok()) queue_.clear();
    MaybeWriteLocked(lock);
  }

  // Starts the next write, or Finish when drained and finishing. Always
  // returns with `lock` released; callers must not touch state afterwards.
  void MaybeWriteLocked(std::unique_lock<std::mutex>& lock) {
    if (writing_ || finished_) {
      lock.unlock();
      return;
    }
    if (!queue_.empty()) {
      writing_ = true;
      current_ = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      StartWrite(&current_);
      return;
    }
    if (finish_pending_) {
      finished_ = true;
      grpc::Status st = final_status_;
      lock.unlock();
      Finish(st);
      return;
    }
    lock.unlock();
  }

  GnmiTarget* const target_;
  gnmi::SubscribeRequest request_;   // read side only (one read in flight)
  gnmi::SubscribeResponse current_;  // the write in flight

  std::mutex mu_;
  std::unique_ptr<SubscribeSession> session_;
  std::deque<gnmi::SubscribeResponse> queue_;
  bool writing_ = false;
  bool finish_pending_ = false;
  bool finished_ = false;
  grpc::Status final_status_;
};

// A Subscribe refused before it starts (wrong credentials).
class GnmiTarget::RejectReactor final
    : public grpc::ServerBidiReactor<gnmi::SubscribeRequest, gnmi::SubscribeResponse> {
 public:
  explicit RejectReactor(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

// ------------------------------------------------------------------ service

class GnmiTarget::Service final : public gnmi::gNMI::CallbackService {
 public:
  explicit Service(GnmiTarget* target) : target_(target) {}

  // OK when the target wants no credentials or the call carries the right ones.
  grpc::Status CheckCredentials(const grpc::CallbackServerContext* ctx) const {
    const auto& o = target_->options_;
    if (o.username.empty()) return grpc::Status::OK;
    const std::string user = Metadata(ctx, "username");
    if (user.empty()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "this gNMI target requires username and password metadata");
    }
    const bool user_ok = SameSecret(user, o.username);
    const bool password_ok = SameSecret(Metadata(ctx, "password"), o.password);
    if (!user_ok || !password_ok) {
      LOG_WARN("gnmi target: wrong credentials").With("peer", ctx->peer());
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong username or password");
    }
    return grpc::Status::OK;
  }

  grpc::ServerUnaryReactor* Capabilities(grpc::CallbackServerContext* ctx,
                                         const gnmi::CapabilityRequest* /*req*/,
                                         gnmi::CapabilityResponse* resp) override {
    if (grpc::Status auth = CheckCredentials(ctx); !auth.ok()) {
      grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
      r->Finish(auth);
      return r;
    }
    *resp = target_->behaviour_ ? target_->behaviour_->Capabilities() : CapabilitiesResponse();
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }

  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* ctx, const gnmi::GetRequest* req,
                                gnmi::GetResponse* resp) override {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    if (grpc::Status auth = CheckCredentials(ctx); !auth.ok()) {
      r->Finish(auth);
      return r;
    }
    if (target_->config_ != nullptr &&
        (req->type() == gnmi::GetRequest::CONFIG || req->type() == gnmi::GetRequest::OPERATIONAL)) {
      Status s = target_->config_->Get(*req, resp);
      if (!s.ok()) resp->Clear();
      r->Finish(ToGrpc(s));
      return r;
    }
    std::shared_ptr<const FabricSnapshot> snap = target_->latest();
    if (!snap) {
      r->Finish(kNoData);
      return r;
    }
    Status s = target_->behaviour_ ? target_->behaviour_->Get(*snap, *req, resp)
                                   : GetNotifications(*snap, *req, resp);
    if (!s.ok()) resp->Clear();
    r->Finish(ToGrpc(s));
    return r;
  }

  grpc::ServerUnaryReactor* Set(grpc::CallbackServerContext* ctx, const gnmi::SetRequest* req,
                                gnmi::SetResponse* resp) override {
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    if (grpc::Status auth = CheckCredentials(ctx); !auth.ok()) {
      r->Finish(auth);
      return r;
    }
    if (target_->behaviour_) {
      if (!target_->latest()) {
        r->Finish(kNoData);
        return r;
      }
      target_->behaviour_->Set(*req, [r, resp](Status s, gnmi::SetResponse sr) {
        if (s.ok()) *resp = std::move(sr);
        r->Finish(ToGrpc(s));
      });
      return r;
    }
    if (target_->config_ == nullptr) {
      r->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                             "gNMI Set is not enabled on this target: no fabric config attached "
                             "(GnmiTarget::AttachConfig; loom-fabric attaches one, an embedding "
                             "program must do it in a later change of its own)"));
      return r;
    }
    target_->config_->Set(*req, [r, resp](Status s, gnmi::SetResponse sr) {
      if (s.ok()) *resp = std::move(sr);
      r->Finish(ToGrpc(s));
    });
    return r;
  }

  grpc::ServerBidiReactor<gnmi::SubscribeRequest, gnmi::SubscribeResponse>* Subscribe(
      grpc::CallbackServerContext* ctx) override {
    if (grpc::Status auth = CheckCredentials(ctx); !auth.ok()) return new RejectReactor(auth);
    {
      std::lock_guard<std::mutex> lock(target_->mu_);
      ++target_->open_;
    }
    return new SubscribeReactor(target_);
  }

 private:
  GnmiTarget* const target_;
};

// ------------------------------------------------------------------ GnmiTarget

GnmiTarget::GnmiTarget(GnmiOptions gnmi_options, GnmiTargetOptions options)
    : gnmi_options_(gnmi_options), options_(std::move(options)) {}

GnmiTarget::~GnmiTarget() { Stop(); }

Status GnmiTarget::Start() {
  if (server_) return FailedPrecondition("gnmi target already started");
  service_ = std::make_unique<Service>(this);
  grpc::ServerBuilder b;
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!options_.tls_cert_path.empty() || !options_.tls_key_path.empty() ||
      !options_.tls_client_ca_path.empty()) {
    if (options_.tls_cert_path.empty() || options_.tls_key_path.empty()) {
      return InvalidArgument("gnmi target: TLS needs both a certificate and a key");
    }
    if (std::string e = loom::CheckPemKeyPair("tls certificate", options_.tls_cert_path, "tls key",
                                              options_.tls_key_path);
        !e.empty()) {
      return InvalidArgument("gnmi target: " + e);
    }
    grpc::SslServerCredentialsOptions so;
    grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
    (void)ReadFile(options_.tls_cert_path, &pair.cert_chain);  // Checked above.
    (void)ReadFile(options_.tls_key_path, &pair.private_key);
    so.pem_key_cert_pairs.push_back(std::move(pair));
    if (!options_.tls_client_ca_path.empty()) {
      if (std::string e = loom::CheckPemCertificates("tls client CA", options_.tls_client_ca_path);
          !e.empty()) {
        return InvalidArgument("gnmi target: " + e);
      }
      (void)ReadFile(options_.tls_client_ca_path, &so.pem_root_certs);
      so.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    }
    credentials = grpc::SslServerCredentials(so);
  }
  b.AddListeningPort(options_.listen_address, credentials, &port_);
  b.RegisterService(service_.get());
  b.SetMaxReceiveMessageSize(options_.max_receive_message_bytes);
  server_ = b.BuildAndStart();
  if (!server_ || port_ <= 0) {
    server_.reset();
    return Unavailable("gnmi target: cannot listen on " + options_.listen_address);
  }
  LOG_INFO("gnmi target listening")
      .With("address", options_.listen_address)
      .With("port", port_)
      .With("tls", options_.tls_cert_path.empty()        ? "off"
                   : options_.tls_client_ca_path.empty() ? "on"
                                                         : "mutual")
      .With("credentials", options_.username.empty() ? "none" : "required");
  return Status::Ok();
}

void GnmiTarget::Stop() {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  server_->Wait();
  server_.reset();
}

void GnmiTarget::Publish(std::shared_ptr<const FabricSnapshot> snap) {
  std::lock_guard<std::mutex> lock(mu_);
  latest_ = std::move(snap);
  if (behaviour_) behaviour_->OnPublish(latest_);
  for (SubscribeReactor* r : streams_) r->Tick(*latest_);
}

std::shared_ptr<const FabricSnapshot> GnmiTarget::latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

int GnmiTarget::open_streams() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_;
}

bool GnmiTarget::OpenSubscription(SubscribeReactor* r, const gnmi::SubscriptionList& list) {
  grpc::Status error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!latest_) {
      error = kNoData;
    } else {
      Status s = r->Install(list, *latest_);
      if (s.ok()) {
        if (r->streaming()) streams_.insert(r);
        return true;
      }
      LOG_INFO("gnmi subscribe rejected").With("error", s.message());
      error = ToGrpc(s);
    }
  }
  r->Fail(error);
  return false;
}

void GnmiTarget::CloseSubscription(SubscribeReactor* r) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.erase(r);
  --open_;
}

// ------------------------------------------------------------------ FabricLoop

FabricLoop::FabricLoop(Fabric* fabric, GnmiTarget* target, FabricLoopOptions options)
    : fabric_(fabric), target_(target), options_(std::move(options)) {}

FabricLoop::~FabricLoop() = default;

void FabricLoop::Post(std::function<void(Fabric&)> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!finished_) {
      posted_.push_back(std::move(fn));
      has_posted_.store(true);
      return;
    }
  }
  // Run() has returned: nobody steps the fabric any more; run it here,
  // serialized (re-entrantly: a closure may post the next one, as a
  // personality's queued Sets do), so waiters (a gNMI Set) still complete.
  std::lock_guard<std::recursive_mutex> lock(after_mu_);
  fn(*fabric_);
}

void FabricLoop::RunPosted() {
  std::vector<std::function<void(Fabric&)>> fns;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fns.swap(posted_);
    has_posted_.store(false);
  }
  for (auto& fn : fns) fn(*fabric_);
}

void FabricLoop::Run() {
  using Steady = std::chrono::steady_clock;
  std::unique_ptr<SnapshotBuilder> builder;
  if (target_ != nullptr) {
    builder = std::make_unique<SnapshotBuilder>(*fabric_, target_->gnmi_options());
    std::shared_ptr<const FabricSnapshot> first = builder->Capture();
    for (GnmiTarget* t : options_.more_targets) t->Publish(first);
    target_->Publish(std::move(first));
    published_.fetch_add(1);
  }
  virtual_now_.store(fabric_->now());
  const auto wall0 = Steady::now();
  const TimeNs v0 = fabric_->now();
  auto last_lag_warning = wall0;
  constexpr TimeNs kNever = std::numeric_limits<TimeNs>::max();
  while (!stop_.load()) {
    RunPosted();
    if (options_.duration_ns > 0 && fabric_->now() >= options_.duration_ns) break;
    TimeNs until = kNever;
    if (options_.speed > 0) {
      const auto wall = Steady::now();
      const double elapsed = static_cast<double>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(wall - wall0).count());
      until = v0 + static_cast<TimeNs>(elapsed * options_.speed);
      if (fabric_->now() >= until) {
        // Ahead of the wall clock: sleep towards the next tick (bounded, so
        // Stop() and Post() are noticed quickly).
        const TimeNs next = builder ? builder->next_tick_ns() : fabric_->now() + kNsPerMs;
        const double wait_ns = static_cast<double>(next - fabric_->now()) / options_.speed;
        const auto wait = std::chrono::nanoseconds(
            std::clamp<int64_t>(static_cast<int64_t>(wait_ns), 50'000, 2'000'000));
        std::this_thread::sleep_for(wait);
        continue;
      }
      if (until - fabric_->now() > kNsPerSec &&
          wall - last_lag_warning > std::chrono::seconds(10)) {
        last_lag_warning = wall;
        LOG_WARN("loom-fabric cannot keep up with the wall clock")
            .With("lag_ms", static_cast<int64_t>((until - fabric_->now()) / kNsPerMs));
      }
    }
    for (int k = 0; k < 1024 && fabric_->now() < until; ++k) {
      if (options_.duration_ns > 0 && fabric_->now() >= options_.duration_ns) break;
      // Posted changes (a gNMI Set waiting for its response, BGP-learned
      // routes) go before further steps, also when the loop lags.
      if (has_posted_.load(std::memory_order_relaxed)) break;
      // One step, or a fast-forward jump over a quiescent stretch that never
      // passes the next sample tick (so ticks land where stepping puts them).
      TimeNs limit = until;
      if (builder) limit = std::min(limit, builder->next_tick_ns());
      if (options_.duration_ns > 0) limit = std::min(limit, options_.duration_ns);
      fabric_->Advance(limit);
      if (options_.on_step) options_.on_step(*fabric_);
      if (!builder) continue;
      if (auto snap = builder->OnStep()) {
        for (GnmiTarget* t : options_.more_targets) t->Publish(snap);
        target_->Publish(std::move(snap));
        published_.fetch_add(1);
      }
    }
    virtual_now_.store(fabric_->now());
  }
  virtual_now_.store(fabric_->now());
  std::vector<std::function<void(Fabric&)>> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    left.swap(posted_);
  }
  std::lock_guard<std::recursive_mutex> lock(after_mu_);
  for (auto& fn : left) fn(*fabric_);
}

}  // namespace loom::sim
