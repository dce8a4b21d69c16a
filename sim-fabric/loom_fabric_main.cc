// loom-fabric: runs a fabric scenario in virtual time and reports on it; with
// --gnmi-listen it also serves the fabric's telemetry as a gNMI target.
//
//   loom-fabric SCENARIO.json [--out DIR] [--duration-ns N] [--seed N] [--step-ns N]
//               [--sample-ns N] [--no-progress]
//               [--gnmi-listen HOST:PORT] [--ready-file FILE] [--realtime] [--speed F]
//               [--duration D] [--gnmi-tick-ns N] [--bgp-listen HOST:PORT] [--loom-as N]
//               [--personality DEVICE=NAME]... [--profile-dir DIR] [--yang-dir DIR]
//
// Batch mode (no --gnmi-listen, no pacing): steps as fast as possible until the
// duration or until every job is done, prints per-job completion times and a
// fabric summary; writes links.csv, qps.csv, heatmap.svg and queues.svg into
// DIR. Single-threaded.
//
// Live mode (--gnmi-listen, --realtime or --speed): a FabricLoop steps the
// fabric on the main thread, paced against the wall clock, and publishes a
// snapshot per sample tick to the gNMI target (gRPC threads serve it). Runs
// until --duration (0 = until SIGINT/SIGTERM), then prints the summary.
//
// Wire programming (live mode): the gNMI target accepts Set (wire_config.h)
// and, with --bgp-listen, every leaf runs a BGP-DPF speaker (wire_bgp.h);
// both program the fabric on the loop thread.
//
// Platform personalities (--personality, personality.h): each named device
// also gets its own gNMI server on 127.0.0.1 (ephemeral port) serving it as
// that platform does, from the telemetry profiles, and accepting Set the way
// that platform does (validated against its YANG models, sim-fabric/yang);
// the shared --gnmi-listen server is unchanged.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/flags.h"
#include "sim-fabric/gnmi_target.h"
#include "sim-fabric/personality.h"
#include "sim-fabric/recorder.h"
#include "sim-fabric/scenario.h"
#include "sim-fabric/wire_bgp.h"
#include "sim-fabric/wire_config.h"

