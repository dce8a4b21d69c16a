// The configuration datastore of one device of loom-fabric as a platform
// keeps it, for the platform personalities' gNMI Set and config Get
// (personality.h): SONiC's CONFIG_DB written through sonic-gnmi (origin
// `sonic-db`), or an OpenConfig tree. Every SetRequest is applied to a copy of
// the committed datastore and the whole result is validated against the
// platform's public YANG modules (yang_context.h) before anything is
// committed; the accepted datastore is translated into the DeviceState parts
// the emulator runs (`owned_fields`), which the personality hands to
// WireConfig::Program.
//
// SONiC (MakeSonicConfig; modelled on sonic-net/sonic-gnmi @5ec1c20 with
// --gnmi_native_write, translib write off; platforms.md §1):
//   paths   /CONFIG_DB/localhost[/TABLE[/KEY[/FIELD]]] (prefix elems joined;
//           prefix.target ignored, as sonic-gnmi's native write does); KEY is
//           the CONFIG_DB key ("default|198.18.0.1/32"); values json_ietf_val
//           or json_val holding CONFIG_DB JSON (every field a string; numbers
//           and booleans are taken as their text), string_val for a FIELD.
//   refused origin other than sonic-db (also empty) -> UNIMPLEMENTED
//           "Translib write is disabled" (server.go Set); paths disagreeing on
//           origin -> UNIMPLEMENTED; fewer than 2 elements, an unknown
//           database or namespace -> NOT_FOUND (server.go wraps
//           NewMixedDbClient's errors so); APPL_DB, COUNTERS_DB, ... ->
//           UNIMPLEMENTED (this target writes CONFIG_DB only); a table
//           without a YANG list in the module set, a key whose part count
//           matches no list of the table, a bad value -> INVALID_ARGUMENT;
//           then the whole resulting CONFIG_DB, as RFC 7951 (each table the
//           list of its sonic-X container, keys split on '|', values typed
//           from the YANG leaf: <= 32-bit integers as numbers, booleans as
//           true/false, the rest strings; an untypeable value stays a string
//           so libyang names it), must pass `yanglint -t config`: anything
//           else -> INVALID_ARGUMENT with libyang's message and data path.
//           (Real sonic-gnmi reports GCU's YANG failures as gRPC UNKNOWN with
//           the same message; gNMI spec §3.4.7 asks INVALID_ARGUMENT for a
//           value that does not fit the schema, which is what we send.)
//   seeded  PORT|<port> for every interface of the device (lanes, speed from
//           the link capacity, admin_status up), as a switch boots.
//   Get     type ALL only (server.go: others UNIMPLEMENTED), encoding JSON or
//           JSON_IETF, paths /CONFIG_DB/localhost/TABLE[/KEY[/FIELD]] (or
//           prefix.target CONFIG_DB and TABLE[/KEY[/FIELD]]); one update per
//           path holding the table {key: {field: value}}, the row or the
//           value as CONFIG_DB strings; a missing row or field -> NOT_FOUND,
//           a missing table -> no update.
//   emulator (owned: colors, routes, dlb, thresholds, pfc_watchdog,
//           disabled_interfaces)
//           STATIC_ROUTE|default|<prefix> whose prefix is a NIC's (Loom's
//             prefix plan) and whose `ifname` list names links of the device
//             -> a color over those neighbours (one color id per neighbour
//             set, from kStaticColorBase) and a route of every traffic class;
//             a route without ifname, to an unknown prefix, blackhole or in
//             another VRF stays configured but forwards nothing here (SONiC
//             keeps an unresolvable static route inactive);
//           ARS_PROFILE + ARS_INTERFACE rows (or ars_nhg_path_selector_mode
//             global) -> DLB per_flowlet_quality -> flowlet /
//             per_packet_quality -> per-packet, flowlet_idle_time µs; no
//             active ARS -> static hashing once ARS was configured (before
//             that the emulator's mode is left alone);
//           QUEUE|<port>|<q> wred_profile -> WRED_PROFILE with ECN on green
//             -> ECN kmin/kmax/pmax of priority q (green thresholds and drop
//             probability; the emulator's ECN is per switch and priority);
//           PFC_WD|<port> rows (+ GLOBAL POLL_INTERVAL) -> the watchdog
//             (action, detection/restoration time; the emulator's watchdog is
//             per switch: the first port's settings);
//           PORT admin_status other than up, or no PORT row -> the port's
//             link is down.
//
// OpenConfig (MakeOpenConfigConfig; a strict OpenConfig target):
//   paths   under /interfaces, /qos, /network-instances, /lldp (the models
//           the personality serves); origin "" or "openconfig"; prefix.target
//           "" or the device id; values json_ietf_val (openconfig also
//           json_val and scalar TypedValues for a leaf).
//   refused another origin -> INVALID_ARGUMENT; another prefix.target ->
//           NOT_FOUND; a path that is not in those models' schema (unknown
//           element, another top-level model) -> NOT_FOUND (gNMI spec §3.4.7:
//           "an update or replace operation that corresponds to a path that
//           is not valid - NotFound"; platforms.md documents no
//           platform-specific code); a list element with missing or unknown
//           keys, a replace/update of a whole list, a value whose keys
//           contradict the path -> INVALID_ARGUMENT; encoding JSON on
//           openconfig-json or a non-JSON value -> UNIMPLEMENTED; then the
//           whole resulting tree must pass `yanglint -t config` with the
//           OpenConfig set: otherwise INVALID_ARGUMENT with libyang's message.
//           Deletes of absent nodes are accepted (§3.4.6); "*" keys and
//           key-less list elements delete every match.
//   seeded  /interfaces/interface[name] (type ethernetCsmacd, enabled) for
//           every port; network-instance "default" (DEFAULT_INSTANCE) with
//           protocol STATIC "DEFAULT".
//   Get     type CONFIG: one update per matching data node (path = its data
//           path, value = its RFC 7951 JSON); no match -> NOT_FOUND. Other
//           types are telemetry (personality.h).
//   emulator (owned: colors, routes, weights, thresholds, disabled_interfaces)
//           static-routes/static[prefix] of network-instance "default",
//             protocol STATIC: next hops resolved by interface-ref, else by
//             `index` naming a neighbour device (Loom's openconfig adapter
//             writes index = neighbour id) -> color + route as for SONiC;
//             wecmp-weight -> GLB weights of the destination;
//           queue-management-profile wred/uniform with enable-ecn bound to an
//             output queue named by a priority number -> ECN thresholds;
//           interface config/enabled false -> the port's link is down.
//
// Thread: every method is thread-safe (one mutex); Prepare does not change
// the committed datastore, Commit installs a prepared candidate.
#ifndef LOOM_SIM_FABRIC_PLATFORM_CONFIG_H_
#define LOOM_SIM_FABRIC_PLATFORM_CONFIG_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "gnmi/gnmi.pb.h"
#include "loom/v1/device_state.pb.h"
#include "loom/v1/topology.pb.h"
#include "sim-fabric/yang_context.h"

