// telb_bench: the TELB benchmark of issue 5. A program, not a test: it prints figures.
//
//   1. JCT: a rail-optimized 2-tier fabric (256 GPUs by default) with concurrent jobs of
//      several tenants, run by the real controller core and the emulator in virtual time
//      (tests/closedloop/harness.h) under static ECMP, ECMP with QP entropy, switch DLB
//      flowlet and Loom TELB, next to each job's ideal lower bound. Writes the leaf-uplink
//      utilization heatmap (ECMP vs Loom) as an SVG.
//   2. Path quality: the path engine's maximum link utilization against the LP optimum of
//      the same assignment problem (fractional relaxation, solved with GLPK) on random
//      demand matrices.
//   3. Scale: full recompute time on a 4,096-GPU fabric and incremental placement latency
//      (Placement::Upsert) with a realistic job mix.
//
// Run: build/tests/telb_bench [--quick] [--seeds N] [--step-us N] [--lp-instances N]
//      [--mip-ms N] [--svg PATH] [--no-jct] [--no-lp] [--no-scale]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "api/topology/topology_generate.h"
#include "api/topology/topology_index.h"
#include "common/log.h"
#include "controller/te/demand.h"
#include "controller/te/next_hops.h"
#include "controller/te/path_engine.h"
#include "controller/te/placement.h"
#include "policy/policy_engine.h"
#include "sim-fabric/workload.h"
#include "tests/closedloop/bench_scenario.h"
#include "tests/closedloop/harness.h"

#ifdef LOOM_HAVE_GLPK
#include <glpk.h>
#endif

namespace loom::testing {
namespace {

namespace v1 = loom::v1;
using loom::sim::Collective;
using loom::sim::JobSpec;
using Clock = std::chrono::steady_clock;
using bench::Gpu;
using bench::IdealMs;
using bench::LeafUplinks;
using bench::MakeScenario;
using bench::Mean;
using bench::Percentile;
using bench::RandomJobs;
using bench::Scenario;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// CPU time of this thread, ms: placement timings on a shared machine (wall time there
// includes other processes' time slices).
double CpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

struct Args {
  bool quick = false;
  int seeds = 3;
  TimeNs step_ns = 5 * kNsPerUs;
  int lp_instances = 50;
  int mip_ms = 3000;
  std::string svg;
  bool jct = true, lp = true, scale = true;
};

// ------------------------------------------------------------------ 1. JCT

enum class Mode { kEcmp, kEcmpQp, kDlb, kSpray, kSpraySr, kSprayRt, kLoom };
constexpr Mode kModes[] = {Mode::kEcmp,    Mode::kEcmpQp,  Mode::kDlb, Mode::kSpray,
                           Mode::kSpraySr, Mode::kSprayRt, Mode::kLoom};

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kEcmp:
      return "static ECMP";
    case Mode::kEcmpQp:
      return "ECMP+QP entropy";
    case Mode::kDlb:
      return "DLB flowlet";
    case Mode::kSpray:
      return "spraying (GBN)";
    case Mode::kSpraySr:
      return "spraying (SR)";
    case Mode::kSprayRt:
      return "spraying (RT)";
    case Mode::kLoom:
      return "Loom TELB";
  }
  return "";
}

struct RunResult {
  std::vector<double> jct_ms;
  bool done = false;
  double sim_ms = 0, wall_s = 0;
  // Mean utilization of every leaf uplink while all jobs ran (first start to first end).
  std::vector<double> uplink_util;
  double window_ms = 0;
  double spine_share = 0;  // bytes on leaf uplinks / bytes the NICs sent
};

RunResult RunMode(const Scenario& s, Mode mode, uint64_t seed, TimeNs step_ns) {
  char tmpl[] = "/tmp/telb_bench.XXXXXX";
  std::string dir = mkdtemp(tmpl);
  RunResult res;
  auto wall0 = Clock::now();
  {
    LoopOptions o;
    o.topology = s.topology;
    o.fabric.seed = seed;
    o.fabric.step_ns = step_ns;
    o.loom_programs = mode == Mode::kLoom;
    o.db_path = dir + "/loom.db";
    // Per-packet spraying on every switch, with go-back-N (the emulator's default),
    // selective-repeat or reorder-tolerant NICs (sim-fabric/reorder.h).
    if (mode == Mode::kSpraySr) o.fabric.nic_reorder = loom::sim::ReorderMode::kSelectiveRepeat;
    if (mode == Mode::kSprayRt) o.fabric.nic_reorder = loom::sim::ReorderMode::kTolerant;
    ClosedLoop loop(o);
    auto& f = loop.fabric();
    if (mode == Mode::kEcmpQp) f.SetHashDestQp("*", true);
    if (mode == Mode::kDlb) f.SetForwardingMode("*", loom::sim::ForwardingMode::kDlbFlowlet);
    if (mode == Mode::kSpray || mode == Mode::kSpraySr || mode == Mode::kSprayRt) {
      f.SetForwardingMode("*", loom::sim::ForwardingMode::kDlbPerPacket);
    }
    for (JobSpec spec : s.jobs) {
      if (mode == Mode::kEcmpQp) spec.qps_per_connection = s.qp_entropy_qps;
      auto job = loop.AddJob(spec);
      if (getenv("TELB_BENCH_DEBUG") && mode == Mode::kLoom) {
        const auto& a = job.status().assignment();
        std::printf("    dbg job %s predicted %.2f: %s\n", spec.id.c_str(),
                    a.predicted_max_utilization(), a.reason().c_str());
        for (const auto& r : a.routes()) {
          std::printf("    dbg route %s via %s\n", r.destination().c_str(), r.via().c_str());
        }
      }
    }
    const auto uplinks = LeafUplinks(s.topology);
    auto read = [&](std::vector<double>* octets) {
      octets->clear();
      for (const auto& u : uplinks) {
        loom::sim::InterfaceCounters c;
        f.GetInterfaceCounters(u.leaf, u.iface, &c);
        octets->push_back(static_cast<double>(c.out_octets));
      }
    };
    TimeNs start = s.jobs.front().start_ns;
    for (const auto& j : s.jobs) start = std::min(start, j.start_ns);
    loop.RunUntil(start);
    if (getenv("TELB_BENCH_DEBUG")) {
      loop.RunUntil(start + 300 * kNsPerUs);
      for (const auto& u : uplinks) {
        double util = f.LinkUtilization(u.leaf, u.iface);
        if (util > 0.01)
          std::printf("    dbg %s->%s %.2f\n", u.leaf.c_str(), u.spine.c_str(), util);
      }
      for (const auto& q : f.GetQps()) {
        std::string p;
        for (const auto& h : q.path) p += h + " ";
        std::printf("    dbg qp %s %s->%s %.1fG rc %.1fG %s\n", q.job.c_str(), q.src_nic.c_str(),
                    q.dst_nic.c_str(), q.send_bps / 1e9, q.rate_bps / 1e9, p.c_str());
      }
    }
    std::vector<double> before, after;
    read(&before);
    bool window_closed = false;
    const TimeNs limit = 5 * kNsPerSec;
    while (!f.AllJobsDone() && f.now() < limit) {
      loop.RunUntil(f.now() + 1 * kNsPerMs);
      bool any_done = false;
      for (int j = 0; j < f.job_count(); ++j) any_done |= f.GetJob(j).done;
      if (any_done && !window_closed) {
        read(&after);
        window_closed = true;
        res.window_ms = static_cast<double>(f.now() - start) / 1e6;
      }
    }
    res.done = f.AllJobsDone();
    if (!window_closed) read(&after);
    for (size_t i = 0; i < uplinks.size(); ++i) {
      double bits = (after[i] - before[i]) * 8;
      res.uplink_util.push_back(bits / (uplinks[i].capacity_bps * res.window_ms / 1e3));
    }
    double up = 0, nic = 0;
    for (const auto& u : uplinks) {
      loom::sim::InterfaceCounters c;
      f.GetInterfaceCounters(u.leaf, u.iface, &c);
      up += static_cast<double>(c.out_octets);
    }
    for (const auto& d : s.topology.devices()) {
      if (d.role() != v1::DEVICE_ROLE_NIC) continue;
      loom::sim::NicCounters c;
      f.GetNicCounters(d.id(), &c);
      nic += static_cast<double>(c.tx_bytes);
    }
    res.spine_share = nic > 0 ? up / nic : 0;
    for (int j = 0; j < f.job_count(); ++j) {
      auto st = f.GetJob(j);
      res.jct_ms.push_back(st.done ? static_cast<double>(st.end_ns - st.start_ns) / 1e6 : NAN);
    }
    res.sim_ms = static_cast<double>(f.now()) / 1e6;
  }
  res.wall_s = Seconds(Clock::now() - wall0);
  std::filesystem::remove_all(dir);
  return res;
}

