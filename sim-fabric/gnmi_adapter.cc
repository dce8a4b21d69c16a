#include "sim-fabric/gnmi_adapter.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <string_view>
#include <utility>

#include "telemetry/path.h"

namespace loom::sim {
namespace {

// ------------------------------------------------------------------ catalogue

constexpr const char* kIfLeaves[] = {"oper-status",           "counters/in-octets",
                                     "counters/out-octets",   "counters/in-pkts",
                                     "counters/out-pkts",     "counters/in-discards",
                                     "counters/out-discards", "counters/in-errors",
                                     "counters/out-errors",   "counters/carrier-transitions"};
constexpr const char* kQosLeaves[] = {"transmit-pkts", "transmit-octets", "dropped-pkts",
                                      "ecn-marked-pkts", "max-queue-len"};
constexpr const char* kLoomQosLeaves[] = {"current-queue-len"};
// Operational port speed as a number (OpenConfig's ethernet/state/port-speed and
// negotiated-port-speed are enumerations such as SPEED_400GB).
constexpr const char* kLoomEthLeaves[] = {"operational-speed-bps"};
constexpr const char* kPfcLeaves[] = {"state/rx-pkts", "state/tx-pkts",
                                      "state/rx-pause-duration-us", "state/tx-pause-duration-us"};
constexpr const char* kWatchdogLeaves[] = {"watchdog/state/status",
                                           "watchdog/state/deadlock-detected",
                                           "watchdog/state/deadlock-restored"};
constexpr const char* kNicLeaves[] = {"np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled",
                                      "rp_cnp_ignored", "out_of_sequence", "packet_seq_err",
                                      "local_ack_timeout_err",
                                      // loom transmit-burst leaves (no mlx5 equivalent)
                                      "tx_bursts", "tx_idle_ns", "tx_max_spacing_ns"};
constexpr const char* kAlbLeaves[] = {"transmit-pkts", "transmit-octets", "next-hop"};
// Per destination NIC: what the NIC's QPs sent to it (loom leaf; demand measurement).
constexpr const char* kPeerLeaves[] = {"tx-octets"};

enum class ContainerType : uint8_t { kIf, kLoomEth, kQos, kLoomQos, kPfc, kNic, kAlb, kPeer };

gnmi::PathElem Elem(const std::string& name) {
  gnmi::PathElem e;
  e.set_name(name);
  return e;
}
gnmi::PathElem Elem(const std::string& name, const std::string& key, const std::string& value) {
  gnmi::PathElem e;
  e.set_name(name);
  (*e.mutable_key())[key] = value;
  return e;
}

gnmi::Path RelPath(std::string_view text) {
  gnmi::Path p;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('/', start);
    if (end == std::string_view::npos) end = text.size();
    p.add_elem()->set_name(std::string(text.substr(start, end - start)));
    start = end + 1;
  }
  return p;
}

gnmi::Path IfPrefix(const std::string& ifc) {
  gnmi::Path p;
  *p.add_elem() = Elem("interfaces");
  *p.add_elem() = Elem("interface", "name", ifc);
  *p.add_elem() = Elem("state");
  return p;
}
gnmi::Path LoomEthPrefix(const std::string& ifc) {
  gnmi::Path p;
  p.set_origin("loom");
  *p.add_elem() = Elem("interfaces");
  *p.add_elem() = Elem("interface", "name", ifc);
  *p.add_elem() = Elem("ethernet");
  *p.add_elem() = Elem("state");
  return p;
}
gnmi::Path QosPrefix(const std::string& ifc, int q, bool loom) {
  gnmi::Path p;
  if (loom) p.set_origin("loom");
  *p.add_elem() = Elem("qos");
  *p.add_elem() = Elem("interfaces");
  *p.add_elem() = Elem("interface", "interface-id", ifc);
  *p.add_elem() = Elem("output");
  *p.add_elem() = Elem("queues");
  *p.add_elem() = Elem("queue", "name", std::to_string(q));
  *p.add_elem() = Elem("state");
  return p;
}
gnmi::Path PfcPrefix(const std::string& ifc, int prio) {
  gnmi::Path p;
  p.set_origin("loom");
  *p.add_elem() = Elem("pfc");
  *p.add_elem() = Elem("interfaces");
  *p.add_elem() = Elem("interface", "name", ifc);
  *p.add_elem() = Elem("priorities");
  *p.add_elem() = Elem("priority", "id", std::to_string(prio));
  return p;
}
gnmi::Path NicPrefix(const std::string& ifc) {
  gnmi::Path p;
  p.set_origin("loom");
  *p.add_elem() = Elem("nic");
  *p.add_elem() = Elem("interfaces");
  *p.add_elem() = Elem("interface", "name", ifc);
  *p.add_elem() = Elem("roce");
  *p.add_elem() = Elem("state");
  return p;
}
gnmi::Path PeerPrefix(const std::string& ifc, const std::string& peer) {
  gnmi::Path p;
  p.set_origin("loom");
  *p.add_elem() = Elem("nic");
  *p.add_elem() = Elem("interfaces");
  *p.add_elem() = Elem("interface", "name", ifc);
  *p.add_elem() = Elem("roce");
  *p.add_elem() = Elem("peers");
  *p.add_elem() = Elem("peer", "nic", peer);
  *p.add_elem() = Elem("state");
  return p;
}
gnmi::Path AlbPrefix(const std::string& group, int bucket) {
  gnmi::Path p;
  p.set_origin("loom");
  *p.add_elem() = Elem("alb");
  *p.add_elem() = Elem("groups");
  *p.add_elem() = Elem("group", "name", group);
  *p.add_elem() = Elem("buckets");
  *p.add_elem() = Elem("bucket", "id", std::to_string(bucket));
  *p.add_elem() = Elem("state");
  return p;
}

LeafKind KindOf(ContainerType t, std::string_view leaf) {
  if (leaf == "oper-status" || leaf == "watchdog/state/status" || leaf == "next-hop") {
    return LeafKind::kState;
  }
  if (t == ContainerType::kLoomEth) return LeafKind::kState;  // changes rarely: ON_CHANGE
  if (t == ContainerType::kQos && leaf == "max-queue-len") return LeafKind::kPeak;
  // Max spacing of the NIC's latest burst: the peak over a sample interval's ticks.
  if (t == ContainerType::kNic && leaf == "tx_max_spacing_ns") return LeafKind::kPeak;
  if (t == ContainerType::kLoomQos) return LeafKind::kGauge;
  return LeafKind::kCounter;
}

// Appends a container and its leaves to `schema`.
template <size_t N>
void AddContainer(DeviceSchema* schema, gnmi::Path prefix, ContainerType t,
                  const char* const (&leaves)[N]) {
  DeviceSchema::Container c;
  c.prefix = std::move(prefix);
  c.first_leaf = static_cast<int>(schema->leaves.size());
  c.leaf_count = static_cast<int>(N);
  const int ci = static_cast<int>(schema->containers.size());
  schema->containers.push_back(std::move(c));
  for (const char* l : leaves) {
    DeviceSchema::Leaf leaf;
    leaf.rel = RelPath(l);
    leaf.kind = KindOf(t, l);
    leaf.container = ci;
    schema->leaves.push_back(std::move(leaf));
  }
}

// ------------------------------------------------------------------ matching

bool ElemMatches(const gnmi::PathElem& p, const gnmi::PathElem& c) {
  if (p.name() != "*" && p.name() != c.name()) return false;
  for (const auto& [k, v] : p.key()) {
    auto it = c.key().find(k);
    if (it == c.key().end()) return false;
    if (v != "*" && it->second != "*" && v != it->second) return false;
  }
  return true;
}

// True when pattern elements [pi..] match a prefix of `full` from fi (the
// pattern selects a subtree); "..." matches any number of elements.
bool PrefixMatch(const gnmi::Path& pat, int pi, const std::vector<const gnmi::PathElem*>& full,
                 size_t fi) {
  if (pi == pat.elem_size()) return true;
  const gnmi::PathElem& pe = pat.elem(pi);
  if (pe.name() == "...") {
    if (pi + 1 < pat.elem_size() && pat.elem(pi + 1).name() == "...") {
      return PrefixMatch(pat, pi + 1, full, fi);  // "..." "..." == "..."
    }
    for (size_t k = fi; k <= full.size(); ++k) {
      if (PrefixMatch(pat, pi + 1, full, k)) return true;
    }
    return false;
  }
  if (fi == full.size()) return false;
  return ElemMatches(pe, *full[fi]) && PrefixMatch(pat, pi + 1, full, fi + 1);
}

bool SameOrigin(const std::string& a, const std::string& b) {
  const bool oa = telemetry::IsOpenConfigOrigin(a), ob = telemetry::IsOpenConfigOrigin(b);
  return oa || ob ? oa == ob : a == b;
}

bool LeafMatches(const gnmi::Path& pattern, const DeviceSchema& schema, int leaf,
                 std::vector<const gnmi::PathElem*>* scratch) {
  const DeviceSchema::Leaf& l = schema.leaves[leaf];
  const DeviceSchema::Container& c = schema.containers[l.container];
  if (!SameOrigin(pattern.origin(), c.prefix.origin())) return false;
  scratch->clear();
  for (const auto& e : c.prefix.elem()) scratch->push_back(&e);
  for (const auto& e : l.rel.elem()) scratch->push_back(&e);
  return PrefixMatch(pattern, 0, *scratch, 0);
}

bool HasWildcard(const gnmi::Path& p) {
  for (const auto& e : p.elem()) {
    if (e.name() == "*" || e.name() == "...") return true;
    for (const auto& kv : e.key()) {
      if (kv.second == "*") return true;
    }
  }
  return false;
}

const std::vector<gnmi::Path>& CatalogueTemplates() {
  static const std::vector<gnmi::Path>* templates = [] {
    auto* v = new std::vector<gnmi::Path>;
    for (const std::string& text : CatalogueLeafPaths()) {
      gnmi::Path p;
      (void)telemetry::ParsePath(text, &p);
      v->push_back(std::move(p));
    }
    return v;
  }();
  return *templates;
}

void SetValue(const LeafValue& v, gnmi::TypedValue* out) {
  if (v.is_string) {
    out->set_string_val(v.s);
  } else {
    out->set_uint_val(v.u);
  }
}

LeafValue U(uint64_t u) {
  LeafValue v;
  v.u = u;
  return v;
}
LeafValue S(const char* s) {
  LeafValue v;
  v.is_string = true;
  v.s = s;
  return v;
}
LeafValue S(const std::string& s) {
  LeafValue v;
  v.is_string = true;
  v.s = s;
  return v;
}

// Limits that keep a hostile request cheap (matching is O(subscriptions x
// leaves), "..." backtracks over at most kMaxPathElems elements).
constexpr int kMaxPathElems = 32;
constexpr int kMaxPaths = 256;

Status CheckPathSize(const gnmi::Path& p, const std::string& text) {
  if (p.elem_size() > kMaxPathElems) {
    return InvalidArgument("path " + text.substr(0, 200) + " has more than " +
                           std::to_string(kMaxPathElems) + " elements");
  }
  return Status::Ok();
}

// Resolves the device set of a request's prefix target: "" or "*" = all.
Status ResolveTargets(const FabricSnapshot& snap, const std::string& target,
                      std::vector<int>* out) {
  out->clear();
  if (target.empty() || target == "*") {
    for (size_t i = 0; i < snap.schemas.size(); ++i) out->push_back(static_cast<int>(i));
    return Status::Ok();
  }
  const int d = snap.Find(target);
  if (d < 0) return NotFound("unknown target \"" + target + "\" (not a device of this fabric)");
  out->push_back(d);
  return Status::Ok();
}

}  // namespace

