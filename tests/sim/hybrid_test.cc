// The hybrid model: quiescent fast-forward must give the results of plain stepping.
//
// Expectation: a jump only happens where every step would repeat the previous one
// (stationary pipeline, constant rates, nothing marked, paused or dropped), and it adds
// n x that step to every counter, so job completion times and counters agree with pure
// stepping (here within 1 %; the uncongested ring is in fact exact). Idle stretches
// (compute gaps) are skipped without running their steps.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "sim-fabric/fabric.h"
#include "tests/sim/sim_test_util.h"

namespace loom::sim {
namespace {

using testing::Clos;
using testing::LinkBetween;
using testing::Make;
using testing::Nic;

struct RunResult {
  std::vector<JobStatus> jobs;
  std::map<std::string, double> counters;  // "dev:ifc/what" -> value
  FastForwardStats ff;
  uint64_t ecn_marked = 0, cnps = 0;
  TimeNs steps_executed = 0;
};

// Ring all-reduce over 8 NICs on 2 leaves x 2 spines (100G everywhere): every ring hop
// has its own egress, so nothing is oversubscribed. With `congest`, link leaf1-host005
// runs at 30 % of its speed from 1 ms to 3 ms: its queue builds, ECN marks, DCQCN cuts
// the ring's senders, and after the restore they recover (episodes of congestion
// between quiescent stretches).
RunResult RunRing(bool fast_forward, bool congest) {
  auto topo = Clos(2, 2, 4, 100e9, 100e9);
  FabricOptions o;
  o.seed = 7;
  o.fast_forward = fast_forward;
  o.max_jump_ns = 500 * kNsPerUs;
  auto f = Make(topo, o);
  JobSpec j;
  j.id = "ring";
  j.collective = Collective::kRingAllReduce;
  for (int i = 0; i < 8; ++i) j.ranks.push_back("host00" + std::to_string(i) + "-gpu0");
  j.message_bytes = 64e6;
  j.iterations = 3;
  j.compute_gap_ns = 2 * kNsPerMs;
  std::string err;
  EXPECT_GE(f->AddJob(j, &err), 0) << err;
  if (congest) {
    const std::string link = LinkBetween(topo, "leaf1", Nic(5));
    EXPECT_FALSE(link.empty());
    FaultSpec down;
    down.kind = FaultKind::kDegradeLink;
    down.target = link;
    down.at_ns = 1 * kNsPerMs;
    down.capacity_factor = 0.3;
    EXPECT_TRUE(f->ScheduleFault(down).ok());
    FaultSpec up = down;
    up.kind = FaultKind::kRestoreLink;
    up.at_ns = 3 * kNsPerMs;
    EXPECT_TRUE(f->ScheduleFault(up).ok());
  }
  EXPECT_TRUE(f->RunUntilJobsDone(200 * kNsPerMs));
  RunResult r;
  for (int i = 0; i < f->job_count(); ++i) r.jobs.push_back(f->GetJob(i));
  for (const auto& d : f->Devices()) {
    for (const auto& ifc : f->Interfaces(d)) {
      InterfaceCounters c;
      EXPECT_TRUE(f->GetInterfaceCounters(d, ifc, &c).ok());
      r.counters[d + ":" + ifc + "/out-octets"] = static_cast<double>(c.out_octets);
      r.counters[d + ":" + ifc + "/in-octets"] = static_cast<double>(c.in_octets);
      QueueCounters q;
      EXPECT_TRUE(f->GetQueueCounters(d, ifc, 3, &q).ok());
      r.counters[d + ":" + ifc + "/q3-transmit-octets"] = static_cast<double>(q.transmit_octets);
      r.ecn_marked += q.ecn_marked_octets;
    }
  }
  for (int h = 0; h < 8; ++h) {
    NicCounters n;
    EXPECT_TRUE(f->GetNicCounters(Nic(h), &n).ok());
    r.counters[Nic(h) + "/tx"] = static_cast<double>(n.tx_bytes);
    r.counters[Nic(h) + "/rx"] = static_cast<double>(n.rx_bytes);
    // Transmit bursts: busy jumps continue a burst, idle jumps are idle time.
    r.counters[Nic(h) + "/tx_bursts"] = static_cast<double>(n.tx_bursts);
    r.counters[Nic(h) + "/tx_idle_ns"] = static_cast<double>(n.tx_idle_ns);
    r.counters[Nic(h) + "/tx_max_spacing_ns"] = static_cast<double>(n.tx_max_spacing_ns);
    r.cnps += n.np_cnp_sent;
  }
  r.ff = f->fast_forward_stats();
  r.steps_executed = f->now() / f->step_ns() - static_cast<TimeNs>(r.ff.skipped_steps);
  return r;
}

void ExpectAgree(const RunResult& step, const RunResult& ff, double tol) {
  ASSERT_EQ(step.jobs.size(), ff.jobs.size());
  for (size_t i = 0; i < step.jobs.size(); ++i) {
    const JobStatus &a = step.jobs[i], &b = ff.jobs[i];
    ASSERT_TRUE(a.done && b.done);
    const double jct_a = static_cast<double>(a.end_ns - a.start_ns);
    const double jct_b = static_cast<double>(b.end_ns - b.start_ns);
    EXPECT_NEAR(jct_b, jct_a, tol * jct_a) << a.id;
    ASSERT_EQ(a.collective_ns.size(), b.collective_ns.size());
    for (size_t k = 0; k < a.collective_ns.size(); ++k) {
      const double ca = static_cast<double>(a.collective_ns[k]);
      EXPECT_NEAR(static_cast<double>(b.collective_ns[k]), ca, tol * ca) << "iteration " << k;
    }
  }
  double max_rel = 0;
  for (const auto& [key, va] : step.counters) {
    const double vb = ff.counters.at(key);
    if (va == 0 && vb == 0) continue;
    const double rel = std::abs(va - vb) / std::max(va, vb);
    max_rel = std::max(max_rel, rel);
    EXPECT_LE(rel, tol) << key << ": stepping " << va << " vs fast-forward " << vb;
  }
  std::printf("max relative counter difference %.3g, steps executed %lld vs %lld\n", max_rel,
              static_cast<long long>(step.steps_executed),
              static_cast<long long>(ff.steps_executed));
}

TEST(Hybrid, UncongestedRingMatchesStepping) {
  const RunResult step = RunRing(false, false), ff = RunRing(true, false);
  EXPECT_EQ(step.ff.jumps + step.ff.idle_jumps, 0u);
  EXPECT_GT(ff.ff.jumps, 0u);
  EXPECT_GT(ff.ff.idle_jumps, 0u);  // the compute gaps
  // Most steps are skipped.
  EXPECT_LT(ff.steps_executed * 5, step.steps_executed);
  EXPECT_EQ(step.ecn_marked, 0u);
  ExpectAgree(step, ff, 0.01);
}

TEST(Hybrid, RingWithCongestionEpisodesMatchesStepping) {
  const RunResult step = RunRing(false, true), ff = RunRing(true, true);
  // The episode happened in both runs: marks and CNPs.
  EXPECT_GT(step.ecn_marked, 0u);
  EXPECT_GT(ff.ecn_marked, 0u);
  EXPECT_GT(step.cnps, 0u);
  EXPECT_GT(ff.cnps, 0u);
  EXPECT_GT(ff.ff.jumps, 0u);
  EXPECT_LT(ff.steps_executed, step.steps_executed);
  ExpectAgree(step, ff, 0.01);
  EXPECT_NEAR(static_cast<double>(ff.ecn_marked), static_cast<double>(step.ecn_marked),
              0.05 * static_cast<double>(step.ecn_marked));
}

// Every forwarding mode at once: DLB flowlets everywhere, per-packet spraying of class 4
// at leaf1, an ALB table at leaf0, 2 QPs per ring connection, a sprayed permutation job,
// and a short incast (standing queue, ECN, DCQCN) overlapping the ring's second
// iteration. Stepping and fast-forward agree within 1 %. With `dlb_alb` the leaf0 -> leaf1
// group runs DLB + ALB on its table instead of ALB alone.
RunResult RunMixed(bool fast_forward, bool dlb_alb = false) {
  auto topo = Clos(2, 2, 4, 100e9, 100e9);
  FabricOptions o;
  o.seed = 11;
  o.fast_forward = fast_forward;
  auto f = Make(topo, o);
  EXPECT_TRUE(f->SetForwardingMode("*", ForwardingMode::kDlbFlowlet).ok());
  EXPECT_TRUE(f->SetSprayPriorities("leaf1", 1u << 4).ok());
  if (dlb_alb) {
    EXPECT_TRUE(f->SetGroupMode("leaf0", "leaf1", ForwardingMode::kDlbAlb).ok());
  }
  EXPECT_TRUE(f->InitAlbTable("leaf0", "leaf1", 16).ok());
  std::string err;
  JobSpec ring;
  ring.id = "ring";
  ring.collective = Collective::kRingAllReduce;
  for (int i = 0; i < 8; ++i) ring.ranks.push_back("host00" + std::to_string(i) + "-gpu0");
  ring.message_bytes = 32e6;
  ring.iterations = 3;
  ring.qps_per_connection = 2;
  ring.compute_gap_ns = 1 * kNsPerMs;
  EXPECT_GE(f->AddJob(ring, &err), 0) << err;
  JobSpec perm = ring;
  perm.id = "perm";
  perm.collective = Collective::kPermutation;
  perm.priority = 4;
  perm.qps_per_connection = 1;
  perm.message_bytes = 4e6;
  perm.iterations = 4;
  perm.max_rate_bps = 20e9;
  EXPECT_GE(f->AddJob(perm, &err), 0) << err;
  JobSpec inc;
  inc.id = "incast";
  inc.collective = Collective::kIncast;
  inc.ranks = {"host006-gpu0", "host000-gpu0", "host001-gpu0", "host002-gpu0"};
  inc.message_bytes = 2e6;
  inc.start_ns = 8 * kNsPerMs;
  EXPECT_GE(f->AddJob(inc, &err), 0) << err;
  EXPECT_TRUE(f->RunUntilJobsDone(300 * kNsPerMs));
  RunResult r;
  for (int i = 0; i < f->job_count(); ++i) r.jobs.push_back(f->GetJob(i));
  for (const auto& d : f->Devices()) {
    for (const auto& ifc : f->Interfaces(d)) {
      InterfaceCounters c;
      EXPECT_TRUE(f->GetInterfaceCounters(d, ifc, &c).ok());
      r.counters[d + ":" + ifc + "/out-octets"] = static_cast<double>(c.out_octets);
      for (int q : {3, 4}) {
        QueueCounters qc;
        EXPECT_TRUE(f->GetQueueCounters(d, ifc, q, &qc).ok());
        r.counters[d + ":" + ifc + "/q" + std::to_string(q)] =
            static_cast<double>(qc.transmit_octets);
        r.ecn_marked += qc.ecn_marked_octets;
      }
    }
  }
  std::vector<AlbBucketCounters> alb;
  EXPECT_TRUE(f->GetAlbCounters("leaf0", "leaf1", &alb).ok());
  for (size_t b = 0; b < alb.size(); ++b) {
    r.counters["alb" + std::to_string(b)] = static_cast<double>(alb[b].bytes);
  }
  r.ff = f->fast_forward_stats();
  r.steps_executed = f->now() / f->step_ns() - static_cast<TimeNs>(r.ff.skipped_steps);
  return r;
}

TEST(Hybrid, MixedForwardingModesMatchStepping) {
  const RunResult step = RunMixed(false), ff = RunMixed(true);
  EXPECT_GT(step.ecn_marked, 0u);
  EXPECT_GT(ff.ff.jumps + ff.ff.idle_jumps, 0u);
  EXPECT_LT(ff.steps_executed, step.steps_executed);
  ExpectAgree(step, ff, 0.01);
}

// The same with DLB + ALB on leaf0's group: flowlet choices written into the bucket table,
// bucket counters and bucket activity carried over jumps.
TEST(Hybrid, DlbAlbGroupMatchesStepping) {
  const RunResult step = RunMixed(false, true), ff = RunMixed(true, true);
  EXPECT_GT(ff.ff.jumps + ff.ff.idle_jumps, 0u);
  EXPECT_LT(ff.steps_executed, step.steps_executed);
  double alb = 0;
  for (const auto& [key, v] : step.counters) {
    if (key.rfind("alb", 0) == 0) alb += v;
  }
  EXPECT_GT(alb, 0);
  ExpectAgree(step, ff, 0.01);
}

// A compute gap between two iterations: nothing is in flight, so the whole gap is one
// idle jump; no flow-hop update and (almost) no step is executed during it.
TEST(Hybrid, IdleComputeGapIsSkipped) {
  auto topo = Clos(2, 2, 4, 100e9, 100e9);
  FabricOptions o;
  auto f = Make(topo, o);
  JobSpec j;
  j.id = "ring";
  j.collective = Collective::kRingAllReduce;
  for (int i = 0; i < 8; ++i) j.ranks.push_back("host00" + std::to_string(i) + "-gpu0");
  j.message_bytes = 8e6;
  j.iterations = 2;
  j.compute_gap_ns = 20 * kNsPerMs;
  std::string err;
  ASSERT_GE(f->AddJob(j, &err), 0) << err;
  while (f->GetJob(0).iterations_done < 1 && f->now() < 50 * kNsPerMs) f->Step();
  ASSERT_EQ(f->GetJob(0).iterations_done, 1);
  f->Step();  // the QPs notice they are done
  const TimeNs t1 = f->now();
  const uint64_t updates = f->flow_hop_updates();
  const FastForwardStats before = f->fast_forward_stats();
  f->RunUntil(t1 + 15 * kNsPerMs);
  EXPECT_EQ(f->now(), t1 + 15 * kNsPerMs);
  EXPECT_EQ(f->flow_hop_updates(), updates);
  const FastForwardStats& after = f->fast_forward_stats();
  EXPECT_EQ(after.idle_jumps, before.idle_jumps + 1);
  EXPECT_EQ(after.skipped_steps - before.skipped_steps,
            static_cast<uint64_t>(15 * kNsPerMs / f->step_ns()));
  // The next iteration still starts on time and the job completes.
  ASSERT_TRUE(f->RunUntilJobsDone(100 * kNsPerMs));
  const JobStatus st = f->GetJob(0);
  ASSERT_EQ(st.collective_ns.size(), 2u);
  EXPECT_NEAR(static_cast<double>(st.collective_ns[1]), static_cast<double>(st.collective_ns[0]),
              0.01 * static_cast<double>(st.collective_ns[0]));
  EXPECT_GT(f->flow_hop_updates(), updates);
}

// Advance never passes its limit (jumps land on the step grid) and copes with a limit at
// the end of time on an idle fabric.
TEST(Hybrid, AdvanceStopsAtItsLimit) {
  auto topo = Clos(2, 2, 4, 100e9, 100e9);
  FabricOptions o;
  o.step_ns = 3 * kNsPerUs;
  auto f = Make(topo, o);
  f->AddFlow(Nic(0), Nic(5), 50e6);
  const TimeNs limit = 10 * kNsPerMs + 1;
  while (f->now() < limit) f->Advance(limit);
  EXPECT_EQ(f->now(), (limit + o.step_ns - 1) / o.step_ns * o.step_ns);
  EXPECT_GT(f->fast_forward_stats().jumps, 0u);
  const TimeNs before = f->now();
  f->Advance(std::numeric_limits<TimeNs>::max());  // idle: one jump, no overflow
  EXPECT_GT(f->now(), before);
  EXPECT_EQ(f->now() % o.step_ns, 0);
}

// Config writes between runs end a quiescent stretch: a degrade written while the ring
// runs quiescently takes effect at the next step, not after a stale jump.
TEST(Hybrid, ConfigWriteStopsTheJump) {
  auto topo = Clos(2, 2, 4, 100e9, 100e9);
  FabricOptions o;
  auto f = Make(topo, o);
  const int qp = f->AddFlow(Nic(0), Nic(5), 0);
  f->RunUntil(2 * kNsPerMs);
  EXPECT_GT(f->fast_forward_stats().jumps, 0u);
  EXPECT_NEAR(f->GetQp(qp).send_bps, 100e9, 1e6);
  ASSERT_TRUE(f->DegradeLink(LinkBetween(topo, "leaf1", Nic(5)), 0.5, 0).ok());
  const uint64_t jumps = f->fast_forward_stats().jumps;
  f->RunUntil(f->now() + 100 * kNsPerUs);
  EXPECT_EQ(f->fast_forward_stats().jumps, jumps);  // congestion now: stepping
  QueueCounters q;
  const std::string ifc = testing::IfaceTo(topo, "leaf1", Nic(5));
  ASSERT_TRUE(f->GetQueueCounters("leaf1", ifc, 3, &q).ok());
  EXPECT_GT(q.watermark_bytes, 0u);
}

}  // namespace
}  // namespace loom::sim
