// Platform personalities (sim-fabric/personality.h) with a real gNMI client
// on 127.0.0.1:0: SONiC's database targets, JSON objects and OID maps, its
// refusals and flex-counter refresh; strict OpenConfig targets; and the round
// trip that keeps them honest: a personality's answers fed through
// telemetry::ProfileTranslator (same profile) equal what the loom catalogue
// target serves for the same snapshots.
//
// The test thread steps the fabric in virtual time and publishes every
// snapshot itself (no FabricLoop, no wall-clock pacing); reads block on gRPC
// with a deadline.
#include "sim-fabric/personality.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gnmi/gnmi.grpc.pb.h"
#include "gtest/gtest.h"
#include "telemetry/path.h"
#include "telemetry/profile.h"
#include "tests/sim/gnmi/gnmi_test_util.h"

namespace loom::sim {
namespace {

using testing::kEpochNs;
using testing::SmallFabric;
using Stream = grpc::ClientReaderWriter<gnmi::SubscribeRequest, gnmi::SubscribeResponse>;

constexpr auto kDeadline = std::chrono::seconds(60);

struct OpenStream {
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> rw;
};

struct Sub {
  std::string path;  // text form, origin allowed ("loom:/...")
  gnmi::SubscriptionMode mode = gnmi::SAMPLE;
  uint64_t interval_ns = 0;
};

gnmi::SubscribeRequest Request(const std::string& target, const std::vector<Sub>& subs,
                               gnmi::SubscriptionList::Mode mode, gnmi::Encoding encoding) {
  gnmi::SubscribeRequest req;
  auto* list = req.mutable_subscribe();
  list->mutable_prefix()->set_target(target);
  list->set_mode(mode);
  list->set_encoding(encoding);
  for (const Sub& s : subs) {
    auto* sub = list->add_subscription();
    EXPECT_TRUE(telemetry::ParsePath(s.path, sub->mutable_path()).ok()) << s.path;
    sub->set_mode(s.mode);
    sub->set_sample_interval(s.interval_ns);
  }
  return req;
}

std::string ValueText(const gnmi::TypedValue& v) {
  switch (v.value_case()) {
    case gnmi::TypedValue::kUintVal:
      return std::to_string(v.uint_val());
    case gnmi::TypedValue::kIntVal:
      return std::to_string(v.int_val());
    case gnmi::TypedValue::kStringVal:
      return v.string_val();
    case gnmi::TypedValue::kJsonIetfVal:
      return v.json_ietf_val();
    case gnmi::TypedValue::kJsonVal:
      return v.json_val();
    default:
      return "?";
  }
}

google::protobuf::Struct ParseJson(const std::string& json) {
  google::protobuf::Struct s;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &s).ok()) << json;
  return s;
}

