#include "controller/loomd/config.h"

#include <fnmatch.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "api/proto_util/number_ranges.h"
#include "api/services/auth.h"
#include "api/services/http_server.h"  // CheckMetricsSecurity
#include "common/file.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/net.h"
#include "common/text.h"

namespace loom::loomd {

const char kUsage[] = R"(usage: loomd [flags]

Loom controller daemon: takes scheduler intent over gRPC (loom.v1), keeps
jobs and link drains durable in SQLite, serves Prometheus metrics.

Flags (override the config file):
  --config FILE            LoomdConfig as protobuf JSON (see deploy/examples/loomd.json)
  --topology FILE          topology file, protobuf JSON of loom.v1.Topology (required)
  --grpc-listen HOST:PORT  gRPC API address (default 127.0.0.1:50061; port 0 = any)
  --metrics-listen HOST:PORT
                           Prometheus /metrics address (default 127.0.0.1:9464)
  --db FILE                SQLite database (default loom.db)
  --log-level LEVEL        debug, info, warn, error (default info)
  --log-format FORMAT      text or json (default text)
  --ready-file FILE        write {"grpc_port":N,"metrics_port":N} here once serving
  --event-retention N      events kept for replay and watch resume (default 100000;
                           see docs/watch.md for the byte and memory bounds)
  --telemetry-address HOST:PORT
                           one gNMI server serving every switch of the topology
                           (e.g. a running loom-fabric); real switches go in the
                           config file's device inventory ("devices" over
                           "deviceDefaults": gNMI address, platform profile, encodings,
                           credentials, route budget; docs/real-fabric.md,
                           deploy/examples/loomd-inventory.json)
  --telemetry-interval-ms N  gNMI SAMPLE interval (default 100)
  --fabric-ready-file FILE  program a running loom-fabric over the wire (BGP-DPF for
                           colors/routes/weights, gNMI Set for DLB/ALB, gNMI telemetry):
                           FILE is what `loom-fabric --gnmi-listen .. --bgp-listen ..
                           --ready-file FILE` wrote
  --emulate SCENARIO       run the embedded emulator (sim-fabric) with this scenario
                           (loom.sim.v1.Scenario JSON, e.g.
                           deploy/examples/scenario-reference.json): loomd programs
                           and watches it like a real fabric and registers the
                           scenario's jobs; the topology comes from the scenario
  --policy FILE            TELB policy (loom.v1.PolicySet JSON, e.g.
                           deploy/examples/policy.json) installed at start-up;
                           refused with exit 2 when validation finds errors
  --insecure               serve the gRPC API in plaintext on a non-loopback address
                           (refused otherwise without the config's "tls"; logged)
  --help                   this text
  --version                print the version

Programming: the inventory's "bgp" and "set" entries (docs/real-fabric.md).
The config's "changeMode": "auto" (default) programs what Loom computes;
"shadow" computes and reports but programs nothing; "approve" makes fabric-wide
settings ("fabricSettings": ECN/PFC thresholds, PFC watchdog, DLB; plus DLB
tuning and ALB tables) wait for `loomctl apply`, then go canary-first with a
telemetry check and automatic rollback ("changeSafety"; also usable in auto
mode). `loomctl plan` shows the pending change; job-driven routes apply at once.

Telemetry platform profiles (sonic, eos, junos, nxos, cumulus, openconfig, host,
loom-fabric) are read from telemetry/profiles ($LOOM_PROFILE_DIR overrides) and
the config's "profileDirs" (same name = override). `loomctl devices` shows each
device's connection, encoding and per-signal state.

BGP on shutdown: SIGTERM/SIGINT close Loom's sessions without a NOTIFICATION,
so devices keep Loom's routes for the graceful-restart time (restarts do not
disturb the fabric); "bgpWithdrawOnShutdown": true sends a Cease instead and the
devices fall back to their own routing at once.

Security (docs/security.md): the config's "tls" serves the API over TLS 1.2+ with
optional or required client certificates (files re-read when they change);
"auth" binds identities (client certificate names, JWT subjects) to roles
(scheduler per tenant, operator, policy-admin, viewer, admin) and names the
audit log. Without "auth" every caller may do everything.

Signals: SIGHUP reloads the device inventory, profiles and fabric settings from
the same command line and config file (unchanged devices keep their gNMI streams; a bad
configuration is refused and logged), and the "auth" bindings and JWT keys. SIGINT
and SIGTERM shut down cleanly.
Exit status: 0 clean shutdown,
1 runtime failure (database, ports), 2 bad command line or configuration.
)";

