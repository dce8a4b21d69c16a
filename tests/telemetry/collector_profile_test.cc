// The collector in profile mode against scripted targets that behave like
// switch OSes: Capabilities and encoding negotiation, one stream per
// (origin, target) group, isolation of rejected paths, ON_CHANGE fallback,
// rejection backoff, signal availability and reload.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "telemetry/collector.h"
#include "telemetry/path.h"
#include "telemetry/profile.h"
#include "tests/telemetry/fake_gnmi_server.h"
#include "tests/telemetry/test_fabric.h"

namespace loom::telemetry {
namespace {

using testing::FakeGnmiServer;

constexpr TimeNs kSec = kNsPerSec;

bool WaitFor(const std::function<bool()>& cond) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

std::shared_ptr<const v1::TelemetryProfile> Profile(const std::string& name) {
  auto p = std::make_shared<v1::TelemetryProfile>();
  std::string error;
  EXPECT_TRUE(LoadProfileFile(
      std::string(LOOM_SOURCE_DIR) + "/telemetry/profiles/" + name + ".json", p.get(), &error))
      << error;
  return p;
}

// Records what the collector hands over.
class RecordingSink final : public TelemetrySink {
 public:
  size_t OnNotification(const std::string& target, const gnmi::Notification& n,
                        TimeNs arrival) override {
    inner_.OnNotification(target, n, arrival);
    return 0;
  }
  void OnSignalAvailability(const SignalAvailability& a) override {
    std::lock_guard<std::mutex> lock(mu_);
    availability_[a.target + "/" + a.signal] = a;
  }
  std::map<std::string, std::string> Values() {
    for (auto& v : inner_.TakeSnapshot()) {
      const auto& tv = v.value;
      values_[v.path] = tv.has_uint_val() ? std::to_string(tv.uint_val()) : tv.string_val();
    }
    return values_;
  }
  bool Has(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    return availability_.count(key) > 0;
  }
  SignalAvailability Get(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    return availability_[key];
  }