// One device of a small fabric served by the loom catalogue target and by one
// target per personality, all fed the same snapshots.
class PersonalityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    f_ = std::make_unique<SmallFabric>(100 * kNsPerUs);
    std::string err;
    ASSERT_TRUE(telemetry::LoadProfiles({telemetry::ShippedProfileDir()}, &profiles_, &err)) << err;
    opts_.tick_ns = 1 * kNsPerMs;
    opts_.min_sample_interval_ns = 1 * kNsPerMs;
    opts_.epoch_ns = kEpochNs;
    builder_ = std::make_unique<SnapshotBuilder>(*f_->fabric, opts_);
    loom_ = StartTarget(nullptr);
    for (PersonalityKind k : {PersonalityKind::kSonic, PersonalityKind::kOpenConfig,
                              PersonalityKind::kOpenConfigJson}) {
      persona_[k] = StartTarget(std::make_shared<Personality>(
          k, profiles_.profiles.at(PersonalityProfileName(k)), f_->leaf0, opts_));
    }
    Publish();
  }
  void TearDown() override {
    for (auto& [k, t] : persona_) t->Stop();
    if (loom_) loom_->Stop();
  }

  std::unique_ptr<GnmiTarget> StartTarget(std::shared_ptr<TargetBehaviour> b) {
    auto t = std::make_unique<GnmiTarget>(opts_, GnmiTargetOptions());
    if (b) t->SetBehaviour(std::move(b));
    EXPECT_TRUE(t->Start().ok());
    return t;
  }
  // Replaces the personality of kind `k` with one serving `profile`.
  void ServeFrom(PersonalityKind k, const v1::TelemetryProfile& profile) {
    persona_[k]->Stop();
    persona_[k] = StartTarget(std::make_shared<Personality>(k, profile, f_->leaf0, opts_));
    persona_[k]->Publish(last_);
    stubs_.erase(persona_[k]->port());
  }

  void Publish() {
    last_ = builder_->Capture();
    loom_->Publish(last_);
    for (auto& [k, t] : persona_) t->Publish(last_);
  }
  // Steps the fabric to virtual time `t` and publishes one snapshot there.
  void AdvanceTo(TimeNs t) {
    while (f_->fabric->now() < t) f_->fabric->Advance(t);
    Publish();
  }

  gnmi::gNMI::Stub* StubFor(const GnmiTarget& t) {
    auto& s = stubs_[t.port()];
    if (!s) {
      s = gnmi::gNMI::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(t.port()),
                                                  grpc::InsecureChannelCredentials()));
    }
    return s.get();
  }
  std::unique_ptr<OpenStream> Subscribe(const GnmiTarget& t, const gnmi::SubscribeRequest& req) {
    auto s = std::make_unique<OpenStream>();
    s->ctx.set_deadline(std::chrono::system_clock::now() + kDeadline);
    s->rw = StubFor(t)->Subscribe(&s->ctx);
    EXPECT_TRUE(s->rw->Write(req));
    return s;
  }
  static std::vector<gnmi::Notification> ReadUntilSync(OpenStream& s) {
    std::vector<gnmi::Notification> out;
    gnmi::SubscribeResponse r;
    while (s.rw->Read(&r)) {
      if (r.has_sync_response()) return out;
      out.push_back(r.update());
    }
    ADD_FAILURE() << "stream ended before sync_response: " << s.rw->Finish().error_message();
    return out;
  }
  static gnmi::Notification ReadOne(OpenStream& s) {
    gnmi::SubscribeResponse r;
    EXPECT_TRUE(s.rw->Read(&r));
    EXPECT_TRUE(r.has_update()) << r.DebugString();
    return r.update();
  }
  // ONCE: the notifications before sync_response.
  std::vector<gnmi::Notification> Once(const GnmiTarget& t, const std::string& target,
                                       const std::vector<Sub>& subs, gnmi::Encoding enc) {
    auto s = Subscribe(t, Request(target, subs, gnmi::SubscriptionList::ONCE, enc));
    auto ns = ReadUntilSync(*s);
    gnmi::SubscribeResponse r;
    EXPECT_FALSE(s->rw->Read(&r));
    EXPECT_TRUE(s->rw->Finish().ok());
    return ns;
  }
  grpc::Status ErrorOf(const GnmiTarget& t, const gnmi::SubscribeRequest& req) {
    auto s = Subscribe(t, req);
    gnmi::SubscribeResponse r;
    while (s->rw->Read(&r)) {
    }
    return s->rw->Finish();
  }

  // Catalogue values of the personality's device on the loom target: path
  // text -> value text.
  std::map<std::string, std::string> LoomValues() {
    std::map<std::string, std::string> out;
    for (const auto& n : Once(*loom_, f_->leaf0, {{"/"}, {"loom:/"}}, gnmi::PROTO)) {
      for (const auto& u : n.update()) out[testing::FullPath(n, u)] = ValueText(u.val());
    }
    return out;
  }

  // Everything the personality of kind `k` serves, as its profile's
  // subscriptions ask for it (signal and key-map paths per target), ONCE.
  std::vector<gnmi::Notification> PersonalityAnswers(PersonalityKind k, gnmi::Encoding enc) {
    const auto& p = persona_profile(k);
    std::map<std::string, std::set<std::string>> by_target;
    for (const auto& s : p.signals()) by_target[s.target()].insert(s.path());
    for (const auto& km : p.key_maps()) by_target[km.target()].insert(km.path());
    std::vector<gnmi::Notification> out;
    for (const auto& [target, paths] : by_target) {
      std::vector<Sub> subs;
      for (const auto& path : paths) subs.push_back({path});
      for (auto& n : Once(*persona_[k], target, subs, enc)) out.push_back(std::move(n));
    }
    return out;
  }
  const v1::TelemetryProfile& persona_profile(PersonalityKind k) {
    return profiles_.profiles.at(PersonalityProfileName(k));
  }

  std::unique_ptr<SmallFabric> f_;
  telemetry::ProfileSet profiles_;
  GnmiOptions opts_;
  std::unique_ptr<SnapshotBuilder> builder_;
  std::shared_ptr<const FabricSnapshot> last_;
  std::unique_ptr<GnmiTarget> loom_;
  std::map<PersonalityKind, std::unique_ptr<GnmiTarget>> persona_;
  std::map<int, std::unique_ptr<gnmi::gNMI::Stub>> stubs_;
};

