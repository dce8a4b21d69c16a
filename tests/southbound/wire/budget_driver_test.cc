// Route budgets: a change that would put more prefixes on a device than its
// inventory budget is failed closed; within budget it passes through.
#include "southbound/wire/budget_driver.h"

#include <gtest/gtest.h>

namespace loom::southbound {
namespace {

// Records what reaches the device and says it applied it.
class RecordingDriver final : public Driver {
 public:
  std::string Name() const override { return "bgp"; }
  bool Handles(const std::string& d) const override { return d == "leaf0" || d == "leaf1"; }
  void Apply(const loom::v1::DeviceState& desired, std::function<void(ApplyResult)> done) override {
    ++applies;
    ApplyResult r;
    r.applied = desired;
    done(std::move(r));
  }
  void Read(const std::string&, std::function<void(Status, loom::v1::DeviceState)> done) override {
    done(Status::Ok(), {});
  }
  int applies = 0;
};

loom::v1::DeviceState Routes(const std::string& device, int n) {
  loom::v1::DeviceState s;
  s.set_device(device);
  for (int i = 0; i < n; ++i) {
    auto* r = s.add_routes();
    r->set_prefix("198.18.0." + std::to_string(i) + "/32");
    r->set_color(65536 + i % 2);
    // A QP-split part of the same prefix counts once.
    if (i == 0) s.add_routes()->set_prefix("198.18.0.0/32");
  }
  return s;
}

TEST(BudgetDriverTest, OverBudgetChangeFailsClosedAndKeepsWhatTheDeviceRuns) {
  RecordingDriver inner;
  BudgetDriver d(&inner, {{"leaf0", 3}});
  ApplyResult first;
  d.Apply(Routes("leaf0", 3), [&](ApplyResult r) { first = std::move(r); });
  EXPECT_TRUE(first.ok());
  EXPECT_EQ(inner.applies, 1);
  EXPECT_EQ(PrefixCount(Routes("leaf0", 3)), 3u);

  ApplyResult over;
  d.Apply(Routes("leaf0", 4), [&](ApplyResult r) { over = std::move(r); });
  ASSERT_EQ(over.failures.size(), 1u);
  EXPECT_EQ(over.failures[0].part, "routes");
  EXPECT_EQ(over.failures[0].status.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.failures[0].status.message().find("4 prefixes > max_prefixes 3"),
            std::string::npos);
  EXPECT_EQ(inner.applies, 1);               // nothing was sent
  EXPECT_EQ(over.applied.routes_size(), 4);  // the 3 prefixes (4 routes) it already runs
  // Devices without a budget are not limited.
  ApplyResult other;
  d.Apply(Routes("leaf1", 50), [&](ApplyResult r) { other = std::move(r); });
  EXPECT_TRUE(other.ok());
  EXPECT_EQ(inner.applies, 2);
}

}  // namespace
}  // namespace loom::southbound
