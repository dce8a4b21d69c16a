// libFuzzer target for every JSON file Loom reads. Input: one selector byte
// (kind = byte % kKinds), then the file's text.
//   config    loomd --config (LoomdConfig): LoadConfig, then what loomd does
//             with it at start-up and on SIGHUP: adaptive options, change
//             safety and fabric settings against the topology, the device
//             inventory (ResolveInventory, BuildSouthbound, DeviceLimitsOf,
//             BuildTelemetryTargets, DeviceStatuses), uncarried settings
//   topology  topology files (ParseTopologyJson); a valid one is indexed,
//             written back with TopologyToJson and must parse to the same message
//   policy    loomd --policy (PolicySet): parse, validate against
//             topology-small, evaluate jobs when it has no errors
//   scenario  loom-fabric / loomd --emulate scenarios: ParseScenarioJson
//             (topologyFile resolved in deploy/examples) and BuildScenarioFabric
//   job       loomctl job files (loom.v1.Job JSON, as loomctl reads them):
//             ValidateJobSpec against topology-small, policy evaluation
//   profile   telemetry platform profiles (profileDirs): LoadProfileFile, then
//             the profile translating fixed SONiC / OpenConfig notifications
// Properties: no crash or sanitizer report; every refusal says why (non-empty
// error); what is accepted passes the next stage's own validation.
//
// Sizes are bounded where a file legitimately asks for work proportional to a
// number in it (generated fabrics, per-QP connections, fault repetitions, ALB
// tables): such inputs are skipped, not findings (see kMax* below).
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <cstdint>
#include <string>
#include <vector>

#include "api/topology/topology_index.h"
#include "api/topology/topology_io.h"
#include "controller/core/adaptive_engine.h"
#include "controller/core/controller.h"
#include "controller/core/job_validation.h"
#include "controller/loomd/config.h"
#include "controller/loomd/inventory.h"
#include "loom/sim/v1/scenario.pb.h"
#include "policy/policy_engine.h"
#include "sim-fabric/scenario.h"
#include "telemetry/path.h"
#include "telemetry/profile.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

namespace v1 = loom::v1;
using loom::fuzz::Check;
using loom::fuzz::Finding;

enum Kind : uint8_t { kConfig, kTopology, kPolicy, kScenario, kJob, kProfile, kKinds };
const char* const kKindNames[kKinds] = {"config",   "topology", "policy",
                                        "scenario", "job",      "profile"};

// Work bounds for scenarios (skipped above, see the header comment).
constexpr int kMaxRailHosts = 128;
constexpr int kMaxRailSpines = 16;
constexpr int kMaxRailLinksPerSpine = 8;
constexpr int kMaxRailGpusPerHost = 8;
constexpr int kMaxQpsPerConnection = 64;
constexpr int kMaxFaultCount = 1000;
constexpr int kMaxAlbBuckets = 65536;
constexpr int kMaxScenarioJobs = 16;

const std::string kExamples = std::string(LOOM_SOURCE_DIR) + "/deploy/examples";

struct Fixture {
  std::string topology_path = kExamples + "/topology-small.json";
  std::shared_ptr<const loom::topology::TopologyIndex> topo;
  loom::telemetry::ProfileSet profiles;
  loom::policy::PolicyEngine policy;
  std::vector<v1::Job> jobs;
  std::vector<gnmi::Notification> notifications;  // for profile translation
  std::string credentials;                        // file:... credentials go here
};

// `prefix`: the prefix target (SONiC names its database there).
gnmi::Notification Note(const std::string& prefix, const std::string& path,
                        const std::string& json) {
  gnmi::Notification n;
  n.set_timestamp(1'700'000'000'000'000'000);
  n.mutable_prefix()->set_target(prefix);
  gnmi::Update* u = n.add_update();
  if (!loom::telemetry::ParsePath(path, u->mutable_path()).ok()) Finding("bad path");
  u->mutable_val()->set_json_ietf_val(json);
  return n;
}

