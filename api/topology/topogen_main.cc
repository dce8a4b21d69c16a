// loom-topogen: writes standard fabric shapes as loom.v1.Topology JSON.
#include <cstdio>
#include <fstream>
#include <iostream>

#include "api/topology/topology_generate.h"
#include "api/topology/topology_io.h"
#include "common/flags.h"

namespace {

constexpr char kUsage[] = R"(usage: loom-topogen SHAPE [flags] [-o FILE]

Writes a fabric topology (protobuf JSON of loom.v1.Topology) to FILE or stdout.

Shapes:
  clos2   2-tier leaf/spine Clos; all NICs of a host on one leaf
          --leaves N --spines N --hosts-per-leaf N --links-per-spine N
  rail    rail-optimized 2-tier; NIC k of every host on rail leaf k
          --hosts N --hosts-per-stripe N --spines N --links-per-spine N
  clos3   3-tier (5-stage) Clos with pods and super-spines
          --pods N --leaves-per-pod N --spines-per-pod N --super-spines N
          --hosts-per-leaf N

Common flags:
  --name NAME              topology name (default: the shape)
  --gpus-per-host N        default 8
  --nics-per-host N        default = gpus-per-host (fewer = shared NICs)
  --nic-speed RATE         NIC link speed, e.g. 400G (default 400G)
  --uplink-speed RATE      switch-to-switch link speed (default 400G)
  --delay-ns N             propagation delay per link (default 500)
  -o, --output FILE        write here instead of stdout

Example:
  loom-topogen rail --hosts 32 --spines 8 --links-per-spine 4 -o rail-256.json
)";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string shape = argv[1];
  // Treat "-o" as "--output".
  std::vector<char*> args(argv, argv + argc);
  std::string output_flag = "--output";
  for (auto& a : args) {
    if (std::string(a) == "-o") a = output_flag.data();
  }
  loom::Flags flags;
  std::string error;
  if (!flags.Parse(
          argc, args.data(), 2,
          {"leaves", "spines", "hosts-per-leaf", "links-per-spine", "hosts", "hosts-per-stripe",
           "pods", "leaves-per-pod", "spines-per-pod", "super-spines", "name", "gpus-per-host",
           "nics-per-host", "nic-speed", "uplink-speed", "delay-ns", "output"},
          {"help"}, &error)) {
    std::cerr << "loom-topogen: " << error << "\n";
    return 2;
  }
  if (flags.Has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  int64_t v = 0;
  auto geti = [&](const char* name, int def) -> int {
    if (!flags.GetInt(name, def, &v, &error)) {
      std::cerr << "loom-topogen: " << error << "\n";
      std::exit(2);
    }
    return static_cast<int>(v);
  };
  auto getrate = [&](const char* name, int64_t def) -> int64_t {
    if (!flags.Has(name)) return def;
    int64_t bps = 0;
    if (!loom::ParseBitRate(flags.Get(name), &bps)) {
      std::cerr << "loom-topogen: --" << name << ": \"" << flags.Get(name)
                << "\" is not a rate like 400G\n";
      std::exit(2);
    }
    return bps;
  };
  loom::topology::HostShape host;
  host.gpus_per_host = geti("gpus-per-host", 8);
  host.nics_per_host = geti("nics-per-host", host.gpus_per_host);
  host.nic_speed_bps = getrate("nic-speed", 400'000'000'000);
  int64_t uplink = getrate("uplink-speed", 400'000'000'000);
  int delay = geti("delay-ns", 500);
  loom::v1::Topology topo;
  bool ok = false;
  if (shape == "clos2") {
    loom::topology::Clos2Params p;
    p.name = flags.Get("name", "clos2");
    p.leaves = geti("leaves", p.leaves);
    p.spines = geti("spines", p.spines);
    p.hosts_per_leaf = geti("hosts-per-leaf", p.hosts_per_leaf);
    p.links_per_spine = geti("links-per-spine", p.links_per_spine);
    p.uplink_speed_bps = uplink;
    p.propagation_delay_ns = delay;
    p.host = host;
    ok = loom::topology::GenerateClos2(p, &topo, &error);
  } else if (shape == "rail") {
    loom::topology::RailParams p;
    p.name = flags.Get("name", "rail");
    p.hosts = geti("hosts", p.hosts);
    p.hosts_per_stripe = geti("hosts-per-stripe", p.hosts);
    p.spines = geti("spines", p.spines);
    p.links_per_spine = geti("links-per-spine", p.links_per_spine);
    p.uplink_speed_bps = uplink;
    p.propagation_delay_ns = delay;
    p.host = host;
    ok = loom::topology::GenerateRail(p, &topo, &error);
  } else if (shape == "clos3") {
    loom::topology::Clos3Params p;
    p.name = flags.Get("name", "clos3");
    p.pods = geti("pods", p.pods);
    p.leaves_per_pod = geti("leaves-per-pod", p.leaves_per_pod);
    p.spines_per_pod = geti("spines-per-pod", p.spines_per_pod);
    p.super_spines = geti("super-spines", p.super_spines);
    p.hosts_per_leaf = geti("hosts-per-leaf", p.hosts_per_leaf);
    p.uplink_speed_bps = uplink;
    p.propagation_delay_ns = delay;
    p.host = host;
    ok = loom::topology::GenerateClos3(p, &topo, &error);
  } else {
    std::cerr << "loom-topogen: unknown shape \"" << shape << "\" (clos2, rail, clos3)\n";
    return 2;
  }
  if (!ok) {
    std::cerr << "loom-topogen: " << error << "\n";
    return 2;
  }
  auto errs = loom::topology::ValidateTopology(topo);
  if (!errs.empty()) {
    std::cerr << "loom-topogen: internal error, generated topology is invalid:\n"
              << loom::topology::FormatErrors(errs, "", "") << "\n";
    return 1;
  }
  std::string json = loom::topology::TopologyToJson(topo);
  if (flags.Has("output")) {
    std::ofstream out(flags.Get("output"));
    out << json;
    if (!out) {
      std::cerr << "loom-topogen: cannot write " << flags.Get("output") << "\n";
      return 1;
    }
  } else {
    std::cout << json;
  }
  return 0;
}
