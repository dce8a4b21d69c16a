// Loading, validating and indexing loom.v1.Topology.
//
// Topology files are the protobuf JSON form of loom.v1.Topology, parsed with
// protobuf's JSON support. Validation collects every problem it finds, each
// naming the offending element (and its line:column in the file when the
// text is available). Pure functions; thread-compatible.
#ifndef LOOM_API_TOPOLOGY_TOPOLOGY_IO_H_
#define LOOM_API_TOPOLOGY_TOPOLOGY_IO_H_

#include <string>
#include <string_view>
#include <vector>

#include "loom/v1/topology.pb.h"

namespace loom::topology {

// One validation problem.
struct ValidationError {
  // JSON path of the element, for example "links[4]".
  std::string element;
  // What is wrong, naming ids and values.
  std::string message;
  // A quoted string to look for in the file text to report a position
  // (usually the element's id), and which occurrence of it (0-based).
  std::string locate;
  int occurrence = 0;
};

// Checks every rule of a well-formed fabric: unique ids, known roles, links
// with existing endpoints and unused interfaces, positive capacities, leaves
// with uplinks, GPUs on NICs of their own host. Returns all problems found.
// O(devices + links + gpus).
std::vector<ValidationError> ValidateTopology(const loom::v1::Topology& topo);

// Formats errors one per line, prefixed with "source:line:col: " when `text`
// is non-empty and the element can be located in it.
std::string FormatErrors(const std::vector<ValidationError>& errors, std::string_view source,
                         std::string_view text);

// Parses protobuf JSON into `out` and validates it. On failure returns false
// and sets `error` to a message naming the problem(s).
bool ParseTopologyJson(std::string_view json, std::string_view source, loom::v1::Topology* out,
                       std::string* error);

// Reads a file and calls ParseTopologyJson.
bool LoadTopologyFile(const std::string& path, loom::v1::Topology* out, std::string* error);

// Writes the topology as indented protobuf JSON.
std::string TopologyToJson(const loom::v1::Topology& topo);

// Returns "leaf", "spine", ... for a role.
std::string_view RoleName(loom::v1::DeviceRole role);

// Line and column (1-based) of byte offset `pos` in `text`.
void OffsetToLineCol(std::string_view text, size_t pos, int* line, int* col);

}  // namespace loom::topology

#endif  // LOOM_API_TOPOLOGY_TOPOLOGY_IO_H_
