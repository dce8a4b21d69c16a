#include "telemetry/link_state.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <string_view>
#include <tuple>
#include <utility>

#include "telemetry/path.h"
#include "telemetry/profile.h"

namespace loom::telemetry {

using loom::v1::DeviceRole;

const char* OperStatusName(OperStatus s) {
  switch (s) {
    case OperStatus::kUp:
      return "UP";
    case OperStatus::kDown:
      return "DOWN";
    case OperStatus::kUnknown:
      break;
  }
  return "UNKNOWN";
}

int QuantizeLevel(double value, const std::array<double, 7>& thresholds) {
  if (!(value == value)) return 0;  // NaN
  int level = 0;
  for (double t : thresholds) {
    if (value >= t) ++level;
  }
  return level;
}

int QualityBand(double utilization, double queue_bytes, double pause_ratio,
                const QualityParams& params) {
  const double wl = std::max(0.0, params.load_weight);
  const double wq = std::max(0.0, params.queue_weight);
  const double wp = std::max(0.0, params.pause_weight);
  const double wsum = wl + wq + wp;
  if (wsum <= 0) return 7;
  const double level = (wl * QuantizeLevel(utilization, params.load_thresholds) +
                        wq * QuantizeLevel(queue_bytes, params.queue_thresholds) +
                        wp * QuantizeLevel(pause_ratio, params.pause_thresholds)) /
                       wsum;
  const int band = 7 - static_cast<int>(std::lround(level));
  return std::clamp(band, 0, 7);
}

namespace {

enum IfCounter {
  kInOctets,
  kOutOctets,
  kInPkts,
  kOutPkts,
  kInDiscards,
  kOutDiscards,
  kInErrors,
  kOutErrors,
  kCarrierTransitions,
  kNumIf
};
enum QueueCounter { kQTxPkts, kQTxOctets, kQDropped, kQEcn, kNumQ };
enum PfcCounter {
  kPfcRxPkts,
  kPfcTxPkts,
  kPfcRxPauseUs,
  kPfcTxPauseUs,
  kWdDetected,
  kWdRestored,
  kNumPfc
};
enum NicCounter {
  kNpCnpSent,
  kRpCnpHandled,
  kRpCnpIgnored,
  kNpEcnMarked,
  kOutOfSequence,
  kPacketSeqErr,
  kLocalAckTimeoutErr,
  kTxBursts,
  kTxIdleNs,
  kNumNic
};
// Leaves accepted but not used for link state.
constexpr int kIgnored = -2;

struct LeafName {
  std::string_view name;
  int id;
};

constexpr LeafName kIfLeaves[] = {
    {"in-octets", kInOctets},
    {"out-octets", kOutOctets},
    {"in-pkts", kInPkts},
    {"out-pkts", kOutPkts},
    {"in-discards", kInDiscards},
    {"out-discards", kOutDiscards},
    {"in-errors", kInErrors},
    {"out-errors", kOutErrors},
    {"carrier-transitions", kCarrierTransitions},
    // OpenConfig leaves a target may send within .../state/counters.
    {"in-unicast-pkts", kIgnored},
    {"out-unicast-pkts", kIgnored},
    {"in-multicast-pkts", kIgnored},
    {"out-multicast-pkts", kIgnored},
    {"in-broadcast-pkts", kIgnored},
    {"out-broadcast-pkts", kIgnored},
    {"in-fcs-errors", kIgnored},
    {"last-clear", kIgnored},
};
constexpr int kQCurrent = 100;
constexpr int kQWatermark = 101;
constexpr LeafName kQueueLeaves[] = {
    {"transmit-pkts", kQTxPkts},     {"transmit-octets", kQTxOctets}, {"dropped-pkts", kQDropped},
    {"ecn-marked-pkts", kQEcn},      {"max-queue-len", kQWatermark},  {"dropped-octets", kIgnored},
    {"ecn-marked-octets", kIgnored}, {"avg-queue-len", kIgnored},     {"name", kIgnored},
};
constexpr LeafName kPfcLeaves[] = {
    {"rx-pkts", kPfcRxPkts},
    {"tx-pkts", kPfcTxPkts},
    {"rx-pause-duration-us", kPfcRxPauseUs},
    {"tx-pause-duration-us", kPfcTxPauseUs},
};
constexpr int kWdStatus = 200;
constexpr LeafName kWdLeaves[] = {
    {"status", kWdStatus},
    {"deadlock-detected", kWdDetected},
    {"deadlock-restored", kWdRestored},
};
// loom NIC gauge: largest packet spacing in the NIC's latest burst (ns).
constexpr int kTxMaxSpacing = 300;
constexpr LeafName kNicLeaves[] = {
    {"np_cnp_sent", kNpCnpSent},
    {"rp_cnp_handled", kRpCnpHandled},
    {"rp_cnp_ignored", kRpCnpIgnored},
    {"np_ecn_marked_roce_packets", kNpEcnMarked},
    {"out_of_sequence", kOutOfSequence},
    {"packet_seq_err", kPacketSeqErr},
    {"local_ack_timeout_err", kLocalAckTimeoutErr},
    {"tx_bursts", kTxBursts},
    {"tx_idle_ns", kTxIdleNs},
    {"tx_max_spacing_ns", kTxMaxSpacing},
};
constexpr int kAlbPkts = 0;
constexpr int kAlbOctets = 1;
constexpr int kAlbNextHop = 2;
constexpr LeafName kAlbLeaves[] = {
    {"transmit-pkts", kAlbPkts},
    {"transmit-octets", kAlbOctets},
    {"next-hop", kAlbNextHop},
};

template <size_t N>
int LookupLeaf(const LeafName (&table)[N], const std::string& name) {
  for (const LeafName& l : table) {
    if (l.name == name) return l.id;
  }
  return -1;
}

struct Counter {
  CounterTracker tracker;
  double rate = 0;
  bool valid = false;
  TimeNs fresh = -1;
};

struct QueueSlot {
  std::string name;
  std::array<Counter, kNumQ> c;
  uint64_t current = 0;
  uint64_t watermark = 0;
};

struct PfcSlot {
  std::array<Counter, kNumPfc> c;
  bool stormed = false;
};

struct Port {
  int link = -1;
  double octets_max = 0;  // Implausibility bounds (per second).
  double pkts_max = 0;
  std::array<Counter, kNumIf> c;
  OperStatus oper = OperStatus::kUnknown;
  TimeNs oper_arrival = -1;  // local arrival of the last oper-status update
  std::vector<QueueSlot> queues;
  std::array<PfcSlot, 8> pfc;
  std::array<Counter, kNumNic> nic;
  // NIC ports: octets sent to each destination NIC (loom peers/peer[nic]).
  std::unordered_map<std::string, Counter> peers;
  uint32_t resets = 0;
  // loom operational-speed-bps as last reported (b/s); 0 = not reported.
  uint64_t speed_bps = 0;
  // loom NIC tx_max_spacing_ns as last reported; 0 = unknown.
  uint64_t tx_max_spacing_ns = 0;
  // LLDP neighbor as the port reports it ("" = none).
  std::string lldp_system;
  std::string lldp_port;
};

struct AlbSlot {
  std::string group;
  uint32_t bucket = 0;
  std::string next_hop;
  Counter pkts, octets;
};

struct DeviceSlot {
  std::unordered_map<std::string, int> ports;    // interface -> Port index
  std::unordered_map<std::string, AlbSlot> alb;  // group + '\n' + bucket
  bool is_nic = false;
  // Interface aliases (inventory): alias -> topology name, for LLDP port ids.
  std::unordered_map<std::string, std::string> aliases;
  // The system name the device announces in LLDP ("" = its id).
  std::string lldp_name;
  // Profile mode: staleness interval of the device's interface counters
  // (max(sample, device refresh)); 0 = the table's policy.
  TimeNs counters_interval_ns = 0;
  uint32_t unavailable = 0;  // Bit i = CatalogueSignals()[i] unavailable.
  std::map<std::string, std::string> unavailable_reasons;
};

// Value conversions. Counters and gauges must be non-negative integers.
bool ParseUintText(std::string_view s, uint64_t* out) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end;
}

bool GetUint(const gnmi::TypedValue& v, uint64_t* out) {
  switch (v.value_case()) {
    case gnmi::TypedValue::kUintVal:
      *out = v.uint_val();
      return true;
    case gnmi::TypedValue::kIntVal:
      if (v.int_val() < 0) return false;
      *out = static_cast<uint64_t>(v.int_val());
      return true;
    case gnmi::TypedValue::kDoubleVal: {
      const double d = v.double_val();
      if (!std::isfinite(d) || d < 0 || d >= 1.8e19) return false;
      *out = static_cast<uint64_t>(d);
      return true;
    }
    case gnmi::TypedValue::kJsonVal:
      return ParseUintText(v.json_val(), out);
    case gnmi::TypedValue::kJsonIetfVal:
      return ParseUintText(v.json_ietf_val(), out);
    case gnmi::TypedValue::kStringVal:
      return ParseUintText(v.string_val(), out);
    default:
      return false;
  }
}

bool EqualNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// LLDP system names: equal ignoring case, or the reported one is a fully
// qualified name whose first label is the expected name ("leaf1.pod1.example"
// for "leaf1"). "pod1.leaf1" does not match "pod1.leaf2".
bool SameSystemName(std::string_view reported, std::string_view expected) {
  if (EqualNoCase(reported, expected)) return true;
  const size_t dot = reported.find('.');
  return dot != std::string_view::npos && expected.find('.') == std::string_view::npos &&
         EqualNoCase(reported.substr(0, dot), expected);
}

bool SamePortName(std::string_view reported, std::string_view interface) {
  return EqualNoCase(reported, interface);
}

// Port ids that are not names (locally assigned numbers such as an ifIndex):
// the port cannot be checked by name, only the system name counts.
bool IsNumber(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// LLDP port ids of subtype MAC address ("aa:bb:cc:dd:ee:ff"): the port cannot
// be checked by name, so only the system name counts.
bool IsMacAddress(std::string_view s) {
  if (s.size() != 17) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i % 3 == 2) {
      if (s[i] != ':' && s[i] != '-') return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(s[i]))) {
      return false;
    }
  }
  return true;
}