// Translates `answers` with `profile` (key maps first): catalogue path ->
// value text.
std::map<std::string, std::string> Translate(const v1::TelemetryProfile& profile,
                                             const std::vector<gnmi::Notification>& answers) {
  telemetry::ProfileTranslator tr(profile, {});
  std::vector<int> all;
  for (int i = 0; i < profile.signals_size(); ++i) all.push_back(i);
  std::vector<const gnmi::Notification*> data;
  for (const auto& n : answers) {
    int km = -1;
    for (int k = 0; k < profile.key_maps_size() && n.update_size() == 1; ++k) {
      gnmi::Path p = telemetry::JoinPath(n.prefix(), n.update(0).path());
      p.clear_target();
      gnmi::Path want;
      EXPECT_TRUE(telemetry::ParsePath(profile.key_maps(k).path(), &want).ok());
      if (telemetry::FormatPath(p) == telemetry::FormatPath(want)) km = k;
    }
    if (km >= 0) {
      tr.UpdateKeyMap(km, n);
    } else {
      data.push_back(&n);
    }
  }
  std::map<std::string, std::string> out;
  for (const gnmi::Notification* n : data) {
    gnmi::Notification cat;
    std::string err;
    EXPECT_EQ(tr.Translate(all, *n, 0, &cat, &err), 0u) << err;
    for (const auto& u : cat.update()) out[telemetry::FormatPath(u.path())] = ValueText(u.val());
  }
  return out;
}

// The round trip: every catalogue leaf the profile maps (a LeafRule's
// canonical pattern matches it) must come back from the personality with the
// loom target's value — the one at the start of the refresh window for a
// signal with refresh_interval_ms, the latest otherwise — and nothing else may
// come back. Returns the mismatches, one line each.
std::vector<std::string> RoundTripMismatches(const v1::TelemetryProfile& profile,
                                             const std::map<std::string, std::string>& window,
                                             const std::map<std::string, std::string>& latest,
                                             const std::map<std::string, std::string>& got,
                                             std::set<std::string>* signals_seen) {
  struct Rule {
    telemetry::PathPattern canonical;
    bool refreshed = false;
    std::string signal;
  };
  std::vector<Rule> rules;
  for (const auto& s : profile.signals()) {
    for (const auto& r : s.leaves()) {
      Rule rule;
      EXPECT_TRUE(telemetry::PathPattern::Compile(r.canonical(), &rule.canonical).ok());
      rule.refreshed = s.refresh_interval_ms() > 0;
      rule.signal = s.signal();
      rules.push_back(std::move(rule));
    }
  }
  std::vector<std::string> bad;
  std::set<std::string> expected;
  for (const auto& [path, value] : latest) {
    for (const Rule& r : rules) {
      std::map<std::string, std::string> vars;
      if (!r.canonical.Match(path, &vars)) continue;
      expected.insert(path);
      const std::string& want = r.refreshed ? window.at(path) : value;
      auto it = got.find(path);
      if (it == got.end()) {
        bad.push_back("missing " + path + " (signal " + r.signal + ")");
      } else if (it->second != want) {
        bad.push_back(path + ": got " + it->second + ", loom serves " + want);
      } else {
        signals_seen->insert(r.signal);
      }
      break;
    }
  }
  for (const auto& [path, value] : got) {
    if (!expected.count(path)) bad.push_back("unexpected " + path + " = " + value);
  }
  return bad;
}

// ------------------------------------------------------------------ sonic

TEST_F(PersonalityTest, SonicAdvertisesJsonJsonIetfAndProto) {
  grpc::ClientContext ctx;
  gnmi::CapabilityResponse r;
  ASSERT_TRUE(StubFor(*persona_[PersonalityKind::kSonic])
                  ->Capabilities(&ctx, gnmi::CapabilityRequest(), &r)
                  .ok());
  std::set<int> enc(r.supported_encodings().begin(), r.supported_encodings().end());
  EXPECT_EQ(enc, (std::set<int>{gnmi::JSON, gnmi::JSON_IETF, gnmi::PROTO}));
}

