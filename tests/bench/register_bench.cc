// Registration throughput (issue 18 item 5): 10,000 jobs registered on the
// 4,096-GPU rail fabric (512 hosts x 8, 32 spines), with a real SQLite store,
// while Tick() runs every 50 ms as in loomd. Two runs of the same jobs, each on
// a fresh controller and database: one client registering one job after the
// other (each waits for its answer, as one scheduler does), then `clients`
// clients doing so at once (default 8 in flight, as parallel Slurm prologs do;
// registrations that wait for the strand are committed together). Jobs are ring
// all-reduces and all-to-alls of 1 to 8 hosts on random hosts, so the fabric is
// soon predicted over capacity: the first rows show the fabric within capacity,
// the later ones overloaded. Prints per 1,000 registrations: rate, p50 / p99
// latency, the fabric's predicted maximum utilization; then overall figures and
// the store transactions (commits) the run took. Not a test: no assertion on
// timing.
//
// usage: register_bench [jobs] [--no-overload-recompute] [--clients N]
//        (--clients 0: the sequential run only; --clients N --only-concurrent: that one only)
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <mutex>
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

namespace {

// Counts the transactions (group commit: fewer than registrations).
class CountingStore final : public loom::controller::Store {
 public:
  explicit CountingStore(loom::controller::Store& inner) : inner_(inner) {}
  loom::Status Load(size_t max_events, loom::controller::StoredState* out,
                    size_t max_event_bytes) override {
    return inner_.Load(max_events, out, max_event_bytes);
  }
  loom::Status Commit(const loom::controller::Mutation& m) override {
    ++commits;
    const auto t0 = std::chrono::steady_clock::now();
    loom::Status s = inner_.Commit(m);
    commit_ns += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count());
    return s;
  }
  loom::Status ReadResponse(const std::string& request_id, std::string* out) override {
    return inner_.ReadResponse(request_id, out);
  }
  loom::Status ReadEvents(uint64_t from, uint64_t to, size_t max_bytes,
                          std::vector<v1::Event>* out) override {
    return inner_.ReadEvents(from, to, max_bytes, out);
  }
  loom::Status Vacuum(int max_pages, int64_t* free_pages) override {
    return inner_.Vacuum(max_pages, free_pages);
  }
  std::atomic<uint64_t> commits{0};
  // Wall time spent in Commit (on the controller strand: SQLite and its fsyncs).
  std::atomic<uint64_t> commit_ns{0};

 private:
  loom::controller::Store& inner_;
};

struct Run {
  int n_jobs = 0;
  int clients = 1;
  bool overload_recompute = true;
};