// ------------------------------------------------------------------ catalogue API

std::vector<std::string> CatalogueLeafPaths() {
  std::vector<std::string> out;
  const std::string itf = "/interfaces/interface[name=*]/state/";
  for (const char* l : kIfLeaves) out.push_back(itf + l);
  for (const char* l : kLoomEthLeaves) {
    out.push_back(std::string("loom:/interfaces/interface[name=*]/ethernet/state/") + l);
  }
  const std::string q =
      "/qos/interfaces/interface[interface-id=*]/output/queues/queue[name=*]/state/";
  for (const char* l : kQosLeaves) out.push_back(q + l);
  for (const char* l : kLoomQosLeaves) out.push_back("loom:" + q + l);
  const std::string pfc = "loom:/pfc/interfaces/interface[name=*]/priorities/priority[id=*]/";
  for (const char* l : kPfcLeaves) out.push_back(pfc + l);
  for (const char* l : kWatchdogLeaves) out.push_back(pfc + l);
  const std::string nic = "loom:/nic/interfaces/interface[name=*]/roce/state/";
  for (const char* l : kNicLeaves) out.push_back(nic + l);
  const std::string peer = "loom:/nic/interfaces/interface[name=*]/roce/peers/peer[nic=*]/state/";
  for (const char* l : kPeerLeaves) out.push_back(peer + l);
  const std::string alb = "loom:/alb/groups/group[name=*]/buckets/bucket[id=*]/state/";
  for (const char* l : kAlbLeaves) out.push_back(alb + l);
  return out;
}