const Fixture& F() {
  static const Fixture* f = [] {
    auto* x = new Fixture;
    std::string error;
    v1::Topology t;
    if (!loom::topology::LoadTopologyFile(x->topology_path, &t, &error)) Finding(error);
    x->topo = std::make_shared<const loom::topology::TopologyIndex>(std::move(t));
    if (!loom::telemetry::LoadProfiles({std::string(LOOM_SOURCE_DIR) + "/telemetry/profiles"},
                                       &x->profiles, &error)) {
      Finding(error);
    }
    v1::PolicySet set;
    if (!loom::policy::ParsePolicyJson(
            R"({"colors": [{"color": 1, "spines": ["spine0"]}, {"color": 2, "spines": ["spine1"]}],
                "rules": [{"name": "beta", "match": {"tenants": ["beta"]},
                           "action": {"colors": [2], "backupColor": 1}}]})",
            "fuzz", &set, &error)) {
      Finding(error);
    }
    x->policy = loom::policy::PolicyEngine(set);
    for (const char* tenant : {"acme", "beta"}) {
      v1::Job j;
      j.set_tenant(tenant);
      j.set_job_id(std::string(tenant) + "-job");
      j.add_endpoints("host000-gpu0");
      j.add_endpoints("host002-gpu1");
      x->jobs.push_back(j);
    }
    x->notifications.push_back(
        Note("COUNTERS_DB", "COUNTERS/Ethernet*",
             R"({"Ethernet0":{"SAI_PORT_STAT_IF_IN_OCTETS":"18446744073709551000",)"
             R"("SAI_PORT_STAT_IF_OUT_OCTETS":"42","SAI_PORT_STAT_PFC_3_RX_PKTS":"7"},)"
             R"("etp1":{"SAI_PORT_STAT_IF_IN_ERRORS":"5"}})"));
    x->notifications.push_back(
        Note("", "COUNTERS/Ethernet*/Pfcwd", R"({"Ethernet8:3":{"PFC_WD_STATUS":"stormed"}})"));
    x->notifications.push_back(
        Note("", "COUNTERS_QUEUE_NAME_MAP", R"({"Ethernet0:3":"oid:0x15000000000a3"})"));
    x->notifications.push_back(
        Note("", "PERIODIC_WATERMARKS",
             R"({"oid:0x15000000000a3":{"SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES":"9000"}})"));
    x->notifications.push_back(Note(
        "", "/interfaces",
        R"({"openconfig-interfaces:interface":[{"name":"Ethernet2","state":{"oper-status":"UP",)"
        R"("counters":{"openconfig-interfaces:out-octets":"200"}}}]})"));
    // deploy/examples/loomd-inventory.json reads env:LOOM_GNMI_CREDENTIALS.
    setenv("LOOM_GNMI_CREDENTIALS", "loom:secret", 0);
    x->credentials = loom::fuzz::ScratchDir() + "/credentials";
    loom::fuzz::WriteFileOrDie(x->credentials, "user:secret\n");
    return x;
  }();
  return *f;
}

// LOOM_FUZZ_VERBOSE=1: say what each stage made of the input (seed checks).
void Refused(const char* kind, bool ok, const std::string& error) {
  static const bool verbose = std::getenv("LOOM_FUZZ_VERBOSE") != nullptr;
  if (verbose)
    std::fprintf(stderr, "%s: %s %s\n", kind, ok ? "accepted" : "refused:", error.c_str());
  if (!ok) Check(!error.empty(), std::string(kind) + ": refused without saying why");
}

