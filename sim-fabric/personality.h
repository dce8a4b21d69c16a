// Platform personalities for loom-fabric's gNMI target: one device of the
// emulator served the way a switch OS serves it, driven by the telemetry
// platform profiles (telemetry/profiles/<name>.json, telemetry/profile.h)
// through telemetry::ProfileRenderer, so the collector's profile-driven
// translation can be tested against them. The mappings live only in the
// profile files: a personality renders every catalogue leaf of its device with
// the renderer and serves the native leaves it gets back.
//
// Each personality is a TargetBehaviour of its own GnmiTarget (its own port,
// like a real switch: SONiC uses prefix.target for database names, so one
// port cannot select devices by target). Kinds:
//
//   sonic            (profile "sonic") Capabilities: JSON, JSON_IETF, PROTO.
//                    prefix.target must be a database the profile uses
//                    (COUNTERS_DB, APPL_DB; other -> NOT_FOUND). Each
//                    subscription path P is a served path of the profile (a
//                    signal's or key map's path under that database, e.g.
//                    COUNTERS/Ethernet*, COUNTERS/Ethernet*/Queues,
//                    PERIODIC_WATERMARKS, PORT_TABLE/Ethernet*,
//                    COUNTERS_QUEUE_NAME_MAP), optionally narrowed by further
//                    segments ("*" = any one); anything else -> NOT_FOUND.
//                    P is answered with ONE update whose path is P and whose
//                    json_ietf_val (json_val when JSON was asked) is the object
//                    of the rendered native leaves under P, nested by their
//                    remaining segments, every value a JSON string
//                    ({"Ethernet0":{"SAI_PORT_STAT_IF_IN_OCTETS":"0",...}});
//                    notification prefix.target = the database. Key maps
//                    COUNTERS_PORT_NAME_MAP / COUNTERS_QUEUE_NAME_MAP are served
//                    with deterministic OIDs (PortOid, QueueOid) and their
//                    inverse is the renderer's `reverse` table. A signal with
//                    refresh_interval_ms shows the values of the first snapshot
//                    of the current refresh window of virtual time (SONiC's
//                    flex counters). Rejected (whole Subscribe): an origin in
//                    rejected_origins or other than "", "openconfig",
//                    "sonic-db" (INVALID_ARGUMENT); SAMPLE or heartbeat below
//                    min_sample_interval_ms (INVALID_ARGUMENT); TARGET_DEFINED
//                    (INVALID_ARGUMENT). sample_interval 0 = the minimum.
//                    ON_CHANGE sends the leaves that changed, nested the same way.
//   openconfig       (profile "openconfig") strict OpenConfig target.
//                    Capabilities: PROTO, JSON_IETF, JSON. Any origin but ""
//                    / "openconfig" -> INVALID_ARGUMENT. PROTO: one
//                    notification per container (prefix = the rendered leaf's
//                    parent path), uint_val for numbers, string_val otherwise.
//                    JSON_IETF / JSON: as openconfig-json (JSON without module
//                    prefixes). TARGET_DEFINED = ON_CHANGE for state leaves,
//                    SAMPLE otherwise (as the catalogue target).
//   openconfig-json  like openconfig, but Capabilities lists only JSON_IETF
//                    and any other encoding -> UNIMPLEMENTED. One update per
//                    container: path = the parent path, json_ietf_val = object
//                    of its leaves, members prefixed with their top-level
//                    module ("openconfig-interfaces:in-octets"), every value a
//                    JSON string (RFC 7951 64-bit numbers).
//
// All kinds: STREAM (SAMPLE, ON_CHANGE, suppress_redundant,
// heartbeat_interval, updates_only), ONCE, POLL; sync_response after the
// initial data; Get = the initial data of a ONCE subscription to the paths.
//
// Set and config Get (with AttachConfig: loom-fabric always attaches one):
// each personality keeps its device's configuration the way the platform
// does (platform_config.h has the paths, semantics, status codes and the
// mapping to the emulator):
//   sonic            CONFIG_DB through origin sonic-db,
//                    /CONFIG_DB/localhost/<TABLE>/<key>[/<field>]; validated
//                    against sonic-yang-models (sonic-static-route,
//                    sonic-pfcwd, sonic-wred-profile, sonic-queue, sonic-port,
//                    the ARS proposal sonic-ars, ...); Get type ALL of
//                    /CONFIG_DB/... answers the rows.
//   openconfig(-json) /interfaces, /qos, /network-instances, /lldp; validated
//                    against the OpenConfig models (openconfig-qos,
//                    -interfaces, -network-instance with local-routing, ...);
//                    Get type CONFIG answers the configuration.
// A SetRequest is one transaction: the whole resulting datastore must pass
// the YANG models (INVALID_ARGUMENT with libyang's message and data path
// otherwise), then its translation is applied to the emulator through
// WireConfig::Program (INVALID_ARGUMENT if the emulator refuses a part, which
// is then rolled back); on any error nothing changes. Sets of one
// personality run one at a time, in arrival order. The YANG modules are the
// vendored copies in sim-fabric/yang (yang_context.h).
// prefix.target for the OpenConfig kinds: "" or the device id (other ->
// NOT_FOUND), echoed in the notifications. Signals the profile lists as
// unserved render to nothing, so they are never served.
//
// Threading: see TargetBehaviour (gnmi_target.h). The personality's own
// state (the held refresh-window snapshots, the cached device map) is guarded
// by its mutex, taken last (after the target's and the stream's); the Set
// queue by its own; the datastore guards itself (platform_config.h).
#ifndef LOOM_SIM_FABRIC_PERSONALITY_H_
#define LOOM_SIM_FABRIC_PERSONALITY_H_

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "loom/v1/telemetry_profile.pb.h"
#include "sim-fabric/gnmi_adapter.h"
#include "sim-fabric/gnmi_target.h"
#include "sim-fabric/platform_config.h"
#include "sim-fabric/wire_config.h"
#include "telemetry/profile.h"