bool InCatalogue(const gnmi::Path& path) {
  std::vector<const gnmi::PathElem*> full;
  for (const gnmi::Path& t : CatalogueTemplates()) {
    if (!SameOrigin(path.origin(), t.origin())) continue;
    full.clear();
    for (const auto& e : t.elem()) full.push_back(&e);
    if (PrefixMatch(path, 0, full, 0)) return true;
  }
  return false;
}

int FabricSnapshot::Find(const std::string& device) const {
  if (!device_index) return -1;
  auto it = device_index->find(device);
  return it == device_index->end() ? -1 : it->second;
}

// ------------------------------------------------------------------ SnapshotBuilder

struct SnapshotBuilder::DeviceState {
  std::string name;
  bool is_switch = false;
  bool is_nic = false;
  std::vector<std::string> ifaces;
  std::vector<std::string> alb_groups;
  std::vector<int> alb_sizes;
  // NICs: the destination NICs with a peers container (grows as QPs appear).
  std::vector<std::string> peers;
  std::shared_ptr<const DeviceSchema> schema;
  // Per container: what to read.
  struct Source {
    ContainerType type = ContainerType::kIf;
    int iface = 0;
    int index = 0;  // queue, priority, ALB group
    int bucket = 0;
  };
  std::vector<Source> sources;
  // Per switch queue (iface * 8 + q): watermark tracking.
  std::vector<uint64_t> prev_wm, prev_depth, observed;

  void Build() {
    auto s = std::make_shared<DeviceSchema>();
    s->device = name;
    s->is_switch = is_switch;
    s->alb_groups = alb_groups;
    s->alb_sizes = alb_sizes;
    sources.clear();
    for (size_t i = 0; i < ifaces.size(); ++i) {
      const int ii = static_cast<int>(i);
      AddContainer(s.get(), IfPrefix(ifaces[i]), ContainerType::kIf, kIfLeaves);
      sources.push_back({ContainerType::kIf, ii, 0, 0});
      // Right after kIf: Capture() reads its value from the same InterfaceCounters.
      AddContainer(s.get(), LoomEthPrefix(ifaces[i]), ContainerType::kLoomEth, kLoomEthLeaves);
      sources.push_back({ContainerType::kLoomEth, ii, 0, 0});
      if (is_switch) {
        for (int q = 0; q < kPriorities; ++q) {
          AddContainer(s.get(), QosPrefix(ifaces[i], q, false), ContainerType::kQos, kQosLeaves);
          sources.push_back({ContainerType::kQos, ii, q, 0});
          AddContainer(s.get(), QosPrefix(ifaces[i], q, true), ContainerType::kLoomQos,
                       kLoomQosLeaves);
          sources.push_back({ContainerType::kLoomQos, ii, q, 0});
        }
      }
      for (int p = 0; p < kPriorities; ++p) {
        if (is_switch) {
          static constexpr const char* kAll[] = {
              kPfcLeaves[0],      kPfcLeaves[1],      kPfcLeaves[2],     kPfcLeaves[3],
              kWatchdogLeaves[0], kWatchdogLeaves[1], kWatchdogLeaves[2]};
          AddContainer(s.get(), PfcPrefix(ifaces[i], p), ContainerType::kPfc, kAll);
        } else {
          AddContainer(s.get(), PfcPrefix(ifaces[i], p), ContainerType::kPfc, kPfcLeaves);
        }
        sources.push_back({ContainerType::kPfc, ii, p, 0});
      }
      if (is_nic && i == 0) {
        AddContainer(s.get(), NicPrefix(ifaces[i]), ContainerType::kNic, kNicLeaves);
        sources.push_back({ContainerType::kNic, ii, 0, 0});
      }
    }
    for (size_t k = 0; k < peers.size() && !ifaces.empty(); ++k) {
      AddContainer(s.get(), PeerPrefix(ifaces[0], peers[k]), ContainerType::kPeer, kPeerLeaves);
      sources.push_back({ContainerType::kPeer, 0, static_cast<int>(k), 0});
    }
    for (size_t g = 0; g < alb_groups.size(); ++g) {
      for (int b = 0; b < alb_sizes[g]; ++b) {
        AddContainer(s.get(), AlbPrefix(alb_groups[g], b), ContainerType::kAlb, kAlbLeaves);
        sources.push_back({ContainerType::kAlb, 0, static_cast<int>(g), b});
      }
    }
    schema = std::move(s);
  }
};

