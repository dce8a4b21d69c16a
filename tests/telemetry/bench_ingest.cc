// Ingest benchmark: end-to-end cost from gRPC receive (wire bytes of a
// SubscribeResponse) to updated link state, on one core.
//
// Fabric: 32 leaves x 32 spines = 1,024 links = 2,048 switch ports. Each port
// sends 20 values per sample, as a gNMI target does with prefix compression:
//   interfaces counters (9), OpenConfig queue 3 state (5), loom current-queue-len
//   (1), loom PFC priority 3 state (4), loom PFC watchdog deadlock-detected (1).
// The timed loop does what the collector's receive path does per message:
// SubscribeResponse::ParseFromString (gRPC's deserialization), then
// LinkTelemetry::OnNotification (lock, path resolution, counter
// normalization). Prints updates/s. Not a test: no assertion on timing.
//
// usage: bench_ingest [rounds]   (default 50 sample rounds)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "api/topology/topology_index.h"
#include "common/clock.h"
#include "gnmi/gnmi.pb.h"
#include "telemetry/link_state.h"
#include "telemetry/path.h"

namespace {

using loom::TimeNs;
using loom::telemetry::ParsePath;

gnmi::Notification Make(TimeNs ts, const std::string& prefix,
                        const std::vector<std::pair<const char*, uint64_t>>& leaves) {
  gnmi::Notification n;
  n.set_timestamp(ts);
  if (!ParsePath(prefix, n.mutable_prefix()).ok()) std::abort();
  for (const auto& [leaf, v] : leaves) {
    gnmi::Update* u = n.add_update();
    u->mutable_path()->add_elem()->set_name(leaf);
    u->mutable_val()->set_uint_val(v);
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 50;
  constexpr int kLeaves = 32, kSpines = 32;
  loom::v1::Topology topo;
  for (int s = 0; s < kSpines; ++s) {
    auto* d = topo.add_devices();
    d->set_id("spine-" + std::to_string(s));
    d->set_role(loom::v1::DEVICE_ROLE_SPINE);
  }
  for (int l = 0; l < kLeaves; ++l) {
    auto* d = topo.add_devices();
    d->set_id("leaf-" + std::to_string(l));
    d->set_role(loom::v1::DEVICE_ROLE_LEAF);
    for (int s = 0; s < kSpines; ++s) {
      auto* k = topo.add_links();
      k->set_id("l" + std::to_string(l) + "s" + std::to_string(s));
      k->mutable_a()->set_device("leaf-" + std::to_string(l));
      k->mutable_a()->set_interface("Ethernet" + std::to_string(s));
      k->mutable_b()->set_device("spine-" + std::to_string(s));
      k->mutable_b()->set_interface("Ethernet" + std::to_string(l));
      k->set_capacity_bps(400'000'000'000);
    }
  }
  loom::topology::TopologyIndex index(topo);
  loom::VirtualClock clock;
  loom::telemetry::LinkStateOptions options;
  options.staleness.sample_interval_ns = 100 * loom::kNsPerMs;
  loom::telemetry::LinkTelemetry telemetry(index, options, &clock);

  // Pre-serialize every SubscribeResponse of every round (wire bytes).
  std::vector<std::pair<std::string, std::string>> wire;  // (target, bytes)
  size_t ports = 0;
  uint64_t updates = 0;
  for (int r = 0; r < rounds; ++r) {
    const TimeNs ts = 1'700'000'000 * loom::kNsPerSec + r * 100 * loom::kNsPerMs;
    const uint64_t c = static_cast<uint64_t>(r) * 1'000'000;
    ports = 0;
    for (const auto& link : topo.links()) {
      for (const auto* end : {&link.a(), &link.b()}) {
        ++ports;
        const std::string& intf = end->interface();
        std::vector<gnmi::Notification> notes = {
            Make(ts, "/interfaces/interface[name=" + intf + "]/state/counters",
                 {{"in-octets", 5 * c},
                  {"out-octets", 5 * c},
                  {"in-pkts", c},
                  {"out-pkts", c},
                  {"in-discards", 0},
                  {"out-discards", 0},
                  {"in-errors", 0},
                  {"out-errors", 0},
                  {"carrier-transitions", 1}}),
            Make(ts,
                 "/qos/interfaces/interface[interface-id=" + intf +
                     "]/output/queues/queue[name=3]/state",
                 {{"transmit-pkts", c},
                  {"transmit-octets", 5 * c},
                  {"dropped-pkts", 0},
                  {"ecn-marked-pkts", c / 100},
                  {"max-queue-len", 20000}}),
            Make(ts,
                 "loom:/qos/interfaces/interface[interface-id=" + intf +
                     "]/output/queues/queue[name=3]/state",
                 {{"current-queue-len", 10000}}),
            Make(
                ts,
                "loom:/pfc/interfaces/interface[name=" + intf + "]/priorities/priority[id=3]/state",
                {{"rx-pkts", r},
                 {"tx-pkts", r},
                 {"rx-pause-duration-us", r},
                 {"tx-pause-duration-us", r}}),
            Make(ts,
                 "loom:/pfc/interfaces/interface[name=" + intf +
                     "]/priorities/priority[id=3]/watchdog/state",
                 {{"deadlock-detected", 0}}),
        };
        for (auto& n : notes) {
          gnmi::SubscribeResponse resp;
          updates += static_cast<uint64_t>(n.update_size());
          *resp.mutable_update() = std::move(n);
          wire.emplace_back(end->device(), resp.SerializeAsString());
        }
      }
    }
  }

  gnmi::SubscribeResponse resp;
  // Deserialization alone, for the split.
  const auto parse_start = std::chrono::steady_clock::now();
  for (const auto& [target, bytes] : wire) {
    resp.Clear();
    if (!resp.ParseFromString(bytes)) std::abort();
  }
  const double parse_secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - parse_start).count();
  size_t rejected = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const auto& [target, bytes] : wire) {
    resp.Clear();
    if (!resp.ParseFromString(bytes)) std::abort();
    rejected += telemetry.OnNotification(target, resp.update(), clock.Now());
  }
  const auto end = std::chrono::steady_clock::now();
  const double secs = std::chrono::duration<double>(end - start).count();

  clock.Advance(100 * loom::kNsPerMs);
  const auto snap_start = std::chrono::steady_clock::now();
  loom::telemetry::LinkSnapshot snap = telemetry.Snapshot();
  auto paths = loom::telemetry::ComputePathQualities(index, snap.links);
  const double snap_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - snap_start)
          .count();
  int fresh = 0;
  for (const auto& l : snap.links) fresh += l.stale ? 0 : 1;

  std::printf("fabric: %d leaves x %d spines, %zu switch ports, 20 values/port/sample\n", kLeaves,
              kSpines, ports);
  std::printf("rounds: %d, messages: %zu, updates: %llu, rejected: %zu\n", rounds, wire.size(),
              static_cast<unsigned long long>(updates), rejected);
  std::printf("ingest (parse + path resolution + normalization), one thread: %.3f s\n", secs);
  std::printf("  %.0f updates/s, %.0f ns/update, %.0f messages/s\n", updates / secs,
              secs * 1e9 / updates, wire.size() / secs);
  std::printf("  of which protobuf deserialization alone: %.0f ns/update\n",
              parse_secs * 1e9 / updates);
  std::printf("  headroom: %.1fx the 400,000 updates/s of 2,000 ports x 20 counters @ 100 ms\n",
              updates / secs / 400000.0);
  std::printf("snapshot + path quality (%zu paths): %.2f ms; fresh directions: %d / %zu\n",
              paths.size(), snap_ms, fresh, snap.links.size());
  return 0;
}