// Heat colour for a utilization in [0, 1] (white -> yellow -> red).
std::string Heat(double u) {
  u = std::clamp(u, 0.0, 1.0);
  struct Stop {
    double at;
    int r, g, b;
  };
  const Stop stops[] = {{0.0, 247, 251, 255},
                        {0.35, 198, 219, 239},
                        {0.7, 253, 174, 97},
                        {0.9, 244, 109, 67},
                        {1.0, 165, 0, 38}};
  for (size_t i = 1; i < std::size(stops); ++i) {
    if (u <= stops[i].at) {
      double f = (u - stops[i - 1].at) / (stops[i].at - stops[i - 1].at);
      auto mix = [&](int a, int b) { return static_cast<int>(std::lround(a + (b - a) * f)); };
      char buf[16];
      std::snprintf(buf, sizeof(buf), "#%02x%02x%02x", mix(stops[i - 1].r, stops[i].r),
                    mix(stops[i - 1].g, stops[i].g), mix(stops[i - 1].b, stops[i].b));
      return buf;
    }
  }
  return "#a50026";
}

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

// Two heatmaps (leaves x spines) of mean leaf-uplink utilization, ECMP and Loom, and the
// sorted utilizations of both as a line chart underneath.
void WriteSvg(const std::string& path, const Scenario& s, uint64_t seed,
              const std::vector<std::pair<std::string, RunResult>>& panels) {
  const auto uplinks = LeafUplinks(s.topology);
  std::vector<std::string> leaves, spines;
  for (const auto& u : uplinks) {
    if (std::find(leaves.begin(), leaves.end(), u.leaf) == leaves.end()) leaves.push_back(u.leaf);
    if (std::find(spines.begin(), spines.end(), u.spine) == spines.end()) spines.push_back(u.spine);
  }
  const int cw = 26, ch = 13, left = 90, top = 70, gap = 90;
  const int pw = cw * static_cast<int>(spines.size());
  const int ph = ch * static_cast<int>(leaves.size());
  const int chart_top = top + ph + 60, chart_h = 160;
  const int width = left + static_cast<int>(panels.size()) * (pw + gap) + 90;
  const int height = chart_top + chart_h + 70;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << left << "\" y=\"22\" font-size=\"15\" font-weight=\"bold\">"
    << "Leaf uplink utilization, " << s.rail.hosts * s.rail.host.gpus_per_host
    << " GPUs, rail-optimized 2-tier (seed " << seed << ")</text>\n"
    << "<text x=\"" << left << "\" y=\"40\">Mean utilization of each leaf-&gt;spine link "
    << "while all jobs run; rows = leaves, columns = spines.</text>\n";
  std::vector<std::string> colors = {"#d7191c", "#2c7bb6", "#1a9641", "#7b3294"};
  for (size_t p = 0; p < panels.size(); ++p) {
    const auto& [name, r] = panels[p];
    int x0 = left + static_cast<int>(p) * (pw + gap);
    double mx = *std::max_element(r.uplink_util.begin(), r.uplink_util.end());
    double mean = Mean(r.uplink_util);
    o << "<text x=\"" << x0 << "\" y=\"" << top - 10 << "\" font-weight=\"bold\">" << name
      << " (max " << Fmt("%.0f", mx * 100) << "%, mean " << Fmt("%.0f", mean * 100)
      << "%)</text>\n";
    for (size_t i = 0; i < uplinks.size(); ++i) {
      int li = static_cast<int>(std::find(leaves.begin(), leaves.end(), uplinks[i].leaf) -
                                leaves.begin());
      int si = static_cast<int>(std::find(spines.begin(), spines.end(), uplinks[i].spine) -
                                spines.begin());
      double u = r.uplink_util[i];
      o << "<rect x=\"" << x0 + si * cw << "\" y=\"" << top + li * ch << "\" width=\"" << cw
        << "\" height=\"" << ch << "\" fill=\"" << Heat(u) << "\" stroke=\"#ddd\""
        << " stroke-width=\"0.5\"><title>" << uplinks[i].leaf << " -&gt; " << uplinks[i].spine
        << ": " << Fmt("%.0f", u * 100) << "%</title></rect>\n";
    }
    for (size_t si = 0; si < spines.size(); ++si) {
      o << "<text x=\"" << x0 + static_cast<int>(si) * cw + cw / 2 << "\" y=\"" << top + ph + 12
        << "\" text-anchor=\"middle\" font-size=\"9\">s" << si << "</text>\n";
    }
    if (p == 0) {
      for (size_t li = 0; li < leaves.size(); ++li) {
        o << "<text x=\"" << x0 - 4 << "\" y=\"" << top + static_cast<int>(li) * ch + ch - 3
          << "\" text-anchor=\"end\" font-size=\"9\">" << leaves[li] << "</text>\n";
      }
    }
  }
  // Legend.
  int lx = left + static_cast<int>(panels.size()) * (pw + gap) - gap + 30;
  for (int i = 0; i <= 10; ++i) {
    o << "<rect x=\"" << lx << "\" y=\"" << top + (10 - i) * 16 << "\" width=\"16\" height=\"16\""
      << " fill=\"" << Heat(i / 10.0) << "\"/>\n";
    if (i % 2 == 0) {
      o << "<text x=\"" << lx + 20 << "\" y=\"" << top + (10 - i) * 16 + 12 << "\">" << i * 10
        << "%</text>\n";
    }
  }
  // Sorted utilizations.
  const int cx = left, cwid = width - left - 40;
  o << "<text x=\"" << cx << "\" y=\"" << chart_top - 12 << "\" font-weight=\"bold\">"
    << "All " << uplinks.size() << " leaf uplinks, sorted by utilization</text>\n";
  o << "<rect x=\"" << cx << "\" y=\"" << chart_top << "\" width=\"" << cwid << "\" height=\""
    << chart_h << "\" fill=\"none\" stroke=\"#999\"/>\n";
  for (int g = 0; g <= 4; ++g) {
    int y = chart_top + chart_h - g * chart_h / 4;
    o << "<line x1=\"" << cx << "\" x2=\"" << cx + cwid << "\" y1=\"" << y << "\" y2=\"" << y
      << "\" stroke=\"#eee\"/>\n<text x=\"" << cx - 4 << "\" y=\"" << y + 4
      << "\" text-anchor=\"end\">" << g * 25 << "%</text>\n";
  }
  for (size_t p = 0; p < panels.size(); ++p) {
    std::vector<double> v = panels[p].second.uplink_util;
    std::sort(v.rbegin(), v.rend());
    o << "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" << colors[p % colors.size()]
      << "\" points=\"";
    for (size_t i = 0; i < v.size(); ++i) {
      double x = cx + static_cast<double>(i) * cwid / static_cast<double>(v.size() - 1);
      double y = chart_top + chart_h - std::clamp(v[i], 0.0, 1.0) * chart_h;
      o << Fmt("%.1f", x) << "," << Fmt("%.1f", y) << " ";
    }
    o << "\"/>\n<text x=\"" << cx + cwid - 150 << "\" y=\"" << chart_top + 16 + 14 * p
      << "\" fill=\"" << colors[p % colors.size()] << "\">" << panels[p].first << "</text>\n";
  }
  o << "<text x=\"" << cx << "\" y=\"" << chart_top + chart_h + 18
    << "\">uplinks (descending)</text>\n</svg>\n";
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << o.str();
}

