// Loom's side of the wire against a separate `loom-fabric` process: starts
// the emulator (gNMI target + BGP-DPF leaves), reads its ready file, and runs
// the southbound drivers exactly as loomd would (BgpDriver on a Speaker with
// the session plan of southbound/bgp/prefix_plan.h, GnmiDriver pointed at the
// target). Shared by the wire closed-loop test and bench_wire.
#ifndef LOOM_TESTS_SOUTHBOUND_WIRE_WIRE_HARNESS_H_
#define LOOM_TESTS_SOUTHBOUND_WIRE_WIRE_HARNESS_H_

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gnmi/gnmi.grpc.pb.h"
#include "southbound/bgp/asio.h"
#include "southbound/bgp/bgp_driver.h"
#include "southbound/bgp/prefix_plan.h"
#include "southbound/bgp/speaker.h"
#include "southbound/gnmi/gnmi_config.h"
#include "southbound/gnmi/gnmi_driver.h"

namespace loom::wiretest {

namespace bgp = loom::southbound::bgp;
namespace sg = loom::southbound::gnmi;
using Clock = std::chrono::steady_clock;

// Polls `pred` every millisecond until true or `timeout`.
inline bool WaitFor(const std::function<bool()>& pred,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return pred();
}

// A `loom-fabric` child process in live mode.
class FabricProcess {
 public:
  ~FabricProcess() { Stop(); }

