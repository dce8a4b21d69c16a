// gNMI configuration schema and codec for Loom's device state (origin "loom").
//
// One codec for both ends of gNMI Set:
// - the controller side (GnmiDriver) encodes a DeviceState change as ONE
//   SetRequest (a transaction) and decodes GetResponses to confirm;
// - the device side (the emulator's gNMI target, the test target) applies
//   SetRequests to its DeviceState with ApplySetRequest, which validates
//   every path and value and returns the gRPC status gNMI prescribes, and
//   answers Get with EncodeGetResponse.
//
// Schema (origin "loom", values JSON_IETF, RFC 7951: uint64 as strings;
// southbound/README.md has the JSON shapes and every validation rule):
//
//   /colors/color[id=N]/config                             ColorGroup
//   /routes/route[destination=D][traffic-class=T][qp-mask=M][qp-value=V]/config
//                                                          ColoredRoute
//                      (qp-mask/qp-value: QP split, 0/0 = all of the
//                      destination's traffic; see below)
//   /glb/destinations/destination[name=D]/config           WeightSet
//   /dlb/config                                            DlbProfile
//   /alb/groups/group[name=G]/config                       AlbTable
//   /spray/rules/rule[traffic-class=T][qp-first=F]/config  SprayRule
//   /qos/thresholds/threshold[interface=I][priority=P]/config  QueueThresholds
//                      (interface "ALL" = the message's empty interface)
//
// Replace/update must address a `config` container (or its list entry, or
// `/dlb`); delete may address any schema node from the root down to a
// `config` container; deleting what does not exist is accepted (gNMI spec
// 3.4.6). A list element without keys or with key "*" addresses all entries.
//
// QP-split routes: a route's key is (destination, traffic-class, qp-mask,
// qp-value); routes of one destination and class that differ only in
// qp-value are separate entries. Unsplit routes (0/0) are encoded exactly as
// before QP split existed: their paths carry only destination and
// traffic-class and their JSON has no qp-mask/qp-value leaves. Decoding, a
// route element that names some key but not qp-mask (qp-value) takes 0 for
// it, in every operation, so route[destination=D][traffic-class=T] names the
// unsplit route (a delete of it keeps D's split parts); address every part
// with qp-mask=* and qp-value=* (an element with no key at all still
// addresses every route). qp-mask is 24-bit; qp-value must have no bit
// outside qp-mask.
//
// Canonical form: list entries sorted by key, identical duplicates merged,
// color next hops sorted, a DLB profile with mode UNSPECIFIED
// cleared. Everything this codec decodes is canonical.
//
// Pure functions, thread-safe; no I/O. Bad input never crashes: it gets a
// Status. Costs are O(entries x log entries) plus the JSON size.
#ifndef LOOM_SOUTHBOUND_GNMI_GNMI_CONFIG_H_
#define LOOM_SOUTHBOUND_GNMI_GNMI_CONFIG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "gnmi/gnmi.pb.h"
#include "loom/v1/device_state.pb.h"

