// SreMetrics: series follow the fabric's problems (added and removed), top-K
// keeps the highest directions and counts the rest, counters advance by what
// changed, out-of-sync durations run from the first time a device was seen
// out of sync.
#include "controller/core/sre_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <map>
#include <string>

namespace loom::controller {
namespace {

// family name -> (sorted "k=v,k=v" labels -> value) from a real Collect().
std::map<std::string, std::map<std::string, double>> Scrape(prometheus::Registry& r) {
  std::map<std::string, std::map<std::string, double>> out;
  for (const auto& f : r.Collect()) {
    auto& series = out[f.name];
    for (const auto& m : f.metric) {
      std::string key;
      for (const auto& l : m.label) key += (key.empty() ? "" : ",") + l.name + "=" + l.value;
      series[key] = f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
  }
  return out;
}

TEST(SreMetricsTest, SeriesFollowProblemsAndGoWhenTheyDo) {
  prometheus::Registry registry;
  SreMetrics metrics(registry, 2);
  SreView v;
  v.mode = "shadow";
  v.now_seconds = 100;
  v.devices = {{"leaf0", true, false, 0}, {"leaf1", false, true, 3}};
  v.links_out = {{"l1", "oper_down"}, {"l2", "drained"}};
  v.drains = {{"l2", 30}};
  v.storms = {{"host0-nic0:eth0", true}};
  v.rates = {{"l1", "up", true, 10, 0, 0.5},
             {"l2", "up", true, 30, 0, 0.01},
             {"l3", "down", false, 20, 7, 0},
             {"l4", "up", true, 5, 0, 0.2}};
  metrics.Update(v);
  auto s = Scrape(registry);
  EXPECT_EQ(s["loom_reconciler_mode"]["mode=shadow"], 1);
  EXPECT_EQ(s["loom_reconciler_mode"]["mode=active"], 0);
  EXPECT_EQ(s["loom_device_in_sync"]["device=leaf0"], 1);
  EXPECT_EQ(s["loom_device_in_sync"]["device=leaf1"], 0);
  EXPECT_EQ(s["loom_devices_sync"]["state=failing"], 1);
  EXPECT_EQ(s["loom_device_apply_failures_total"]["device=leaf1"], 3);
  EXPECT_EQ(s["loom_device_apply_failures_total"]["device=leaf0"], 0);
  EXPECT_EQ(s["loom_device_out_of_sync_seconds"].size(), 1u);
  EXPECT_EQ(s["loom_link_out_of_placement"]["cause=oper_down,link=l1"], 1);
  EXPECT_EQ(s["loom_link_drained_seconds"]["link=l2"], 30);
  EXPECT_EQ(s["loom_pfc_storm_origin"]["port=host0-nic0:eth0,quarantined=true"], 1);
  // ECN: top 2 of 4 are l2 (30) and l3 (20); two left out.
  EXPECT_EQ(s["loom_link_ecn_marked_pps"].size(), 2u);
  EXPECT_EQ(s["loom_link_ecn_marked_pps"]["direction=up,link=l2"], 30);
  EXPECT_EQ(s["loom_link_ecn_marked_pps"]["direction=down,link=l3"], 20);
  EXPECT_EQ(s["loom_metric_series_dropped"]["family=loom_link_ecn_marked_pps"], 2);
  EXPECT_EQ(s["loom_link_cnp_pps"].size(), 1u);  // Only non-zero values.
  // Paused >= 5 %: l1 and l4 (fabric); l2 at 1 % is not.
  EXPECT_EQ(s["loom_pfc_paused_fabric_directions"][""], 2);
  EXPECT_EQ(s["loom_fabric_ecn_marked_pps"][""], 65);

  // Later: l1 back, the drain lifted, the storm over, leaf1 failed twice more
  // and is still out of sync; leaf0 drifted.
  v.now_seconds = 160;
  v.mode = "active";
  v.devices = {{"leaf0", false, false, 0}, {"leaf1", false, true, 5}};
  v.links_out = {};
  v.drains = {};
  v.storms = {};
  v.rates = {{"l3", "down", false, 20, 7, 0}};
  metrics.Update(v);
  s = Scrape(registry);
  EXPECT_EQ(s["loom_reconciler_mode"]["mode=active"], 1);
  EXPECT_TRUE(s["loom_link_out_of_placement"].empty());
  EXPECT_TRUE(s["loom_link_drained_seconds"].empty());
  EXPECT_TRUE(s["loom_pfc_storm_origin"].empty());
  EXPECT_EQ(s["loom_link_ecn_marked_pps"].size(), 1u);
  EXPECT_EQ(s["loom_metric_series_dropped"]["family=loom_link_ecn_marked_pps"], 0);
  EXPECT_EQ(s["loom_device_apply_failures_total"]["device=leaf1"], 5);
  // leaf1 out of sync since 100 s, leaf0 since 160 s.
  EXPECT_EQ(s["loom_device_out_of_sync_seconds"]["device=leaf1"], 60);
  EXPECT_EQ(s["loom_device_out_of_sync_seconds"]["device=leaf0"], 0);
  EXPECT_EQ(s["loom_pfc_paused_fabric_directions"][""], 0);

  // Back in sync: the duration series goes; a new episode starts from zero.
  v.now_seconds = 200;
  v.devices = {{"leaf0", true, false, 0}, {"leaf1", true, false, 5}};
  metrics.Update(v);
  v.now_seconds = 230;
  v.devices = {{"leaf0", true, false, 0}, {"leaf1", false, false, 5}};
  metrics.Update(v);
  s = Scrape(registry);
  EXPECT_EQ(s["loom_device_out_of_sync_seconds"].size(), 1u);
  EXPECT_EQ(s["loom_device_out_of_sync_seconds"]["device=leaf1"], 0);
}

}  // namespace
}  // namespace loom::controller