namespace loom::southbound::bgp {
class PrefixPlan;
}

namespace loom::sim {

// Colors the personalities give static routes: one per distinct set of next
// hops, kStaticColorBase + i (away from Loom's fabric colors, 65536 + t).
inline constexpr uint32_t kStaticColorBase = 0x70000000u;

// What the topology says about the device a datastore belongs to.
struct DeviceFacts {
  std::string device;
  std::vector<std::string> ports;                                 // its interfaces, topology order
  std::map<std::string, int64_t> capacity_bps;                    // port -> link capacity
  std::map<std::string, std::string> neighbor_of;                 // port -> device at the far end
  std::shared_ptr<const loom::southbound::bgp::PrefixPlan> plan;  // prefix -> NIC
};
DeviceFacts FactsOf(const loom::v1::Topology& topo, const std::string& device,
                    std::shared_ptr<const loom::southbound::bgp::PrefixPlan> plan);

class PlatformConfig {
 public:
  // A SetRequest applied to a copy of the committed datastore and validated:
  // the datastore's translation and the SetResponse to send once committed.
  struct Candidate {
    virtual ~Candidate() = default;
    loom::v1::DeviceState state;  // owned fields only (device set)
    ::gnmi::SetResponse response;
  };

  virtual ~PlatformConfig() = default;
  // The DeviceState fields the translation owns (WireConfig::Program).
  virtual const std::vector<std::string>& owned_fields() const = 0;
  // gNMI status codes as in the header comment; nothing changes on error.
  virtual Status Prepare(const ::gnmi::SetRequest& request,
                         std::unique_ptr<Candidate>* out) const = 0;
  // Installs `c` (from Prepare on this object, against the datastore still
  // committed: the caller serializes Sets).
  virtual void Commit(std::unique_ptr<Candidate> c) = 0;
  // True when `request` reads configuration (answered by Get) rather than
  // telemetry.
  virtual bool IsConfigGet(const ::gnmi::GetRequest& request) const = 0;
  virtual Status Get(const ::gnmi::GetRequest& request, int64_t timestamp_ns,
                     ::gnmi::GetResponse* response) const = 0;
  // The translation of the committed datastore.
  virtual loom::v1::DeviceState State() const = 0;
};

// FAILED_PRECONDITION when the YANG modules cannot be loaded or the seeded
// datastore does not validate.
Status MakeSonicConfig(DeviceFacts facts, std::shared_ptr<YangContext> yang,
                       std::unique_ptr<PlatformConfig>* out);
// `json_ietf_only`: the openconfig-json personality (JSON_IETF values only).
Status MakeOpenConfigConfig(DeviceFacts facts, std::shared_ptr<YangContext> yang,
                            bool json_ietf_only, std::unique_ptr<PlatformConfig>* out);

// ---- shared by the two datastores (platform_config.cc) ----------------------

// The colors and routes of static routes: `routes` maps a NIC to the
// neighbour set its route uses (and its prefix); colors are numbered over the
// distinct sets in order. Weights per NIC are added when given.
struct StaticRoute {
  std::string prefix;
  std::set<std::string> neighbors;
  std::map<std::string, uint32_t> weights;  // neighbour -> wecmp weight (OpenConfig)
};
void AddStaticRoutes(const std::map<std::string, StaticRoute>& by_nic, loom::v1::DeviceState* s);

// `v` as JSON text (members in order, numbers as written).
std::string JsonText(const loom::JsonValue& v);
// Current wall-clock time, ns since the epoch (SetResponse / notification timestamps).
int64_t WallNs();

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_PLATFORM_CONFIG_H_