  // Starts `binary SCENARIO --gnmi-listen 127.0.0.1:0 --bgp-listen 127.0.0.1:0 ...` and
  // waits for its ready file. False (with `error`) on failure.
  bool Start(const std::string& binary, const std::string& scenario, const std::string& dir,
             const std::vector<std::string>& extra, std::string* error) {
    ready_ = dir + "/ready.json";
    std::remove(ready_.c_str());
    std::vector<std::string> args = {binary,          scenario,      "--gnmi-listen", "127.0.0.1:0",
                                     "--bgp-listen",  "127.0.0.1:0", "--ready-file",  ready_,
                                     "--no-progress", "--out",       dir + "/out"};
    args.insert(args.end(), extra.begin(), extra.end());
    const std::string log = dir + "/loom-fabric.log";
    pid_ = fork();
    if (pid_ < 0) {
      *error = "fork failed";
      return false;
    }
    if (pid_ == 0) {
      FILE* f = std::freopen(log.c_str(), "w", stdout);
      if (f != nullptr) dup2(fileno(stdout), 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    std::string text;
    const bool ok = WaitFor([&] {
      std::ifstream in(ready_);
      if (!in) return false;
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
      return text.find('}') != std::string::npos;
    });
    if (!ok) {
      *error = "loom-fabric did not become ready (log: " + log + ")";
      return false;
    }
    std::smatch m;
    if (!std::regex_search(text, m, std::regex("\"gnmi_port\": (\\d+)"))) {
      *error = "bad ready file: " + text;
      return false;
    }
    gnmi_port_ = std::stoi(m[1]);
    std::regex leaf("\"([^\"]+)\": (\\d+)");
    const size_t b = text.find("\"bgp\"");
    std::string rest = b == std::string::npos ? "" : text.substr(b + 5);
    for (std::sregex_iterator it(rest.begin(), rest.end(), leaf), end; it != end; ++it) {
      bgp_ports_[(*it)[1]] = static_cast<uint16_t>(std::stoi((*it)[2]));
    }
    return true;
  }

  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 500; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  int gnmi_port() const { return gnmi_port_; }
  const std::map<std::string, uint16_t>& bgp_ports() const { return bgp_ports_; }
  std::string gnmi_address() const { return "127.0.0.1:" + std::to_string(gnmi_port_); }

 private:
  pid_t pid_ = -1;
  std::string ready_;
  int gnmi_port_ = 0;
  std::map<std::string, uint16_t> bgp_ports_;
};

// Loom's southbound, configured the way loomd configures it for loom-fabric.
class LoomSide {
 public:
  LoomSide(const loom::v1::Topology& topo, const FabricProcess& fabric,
           bgp::BgpDriverConfig::NnhnMode nnhn = bgp::BgpDriverConfig::NnhnMode::kWhereNeeded)
      : plan_(topo), guard_(boost::asio::make_work_guard(io_)) {
    bgp::SpeakerConfig sc;
    sc.router_id = 0x0a0000fe;
    sc.listen_port = -1;  // Loom dials every leaf.
    speaker_ = std::make_unique<bgp::Speaker>(io_, sc);
    bgp::BgpDriverConfig bc;
    bc.sessions = bgp::LoomPeers(topo, fabric.bgp_ports());
    bc.destination_prefixes = plan_.DestinationPrefixes();
    bc.ignore_non_bgp_parts = true;
    bc.router_ids = bgp::RouterIds(topo);
    bc.egress_leaves = plan_.EgressLeaves();
    bc.nnhn = nnhn;
    sessions_ = bc.sessions.size();
    bgp_ = std::make_unique<bgp::BgpDriver>(io_, speaker_.get(), bc);
    sg::GnmiDriverConfig gc;
    for (const auto& [leaf, port] : fabric.bgp_ports()) {
      gc.devices.push_back({leaf, fabric.gnmi_address(), ""});
      leaves_.push_back(leaf);
    }
    // BGP carries colors, routes and link-bandwidth weights.
    gc.parts = sg::kGnmiDefaultParts & ~sg::Mask(sg::Part::kWeights);
    gnmi_ = std::make_unique<sg::GnmiDriver>(gc);
    thread_ = std::thread([this] { io_.run(); });
    boost::asio::post(io_, [this] { (void)speaker_->Start(); });
    bgp_->Start();
    start_status_ = gnmi_->Start();
  }
  ~LoomSide() {
    gnmi_->Stop();
    std::promise<void> p;
    boost::asio::post(io_, [&] {
      speaker_->Shutdown();
      p.set_value();
    });
    p.get_future().wait();
    guard_.reset();
    io_.stop();
    thread_.join();
  }

  const Status& start_status() const { return start_status_; }
  int Established() {
    std::promise<int> p;
    boost::asio::post(io_, [&] {
      int n = 0;
      for (const bgp::Session* s : speaker_->Sessions()) {
        n += s->state() == bgp::SessionState::kEstablished;
      }
      p.set_value(n);
    });
    return p.get_future().get();
  }
  size_t sessions() const { return sessions_; }
  const std::vector<std::string>& leaves() const { return leaves_; }
  const bgp::PrefixPlan& plan() const { return plan_; }
  bgp::BgpDriver& bgp_driver() { return *bgp_; }
  sg::GnmiDriver& gnmi_driver() { return *gnmi_; }

  static loom::southbound::ApplyResult ApplySync(loom::southbound::Driver& d,
                                                 const loom::v1::DeviceState& s) {
    std::promise<loom::southbound::ApplyResult> p;
    d.Apply(s, [&](loom::southbound::ApplyResult r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }

 private:
  bgp::PrefixPlan plan_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::unique_ptr<bgp::Speaker> speaker_;
  std::unique_ptr<bgp::BgpDriver> bgp_;
  std::unique_ptr<sg::GnmiDriver> gnmi_;
  std::vector<std::string> leaves_;
  size_t sessions_ = 0;
  Status start_status_;
  std::thread thread_;
};

// A plain gNMI client of the emulator's target.
class GnmiClient {
 public:
  explicit GnmiClient(const std::string& address)
      : stub_(
            gnmi::gNMI::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
  }

  // What `device` runs (Get type OPERATIONAL of the config schema, decoded).
  grpc::Status Operational(const std::string& device, sg::PartMask parts,
                           loom::v1::DeviceState* out) {
    return Get(device, parts, gnmi::GetRequest::OPERATIONAL, out);
  }
  // What gNMI Set wrote on `device` (Get type CONFIG, decoded).
  grpc::Status Config(const std::string& device, sg::PartMask parts, loom::v1::DeviceState* out) {
    return Get(device, parts, gnmi::GetRequest::CONFIG, out);
  }
  grpc::Status Get(const std::string& device, sg::PartMask parts, gnmi::GetRequest::DataType type,
                   loom::v1::DeviceState* out) {
    gnmi::GetRequest req = sg::MakeGetRequest(parts, device);
    req.set_type(type);
    gnmi::GetResponse resp;
    grpc::ClientContext ctx;
    grpc::Status st = stub_->Get(&ctx, req, &resp);
    if (!st.ok()) return st;
    out->set_device(device);
    Status s = sg::DecodeGetResponse(resp, out);
    return s.ok() ? grpc::Status::OK
                  : grpc::Status(grpc::StatusCode::INTERNAL, "undecodable: " + s.message());
  }

  // out-octets of an interface (telemetry Get); -1 on error.
  int64_t OutOctets(const std::string& device, const std::string& iface) {
    gnmi::GetRequest req;
    req.mutable_prefix()->set_target(device);
    req.set_encoding(gnmi::JSON_IETF);
    gnmi::Path* p = req.add_path();
    p->add_elem()->set_name("interfaces");
    auto* e = p->add_elem();
    e->set_name("interface");
    (*e->mutable_key())["name"] = iface;
    p->add_elem()->set_name("state");
    p->add_elem()->set_name("counters");
    p->add_elem()->set_name("out-octets");
    gnmi::GetResponse resp;
    grpc::ClientContext ctx;
    if (!stub_->Get(&ctx, req, &resp).ok() || resp.notification_size() != 1 ||
        resp.notification(0).update_size() != 1) {
      return -1;
    }
    return static_cast<int64_t>(resp.notification(0).update(0).val().uint_val());
  }

  grpc::Status Set(const gnmi::SetRequest& req) {
    gnmi::SetResponse resp;
    grpc::ClientContext ctx;
    return stub_->Set(&ctx, req, &resp);
  }

 private:
  std::unique_ptr<gnmi::gNMI::Stub> stub_;
};

}  // namespace loom::wiretest

#endif  // LOOM_TESTS_SOUTHBOUND_WIRE_WIRE_HARNESS_H_