namespace {

constexpr char kUsage[] =
    "usage: loom-fabric SCENARIO.json [flags]\n"
    "Runs a sim-fabric scenario (topology + workload + faults + switch modes) in virtual time.\n"
    "\n"
    "flags:\n"
    "  --out DIR          output directory (default loom-fabric-out)\n"
    "  --duration-ns N    stop at this virtual time (default: scenario, else 1 s)\n"
    "  --seed N           override the scenario seed\n"
    "  --step-ns N        override the engine step (default 1000)\n"
    "  --sample-ns N      time-series sample period (default: scenario, else 10 us)\n"
    "  --no-progress      no progress bar on stderr\n"
    "  --help             this text\n"
    "\n"
    "live mode (gNMI target):\n"
    "  --gnmi-listen HOST:PORT  serve gNMI (gnmi.gNMI: Capabilities, Get, Subscribe, Set) on\n"
    "                     this address; port 0 = any free port. One target name per switch and\n"
    "                     per NIC (the device id). Set takes the loom config schema\n"
    "                     (southbound/README.md). Paces at real time unless --speed says so\n"
    "  --bgp-listen HOST:PORT  every leaf runs a BGP-DPF speaker: leaf i (topology order)\n"
    "                     listens on PORT+i (PORT 0 = an ephemeral port per leaf); Loom's\n"
    "                     colored sessions follow southbound/bgp/prefix_plan.h\n"
    "  --loom-as N        Loom's AS on those sessions (default 65534)\n"
    "  --personality DEVICE=NAME  (repeatable; needs --gnmi-listen) serve DEVICE also on a\n"
    "                     gNMI server of its own (127.0.0.1, ephemeral port) the way platform\n"
    "                     NAME does, from the telemetry profiles: sonic (COUNTERS_DB/APPL_DB\n"
    "                     targets, SONiC JSON objects, OID maps, 1 s minimum sample, flex-counter\n"
    "                     refresh), openconfig (OpenConfig only, PROTO/JSON_IETF/JSON),\n"
    "                     openconfig-json (OpenConfig, JSON_IETF only). Each also takes gNMI\n"
    "                     Set as that platform does, validated against its public YANG models\n"
    "                     (whole request refused with INVALID_ARGUMENT naming the data path,\n"
    "                     nothing applied) and applied to the switch: sonic = CONFIG_DB via\n"
    "                     origin sonic-db (/CONFIG_DB/localhost/TABLE/KEY: STATIC_ROUTE,\n"
    "                     ARS_*, PFC_WD, WRED_PROFILE, QUEUE, PORT), openconfig = static routes,\n"
    "                     qos queue-management profiles, interface enabled\n"
    "  --profile-dir DIR  extra telemetry profile directory (its files replace shipped ones)\n"
    "  --yang-dir DIR     the YANG modules personalities validate Set with (default:\n"
    "                     $LOOM_YANG_DIR, else sim-fabric/yang beside the build)\n"
    "  --ready-file FILE  once listening, write {\"gnmi_port\": N, \"gnmi_devices\":\n"
    "                     {\"leaf0\": {\"port\": N, \"personality\": \"sonic\"}, ...},\n"
    "                     \"bgp\": {\"leaf0\": P, ...}}\n"
    "  --realtime         virtual time follows the wall clock (same as --speed 1)\n"
    "  --speed F          virtual seconds per wall second (0 = as fast as possible)\n"
    "  --duration D       stop at this virtual time: 10s, 500ms, 250us, 1000ns or seconds;\n"
    "                     0 = run until SIGINT/SIGTERM (default with --gnmi-listen)\n"
    "  --gnmi-tick-ns N   snapshot period = smallest sample interval (default 1000000)\n"
    "  --gnmi-tls-cert FILE, --gnmi-tls-key FILE  serve gNMI over TLS with this server\n"
    "                     certificate (PEM chain) and key (plaintext without them)\n"
    "  --gnmi-tls-client-ca FILE  with TLS: require client certificates signed by this CA\n"
    "  --gnmi-credentials FILE  first line \"user:password\": every gNMI RPC must carry them\n"
    "                     as \"username\"/\"password\" metadata (else UNAUTHENTICATED)\n"
    "                     (the --personality targets stay plaintext without credentials)\n"
    "\n"
    "outputs: DIR/links.csv (per-interface utilisation, queue depth, pause state),\n"
    "         DIR/qps.csv (per-QP DCQCN rate), DIR/queues.csv (per-queue depth: device,\n"
    "         interface, priority; non-empty queues only), DIR/flows.csv (the scenario's\n"
    "         flows: start, finish, bytes, FCT, ideal FCT, slowdown), DIR/heatmap.svg,\n"
    "         DIR/queues.svg\n"
    "         (live mode: only when the run has a duration)\n";

std::string Ms(loom::TimeNs ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

std::atomic<loom::sim::FabricLoop*> g_loop{nullptr};

void OnSignal(int /*sig*/) {
  loom::sim::FabricLoop* loop = g_loop.load();
  if (loop != nullptr) loop->Stop();
}

// "10s", "500ms", "250us", "1000ns" or plain seconds -> ns.
bool ParseDuration(const std::string& text, loom::TimeNs* out) {
  struct Unit {
    const char* suffix;
    double ns;
  };
  static const Unit kUnits[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};
  std::string num = text;
  double scale = 1e9;
  for (const Unit& u : kUnits) {
    const std::string suf = u.suffix;
    if (num.size() > suf.size() && num.compare(num.size() - suf.size(), suf.size(), suf) == 0) {
      num = num.substr(0, num.size() - suf.size());
      scale = u.ns;
      break;
    }
  }
  char* end = nullptr;
  const double v = std::strtod(num.c_str(), &end);
  if (num.empty() || end == nullptr || *end != '\0' || !(v >= 0) || v * scale > 9e18) return false;
  *out = static_cast<loom::TimeNs>(v * scale);
  return true;
}

struct PersonalityPort {
  int port = 0;
  std::string personality;
};

bool WriteReadyFile(const std::string& path, int port,
                    const std::map<std::string, uint16_t>& bgp_ports,
                    const std::map<std::string, PersonalityPort>& devices, std::string* error) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    *error = "cannot write " + tmp;
    return false;
  }
  std::string bgp;
  for (const auto& [leaf, p] : bgp_ports) {
    bgp += (bgp.empty() ? "" : ", ") + ("\"" + leaf + "\": ") + std::to_string(p);
  }
  std::string gd;
  for (const auto& [dev, pp] : devices) {
    gd += (gd.empty() ? "" : ", ") + ("\"" + dev + "\": {\"port\": ") + std::to_string(pp.port) +
          ", \"personality\": \"" + pp.personality + "\"}";
  }
  // gnmi_devices before bgp: tests/southbound/wire/wire_harness.h reads every
  // "name": N after "bgp" as a leaf port.
  std::fprintf(f, "{\"gnmi_port\": %d, \"gnmi_devices\": {%s}, \"bgp\": {%s}}\n", port, gd.c_str(),
               bgp.c_str());
  const bool ok = std::fclose(f) == 0 && std::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) *error = "cannot write " + path;
  return ok;
}

