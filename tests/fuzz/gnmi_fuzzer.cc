// libFuzzer target for gNMI notification ingest: what targets send Loom
// (gnmi.SubscribeResponse / gnmi.Notification) into the link telemetry that
// placement and the adaptive engine read (telemetry::LinkTelemetry on the
// 3-leaf, 2-spine, 1-NIC fabric of tests/telemetry/test_fabric.h), as the
// collector hands it over: per session, optionally through a platform
// profile's translation first (profile mode), with snapshots in between.
//
// Input: records (tests/fuzz/fuzz_util.h framing). Tag bits:
//   0-2  session: spine-0 spine-1 leaf-0 leaf-1 leaf-2 nic-0, "agg" (an
//        aggregator session allowed to speak for every device), "stranger"
//   3    translate through the sonic profile first (key maps and signals)
//   4    translate through the openconfig profile first (when bit 3 is clear)
//   5    take a Snapshot() and path qualities after this record
//   6    the payload is a bare gnmi.Notification (else a gnmi.SubscribeResponse)
//   7    control record instead: payload[0] even = ResetDevice(session),
//        odd = OnSignalAvailability(session, catalogue signal payload[1],
//        available = payload[2] & 1, interval payload[3] x 100 ms)
// Local time advances 250 ms per record; devices may run 60 s ahead (loomd's
// future tolerance). A final Snapshot() always runs.
//
// Properties: no crash or sanitizer report; rejected updates never exceed
// what was sent; every link direction in a snapshot is sane: rates and
// utilization finite and >= 0, PFC pause ratio in [0, 1], quality band 0..7
// and 0 when oper DOWN; path qualities in 0..7. LOOM_FUZZ_VERBOSE=1 prints
// what each record had rejected (seed checks).
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/topology/topology_index.h"
#include "common/clock.h"
#include "gnmi/gnmi.pb.h"
#include "telemetry/link_state.h"
#include "telemetry/path.h"
#include "telemetry/profile.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/telemetry/test_fabric.h"

