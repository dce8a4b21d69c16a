// adaptive_bench: the headline benchmark of issue 7. A program, not a test: it prints figures.
//
// The TELB benchmark's reference scenario (tests/closedloop/bench_scenario.h: 256 GPUs,
// rail-optimized, four tenants' jobs) in three variants — as is, with one leaf->spine link
// failing mid-run, and with one remote spine->leaf downlink degraded (half capacity, 0.1 %
// of bytes lost to errors) — under six forwarding modes (static ECMP, ECMP + QP entropy,
// switch DLB flowlet, switch DLB + ALB: the emulator's combined mode with an on-box ALB
// rebalancer, Loom TELB, Loom full), run by the real controller core and the emulator in
// virtual time (tests/closedloop/harness.h). Prints mean JCT per mode against the ideal
// bound, and for the failure the time from the failure to Loom's reaction.
//
// Run: build/tests/adaptive_bench [--quick] [--seeds N] [--step-us N] [--variant NAME]
//      [--mode ecmp|ecmp-qp|dlb|dlb-alb|spray|telb|full] [--per-job]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/log.h"
#include "controller/adaptive/alb.h"
#include "tests/closedloop/bench_scenario.h"
#include "tests/closedloop/harness.h"

namespace loom::testing {
namespace {

namespace v1 = loom::v1;
using bench::Mean;
using bench::Scenario;
using loom::sim::JobSpec;
using WallClock = std::chrono::steady_clock;

enum class Mode { kEcmp, kEcmpQp, kDlb, kDlbAlb, kTelb, kFull, kSpray };
constexpr Mode kModes[] = {Mode::kEcmp,  Mode::kEcmpQp, Mode::kDlb, Mode::kDlbAlb,
                           Mode::kSpray, Mode::kTelb,   Mode::kFull};

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kEcmp:
      return "static ECMP";
    case Mode::kEcmpQp:
      return "ECMP+QP entropy";
    case Mode::kDlb:
      return "switch DLB";
    case Mode::kDlbAlb:
      return "switch DLB + ALB";
    case Mode::kTelb:
      return "Loom TELB";
    case Mode::kFull:
      return "Loom full";
    case Mode::kSpray:
      return "switch spraying";
  }
  return "";
}

const char* ModeKey(Mode m) {
  static const char* const kKeys[] = {"ecmp", "ecmp-qp", "dlb", "dlb-alb", "telb", "full", "spray"};
  return kKeys[static_cast<int>(m)];
}

enum class Variant { kReference, kLinkFailure, kDegradedDownlink };
constexpr Variant kVariants[] = {Variant::kReference, Variant::kLinkFailure,
                                 Variant::kDegradedDownlink};

const char* VariantName(Variant v) {
  switch (v) {
    case Variant::kReference:
      return "reference";
    case Variant::kLinkFailure:
      return "spine link fails mid-run";
    case Variant::kDegradedDownlink:
      return "remote downlink degraded";
  }
  return "";
}

const char* VariantKey(Variant v) {
  static const char* const kKeys[] = {"reference", "failure", "degraded"};
  return kKeys[static_cast<int>(v)];
}

struct Args {
  bool quick = false;
  int seeds = 2;
  TimeNs step_ns = 5 * kNsPerUs;
  std::string only_variant, only_mode;  // empty = all
  bool per_job = false;
};

struct RunResult {
  std::vector<double> jct_ms;
  bool done = false;
  double sim_ms = 0, wall_s = 0;
  // Link failure: virtual time from the failure to Loom's re-placement event, and to the
  // last byte of the failed link's traffic (-1 = not applicable).
  double react_ms = -1;
};

std::string LinkId(const v1::Topology& t, const std::string& a, const std::string& b) {
  for (const auto& l : t.links()) {
    if ((l.a().device() == a && l.b().device() == b) ||
        (l.a().device() == b && l.b().device() == a)) {
      return l.id();
    }
  }
  return "";
}

// The leaf of a GPU id.
std::string LeafOf(const loom::topology::TopologyIndex& idx, const std::string& gpu) {
  const auto* g = idx.FindGpu(gpu);
  return g ? idx.NicLeaf(g->nic()) : "";
}