namespace loom::southbound::gnmi {

inline constexpr char kOrigin[] = "loom";
// Key value standing for QueueThresholds.interface == "" (every port).
inline constexpr char kAllInterfaces[] = "ALL";

// The parts of a DeviceState (names as in ApplyFailure::part).
enum class Part : uint32_t {
  kColors = 1u << 0,
  kRoutes = 1u << 1,
  kWeights = 1u << 2,
  kDlb = 1u << 3,
  kAlbTables = 1u << 4,
  kSprayRules = 1u << 5,
  kThresholds = 1u << 6,
};
using PartMask = uint32_t;
inline constexpr PartMask Mask(Part p) { return static_cast<PartMask>(p); }
inline constexpr PartMask kAllParts = 0x7f;
// What gNMI carries when BGP carries colors and routes.
inline constexpr PartMask kGnmiDefaultParts = Mask(Part::kWeights) | Mask(Part::kDlb) |
                                              Mask(Part::kAlbTables) | Mask(Part::kSprayRules) |
                                              Mask(Part::kThresholds);
inline constexpr Part kEveryPart[] = {Part::kColors,    Part::kRoutes,    Part::kWeights,
                                      Part::kDlb,       Part::kAlbTables, Part::kSprayRules,
                                      Part::kThresholds};

// "colors", "routes", "weights", "dlb", "alb_tables", "spray_rules", "thresholds".
const char* PartName(Part part);
// The schema container of a part ("/colors", "/routes", "/glb", "/dlb", "/alb", "/spray",
// "/qos/thresholds"), origin "loom".
::gnmi::Path PartPath(Part part);

// Device capabilities the validation checks against. A target may be
// stricter than the controller (smaller tables); both use this codec.
struct CodecLimits {
  uint32_t max_alb_buckets = 32768;         // Flowset/bucket table size.
  uint32_t max_weight = 65535;              // GLB weight per next hop.
  uint64_t max_inactivity_ns = 1000000000;  // Flowlet inactivity interval.
  uint32_t max_next_hops = 512;             // Per color / weight set.
};

// Validation of one part of `state` (same rules as decoding). OK or INVALID_ARGUMENT
// naming the entry and field.
Status ValidatePart(const loom::v1::DeviceState& state, Part part,
                    const CodecLimits& limits = CodecLimits());
// The first failing part among `parts`, or OK.
Status ValidateState(const loom::v1::DeviceState& state, PartMask parts = kAllParts,
                     const CodecLimits& limits = CodecLimits());

// A copy of `state` with only the parts in `parts` (device and generation kept).
loom::v1::DeviceState Project(const loom::v1::DeviceState& state, PartMask parts);
// The canonical form of `state` (see above). Conflicting duplicates (same key,
// different content) are kept in order; ValidatePart reports them.
loom::v1::DeviceState Canonical(const loom::v1::DeviceState& state);
// The same, reusing `state`'s storage (no copy when it is already canonical).
loom::v1::DeviceState Canonical(loom::v1::DeviceState&& state);
// Parts among `parts` whose canonical contents differ.
PartMask DiffParts(const loom::v1::DeviceState& a, const loom::v1::DeviceState& b,
                   PartMask parts = kAllParts);
// Copies the parts in `parts` from `from` into `*to` (replacing them).
void CopyParts(const loom::v1::DeviceState& from, PartMask parts, loom::v1::DeviceState* to);

// ---- Set ------------------------------------------------------------------

// The transaction that turns `current` into `desired` for the parts in
// `parts`: deletes for entries that are gone, replaces for entries that are
// new or changed. With `current` == nullptr (device state unknown) each part
// is deleted at its container and every entry replaced. prefix = {origin
// "loom", target}. The result has no operations when nothing differs.
::gnmi::SetRequest EncodeSetRequest(const loom::v1::DeviceState* current,
                                    const loom::v1::DeviceState& desired, PartMask parts,
                                    const std::string& target);
// True when `request` carries no delete, replace or update.
bool IsEmptySet(const ::gnmi::SetRequest& request);

// Applies `request` to `*state` as one transaction (deletes, then replaces,
// then updates). On error `*state` is unchanged and the status is
// INVALID_ARGUMENT (unknown origin or path, missing/bad key, undecodable or
// invalid value, unsupported value encoding). On success
// `*state` is canonical and `*response` (if given) has one UpdateResult per
// operation, with `timestamp_ns`.
Status ApplySetRequest(const ::gnmi::SetRequest& request, loom::v1::DeviceState* state,
                       const CodecLimits& limits = CodecLimits(),
                       ::gnmi::SetResponse* response = nullptr, int64_t timestamp_ns = 0);

// ---- Get ------------------------------------------------------------------

// A GetRequest for the containers of `parts` (JSON_IETF, CONFIG).
::gnmi::GetRequest MakeGetRequest(PartMask parts, const std::string& target);
// One notification with an update (JSON_IETF) for every config container in
// the parts of `state`; prefix = {origin "loom", target}.
::gnmi::Notification EncodeNotification(const loom::v1::DeviceState& state, PartMask parts,
                                        const std::string& target, int64_t timestamp_ns);
// The target's answer to `request`: for each requested path, the config
// containers at or under it. INVALID_ARGUMENT for an unknown origin or path,
// NOT_FOUND for a list entry that does not exist, UNIMPLEMENTED for an
// encoding other than JSON / JSON_IETF.
Status EncodeGetResponse(const ::gnmi::GetRequest& request, const loom::v1::DeviceState& state,
                         int64_t timestamp_ns, ::gnmi::GetResponse* response);
// Builds `*state` (every part cleared first; device and generation kept) from
// every update of `response`, each a config container with replace meaning;
// deletes are ignored. INVALID_ARGUMENT like ApplySetRequest.
Status DecodeGetResponse(const ::gnmi::GetResponse& response, loom::v1::DeviceState* state,
                         const CodecLimits& limits = CodecLimits());

// ---- Values (exposed for tests and the README) ------------------------------

// The JSON_IETF text of the config container of one entry (or the DLB profile).
std::string ConfigJson(const loom::v1::ColorGroup& m);
std::string ConfigJson(const loom::v1::ColoredRoute& m);
std::string ConfigJson(const loom::v1::WeightSet& m);
std::string ConfigJson(const loom::v1::DlbProfile& m);
std::string ConfigJson(const loom::v1::AlbTable& m);
std::string ConfigJson(const loom::v1::SprayRule& m);
std::string ConfigJson(const loom::v1::QueueThresholds& m);

// "flowlet", "per-packet", "assigned-flow", "static"; "" for UNSPECIFIED.
const char* DlbModeName(loom::v1::DlbMode mode);

}  // namespace loom::southbound::gnmi

#endif  // LOOM_SOUTHBOUND_GNMI_GNMI_CONFIG_H_
