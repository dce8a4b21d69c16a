#include "api/proto_util/number_ranges.h"

#include <cmath>
#include <map>
#include <sstream>
#include <utility>

namespace loom::proto_util {

namespace {

using FD = google::protobuf::FieldDescriptor;
using Ranges = std::map<std::string, std::pair<double, double>>;

std::string NumberText(double v) {
  if (std::isnan(v)) return "nan";
  std::ostringstream os;
  os << v;
  return os.str();
}

bool Walk(const google::protobuf::Message& m, const std::string& where, const Ranges& ranges,
          const std::set<std::string>& skip, std::string* error) {
  const auto* refl = m.GetReflection();
  std::vector<const FD*> fields;
  refl->ListFields(m, &fields);
  for (const FD* f : fields) {
    const std::string name = where + "." + f->name();
    const int n = f->is_repeated() ? refl->FieldSize(m, f) : 1;
    for (int i = 0; i < n; ++i) {
      const std::string at = f->is_repeated() ? name + "[" + std::to_string(i) + "]" : name;
      if (f->cpp_type() == FD::CPPTYPE_MESSAGE) {
        const auto& sub =
            f->is_repeated() ? refl->GetRepeatedMessage(m, f, i) : refl->GetMessage(m, f);
        if (skip.count(sub.GetDescriptor()->full_name())) continue;
        if (!Walk(sub, at, ranges, skip, error)) return false;
        continue;
      }
      double v = 0;
      switch (f->cpp_type()) {
        case FD::CPPTYPE_INT32:
          v = f->is_repeated() ? refl->GetRepeatedInt32(m, f, i) : refl->GetInt32(m, f);
          break;
        case FD::CPPTYPE_INT64:
          v = static_cast<double>(f->is_repeated() ? refl->GetRepeatedInt64(m, f, i)
                                                   : refl->GetInt64(m, f));
          break;
        case FD::CPPTYPE_UINT32:
          v = f->is_repeated() ? refl->GetRepeatedUInt32(m, f, i) : refl->GetUInt32(m, f);
          break;
        case FD::CPPTYPE_UINT64:
          v = static_cast<double>(f->is_repeated() ? refl->GetRepeatedUInt64(m, f, i)
                                                   : refl->GetUInt64(m, f));
          break;
        case FD::CPPTYPE_DOUBLE:
          v = f->is_repeated() ? refl->GetRepeatedDouble(m, f, i) : refl->GetDouble(m, f);
          break;
        case FD::CPPTYPE_FLOAT:
          v = f->is_repeated() ? refl->GetRepeatedFloat(m, f, i) : refl->GetFloat(m, f);
          break;
        default:
          continue;
      }
      if (!std::isfinite(v)) {
        *error = at + ": " + NumberText(v) + " is not a finite number";
        return false;
      }
      auto it = ranges.find(f->full_name());
      if (it != ranges.end() && (v < it->second.first || v > it->second.second)) {
        *error = at + ": " + NumberText(v) + " is out of range " + NumberText(it->second.first) +
                 ".." + NumberText(it->second.second);
        return false;
      }
    }
  }
  return true;
}

}  // namespace

bool CheckNumberRanges(const google::protobuf::Message& m, const std::string& where,
                       const std::vector<NumberRange>& ranges, std::string* error,
                       const std::set<std::string>& skip) {
  Ranges r;
  for (const auto& n : ranges) r[n.field] = {n.min, n.max};
  return Walk(m, where, r, skip, error);
}

}  // namespace loom::proto_util
