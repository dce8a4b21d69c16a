#include "sim-fabric/embedded.h"

#include <chrono>

#include "common/log.h"

namespace loom::sim {

namespace lv1 = loom::v1;

namespace {

lv1::CollectivePattern Pattern(const std::string& name) {
  Collective c = Collective::kRingAllReduce;
  ParseCollective(name, &c);
  switch (c) {
    case Collective::kRingAllReduce:
      return lv1::COLLECTIVE_PATTERN_RING_ALLREDUCE;
    case Collective::kTreeAllReduce:
      return lv1::COLLECTIVE_PATTERN_TREE_ALLREDUCE;
    case Collective::kAllGather:
      return lv1::COLLECTIVE_PATTERN_ALL_GATHER;
    case Collective::kReduceScatter:
      return lv1::COLLECTIVE_PATTERN_REDUCE_SCATTER;
    case Collective::kAllToAll:
      return lv1::COLLECTIVE_PATTERN_ALL_TO_ALL;
    case Collective::kIncast:
      return lv1::COLLECTIVE_PATTERN_INCAST;
    case Collective::kPermutation:
      return lv1::COLLECTIVE_PATTERN_PERMUTATION;
    case Collective::kPointToPoint:
      return lv1::COLLECTIVE_PATTERN_POINT_TO_POINT;
  }
  return lv1::COLLECTIVE_PATTERN_UNSPECIFIED;
}

}  // namespace

std::unique_ptr<EmbeddedFabric> EmbeddedFabric::Load(const std::string& scenario_path,
                                                     std::string* error) {
  std::unique_ptr<EmbeddedFabric> e(new EmbeddedFabric());
  if (!LoadScenarioFile(scenario_path, &e->scenario_, error)) return nullptr;
  e->fabric_ = BuildScenarioFabric(e->scenario_, error);
  if (!e->fabric_) return nullptr;
  e->clock_.epoch_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  e->driver_ = std::make_unique<InProcessDriver>(
      e->fabric_.get(), e->scenario_.topology,
      [raw = e.get()](std::function<void()> f) { raw->Post(std::move(f)); });
  return e;
}

EmbeddedFabric::~EmbeddedFabric() { Stop(); }

std::vector<lv1::Job> EmbeddedFabric::Jobs() const {
  std::vector<std::string> all_gpus;
  for (const auto& g : scenario_.topology.gpus()) all_gpus.push_back(g.id());
  std::vector<lv1::Job> out;
  for (int i = 0; i < scenario_.spec.jobs_size(); ++i) {
    const auto& j = scenario_.spec.jobs(i);
    lv1::Job job;
    job.set_job_id(j.id().empty() ? "job" + std::to_string(i) : j.id());
    job.set_tenant(j.tenant().empty() ? "default" : j.tenant());
    if (j.ranks().empty()) {
      size_t n = all_gpus.size();
      if (j.rank_count() > 0) n = std::min(n, static_cast<size_t>(j.rank_count()));
      for (size_t k = 0; k < n; ++k) job.add_endpoints(all_gpus[k]);
    } else {
      for (const auto& r : j.ranks()) job.add_endpoints(r);
    }
    job.set_collective(Pattern(j.collective()));
    job.set_traffic_class(j.priority() > 0 ? static_cast<uint32_t>(j.priority()) : 3);
    job.set_expected_bytes_per_iteration(static_cast<uint64_t>(j.message_bytes()));
    (*job.mutable_labels())["source"] = "embedded-emulator";
    out.push_back(std::move(job));
  }
  return out;
}

Status EmbeddedFabric::Start(telemetry::TelemetrySink* sink, TimeNs interval_ns) {
  GnmiOptions gopts;
  gopts.tick_ns = std::min<TimeNs>(interval_ns, 10 * kNsPerMs);
  gopts.min_sample_interval_ns = gopts.tick_ns;
  gopts.epoch_ns = clock_.epoch_;
  std::vector<InProcessTarget> targets;
  for (const auto& d : scenario_.topology.devices()) {
    if (d.role() == lv1::DEVICE_ROLE_LEAF || d.role() == lv1::DEVICE_ROLE_SPINE ||
        d.role() == lv1::DEVICE_ROLE_SUPER_SPINE) {
      targets.push_back({d.id(), telemetry::SwitchSubscriptions(interval_ns)});
    } else if (d.role() == lv1::DEVICE_ROLE_NIC) {
      // NIC RoCE counters and transmit bursts (DLB timer tuning).
      targets.push_back({d.id(), telemetry::NicSubscriptions(interval_ns)});
    }
  }
  telemetry_ = std::make_unique<InProcessTelemetry>(fabric_.get(), gopts, targets, sink, &clock_);
  if (Status s = telemetry_->Start(); !s.ok()) return s;
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void EmbeddedFabric::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EmbeddedFabric::SetNicReorder(const std::string& nic, ReorderMode mode) {
  Post([this, nic, mode] {
    if (Status st = fabric_->SetNicReorder(nic, mode); !st.ok()) {
      LOG_WARN("embedded emulator: NIC reorder behaviour not applied")
          .With("nic", nic)
          .With("error", st.message());
    }
  });
}

void EmbeddedFabric::Post(std::function<void()> f) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands_.push_back(std::move(f));
  }
  cv_.notify_all();
}

void EmbeddedFabric::Run() {
  using SteadyClock = std::chrono::steady_clock;
  const TimeNs chunk = 1 * kNsPerMs;  // virtual time between command checks
  auto wall0 = SteadyClock::now();
  TimeNs virt0 = fabric_->now();
  auto window_wall = wall0;
  TimeNs window_virt = virt0;
  for (;;) {
    std::deque<std::function<void()>> cmds;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Pace: never run ahead of the wall clock.
      auto wall_elapsed =
          std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now() - wall0).count();
      TimeNs ahead = (fabric_->now() - virt0) - wall_elapsed;
      if (ahead > 0) {
        cv_.wait_for(lock, std::chrono::nanoseconds(ahead),
                     [this] { return stop_ || !commands_.empty(); });
      }
      if (stop_) return;
      cmds.swap(commands_);
    }
    for (auto& c : cmds) c();  // config between steps
    telemetry_->RunUntil(fabric_->now() + chunk);
    clock_.now_.store(fabric_->now(), std::memory_order_release);
    auto now = SteadyClock::now();
    double wall_s = std::chrono::duration<double>(now - window_wall).count();
    if (wall_s >= 2.0) {
      speed_.store(static_cast<double>(fabric_->now() - window_virt) / 1e9 / wall_s);
      window_wall = now;
      window_virt = fabric_->now();
    }
  }
}

}  // namespace loom::sim