namespace loom::sim {

enum class PersonalityKind { kSonic, kOpenConfig, kOpenConfigJson };

// "sonic", "openconfig", "openconfig-json".
bool ParsePersonalityKind(std::string_view name, PersonalityKind* out);
const char* PersonalityName(PersonalityKind kind);
// The profile a kind serves from ("sonic" or "openconfig").
const char* PersonalityProfileName(PersonalityKind kind);

// One --personality DEVICE=NAME.
struct PersonalitySpec {
  std::string device;
  PersonalityKind kind = PersonalityKind::kSonic;
};
bool ParsePersonalitySpec(std::string_view text, PersonalitySpec* out, std::string* error);

// Personality: role — one device of the emulator served as a platform serves
// it (header comment), from a telemetry profile via ProfileRenderer. Trigger —
// its GnmiTarget's handlers and Publish(). Thread — TargetBehaviour's
// contract; sessions are driven by their stream (one at a time).
class Personality final : public TargetBehaviour, public std::enable_shared_from_this<Personality> {
 public:
  // `profile` is copied; `options` gives the tick and the minimum sample
  // interval (the profile's min_sample_interval_ms raises it). Create with
  // std::make_shared (sessions keep their personality alive).
  Personality(PersonalityKind kind, const v1::TelemetryProfile& profile, std::string device,
              const GnmiOptions& options);
  ~Personality() override;

  gnmi::CapabilityResponse Capabilities() const override;
  Status Get(const FabricSnapshot& snap, const gnmi::GetRequest& req,
             gnmi::GetResponse* resp) override;
  Status CreateSession(const gnmi::SubscriptionList& list, const FabricSnapshot& snap,
                       std::unique_ptr<SubscribeSession>* out) override;
  void OnPublish(const std::shared_ptr<const FabricSnapshot>& snap) override;
  void Set(const gnmi::SetRequest& req,
           std::function<void(Status, gnmi::SetResponse)> done) override;

