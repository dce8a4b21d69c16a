// libFuzzer target for the gRPC request handlers of loom.v1 SchedulerService
// and FabricService (api/services/services.cc) on a real Controller with a
// SQLite store, as loomd wires them (topology deploy/examples/topology-small.json,
// ListDevices from the device inventory).
//
// Input: one setup byte, then records (tests/fuzz/fuzz_util.h framing); a
// record's tag selects the method (tag % kTagCount) and its payload is the
// request body, raw bytes as gRPC would hand them to the service: when the
// service takes raw bodies (grpc::ByteBuffer) they go in unparsed, otherwise
// they are parsed as the method's request type first and a body that does not
// parse is skipped (gRPC itself would refuse it). Handlers are called directly
// (grpc::testing::DefaultReactorTestPeer for unary calls; streams get a
// writer that records writes and completes them), the controller's
// io_context is polled until it is idle after every record.
// Setup byte: bit 0 installs a policy first, bit 1 runs change safety in
// approve mode with fabric settings (change plans), bit 2 keeps only a few
// events and request ids (retention pruning, OUT_OF_RANGE watches).
// Pseudo-methods beside the RPCs: InstallPolicy (payload: a PolicySet, what
// loomd --policy does), Tick (the periodic timer), CancelWatchers (clients of
// open streams go away; payload bit 0 picks the order gRPC reports it in:
// clear = the write in flight fails first, set = OnCancel first),
// StallWatchers / ResumeWatchers (clients of open streams stop / start reading:
// writes stay in flight, the bounded queue fills).
//
// Properties: no crash or sanitizer report; every call is answered once the
// controller is idle; a body that is not a valid request, or a request the
// controller must refuse (unknown link, device or job id, bad request id,
// invalid job spec), gets a non-OK status with a message; OK answers are
// consistent with the request (ids, filters, page sizes); stream writes obey
// the request's filters in revision order; every stream finishes once its
// client is gone. LOOM_FUZZ_VERBOSE=1 prints every answer (seed checks).
#include <grpcpp/grpcpp.h>
#include <grpcpp/test/default_reactor_test_peer.h>
#include <prometheus/registry.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "api/services/services.h"
#include "api/topology/topology_io.h"
#include "common/clock.h"
#include "controller/core/controller.h"
#include "controller/core/job_validation.h"
#include "controller/loomd/inventory.h"
#include "controller/store/store.h"
#include "loom/v1/fabric_service.pb.h"
#include "loom/v1/scheduler_service.pb.h"
#include "policy/policy_engine.h"
#include "telemetry/profile.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

namespace v1 = loom::v1;
using loom::Status;
using loom::controller::Controller;
using loom::fuzz::Check;
using loom::fuzz::Finding;
using loom::fuzz::Known;

enum Tag : uint8_t {
  kRegisterJob,
  kUpdateJob,
  kReleaseJob,
  kGetJob,
  kListJobs,
  kWatchJobs,
  kGetTopology,
  kListLinks,
  kGetLink,
  kDrainLink,
  kUndrainLink,
  kWatchEvents,
  kGetDeviceState,
  kListDevices,
  kGetChangePlan,
  kApplyChangePlan,
  kClearChangeQuarantine,
  kInstallPolicy,
  kTick,
  kCancelWatchers,
  kStallWatchers,
  kResumeWatchers,
  kTagCount
};

const char* const kTagNames[kTagCount] = {"RegisterJob",
                                          "UpdateJob",
                                          "ReleaseJob",
                                          "GetJob",
                                          "ListJobs",
                                          "WatchJobs",
                                          "GetTopology",
                                          "ListLinks",
                                          "GetLink",
                                          "DrainLink",
                                          "UndrainLink",
                                          "WatchEvents",
                                          "GetDeviceState",
                                          "ListDevices",
                                          "GetChangePlan",
                                          "ApplyChangePlan",
                                          "ClearChangeQuarantine",
                                          "InstallPolicy",
                                          "Tick",
                                          "CancelWatchers",
                                          "StallWatchers",
                                          "ResumeWatchers"};

constexpr const char* kPolicyJson = R"({
  "colors": [{"color": 1, "spines": ["spine0"]}, {"color": 2, "spines": ["spine1"]}],
  "rules": [{"name": "beta-on-1", "match": {"tenants": ["beta"]},
             "action": {"colors": [1], "backupColor": 2}}],
  "defaultAction": {"isolation": "ISOLATION_SHARED"}
})";

// What every input shares (read-only).
struct Fixture {
  std::shared_ptr<const loom::topology::TopologyIndex> topo;
  loom::telemetry::ProfileSet profiles;
  loom::loomd::Inventory inventory;
  v1::PolicySet policy;
  std::vector<v1::FabricSetting> settings;
};