SnapshotBuilder::SnapshotBuilder(const Fabric& fabric, GnmiOptions options)
    : fabric_(fabric), options_(options) {
  if (options_.tick_ns <= 0) options_.tick_ns = kNsPerMs;
  if (options_.epoch_ns <= 0) {
    options_.epoch_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  }
  auto index = std::make_shared<std::unordered_map<std::string, int>>();
  for (const std::string& dev : fabric_.Devices()) {
    auto st = std::make_unique<DeviceState>();
    st->name = dev;
    st->is_switch = fabric_.GetSwitchConfig(dev) != nullptr;
    NicCounters nc;
    st->is_nic = !st->is_switch && fabric_.GetNicCounters(dev, &nc).ok();
    st->ifaces = fabric_.Interfaces(dev);
    if (st->is_switch) {
      const size_t nq = st->ifaces.size() * kPriorities;
      st->prev_wm.assign(nq, 0);
      st->prev_depth.assign(nq, 0);
      st->observed.assign(nq, 0);
    }
    (*index)[dev] = static_cast<int>(devices_.size());
    devices_.push_back(std::move(st));
  }
  device_index_ = std::move(index);
  RescanAlb();
  for (auto& d : devices_) d->Build();
}

SnapshotBuilder::~SnapshotBuilder() = default;

void SnapshotBuilder::RescanAlb() {
  std::vector<const std::string*> switches;
  for (const auto& d : devices_) {
    if (d->is_switch) switches.push_back(&d->name);
  }
  std::vector<AlbBucketCounters> buckets;
  for (auto& d : devices_) {
    if (!d->is_switch) continue;
    std::vector<std::string> groups;
    std::vector<int> sizes;
    for (const std::string* dest : switches) {
      if (fabric_.GetAlbCounters(d->name, *dest, &buckets).ok() && !buckets.empty()) {
        groups.push_back(*dest);
        sizes.push_back(static_cast<int>(buckets.size()));
      }
    }
    if (groups != d->alb_groups || sizes != d->alb_sizes) {
      d->alb_groups = std::move(groups);
      d->alb_sizes = std::move(sizes);
      if (d->schema) d->Build();
    }
  }
  next_alb_scan_ = fabric_.now() + options_.alb_rescan_ns;
}

void SnapshotBuilder::Observe() {
  QueueCounters qc;
  for (auto& d : devices_) {
    if (!d->is_switch) continue;
    for (size_t i = 0; i < d->ifaces.size(); ++i) {
      for (int q = 0; q < kPriorities; ++q) {
        if (!fabric_.GetQueueCounters(d->name, d->ifaces[i], q, &qc).ok()) continue;
        uint64_t& o = d->observed[i * kPriorities + q];
        o = std::max(o, qc.current_depth_bytes);
      }
    }
  }
}

std::shared_ptr<const FabricSnapshot> SnapshotBuilder::OnStep() {
  const TimeNs now = fabric_.now();
  if (options_.watermark_poll_ns > 0 && now >= next_observe_) {
    Observe();
    next_observe_ = now + options_.watermark_poll_ns;
  }
  if (now < next_tick_) return nullptr;
  return Capture();
}

