// loom-nic-agent: a fake sysfs tree in a temp dir, the agent on port 0, and a
// gRPC client subscribing as Loom's collector does (host profile paths,
// SAMPLE 100 ms, ON_CHANGE oper-status). Waits are bounded polls on received
// data; nothing asserts timing.
#include "telemetry/nic_agent/nic_agent.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gnmi/gnmi.grpc.pb.h"
#include "telemetry/path.h"
#include "telemetry/profile.h"

namespace loom::telemetry {
namespace {

namespace fs = std::filesystem;

constexpr char kCounters[] = "/interfaces/interface[name=*]/state/counters";
constexpr char kOper[] = "/interfaces/interface[name=*]/state/oper-status";
constexpr char kRoce[] = "loom:/nic/interfaces/interface[name=*]/roce/state";

// A sysfs tree with one or more NICs under a fresh temp dir.
class FakeSysfs {
 public:
  FakeSysfs() {
    root_ = fs::temp_directory_path() /
            ("loom-nic-agent-test-" + std::to_string(::getpid()) + "-" + std::to_string(next_++));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~FakeSysfs() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string root() const { return root_.string(); }

  void Write(const std::string& rel, const std::string& content) {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    const fs::path tmp = p.string() + ".tmp";
    std::ofstream(tmp) << content;
    fs::rename(tmp, p);  // Readers see the old or the new content, never a torn one.
  }
  void Remove(const std::string& rel) { fs::remove(root_ / rel); }

  // A NIC as mlx5 + its netdev expose it. rp_cnp_ignored is absent on
  // purpose (older firmware lacks counters; the agent must not invent them).
  void AddNic(const std::string& rdma, const std::string& netdev, uint64_t base) {
    const std::string hw = "class/infiniband/" + rdma + "/ports/1/hw_counters/";
    Write(hw + "np_ecn_marked_roce_packets", std::to_string(base + 1) + "\n");
    Write(hw + "np_cnp_sent", std::to_string(base + 2) + "\n");
    Write(hw + "rp_cnp_handled", std::to_string(base + 3) + "\n");
    Write(hw + "out_of_sequence", std::to_string(base + 4) + "\n");
    Write(hw + "packet_seq_err", std::to_string(base + 5) + "\n");
    Write(hw + "local_ack_timeout_err", std::to_string(base + 6) + "\n");
    const std::string st = "class/net/" + netdev + "/statistics/";
    const char* names[] = {"rx_bytes",   "tx_bytes",   "rx_packets", "tx_packets",
                           "rx_dropped", "tx_dropped", "rx_errors",  "tx_errors"};
    uint64_t v = base + 100;
    for (const char* n : names) Write(st + n, std::to_string(v++) + "\n");
    Write("class/net/" + netdev + "/operstate", "up\n");
  }

 private:
  static inline int next_ = 0;
  fs::path root_;
};

// Polls `cond` until it holds or a generous deadline passes (never asserts
// timing).
bool WaitFor(const std::function<bool()>& cond) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

// A Subscribe stream read on its own thread.
class Subscriber {
 public:
  Subscriber(int port, const gnmi::SubscribeRequest& request) {
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials());
    stub_ = gnmi::gNMI::NewStub(channel_);
    stream_ = stub_->Subscribe(&ctx_);
    stream_->Write(request);
    reader_ = std::thread([this] {
      gnmi::SubscribeResponse r;
      while (stream_->Read(&r)) {
        std::lock_guard<std::mutex> lock(mu_);
        responses_.push_back(r);
      }
      grpc::Status s = stream_->Finish();
      std::lock_guard<std::mutex> lock(mu_);
      status_ = s;
      done_ = true;
    });
  }
  ~Subscriber() {
    ctx_.TryCancel();
    reader_.join();
  }

