// Next-hop reach: which egress leaves each upstream next hop of a switch can
// still reach over live links, and through which devices — the data behind
// NNHN (next-next-hop nodes, draft-ietf-idr-next-next-hop-nodes), the
// topology half of GLB. The controller stays ignorant of BGP: it only says
// "through spine S, leaf E is reached via these devices"; the BGP driver
// turns that into the NHC attribute and stops advertising a destination on
// a session whose next hop cannot reach it.
//
// Paths are valley-free (up, then down) over switch links that are not in
// `down_links`; roles rank leaf < spine < super spine, and hosts/NICs are
// ignored. For device X, next hop N (an upstream neighbor of X; a next hop
// whose links to X are all down is listed reaching nothing) and egress leaf
// E != X:
// - when N reaches E going down only, the devices beyond N are N's live
//   down-neighbors that reach E going down (E itself when N links to E;
//   the egress pod's spines when N is a super spine), X excluded;
// - otherwise N's live up-neighbors that reach E going down (the super
//   spines in a 3-tier fabric), X excluded;
// - when neither exists, E is unreachable through N.
//
// Pure: a snapshot in, a result out; no I/O, no clock, no threads.
// Cost: O(links + switches x leaves) to index, then O(next hops x egress
// leaves x neighbor degree) per device.
#ifndef LOOM_CONTROLLER_TE_NEXT_HOPS_H_
#define LOOM_CONTROLLER_TE_NEXT_HOPS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "api/topology/topology_index.h"
#include "loom/v1/device_state.pb.h"

namespace loom::te {

// Reach of every upstream next hop of `device` towards `egress` (leaf ids),
// ordered by next hop, then by the first egress leaf of each group; egress
// leaves sharing the same beyond set are grouped in one entry, and a leaf
// linked to N directly gets an empty `beyond` (see device_state.proto).
std::vector<loom::v1::NextHopReach> NextHopReachOf(const loom::topology::TopologyIndex& topo,
                                                   const std::set<std::string>& down_links,
                                                   const std::string& device,
                                                   const std::set<std::string>& egress);

// Sets next_hop_reach on every state in `desired` that has routes or
// weights, towards the egress leaves of those routes (leaf of the NIC) and
// weights (the leaf, or the leaf of the NIC).
void AddNextHopReach(const loom::topology::TopologyIndex& topo,
                     const std::set<std::string>& down_links,
                     std::map<std::string, loom::v1::DeviceState>* desired);

}  // namespace loom::te

#endif  // LOOM_CONTROLLER_TE_NEXT_HOPS_H_
