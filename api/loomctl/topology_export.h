// Topology export for schedulers (`loomctl topology export --format ...`):
// the fabric as Slurm's tree plugin (topology.conf), Kueue (a Topology object
// and node labels) and Volcano (HyperNode objects) see it. docs/scheduler-topology.md
// has the formats and how to load them.
//
// Nodes are the topology's hosts. A host sits under the leaves its NICs attach
// to; hosts with the same set of leaves form one group (one leaf on a classic
// Clos; a rail group — the rail leaves of one stripe — on a rail-optimized
// fabric), so every node appears under exactly one bottom switch entry, as the
// tree plugin requires. Groups sit under their pod (3-tier fabrics), pods or
// groups under one fabric-wide entry: every leaf reaches every spine, which a
// tree cannot draw, so the spines are one level. O(devices + links).
#ifndef LOOM_API_LOOMCTL_TOPOLOGY_EXPORT_H_
#define LOOM_API_LOOMCTL_TOPOLOGY_EXPORT_H_

#include <map>
#include <string>
#include <vector>

#include "loom/v1/fabric_service.pb.h"
#include "loom/v1/topology.pb.h"

namespace loom::loomctl {

// Why a node is marked degraded (live health): its NIC link is down, or one of
// its leaves lost more than half of its uplinks. Empty map = all healthy.
std::map<std::string, std::string> DegradedNodes(const loom::v1::Topology& topo,
                                                 const std::vector<loom::v1::LinkStatus>& links);

// `format`: "slurm", "kueue" or "volcano". `degraded` (from DegradedNodes, or
// empty): Slurm gets a comment per node, Kueue a `loom.io/fabric-health`
// label, Volcano nothing (HyperNodes have no per-member state; the comment
// lists them). False with `error` on an unknown format or a topology without
// hosts.
bool ExportTopology(const loom::v1::Topology& topo, const std::string& format,
                    const std::map<std::string, std::string>& degraded, std::string* out,
                    std::string* error);

// "host[000-003],gpu7": Slurm's hostlist expression of `names` (sorted; runs
// of numeric suffixes of the same prefix and width compressed).
std::string SlurmHostlist(std::vector<std::string> names);

}  // namespace loom::loomctl

#endif  // LOOM_API_LOOMCTL_TOPOLOGY_EXPORT_H_