  std::vector<gnmi::SubscribeResponse> responses() {
    std::lock_guard<std::mutex> lock(mu_);
    return responses_;
  }
  bool done() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  grpc::Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }
  bool synced() {
    for (const auto& r : responses()) {
      if (r.sync_response()) return true;
    }
    return false;
  }
  // Every update as (target@path text -> value text), latest wins; only
  // notifications after the first `skip` responses.
  std::map<std::string, std::string> Values(size_t skip = 0) {
    std::map<std::string, std::string> out;
    const auto rs = responses();
    for (size_t i = skip; i < rs.size(); ++i) {
      if (!rs[i].has_update()) continue;
      const gnmi::Notification& n = rs[i].update();
      for (const gnmi::Update& u : n.update()) {
        const gnmi::Path p = JoinPath(n.prefix(), u.path());
        const auto& v = u.val();
        out[FormatPath(p)] =  // "target@origin:/path"
            v.has_uint_val() ? std::to_string(v.uint_val()) : v.string_val();
      }
    }
    return out;
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<gnmi::gNMI::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<gnmi::SubscribeRequest, gnmi::SubscribeResponse>>
      stream_;
  std::thread reader_;
  std::mutex mu_;
  std::vector<gnmi::SubscribeResponse> responses_;
  grpc::Status status_;
  bool done_ = false;
};

struct Sub {
  std::string path;
  gnmi::SubscriptionMode mode;
  uint64_t interval_ns;
};

gnmi::SubscribeRequest Request(const std::string& target, const std::vector<Sub>& subs,
                               gnmi::SubscriptionList::Mode mode = gnmi::SubscriptionList::STREAM,
                               gnmi::Encoding encoding = gnmi::PROTO) {
  gnmi::SubscribeRequest req;
  gnmi::SubscriptionList* list = req.mutable_subscribe();
  list->mutable_prefix()->set_target(target);
  list->set_mode(mode);
  list->set_encoding(encoding);
  for (const Sub& s : subs) {
    gnmi::Subscription* sub = list->add_subscription();
    EXPECT_TRUE(ParsePath(s.path, sub->mutable_path()).ok()) << s.path;
    sub->set_mode(s.mode);
    sub->set_sample_interval(s.interval_ns);
  }
  return req;
}

// The host profile's subscription, as the collector sends it.
gnmi::SubscribeRequest HostProfileRequest(const std::string& target) {
  return Request(target, {{kCounters, gnmi::SAMPLE, 100'000'000},
                          {kOper, gnmi::ON_CHANGE, 0},
                          {kRoce, gnmi::SAMPLE, 100'000'000}});
}

class NicAgentTest : public ::testing::Test {
 protected:
  void StartAgent(std::vector<std::string> specs) {
    NicAgentOptions o;
    o.sysfs_root = sys_.root();
    for (const std::string& text : specs) {
      NicSpec n;
      ASSERT_TRUE(ParseNicSpec(text, &n).ok()) << text;
      o.nics.push_back(n);
    }
    agent_ = std::make_unique<NicAgent>(o);
    const Status s = agent_->Start();
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_GT(agent_->port(), 0);
  }
  void TearDown() override {
    if (agent_) agent_->Stop();
  }

