// bench_wire: time from a desired-state change to applied-and-confirmed on
// every leaf of a 64-leaf emulated fabric, over BGP and over gNMI Set, on
// loopback (issue 6 speed goal: a full-fabric recolor within 100 ms).
//
// Fabric: loom-fabric in its own process, 2-tier Clos of 64 leaves x 8
// spines, one NIC per leaf, live at real time. Loom: BgpDriver (512 colored
// sessions: 64 leaves x 8 colors) and GnmiDriver, as in the wire test.
// A recolor changes, on every leaf, the color (and backup color) of the route
// to each of the 63 remote NICs (4032 routes) and is
//   - over BGP: applied = UPDATEs written by BgpDriver on every session,
//     confirmed = every leaf reports the new routes as running (gNMI Get,
//     type OPERATIONAL, of the routes of the recolored traffic class; every
//     unconfirmed leaf polled at once, until all are);
//   - over gNMI Set (colors and routes carried by gNMI, a different traffic
//     class so BGP-learned routes do not mask them): one SetRequest per leaf,
//     answered once the fabric runs it, confirmed by the driver's Get of the
//     parts the Set changed.
//
//   bench_wire [--fabric PATH/loom-fabric] [--leaves 64] [--spines 8] [--rounds 10]
//              [--only bgp|gnmi] [--nnhn needed|always|off] [--reach on|off]
// The desired states carry the next-hop reach loomd's controller adds (every
// spine reaches every other leaf directly); --nnhn is the BGP driver's NNHN
// mode (default "needed", loomd's: no route needs NNHN in a healthy 2-tier
// Clos; "always": every route carries it, one UPDATE per route and session);
// --reach off leaves the reach out (the desired states before NNHN).
#include <google/protobuf/util/json_util.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <set>

#include "api/topology/topology_generate.h"
#include "tests/southbound/wire/wire_harness.h"