// SONiC doc/system-telemetry/grpc_telemetry.md: COUNTERS/Ethernet* answers
// one object {"Ethernet0": {"SAI_PORT_STAT_IF_IN_OCTETS": "0", ...}, ...}.
TEST_F(PersonalityTest, SonicAnswersOneJsonObjectOfStringCountersPerPath) {
  AdvanceTo(1 * kNsPerSec);
  auto ns = Once(*persona_[PersonalityKind::kSonic], "COUNTERS_DB", {{"COUNTERS/Ethernet*"}},
                 gnmi::JSON_IETF);
  ASSERT_EQ(ns.size(), 1u);
  EXPECT_EQ(ns[0].prefix().target(), "COUNTERS_DB");
  ASSERT_EQ(ns[0].update_size(), 1);
  EXPECT_EQ(telemetry::FormatPath(ns[0].update(0).path()), "/COUNTERS/Ethernet*");
  ASSERT_TRUE(ns[0].update(0).val().has_json_ietf_val());
  auto obj = ParseJson(ns[0].update(0).val().json_ietf_val());
  const auto ifaces = f_->fabric->Interfaces(f_->leaf0);
  ASSERT_EQ(obj.fields_size(), static_cast<int>(ifaces.size()));
  for (const auto& ifc : ifaces) {
    ASSERT_TRUE(obj.fields().count(ifc)) << ifc;
    const auto& port = obj.fields().at(ifc).struct_value();
    ASSERT_TRUE(port.fields().count("SAI_PORT_STAT_IF_IN_OCTETS")) << ifc;
    ASSERT_TRUE(port.fields().count("SAI_PORT_STAT_PFC_3_RX_PKTS")) << ifc;
    for (const auto& [field, v] : port.fields()) {
      EXPECT_EQ(v.kind_case(), google::protobuf::Value::kStringValue) << ifc << " " << field;
    }
  }
  // The flow host000 -> host001 enters leaf0 on its host port.
  EXPECT_NE(obj.fields()
                .at(f_->leaf0_down_if)
                .struct_value()
                .fields()
                .at("SAI_PORT_STAT_IF_IN_OCTETS")
                .string_value(),
            "0");
}

TEST_F(PersonalityTest, SonicServesOidMapsThatKeyTheWatermarks) {
  auto ns = Once(*persona_[PersonalityKind::kSonic], "COUNTERS_DB",
                 {{"COUNTERS_PORT_NAME_MAP"}, {"COUNTERS_QUEUE_NAME_MAP"}, {"PERIODIC_WATERMARKS"}},
                 gnmi::JSON_IETF);
  std::map<std::string, google::protobuf::Struct> by_path;
  for (const auto& n : ns) {
    for (const auto& u : n.update()) {
      by_path[telemetry::FormatPath(u.path())] = ParseJson(u.val().json_ietf_val());
    }
  }
  ASSERT_EQ(by_path.size(), 3u);
  const auto& ports = by_path["/COUNTERS_PORT_NAME_MAP"];
  const auto& queues = by_path["/COUNTERS_QUEUE_NAME_MAP"];
  const auto& wm = by_path["/PERIODIC_WATERMARKS"];
  const auto ifaces = f_->fabric->Interfaces(f_->leaf0);
  ASSERT_EQ(ports.fields_size(), static_cast<int>(ifaces.size()));
  std::set<std::string> oids;
  for (size_t i = 0; i < ifaces.size(); ++i) {
    EXPECT_EQ(ports.fields().at(ifaces[i]).string_value(),
              Personality::PortOid(static_cast<int>(i)));
    oids.insert(ports.fields().at(ifaces[i]).string_value());
  }
  EXPECT_EQ(oids.size(), ifaces.size());
  ASSERT_EQ(queues.fields_size(), static_cast<int>(ifaces.size()) * kPriorities);
  EXPECT_EQ(queues.fields().at(ifaces[0] + ":3").string_value(), Personality::QueueOid(0, 3));
  // Every watermark key is a queue OID of the map, and every queue has one.
  std::set<std::string> queue_oids, wm_keys;
  for (const auto& [name, oid] : queues.fields()) queue_oids.insert(oid.string_value());
  for (const auto& [key, v] : wm.fields()) {
    wm_keys.insert(key);
    EXPECT_TRUE(v.struct_value().fields().count("SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES")) << key;
  }
  EXPECT_EQ(wm_keys, queue_oids);
  EXPECT_EQ(queue_oids.size(), ifaces.size() * kPriorities);
}

