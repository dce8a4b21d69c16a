#include "api/proto_util/fingerprint.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "common/text.h"

namespace loom::proto {

namespace {

namespace pb = google::protobuf;

void PutU64(uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void PutBytes(const std::string& s, std::string* out) {
  PutU64(s.size(), out);
  out->append(s);
}

uint64_t DoubleBits(double d) {
  if (d == 0) d = 0;  // -0 and +0
  if (std::isnan(d)) return 0x7ff8000000000000ull;
  uint64_t b;
  std::memcpy(&b, &d, sizeof(b));
  return b;
}

void Walk(const pb::Message& m, std::string* out);

// One value of `f` (index < 0: the singular value).
void Value(const pb::Message& m, const pb::FieldDescriptor* f, int index, std::string* out) {
  const pb::Reflection* r = m.GetReflection();
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32:
      PutU64(static_cast<uint64_t>(
                 static_cast<int64_t>(rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f))),
             out);
      break;
    case pb::FieldDescriptor::CPPTYPE_INT64:
      PutU64(static_cast<uint64_t>(rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f)),
             out);
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      PutU64(rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f), out);
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      PutU64(rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f), out);
      break;
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      PutU64(rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f), out);
      break;
    case pb::FieldDescriptor::CPPTYPE_ENUM:
      PutU64(static_cast<uint64_t>(static_cast<int64_t>(rep ? r->GetRepeatedEnumValue(m, f, index)
                                                            : r->GetEnumValue(m, f))),
             out);
      break;
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
      PutU64(DoubleBits(rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f)), out);
      break;
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      PutU64(DoubleBits(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f)), out);
      break;
    case pb::FieldDescriptor::CPPTYPE_STRING:
      PutBytes(rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f), out);
      break;
    case pb::FieldDescriptor::CPPTYPE_MESSAGE: {
      std::string sub;
      Walk(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f), &sub);
      PutBytes(sub, out);
      break;
    }
  }
}

void Walk(const pb::Message& m, std::string* out) {
  const pb::Reflection* r = m.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(m, &fields);  // set fields, in field number order
  for (const pb::FieldDescriptor* f : fields) {
    PutU64(static_cast<uint64_t>(f->number()), out);
    if (f->is_map()) {
      // Entries sorted by their key's canonical bytes.
      const pb::FieldDescriptor* key = f->message_type()->map_key();
      const pb::FieldDescriptor* value = f->message_type()->map_value();
      std::vector<std::pair<std::string, std::string>> entries;
      const int n = r->FieldSize(m, f);
      for (int i = 0; i < n; ++i) {
        const pb::Message& e = r->GetRepeatedMessage(m, f, i);
        std::string k, v;
        Value(e, key, -1, &k);
        Value(e, value, -1, &v);
        entries.emplace_back(std::move(k), std::move(v));
      }
      std::sort(entries.begin(), entries.end());
      PutU64(entries.size(), out);
      for (const auto& [k, v] : entries) {
        out->append(k);
        out->append(v);
      }
    } else if (f->is_repeated()) {
      const int n = r->FieldSize(m, f);
      PutU64(static_cast<uint64_t>(n), out);
      for (int i = 0; i < n; ++i) Value(m, f, i, out);
    } else {
      Value(m, f, -1, out);
    }
  }
  const pb::UnknownFieldSet& unknown = r->GetUnknownFields(m);
  if (!unknown.empty()) {
    std::string raw;
    unknown.SerializeToString(&raw);
    PutU64(0, out);  // field number 0 never occurs: the unknown fields' marker
    PutBytes(raw, out);
  }
}

}  // namespace

std::string CanonicalBytes(const google::protobuf::Message& m) {
  std::string out;
  PutBytes(m.GetDescriptor()->full_name(), &out);
  Walk(m, &out);
  return out;
}

uint64_t CanonicalFingerprint(const google::protobuf::Message& m) {
  return Fnv1a64(CanonicalBytes(m));
}

bool SameMessage(const google::protobuf::Message& a, const google::protobuf::Message& b) {
  return a.GetDescriptor() == b.GetDescriptor() && CanonicalBytes(a) == CanonicalBytes(b);
}

}  // namespace loom::proto