void RunJct(const Args& args) {
  Scenario s = MakeScenario(args.quick);
  loom::topology::TopologyIndex index(s.topology);
  const int gpus = s.rail.hosts * s.rail.host.gpus_per_host;
  const int stripes = s.rail.hosts / s.rail.hosts_per_stripe;
  std::printf("== 1. Job completion time (emulator + real controller core, virtual time)\n");
  std::printf(
      "fabric: %s, %d GPUs = %d hosts x %d GPUs, one 400G NIC per GPU; %d stripes of %d "
      "hosts -> %d leaves (one per rail per stripe); %d spines, %d x 400G uplink per leaf "
      "per spine (non-blocking: %d x 400G down, %d x 400G up per leaf)\n",
      s.rail.name.c_str(), gpus, s.rail.hosts, s.rail.host.gpus_per_host, stripes,
      s.rail.hosts_per_stripe, stripes * s.rail.host.nics_per_host, s.rail.spines,
      s.rail.links_per_spine, s.rail.hosts_per_stripe, s.rail.spines * s.rail.links_per_spine);
  std::printf(
      "emulator: step %.0f us (FabricOptions.step_ns = %lld), DCQCN on, PFC on, seeds 1..%d "
      "(seed = switch hash seeds and the emulator's RNG)\n",
      static_cast<double>(args.step_ns) / 1e3, static_cast<long long>(args.step_ns), args.seeds);
  std::printf(
      "modes: static ECMP = 5-tuple hash, 1 QP per connection; ECMP+QP entropy = %d QPs per "
      "connection and the RoCE dest QP in the hash; DLB flowlet = switch DLB (flowlet, "
      "quality = port load + queue), 1 QP; Loom TELB = Loom pins every (job, destination NIC) "
      "to a spine with BGP-DPF colored routes, 1 QP\n",
      s.qp_entropy_qps);
  std::printf(
      "ideal = iterations x (bytes the job's busiest NIC sends or receives over the fabric per "
      "iteration / 400 Gb/s) + (iterations - 1) x compute gap (same-host pairs use NVLink; in a "
      "non-blocking fabric the NIC is every job's bottleneck)\n");
  std::printf(
      "jobs (start 1 ms, ranks GPU-major over the job's hosts, hosts spread over every "
      "stripe):\n");
  std::vector<double> ideal;
  for (const auto& j : s.jobs) {
    double nic_bytes = 0;
    ideal.push_back(IdealMs(j, index, 1, &nic_bytes));
    std::printf(
        "  %-7s tenant %-6s %-16s %3zu ranks, %5.0f MB/rank, %d iterations, gap %4.0f us, "
        "busiest NIC %6.1f MB/iteration\n",
        j.id.c_str(), j.tenant.c_str(), loom::sim::CollectiveName(j.collective), j.ranks.size(),
        j.message_bytes / 1e6, j.iterations, static_cast<double>(j.compute_gap_ns) / 1e3,
        nic_bytes / 1e6);
  }
  std::fflush(stdout);

  // results[mode][seed]
  std::map<Mode, std::vector<RunResult>> results;
  for (int seed = 1; seed <= args.seeds; ++seed) {
    for (Mode m : kModes) {
      RunResult r = RunMode(s, m, static_cast<uint64_t>(seed), args.step_ns);
      double mean = Mean(r.jct_ms);
      double mx = *std::max_element(r.uplink_util.begin(), r.uplink_util.end());
      std::printf(
          "  seed %d %-16s mean JCT %7.2f ms%s | uplinks while all run (%.1f ms): max %3.0f%% "
          "mean %3.0f%% | %3.0f%% of NIC bytes cross a spine | %.1f ms simulated in %.1f s\n",
          seed, ModeName(m), mean, r.done ? "" : " (NOT DONE)", r.window_ms, mx * 100,
          Mean(r.uplink_util) * 100, r.spine_share * 100, r.sim_ms, r.wall_s);
      std::fflush(stdout);
      results[m].push_back(std::move(r));
    }
  }

  std::printf("\nJCT in ms, mean over %d seed(s) [min-max]:\n", args.seeds);
  std::printf("%-8s %-7s %-16s %8s", "job", "tenant", "collective", "ideal");
  for (Mode m : kModes) std::printf(" %23s", ModeName(m));
  std::printf("\n");
  std::map<Mode, std::vector<double>> per_seed_mean;
  for (Mode m : kModes) {
    for (const auto& r : results[m]) per_seed_mean[m].push_back(Mean(r.jct_ms));
  }
  for (size_t j = 0; j < s.jobs.size(); ++j) {
    std::printf("%-8s %-7s %-16s %8.2f", s.jobs[j].id.c_str(), s.jobs[j].tenant.c_str(),
                loom::sim::CollectiveName(s.jobs[j].collective), ideal[j]);
    for (Mode m : kModes) {
      std::vector<double> v;
      for (const auto& r : results[m]) v.push_back(r.jct_ms[j]);
      std::printf("    %7.2f [%5.1f-%5.1f]", Mean(v), *std::min_element(v.begin(), v.end()),
                  *std::max_element(v.begin(), v.end()));
    }
    std::printf("\n");
  }
  std::printf("%-8s %-7s %-16s %8.2f", "mean", "", "", Mean(ideal));
  for (Mode m : kModes) {
    const auto& v = per_seed_mean[m];
    std::printf("    %7.2f [%5.1f-%5.1f]", Mean(v), *std::min_element(v.begin(), v.end()),
                *std::max_element(v.begin(), v.end()));
  }
  std::printf("\n%-8s %-7s %-16s %8s", "x ideal", "", "", "1.00");
  for (Mode m : kModes) std::printf(" %23.2f", Mean(per_seed_mean[m]) / Mean(ideal));
  double ecmp = Mean(per_seed_mean[Mode::kEcmp]);
  std::printf("\n%-8s %-7s %-16s %8s", "ECMP /", "", "", "");
  for (Mode m : kModes) std::printf(" %23.2f", ecmp / Mean(per_seed_mean[m]));
  std::printf("\n");
  double speedup = ecmp / Mean(per_seed_mean[Mode::kLoom]);
  std::printf("Loom TELB vs static ECMP, mean JCT: %.2fx faster (goal >= 1.3x: %s)\n", speedup,
              speedup >= 1.3 ? "met" : "NOT met");
  // Against the best a user can configure by hand with each kind of NIC (Loom TELB pins
  // whole flows and never sprays, so reordering never costs it anything).
  const double loom = Mean(per_seed_mean[Mode::kLoom]);
  for (Mode spray : {Mode::kSpray, Mode::kSpraySr, Mode::kSprayRt}) {
    double best = 0;
    Mode best_mode = Mode::kEcmp;
    for (Mode m : {Mode::kEcmp, Mode::kEcmpQp, Mode::kDlb, spray}) {
      const double x = Mean(per_seed_mean[m]);
      if (best == 0 || x < best) {
        best = x;
        best_mode = m;
      }
    }
    std::printf("  with %s NICs: Loom TELB / best hand-configured mode (%s) = %.3f\n",
                spray == Mode::kSpray     ? "go-back-N"
                : spray == Mode::kSpraySr ? "selective-repeat"
                                          : "reorder-tolerant",
                ModeName(best_mode), loom / best);
  }
  std::printf("\n");
  if (!args.svg.empty()) {
    WriteSvg(args.svg, s, 1,
             {{"static ECMP", results[Mode::kEcmp][0]}, {"Loom TELB", results[Mode::kLoom][0]}});
    std::printf("wrote %s\n\n", args.svg.c_str());
  }
}