 private:
  CoalescingSink inner_;
  std::map<std::string, std::string> values_;
  std::mutex mu_;
  std::map<std::string, SignalAvailability> availability_;
};

TargetConfig ProfileTarget(const std::string& name, const std::string& address,
                           const std::string& profile) {
  TargetConfig t;
  t.name = name;
  t.address = address;
  t.profile = Profile(profile);
  t.sample_interval_ns = 100 * kNsPerMs;
  return t;
}

CollectorOptions Options(std::vector<TargetConfig> targets) {
  CollectorOptions o;
  o.targets = std::move(targets);
  o.backoff.initial_ns = 1 * kSec;
  o.backoff.max_ns = 8 * kSec;
  o.reject_backoff.initial_ns = 30 * kSec;
  o.reject_backoff.max_ns = 600 * kSec;
  o.seed = 7;
  return o;
}

const SignalHealth& SignalOf(const TargetHealth& h, const std::string& signal) {
  for (const auto& s : h.signals) {
    if (s.signal == signal) return s;
  }
  static SignalHealth none;
  return none;
}

std::set<std::string> SubscribedPaths(const gnmi::SubscribeRequest& r) {
  std::set<std::string> out;
  for (const auto& s : r.subscribe().subscription()) out.insert(FormatPath(s.path()));
  return out;
}

// SONiC: COUNTERS_DB target, JSON objects of string counters, a 1 s minimum
// sample interval; Loom negotiates JSON_IETF and translates.
TEST(CollectorProfileTest, SonicTargetNegotiatesJsonIetfAndTranslatesDbObjects) {
  gnmi::Notification n;
  n.set_timestamp(1'700'000'000 * kSec);
  n.mutable_prefix()->set_target("COUNTERS_DB");
  auto* u = n.add_update();
  ASSERT_TRUE(ParsePath("COUNTERS/Ethernet*", u->mutable_path()).ok());
  u->mutable_val()->set_json_ietf_val(R"({"Ethernet0":{"SAI_PORT_STAT_IF_OUT_OCTETS":"4242"}})");
  FakeGnmiServer server({n});
  server.SetEncodings({gnmi::JSON, gnmi::JSON_IETF, gnmi::PROTO});
  ASSERT_TRUE(server.Start());
  VirtualClock clock(10 * kSec);
  RecordingSink sink;
  Collector c(Options({ProfileTarget("leaf0", server.address(), "sonic")}), &sink, &clock);
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitFor([&] {
    return sink.Values().count("/interfaces/interface[name=Ethernet0]/state/counters/out-octets");
  }));
  EXPECT_EQ(sink.Values()["/interfaces/interface[name=Ethernet0]/state/counters/out-octets"],
            "4242");
  const TargetHealth h = c.Health()[0];
  EXPECT_EQ(h.encoding, "JSON_IETF");  // the profile prefers it over JSON; PROTO is not asked
  EXPECT_EQ(h.platform, "sonic");
  // Streams per (origin, target): COUNTERS_DB, APPL_DB and the key maps
  // (each stream's request may still be on its way).
  ASSERT_TRUE(WaitFor([&] {
    std::set<std::string> t;
    for (const auto& r : server.requests()) t.insert(r.subscribe().prefix().target());
    return t.size() == 2;
  }));
  std::set<std::string> targets;
  for (const auto& r : server.requests()) {
    targets.insert(r.subscribe().prefix().target());
    EXPECT_EQ(r.subscribe().encoding(), gnmi::JSON_IETF);
    for (const auto& s : r.subscribe().subscription()) {
      if (s.mode() == gnmi::SAMPLE) {
        EXPECT_GE(s.sample_interval(), 1000000000u);
      }
    }
  }
  EXPECT_EQ(targets, (std::set<std::string>{"COUNTERS_DB", "APPL_DB"}));
  // Not mapped by the profile: unavailable with the profile's reason, at once.
  ASSERT_TRUE(WaitFor([&] { return sink.Has("leaf0/alb-buckets"); }));
  EXPECT_FALSE(sink.Get("leaf0/alb-buckets").available);
  EXPECT_NE(sink.Get("leaf0/alb-buckets").reason.find("ARS"), std::string::npos);
  // The counters' staleness interval is the device's refresh, not 100 ms.
  ASSERT_TRUE(WaitFor([&] { return sink.Has("leaf0/interface-counters"); }));
  EXPECT_EQ(sink.Get("leaf0/interface-counters").effective_interval_ns, 1 * kSec);
}

// gNMI fails a whole Subscribe for one bad path. The collector must split the
// group until the path is alone, keep the others, mark the signal
// unavailable with the target's words, and retry only that path, only after
// the rejection backoff.
TEST(CollectorProfileTest, RejectedPathIsIsolatedAndRetriedOnlyAfterBackoff) {
  FakeGnmiServer server;
  server.SetEncodings({gnmi::PROTO});
  const std::string bad = "loom:/pfc/interfaces/interface[name=*]/priorities/priority[id=*]/state";
  server.RejectPath(bad);
  ASSERT_TRUE(server.Start());
  VirtualClock clock(100 * kSec);
  RecordingSink sink;
  Collector c(Options({ProfileTarget("leaf0", server.address(), "loom-fabric")}), &sink, &clock);
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitFor([&] {
    auto h = c.Health()[0];
    return SignalOf(h, "pfc-counters").state == SignalState::kUnavailable &&
           SignalOf(h, "pfc-pause-duration").state == SignalState::kUnavailable;
  }));
  TargetHealth h = c.Health()[0];
  EXPECT_NE(SignalOf(h, "pfc-counters").reason.find("INVALID_ARGUMENT: unknown path " + bad),
            std::string::npos)
      << SignalOf(h, "pfc-counters").reason;
  EXPECT_GE(SignalOf(h, "pfc-counters").retry_at_ns, clock.Now() + 24 * kSec);
  // The other loom-origin paths of the same group were subscribed without it.
  bool others_accepted = false;
  for (const auto& r : server.requests()) {
    auto paths = SubscribedPaths(r);
    if (r.subscribe().prefix().origin() == "loom" && !paths.count(bad.substr(5)) &&
        paths.count("/pfc/interfaces/interface[name=*]/priorities/priority[id=*]/watchdog/state")) {
      others_accepted = true;
    }
  }
  EXPECT_TRUE(others_accepted);
  EXPECT_NE(SignalOf(h, "pfc-watchdog").state, SignalState::kUnavailable);
  EXPECT_NE(SignalOf(h, "interface-counters").state, SignalState::kUnavailable);