bool GetText(const gnmi::TypedValue& v, std::string_view* out, bool strip_module = true) {
  switch (v.value_case()) {
    case gnmi::TypedValue::kStringVal:
      *out = v.string_val();
      break;
    case gnmi::TypedValue::kAsciiVal:
      *out = v.ascii_val();
      break;
    case gnmi::TypedValue::kJsonVal:
      *out = v.json_val();
      break;
    case gnmi::TypedValue::kJsonIetfVal:
      *out = v.json_ietf_val();
      break;
    default:
      return false;
  }
  if (out->size() >= 2 && out->front() == '"' && out->back() == '"') {
    *out = out->substr(1, out->size() - 2);
  }
  // OpenConfig identityref values may carry a module prefix.
  const size_t colon = strip_module ? out->rfind(':') : std::string_view::npos;
  if (colon != std::string_view::npos) *out = out->substr(colon + 1);
  return !out->empty();
}

const std::string* Key(const gnmi::PathElem& e, const char* name) {
  auto it = e.key().find(name);
  if (it == e.key().end() || it->second.empty()) return nullptr;
  return &it->second;
}

bool Is(const gnmi::PathElem& e, std::string_view name) { return e.name() == name; }

double Max(double a) { return a > 0 ? a : std::numeric_limits<double>::infinity(); }

}  // namespace

struct LinkStateTable::Impl {
  std::unordered_map<std::string, DeviceSlot> devices;
  std::vector<Port> ports;
  std::vector<std::array<int, 2>> link_ports;  // [link] -> {port of a, port of b}
  std::vector<int64_t> capacity;
  std::vector<std::array<bool, 2>> side_is_nic;
  LinkStateOptions options;
  IngestStats* stats = nullptr;

  void Feed(Counter& c, TimeNs ts, uint64_t v, TimeNs arrival, uint32_t* resets) {
    const CounterUpdate u = c.tracker.Add(ts, v);
    switch (u.result) {
      case CounterResult::kOutOfOrder:
        ++stats->out_of_order;
        return;
      case CounterResult::kReset:
        ++stats->resets;
        if (resets != nullptr) ++*resets;
        c.valid = false;
        c.rate = 0;
        break;
      case CounterResult::kImplausible:
        ++stats->implausible;
        c.valid = false;
        c.rate = 0;
        break;
      case CounterResult::kWrapped:
        ++stats->wraps;
        [[fallthrough]];
      case CounterResult::kRate:
        c.rate = u.rate;
        c.valid = true;
        break;
      case CounterResult::kFirst:
        break;
    }
    c.fresh = arrival;
  }