namespace {

using loom::TimeNs;
using loom::fuzz::Check;
using loom::fuzz::Finding;
namespace tt = loom::telemetry::testing;

const char* const kSessions[8] = {"spine-0", "spine-1", "leaf-0", "leaf-1",
                                  "leaf-2",  "nic-0",   "agg",    "stranger"};
constexpr TimeNs kStep = 250 * loom::kNsPerMs;
constexpr TimeNs kDeviceEpoch = 1'700'000'000 * loom::kNsPerSec;  // VirtualClock's wall epoch

struct Fixture {
  std::unique_ptr<loom::topology::TopologyIndex> index;
  loom::telemetry::ProfileSet profiles;
};

const Fixture& F() {
  static const Fixture* f = [] {
    auto* x = new Fixture;
    x->index = std::make_unique<loom::topology::TopologyIndex>(tt::TwoTier());
    std::string error;
    if (!loom::telemetry::LoadProfiles({std::string(LOOM_SOURCE_DIR) + "/telemetry/profiles"},
                                       &x->profiles, &error)) {
      Finding(error);
    }
    return x;
  }();
  return *f;
}

void CheckSnapshot(const loom::telemetry::LinkSnapshot& s,
                   const loom::topology::TopologyIndex& ix) {
  Check(s.links.size() == 2 * static_cast<size_t>(ix.topology().links_size()),
        "snapshot: not two directions per link");
  for (const auto& d : s.links) {
    const std::string where = "snapshot: " + (d.link_id ? *d.link_id : std::string("?")) + " dir " +
                              std::to_string(static_cast<int>(d.direction)) + ": ";
    for (auto [name, v] : {std::pair<const char*, double>{"tx_bps", d.tx_bps},
                           {"utilization", d.utilization},
                           {"tx_pps", d.tx_pps},
                           {"ecn_marked_pps", d.ecn_marked_pps},
                           {"cnp_pps", d.cnp_pps},
                           {"pfc_pause_fps", d.pfc_pause_fps},
                           {"drops_pps", d.drops_pps},
                           {"errors_pps", d.errors_pps},
                           {"burst_gap_ns", d.burst_gap_ns},
                           {"intra_burst_gap_ns", d.intra_burst_gap_ns}}) {
      Check(std::isfinite(v) && v >= 0, where + name + " = " + std::to_string(v));
    }
    Check(d.pfc_pause_ratio >= 0 && d.pfc_pause_ratio <= 1,
          where + "pfc_pause_ratio = " + std::to_string(d.pfc_pause_ratio));
    Check(d.quality_band >= 0 && d.quality_band <= 7,
          where + "quality band " + std::to_string(d.quality_band));
    Check(d.oper != loom::telemetry::OperStatus::kDown || d.quality_band == 0,
          where + "oper DOWN with quality band " + std::to_string(d.quality_band));
    Check(d.live_capacity_bps >= 0, where + "negative live capacity");
  }
  for (const auto& b : s.alb_buckets) {
    Check(std::isfinite(b.pps) && b.pps >= 0 && std::isfinite(b.bps) && b.bps >= 0,
          "snapshot: ALB bucket rate " + std::to_string(b.pps) + " / " + std::to_string(b.bps));
  }
  for (const auto& p : s.nic_peers) {
    Check(std::isfinite(p.bps) && p.bps >= 0, "snapshot: NIC peer rate " + std::to_string(p.bps));
  }
  for (const auto& q : loom::telemetry::ComputePathQualities(ix, s.links)) {
    Check(q.band >= 0 && q.band <= 7, "path quality band " + std::to_string(q.band));
    Check(q.band <= q.local_band && q.band <= q.remote_band, "path band above a hop's band");
  }
}

class Harness {
 public:
  Harness() : clock_(0), telemetry_(*F().index, Options(), &clock_) {
    std::set<std::string> all;
    for (const auto& d : F().index->topology().devices()) {
      all.insert(d.id());
      telemetry_.SetFutureTolerance(d.id(), 60 * loom::kNsPerSec);
    }
    telemetry_.SetAggregator("agg", all);
    telemetry_.SetInterfaceAliases("leaf-0", {{"etp1", "Ethernet0"}, {"etp2", "Ethernet1"}});
  }

  static loom::telemetry::LinkStateOptions Options() {
    loom::telemetry::LinkStateOptions o;
    o.staleness.sample_interval_ns = loom::kNsPerSec;
    o.staleness.stale_after_intervals = 3;
    o.future_tolerance_ns = 60 * loom::kNsPerSec;
    return o;
  }