TEST_F(PersonalityTest, SonicRejectsTheLoomOriginNamingThePath) {
  const auto st =
      ErrorOf(*persona_[PersonalityKind::kSonic],
              Request("COUNTERS_DB",
                      {{"COUNTERS/Ethernet*", gnmi::SAMPLE, kNsPerSec},
                       {"loom:/pfc/interfaces/interface[name=*]/priorities/priority[id=*]/state",
                        gnmi::SAMPLE, kNsPerSec}},
                      gnmi::SubscriptionList::STREAM, gnmi::JSON_IETF));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find(
                "loom:/pfc/interfaces/interface[name=*]/priorities/priority[id=*]/state"),
            std::string::npos)
      << st.error_message();
}

TEST_F(PersonalityTest, SonicRejectsSamplesFasterThanOneSecondAndAcceptsOneSecond) {
  auto& sonic = *persona_[PersonalityKind::kSonic];
  const auto st =
      ErrorOf(sonic, Request("COUNTERS_DB", {{"COUNTERS/Ethernet*", gnmi::SAMPLE, 100 * kNsPerMs}},
                             gnmi::SubscriptionList::STREAM, gnmi::JSON_IETF));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("COUNTERS/Ethernet*"), std::string::npos) << st.error_message();
  EXPECT_NE(st.error_message().find("sample_interval"), std::string::npos) << st.error_message();

  auto ok =
      Subscribe(sonic, Request("COUNTERS_DB", {{"COUNTERS/Ethernet*", gnmi::SAMPLE, kNsPerSec}},
                               gnmi::SubscriptionList::STREAM, gnmi::JSON_IETF));
  EXPECT_EQ(ReadUntilSync(*ok).size(), 1u);
  AdvanceTo(1 * kNsPerSec);
  EXPECT_EQ(ReadOne(*ok).update_size(), 1);
  ok->ctx.TryCancel();
}

TEST_F(PersonalityTest, SonicRejectsTargetDefinedAndUnknownDatabasesWithoutHurtingOtherStreams) {
  auto& sonic = *persona_[PersonalityKind::kSonic];
  auto good = Subscribe(sonic, Request("APPL_DB", {{"PORT_TABLE/Ethernet*", gnmi::ON_CHANGE}},
                                       gnmi::SubscriptionList::STREAM, gnmi::JSON_IETF));
  ASSERT_EQ(ReadUntilSync(*good).size(), 1u);

  auto st = ErrorOf(sonic, Request("COUNTERS_DB", {{"COUNTERS/Ethernet*", gnmi::TARGET_DEFINED}},
                                   gnmi::SubscriptionList::STREAM, gnmi::JSON_IETF));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("TARGET_DEFINED not supported for DB targets"),
            std::string::npos)
      << st.error_message();
  st = ErrorOf(sonic, Request("CONFIG_DB", {{"PORT/Ethernet0"}}, gnmi::SubscriptionList::ONCE,
                              gnmi::JSON_IETF));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(st.error_message().find("CONFIG_DB"), std::string::npos) << st.error_message();
  st = ErrorOf(sonic, Request("COUNTERS_DB", {{"NO_SUCH_TABLE"}}, gnmi::SubscriptionList::ONCE,
                              gnmi::JSON_IETF));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(st.error_message().find("NO_SUCH_TABLE"), std::string::npos) << st.error_message();

  // The ON_CHANGE stream still works: a link going down shows as oper_status.
  ASSERT_TRUE(f_->fabric->SetLinkUp(f_->uplink_id, false).ok());
  AdvanceTo(f_->fabric->now() + 10 * kNsPerMs);
  const auto n = ReadOne(*good);
  EXPECT_EQ(n.prefix().target(), "APPL_DB");
  ASSERT_EQ(n.update_size(), 1);
  const auto obj = ParseJson(n.update(0).val().json_ietf_val());
  ASSERT_TRUE(obj.fields().count(f_->uplink_leaf_if)) << n.DebugString();
  EXPECT_EQ(
      obj.fields().at(f_->uplink_leaf_if).struct_value().fields().at("oper_status").string_value(),
      "down");
  EXPECT_EQ(obj.fields_size(), 1);  // only what changed
  good->ctx.TryCancel();
}