namespace {

using namespace loom::wiretest;  // NOLINT(build/namespaces)
namespace v1 = loom::v1;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Stats {
  std::vector<double> ms;
  void Print(const char* what) {
    std::sort(ms.begin(), ms.end());
    if (ms.empty()) return;
    std::printf("  %-44s min %7.2f  median %7.2f  max %7.2f ms  (%zu rounds)\n", what, ms.front(),
                ms[ms.size() / 2], ms.back(), ms.size());
  }
};

// Every leaf's state: colors of all spines, a route per remote NIC whose
// color is spine (leaf + nic + shift) % spines and backup the next one, and
// the next-hop reach loomd's controller adds (every spine reaches every other
// leaf directly).
std::map<std::string, v1::DeviceState> Desired(const v1::Topology& topo,
                                               const bgp::PrefixPlan& plan, int shift, uint32_t tc,
                                               uint64_t generation, bool with_reach) {
  std::vector<bgp::ColorSession> cs = bgp::ColorSessions(topo);
  std::map<std::string, v1::DeviceState> out;
  std::map<std::string, int> spines_of;
  for (const auto& c : cs) {
    auto& s = out[c.leaf];
    s.set_device(c.leaf);
    s.set_generation(generation);
    auto* g = s.add_colors();
    g->set_color(c.color);
    g->add_next_hops(c.via);
    ++spines_of[c.leaf];
  }
  if (with_reach) {
    std::set<std::string> leaves;
    for (const auto& c : cs) leaves.insert(c.leaf);
    for (const auto& c : cs) {
      auto* reach = out[c.leaf].add_next_hop_reach();
      reach->set_next_hop(c.via);
      for (const auto& l : leaves) {
        if (l != c.leaf) reach->add_egress(l);
      }
    }
  }
  std::vector<std::string> nics;
  for (const auto& d : topo.devices()) {
    if (d.role() == v1::DEVICE_ROLE_NIC) nics.push_back(d.id());
  }
  int li = 0;
  for (auto& [leaf, s] : out) {
    const int n = spines_of[leaf];
    for (size_t k = 0; k < nics.size(); ++k) {
      if (plan.LeafOf(nics[k]) == leaf) continue;
      auto* r = s.add_routes();
      r->set_destination(nics[k]);
      r->set_prefix(plan.PrefixOf(nics[k]));
      const int c = (li + static_cast<int>(k) + shift) % n;
      r->set_color(bgp::kFabricColorBase + static_cast<uint32_t>(c));
      r->set_backup_color(bgp::kFabricColorBase + static_cast<uint32_t>((c + 1) % n));
      r->set_traffic_class(tc);
      r->set_job_id("bench");
    }
    ++li;
  }
  return out;
}

bool Runs(const v1::DeviceState& op, const v1::DeviceState& want) {
  std::map<std::pair<std::string, uint32_t>, std::pair<uint32_t, uint32_t>> have;
  for (const auto& r : op.routes()) {
    have[{r.destination(), r.traffic_class()}] = {r.color(), r.backup_color()};
  }
  for (const auto& r : want.routes()) {
    auto it = have.find({r.destination(), r.traffic_class()});
    if (it == have.end() || it->second != std::make_pair(r.color(), r.backup_color())) return false;
  }
  return true;
}

// The leaves of `pending` that do not run `want` yet in traffic class `tc`.
// One gNMI Get per leaf, all in flight at once (type OPERATIONAL, of
// /routes/route[destination=*][traffic-class=tc]: the routes a recolor over
// BGP changes, without the gNMI-written ones of the other class), each
// decoded and compared on arrival.
std::vector<std::string> NotRunning(gnmi::gNMI::Stub& stub, const std::vector<std::string>& pending,
                                    uint32_t tc,
                                    const std::map<std::string, v1::DeviceState>& want) {
  struct Call {
    std::string leaf;
    grpc::ClientContext ctx;
    gnmi::GetRequest req;
    gnmi::GetResponse resp;
  };
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  std::vector<std::string> still;
  std::vector<std::unique_ptr<Call>> calls;
  for (const std::string& leaf : pending) {
    auto c = std::make_unique<Call>();
    c->leaf = leaf;
    c->req = sg::MakeGetRequest(sg::Mask(sg::Part::kRoutes), leaf);
    c->req.set_type(gnmi::GetRequest::OPERATIONAL);
    gnmi::PathElem* route = c->req.mutable_path(0)->add_elem();
    route->set_name("route");
    (*route->mutable_key())["destination"] = "*";
    (*route->mutable_key())["traffic-class"] = std::to_string(tc);
    calls.push_back(std::move(c));
  }
  for (auto& c : calls) {
    Call* call = c.get();
    stub.async()->Get(&call->ctx, &call->req, &call->resp, [&, call](grpc::Status st) {
      v1::DeviceState op;
      op.set_device(call->leaf);
      const bool ok =
          st.ok() && sg::DecodeGetResponse(call->resp, &op).ok() && Runs(op, want.at(call->leaf));
      std::lock_guard<std::mutex> lock(mu);
      if (!ok) still.push_back(call->leaf);
      ++done;
      cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done == calls.size(); });
  return still;
}

// Applies every leaf's state through `driver` concurrently; returns when all
// callbacks ran; counts failures.
int ApplyAll(loom::southbound::Driver& driver, const std::map<std::string, v1::DeviceState>& s) {
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  int failures = 0;
  for (const auto& [leaf, st] : s) {
    driver.Apply(st, [&](loom::southbound::ApplyResult r) {
      std::lock_guard<std::mutex> lock(mu);
      failures += static_cast<int>(r.failures.size());
      if (!r.failures.empty() && failures < 4) {
        std::fprintf(stderr, "apply %s: %s %s\n", r.applied.device().c_str(),
                     r.failures[0].part.c_str(), r.failures[0].status.message().c_str());
      }
      ++done;
      cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done == s.size(); });
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  std::string fabric_bin = LOOM_FABRIC_BIN;
  int leaves = 64, spines = 8, rounds = 10;
  std::string only;  // "bgp" or "gnmi": run one path only (profiling).
  std::string nnhn = "needed";
  bool reach = true;  // desired states carry the next-hop reach, as loomd's do
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--fabric") fabric_bin = argv[i + 1];
    if (f == "--leaves") leaves = std::atoi(argv[i + 1]);
    if (f == "--spines") spines = std::atoi(argv[i + 1]);
    if (f == "--rounds") rounds = std::atoi(argv[i + 1]);
    if (f == "--only") only = argv[i + 1];
    if (f == "--nnhn") nnhn = argv[i + 1];
    if (f == "--reach") reach = std::string(argv[i + 1]) != "off";
  }
  const auto mode = nnhn == "always" ? bgp::BgpDriverConfig::NnhnMode::kAlways
                    : nnhn == "off"  ? bgp::BgpDriverConfig::NnhnMode::kOff
                                     : bgp::BgpDriverConfig::NnhnMode::kWhereNeeded;
  if (leaves < 2 || spines < 2 || rounds < 1 ||
      (nnhn != "needed" && nnhn != "always" && nnhn != "off")) {
    std::fprintf(stderr, "bench_wire: bad arguments\n");
    return 2;
  }
  loom::topology::Clos2Params p;
  p.leaves = leaves;
  p.spines = spines;
  p.hosts_per_leaf = 1;
  p.host.gpus_per_host = 1;
  p.host.nics_per_host = 1;
  v1::Topology topo;
  std::string error;
  if (!loom::topology::GenerateClos2(p, &topo, &error)) {
    std::fprintf(stderr, "bench_wire: %s\n", error.c_str());
    return 1;
  }
  char tmpl[] = "/tmp/loom-bench-wire-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  std::string topo_json;
  (void)google::protobuf::util::MessageToJsonString(topo, &topo_json);
  std::ofstream(dir + "/topology.json") << topo_json;
  std::ofstream(dir + "/scenario.json") << R"({"name": "bench-wire", "topologyFile":
      "topology.json", "engine": {"stepNs": "1000", "seed": "1"}})";
  FabricProcess fabric;
  if (!fabric.Start(fabric_bin, dir + "/scenario.json", dir,
                    {"--realtime", "--gnmi-tick-ns", "100000000"}, &error)) {
    std::fprintf(stderr, "bench_wire: %s\n", error.c_str());
    return 1;
  }
  auto t_up = Clock::now();
  LoomSide loom(topo, fabric, mode);
  if (!WaitFor([&] { return loom.Established() == static_cast<int>(loom.sessions()); },
               std::chrono::seconds(60))) {
    std::fprintf(stderr, "bench_wire: only %d of %zu sessions up\n", loom.Established(),
                 loom.sessions());
    return 1;
  }
  std::printf("bench_wire: %d leaves x %d spines, %zu BGP sessions up in %.1f ms\n", leaves, spines,
              loom.sessions(), Ms(Clock::now() - t_up));
  auto stub = gnmi::gNMI::NewStub(
      grpc::CreateChannel(fabric.gnmi_address(), grpc::InsecureChannelCredentials()));