void FuzzConfig(const std::string& text) {
  const Fixture& f = F();
  const std::string path = loom::fuzz::ScratchDir() + "/loomd.json";
  loom::fuzz::WriteFileOrDie(path, text);
  std::vector<std::string> args = {"loomd", "--config", path, "--topology", f.topology_path};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  v1::LoomdConfig config;
  std::string error;
  auto r = loom::loomd::LoadConfig(static_cast<int>(args.size()), argv.data(), &config, &error);
  if (r != loom::loomd::ConfigResult::kOk) {
    Check(r == loom::loomd::ConfigResult::kError, "config: --help/--version from a file");
    Refused("config", false, error);
    return;
  }
  loom::controller::AdaptiveOptions adaptive;
  (void)loom::loomd::AdaptiveOptionsFromConfig(config, &adaptive);
  const v1::Topology& topo = f.topo->topology();
  error.clear();
  const bool change_ok = loom::loomd::ValidateChangeConfig(config, topo, &error);
  Refused("config: change safety", change_ok, error);
  loom::loomd::Inventory inventory;
  error.clear();
  const bool inv_ok = loom::loomd::ResolveInventory(config, topo, f.profiles, &inventory, &error);
  Refused("config: inventory", inv_ok, error);
  if (!inv_ok) return;
  loom::loomd::Southbound sb;
  error.clear();
  const bool sb_ok = loom::loomd::BuildSouthbound(inventory, topo, &sb, &error);
  Refused("config: southbound", sb_ok, error);
  if (sb_ok) {
    auto limits = loom::loomd::DeviceLimitsOf(sb);
    if (change_ok) {
      std::vector<v1::FabricSetting> settings(config.fabric_settings().begin(),
                                              config.fabric_settings().end());
      (void)loom::controller::Controller::UncarriedSettings(settings, topo, limits);
    }
  }
  // Credentials are read from where the config says: keep files to our own.
  for (auto& [id, entry] : inventory.devices) {
    auto* g = entry.mutable_gnmi();
    if (g->credentials_ref().rfind("file:", 0) == 0)
      g->set_credentials_ref("file:" + f.credentials);
  }
  std::vector<loom::telemetry::TargetConfig> targets;
  error.clear();
  const bool t_ok = loom::loomd::BuildTelemetryTargets(inventory, topo, f.profiles,
                                                       100 * loom::kNsPerMs, &targets, &error);
  Refused("config: telemetry targets", t_ok, error);
  auto statuses = loom::loomd::DeviceStatuses(inventory, topo, {}, 0, false, "");
  Check(statuses.devices_size() >= 0, "config: statuses");
}

void FuzzTopology(const std::string& text) {
  v1::Topology t;
  std::string error;
  const bool ok = loom::topology::ParseTopologyJson(text, "fuzz.json", &t, &error);
  Refused("topology", ok, error);
  if (!ok) return;
  Check(loom::topology::ValidateTopology(t).empty(), "topology: accepted with validation errors");
  loom::topology::TopologyIndex index(t);
  for (const auto& d : t.devices()) {
    Check(index.FindDevice(d.id()) != nullptr, "topology: index lost device " + d.id());
    (void)index.LinksOf(d.id());
    if (d.role() == v1::DEVICE_ROLE_NIC) (void)index.NicLeaf(d.id());
  }
  for (const auto& l : t.links()) {
    Check(index.FindLink(l.id()) != nullptr, "topology: index lost link " + l.id());
  }
  for (const auto& g : t.gpus()) (void)index.EndpointNic(g.id());
  const std::string again = loom::topology::TopologyToJson(t);
  v1::Topology t2;
  error.clear();
  Check(loom::topology::ParseTopologyJson(again, "again.json", &t2, &error),
        "topology: TopologyToJson output does not load: " + error);
  Check(google::protobuf::util::MessageDifferencer::Equals(t, t2),
        "topology: TopologyToJson output loads as a different topology");
}

void FuzzPolicy(const std::string& text) {
  v1::PolicySet set;
  std::string error;
  const bool ok = loom::policy::ParsePolicyJson(text, "fuzz.json", &set, &error);
  Refused("policy", ok, error);
  if (!ok) return;
  auto findings = loom::policy::ValidatePolicy(set, *F().topo);
  for (const auto& fi : findings) Check(!fi.message.empty(), "policy: finding without a message");
  (void)loom::policy::FormatFindings(findings);
  if (loom::policy::HasErrors(findings)) return;
  loom::policy::PolicyEngine engine(set);
  for (const auto& job : F().jobs) {
    auto d = engine.Evaluate(job);
    Check(d.rule_index >= -1 && d.rule_index < set.rules_size(), "policy: rule index out of range");
  }
}

