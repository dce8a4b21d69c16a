// Registration throughput (issue 18 item 5): 10,000 jobs registered one after
// the other, as a scheduler does (each waits for its answer), with a real
// SQLite store, on the 4,096-GPU rail fabric (512 hosts x 8, 32 spines), while
// Tick() runs every 50 ms as in loomd. Jobs are ring all-reduces and
// all-to-alls of 1 to 8 hosts on random hosts, so the fabric is soon predicted
// over capacity: the first rows show the fabric within capacity, the later
// ones overloaded. Prints per 1,000 registrations: rate, p50 / p99 latency,
// the fabric's predicted maximum utilization; then overall figures and the
// batched re-placements that ran. Not a test: no assertion on timing.
//
// usage: register_bench [jobs] [--no-overload-recompute]
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/topology/topology_generate.h"
#include "api/topology/topology_index.h"
#include "common/clock.h"
#include "controller/core/controller.h"
#include "controller/store/store.h"
#include "tests/closedloop/bench_util.h"

namespace v1 = loom::v1;
using loom::testing::bench::Gpu;
using loom::testing::bench::Percentile;

int main(int argc, char** argv) {
  int n_jobs = 10000;
  bool overload_recompute = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-overload-recompute") {
      overload_recompute = false;
    } else {
      n_jobs = std::atoi(argv[i]);
    }
  }
  loom::topology::RailParams r;
  r.hosts = 512;
  r.hosts_per_stripe = 32;
  r.spines = 32;
  r.links_per_spine = 1;
  v1::Topology topo;
  std::string err;
  if (!loom::topology::GenerateRail(r, &topo, &err)) {
    std::fprintf(stderr, "topology: %s\n", err.c_str());
    return 1;
  }
  auto index = std::make_shared<const loom::topology::TopologyIndex>(topo);
  const std::string dir =
      std::filesystem::temp_directory_path() / ("loom-register-bench-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  loom::Status st;
  auto store = loom::controller::SqliteStore::Open(dir + "/loom.db", &st);
  if (!store) {
    std::fprintf(stderr, "store: %s\n", st.message().c_str());
    return 1;
  }
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  loom::SteadyClock clock;
  prometheus::Registry registry;
  loom::controller::ControllerOptions opts;
  opts.recompute_on_overload = overload_recompute;
  loom::controller::Controller controller(io, clock, *store, index, registry, opts);
  if (!controller.Start().ok()) return 1;
  std::thread core([&io] { io.run(); });
  std::atomic<bool> stop{false};
  std::thread ticker([&] {
    while (!stop.load()) {
      controller.Tick();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });

  std::mt19937_64 rng(7);
  std::printf("== %d registrations, 4,096 GPUs (512 hosts x 8, 32 spines, 400G), %s\n", n_jobs,
              overload_recompute ? "overload re-placement rate-limited (1/s)"
                                 : "overload re-placement off");
  std::printf("%8s %9s %9s %9s %9s\n", "jobs", "jobs/s", "p50 ms", "p99 ms", "max util");
  std::vector<double> all, window;
  const auto t_start = std::chrono::steady_clock::now();
  auto t_window = t_start;
  double last_util = 0;
  for (int i = 0; i < n_jobs; ++i) {
    v1::RegisterJobRequest req;
    auto* j = req.mutable_job();
    j->set_job_id("job" + std::to_string(i));
    j->set_tenant("tenant" + std::to_string(i % 7));
    j->set_traffic_class(3);
    const int hosts = 1 << std::uniform_int_distribution<int>(0, 3)(rng);
    std::vector<int> hs;
    while (static_cast<int>(hs.size()) < hosts) {
      int h = std::uniform_int_distribution<int>(0, r.hosts - 1)(rng);
      if (std::find(hs.begin(), hs.end(), h) == hs.end()) hs.push_back(h);
    }
    j->set_collective(i % 4 == 0 ? v1::COLLECTIVE_PATTERN_ALL_TO_ALL
                                 : v1::COLLECTIVE_PATTERN_RING_ALLREDUCE);
    for (int g = 0; g < 8; ++g) {
      for (int h : hs) j->add_endpoints(Gpu(h, g));
    }
    req.set_request_id("r" + std::to_string(i));
    std::promise<std::pair<loom::Status, v1::RegisterJobResponse>> p;
    const auto t0 = std::chrono::steady_clock::now();
    controller.RegisterJob(std::move(req), [&p](loom::Status s, v1::RegisterJobResponse resp) {
      p.set_value({s, std::move(resp)});
    });
    auto [s, resp] = p.get_future().get();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!s.ok()) {
      std::fprintf(stderr, "job%d: %s\n", i, s.message().c_str());
      return 1;
    }
    last_util = resp.job().status().assignment().predicted_max_utilization();
    all.push_back(ms);
    window.push_back(ms);
    if ((i + 1) % 1000 == 0) {
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_window).count();
      std::printf("%8d %9.0f %9.2f %9.2f %9.2f\n", i + 1, 1000 / secs, Percentile(window, 0.5),
                  Percentile(window, 0.99), last_util);
      std::fflush(stdout);
      window.clear();
      t_window = std::chrono::steady_clock::now();
    }
  }
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  std::printf(
      "overall: %d jobs in %.1f s = %.0f jobs/s; latency p50 %.2f ms, p99 %.2f ms, max %.1f ms\n",
      n_jobs, total, n_jobs / total, Percentile(all, 0.5), Percentile(all, 0.99),
      Percentile(all, 1.0));
  stop = true;
  ticker.join();
  work.reset();
  io.stop();
  core.join();
  std::filesystem::remove_all(dir);
  return 0;
}
