// Helpers over loom.v1.DeviceState shared by the reconciler and drivers.
#ifndef LOOM_SOUTHBOUND_WIRE_DEVICE_STATE_UTIL_H_
#define LOOM_SOUTHBOUND_WIRE_DEVICE_STATE_UTIL_H_

#include <string>
#include <vector>

#include "loom/v1/device_state.pb.h"

namespace loom::southbound {

// True for a route that covers only some of its destination's QPs (policy
// qp_split: ColoredRoute.qp_mask/qp_value not 0/0). Header-only: the BGP
// driver, the gNMI codec and the renderers use it without linking this library.
inline bool IsSplitRoute(const loom::v1::ColoredRoute& r) {
  return r.qp_mask() != 0 || r.qp_value() != 0;
}

// Sorts every repeated field into a canonical order (colors by id, routes by
// destination, class, QP mask and QP value, ...), so equal states compare and
// serialize equal.
void Canonicalize(loom::v1::DeviceState* s);

// True when `a` and `b` program the same thing (generation ignored).
bool SameContent(const loom::v1::DeviceState& a, const loom::v1::DeviceState& b);

// Names of the parts that differ: "colors", "routes", "weights", "dlb",
// "alb_tables", "spray_rules", "thresholds", "pfc_watchdog", "next_hop_reach".
std::vector<std::string> DifferingParts(const loom::v1::DeviceState& a,
                                        const loom::v1::DeviceState& b);

// Deterministic fingerprint of the content (generation ignored).
std::string ContentKey(const loom::v1::DeviceState& s);
// Deterministic serialization of any message (map order fixed).
std::string DeterministicBytes(const google::protobuf::Message& m);

}  // namespace loom::southbound

#endif  // LOOM_SOUTHBOUND_WIRE_DEVICE_STATE_UTIL_H_