  FakeSysfs sys_;
  std::unique_ptr<NicAgent> agent_;
};

const std::string kNic0 = "host0-nic0@";
const std::string kRocePrefix = "loom:/nic/interfaces/interface[name=eth0]/roce/state/";
const std::string kCtrPrefix = "/interfaces/interface[name=eth0]/state/counters/";

TEST(NicSpecTest, ParsesDeviceRdmaPortNetdevAndOptionalIfname) {
  NicSpec n;
  ASSERT_TRUE(ParseNicSpec("host07-nic0=mlx5_0:1:ens1f0np0:eth0", &n).ok());
  EXPECT_EQ(n.device_id, "host07-nic0");
  EXPECT_EQ(n.rdma_device, "mlx5_0");
  EXPECT_EQ(n.port, 1);
  EXPECT_EQ(n.netdev, "ens1f0np0");
  EXPECT_EQ(n.ifname, "eth0");
  ASSERT_TRUE(ParseNicSpec("h-nic1=mlx5_1:2:ens2", &n).ok());
  EXPECT_EQ(n.ifname, "ens2");
  EXPECT_EQ(n.port, 2);
  EXPECT_FALSE(ParseNicSpec("mlx5_0:1:eth0", &n).ok());
  EXPECT_FALSE(ParseNicSpec("=mlx5_0:1:eth0", &n).ok());
  EXPECT_FALSE(ParseNicSpec("d=mlx5_0:x:eth0", &n).ok());
  EXPECT_FALSE(ParseNicSpec("d=mlx5_0:1", &n).ok());
  EXPECT_FALSE(ParseNicSpec("d=../x:1:eth0", &n).ok());
  EXPECT_FALSE(ParseNicSpec("d=mlx5_0:1:eth0:a:b", &n).ok());
}

TEST(SysfsNicReaderTest, ServesPresentFilesOnlyAndSkipsGarbledOnes) {
  FakeSysfs sys;
  sys.AddNic("mlx5_0", "ens1", 1000);
  sys.Write("class/infiniband/mlx5_0/ports/1/hw_counters/out_of_sequence", "not a number\n");
  sys.Write("class/net/ens1/operstate", "lowerlayerdown\n");
  sys.Remove("class/infiniband/mlx5_0/ports/1/hw_counters/packet_seq_err");
  fs::create_directory(fs::path(sys.root()) /
                       "class/infiniband/mlx5_0/ports/1/hw_counters/packet_seq_err");  // EISDIR
  NicSpec n;
  ASSERT_TRUE(ParseNicSpec("host0-nic0=mlx5_0:1:ens1:eth0", &n).ok());
  SysfsNicReader reader(sys.root(), n);
  for (int round = 0; round < 2; ++round) {
    const NicSample s = reader.Read();
    EXPECT_GT(s.timestamp_ns, 0);
    std::map<std::string, std::string> v;
    for (const NicLeaf& l : s.leaves)
      v[l.name] = l.text.empty() ? std::to_string(l.counter) : l.text;
    EXPECT_EQ(v.count("rp_cnp_ignored"), 0u) << "absent file served";
    EXPECT_EQ(v.count("out_of_sequence"), 0u) << "garbled file served";
    EXPECT_EQ(v.count("packet_seq_err"), 0u) << "unreadable file served";
    EXPECT_EQ(v["np_cnp_sent"], "1002");
    EXPECT_EQ(v["in-octets"], "1100");   // rx_bytes
    EXPECT_EQ(v["out-errors"], "1107");  // tx_errors
    EXPECT_EQ(v["oper-status"], "UNKNOWN");
    EXPECT_EQ(v.size(), 13u);  // 8 netdev + oper-status + 4 of 7 hw_counters
  }
  EXPECT_EQ(reader.read_errors(), 4u);  // counted at each read, logged once
}

TEST_F(NicAgentTest, CapabilitiesListProtoOnly) {
  sys_.AddNic("mlx5_0", "ens1", 0);
  StartAgent({"host0-nic0=mlx5_0:1:ens1:eth0"});
  auto stub = gnmi::gNMI::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(agent_->port()),
                                                      grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  gnmi::CapabilityResponse resp;
  ASSERT_TRUE(stub->Capabilities(&ctx, gnmi::CapabilityRequest(), &resp).ok());
  ASSERT_EQ(resp.supported_encodings_size(), 1);
  EXPECT_EQ(resp.supported_encodings(0), gnmi::PROTO);
  EXPECT_GE(resp.supported_models_size(), 1);
}

TEST_F(NicAgentTest, SampleStreamServesValuesFollowsRewritesAndReportsOperChange) {
  sys_.AddNic("mlx5_0", "ens1", 1000);
  StartAgent({"host0-nic0=mlx5_0:1:ens1:eth0"});
  Subscriber sub(agent_->port(), HostProfileRequest("host0-nic0"));
  ASSERT_TRUE(WaitFor([&] { return sub.synced(); }));
  auto v = sub.Values();
  EXPECT_EQ(v[kNic0 + kRocePrefix + "np_ecn_marked_roce_packets"], "1001");
  EXPECT_EQ(v[kNic0 + kRocePrefix + "np_cnp_sent"], "1002");
  EXPECT_EQ(v[kNic0 + kRocePrefix + "local_ack_timeout_err"], "1006");
  EXPECT_EQ(v[kNic0 + kCtrPrefix + "in-octets"], "1100");
  EXPECT_EQ(v[kNic0 + kCtrPrefix + "out-octets"], "1101");
  EXPECT_EQ(v[kNic0 + kCtrPrefix + "out-errors"], "1107");
  EXPECT_EQ(v[kNic0 + "/interfaces/interface[name=eth0]/state/oper-status"], "UP");
  EXPECT_EQ(v.count(kNic0 + kRocePrefix + "rp_cnp_ignored"), 0u) << "absent file served";
  EXPECT_EQ(v.size(), 15u);
  for (const auto& r : sub.responses()) {
    if (!r.has_update()) continue;
    EXPECT_GT(r.update().timestamp(), 1'600'000'000'000'000'000) << "ns since the epoch";
    EXPECT_EQ(r.update().prefix().target(), "host0-nic0");
  }

  // A counter file is rewritten: the next samples carry the new value.
  sys_.Write("class/infiniband/mlx5_0/ports/1/hw_counters/np_cnp_sent", "5555\n");
  sys_.Write("class/net/ens1/statistics/rx_bytes", "987654321\n");
  ASSERT_TRUE(WaitFor([&] {
    auto now = sub.Values();
    return now[kNic0 + kRocePrefix + "np_cnp_sent"] == "5555" &&
           now[kNic0 + kCtrPrefix + "in-octets"] == "987654321";
  }));

  // A counter that appears later is served from then on; one that goes away
  // is no longer sent.
  sys_.Write("class/infiniband/mlx5_0/ports/1/hw_counters/rp_cnp_ignored", "77\n");
  ASSERT_TRUE(
      WaitFor([&] { return sub.Values()[kNic0 + kRocePrefix + "rp_cnp_ignored"] == "77"; }));
  sys_.Remove("class/infiniband/mlx5_0/ports/1/hw_counters/np_cnp_sent");
  const size_t mark = sub.responses().size();
  ASSERT_TRUE(WaitFor([&] {
    auto later = sub.Values(mark);
    return later.count(kNic0 + kRocePrefix + "rp_cnp_ignored") > 0;  // a full sample after
  }));
  ASSERT_TRUE(WaitFor([&] {
    // Two samples after the removal contain no np_cnp_sent.
    const auto rs = sub.responses();
    int roce_samples = 0;
    for (size_t i = mark; i < rs.size(); ++i) {
      if (!rs[i].has_update()) continue;
      bool has_ignored = false, has_sent = false;
      for (const auto& u : rs[i].update().update()) {
        has_ignored = has_ignored || u.path().elem(0).name() == "rp_cnp_ignored";
        has_sent = has_sent || u.path().elem(0).name() == "np_cnp_sent";
      }
      if (has_ignored && !has_sent) ++roce_samples;
    }
    return roce_samples >= 2;
  }));

  // operstate goes down: an ON_CHANGE update.
  sys_.Write("class/net/ens1/operstate", "down\n");
  ASSERT_TRUE(WaitFor([&] {
    return sub.Values()[kNic0 + "/interfaces/interface[name=eth0]/state/oper-status"] == "DOWN";
  }));
  sys_.Write("class/net/ens1/operstate", "up\n");
  ASSERT_TRUE(WaitFor([&] {
    return sub.Values()[kNic0 + "/interfaces/interface[name=eth0]/state/oper-status"] == "UP";
  }));
  EXPECT_FALSE(sub.done()) << sub.status().error_message();
}

TEST_F(NicAgentTest, WildcardTargetServesEveryNicUnderItsDeviceId) {
  sys_.AddNic("mlx5_0", "ens1", 1000);
  sys_.AddNic("mlx5_1", "ens2", 2000);
  StartAgent({"host0-nic0=mlx5_0:1:ens1:eth0", "host0-nic1=mlx5_1:1:ens2:eth1"});
  for (const std::string target : {"", "*"}) {
    Subscriber sub(agent_->port(), HostProfileRequest(target));
    ASSERT_TRUE(WaitFor([&] { return sub.synced(); }));
    auto v = sub.Values();
    EXPECT_EQ(v[kNic0 + kRocePrefix + "np_cnp_sent"], "1002");
    EXPECT_EQ(v["host0-nic1@loom:/nic/interfaces/interface[name=eth1]/roce/state/np_cnp_sent"],
              "2002");
    EXPECT_EQ(v.size(), 30u);
  }
  // One NIC by its id.
  Subscriber one(agent_->port(), HostProfileRequest("host0-nic1"));
  ASSERT_TRUE(WaitFor([&] { return one.synced(); }));
  for (const auto& [k, val] : one.Values()) EXPECT_EQ(k.rfind("host0-nic1@", 0), 0u) << k;
}

TEST_F(NicAgentTest, OnceSendsInitialDataSyncAndEnds) {
  sys_.AddNic("mlx5_0", "ens1", 1000);
  StartAgent({"host0-nic0=mlx5_0:1:ens1:eth0"});
  Subscriber sub(
      agent_->port(),
      Request("host0-nic0",
              {{"/interfaces/interface[name=eth0]/state/counters/in-octets", gnmi::SAMPLE, 0}},
              gnmi::SubscriptionList::ONCE));
  ASSERT_TRUE(WaitFor([&] { return sub.done(); }));
  EXPECT_TRUE(sub.status().ok()) << sub.status().error_message();
  EXPECT_TRUE(sub.synced());
  auto v = sub.Values();
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[kNic0 + kCtrPrefix + "in-octets"], "1100");
}

TEST_F(NicAgentTest, BadRequestsFailWithTheGnmiCodes) {
  sys_.AddNic("mlx5_0", "ens1", 1000);
  StartAgent({"host0-nic0=mlx5_0:1:ens1:eth0"});
  struct Case {
    gnmi::SubscribeRequest req;
    grpc::StatusCode code;
    std::string mention;
  };
  std::vector<Case> cases = {
      {Request("host0-nic0", {{kCounters, gnmi::SAMPLE, 0}, {"/qos/interfaces", gnmi::SAMPLE, 0}}),
       grpc::StatusCode::INVALID_ARGUMENT, "/qos/interfaces"},
      {Request("host0-nic0",
               {{"/interfaces/interface[name=*]/state/counters/in-fcs-errors", gnmi::SAMPLE, 0}}),
       grpc::StatusCode::INVALID_ARGUMENT, "in-fcs-errors"},
      {Request("host0-nic0", {{"sonic:/interfaces", gnmi::SAMPLE, 0}}),
       grpc::StatusCode::INVALID_ARGUMENT, "sonic"},
      {Request("host0-nic0", {{kCounters, gnmi::SAMPLE, 50'000'000}}),
       grpc::StatusCode::INVALID_ARGUMENT, "100 ms"},
      {Request("host9-nic0", {{kCounters, gnmi::SAMPLE, 0}}), grpc::StatusCode::NOT_FOUND,
       "host9-nic0"},
      {Request("host0-nic0", {{kCounters, gnmi::SAMPLE, 0}}, gnmi::SubscriptionList::STREAM,
               gnmi::JSON_IETF),
       grpc::StatusCode::UNIMPLEMENTED, "JSON_IETF"},
  };
  for (const Case& c : cases) {
    Subscriber sub(agent_->port(), c.req);
    ASSERT_TRUE(WaitFor([&] { return sub.done(); })) << c.mention;
    EXPECT_EQ(sub.status().error_code(), c.code) << sub.status().error_message();
    EXPECT_NE(sub.status().error_message().find(c.mention), std::string::npos)
        << sub.status().error_message();
    EXPECT_TRUE(sub.responses().empty()) << "nothing is sent before a rejection";
  }
  // The catalogue's NIC PFC path (default NicSubscriptions) is accepted with
  // no data, so the rest of the subscription still flows.
  Subscriber pfc(agent_->port(),
                 Request("host0-nic0",
                         {{"loom:/pfc/interfaces/interface[name=*]/priorities/priority[id=*]/state",
                           gnmi::SAMPLE, 100'000'000},
                          {kRoce, gnmi::SAMPLE, 100'000'000}}));
  ASSERT_TRUE(WaitFor([&] { return pfc.synced(); }));
  EXPECT_EQ(pfc.Values().size(), 6u);
}

// What the agent serves, run through the host profile, lands on the catalogue
// paths Loom's link state consumes.
TEST_F(NicAgentTest, HostProfileTranslatesAgentOutputToTheCatalogue) {
  sys_.AddNic("mlx5_0", "ens1", 1000);
  StartAgent({"host0-nic0=mlx5_0:1:ens1:eth0"});
  v1::TelemetryProfile profile;
  std::string error;
  ASSERT_TRUE(LoadProfileFile(std::string(LOOM_SOURCE_DIR) + "/telemetry/profiles/host.json",
                              &profile, &error))
      << error;
  Subscriber sub(agent_->port(), HostProfileRequest("host0-nic0"));
  ASSERT_TRUE(WaitFor([&] { return sub.synced(); }));
  ProfileTranslator tr(profile, {});
  std::vector<int> all;
  for (int i = 0; i < profile.signals_size(); ++i) all.push_back(i);
  std::map<std::string, std::string> catalogue;
  for (const auto& r : sub.responses()) {
    if (!r.has_update()) continue;
    gnmi::Notification out;
    std::string err;
    EXPECT_EQ(tr.Translate(all, r.update(), 1, &out, &err), 0u) << err;
    EXPECT_EQ(out.timestamp(), r.update().timestamp());
    for (const auto& u : out.update()) {
      catalogue[FormatPath(u.path())] =
          u.val().has_uint_val() ? std::to_string(u.val().uint_val()) : u.val().string_val();
    }
  }
  EXPECT_EQ(catalogue[kRocePrefix + "np_cnp_sent"], "1002");
  EXPECT_EQ(catalogue[kRocePrefix + "rp_cnp_handled"], "1003");
  EXPECT_EQ(catalogue[kCtrPrefix + "in-octets"], "1100");
  EXPECT_EQ(catalogue[kCtrPrefix + "out-discards"], "1105");
  EXPECT_EQ(catalogue["/interfaces/interface[name=eth0]/state/oper-status"], "UP");
  EXPECT_EQ(catalogue.size(), 15u);
  EXPECT_EQ(tr.stats().unmatched, 0u);
  for (const auto& [path, value] : catalogue) {
    gnmi::Path p;
    ASSERT_TRUE(ParsePath(path, &p).ok());
    EXPECT_NE(SignalOfCanonicalPath(p), "") << path;
  }
}

TEST_F(NicAgentTest, StopEndsOpenStreams) {
  sys_.AddNic("mlx5_0", "ens1", 1000);
  StartAgent({"host0-nic0=mlx5_0:1:ens1:eth0"});
  Subscriber sub(agent_->port(), HostProfileRequest("host0-nic0"));
  ASSERT_TRUE(WaitFor([&] { return sub.synced(); }));
  agent_->Stop();
  ASSERT_TRUE(WaitFor([&] { return sub.done(); }));
  EXPECT_FALSE(sub.status().ok());
  EXPECT_EQ(agent_->Stats().open_streams, 0);
}

}  // namespace
}  // namespace loom::telemetry
