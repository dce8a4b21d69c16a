// Input limits of the loom.v1 API, checked before a request reaches the
// controller strand (stateless, O(request size)). Each violation is
// INVALID_ARGUMENT naming the field and the limit; bad values are quoted
// clipped (QuoteInput), never whole. The limits are stated in README.md
// ("API input limits") and in the protos' field comments.
#ifndef LOOM_CONTROLLER_CORE_REQUEST_LIMITS_H_
#define LOOM_CONTROLLER_CORE_REQUEST_LIMITS_H_

#include <cstddef>

#include "common/status.h"
#include "loom/v1/fabric_service.pb.h"
#include "loom/v1/scheduler_service.pb.h"

namespace loom::controller {

// Ids (tenant, job, request id, device) are 1..kMaxIdLength printable ASCII
// characters without spaces (job_validation.h).
constexpr size_t kMaxLinkIdLength = 512;   // link ids: "a:if--b:if"
constexpr size_t kMaxReasonLength = 1024;  // drain reason, bytes
constexpr size_t kMaxPageTokenLength = 512;
constexpr int kMaxPageSize = 10'000;
constexpr size_t kMaxSubjectLength = 512;  // WatchEvents subject (a job or link id)
constexpr int kMaxEventTypes = 64;         // WatchEvents types filter entries
constexpr size_t kMaxAdapterLength = 64;

Status ValidateRequest(const loom::v1::DrainLinkRequest& req);
Status ValidateRequest(const loom::v1::UndrainLinkRequest& req);
Status ValidateRequest(const loom::v1::GetLinkRequest& req);
Status ValidateRequest(const loom::v1::ListLinksRequest& req);
Status ValidateRequest(const loom::v1::WatchEventsRequest& req);
Status ValidateRequest(const loom::v1::GetDeviceStateRequest& req);
Status ValidateRequest(const loom::v1::ListDevicesRequest& req);
Status ValidateRequest(const loom::v1::GetJobRequest& req);
Status ValidateRequest(const loom::v1::GetJobHealthRequest& req);
Status ValidateRequest(const loom::v1::ReleaseJobRequest& req);
Status ValidateRequest(const loom::v1::ListJobsRequest& req);
Status ValidateRequest(const loom::v1::WatchJobsRequest& req);

}  // namespace loom::controller

#endif  // LOOM_CONTROLLER_CORE_REQUEST_LIMITS_H_