  static void InitCounter(Counter& c, double max_rate) {
    CounterOptions o;
    o.max_rate = max_rate;
    c.tracker = CounterTracker(o);
  }

  // Applies one update; false when rejected.
  bool ApplyOne(DeviceSlot& dev, std::string_view origin, const gnmi::PathElem* const* e, int n,
                const gnmi::TypedValue& val, TimeNs ts, TimeNs arrival) {
    const bool oc = IsOpenConfigOrigin(origin);
    const bool loom = origin == "loom";
    if (n < 4) return Unknown();
    auto port_of = [&](const gnmi::PathElem& elem, const char* key) -> Port* {
      const std::string* name = Key(elem, key);
      if (name == nullptr) return nullptr;
      auto it = dev.ports.find(*name);
      return it == dev.ports.end() ? nullptr : &ports[it->second];
    };
    const std::string& root = e[0]->name();
    if (root == "lldp" && oc) {
      // /lldp/interfaces/interface[name]/neighbors/neighbor[id]/state/<leaf>
      if (n != 7 || !Is(*e[1], "interfaces") || !Is(*e[2], "interface") ||
          !Is(*e[3], "neighbors") || !Is(*e[4], "neighbor") || !Is(*e[5], "state")) {
        return Unknown();
      }
      Port* p = port_of(*e[2], "name");
      if (p == nullptr) return Unknown();
      std::string_view text;
      if (e[6]->name() == "chassis-id") return true;
      if (!GetText(val, &text, /*strip_module=*/false)) return Bad();
      if (e[6]->name() == "system-name") {
        p->lldp_system = std::string(text);
      } else if (e[6]->name() == "port-id") {
        p->lldp_port = std::string(text);
      } else {
        return Unknown();
      }
      return true;
    }
    if (root == "interfaces" && oc && Is(*e[1], "interface") && Is(*e[2], "state")) {
      Port* p = port_of(*e[1], "name");
      if (p == nullptr) return Unknown();
      if (n == 4 && Is(*e[3], "oper-status")) {
        std::string_view s;
        if (!GetText(val, &s)) return Bad();
        const OperStatus before = p->oper;
        p->oper = s == "UP"        ? OperStatus::kUp
                  : s == "UNKNOWN" ? OperStatus::kUnknown
                                   : OperStatus::kDown;
        p->oper_arrival = arrival;
        if (p->oper != before) ++stats->oper_changes;
        return true;
      }
      if (n != 5 || !Is(*e[3], "counters")) return Unknown();
      const int id = LookupLeaf(kIfLeaves, e[4]->name());
      if (id == -1) return Unknown();
      uint64_t v;
      if (!GetUint(val, &v)) return Bad();
      if (id == kIgnored) return true;
      Feed(p->c[id], ts, v, arrival, &p->resets);
      return true;
    }
    if (root == "interfaces" && loom) {
      // loom:/interfaces/interface[name=<if>]/ethernet/state/operational-speed-bps:
      // a gauge (b/s). 0 = the device does not know (clears an earlier value);
      // above twice the link's nominal capacity is absurd (bad value).
      if (n != 5 || !Is(*e[1], "interface") || !Is(*e[2], "ethernet") || !Is(*e[3], "state") ||
          !Is(*e[4], "operational-speed-bps")) {
        return Unknown();
      }
      Port* p = port_of(*e[1], "name");
      if (p == nullptr) return Unknown();
      uint64_t v;
      if (!GetUint(val, &v)) return Bad();
      const int64_t nominal = capacity[p->link];
      if ((nominal > 0 && v > 2 * static_cast<uint64_t>(nominal)) ||
          v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Bad();
      }
      p->speed_bps = v;
      return true;
    }
    if (root == "qos" && (oc || loom)) {
      if (n != 8 || !Is(*e[1], "interfaces") || !Is(*e[2], "interface") || !Is(*e[3], "output") ||
          !Is(*e[4], "queues") || !Is(*e[5], "queue") || !Is(*e[6], "state")) {
        return Unknown();
      }
      Port* p = port_of(*e[2], "interface-id");
      const std::string* qname = Key(*e[5], "name");
      if (p == nullptr || qname == nullptr) return Unknown();
      int id = -1;
      if (oc) {
        id = LookupLeaf(kQueueLeaves, e[7]->name());
      } else if (Is(*e[7], "current-queue-len")) {
        id = kQCurrent;
      }
      if (id == -1) return Unknown();
      uint64_t v;
      if (!GetUint(val, &v)) return Bad();
      if (id == kIgnored) return true;
      QueueSlot* q = nullptr;
      for (QueueSlot& s : p->queues) {
        if (s.name == *qname) q = &s;
      }
      if (q == nullptr) {
        if (p->queues.size() >= 64) return Bad();  // Bounded: no queue-name floods.
        q = &p->queues.emplace_back();
        q->name = *qname;
        InitCounter(q->c[kQTxPkts], p->pkts_max);
        InitCounter(q->c[kQTxOctets], p->octets_max);
        InitCounter(q->c[kQDropped], p->pkts_max);
        InitCounter(q->c[kQEcn], p->pkts_max);
      }
      if (id == kQCurrent) {
        q->current = v;
      } else if (id == kQWatermark) {
        q->watermark = v;
      } else {
        Feed(q->c[id], ts, v, arrival, &p->resets);
      }
      return true;
    }
    if (root == "pfc" && loom) {
      if ((n != 7 && n != 8) || !Is(*e[1], "interfaces") || !Is(*e[2], "interface") ||
          !Is(*e[3], "priorities") || !Is(*e[4], "priority")) {
        return Unknown();
      }
      Port* p = port_of(*e[2], "name");
      const std::string* prio = Key(*e[4], "id");
      if (p == nullptr || prio == nullptr) return Unknown();
      uint64_t pr;
      if (!ParseUintText(*prio, &pr) || pr > 7) return Unknown();
      PfcSlot& slot = p->pfc[pr];
      if (n == 7) {
        if (!Is(*e[5], "state")) return Unknown();
        const int id = LookupLeaf(kPfcLeaves, e[6]->name());
        if (id < 0) return Unknown();
        uint64_t v;
        if (!GetUint(val, &v)) return Bad();
        Feed(slot.c[id], ts, v, arrival, &p->resets);
        return true;
      }
      if (!Is(*e[5], "watchdog") || !Is(*e[6], "state")) return Unknown();
      const int id = LookupLeaf(kWdLeaves, e[7]->name());
      if (id < 0) return Unknown();
      if (id == kWdStatus) {
        std::string_view s;
        if (!GetText(val, &s)) return Bad();
        if (s == "stormed") {
          slot.stormed = true;
        } else if (s == "operational") {
          slot.stormed = false;
        } else {
          return Bad();
        }
        return true;
      }
      uint64_t v;
      if (!GetUint(val, &v)) return Bad();
      Feed(slot.c[id], ts, v, arrival, &p->resets);
      return true;
    }
    if (root == "nic" && loom && n == 8 && Is(*e[4], "peers")) {
      // /nic/interfaces/interface[name]/roce/peers/peer[nic]/state/tx-octets
      if (!Is(*e[1], "interfaces") || !Is(*e[2], "interface") || !Is(*e[3], "roce") ||
          !Is(*e[5], "peer") || !Is(*e[6], "state") || !Is(*e[7], "tx-octets")) {
        return Unknown();
      }
      Port* p = port_of(*e[2], "name");
      const std::string* peer = Key(*e[5], "nic");
      if (p == nullptr || peer == nullptr || !dev.is_nic) return Unknown();
      auto pd = devices.find(*peer);
      if (pd == devices.end() || !pd->second.is_nic) return Unknown();  // not a NIC we know
      uint64_t v;
      if (!GetUint(val, &v)) return Bad();
      auto it = p->peers.find(*peer);
      if (it == p->peers.end()) {
        if (p->peers.size() >= 65536) return Bad();
        it = p->peers.emplace(*peer, Counter{}).first;
        InitCounter(it->second, p->octets_max);
      }
      Feed(it->second, ts, v, arrival, &p->resets);
      return true;
    }
    if (root == "nic" && loom) {
      if (n != 6 || !Is(*e[1], "interfaces") || !Is(*e[2], "interface") || !Is(*e[3], "roce") ||
          !Is(*e[4], "state")) {
        return Unknown();
      }
      Port* p = port_of(*e[2], "name");
      if (p == nullptr) return Unknown();
      const int id = LookupLeaf(kNicLeaves, e[5]->name());
      if (id < 0) return Unknown();
      uint64_t v;
      if (!GetUint(val, &v)) return Bad();
      if (id == kTxMaxSpacing) {
        p->tx_max_spacing_ns = v;
        return true;
      }
      Feed(p->nic[id], ts, v, arrival, &p->resets);
      return true;
    }
    if (root == "alb" && loom) {
      if (n != 7 || !Is(*e[1], "groups") || !Is(*e[2], "group") || !Is(*e[3], "buckets") ||
          !Is(*e[4], "bucket") || !Is(*e[5], "state")) {
        return Unknown();
      }
      const std::string* group = Key(*e[2], "name");
      const std::string* bucket = Key(*e[4], "id");
      uint64_t b;
      if (group == nullptr || bucket == nullptr || !ParseUintText(*bucket, &b) || b > 0xFFFFFFFFu) {
        return Unknown();
      }
      const int id = LookupLeaf(kAlbLeaves, e[6]->name());
      if (id < 0) return Unknown();
      std::string key = *group;
      key.push_back('\n');
      key.append(*bucket);
      auto it = dev.alb.find(key);
      if (it == dev.alb.end()) {
        if (dev.alb.size() >= 65536) return Bad();
        it = dev.alb.emplace(std::move(key), AlbSlot{}).first;
        it->second.group = *group;
        it->second.bucket = static_cast<uint32_t>(b);
      }
      AlbSlot& slot = it->second;
      if (id == kAlbNextHop) {
        std::string_view s;
        if (!GetText(val, &s)) return Bad();
        slot.next_hop.assign(s);
        return true;
      }
      uint64_t v;
      if (!GetUint(val, &v)) return Bad();
      Feed(id == kAlbPkts ? slot.pkts : slot.octets, ts, v, arrival, nullptr);
      return true;
    }
    return Unknown();
  }