// Flex counters: queue counters refresh every 10 s of virtual time, so a 1 s
// SAMPLE repeats them within the window and sees new values after it.
TEST_F(PersonalityTest, SonicQueueCountersHoldForTheTenSecondRefreshWindow) {
  auto s =
      Subscribe(*persona_[PersonalityKind::kSonic],
                Request("COUNTERS_DB", {{"COUNTERS/Ethernet*/Queues", gnmi::SAMPLE, kNsPerSec}},
                        gnmi::SubscriptionList::STREAM, gnmi::JSON_IETF));
  auto total_bytes = [](const gnmi::Notification& n) {
    EXPECT_EQ(n.update_size(), 1);
    uint64_t sum = 0;
    const google::protobuf::Struct obj = ParseJson(n.update(0).val().json_ietf_val());
    for (const auto& [q, fields] : obj.fields()) {
      sum += std::stoull(fields.struct_value().fields().at("SAI_QUEUE_STAT_BYTES").string_value());
    }
    return sum;
  };
  auto initial = ReadUntilSync(*s);
  ASSERT_EQ(initial.size(), 1u);
  std::vector<uint64_t> bytes = {total_bytes(initial[0])};
  for (int sec = 1; sec <= 11; ++sec) {
    AdvanceTo(sec * kNsPerSec);
    bytes.push_back(total_bytes(ReadOne(*s)));
  }
  for (int sec = 1; sec < 10; ++sec) EXPECT_EQ(bytes[sec], bytes[0]) << "at " << sec << " s";
  EXPECT_GT(bytes[10], bytes[9]);  // the next refresh
  EXPECT_EQ(bytes[11], bytes[10]);
  s->ctx.TryCancel();
}