// True when the scenario asks for more work than the bounds above.
bool TooBig(const loom::sim::v1::Scenario& s) {
  const auto& r = s.rail();
  if (r.hosts() > kMaxRailHosts || r.hosts_per_stripe() > kMaxRailHosts ||
      r.spines() > kMaxRailSpines || r.links_per_spine() > kMaxRailLinksPerSpine ||
      r.gpus_per_host() > kMaxRailGpusPerHost) {
    return true;
  }
  if (s.jobs_size() > kMaxScenarioJobs) return true;
  for (const auto& j : s.jobs()) {
    if (j.qps_per_connection() > kMaxQpsPerConnection) return true;
  }
  for (const auto& fa : s.faults()) {
    if (fa.count() > kMaxFaultCount) return true;
  }
  for (const auto& m : s.switch_modes()) {
    if (m.alb_buckets() > kMaxAlbBuckets) return true;
  }
  // Topology files: the examples only (never a path out of deploy/examples).
  const std::string& file = s.topology_file();
  if (!file.empty() && (file.find('/') != std::string::npos ||
                        file.find('\0') != std::string::npos || file.rfind("topology-", 0) != 0)) {
    return true;
  }
  return false;
}

void FuzzScenario(const std::string& text) {
  loom::sim::v1::Scenario spec;
  if (google::protobuf::util::JsonStringToMessage(text, &spec).ok() && TooBig(spec)) return;
  loom::sim::LoadedScenario sc;
  std::string error;
  const bool ok = loom::sim::ParseScenarioJson(text, kExamples, &sc, &error);
  Refused("scenario", ok, error);
  if (!ok) return;
  error.clear();
  auto fabric = loom::sim::BuildScenarioFabric(sc, &error);
  Refused("scenario: fabric", fabric != nullptr, error);
}

void FuzzJob(const std::string& text) {
  v1::Job job;
  if (!google::protobuf::util::JsonStringToMessage(text, &job).ok()) return;
  loom::Status s = loom::controller::ValidateJobSpec(job, *F().topo);
  Refused("job", s.ok(), s.message());
  if (!s.ok()) {
    Check(s.code() == loom::StatusCode::kInvalidArgument,
          "job: refused with a code other than "
          "INVALID_ARGUMENT");
    return;
  }
  (void)F().policy.Evaluate(job);
}

void FuzzProfile(const std::string& text) {
  const std::string path = loom::fuzz::ScratchDir() + "/profile.json";
  loom::fuzz::WriteFileOrDie(path, text);
  v1::TelemetryProfile p;
  std::string error;
  const bool ok = loom::telemetry::LoadProfileFile(path, &p, &error);
  Refused("profile", ok, error);
  if (!ok) return;
  Check(loom::telemetry::ValidateProfile(p).empty(), "profile: loaded but not valid");
  loom::telemetry::ProfileTranslator tr(p, {{"etp1", "Ethernet0"}});
  std::vector<int> all;
  for (int i = 0; i < p.signals_size(); ++i) all.push_back(i);
  for (int i = 0; i < p.key_maps_size(); ++i) {
    for (const auto& n : F().notifications) tr.UpdateKeyMap(i, n);
  }
  for (const auto& n : F().notifications) {
    gnmi::Notification out;
    std::string err;
    tr.Translate(all, n, 1, &out, &err);
    for (const auto& u : out.update()) {
      Check(u.path().elem_size() > 0, "profile: translated update without a path");
    }
  }
}