  bool Unknown() {
    ++stats->unknown_path;
    return false;
  }
  bool Bad() {
    ++stats->bad_value;
    return false;
  }
};

LinkStateTable::LinkStateTable(const topology::TopologyIndex& index, LinkStateOptions options)
    : index_(index), options_(options), impl_(std::make_unique<Impl>()) {
  Impl& im = *impl_;
  im.options = options_;
  im.stats = &stats_;
  const auto& topo = index_.topology();
  for (const auto& d : topo.devices()) {
    im.devices[d.id()].is_nic = d.role() == DeviceRole::DEVICE_ROLE_NIC;
  }
  im.link_ports.resize(topo.links_size(), {-1, -1});
  im.capacity.resize(topo.links_size(), 0);
  for (int i = 0; i < topo.links_size(); ++i) {
    const auto& l = topo.links(i);
    im.capacity[i] = l.capacity_bps();
    const double bytes_per_sec = static_cast<double>(l.capacity_bps()) / 8.0;
    const double octets_max = Max(bytes_per_sec * options_.max_rate_factor);
    const double pkts_max = Max(bytes_per_sec / 64.0 * options_.max_rate_factor);
    const loom::v1::LinkEndpoint* ends[2] = {&l.a(), &l.b()};
    for (int side = 0; side < 2; ++side) {
      DeviceSlot& dev = im.devices[ends[side]->device()];
      auto [it, inserted] = dev.ports.emplace(ends[side]->interface(), im.ports.size());
      if (!inserted) continue;  // Validation forbids this; keep the first link.
      Port& p = im.ports.emplace_back();
      p.link = i;
      p.octets_max = octets_max;
      p.pkts_max = pkts_max;
      for (int c = 0; c < kNumIf; ++c) {
        const bool octets = c == kInOctets || c == kOutOctets;
        Impl::InitCounter(p.c[c], c == kCarrierTransitions ? Max(0)
                                  : octets                 ? octets_max
                                                           : pkts_max);
      }
      for (PfcSlot& s : p.pfc) {
        Impl::InitCounter(s.c[kPfcRxPkts], pkts_max);
        Impl::InitCounter(s.c[kPfcTxPkts], pkts_max);
        Impl::InitCounter(s.c[kPfcRxPauseUs], 1e6 * options_.max_rate_factor);
        Impl::InitCounter(s.c[kPfcTxPauseUs], 1e6 * options_.max_rate_factor);
      }
      for (Counter& c : p.nic) Impl::InitCounter(c, pkts_max);
      // Idle time is added in one lump when a burst starts (a long gap can exceed any
      // per-second bound): no implausibility bound.
      Impl::InitCounter(p.nic[kTxIdleNs], Max(0));
      im.link_ports[i][side] = it->second;
    }
  }
}

