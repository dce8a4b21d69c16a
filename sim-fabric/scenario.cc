#include "sim-fabric/scenario.h"

#include <cmath>
#include <fstream>
#include <initializer_list>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "api/proto_util/number_ranges.h"
#include "api/topology/topology_generate.h"
#include "api/topology/topology_io.h"
#include "common/file.h"
#include "common/flags.h"
#include "google/protobuf/util/json_util.h"

namespace loom::sim {

namespace {

bool ReadFile(const std::string& path, std::string* out, std::string* error) {
  return ReadFileCapped(path, kMaxScenarioFileBytes, "scenario file", out, error);
}

std::string DirOf(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Ranges of the scenario's numbers (0 = "default" wherever the proto says so).
// Every double must be finite; a number outside its range is refused with its
// path ("scenario.jobs[2].message_bytes: nan is not a finite number").
constexpr double kNs1s = 1e9, kNsDay = 86400e9, kBytes = 1e12, kVolume = 1e15, kBps = 1e13;
const std::vector<loom::proto_util::NumberRange> kScenarioRanges = {
    {"loom.sim.v1.RailShape.hosts", 0, 1'000'000},
    {"loom.sim.v1.RailShape.hosts_per_stripe", 0, 65536},
    {"loom.sim.v1.RailShape.spines", 0, 65536},
    {"loom.sim.v1.RailShape.links_per_spine", 0, 64},
    {"loom.sim.v1.RailShape.gpus_per_host", 0, 64},
    {"loom.sim.v1.RailShape.propagation_delay_ns", 0, kNs1s},
    {"loom.sim.v1.Engine.step_ns", 0, kNs1s},
    {"loom.sim.v1.Engine.duration_ns", 0, kNsDay},
    {"loom.sim.v1.Engine.sample_ns", 0, kNsDay},
    {"loom.sim.v1.Engine.mtu_bytes", 0, 9216},
    {"loom.sim.v1.Engine.switch_latency_ns", 0, kNs1s},
    {"loom.sim.v1.EcnBySpeed.kmin_bytes", 0, kBytes},
    {"loom.sim.v1.EcnBySpeed.kmax_bytes", 0, kBytes},
    {"loom.sim.v1.EcnBySpeed.pmax", 0, 1},
    {"loom.sim.v1.QueueSettings.buffer_bytes", 0, kBytes},
    {"loom.sim.v1.QueueSettings.ecn_kmin_bytes", 0, kBytes},
    {"loom.sim.v1.QueueSettings.ecn_kmax_bytes", 0, kBytes},
    {"loom.sim.v1.QueueSettings.ecn_pmax", 0, 1},
    {"loom.sim.v1.QueueSettings.pfc_xoff_bytes", 0, kBytes},
    {"loom.sim.v1.QueueSettings.pfc_xon_bytes", 0, kBytes},
    {"loom.sim.v1.QueueSettings.pfc_headroom_bytes", 0, kBytes},
    {"loom.sim.v1.QueueSettings.pfc_dynamic_alpha", 0, 1024},
    {"loom.sim.v1.QueueSettings.watchdog_poll_ns", 0, kNsDay},
    {"loom.sim.v1.QueueSettings.watchdog_detection_ns", 0, kNsDay},
    {"loom.sim.v1.QueueSettings.watchdog_restoration_ns", 0, kNsDay},
    {"loom.sim.v1.SwitchMode.flowlet_inactivity_ns", 0, kNs1s},
    {"loom.sim.v1.SwitchMode.alb_buckets", 0, 65536},
    {"loom.sim.v1.Color.color", 0, 4095},
    {"loom.sim.v1.Color.backup_color", 0, 4095},
    {"loom.sim.v1.Job.rank_count", 0, 1'000'000},
    {"loom.sim.v1.Job.message_bytes", 0, kVolume},
    {"loom.sim.v1.Job.qps_per_connection", 0, 1024},
    {"loom.sim.v1.Job.iterations", 0, 1'000'000},
    {"loom.sim.v1.Job.compute_gap_ns", 0, kNsDay},
    {"loom.sim.v1.Job.start_ns", 0, kNsDay},
    {"loom.sim.v1.Job.priority", 0, 7},
    {"loom.sim.v1.Job.color", 0, 4095},
    {"loom.sim.v1.Flow.bytes", 0, kVolume},
    {"loom.sim.v1.Flow.start_ns", 0, kNsDay},
    {"loom.sim.v1.Flow.priority", 0, 7},
    {"loom.sim.v1.Fault.at_ns", 0, kNsDay},
    {"loom.sim.v1.Fault.capacity_factor", 0, 1},
    {"loom.sim.v1.Fault.error_rate", 0, 1},
    {"loom.sim.v1.Fault.priority", 0, 7},
    {"loom.sim.v1.Fault.period_ns", 0, kNsDay},
    {"loom.sim.v1.Fault.count", 0, 1'000'000},
    {"loom.sim.v1.DcqcnOverride.rai_bps", 0, kBps},
    {"loom.sim.v1.DcqcnOverride.rhai_bps", 0, kBps},
    {"loom.sim.v1.DcqcnOverride.g", 0, 1},
    {"loom.sim.v1.DcqcnOverride.t_ns", 0, kNsDay},
    {"loom.sim.v1.DcqcnOverride.k_ns", 0, kNsDay},
    {"loom.sim.v1.DcqcnOverride.b_bytes", 0, kBytes},
    {"loom.sim.v1.DcqcnOverride.f", 0, 1000},
    {"loom.sim.v1.DcqcnOverride.min_rate_bps", 0, kBps},
    {"loom.sim.v1.DcqcnOverride.cnp_interval_ns", 0, kNs1s},
    {"loom.sim.v1.DcqcnOverride.decrease_interval_ns", 0, kNs1s},
    {"loom.sim.v1.DcqcnOverride.first_cnp_rate_fraction", 0, 1},
};

}  // namespace

bool ParseScenarioJson(const std::string& json, const std::string& base_dir, LoadedScenario* out,
                       std::string* error) {
  google::protobuf::util::JsonParseOptions po;
  auto st = google::protobuf::util::JsonStringToMessage(json, &out->spec, po);
  if (!st.ok()) {
    *error = "scenario: " + std::string(st.message());
    return false;
  }
  if (!loom::proto_util::CheckNumberRanges(out->spec, "scenario", kScenarioRanges, error)) {
    return false;
  }
  const auto& s = out->spec;
  int sources =
      (s.topology_file().empty() ? 0 : 1) + (s.has_topology() ? 1 : 0) + (s.has_rail() ? 1 : 0);
  if (sources != 1) {
    *error = "scenario: give exactly one of topology_file, topology, rail";
    return false;
  }
  if (!s.topology_file().empty()) {
    std::string path = s.topology_file();
    if (path[0] != '/') path = base_dir + "/" + path;
    if (!loom::topology::LoadTopologyFile(path, &out->topology, error)) return false;
  } else if (s.has_topology()) {
    out->topology = s.topology();
    auto errs = loom::topology::ValidateTopology(out->topology);
    if (!errs.empty()) {
      *error = "scenario.topology: " + loom::topology::FormatErrors(errs, "", "");
      return false;
    }
  } else {
    loom::topology::RailParams rp;
    const auto& r = s.rail();
    if (r.hosts()) rp.hosts = r.hosts();
    if (r.hosts_per_stripe()) rp.hosts_per_stripe = r.hosts_per_stripe();
    if (r.spines()) rp.spines = r.spines();
    if (r.links_per_spine()) rp.links_per_spine = r.links_per_spine();
    if (r.gpus_per_host()) rp.host.gpus_per_host = rp.host.nics_per_host = r.gpus_per_host();
    if (r.propagation_delay_ns() < 0) {
      *error = "scenario.rail.propagation_delay_ns: must be >= 0";
      return false;
    }
    if (r.propagation_delay_ns() > 0) rp.propagation_delay_ns = r.propagation_delay_ns();
    if (!r.nic_speed().empty() && !ParseBitRate(r.nic_speed(), &rp.host.nic_speed_bps)) {
      *error = "scenario.rail.nic_speed: not a bit rate";
      return false;
    }
    if (!r.uplink_speed().empty() && !ParseBitRate(r.uplink_speed(), &rp.uplink_speed_bps)) {
      *error = "scenario.rail.uplink_speed: not a bit rate";
      return false;
    }
    rp.name = s.name().empty() ? "rail" : s.name();
    if (!loom::topology::GenerateRail(rp, &out->topology, error)) return false;
  }
  const auto& e = s.engine();
  FabricOptions& o = out->options;
  if (e.step_ns() > 0) o.step_ns = e.step_ns();
  if (e.seed() > 0) o.seed = e.seed();
  if (e.duration_ns() > 0) out->duration_ns = e.duration_ns();
  if (e.sample_ns() > 0) out->sample_ns = e.sample_ns();
  if (!e.dcqcn_preset().empty() && !DcqcnPresetByName(e.dcqcn_preset(), &o.dcqcn)) {
    *error = "scenario.engine.dcqcn_preset: unknown '" + e.dcqcn_preset() +
             "', want paper, ns3-mlx or vendor";
    return false;
  }
  o.dcqcn.enabled = !e.dcqcn_disabled();
  if (e.mtu_bytes() != 0) {
    if (!(e.mtu_bytes() >= 256 && e.mtu_bytes() <= 9216)) {
      *error = "scenario.engine.mtu_bytes: want 256..9216";
      return false;
    }
    o.mtu_bytes = e.mtu_bytes();
  }
  if (!e.routing().empty() && e.routing() != "static" && e.routing() != "up-down") {
    *error = "scenario.engine.routing: unknown '" + e.routing() + "', want static or up-down";
    return false;
  }
  if (e.switch_latency_ns() < 0) {
    *error = "scenario.engine.switch_latency_ns: must be >= 0";
    return false;
  }
  o.switch_latency_ns = e.switch_latency_ns();
  std::set<std::string> endpoints;
  for (const auto& d : out->topology.devices()) {
    if (d.role() == loom::v1::DEVICE_ROLE_NIC) endpoints.insert(d.id());
  }
  for (const auto& g : out->topology.gpus()) endpoints.insert(g.id());
  for (int i = 0; i < s.flows_size(); ++i) {
    const auto& fl = s.flows(i);
    const std::string where = "scenario.flows[" + std::to_string(i) + "]";
    for (const auto& [field, id] : {std::pair<const char*, std::string>{"src", fl.src()},
                                    std::pair<const char*, std::string>{"dst", fl.dst()}}) {
      if (!endpoints.count(id)) {
        *error = where + "." + field + ": no NIC or GPU '" + id + "' in the topology";
        return false;
      }
    }
    if (fl.src() == fl.dst()) {
      *error = where + ".dst: same as src";
      return false;
    }
    if (!(fl.bytes() > 0)) {
      *error = where + ".bytes: must be > 0";
      return false;
    }
    if (fl.start_ns() < 0) {
      *error = where + ".start_ns: must be >= 0";
      return false;
    }
    if (fl.priority() < 0 || fl.priority() >= kPriorities) {
      *error = where + ".priority: 0..7";
      return false;
    }
  }
  if (e.nic_reorder() == "tolerant") {
    o.nic_reorder = ReorderMode::kTolerant;
  } else if (e.nic_reorder() == "selective-repeat") {
    o.nic_reorder = ReorderMode::kSelectiveRepeat;
  } else if (e.nic_reorder().empty() || e.nic_reorder() == "go-back-n") {
    o.nic_reorder = ReorderMode::kGoBackN;
  } else {
    *error = "scenario.engine.nic_reorder: unknown '" + e.nic_reorder() +
             "', want go-back-n, selective-repeat or tolerant";
    return false;
  }
  o.switch_defaults.pfc.enabled = !e.pfc_disabled();
  for (auto& ecn : o.switch_defaults.ecn) ecn.enabled = !e.ecn_disabled();
  for (int i = 0; i < s.jobs_size(); ++i) {
    Collective c;
    if (!ParseCollective(s.jobs(i).collective(), &c)) {
      *error = "scenario.jobs[" + std::to_string(i) + "].collective: unknown '" +
               s.jobs(i).collective() + "'";
      return false;
    }
  }
  for (int i = 0; i < s.faults_size(); ++i) {
    FaultKind k;
    if (!ParseFaultKind(s.faults(i).kind(), &k)) {
      *error =
          "scenario.faults[" + std::to_string(i) + "].kind: unknown '" + s.faults(i).kind() + "'";
      return false;
    }
  }
  for (int i = 0; i < s.switch_modes_size(); ++i) {
    ForwardingMode m;
    if (!s.switch_modes(i).mode().empty() && !ParseForwardingMode(s.switch_modes(i).mode(), &m)) {
      *error = "scenario.switch_modes[" + std::to_string(i) + "].mode: unknown '" +
               s.switch_modes(i).mode() + "'";
      return false;
    }
  }
  return true;
}

bool LoadScenarioFile(const std::string& path, LoadedScenario* out, std::string* error) {
  std::string text;
  if (!ReadFile(path, &text, error)) return false;
  if (!ParseScenarioJson(text, DirOf(path), out, error)) {
    *error = path + ": " + *error;
    return false;
  }
  return true;
}

namespace {

bool Check(const Status& s, const std::string& where, std::string* error) {
  if (s.ok()) return true;
  *error = where + ": " + s.message();
  return false;
}

}  // namespace

std::unique_ptr<Fabric> BuildScenarioFabric(const LoadedScenario& sc, std::string* error) {
  auto fab = Fabric::Create(sc.topology, sc.options, error);
  if (!fab) return nullptr;
  const auto& s = sc.spec;
  for (int i = 0; i < s.queues_size(); ++i) {
    const auto& q = s.queues(i);
    const std::string dev = q.device().empty() ? "*" : q.device();
    const std::string where = "queues[" + std::to_string(i) + "]";
    const SwitchConfig* base = nullptr;
    if (dev == "*") {
      for (const auto& d : fab->Devices()) {
        if ((base = fab->GetSwitchConfig(d))) break;
      }
    } else {
      base = fab->GetSwitchConfig(dev);
    }
    if (!base) {
      *error = where + ": no switch " + dev;
      return nullptr;
    }
    SwitchConfig cfg = *base;
    for (int p = 0; p < kPriorities; ++p) {
      EcnConfig e = cfg.ecn[p];
      if (q.ecn_kmin_bytes() > 0) e.kmin_bytes = q.ecn_kmin_bytes();
      if (q.ecn_kmax_bytes() > 0) e.kmax_bytes = q.ecn_kmax_bytes();
      if (q.ecn_pmax() > 0) e.pmax = q.ecn_pmax();
      if (q.ecn_by_speed_size() > 0) e.by_speed.clear();
      for (int k = 0; k < q.ecn_by_speed_size(); ++k) {
        const auto& b = q.ecn_by_speed(k);
        EcnSpeedThresholds t;
        int64_t bps = 0;
        if (!ParseBitRate(b.speed(), &bps) || bps <= 0) {
          *error = where + ".ecn_by_speed[" + std::to_string(k) + "].speed: not a bit rate";
          return nullptr;
        }
        t.speed_bps = static_cast<double>(bps);
        t.kmin_bytes = b.kmin_bytes();
        t.kmax_bytes = b.kmax_bytes();
        t.pmax = b.pmax();
        e.by_speed.push_back(t);
      }
      if (!Check(fab->SetEcn(dev, p, e), where, error)) return nullptr;
    }
    PfcConfig pfc = cfg.pfc;
    if (q.pfc_xoff_bytes() > 0) pfc.xoff_bytes = q.pfc_xoff_bytes();
    if (q.pfc_xon_bytes() > 0) pfc.xon_bytes = q.pfc_xon_bytes();
    if (q.pfc_headroom_bytes() > 0) pfc.headroom_bytes = q.pfc_headroom_bytes();
    if (q.pfc_dynamic_alpha() > 0) pfc.dynamic_alpha = q.pfc_dynamic_alpha();
    if (q.lossless_priorities_size() > 0) {
      pfc.lossless_mask = 0;
      for (int p : q.lossless_priorities()) {
        if (p < 0 || p >= kPriorities) {
          *error = where + ".lossless_priorities: 0..7";
          return nullptr;
        }
        pfc.lossless_mask |= static_cast<uint8_t>(1u << p);
      }
    }
    // The buffer and the headroom it must hold are one check: apply the PFC settings first
    // (with the old buffer) and then the buffer, or the other way round when the new
    // headroom only fits the new buffer.
    Status pst = fab->SetPfc(dev, pfc);
    if (pst.ok()) {
      if (q.buffer_bytes() != 0 &&
          !Check(fab->SetBuffer(dev, q.buffer_bytes()), where + ".buffer_bytes", error)) {
        return nullptr;
      }
    } else {
      if (q.buffer_bytes() == 0) {
        *error = where + ": " + pst.message();
        return nullptr;
      }
      if (!Check(fab->SetBuffer(dev, q.buffer_bytes()), where + ".buffer_bytes", error) ||
          !Check(fab->SetPfc(dev, pfc), where, error)) {
        return nullptr;
      }
    }
    if (q.watchdog()) {
      WatchdogConfig wd;
      wd.enabled = true;
      if (q.watchdog_poll_ns() > 0) wd.poll_ns = q.watchdog_poll_ns();
      if (q.watchdog_detection_ns() > 0) wd.detection_ns = q.watchdog_detection_ns();
      if (q.watchdog_restoration_ns() > 0) wd.restoration_ns = q.watchdog_restoration_ns();
      if (q.watchdog_action() == "forward") {
        wd.action = WatchdogAction::kForward;
      } else if (q.watchdog_action() == "alert") {
        wd.action = WatchdogAction::kAlert;
      } else if (q.watchdog_action().empty() || q.watchdog_action() == "drop") {
        wd.action = WatchdogAction::kDrop;
      } else {
        *error = where + ".watchdog_action: unknown '" + q.watchdog_action() +
                 "', want drop, forward or alert";
        return nullptr;
      }
      if (!Check(fab->SetWatchdog(dev, wd), where, error)) return nullptr;
    }
    (void)cfg;
  }
  for (int i = 0; i < s.switch_modes_size(); ++i) {
    const auto& m = s.switch_modes(i);
    const std::string where = "switch_modes[" + std::to_string(i) + "]";
    const std::string dev = m.device().empty() ? "*" : m.device();
    ForwardingMode mode = ForwardingMode::kStaticHash;
    const bool has_mode = !m.mode().empty();
    if (has_mode && !ParseForwardingMode(m.mode(), &mode)) {
      *error = where + ".mode: unknown '" + m.mode() + "'";
      return nullptr;
    }
    if (m.hash_dest_qp() && !Check(fab->SetHashDestQp(dev, true), where, error)) return nullptr;
    if (m.flowlet_inactivity_ns() > 0) {
      DlbProfile prof;
      prof.inactivity_ns = m.flowlet_inactivity_ns();
      if (!Check(fab->SetDlbProfile(dev, prof), where, error)) return nullptr;
    }
    if (m.spray_priorities_size() > 0) {
      uint8_t mask = 0;
      for (int p : m.spray_priorities()) {
        if (p < 0 || p >= kPriorities) {
          *error = where + ".spray_priorities: 0..7, got " + std::to_string(p);
          return nullptr;
        }
        mask |= static_cast<uint8_t>(1u << p);
      }
      if (!Check(fab->SetSprayPriorities(dev, mask), where, error)) return nullptr;
    }
    if (m.dest().empty()) {
      if (has_mode && !Check(fab->SetForwardingMode(dev, mode), where, error)) return nullptr;
      continue;
    }
    if (has_mode && mode == ForwardingMode::kDlbAlb &&
        !Check(fab->SetGroupMode(dev, m.dest(), mode), where, error)) {
      return nullptr;
    }
    if (has_mode && (mode == ForwardingMode::kAlb || mode == ForwardingMode::kDlbAlb)) {
      // The group's bucket table (dlb-alb: its shared flowset table; the mode stays).
      if (!Check(fab->InitAlbTable(dev, m.dest(), m.alb_buckets() > 0 ? m.alb_buckets() : 256),
                 where, error)) {
        return nullptr;
      }
    } else if (has_mode && !Check(fab->SetGroupMode(dev, m.dest(), mode), where, error)) {
      return nullptr;
    }
    if (m.weights_size() > 0) {
      std::map<std::string, double> w(m.weights().begin(), m.weights().end());
      if (!Check(fab->SetEcmpWeights(dev, m.dest(), w), where, error)) return nullptr;
    }
  }
  for (int i = 0; i < s.static_routes_size(); ++i) {
    const auto& r = s.static_routes(i);
    const std::string where = "static_routes[" + std::to_string(i) + "]";
    if (r.interfaces_size() == 0) {
      *error = where + ".interfaces: at least one";
      return nullptr;
    }
    if (!Check(fab->SetStaticRoute(r.device(), r.dest(),
                                   {r.interfaces().begin(), r.interfaces().end()}),
               where, error)) {
      return nullptr;
    }
  }
  fab->SetUpDownRouting(s.engine().routing() == "up-down");
  for (int i = 0; i < s.colors_size(); ++i) {
    const auto& c = s.colors(i);
    ColorConfig cc;
    cc.interfaces.assign(c.interfaces().begin(), c.interfaces().end());
    cc.backup_color = c.backup_color();
    if (!Check(fab->SetColor(c.device(), c.color(), cc), "colors[" + std::to_string(i) + "]",
               error)) {
      return nullptr;
    }
  }
  for (int i = 0; i < s.dcqcn_size(); ++i) {
    const auto& d = s.dcqcn(i);
    DcqcnParams p = sc.options.dcqcn;
    for (const auto& [field, v] : std::initializer_list<std::pair<const char*, double>>{
             {"rai_bps", d.rai_bps()},
             {"rhai_bps", d.rhai_bps()},
             {"g", d.g()},
             {"t_ns", static_cast<double>(d.t_ns())},
             {"k_ns", static_cast<double>(d.k_ns())},
             {"f", static_cast<double>(d.f())},
             {"min_rate_bps", d.min_rate_bps()},
             {"first_cnp_rate_fraction", d.first_cnp_rate_fraction()}}) {
      if (v < 0) {
        *error = "dcqcn[" + std::to_string(i) + "]." + field + ": must be >= 0 (0 = keep)";
        return nullptr;
      }
    }
    if (d.rai_bps() > 0) p.rai_bps = d.rai_bps();
    if (d.rhai_bps() > 0) p.rhai_bps = d.rhai_bps();
    if (d.g() > 0) p.g = d.g();
    if (d.t_ns() > 0) p.t_ns = d.t_ns();
    if (d.k_ns() > 0) p.k_ns = d.k_ns();
    if (d.has_b_bytes()) p.b_bytes = d.b_bytes();
    if (d.f() > 0) p.f = d.f();
    if (d.min_rate_bps() > 0) p.min_rate_bps = d.min_rate_bps();
    if (d.has_cnp_interval_ns()) p.cnp_interval_ns = d.cnp_interval_ns();
    if (d.has_clamp_target_rate()) p.clamp_target_rate = d.clamp_target_rate();
    if (d.has_decrease_interval_ns()) p.decrease_interval_ns = d.decrease_interval_ns();
    if (d.has_alpha_per_interval()) p.alpha_per_interval = d.alpha_per_interval();
    if (d.has_hyper_increase_scaled()) p.hyper_increase_scaled = d.hyper_increase_scaled();
    if (d.first_cnp_rate_fraction() > 0) p.first_cnp_rate_fraction = d.first_cnp_rate_fraction();
    std::string bad;
    if (p.b_bytes < 0) bad = "b_bytes < 0";
    if (p.cnp_interval_ns < 0) bad = "cnp_interval_ns < 0";
    if (p.decrease_interval_ns < 0) bad = "decrease_interval_ns < 0";
    if (p.first_cnp_rate_fraction > 1) bad = "first_cnp_rate_fraction > 1";
    if (!bad.empty()) {
      *error = "dcqcn[" + std::to_string(i) + "]: " + bad;
      return nullptr;
    }
    if (!Check(fab->SetDcqcn(d.nic().empty() ? "*" : d.nic(), p),
               "dcqcn[" + std::to_string(i) + "]", error)) {
      return nullptr;
    }
  }
  std::vector<std::string> all_gpus;
  for (const auto& g : sc.topology.gpus()) all_gpus.push_back(g.id());
  for (int i = 0; i < s.jobs_size(); ++i) {
    const auto& j = s.jobs(i);
    JobSpec js;
    js.id = j.id().empty() ? "job" + std::to_string(i) : j.id();
    js.tenant = j.tenant();
    ParseCollective(j.collective(), &js.collective);
    js.ranks.assign(j.ranks().begin(), j.ranks().end());
    if (js.ranks.empty()) {
      size_t n = all_gpus.size();
      if (j.rank_count() > 0) n = std::min(n, static_cast<size_t>(j.rank_count()));
      js.ranks.assign(all_gpus.begin(), all_gpus.begin() + static_cast<long>(n));
    }
    if (j.message_bytes() > 0) js.message_bytes = j.message_bytes();
    if (j.qps_per_connection() > 0) js.qps_per_connection = j.qps_per_connection();
    js.iterations = j.iterations();
    js.compute_gap_ns = j.compute_gap_ns();
    js.start_ns = j.start_ns();
    if (j.priority() > 0) js.priority = j.priority();
    js.color = j.color();
    if (!j.max_rate().empty()) {
      int64_t bps = 0;
      if (!ParseBitRate(j.max_rate(), &bps)) {
        *error = "jobs[" + std::to_string(i) + "].max_rate: not a bit rate";
        return nullptr;
      }
      js.max_rate_bps = static_cast<double>(bps);
    }
    std::string err;
    if (fab->AddJob(js, &err) < 0) {
      *error = "jobs[" + std::to_string(i) + "]: " + err;
      return nullptr;
    }
  }
  for (int i = 0; i < s.faults_size(); ++i) {
    const auto& f = s.faults(i);
    FaultSpec fs;
    ParseFaultKind(f.kind(), &fs.kind);
    fs.at_ns = f.at_ns();
    fs.target = f.target();
    if (f.capacity_factor() > 0) fs.capacity_factor = f.capacity_factor();
    fs.error_rate = f.error_rate();
    if (f.priority() > 0) fs.priority = f.priority();
    fs.period_ns = f.period_ns();
    if (f.count() > 0) fs.count = f.count();
    if (!Check(fab->ScheduleFault(fs), "faults[" + std::to_string(i) + "]", error)) return nullptr;
  }
  return fab;
}

}  // namespace loom::sim