std::shared_ptr<const FabricSnapshot> SnapshotBuilder::Capture() {
  const TimeNs now = fabric_.now();
  if (now >= next_alb_scan_) RescanAlb();
  if (seq_ == 0) next_tick_ = now;
  while (next_tick_ <= now) next_tick_ += options_.tick_ns;

  auto snap = std::make_shared<FabricSnapshot>();
  snap->virtual_ns = now;
  snap->timestamp_ns = options_.epoch_ns + now;
  snap->seq = ++seq_;
  snap->device_index = device_index_;
  snap->schemas.reserve(devices_.size());
  snap->values.resize(devices_.size());

  InterfaceCounters ic;
  QueueCounters qc;
  PfcCounters pc;
  WatchdogCounters wc;
  NicCounters nc;
  std::vector<std::vector<AlbBucketCounters>> alb;
  std::vector<PeerCounters> peers;
  for (size_t di = 0; di < devices_.size(); ++di) {
    DeviceState& d = *devices_[di];
    peers.clear();
    if (d.is_nic) {
      // Destinations only ever appear (QPs are never removed): a new one rebuilds the
      // schema, sessions recompile their subscriptions against it.
      (void)fabric_.GetNicPeerCounters(d.name, &peers);
      if (peers.size() != d.peers.size()) {
        d.peers.clear();
        for (const PeerCounters& p : peers) d.peers.push_back(p.peer_nic);
        d.Build();
      }
    }
    // ALB tables may have been replaced or removed since the last scan.
    alb.assign(d.alb_groups.size(), {});
    bool alb_changed = false;
    for (size_t g = 0; g < d.alb_groups.size(); ++g) {
      if (!fabric_.GetAlbCounters(d.name, d.alb_groups[g], &alb[g]).ok() ||
          static_cast<int>(alb[g].size()) != d.alb_sizes[g]) {
        alb_changed = true;
      }
    }
    if (alb_changed) {
      RescanAlb();
      alb.assign(d.alb_groups.size(), {});
      for (size_t g = 0; g < d.alb_groups.size(); ++g) {
        (void)fabric_.GetAlbCounters(d.name, d.alb_groups[g], &alb[g]);
        alb[g].resize(static_cast<size_t>(d.alb_sizes[g]));
      }
    }
    std::vector<LeafValue>& v = snap->values[di];
    v.reserve(d.schema->leaves.size());
    for (const DeviceState::Source& src : d.sources) {
      const std::string& ifc = d.ifaces.empty() ? d.name : d.ifaces[src.iface];
      switch (src.type) {
        case ContainerType::kIf: {
          ic = InterfaceCounters();
          (void)fabric_.GetInterfaceCounters(d.name, ifc, &ic);
          v.push_back(S(ic.oper_up ? "UP" : "DOWN"));
          for (uint64_t x :
               {ic.in_octets, ic.out_octets, ic.in_pkts, ic.out_pkts, ic.in_discards,
                ic.out_discards, ic.in_errors, ic.out_errors, ic.carrier_transitions}) {
            v.push_back(U(x));
          }
          break;
        }
        case ContainerType::kLoomEth:
          // Follows the kIf container of the same interface: `ic` is current.
          // The current (possibly degraded, Fabric::DegradeLink) speed.
          v.push_back(U(ic.capacity_bps <= 0 ? 0 : static_cast<uint64_t>(ic.capacity_bps + 0.5)));
          break;
        case ContainerType::kQos: {
          qc = QueueCounters();
          (void)fabric_.GetQueueCounters(d.name, ifc, src.index, &qc);
          const size_t qi = static_cast<size_t>(src.iface) * kPriorities + src.index;
          uint64_t peak =
              qc.watermark_bytes > d.prev_wm[qi]
                  ? qc.watermark_bytes
                  : std::max({qc.current_depth_bytes, d.prev_depth[qi], d.observed[qi]});
          d.prev_wm[qi] = qc.watermark_bytes;
          d.prev_depth[qi] = qc.current_depth_bytes;
          d.observed[qi] = 0;
          for (uint64_t x :
               {qc.transmit_pkts, qc.transmit_octets, qc.dropped_pkts, qc.ecn_marked_pkts, peak}) {
            v.push_back(U(x));
          }
          break;
        }
        case ContainerType::kLoomQos:
          // Follows the kQos container of the same queue: `qc` is current.
          v.push_back(U(qc.current_depth_bytes));
          break;
        case ContainerType::kPfc: {
          pc = PfcCounters();
          (void)fabric_.GetPfcCounters(d.name, ifc, src.index, &pc);
          for (uint64_t x :
               {pc.rx_pkts, pc.tx_pkts, pc.rx_pause_duration_us, pc.tx_pause_duration_us}) {
            v.push_back(U(x));
          }
          if (d.is_switch) {
            wc = WatchdogCounters();
            (void)fabric_.GetWatchdogCounters(d.name, ifc, src.index, &wc);
            v.push_back(S(wc.state == WatchdogState::kStormed ? "stormed" : "operational"));
            v.push_back(U(wc.deadlock_detected));
            v.push_back(U(wc.deadlock_restored));
          }
          break;
        }
        case ContainerType::kNic: {
          nc = NicCounters();
          (void)fabric_.GetNicCounters(d.name, &nc);
          for (uint64_t x : {nc.np_ecn_marked_roce_packets, nc.np_cnp_sent, nc.rp_cnp_handled,
                             nc.rp_cnp_ignored, nc.out_of_sequence, uint64_t{0}, uint64_t{0},
                             nc.tx_bursts, nc.tx_idle_ns, nc.tx_max_spacing_ns}) {
            v.push_back(U(x));
          }
          break;
        }
        case ContainerType::kPeer:
          v.push_back(U(static_cast<size_t>(src.index) < peers.size() ? peers[src.index].tx_bytes
                                                                      : uint64_t{0}));
          break;
        case ContainerType::kAlb: {
          const AlbBucketCounters& b = alb[src.index][src.bucket];
          v.push_back(U(b.pkts));
          v.push_back(U(b.bytes));
          v.push_back(S(b.member));
          break;
        }
      }
    }
    snap->schemas.push_back(d.schema);
  }
  return snap;
}

// ------------------------------------------------------------------ GnmiSession

Status CheckEncoding(int encoding) {
  switch (encoding) {
    case gnmi::JSON:
    case gnmi::JSON_IETF:
    case gnmi::PROTO:
      return Status::Ok();
    case gnmi::BYTES:
    case gnmi::ASCII:
      return Status(StatusCode::kUnimplemented,
                    "encoding " + gnmi::Encoding_Name(static_cast<gnmi::Encoding>(encoding)) +
                        " is not supported (supported: JSON, JSON_IETF, PROTO)");
    default:
      return InvalidArgument("unknown encoding " + std::to_string(encoding));
  }
}

