#include "controller/core/request_limits.h"

#include <algorithm>
#include <string>

#include "common/text.h"
#include "controller/core/job_validation.h"

namespace loom::controller {

namespace {

// A name: empty allowed when `optional`, else 1..max printable ASCII without spaces.
Status CheckName(const std::string& v, const char* field, size_t max, bool optional) {
  if (v.empty()) {
    return optional ? Status::Ok() : InvalidArgument(std::string(field) + ": must not be empty");
  }
  if (v.size() > max) {
    return InvalidArgument(std::string(field) + ": " + std::to_string(v.size()) +
                           " characters, at most " + std::to_string(max) + ": " + QuoteInput(v));
  }
  const bool printable = std::all_of(v.begin(), v.end(), [](char c) {
    return static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7f;
  });
  if (!printable) {
    return InvalidArgument(std::string(field) + ": must be printable ASCII without spaces, got " +
                           QuoteInput(v));
  }
  return Status::Ok();
}

Status CheckPage(int32_t page_size, const std::string& token) {
  if (page_size < 0 || page_size > kMaxPageSize) {
    return InvalidArgument("page_size: must be 0..." + std::to_string(kMaxPageSize) + ", got " +
                           std::to_string(page_size));
  }
  if (token.size() > kMaxPageTokenLength) {
    return InvalidArgument("page_token: " + std::to_string(token.size()) + " bytes, at most " +
                           std::to_string(kMaxPageTokenLength));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateRequest(const loom::v1::DrainLinkRequest& req) {
  if (Status s = CheckName(req.link_id(), "link_id", kMaxLinkIdLength, false); !s.ok()) return s;
  if (req.reason().size() > kMaxReasonLength) {
    return InvalidArgument("reason: " + std::to_string(req.reason().size()) + " bytes, at most " +
                           std::to_string(kMaxReasonLength) + ": " + QuoteInput(req.reason()));
  }
  for (char c : req.reason()) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      return InvalidArgument("reason: control characters are not allowed: " +
                             QuoteInput(req.reason()));
    }
  }
  return ValidateRequestId(req.request_id());
}

Status ValidateRequest(const loom::v1::UndrainLinkRequest& req) {
  if (Status s = CheckName(req.link_id(), "link_id", kMaxLinkIdLength, false); !s.ok()) return s;
  return ValidateRequestId(req.request_id());
}

Status ValidateRequest(const loom::v1::GetLinkRequest& req) {
  return CheckName(req.link_id(), "link_id", kMaxLinkIdLength, false);
}

Status ValidateRequest(const loom::v1::ListLinksRequest& req) {
  if (Status s = CheckName(req.device(), "device", kMaxIdLength, true); !s.ok()) return s;
  return CheckPage(req.page_size(), req.page_token());
}

Status ValidateRequest(const loom::v1::WatchEventsRequest& req) {
  if (req.types_size() > kMaxEventTypes) {
    return InvalidArgument("types: " + std::to_string(req.types_size()) + " entries, at most " +
                           std::to_string(kMaxEventTypes));
  }
  for (int i = 0; i < req.types_size(); ++i) {
    if (!loom::v1::EventType_IsValid(req.types(i))) {
      return InvalidArgument("types[" + std::to_string(i) + "]: unknown event type " +
                             std::to_string(req.types(i)));
    }
  }
  return CheckName(req.subject(), "subject", kMaxSubjectLength, true);
}

Status ValidateRequest(const loom::v1::GetDeviceStateRequest& req) {
  if (Status s = CheckName(req.device(), "device", kMaxIdLength, false); !s.ok()) return s;
  return CheckName(req.adapter(), "adapter", kMaxAdapterLength, true);
}

Status ValidateRequest(const loom::v1::ListDevicesRequest& req) {
  return CheckName(req.device(), "device", kMaxIdLength, true);
}

Status ValidateRequest(const loom::v1::GetJobRequest& req) {
  return CheckName(req.job_id(), "job_id", kMaxIdLength, false);
}

Status ValidateRequest(const loom::v1::GetJobHealthRequest& req) {
  return CheckName(req.job_id(), "job_id", kMaxIdLength, false);
}

Status ValidateRequest(const loom::v1::ReleaseJobRequest& req) {
  if (Status s = CheckName(req.job_id(), "job_id", kMaxIdLength, false); !s.ok()) return s;
  return ValidateRequestId(req.request_id());
}

Status ValidateRequest(const loom::v1::ListJobsRequest& req) {
  if (Status s = CheckName(req.tenant(), "tenant", kMaxIdLength, true); !s.ok()) return s;
  return CheckPage(req.page_size(), req.page_token());
}

Status ValidateRequest(const loom::v1::WatchJobsRequest& req) {
  return CheckName(req.tenant(), "tenant", kMaxIdLength, true);
}

}  // namespace loom::controller
