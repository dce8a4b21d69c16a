// Canonical fingerprints and equality of protobuf messages.
//
// A message's serialized bytes are not canonical: map entries come out in whatever
// order the map holds them (two equal messages may serialize differently in one
// process), and deterministic serialization is stable only within one protobuf build.
// So nothing that is compared, hashed or persisted as a key may use SerializeAsString.
// CanonicalFingerprint walks the message field by field instead: set fields in field
// number order, repeated fields in order, map entries sorted by their key, nested
// messages recursively, floating-point values by their bits (-0 as +0, every NaN as
// one), unknown fields last. The walk is versioned (kFingerprintScheme): a persisted
// fingerprint is stored with the scheme that made it, and one made by another scheme is
// not compared.
//
// Pure functions; thread-compatible (no state).
#ifndef LOOM_API_PROTO_UTIL_FINGERPRINT_H_
#define LOOM_API_PROTO_UTIL_FINGERPRINT_H_

#include <google/protobuf/message.h>

#include <cstdint>
#include <string>

namespace loom::proto {

// Version of the canonical walk below; bump it when the walk changes.
inline constexpr int kFingerprintScheme = 1;

// The canonical byte string of `m` (what the fingerprint hashes).
std::string CanonicalBytes(const google::protobuf::Message& m);

// 64-bit FNV-1a of CanonicalBytes(m).
uint64_t CanonicalFingerprint(const google::protobuf::Message& m);

// Field-wise equality (maps compared as maps), for messages of the same type.
bool SameMessage(const google::protobuf::Message& a, const google::protobuf::Message& b);

}  // namespace loom::proto

#endif  // LOOM_API_PROTO_UTIL_FINGERPRINT_H_