// Registers `reqs` with `clients` clients in flight; prints the table. Returns false on
// an error.
bool RunOnce(const Run& run, const std::shared_ptr<const loom::topology::TopologyIndex>& index,
             const std::vector<v1::RegisterJobRequest>& reqs) {
  const std::string dir =
      std::filesystem::temp_directory_path() /
      ("loom-register-bench-" + std::to_string(getpid()) + "-" + std::to_string(run.clients));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  loom::Status st;
  auto sqlite = loom::controller::SqliteStore::Open(dir + "/loom.db", &st);
  if (!sqlite) {
    std::fprintf(stderr, "store: %s\n", st.message().c_str());
    return false;
  }
  CountingStore store(*sqlite);
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  loom::SteadyClock clock;
  prometheus::Registry registry;
  loom::controller::ControllerOptions opts;
  opts.recompute_on_overload = run.overload_recompute;
  loom::controller::Controller controller(io, clock, store, index, registry, opts);
  if (!controller.Start().ok()) return false;
  const uint64_t commits_at_start = store.commits.load();
  const uint64_t commit_ns_at_start = store.commit_ns.load();
  std::thread core([&io] { io.run(); });
  std::atomic<bool> stop{false};
  std::thread ticker([&] {
    while (!stop.load()) {
      controller.Tick();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });

  std::printf(
      "== %d registrations, %d client(s) in flight, 4,096 GPUs (512 hosts x 8, 32 "
      "spines, 400G), %s\n",
      run.n_jobs, run.clients,
      run.overload_recompute ? "overload re-placement rate-limited (1/s)"
                             : "overload re-placement off");
  std::printf("%8s %9s %9s %9s %9s\n", "jobs", "jobs/s", "p50 ms", "p99 ms", "max util");
  std::fflush(stdout);
  std::mutex mu;  // guards the figures below
  std::vector<double> all, window;
  int done_count = 0;
  double last_util = 0;
  bool failed = false;
  const auto t_start = std::chrono::steady_clock::now();
  auto t_window = t_start;
  std::atomic<int> next{0};
  auto client = [&]() {
    for (;;) {
      const int i = next.fetch_add(1);
      if (i >= run.n_jobs) return;
      std::promise<std::pair<loom::Status, v1::RegisterJobResponse>> p;
      const auto t0 = std::chrono::steady_clock::now();
      controller.RegisterJob(reqs[static_cast<size_t>(i)],
                             [&p](loom::Status s, v1::RegisterJobResponse resp) {
                               p.set_value({s, std::move(resp)});
                             });
      auto [s, resp] = p.get_future().get();
      const auto t1 = std::chrono::steady_clock::now();
      const double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
      std::lock_guard<std::mutex> lock(mu);
      if (!s.ok()) {
        std::fprintf(stderr, "job%d: %s\n", i, s.message().c_str());
        failed = true;
        next = run.n_jobs;
        return;
      }
      last_util = resp.job().status().assignment().predicted_max_utilization();
      all.push_back(ms);
      window.push_back(ms);
      if (++done_count % 1000 == 0) {
        const double secs = std::chrono::duration<double>(t1 - t_window).count();
        std::printf("%8d %9.0f %9.2f %9.2f %9.2f\n", done_count, 1000 / secs,
                    Percentile(window, 0.5), Percentile(window, 0.99), last_util);
        std::fflush(stdout);
        window.clear();
        t_window = t1;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < run.clients; ++c) threads.emplace_back(client);
  for (auto& t : threads) t.join();
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  if (!failed) {
    std::printf(
        "overall: %d jobs in %.1f s = %.0f jobs/s; latency p50 %.2f ms, p99 %.2f ms, max %.1f "
        "ms; %llu store transactions\n",
        run.n_jobs, total, run.n_jobs / total, Percentile(all, 0.5), Percentile(all, 0.99),
        Percentile(all, 1.0),
        static_cast<unsigned long long>(store.commits.load() - commits_at_start));
    const double commit_s = static_cast<double>(store.commit_ns.load() - commit_ns_at_start) / 1e9;
    std::printf("strand time in store commits: %.2f s (%.0f %% of the run)\n", commit_s,
                100 * commit_s / total);
    std::fflush(stdout);
  }
  stop = true;
  ticker.join();
  work.reset();
  io.stop();
  core.join();
  std::filesystem::remove_all(dir);
  return !failed;
}

}  // namespace

int main(int argc, char** argv) {
  Run run;
  run.n_jobs = 10000;
  int clients = 8;
  bool only_concurrent = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-overload-recompute") {
      run.overload_recompute = false;
    } else if (a == "--clients" && i + 1 < argc) {
      clients = std::atoi(argv[++i]);
    } else if (a == "--only-concurrent") {
      only_concurrent = true;
    } else {
      run.n_jobs = std::atoi(argv[i]);
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

  // The same jobs for every run.
  std::mt19937_64 rng(7);
  std::vector<v1::RegisterJobRequest> reqs;
  for (int i = 0; i < run.n_jobs; ++i) {
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
    reqs.push_back(std::move(req));
  }
  if (!only_concurrent) {
    run.clients = 1;
    if (!RunOnce(run, index, reqs)) return 1;
  }
  if (clients > 1 || only_concurrent) {
    run.clients = std::max(1, clients);
    if (!RunOnce(run, index, reqs)) return 1;
  }
  return 0;
}