const Fixture& F() {
  static const Fixture* f = [] {
    auto* x = new Fixture;
    std::string error;
    v1::Topology t;
    if (!loom::topology::LoadTopologyFile(
            std::string(LOOM_SOURCE_DIR) + "/deploy/examples/topology-small.json", &t, &error)) {
      Finding(error);
    }
    x->topo = std::make_shared<const loom::topology::TopologyIndex>(std::move(t));
    if (!loom::telemetry::LoadProfiles({std::string(LOOM_SOURCE_DIR) + "/telemetry/profiles"},
                                       &x->profiles, &error)) {
      Finding(error);
    }
    v1::LoomdConfig config;
    if (!loom::loomd::ResolveInventory(config, x->topo->topology(), x->profiles, &x->inventory,
                                       &error)) {
      Finding(error);
    }
    if (!loom::policy::ParsePolicyJson(kPolicyJson, "fuzz", &x->policy, &error)) Finding(error);
    auto findings = loom::policy::ValidatePolicy(x->policy, *x->topo);
    if (loom::policy::HasErrors(findings)) Finding(loom::policy::FormatFindings(findings));
    v1::FabricSetting s;
    s.set_name_pattern("leaf*");
    auto* th = s.add_thresholds();
    th->set_priority(3);
    th->set_ecn_kmin_bytes(100'000);
    th->set_ecn_kmax_bytes(400'000);
    th->set_ecn_pmax_percent(20);
    x->settings.push_back(s);
    return x;
  }();
  return *f;
}

// --- streams -----------------------------------------------------------------

class Stream {
 public:
  virtual ~Stream() = default;
  // Delivers one completion gRPC would deliver; false when there is none.
  virtual bool Pump() = 0;
  // The client goes away: OnCancel, and the pending write (if any) fails;
  // `write_first` reports the failed write before the cancellation.
  virtual void Cancel(bool write_first) = 0;
  // A stalled client reads nothing: writes stay in flight until it resumes.
  virtual void SetStalled(bool stalled) = 0;
  virtual bool finished() const = 0;
  virtual const char* name() const = 0;
};

// The writer gRPC binds to a server-streaming reactor, for direct calls.
template <class Msg>
class FakeWriter final : public grpc::ServerCallbackWriter<Msg>, public Stream {
 public:
  FakeWriter(const char* name, std::unique_ptr<grpc::CallbackServerContext> ctx,
             grpc::ServerWriteReactor<Msg>* reactor, std::function<void(const Msg&)> on_write,
             std::function<void(const grpc::Status&)> on_finish)
      : name_(name),
        ctx_(std::move(ctx)),
        reactor_(reactor),
        on_write_(std::move(on_write)),
        on_finish_(std::move(on_finish)) {
    Check(reactor_ != nullptr, std::string(name_) + ": handler returned no reactor");
    this->BindReactor(reactor_);
  }
  ~FakeWriter() override {
    // A reactor gRPC never completed is the finding reported by the caller;
    // complete it here so the run can go on (LOOM_FUZZ_KNOWN).
    if (!done_) {
      done_ = true;
      reactor_->OnDone();
    }
  }

  void Finish(grpc::Status s) override {
    Check(!finished_, std::string(name_) + ": Finish called twice");
    Check(!write_pending_, std::string(name_) + ": Finish called with a write in flight");
    finished_ = true;
    if (on_finish_) on_finish_(s);
  }
  void SendInitialMetadata() override {}
  void Write(const Msg* m, grpc::WriteOptions) override {
    Check(!finished_, std::string(name_) + ": Write after Finish");
    Check(!write_pending_, std::string(name_) + ": a second Write before OnWriteDone");
    write_pending_ = true;
    if (on_write_) on_write_(*m);
  }
  void WriteAndFinish(const Msg* m, grpc::WriteOptions o, grpc::Status s) override {
    Write(m, o);
    write_pending_ = false;
    Finish(std::move(s));
  }

  bool Pump() override {
    if (done_) return false;
    if (write_pending_ && stalled_ && !cancelled_) return false;
    if (write_pending_) {
      write_pending_ = false;
      reactor_->OnWriteDone(!cancelled_);
      return true;
    }
    if (finished_) {
      done_ = true;
      reactor_->OnDone();  // The reactor deletes itself.
      return true;
    }
    return false;
  }
  void Cancel(bool write_first) override {
    if (done_ || cancelled_) return;
    cancelled_ = true;
    if (write_first && write_pending_) {
      write_pending_ = false;
      reactor_->OnWriteDone(false);
    }
    reactor_->OnCancel();
  }
  void SetStalled(bool stalled) override { stalled_ = stalled; }
  bool finished() const override { return finished_; }
  const char* name() const override { return name_; }

 private:
  grpc::internal::ServerReactor* reactor() override { return reactor_; }
  void CallOnDone() override {}

  const char* name_;
  std::unique_ptr<grpc::CallbackServerContext> ctx_;
  grpc::ServerWriteReactor<Msg>* reactor_;
  std::function<void(const Msg&)> on_write_;
  std::function<void(const grpc::Status&)> on_finish_;
  bool write_pending_ = false;
  bool finished_ = false;
  bool cancelled_ = false;
  bool stalled_ = false;
  bool done_ = false;
};

// --- one controller per input --------------------------------------------------

class Harness {
 public:
  explicit Harness(uint8_t setup)
      : work_(boost::asio::make_work_guard(io_)), db_(loom::fuzz::ScratchDir() + "/handlers.db") {
    const Fixture& f = F();
    RemoveDb();
    Status st;
    store_ = loom::controller::SqliteStore::Open(db_, &st);
    Check(store_ != nullptr, "cannot open the store: " + st.message());
    loom::controller::ControllerOptions o;
    if (setup & 2) {
      o.change_mode = "approve";
      o.change_safety.enabled = true;
      o.change_safety.approve = true;
      o.fabric_settings = f.settings;
    }
    if (setup & 4) {
      o.event_retention = 8;
      o.request_retention = 4;
    }
    controller_ = std::make_unique<Controller>(io_, clock_, *store_, f.topo, registry_, o);
    st = controller_->Start();
    Check(st.ok(), "controller start on an empty store: " + st.message());
    loom::api::ServiceOptions so;
    so.watch_buffer_bytes = 4096;
    so.list_devices = [&f](const std::string& device) {
      return loom::loomd::DeviceStatuses(f.inventory, f.topo->topology(), {}, 0, false, device);
    };
    fabric_ = std::make_unique<loom::api::FabricServiceImpl>(*controller_, so);
    scheduler_ = std::make_unique<loom::api::SchedulerServiceImpl>(*controller_, so);
    if (setup & 1) InstallPolicy(f.policy.SerializeAsString());
  }

  ~Harness() {
    // Clients go away; every stream must finish (then gRPC calls OnDone).
    for (auto& s : streams_) s->Cancel(/*write_first=*/true);
    Drain();
    for (auto& s : streams_) {
      if (!s->finished() && !Known("watch-cancel")) {
        Finding(std::string(s->name()) +
                ": the stream never called Finish after its client went "
                "away, so gRPC never calls OnDone");
      }
    }
    streams_.clear();
    Drain();
    scheduler_.reset();
    fabric_.reset();
    controller_.reset();
    store_.reset();
    RemoveDb();
  }

  // Runs the controller (and stream completions) until nothing is left to do.
  void Drain() {
    for (int i = 0; i < 1'000'000; ++i) {
      size_t n = io_.poll();
      bool progress = false;
      for (auto& s : streams_) progress |= s->Pump();
      if (n == 0 && !progress) return;
    }
    Finding("the controller never goes idle");
  }

  void Run(uint8_t tag, const std::string& body);

 private:
  struct Answer {
    bool called = false;  // false: the body does not parse and the service is typed
    bool parsed = false;
    grpc::Status status;
  };

  void RemoveDb() {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      std::error_code ec;
      std::filesystem::remove(db_ + suffix, ec);
    }
  }

  // Calls a unary handler the way gRPC does, waits for its answer.
  template <class Req, class Resp, class Svc, class Q, class P>
  Answer Unary(Svc& svc,
               grpc::ServerUnaryReactor* (Svc::*fn)(grpc::CallbackServerContext*, const Q*, P*),
               const char* name, const std::string& body, Req* req, Resp* resp) {
    Answer a;
    a.parsed = req->ParseFromString(body);
    constexpr bool raw = std::is_same_v<Q, grpc::ByteBuffer>;
    if (!raw && !a.parsed) return a;
    a.called = true;
    grpc::CallbackServerContext ctx;
    bool finished = false;
    grpc::testing::DefaultReactorTestPeer peer(&ctx, [&](grpc::Status s) {
      Check(!finished, std::string(name) + ": answered twice");
      finished = true;
      a.status = std::move(s);
    });
    P out;
    if constexpr (raw) {
      grpc::Slice slice(body.data(), body.size());
      grpc::ByteBuffer in(&slice, 1);
      (svc.*fn)(&ctx, &in, &out);
      Drain();
      if (finished && a.status.ok()) {
        Check(grpc::SerializationTraits<Resp>::Deserialize(&out, resp).ok(),
              std::string(name) + ": OK with a response that does not parse");
      }
    } else {
      (svc.*fn)(&ctx, req, &out);
      Drain();
      if (finished && a.status.ok()) *resp = out;
    }
    Check(finished, std::string(name) + ": never answered");
    CheckStatus(name, a);
    return a;
  }

  static void CheckStatus(const char* name, const Answer& a) {
    const int code = static_cast<int>(a.status.error_code());
    static const bool verbose = std::getenv("LOOM_FUZZ_VERBOSE") != nullptr;
    if (verbose) {
      std::fprintf(stderr, "%s: %d %s\n", name, code, a.status.error_message().c_str());
    }
    Check(code >= 0 && code <= 16, std::string(name) + ": status code " + std::to_string(code));
    if (!a.parsed) {
      Check(!a.status.ok(), std::string(name) + ": OK for a body that is not a request");
    }
    if (!a.status.ok()) {
      Check(!a.status.error_message().empty(),
            std::string(name) + ": error " + std::to_string(code) + " without a message");
    }
  }

  // Starts a server stream the way gRPC does; it lives until the input ends.
  template <class Req, class Resp, class Svc, class Q, class M>
  void Watch(Svc& svc,
             grpc::ServerWriteReactor<M>* (Svc::*fn)(grpc::CallbackServerContext*, const Q*),
             const char* name, const std::string& body,
             std::function<void(const Req&, const Resp&)> check) {
    auto req = std::make_shared<Req>();
    const bool parsed = req->ParseFromString(body);
    constexpr bool raw = std::is_same_v<Q, grpc::ByteBuffer>;
    if (!raw && !parsed) return;
    auto ctx = std::make_unique<grpc::CallbackServerContext>();
    grpc::ServerWriteReactor<M>* reactor;
    if constexpr (raw) {
      grpc::Slice slice(body.data(), body.size());
      grpc::ByteBuffer in(&slice, 1);
      reactor = (svc.*fn)(ctx.get(), &in);
    } else {
      reactor = (svc.*fn)(ctx.get(), req.get());
    }
    auto on_write = [name, req, parsed, check](const M& m) {
      Check(parsed, std::string(name) + ": wrote to a stream whose request does not parse");
      Resp resp;
      if constexpr (std::is_same_v<M, grpc::ByteBuffer>) {
        grpc::ByteBuffer copy(m);
        Check(grpc::SerializationTraits<Resp>::Deserialize(&copy, &resp).ok(),
              std::string(name) + ": wrote a response that does not parse");
      } else {
        resp = m;
      }
      check(*req, resp);
    };
    auto on_finish = [name, parsed](const grpc::Status& s) {
      Answer a;
      a.called = true;
      a.parsed = parsed;
      a.status = s;
      CheckStatus(name, a);
    };
    streams_.push_back(
        std::make_unique<FakeWriter<M>>(name, std::move(ctx), reactor, on_write, on_finish));
  }

  void InstallPolicy(const std::string& body) {
    v1::PolicySet set;
    if (!set.ParseFromString(body)) return;
    bool answered = false;
    controller_->InstallPolicy(set, [&](Status s, loom::controller::PolicyInstallResult r) {
      answered = true;
      const bool errors = loom::policy::HasErrors(loom::policy::ValidatePolicy(set, *F().topo));
      Check(s.ok() != errors, "InstallPolicy: status " + s.message() + " for a set with" +
                                  (errors ? "" : "out") + " errors");
      (void)r;
    });
    Drain();
    Check(answered, "InstallPolicy: never answered");
  }

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  loom::VirtualClock clock_{0};
  prometheus::Registry registry_;
  std::string db_;
  std::unique_ptr<loom::controller::SqliteStore> store_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<loom::api::FabricServiceImpl> fabric_;
  std::unique_ptr<loom::api::SchedulerServiceImpl> scheduler_;
  std::vector<std::unique_ptr<Stream>> streams_;
};

using Fab = loom::api::FabricServiceImpl;
using Sch = loom::api::SchedulerServiceImpl;

void Harness::Run(uint8_t tag, const std::string& body) {
  const auto& topo = *F().topo;
  const char* name = kTagNames[tag];
  auto must = [name](bool ok, const std::string& what) {
    Check(ok, std::string(name) + " answered OK but " + what);
  };
  auto valid_id = [](const std::string& id) {
    return loom::controller::ValidateRequestId(id).ok();
  };
  switch (tag) {
    case kRegisterJob: {
      v1::RegisterJobRequest q;
      v1::RegisterJobResponse r;
      auto a = Unary(*scheduler_, &Sch::RegisterJob, name, body, &q, &r);
      if (!a.called || !a.status.ok()) break;
      must(valid_id(q.request_id()), "the request id is invalid");
      must(q.has_job() && loom::controller::ValidateJobSpec(q.job(), topo).ok(),
           "the job spec is invalid");
      must(r.job().job_id() == q.job().job_id(), "the response names another job");
      break;
    }
    case kUpdateJob: {
      v1::UpdateJobRequest q;
      v1::UpdateJobResponse r;
      auto a = Unary(*scheduler_, &Sch::UpdateJob, name, body, &q, &r);
      if (!a.called || !a.status.ok()) break;
      must(valid_id(q.request_id()), "the request id is invalid");
      must(q.has_job() && loom::controller::ValidateJobSpec(q.job(), topo).ok(),
           "the job spec is invalid");
      must(r.job().job_id() == q.job().job_id(), "the response names another job");
      break;
    }
    case kReleaseJob: {
      v1::ReleaseJobRequest q;
      v1::ReleaseJobResponse r;
      auto a = Unary(*scheduler_, &Sch::ReleaseJob, name, body, &q, &r);
      if (!a.called || !a.status.ok()) break;
      must(valid_id(q.request_id()), "the request id is invalid");
      must(!q.job_id().empty(), "the job id is empty");
      break;
    }
    case kGetJob: {
      v1::GetJobRequest q;
      v1::GetJobResponse r;
      auto a = Unary(*scheduler_, &Sch::GetJob, name, body, &q, &r);
      if (!a.called || !a.status.ok()) break;
      must(r.job().job_id() == q.job_id(), "the response names another job");
      break;
    }
    case kListJobs: {
      v1::ListJobsRequest q;
      v1::ListJobsResponse r;
      auto a = Unary(*scheduler_, &Sch::ListJobs, name, body, &q, &r);
      if (!a.called || !a.status.ok()) break;
      must(q.page_size() <= 0 || r.jobs_size() <= q.page_size(), "the page is too long");
      for (const auto& j : r.jobs()) {
        must(q.tenant().empty() || j.tenant() == q.tenant(), "it lists another tenant's job");
      }
      for (int i = 1; i < r.jobs_size(); ++i) {
        must(r.jobs(i - 1).job_id() < r.jobs(i).job_id(), "jobs are not ordered by id");
      }
      break;
    }
    case kWatchJobs:
      Watch<v1::WatchJobsRequest, v1::WatchJobsResponse>(
          *scheduler_, &Sch::WatchJobs, name, body,
          [last = std::make_shared<uint64_t>(0)](const v1::WatchJobsRequest& q,
                                                 const v1::WatchJobsResponse& r) {
            Check(q.tenant().empty() || r.job().tenant() == q.tenant(),
                  "WatchJobs: wrote another tenant's job");
            Check(r.change() != v1::JOB_CHANGE_UNSPECIFIED, "WatchJobs: change unspecified");
            Check(r.revision() > *last, "WatchJobs: revisions out of order");
            *last = r.revision();
          });
      break;
    case kGetTopology: {
      v1::GetTopologyRequest q;
      v1::GetTopologyResponse r;
      auto a = Unary(*fabric_, &Fab::GetTopology, name, body, &q, &r);
      if (!a.called || !a.status.ok()) break;
      must(r.topology().links_size() == topo.topology().links_size(), "the topology differs");
      break;
    }
    case kListLinks: {
      v1::ListLinksRequest q;
      v1::ListLinksResponse r;
      auto a = Unary(*fabric_, &Fab::ListLinks, name, body, &q, &r);
      if (!a.called || !a.status.ok()) break;
      must(q.page_size() <= 0 || r.links_size() <= q.page_size(), "the page is too long");
      for (const auto& l : r.links()) {
        must(topo.FindLink(l.link().id()) != nullptr, "it lists an unknown link");
        must(!q.drained_only() || l.admin_state() == v1::LINK_ADMIN_STATE_DRAINED,
             "drained_only lists a link in service");
        must(q.device().empty() || l.link().a().device() == q.device() ||
                 l.link().b().device() == q.device(),
             "it lists a link of another device");
      }
      break;
    }
    case kGetLink: {
      v1::GetLinkRequest q;
      v1::GetLinkResponse r;
      auto a = Unary(*fabric_, &Fab::GetLink, name, body, &q, &r);
      if (!a.called || !a.status.ok()) break;
      must(topo.FindLink(q.link_id()) != nullptr, "the link is not in the topology");
      must(r.link().link().id() == q.link_id(), "the response names another link");
      break;
    }
    case kDrainLink: {
      v1::DrainLinkRequest q;
      v1::DrainLinkResponse r;
      auto a = Unary(*fabric_, &Fab::DrainLink, name, body, &q, &r);
      if (!a.called || !a.status.ok()) break;
      must(valid_id(q.request_id()), "the request id is invalid");
      must(topo.FindLink(q.link_id()) != nullptr, "the link is not in the topology");
      must(!q.reason().empty(), "no reason was given");
      must(r.link().admin_state() == v1::LINK_ADMIN_STATE_DRAINED, "the link is not drained");
      break;
    }
    case kUndrainLink: {
      v1::UndrainLinkRequest q;
      v1::UndrainLinkResponse r;
      auto a = Unary(*fabric_, &Fab::UndrainLink, name, body, &q, &r);
      if (!a.called || !a.status.ok()) break;
      must(valid_id(q.request_id()), "the request id is invalid");
      must(topo.FindLink(q.link_id()) != nullptr, "the link is not in the topology");
      break;
    }
    case kWatchEvents:
      Watch<v1::WatchEventsRequest, v1::WatchEventsResponse>(
          *fabric_, &Fab::WatchEvents, name, body,
          [last = std::make_shared<uint64_t>(0)](const v1::WatchEventsRequest& q,
                                                 const v1::WatchEventsResponse& r) {
            const auto& ev = r.event();
            bool type_ok = q.types().empty();
            for (int t : q.types()) type_ok |= t == ev.type();
            Check(type_ok, "WatchEvents: wrote an event of a type not asked for");
            Check(q.subject().empty() || ev.subject() == q.subject(),
                  "WatchEvents: wrote an event of another subject");
            Check(ev.revision() > *last, "WatchEvents: event " + std::to_string(ev.revision()) +
                                             " written after " + std::to_string(*last));
            *last = ev.revision();
          });
      break;
    case kGetDeviceState: {
      v1::GetDeviceStateRequest q;
      v1::GetDeviceStateResponse r;
      auto a = Unary(*fabric_, &Fab::GetDeviceState, name, body, &q, &r);
      if (!a.called || !a.status.ok()) break;
      must(topo.FindDevice(q.device()) != nullptr, "the device is not in the topology");
      must(v1::ConfigFormat_IsValid(q.format()), "the format is unknown");
      break;
    }
    case kListDevices: {
      v1::ListDevicesRequest q;
      v1::ListDevicesResponse r;
      auto a = Unary(*fabric_, &Fab::ListDevices, name, body, &q, &r);
      if (!a.called || !a.status.ok()) break;
      must(q.device().empty() || topo.FindDevice(q.device()) != nullptr,
           "the device is not in the topology");
      break;
    }
    case kGetChangePlan: {
      v1::GetChangePlanRequest q;
      v1::GetChangePlanResponse r;
      Unary(*fabric_, &Fab::GetChangePlan, name, body, &q, &r);
      break;
    }
    case kApplyChangePlan: {
      v1::ApplyChangePlanRequest q;
      v1::ApplyChangePlanResponse r;
      auto a = Unary(*fabric_, &Fab::ApplyChangePlan, name, body, &q, &r);
      if (!a.called || !a.status.ok()) break;
      must(q.revision() != 0, "no revision was named");
      break;
    }
    case kClearChangeQuarantine: {
      v1::ClearChangeQuarantineRequest q;
      v1::ClearChangeQuarantineResponse r;
      Unary(*fabric_, &Fab::ClearChangeQuarantine, name, body, &q, &r);
      break;
    }
    case kInstallPolicy:
      InstallPolicy(body);
      break;
    case kTick:
      clock_.Advance(static_cast<loom::TimeNs>(body.empty() ? 1 : 1 + uint8_t(body[0])) * 100 *
                     loom::kNsPerMs);
      controller_->Tick();
      Drain();
      break;
    case kStallWatchers:
    case kResumeWatchers:
      for (auto& s : streams_) s->SetStalled(tag == kStallWatchers);
      Drain();
      break;
    case kCancelWatchers: {
      const bool write_first = body.empty() || (body[0] & 1) == 0;
      for (auto& s : streams_) s->Cancel(write_first);
      Drain();
      for (auto& s : streams_) {
        if (!s->finished() && !Known("watch-cancel")) {
          Finding(
              std::string(s->name()) +
              ": the stream never called Finish after its client went away (" +
              (write_first ? "write failed, then OnCancel" : "OnCancel, then the write failed") +
              "), so gRPC never calls OnDone: the reactor and the call leak and "
              "Server::Shutdown waits for it");
        }
      }
      streams_.clear();
      Drain();
      break;
    }
    default:
      break;
  }
}

// --- seeds -------------------------------------------------------------------

std::string Rec(Tag tag, const google::protobuf::Message& m) {
  std::string out;
  loom::fuzz::AddRecord(&out, tag, m.SerializeAsString());
  return out;
}

v1::Job SeedJob(const std::string& id, const std::string& tenant,
                std::initializer_list<const char*> endpoints) {
  v1::Job j;
  j.set_tenant(tenant);
  j.set_job_id(id);
  for (const char* e : endpoints) j.add_endpoints(e);
  j.set_collective(v1::COLLECTIVE_PATTERN_RING_ALLREDUCE);
  return j;
}

void WriteSeeds() {
  const std::string link = "leaf0:Ethernet0--spine0:Ethernet0";
  v1::RegisterJobRequest reg;
  *reg.mutable_job() = SeedJob("ring-small", "acme",
                               {"host000-gpu0", "host002-gpu0", "host001-gpu1", "host003-gpu1"});
  reg.set_request_id("req-1");
  v1::RegisterJobRequest reg_beta;
  *reg_beta.mutable_job() = SeedJob("beta-a2a", "beta", {"host000-gpu1", "host003-gpu0"});
  reg_beta.mutable_job()->set_collective(v1::COLLECTIVE_PATTERN_ALL_TO_ALL);
  reg_beta.mutable_job()->set_priority(5);
  v1::UpdateJobRequest upd;
  *upd.mutable_job() = reg.job();
  upd.mutable_job()->add_endpoints("host002-gpu1");
  upd.set_request_id("req-2");
  v1::GetJobRequest get;
  get.set_job_id("ring-small");
  v1::ListJobsRequest list;
  list.set_tenant("acme");
  list.set_page_size(1);
  v1::ReleaseJobRequest rel;
  rel.set_job_id("ring-small");
  rel.set_request_id("req-3");
  v1::DrainLinkRequest drain;
  drain.set_link_id(link);
  drain.set_reason("optics errors");
  drain.set_request_id("req-4");
  v1::UndrainLinkRequest undrain;
  undrain.set_link_id(link);
  v1::GetLinkRequest getlink;
  getlink.set_link_id(link);
  v1::ListLinksRequest links;
  links.set_device("leaf0");
  links.set_page_size(3);
  v1::ListLinksRequest drained;
  drained.set_drained_only(true);
  v1::WatchEventsRequest watch_all;
  watch_all.set_start_revision(1);
  v1::WatchEventsRequest watch_replay;
  watch_replay.set_start_revision(1);
  watch_replay.set_replay_only(true);
  watch_replay.add_types(v1::EVENT_TYPE_JOB_REGISTERED);
  v1::WatchJobsRequest watch_jobs;
  watch_jobs.set_tenant("acme");
  v1::GetDeviceStateRequest state;
  state.set_device("leaf0");
  state.set_format(v1::CONFIG_FORMAT_SONIC);
  v1::GetDeviceStateRequest state_adapter;
  state_adapter.set_device("spine1");
  state_adapter.set_adapter("openconfig");
  state_adapter.set_format(v1::CONFIG_FORMAT_JUNOS);
  v1::ListDevicesRequest devices;
  v1::ListDevicesRequest device;
  device.set_device("leaf1");
  v1::ApplyChangePlanRequest apply;
  apply.set_revision(2);
  v1::ClearChangeQuarantineRequest clear;
  clear.set_revision(2);
  v1::PolicySet policy = F().policy;
  v1::RegisterJobRequest bad_id = reg;
  bad_id.set_request_id(std::string("bad\x01id"));
  v1::RegisterJobRequest no_job;
  no_job.set_request_id("req-9");

  std::string empty;
  auto seed = [](const std::string& name, uint8_t setup, std::initializer_list<std::string> recs) {
    std::string s(1, static_cast<char>(setup));
    for (const auto& r : recs) s += r;
    loom::fuzz::WriteSeed(name, s);
  };
  std::string tick;
  loom::fuzz::AddRecord(&tick, kTick, std::string(1, '\x0a'));
  std::string cancel;
  loom::fuzz::AddRecord(&cancel, kCancelWatchers, std::string(1, '\0'));

  seed("job_lifecycle", 0,
       {Rec(kRegisterJob, reg), Rec(kGetJob, get), Rec(kListJobs, list), Rec(kUpdateJob, upd),
        Rec(kRegisterJob, reg), Rec(kReleaseJob, rel), Rec(kGetJob, get)});
  seed("job_policy", 1,
       {Rec(kRegisterJob, reg_beta), Rec(kRegisterJob, reg), Rec(kInstallPolicy, policy),
        Rec(kListJobs, v1::ListJobsRequest()), tick});
  seed("drain_cycle", 0,
       {Rec(kRegisterJob, reg), Rec(kDrainLink, drain), Rec(kDrainLink, drain),
        Rec(kListLinks, drained), Rec(kGetLink, getlink), Rec(kUndrainLink, undrain),
        Rec(kListLinks, links)});
  seed("watch_follow", 0,
       {Rec(kWatchEvents, watch_all), Rec(kWatchJobs, watch_jobs), Rec(kRegisterJob, reg),
        Rec(kDrainLink, drain), Rec(kUpdateJob, upd), cancel, Rec(kReleaseJob, rel)});
  std::string stall, resume;
  loom::fuzz::AddRecord(&stall, kStallWatchers, "");
  loom::fuzz::AddRecord(&resume, kResumeWatchers, "");
  v1::RegisterJobRequest more = reg_beta;
  more.mutable_job()->set_job_id("beta-2");
  v1::ReleaseJobRequest rel_beta;
  rel_beta.set_job_id("beta-a2a");
  seed("watch_slow_client", 0,
       {Rec(kWatchEvents, watch_all), Rec(kWatchJobs, v1::WatchJobsRequest()), stall,
        Rec(kRegisterJob, reg), Rec(kRegisterJob, reg_beta), Rec(kDrainLink, drain),
        Rec(kUndrainLink, undrain), Rec(kRegisterJob, more), Rec(kReleaseJob, rel_beta),
        Rec(kReleaseJob, rel), Rec(kWatchEvents, watch_all), resume, Rec(kUpdateJob, upd)});
  seed("watch_stalled_client_leaves", 0,
       {Rec(kWatchEvents, watch_all), stall, Rec(kRegisterJob, reg), cancel,
        Rec(kRegisterJob, reg_beta)});
  // The client leaves while a write is in flight and gRPC reports OnCancel first
  // (a stream that then never finished kept Server::Shutdown waiting; fixed in 68b5473).
  std::string cancel_first;
  loom::fuzz::AddRecord(&cancel_first, kCancelWatchers, std::string(1, '\x01'));
  seed("watch_cancel_during_write", 0,
       {Rec(kWatchEvents, watch_all), Rec(kWatchJobs, v1::WatchJobsRequest()), stall,
        Rec(kRegisterJob, reg), cancel_first, Rec(kRegisterJob, reg_beta)});
  seed("watch_replay_retention", 4,
       {Rec(kRegisterJob, reg), Rec(kRegisterJob, reg_beta), Rec(kDrainLink, drain),
        Rec(kUndrainLink, undrain), Rec(kReleaseJob, rel), Rec(kWatchEvents, watch_replay),
        Rec(kWatchEvents, watch_all), tick});
  seed("device_state", 0,
       {Rec(kRegisterJob, reg), tick, Rec(kGetDeviceState, state),
        Rec(kGetDeviceState, state_adapter), Rec(kListDevices, devices), Rec(kListDevices, device),
        Rec(kGetTopology, v1::GetTopologyRequest())});
  seed("change_plan_approve", 2,
       {tick, Rec(kGetChangePlan, v1::GetChangePlanRequest()), Rec(kApplyChangePlan, apply), tick,
        Rec(kClearChangeQuarantine, clear), Rec(kGetChangePlan, v1::GetChangePlanRequest())});
  seed("invalid_requests", 0,
       {Rec(kRegisterJob, bad_id), Rec(kRegisterJob, no_job), Rec(kGetLink, v1::GetLinkRequest()),
        Rec(kApplyChangePlan, v1::ApplyChangePlanRequest()),
        Rec(kGetDeviceState, v1::GetDeviceStateRequest())});
  std::string garbage;
  loom::fuzz::AddRecord(&garbage, kDrainLink, std::string("\x0a\xff\xff\xff", 4));
  loom::fuzz::AddRecord(&garbage, kWatchEvents, std::string("\x12\x05\x80", 3));
  seed("unparseable_bodies", 0, {garbage});
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  loom::fuzz::QuietLogs();
  F();
  if (loom::fuzz::SeedDir() != nullptr) {
    WriteSeeds();
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  loom::fuzz::Reader in(data, size);
  Harness h(in.Byte());
  uint8_t tag;
  std::string body;
  int records = 0;
  while (records++ < 64 && in.Next(&tag, &body)) {
    h.Run(static_cast<uint8_t>(tag % kTagCount), body);
  }
  return 0;
}