Status GnmiSession::Create(const gnmi::SubscriptionList& list, const FabricSnapshot& snap,
                           const GnmiOptions& options, std::unique_ptr<GnmiSession>* out) {
  if (list.mode() != gnmi::SubscriptionList::STREAM &&
      list.mode() != gnmi::SubscriptionList::ONCE && list.mode() != gnmi::SubscriptionList::POLL) {
    return InvalidArgument("SubscriptionList.mode " + std::to_string(list.mode()) +
                           " is not STREAM, ONCE or POLL");
  }
  if (list.subscription_size() == 0) {
    return InvalidArgument("SubscriptionList.subscription is empty");
  }
  if (list.subscription_size() > kMaxPaths) {
    return InvalidArgument("SubscriptionList has more than " + std::to_string(kMaxPaths) +
                           " subscriptions");
  }
  Status s = CheckEncoding(list.encoding());
  if (!s.ok()) return s;
  std::vector<int> devices;
  s = ResolveTargets(snap, list.prefix().target(), &devices);
  if (!s.ok()) return s;

  std::unique_ptr<GnmiSession> session(new GnmiSession());
  session->mode_ = list.mode();
  session->updates_only_ = list.updates_only();
  constexpr uint64_t kMaxNs = static_cast<uint64_t>(std::numeric_limits<TimeNs>::max() / 4);
  for (int i = 0; i < list.subscription_size(); ++i) {
    const gnmi::Subscription& in = list.subscription(i);
    Sub sub;
    sub.path = telemetry::JoinPath(list.prefix(), in.path());
    sub.path.clear_target();
    const std::string text = telemetry::FormatPath(sub.path);
    Status size = CheckPathSize(sub.path, text);
    if (!size.ok()) return size;
    for (const auto& e : sub.path.elem()) {
      if (e.name().empty()) return InvalidArgument("subscription " + text + ": empty element name");
    }
    if (!InCatalogue(sub.path)) {
      return NotFound("subscription path " + text +
                      " is not served by this target (see the telemetry path catalogue)");
    }
    if (in.mode() != gnmi::TARGET_DEFINED && in.mode() != gnmi::ON_CHANGE &&
        in.mode() != gnmi::SAMPLE) {
      return InvalidArgument("subscription " + text + ": unknown mode " +
                             std::to_string(in.mode()));
    }
    sub.mode = in.mode();
    sub.suppress = in.suppress_redundant();
    if (list.mode() == gnmi::SubscriptionList::STREAM) {
      if (in.sample_interval() > kMaxNs || in.heartbeat_interval() > kMaxNs) {
        return InvalidArgument("subscription " + text + ": interval out of range");
      }
      const auto interval = static_cast<TimeNs>(in.sample_interval());
      const auto heartbeat = static_cast<TimeNs>(in.heartbeat_interval());
      if (sub.mode != gnmi::ON_CHANGE && interval != 0 &&
          interval < options.min_sample_interval_ns) {
        return InvalidArgument("subscription " + text + ": sample_interval " +
                               std::to_string(interval) + " ns is below the supported minimum " +
                               std::to_string(options.min_sample_interval_ns) + " ns");
      }
      if (heartbeat != 0 && heartbeat < options.min_sample_interval_ns) {
        return InvalidArgument("subscription " + text + ": heartbeat_interval " +
                               std::to_string(heartbeat) + " ns is below the supported minimum " +
                               std::to_string(options.min_sample_interval_ns) + " ns");
      }
      sub.heartbeat_ns = heartbeat;
      if (interval != 0) {
        sub.interval_ns = interval;
      } else {
        sub.interval_ns =
            sub.mode == gnmi::SAMPLE ? options.tick_ns : options.default_sample_interval_ns;
      }
      sub.interval_ns = std::max<TimeNs>(sub.interval_ns, 1);
    }
    session->subs_.push_back(std::move(sub));
  }
  for (int d : devices) {
    DeviceSub ds;
    ds.device = d;
    session->Compile(ds, snap);
    session->devices_.push_back(std::move(ds));
  }
  *out = std::move(session);
  return Status::Ok();
}

std::vector<std::string> GnmiSession::targets() const {
  std::vector<std::string> out;
  for (const DeviceSub& d : devices_) out.push_back(d.schema->device);
  return out;
}

void GnmiSession::Compile(DeviceSub& d, const FabricSnapshot& snap) {
  d.schema = snap.schemas[d.device];
  d.entries.clear();
  std::vector<const gnmi::PathElem*> scratch;
  const int n = static_cast<int>(d.schema->leaves.size());
  for (int leaf = 0; leaf < n; ++leaf) {
    for (int s = 0; s < static_cast<int>(subs_.size()); ++s) {
      if (!LeafMatches(subs_[s].path, *d.schema, leaf, &scratch)) continue;
      Entry e;
      e.leaf = leaf;
      e.sub = s;
      e.on_change =
          subs_[s].mode == gnmi::ON_CHANGE || (subs_[s].mode == gnmi::TARGET_DEFINED &&
                                               d.schema->leaves[leaf].kind == LeafKind::kState);
      d.entries.push_back(e);
    }
  }
  d.state.assign(d.entries.size(), LeafState());
}

void GnmiSession::Initial(const FabricSnapshot& snap, std::vector<gnmi::Notification>* out) {
  for (Sub& s : subs_) s.next_due = snap.virtual_ns + s.interval_ns;
  Run(snap, Pass::kInitial, out);
}