void WriteSeeds() {
  struct Src {
    Kind kind;
    std::string file;
  };
  const std::string src = LOOM_SOURCE_DIR;
  std::vector<Src> files = {
      {kConfig, "deploy/examples/loomd.json"},
      {kConfig, "deploy/examples/loomd-inventory.json"},
      {kTopology, "deploy/examples/topology-small.json"},
      {kTopology, "deploy/examples/topology-clos3.json"},
      {kPolicy, "deploy/examples/policy.json"},
      {kScenario, "deploy/examples/scenario-small.json"},
      {kScenario, "deploy/examples/scenario-faults.json"},
      {kScenario, "deploy/examples/scenario-reference.json"},
      {kScenario, "sim-fabric/examples/cbd-deadlock.json"},
      {kScenario, "sim-fabric/examples/packet-level-a.json"},
      {kScenario, "sim-fabric/examples/small-allreduce.json"},
      {kScenario, "tests/e2e/data/scenario-incast.json"},
      {kScenario, "tests/e2e/data/scenario-live-fault.json"},
      {kJob, "deploy/examples/job-small.json"},
      {kJob, "deploy/examples/job-allreduce.json"},
  };
  for (const char* p :
       {"sonic", "openconfig", "eos", "junos", "nxos", "cumulus", "host", "loom-fabric"}) {
    files.push_back({kProfile, std::string("telemetry/profiles/") + p + ".json"});
  }
  for (const auto& s : files) {
    std::string text = loom::fuzz::ReadFileOrDie(src + "/" + s.file);
    // Scenario topology files are looked up in deploy/examples.
    const std::string up = "\"../../deploy/examples/", up3 = "\"../../../deploy/examples/";
    for (const auto& u : {up3, up}) {
      for (size_t at; (at = text.find(u)) != std::string::npos;) text.replace(at, u.size(), "\"");
    }
    std::string name = s.file.substr(s.file.rfind('/') + 1);
    name = std::string(kKindNames[s.kind]) + "-" + name.substr(0, name.size() - 5);
    loom::fuzz::WriteSeed(name, std::string(1, static_cast<char>(s.kind)) + text);
  }
  // Inline shapes the examples do not use.
  loom::fuzz::WriteSeed("scenario-rail-inline",
                        std::string(1, kScenario) + R"({"name": "r", "rail": {"hosts": 4,
      "hostsPerStripe": 2, "spines": 2, "gpusPerHost": 2, "nicSpeed": "400G"},
      "jobs": [{"id": "a", "collective": "allgather", "rankCount": 4, "maxRate": "100G"}],
      "switchModes": [{"device": "*", "mode": "dlb", "flowletInactivityNs": "2000",
                       "sprayPriorities": [3]}]})");
  loom::fuzz::WriteSeed("policy-small", std::string(1, kPolicy) + R"({
      "colors": [{"color": 1, "spines": ["spine0"]}, {"color": 2, "spines": ["spine1"]}],
      "rules": [{"name": "beta", "match": {"tenants": ["beta"]},
                 "action": {"colors": [2], "backupColor": 1, "isolation": "ISOLATION_DEDICATED"}},
                {"name": "acme", "match": {"tenants": ["acme"]}, "action": {"qpSplit": 2}}]})");
  loom::fuzz::WriteSeed("config-change-safety", std::string(1, kConfig) + R"({
      "changeMode": "approve",
      "changeSafety": {"canary": ["leaf0"], "canaryWaitMs": 1000, "maxPfcPauseIncrease": 0.1},
      "fabricSettings": [{"namePattern": "leaf*",
                          "thresholds": [{"priority": 3, "ecnKminBytes": "100000",
                                          "ecnKmaxBytes": "400000", "ecnPmaxPercent": 20}],
                          "dlb": {"loadWeightPercent": 50}}],
      "adaptive": {"albScanIntervalMs": 2000, "dampeningHalfLifeMs": 5000}})");
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
  if (size == 0) return 0;
  loom::fuzz::Reader in(data, size);
  const Kind kind = static_cast<Kind>(in.Byte() % kKinds);
  const std::string text = in.Rest();
  switch (kind) {
    case kConfig:
      FuzzConfig(text);
      break;
    case kTopology:
      FuzzTopology(text);
      break;
    case kPolicy:
      FuzzPolicy(text);
      break;
    case kScenario:
      FuzzScenario(text);
      break;
    case kJob:
      FuzzJob(text);
      break;
    case kProfile:
      FuzzProfile(text);
      break;
    default:
      break;
  }
  return 0;
}
