// Small helpers shared by the renderers. Internal to southbound/render.
#ifndef LOOM_SOUTHBOUND_RENDER_RENDER_UTIL_H_
#define LOOM_SOUTHBOUND_RENDER_RENDER_UTIL_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "loom/v1/device_state.pb.h"
#include "loom/v1/topology.pb.h"
#include "southbound/wire/device_state_util.h"

namespace loom::southbound::render {

// Link bandwidth per unit of GLB weight (the BGP driver's default).
inline constexpr uint64_t kBytesPerWeight = 1000000000;

// Nanoseconds to whole microseconds (rounded to nearest, at least 1 when > 0).
inline uint64_t NsToUs(uint64_t ns) {
  if (ns == 0) return 0;
  uint64_t us = (ns + 500) / 1000;
  return us == 0 ? 1 : us;
}

template <class R>
std::string Join(const R& values, const std::string& sep) {
  std::string out;
  bool first = true;
  for (const auto& v : values) {
    if (!first) out += sep;
    first = false;
    if constexpr (std::is_convertible_v<decltype(v), std::string>) {
      out += v;
    } else {
      out += std::to_string(v);
    }
  }
  return out;
}

// Weights of a set sorted by next hop.
std::vector<std::pair<std::string, uint32_t>> SortedWeights(const loom::v1::WeightSet& w);
// "spine-0 x2, spine-1 x2" (members by bucket count, sorted by member).
std::string BucketShares(const loom::v1::AlbTable& a);
// "all" or "100-200".
std::string QpRange(const loom::v1::SprayRule& r);
// A QP-split route's part: "<qp_value>/<qp_mask>" ("1/3").
std::string DestQp(const loom::v1::ColoredRoute& r);
// Prefixes of `destination`: of routes to it, or to NICs attached to it
// (when it is a leaf). Sorted, unique.
std::vector<std::string> PrefixesOf(const loom::v1::DeviceState& s,
                                    const loom::v1::Topology& topology,
                                    const std::string& destination);

}  // namespace loom::southbound::render

#endif  // LOOM_SOUTHBOUND_RENDER_RENDER_UTIL_H_
