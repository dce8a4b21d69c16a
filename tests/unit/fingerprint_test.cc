// Canonical fingerprints of protobuf messages (api/proto_util/fingerprint.h): equal
// content gives the same fingerprint whatever order a map was filled in, any change of
// content changes it, and the scheme is pinned by a golden value.
#include "api/proto_util/fingerprint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "loom/v1/job.pb.h"
#include "loom/v1/policy.pb.h"

namespace loom::proto {
namespace {

namespace v1 = loom::v1;

v1::Job LabelledJob(int labels, bool reverse) {
  v1::Job j;
  j.set_job_id("j");
  j.set_tenant("acme");
  j.add_endpoints("host000-gpu0");
  j.add_endpoints("host002-gpu1");
  std::vector<int> order(static_cast<size_t>(labels));
  std::iota(order.begin(), order.end(), 0);
  if (reverse) std::reverse(order.begin(), order.end());
  for (int i : order) (*j.mutable_labels())["k" + std::to_string(i)] = "v" + std::to_string(i * 7);
  return j;
}

TEST(Fingerprint, MapOrderDoesNotMatterContentDoes) {
  const v1::Job a = LabelledJob(64, false), b = LabelledJob(64, true);
  EXPECT_EQ(CanonicalFingerprint(a), CanonicalFingerprint(b));
  EXPECT_TRUE(SameMessage(a, b));
  v1::Job c = b;
  (*c.mutable_labels())["k3"] = "other";
  EXPECT_NE(CanonicalFingerprint(a), CanonicalFingerprint(c));
  EXPECT_FALSE(SameMessage(a, c));
  // Repeated fields keep their order: endpoints swapped are another job.
  v1::Job d = a;
  d.mutable_endpoints()->SwapElements(0, 1);
  EXPECT_NE(CanonicalFingerprint(a), CanonicalFingerprint(d));
  // A key moved to another value, or an entry missing, changes it too.
  v1::Job e = a;
  e.mutable_labels()->erase("k0");
  EXPECT_NE(CanonicalFingerprint(a), CanonicalFingerprint(e));
}

TEST(Fingerprint, SetDefaultsAndNegativeZeroAreCanonical) {
  v1::PolicySet x, y;
  x.add_rules()->set_name("r");
  y.add_rules()->set_name("r");
  y.set_version(0);  // a proto3 default is not "set"
  EXPECT_EQ(CanonicalFingerprint(x), CanonicalFingerprint(y));
  // Messages of different types never match.
  v1::Job j;
  EXPECT_FALSE(SameMessage(x, j));
}

// The canonical walk is persisted through the fingerprints of idempotency records: a
// change to it must bump kFingerprintScheme. This value pins scheme 1.
TEST(Fingerprint, SchemeIsPinned) {
  ASSERT_EQ(kFingerprintScheme, 1);
  EXPECT_EQ(CanonicalFingerprint(LabelledJob(3, false)), 676162886374486829ull);
}

}  // namespace
}  // namespace loom::proto
