// loomd's inventory → BGP sessions (BuildSouthbound): the hardening fields
// of BgpPeering (md5_password_ref, ttl_security_hops, max_prefixes_received,
// max_prefixes_restart_s) reach the PeerConfig, and bad values are refused
// with an error naming the device and the field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "controller/loomd/inventory.h"

namespace loom::loomd {
namespace {

v1::Topology TwoDevices() {
  v1::Topology t;
  auto* leaf = t.add_devices();
  leaf->set_id("leaf0");
  leaf->set_role(v1::DEVICE_ROLE_LEAF);
  auto* spine = t.add_devices();
  spine->set_id("spine0");
  spine->set_role(v1::DEVICE_ROLE_SPINE);
  auto* l = t.add_links();
  l->mutable_a()->set_device("leaf0");
  l->mutable_a()->set_interface("eth1");
  l->mutable_b()->set_device("spine0");
  l->mutable_b()->set_interface("eth1");
  return t;
}

Inventory WithBgp(const std::function<void(v1::BgpPeering*)>& edit) {
  Inventory inv;
  v1::InventoryDevice& d = inv.devices["leaf0"];
  d.set_id("leaf0");
  v1::BgpPeering* b = d.mutable_bgp();
  b->set_local_as(65000);
  b->set_router_id("198.18.255.1");
  b->set_address("198.18.0.1");
  b->set_peer_as(65001);
  auto* s = b->add_sessions();
  s->set_via("spine0");
  s->set_fabric_color(1);
  s->set_next_hop("198.18.1.1");
  edit(b);
  inv.devices["spine0"].set_id("spine0");
  return inv;
}

// BuildSouthbound's error ("" when it succeeds; then *out holds the result).
std::string Build(const Inventory& inv, Southbound* out) {
  std::string error;
  if (BuildSouthbound(inv, TwoDevices(), out, &error)) return "";
  EXPECT_FALSE(error.empty());
  return error;
}

std::string TempFile(const std::string& name, const std::string& text) {
  std::string path = std::filesystem::temp_directory_path() /
                     ("loom-bgp-inv-" + std::to_string(getpid()) + "-" + name);
  std::ofstream(path) << text;
  return path;
}

TEST(BgpInventoryTest, DefaultsWithoutHardeningFields) {
  Southbound sb;
  ASSERT_EQ(Build(WithBgp([](v1::BgpPeering*) {}), &sb), "");
  ASSERT_EQ(sb.bgp_sessions.size(), 1u);
  const auto& p = sb.bgp_sessions[0];
  EXPECT_EQ(p.md5_password, "");
  EXPECT_EQ(p.ttl_security_hops, 0);
  EXPECT_EQ(p.ttl, 1);
  EXPECT_EQ(p.max_prefixes_received, 1000u);
  EXPECT_EQ(p.max_prefix_restart, std::chrono::seconds(60));
}

TEST(BgpInventoryTest, PasswordFromFileAndEnvGtsmAndMaxPrefixesReachTheSession) {
  const std::string file = TempFile("pw", "s3cret\r\nsecond line ignored\n");
  Southbound sb;
  ASSERT_EQ(Build(WithBgp([&](v1::BgpPeering* b) {
                    b->set_md5_password_ref("file:" + file);
                    b->set_ttl_security_hops(1);
                    b->set_max_prefixes_received(10);
                    b->set_max_prefixes_restart_s(30);
                  }),
                  &sb),
            "");
  ASSERT_EQ(sb.bgp_sessions.size(), 1u);
  EXPECT_EQ(sb.bgp_sessions[0].md5_password, "s3cret");
  EXPECT_EQ(sb.bgp_sessions[0].ttl_security_hops, 1);
  EXPECT_EQ(sb.bgp_sessions[0].max_prefixes_received, 10u);
  EXPECT_EQ(sb.bgp_sessions[0].max_prefix_restart, std::chrono::seconds(30));
  std::filesystem::remove(file);

  setenv("LOOM_TEST_BGP_PW", "from-env", 1);
  Southbound sb2;
  ASSERT_EQ(
      Build(WithBgp([](v1::BgpPeering* b) { b->set_md5_password_ref("env:LOOM_TEST_BGP_PW"); }),
            &sb2),
      "");
  EXPECT_EQ(sb2.bgp_sessions[0].md5_password, "from-env");
  unsetenv("LOOM_TEST_BGP_PW");
}

TEST(BgpInventoryTest, BadPasswordReferencesNameTheField) {
  Southbound sb;
  // The password itself instead of a reference: refused, and not echoed as a
  // password would be (the message shows the reference it was given).
  EXPECT_EQ(Build(WithBgp([](v1::BgpPeering* b) { b->set_md5_password_ref("hunter2"); }), &sb),
            "device leaf0: bgp.md5_password_ref: \"hunter2\" must be env:VAR or file:PATH (a "
            "reference, not the password)");
  EXPECT_EQ(Build(WithBgp([](v1::BgpPeering* b) {
                    b->set_md5_password_ref("env:LOOM_TEST_BGP_PW_UNSET");
                  }),
                  &sb),
            "device leaf0: bgp.md5_password_ref: environment variable LOOM_TEST_BGP_PW_UNSET is "
            "not set");
  EXPECT_EQ(Build(WithBgp([](v1::BgpPeering* b) {
                    b->set_md5_password_ref("file:/nonexistent/loom-pw");
                  }),
                  &sb),
            "device leaf0: bgp.md5_password_ref: cannot read /nonexistent/loom-pw");
  const std::string empty = TempFile("empty", "\n");
  EXPECT_EQ(
      Build(WithBgp([&](v1::BgpPeering* b) { b->set_md5_password_ref("file:" + empty); }), &sb),
      "device leaf0: bgp.md5_password_ref: the password is empty");
  const std::string longer = TempFile("long", std::string(81, 'x') + "\n");
  EXPECT_EQ(
      Build(WithBgp([&](v1::BgpPeering* b) { b->set_md5_password_ref("file:" + longer); }), &sb),
      "device leaf0: bgp.md5_password_ref: the password is 81 bytes; TCP MD5 keys are at "
      "most 80 (TCP_MD5SIG_MAXKEYLEN)");
  const std::string max = TempFile("max", std::string(80, 'x'));
  EXPECT_EQ(Build(WithBgp([&](v1::BgpPeering* b) { b->set_md5_password_ref("file:" + max); }), &sb),
            "");
  for (const auto& f : {empty, longer, max}) std::filesystem::remove(f);
}

TEST(BgpInventoryTest, GtsmRangeAndExclusiveWithMultihop) {
  Southbound sb;
  EXPECT_EQ(Build(WithBgp([](v1::BgpPeering* b) { b->set_ttl_security_hops(255); }), &sb),
            "device leaf0: bgp.ttl_security_hops: 255 is not 1..254 (0 = off)");
  EXPECT_EQ(Build(WithBgp([](v1::BgpPeering* b) {
                    b->set_ttl_security_hops(2);
                    b->set_multihop(true);
                  }),
                  &sb),
            "device leaf0: bgp.ttl_security_hops and bgp.multihop: set one or the other (GTSM "
            "sends with TTL 255 and bounds the hops itself)");
  Southbound ok;
  EXPECT_EQ(Build(WithBgp([](v1::BgpPeering* b) { b->set_ttl_security_hops(254); }), &ok), "");
  EXPECT_EQ(ok.bgp_sessions.at(0).ttl_security_hops, 254);
}

TEST(BgpInventoryTest, MaxPrefixesRestartBound) {
  Southbound sb;
  EXPECT_EQ(Build(WithBgp([](v1::BgpPeering* b) { b->set_max_prefixes_restart_s(86401); }), &sb),
            "device leaf0: bgp.max_prefixes_restart_s: at most 86400 (one day)");
}

}  // namespace
}  // namespace loom::loomd
