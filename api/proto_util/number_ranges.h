// Range checks for every number of a protobuf message (configuration files,
// scenarios): each double must be finite, and each field listed in a range
// table must lie in [min, max]. Errors name the field's path
// ("scenario.jobs[2].message_bytes: nan is not a finite number"). Walks nested
// messages, repeated fields and maps; O(fields).
#ifndef LOOM_API_PROTO_UTIL_NUMBER_RANGES_H_
#define LOOM_API_PROTO_UTIL_NUMBER_RANGES_H_

#include <google/protobuf/message.h>

#include <set>
#include <string>
#include <vector>

namespace loom::proto_util {

struct NumberRange {
  const char* field;  // full field name: "loom.sim.v1.Job.message_bytes"
  double min, max;
};

// `skip`: full names of message types not descended into (they have their own
// validation, e.g. "loom.v1.Topology").
bool CheckNumberRanges(const google::protobuf::Message& m, const std::string& where,
                       const std::vector<NumberRange>& ranges, std::string* error,
                       const std::set<std::string>& skip = {"loom.v1.Topology"});

}  // namespace loom::proto_util

#endif  // LOOM_API_PROTO_UTIL_NUMBER_RANGES_H_
