#include "tests/southbound/gnmi/test_target.h"

#include <chrono>

namespace loom::southbound::gnmi::testing {
namespace {

grpc::Status ToGrpc(const Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), s.message());
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool TestGnmiTarget::Start(const std::vector<std::string>& names) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& n : names) devices_[n].state.set_device(n);
    if (!names.empty()) first_ = names.front();
  }
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  b.RegisterService(this);
  server_ = b.BuildAndStart();
  return server_ != nullptr && port_ > 0;
}

void TestGnmiTarget::Shutdown() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
    server_.reset();
  }
}

TestGnmiTarget::Device* TestGnmiTarget::Find(const std::string& target) {
  auto it = devices_.find(target.empty() ? first_ : target);
  return it == devices_.end() ? nullptr : &it->second;
}

loom::v1::DeviceState TestGnmiTarget::state(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = devices_.find(name);
  return it == devices_.end() ? loom::v1::DeviceState() : it->second.state;
}

void TestGnmiTarget::set_state(const std::string& name, const loom::v1::DeviceState& s) {
  std::lock_guard<std::mutex> lock(mu_);
  devices_[name].state = s;
}

int TestGnmiTarget::sets(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = devices_.find(name);
  return it == devices_.end() ? 0 : it->second.sets;
}

int TestGnmiTarget::gets(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = devices_.find(name);
  return it == devices_.end() ? 0 : it->second.gets;
}

::gnmi::SetRequest TestGnmiTarget::last_set(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = devices_.find(name);
  return it == devices_.end() ? ::gnmi::SetRequest() : it->second.last_set;
}

void TestGnmiTarget::DropNextSets(int n) {
  std::lock_guard<std::mutex> lock(mu_);
  drop_sets_ = n;
}

void TestGnmiTarget::FailNextSets(int n, grpc::StatusCode code) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_sets_ = n;
  fail_code_ = code;
}

grpc::ServerUnaryReactor* TestGnmiTarget::Set(grpc::CallbackServerContext* ctx,
                                              const ::gnmi::SetRequest* req,
                                              ::gnmi::SetResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  grpc::Status result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Device* d = Find(req->prefix().target());
    if (!d) {
      result = grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown target");
    } else {
      d->sets++;
      d->last_set = *req;
      if (fail_sets_ > 0) {
        fail_sets_--;
        result = grpc::Status(fail_code_, "injected failure");
      } else if (drop_sets_ > 0) {
        drop_sets_--;
        resp->set_timestamp(NowNs());
      } else {
        loom::v1::DeviceState next = d->state;
        Status s = ApplySetRequest(*req, &next, limits_, resp, NowNs());
        if (s.ok()) d->state = std::move(next);
        result = ToGrpc(s);
      }
    }
  }
  reactor->Finish(result);
  return reactor;
}

grpc::ServerUnaryReactor* TestGnmiTarget::Get(grpc::CallbackServerContext* ctx,
                                              const ::gnmi::GetRequest* req,
                                              ::gnmi::GetResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  grpc::Status result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Device* d = Find(req->prefix().target());
    if (!d) {
      result = grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown target");
    } else {
      d->gets++;
      result = ToGrpc(EncodeGetResponse(*req, d->state, NowNs(), resp));
    }
  }
  reactor->Finish(result);
  return reactor;
}

}  // namespace loom::southbound::gnmi::testing
