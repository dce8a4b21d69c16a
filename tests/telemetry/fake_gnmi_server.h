// A scripted gNMI target for collector tests: a real gRPC server on
// 127.0.0.1 implementing gnmi.gNMI/Subscribe. Each new stream gets the initial
// notifications, then sync_response, then whatever the test Push()es.
// Thread-safe; Subscribe handlers run on gRPC server threads.
#ifndef LOOM_TESTS_TELEMETRY_FAKE_GNMI_SERVER_H_
#define LOOM_TESTS_TELEMETRY_FAKE_GNMI_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "gnmi/gnmi.grpc.pb.h"

namespace loom::telemetry::testing {

class FakeGnmiServer final : public gnmi::gNMI::Service {
 public:
  explicit FakeGnmiServer(std::vector<gnmi::Notification> initial = {})
      : initial_(std::move(initial)) {}
  ~FakeGnmiServer() override { Stop(); }

  // Listens on 127.0.0.1:`port` (0 = any free port). False on failure.
  bool Start(int port = 0) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                       &port_);
    b.RegisterService(this);
    // Accept client keepalive pings however often they come (tests use short
    // intervals); gRPC's default would answer GOAWAY too_many_pings.
    b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10);
    b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
    server_ = b.BuildAndStart();
    return server_ != nullptr && port_ > 0;
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      cv_.notify_all();
    }
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
      server_->Wait();
      server_.reset();
    }
  }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // Sends `n` on every open stream.
  void Push(const gnmi::Notification& n) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto* q : streams_) q->push_back(n);
    cv_.notify_all();
  }
  // Notifications pushed but not yet written, over all open streams.
  size_t pending() const {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (auto* q : streams_) n += q->size();
    return n;
  }
  int open_streams() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(streams_.size());
  }
  int subscribe_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return subscribe_calls_;
  }
  gnmi::SubscribeRequest last_request() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_request_;
  }
  // Every Subscribe request received, in order.
  std::vector<gnmi::SubscribeRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  // Capabilities answers these encodings; UNIMPLEMENTED when never set.
  void SetEncodings(std::vector<gnmi::Encoding> e) {
    std::lock_guard<std::mutex> lock(mu_);
    encodings_ = std::move(e);
    has_capabilities_ = true;
  }
  // A Subscribe whose encoding differs gets UNIMPLEMENTED (JSON_IETF-only targets).
  void RequireEncoding(gnmi::Encoding e) {
    std::lock_guard<std::mutex> lock(mu_);
    required_encoding_ = e;
  }
  // A Subscribe naming this path (text form with origin, keys as sent)
  // fails whole with INVALID_ARGUMENT, as gNMI requires.
  void RejectPath(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    rejected_paths_.insert(path);
  }
  // Ends every stream (OK) right after its sync_response.
  void EndAfterSync(bool v) {
    std::lock_guard<std::mutex> lock(mu_);
    end_after_sync_ = v;
  }
  // A Subscribe asking ON_CHANGE for this path fails whole with INVALID_ARGUMENT.
  void RejectOnChange(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    rejected_on_change_.insert(path);
  }

  grpc::Status Capabilities(grpc::ServerContext*, const gnmi::CapabilityRequest*,
                            gnmi::CapabilityResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!has_capabilities_) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no Capabilities");
    for (auto e : encodings_) resp->add_supported_encodings(e);
    return grpc::Status::OK;
  }

  grpc::Status Subscribe(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<gnmi::SubscribeResponse, gnmi::SubscribeRequest>* stream) override {
    gnmi::SubscribeRequest req;
    if (!stream->Read(&req) || !req.has_subscribe()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "expected a SubscriptionList");
    }
    std::deque<gnmi::Notification> queue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++subscribe_calls_;
      last_request_ = req;
      requests_.push_back(req);
      if (required_encoding_ >= 0 && req.subscribe().encoding() != required_encoding_) {
        return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "encoding not supported");
      }
      for (const auto& sub : req.subscribe().subscription()) {
        gnmi::Path p = sub.path();
        if (p.origin().empty()) p.set_origin(req.subscribe().prefix().origin());
        const std::string text = (p.origin().empty() ? "" : p.origin() + ":") + PathText(p);
        if (rejected_paths_.count(text)) {
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unknown path " + text);
        }
        if (sub.mode() == gnmi::ON_CHANGE && rejected_on_change_.count(text)) {
          return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "ON_CHANGE not supported for " + text);
        }
      }
      streams_.insert(&queue);
    }
    bool ok = true;
    for (const auto& n : initial_) {
      gnmi::SubscribeResponse r;
      *r.mutable_update() = n;
      ok = ok && stream->Write(r);
    }
    gnmi::SubscribeResponse sync;
    sync.set_sync_response(true);
    ok = ok && stream->Write(sync);
    std::unique_lock<std::mutex> lock(mu_);
    if (end_after_sync_) {
      streams_.erase(&queue);
      return grpc::Status::OK;
    }
    while (ok && !stopping_ && !ctx->IsCancelled()) {
      if (queue.empty()) {
        cv_.wait_for(lock, std::chrono::milliseconds(10));
        continue;
      }
      gnmi::SubscribeResponse r;
      *r.mutable_update() = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      ok = stream->Write(r);
      lock.lock();
    }
    streams_.erase(&queue);
    return grpc::Status::OK;
  }

 private:
  // "/a/b[k=v]" (keys in name order).
  static std::string PathText(const gnmi::Path& p) {
    std::string out;
    for (const auto& e : p.elem()) {
      out += "/" + e.name();
      std::map<std::string, std::string> keys(e.key().begin(), e.key().end());
      for (const auto& [k, v] : keys) out += "[" + k + "=" + v + "]";
    }
    return out.empty() ? "/" : out;
  }

  const std::vector<gnmi::Notification> initial_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::deque<gnmi::Notification>*> streams_;
  bool stopping_ = false;
  int subscribe_calls_ = 0;
  gnmi::SubscribeRequest last_request_;
  std::vector<gnmi::SubscribeRequest> requests_;
  std::vector<gnmi::Encoding> encodings_;
  bool has_capabilities_ = false;
  int required_encoding_ = -1;
  std::set<std::string> rejected_paths_;
  std::set<std::string> rejected_on_change_;
  bool end_after_sync_ = false;
};

}  // namespace loom::telemetry::testing

#endif  // LOOM_TESTS_TELEMETRY_FAKE_GNMI_SERVER_H_