// ------------------------------------------------------------------ shared: jobs -> units

// Units of a job exactly as Placement builds them: demand per (destination NIC, source
// leaf), intra-leaf traffic dropped.
void AppendUnits(const v1::Job& job, double scale, const loom::topology::TopologyIndex& topo,
                 const loom::te::FabricGraph& g, std::vector<loom::te::Unit>* out) {
  std::map<std::string, std::map<int, double>> by_dst;
  for (const auto& d : loom::te::JobDemand(job, topo, scale)) {
    int src = g.NicLeaf(d.src_nic), dst = g.NicLeaf(d.dst_nic);
    if (src < 0 || dst < 0 || src == dst) continue;
    by_dst[d.dst_nic][src] += d.rate_bps;
  }
  for (const auto& [dst, sources] : by_dst) {
    loom::te::Unit u;
    u.job_id = job.job_id();
    u.dst_nic = dst;
    u.dst_leaf = g.NicLeaf(dst);
    u.sources.assign(sources.begin(), sources.end());
    out->push_back(std::move(u));
  }
}

// The units of a QP split into `parts` (policy qp_split), as Placement builds them: each
// unit becomes `parts` units of an equal share, part k = destination QPs k modulo parts.
std::vector<loom::te::Unit> SplitUnits(const std::vector<loom::te::Unit>& units, uint32_t parts) {
  std::vector<loom::te::Unit> out;
  out.reserve(units.size() * parts);
  for (const auto& u : units) {
    for (uint32_t k = 0; k < parts; ++k) {
      loom::te::Unit part = u;
      for (auto& [src, rate] : part.sources) rate /= parts;
      part.qp_mask = parts - 1;
      part.qp_value = k;
      out.push_back(std::move(part));
    }
  }
  return out;
}

// ------------------------------------------------------------------ 2. LP quality

#ifdef LOOM_HAVE_GLPK
// The assignment problem as a GLPK model: column 1 is z, then one column x_ut per
// (unit, candidate top); rows: sum_t x_ut = 1 per unit, and per edge
// sum load_ut(e) / capacity(e) * x_ut - z <= 0; minimize z.
struct GlpkModel {
  glp_prob* lp = nullptr;
  std::map<std::pair<size_t, int>, int> col;  // (unit, top) -> column
  ~GlpkModel() {
    if (lp) glp_delete_prob(lp);
  }
};