LinkStateTable::~LinkStateTable() = default;

void LinkStateTable::SetAggregator(const std::string& session, std::set<std::string> devices) {
  aggregators_[session] = std::move(devices);
}

void LinkStateTable::SetFutureTolerance(const std::string& device, TimeNs tolerance_ns) {
  future_tolerance_[device] = tolerance_ns;
}

size_t LinkStateTable::Apply(const std::string& target, const gnmi::Notification& n,
                             TimeNs arrival_ns, TimeNs wall_now_ns) {
  ++stats_.notifications;
  const size_t count = static_cast<size_t>(n.update_size());
  stats_.updates += count;
  stats_.deletes += static_cast<uint64_t>(n.delete__size());
  // A notification speaks for its session's device; only an aggregator session speaks
  // for the devices of its allow-list, named by the prefix target.
  const std::string* tgt = &target;
  if (auto ag = aggregators_.find(target); ag != aggregators_.end()) {
    if (!ag->second.count(n.prefix().target())) {
      stats_.foreign_target += count;
      return count;
    }
    tgt = &n.prefix().target();
  }
  auto dit = impl_->devices.find(*tgt);
  if (dit == impl_->devices.end()) {
    stats_.unknown_target += count;
    return count;
  }
  if (wall_now_ns > 0) {
    auto tol = future_tolerance_.find(*tgt);
    const TimeNs tolerance =
        tol != future_tolerance_.end() ? tol->second : options_.future_tolerance_ns;
    if (tolerance > 0 && n.timestamp() > wall_now_ns + tolerance) {
      stats_.future_timestamp += count;
      return count;
    }
  }
  // Deletes: an LLDP neighbour (or any of its leaves) gone clears the port's
  // neighbour; other deletes keep the last value (counters do not vanish).
  for (const auto& d : n.delete_()) {
    const gnmi::Path full = JoinPath(n.prefix(), d);
    if (full.elem_size() < 3 || full.elem(0).name() != "lldp" ||
        full.elem(2).name() != "interface") {
      continue;
    }
    auto k = full.elem(2).key().find("name");
    if (k == full.elem(2).key().end()) continue;
    auto pit = dit->second.ports.find(k->second);
    if (pit == dit->second.ports.end()) continue;
    impl_->ports[pit->second].lldp_system.clear();
    impl_->ports[pit->second].lldp_port.clear();
  }
  if (n.timestamp() <= 0) {
    stats_.missing_timestamp += count;
    return count;
  }
  constexpr int kMaxDepth = 16;
  const gnmi::PathElem* elems[kMaxDepth];
  const int np = n.prefix().elem_size();
  if (np > kMaxDepth) {
    stats_.unknown_path += count;
    return count;
  }
  for (int i = 0; i < np; ++i) elems[i] = &n.prefix().elem(i);
  size_t rejected = 0;
  for (const gnmi::Update& u : n.update()) {
    const int nu = u.path().elem_size();
    if (np + nu > kMaxDepth) {
      ++stats_.unknown_path;
      ++rejected;
      continue;
    }
    for (int i = 0; i < nu; ++i) elems[np + i] = &u.path().elem(i);
    const std::string& origin = u.path().origin().empty() ? n.prefix().origin() : u.path().origin();
    if (impl_->ApplyOne(dit->second, origin, elems, np + nu, u.val(), n.timestamp(), arrival_ns)) {
      ++stats_.applied;
    } else {
      ++rejected;
    }
  }
  return rejected;
}

void LinkStateTable::ResetDevice(const std::string& device) {
  auto dit = impl_->devices.find(device);
  if (dit == impl_->devices.end()) return;
  auto reset = [](Counter& c) {
    c.tracker.Reset();
    c.valid = false;
    c.rate = 0;
  };
  for (const auto& [name, idx] : dit->second.ports) {
    Port& p = impl_->ports[idx];
    for (Counter& c : p.c) reset(c);
    for (QueueSlot& q : p.queues) {
      for (Counter& c : q.c) reset(c);
    }
    for (PfcSlot& s : p.pfc) {
      for (Counter& c : s.c) reset(c);
    }
    for (Counter& c : p.nic) reset(c);
    for (auto& [peer, c] : p.peers) reset(c);
    p.lldp_system.clear();
    p.lldp_port.clear();
  }
  for (auto& [k, slot] : dit->second.alb) {
    reset(slot.pkts);
    reset(slot.octets);
  }
}

namespace {

// The name `device` announces in LLDP (inventory lldp_name; the id by default).
const std::string& LldpNameOf(const LinkStateTable::Impl& im, const std::string& device) {
  auto d = im.devices.find(device);
  return d == im.devices.end() || d->second.lldp_name.empty() ? device : d->second.lldp_name;
}

// The topology name of `port` on `device` when it is one of the device's
// aliases; `port` itself otherwise.
std::string AliasOf(const LinkStateTable::Impl& im, const std::string& device,
                    const std::string& port) {
  auto d = im.devices.find(device);
  if (d == im.devices.end()) return port;
  auto a = d->second.aliases.find(port);
  return a == d->second.aliases.end() ? port : a->second;
}

}  // namespace

