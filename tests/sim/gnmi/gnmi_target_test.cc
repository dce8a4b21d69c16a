// The gRPC gNMI target with a real gNMI client (gnmi::gNMI::Stub) on
// 127.0.0.1:0, Loom's own collector against it, and the in-process adapter
// producing the same notifications as the gRPC path.
#include "sim-fabric/gnmi_target.h"

#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/topology/topology_index.h"
#include "gnmi/gnmi.grpc.pb.h"
#include "gtest/gtest.h"
#include "telemetry/collector.h"
#include "telemetry/link_state.h"
#include "telemetry/path.h"
#include "tests/sim/gnmi/gnmi_test_util.h"

namespace loom::sim {
namespace {

using testing::Flatten;
using testing::IfLeaf;
using testing::kEpochNs;
using testing::kFlowBps;
using testing::RecordingSink;
using testing::Sample;
using testing::SmallFabric;
using Clock = std::chrono::steady_clock;
using Stream = grpc::ClientReaderWriter<gnmi::SubscribeRequest, gnmi::SubscribeResponse>;

constexpr auto kDeadline = std::chrono::seconds(60);

GnmiOptions Opts() {
  GnmiOptions o;
  o.tick_ns = 1 * kNsPerMs;
  o.min_sample_interval_ns = 1 * kNsPerMs;
  o.epoch_ns = kEpochNs;
  return o;
}

gnmi::SubscribeRequest Request(const std::string& target,
                               const std::vector<telemetry::SubscriptionSpec>& specs,
                               gnmi::SubscriptionList::Mode mode = gnmi::SubscriptionList::STREAM) {
  gnmi::SubscribeRequest req;
  auto* list = req.mutable_subscribe();
  list->mutable_prefix()->set_target(target);
  list->set_mode(mode);
  list->set_encoding(gnmi::PROTO);
  for (const auto& spec : specs) {
    auto* sub = list->add_subscription();
    EXPECT_TRUE(telemetry::ParsePath(spec.path, sub->mutable_path()).ok()) << spec.path;
    sub->set_mode(spec.mode);
    sub->set_sample_interval(static_cast<uint64_t>(spec.sample_interval_ns));
  }
  return req;
}

struct OpenStream {
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> rw;
};

// Polls `cond` every 10 ms until true or 60 s passed.
bool WaitFor(const std::function<bool()>& cond) {
  const auto end = Clock::now() + kDeadline;
  while (Clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

// A small fabric served live: FabricLoop at real time on its own thread.
class GnmiTargetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    f_ = std::make_unique<SmallFabric>(10 * kNsPerUs);
    target_ = std::make_unique<GnmiTarget>(Opts(), GnmiTargetOptions());
    ASSERT_TRUE(target_->Start().ok());
    FabricLoopOptions lo;
    lo.speed = 1.0;
    loop_ = std::make_unique<FabricLoop>(f_->fabric.get(), target_.get(), lo);
    thread_ = std::thread([this] { loop_->Run(); });
    channel_ = grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
    stub_ = gnmi::gNMI::NewStub(channel_);
    ASSERT_TRUE(WaitFor([this] { return loop_->published() >= 1; }));
  }
  void TearDown() override {
    if (loop_) loop_->Stop();
    if (thread_.joinable()) thread_.join();
    if (target_) target_->Stop();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(target_->port()); }

  std::unique_ptr<OpenStream> Subscribe(const gnmi::SubscribeRequest& req) {
    auto s = std::make_unique<OpenStream>();
    s->ctx.set_deadline(std::chrono::system_clock::now() + kDeadline);
    s->rw = stub_->Subscribe(&s->ctx);
    EXPECT_TRUE(s->rw->Write(req));
    return s;
  }
  // Reads until sync_response; returns the notifications before it.
  static std::vector<gnmi::Notification> ReadUntilSync(OpenStream& s) {
    std::vector<gnmi::Notification> out;
    gnmi::SubscribeResponse r;
    while (s.rw->Read(&r)) {
      if (r.has_sync_response()) {
        EXPECT_TRUE(r.sync_response());
        return out;
      }
      out.push_back(r.update());
    }
    ADD_FAILURE() << "stream ended before sync_response";
    return out;
  }
  grpc::Status ErrorOf(const gnmi::SubscribeRequest& req) {
    auto s = Subscribe(req);
    gnmi::SubscribeResponse r;
    while (s->rw->Read(&r)) {
    }
    return s->rw->Finish();
  }

  std::unique_ptr<SmallFabric> f_;
  std::unique_ptr<GnmiTarget> target_;
  std::unique_ptr<FabricLoop> loop_;
  std::thread thread_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<gnmi::gNMI::Stub> stub_;
};

TEST_F(GnmiTargetTest, CapabilitiesListModelsAndEncodings) {
  grpc::ClientContext ctx;
  gnmi::CapabilityResponse resp;
  ASSERT_TRUE(stub_->Capabilities(&ctx, gnmi::CapabilityRequest(), &resp).ok());
  std::vector<std::string> models;
  for (const auto& m : resp.supported_models()) models.push_back(m.name());
  EXPECT_NE(std::find(models.begin(), models.end(), "openconfig-interfaces"), models.end());
  EXPECT_NE(std::find(models.begin(), models.end(), "openconfig-qos"), models.end());
  EXPECT_NE(std::find(models.begin(), models.end(), "loom-pfc"), models.end());
  std::vector<int> enc(resp.supported_encodings().begin(), resp.supported_encodings().end());
  EXPECT_NE(std::find(enc.begin(), enc.end(), gnmi::JSON_IETF), enc.end());
  EXPECT_NE(std::find(enc.begin(), enc.end(), gnmi::PROTO), enc.end());
  EXPECT_EQ(resp.gnmi_version(), "0.10.0");
}

TEST_F(GnmiTargetTest, GetReturnsValuesAndSpecErrors) {
  auto get = [&](const std::string& target, const std::string& path, gnmi::GetResponse* resp,
                 gnmi::Encoding enc = gnmi::JSON_IETF) {
    gnmi::GetRequest req;
    req.mutable_prefix()->set_target(target);
    req.set_encoding(enc);
    EXPECT_TRUE(telemetry::ParsePath(path, req.add_path()).ok());
    grpc::ClientContext ctx;
    return stub_->Get(&ctx, req, resp);
  };
  gnmi::GetResponse resp;
  const std::string octets = IfLeaf(f_->nic0_if, "counters/out-octets");
  ASSERT_TRUE(WaitFor([&] {
    return get(f_->nic0, octets, &resp).ok() && resp.notification_size() == 1 &&
           resp.notification(0).update(0).val().uint_val() > 0;
  }));
  const auto& n = resp.notification(0);
  EXPECT_EQ(n.prefix().target(), f_->nic0);
  EXPECT_GT(n.timestamp(), 0);
  ASSERT_EQ(n.update_size(), 1);
  EXPECT_EQ(testing::FullPath(n, n.update(0)), octets);

  EXPECT_EQ(get(f_->nic0, "/system/state/hostname", &resp).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(get(f_->nic0, IfLeaf("nope", "oper-status"), &resp).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(get("no-such-device", octets, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(get(f_->nic0, octets, &resp, gnmi::ASCII).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  ASSERT_TRUE(get(f_->leaf0, "loom:/alb/groups/group[name=*]/buckets", &resp).ok());
  EXPECT_EQ(resp.notification_size(), 0);

  grpc::ClientContext ctx;
  gnmi::SetResponse sresp;
  grpc::Status st = stub_->Set(&ctx, gnmi::SetRequest(), &sresp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(st.error_message().find("later change"), std::string::npos);
}

TEST_F(GnmiTargetTest, OnceSendsInitialDataSyncAndCloses) {
  auto s = Subscribe(Request(f_->leaf0, {{"/interfaces/interface[name=*]/state", gnmi::SAMPLE, 0}},
                             gnmi::SubscriptionList::ONCE));
  auto ns = ReadUntilSync(*s);
  size_t updates = 0;
  for (const auto& n : ns) updates += static_cast<size_t>(n.update_size());
  EXPECT_EQ(updates, f_->fabric->Interfaces(f_->leaf0).size() * 10);
  gnmi::SubscribeResponse r;
  EXPECT_FALSE(s->rw->Read(&r));
  EXPECT_TRUE(s->rw->Finish().ok());
}

TEST_F(GnmiTargetTest, StreamSampleSendsPeriodicUpdatesAndOneSync) {
  const std::string octets = IfLeaf(f_->nic0_if, "counters/out-octets");
  auto s = Subscribe(Request(f_->nic0, {{octets, gnmi::SAMPLE, 10 * kNsPerMs}}));
  auto initial = ReadUntilSync(*s);
  ASSERT_EQ(initial.size(), 1u);
  std::vector<Sample> got;
  gnmi::SubscribeResponse r;
  while (got.size() < 5 && s->rw->Read(&r)) {
    ASSERT_FALSE(r.has_sync_response()) << "second sync_response";
    for (auto& x : Flatten(f_->nic0, r.update())) got.push_back(x);
  }
  ASSERT_EQ(got.size(), 5u);
  for (size_t i = 1; i < got.size(); ++i) {
    EXPECT_EQ(got[i].path, octets);
    EXPECT_EQ(got[i].timestamp_ns - got[i - 1].timestamp_ns, 10 * kNsPerMs);
    EXPECT_GT(got[i].value.uint_val(), got[i - 1].value.uint_val());
  }
  const double bps = static_cast<double>(got.back().value.uint_val() - got[0].value.uint_val()) *
                     8e9 / static_cast<double>(got.back().timestamp_ns - got[0].timestamp_ns);
  EXPECT_NEAR(bps, kFlowBps, 0.02 * kFlowBps);
  s->ctx.TryCancel();
}

TEST_F(GnmiTargetTest, OnChangeSendsInitialStateThenOperStatusChange) {
  auto s = Subscribe(Request(
      f_->leaf0, {{"/interfaces/interface[name=*]/state/oper-status", gnmi::ON_CHANGE, 0}}));
  auto initial = ReadUntilSync(*s);
  size_t ups = 0;
  for (const auto& n : initial) {
    for (const auto& x : Flatten(f_->leaf0, n)) ups += x.value.string_val() == "UP";
  }
  EXPECT_EQ(ups, f_->fabric->Interfaces(f_->leaf0).size());
  const std::string link = f_->uplink_id;
  loop_->Post([link](Fabric& fab) { ASSERT_TRUE(fab.SetLinkUp(link, false).ok()); });
  gnmi::SubscribeResponse r;
  std::vector<Sample> changes;
  while (changes.empty() && s->rw->Read(&r)) {
    ASSERT_FALSE(r.has_sync_response());
    changes = Flatten(f_->leaf0, r.update());
  }
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].path, IfLeaf(f_->uplink_leaf_if, "oper-status"));
  EXPECT_EQ(changes[0].value.string_val(), "DOWN");
  s->ctx.TryCancel();
}

TEST_F(GnmiTargetTest, PollSendsOneFullUpdatePerPoll) {
  const std::string path = "loom:/nic/interfaces/interface[name=*]/roce/state";
  auto s = Subscribe(Request(f_->nic0, {{path, gnmi::SAMPLE, 0}}, gnmi::SubscriptionList::POLL));
  auto initial = ReadUntilSync(*s);
  ASSERT_EQ(initial.size(), 1u);
  // 7 mlx5 counters + 3 loom transmit-burst leaves.
  EXPECT_EQ(initial[0].update_size(), 10);
  int64_t last_ts = initial[0].timestamp();
  for (int i = 0; i < 2; ++i) {
    gnmi::SubscribeRequest poll;
    poll.mutable_poll();
    ASSERT_TRUE(s->rw->Write(poll));
    auto ns = ReadUntilSync(*s);
    ASSERT_EQ(ns.size(), 1u);
    EXPECT_EQ(ns[0].update_size(), 10);
    EXPECT_GE(ns[0].timestamp(), last_ts);
    last_ts = ns[0].timestamp();
  }
  s->rw->WritesDone();
  gnmi::SubscribeResponse r;
  EXPECT_FALSE(s->rw->Read(&r));
  EXPECT_TRUE(s->rw->Finish().ok());
}

TEST_F(GnmiTargetTest, InvalidRequestsGetTheSpecCodes) {
  const std::string counters = "/interfaces/interface[name=*]/state/counters";
  EXPECT_EQ(ErrorOf(Request(f_->leaf0, {{counters, gnmi::SAMPLE, 1000}})).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(ErrorOf(Request(f_->leaf0, {{"/system/state", gnmi::SAMPLE, 0}})).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ErrorOf(Request("no-such-device", {{counters, gnmi::SAMPLE, 0}})).error_code(),
            grpc::StatusCode::NOT_FOUND);
  gnmi::SubscribeRequest poll_first;
  poll_first.mutable_poll();
  EXPECT_EQ(ErrorOf(poll_first).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // The target keeps serving after bad requests.
  auto s =
      Subscribe(Request(f_->leaf0, {{counters, gnmi::SAMPLE, 0}}, gnmi::SubscriptionList::ONCE));
  EXPECT_FALSE(ReadUntilSync(*s).empty());
}

// Interop proof: Loom's collector + LinkTelemetry see the emulated flow's rate.
TEST_F(GnmiTargetTest, LoomCollectorSeesTheFlowRate) {
  telemetry::CollectorOptions co;
  for (const std::string& dev : f_->fabric->Devices()) {
    telemetry::TargetConfig t;
    t.name = dev;
    t.address = address();
    const bool sw = f_->fabric->GetSwitchConfig(dev) != nullptr;
    t.subscriptions = sw ? telemetry::SwitchSubscriptions(10 * kNsPerMs)
                         : telemetry::NicSubscriptions(10 * kNsPerMs);
    co.targets.push_back(std::move(t));
  }
  topology::TopologyIndex index(f_->topo);
  telemetry::LinkStateOptions lso;
  lso.staleness.sample_interval_ns = 10 * kNsPerMs;
  lso.staleness.stale_after_intervals = 100;
  SteadyClock clock;
  telemetry::LinkTelemetry links(index, lso, &clock);
  telemetry::Collector collector(co, &links, &clock);
  ASSERT_TRUE(collector.Start().ok());

  double nic_bps = 0, uplinks_bps = 0;
  const bool ok = WaitFor([&] {
    telemetry::LinkSnapshot snap = links.Snapshot();
    nic_bps = 0;
    uplinks_bps = 0;
    for (const auto& d : snap.links) {
      if (!d.has_rate || d.tx_device == nullptr) continue;
      const auto& l = f_->topo.links(d.link_index);
      const bool nic_link = l.a().device() == f_->nic0 || l.b().device() == f_->nic0;
      if (nic_link && *d.tx_device == f_->nic0) nic_bps = d.tx_bps;
      if (!nic_link && *d.tx_device == f_->leaf0) uplinks_bps += d.tx_bps;
    }
    // Every target must also have synced: the rate can be right before the
    // last target's stream has delivered its initial data.
    bool all_synced = true;
    for (const auto& h : collector.Health()) all_synced &= h.connected && h.synced;
    return all_synced && std::abs(nic_bps - kFlowBps) < 0.03 * kFlowBps &&
           std::abs(uplinks_bps - kFlowBps) < 0.03 * kFlowBps;
  });
  EXPECT_TRUE(ok) << "nic " << nic_bps << " b/s, leaf uplinks " << uplinks_bps << " b/s";
  for (const auto& h : collector.Health()) {
    EXPECT_TRUE(h.connected) << h.name << " " << h.last_error;
    EXPECT_TRUE(h.synced) << h.name;
    EXPECT_EQ(h.rejected_updates, 0u) << h.name;
  }
  collector.Stop();
}

// The in-process adapter and the gRPC target emit identical notifications for
// the same fabric state (initial data and every tick).
TEST(GnmiEquivalenceTest, InProcessMatchesGrpc) {
  SmallFabric f(10 * kNsPerUs);
  f.fabric->RunUntil(3 * kNsPerMs);
  const auto specs = telemetry::SwitchSubscriptions(2 * kNsPerMs);

  SnapshotBuilder builder(*f.fabric, Opts());
  GnmiTarget target(Opts(), GnmiTargetOptions());
  ASSERT_TRUE(target.Start().ok());
  target.Publish(builder.Capture());
  RecordingSink sink;
  InProcessTelemetry inproc(f.fabric.get(), Opts(), {{f.leaf0, specs}}, &sink);
  ASSERT_TRUE(inproc.Start().ok());

  auto stub = gnmi::gNMI::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(target.port()),
                                                      grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kDeadline);
  auto rw = stub->Subscribe(&ctx);
  ASSERT_TRUE(rw->Write(Request(f.leaf0, specs)));
  std::vector<gnmi::Notification> grpc_ns;
  gnmi::SubscribeResponse r;
  while (rw->Read(&r) && !r.has_sync_response()) grpc_ns.push_back(r.update());

  ASSERT_TRUE(f.fabric->SetLinkUp(f.uplink_id, false).ok());
  while (f.fabric->now() < 12 * kNsPerMs) {
    f.fabric->Step();
    if (auto s = builder.OnStep()) target.Publish(std::move(s));
    inproc.OnStep();
  }
  const auto expected = sink.notifications();
  while (grpc_ns.size() < expected.size() && rw->Read(&r)) {
    ASSERT_FALSE(r.has_sync_response());
    grpc_ns.push_back(r.update());
  }
  ctx.TryCancel();
  ASSERT_EQ(grpc_ns.size(), expected.size());
  size_t down = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(expected[i].first, f.leaf0);
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(grpc_ns[i], expected[i].second))
        << "notification " << i << "\ngrpc: " << grpc_ns[i].ShortDebugString()
        << "\nin-process: " << expected[i].second.ShortDebugString();
    for (const auto& x : Flatten(f.leaf0, grpc_ns[i])) down += x.value.string_val() == "DOWN";
  }
  EXPECT_EQ(down, 1u);
  target.Stop();
}

}  // namespace
}  // namespace loom::sim