  // Enables Set and config Get (call before serving): `config` is the
  // device's datastore, `wire` applies its translation to the emulator (must
  // outlive the personality).
  void AttachConfig(std::unique_ptr<PlatformConfig> config, WireConfig* wire);
  // The datastore (null without AttachConfig).
  const PlatformConfig* config() const { return platform_.get(); }

  PersonalityKind kind() const { return kind_; }
  const std::string& device() const { return device_; }
  const v1::TelemetryProfile& profile() const { return profile_; }

  // Deterministic SAI object ids of the SONiC key maps: interface i (the
  // device's interfaces in schema order) and its queue q.
  static std::string PortOid(int iface);
  static std::string QueueOid(int iface, int queue);

  // Internal types, defined in personality.cc.
  struct Native;
  struct DeviceMap;
  struct Home;
  class Session;

 private:
  friend class Session;
  // The held snapshot for refresh interval `refresh_ns` (0 = `latest`).
  std::shared_ptr<const FabricSnapshot> Held(TimeNs refresh_ns) const;
  // The device map for the device's schema in `snap` (cached; rebuilt when the
  // schema changes). Null when the device is not in `snap`.
  std::shared_ptr<const DeviceMap> MapFor(const FabricSnapshot& snap);
  std::shared_ptr<const DeviceMap> BuildMap(const FabricSnapshot& snap, int device) const;
  // Rendered value of `n` for the catalogue value `src`.
  std::string Render(const DeviceMap& m, const Native& n, const LeafValue& src) const;
  // Runs queued Sets one at a time (each completes on the fabric thread).
  void RunSets();

  const PersonalityKind kind_;
  const v1::TelemetryProfile profile_;
  const std::string device_;
  const GnmiOptions options_;
  TimeNs min_interval_ns_ = 0;
  telemetry::ProfileRenderer renderer_;
  std::vector<Home> homes_;           // sonic: served paths per database
  std::vector<char> identity_;        // per profile signal: values pass through unchanged
  std::vector<TimeNs> refresh_ns_;    // per profile signal
  std::vector<TimeNs> refreshes_;     // distinct non-zero refresh intervals
  std::vector<std::string> targets_;  // sonic: the databases

  mutable std::mutex mu_;
  std::map<TimeNs, std::shared_ptr<const FabricSnapshot>> held_;  // guarded by mu_
  std::shared_ptr<const DeviceMap> map_;                          // guarded by mu_

  std::unique_ptr<PlatformConfig> platform_;  // set before serving
  WireConfig* wire_ = nullptr;                // set before serving; not owned
  struct PendingSet {
    const gnmi::SetRequest* req = nullptr;
    std::function<void(Status, gnmi::SetResponse)> done;
  };
  std::mutex set_mu_;
  std::deque<PendingSet> sets_;  // guarded by set_mu_
  bool set_running_ = false;     // guarded by set_mu_
};

// What the personalities need for Set (StartPersonalityTargets).
struct PersonalitySetOptions {
  // Applies accepted configuration to the emulator; null = no Set (UNIMPLEMENTED).
  WireConfig* wire = nullptr;
  // The fabric's topology (ports, neighbours, prefix plan); required with `wire`.
  const loom::v1::Topology* topology = nullptr;
  // The vendored YANG modules; "" = ShippedYangDir() (yang_context.h).
  std::string yang_dir;
};

// Loads the profiles (ShippedProfileDir() then `profile_dirs`), creates one
// started GnmiTarget (127.0.0.1, port 0) per spec with its Personality, with
// Set enabled (the platform's YANG set loaded) when `set.wire` is given.
// Errors: an unknown device, a missing profile, a device given twice, YANG
// modules that cannot be loaded, a listen failure.
Status StartPersonalityTargets(const std::vector<PersonalitySpec>& specs,
                               const std::vector<std::string>& profile_dirs,
                               const std::vector<std::string>& devices, const GnmiOptions& options,
                               std::vector<std::unique_ptr<GnmiTarget>>* out,
                               const PersonalitySetOptions& set = {});

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_PERSONALITY_H_
