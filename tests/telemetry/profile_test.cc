// Platform profiles: the shipped files load, and native answers shaped as the
// platforms document them translate into catalogue updates.
#include "telemetry/profile.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "telemetry/path.h"

namespace loom::telemetry {
namespace {

const ProfileSet& Shipped() {
  static ProfileSet* set = [] {
    auto* s = new ProfileSet;
    std::string error;
    const std::string dir = std::string(LOOM_SOURCE_DIR) + "/telemetry/profiles";
    EXPECT_TRUE(LoadProfiles({dir}, s, &error)) << error;
    return s;
  }();
  return *set;
}

int SignalIndex(const v1::TelemetryProfile& p, const std::string& signal) {
  for (int i = 0; i < p.signals_size(); ++i) {
    if (p.signals(i).signal() == signal) return i;
  }
  return -1;
}

std::vector<int> SignalsOnPath(const v1::TelemetryProfile& p, const std::string& path) {
  std::vector<int> out;
  for (int i = 0; i < p.signals_size(); ++i) {
    if (p.signals(i).path() == path) out.push_back(i);
  }
  return out;
}

// catalogue path text -> value text
std::map<std::string, std::string> Values(const gnmi::Notification& n) {
  std::map<std::string, std::string> out;
  for (const auto& u : n.update()) {
    const auto& v = u.val();
    std::string text = v.has_string_val() ? v.string_val()
                       : v.has_uint_val() ? std::to_string(v.uint_val())
                       : v.has_int_val()  ? std::to_string(v.int_val())
                                          : std::to_string(v.double_val());
    out[FormatPath(u.path())] = text;
  }
  return out;
}

gnmi::Path P(const std::string& text) {
  gnmi::Path p;
  EXPECT_TRUE(ParsePath(text, &p).ok()) << text;
  return p;
}

TEST(ProfileTest, EveryShippedProfileLoadsAndCoversEachSignalOnce) {
  const auto& set = Shipped();
  for (const char* name :
       {"sonic", "openconfig", "eos", "junos", "nxos", "cumulus", "host", "loom-fabric"}) {
    ASSERT_TRUE(set.profiles.count(name)) << name;
    const auto& p = set.profiles.at(name);
    std::map<std::string, int> seen;
    for (const auto& s : p.signals()) ++seen[s.signal()];
    for (const auto& u : p.unserved()) ++seen[u.signal()];
    for (const auto& [signal, n] : seen) {
      EXPECT_EQ(n, 1) << name << ": " << signal << " mapped or listed twice";
    }
  }
  // The emulator's own profile serves the whole catalogue.
  EXPECT_EQ(set.profiles.at("loom-fabric").signals_size(),
            static_cast<int>(CatalogueSignals().size()));
}

TEST(ProfileTest, ValidationNamesTheFieldAndTheSignal) {
  v1::TelemetryProfile p = Shipped().profiles.at("sonic");
  p.mutable_signals(0)->set_mode("TARGET_DEFINED");
  EXPECT_NE(ValidateProfile(p).find("signals[0] (interface-counters).mode"), std::string::npos)
      << ValidateProfile(p);
  p = Shipped().profiles.at("sonic");
  p.mutable_signals(0)->mutable_leaves(0)->set_canonical(
      "/interfaces/interface[name={nope}]/state/counters/in-octets");
  EXPECT_NE(ValidateProfile(p).find("does not bind {nope}"), std::string::npos)
      << ValidateProfile(p);
  p = Shipped().profiles.at("sonic");
  p.mutable_signals(0)->set_mark("SOURCED");
  p.mutable_signals(0)->clear_source();
  EXPECT_NE(ValidateProfile(p).find("SOURCED needs one"), std::string::npos);
  p = Shipped().profiles.at("sonic");
  p.mutable_signals(0)->set_signal("pfc-storms");
  EXPECT_NE(ValidateProfile(p).find("not a catalogue signal"), std::string::npos);
}

TEST(ProfileTest, PatternsCaptureInsideSegmentsAndExpandBack) {
  PathPattern p;
  ASSERT_TRUE(
      PathPattern::Compile("COUNTERS/Ethernet*/Queues/{if}:{q}/SAI_QUEUE_STAT_BYTES", &p).ok());
  std::map<std::string, std::string> vars;
  ASSERT_TRUE(p.Match("COUNTERS/Ethernet*/Queues/Ethernet12:3/SAI_QUEUE_STAT_BYTES", &vars));
  EXPECT_EQ(vars["if"], "Ethernet12");
  EXPECT_EQ(vars["q"], "3");
  EXPECT_FALSE(p.Match("COUNTERS/Ethernet*/Queues/Ethernet12/SAI_QUEUE_STAT_BYTES", &vars));
  std::string out;
  ASSERT_TRUE(p.Expand({{"if", "Ethernet4"}, {"q", "6"}}, &out));
  EXPECT_EQ(out, "/COUNTERS/Ethernet*/Queues/Ethernet4:6/SAI_QUEUE_STAT_BYTES");
  // Slashes inside keys stay inside their segment (EOS "Ethernet1/1").
  ASSERT_TRUE(
      PathPattern::Compile("interfaces/interface[name={if}]/state/counters/{leaf}", &p).ok());
  vars.clear();
  ASSERT_TRUE(p.Match("interfaces/interface[name=Ethernet1/1]/state/counters/in-octets", &vars));
  EXPECT_EQ(vars["if"], "Ethernet1/1");
  EXPECT_EQ(vars["leaf"], "in-octets");
  EXPECT_FALSE(PathPattern::Compile("a/{x}{y}/b", &p).ok());
  EXPECT_FALSE(PathPattern::Compile("a/{x*}b", &p).ok());
}

// SONiC answers COUNTERS/Ethernet* with one JSON object of string SAI
// counters per port (SONiC doc/system-telemetry/grpc_telemetry.md).
TEST(ProfileTest, SonicVirtualPathObjectsBecomeInterfaceAndPfcCounters) {
  const auto& p = Shipped().profiles.at("sonic");
  ProfileTranslator tr(p, {});
  gnmi::Notification n;
  n.set_timestamp(1'000'000'000);
  n.mutable_prefix()->set_target("COUNTERS_DB");
  gnmi::Update* u = n.add_update();
  *u->mutable_path() = P("COUNTERS/Ethernet*");
  u->mutable_val()->set_json_ietf_val(
      R"({"Ethernet0":{"SAI_PORT_STAT_IF_IN_OCTETS":"18446744073709551000",)"
      R"("SAI_PORT_STAT_IF_OUT_OCTETS":"42","SAI_PORT_STAT_PFC_3_RX_PKTS":"7",)"
      R"("SAI_PORT_STAT_ETHER_STATS_JABBERS":"0"},"Ethernet4":{"SAI_PORT_STAT_IF_IN_ERRORS":"5"}})");
  gnmi::Notification out;
  std::string err;
  EXPECT_EQ(tr.Translate(SignalsOnPath(p, "COUNTERS/Ethernet*"), n, 10, &out, &err), 0u) << err;
  auto v = Values(out);
  EXPECT_EQ(v["/interfaces/interface[name=Ethernet0]/state/counters/in-octets"],
            "18446744073709551000");  // 64-bit counters as RFC 7951 strings, exact
  EXPECT_EQ(v["/interfaces/interface[name=Ethernet0]/state/counters/out-octets"], "42");
  EXPECT_EQ(v["/interfaces/interface[name=Ethernet4]/state/counters/in-errors"], "5");
  EXPECT_EQ(
      v["loom:/pfc/interfaces/interface[name=Ethernet0]/priorities/priority[id=3]/state/rx-pkts"],
      "7");
  EXPECT_EQ(v.size(), 4u);
  EXPECT_EQ(tr.stats().unmatched, 1u);  // the jabbers counter: not in the catalogue
  EXPECT_EQ(out.timestamp(), 1'000'000'000);
}

TEST(ProfileTest, SonicQueueAndWatchdogKeysSplitIntoPortAndQueue) {
  const auto& p = Shipped().profiles.at("sonic");
  ProfileTranslator tr(p, {});
  gnmi::Notification n;
  n.set_timestamp(5);
  gnmi::Update* u = n.add_update();
  *u->mutable_path() = P("COUNTERS/Ethernet*/Pfcwd");
  u->mutable_val()->set_json_ietf_val(
      R"({"Ethernet8:3":{"PFC_WD_STATUS":"stormed","PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED":"2"}})");
  gnmi::Notification out;
  std::string err;
  tr.Translate({SignalIndex(p, "pfc-watchdog")}, n, 1, &out, &err);
  auto v = Values(out);
  const std::string wd =
      "loom:/pfc/interfaces/interface[name=Ethernet8]/priorities/priority[id=3]/watchdog/state/";
  EXPECT_EQ(v[wd + "status"], "stormed");
  EXPECT_EQ(v[wd + "deadlock-detected"], "2");
}

// Watermarks are keyed by queue OID; the OID comes from
// COUNTERS_QUEUE_NAME_MAP. Before the map arrives nothing is guessed.
TEST(ProfileTest, OidKeysWaitForTheMapThenTranslate) {
  const auto& p = Shipped().profiles.at("sonic");
  ProfileTranslator tr(p, {});
  gnmi::Notification n;
  n.set_timestamp(5);
  gnmi::Update* u = n.add_update();
  *u->mutable_path() = P("PERIODIC_WATERMARKS");
  u->mutable_val()->set_json_ietf_val(
      R"({"oid:0x15000000000a3":{"SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES":"9000"}})");
  gnmi::Notification out;
  std::string err;
  const std::vector<int> wm = {SignalIndex(p, "queue-watermark")};
  tr.Translate(wm, n, 1, &out, &err);
  EXPECT_EQ(out.update_size(), 0);
  EXPECT_EQ(tr.stats().unmapped_key, 1u);

  int map_index = -1;
  for (int i = 0; i < p.key_maps_size(); ++i) {
    if (p.key_maps(i).name() == "queue_oid") map_index = i;
  }
  ASSERT_GE(map_index, 0);
  gnmi::Notification m;
  gnmi::Update* mu = m.add_update();
  *mu->mutable_path() = P("COUNTERS_QUEUE_NAME_MAP");
  mu->mutable_val()->set_json_ietf_val(
      R"({"Ethernet0:3":"oid:0x15000000000a3","Ethernet0:4":"oid:0x15000000000a4"})");
  tr.UpdateKeyMap(map_index, m);
  EXPECT_EQ(tr.key_map_size("queue_oid"), 2u);
  out.Clear();
  tr.Translate(wm, n, 2, &out, &err);
  auto v = Values(out);
  EXPECT_EQ(v["/qos/interfaces/interface[interface-id=Ethernet0]/output/queues/queue[name=3]/state/"
              "max-queue-len"],
            "9000");
}

// JSON_IETF containers with module-prefixed members and RFC 7951 lists.
TEST(ProfileTest, JsonIetfContainersAndListsFlattenToOpenConfigLeaves) {
  const auto& p = Shipped().profiles.at("openconfig");
  ProfileTranslator tr(p, {});
  gnmi::Notification n;
  n.set_timestamp(9);
  gnmi::Update* u = n.add_update();
  *u->mutable_path() = P("/interfaces/interface[name=Ethernet1/1]/state/counters");
  u->mutable_val()->set_json_ietf_val(
      R"({"openconfig-interfaces:in-octets":"100","openconfig-interfaces:out-octets":"200"})");
  u = n.add_update();
  *u->mutable_path() = P("/interfaces");
  u->mutable_val()->set_json_ietf_val(
      R"({"openconfig-interfaces:interface":[{"name":"Ethernet2","state":{"oper-status":"UP"}}]})");
  gnmi::Notification out;
  std::string err;
  std::vector<int> all;
  for (int i = 0; i < p.signals_size(); ++i) all.push_back(i);
  EXPECT_EQ(tr.Translate(all, n, 1, &out, &err), 0u) << err;
  auto v = Values(out);
  EXPECT_EQ(v["/interfaces/interface[name=Ethernet1/1]/state/counters/in-octets"], "100");
  EXPECT_EQ(v["/interfaces/interface[name=Ethernet1/1]/state/counters/out-octets"], "200");
  EXPECT_EQ(v["/interfaces/interface[name=Ethernet2]/state/oper-status"], "UP");
}

TEST(ProfileTest, BadJsonIsCountedAndNamed) {
  const auto& p = Shipped().profiles.at("sonic");
  ProfileTranslator tr(p, {});
  gnmi::Notification n;
  gnmi::Update* u = n.add_update();
  *u->mutable_path() = P("COUNTERS/Ethernet*");
  u->mutable_val()->set_json_ietf_val("{\"Ethernet0\": {");
  gnmi::Notification out;
  std::string err;
  EXPECT_EQ(tr.Translate({0}, n, 1, &out, &err), 1u);
  EXPECT_NE(err.find("invalid JSON at COUNTERS/Ethernet*"), std::string::npos) << err;
  EXPECT_EQ(tr.stats().bad_value, 1u);
}

// A device that refreshes every 10 s sampled every second repeats values;
// the repeats are not zero-rate samples.
TEST(ProfileTest, RepeatsWithinTheDeviceRefreshIntervalAreDropped) {
  const auto& p = Shipped().profiles.at("sonic");
  ProfileTranslator tr(p, {});
  const std::vector<int> q = {SignalIndex(p, "queue-counters")};
  auto sample = [&](int64_t t_s, const std::string& bytes) {
    gnmi::Notification n;
    n.set_timestamp(t_s * kNsPerSec);
    gnmi::Update* u = n.add_update();
    *u->mutable_path() = P("COUNTERS/Ethernet*/Queues");
    u->mutable_val()->set_json_ietf_val(R"({"Ethernet0:3":{"SAI_QUEUE_STAT_BYTES":")" + bytes +
                                        "\"}}");
    gnmi::Notification out;
    std::string err;
    tr.Translate(q, n, t_s, &out, &err);
    return out.update_size();
  };
  EXPECT_EQ(sample(0, "1000"), 1);
  for (int t = 1; t < 10; ++t) EXPECT_EQ(sample(t, "1000"), 0) << t;
  EXPECT_EQ(sample(10, "5000"), 1);  // the device's next refresh
  EXPECT_EQ(sample(11, "5000"), 0);
  EXPECT_EQ(sample(21, "5000"), 1);  // idle for a whole refresh: a real zero rate
  EXPECT_EQ(tr.stats().repeated, 10u);
}

TEST(ProfileTest, AliasesFromTheInventoryRenameInterfaces) {
  const auto& p = Shipped().profiles.at("sonic");
  ProfileTranslator tr(p, {{"etp1", "Ethernet0"}});
  gnmi::Notification n;
  n.set_timestamp(1);
  gnmi::Update* u = n.add_update();
  *u->mutable_path() = P("COUNTERS/Ethernet*");
  u->mutable_val()->set_json_ietf_val(R"({"etp1":{"SAI_PORT_STAT_IF_OUT_OCTETS":"3"}})");
  gnmi::Notification out;
  std::string err;
  tr.Translate({0}, n, 1, &out, &err);
  EXPECT_EQ(Values(out)["/interfaces/interface[name=Ethernet0]/state/counters/out-octets"], "3");
}

// SONiC deletes a port's LLDP_ENTRY_TABLE entry when the neighbour goes: the
// catalogue leaves made from it are deleted.
TEST(ProfileTest, DeletingANativeSubtreeDeletesTheStateLeavesMadeFromIt) {
  const auto& p = Shipped().profiles.at("sonic");
  ProfileTranslator tr(p, {});
  const std::vector<int> lldp = {SignalIndex(p, "lldp")};
  gnmi::Notification n;
  n.set_timestamp(1);
  gnmi::Update* u = n.add_update();
  *u->mutable_path() = P("LLDP_ENTRY_TABLE");
  u->mutable_val()->set_json_ietf_val(
      R"({"Ethernet0":{"lldp_rem_sys_name":"spine0","lldp_rem_port_id":"Ethernet4"},)"
      R"("Ethernet4":{"lldp_rem_sys_name":"spine1"}})");
  gnmi::Notification out;
  std::string err;
  tr.Translate(lldp, n, 1, &out, &err);
  EXPECT_EQ(out.update_size(), 3);
  gnmi::Notification del;
  del.set_timestamp(2);
  *del.add_delete_() = P("LLDP_ENTRY_TABLE/Ethernet0");
  gnmi::Notification out2;
  tr.Translate(lldp, del, 2, &out2, &err);
  std::set<std::string> deleted;
  for (const auto& d : out2.delete_()) deleted.insert(FormatPath(d));
  EXPECT_EQ(deleted,
            (std::set<std::string>{
                "/lldp/interfaces/interface[name=Ethernet0]/neighbors/neighbor[id=1]/state/port-id",
                "/lldp/interfaces/interface[name=Ethernet0]/neighbors/neighbor[id=1]/state/"
                "system-name"}));
}

// Rendering (personalities) is the inverse of translating.
TEST(ProfileTest, RenderingInvertsTranslation) {
  const auto& p = Shipped().profiles.at("sonic");
  ProfileRenderer r(p);
  KeyTables reverse;
  reverse["queue_oid"]["Ethernet0:3"] = "oid:0x15000000000a3";
  std::vector<RenderedLeaf> out;
  r.Render(
      "/qos/interfaces/interface[interface-id=Ethernet0]/output/queues/queue[name=3]/state/"
      "max-queue-len",
      "77", reverse, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].native_path,
            "PERIODIC_WATERMARKS/oid:0x15000000000a3/SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES");
  out.clear();
  r.Render("/interfaces/interface[name=Ethernet0]/state/oper-status", "UP", reverse, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].native_path, "PORT_TABLE/Ethernet*/Ethernet0/oper_status");
  EXPECT_EQ(out[0].value, "up");
  out.clear();
  r.Render("loom:/nic/interfaces/interface[name=eth0]/roce/state/np_cnp_sent", "1", reverse, &out);
  EXPECT_TRUE(out.empty());  // SONiC serves no NIC counters
}

}  // namespace
}  // namespace loom::telemetry
