// Noisy-target benchmark: can one target's burst delay every other target?
//
// One "noisy" gNMI target (a real gRPC server on 127.0.0.1) floods N
// notifications as fast as the collector takes them; Q "quiet" targets each
// send one notification every 20 ms, stamped with the wall time they were
// sent. The sink costs ~`cost_us` of CPU per noisy notification (what profile
// translation and link-state ingest cost a real one) and records, for every
// quiet notification, how long after it was sent the sink saw it.
// Prints the quiet targets' lag (p50 / p99 / max) during the flood and the
// noisy target's throughput. Not a test: no assertion on timing.
//
// With --link-state the sink is the real LinkTelemetry (one 2-tier fabric, the
// noisy target is leaf-0, the quiet ones leaf-1..Q, every notification a real
// counter sample), and a reader takes Snapshot() every 100 ms as loomd does:
// it prints how long Snapshot() waited and how many of the quiet leaves' links
// it found stale (300 ms window) during the flood.
//
// usage: bench_noisy_target [noisy_notifications] [quiet_targets] [cost_us] [--link-state]
//        (defaults 100000, 4, 50)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/topology/topology_index.h"
#include "common/clock.h"
#include "telemetry/collector.h"
#include "telemetry/link_state.h"
#include "tests/telemetry/fake_gnmi_server.h"
#include "tests/telemetry/test_fabric.h"

namespace {

using loom::TimeNs;
using loom::telemetry::testing::FakeGnmiServer;
using loom::telemetry::testing::Note;
using loom::telemetry::testing::U;

TimeNs WallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class LagSink final : public loom::telemetry::TelemetrySink {
 public:
  LagSink(int cost_us, loom::telemetry::LinkTelemetry* next) : cost_us_(cost_us), next_(next) {}
  size_t OnNotification(const std::string& target, const gnmi::Notification& n,
                        TimeNs arrival_ns) override {
    size_t rejected = 0;
    if (target == "leaf-0") {
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(cost_us_);
      while (std::chrono::steady_clock::now() < until) {
      }
      if (next_ != nullptr) rejected = next_->OnNotification(target, n, arrival_ns);
      noisy_.fetch_add(1);
      return rejected;
    }
    if (next_ != nullptr) rejected = next_->OnNotification(target, n, arrival_ns);
    const TimeNs lag = WallNs() - n.timestamp();
    std::lock_guard<std::mutex> lock(mu_);
    if (flooding_.load()) lags_.push_back(lag);
    return rejected;
  }
  std::atomic<uint64_t> noisy_{0};
  std::atomic<bool> flooding_{false};
  std::mutex mu_;
  std::vector<TimeNs> lags_;

 private:
  const int cost_us_;
  loom::telemetry::LinkTelemetry* const next_;
};

}  // namespace