void GnmiSession::Tick(const FabricSnapshot& snap, std::vector<gnmi::Notification>* out) {
  Run(snap, Pass::kTick, out);
}

void GnmiSession::Poll(const FabricSnapshot& snap, std::vector<gnmi::Notification>* out) {
  Run(snap, Pass::kPoll, out);
}

void GnmiSession::Run(const FabricSnapshot& snap, Pass pass, std::vector<gnmi::Notification>* out) {
  const TimeNs t = snap.virtual_ns;
  std::vector<char> due(subs_.size(), 0);
  if (pass == Pass::kTick) {
    for (size_t i = 0; i < subs_.size(); ++i) {
      Sub& s = subs_[i];
      if (s.mode == gnmi::ON_CHANGE || t < s.next_due) continue;
      due[i] = 1;
      s.next_due += s.interval_ns;
      if (s.next_due <= t) s.next_due = t + s.interval_ns;
    }
  }
  for (DeviceSub& d : devices_) {
    if (d.device >= static_cast<int>(snap.schemas.size())) continue;
    if (d.schema != snap.schemas[d.device]) Compile(d, snap);
    const DeviceSchema& schema = *d.schema;
    const std::vector<LeafValue>& values = snap.values[d.device];
    int cur_container = -1;
    int last_leaf = -1;
    for (size_t i = 0; i < d.entries.size(); ++i) {
      const Entry& e = d.entries[i];
      LeafState& st = d.state[i];
      const DeviceSchema::Leaf& leaf = schema.leaves[e.leaf];
      const LeafValue& v = values[e.leaf];
      const Sub& sub = subs_[e.sub];
      bool send = false;
      LeafValue to_send;
      switch (pass) {
        case Pass::kInitial:
          send = !updates_only_;
          to_send = v;
          st.peak = 0;
          st.last = v;
          st.sent = true;
          st.last_sent = t;
          break;
        case Pass::kPoll:
          send = true;
          to_send = v;
          break;
        case Pass::kTick: {
          if (leaf.kind == LeafKind::kPeak) st.peak = std::max(st.peak, v.u);
          const bool heartbeat = sub.heartbeat_ns > 0 && t - st.last_sent >= sub.heartbeat_ns;
          if (e.on_change) {
            send = !st.sent || v != st.last || heartbeat;
            to_send = v;
          } else if (due[e.sub]) {
            to_send = v;
            if (leaf.kind == LeafKind::kPeak) {
              to_send.u = st.peak;
              st.peak = 0;
            }
            send = !(sub.suppress && st.sent && to_send == st.last && !heartbeat);
          }
          if (send) {
            st.last = to_send;
            st.sent = true;
            st.last_sent = t;
          }
          break;
        }
      }
      if (!send || e.leaf == last_leaf) continue;
      last_leaf = e.leaf;
      if (leaf.container != cur_container) {
        cur_container = leaf.container;
        gnmi::Notification& n = out->emplace_back();
        n.set_timestamp(snap.timestamp_ns);
        *n.mutable_prefix() = schema.containers[leaf.container].prefix;
        n.mutable_prefix()->set_target(schema.device);
      }
      gnmi::Update* u = out->back().add_update();
      *u->mutable_path() = leaf.rel;
      SetValue(to_send, u->mutable_val());
    }
  }
}

// ------------------------------------------------------------------ Get / Capabilities

Status GetNotifications(const FabricSnapshot& snap, const gnmi::GetRequest& req,
                        gnmi::GetResponse* resp) {
  resp->Clear();
  Status s = CheckEncoding(req.encoding());
  if (!s.ok()) return s;
  if (!gnmi::GetRequest::DataType_IsValid(req.type())) {
    return InvalidArgument("unknown GetRequest.type " + std::to_string(req.type()));
  }
  std::vector<int> devices;
  s = ResolveTargets(snap, req.prefix().target(), &devices);
  if (!s.ok()) return s;
  if (req.path_size() > kMaxPaths) {
    return InvalidArgument("GetRequest has more than " + std::to_string(kMaxPaths) + " paths");
  }
  std::vector<gnmi::Path> paths;
  if (req.path_size() == 0) {
    paths.push_back(req.prefix());
  } else {
    for (const auto& p : req.path()) paths.push_back(telemetry::JoinPath(req.prefix(), p));
  }
  const bool wildcard_target = devices.size() != 1 || req.prefix().target().empty();
  std::vector<const gnmi::PathElem*> scratch;
  for (gnmi::Path& path : paths) {
    path.clear_target();
    const std::string text = telemetry::FormatPath(path);
    Status size = CheckPathSize(path, text);
    if (!size.ok()) return size;
    if (!InCatalogue(path)) {
      return NotFound("path " + text + " is not served by this target");
    }
    if (req.type() == gnmi::GetRequest::CONFIG) continue;  // no configuration data
    bool any = false;
    for (int d : devices) {
      const DeviceSchema& schema = *snap.schemas[d];
      const std::vector<LeafValue>& values = snap.values[d];
      gnmi::Notification* n = nullptr;
      for (int leaf = 0; leaf < static_cast<int>(schema.leaves.size()); ++leaf) {
        if (!LeafMatches(path, schema, leaf, &scratch)) continue;
        if (n == nullptr) {
          n = resp->add_notification();
          n->set_timestamp(snap.timestamp_ns);
          n->mutable_prefix()->set_origin(path.origin());
          n->mutable_prefix()->set_target(schema.device);
        }
        const DeviceSchema::Leaf& l = schema.leaves[leaf];
        gnmi::Update* u = n->add_update();
        for (const auto& e : schema.containers[l.container].prefix.elem()) {
          *u->mutable_path()->add_elem() = e;
        }
        for (const auto& e : l.rel.elem()) *u->mutable_path()->add_elem() = e;
        SetValue(values[leaf], u->mutable_val());
        any = true;
      }
    }
    if (!any && !HasWildcard(path) && !wildcard_target) {
      return NotFound("no data at " + text + " on target " + req.prefix().target());
    }
  }
  return Status::Ok();
}