void BuildModel(const loom::te::FabricGraph& g, const std::vector<loom::te::Unit>& units,
                bool integer, GlpkModel* m) {
  glp_prob* lp = m->lp = glp_create_prob();
  glp_set_obj_dir(lp, GLP_MIN);
  glp_add_rows(lp, static_cast<int>(units.size()) + g.num_edges());
  for (size_t u = 0; u < units.size(); ++u) {
    glp_set_row_bnds(lp, static_cast<int>(u) + 1, GLP_FX, 1.0, 1.0);
  }
  const int edge_row0 = static_cast<int>(units.size()) + 1;
  for (int e = 0; e < g.num_edges(); ++e) glp_set_row_bnds(lp, edge_row0 + e, GLP_UP, 0.0, 0.0);
  std::vector<int> ia = {0}, ja = {0};
  std::vector<double> ar = {0};
  glp_add_cols(lp, 1);
  glp_set_col_bnds(lp, 1, GLP_LO, 0.0, 0.0);
  glp_set_obj_coef(lp, 1, 1.0);
  for (int e = 0; e < g.num_edges(); ++e) {
    if (g.capacity(e) <= 0) continue;
    ia.push_back(edge_row0 + e);
    ja.push_back(1);
    ar.push_back(-1.0);
  }
  std::vector<int> edges;
  for (size_t u = 0; u < units.size(); ++u) {
    for (int t = 0; t < g.num_tops(); ++t) {
      std::map<int, double> coef;
      bool ok = true;
      for (const auto& [src, rate] : units[u].sources) {
        if (!g.PathEdges(src, units[u].dst_leaf, t, &edges)) {
          ok = false;
          break;
        }
        for (int e : edges) coef[e] += rate / g.capacity(e);
      }
      if (!ok) continue;
      int c = glp_add_cols(lp, 1);
      m->col[{u, t}] = c;
      if (integer) {
        glp_set_col_kind(lp, c, GLP_BV);
      } else {
        glp_set_col_bnds(lp, c, GLP_LO, 0.0, 0.0);
      }
      ia.push_back(static_cast<int>(u) + 1);
      ja.push_back(c);
      ar.push_back(1.0);
      for (const auto& [e, v] : coef) {
        ia.push_back(edge_row0 + e);
        ja.push_back(c);
        ar.push_back(v);
      }
    }
  }
  glp_load_matrix(lp, static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
}

// Optimum of the fractional relaxation (a unit may split across tops).
double SolveLp(const loom::te::FabricGraph& g, const std::vector<loom::te::Unit>& units,
               double* seconds) {
  auto t0 = Clock::now();
  GlpkModel m;
  BuildModel(g, units, false, &m);
  glp_smcp parm;
  glp_init_smcp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  parm.presolve = GLP_ON;
  int rc = glp_simplex(m.lp, &parm);
  double z = (rc == 0 && glp_get_status(m.lp) == GLP_OPT) ? glp_get_obj_val(m.lp) : NAN;
  *seconds = Seconds(Clock::now() - t0);
  return z;
}

struct MipResult {
  double best = NAN;   // best integral placement found (incumbent)
  double bound = NAN;  // proven lower bound on the integral optimum
  bool optimal = false;
  bool ran = false;  // false: not needed, Loom met a lower bound
};

struct MipCallback {
  const GlpkModel* m;
  const std::vector<int>* start;  // Loom's placement, given to GLPK as a first incumbent
  double bound = -1;
  bool given = false;
};

void MipCb(glp_tree* tree, void* info) {
  auto* cb = static_cast<MipCallback*>(info);
  if (glp_ios_reason(tree) == GLP_IHEUR && !cb->given) {
    cb->given = true;
    glp_prob* lp = glp_ios_get_prob(tree);
    std::vector<double> x(static_cast<size_t>(glp_get_num_cols(lp)) + 1, 0.0);
    for (size_t u = 0; u < cb->start->size(); ++u) {
      auto it = cb->m->col.find({u, (*cb->start)[u]});
      if (it != cb->m->col.end()) x[static_cast<size_t>(it->second)] = 1.0;
    }
    // z = the placement's maximum utilization: the largest row activity.
    double z = 0;
    std::vector<int> ind(static_cast<size_t>(glp_get_num_cols(lp)) + 1);
    std::vector<double> val(ind.size());
    for (int r = 1; r <= glp_get_num_rows(lp); ++r) {
      if (glp_get_row_type(lp, r) != GLP_UP) continue;
      int len = glp_get_mat_row(lp, r, ind.data(), val.data());
      double act = 0;
      for (int k = 1; k <= len; ++k) {
        if (ind[static_cast<size_t>(k)] != 1) {
          act += val[static_cast<size_t>(k)] * x[static_cast<size_t>(ind[static_cast<size_t>(k)])];
        }
      }
      z = std::max(z, act);
    }
    x[1] = z;
    glp_ios_heur_sol(tree, x.data());
  }
  int best = glp_ios_best_node(tree);
  if (best > 0) cb->bound = glp_ios_node_bound(tree, best);
}

// The integral problem (each unit on one top) by branch and bound, within `time_ms`.
MipResult SolveMip(const loom::te::FabricGraph& g, const std::vector<loom::te::Unit>& units,
                   const std::vector<int>& start, int time_ms) {
  GlpkModel m;
  BuildModel(g, units, true, &m);
  MipCallback cb{&m, &start};
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  parm.presolve = GLP_ON;
  parm.tm_lim = time_ms;
  parm.cb_func = MipCb;
  parm.cb_info = &cb;
  glp_intopt(m.lp, &parm);
  MipResult r;
  r.ran = true;
  int st = glp_mip_status(m.lp);
  if (st == GLP_OPT || st == GLP_FEAS) r.best = glp_mip_obj_val(m.lp);
  r.optimal = st == GLP_OPT;
  r.bound = r.optimal ? r.best : cb.bound;
  return r;
}
#endif

void RunLp(const Args& args) {
  std::printf("== 2. Path computation quality: Loom's placement vs the LP optimum\n");
#ifndef LOOM_HAVE_GLPK
  (void)args;
  std::printf("skipped: GLPK (libglpk-dev) was not found when telb_bench was configured\n\n");
#else
  loom::topology::RailParams r;
  r.hosts = args.quick ? 8 : 32;
  r.hosts_per_stripe = args.quick ? 4 : 8;
  r.spines = args.quick ? 4 : 8;
  r.links_per_spine = 1;
  v1::Topology topo;
  std::string err;
  loom::topology::GenerateRail(r, &topo, &err);
  loom::topology::TopologyIndex index(topo);
  auto g = loom::te::FabricGraph::Build(index, {});
  const int n = args.quick ? std::min(args.lp_instances, 5) : args.lp_instances;
  std::printf(
      "problem: units = (job, destination NIC) with their per-source-leaf demand (the demand "
      "model's rates x a random per-job scale in [0.2, 1]); each unit takes one spine; "
      "objective = maximum directed edge utilization. LP = the fractional relaxation "
      "(a unit may split across spines), solved with GLPK simplex: a lower bound on any "
      "placement.\n");
  std::printf(
      "instances: %d random job mixes on a %d-GPU rail fabric (%d leaves, %d spines): jobs of "
      "1-8 hosts on shuffled blocks of hosts, ring all-reduce with a random host order (65%%), "
      "all-to-all (25%%), permutation (10%%), 90%% of the hosts busy\n",
      n, r.hosts * 8, g.num_leaves(), g.num_tops());
  const int mip_ms = args.quick ? std::min(args.mip_ms, 500) : args.mip_ms;
  std::printf(
      "MIP = the same problem with integral assignment (what a placement can achieve), "
      "branch and bound in GLPK within %d ms per instance, started from Loom's placement, run "
      "only when Loom is above max(LP, the integrality bounds: the largest single unit's own "
      "minimum utilization, and per leaf the K-th + (K+1)-th largest units over its K "
      "uplinks or downlinks) (else Loom is optimal); when it does not finish, Loom's gap is "
      "bounded with the best lower bound known: max(LP, MIP bound, those bounds).\n",
      mip_ms);
  std::vector<double> gaps, int_gaps, loom_ms, lp_s;
  int within = 0, int_within = 0, proven = 0, mip_better = 0;
  // QP split (policy qp_split = P): the same instances with every unit in P parts.
  const std::vector<uint32_t> splits = {2, 4, static_cast<uint32_t>(g.num_tops())};
  std::vector<std::vector<double>> split_gaps(splits.size()), split_ms(splits.size());
  for (int i = 0; i < n; ++i) {
    std::mt19937_64 rng(1000 + static_cast<uint64_t>(i));
    auto jobs = RandomJobs(rng, r.hosts, 8, {1, 2, 4, 8}, 8, 0.9);
    std::vector<loom::te::Unit> units;
    for (const auto& j : jobs) {
      AppendUnits(j, std::uniform_real_distribution<double>(0.2, 1.0)(rng), index, g, &units);
    }
    auto t0 = Clock::now();
    auto res =
        loom::te::Place(g, units, loom::te::PlacementParams{}, loom::te::PlacementMode::kFull);
    loom_ms.push_back(Seconds(Clock::now() - t0) * 1e3);
    double secs = 0;
    double lp = SolveLp(g, units, &secs);
    lp_s.push_back(secs);
    // Integrality bound: a unit goes whole over one top, so the optimum is at least
    // max over units of (min over its tops of the busiest edge it alone would load).
    double unit_bound = 0;
    {
      std::vector<int> edges;
      for (const auto& u : units) {
        double best = INFINITY;
        for (int t = 0; t < g.num_tops(); ++t) {
          std::map<int, double> load;
          bool ok = true;
          for (const auto& [src, rate] : u.sources) {
            if (!g.PathEdges(src, u.dst_leaf, t, &edges)) {
              ok = false;
              break;
            }
            for (int e : edges) load[e] += rate / g.capacity(e);
          }
          if (!ok) continue;
          double mx = 0;
          for (const auto& [e, v] : load) mx = std::max(mx, v);
          best = std::min(best, mx);
        }
        if (std::isfinite(best)) unit_bound = std::max(unit_bound, best);
      }
      // Pair bound (2-tier): the units leaving (entering) a leaf each take one of its K
      // uplinks (downlinks) whole, so of the K + 1 largest, two share a link: the optimum
      // is at least (the K-th + the (K+1)-th largest) / capacity. Capacities are equal
      // here (400G everywhere).
      if (!g.three_tier()) {
        std::vector<std::vector<double>> up(static_cast<size_t>(g.num_leaves())),
            down(static_cast<size_t>(g.num_leaves()));
        for (const auto& u : units) {
          double total = 0;
          for (const auto& [src, rate] : u.sources) {
            up[static_cast<size_t>(src)].push_back(rate);
            total += rate;
          }
          if (u.dst_leaf >= 0) down[static_cast<size_t>(u.dst_leaf)].push_back(total);
        }
        const size_t k = static_cast<size_t>(g.num_tops());
        const double cap = g.capacity(g.UpEdge(0, 0));
        for (auto* side : {&up, &down}) {
          for (auto& items : *side) {
            if (items.size() <= k) continue;
            std::sort(items.rbegin(), items.rend());
            unit_bound = std::max(unit_bound, (items[k - 1] + items[k]) / cap);
          }
        }
      }
    }
    const double loom = res.max_utilization;
    MipResult mip;
    if (loom <= std::max(lp, unit_bound) * (1 + 1e-9)) {
      mip.best = loom;  // nothing can be lower: branch and bound has nothing to find
      mip.bound = std::max(lp, unit_bound);
    } else {
      mip = SolveMip(g, units, res.top, mip_ms);
    }
    for (size_t k = 0; k < splits.size(); ++k) {
      std::vector<loom::te::Unit> parts = SplitUnits(units, splits[k]);
      auto t1 = Clock::now();
      auto split =
          loom::te::Place(g, parts, loom::te::PlacementParams{}, loom::te::PlacementMode::kFull);
      split_ms[k].push_back(Seconds(Clock::now() - t1) * 1e3);
      split_gaps[k].push_back(split.max_utilization / lp - 1);
    }
    double gap = loom / lp - 1;
    // Gap to the integral optimum: exact when the MIP finished, else at most loom / bound - 1.
    double lower = std::max({lp, unit_bound, std::isnan(mip.bound) ? lp : mip.bound});
    if (mip.optimal) lower = mip.best;
    double int_gap = std::max(0.0, loom / lower - 1);
    gaps.push_back(gap);
    int_gaps.push_back(int_gap);
    if (gap <= 0.02 + 1e-9) ++within;
    if (int_gap <= 0.02 + 1e-9) ++int_within;
    if (mip.optimal || loom <= lower * (1 + 1e-9)) ++proven;  // the gap is known exactly
    if (mip.best < loom - 1e-6) ++mip_better;
    if (args.quick || i < 5 || (mip.optimal && int_gap > 0.02) || int_gap > 0.10) {
      std::printf(
          "  instance %2d: %2zu jobs %4zu units | Loom %.4f | LP %.4f (gap %+6.2f%%) | MIP best "
          "%.4f%s, lower bound %.4f (Loom's gap to the integral optimum %s%.2f%%)\n",
          i, jobs.size(), units.size(), loom, lp, gap * 100, mip.best,
          mip.optimal ? " optimal"
          : mip.ran   ? " (time limit)"
                      : " (not run: Loom = bound)",
          lower, mip.optimal ? "" : "<= ", int_gap * 100);
    }
  }
  std::printf(
      "gap to the LP relaxation (Loom / LP - 1) over %d instances: min %.2f%%  p50 %.2f%%  "
      "mean %.2f%%  p90 %.2f%%  max %.2f%%; within 2%%: %d/%d\n",
      n, Percentile(gaps, 0) * 100, Percentile(gaps, 0.5) * 100, Mean(gaps) * 100,
      Percentile(gaps, 0.9) * 100, Percentile(gaps, 1) * 100, within, n);
  std::printf(
      "gap to the integral optimum (known exactly in %d/%d instances, else an upper bound): min "
      "%.2f%%  "
      "p50 %.2f%%  mean %.2f%%  p90 %.2f%%  max %.2f%%; within 2%%: %d/%d; the MIP found a "
      "better placement than Loom in %d/%d\n",
      proven, n, Percentile(int_gaps, 0) * 100, Percentile(int_gaps, 0.5) * 100,
      Mean(int_gaps) * 100, Percentile(int_gaps, 0.9) * 100, Percentile(int_gaps, 1) * 100,
      int_within, n, mip_better, n);
  // Asymmetric fabrics: the same job mixes with 3 random leaf-spine links down, where the
  // fractional optimum is not simply an even spread over every spine.
  std::vector<const v1::Link*> fabric_links;
  for (const auto& l : topo.links()) {
    if (l.b().device().rfind("spine", 0) == 0) fabric_links.push_back(&l);
  }
  const std::vector<uint32_t> failed_parts = {static_cast<uint32_t>(g.num_tops()), 32};
  std::vector<double> failed_whole;
  std::vector<std::vector<double>> failed_split(failed_parts.size());
  for (int i = 0; i < n; ++i) {
    std::mt19937_64 rng(1000 + static_cast<uint64_t>(i));
    auto jobs = RandomJobs(rng, r.hosts, 8, {1, 2, 4, 8}, 8, 0.9);
    std::set<std::string> down;
    std::mt19937_64 frng(5000 + static_cast<uint64_t>(i));
    while (down.size() < 3) {
      down.insert(
          fabric_links[std::uniform_int_distribution<size_t>(0, fabric_links.size() - 1)(frng)]
              ->id());
    }
    auto fg = loom::te::FabricGraph::Build(index, down);
    std::vector<loom::te::Unit> units;
    for (const auto& j : jobs) {
      AppendUnits(j, std::uniform_real_distribution<double>(0.2, 1.0)(rng), index, fg, &units);
    }
    double secs = 0;
    const double lp = SolveLp(fg, units, &secs);
    auto whole =
        loom::te::Place(fg, units, loom::te::PlacementParams{}, loom::te::PlacementMode::kFull);
    failed_whole.push_back(whole.max_utilization / lp - 1);
    for (size_t k = 0; k < failed_parts.size(); ++k) {
      auto split = loom::te::Place(fg, SplitUnits(units, failed_parts[k]),
                                   loom::te::PlacementParams{}, loom::te::PlacementMode::kFull);
      failed_split[k].push_back(split.max_utilization / lp - 1);
    }
  }
  std::printf(
      "with 3 random leaf-spine links down (same mixes, a new LP each), gap to the LP: one "
      "color per destination p50 %.2f%% max %.2f%%",
      Percentile(failed_whole, 0.5) * 100, Percentile(failed_whole, 1) * 100);
  for (size_t k = 0; k < failed_parts.size(); ++k) {
    int in = 0;
    for (double x : failed_split[k]) in += x <= 0.02 + 1e-9;
    std::printf("; qp_split %u p50 %.2f%% mean %.2f%% max %.2f%%, within 2%%: %d/%d",
                failed_parts[k], Percentile(failed_split[k], 0.5) * 100,
                Mean(failed_split[k]) * 100, Percentile(failed_split[k], 1) * 100, in, n);
  }
  std::printf("\n");
  std::printf(
      "with the QP split (policy qp_split = P: each destination's traffic in P equal parts by "
      "destination QP modulo P, each part on its own spine; the LP is the same problem's "
      "relaxation, so this is the goal's comparison):\n");
  for (size_t k = 0; k < splits.size(); ++k) {
    int in = 0;
    for (double x : split_gaps[k]) in += x <= 0.02 + 1e-9;
    std::printf(
        "  qp_split %2u: gap to the LP min %.2f%%  p50 %.2f%%  mean %.2f%%  max %.2f%%; within "
        "2%%: %d/%d%s; Place(kFull) p50 %.2f ms\n",
        splits[k], Percentile(split_gaps[k], 0) * 100, Percentile(split_gaps[k], 0.5) * 100,
        Mean(split_gaps[k]) * 100, Percentile(split_gaps[k], 1) * 100, in, n,
        in == n ? " (goal within 2 %: met)" : "", Percentile(split_ms[k], 0.5));
  }
  std::printf("time: Loom Place(kFull) p50 %.2f ms; GLPK simplex p50 %.1f ms\n\n",
              Percentile(loom_ms, 0.5), Percentile(lp_s, 0.5) * 1e3);
#endif
}

// ------------------------------------------------------------------ 3. scale

void RunScale(const Args& args) {
  std::printf(
      "== 3. Placement time at scale (Placement, the controller's TELB state; times are CPU "
      "time of the calling thread, i.e. latency on an otherwise idle core)\n");
  loom::topology::RailParams r;
  r.hosts = args.quick ? 64 : 512;
  r.hosts_per_stripe = args.quick ? 16 : 32;
  r.spines = args.quick ? 16 : 32;
  r.links_per_spine = 1;
  v1::Topology topo;
  std::string err;
  loom::topology::GenerateRail(r, &topo, &err);
  auto index = std::make_shared<const loom::topology::TopologyIndex>(topo);
  loom::te::Placement placement(index, loom::te::PlacementParams{});
  std::mt19937_64 rng(42);
  auto jobs = RandomJobs(rng, r.hosts, 8, {1, 2, 4, 8, 16, 32, 64}, 8, 1.0);
  std::map<v1::CollectivePattern, int> kinds;
  for (const auto& j : jobs) kinds[j.collective()]++;
  std::printf(
      "fabric: %d GPUs (%d hosts x 8, %d leaves, %d spines, 400G); %zu jobs of 8-512 GPUs "
      "filling every host: %d ring all-reduce, %d all-to-all (<= 64 GPUs, expert-parallel "
      "groups), %d permutation\n",
      r.hosts * 8, r.hosts, placement.graph().num_leaves(), placement.graph().num_tops(),
      jobs.size(), kinds[v1::COLLECTIVE_PATTERN_RING_ALLREDUCE],
      kinds[v1::COLLECTIVE_PATTERN_ALL_TO_ALL], kinds[v1::COLLECTIVE_PATTERN_PERMUTATION]);
  // Digest of every result below (assignments with their reasons, chosen tops): equal
  // digests before and after a change to the path engine mean the same placements.
  uint64_t digest = 14695981039346656037ull;
  auto mix = [&digest](const std::string& bytes) {
    for (unsigned char c : bytes) digest = (digest ^ c) * 1099511628211ull;
  };
  std::vector<double> arrival_ms;
  for (const auto& j : jobs) {
    double t0 = CpuMs();
    v1::PathAssignment a = placement.Upsert(j);
    arrival_ms.push_back(CpuMs() - t0);
    mix(a.SerializeAsString());
  }
  std::printf(
      "incremental placement as the fabric fills (Upsert, %zu arrivals): p50 %.3f ms  p99 "
      "%.3f ms  max %.3f ms; max utilization after: %.3f\n",
      arrival_ms.size(), Percentile(arrival_ms, 0.5), Percentile(arrival_ms, 0.99),
      Percentile(arrival_ms, 1), placement.max_utilization());
  // Full recompute: the first one from the incremental state, then steady ones.
  std::vector<double> full_ms;
  size_t changed_first = 0;
  for (int i = 0; i < (args.quick ? 2 : 5); ++i) {
    double t0 = CpuMs();
    auto changed = placement.Recompute(loom::te::PlacementMode::kFull);
    full_ms.push_back(CpuMs() - t0);
    if (i == 0) changed_first = changed.size();
    for (const auto& [id, a] : changed) mix(id + a.SerializeAsString());
  }
  for (const auto& j : jobs) mix(placement.AssignmentOf(j.job_id()).SerializeAsString());
  std::printf(
      "full recompute (Recompute(kFull): units rebuilt from the demand model, keep-vs-fresh "
      "placement, stability check), %zu runs: first %.1f ms (%zu jobs changed), p50 %.1f ms, "
      "max %.1f ms (goal <= 100 ms: %s); max utilization %.3f\n",
      full_ms.size(), full_ms[0], changed_first, Percentile(full_ms, 0.5), Percentile(full_ms, 1),
      Percentile(full_ms, 1) <= 100 ? "met" : "NOT met", placement.max_utilization());
  const double full_max = placement.max_utilization();
  // Cold: the path engine alone on every unit, nothing current.
  auto g = loom::te::FabricGraph::Build(*index, {});
  std::vector<loom::te::Unit> units;
  for (const auto& j : jobs) AppendUnits(j, 1.0, *index, g, &units);
  double t0 = CpuMs();
  auto cold =
      loom::te::Place(g, units, loom::te::PlacementParams{}, loom::te::PlacementMode::kFull);
  double cold_ms = CpuMs() - t0;
  for (size_t u = 0; u < units.size(); ++u) {
    mix(std::to_string(cold.top[u]) + "/" + std::to_string(cold.backup[u]) + cold.reason[u]);
  }
  std::printf(
      "path engine alone, cold (Place(kFull), %zu units, nothing current): %.1f ms; max "
      "utilization %.3f\n",
      units.size(), cold_ms, cold.max_utilization);
  // Steady-state churn: a job ends and a new one of the same shape starts elsewhere in time.
  std::vector<double> churn_ms;
  std::map<std::string, std::vector<double>> by_kind;  // "<pattern> <gpus>" -> ms
  const int rounds = args.quick ? 50 : 300;
  for (int i = 0; i < rounds; ++i) {
    const v1::Job& j = jobs[std::uniform_int_distribution<size_t>(0, jobs.size() - 1)(rng)];
    placement.Remove(j.job_id());
    double t1 = CpuMs();
    v1::PathAssignment a = placement.Upsert(j);
    churn_ms.push_back(CpuMs() - t1);
    mix(a.SerializeAsString());
    char kind[64];
    std::snprintf(kind, sizeof(kind), "%s %d GPUs",
                  j.collective() == v1::COLLECTIVE_PATTERN_RING_ALLREDUCE ? "ring"
                  : j.collective() == v1::COLLECTIVE_PATTERN_ALL_TO_ALL   ? "all-to-all"
                                                                          : "permutation",
                  j.endpoints_size());
    by_kind[kind].push_back(churn_ms.back());
  }
  std::printf("  Upsert latency by job shape (rounds, p50, max):");
  for (const auto& [k, v] : by_kind) {
    std::printf(" %s: %zu, %.2f, %.2f ms;", k.c_str(), v.size(), Percentile(v, 0.5),
                Percentile(v, 1));
  }
  std::printf("\n");
  std::printf(
      "incremental placement in a full fabric (Remove + Upsert of a random job, %d rounds): "
      "p50 %.3f ms  p99 %.3f ms  max %.3f ms (goal p99 <= 2 ms: %s)\n",
      rounds, Percentile(churn_ms, 0.5), Percentile(churn_ms, 0.99), Percentile(churn_ms, 1),
      Percentile(churn_ms, 0.99) <= 2 ? "met" : "NOT met");
  std::printf("placement digest (all results above): %016llx\n",
              static_cast<unsigned long long>(digest));
  // What the controller builds after a placement change: every switch's desired state,
  // and the next-hop reach of the switches with routes (the data behind NNHN).
  std::vector<double> states_ms, reach_ms;
  size_t routes = 0, reach_entries = 0;
  for (int i = 0; i < 3; ++i) {
    double t0 = CpuMs();
    auto desired = placement.DesiredStates();
    states_ms.push_back(CpuMs() - t0);
    t0 = CpuMs();
    loom::te::AddNextHopReach(*index, {}, &desired);
    reach_ms.push_back(CpuMs() - t0);
    routes = reach_entries = 0;
    for (const auto& [id, st] : desired) {
      routes += static_cast<size_t>(st.routes_size());
      reach_entries += static_cast<size_t>(st.next_hop_reach_size());
    }
  }
  std::printf(
      "desired states of every switch (%zu colored routes): p50 %.1f ms; their next-hop reach "
      "(%zu entries): p50 %.1f ms\n",
      routes, Percentile(states_ms, 0.5), reach_entries, Percentile(reach_ms, 0.5));
  // The same jobs with every job split by destination QP in 8 parts (policy
  // qp_split 8): 8 times as many units to place and colored routes to program.
  const uint32_t parts = 8;
  loom::te::Placement split(index, loom::te::PlacementParams{});
  v1::PolicySet policy;
  policy.mutable_default_action()->set_qp_split(parts);
  split.SetPolicy(policy);
  std::vector<double> split_arrival_ms, split_full_ms, split_churn_ms;
  for (const auto& j : jobs) {
    double t1 = CpuMs();
    split.Upsert(j);
    split_arrival_ms.push_back(CpuMs() - t1);
  }
  for (int i = 0; i < (args.quick ? 1 : 3); ++i) {
    double t1 = CpuMs();
    split.Recompute(loom::te::PlacementMode::kFull);
    split_full_ms.push_back(CpuMs() - t1);
  }
  const double split_full_max = split.max_utilization();
  for (int i = 0; i < (args.quick ? 20 : 100); ++i) {
    const v1::Job& j = jobs[std::uniform_int_distribution<size_t>(0, jobs.size() - 1)(rng)];
    split.Remove(j.job_id());
    double t1 = CpuMs();
    split.Upsert(j);
    split_churn_ms.push_back(CpuMs() - t1);
  }
  double t1 = CpuMs();
  auto split_states = split.DesiredStates();
  double split_states_ms = CpuMs() - t1;
  size_t split_routes = 0;
  for (const auto& [id, st] : split_states) split_routes += static_cast<size_t>(st.routes_size());
  std::printf(
      "with qp_split %u on every job: arrivals p99 %.3f ms; full recompute p50 %.1f ms (max "
      "utilization %.3f, one color per destination %.3f); Remove + Upsert in a full fabric p50 "
      "%.3f ms  p99 %.3f ms  max %.3f ms; desired states (%zu colored routes) %.1f ms\n\n",
      parts, Percentile(split_arrival_ms, 0.99), Percentile(split_full_ms, 0.5), split_full_max,
      full_max, Percentile(split_churn_ms, 0.5), Percentile(split_churn_ms, 0.99),
      Percentile(split_churn_ms, 1), split_routes, split_states_ms);
}

int Main(int argc, char** argv) {
  Args args;
  bool svg_set = false, seeds_set = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--quick") {
      args.quick = true;
    } else if (a == "--seeds") {
      args.seeds = std::max(1, std::atoi(next().c_str()));
      seeds_set = true;
    } else if (a == "--step-us") {
      args.step_ns = static_cast<TimeNs>(std::atof(next().c_str()) * 1e3);
    } else if (a == "--lp-instances") {
      args.lp_instances = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--mip-ms") {
      args.mip_ms = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--svg") {
      args.svg = next();
      svg_set = true;
    } else if (a == "--no-jct") {
      args.jct = false;
    } else if (a == "--no-lp") {
      args.lp = false;
    } else if (a == "--no-scale") {
      args.scale = false;
    } else {
      std::fprintf(
          stderr,
          "usage: telb_bench [--quick] [--seeds N] [--step-us N] [--lp-instances N] [--mip-ms N] "
          "[--svg PATH] [--no-jct] [--no-lp] [--no-scale]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  if (args.quick && !seeds_set) args.seeds = 1;
#ifdef LOOM_SOURCE_DIR
  if (!svg_set && !args.quick)
    args.svg = std::string(LOOM_SOURCE_DIR) + "/docs/img/telb-utilization.svg";
#endif
  loom::SetLogLevel(loom::LogLevel::kWarn);
  auto t0 = Clock::now();
  if (args.jct) RunJct(args);
  if (args.lp) RunLp(args);
  if (args.scale) RunScale(args);
  std::printf("total wall time %.1f s\n", Seconds(Clock::now() - t0));
  return 0;
}

}  // namespace
}  // namespace loom::testing

int main(int argc, char** argv) { return loom::testing::Main(argc, argv); }
