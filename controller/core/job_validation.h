// Validation of scheduler job specs against the topology.
//
// Pure function; returns INVALID_ARGUMENT naming the field ("job.qp_ranges[1]")
// and the reason. O(endpoints + ranges log ranges).
#ifndef LOOM_CONTROLLER_CORE_JOB_VALIDATION_H_
#define LOOM_CONTROLLER_CORE_JOB_VALIDATION_H_

#include "api/topology/topology_index.h"
#include "common/status.h"
#include "loom/v1/job.pb.h"

namespace loom::controller {

constexpr size_t kMaxIdLength = 128;
constexpr uint32_t kMaxQpn = 0xFFFFFF;  // QP numbers are 24 bits (BTH DestQP)
constexpr uint32_t kMaxUdpPort = 65535;
constexpr int kMaxRanges = 1024;  // qp_ranges, udp_source_port_ranges entries
constexpr int kMaxLabels = 64;
constexpr size_t kMaxLabelKeyLength = 63;
constexpr size_t kMaxLabelValueLength = 256;

Status ValidateJobSpec(const loom::v1::Job& job, const loom::topology::TopologyIndex& topo);

// A request id is optional; when present it must be 1..128 printable chars.
Status ValidateRequestId(const std::string& request_id);

}  // namespace loom::controller

#endif  // LOOM_CONTROLLER_CORE_JOB_VALIDATION_H_