std::vector<LinkDirectionState> LinkStateTable::Compute(TimeNs now_ns) const {
  const Impl& im = *impl_;
  const auto& topo = index_.topology();
  std::vector<LinkDirectionState> out(2 * static_cast<size_t>(topo.links_size()));
  auto rate = [](const Counter& c) { return c.valid ? c.rate : 0.0; };
  for (int i = 0; i < topo.links_size(); ++i) {
    const auto& link = topo.links(i);
    const int pa = im.link_ports[i][0];
    const int pb = im.link_ports[i][1];
    for (int d = 0; d < 2; ++d) {
      LinkDirectionState& s = out[2 * i + d];
      s.link_index = i;
      s.direction = static_cast<Direction>(d);
      s.link_id = &link.id();
      s.tx_device = d == 0 ? &link.a().device() : &link.b().device();
      s.rx_device = d == 0 ? &link.b().device() : &link.a().device();
      s.capacity_bps = link.capacity_bps();
      s.live_capacity_bps = s.capacity_bps;
      const int txi = d == 0 ? pa : pb;
      const int rxi = d == 0 ? pb : pa;
      if (txi < 0 || rxi < 0) continue;
      const Port& tx = im.ports[txi];
      const Port& rx = im.ports[rxi];
      if (tx.link != i || rx.link != i) continue;  // Duplicate interface: not tracked.

      const Counter* octets = &tx.c[kOutOctets];
      if (!octets->valid && rx.c[kInOctets].valid) octets = &rx.c[kInOctets];
      s.has_rate = octets->valid;
      s.tx_bps = rate(*octets) * 8.0;
      s.last_sample_ns = octets->tracker.last_timestamp();
      s.last_fresh_ns = octets->fresh;
      s.utilization = s.capacity_bps > 0 ? s.tx_bps / static_cast<double>(s.capacity_bps) : 0;
      s.tx_pps = tx.c[kOutPkts].valid ? tx.c[kOutPkts].rate : rate(rx.c[kInPkts]);

      double queue_drops = 0;
      for (const QueueSlot& q : tx.queues) {
        s.queue_depth_bytes += q.current;
        s.queue_peak_bytes = std::max(s.queue_peak_bytes, q.watermark);
        s.ecn_marked_pps += rate(q.c[kQEcn]);
        queue_drops += rate(q.c[kQDropped]);
      }
      s.queue_peak_bytes = std::max(s.queue_peak_bytes, s.queue_depth_bytes);
      s.drops_pps = std::max(rate(tx.c[kOutDiscards]), queue_drops) + rate(rx.c[kInDiscards]);
      s.errors_pps = rate(tx.c[kOutErrors]) + rate(rx.c[kInErrors]);
      s.carrier_transitions = tx.c[kCarrierTransitions].tracker.last_value() +
                              rx.c[kCarrierTransitions].tracker.last_value();

      double pause = 0, pause_fps = 0;
      bool tx_has_pause = false;
      for (const PfcSlot& slot : tx.pfc) {
        if (slot.c[kPfcRxPauseUs].valid) {
          tx_has_pause = true;
          pause = std::max(pause, slot.c[kPfcRxPauseUs].rate / 1e6);
        }
        pause_fps += rate(slot.c[kPfcRxPkts]);
        s.pfc_stormed = s.pfc_stormed || slot.stormed;
        s.pfc_deadlocks_detected += slot.c[kWdDetected].tracker.last_value();
        s.pfc_deadlocks_restored += slot.c[kWdRestored].tracker.last_value();
      }
      if (!tx_has_pause) {
        for (const PfcSlot& slot : rx.pfc) {
          pause = std::max(pause, rate(slot.c[kPfcTxPauseUs]) / 1e6);
        }
      }
      if (pause_fps == 0) {
        for (const PfcSlot& slot : rx.pfc) pause_fps += rate(slot.c[kPfcTxPkts]);
      }
      s.pfc_pause_ratio = std::clamp(pause, 0.0, 1.0);
      s.pfc_pause_fps = pause_fps;

      const bool tx_nic = im.devices.at(*s.tx_device).is_nic;
      const bool rx_nic = im.devices.at(*s.rx_device).is_nic;
      if (tx_nic) {
        s.cnp_pps += rate(tx.nic[kRpCnpHandled]);
        s.has_nic_counters = tx.nic[kRpCnpHandled].valid &&
                             !IsStale(tx.nic[kRpCnpHandled].fresh, now_ns, options_.staleness);
        // Mean idle gap per burst started in the last counter interval (the two counters
        // arrive together, so the ratio of their rates is the ratio of their deltas).
        const Counter& bursts = tx.nic[kTxBursts];
        const Counter& idle = tx.nic[kTxIdleNs];
        if (bursts.valid && idle.valid && bursts.rate > 0) s.burst_gap_ns = idle.rate / bursts.rate;
        s.intra_burst_gap_ns = static_cast<double>(tx.tx_max_spacing_ns);
      }
      if (rx_nic) s.cnp_pps += rate(rx.nic[kNpCnpSent]);

      if (tx.oper == OperStatus::kDown || rx.oper == OperStatus::kDown) {
        s.oper = OperStatus::kDown;
      } else if (tx.oper == OperStatus::kUp || rx.oper == OperStatus::kUp) {
        s.oper = OperStatus::kUp;
      }
      // Live capacity: the lower of the ends' reported operational speeds,
      // never above the nominal capacity; nominal when neither end reported.
      uint64_t speed = 0;
      for (const Port* end : {&tx, &rx}) {
        if (end->speed_bps > 0 && (speed == 0 || end->speed_bps < speed)) speed = end->speed_bps;
      }
      if (speed > 0) {
        s.live_capacity_bps = s.capacity_bps > 0
                                  ? std::min(s.capacity_bps, static_cast<int64_t>(speed))
                                  : static_cast<int64_t>(speed);
      }
      s.counter_resets = tx.resets + rx.resets;
      {
        // Devices that refresh slower than the sample interval (profile)
        // stretch the staleness limit to their own interval.
        StalenessPolicy pol = options_.staleness;
        const TimeNs dev_interval =
            std::max(im.devices.at(*s.tx_device).counters_interval_ns,
                     octets == &rx.c[kInOctets] ? im.devices.at(*s.rx_device).counters_interval_ns
                                                : TimeNs{0});
        pol.sample_interval_ns = std::max(pol.sample_interval_ns, dev_interval);
        s.stale = !s.has_rate || IsStale(s.last_fresh_ns, now_ns, pol);
        // An oper-status notification (ON_CHANGE) is news by itself: a link that goes
        // down before its counters gave a first rate, or between samples, is known
        // down from that notification on.
        s.oper_fresh = !s.stale;
        for (const Port* end : {&tx, &rx}) {
          if (end->oper_arrival >= 0 && !IsStale(end->oper_arrival, now_ns, pol)) {
            s.oper_fresh = true;
          }
        }
      }
      s.unavailable_signals =
          im.devices.at(*s.tx_device).unavailable | im.devices.at(*s.rx_device).unavailable;
      {
        // LLDP: each end that reports a neighbor must name the other end.
        const auto& tx_end = d == 0 ? link.a() : link.b();
        const auto& rx_end = d == 0 ? link.b() : link.a();
        bool any = false;
        for (int side = 0; side < 2; ++side) {
          const Port& port = side == 0 ? tx : rx;
          const auto& self = side == 0 ? tx_end : rx_end;
          const auto& peer = side == 0 ? rx_end : tx_end;
          // Without a system name (an optional TLV, or not arrived yet) the
          // end says nothing.
          if (port.lldp_system.empty()) continue;
          any = true;
          if (!SameSystemName(port.lldp_system, LldpNameOf(im, peer.device())) ||
              (!port.lldp_port.empty() && !IsMacAddress(port.lldp_port) &&
               !IsNumber(port.lldp_port) && !SamePortName(port.lldp_port, peer.interface()) &&
               !SamePortName(AliasOf(im, peer.device(), port.lldp_port), peer.interface()))) {
            s.lldp = LldpCheck::kContradicted;
            s.lldp_detail = self.device() + ":" + self.interface() + " reports neighbor " +
                            port.lldp_system + " port " + port.lldp_port + ", topology says " +
                            peer.device() + " " + peer.interface();
            break;
          }
        }
        if (any && s.lldp != LldpCheck::kContradicted) s.lldp = LldpCheck::kVerified;
      }
      s.quality_band = s.oper == OperStatus::kDown
                           ? 0
                           : QualityBand(s.utilization, static_cast<double>(s.queue_depth_bytes),
                                         s.pfc_pause_ratio, options_.quality);
    }
  }
  return out;
}