  // No tight loop: without clock progress nothing is retried.
  const size_t calls = server.requests().size();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(server.requests().size(), calls);
  clock.Advance(20 * kSec);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(server.requests().size(), calls);
  // Past the backoff: exactly one retry, of the rejected path alone.
  clock.Advance(20 * kSec);
  ASSERT_TRUE(WaitFor([&] { return server.requests().size() == calls + 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(server.requests().size(), calls + 1);
  EXPECT_EQ(SubscribedPaths(server.requests().back()), (std::set<std::string>{bad.substr(5)}));
  // Rejected again: the next retry waits longer (doubling).
  ASSERT_TRUE(WaitFor([&] { return SignalOf(c.Health()[0], "pfc-counters").rejects == 2; }));
  EXPECT_GE(SignalOf(c.Health()[0], "pfc-counters").retry_at_ns, clock.Now() + 48 * kSec);
  ASSERT_TRUE(WaitFor([&] { return sink.Has("leaf0/pfc-counters"); }));
  EXPECT_FALSE(sink.Get("leaf0/pfc-counters").available);
}

// Target-defined aliases and the deprecated string element form are read.
TEST(CollectorProfileTest, AliasesAndDeprecatedElementPathsAreUnderstood) {
  gnmi::Notification decl;  // "#c0" = leaf0's Ethernet0 counters container
  decl.set_timestamp(1'700'000'000 * kSec);
  ASSERT_TRUE(
      ParsePath("/interfaces/interface[name=Ethernet0]/state/counters", decl.mutable_prefix())
          .ok());
  decl.set_alias("#c0");
  gnmi::Notification use;
  use.set_timestamp(1'700'000'001 * kSec);
  use.mutable_prefix()->add_elem()->set_name("#c0");
  auto* u = use.add_update();
  u->mutable_path()->add_elem()->set_name("out-octets");
  u->mutable_val()->set_uint_val(11);
  gnmi::Notification old;
  old.set_timestamp(1'700'000'001 * kSec);
  u = old.add_update();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  for (const char* e :
       {"interfaces", "interface[name=Ethernet8]", "state", "counters", "in-octets"}) {
    u->mutable_path()->add_element(e);
  }
#pragma GCC diagnostic pop
  u->mutable_val()->set_uint_val(12);
  FakeGnmiServer server({decl, use, old});
  server.SetEncodings({gnmi::PROTO});
  ASSERT_TRUE(server.Start());
  VirtualClock clock(10 * kSec);
  RecordingSink sink;
  Collector c(Options({ProfileTarget("leaf0", server.address(), "openconfig")}), &sink, &clock);
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitFor([&] {
    auto v = sink.Values();
    return v.count("/interfaces/interface[name=Ethernet0]/state/counters/out-octets") &&
           v.count("/interfaces/interface[name=Ethernet8]/state/counters/in-octets");
  }));
  EXPECT_EQ(sink.Values()["/interfaces/interface[name=Ethernet0]/state/counters/out-octets"], "11");
  EXPECT_EQ(sink.Values()["/interfaces/interface[name=Ethernet8]/state/counters/in-octets"], "12");
  EXPECT_EQ(c.Health()[0].translate_errors, 0u);
}

TEST(CollectorProfileTest, RejectedOnChangeFallsBackToSample) {
  FakeGnmiServer server;
  server.SetEncodings({gnmi::PROTO});
  server.RejectOnChange("/interfaces/interface[name=*]/state/oper-status");
  ASSERT_TRUE(server.Start());
  VirtualClock clock(100 * kSec);
  RecordingSink sink;
  Collector c(Options({ProfileTarget("leaf0", server.address(), "loom-fabric")}), &sink, &clock);
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return SignalOf(c.Health()[0], "oper-status").mode == "SAMPLE"; }));
  bool accepted_as_sample = false;
  for (const auto& r : server.requests()) {
    for (const auto& s : r.subscribe().subscription()) {
      if (FormatPath(s.path()) == "/interfaces/interface[name=*]/state/oper-status" &&
          s.mode() == gnmi::SAMPLE && s.sample_interval() == 100'000'000u) {
        accepted_as_sample = true;
      }
    }
  }
  EXPECT_TRUE(accepted_as_sample);
  EXPECT_NE(SignalOf(c.Health()[0], "oper-status").state, SignalState::kUnavailable);
}

// A JSON_IETF-only target (UNIMPLEMENTED for anything else) is asked in
// JSON_IETF, as its Capabilities say, and nothing is rejected.
TEST(CollectorProfileTest, JsonIetfOnlyTargetIsAskedInJsonIetf) {
  gnmi::Notification n;
  n.set_timestamp(1'700'000'000 * kSec);
  auto* u = n.add_update();
  ASSERT_TRUE(
      ParsePath("/interfaces/interface[name=Ethernet4]/state/counters", u->mutable_path()).ok());
  u->mutable_val()->set_json_ietf_val(R"({"openconfig-interfaces:in-octets":"77"})");
  FakeGnmiServer server({n});
  server.SetEncodings({gnmi::JSON_IETF});
  server.RequireEncoding(gnmi::JSON_IETF);
  ASSERT_TRUE(server.Start());
  VirtualClock clock(100 * kSec);
  RecordingSink sink;
  Collector c(Options({ProfileTarget("spine0", server.address(), "openconfig")}), &sink, &clock);
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitFor([&] {
    return sink.Values().count("/interfaces/interface[name=Ethernet4]/state/counters/in-octets");
  }));
  EXPECT_EQ(c.Health()[0].encoding, "JSON_IETF");
  EXPECT_EQ(c.Health()[0].subscribe_rejects, 0u);
  // OpenConfig has no per-priority PFC: unavailable, saying so.
  const SignalHealth pfc = SignalOf(c.Health()[0], "pfc-counters");
  EXPECT_EQ(pfc.state, SignalState::kUnavailable);
  EXPECT_NE(pfc.reason.find("no per-priority PFC"), std::string::npos) << pfc.reason;
}

// A target that accepts every stream and drops it right after sync never
// delivers data: its backoff keeps growing instead of restarting at 100 ms.
TEST(CollectorProfileTest, TargetDroppingEveryStreamIsRetriedWithGrowingBackoff) {
  FakeGnmiServer server;
  server.SetEncodings({gnmi::PROTO});
  server.EndAfterSync(true);
  ASSERT_TRUE(server.Start());
  VirtualClock clock(100 * kSec);
  RecordingSink sink;
  Collector c(Options({ProfileTarget("leaf0", server.address(), "loom-fabric")}), &sink, &clock);
  ASSERT_TRUE(c.Start().ok());
  TimeNs last_delay = 0;
  for (int failures = 1; failures <= 3; ++failures) {
    ASSERT_TRUE(WaitFor([&] { return c.Health()[0].consecutive_failures == failures; }));
    const TargetHealth h = c.Health()[0];
    const TimeNs delay = h.next_attempt_ns - clock.Now();
    EXPECT_GT(delay, last_delay) << failures;  // 1 s, 2 s, 4 s (+-20 %)
    last_delay = delay;
    const uint64_t attempts = h.connect_attempts;
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    EXPECT_EQ(c.Health()[0].connect_attempts, attempts);  // nothing before the backoff
    clock.Set(h.next_attempt_ns);
  }
}

TEST(CollectorProfileTest, NoCommonEncodingBacksOffInsteadOfSubscribing) {
  FakeGnmiServer server;
  server.SetEncodings({gnmi::JSON});  // the host profile speaks PROTO only
  ASSERT_TRUE(server.Start());
  VirtualClock clock(100 * kSec);
  RecordingSink sink;
  Collector c(Options({ProfileTarget("nic0", server.address(), "host")}), &sink, &clock);
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return c.Health()[0].stream_errors == 1; }));
  const TargetHealth h = c.Health()[0];
  EXPECT_NE(h.last_error.find("no common encoding: target offers JSON"), std::string::npos)
      << h.last_error;
  EXPECT_GE(h.next_attempt_ns, clock.Now() + 800 * kNsPerMs);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(server.requests().size(), 0u);
  EXPECT_EQ(c.Health()[0].connect_attempts, 1u);
}