int main(int argc, char** argv) {
  const int n_noisy = argc > 1 ? std::atoi(argv[1]) : 100000;
  const int n_quiet = argc > 2 ? std::atoi(argv[2]) : 4;
  const int cost_us = argc > 3 ? std::atoi(argv[3]) : 50;
  const bool link_state = argc > 4 && std::string(argv[4]) == "--link-state";
  loom::SteadyClock clock;
  // Device timestamps are wall time; staleness is judged on the collector's
  // arrival times (monotonic).
  auto topo = loom::telemetry::testing::TwoTier(n_quiet + 1, 2);
  loom::topology::TopologyIndex index(topo);
  loom::telemetry::LinkStateOptions lopts;
  lopts.staleness.sample_interval_ns = 100 * loom::kNsPerMs;
  lopts.staleness.stale_after_intervals = 3;
  lopts.future_tolerance_ns = 60 * loom::kNsPerSec;
  loom::telemetry::LinkTelemetry links(index, lopts, &clock);
  FakeGnmiServer noisy;
  if (!noisy.Start()) return 1;
  std::vector<std::unique_ptr<FakeGnmiServer>> quiet;
  loom::telemetry::CollectorOptions o;
  o.seed = 1;
  const auto subs = loom::telemetry::SwitchSubscriptions(1000 * loom::kNsPerMs);
  o.targets.push_back(loom::telemetry::PlainTarget("leaf-0", noisy.address(), subs));
  for (int i = 0; i < n_quiet; ++i) {
    quiet.push_back(std::make_unique<FakeGnmiServer>());
    if (!quiet.back()->Start()) return 1;
    o.targets.push_back(loom::telemetry::PlainTarget("leaf-" + std::to_string(i + 1),
                                                     quiet.back()->address(), subs));
  }
  LagSink sink(cost_us, link_state ? &links : nullptr);
  loom::telemetry::Collector collector(o, &sink, &clock);
  if (!collector.Start().ok()) return 1;
  auto all_synced = [&] {
    for (const auto& h : collector.Health()) {
      if (!h.synced) return false;
    }
    return true;
  };
  for (int i = 0; i < 3000 && !all_synced(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!all_synced()) {
    std::fprintf(stderr, "targets did not sync\n");
    return 1;
  }
  const std::string path = "/interfaces/interface[name=Ethernet0]/state/counters";
  // Quiet leaves' uplinks (links of leaf-1.. to the spines).
  std::vector<int> quiet_links;
  for (int l = 0; l < topo.links_size(); ++l) {
    const std::string& a = topo.links(l).a().device();
    if (a.rfind("leaf-", 0) == 0 && a != "leaf-0") quiet_links.push_back(l);
  }
  std::atomic<bool> stop{false};
  std::vector<double> snap_ms;
  uint64_t stale_seen = 0, snaps = 0;
  std::thread reader;
  sink.flooding_ = true;
  if (link_state) {
    reader = std::thread([&] {
      while (!stop.load()) {
        const auto s0 = std::chrono::steady_clock::now();
        const auto snap = links.Snapshot();
        snap_ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0)
                .count());
        ++snaps;
        for (int l : quiet_links) {
          // Ethernet0 of each quiet leaf is its uplink to spine-0 (the only
          // port the bench samples): count that direction.
          if (topo.links(l).a().interface() != "Ethernet0") continue;
          if (snap.links[2 * static_cast<size_t>(l)].stale) ++stale_seen;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::thread flood([&] {
    for (int i = 0; i < n_noisy; ++i) {
      noisy.Push(Note(WallNs(), path, {{"out-octets", U(static_cast<uint64_t>(i))}}));
    }
  });
  std::thread ticker([&] {
    uint64_t v = 0;
    while (!stop.load()) {
      ++v;
      for (auto& q : quiet) q->Push(Note(WallNs(), path, {{"out-octets", U(v)}}));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  while (sink.noisy_.load() < static_cast<uint64_t>(n_noisy)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(600)) break;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sink.flooding_ = false;
  stop = true;
  ticker.join();
  flood.join();
  if (reader.joinable()) reader.join();
  collector.Stop();
  std::vector<TimeNs> lags;
  {
    std::lock_guard<std::mutex> lock(sink.mu_);
    lags = sink.lags_;
  }
  std::sort(lags.begin(), lags.end());
  auto pct = [&](double p) {
    if (lags.empty()) return 0.0;
    const size_t i = std::min(lags.size() - 1, static_cast<size_t>(p * (lags.size() - 1)));
    return static_cast<double>(lags[i]) / 1e6;
  };
  std::printf("noisy target: %d notifications in %.2f s (%.0f/s, %d us sink cost each)\n", n_noisy,
              secs, n_noisy / secs, cost_us);
  std::printf("quiet targets: %d, %zu notifications during the flood\n", n_quiet, lags.size());
  std::printf("quiet lag ms: p50 %.2f  p99 %.2f  max %.2f\n", pct(0.5), pct(0.99), pct(1.0));
  if (link_state) {
    std::sort(snap_ms.begin(), snap_ms.end());
    const double snap_max = snap_ms.empty() ? 0.0 : snap_ms.back();
    std::printf(
        "link state: %llu snapshots, Snapshot() max %.2f ms, quiet uplinks seen stale %llu "
        "times (of %llu)\n",
        static_cast<unsigned long long>(snaps), snap_max,
        static_cast<unsigned long long>(stale_seen),
        static_cast<unsigned long long>(snaps * static_cast<uint64_t>(n_quiet)));
  }
  return 0;
}
