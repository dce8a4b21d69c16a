// loomd bootstrap: the one place that wires the modules together.
//
// Threads: the controller strand runs on one io_context thread ("core");
// gRPC and the metrics port's HTTP server run their own threads; the main thread waits
// for SIGINT/SIGTERM and then shuts everything down in order (API first so no
// new work arrives, then the core, then the store).
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <malloc.h>
#include <prometheus/registry.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "api/services/http_server.h"
#include "api/services/metrics.h"
#include "api/services/server.h"
#include "api/topology/topology_index.h"
#include "api/topology/topology_io.h"
#include "common/clock.h"
#include "common/file.h"
#include "common/log.h"
#include "common/net.h"
#include "controller/core/controller.h"
#include "controller/loomd/config.h"
#include "controller/loomd/inventory.h"
#include "controller/store/store.h"
#include "policy/policy_engine.h"
#include "sim-fabric/embedded.h"
#include "southbound/bgp/bgp_driver.h"
#include "southbound/bgp/prefix_plan.h"
#include "southbound/bgp/speaker.h"
#include "southbound/gnmi/gnmi_driver.h"
#include "southbound/gnmi/set_adapter.h"
#include "southbound/wire/budget_driver.h"
#include "southbound/wire/composite_driver.h"
#include "telemetry/collector.h"
#include "telemetry/link_state.h"
#include "telemetry/profile.h"

#ifndef LOOM_VERSION
#define LOOM_VERSION "0.0.0"
#endif
#ifndef LOOM_GIT_COMMIT
#define LOOM_GIT_COMMIT "unknown"
#endif

namespace {

// Signals: one thread sigwaits from the start, so a signal is heard at any
// point of start-up. SIGHUP is queued for the main loop (reload). The first
// SIGINT/SIGTERM asks for shutdown and arms a watchdog: if loomd has not exited
// kShutdownBound later (a start-up step or a stream that does not return), it
// exits at once; every acknowledged write is already durable in SQLite. A
// second SIGINT/SIGTERM exits at once.
constexpr auto kShutdownBound = std::chrono::seconds(5);

// Heap given back to the kernel. glibc keeps freed memory in its arenas (one
// per busy thread, up to 8 per core) and returns only the top of each heap,
// so a burst (a re-placement of thousands of jobs, a catch-up from the
// store) would hold its peak in RSS for good. Arenas are capped at 4 unless
// MALLOC_ARENA_MAX says otherwise, and a thread of its own calls
// malloc_trim(0) every 10 s (never on the controller strand: it locks each
// arena while it walks it).
class HeapTrimmer {
 public:
  HeapTrimmer() {
    if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 4);
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_for(lock, std::chrono::seconds(10), [this] { return stop_; })) {
        lock.unlock();
        malloc_trim(0);
        lock.lock();
      }
    });
  }
  ~HeapTrimmer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

class SignalWatcher {
 public:
  explicit SignalWatcher(sigset_t set) : set_(set) {
    std::thread([this] { Loop(); }).detach();  // blocked in sigwait until exit
  }
  // Blocks until a signal arrives; returns it.
  int Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !queue_.empty(); });
    const int sig = queue_.front();
    queue_.pop_front();
    return sig;
  }
  bool stopping() const { return stopping_.load(); }
  // Start-up checkpoints: a shutdown asked for while starting ends here.
  void Checkpoint(const char* phase) const {
    if (!stopping()) return;
    LOG_INFO("shutdown requested during start-up; exiting").With("phase", phase);
    std::_Exit(0);
  }

 private:
  void Loop() {
    for (;;) {
      int sig = 0;
      if (sigwait(&set_, &sig) != 0) continue;
      if (sig == SIGINT || sig == SIGTERM) {
        if (stopping_.exchange(true)) {
          LOG_WARN("second shutdown signal: exiting now");
          std::_Exit(0);
        }
        std::thread([] {
          std::this_thread::sleep_for(kShutdownBound);
          LOG_ERROR("shutdown did not finish within its bound; exiting now")
              .With("bound_ms",
                    static_cast<int64_t>(
                        std::chrono::duration_cast<std::chrono::milliseconds>(kShutdownBound)
                            .count()));
          std::_Exit(0);
        }).detach();
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.push_back(sig);
      }
      cv_.notify_all();
    }
  }

  sigset_t set_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> queue_;
  std::atomic<bool> stopping_{false};
};