// flows.csv: one row per scenario flow (in scenario order): when it started and finished,
// its size, FCT, the ideal FCT (alone on an idle fabric) and the slowdown FCT / ideal.
bool WriteFlowsCsv(const loom::sim::Fabric& fab, const loom::sim::LoadedScenario& sc,
                   const std::vector<int>& qps, const std::string& path, std::string* error) {
  std::ofstream out(path);
  if (!out) {
    *error = "cannot write " + path;
    return false;
  }
  out << "flow,src,dst,bytes,start_us,finish_us,fct_us,ideal_fct_us,slowdown\n";
  for (size_t i = 0; i < qps.size(); ++i) {
    const auto& fl = sc.spec.flows(static_cast<int>(i));
    out << i << ',' << fl.src() << ',' << fl.dst() << ',' << fl.bytes() << ',';
    if (qps[i] < 0) {
      out << ",,,,\n";  // not started
      continue;
    }
    const auto q = fab.GetQp(qps[i]);
    char buf[160];
    if (q.finish_ns < 0) {
      std::snprintf(buf, sizeof(buf), "%.3f,,,%.3f,\n", static_cast<double>(q.start_ns) / 1e3,
                    q.ideal_fct_ns / 1e3);
    } else {
      const double fct = static_cast<double>(q.finish_ns - q.start_ns);
      std::snprintf(buf, sizeof(buf), "%.3f,%.3f,%.3f,%.3f,%.4f\n",
                    static_cast<double>(q.start_ns) / 1e3, static_cast<double>(q.finish_ns) / 1e3,
                    fct / 1e3, q.ideal_fct_ns / 1e3, q.ideal_fct_ns > 0 ? fct / q.ideal_fct_ns : 0);
    }
    out << buf;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace loom::sim;
  loom::Flags flags;
  std::string error;
  // --personality repeats: taken out before the single-valued flag parser.
  std::vector<PersonalitySpec> personalities;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    std::string value;
    if (i > 0 && a == "--personality") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "loom-fabric: --personality needs DEVICE=NAME\n%s", kUsage);
        return 2;
      }
      value = argv[++i];
    } else if (i > 0 && a.rfind("--personality=", 0) == 0) {
      value = a.substr(std::strlen("--personality="));
    } else {
      args.push_back(argv[i]);
      continue;
    }
    PersonalitySpec spec;
    if (!ParsePersonalitySpec(value, &spec, &error)) {
      std::fprintf(stderr, "loom-fabric: %s\n", error.c_str());
      return 2;
    }
    personalities.push_back(spec);
  }
  if (!flags.Parse(
          static_cast<int>(args.size()), args.data(), 1,
          {"out", "duration-ns", "seed", "step-ns", "sample-ns", "gnmi-listen", "ready-file",
           "speed", "duration", "gnmi-tick-ns", "bgp-listen", "loom-as", "profile-dir", "yang-dir",
           "gnmi-tls-cert", "gnmi-tls-key", "gnmi-tls-client-ca", "gnmi-credentials"},
          {"help", "no-progress", "realtime"}, &error)) {
    std::fprintf(stderr, "loom-fabric: %s\n%s", error.c_str(), kUsage);
    return 2;
  }
  if (flags.Has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (flags.positional().size() != 1) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  LoadedScenario sc;
  if (!LoadScenarioFile(flags.positional()[0], &sc, &error)) {
    std::fprintf(stderr, "loom-fabric: %s\n", error.c_str());
    return 1;
  }
  int64_t v = 0;
  if (!flags.GetInt("duration-ns", sc.duration_ns, &v, &error)) return 2;
  sc.duration_ns = v;
  if (!flags.GetInt("seed", static_cast<int64_t>(sc.options.seed), &v, &error)) return 2;
  sc.options.seed = static_cast<uint64_t>(v);
  if (!flags.GetInt("step-ns", sc.options.step_ns, &v, &error) || v <= 0) {
    std::fprintf(stderr, "loom-fabric: bad --step-ns\n");
    return 2;
  }
  sc.options.step_ns = v;
  if (!flags.GetInt("sample-ns", sc.sample_ns, &v, &error) || v <= 0) return 2;
  const std::string gnmi_listen = flags.Get("gnmi-listen");
  if (!personalities.empty() && gnmi_listen.empty()) {
    std::fprintf(stderr, "loom-fabric: --personality needs --gnmi-listen\n");
    return 2;
  }
  const std::string bgp_listen = flags.Get("bgp-listen");
  const bool live =
      !gnmi_listen.empty() || !bgp_listen.empty() || flags.Has("realtime") || flags.Has("speed");
  std::string bgp_host;
  int bgp_port = 0;
  if (!bgp_listen.empty()) {
    const size_t colon = bgp_listen.rfind(':');
    char* end = nullptr;
    const long p =
        colon == std::string::npos ? -1 : std::strtol(bgp_listen.c_str() + colon + 1, &end, 10);
    if (colon == std::string::npos || colon == 0 || end == nullptr || *end != '\0' || p < 0 ||
        p > 65535) {
      std::fprintf(stderr, "loom-fabric: bad --bgp-listen %s (HOST:PORT)\n", bgp_listen.c_str());
      return 2;
    }
    bgp_host = bgp_listen.substr(0, colon);
    bgp_port = static_cast<int>(p);
  }
  int64_t loom_as = loom::southbound::bgp::kDefaultLoomAs;
  if (!flags.GetInt("loom-as", loom_as, &loom_as, &error) || loom_as <= 0 ||
      loom_as > 0xffffffffLL) {
    std::fprintf(stderr, "loom-fabric: bad --loom-as\n");
    return 2;
  }
  double speed = 1.0;
  if (!flags.GetDouble("speed", 1.0, &speed, &error) || !(speed >= 0)) {
    std::fprintf(stderr, "loom-fabric: bad --speed\n");
    return 2;
  }
  if (flags.Has("realtime")) speed = 1.0;
  if (live) {
    // Live runs go on until killed unless a duration is given.
    if (!flags.Has("duration-ns")) sc.duration_ns = 0;
    if (flags.Has("duration") && !ParseDuration(flags.Get("duration"), &sc.duration_ns)) {
      std::fprintf(stderr, "loom-fabric: bad --duration %s\n", flags.Get("duration").c_str());
      return 2;
    }
  } else if (flags.Has("duration")) {
    if (!ParseDuration(flags.Get("duration"), &sc.duration_ns) || sc.duration_ns <= 0) {
      std::fprintf(stderr, "loom-fabric: bad --duration %s\n", flags.Get("duration").c_str());
      return 2;
    }
  }
  int64_t tick_ns = 0;
  if (!flags.GetInt("gnmi-tick-ns", loom::kNsPerMs, &tick_ns, &error) || tick_ns <= 0) {
    std::fprintf(stderr, "loom-fabric: bad --gnmi-tick-ns\n");
    return 2;
  }
  sc.sample_ns = sc.duration_ns > 0 ? std::max<loom::TimeNs>(v, sc.duration_ns / 4000) : v;
  const std::string out_dir = flags.Get("out", "loom-fabric-out");
  mkdir(out_dir.c_str(), 0755);

  auto fab = BuildScenarioFabric(sc, &error);
  if (!fab) {
    std::fprintf(stderr, "loom-fabric: %s\n", error.c_str());
    return 1;
  }
  Recorder rec(fab.get(), sc.sample_ns);
  const bool record = sc.duration_ns > 0;
  const bool progress = !flags.Has("no-progress");
  const auto wall0 = std::chrono::steady_clock::now();
  int last_pct = -1;
  if (live) {
    std::unique_ptr<GnmiTarget> target;
    if (!gnmi_listen.empty()) {
      GnmiOptions go;
      go.tick_ns = tick_ns;
      go.min_sample_interval_ns = tick_ns;
      GnmiTargetOptions to;
      to.listen_address = gnmi_listen;
      to.tls_cert_path = flags.Get("gnmi-tls-cert");
      to.tls_key_path = flags.Get("gnmi-tls-key");
      to.tls_client_ca_path = flags.Get("gnmi-tls-client-ca");
      if (to.tls_cert_path.empty() != to.tls_key_path.empty() ||
          (!to.tls_client_ca_path.empty() && to.tls_cert_path.empty())) {
        std::fprintf(stderr,
                     "loom-fabric: --gnmi-tls-cert and --gnmi-tls-key go together "
                     "(--gnmi-tls-client-ca needs them)\n");
        return 2;
      }
      if (flags.Has("gnmi-credentials")) {
        std::ifstream in(flags.Get("gnmi-credentials"));
        std::string line;
        if (!in || !std::getline(in, line)) {
          std::fprintf(stderr, "loom-fabric: --gnmi-credentials: cannot read %s\n",
                       flags.Get("gnmi-credentials").c_str());
          return 2;
        }
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
        const size_t colon = line.find(':');
        if (colon == std::string::npos || colon == 0) {
          std::fprintf(stderr,
                       "loom-fabric: --gnmi-credentials: the first line must be "
                       "user:password\n");
          return 2;
        }
        to.username = line.substr(0, colon);
        to.password = line.substr(colon + 1);
      }
      target = std::make_unique<GnmiTarget>(go, to);
    }
    // The loop is built once the personality targets exist; Sets reach the
    // fabric through it (a target answers UNAVAILABLE until the loop's first
    // snapshot, so nothing is posted before it exists).
    std::unique_ptr<FabricLoop> loop;
    WireConfig wire(fab.get(), sc.topology,
                    [&loop](std::function<void(Fabric&)> fn) { loop->Post(std::move(fn)); });
    std::vector<std::unique_ptr<GnmiTarget>> persona_targets;
    std::map<std::string, PersonalityPort> persona_ports;
    if (target) {
      std::vector<std::string> profile_dirs;
      if (flags.Has("profile-dir")) profile_dirs.push_back(flags.Get("profile-dir"));
      PersonalitySetOptions pso;
      pso.wire = &wire;
      pso.topology = &sc.topology;
      pso.yang_dir = flags.Get("yang-dir");
      loom::Status st = StartPersonalityTargets(personalities, profile_dirs, fab->Devices(),
                                                target->gnmi_options(), &persona_targets, pso);
      if (!st.ok()) {
        std::fprintf(stderr, "loom-fabric: %s\n", st.message().c_str());
        return 1;
      }
      for (size_t i = 0; i < personalities.size(); ++i) {
        persona_ports[personalities[i].device] = {persona_targets[i]->port(),
                                                  PersonalityName(personalities[i].kind)};
        std::printf("gnmi personality %s of %s listening on 127.0.0.1:%d\n",
                    PersonalityName(personalities[i].kind), personalities[i].device.c_str(),
                    persona_targets[i]->port());
      }
    }
    FabricLoopOptions lo;
    lo.speed = speed;
    for (auto& t : persona_targets) lo.more_targets.push_back(t.get());
    lo.duration_ns = sc.duration_ns;
    if (record) lo.on_step = [&rec](Fabric&) { rec.Sample(); };
    loop = std::make_unique<FabricLoop>(fab.get(), target.get(), lo);
    std::unique_ptr<WireBgpLeaves> bgp;
    if (!bgp_listen.empty()) {
      WireBgpOptions bo;
      bo.listen_address = bgp_host;
      bo.first_port = bgp_port;
      bo.sessions.loom_as = static_cast<uint32_t>(loom_as);
      bgp = std::make_unique<WireBgpLeaves>(sc.topology, &wire, bo);
      loom::Status st = bgp->Start();
      if (!st.ok()) {
        std::fprintf(stderr, "loom-fabric: %s\n", st.message().c_str());
        return 1;
      }
      std::printf("bgp leaves listening on %s:", bgp_host.c_str());
      for (const auto& [leaf, p] : bgp->ports()) std::printf(" %s=%u", leaf.c_str(), p);
      std::printf("\n");
      std::fflush(stdout);
    }
    if (target) {
      target->AttachConfig(&wire);
      loom::Status st = target->Start();
      if (!st.ok()) {
        std::fprintf(stderr, "loom-fabric: %s\n", st.message().c_str());
        return st.code() == loom::StatusCode::kInvalidArgument ? 2 : 1;
      }
      std::printf("gnmi target listening on %s (port %d), %zu targets\n", gnmi_listen.c_str(),
                  target->port(), fab->Devices().size());
      std::fflush(stdout);
    }
    if (flags.Has("ready-file")) {
      const std::map<std::string, uint16_t> none;
      if (!WriteReadyFile(flags.Get("ready-file"), target ? target->port() : 0,
                          bgp ? bgp->ports() : none, persona_ports, &error)) {
        std::fprintf(stderr, "loom-fabric: %s\n", error.c_str());
        return 1;
      }
    }
    g_loop.store(loop.get());
    std::signal(SIGINT, OnSignal);
    std::signal(SIGTERM, OnSignal);
    loop->Run();
    g_loop.store(nullptr);
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    if (target) target->Stop();
    for (auto& t : persona_targets) t->Stop();
    if (bgp) bgp->Stop();
  }
  // Scenario flows, in start order; each is added when its start time comes.
  std::vector<int> flow_order(static_cast<size_t>(sc.spec.flows_size()));
  for (size_t i = 0; i < flow_order.size(); ++i) flow_order[i] = static_cast<int>(i);
  std::stable_sort(flow_order.begin(), flow_order.end(), [&](int a, int b) {
    return sc.spec.flows(a).start_ns() < sc.spec.flows(b).start_ns();
  });
  std::vector<int> flow_qp(flow_order.size(), -1);
  size_t next_flow = 0;
  auto flows_done = [&] {
    if (next_flow < flow_order.size()) return false;
    for (int q : flow_qp) {
      if (q >= 0 && fab->GetQp(q).finish_ns < 0) return false;
    }
    return true;
  };
  while (!live && fab->now() < sc.duration_ns) {
    while (next_flow < flow_order.size() &&
           sc.spec.flows(flow_order[next_flow]).start_ns() <= fab->now()) {
      const auto& fl = sc.spec.flows(flow_order[next_flow]);
      flow_qp[static_cast<size_t>(flow_order[next_flow])] =
          fab->AddFlow(fl.src(), fl.dst(), fl.bytes(), fl.priority() ? fl.priority() : 3);
      ++next_flow;
    }
    const bool jobs_done = fab->job_count() == 0 || fab->AllJobsDone();
    if ((fab->job_count() > 0 || !flow_order.empty()) && jobs_done && flows_done()) break;
    fab->Step();
    rec.Sample();
    const int pct = static_cast<int>(100 * fab->now() / sc.duration_ns);
    if (progress && pct != last_pct) {
      last_pct = pct;
      const int bar = pct / 2;
      std::fprintf(stderr, "\r[%-50s] %3d%% %s", std::string(bar, '#').c_str(), pct,
                   Ms(fab->now()).c_str());
    }
  }
  if (progress) std::fputc('\n', stderr);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();

  std::printf("scenario %s: %s simulated in %.2f s wall (%.2fx real time), %d QPs\n",
              sc.spec.name().c_str(), Ms(fab->now()).c_str(), wall,
              static_cast<double>(fab->now()) / 1e9 / std::max(1e-9, wall), fab->qp_count());
  std::printf("\njobs:\n");
  for (int j = 0; j < fab->job_count(); ++j) {
    JobStatus st = fab->GetJob(j);
    std::printf("  %-16s tenant=%-8s iterations=%d %s", st.id.c_str(), st.tenant.c_str(),
                st.iterations_done, st.done ? "done" : "running");
    if (st.done) std::printf(" jct=%s", Ms(st.end_ns - st.start_ns).c_str());
    if (!st.collective_ns.empty()) {
      loom::TimeNs sum = 0, mx = 0;
      for (auto c : st.collective_ns) {
        sum += c;
        mx = std::max(mx, c);
      }
      std::printf(" collective mean=%s max=%s",
                  Ms(sum / static_cast<loom::TimeNs>(st.collective_ns.size())).c_str(),
                  Ms(mx).c_str());
    }
    std::printf("\n");
  }
  // Fabric summary.
  uint64_t drops = 0, marks = 0, pfc_tx = 0, cnps = 0, oos = 0, wm = 0;
  double max_util = 0;
  std::string hottest;
  for (const auto& dev : fab->Devices()) {
    const bool sw = fab->GetSwitchConfig(dev) != nullptr;
    if (!sw) {
      NicCounters nc;
      (void)fab->GetNicCounters(dev, &nc);
      cnps += nc.np_cnp_sent;
      oos += nc.out_of_sequence;
    }
    for (const auto& ifc : fab->Interfaces(dev)) {
      for (int q = 0; q < kPriorities; ++q) {
        QueueCounters qc;
        (void)fab->GetQueueCounters(dev, ifc, q, &qc);
        drops += qc.dropped_pkts;
        marks += qc.ecn_marked_pkts;
        wm = std::max(wm, qc.watermark_bytes);
        PfcCounters pc;
        (void)fab->GetPfcCounters(dev, ifc, q, &pc);
        pfc_tx += pc.tx_pkts;
      }
      if (sw) {
        InterfaceCounters ic;
        (void)fab->GetInterfaceCounters(dev, ifc, &ic);
        const double u = static_cast<double>(ic.out_octets) * 8 /
                         std::max(1.0, ic.capacity_bps * static_cast<double>(fab->now()) / 1e9);
        if (u > max_util) {
          max_util = u;
          hottest = dev + ":" + ifc;
        }
      }
    }
  }
  std::printf(
      "\nfabric: dropped_pkts=%llu ecn_marked_pkts=%llu pfc_frames_tx=%llu cnp_sent=%llu "
      "out_of_sequence=%llu max_queue_watermark=%llu B\n"
      "        busiest egress %s at %.1f%% mean utilisation\n",
      static_cast<unsigned long long>(drops), static_cast<unsigned long long>(marks),
      static_cast<unsigned long long>(pfc_tx), static_cast<unsigned long long>(cnps),
      static_cast<unsigned long long>(oos), static_cast<unsigned long long>(wm), hottest.c_str(),
      100 * max_util);
  // Buffers: what each switch reserves as lossless headroom (at least the minimum) and
  // what is left shared; switches with the same figures are listed together.
  std::map<std::string, std::vector<std::string>> buffers;
  for (const auto& dev : fab->Devices()) {
    BufferInfo bi;
    if (!fab->GetBufferInfo(dev, &bi).ok()) continue;
    char line[256];
    std::snprintf(line, sizeof(line),
                  "%.1f MB = %.1f MB shared + %.1f MB headroom (%d lossless queues x %.0f KB, "
                  "minimum %.0f KB)",
                  bi.buffer_bytes / 1e6, bi.shared_bytes / 1e6, bi.reserved_bytes / 1e6,
                  bi.lossless_queues, bi.headroom_bytes / 1e3, bi.min_headroom_bytes / 1e3);
    buffers[line].push_back(dev);
  }
  for (const auto& [line, devs] : buffers) {
    std::printf(
        "        buffer %s: %s%s\n", devs.front().c_str(), line.c_str(),
        devs.size() > 1 ? (" (and " + std::to_string(devs.size() - 1) + " more)").c_str() : "");
  }
  if (!record) return 0;
  bool ok = rec.WriteLinksCsv(out_dir + "/links.csv", &error) &&
            rec.WriteQpsCsv(out_dir + "/qps.csv", &error) &&
            rec.WriteQueuesCsv(out_dir + "/queues.csv", &error) &&
            WriteFlowsCsv(*fab, sc, flow_qp, out_dir + "/flows.csv", &error) &&
            rec.WriteHeatmapSvg(out_dir + "/heatmap.svg", &error) &&
            rec.WriteQueueSvg(out_dir + "/queues.svg", &error);
  if (!ok) {
    std::fprintf(stderr, "loom-fabric: %s\n", error.c_str());
    return 1;
  }
  std::printf(
      "\nwrote %s/{links.csv,qps.csv,queues.csv,flows.csv,heatmap.svg,queues.svg} (%d samples)\n",
      out_dir.c_str(), rec.samples());
  return 0;
}