namespace {

// Ranges of every number of the configuration, whether it came from a flag or
// the file (0 = default where the proto says so). Finer checks follow.
const std::vector<loom::proto_util::NumberRange> kConfigRanges = {
    {"loom.v1.LoomdConfig.event_retention", 0, 100'000'000},
    {"loom.v1.LoomdConfig.event_retention_mib", 0, 1'048'576},
    {"loom.v1.LoomdConfig.event_cache_mib", 0, 65'536},
    {"loom.v1.LoomdConfig.watch_buffer_kib", 0, 1'048'576},
    {"loom.v1.LoomdConfig.request_retention", 0, 100'000'000},
    {"loom.v1.LoomdConfig.request_retention_mib", 0, 1'048'576},
    {"loom.v1.LoomdConfig.overload_max_moved_jobs", 0, 1'000'000},
    {"loom.v1.LoomdConfig.telemetry_interval_ms", 0, 60'000},
    {"loom.v1.LoomdConfig.telemetry_stale_intervals", 0, 1000},
    {"loom.v1.ChangeSafetyConfig.canary_count", 0, 100'000},
    {"loom.v1.ChangeSafetyConfig.canary_wait_ms", 0, 3'600'000},
    {"loom.v1.ChangeSafetyConfig.max_devices_per_minute", 0, 1'000'000},
    {"loom.v1.ChangeSafetyConfig.max_pfc_pause_increase", 0, 1e12},
    {"loom.v1.ChangeSafetyConfig.max_drop_pps_increase", 0, 1e12},
    {"loom.v1.ChangeSafetyConfig.route_churn_per_minute", 0, 1e9},
    {"loom.v1.GnmiEndpoint.sample_interval_ms", 0, 60'000},
    {"loom.v1.RouteBudget.max_prefixes", 0, 100'000'000},
    {"loom.v1.RouteBudget.fib_size", 0, 100'000'000},
    {"loom.v1.BgpColorSession.fabric_color", 0, 4095},
    {"loom.v1.BgpPeering.port", 0, 65535},
    {"loom.v1.BgpPeering.hold_time_s", 0, 65535},
    {"loom.v1.BgpPeering.graceful_restart_s", 0, 4095},
    {"loom.v1.AdaptiveConfig.alb_scan_interval_ms", 0, 3'600'000},
    {"loom.v1.AdaptiveConfig.alb_tolerance", 0, 1},
    {"loom.v1.AdaptiveConfig.alb_max_moves_per_round", 0, 1'000'000},
    {"loom.v1.AdaptiveConfig.dlb_interval_ms", 0, 3'600'000},
    {"loom.v1.AdaptiveConfig.dampening_half_life_ms", 0, 86'400'000},
    {"loom.v1.AdaptiveConfig.restore_hold_ms", 0, 86'400'000},
};

}  // namespace

std::string AdaptiveOptionsFromConfig(const loom::v1::LoomdConfig& config,
                                      loom::controller::AdaptiveOptions* out) {
  const auto& a = config.adaptive();
  auto& o = *out;
  if (a.alb_scan_interval_ms() > 0 && a.alb_scan_interval_ms() < 1000) {
    return "adaptive.alb_scan_interval_ms: " + std::to_string(a.alb_scan_interval_ms()) +
           " is below the 1000 ms minimum";
  }
  o.glb = !a.disable_glb();
  o.alb = !a.disable_alb();
  o.dlb_tuning = !a.disable_dlb_tuning();
  o.remediation = !a.disable_remediation();
  if (a.alb_scan_interval_ms() > 0) {
    o.alb_params.scan_interval_ns = a.alb_scan_interval_ms() * loom::kNsPerMs;
  }
  if (a.alb_tolerance() != 0) o.alb_params.tolerance = a.alb_tolerance();
  if (a.alb_max_moves_per_round() > 0) {
    o.alb_params.max_moves_per_round = static_cast<int>(a.alb_max_moves_per_round());
  }
  if (a.dlb_interval_ms() > 0) o.dlb_interval_ns = a.dlb_interval_ms() * loom::kNsPerMs;
  o.remediation_params.allow_quarantine = a.allow_quarantine();
  if (a.dampening_half_life_ms() > 0) {
    o.dampening.half_life_ns = a.dampening_half_life_ms() * loom::kNsPerMs;
    o.dampening.max_suppress_ns =
        std::max(o.dampening.max_suppress_ns, 4 * o.dampening.half_life_ns);
  }
  if (a.restore_hold_ms() > 0) {
    o.restore_hold_ns = a.restore_hold_ms() * loom::kNsPerMs;
    o.max_restore_hold_ns = std::max(o.max_restore_hold_ns, o.restore_hold_ns);
  }
  if (std::string e = loom::controller::ValidateAdaptiveOptions(o); !e.empty()) {
    return "adaptive." + e;
  }
  return "";
}

bool SplitHostPort(const std::string& address, std::string* host, int* port) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= address.size()) return false;
  *host = address.substr(0, colon);
  if (host->front() == '[' && host->back() != ']') return false;
  std::string p = address.substr(colon + 1);
  char* end = nullptr;
  long v = std::strtol(p.c_str(), &end, 10);
  if (*end != '\0' || v < 0 || v > 65535) return false;
  *port = static_cast<int>(v);
  return true;
}

ConfigResult LoadConfig(int argc, char** argv, loom::v1::LoomdConfig* config, std::string* error) {
  Flags flags;
  if (!flags.Parse(argc, argv, 1,
                   {"config", "topology", "grpc-listen", "metrics-listen", "db", "log-level",
                    "log-format", "ready-file", "event-retention", "telemetry-address",
                    "telemetry-interval-ms", "emulate", "fabric-ready-file", "policy"},
                   {"help", "version", "insecure"}, error)) {
    return ConfigResult::kError;
  }
  if (flags.Has("help")) return ConfigResult::kHelp;
  if (flags.Has("version")) return ConfigResult::kVersion;
  if (!flags.positional().empty()) {
    *error = "unexpected argument \"" + flags.positional()[0] + "\" (see --help)";
    return ConfigResult::kError;
  }
  config->Clear();
  if (flags.Has("config")) {
    std::string path = flags.Get("config");
    std::string text;
    if (!ReadFileCapped(path, kMaxConfigFileBytes, "config file", &text, error)) {
      return ConfigResult::kError;
    }
    auto st = google::protobuf::util::JsonStringToMessage(text, config);
    if (!st.ok()) {
      *error = path + ": not a valid LoomdConfig: " + std::string(st.message());
      return ConfigResult::kError;
    }
  }
  if (flags.Has("topology")) config->set_topology_path(flags.Get("topology"));
  if (flags.Has("grpc-listen")) config->set_grpc_listen(flags.Get("grpc-listen"));
  if (flags.Has("metrics-listen")) config->set_metrics_listen(flags.Get("metrics-listen"));
  if (flags.Has("db")) config->set_database_path(flags.Get("db"));
  if (flags.Has("log-level")) config->set_log_level(flags.Get("log-level"));
  if (flags.Has("log-format")) config->set_log_format(flags.Get("log-format"));
  if (flags.Has("ready-file")) config->set_ready_file(flags.Get("ready-file"));
  if (flags.Has("event-retention")) {
    int64_t v = 0;
    if (!flags.GetInt("event-retention", 0, &v, error)) return ConfigResult::kError;
    if (v < 1 || v > 100'000'000) {
      *error = "--event-retention must be between 1 and 100000000";
      return ConfigResult::kError;
    }
    config->set_event_retention(static_cast<uint32_t>(v));
  }
  if (flags.Has("telemetry-address")) config->set_telemetry_address(flags.Get("telemetry-address"));
  if (flags.Has("emulate")) config->set_emulate_scenario(flags.Get("emulate"));
  if (flags.Has("fabric-ready-file")) config->set_fabric_ready_file(flags.Get("fabric-ready-file"));
  if (flags.Has("policy")) config->set_policy_path(flags.Get("policy"));
  if (flags.Has("insecure")) config->set_insecure(true);
  if (!config->fabric_ready_file().empty() && !config->emulate_scenario().empty()) {
    *error = "fabric_ready_file and emulate_scenario exclude each other";
    return ConfigResult::kError;
  }
  if (flags.Has("telemetry-interval-ms")) {
    int64_t v = 0;
    if (!flags.GetInt("telemetry-interval-ms", 0, &v, error)) return ConfigResult::kError;
    if (v < 1 || v > 60'000) {
      *error = "--telemetry-interval-ms must be between 1 and 60000";
      return ConfigResult::kError;
    }
    config->set_telemetry_interval_ms(static_cast<uint32_t>(v));
  }
  if (!loom::proto_util::CheckNumberRanges(*config, "config", kConfigRanges, error)) {
    return ConfigResult::kError;
  }
  if (config->telemetry_interval_ms() == 0) config->set_telemetry_interval_ms(100);
  if (config->telemetry_stale_intervals() == 0) config->set_telemetry_stale_intervals(3);
  if (config->grpc_listen().empty()) config->set_grpc_listen("127.0.0.1:50061");
  if (config->metrics_listen().empty()) config->set_metrics_listen("127.0.0.1:9464");
  if (config->database_path().empty()) config->set_database_path("loom.db");
  if (config->log_level().empty()) config->set_log_level("info");
  if (config->log_format().empty()) config->set_log_format("text");
  if (config->event_retention() == 0) config->set_event_retention(100'000);
  if (config->event_retention_mib() == 0) config->set_event_retention_mib(256);
  if (config->event_cache_mib() == 0) config->set_event_cache_mib(32);
  if (config->watch_buffer_kib() == 0) config->set_watch_buffer_kib(1024);
  if (config->request_retention() == 0) config->set_request_retention(100'000);
  if (config->request_retention_mib() == 0) config->set_request_retention_mib(128);
  if (config->overload_max_moved_jobs() == 0) config->set_overload_max_moved_jobs(64);
  if (config->slow_watcher_policy().empty()) config->set_slow_watcher_policy("catch-up");
  if (config->slow_watcher_policy() != "catch-up" && config->slow_watcher_policy() != "cut") {
    *error = "slow_watcher_policy: " + QuoteInput(config->slow_watcher_policy()) +
             " is not one of \"catch-up\", \"cut\"";
    return ConfigResult::kError;
  }

  if (config->topology_path().empty() && config->emulate_scenario().empty()) {
    *error =
        "topology_path: no topology given (use --topology FILE or \"topologyPath\" in the "
        "config file)";
    return ConfigResult::kError;
  }
  std::string host;
  int port = 0;
  if (!SplitHostPort(config->grpc_listen(), &host, &port)) {
    *error = "grpc_listen: \"" + config->grpc_listen() + "\" is not HOST:PORT";
    return ConfigResult::kError;
  }
  if (!SplitHostPort(config->metrics_listen(), &host, &port)) {
    *error = "metrics_listen: \"" + config->metrics_listen() + "\" is not HOST:PORT";
    return ConfigResult::kError;
  }
  // --- metrics port security (metrics_security; docs/security-gnmi-metrics.md) ---
  if (Status s = loom::api::CheckMetricsSecurity(config->metrics_security()); !s.ok()) {
    *error = s.message();
    return ConfigResult::kError;
  }
  // --- end of metrics port security ---
  LogLevel level;
  if (!ParseLogLevel(config->log_level(), &level)) {
    *error = "log_level: \"" + config->log_level() + "\" is not debug, info, warn or error";
    return ConfigResult::kError;
  }
  if (config->log_format() != "text" && config->log_format() != "json") {
    *error = "log_format: \"" + config->log_format() + "\" is not text or json";
    return ConfigResult::kError;
  }
  if (!config->telemetry_address().empty() &&
      !SplitHostPort(config->telemetry_address(), &host, &port)) {
    *error = "telemetry_address: \"" + config->telemetry_address() + "\" is not HOST:PORT";
    return ConfigResult::kError;
  }
  for (int i = 0; i < config->telemetry_targets_size(); ++i) {
    const auto& t = config->telemetry_targets(i);
    if (t.name().empty() || !SplitHostPort(t.address(), &host, &port)) {
      *error = "telemetry_targets[" + std::to_string(i) + "]: needs a name and a HOST:PORT address";
      return ConfigResult::kError;
    }
  }
  if (config->has_tls() &&
      !(config->tls().cert_path().empty() && config->tls().key_path().empty() &&
        config->tls().ca_path().empty() && config->tls().client_auth().empty())) {
    if (Status s = loom::api::CheckTlsFiles(config->tls()); !s.ok()) {
      *error = s.message();
      return ConfigResult::kError;
    }
  }
  if (SplitHostPort(config->grpc_listen(), &host, &port) && !loom::IsLoopbackHost(host) &&
      !config->insecure()) {
    if (config->tls().cert_path().empty()) {
      *error = "grpc_listen: " + config->grpc_listen() +
               " is not a loopback address and the API has no TLS: configure \"tls\" "
               "(docs/security.md) or pass --insecure to serve it in plaintext anyway";
      return ConfigResult::kError;
    }
    // TLS alone keeps the wire private, not the API: someone must say who may call.
    const std::string& mode = config->tls().client_auth();
    const bool client_certs_required =
        !config->tls().ca_path().empty() && (mode.empty() || mode == "require");
    if (!config->has_auth() && !client_certs_required) {
      *error = "auth: " + config->grpc_listen() +
               " is not a loopback address and neither \"auth\" nor required client "
               "certificates (tls.ca_path, client_auth \"require\") limit who may call; "
               "configure one (docs/security.md) or pass --insecure";
      return ConfigResult::kError;
    }
  }
  if (config->has_auth()) {
    std::shared_ptr<const loom::api::AuthPolicy> policy;
    if (Status s = loom::api::AuthPolicy::Create(config->auth(), &policy); !s.ok()) {
      *error = s.message();
      return ConfigResult::kError;
    }
  }
  return ConfigResult::kOk;
}

}  // namespace loom::loomd

namespace loom::loomd {

namespace {

bool CheckThresholds(const loom::v1::QueueThresholds& t, const std::string& where,
                     std::string* error) {
  if (t.priority() > 7) {
    *error = where + ".priority: " + std::to_string(t.priority()) + " is not 0..7";
    return false;
  }
  if (t.ecn_kmax_bytes() < t.ecn_kmin_bytes()) {
    *error = where + ": ecnKmaxBytes must not be below ecnKminBytes";
    return false;
  }
  if (t.ecn_pmax_percent() > 100) {
    *error = where + ".ecnPmaxPercent: " + std::to_string(t.ecn_pmax_percent()) + " is over 100";
    return false;
  }
  if (t.pfc_xon_bytes() > t.pfc_xoff_bytes() && t.pfc_xoff_bytes() > 0) {
    *error = where + ": pfcXonBytes must not be above pfcXoffBytes";
    return false;
  }
  return true;
}

}  // namespace

bool ValidateChangeConfig(const loom::v1::LoomdConfig& config, const loom::v1::Topology& topology,
                          std::string* error) {
  const std::string& mode = config.change_mode();
  if (!mode.empty() && mode != "auto" && mode != "approve" && mode != "shadow") {
    *error = "changeMode: \"" + mode + "\" is not a mode (auto, approve, shadow)";
    return false;
  }
  std::set<std::string> devices;
  for (const auto& d : topology.devices()) devices.insert(d.id());
  const auto& cs = config.change_safety();
  for (int i = 0; i < cs.canary_size(); ++i) {
    if (!devices.count(cs.canary(i))) {
      *error = "changeSafety.canary[" + std::to_string(i) + "]: \"" + cs.canary(i) +
               "\" is not a device of the topology";
      return false;
    }
  }
  auto fraction = [&](double v, const char* name) {
    if (v < 0 || v > 1 || v != v) {
      *error = std::string("changeSafety.") + name + ": must lie in 0..1";
      return false;
    }
    return true;
  };
  if (!fraction(cs.max_pfc_pause_increase(), "maxPfcPauseIncrease") ||
      !fraction(cs.max_utilization_drop(), "maxUtilizationDrop")) {
    return false;
  }
  if (cs.max_drop_pps_increase() < 0 || cs.max_drop_pps_increase() != cs.max_drop_pps_increase()) {
    *error = "changeSafety.maxDropPpsIncrease: must not be negative";
    return false;
  }
  if (cs.canary_wait_ms() > 24u * 3600 * 1000) {
    *error = "changeSafety.canaryWaitMs: more than a day";
    return false;
  }
  for (int i = 0; i < config.fabric_settings_size(); ++i) {
    const auto& f = config.fabric_settings(i);
    std::string where = "fabricSettings[" + std::to_string(i) + "]";
    if (f.role() != loom::v1::DEVICE_ROLE_UNSPECIFIED && f.role() != loom::v1::DEVICE_ROLE_LEAF &&
        f.role() != loom::v1::DEVICE_ROLE_SPINE && f.role() != loom::v1::DEVICE_ROLE_SUPER_SPINE) {
      *error = where + ".role: only switches (leaf, spine, super spine) take fabric settings";
      return false;
    }
    bool any = false;
    for (const auto& d : topology.devices()) {
      any |= f.name_pattern().empty() || fnmatch(f.name_pattern().c_str(), d.id().c_str(), 0) == 0;
    }
    if (!any) {
      *error = where + ".namePattern: \"" + f.name_pattern() + "\" matches no device";
      return false;
    }
    if (f.has_dlb()) {
      if (f.dlb().load_thresholds_percent_size() != 0 &&
          f.dlb().load_thresholds_percent_size() != 7) {
        *error = where + ".dlb.loadThresholdsPercent: 7 values or none";
        return false;
      }
      if (f.dlb().queue_thresholds_bytes_size() != 0 &&
          f.dlb().queue_thresholds_bytes_size() != 7) {
        *error = where + ".dlb.queueThresholdsBytes: 7 values or none";
        return false;
      }
      if (f.dlb().load_weight_percent() > 100) {
        *error = where + ".dlb.loadWeightPercent: over 100";
        return false;
      }
    }
    for (int j = 0; j < f.thresholds_size(); ++j) {
      if (!CheckThresholds(f.thresholds(j), where + ".thresholds[" + std::to_string(j) + "]",
                           error)) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace loom::loomd