std::vector<NicPeerRate> LinkStateTable::NicPeers(TimeNs now_ns) const {
  std::vector<NicPeerRate> out;
  for (const auto& [dev_id, dev] : impl_->devices) {
    if (!dev.is_nic) continue;
    for (const auto& [ifc, pi] : dev.ports) {
      for (const auto& [peer, c] : impl_->ports[static_cast<size_t>(pi)].peers) {
        // Only fresh rates: a NIC keeps a counter per destination it ever sent to.
        if (!c.valid || IsStale(c.fresh, now_ns, options_.staleness)) continue;
        NicPeerRate& r = out.emplace_back();
        r.nic = dev_id;
        r.peer = peer;
        r.bps = c.rate * 8;
        r.stale = false;
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const NicPeerRate& x, const NicPeerRate& y) {
    return std::tie(x.nic, x.peer) < std::tie(y.nic, y.peer);
  });
  return out;
}

std::vector<AlbBucketState> LinkStateTable::AlbBuckets(TimeNs now_ns) const {
  std::vector<AlbBucketState> out;
  for (const auto& [dev_id, dev] : impl_->devices) {
    for (const auto& [k, slot] : dev.alb) {
      AlbBucketState& b = out.emplace_back();
      b.device = dev_id;
      b.group = slot.group;
      b.bucket = slot.bucket;
      b.next_hop = slot.next_hop;
      b.pps = slot.pkts.valid ? slot.pkts.rate : 0;
      b.bps = slot.octets.valid ? slot.octets.rate * 8 : 0;
      b.stale = !slot.pkts.valid || IsStale(slot.pkts.fresh, now_ns, options_.staleness);
    }
  }
  std::sort(out.begin(), out.end(), [](const AlbBucketState& x, const AlbBucketState& y) {
    return std::tie(x.device, x.group, x.bucket) < std::tie(y.device, y.group, y.bucket);
  });
  return out;
}

namespace {

struct Hop {
  int band = 0;
  bool stale = true;
};

// Best hop among parallel links in one direction: the best non-stale band, or
// (all stale) the best band, marked stale.
Hop BestHop(const std::vector<int>& links, Direction dir,
            const std::vector<LinkDirectionState>& state) {
  Hop best{0, true};
  bool have_fresh = false;
  for (int l : links) {
    const size_t idx = 2 * static_cast<size_t>(l) + static_cast<size_t>(dir);
    if (idx >= state.size()) continue;
    const LinkDirectionState& s = state[idx];
    if (!s.stale) {
      if (!have_fresh || s.quality_band > best.band) best = {s.quality_band, false};
      have_fresh = true;
    } else if (!have_fresh) {
      best.band = std::max(best.band, s.quality_band);
    }
  }
  return best;
}

struct Adjacent {
  int device;
  Hop up;    // From the lower device to `device` (or lower -> upper).
  Hop down;  // From the upper device down.
};

}  // namespace

std::vector<PathQuality> ComputePathQualities(const topology::TopologyIndex& index,
                                              const std::vector<LinkDirectionState>& links) {
  const auto& topo = index.topology();
  const int nd = topo.devices_size();
  std::unordered_map<std::string, int> dev_idx;
  dev_idx.reserve(nd);
  for (int i = 0; i < nd; ++i) dev_idx.emplace(topo.devices(i).id(), i);
  auto role = [&](int d) { return topo.devices(d).role(); };

  // Group parallel links per (lower, upper) device pair for leaf-spine and
  // spine-super-spine tiers.
  std::unordered_map<int64_t, std::vector<int>> groups;
  for (int i = 0; i < topo.links_size(); ++i) {
    const auto& l = topo.links(i);
    auto a = dev_idx.find(l.a().device());
    auto b = dev_idx.find(l.b().device());
    if (a == dev_idx.end() || b == dev_idx.end()) continue;
    const bool leaf_spine = role(a->second) == DeviceRole::DEVICE_ROLE_LEAF &&
                            role(b->second) == DeviceRole::DEVICE_ROLE_SPINE;
    const bool spine_ss = role(a->second) == DeviceRole::DEVICE_ROLE_SPINE &&
                          role(b->second) == DeviceRole::DEVICE_ROLE_SUPER_SPINE;
    if (!leaf_spine && !spine_ss) continue;
    groups[static_cast<int64_t>(a->second) * nd + b->second].push_back(i);
  }
  // Adjacency lists: up[lower] = uppers with hops; down[upper] = lowers.
  std::vector<std::vector<Adjacent>> up(nd), down(nd);
  for (const auto& [key, ls] : groups) {
    const int lower = static_cast<int>(key / nd);
    const int upper = static_cast<int>(key % nd);
    const Hop u = BestHop(ls, Direction::kUp, links);
    const Hop d = BestHop(ls, Direction::kDown, links);
    up[lower].push_back({upper, u, d});
    down[upper].push_back({lower, u, d});
  }
  for (auto& v : up) {
    std::sort(v.begin(), v.end(),
              [](const Adjacent& x, const Adjacent& y) { return x.device < y.device; });
  }
  for (auto& v : down) {
    std::sort(v.begin(), v.end(),
              [](const Adjacent& x, const Adjacent& y) { return x.device < y.device; });
  }

  std::vector<PathQuality> out;
  for (int l1 = 0; l1 < nd; ++l1) {
    if (role(l1) != DeviceRole::DEVICE_ROLE_LEAF) continue;
    for (const Adjacent& s : up[l1]) {
      if (role(s.device) != DeviceRole::DEVICE_ROLE_SPINE) continue;
      // Two tiers: l1 -> s -> l2.
      for (const Adjacent& l2 : down[s.device]) {
        if (l2.device == l1) continue;
        PathQuality& p = out.emplace_back();
        p.ingress_leaf = l1;
        p.spine = p.egress_spine = s.device;
        p.egress_leaf = l2.device;
        p.local_band = s.up.band;
        p.remote_band = l2.down.band;
        p.band = std::min(p.local_band, p.remote_band);
        p.stale = s.up.stale || l2.down.stale;
      }
      // Three tiers: l1 -> s -> ss -> s2 -> l2, l2 in another pod.
      for (const Adjacent& ss : up[s.device]) {
        for (const Adjacent& s2 : down[ss.device]) {
          if (s2.device == s.device) continue;
          for (const Adjacent& l2 : down[s2.device]) {
            if (l2.device == l1 || topo.devices(l2.device).pod() == topo.devices(l1).pod()) {
              continue;
            }
            PathQuality& p = out.emplace_back();
            p.ingress_leaf = l1;
            p.spine = s.device;
            p.super_spine = ss.device;
            p.egress_spine = s2.device;
            p.egress_leaf = l2.device;
            p.local_band = s.up.band;
            p.remote_band = l2.down.band;
            p.band = std::min({s.up.band, ss.up.band, s2.down.band, l2.down.band});
            p.stale = s.up.stale || ss.up.stale || s2.down.stale || l2.down.stale;
          }
        }
      }
    }
  }
  return out;
}

void LinkStateTable::SetInterfaceAliases(const std::string& device,
                                         std::unordered_map<std::string, std::string> aliases,
                                         const std::string& lldp_name) {
  auto dit = impl_->devices.find(device);
  if (dit == impl_->devices.end()) return;
  dit->second.aliases = std::move(aliases);
  dit->second.lldp_name = lldp_name;
}

void LinkTelemetry::SetInterfaceAliases(const std::string& device,
                                        std::unordered_map<std::string, std::string> aliases,
                                        const std::string& lldp_name) {
  std::lock_guard<std::mutex> lock(mu_);
  table_.SetInterfaceAliases(device, std::move(aliases), lldp_name);
}

void LinkStateTable::SetSignalAvailability(const SignalAvailability& a) {
  auto dit = impl_->devices.find(a.target);
  if (dit == impl_->devices.end()) return;
  DeviceSlot& dev = dit->second;
  const auto& all = CatalogueSignals();
  const auto pos = std::find(all.begin(), all.end(), a.signal);
  if (pos == all.end()) return;
  const uint32_t bit = 1u << static_cast<uint32_t>(pos - all.begin());
  if (a.available) {
    dev.unavailable &= ~bit;
    dev.unavailable_reasons.erase(a.signal);
  } else {
    dev.unavailable |= bit;
    dev.unavailable_reasons[a.signal] = a.reason;
  }
  if (a.signal == "interface-counters") dev.counters_interval_ns = a.effective_interval_ns;
}

std::map<std::string, std::map<std::string, std::string>> LinkStateTable::UnavailableSignals()
    const {
  std::map<std::string, std::map<std::string, std::string>> out;
  for (const auto& [name, dev] : impl_->devices) {
    if (!dev.unavailable_reasons.empty()) out[name] = dev.unavailable_reasons;
  }
  return out;
}

LinkTelemetry::LinkTelemetry(const topology::TopologyIndex& index, LinkStateOptions options,
                             const Clock* clock)
    : clock_(clock), table_(index, options) {}

size_t LinkTelemetry::OnNotification(const std::string& target, const gnmi::Notification& n,
                                     TimeNs arrival_ns) {
  size_t rejected = 0;
  bool changed = false;
  std::function<void()> notify;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t before = table_.stats().oper_changes;
    rejected = table_.Apply(target, n, arrival_ns, clock_->WallNow());
    changed = table_.stats().oper_changes != before;
    if (changed) notify = on_oper_change_;
  }
  if (notify) notify();
  return rejected;
}