  // GnmiDriver carrying colors and routes for the gNMI figures.
  sg::GnmiDriverConfig gc;
  for (const auto& [leaf, port] : fabric.bgp_ports()) {
    gc.devices.push_back({leaf, fabric.gnmi_address(), ""});
  }
  gc.parts = sg::Mask(sg::Part::kColors) | sg::Mask(sg::Part::kRoutes);
  sg::GnmiDriver gnmi(gc);
  if (!gnmi.Start().ok()) return 1;

  const size_t routes = (static_cast<size_t>(leaves) - 1) * static_cast<size_t>(leaves);
  Stats bgp_sent, bgp_confirmed, gnmi_confirmed;
  int failures = 0, polls = 0;
  for (int round = 0; round <= rounds; ++round) {
    auto want = Desired(topo, loom.plan(), round, 3, static_cast<uint64_t>(round + 1), reach);
    if (only == "gnmi") want.clear();
    const auto t0 = Clock::now();
    failures += ApplyAll(loom.bgp_driver(), want);
    const auto t1 = Clock::now();
    std::vector<std::string> pending = want.empty() ? std::vector<std::string>() : loom.leaves();
    while (!pending.empty() && Clock::now() - t0 < std::chrono::seconds(30)) {
      pending = NotRunning(*stub, pending, 3, want);
      if (round > 0) ++polls;
      // Poll again after 1 ms (each pass decodes every pending leaf's
      // routes: back to back it would take CPU from the leaves it waits for).
      if (!pending.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const auto t2 = Clock::now();
    if (!pending.empty()) {
      std::fprintf(stderr, "bench_wire: %zu leaves never confirmed the BGP recolor\n",
                   pending.size());
      return 1;
    }
    auto want_g = Desired(topo, loom.plan(), round + 3, 4, static_cast<uint64_t>(round + 1), reach);
    if (only == "bgp") want_g.clear();
    const auto t3 = Clock::now();
    failures += ApplyAll(gnmi, want_g);
    const auto t4 = Clock::now();
    if (round == 0) continue;  // Warm-up (first Set reads every device first).
    bgp_sent.ms.push_back(Ms(t1 - t0));
    bgp_confirmed.ms.push_back(Ms(t2 - t0));
    gnmi_confirmed.ms.push_back(Ms(t4 - t3));
  }
  std::printf("full-fabric recolor, %d leaves, %zu colored routes%s:\n", leaves, routes,
              !reach             ? " (no next-hop reach)"
              : nnhn == "always" ? " (each with NNHN)"
                                 : (" (next-hop reach, NNHN " + nnhn + ")").c_str());
  bgp_sent.Print("BGP: UPDATEs written on every session");
  bgp_confirmed.Print("BGP: applied and confirmed on every leaf");
  gnmi_confirmed.Print("gNMI Set: applied and confirmed on every leaf");
  if (rounds > 0 && only != "gnmi") {
    std::printf("  BGP confirmation: %.1f polls of the unconfirmed leaves per round\n",
                static_cast<double>(polls) / rounds);
  }
  std::printf("apply failures: %d\n", failures);
  gnmi.Stop();
  return failures == 0 ? 0 : 1;
}
