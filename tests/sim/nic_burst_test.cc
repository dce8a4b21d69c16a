// NIC transmit bursts (NicCounters::tx_bursts, tx_idle_ns, tx_max_spacing_ns): the
// definitions on hand-computable flows, exactness under fast-forward, and what a ring
// all-reduce with a compute gap produces.
#include <cstdio>
#include <string>
#include <vector>

#include "sim-fabric/fabric.h"
#include "tests/sim/sim_test_util.h"

namespace loom::sim {
namespace {

using testing::Clos;
using testing::Make;
using testing::Nic;

NicCounters Counters(const Fabric& f, const std::string& nic) {
  NicCounters c;
  EXPECT_TRUE(f.GetNicCounters(nic, &c).ok()) << nic;
  return c;
}

// Two flows from one NIC, one after the other, each at a fixed application rate:
//   flow 1: 1 MB at 10 Gb/s from t = 0: 1250 B per 1 us step, 800 steps, busy [0, 800 us);
//   flow 2: 1 MB at 20 Gb/s from t = 1000 us: busy [1000 us, 1400 us).
// So 2 bursts, 200 us idle between them (the idle time before the first burst and after
// the last one is not counted), and the latest burst's packet spacing is
// 4096 B x 8 / 20 Gb/s = 1638.4 ns. Same with and without fast-forward.
TEST(NicBursts, TwoFlowsGiveTwoBurstsAndTheGapBetweenThem) {
  for (bool ff : {false, true}) {
    SCOPED_TRACE(ff ? "fast-forward" : "stepping");
    auto topo = Clos(2, 2, 2, 100e9, 100e9);
    FabricOptions o;
    o.fast_forward = ff;
    auto f = Make(topo, o);
    NicCounters c = Counters(*f, Nic(0));
    EXPECT_EQ(c.tx_bursts, 0u);
    EXPECT_EQ(c.tx_max_spacing_ns, 0u);

    ASSERT_GE(f->AddFlow(Nic(0), Nic(2), 1e6, 3, 10e9), 0);
    f->RunUntil(500 * kNsPerUs);
    c = Counters(*f, Nic(0));
    EXPECT_EQ(c.tx_bursts, 1u);
    EXPECT_EQ(c.tx_idle_ns, 0u);
    EXPECT_EQ(c.tx_max_spacing_ns, 3277u);  // 4096 x 8 / 10 Gb/s = 3276.8 ns
    f->RunUntil(1000 * kNsPerUs);
    c = Counters(*f, Nic(0));
    EXPECT_EQ(c.tx_bursts, 1u);
    EXPECT_EQ(c.tx_idle_ns, 0u);  // idle since 800 us, but no new burst yet
    EXPECT_EQ(c.tx_max_spacing_ns, 3277u);

    ASSERT_GE(f->AddFlow(Nic(0), Nic(3), 1e6, 3, 20e9), 0);
    f->RunUntil(3000 * kNsPerUs);
    c = Counters(*f, Nic(0));
    EXPECT_EQ(c.tx_bursts, 2u);
    EXPECT_EQ(c.tx_idle_ns, static_cast<uint64_t>(200 * kNsPerUs));
    EXPECT_EQ(c.tx_max_spacing_ns, 1638u);
    EXPECT_EQ(c.tx_bytes, 2'000'000u);
    // The receivers never sent.
    EXPECT_EQ(Counters(*f, Nic(2)).tx_bursts, 0u);
  }
}

// A ring all-reduce over 8 NICs (2 leaves x 2 spines, 100G, no oversubscription) with
// compute_gap_ns = 500 us between iterations. Per the workload's definition
// (workload.h, Fabric::Impl::TransferProgress) iteration k+1 starts compute_gap_ns + one
// step after the last transfer of iteration k completes, and within an iteration a
// ring rank forwards what it received (fluid pipelining), so it sends without a pause.
// Each NIC therefore sends one burst per iteration, and its idle time between two
// bursts is the compute gap plus the step plus the time from its own last byte sent to
// the iteration's end (the last bytes' path latency; a few us).
struct RingRun {
  std::vector<NicCounters> nics;
  JobStatus job;
};

RingRun RunRing(bool fast_forward) {
  auto topo = Clos(2, 2, 4, 100e9, 100e9);
  FabricOptions o;
  o.fast_forward = fast_forward;
  auto f = Make(topo, o);
  JobSpec j;
  j.id = "ring";
  j.collective = Collective::kRingAllReduce;
  for (int i = 0; i < 8; ++i) j.ranks.push_back("host00" + std::to_string(i) + "-gpu0");
  j.message_bytes = 4e6;
  j.iterations = 6;
  j.compute_gap_ns = 500 * kNsPerUs;
  std::string err;
  EXPECT_GE(f->AddJob(j, &err), 0) << err;
  EXPECT_TRUE(f->RunUntilJobsDone(100 * kNsPerMs));
  RingRun r;
  for (int i = 0; i < 8; ++i) r.nics.push_back(Counters(*f, Nic(i)));
  r.job = f->GetJob(0);
  return r;
}

TEST(NicBursts, RingAllReduceGapIsTheComputeGap) {
  const RingRun step = RunRing(false);
  const RingRun ff = RunRing(true);
  constexpr double kGap = 500e3;  // ns
  for (int i = 0; i < 8; ++i) {
    SCOPED_TRACE(Nic(i));
    const NicCounters& c = step.nics[i];
    // One burst per iteration.
    EXPECT_EQ(c.tx_bursts, 6u);
    // Mean idle gap between bursts: the compute gap plus a few us (see above).
    const double mean_gap =
        static_cast<double>(c.tx_idle_ns) / static_cast<double>(c.tx_bursts - 1);
    std::printf("%s: %llu bursts, mean gap %.1f us, max spacing %llu ns\n", Nic(i).c_str(),
                static_cast<unsigned long long>(c.tx_bursts), mean_gap / 1e3,
                static_cast<unsigned long long>(c.tx_max_spacing_ns));
    EXPECT_GE(mean_gap, kGap);
    EXPECT_LE(mean_gap, 1.05 * kGap);
    // Nothing is oversubscribed, so every ring flow runs at line rate all the time (it
    // forwards at the rate it receives, which is line rate): a 4096-byte packet every
    // 327.68 ns.
    EXPECT_EQ(c.tx_max_spacing_ns, 328u);
    // Fast-forward (busy and idle jumps) gives the same counters.
    EXPECT_EQ(ff.nics[i].tx_bursts, c.tx_bursts);
    EXPECT_EQ(ff.nics[i].tx_idle_ns, c.tx_idle_ns);
    EXPECT_EQ(ff.nics[i].tx_max_spacing_ns, c.tx_max_spacing_ns);
  }
}

}  // namespace
}  // namespace loom::sim