TEST_F(PersonalityTest, SonicGetAnswersAsOnceAndUpdatesOnlySyncsFirst) {
  auto& sonic = *persona_[PersonalityKind::kSonic];
  grpc::ClientContext ctx;
  gnmi::GetRequest req;
  req.mutable_prefix()->set_target("COUNTERS_DB");
  req.set_encoding(gnmi::JSON_IETF);
  ASSERT_TRUE(telemetry::ParsePath("COUNTERS/Ethernet*/Pfcwd", req.add_path()).ok());
  gnmi::GetResponse resp;
  ASSERT_TRUE(StubFor(sonic)->Get(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.notification_size(), 1);
  const auto wd = ParseJson(resp.notification(0).update(0).val().json_ietf_val());
  const auto ifaces = f_->fabric->Interfaces(f_->leaf0);
  EXPECT_EQ(wd.fields_size(), static_cast<int>(ifaces.size()) * kPriorities);
  EXPECT_EQ(
      wd.fields().at(ifaces[0] + ":3").struct_value().fields().at("PFC_WD_STATUS").string_value(),
      "operational");

  auto req2 = Request("COUNTERS_DB", {{"COUNTERS/Ethernet*", gnmi::SAMPLE, kNsPerSec}},
                      gnmi::SubscriptionList::STREAM, gnmi::JSON_IETF);
  req2.mutable_subscribe()->set_updates_only(true);
  auto s = Subscribe(sonic, req2);
  EXPECT_TRUE(ReadUntilSync(*s).empty());
  AdvanceTo(1 * kNsPerSec);
  EXPECT_EQ(ReadOne(*s).update(0).path().elem(0).name(), "COUNTERS");
  s->ctx.TryCancel();
}

// loom-fabric's loop publishes every snapshot to the personality targets too.
TEST_F(PersonalityTest, FabricLoopPublishesToMoreTargets) {
  FabricLoopOptions lo;
  lo.speed = 0;
  lo.duration_ns = f_->fabric->now() + 20 * kNsPerMs;
  lo.more_targets = {persona_[PersonalityKind::kSonic].get()};
  FabricLoop loop(f_->fabric.get(), loom_.get(), lo);
  loop.Run();
  ASSERT_NE(persona_[PersonalityKind::kSonic]->latest(), nullptr);
  EXPECT_EQ(persona_[PersonalityKind::kSonic]->latest(), loom_->latest());
  EXPECT_GE(loom_->latest()->virtual_ns, 20 * kNsPerMs);
}

// ------------------------------------------------------------------ OpenConfig

TEST_F(PersonalityTest, OpenConfigRejectsTheLoomOrigin) {
  for (PersonalityKind k : {PersonalityKind::kOpenConfig, PersonalityKind::kOpenConfigJson}) {
    const std::string path =
        "loom:/qos/interfaces/interface[interface-id=*]/output/queues/queue[name=*]/state";
    const auto st = ErrorOf(*persona_[k], Request("", {{"/interfaces"}, {path}},
                                                  gnmi::SubscriptionList::ONCE, gnmi::JSON_IETF));
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << PersonalityName(k);
    EXPECT_NE(st.error_message().find(path), std::string::npos) << st.error_message();
  }
}

TEST_F(PersonalityTest, OpenConfigServesTypedProtoValuesPerContainer) {
  AdvanceTo(5 * kNsPerMs);
  auto ns = Once(*persona_[PersonalityKind::kOpenConfig], "",
                 {{"/interfaces/interface[name=*]/state"}}, gnmi::PROTO);
  int counters = 0, status = 0;
  for (const auto& n : ns) {
    for (const auto& u : n.update()) {
      ASSERT_EQ(u.path().elem_size(), 1);
      const std::string full = testing::FullPath(n, u);
      if (u.path().elem(0).name() == "oper-status") {
        EXPECT_EQ(u.val().string_val(), "UP") << full;
        ++status;
      } else {
        EXPECT_TRUE(u.val().has_uint_val()) << full;
        ++counters;
      }
    }
  }
  const int ifaces = static_cast<int>(f_->fabric->Interfaces(f_->leaf0).size());
  EXPECT_EQ(status, ifaces);
  EXPECT_EQ(counters, ifaces * 9);
}

TEST_F(PersonalityTest, OpenConfigJsonAnswersProtoWithUnimplemented) {
  auto& t = *persona_[PersonalityKind::kOpenConfigJson];
  const auto st =
      ErrorOf(t, Request("", {{"/interfaces"}}, gnmi::SubscriptionList::STREAM, gnmi::PROTO));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(st.error_message(), "encoding PROTO not supported; supported: JSON_IETF");
  grpc::ClientContext ctx;
  gnmi::CapabilityResponse r;
  ASSERT_TRUE(StubFor(t)->Capabilities(&ctx, gnmi::CapabilityRequest(), &r).ok());
  ASSERT_EQ(r.supported_encodings_size(), 1);
  EXPECT_EQ(r.supported_encodings(0), gnmi::JSON_IETF);
}

TEST_F(PersonalityTest, OpenConfigJsonAnswersModulePrefixedContainerObjects) {
  AdvanceTo(5 * kNsPerMs);
  auto ns = Once(*persona_[PersonalityKind::kOpenConfigJson], "",
                 {{"/interfaces/interface[name=*]/state/counters"},
                  {"/qos/interfaces/interface[interface-id=*]/output/queues/queue[name=*]/state"}},
                 gnmi::JSON_IETF);
  int containers = 0;
  for (const auto& n : ns) {
    for (const auto& u : n.update()) {
      ++containers;
      const std::string path = telemetry::FormatPath(u.path());
      ASSERT_TRUE(u.val().has_json_ietf_val()) << path;
      const auto obj = ParseJson(u.val().json_ietf_val());
      const std::string module =
          path.rfind("/qos/", 0) == 0 ? "openconfig-qos:" : "openconfig-interfaces:";
      ASSERT_GT(obj.fields_size(), 0) << path;
      for (const auto& [member, v] : obj.fields()) {
        EXPECT_EQ(member.rfind(module, 0), 0u) << path << " " << member;
        EXPECT_EQ(v.kind_case(), google::protobuf::Value::kStringValue) << member;
      }
      if (path.find("/state/counters") != std::string::npos) {
        EXPECT_TRUE(obj.fields().count("openconfig-interfaces:in-octets")) << path;
      }
    }
  }
  const int ifaces = static_cast<int>(f_->fabric->Interfaces(f_->leaf0).size());
  EXPECT_EQ(containers, ifaces + ifaces * kPriorities);
}

// ------------------------------------------------------------------ round trip

// Steps to 10 s (a new window for every refresh interval), records the loom
// values there, steps on to 10.5 s and compares the personality's answers,
// translated, with the loom values (window start for refreshed signals).
class PersonalityRoundTripTest : public PersonalityTest {
 protected:
  std::vector<std::string> Run(PersonalityKind k, gnmi::Encoding enc,
                               const v1::TelemetryProfile& translate_with,
                               std::set<std::string>* seen) {
    AdvanceTo(10 * kNsPerSec);
    const auto window = LoomValues();
    AdvanceTo(10 * kNsPerSec + 500 * kNsPerMs);
    const auto latest = LoomValues();
    const auto got = Translate(translate_with, PersonalityAnswers(k, enc));
    EXPECT_FALSE(got.empty());
    // Holding is exercised: the live counters moved since the window began.
    int moved = 0;
    for (const auto& [path, v] : latest) {
      auto w = window.find(path);
      moved += w != window.end() && w->second != v;
    }
    EXPECT_GT(moved, 0);
    return RoundTripMismatches(translate_with, window, latest, got, seen);
  }
  static std::string Join(const std::vector<std::string>& lines) {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  }
};

TEST_F(PersonalityRoundTripTest, SonicAnswersTranslateBackToTheCatalogue) {
  std::set<std::string> seen;
  const auto& p = persona_profile(PersonalityKind::kSonic);
  const auto bad = Run(PersonalityKind::kSonic, gnmi::JSON_IETF, p, &seen);
  EXPECT_TRUE(bad.empty()) << Join(bad);
  // Every signal the profile serves and the emulator has (no LLDP in it).
  EXPECT_EQ(seen, (std::set<std::string>{"interface-counters", "pfc-counters", "pfc-pause-duration",
                                         "oper-status", "port-speed", "queue-counters", "ecn-marks",
                                         "queue-depth", "queue-watermark", "pfc-watchdog"}));
}

TEST_F(PersonalityRoundTripTest, OpenConfigProtoAnswersTranslateBackToTheCatalogue) {
  std::set<std::string> seen;
  const auto& p = persona_profile(PersonalityKind::kOpenConfig);
  const auto bad = Run(PersonalityKind::kOpenConfig, gnmi::PROTO, p, &seen);
  EXPECT_TRUE(bad.empty()) << Join(bad);
  EXPECT_EQ(seen, (std::set<std::string>{"interface-counters", "oper-status", "port-speed",
                                         "queue-counters", "ecn-marks", "queue-watermark"}));
}

TEST_F(PersonalityRoundTripTest, OpenConfigJsonAnswersTranslateBackToTheCatalogue) {
  std::set<std::string> seen;
  const auto& p = persona_profile(PersonalityKind::kOpenConfigJson);
  const auto bad = Run(PersonalityKind::kOpenConfigJson, gnmi::JSON_IETF, p, &seen);
  EXPECT_TRUE(bad.empty()) << Join(bad);
  EXPECT_EQ(seen, (std::set<std::string>{"interface-counters", "oper-status", "port-speed",
                                         "queue-counters", "ecn-marks", "queue-watermark"}));
}

// The round trip can fail: a personality serving from a copy of the profile
// with one LeafRule edited no longer agrees with the shipped profile.
TEST_F(PersonalityRoundTripTest, BrokenProfileMappingBreaksTheRoundTrip) {
  const auto& shipped = persona_profile(PersonalityKind::kSonic);
  v1::TelemetryProfile broken = shipped;
  bool edited = false;
  for (auto& s : *broken.mutable_signals()) {
    for (auto& r : *s.mutable_leaves()) {
      if (r.canonical() == "/interfaces/interface[name={if}]/state/counters/in-octets") {
        r.set_match(0, "COUNTERS/Ethernet*/{if}/SAI_PORT_STAT_IF_OUT_OCTETS");
        edited = true;
      }
    }
  }
  ASSERT_TRUE(edited);
  ServeFrom(PersonalityKind::kSonic, broken);
  std::set<std::string> seen;
  const auto bad = Run(PersonalityKind::kSonic, gnmi::JSON_IETF, shipped, &seen);
  ASSERT_FALSE(bad.empty());
  bool names_in_octets = false;
  for (const auto& line : bad) {
    names_in_octets = names_in_octets || line.find("in-octets") != std::string::npos;
  }
  EXPECT_TRUE(names_in_octets) << Join(bad);
}

// ------------------------------------------------------------------ flags

TEST(PersonalitySpecTest, ParsesDeviceEqualsName) {
  PersonalitySpec s;
  std::string err;
  ASSERT_TRUE(ParsePersonalitySpec("leaf-0=openconfig-json", &s, &err)) << err;
  EXPECT_EQ(s.device, "leaf-0");
  EXPECT_EQ(s.kind, PersonalityKind::kOpenConfigJson);
  EXPECT_FALSE(ParsePersonalitySpec("leaf-0=eos", &s, &err));
  EXPECT_NE(err.find("eos"), std::string::npos);
  EXPECT_FALSE(ParsePersonalitySpec("leaf-0", &s, &err));
}

}  // namespace
}  // namespace loom::sim