void LinkTelemetry::SetAggregator(const std::string& session, std::set<std::string> devices) {
  std::lock_guard<std::mutex> lock(mu_);
  table_.SetAggregator(session, std::move(devices));
}

void LinkTelemetry::SetFutureTolerance(const std::string& device, TimeNs tolerance_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  table_.SetFutureTolerance(device, tolerance_ns);
}

void LinkTelemetry::SetOnOperChange(std::function<void()> f) {
  std::lock_guard<std::mutex> lock(mu_);
  on_oper_change_ = std::move(f);
}

uint64_t LinkTelemetry::OperChanges() const {
  std::lock_guard<std::mutex> lock(mu_);
  return table_.stats().oper_changes;
}

LinkSnapshot LinkTelemetry::Snapshot() const {
  LinkSnapshot snap;
  snap.taken_at_ns = clock_->Now();
  std::lock_guard<std::mutex> lock(mu_);
  snap.links = table_.Compute(snap.taken_at_ns);
  snap.alb_buckets = table_.AlbBuckets(snap.taken_at_ns);
  snap.nic_peers = table_.NicPeers(snap.taken_at_ns);
  snap.stats = table_.stats();
  snap.unavailable_signals = table_.UnavailableSignals();
  return snap;
}

void LinkTelemetry::OnSignalAvailability(const SignalAvailability& a) {
  std::lock_guard<std::mutex> lock(mu_);
  table_.SetSignalAvailability(a);
}

void LinkTelemetry::ResetDevice(const std::string& device) {
  std::lock_guard<std::mutex> lock(mu_);
  table_.ResetDevice(device);
}

}  // namespace loom::telemetry