  void Record(uint8_t tag, const std::string& payload) {
    clock_.Advance(kStep);
    const std::string session = kSessions[tag & 7];
    if (tag & 0x80) {
      Control(session, payload);
      return;
    }
    gnmi::Notification n;
    if (tag & 0x40) {
      if (!n.ParseFromString(payload)) return;
    } else {
      gnmi::SubscribeResponse r;
      if (!r.ParseFromString(payload) || r.response_case() != gnmi::SubscribeResponse::kUpdate) {
        return;
      }
      n = r.update();
    }
    const gnmi::Notification* in = &n;
    gnmi::Notification translated;
    if (tag & 0x18) {
      auto& tr = Translator(session, (tag & 0x08) ? "sonic" : "openconfig");
      const auto& p = tr.profile();
      for (int i = 0; i < p.key_maps_size(); ++i) tr.UpdateKeyMap(i, n);
      std::vector<int> all;
      for (int i = 0; i < p.signals_size(); ++i) all.push_back(i);
      std::string err;
      tr.Translate(all, n, clock_.Now(), &translated, &err);
      in = &translated;
    }
    const size_t sent = static_cast<size_t>(in->update_size() + in->delete__size());
    const size_t rejected = telemetry_.OnNotification(session, *in, clock_.Now());
    Check(rejected <= sent,
          "rejected " + std::to_string(rejected) + " of " + std::to_string(sent) + " updates");
    static const bool verbose = std::getenv("LOOM_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "%s: %zu of %zu rejected\n", session.c_str(), rejected, sent);
    if (tag & 0x20) Snapshot();
  }

  void Snapshot() { CheckSnapshot(telemetry_.Snapshot(), *F().index); }

 private:
  void Control(const std::string& session, const std::string& p) {
    const uint8_t op = p.empty() ? 0 : static_cast<uint8_t>(p[0]);
    if ((op & 1) == 0) {
      telemetry_.ResetDevice(session);
      return;
    }
    const auto& signals = loom::telemetry::CatalogueSignals();
    loom::telemetry::SignalAvailability a;
    a.target = session;
    a.signal = signals[(p.size() > 1 ? static_cast<uint8_t>(p[1]) : 0) % signals.size()];
    a.available = p.size() > 2 && (p[2] & 1);
    a.reason = a.available ? "" : "not served";
    a.effective_interval_ns =
        (p.size() > 3 ? static_cast<uint8_t>(p[3]) : 0) * 100 * loom::kNsPerMs;
    telemetry_.OnSignalAvailability(a);
  }

  loom::telemetry::ProfileTranslator& Translator(const std::string& session,
                                                 const std::string& profile) {
    auto key = session + "/" + profile;
    auto it = translators_.find(key);
    if (it == translators_.end()) {
      it = translators_
               .emplace(key,
                        std::make_unique<loom::telemetry::ProfileTranslator>(
                            F().profiles.profiles.at(profile),
                            std::unordered_map<std::string, std::string>{{"etp1", "Ethernet0"}}))
               .first;
    }
    return *it->second;
  }

  loom::VirtualClock clock_;
  loom::telemetry::LinkTelemetry telemetry_;
  std::map<std::string, std::unique_ptr<loom::telemetry::ProfileTranslator>> translators_;
};

// --- seeds -------------------------------------------------------------------

gnmi::TypedValue Json(const std::string& v) {
  gnmi::TypedValue t;
  t.set_json_ietf_val(v);
  return t;
}

// A SubscribeResponse record (tag: session | flags).
std::string Update(uint8_t tag, const gnmi::Notification& n) {
  gnmi::SubscribeResponse r;
  *r.mutable_update() = n;
  std::string out;
  loom::fuzz::AddRecord(&out, tag, r.SerializeAsString());
  return out;
}

std::string Bare(uint8_t tag, const gnmi::Notification& n) {
  std::string out;
  loom::fuzz::AddRecord(&out, static_cast<uint8_t>(tag | 0x40), n.SerializeAsString());
  return out;
}

uint8_t S(const char* session) {
  for (uint8_t i = 0; i < 8; ++i) {
    if (std::string(kSessions[i]) == session) return i;
  }
  Finding(std::string("no session ") + session);
}

// tt::Note, with "" for no prefix.
gnmi::Notification N(TimeNs ts, const std::string& prefix,
                     const std::vector<std::pair<std::string, gnmi::TypedValue>>& ups) {
  if (!prefix.empty()) return tt::Note(kDeviceEpoch + ts, prefix, ups);
  gnmi::Notification n;
  n.set_timestamp(kDeviceEpoch + ts);
  for (const auto& [path, val] : ups) {
    gnmi::Update* u = n.add_update();
    if (!loom::telemetry::ParsePath(path, u->mutable_path()).ok()) Finding("bad path " + path);
    *u->mutable_val() = val;
  }
  return n;
}

void WriteSeeds() {
  using tt::U;
  const TimeNs s = loom::kNsPerSec;
  const std::string c = "/interfaces/interface[name=Ethernet0]/state/counters";
  const uint8_t snap = 0x20;
  {
    std::string seed;
    for (int t = 1; t <= 3; ++t) {
      seed += Update(S("leaf-0"), N(t * s, c,
                                    {{"out-octets", U(t * 10'000'000'000ull)},
                                     {"in-octets", U(t * 7'000'000ull)},
                                     {"out-pkts", U(t * 1000ull)},
                                     {"out-discards", U(t)},
                                     {"in-errors", U(0)}}));
      seed += Update(S("spine-0") | snap, N(t * s, c, {{"in-octets", U(t * 9'000'000'000ull)}}));
    }
    loom::fuzz::WriteSeed("interface_counters", seed);
  }
  {
    std::string seed;
    const std::string st = "/interfaces/interface[name=Ethernet1]/state";
    seed += Update(
        S("leaf-1"),
        N(s, st, {{"oper-status", tt::S("UP")}, {"operational-speed-bps", U(400'000'000'000ull)}}));
    seed += Update(S("leaf-1") | snap, N(2 * s, st, {{"oper-status", tt::S("DOWN")}}));
    seed += Update(
        S("spine-1") | snap,
        N(3 * s, st, {{"oper-status", tt::S("LOWER_LAYER_DOWN")}, {"carrier-transitions", U(4)}}));
    loom::fuzz::WriteSeed("oper_status", seed);
  }
  {
    std::string seed;
    const std::string q =
        "/qos/interfaces/interface[interface-id=Ethernet1]/output/queues/queue[name=3]/state";
    const std::string pfc =
        "loom:/pfc/interfaces/interface[name=Ethernet1]/priorities/priority[id=3]";
    for (int t = 1; t <= 2; ++t) {
      seed += Update(S("spine-0"), N(t * s, q,
                                     {{"ecn-marked-pkts", U((t - 1) * 1000)},
                                      {"dropped-pkts", U((t - 1) * 10)},
                                      {"max-queue-len", U(300'000)}}));
      seed += Update(S("spine-0"), N(t * s, "loom:" + q, {{"current-queue-len", U(120'000)}}));
      seed +=
          Update(S("spine-0"),
                 N(t * s, pfc + "/state",
                   {{"rx-pause-duration-us", U((t - 1) * 250'000)}, {"rx-pkts", U((t - 1) * 40)}}));
    }
    seed +=
        Update(S("spine-0") | snap, N(2 * s, pfc + "/watchdog/state",
                                      {{"status", tt::S("stormed")}, {"deadlock-detected", U(2)}}));
    loom::fuzz::WriteSeed("queue_pfc_counters", seed);
  }
  {
    std::string seed;
    const std::string roce = "loom:/nic/interfaces/interface[name=eth0]/roce";
    for (int t = 1; t <= 2; ++t) {
      seed += Update(S("nic-0"),
                     N(t * s, roce + "/state",
                       {{"np_cnp_sent", U((t - 1) * 300)}, {"rp_cnp_handled", U((t - 1) * 70)}}));
      seed += Update(S("nic-0") | snap,
                     N(t * s, roce + "/peers/peer[nic=nic-0]/state", {{"tx-octets", U(t * 5000)}}));
    }
    loom::fuzz::WriteSeed("nic_roce", seed);
  }
  {
    std::string seed;
    const std::string b = "loom:/alb/groups/group[name=default]/buckets/bucket[id=7]/state";
    for (int t = 1; t <= 2; ++t) {
      seed += Update(S("leaf-0") | snap, N(t * s, b,
                                           {{"transmit-pkts", U((t - 1) * 100)},
                                            {"transmit-octets", U((t - 1) * 1000)},
                                            {"next-hop", tt::S("Ethernet1")}}));
    }
    loom::fuzz::WriteSeed("alb_buckets", seed);
  }
  {
    std::string seed;
    seed += Update(S("leaf-0"),
                   N(s, "/lldp/interfaces/interface[name=Ethernet0]/neighbors/neighbor[id=1]/state",
                     {{"system-name", tt::S("spine-0")}, {"port-id", tt::S("Ethernet0")}}));
    seed += Update(S("spine-1") | snap,
                   N(s, "/lldp/interfaces/interface[name=Ethernet2]/neighbors/neighbor[id=1]/state",
                     {{"system-name", tt::S("leaf-9")}, {"port-id", tt::S("etp1")}}));
    loom::fuzz::WriteSeed("lldp", seed);
  }
  {
    // An aggregator session speaking for two devices; a sync response; a
    // delete; a stranger; a timestamp far in the future.
    std::string seed;
    seed += Update(S("agg"), N(s, "leaf-2@" + c, {{"out-octets", U(5)}}));
    gnmi::SubscribeResponse sync;
    sync.set_sync_response(true);
    loom::fuzz::AddRecord(&seed, S("agg"), sync.SerializeAsString());
    seed += Update(S("agg"), N(2 * s, "spine-1@" + c, {{"out-octets", U(50'000'000)}}));
    gnmi::Notification del = N(3 * s, c, {});
    if (!loom::telemetry::ParsePath("out-octets", del.add_delete_()).ok()) Finding("path");
    seed += Update(S("agg"), del);
    seed += Update(S("stranger"), N(3 * s, c, {{"out-octets", U(1)}}));
    seed += Bare(S("leaf-1") | snap, N(3600 * s, c, {{"out-octets", U(1)}}));
    loom::fuzz::WriteSeed("sessions_and_trust", seed);
  }
  {
    // Profile mode: SONiC COUNTERS_DB answers and OpenConfig JSON_IETF containers.
    std::string seed;
    for (int t = 1; t <= 2; ++t) {
      gnmi::Notification n = N(t * s, "", {});
      n.mutable_prefix()->set_target("COUNTERS_DB");
      auto* u = n.add_update();
      if (!loom::telemetry::ParsePath("COUNTERS/Ethernet*", u->mutable_path()).ok()) Finding("p");
      *u->mutable_val() =
          Json(R"({"Ethernet0":{"SAI_PORT_STAT_IF_OUT_OCTETS":")" +
               std::to_string(t * 1'000'000'000ull) +
               R"(","SAI_PORT_STAT_IF_IN_OCTETS":"7","SAI_PORT_STAT_PFC_3_RX_PKTS":"7"},)"
               R"("etp1":{"SAI_PORT_STAT_IF_IN_ERRORS":"5"}})");
      seed += Update(S("leaf-0") | 0x08 | snap, n);
    }
    gnmi::Notification map = N(s, "", {});
    auto* mu = map.add_update();
    if (!loom::telemetry::ParsePath("COUNTERS_QUEUE_NAME_MAP", mu->mutable_path()).ok())
      Finding("p");
    *mu->mutable_val() = Json(R"({"Ethernet0:3":"oid:0x15000000000a3"})");
    seed += Update(S("leaf-0") | 0x08, map);
    gnmi::Notification wm = N(2 * s, "", {});
    auto* wu = wm.add_update();
    if (!loom::telemetry::ParsePath("PERIODIC_WATERMARKS", wu->mutable_path()).ok()) Finding("p");
    *wu->mutable_val() =
        Json(R"({"oid:0x15000000000a3":{"SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES":"9000"}})");
    seed += Update(S("leaf-0") | 0x08 | snap, wm);
    gnmi::Notification oc = N(2 * s, "", {});
    auto* ou = oc.add_update();
    if (!loom::telemetry::ParsePath("/interfaces", ou->mutable_path()).ok()) Finding("p");
    *ou->mutable_val() = Json(
        R"({"openconfig-interfaces:interface":[{"name":"Ethernet2","state":{"oper-status":"UP",)"
        R"("counters":{"openconfig-interfaces:out-octets":"200"}}}]})");
    seed += Update(S("spine-1") | 0x10 | snap, oc);
    loom::fuzz::WriteSeed("profile_mode", seed);
  }
  {
    std::string seed;
    loom::fuzz::AddRecord(&seed, 0x80 | S("leaf-0"), std::string("\x01\x00\x00\x0a", 4));
    seed += Update(S("leaf-0"), N(s, c, {{"out-octets", U(1)}}));
    loom::fuzz::AddRecord(&seed, 0x80 | S("leaf-0"), std::string("\x00", 1));
    seed += Update(S("leaf-0") | snap, N(2 * s, c, {{"out-octets", U(0)}}));
    loom::fuzz::WriteSeed("control_records", seed);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  loom::fuzz::QuietLogs();
  F();
  if (loom::fuzz::SeedDir() != nullptr) {
    WriteSeeds();
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  loom::fuzz::Reader in(data, size);
  Harness h;
  uint8_t tag;
  std::string payload;
  int records = 0;
  while (records++ < 256 && in.Next(&tag, &payload)) h.Record(tag, payload);
  h.Snapshot();
  return 0;
}
