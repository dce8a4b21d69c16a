// Translation benchmark: the cost of reading a switch OS's native answers
// through its platform profile (ProfileTranslator), on one core.
//
// Workloads, each one sample of one 64-port switch:
//  - sonic: the answer to COUNTERS/Ethernet* as SONiC sends it — one update
//    whose json_ietf_val holds 64 objects of 110 string SAI counters (8 of
//    them interface counters, 16 PFC counters, the rest not in the catalogue);
//  - openconfig-json: 64 updates, one per interface counters container, as
//    JSON_IETF objects of 8 module-prefixed leaves;
//  - openconfig-proto: 64 x 8 typed leaves (PROTO) — the baseline.
// Timed: Translate() of the notification (JSON parse, flattening, rule
// matching, catalogue path building). Prints samples/s, native leaves/s and
// catalogue updates/s. Not a test: no assertion on timing.
//
// usage: bench_translate [rounds]   (default 200)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "telemetry/path.h"
#include "telemetry/profile.h"

namespace {

using loom::telemetry::ParsePath;
using loom::telemetry::ProfileTranslator;

constexpr int kPorts = 64;

const char* kSai[] = {"SAI_PORT_STAT_IF_IN_OCTETS",     "SAI_PORT_STAT_IF_OUT_OCTETS",
                      "SAI_PORT_STAT_IF_IN_UCAST_PKTS", "SAI_PORT_STAT_IF_OUT_UCAST_PKTS",
                      "SAI_PORT_STAT_IF_IN_DISCARDS",   "SAI_PORT_STAT_IF_OUT_DISCARDS",
                      "SAI_PORT_STAT_IF_IN_ERRORS",     "SAI_PORT_STAT_IF_OUT_ERRORS"};
const char* kOc[] = {"in-octets",   "out-octets",   "in-pkts",   "out-pkts",
                     "in-discards", "out-discards", "in-errors", "out-errors"};

gnmi::Notification Sonic(int round) {
  std::string json = "{";
  for (int p = 0; p < kPorts; ++p) {
    if (p > 0) json += ",";
    json += "\"Ethernet" + std::to_string(4 * p) + "\":{";
    int n = 0;
    auto add = [&](const std::string& k, uint64_t v) {
      if (n++ > 0) json += ",";
      json += "\"" + k + "\":\"" + std::to_string(v) + "\"";
    };
    for (const char* k : kSai) add(k, 1'000'000ull * round + p);
    for (int prio = 0; prio < 8; ++prio) {
      add("SAI_PORT_STAT_PFC_" + std::to_string(prio) + "_RX_PKTS", round);
      add("SAI_PORT_STAT_PFC_" + std::to_string(prio) + "_TX_PKTS", round);
    }
    for (int i = 0; n < 110; ++i) add("SAI_PORT_STAT_ETHER_OTHER_" + std::to_string(i), i);
    json += "}";
  }
  json += "}";
  gnmi::Notification note;
  note.set_timestamp(1'700'000'000'000'000'000 + round * 1'000'000'000ll);
  note.mutable_prefix()->set_target("COUNTERS_DB");
  gnmi::Update* u = note.add_update();
  if (!ParsePath("COUNTERS/Ethernet*", u->mutable_path()).ok()) std::abort();
  u->mutable_val()->set_json_ietf_val(json);
  return note;
}

gnmi::Notification OpenConfig(int round, bool json) {
  gnmi::Notification note;
  note.set_timestamp(1'700'000'000'000'000'000 + round * 1'000'000'000ll);
  for (int p = 0; p < kPorts; ++p) {
    const std::string base =
        "/interfaces/interface[name=Ethernet" + std::to_string(4 * p) + "]/state/counters";
    if (json) {
      gnmi::Update* u = note.add_update();
      if (!ParsePath(base, u->mutable_path()).ok()) std::abort();
      std::string j = "{";
      for (int i = 0; i < 8; ++i) {
        if (i > 0) j += ",";
        j += "\"openconfig-interfaces:" + std::string(kOc[i]) + "\":\"" +
             std::to_string(1'000'000ull * round + p) + "\"";
      }
      u->mutable_val()->set_json_ietf_val(j + "}");
      continue;
    }
    for (int i = 0; i < 8; ++i) {
      gnmi::Update* u = note.add_update();
      if (!ParsePath(base + "/" + kOc[i], u->mutable_path()).ok()) std::abort();
      u->mutable_val()->set_uint_val(1'000'000ull * round + p);
    }
  }
  return note;
}

void Run(const char* name, const loom::v1::TelemetryProfile& profile,
         const std::vector<int>& signals, gnmi::Notification (*make)(int, bool), bool flag,
         int rounds) {
  ProfileTranslator tr(profile, {});
  std::vector<gnmi::Notification> notes;
  for (int r = 0; r < rounds; ++r) notes.push_back(make(r + 1, flag));
  size_t updates = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& n : notes) {
    gnmi::Notification out;
    std::string err;
    tr.Translate(signals, n, 0, &out, &err);
    updates += static_cast<size_t>(out.update_size());
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "%-17s %6.0f switch samples/s  %6.2f ms/sample  %5.2f M native leaves/s  %5.2f M catalogue "
      "updates/s\n",
      name, rounds / s, 1e3 * s / rounds, tr.stats().leaves / s / 1e6, updates / s / 1e6);
}

gnmi::Notification SonicAdapter(int r, bool) { return Sonic(r); }

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 200;
  const std::string dir = loom::telemetry::ShippedProfileDir();
  loom::telemetry::ProfileSet set;
  std::string error;
  if (dir.empty() || !loom::telemetry::LoadProfiles({dir}, &set, &error)) {
    std::fprintf(stderr, "bench_translate: cannot load profiles: %s\n", error.c_str());
    return 1;
  }
  std::printf("bench_translate: one %d-port switch per sample, %d samples each\n", kPorts, rounds);
  auto all = [](const loom::v1::TelemetryProfile& p) {
    std::vector<int> v;
    for (int i = 0; i < p.signals_size(); ++i) v.push_back(i);
    return v;
  };
  const auto& sonic = set.profiles.at("sonic");
  const auto& oc = set.profiles.at("openconfig");
  Run("sonic", sonic, all(sonic), SonicAdapter, false, rounds);
  Run("openconfig-json", oc, all(oc), OpenConfig, true, rounds);
  Run("openconfig-proto", oc, all(oc), OpenConfig, false, rounds);
  return 0;
}
