#include "tests/closedloop/harness.h"

#include <future>
#include <set>
#include <stdexcept>

#include "api/topology/topology_generate.h"

namespace loom::testing {

namespace v1 = loom::v1;
using loom::controller::Controller;

v1::Topology SmallClos(int leaves, int spines, int hosts_per_leaf) {
  loom::topology::Clos2Params p;
  p.name = "clos-" + std::to_string(leaves) + "x" + std::to_string(spines);
  p.leaves = leaves;
  p.spines = spines;
  p.hosts_per_leaf = hosts_per_leaf;
  p.host.gpus_per_host = 2;
  p.host.nics_per_host = 2;
  v1::Topology t;
  std::string err;
  if (!loom::topology::GenerateClos2(p, &t, &err)) throw std::runtime_error("SmallClos: " + err);
  return t;
}

v1::Topology TwoLeavesFourSpines() { return SmallClos(2, 4, 2); }

v1::CollectivePattern ToPattern(loom::sim::Collective c) {
  switch (c) {
    case loom::sim::Collective::kRingAllReduce:
      return v1::COLLECTIVE_PATTERN_RING_ALLREDUCE;
    case loom::sim::Collective::kTreeAllReduce:
      return v1::COLLECTIVE_PATTERN_TREE_ALLREDUCE;
    case loom::sim::Collective::kAllGather:
      return v1::COLLECTIVE_PATTERN_ALL_GATHER;
    case loom::sim::Collective::kReduceScatter:
      return v1::COLLECTIVE_PATTERN_REDUCE_SCATTER;
    case loom::sim::Collective::kAllToAll:
      return v1::COLLECTIVE_PATTERN_ALL_TO_ALL;
    case loom::sim::Collective::kIncast:
      return v1::COLLECTIVE_PATTERN_INCAST;
    case loom::sim::Collective::kPermutation:
      return v1::COLLECTIVE_PATTERN_PERMUTATION;
    case loom::sim::Collective::kPointToPoint:
      return v1::COLLECTIVE_PATTERN_POINT_TO_POINT;
  }
  return v1::COLLECTIVE_PATTERN_UNSPECIFIED;
}

ClosedLoop::ClosedLoop(LoopOptions options)
    : options_(std::move(options)),
      index_(std::make_shared<const loom::topology::TopologyIndex>(options_.topology)),
      clock_(0) {
  std::string error;
  // The emulated NICs behave as the inventory Loom is given says they do.
  if (options_.nics_reorder_tolerant)
    options_.fabric.nic_reorder = loom::sim::ReorderMode::kTolerant;
  if (options_.nics_selective_repeat) {
    options_.fabric.nic_reorder = loom::sim::ReorderMode::kSelectiveRepeat;
  }
  fabric_ = loom::sim::Fabric::Create(options_.topology, options_.fabric, &error);
  if (!fabric_) throw std::runtime_error("fabric: " + error);
  loom::telemetry::LinkStateOptions lopts;
  lopts.staleness.sample_interval_ns = options_.telemetry_interval_ns;
  lopts.future_tolerance_ns = 60 * kNsPerSec;  // as loomd
  link_telemetry_ = std::make_unique<loom::telemetry::LinkTelemetry>(*index_, lopts, &clock_);
  loom::sim::GnmiOptions gopts;
  // The emulated devices stamp their notifications with the controller clock's wall
  // epoch (one time base, as NTP gives a real fabric), so future timestamps are judged.
  gopts.epoch_ns = clock_.WallNow() - clock_.Now();
  gopts.tick_ns = std::min<TimeNs>(options_.telemetry_interval_ns, 1 * kNsPerMs);
  gopts.min_sample_interval_ns = gopts.tick_ns;
  // Switches, and NICs when asked (their RoCE counters and burst gaps), as
  // loomd subscribes.
  std::vector<loom::sim::InProcessTarget> targets;
  for (const auto& d : options_.topology.devices()) {
    if (d.role() == v1::DEVICE_ROLE_LEAF || d.role() == v1::DEVICE_ROLE_SPINE ||
        d.role() == v1::DEVICE_ROLE_SUPER_SPINE) {
      targets.push_back(
          {d.id(), loom::telemetry::SwitchSubscriptions(options_.telemetry_interval_ns)});
    } else if (d.role() == v1::DEVICE_ROLE_NIC && options_.subscribe_nics) {
      targets.push_back(
          {d.id(), loom::telemetry::NicSubscriptions(options_.telemetry_interval_ns)});
    }
  }
  gnmi_ = std::make_unique<loom::sim::InProcessTelemetry>(fabric_.get(), gopts, targets,
                                                          link_telemetry_.get());
  Status s = gnmi_->Start();
  if (!s.ok()) throw std::runtime_error("telemetry: " + s.message());
  driver_ = std::make_unique<loom::sim::InProcessDriver>(fabric_.get(), options_.topology);
  StartController();
}

ClosedLoop::~ClosedLoop() {
  Drain();
  controller_.reset();
}

void ClosedLoop::StartController() {
  Status st;
  store_ = loom::controller::SqliteStore::Open(options_.db_path, &st);
  if (!store_) throw std::runtime_error("store: " + st.message());
  registry_ = std::make_unique<prometheus::Registry>();
  // Virtual time: results must not depend on how fast this machine builds state,
  // and registrations at t = 0 each get their overload re-placement at once (the
  // 1 s batching is for registration storms in wall time).
  auto copts = options_.controller;
  copts.wall_clock_pacing = false;
  copts.overload_recompute_interval_ns = 0;
  controller_ = std::make_unique<Controller>(io_, clock_, *store_, index_, *registry_, copts);
  if (options_.loom_programs) controller_->AddDriver(driver_.get());
  // What the inventory would say of every NIC.
  std::set<std::string> all_nics;
  for (const auto& d : options_.topology.devices()) {
    if (d.role() == v1::DEVICE_ROLE_NIC) all_nics.insert(d.id());
  }
  if (options_.nics_reorder_tolerant) controller_->SetReorderTolerantNics(all_nics);
  if (options_.nics_selective_repeat) controller_->SetSelectiveRepeatNics(all_nics);
  st = controller_->Start();
  if (!st.ok()) throw std::runtime_error("controller: " + st.message());
  controller_->Tick();
  Drain();
}

void ClosedLoop::RestartController() {
  Drain();
  controller_.reset();
  store_.reset();
  StartController();
}

void ClosedLoop::Drain() {
  for (int i = 0; i < 1000; ++i) {
    io_.restart();
    if (io_.poll() == 0) return;
  }
}

v1::Job JobOf(const loom::sim::JobSpec& spec, int traffic_class) {
  v1::Job job;
  job.set_tenant(spec.tenant.empty() ? "default" : spec.tenant);
  job.set_job_id(spec.id);
  for (const auto& r : spec.ranks) job.add_endpoints(r);
  job.set_traffic_class(static_cast<uint32_t>(traffic_class));
  job.set_collective(ToPattern(spec.collective));
  job.set_expected_bytes_per_iteration(static_cast<uint64_t>(spec.message_bytes));
  return job;
}

v1::Job ClosedLoop::AddJob(const loom::sim::JobSpec& spec, int traffic_class) {
  return AddJobAs(spec, JobOf(spec, traffic_class));
}

v1::Job ClosedLoop::AddJobAs(const loom::sim::JobSpec& spec, const v1::Job& job) {
  const int traffic_class = static_cast<int>(job.traffic_class());
  v1::RegisterJobRequest req;
  *req.mutable_job() = job;
  v1::Job out;
  Status status;
  controller_->RegisterJob(req, [&](Status s, v1::RegisterJobResponse r) {
    status = s;
    out = r.job();
  });
  Drain();
  if (!status.ok()) throw std::runtime_error("RegisterJob: " + status.message());
  // Program the fabric before the traffic starts.
  controller_->Tick();
  Drain();
  std::string error;
  loom::sim::JobSpec sim_spec = spec;
  sim_spec.priority = traffic_class;
  if (fabric_->AddJob(sim_spec, &error) < 0) throw std::runtime_error("AddJob: " + error);
  return out;
}

void ClosedLoop::RunUntil(TimeNs t) {
  while (fabric_->now() < t) {
    TimeNs next = std::min(t, fabric_->now() + options_.control_period_ns);
    gnmi_->RunUntil(next);
    clock_.Set(fabric_->now());
    // A link's oper-status changed (ON_CHANGE): a snapshot now, as loomd takes one.
    const uint64_t oper = link_telemetry_->OperChanges();
    if (fabric_->now() >= next_snapshot_ns_ || oper != oper_changes_seen_) {
      oper_changes_seen_ = oper;
      controller_->OnLinkSnapshot(
          std::make_shared<const loom::telemetry::LinkSnapshot>(link_telemetry_->Snapshot()));
      next_snapshot_ns_ = fabric_->now() + options_.telemetry_interval_ns;
    }
    controller_->Tick();
    Drain();
  }
}

bool ClosedLoop::RunUntilJobsDone(TimeNs limit) {
  while (!fabric_->AllJobsDone() && fabric_->now() < limit) {
    RunUntil(std::min(limit, fabric_->now() + options_.control_period_ns));
  }
  return fabric_->AllJobsDone();
}

v1::Job ClosedLoop::GetJob(const std::string& id) {
  v1::GetJobRequest req;
  req.set_job_id(id);
  v1::Job out;
  controller_->GetJob(req, [&](Status, v1::GetJobResponse r) { out = r.job(); });
  Drain();
  return out;
}

std::vector<v1::Event> ClosedLoop::Events(uint64_t from) {
  std::vector<v1::Event> out;
  controller_->Subscribe(
      from, false,
      [&](const v1::Event& e) {
        out.push_back(e);
        return true;
      },
      [](Status, uint64_t) {});
  Drain();
  return out;
}

Status ClosedLoop::Drain(const std::string& link, const std::string& reason) {
  v1::DrainLinkRequest req;
  req.set_link_id(link);
  req.set_reason(reason);
  Status out;
  controller_->DrainLink(req, [&](Status s, v1::DrainLinkResponse) { out = s; });
  Drain();
  controller_->Tick();
  Drain();
  return out;
}

Status ClosedLoop::InstallPolicy(const v1::PolicySet& set) {
  Status out;
  controller_->InstallPolicy(set,
                             [&](Status s, loom::controller::PolicyInstallResult) { out = s; });
  Drain();
  controller_->Tick();
  Drain();
  return out;
}

}  // namespace loom::testing
