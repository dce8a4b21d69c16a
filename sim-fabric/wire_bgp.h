// The emulator's leaves as BGP-DPF speakers (the receiving side of Loom's
// BgpDriver).
//
// Role: one Speaker per leaf, each listening on its own loopback TCP port
// (first_port + leaf index, or an ephemeral port each), with one passive
// colored session per fabric color: the session plan of
// southbound/bgp/prefix_plan.h (Loom dials from LoomSourceAddress(t) for
// color kFabricColorBase + t; the leaf names the session's color and its
// `via` neighbor from that address). Routes received go through a DpfReceiver
// per leaf; after each burst (once the leaf's sessions went quiet for 1 ms,
// at most 10 ms after its first change) the leaf's BGP-learned state is
// rebuilt and handed to WireConfig, which programs the fabric on its thread:
//   - colors: color c -> the neighbors of the sessions of color c that carry
//     routes (ColorGroup next hops; InProcessDriver maps them to the leaf's
//     uplink interfaces towards those spines);
//   - colored routes: prefix -> destination NIC (PrefixPlan), primary color =
//     the preferred color (lowest AIGP), backup = the next one (the backup
//     color's sessions carry the route with a worse AIGP), traffic class from
//     the large community (Loom AS, 1, class); without one the route applies
//     to every class;
//   - link-bandwidth communities -> WeightSet for the destination NIC
//     (relative weights per neighbor, scaled so the largest is 65535);
//   - withdrawals (and sessions going down, after graceful-restart helper
//     time) remove entries; when the primary color loses its last route, the
//     backup becomes the route's color. Link failures under a still-advertised
//     color fall back to the backup inside the fabric (Fabric::SetRoute).
//
// Trigger: BGP sessions. Threads: the leaves are spread over
// `receive_threads` io_context threads (leaf i on thread i % n; each leaf's
// speaker and state on its own thread); Start/Stop from the owner's thread;
// the fabric is only touched through WireConfig (thread-safe).
#ifndef LOOM_SIM_FABRIC_WIRE_BGP_H_
#define LOOM_SIM_FABRIC_WIRE_BGP_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "loom/v1/topology.pb.h"
#include "sim-fabric/wire_config.h"
#include "southbound/bgp/asio.h"
#include "southbound/bgp/dpf.h"
#include "southbound/bgp/prefix_plan.h"
#include "southbound/bgp/speaker.h"

namespace loom::sim {

struct WireBgpOptions {
  std::string listen_address = "127.0.0.1";
  // Leaf i (topology order) listens on first_port + i; 0 = an ephemeral port
  // per leaf (see ports()).
  int first_port = 0;
  loom::southbound::bgp::LoomSessionOptions sessions;
  // BGP receive threads (>= 1), each running the speakers of its leaves.
  int receive_threads = 2;
};

class WireBgpLeaves {
 public:
  // `config` must outlive this object.
  WireBgpLeaves(const loom::v1::Topology& topo, WireConfig* config, WireBgpOptions options);
  ~WireBgpLeaves();  // Stop()s.
  WireBgpLeaves(const WireBgpLeaves&) = delete;
  WireBgpLeaves& operator=(const WireBgpLeaves&) = delete;

  // Binds every leaf's listener and starts the BGP threads. UNAVAILABLE when
  // a port cannot be bound.
  Status Start();
  // Sends Cease on every session, joins the threads. Idempotent.
  void Stop();
  // Leaf id -> TCP port (after Start).
  const std::map<std::string, uint16_t>& ports() const { return ports_; }
  // Established sessions over all leaves (any thread).
  int established() const;
  // Route updates received (announcements and withdrawals, any thread).
  uint64_t updates() const { return updates_.load(); }

 private:
  struct Leaf;
  // A receive thread and the leaves it runs.
  struct Group {
    boost::asio::io_context io;
    std::vector<Leaf*> leaves;
    std::thread thread;
    std::atomic<int> established{0};
  };
  // The leaf's thread.
  void OnRoute(Leaf& leaf, const loom::southbound::bgp::Session& session,
               const loom::southbound::bgp::Prefix& prefix,
               const loom::southbound::bgp::PathAttributes* attrs);
  void OnFlushTimer(Leaf& leaf);
  void Flush(Leaf& leaf);
  void CountSessions(Group& g);

  const loom::v1::Topology topo_;
  const loom::southbound::bgp::PrefixPlan plan_;
  WireConfig* const config_;
  const WireBgpOptions options_;
  std::vector<std::unique_ptr<Group>> groups_;
  std::vector<std::unique_ptr<Leaf>> leaves_;
  std::map<std::string, uint16_t> ports_;
  std::atomic<uint64_t> updates_{0};
  std::atomic<bool> started_{false};
};

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_WIRE_BGP_H_
