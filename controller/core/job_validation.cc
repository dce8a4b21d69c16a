#include "controller/core/job_validation.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "common/text.h"

namespace loom::controller {

namespace {

bool Printable(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7f;
  });
}

Status CheckId(const std::string& value, const char* field) {
  if (value.empty()) return InvalidArgument(std::string(field) + ": must not be empty");
  if (value.size() > kMaxIdLength) {
    return InvalidArgument(std::string(field) + ": longer than " + std::to_string(kMaxIdLength) +
                           " characters");
  }
  if (!Printable(value)) {
    return InvalidArgument(std::string(field) + ": must be printable ASCII without spaces, got " +
                           QuoteInput(value));
  }
  return Status::Ok();
}

std::string RangeText(const loom::v1::NumberRange& r) {
  return "[" + std::to_string(r.first()) + ", " + std::to_string(r.last()) + "]";
}

Status CheckRanges(const google::protobuf::RepeatedPtrField<loom::v1::NumberRange>& ranges,
                   const std::string& field, uint32_t max, const char* what) {
  if (ranges.size() > kMaxRanges) {
    return InvalidArgument(field + ": " + std::to_string(ranges.size()) + " ranges, at most " +
                           std::to_string(kMaxRanges));
  }
  std::vector<std::pair<int, const loom::v1::NumberRange*>> sorted;
  for (int i = 0; i < ranges.size(); ++i) {
    const auto& r = ranges[i];
    std::string f = field + "[" + std::to_string(i) + "]";
    if (r.first() > r.last()) {
      return InvalidArgument(f + ": first " + std::to_string(r.first()) + " is greater than last " +
                             std::to_string(r.last()));
    }
    if (r.last() > max) {
      return InvalidArgument(f + ": " + what + " " + std::to_string(r.last()) + " exceeds " +
                             std::to_string(max));
    }
    sorted.emplace_back(i, &r);
  }
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second->first() < b.second->first() ||
           (a.second->first() == b.second->first() && a.first < b.first);
  });
  for (size_t k = 1; k < sorted.size(); ++k) {
    const auto& prev = sorted[k - 1];
    const auto& cur = sorted[k];
    if (cur.second->first() <= prev.second->last()) {
      int hi = std::max(prev.first, cur.first), lo = std::min(prev.first, cur.first);
      return InvalidArgument(field + "[" + std::to_string(hi) + "]: " + RangeText(ranges[hi]) +
                             " overlaps " + field + "[" + std::to_string(lo) + "] " +
                             RangeText(ranges[lo]));
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateRequestId(const std::string& request_id) {
  if (request_id.empty()) return Status::Ok();
  return CheckId(request_id, "request_id");
}

Status ValidateJobSpec(const loom::v1::Job& job, const loom::topology::TopologyIndex& topo) {
  if (Status s = CheckId(job.tenant(), "job.tenant"); !s.ok()) return s;
  if (Status s = CheckId(job.job_id(), "job.job_id"); !s.ok()) return s;
  if (job.endpoints().empty()) {
    return InvalidArgument("job.endpoints: a job needs at least one GPU or NIC endpoint");
  }
  std::set<std::string> seen;
  for (int i = 0; i < job.endpoints_size(); ++i) {
    const std::string& ep = job.endpoints(i);
    std::string f = "job.endpoints[" + std::to_string(i) + "]";
    if (topo.EndpointNic(ep).empty()) {
      return InvalidArgument(f + ": unknown endpoint " + QuoteInput(ep) +
                             " (not a GPU or NIC of topology \"" + topo.topology().name() + "\")");
    }
    if (!seen.insert(ep).second) {
      return InvalidArgument(f + ": endpoint " + QuoteInput(ep) + " is listed twice");
    }
  }
  if (Status s = CheckRanges(job.qp_ranges(), "job.qp_ranges", kMaxQpn, "QP number"); !s.ok()) {
    return s;
  }
  if (Status s = CheckRanges(job.udp_source_port_ranges(), "job.udp_source_port_ranges",
                             kMaxUdpPort, "UDP port");
      !s.ok()) {
    return s;
  }
  if (job.traffic_class() > 7) {
    return InvalidArgument("job.traffic_class: must be 0..7, got " +
                           std::to_string(job.traffic_class()));
  }
  if (!loom::v1::CollectivePattern_IsValid(job.collective())) {
    return InvalidArgument("job.collective: unknown pattern " + std::to_string(job.collective()));
  }
  if (job.qps_per_connection() > 1024) {
    return InvalidArgument("job.qps_per_connection: at most 1024, got " +
                           std::to_string(job.qps_per_connection()));
  }
  constexpr int kMaxTrafficFlows = 262144;
  if (job.traffic_size() > kMaxTrafficFlows) {
    return InvalidArgument("job.traffic: " + std::to_string(job.traffic_size()) +
                           " entries, at most " + std::to_string(kMaxTrafficFlows));
  }
  auto clip = [](const std::string& v) { return QuoteInput(v); };
  for (int i = 0; i < job.traffic_size(); ++i) {
    const auto& t = job.traffic(i);
    const std::string f = "job.traffic[" + std::to_string(i) + "]";
    if (!seen.count(t.src())) {
      return InvalidArgument(f + ".src: " + clip(t.src()) + " is not an endpoint of the job");
    }
    if (!seen.count(t.dst())) {
      return InvalidArgument(f + ".dst: " + clip(t.dst()) + " is not an endpoint of the job");
    }
    if (t.src() == t.dst()) {
      return InvalidArgument(f + ": src and dst are the same endpoint " + clip(t.src()));
    }
    if (!(t.weight() > 0) || !std::isfinite(t.weight())) {
      return InvalidArgument(f + ".weight: must be a finite number > 0, got " +
                             std::to_string(t.weight()));
    }
  }
  if (job.labels_size() > kMaxLabels) {
    return InvalidArgument("job.labels: " + std::to_string(job.labels_size()) +
                           " labels, at most " + std::to_string(kMaxLabels));
  }
  for (const auto& [k, v] : job.labels()) {
    if (k.empty() || k.size() > kMaxLabelKeyLength) {
      return InvalidArgument("job.labels: key " + QuoteInput(k) + " must be 1.." +
                             std::to_string(kMaxLabelKeyLength) + " characters");
    }
    if (v.size() > kMaxLabelValueLength) {
      return InvalidArgument("job.labels[" + QuoteInput(k) + "]: value of " +
                             std::to_string(v.size()) + " characters, at most " +
                             std::to_string(kMaxLabelValueLength));
    }
  }
  return Status::Ok();
}

}  // namespace loom::controller