int Fail(int code, const std::string& msg) {
  std::cerr << "loomd: " << msg << "\n";
  LOG_ERROR("loomd exiting").With("error", msg);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  loom::v1::LoomdConfig config;
  std::string error;
  switch (loom::loomd::LoadConfig(argc, argv, &config, &error)) {
    case loom::loomd::ConfigResult::kHelp:
      std::fputs(loom::loomd::kUsage, stdout);
      return 0;
    case loom::loomd::ConfigResult::kVersion:
      std::printf("loomd %s (%s)\n", LOOM_VERSION, LOOM_GIT_COMMIT);
      return 0;
    case loom::loomd::ConfigResult::kError:
      std::cerr << "loomd: " << error << "\n";
      return 2;
    case loom::loomd::ConfigResult::kOk:
      break;
  }
  loom::LogLevel level = loom::LogLevel::kInfo;
  loom::ParseLogLevel(config.log_level(), &level);
  loom::SetLogLevel(level);
  loom::SetLogFormat(config.log_format() == "json" ? loom::LogFormat::kJson
                                                   : loom::LogFormat::kText);

  // Block the signals in every thread; the main thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  HeapTrimmer heap_trimmer;  // after the mask: its thread must not take the signals
  // Never destroyed: its thread may still be in sigwait while the process exits.
  SignalWatcher& signal_watcher = *new SignalWatcher(signals);

  // The embedded emulator (default run): loomd drives it through the same
  // driver and telemetry interfaces as a real fabric.
  std::unique_ptr<loom::sim::EmbeddedFabric> emulator;
  loom::v1::Topology topo;
  if (!config.emulate_scenario().empty()) {
    emulator = loom::sim::EmbeddedFabric::Load(config.emulate_scenario(), &error);
    if (!emulator) {
      std::cerr << "loomd: --emulate " << config.emulate_scenario() << ": " << error << "\n";
      return 2;
    }
    topo = emulator->topology();
    auto errs = loom::topology::ValidateTopology(topo);
    if (!errs.empty()) {
      std::cerr << "loomd: the scenario's topology is invalid:\n"
                << loom::topology::FormatErrors(errs, "", "") << "\n";
      return 2;
    }
  } else if (!loom::topology::LoadTopologyFile(config.topology_path(), &topo, &error)) {
    std::cerr << "loomd: " << error << "\n";
    return 2;
  }
  auto index = std::make_shared<const loom::topology::TopologyIndex>(std::move(topo));
  loom::v1::PolicySet policy;
  if (!config.policy_path().empty()) {
    if (!loom::policy::LoadPolicyFile(config.policy_path(), &policy, &error)) {
      std::cerr << "loomd: --policy " << error << "\n";
      return 2;
    }
    auto findings = loom::policy::ValidatePolicy(policy, *index);
    if (loom::policy::HasErrors(findings)) {
      std::cerr << "loomd: policy " << config.policy_path() << " refused:\n"
                << loom::policy::FormatFindings(findings) << "\n";
      return 2;
    }
  }

  loom::Status st;
  // A database from an earlier run: Loom's routes were preserved (they are
  // re-originated from it), so BGP restarts gracefully (R and F bits).
  const bool restarted = std::filesystem::exists(config.database_path());
  signal_watcher.Checkpoint("topology loaded");
  auto store = loom::controller::SqliteStore::Open(config.database_path(), &st);
  if (!store) return Fail(1, st.message());

  auto registry = std::make_shared<prometheus::Registry>();
  auto& ready_gauge = prometheus::BuildGauge()
                          .Name("loom_ready")
                          .Help(
                              "1 once loomd has recovered its state and serves the API; 0 "
                              "while it starts and shuts down")
                          .Register(*registry)
                          .Add({});
  loom::api::RegisterProcessMetrics(*registry, LOOM_VERSION, LOOM_GIT_COMMIT);

  loom::SteadyClock clock;
  boost::asio::io_context io;
  loom::controller::ControllerOptions copts;
  copts.event_retention = config.event_retention();
  copts.event_retention_bytes = size_t{config.event_retention_mib()} << 20;
  copts.event_cache_bytes = size_t{config.event_cache_mib()} << 20;
  copts.request_retention = config.request_retention();
  copts.request_retention_bytes = size_t{config.request_retention_mib()} << 20;
  copts.overload_max_moved_jobs = config.overload_max_moved_jobs();
  copts.slow_watcher_policy = config.slow_watcher_policy() == "cut"
                                  ? loom::controller::SlowWatcherPolicy::kCut
                                  : loom::controller::SlowWatcherPolicy::kCatchUp;
  if (std::string e = loom::loomd::AdaptiveOptionsFromConfig(config, &copts.adaptive); !e.empty()) {
    std::cerr << "loomd: " << e << "\n";
    return 2;
  }
  if (std::string err; !loom::loomd::ValidateChangeConfig(config, index->topology(), &err)) {
    std::cerr << "loomd: " << err << "\n";
    return 2;
  }
  copts.change_mode = config.change_mode().empty() ? "auto" : config.change_mode();
  copts.reconciler.shadow = copts.change_mode == "shadow";
  {
    const auto& cs = config.change_safety();
    auto& o = copts.change_safety;
    o.enabled = copts.change_mode == "approve" ||
                (copts.change_mode == "auto" && config.has_change_safety());
    o.approve = copts.change_mode == "approve";
    o.canary.assign(cs.canary().begin(), cs.canary().end());
    if (cs.canary_count() > 0) o.canary_count = cs.canary_count();
    if (cs.canary_wait_ms() > 0) o.canary_wait_ns = cs.canary_wait_ms() * loom::kNsPerMs;
    o.canary_apply_timeout_ns = std::max(o.canary_apply_timeout_ns, o.canary_wait_ns);
    o.max_devices_per_minute = cs.max_devices_per_minute();
    if (cs.max_pfc_pause_increase() > 0) o.max_pfc_pause_increase = cs.max_pfc_pause_increase();
    if (cs.max_drop_pps_increase() > 0) o.max_drop_pps_increase = cs.max_drop_pps_increase();
    if (cs.max_utilization_drop() > 0) o.max_utilization_drop = cs.max_utilization_drop();
    o.route_churn_per_minute = copts.change_mode == "shadow" ? 0 : cs.route_churn_per_minute();
  }
  copts.fabric_settings.assign(config.fabric_settings().begin(), config.fabric_settings().end());
  copts.lldp_exclude_unverified = config.lldp().exclude_unverified();
  copts.lldp_check_host_links = config.lldp().check_host_links();
  // Telemetry platform profiles: the shipped ones, then the user's.
  auto load_profiles = [](const loom::v1::LoomdConfig& c, loom::telemetry::ProfileSet* set,
                          std::string* err) {
    std::vector<std::string> dirs;
    const std::string shipped = loom::telemetry::ShippedProfileDir();
    if (shipped.empty()) {
      *err =
          "cannot find the shipped telemetry profiles (telemetry/profiles); set LOOM_PROFILE_DIR";
      return false;
    }
    dirs.push_back(shipped);
    for (const auto& d : c.profile_dirs()) dirs.push_back(d);
    return loom::telemetry::LoadProfiles(dirs, set, err);
  };
  loom::telemetry::ProfileSet profiles;
  if (!load_profiles(config, &profiles, &error)) return Fail(2, error);
  loom::controller::Controller controller(io, clock, *store, index, *registry, copts);
  if (emulator) controller.AddDriver(emulator->driver());

  // Programming over the wire. Two sources of devices, one set of drivers:
  // the device inventory (`bgp` and `set` entries: real switches) and a
  // running loom-fabric's ready file (every leaf over BGP-DPF, every switch
  // over gNMI Set). BGP carries colors, colored routes, weights and NNHN;
  // gNMI Set the DLB/ALB/spray/threshold parts and the routes split by
  // destination QP (BGP-DPF carries one color per prefix); devices with Set
  // alone get everything over Set. Route budgets wrap it all.
  boost::asio::io_context bgp_io;
  std::unique_ptr<boost::asio::steady_timer> bgp_metrics_timer;  // on bgp_io
  std::function<void()> bgp_metrics;
  auto bgp_work = boost::asio::make_work_guard(bgp_io);
  std::unique_ptr<loom::southbound::bgp::Speaker> speaker;
  std::unique_ptr<loom::southbound::bgp::BgpDriver> bgp_driver;
  std::unique_ptr<loom::southbound::gnmi::GnmiDriver> gnmi_driver;
  std::unique_ptr<loom::southbound::gnmi::GnmiDriver> gnmi_full_driver;
  std::unique_ptr<loom::southbound::CompositeDriver> wire_driver;
  std::unique_ptr<loom::southbound::BudgetDriver> wire_budget, full_budget;
  std::thread bgp_thread;
  loom::loomd::Southbound sb;
  if (!config.fabric_ready_file().empty()) {
    std::string text, read_error;
    const bool read = loom::ReadFileCapped(config.fabric_ready_file(), loom::kMaxSmallFileBytes,
                                           "ready file", &text, &read_error);
    google::protobuf::Struct ready;
    if (!read || !google::protobuf::util::JsonStringToMessage(text, &ready).ok() ||
        !ready.fields().count("gnmi_port")) {
      return Fail(2,
                  config.fabric_ready_file() +
                      ": not a loom-fabric ready file (want {\"gnmi_port\": N, \"bgp\": {...}})");
    }
    std::string gnmi =
        "127.0.0.1:" +
        std::to_string(static_cast<int>(ready.fields().at("gnmi_port").number_value()));
    if (config.telemetry_address().empty()) config.set_telemetry_address(gnmi);
    std::map<std::string, uint16_t> leaf_ports;
    if (ready.fields().count("bgp")) {
      for (const auto& [leaf, port] : ready.fields().at("bgp").struct_value().fields()) {
        leaf_ports[leaf] = static_cast<uint16_t>(port.number_value());
      }
    }
    sb.router_id = 0x0a0000fe;
    sb.bgp_sessions = loom::southbound::bgp::LoomPeers(index->topology(), leaf_ports);
    for (const auto& d : index->topology().devices()) {
      if (d.role() == loom::v1::DEVICE_ROLE_LEAF || d.role() == loom::v1::DEVICE_ROLE_SPINE ||
          d.role() == loom::v1::DEVICE_ROLE_SUPER_SPINE) {
        sb.set_with_bgp.push_back({d.id(), gnmi, ""});
      }
    }
  }
  // The device inventory (config devices over device_defaults; the legacy
  // telemetry_address / telemetry_targets become loom-fabric entries).
  auto inventory = std::make_shared<loom::loomd::Inventory>();
  std::mutex inventory_mu;
  if (!loom::loomd::ResolveInventory(config, index->topology(), profiles, inventory.get(),
                                     &error)) {
    return Fail(2, "inventory: " + error);
  }
  {
    loom::loomd::Southbound from_inventory;
    if (!loom::loomd::BuildSouthbound(*inventory, index->topology(), &from_inventory, &error)) {
      return Fail(2, "inventory: " + error);
    }
    std::set<std::string> ready_devices;
    for (const auto& p : sb.bgp_sessions) ready_devices.insert(p.device);
    for (const auto& g : sb.set_with_bgp) ready_devices.insert(g.device);
    std::set<std::string> inventory_devices;
    for (const auto& p : from_inventory.bgp_sessions) inventory_devices.insert(p.device);
    for (const auto* list : {&from_inventory.set_with_bgp, &from_inventory.set_only}) {
      for (const auto& g : *list) inventory_devices.insert(g.device);
    }
    for (const auto* list : {&from_inventory.adapter_with_bgp, &from_inventory.adapter_only}) {
      for (const auto& a : *list) inventory_devices.insert(a.device);
    }
    for (const auto& d : inventory_devices) {
      if (ready_devices.count(d)) {
        return Fail(2, "inventory: device " + d +
                           ": programmed by both the inventory and --fabric-ready-file");
      }
    }
    if (emulator && !inventory_devices.empty()) {
      return Fail(2, "inventory: device " + *inventory_devices.begin() +
                         ": bgp/set entries cannot be used with --emulate (the embedded "
                         "emulator is programmed in-process)");
    }
    // Beside BGP, settings go either to loom-schema gNMI targets or to
    // platform adapters; not both kinds in one run yet.
    if ((!from_inventory.set_with_bgp.empty() || !sb.set_with_bgp.empty()) &&
        !from_inventory.adapter_with_bgp.empty()) {
      return Fail(2, "inventory: device " + from_inventory.adapter_with_bgp[0].device +
                         ": mixing set.adapter loom (or --fabric-ready-file) and platform "
                         "adapters beside BGP is not supported yet");
    }
    for (auto& p : from_inventory.bgp_sessions) sb.bgp_sessions.push_back(std::move(p));
    for (auto& g : from_inventory.set_with_bgp) sb.set_with_bgp.push_back(std::move(g));
    sb.set_only = std::move(from_inventory.set_only);
    sb.adapter_with_bgp = std::move(from_inventory.adapter_with_bgp);
    sb.adapter_only = std::move(from_inventory.adapter_only);
    sb.render_only = std::move(from_inventory.render_only);
    sb.max_prefixes = std::move(from_inventory.max_prefixes);
    if (from_inventory.router_id != 0) sb.router_id = from_inventory.router_id;
  }
  // Placement and the adaptive engine ask each device only for what its
  // drivers can carry.
  const loom::te::DeviceLimitsMap device_limits = loom::loomd::DeviceLimitsOf(sb);
  controller.SetDeviceLimits(device_limits);
  {
    std::set<std::string> tolerant, selective_repeat;
    for (const auto& [id, dev] : inventory->devices) {
      if (dev.nic().reorder_tolerance() == loom::v1::REORDER_TOLERANCE_FULL) tolerant.insert(id);
      if (dev.nic().reorder_tolerance() == loom::v1::REORDER_TOLERANCE_SELECTIVE_REPEAT) {
        selective_repeat.insert(id);
      }
    }
    // The embedded emulator's NICs behave as the inventory says Loom's do.
    if (emulator) {
      for (const auto& [id, dev] : inventory->devices) {
        switch (dev.nic().reorder_tolerance()) {
          case loom::v1::REORDER_TOLERANCE_FULL:
            emulator->SetNicReorder(id, loom::sim::ReorderMode::kTolerant);
            break;
          case loom::v1::REORDER_TOLERANCE_SELECTIVE_REPEAT:
            emulator->SetNicReorder(id, loom::sim::ReorderMode::kSelectiveRepeat);
            break;
          case loom::v1::REORDER_TOLERANCE_NONE:
            emulator->SetNicReorder(id, loom::sim::ReorderMode::kGoBackN);
            break;
          default:
            break;  // unspecified: the scenario's
        }
      }
    }
    controller.SetReorderTolerantNics(std::move(tolerant));
    controller.SetSelectiveRepeatNics(std::move(selective_repeat));
  }
  auto warn_uncarried = [&](const loom::v1::LoomdConfig& c) {
    for (const auto& u : loom::controller::Controller::UncarriedSettings(
             {c.fabric_settings().begin(), c.fabric_settings().end()}, index->topology(),
             device_limits)) {
      LOG_WARN("fabricSettings: not asked of a device whose southbound cannot carry it")
          .With("setting", u);
    }
  };
  warn_uncarried(config);
  if (!sb.set_only.empty()) {
    loom::southbound::gnmi::GnmiDriverConfig gc;
    gc.devices = sb.set_only;
    gc.parts = loom::southbound::gnmi::kGnmiDefaultParts |
               loom::southbound::gnmi::Mask(loom::southbound::gnmi::Part::kColors) |
               loom::southbound::gnmi::Mask(loom::southbound::gnmi::Part::kRoutes) |
               loom::southbound::gnmi::Mask(loom::southbound::gnmi::Part::kWeights);
    gc.report_unowned_parts = true;
    gnmi_full_driver = std::make_unique<loom::southbound::gnmi::GnmiDriver>(gc);
    if (loom::Status s = gnmi_full_driver->Start(); !s.ok())
      return Fail(1, "gNMI driver: " + s.message());
    full_budget =
        std::make_unique<loom::southbound::BudgetDriver>(gnmi_full_driver.get(), sb.max_prefixes);
    controller.AddDriver(full_budget.get());
  }
  // Platform Set adapters (SONiC CONFIG_DB, OpenConfig): beside BGP a driver
  // that gets the settings parts only; alone, a driver that gets everything.
  std::unique_ptr<loom::southbound::gnmi::AdapterSetDriver> adapter_bgp_driver, adapter_only_driver;
  std::unique_ptr<loom::southbound::SettingsOnlyDriver> adapter_settings;
  std::unique_ptr<loom::southbound::BudgetDriver> adapter_budget;
  auto make_adapter_driver =
      [&](const std::vector<loom::southbound::gnmi::AdapterDeviceConfig>& devs)
      -> std::unique_ptr<loom::southbound::gnmi::AdapterSetDriver> {
    loom::southbound::gnmi::AdapterSetDriverConfig ac;
    ac.devices = devs;
    ac.topology = std::make_shared<const loom::v1::Topology>(index->topology());
    auto d = std::make_unique<loom::southbound::gnmi::AdapterSetDriver>(ac);
    if (loom::Status s = d->Start(); !s.ok()) {
      error = s.message();
      return nullptr;
    }
    return d;
  };
  if (!sb.adapter_with_bgp.empty()) {
    adapter_bgp_driver = make_adapter_driver(sb.adapter_with_bgp);
    if (!adapter_bgp_driver) return Fail(2, "inventory: set adapters: " + error);
    adapter_settings =
        std::make_unique<loom::southbound::SettingsOnlyDriver>(adapter_bgp_driver.get());
  }
  if (!sb.adapter_only.empty()) {
    adapter_only_driver = make_adapter_driver(sb.adapter_only);
    if (!adapter_only_driver) return Fail(2, "inventory: set adapters: " + error);
    adapter_budget = std::make_unique<loom::southbound::BudgetDriver>(adapter_only_driver.get(),
                                                                      sb.max_prefixes);
    controller.AddDriver(adapter_budget.get());
  }
  if (!sb.bgp_sessions.empty() || !sb.set_with_bgp.empty()) {
    const loom::southbound::bgp::PrefixPlan plan(index->topology());
    if (!sb.bgp_sessions.empty()) {
      loom::southbound::bgp::SpeakerConfig spc;
      spc.router_id = sb.router_id;
      spc.listen_port = -1;  // loomd dials every device (passive sessions accept on their own)
      // After a restart the OPEN carries R and F, and End-of-RIB waits for
      // the first reconcile (below): helpers keep Loom's stale routes until
      // Loom has re-announced what it still wants, then drop the rest.
      spc.restarting = restarted;
      speaker = std::make_unique<loom::southbound::bgp::Speaker>(bgp_io, spc);
      loom::southbound::bgp::BgpDriverConfig bc;
      bc.sessions = sb.bgp_sessions;
      bc.destination_prefixes = plan.DestinationPrefixes();
      bc.ignore_non_bgp_parts = true;
      bc.router_ids = loom::southbound::bgp::RouterIds(index->topology());  // NNHN
      bc.egress_leaves = plan.EgressLeaves();
      bgp_driver = std::make_unique<loom::southbound::bgp::BgpDriver>(bgp_io, speaker.get(), bc);
    }
    if (!sb.set_with_bgp.empty()) {
      loom::southbound::gnmi::GnmiDriverConfig gc;
      gc.devices = sb.set_with_bgp;
      gc.parts = (loom::southbound::gnmi::kGnmiDefaultParts &
                  ~loom::southbound::gnmi::Mask(loom::southbound::gnmi::Part::kWeights)) |
                 loom::southbound::gnmi::Mask(loom::southbound::gnmi::Part::kRoutes);
      gnmi_driver = std::make_unique<loom::southbound::gnmi::GnmiDriver>(gc);
      if (loom::Status s = gnmi_driver->Start(); !s.ok())
        return Fail(1, "gNMI driver: " + s.message());
    }
    if (bgp_driver) {
      // Session state for the alerts, sampled on the speaker's thread every second.
      auto& session_up = prometheus::BuildGauge()
                             .Name("loom_bgp_session_up")
                             .Help("1 when the BGP session to the device is Established, else 0")
                             .Register(*registry);
      auto& session_flaps = prometheus::BuildGauge()
                                .Name("loom_bgp_session_flaps")
                                .Help("Times the session left Established since loomd started")
                                .Register(*registry);
      bgp_metrics_timer = std::make_unique<boost::asio::steady_timer>(bgp_io);
      bgp_metrics = [&, &session_up = session_up, &session_flaps = session_flaps] {
        for (const auto* sess : speaker->Sessions()) {
          const std::map<std::string, std::string> labels{{"device", sess->config().device},
                                                          {"session", sess->config().name}};
          session_up.Add(labels).Set(
              sess->state() == loom::southbound::bgp::SessionState::kEstablished ? 1 : 0);
          session_flaps.Add(labels).Set(static_cast<double>(sess->counters().flaps));
        }
        bgp_metrics_timer->expires_after(std::chrono::seconds(1));
        bgp_metrics_timer->async_wait([&](const boost::system::error_code& ec) {
          if (!ec) bgp_metrics();
        });
      };
      bgp_thread = std::thread([&bgp_io] { bgp_io.run(); });
      boost::asio::post(bgp_io, [&speaker] { (void)speaker->Start(); });
      boost::asio::post(bgp_io, [&bgp_metrics] { bgp_metrics(); });
      bgp_driver->Start();
    }
    // Settings go to the loom-schema gNMI driver or, for devices with a
    // platform adapter, to the adapter driver (settings parts only); never
    // both (refused above).
    loom::southbound::Driver* settings =
        gnmi_driver ? static_cast<loom::southbound::Driver*>(gnmi_driver.get())
                    : static_cast<loom::southbound::Driver*>(adapter_settings.get());
    wire_driver = std::make_unique<loom::southbound::CompositeDriver>(
        bgp_driver.get(), settings, /*split_routes_to_settings=*/gnmi_driver != nullptr);
    wire_budget =
        std::make_unique<loom::southbound::BudgetDriver>(wire_driver.get(), sb.max_prefixes);
    controller.AddDriver(wire_budget.get());
    LOG_INFO("programming devices over the wire")
        .With("bgp_sessions", static_cast<uint64_t>(sb.bgp_sessions.size()))
        .With("gnmi_set_devices", static_cast<uint64_t>(sb.set_with_bgp.size()));
  }
  bool wire_stopped = false;
  auto stop_wire = [&] {
    if (wire_stopped) return;
    wire_stopped = true;
    if (gnmi_driver) gnmi_driver->Stop();
    if (gnmi_full_driver) gnmi_full_driver->Stop();
    if (adapter_bgp_driver) adapter_bgp_driver->Stop();
    if (adapter_only_driver) adapter_only_driver->Stop();
    if (speaker) {
      std::promise<void> stopped;
      boost::asio::post(bgp_io, [&] {
        // A stopped loomd is usually restarting (upgrade, service restart):
        // close without Cease so the devices keep forwarding on Loom's routes
        // for the graceful-restart time, as after a crash — unless the
        // operator asked for a clean withdrawal.
        speaker->Shutdown(/*for_restart=*/!config.bgp_withdraw_on_shutdown());
        stopped.set_value();
      });
      stopped.get_future().wait();
    }
    bgp_work.reset();
    bgp_io.stop();
    if (bgp_thread.joinable()) bgp_thread.join();
  };
  // Early exits below must still stop the wire drivers' threads.
  struct ScopeExit {
    std::function<void()> f;
    ~ScopeExit() { f(); }
  } wire_guard{stop_wire};
  if (loom::Status s = controller.Start(); !s.ok()) {
    return Fail(1, "cannot start the controller: " + s.message());
  }
  auto work = boost::asio::make_work_guard(io);
  // The controller's periodic work (reconciler applies, retries, drift).
  boost::asio::steady_timer tick_timer(io);
  // Restarting BGP speaker: End-of-RIB once every BGP device got its routes
  // from this process (or after 60 s, so a device that cannot be programmed
  // does not hold the others' stale routes until their restart time).
  std::set<std::string> bgp_devices;
  for (const auto& p : sb.bgp_sessions) bgp_devices.insert(p.device);
  const auto rib_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool rib_ready = !(speaker && speaker->config().restarting);
  auto check_rib_ready = [&] {
    if (rib_ready) return;
    controller.WithReconciler([&](const loom::controller::Reconciler& r) {
      if (rib_ready) return;
      size_t done = 0;
      for (const auto& d : bgp_devices) {
        const auto* sync = r.Sync(d);
        done += sync && sync->applied_generation > 0;
      }
      const bool timed_out = std::chrono::steady_clock::now() > rib_deadline;
      if (done < bgp_devices.size() && !timed_out) return;
      rib_ready = true;
      LOG_INFO("BGP graceful restart: routes re-announced, sending End-of-RIB")
          .With("devices_programmed", static_cast<uint64_t>(done))
          .With("devices", static_cast<uint64_t>(bgp_devices.size()))
          .With("timed_out", timed_out ? "yes" : "no");
      boost::asio::post(bgp_io, [&speaker] { speaker->MarkRibReady(); });
    });
  };
  std::function<void()> schedule_tick = [&] {
    tick_timer.expires_after(std::chrono::milliseconds(50));
    tick_timer.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      controller.Tick();
      check_rib_ready();
      schedule_tick();
    });
  };
  schedule_tick();
  signal_watcher.Checkpoint("state recovered");
  std::thread core([&io] { io.run(); });

  if (!config.policy_path().empty()) {
    std::promise<std::pair<loom::Status, loom::controller::PolicyInstallResult>> installed;
    controller.InstallPolicy(policy, [&](loom::Status s, loom::controller::PolicyInstallResult r) {
      installed.set_value({s, r});
    });
    auto [s, r] = installed.get_future().get();
    if (!s.ok()) {
      work.reset();
      io.stop();
      core.join();
      return Fail(2, "policy " + config.policy_path() + ": " + s.message());
    }
    LOG_INFO("policy file installed")
        .With("file", config.policy_path())
        .With("version", r.version == 0 ? std::string("unchanged") : std::to_string(r.version))
        .With("jobs_moved", static_cast<uint64_t>(r.jobs_moved))
        .With("warnings", r.findings);
  }

  // Telemetry: gNMI dial-in to every switch; decoding runs on the collector's
  // threads, a snapshot thread hands the controller a fresh picture each
  // interval.
  const loom::TimeNs interval = config.telemetry_interval_ms() * loom::kNsPerMs;
  loom::telemetry::LinkStateOptions lopts;
  lopts.staleness.sample_interval_ns = interval;
  lopts.staleness.stale_after_intervals = static_cast<int>(config.telemetry_stale_intervals());
  // A device clock more than a minute ahead of ours is wrong: its samples are rejected
  // (counted as future_timestamp) instead of hiding every later one.
  lopts.future_tolerance_ns = 60 * loom::kNsPerSec;
  // With the emulator, staleness is judged in the emulator's virtual time (its wall
  // clock and the emulated devices' timestamps share one epoch).
  loom::telemetry::LinkTelemetry link_telemetry(*index, lopts,
                                                emulator ? &emulator->clock() : &clock);
  auto apply_aliases = [&](const loom::loomd::Inventory& inv) {
    for (const auto& [id, entry] : inv.devices) {
      std::unordered_map<std::string, std::string> aliases(entry.interface_aliases().begin(),
                                                           entry.interface_aliases().end());
      link_telemetry.SetInterfaceAliases(id, std::move(aliases), entry.lldp_name());
    }
  };
  apply_aliases(*inventory);
  loom::telemetry::CollectorOptions collector_opts;
  collector_opts.stale_after_intervals = static_cast<int>(config.telemetry_stale_intervals());
  if (!loom::loomd::BuildTelemetryTargets(*inventory, index->topology(), profiles, interval,
                                          &collector_opts.targets, &error)) {
    work.reset();
    io.stop();
    core.join();
    return Fail(2, "inventory: " + error);
  }
  loom::telemetry::Collector collector(collector_opts, &link_telemetry, &clock);
  std::mutex snap_mu;
  std::condition_variable snap_cv;
  bool snap_stop = false;
  bool snap_now = false;  // a port's oper-status changed: snapshot without waiting
  link_telemetry.SetOnOperChange([&] {
    {
      std::lock_guard<std::mutex> lock(snap_mu);
      snap_now = true;
    }
    snap_cv.notify_all();
  });
  std::thread snapshots;
  auto& target_gauges = prometheus::BuildGauge()
                            .Name("loom_telemetry_targets")
                            .Help("gNMI targets by state (connected, synced, down)")
                            .Register(*registry);
  auto& target_errors = prometheus::BuildCounter()
                            .Name("loom_telemetry_stream_errors_total")
                            .Help("gNMI streams that failed or broke, summed over targets")
                            .Register(*registry)
                            .Add({});
  auto& silent_cuts = prometheus::BuildCounter()
                          .Name("loom_telemetry_silent_stream_cuts_total")
                          .Help(
                              "gNMI subscription groups cut for silence (no update within their "
                              "liveness window) and redialled, summed over targets")
                          .Register(*registry)
                          .Add({});
  // Per gNMI target (device): 1 when its streams are connected and synced, and
  // the age of its last notification.
  auto& target_up = prometheus::BuildGauge()
                        .Name("loom_telemetry_target_up")
                        .Help("1 when the device's gNMI streams are connected and synced, else 0")
                        .Register(*registry);
  auto& target_age = prometheus::BuildGauge()
                         .Name("loom_telemetry_last_update_age_seconds")
                         .Help(
                             "Seconds since the device's last gNMI notification (no series "
                             "before the first)")
                         .Register(*registry);
  std::map<std::string, std::pair<prometheus::Gauge*, prometheus::Gauge*>> target_series;
  auto& signal_gauges =
      prometheus::BuildGauge()
          .Name("loom_telemetry_signals")
          .Help("Device telemetry signals by state (live, stale, unavailable, pending)")
          .Register(*registry);
  auto& reject_gauge = prometheus::BuildCounter()
                           .Name("loom_telemetry_subscribe_rejects_total")
                           .Help(
                               "Subscribe requests targets rejected (bad path, mode, origin), "
                               "summed over targets")
                           .Register(*registry)
                           .Add({});
  // Every interval: hand the controller a fresh link snapshot and publish the
  // collector's target health.
  uint64_t errors_seen = 0, rejects_seen = 0, cuts_seen = 0;
  auto snapshot_loop = [&] {
    std::unique_lock<std::mutex> lock(snap_mu);
    auto last = std::chrono::steady_clock::now();
    while (!snap_cv.wait_for(lock, std::chrono::nanoseconds(interval), [&] {
      return snap_stop || snap_now;
    }) || !snap_stop) {
      // Oper-status changes wake the loop, at most one snapshot per 5 ms (a flapping
      // or hostile port cannot make it spin).
      const auto gap = std::chrono::milliseconds(5) - (std::chrono::steady_clock::now() - last);
      if (snap_now && gap.count() > 0) {
        snap_cv.wait_for(lock, gap, [&] { return snap_stop; });
        if (snap_stop) break;
      }
      snap_now = false;
      last = std::chrono::steady_clock::now();
      lock.unlock();
      controller.OnLinkSnapshot(
          std::make_shared<const loom::telemetry::LinkSnapshot>(link_telemetry.Snapshot()));
      int connected = 0, synced = 0, down = 0;
      uint64_t errors = 0, rejects = 0, cuts = 0;
      std::set<std::string> present;
      const loom::TimeNs now = clock.Now();
      std::map<std::pair<std::string, std::string>, int> by_state;
      for (const auto& sig : loom::telemetry::CatalogueSignals()) {
        for (const char* st : {"live", "stale", "unavailable", "pending"}) by_state[{sig, st}] = 0;
      }
      for (const auto& h : collector.Health()) {
        connected += h.connected;
        synced += h.synced;
        down += !h.connected;
        errors += h.stream_errors;
        rejects += h.subscribe_rejects;
        cuts += h.silent_cuts;
        present.insert(h.name);
        auto& [up, age] = target_series[h.name];
        if (up == nullptr) up = &target_up.Add({{"device", h.name}});
        up->Set(h.connected && h.synced ? 1 : 0);
        if (h.last_update_ns >= 0) {
          if (age == nullptr) age = &target_age.Add({{"device", h.name}});
          age->Set(static_cast<double>(std::max<loom::TimeNs>(0, now - h.last_update_ns)) /
                   loom::kNsPerSec);
        }
        for (const auto& sh : h.signals) {
          ++by_state[{sh.signal, loom::telemetry::SignalStateName(sh.state)}];
        }
      }
      target_gauges.Add({{"state", "connected"}}).Set(connected);
      target_gauges.Add({{"state", "synced"}}).Set(synced);
      target_gauges.Add({{"state", "down"}}).Set(down);
      // The collector's sums only grow (a removed target's streams are gone, its
      // counts with it: then nothing is added until the sum passes the last one).
      auto advance = [](prometheus::Counter& c, uint64_t& seen, uint64_t value) {
        if (value > seen) c.Increment(static_cast<double>(value - seen));
        seen = std::max(seen, value);
      };
      advance(target_errors, errors_seen, errors);
      advance(reject_gauge, rejects_seen, rejects);
      advance(silent_cuts, cuts_seen, cuts);
      for (auto it = target_series.begin(); it != target_series.end();) {
        if (present.count(it->first)) {
          ++it;
          continue;
        }
        target_up.Remove(it->second.first);
        if (it->second.second) target_age.Remove(it->second.second);
        it = target_series.erase(it);
      }
      for (const auto& [key, n] : by_state) {
        signal_gauges.Add({{"signal", key.first}, {"state", key.second}}).Set(n);
      }
      lock.lock();
    }
  };
  // Started even without targets, so that a SIGHUP reload can add some.
  signal_watcher.Checkpoint("telemetry targets built");
  if (loom::Status s = collector.Start(); !s.ok()) {
    work.reset();
    io.stop();
    core.join();
    return Fail(2, "telemetry: " + s.message());
  }
  if (!collector_opts.targets.empty()) {
    snapshots = std::thread(snapshot_loop);
    LOG_INFO("telemetry collector started")
        .With("targets", static_cast<uint64_t>(collector_opts.targets.size()))
        .With("interval_ms", static_cast<uint64_t>(config.telemetry_interval_ms()));
  }
  if (emulator) {
    // Register the scenario's jobs as a scheduler would (idempotent across
    // restarts through the request id), then start the traffic.
    for (const auto& job : emulator->Jobs()) {
      loom::v1::RegisterJobRequest req;
      *req.mutable_job() = job;
      req.set_request_id("embedded-" + job.job_id());
      std::promise<loom::Status> registered;
      controller.RegisterJob(
          req, [&](loom::Status s, loom::v1::RegisterJobResponse) { registered.set_value(s); });
      loom::Status s = registered.get_future().get();
      if (!s.ok() && s.code() != loom::StatusCode::kAlreadyExists) {
        LOG_WARN("embedded emulator: job not registered")
            .With("job", job.job_id())
            .With("error", s.message());
      }
    }
    if (loom::Status s = emulator->Start(&link_telemetry, interval); !s.ok()) {
      {
        std::lock_guard<std::mutex> lock(snap_mu);
        snap_stop = true;
      }
      snap_cv.notify_all();
      if (snapshots.joinable()) snapshots.join();
      collector.Stop();
      work.reset();
      io.stop();
      core.join();
      return Fail(2, "embedded emulator: " + s.message());
    }
    if (!snapshots.joinable()) snapshots = std::thread(snapshot_loop);
    LOG_INFO("embedded emulator running")
        .With("scenario", config.emulate_scenario())
        .With("jobs", static_cast<uint64_t>(emulator->Jobs().size()));
  }
  auto stop_telemetry = [&] {
    {
      std::lock_guard<std::mutex> lock(snap_mu);
      snap_stop = true;
    }
    snap_cv.notify_all();
    if (snapshots.joinable()) snapshots.join();
    collector.Stop();
    if (emulator) emulator->Stop();
    stop_wire();
    link_telemetry.SetOnOperChange(nullptr);
  };

  // Authentication, authorization and audit (docs/security.md). The metrics are
  // declared first: the audit log's writer thread (held by the services' guard)
  // counts into them until it stops.
  loom::api::AuthMetrics auth_metrics(*registry);
  loom::api::ServiceOptions sopts;
  sopts.watch_buffer_bytes = size_t{config.watch_buffer_kib()} << 10;
  std::shared_ptr<loom::api::AuditLog> audit;
  if (loom::Status s =
          loom::api::AuditLog::Open(config.auth().audit_log_path(), &auth_metrics, &audit);
      !s.ok()) {
    stop_telemetry();
    work.reset();
    io.stop();
    core.join();
    return Fail(2, s.message());
  }
  sopts.guard = std::make_shared<loom::api::ApiGuard>(&controller, audit, &auth_metrics);
  if (config.has_auth()) {
    std::shared_ptr<const loom::api::AuthPolicy> policy;
    if (loom::Status s = loom::api::AuthPolicy::Create(config.auth(), &policy); !s.ok()) {
      stop_telemetry();
      work.reset();
      io.stop();
      core.join();
      return Fail(2, s.message());
    }
    sopts.guard->SetPolicy(std::move(policy));
  } else {
    LOG_WARN(
        "API authorization is off: every caller may do everything (configure \"auth\", "
        "docs/security.md)");
  }
  {
    std::string host;
    int port = 0;
    if (loom::loomd::SplitHostPort(config.grpc_listen(), &host, &port) &&
        !loom::IsLoopbackHost(host) && config.tls().cert_path().empty()) {
      LOG_WARN(
          "serving the gRPC API in plaintext on a non-loopback address (--insecure): "
          "anyone on the network can read and forge its calls")
          .With("address", config.grpc_listen());
    }
  }
  // Previews (`loomctl render DEVICE --adapter sonic`) use the inventory's
  // next hops: each BGP session's `via` -> `next_hop` is the address the
  // device forwards to.
  sopts.adapter_context = [&](const std::string& device,
                              loom::southbound::gnmi::AdapterContext* ctx) {
    std::shared_ptr<loom::loomd::Inventory> inv;
    {
      std::lock_guard<std::mutex> lock(inventory_mu);
      inv = inventory;
    }
    auto it = inv->devices.find(device);
    if (it == inv->devices.end()) return;
    for (const auto& cs : it->second.bgp().sessions()) {
      if (!cs.next_hop().empty()) ctx->next_hop_addresses[cs.via()] = cs.next_hop();
    }
    if (!it->second.gnmi().target_name().empty()) ctx->target = it->second.gnmi().target_name();
  };
  const bool embedded = emulator != nullptr;
  sopts.list_devices = [&, embedded](const std::string& device) {
    std::shared_ptr<loom::loomd::Inventory> inv;
    {
      std::lock_guard<std::mutex> lock(inventory_mu);
      inv = inventory;
    }
    return loom::loomd::DeviceStatuses(*inv, index->topology(), collector.Health(), clock.Now(),
                                       embedded, device);
  };
  // The metrics port: /metrics, the live fabric view and its JSON
  // (api/services/http_server.h). Collectables are held weakly: they outlive it.
  auto process_collector = loom::api::MakeProcessCollector();
  loom::api::HttpServerOptions hopts;
  hopts.list_devices = sopts.list_devices;
  hopts.security = config.metrics_security();  // TLS / auth (checked by LoadConfig)
  loom::api::HttpServer http(controller, *registry, {registry, process_collector}, hopts);
  if (loom::Status s = http.Start(config.metrics_listen()); !s.ok()) {
    stop_telemetry();
    work.reset();
    io.stop();
    core.join();
    return Fail(1, "cannot listen for metrics on " + config.metrics_listen() + ": " + s.message());
  }
  const int metrics_port = http.port();

  loom::api::ApiServer server(controller, *registry, sopts);
  signal_watcher.Checkpoint("southbound and telemetry started");
  if (loom::Status s = server.Start(config.grpc_listen(), config.tls()); !s.ok()) {
    stop_telemetry();
    http.Stop();
    work.reset();
    io.stop();
    core.join();
    return Fail(1, s.message());
  }

  ready_gauge.Set(1);
  LOG_INFO("loomd serving")
      .With("version", LOOM_VERSION)
      .With("grpc_port", server.port())
      .With("metrics_port", metrics_port)
      .With("topology", index->topology().name())
      .With("devices", index->topology().devices_size())
      .With("links", index->topology().links_size())
      .With("database", config.database_path())
      .With("tls", config.tls().cert_path().empty() ? "off" : "on")
      .With("authorization", config.has_auth() ? "on" : "off");
  if (!config.ready_file().empty()) {
    std::string tmp = config.ready_file() + ".tmp";
    {
      std::ofstream out(tmp);
      out << "{\"grpc_port\":" << server.port() << ",\"metrics_port\":" << metrics_port
          << ",\"pid\":" << getpid() << "}\n";
    }
    std::rename(tmp.c_str(), config.ready_file().c_str());
  }

  int sig = 0;
  for (;;) {
    sig = signal_watcher.Wait();
    if (sig != SIGHUP) break;
    // Reload: the inventory (and profiles) from the same command line and
    // config file. Unchanged targets keep their streams.
    loom::v1::LoomdConfig fresh;
    std::string err;
    loom::telemetry::ProfileSet fresh_profiles;
    auto inv = std::make_shared<loom::loomd::Inventory>();
    std::vector<loom::telemetry::TargetConfig> targets;
    if (loom::loomd::LoadConfig(argc, argv, &fresh, &err) != loom::loomd::ConfigResult::kOk) {
      LOG_ERROR("reload refused: configuration").With("error", err);
      continue;
    }
    // The loom-fabric ready file's gNMI server is not in the config file.
    if (!config.fabric_ready_file().empty() && fresh.telemetry_address().empty()) {
      fresh.set_telemetry_address(config.telemetry_address());
    }
    if (!loom::loomd::ValidateChangeConfig(fresh, index->topology(), &err)) {
      LOG_ERROR("reload refused: configuration").With("error", err);
      continue;
    }
    if (fresh.change_mode() != config.change_mode() ||
        !google::protobuf::util::MessageDifferencer::Equals(fresh.change_safety(),
                                                            config.change_safety())) {
      LOG_WARN("reload: changeMode / changeSafety changed; they take effect when loomd restarts");
    }
    if (!load_profiles(fresh, &fresh_profiles, &err) ||
        !loom::loomd::ResolveInventory(fresh, index->topology(), fresh_profiles, inv.get(), &err) ||
        !loom::loomd::BuildTelemetryTargets(*inv, index->topology(), fresh_profiles, interval,
                                            &targets, &err)) {
      LOG_ERROR("reload refused: inventory").With("error", err);
      continue;
    }
    {
      // Programming (bgp / set) is built at start-up only: say so when it changed.
      std::lock_guard<std::mutex> lock(inventory_mu);
      for (const auto& [id, entry] : inv->devices) {
        auto old = inventory->devices.find(id);
        const bool same =
            old != inventory->devices.end() &&
            google::protobuf::util::MessageDifferencer::Equals(old->second.bgp(), entry.bgp()) &&
            google::protobuf::util::MessageDifferencer::Equals(old->second.set(), entry.set()) &&
            old->second.route_budget().max_prefixes() == entry.route_budget().max_prefixes();
        if (!same) {
          LOG_WARN(
              "reload: the bgp / set / route_budget part of a device changed; it takes effect "
              "when loomd restarts (telemetry changes apply now)")
              .With("device", id);
        }
      }
    }
    const bool had_targets = !collector.Health().empty();
    if (loom::Status s = collector.UpdateTargets(std::move(targets)); !s.ok()) {
      LOG_ERROR("reload refused: telemetry").With("error", s.message());
      continue;
    }
    apply_aliases(*inv);
    {
      std::lock_guard<std::mutex> lock(inventory_mu);
      // Devices that lost their source: forget what their old one did not serve.
      for (const auto& [id, entry] : inventory->devices) {
        auto now = inv->devices.find(id);
        if (entry.gnmi().address().empty() ||
            (now != inv->devices.end() && !now->second.gnmi().address().empty())) {
          continue;
        }
        for (const auto& sig : loom::telemetry::CatalogueSignals()) {
          loom::telemetry::SignalAvailability a;
          a.target = id;
          a.signal = sig;
          link_telemetry.OnSignalAvailability(a);
        }
      }
      inventory = inv;
    }
    warn_uncarried(fresh);
    if (fresh.has_auth()) {
      std::shared_ptr<const loom::api::AuthPolicy> policy;
      if (loom::Status s = loom::api::AuthPolicy::Create(fresh.auth(), &policy); s.ok()) {
        sopts.guard->SetPolicy(std::move(policy));
      } else {  // a key file changed between LoadConfig's check and now
        LOG_ERROR("reload: auth refused; keeping the previous bindings and keys")
            .With("error", s.message());
      }
      if (fresh.auth().audit_log_path() != config.auth().audit_log_path()) {
        LOG_WARN("reload: auth.audit_log_path changes at the next restart");
      }
    } else if (config.has_auth()) {
      LOG_WARN(
          "reload: \"auth\" removed from the configuration; keeping the bindings loaded "
          "at start (restart loomd to turn authorization off)");
    }
    controller.SetFabricSettings({fresh.fabric_settings().begin(), fresh.fabric_settings().end()});
    if (!had_targets && !snapshots.joinable()) snapshots = std::thread(snapshot_loop);
    LOG_INFO("configuration reloaded (SIGHUP)")
        .With("devices_with_telemetry", static_cast<uint64_t>(collector.Health().size()));
  }
  LOG_INFO("shutting down").With("signal", sig == SIGINT ? "SIGINT" : "SIGTERM");
  ready_gauge.Set(0);
  // Within kShutdownBound: the API gets 1 s to finish what is in flight, then
  // every call (watch streams included) is cancelled.
  const auto shutdown_start = std::chrono::steady_clock::now();
  auto ms_since = [&] {
    return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::steady_clock::now() - shutdown_start)
                                    .count());
  };
  server.Shutdown(std::chrono::milliseconds(1000));
  LOG_INFO("api stopped").With("ms", ms_since());
  http.Stop();
  LOG_INFO("metrics port stopped").With("ms", ms_since());
  stop_telemetry();
  work.reset();
  io.stop();
  core.join();
  store.reset();
  LOG_INFO("loomd stopped").With("ms", ms_since());
  return 0;
}