// On-box DLB + ALB of every leaf group: the group's 256-bucket table is the switch's
// shared flowset table (DLB writes each new flowlet's member into its bucket), rebalanced
// with Loom's own ALB algorithm from the switch's bucket counters (what a switch-native ALB
// does, at a 10 ms scan); a moved bucket's flows follow at once, flowlet gap or not.
class OnBoxDlbAlb {
 public:
  OnBoxDlbAlb(loom::sim::Fabric& f, const v1::Topology& t) : f_(f) {
    for (const auto& d : t.devices()) {
      if (d.role() == v1::DEVICE_ROLE_LEAF) leaves_.push_back(d.id());
    }
    params_.scan_interval_ns = 1 * kNsPerSec;  // validated minimum; the bench scans faster
    params_.trigger_scans = 1;
    params_.freeze_scans = 2;
    for (const auto& a : leaves_) {
      for (const auto& b : leaves_) {
        if (a == b) continue;
        (void)f_.SetGroupMode(a, b, loom::sim::ForwardingMode::kDlbAlb);
        (void)f_.InitAlbTable(a, b, 256);
      }
    }
  }
  void Scan(TimeNs dt_ns) {
    ++scan_;
    for (const auto& a : leaves_) {
      for (const auto& b : leaves_) {
        if (a == b) continue;
        std::vector<loom::sim::AlbBucketCounters> c;
        if (!f_.GetAlbCounters(a, b, &c).ok()) continue;
        auto& prev = bytes_[{a, b}];
        prev.resize(c.size(), 0);
        loom::adaptive::AlbInput in;
        in.group = a + "/" + b;
        in.scan = scan_;
        std::map<std::string, bool> members;
        for (size_t i = 0; i < c.size(); ++i) {
          in.buckets.push_back(c[i].member);
          in.bucket_bps.push_back(static_cast<double>(c[i].bytes - prev[i]) * 8e9 /
                                  static_cast<double>(dt_ns));
          prev[i] = c[i].bytes;
          members[c[i].member] = true;
        }
        for (const auto& m : f_.GroupMembers(a, b)) members[m] = true;
        for (const auto& [m, _] : members) in.members.push_back({m, 400e9, true});
        auto r = loom::adaptive::AlbScan(in, state_[{a, b}], params_);
        state_[{a, b}] = r.state;
        if (!r.moves.empty()) (void)f_.SetAlbTable(a, b, r.buckets);
      }
    }
  }

 private:
  loom::sim::Fabric& f_;
  std::vector<std::string> leaves_;
  loom::adaptive::AlbParams params_;
  int64_t scan_ = 0;
  std::map<std::pair<std::string, std::string>, std::vector<uint64_t>> bytes_;
  std::map<std::pair<std::string, std::string>, loom::adaptive::AlbGroupState> state_;
};