gnmi::CapabilityResponse CapabilitiesResponse() {
  gnmi::CapabilityResponse r;
  auto add = [&](const char* name, const char* org, const char* version) {
    gnmi::ModelData* m = r.add_supported_models();
    m->set_name(name);
    m->set_organization(org);
    m->set_version(version);
  };
  add("openconfig-interfaces", "OpenConfig working group", "3.0.0");
  add("openconfig-qos", "OpenConfig working group", "0.11.0");
  add("loom-interfaces", "Loom", "1.0.0");
  add("loom-qos", "Loom", "1.0.0");
  add("loom-pfc", "Loom", "1.0.0");
  add("loom-nic", "Loom", "1.0.0");
  add("loom-alb", "Loom", "1.0.0");
  r.add_supported_encodings(gnmi::JSON_IETF);
  r.add_supported_encodings(gnmi::PROTO);
  r.add_supported_encodings(gnmi::JSON);
  r.set_gnmi_version("0.10.0");
  return r;
}

// ------------------------------------------------------------------ InProcessTelemetry

std::vector<InProcessTarget> DefaultInProcessTargets(const Fabric& fabric, TimeNs interval_ns) {
  std::vector<InProcessTarget> out;
  for (const std::string& dev : fabric.Devices()) {
    InProcessTarget t;
    t.name = dev;
    t.subscriptions = fabric.GetSwitchConfig(dev) != nullptr
                          ? telemetry::SwitchSubscriptions(interval_ns)
                          : telemetry::NicSubscriptions(interval_ns);
    out.push_back(std::move(t));
  }
  return out;
}

InProcessTelemetry::InProcessTelemetry(Fabric* fabric, GnmiOptions options,
                                       std::vector<InProcessTarget> targets,
                                       telemetry::TelemetrySink* sink, const Clock* arrival_clock)
    : fabric_(fabric),
      options_(options),
      targets_(std::move(targets)),
      sink_(sink),
      arrival_clock_(arrival_clock) {}

InProcessTelemetry::~InProcessTelemetry() = default;

Status InProcessTelemetry::Start() {
  builder_ = std::make_unique<SnapshotBuilder>(*fabric_, options_);
  std::shared_ptr<const FabricSnapshot> snap = builder_->Capture();
  sessions_.clear();
  for (const InProcessTarget& t : targets_) {
    gnmi::SubscriptionList list;
    list.mutable_prefix()->set_target(t.name);
    list.set_mode(gnmi::SubscriptionList::STREAM);
    list.set_encoding(gnmi::PROTO);
    for (const telemetry::SubscriptionSpec& spec : t.subscriptions) {
      gnmi::Subscription* sub = list.add_subscription();
      Status s = telemetry::ParsePath(spec.path, sub->mutable_path());
      if (!s.ok()) return InvalidArgument("target " + t.name + ": " + s.message());
      sub->mutable_path()->clear_target();
      sub->set_mode(spec.mode);
      if (spec.mode == gnmi::SAMPLE) {
        sub->set_sample_interval(static_cast<uint64_t>(spec.sample_interval_ns));
      }
    }
    std::unique_ptr<GnmiSession> session;
    Status s = GnmiSession::Create(list, *snap, builder_->options(), &session);
    if (!s.ok()) return Status(s.code(), "target " + t.name + ": " + s.message());
    sessions_.push_back(std::move(session));
  }
  std::vector<gnmi::Notification> ns;
  for (size_t i = 0; i < sessions_.size(); ++i) {
    sink_->OnTargetConnected(targets_[i].name);
    ns.clear();
    sessions_[i]->Initial(*snap, &ns);
    Deliver(i, ns);
    sink_->OnTargetSynced(targets_[i].name);
  }
  return Status::Ok();
}

void InProcessTelemetry::Deliver(size_t target, const std::vector<gnmi::Notification>& ns) {
  const TimeNs arrival = arrival_clock_ != nullptr ? arrival_clock_->Now() : fabric_->now();
  for (const gnmi::Notification& n : ns) {
    sink_->OnNotification(targets_[target].name, n, arrival);
    ++delivered_;
  }
}

size_t InProcessTelemetry::OnStep() {
  if (!builder_) return 0;
  std::shared_ptr<const FabricSnapshot> snap = builder_->OnStep();
  if (!snap) return 0;
  const uint64_t before = delivered_;
  std::vector<gnmi::Notification> ns;
  for (size_t i = 0; i < sessions_.size(); ++i) {
    ns.clear();
    sessions_[i]->Tick(*snap, &ns);
    Deliver(i, ns);
  }
  return static_cast<size_t>(delivered_ - before);
}

void InProcessTelemetry::RunUntil(TimeNs t) {
  while (fabric_->now() < t) {
    // Fast-forward jumps (when enabled) never pass the next tick.
    fabric_->Advance(builder_ ? std::min(t, builder_->next_tick_ns()) : t);
    OnStep();
  }
}

}  // namespace loom::sim