// A reload keeps unchanged targets' streams and starts the new ones.
TEST(CollectorProfileTest, ReloadKeepsUnchangedTargetsStreams) {
  FakeGnmiServer a, b;
  a.SetEncodings({gnmi::PROTO});
  b.SetEncodings({gnmi::PROTO});
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  VirtualClock clock(100 * kSec);
  RecordingSink sink;
  Collector c(Options({ProfileTarget("leaf0", a.address(), "loom-fabric")}), &sink, &clock);
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return c.Health()[0].synced; }));
  const size_t calls = a.requests().size();
  ASSERT_TRUE(c.UpdateTargets({ProfileTarget("leaf0", a.address(), "loom-fabric"),
                               ProfileTarget("leaf1", b.address(), "loom-fabric")})
                  .ok());
  ASSERT_TRUE(WaitFor([&] { return c.Health().size() == 2 && c.Health()[1].synced; }));
  EXPECT_EQ(a.requests().size(), calls);
  EXPECT_TRUE(c.Health()[0].synced);
  // A changed address restarts that target only.
  ASSERT_TRUE(c.UpdateTargets({ProfileTarget("leaf0", a.address(), "loom-fabric")}).ok());
  EXPECT_EQ(c.Health().size(), 1u);
  ASSERT_TRUE(WaitFor([&] { return b.open_streams() == 0; }));
  EXPECT_EQ(a.requests().size(), calls);
}