RunResult RunMode(const Scenario& s, Variant variant, Mode mode, uint64_t seed, TimeNs step_ns) {
  char tmpl[] = "/tmp/adaptive_bench.XXXXXX";
  std::string dir = mkdtemp(tmpl);
  RunResult res;
  auto wall0 = WallClock::now();
  {
    loom::topology::TopologyIndex idx(s.topology);
    LoopOptions o;
    o.topology = s.topology;
    o.fabric.seed = seed;
    o.fabric.step_ns = step_ns;
    o.loom_programs = mode == Mode::kTelb || mode == Mode::kFull;
    o.subscribe_nics = mode == Mode::kFull;
    o.db_path = dir + "/loom.db";
    auto& ad = o.controller.adaptive;
    if (mode != Mode::kFull) ad.glb = ad.alb = ad.dlb_tuning = ad.remediation = false;
    ad.dlb_interval_ns = 10 * kNsPerMs;
    ClosedLoop loop(o);
    auto& f = loop.fabric();
    if (mode == Mode::kEcmpQp) f.SetHashDestQp("*", true);
    if (mode == Mode::kDlb) f.SetForwardingMode("*", loom::sim::ForwardingMode::kDlbFlowlet);
    // Per-packet spraying on every switch, 1 QP: the strongest thing a user
    // can configure by hand. The emulator delivers sprayed packets out of
    // order at no cost to the NIC (issue 17 models what reordering costs).
    if (mode == Mode::kSpray) f.SetForwardingMode("*", loom::sim::ForwardingMode::kDlbPerPacket);
    std::unique_ptr<OnBoxDlbAlb> alb;
    if (mode == Mode::kDlbAlb) alb = std::make_unique<OnBoxDlbAlb>(f, s.topology);
    const char* only_job = getenv("ADAPTIVE_BENCH_JOB");
    for (JobSpec spec : s.jobs) {
      if (only_job && spec.id != only_job) continue;
      if (mode == Mode::kEcmpQp) spec.qps_per_connection = s.qp_entropy_qps;
      loop.AddJob(spec);
    }
    TimeNs start = s.jobs.front().start_ns;
    for (const auto& j : s.jobs) start = std::min(start, j.start_ns);
    // Faults. The failing link: the first job's first rank's leaf to spine0; the degraded
    // downlink: spine0 into the leaf of the first job's second rank (a remote hop for
    // every other leaf sending there).
    const auto& j0 = s.jobs.front();
    const std::string src_leaf = LeafOf(idx, j0.ranks[0]);
    const std::string dst_leaf = LeafOf(idx, j0.ranks[1]);
    std::string failed;
    TimeNs fail_at = start + 5 * kNsPerMs;
    if (variant == Variant::kLinkFailure) {
      failed = LinkId(s.topology, src_leaf, "spine0");
      loom::sim::FaultSpec fs;
      fs.at_ns = fail_at;
      fs.kind = loom::sim::FaultKind::kLinkDown;
      fs.target = failed;
      (void)f.ScheduleFault(fs);
    } else if (variant == Variant::kDegradedDownlink) {
      loom::sim::FaultSpec fs;
      fs.at_ns = 0;
      fs.kind = loom::sim::FaultKind::kDegradeLink;
      fs.target = LinkId(s.topology, "spine0", dst_leaf);
      fs.capacity_factor = 0.5;
      fs.error_rate = 1e-3;
      (void)f.ScheduleFault(fs);
    }
    const TimeNs limit = 5 * kNsPerSec;
    TimeNs last_alb = 0;
    while (!f.AllJobsDone() && f.now() < limit) {
      loop.RunUntil(f.now() + 1 * kNsPerMs);
      if (alb && f.now() - last_alb >= 10 * kNsPerMs) {
        alb->Scan(f.now() - last_alb);
        last_alb = f.now();
      }
    }
    res.done = f.AllJobsDone();
    for (int j = 0; j < f.job_count(); ++j) {
      auto st = f.GetJob(j);
      res.jct_ms.push_back(st.done ? static_cast<double>(st.end_ns - st.start_ns) / 1e6 : NAN);
    }
    res.sim_ms = static_cast<double>(f.now()) / 1e6;
    if (getenv("ADAPTIVE_BENCH_DEBUG") && o.loom_programs) {
      for (const auto& e : loop.Events()) {
        if (e.type() == v1::EVENT_TYPE_JOB_REGISTERED) continue;
        std::printf("    dbg %.3f ms %s %s: %s -> %s -> %s\n",
                    static_cast<double>(e.time().seconds() * kNsPerSec + e.time().nanos()) / 1e6,
                    v1::EventType_Name(e.type()).c_str(), e.subject().c_str(), e.cause().c_str(),
                    e.action().c_str(), e.result().c_str());
      }
    }
    if (getenv("ADAPTIVE_BENCH_DEBUG") && o.loom_programs) {
      for (const auto& spec : s.jobs) {
        auto job = loop.GetJob(spec.id);
        std::printf("    dbg job %s: %s\n", spec.id.c_str(),
                    job.status().assignment().reason().c_str());
      }
    }
    if (!failed.empty() && o.loom_programs) {
      // Event times are the controller clock: the epoch plus virtual time; the controller
      // started at virtual time 0.
      TimeNs epoch = -1;
      for (const auto& e : loop.Events()) {
        const TimeNs t = e.time().seconds() * kNsPerSec + e.time().nanos();
        if (e.type() == v1::EVENT_TYPE_CONTROLLER_STARTED && epoch < 0) epoch = t;
        if (e.type() != v1::EVENT_TYPE_LINK_OPER_CHANGED || e.subject() != failed) continue;
        res.react_ms = static_cast<double>(t - epoch - fail_at) / 1e6;
        break;
      }
    }
  }
  res.wall_s = std::chrono::duration<double>(WallClock::now() - wall0).count();
  std::filesystem::remove_all(dir);
  return res;
}

