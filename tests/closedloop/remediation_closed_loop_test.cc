// Remediation closed loop (issue 7): the real controller core with its
// adaptive engine programs the emulator through the in-process driver and
// watches it through the in-process gNMI adapter, in shared virtual time,
// while the emulator fails, flaps and storms. Asserts what the fabric does
// (interface counters, QP paths, job completion) and what Loom says it did
// (events with cause -> action -> result, job assignments, desired state).
#include <google/protobuf/util/time_util.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/closedloop/harness.h"
#include "tests/unit/test_util.h"

namespace loom::testing {
namespace {

namespace v1 = loom::v1;
using google::protobuf::util::TimeUtil;
using loom::sim::Collective;
using loom::sim::JobSpec;

// The harness's telemetry interval (LoopOptions::telemetry_interval_ns),
// stated explicitly so the "within two intervals" bounds do not drift.
constexpr TimeNs kInterval = 10 * kNsPerMs;
// VirtualClock's default wall epoch: event times are epoch + virtual time.
constexpr TimeNs kWallEpoch = 1'700'000'000 * kNsPerSec;

// Fabric: TwoLeavesFourSpines() (harness.h), non-blocking: four 400G flows
// leaf0 -> leaf1 fit exactly when each takes its own spine.

// A ring all-reduce whose every hop crosses the fabric (ranks alternate
// between the leaves): each NIC sends one flow and receives one, four flows
// leaf0 -> leaf1 and four leaf1 -> leaf0. TELB pins each destination NIC to
// a spine; the optimum uses every spine link once in each direction.
const std::vector<std::string> kInterleavedRing = {"host000-gpu0", "host002-gpu0", "host000-gpu1",
                                                   "host002-gpu1", "host001-gpu0", "host003-gpu0",
                                                   "host001-gpu1", "host003-gpu1"};

JobSpec Ring(const std::string& id, double bytes, int iterations) {
  JobSpec s;
  s.id = id;
  s.tenant = "acme";
  s.collective = Collective::kRingAllReduce;
  s.ranks = kInterleavedRing;
  s.message_bytes = bytes;
  s.iterations = iterations;
  s.start_ns = 1 * kNsPerMs;
  return s;
}

// ranks[2i] -> ranks[2i+1], `bytes` each (0 = unbounded).
JobSpec Pairs(const std::string& id, const std::string& tenant,
              const std::vector<std::pair<std::string, std::string>>& pairs, double bytes) {
  JobSpec s;
  s.id = id;
  s.tenant = tenant;
  s.collective = Collective::kPointToPoint;
  for (const auto& [a, b] : pairs) {
    s.ranks.push_back(a);
    s.ranks.push_back(b);
  }
  s.message_bytes = bytes;
  s.start_ns = 1 * kNsPerMs;
  return s;
}

LoopOptions Options(const TempDir& dir, const std::string& name, uint64_t seed) {
  LoopOptions o;
  o.topology = TwoLeavesFourSpines();
  o.fabric.seed = seed;
  o.telemetry_interval_ns = kInterval;
  o.db_path = dir.File(name + ".db");
  return o;
}

struct LinkEnds {
  std::string id;
  std::string a_dev, a_ifc, b_dev, b_ifc;
};

LinkEnds FindLink(const v1::Topology& t, const std::string& a, const std::string& b) {
  for (const auto& l : t.links()) {
    if (l.a().device() == a && l.b().device() == b) {
      return {l.id(), a, l.a().interface(), b, l.b().interface()};
    }
    if (l.a().device() == b && l.b().device() == a) {
      return {l.id(), a, l.b().interface(), b, l.a().interface()};
    }
  }
  return {};
}

bool IsSpine(const std::string& device) { return device.rfind("spine", 0) == 0; }

std::string HopDevice(const std::string& hop) { return hop.substr(0, hop.find(':')); }

// Spines one QP's path crosses (its egress interfaces name the devices).
std::set<std::string> SpinesOfQp(const loom::sim::QpInfo& qp) {
  std::set<std::string> out;
  for (const auto& hop : qp.path) {
    if (IsSpine(HopDevice(hop))) out.insert(HopDevice(hop));
  }
  return out;
}

// Spines the QPs of `job` cross.
std::set<std::string> SpinesOf(const loom::sim::Fabric& f, const std::string& job) {
  std::set<std::string> out;
  for (const auto& qp : f.GetQps()) {
    if (qp.job != job) continue;
    for (const auto& s : SpinesOfQp(qp)) out.insert(s);
  }
  return out;
}

// QPs of `job` whose path leaves through "device:interface" `hop`.
int QpsThrough(const loom::sim::Fabric& f, const std::string& job, const std::string& hop) {
  int n = 0;
  for (const auto& qp : f.GetQps()) {
    if (qp.job == job && std::count(qp.path.begin(), qp.path.end(), hop) > 0) ++n;
  }
  return n;
}

uint64_t OutOctets(const loom::sim::Fabric& f, const std::string& dev, const std::string& ifc) {
  loom::sim::InterfaceCounters c;
  EXPECT_TRUE(f.GetInterfaceCounters(dev, ifc, &c).ok()) << dev << ":" << ifc;
  return c.out_octets;
}

// Octets the link carried so far, both directions.
uint64_t LinkOctets(const loom::sim::Fabric& f, const LinkEnds& l) {
  return OutOctets(f, l.a_dev, l.a_ifc) + OutOctets(f, l.b_dev, l.b_ifc);
}

TimeNs EventNs(const v1::Event& e) {
  return TimeUtil::TimestampToNanoseconds(e.time()) - kWallEpoch;
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Events of `type` about `subject` whose cause, action or result mentions
// `text`, at or after virtual time `from`.
std::vector<v1::Event> Find(const std::vector<v1::Event>& events, v1::EventType type,
                            const std::string& subject, const std::string& text, TimeNs from = 0) {
  std::vector<v1::Event> out;
  for (const auto& e : events) {
    if (e.type() != type || e.subject() != subject || EventNs(e) < from) continue;
    if (!text.empty() && !Contains(e.cause(), text) && !Contains(e.action(), text) &&
        !Contains(e.result(), text)) {
      continue;
    }
    out.push_back(e);
  }
  return out;
}

// "N job(s) re-placed" -> N (-1 when the result does not say).
int ReplacedCount(const v1::Event& e) {
  int n = -1;
  if (std::sscanf(e.result().c_str(), "%d job(s) re-placed", &n) != 1) return -1;
  return n;
}

double JctMs(const loom::sim::JobStatus& st) {
  return static_cast<double>(st.end_ns - st.start_ns) / 1e6;
}

// Runs until emulator job `index` is done (or `limit`); true when done.
bool RunUntilJobDone(ClosedLoop& loop, int index, TimeNs limit) {
  while (!loop.fabric().GetJob(index).done && loop.fabric().now() < limit) {
    loop.RunUntil(std::min(limit, loop.fabric().now() + kNsPerMs));
  }
  return loop.fabric().GetJob(index).done;
}

// Spines the job's routes may use: primaries and backups.
std::set<std::string> RouteSpines(const v1::Job& job) {
  std::set<std::string> out;
  for (const auto& r : job.status().assignment().routes()) {
    if (!r.via().empty()) out.insert(r.via());
    if (!r.backup_via().empty()) out.insert(r.backup_via());
  }
  return out;
}

bool AssignmentUses(const v1::Job& job, const std::string& spine) {
  const auto& a = job.status().assignment();
  if (std::count(a.primary_spines().begin(), a.primary_spines().end(), spine) > 0) return true;
  for (const auto& r : a.routes()) {
    if (r.via() == spine) return true;
  }
  return false;
}

// Every QP of `job` crosses the spine its destination's route names (the
// fabric forwards on the primary color Loom assigned).
void ExpectQpsFollowRoutes(const loom::sim::Fabric& f, const v1::Job& job) {
  std::map<std::string, std::string> via;
  for (const auto& r : job.status().assignment().routes()) via[r.destination()] = r.via();
  int checked = 0;
  for (const auto& qp : f.GetQps()) {
    if (qp.job != job.job_id()) continue;
    auto it = via.find(qp.dst_nic);
    ASSERT_NE(it, via.end()) << "no route for QP " << qp.id << " to " << qp.dst_nic;
    EXPECT_EQ(SpinesOfQp(qp), std::set<std::string>{it->second})
        << "QP " << qp.id << " " << qp.src_nic << " -> " << qp.dst_nic;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

std::string Join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ",") + x;
  return out;
}

// ------------------------------------------------------------ link failure

TEST(RemediationClosedLoopTest, LinkFailureTrafficLeavesWithinTwoIntervalsAndRecoveryRestores) {
  const auto topo = TwoLeavesFourSpines();
  constexpr double kBytes = 2e9;  // per rank: about 70 ms at 400G
  constexpr uint64_t kSeed = 11;

  // The same run without the failure.
  double base_ms = 0;
  {
    TempDir dir;
    ClosedLoop loop(Options(dir, "base", kSeed));
    loop.AddJob(Ring("ring", kBytes, 1));
    ASSERT_TRUE(loop.RunUntilJobsDone(500 * kNsPerMs));
    base_ms = JctMs(loop.fabric().GetJob(0));
  }

  TempDir dir;
  ClosedLoop loop(Options(dir, "fail", kSeed));
  loop.AddJob(Ring("ring", kBytes, 1));
  const TimeNs t_fail = 10 * kNsPerMs;
  loop.RunUntil(t_fail - kNsPerMs);
  auto job = loop.GetJob("ring");
  ASSERT_EQ(job.status().state(), v1::JOB_STATE_ASSIGNED);
  // Fail leaf0's link to a spine the job's routes use (both directions carry
  // its traffic: it has flows each way).
  const std::string spine = job.status().assignment().routes(0).via();
  ASSERT_TRUE(IsSpine(spine)) << spine;
  const LinkEnds link = FindLink(topo, "leaf0", spine);
  ASSERT_FALSE(link.id.empty());
  const uint64_t a0 = OutOctets(loop.fabric(), link.a_dev, link.a_ifc);
  const uint64_t b0 = OutOctets(loop.fabric(), link.b_dev, link.b_ifc);
  loop.RunUntil(t_fail);
  ASSERT_GT(OutOctets(loop.fabric(), link.a_dev, link.a_ifc), a0) << "no traffic leaf0 -> spine";
  ASSERT_GT(OutOctets(loop.fabric(), link.b_dev, link.b_ifc), b0) << "no traffic spine -> leaf0";
  const size_t events_before = loop.Events().size();

  ASSERT_TRUE(loop.fabric().SetLinkUp(link.id, false).ok());
  // Sample both ends every 100 us for three intervals: when did the link
  // last carry a byte?
  TimeNs last_growth = t_fail;
  uint64_t octets = LinkOctets(loop.fabric(), link);
  for (TimeNs t = t_fail + 100 * kNsPerUs; t <= t_fail + 3 * kInterval; t += 100 * kNsPerUs) {
    loop.RunUntil(t);
    const uint64_t now = LinkOctets(loop.fabric(), link);
    if (now != octets) last_growth = t;
    octets = now;
  }
  const double off_intervals =
      static_cast<double>(last_growth - t_fail) / static_cast<double>(kInterval);
  EXPECT_LE(last_growth - t_fail, 2 * kInterval)
      << "the failed link still carried traffic " << off_intervals << " intervals later";

  // Loom saw it: LINK_OPER_CHANGED DOWN with cause -> action -> result, and
  // re-placed the job within two intervals.
  auto events = loop.Events(events_before + 1);
  auto down = Find(events, v1::EVENT_TYPE_LINK_OPER_CHANGED, link.id, "DOWN");
  ASSERT_EQ(down.size(), 1u);
  EXPECT_EQ(down[0].severity(), v1::SEVERITY_CRITICAL);
  EXPECT_TRUE(Contains(down[0].action(), "out of placement")) << down[0].ShortDebugString();
  EXPECT_GE(ReplacedCount(down[0]), 1) << down[0].ShortDebugString();
  const TimeNs seen_ns = EventNs(down[0]) - t_fail;
  EXPECT_LE(seen_ns, 2 * kInterval);
  auto moved = Find(events, v1::EVENT_TYPE_JOB_UPDATED, "ring", "");
  ASSERT_FALSE(moved.empty()) << "the job was not re-placed";
  EXPECT_LE(EventNs(moved[0]) - t_fail, 2 * kInterval);
  job = loop.GetJob("ring");
  EXPECT_FALSE(AssignmentUses(job, spine)) << job.status().assignment().ShortDebugString();
  EXPECT_FALSE(RouteSpines(job).count(spine)) << "a backup still crosses the failed link";
  EXPECT_EQ(QpsThrough(loop.fabric(), "ring", link.a_dev + ":" + link.a_ifc), 0);
  EXPECT_EQ(QpsThrough(loop.fabric(), "ring", link.b_dev + ":" + link.b_ifc), 0);
  ExpectQpsFollowRoutes(loop.fabric(), job);
  // Still moving: bytes delivered over the next interval.
  double delivered = 0;
  for (const auto& qp : loop.fabric().GetQps()) delivered += qp.delivered_bytes;
  loop.RunUntil(loop.fabric().now() + kInterval);
  double delivered_later = 0;
  for (const auto& qp : loop.fabric().GetQps()) delivered_later += qp.delivered_bytes;
  EXPECT_GT(delivered_later, delivered) << "the job stalled after the failure";

  // Recovery: UP event, the link returns to placement (the optimum needs
  // every spine) and traffic follows the primary color again.
  const TimeNs t_up = loop.fabric().now();
  ASSERT_FALSE(loop.fabric().GetJob(0).done) << "job too short for the recovery check";
  const size_t events_mid = loop.Events().size();
  ASSERT_TRUE(loop.fabric().SetLinkUp(link.id, true).ok());
  loop.RunUntil(t_up + 2 * kInterval);
  events = loop.Events(events_mid + 1);
  auto up = Find(events, v1::EVENT_TYPE_LINK_OPER_CHANGED, link.id, "UP");
  ASSERT_EQ(up.size(), 1u);
  EXPECT_LE(EventNs(up[0]) - t_up, 2 * kInterval);
  EXPECT_TRUE(Contains(up[0].action(), "returned the link to placement"))
      << up[0].ShortDebugString();
  EXPECT_GE(ReplacedCount(up[0]), 1) << up[0].ShortDebugString();
  job = loop.GetJob("ring");
  EXPECT_TRUE(AssignmentUses(job, spine)) << job.status().assignment().ShortDebugString();
  std::set<std::string> primaries(job.status().assignment().primary_spines().begin(),
                                  job.status().assignment().primary_spines().end());
  EXPECT_EQ(primaries.size(), 4u);
  EXPECT_EQ(SpinesOf(loop.fabric(), "ring"), primaries);
  ExpectQpsFollowRoutes(loop.fabric(), job);
  const uint64_t back = LinkOctets(loop.fabric(), link);
  loop.RunUntil(loop.fabric().now() + kNsPerMs);
  EXPECT_GT(LinkOctets(loop.fabric(), link), back) << "the restored link carries nothing";

  // One down/up is not a flap that dampening suppresses.
  for (const auto& e : loop.Events(events_before + 1)) {
    EXPECT_FALSE(e.subject() == link.id && Contains(e.action(), "suppressed"))
        << e.ShortDebugString();
  }

  // No stall: the job completes, within 2x the run without the failure.
  ASSERT_TRUE(loop.RunUntilJobsDone(500 * kNsPerMs)) << "the job stalled";
  const double fail_ms = JctMs(loop.fabric().GetJob(0));
  EXPECT_LT(fail_ms, 2 * base_ms);
  std::printf(
      "[ figures  ] link failure: traffic off the link after %.2f intervals (100 us "
      "sampling), DOWN event after %.2f intervals; JCT %.2f ms vs %.2f ms without failure "
      "(%.2fx)\n",
      off_intervals, static_cast<double>(seen_ns) / static_cast<double>(kInterval), fail_ms,
      base_ms, fail_ms / base_ms);
}

// ------------------------------------------------------------ degraded link

// A link that corrupts packets stays up: the fabric keeps forwarding over
// it, so only Loom's remediation moves the traffic off.
TEST(RemediationClosedLoopTest, ErroringLinkIsTakenOutWithinTwoIntervalsAndReturnsAfterItsHold) {
  const auto topo = TwoLeavesFourSpines();
  TempDir dir;
  LoopOptions o = Options(dir, "errors", 13);
  o.controller.adaptive.restore_hold_ns = 3 * kInterval;
  ClosedLoop loop(o);
  loop.AddJob(Ring("ring", 2e9, 1));
  const TimeNs t_bad = 10 * kNsPerMs;
  loop.RunUntil(t_bad);
  const std::string spine = loop.GetJob("ring").status().assignment().routes(0).via();
  const LinkEnds link = FindLink(topo, "leaf0", spine);
  ASSERT_FALSE(link.id.empty());
  const size_t events_before = loop.Events().size();
  ASSERT_TRUE(loop.fabric().DegradeLink(link.id, 1.0, 1e-4).ok());

  TimeNs last_growth = t_bad;
  uint64_t octets = LinkOctets(loop.fabric(), link);
  for (TimeNs t = t_bad + 100 * kNsPerUs; t <= t_bad + 3 * kInterval; t += 100 * kNsPerUs) {
    loop.RunUntil(t);
    const uint64_t now = LinkOctets(loop.fabric(), link);
    if (now != octets) last_growth = t;
    octets = now;
  }
  loom::sim::InterfaceCounters c;
  ASSERT_TRUE(loop.fabric().GetInterfaceCounters(link.a_dev, link.a_ifc, &c).ok());
  EXPECT_TRUE(c.oper_up);
  EXPECT_GT(last_growth, t_bad) << "the link carried nothing after the degradation";
  EXPECT_LE(last_growth - t_bad, 2 * kInterval)
      << "traffic stayed on the erroring link for "
      << static_cast<double>(last_growth - t_bad) / static_cast<double>(kInterval) << " intervals";
  auto events = loop.Events(events_before + 1);
  auto removed = Find(events, v1::EVENT_TYPE_REMEDIATION, link.id, "out of placement");
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_TRUE(Contains(removed[0].cause(), "error")) << removed[0].ShortDebugString();
  EXPECT_GE(ReplacedCount(removed[0]), 1) << removed[0].ShortDebugString();
  EXPECT_LE(EventNs(removed[0]) - t_bad, 2 * kInterval);
  auto job = loop.GetJob("ring");
  EXPECT_FALSE(AssignmentUses(job, spine)) << job.status().assignment().ShortDebugString();
  ExpectQpsFollowRoutes(loop.fabric(), job);

  // Repaired: it returns once its telemetry was clean for the hold (and not
  // before), and the job is spread over every spine again.
  ASSERT_TRUE(loop.fabric().DegradeLink(link.id, 1.0, 0).ok());
  std::vector<v1::Event> back;
  while (back.empty() && loop.fabric().now() < EventNs(removed[0]) + 8 * kInterval) {
    loop.RunUntil(loop.fabric().now() + kInterval);
    back = Find(loop.Events(events_before + 1), v1::EVENT_TYPE_REMEDIATION, link.id,
                "returned " + link.id + " to placement");
  }
  ASSERT_EQ(back.size(), 1u) << "never returned";
  EXPECT_GE(EventNs(back[0]) - EventNs(removed[0]), o.controller.adaptive.restore_hold_ns);
  EXPECT_TRUE(Contains(back[0].cause(), "hold after removal #1")) << back[0].ShortDebugString();
  loop.RunUntil(loop.fabric().now() + kNsPerMs);
  job = loop.GetJob("ring");
  EXPECT_TRUE(AssignmentUses(job, spine)) << job.status().assignment().ShortDebugString();
  ExpectQpsFollowRoutes(loop.fabric(), job);
  ASSERT_TRUE(loop.RunUntilJobsDone(500 * kNsPerMs)) << "the job stalled";
  std::printf(
      "[ figures  ] erroring link: traffic off after %.2f intervals (100 us sampling), removed "
      "at %.0f ms, returned at %.0f ms; JCT %.2f ms\n",
      static_cast<double>(last_growth - t_bad) / static_cast<double>(kInterval),
      static_cast<double>(EventNs(removed[0])) / 1e6, static_cast<double>(EventNs(back[0])) / 1e6,
      JctMs(loop.fabric().GetJob(0)));
}

// ------------------------------------------------------------ flap dampening

// Penalty after `downs` (times of the down transitions Loom saw), RFC 2439
// style as DampeningParams documents it: +penalty_per_flap per down,
// halving every half-life (no ceiling reached here).
double PenaltyAfter(const std::vector<TimeNs>& downs, const loom::adaptive::DampeningParams& p) {
  double penalty = 0;
  for (size_t i = 0; i < downs.size(); ++i) {
    if (i > 0) {
      penalty *= std::exp2(-static_cast<double>(downs[i] - downs[i - 1]) /
                           static_cast<double>(p.half_life_ns));
    }
    penalty += p.penalty_per_flap;
  }
  return penalty;
}

TEST(RemediationClosedLoopTest, FlappingLinkIsSuppressedWhileUpAndReusedAfterQuiet) {
  const auto topo = TwoLeavesFourSpines();
  TempDir dir;
  LoopOptions o = Options(dir, "flap", 5);
  auto& damp = o.controller.adaptive.dampening;
  damp.half_life_ns = 200 * kNsPerMs;
  damp.max_suppress_ns = 1 * kNsPerSec;
  ClosedLoop loop(o);
  loop.AddJob(Ring("ring", 256e6, 0));  // repeats until the run ends
  loop.RunUntil(20 * kNsPerMs);
  auto job = loop.GetJob("ring");
  ASSERT_EQ(job.status().state(), v1::JOB_STATE_ASSIGNED);
  const std::string spine = job.status().assignment().routes(0).via();
  const LinkEnds link = FindLink(topo, "leaf0", spine);
  ASSERT_FALSE(link.id.empty());
  const size_t events_before = loop.Events().size();

  // Four flaps, 20 ms down then 20 ms up (two telemetry intervals each, so
  // the sampler sees every down): downs at 20, 60, 100, 140 ms. Driven with
  // SetLinkUp: ScheduleFault(kLinkFlap) with count > 1 flaps only once (it
  // reads its FaultSpec through a reference into the fault list it appends
  // to).
  constexpr TimeNs kFirstDown = 20 * kNsPerMs, kPeriod = 20 * kNsPerMs;
  constexpr int kFlaps = 4;
  for (int k = 0; k < kFlaps; ++k) {
    loop.RunUntil(kFirstDown + 2 * k * kPeriod);
    ASSERT_TRUE(loop.fabric().SetLinkUp(link.id, false).ok());
    loop.RunUntil(kFirstDown + (2 * k + 1) * kPeriod);
    ASSERT_TRUE(loop.fabric().SetLinkUp(link.id, true).ok());
  }
  const TimeNs last_up = loop.fabric().now();
  loop.RunUntil(last_up + 2 * kInterval);

  auto events = loop.Events(events_before + 1);
  auto downs = Find(events, v1::EVENT_TYPE_LINK_OPER_CHANGED, link.id, "DOWN");
  auto ups = Find(events, v1::EVENT_TYPE_LINK_OPER_CHANGED, link.id, "UP");
  ASSERT_EQ(downs.size(), 4u) << "the sampler missed a down";
  ASSERT_EQ(ups.size(), 4u);
  auto suppressed =
      Find(events, v1::EVENT_TYPE_REMEDIATION, link.id, "suppressed by flap dampening");
  ASSERT_EQ(suppressed.size(), 1u);
  const TimeNs t_suppressed = EventNs(suppressed[0]);
  // Penalties 1000, ~1870, ~2630: the third down crosses the threshold (2000).
  EXPECT_EQ(t_suppressed, EventNs(downs[2])) << suppressed[0].ShortDebugString();
  EXPECT_TRUE(Contains(suppressed[0].cause(), "flapping")) << suppressed[0].ShortDebugString();
  EXPECT_TRUE(Contains(suppressed[0].result(), "suppressed")) << suppressed[0].ShortDebugString();

  // Expected reuse: the penalty after the fourth down decays below the reuse
  // threshold (or max_suppress passes), seen at the next snapshot.
  std::vector<TimeNs> down_ns;
  for (const auto& e : downs) down_ns.push_back(EventNs(e));
  const double penalty = PenaltyAfter(down_ns, damp);
  const TimeNs decay_ns = static_cast<TimeNs>(static_cast<double>(damp.half_life_ns) *
                                              std::log2(penalty / damp.reuse_threshold));
  const TimeNs expected_reuse =
      std::min(down_ns.back() + decay_ns, t_suppressed + damp.max_suppress_ns);
  ASSERT_GT(expected_reuse, last_up + 5 * kInterval) << "no quiet suppressed stretch to check";

  // While suppressed the link is up, yet Loom keeps it out of placement: no
  // assignment names its spine, no QP crosses it, it carries nothing.
  std::vector<v1::Event> reused;
  uint64_t octets = LinkOctets(loop.fabric(), link);
  int checks = 0;
  while (reused.empty() && loop.fabric().now() < expected_reuse + 5 * kInterval) {
    loom::sim::InterfaceCounters c;
    ASSERT_TRUE(loop.fabric().GetInterfaceCounters(link.a_dev, link.a_ifc, &c).ok());
    EXPECT_TRUE(c.oper_up);
    job = loop.GetJob("ring");
    EXPECT_FALSE(AssignmentUses(job, spine))
        << "t=" << loop.fabric().now() << " " << job.status().assignment().ShortDebugString();
    EXPECT_EQ(QpsThrough(loop.fabric(), "ring", link.a_dev + ":" + link.a_ifc), 0);
    EXPECT_EQ(QpsThrough(loop.fabric(), "ring", link.b_dev + ":" + link.b_ifc), 0);
    EXPECT_EQ(LinkOctets(loop.fabric(), link), octets) << "t=" << loop.fabric().now();
    ++checks;
    loop.RunUntil(loop.fabric().now() + kInterval);
    reused.clear();
    for (const auto& e :
         Find(loop.Events(events_before + 1), v1::EVENT_TYPE_REMEDIATION, link.id, "")) {
      if (Contains(e.action(), "reused")) reused.push_back(e);
    }
  }
  ASSERT_EQ(reused.size(), 1u) << "never reused";
  const TimeNs t_reused = EventNs(reused[0]);
  EXPECT_GE(checks, 10);
  EXPECT_NEAR(static_cast<double>(t_reused), static_cast<double>(expected_reuse),
              static_cast<double>(kInterval))
      << "penalty " << penalty << " after the last down";
  // Nothing claimed the link back before dampening reused it; the ups seen
  // while suppressed say it stays out.
  events = loop.Events(events_before + 1);
  for (const auto& e : events) {
    if (e.subject() != link.id || EventNs(e) < t_suppressed || EventNs(e) >= t_reused) continue;
    EXPECT_FALSE(Contains(e.action(), "returned")) << e.ShortDebugString();
    if (e.type() == v1::EVENT_TYPE_LINK_OPER_CHANGED && Contains(e.cause(), "UP")) {
      EXPECT_TRUE(Contains(e.action(), "kept the link out of placement")) << e.ShortDebugString();
    }
  }

  // Usable again: re-placed onto it within two intervals, traffic follows.
  loop.RunUntil(t_reused + 2 * kInterval);
  job = loop.GetJob("ring");
  EXPECT_TRUE(AssignmentUses(job, spine)) << job.status().assignment().ShortDebugString();
  ExpectQpsFollowRoutes(loop.fabric(), job);
  const uint64_t back = LinkOctets(loop.fabric(), link);
  loop.RunUntil(loop.fabric().now() + kNsPerMs);
  EXPECT_GT(LinkOctets(loop.fabric(), link), back) << "the reused link carries nothing";
  std::printf(
      "[ figures  ] flap dampening: suppressed at %.0f ms (third down), reused at %.0f ms "
      "(expected %.0f ms, penalty %.0f after the last down at %.0f ms)\n",
      static_cast<double>(t_suppressed) / 1e6, static_cast<double>(t_reused) / 1e6,
      static_cast<double>(expected_reuse) / 1e6, penalty,
      static_cast<double>(down_ns.back()) / 1e6);
}

// ------------------------------------------------------------ PFC storm

// Tenant A (acme) and tenant B (beta) on disjoint NICs, both leaf0 -> leaf1;
// B's receiver host003-nic0 may storm PFC pause on the lossless class.
const std::vector<std::pair<std::string, std::string>> kTenantA = {
    {"host000-gpu0", "host002-gpu0"}, {"host000-gpu1", "host002-gpu1"}};
const std::vector<std::pair<std::string, std::string>> kTenantB = {
    {"host001-gpu0", "host003-gpu0"}, {"host001-gpu1", "host003-gpu1"}};
constexpr const char* kStormNic = "host003-nic0";

// PFC on the lossless class (3) outside the storming NIC's own link: frames
// sent so far, and the egress ports paused right now.
struct PfcSpread {
  uint64_t frames = 0;
  std::set<std::string> paused;  // "device:interface"
};

PfcSpread SpreadOutside(const loom::sim::Fabric& f, const LinkEnds& nic_link) {
  PfcSpread out;
  for (const auto& dev : f.Devices()) {
    for (const auto& ifc : f.Interfaces(dev)) {
      if ((dev == nic_link.a_dev && ifc == nic_link.a_ifc) ||
          (dev == nic_link.b_dev && ifc == nic_link.b_ifc)) {
        continue;
      }
      loom::sim::PfcCounters pc;
      if (!f.GetPfcCounters(dev, ifc, 3, &pc).ok()) continue;
      out.frames += pc.tx_pkts;
      if (pc.paused) out.paused.insert(dev + ":" + ifc);
    }
  }
  return out;
}

struct StormRun {
  double a_jct_ms = 0;
  uint64_t pauses_to_a = 0;  // PFC frames leaf0 sent to tenant A's NICs
};

enum class Storm { kNone, kReport, kQuarantine };

StormRun RunTenants(Storm storm) {
  const auto topo = TwoLeavesFourSpines();
  TempDir dir;
  LoopOptions o = Options(dir, "storm", 21);
  o.controller.adaptive.remediation_params.allow_quarantine = storm == Storm::kQuarantine;
  ClosedLoop loop(o);
  loop.AddJob(Pairs("a-job", "acme", kTenantA, 2e9));  // about 40 ms at 400G
  loop.AddJob(Pairs("b-job", "beta", kTenantB, 4e9));  // outlives A
  const size_t events_before = loop.Events().size();
  const LinkEnds nic_link = FindLink(topo, "leaf1", kStormNic);
  EXPECT_FALSE(nic_link.id.empty());
  const TimeNs t_storm = 5 * kNsPerMs;
  loop.RunUntil(t_storm);
  if (storm != Storm::kNone) {
    EXPECT_TRUE(loop.fabric().SetPfcStorm(kStormNic, 3, true).ok());
  }
  loop.RunUntil(t_storm + 3 * kInterval);
  auto events = loop.Events(events_before + 1);

  if (storm == Storm::kNone) {
    for (const auto& e : events) {
      EXPECT_FALSE(Contains(e.action(), "pause source")) << e.ShortDebugString();
    }
  } else {
    // Reported: the storming NIC and no other as the pause source, within
    // two telemetry intervals.
    std::vector<v1::Event> reports;
    for (const auto& e : events) {
      if (e.type() != v1::EVENT_TYPE_REMEDIATION || !Contains(e.action(), "pause source")) continue;
      EXPECT_EQ(e.subject(), kStormNic) << e.ShortDebugString();
      if (e.subject() == kStormNic) reports.push_back(e);
    }
    EXPECT_EQ(reports.size(), 1u);
    if (!reports.empty()) {
      const auto& r = reports[0];
      EXPECT_EQ(r.severity(), v1::SEVERITY_CRITICAL);
      EXPECT_TRUE(Contains(r.cause(), "PFC")) << r.ShortDebugString();
      EXPECT_TRUE(Contains(r.cause(), nic_link.id)) << r.ShortDebugString();
      EXPECT_LE(EventNs(r) - t_storm, 2 * kInterval);
      std::printf("[ figures  ] PFC storm reported %.1f intervals after it started: %s\n",
                  static_cast<double>(EventNs(r) - t_storm) / static_cast<double>(kInterval),
                  r.action().c_str());
      if (storm == Storm::kQuarantine) {
        EXPECT_TRUE(Contains(r.action(), "quarantined")) << r.ShortDebugString();
        EXPECT_TRUE(Contains(r.result(), "shut")) << r.ShortDebugString();
      } else {
        EXPECT_FALSE(Contains(r.action(), "and quarantined")) << r.ShortDebugString();
      }
    }
    // Quarantine: the leaf port facing the NIC is disabled in the desired
    // and applied state, the emulator took the link down, Loom saw it go
    // down, and the NIC's pauses no longer reach the leaf.
    loom::v1::GetDeviceStateRequest req;
    req.set_device(nic_link.a_dev);
    v1::GetDeviceStateResponse dev;
    loop.controller().GetDeviceState(req, [&](Status, v1::GetDeviceStateResponse r) { dev = r; });
    loop.Drain();
    const auto& disabled = dev.desired().disabled_interfaces();
    const auto& applied = dev.applied().disabled_interfaces();
    const bool shut = std::count(disabled.begin(), disabled.end(), nic_link.a_ifc) > 0;
    const bool shut_applied = std::count(applied.begin(), applied.end(), nic_link.a_ifc) > 0;
    loom::sim::InterfaceCounters port;
    EXPECT_TRUE(loop.fabric().GetInterfaceCounters(nic_link.a_dev, nic_link.a_ifc, &port).ok());
    auto down = Find(events, v1::EVENT_TYPE_LINK_OPER_CHANGED, nic_link.id, "DOWN");
    const PfcSpread before = SpreadOutside(loop.fabric(), nic_link);
    loop.RunUntil(loop.fabric().now() + kInterval);
    const PfcSpread after = SpreadOutside(loop.fabric(), nic_link);
    if (storm == Storm::kQuarantine) {
      EXPECT_TRUE(shut) << dev.desired().ShortDebugString();
      EXPECT_TRUE(shut_applied) << dev.applied().ShortDebugString();
      EXPECT_FALSE(port.oper_up);
      EXPECT_EQ(down.size(), 1u);
      // Contained: the pauses no longer spread into the fabric (the shut
      // port's own counters are left out: the emulator keeps counting the
      // storm's frames on a link that is down).
      EXPECT_EQ(after.frames, before.frames) << "PFC frames still spread through the fabric";
      EXPECT_TRUE(after.paused.empty()) << "paused: " << Join(after.paused);
    } else {
      EXPECT_FALSE(shut) << dev.desired().ShortDebugString();
      EXPECT_TRUE(port.oper_up);
      EXPECT_TRUE(down.empty());
      // Not quarantined, the storm keeps spreading back along B's storming
      // flow (leaf1 -> its spine -> leaf0 -> B's sender), but no port
      // tenant A's traffic leaves through is paused: placement keeps A off
      // B's spines, and B's other flow keeps its line rate.
      EXPECT_GT(after.frames, before.frames) << "the storm did not spread: nothing to contain";
      EXPECT_FALSE(after.paused.empty());
      for (const auto& qp : loop.fabric().GetQps()) {
        if (qp.job == "a-job") {
          for (const auto& hop : qp.path) EXPECT_FALSE(after.paused.count(hop)) << hop;
        } else if (qp.dst_nic != kStormNic) {
          EXPECT_GT(qp.send_bps, 0.9 * 400e9) << qp.src_nic << " -> " << qp.dst_nic;
        }
      }
    }
  }

  StormRun out;
  EXPECT_TRUE(RunUntilJobDone(loop, 0, 500 * kNsPerMs)) << "tenant A's job stalled";
  out.a_jct_ms = JctMs(loop.fabric().GetJob(0));
  for (const auto& [gpu, peer] : kTenantA) {
    const std::string nic = gpu.substr(0, gpu.find('-')) + "-nic" + gpu.substr(gpu.size() - 1);
    const LinkEnds l = FindLink(topo, "leaf0", nic);
    loom::sim::PfcCounters pc;
    EXPECT_TRUE(loop.fabric().GetPfcCounters(l.a_dev, l.a_ifc, 3, &pc).ok()) << nic;
    out.pauses_to_a += pc.tx_pkts;
  }
  return out;
}

TEST(RemediationClosedLoopTest, PfcStormIsReportedAndOtherTenantKeepsItsThroughput) {
  const StormRun calm = RunTenants(Storm::kNone);
  const StormRun storm = RunTenants(Storm::kReport);
  EXPECT_LT(storm.a_jct_ms, 1.10 * calm.a_jct_ms)
      << "tenant A: " << storm.a_jct_ms << " ms with the storm, " << calm.a_jct_ms << " without";
  EXPECT_LE(storm.pauses_to_a, calm.pauses_to_a) << "the storm's pauses reached tenant A";
  std::printf(
      "[ figures  ] tenant A JCT %.2f ms with B's NIC storming, %.2f ms without (%.3fx); "
      "PFC frames to A's NICs %llu vs %llu\n",
      storm.a_jct_ms, calm.a_jct_ms, storm.a_jct_ms / calm.a_jct_ms,
      static_cast<unsigned long long>(storm.pauses_to_a),
      static_cast<unsigned long long>(calm.pauses_to_a));
}

TEST(RemediationClosedLoopTest, PfcStormingNicIsQuarantinedWhenPolicyAllows) {
  const StormRun calm = RunTenants(Storm::kNone);
  const StormRun storm = RunTenants(Storm::kQuarantine);
  EXPECT_LT(storm.a_jct_ms, 1.10 * calm.a_jct_ms)
      << "tenant A: " << storm.a_jct_ms << " ms with the storm, " << calm.a_jct_ms << " without";
  EXPECT_LE(storm.pauses_to_a, calm.pauses_to_a) << "the storm's pauses reached tenant A";
  std::printf(
      "[ figures  ] quarantine: tenant A JCT %.2f ms with the storm, %.2f ms without "
      "(%.3fx)\n",
      storm.a_jct_ms, calm.a_jct_ms, storm.a_jct_ms / calm.a_jct_ms);
}

// ------------------------------------------------------------ isolation

TEST(RemediationClosedLoopTest, DedicatedIsolationHoldsAfterALinkFailure) {
  const auto topo = TwoLeavesFourSpines();
  TempDir dir;
  ClosedLoop loop(Options(dir, "isolation", 7));
  // acme owns spine0+spine1 (color 1, dedicated: nobody else may use
  // them); beta is pinned to spine2+spine3 (color 2; shared, as the policy
  // must leave spines to shared traffic).
  v1::PolicySet p;
  const std::map<std::string, std::set<std::string>> owned = {{"acme", {"spine0", "spine1"}},
                                                              {"beta", {"spine2", "spine3"}}};
  uint32_t color = 0;
  for (const auto& [tenant, spines] : owned) {
    auto* c = p.add_colors();
    c->set_color(++color);
    c->set_name(tenant);
    for (const auto& sp : spines) c->add_spines(sp);
    auto* rule = p.add_rules();
    rule->set_name(tenant == "acme" ? "acme-dedicated" : "beta-pinned");
    rule->mutable_match()->add_tenants(tenant);
    rule->mutable_action()->add_colors(color);
    rule->mutable_action()->set_isolation(tenant == "acme" ? v1::ISOLATION_DEDICATED
                                                           : v1::ISOLATION_SHARED);
  }
  const Status installed = loop.InstallPolicy(p);
  ASSERT_TRUE(installed.ok()) << installed.message();
  loop.AddJob(Pairs("acme-job", "acme", kTenantA, 2e9));
  loop.AddJob(Pairs("beta-job", "beta", kTenantB, 2e9));
  const std::map<std::string, std::string> tenant_of = {{"acme-job", "acme"}, {"beta-job", "beta"}};
  loop.RunUntil(5 * kNsPerMs);

  // Routes (primaries and backups) and the QPs' actual spines stay in the
  // tenant's own set, and off `failed` when given.
  auto expect_isolated = [&](const std::string& when, const std::string& failed) {
    for (const auto& [job_id, tenant] : tenant_of) {
      const auto& mine = owned.at(tenant);
      const auto job = loop.GetJob(job_id);
      ASSERT_EQ(job.status().state(), v1::JOB_STATE_ASSIGNED) << when << " " << job_id;
      for (const auto& sp : RouteSpines(job)) {
        EXPECT_TRUE(mine.count(sp)) << when << ": " << job_id << " route via " << sp << " | "
                                    << job.status().assignment().ShortDebugString();
      }
      if (!failed.empty()) {
        EXPECT_FALSE(AssignmentUses(job, failed)) << when << " " << job_id;
      }
      const auto crossed = SpinesOf(loop.fabric(), job_id);
      EXPECT_FALSE(crossed.empty()) << when << " " << job_id;
      for (const auto& sp : crossed) {
        EXPECT_TRUE(mine.count(sp)) << when << ": " << job_id << "'s traffic crosses " << sp;
      }
      ExpectQpsFollowRoutes(loop.fabric(), job);
    }
  };
  expect_isolated("before the failure", "");

  // Fail leaf0's link to the spine acme's first route uses.
  const std::string spine = loop.GetJob("acme-job").status().assignment().routes(0).via();
  const LinkEnds link = FindLink(topo, "leaf0", spine);
  ASSERT_FALSE(link.id.empty());
  ASSERT_TRUE(loop.fabric().SetLinkUp(link.id, false).ok());
  // Before and after Loom re-places: the data plane's fallback (the route's
  // backup color) must not cross into beta's spines either.
  for (TimeNs t = loop.fabric().now(); t <= 5 * kNsPerMs + 2 * kInterval; t += kNsPerMs) {
    loop.RunUntil(t);
    for (const auto& sp : SpinesOf(loop.fabric(), "acme-job")) {
      EXPECT_TRUE(owned.at("acme").count(sp))
          << "t=" << static_cast<double>(t) / 1e6 << " ms: acme's traffic crosses " << sp;
    }
  }
  auto events = loop.Events();
  ASSERT_EQ(Find(events, v1::EVENT_TYPE_LINK_OPER_CHANGED, link.id, "DOWN").size(), 1u);
  ASSERT_FALSE(Find(events, v1::EVENT_TYPE_JOB_UPDATED, "acme-job", "down").empty())
      << "acme's job was not re-placed";
  expect_isolated("after re-placement", spine);

  // Both jobs complete (acme on its one remaining spine).
  EXPECT_TRUE(loop.RunUntilJobsDone(500 * kNsPerMs));
  EXPECT_TRUE(loop.fabric().GetJob(0).done && loop.fabric().GetJob(1).done);
}

// ------------------------------------------------------------ blast radius

// A leaf that loses every uplink cannot be routed around: Loom names the hosts behind it
// and the jobs there (FAULT_BLAST_RADIUS, for schedulers to drain), keeps that across a
// controller restart (no second "active", no "cleared" before telemetry shows an uplink
// back), and clears it once one uplink is up again.
TEST(RemediationClosedLoopTest, AnIsolatedLeafNamesItsHostsAndJobsUntilAnUplinkReturns) {
  const auto topo = TwoLeavesFourSpines();
  TempDir dir;
  ClosedLoop loop(Options(dir, "isolated", 5));
  loop.AddJob(Ring("ring", 0, 0));
  loop.RunUntil(5 * kNsPerMs);
  const size_t before = loop.Events().size();
  std::vector<LinkEnds> uplinks;
  for (int s = 0; s < 4; ++s)
    uplinks.push_back(FindLink(topo, "leaf0", "spine" + std::to_string(s)));
  for (const auto& l : uplinks) {
    ASSERT_FALSE(l.id.empty());
    ASSERT_TRUE(loop.fabric().SetLinkUp(l.id, false).ok());
  }
  loop.RunUntil(5 * kNsPerMs + 3 * kInterval);
  auto radius = Find(loop.Events(before + 1), v1::EVENT_TYPE_FAULT_BLAST_RADIUS, "leaf0", "");
  ASSERT_EQ(radius.size(), 1u);
  const auto& attrs = radius[0].attributes();
  EXPECT_EQ(attrs.at("state"), "active");
  EXPECT_EQ(attrs.at("fault"), "leaf-isolated");
  EXPECT_EQ(attrs.at("nodes"), "host000,host001");
  EXPECT_EQ(attrs.at("jobs"), "ring");
  EXPECT_EQ(radius[0].severity(), v1::SEVERITY_CRITICAL);
  EXPECT_TRUE(Contains(radius[0].cause(), "all 4 uplinks of leaf0")) << radius[0].cause();
  // Only the leaf: no NIC port went down.
  EXPECT_EQ(Find(loop.Events(before + 1), v1::EVENT_TYPE_FAULT_BLAST_RADIUS,
                 "host000-nic0:eth0--leaf0:Ethernet0", "")
                .size(),
            0u);

  loop.RestartController();
  loop.RunUntil(5 * kNsPerMs + 6 * kInterval);
  EXPECT_EQ(Find(loop.Events(before + 1), v1::EVENT_TYPE_FAULT_BLAST_RADIUS, "leaf0", "").size(),
            1u)
      << "the restart repeated or cleared the fault";

  ASSERT_TRUE(loop.fabric().SetLinkUp(uplinks[2].id, true).ok());
  loop.RunUntil(5 * kNsPerMs + 9 * kInterval);
  radius = Find(loop.Events(before + 1), v1::EVENT_TYPE_FAULT_BLAST_RADIUS, "leaf0", "");
  ASSERT_EQ(radius.size(), 2u);
  EXPECT_EQ(radius[1].attributes().at("state"), "cleared");
  EXPECT_EQ(radius[1].attributes().at("nodes"), "host000,host001");
  EXPECT_EQ(radius[1].severity(), v1::SEVERITY_INFO);
}

}  // namespace
}  // namespace loom::testing