// Heartbeats are asked for on ON_CHANGE subscriptions where the profile says the
// platform honours them (loom-fabric: 5 s), and not elsewhere (SONiC).
TEST(CollectorProfileTest, HeartbeatRequestedWhereThePlatformHonoursIt) {
  for (const std::string profile : {"loom-fabric", "sonic"}) {
    FakeGnmiServer server;
    server.SetEncodings({gnmi::PROTO, gnmi::JSON_IETF});
    ASSERT_TRUE(server.Start());
    VirtualClock clock(100 * kSec);
    RecordingSink sink;
    Collector c(Options({ProfileTarget("leaf0", server.address(), profile)}), &sink, &clock);
    ASSERT_TRUE(c.Start().ok());
    ASSERT_TRUE(WaitFor([&] { return c.Health()[0].synced; }));
    int on_change = 0, with_heartbeat = 0;
    for (const auto& r : server.requests()) {
      for (const auto& sub : r.subscribe().subscription()) {
        if (sub.mode() != gnmi::ON_CHANGE) continue;
        ++on_change;
        if (sub.heartbeat_interval() == 5'000'000'000u) ++with_heartbeat;
        EXPECT_TRUE(sub.heartbeat_interval() == 0 || profile == "loom-fabric");
      }
    }
    EXPECT_GT(on_change, 0) << profile;
    EXPECT_EQ(with_heartbeat, profile == "loom-fabric" ? on_change : 0) << profile;
  }
}

// In profile mode a silent group is redialled alone: the target stays connected
// and its other streams are not restarted.
TEST(CollectorProfileTest, SilentGroupIsRedialledAloneOnItsOwnConnection) {
  FakeGnmiServer server;
  server.SetEncodings({gnmi::PROTO});
  ASSERT_TRUE(server.Start());
  VirtualClock clock(100 * kSec);
  RecordingSink sink;
  Collector c(Options({ProfileTarget("leaf0", server.address(), "loom-fabric")}), &sink, &clock);
  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return c.Health()[0].synced; }));
  const int streams = c.Health()[0].streams;
  const int calls = server.subscribe_calls();
  ASSERT_GE(streams, 2);
  // Data after sync on every stream (the fake server sends to all of them).
  server.Push(testing::Note(1'700'000'000 * kSec,
                            "/interfaces/interface[name=Ethernet0]/state/counters",
                            {{"out-octets", testing::U(1)}}));
  ASSERT_TRUE(WaitFor([&] { return c.Health()[0].notifications >= 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // A group mixing SAMPLE (100 ms) and ON_CHANGE with 5 s heartbeats promises
  // data every 5 s at least: window 5 x 5 s.
  clock.Advance(20 * kSec);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(c.Health()[0].silent_cuts, 0u);
  clock.Advance(6 * kSec);
  // The groups that were armed are cut and redialled (after the 1 s backoff);
  // the target never disconnects and keeps its number of streams.
  ASSERT_TRUE(WaitFor([&] { return c.Health()[0].silent_cuts >= 1; }));
  EXPECT_TRUE(c.Health()[0].connected);
  ASSERT_TRUE(WaitFor([&] {
    clock.Advance(100 * kNsPerMs);  // backoffs expire; redialled groups are not armed
    const TargetHealth h = c.Health()[0];
    return server.subscribe_calls() == calls + static_cast<int>(h.silent_cuts) &&
           h.streams == streams;
  }));
  EXPECT_TRUE(c.Health()[0].connected);
}

}  // namespace
}  // namespace loom::telemetry