int Main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") {
      args.quick = true;
    } else if (a == "--seeds" && i + 1 < argc) {
      args.seeds = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--step-us" && i + 1 < argc) {
      args.step_ns = std::max(1, std::atoi(argv[++i])) * kNsPerUs;
    } else if (a == "--variant" && i + 1 < argc) {
      args.only_variant = argv[++i];
    } else if (a == "--mode" && i + 1 < argc) {
      args.only_mode = argv[++i];
    } else if (a == "--per-job") {
      args.per_job = true;
    } else if (a == "--help" || a == "-h") {
      std::printf(
          "usage: adaptive_bench [--quick] [--seeds N] [--step-us N] [--variant NAME] "
          "[--mode NAME] [--per-job]\n"
          "  --variant: reference | failure | degraded (default: all three)\n"
          "  --mode: ecmp | ecmp-qp | dlb | dlb-alb | spray | telb | full (default: all seven)\n"
          "  --per-job: print every job's JCT against its ideal bound\n");
      return 0;
    } else {
      std::fprintf(stderr, "adaptive_bench: unknown argument \"%s\" (see --help)\n", a.c_str());
      return 2;
    }
  }
  loom::SetLogLevel(loom::LogLevel::kWarn);
  Scenario s = bench::MakeScenario(args.quick);
  loom::topology::TopologyIndex index(s.topology);
  std::printf("== Adaptive benchmark (issue 7): %s, %d GPUs, %zu jobs, step %.0f us, seeds 1..%d\n",
              s.rail.name.c_str(), s.rail.hosts * s.rail.host.gpus_per_host, s.jobs.size(),
              static_cast<double>(args.step_ns) / 1e3, args.seeds);
  std::printf(
      "modes: static ECMP; ECMP+QP entropy (%d QPs/connection, dest QP hashed); switch DLB "
      "(flowlet); switch DLB + ALB (every leaf group in the combined mode: flowlet DLB writes "
      "its choices into the group's 256-bucket flowset table, rebalanced on-box every 10 ms "
      "with Loom's ALB algorithm, moved buckets' flows follow at once); Loom TELB (colored "
      "routes only); Loom full (TELB + GLB + ALB + DLB tuning + remediation, NIC telemetry "
      "subscribed)\n",
      s.qp_entropy_qps);
  std::vector<double> ideal;
  for (const auto& j : s.jobs) {
    double nic_bytes = 0;
    ideal.push_back(bench::IdealMs(j, index, 1, &nic_bytes));
  }
  const double ideal_mean = Mean(ideal);
  std::printf("ideal mean JCT %.2f ms (NIC-bound lower bound, see telb_bench)\n\n", ideal_mean);
  std::fflush(stdout);

  std::map<Variant, std::map<Mode, std::vector<double>>> means;  // per seed
  std::vector<double> react;
  std::vector<Variant> variants;
  std::vector<Mode> modes;
  for (Variant v : kVariants) {
    if (args.only_variant.empty() || args.only_variant == VariantKey(v)) variants.push_back(v);
  }
  for (Mode m : kModes) {
    if (args.only_mode.empty() || args.only_mode == ModeKey(m)) modes.push_back(m);
  }
  if (variants.empty() || modes.empty()) {
    std::fprintf(stderr, "adaptive_bench: no such variant or mode (see --help)\n");
    return 2;
  }
  for (Variant v : variants) {
    for (int seed = 1; seed <= args.seeds; ++seed) {
      for (Mode m : modes) {
        RunResult r = RunMode(s, v, m, static_cast<uint64_t>(seed), args.step_ns);
        const double mean = Mean(r.jct_ms);
        means[v][m].push_back(mean);
        if (m == Mode::kFull && r.react_ms >= 0) react.push_back(r.react_ms);
        std::printf(
            "  %-25s seed %d %-16s mean JCT %7.2f ms%s%s | %.1f ms simulated in %.1f s\n",
            VariantName(v), seed, ModeName(m), mean, r.done ? "" : " (NOT DONE)",
            r.react_ms >= 0 ? (" | reacted " + std::to_string(r.react_ms) + " ms").c_str() : "",
            r.sim_ms, r.wall_s);
        if (args.per_job) {
          for (size_t j = 0; j < r.jct_ms.size() && j < s.jobs.size(); ++j) {
            std::printf("    %-8s JCT %7.2f ms = %.2fx its ideal %.2f ms\n", s.jobs[j].id.c_str(),
                        r.jct_ms[j], r.jct_ms[j] / ideal[j], ideal[j]);
          }
        }
        std::fflush(stdout);
      }
    }
  }
  std::printf("\nMean JCT in ms (mean over seeds); x ideal; speed-up over static ECMP:\n");
  std::printf("%-26s", "scenario");
  for (Mode m : modes) std::printf(" %16s", ModeName(m));
  std::printf("\n");
  bool ideal_ok = true, ecmp_ok = true, dlb_ok = true, best_ok = true;
  for (Variant v : variants) {
    std::printf("%-26s", VariantName(v));
    for (Mode m : modes) std::printf(" %16.2f", Mean(means[v][m]));
    std::printf("\n%-26s", "  x ideal");
    for (Mode m : modes) std::printf(" %16.2f", Mean(means[v][m]) / ideal_mean);
    std::printf("\n%-26s", "  ECMP / mode");
    const double ecmp = Mean(means[v][Mode::kEcmp]);
    for (Mode m : modes) std::printf(" %16.2f", ecmp / Mean(means[v][m]));
    std::printf("\n");
    const double full = Mean(means[v][Mode::kFull]);
    ideal_ok &= full <= 1.10 * ideal_mean;
    ecmp_ok &= ecmp / full >= 1.3;
    dlb_ok &= full <= Mean(means[v][Mode::kDlb]);
    if (means[v].count(Mode::kSpray) && means[v].count(Mode::kFull)) {
      // The issue-16 rule: Loom within 2 % of the best thing a user can
      // configure by hand (ECMP, ECMP+QP, DLB, DLB+ALB, spraying), or ahead.
      double best = 0;
      const char* best_name = "";
      for (Mode m : {Mode::kEcmp, Mode::kEcmpQp, Mode::kDlb, Mode::kDlbAlb, Mode::kSpray}) {
        if (!means[v].count(m)) continue;
        const double x = Mean(means[v][m]);
        if (best == 0 || x < best) {
          best = x;
          best_name = ModeName(m);
        }
      }
      const bool ok = full <= 1.02 * best;
      best_ok &= ok;
      std::printf("%-26s Loom full / best alternative (%s) = %.3f: %s\n", "", best_name,
                  full / best, ok ? "within 2 %" : "MORE than 2 % slower");
    }
  }
  if (variants.size() == std::size(kVariants) && modes.size() == std::size(kModes)) {
    std::printf("\nLoom full <= 1.10x ideal in every scenario: %s\n", ideal_ok ? "met" : "NOT met");
    std::printf("Loom full >= 1.3x faster than static ECMP in every scenario: %s\n",
                ecmp_ok ? "met" : "NOT met");
    std::printf("Loom full never slower than switch DLB: %s\n", dlb_ok ? "met" : "NOT met");
    std::printf(
        "Loom full within 2 %% of the best hand-configured mode (spraying included) in "
        "every scenario: %s\n",
        best_ok ? "met" : "NOT met");
  } else {
    std::printf("\n(goals are judged on a run of every variant and mode)\n");
  }
  if (!react.empty()) {
    std::printf(
        "link failure -> Loom re-placed the traffic (LINK_OPER_CHANGED event, virtual time): "
        "mean %.1f ms, max %.1f ms = %.1f telemetry intervals of 10 ms (goal <= 2); the "
        "switch's backup color moves the packets off the dead link at once\n",
        Mean(react), *std::max_element(react.begin(), react.end()),
        *std::max_element(react.begin(), react.end()) / 10.0);
  }
  return 0;
}

}  // namespace
}  // namespace loom::testing

int main(int argc, char** argv) { return loom::testing::Main(argc, argv); }
