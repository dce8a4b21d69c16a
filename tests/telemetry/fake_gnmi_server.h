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
  const std::vector<gnmi::Notification> initial_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::deque<gnmi::Notification>*> streams_;
  bool stopping_ = false;
  int subscribe_calls_ = 0;
  gnmi::SubscribeRequest last_request_;
};

}  // namespace loom::telemetry::testing

#endif  // LOOM_TESTS_TELEMETRY_FAKE_GNMI_SERVER_H_
