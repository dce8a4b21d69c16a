// Codec unit tests: the loom gNMI schema, Set/Get encode and decode, and
// every validation rule (as a DeviceState check and as a rejected Set).
#include "southbound/gnmi/gnmi_config.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "telemetry/path.h"

namespace loom::southbound::gnmi {
namespace {

namespace v1 = loom::v1;
using google::protobuf::util::MessageDifferencer;

v1::DeviceState FullState() {
  v1::DeviceState s;
  s.set_device("leaf-0");
  s.set_generation(7);
  auto* c = s.add_colors();
  c->set_color(101);
  c->add_next_hops("spine-1");
  c->add_next_hops("spine-0");
  auto* r = s.add_routes();
  r->set_destination("nic-9");
  r->set_prefix("198.18.1.9/32");
  r->set_color(101);
  r->set_backup_color(102);
  r->set_job_id("job-a");
  r->set_traffic_class(3);
  auto* w = s.add_weights();
  w->set_destination("leaf-3");
  (*w->mutable_weights())["spine-0"] = 3;
  (*w->mutable_weights())["spine-1"] = 1;
  auto* d = s.mutable_dlb();
  d->set_mode(v1::DLB_MODE_FLOWLET);
  d->set_inactivity_interval_ns(256000);
  d->set_load_weight_percent(50);
  for (uint32_t t : {10, 20, 30, 40, 50, 60, 70}) d->add_load_thresholds_percent(t);
  for (uint64_t q : {1000ull, 2000ull, 4000ull, 8000ull, 16000ull, 32000ull, 5000000000ull}) {
    d->add_queue_thresholds_bytes(q);
  }
  auto* a = s.add_alb_tables();
  a->set_group("leaf-3");
  for (const char* m : {"spine-0", "spine-1", "spine-0", "spine-1"}) a->add_buckets(m);
  auto* sp = s.add_spray_rules();
  sp->set_traffic_class(3);
  sp->set_qp_first(100);
  sp->set_qp_last(200);
  auto* t = s.add_thresholds();
  t->set_priority(3);
  t->set_ecn_kmin_bytes(100000);
  t->set_ecn_kmax_bytes(400000);
  t->set_ecn_pmax_percent(20);
  t->set_pfc_xoff_bytes(600000);
  t->set_pfc_xon_bytes(500000);
  auto* t2 = s.add_thresholds();
  *t2 = *t;
  t2->set_interface("Ethernet8");
  return s;
}

::gnmi::Path P(const std::string& text) {
  ::gnmi::Path p;
  Status s = telemetry::ParsePath(text, &p);
  EXPECT_TRUE(s.ok()) << text << ": " << s.message();
  return p;
}

::gnmi::SetRequest ReplaceReq(const std::string& path, const std::string& json) {
  ::gnmi::SetRequest r;
  auto* u = r.add_replace();
  *u->mutable_path() = P(path);
  u->mutable_val()->set_json_ietf_val(json);
  return r;
}

bool Same(const v1::DeviceState& a, const v1::DeviceState& b) {
  return MessageDifferencer::Equals(a, b);
}

TEST(GnmiConfig, FullStateRoundTripsThroughOneSetRequest) {
  v1::DeviceState want = FullState();
  ::gnmi::SetRequest req = EncodeSetRequest(nullptr, want, kAllParts, "leaf-0");
  EXPECT_EQ(req.prefix().origin(), "loom");
  EXPECT_EQ(req.prefix().target(), "leaf-0");
  EXPECT_EQ(req.delete__size(), 7);  // Every container, device state unknown.
  v1::DeviceState dev;
  dev.set_device("leaf-0");
  // Junk the transaction must clear.
  dev.add_alb_tables()->set_group("old");
  dev.mutable_alb_tables(0)->add_buckets("spine-9");
  ::gnmi::SetResponse resp;
  Status s = ApplySetRequest(req, &dev, CodecLimits(), &resp, 42);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(resp.timestamp(), 42);
  EXPECT_EQ(resp.response_size(), req.delete__size() + req.replace_size());
  v1::DeviceState canon = Canonical(want);
  canon.set_generation(0);
  EXPECT_TRUE(Same(dev, canon)) << dev.DebugString();
  EXPECT_EQ(DiffParts(dev, want), 0u);
}

TEST(GnmiConfig, DiffSetCarriesOnlyChangedEntriesAndDeletes) {
  v1::DeviceState cur = FullState();
  v1::DeviceState want = cur;
  want.mutable_alb_tables(0)->set_buckets(0, "spine-1");
  want.clear_weights();
  want.add_spray_rules()->set_traffic_class(5);
  ::gnmi::SetRequest req = EncodeSetRequest(&cur, want, kAllParts, "leaf-0");
  ASSERT_EQ(req.delete__size(), 1);
  EXPECT_EQ(telemetry::FormatPath(req.delete_(0)), "/glb/destinations/destination[name=leaf-3]");
  ASSERT_EQ(req.replace_size(), 2);
  EXPECT_EQ(telemetry::FormatPath(req.replace(0).path()), "/alb/groups/group[name=leaf-3]/config");
  EXPECT_EQ(telemetry::FormatPath(req.replace(1).path()),
            "/spray/rules/rule[qp-first=0][traffic-class=5]/config");
  ASSERT_TRUE(ApplySetRequest(req, &cur).ok());
  EXPECT_EQ(DiffParts(cur, want), 0u);
  EXPECT_TRUE(IsEmptySet(EncodeSetRequest(&cur, want, kAllParts, "leaf-0")));
}

TEST(GnmiConfig, DlbRemovedIsDeleted) {
  v1::DeviceState cur = FullState(), want = FullState();
  want.clear_dlb();
  ::gnmi::SetRequest req = EncodeSetRequest(&cur, want, Mask(Part::kDlb), "");
  ASSERT_EQ(req.delete__size(), 1);
  EXPECT_EQ(telemetry::FormatPath(req.delete_(0)), "/dlb");
  ASSERT_TRUE(ApplySetRequest(req, &cur).ok());
  EXPECT_FALSE(cur.has_dlb());
}

TEST(GnmiConfig, ConfigJsonShapes) {
  v1::DeviceState s = FullState();
  EXPECT_EQ(ConfigJson(s.dlb()),
            R"({"mode":"flowlet","inactivity-interval-ns":"256000","load-weight-percent":50,)"
            R"("load-thresholds-percent":[10,20,30,40,50,60,70],"queue-thresholds-bytes":)"
            R"(["1000","2000","4000","8000","16000","32000","5000000000"]})");
  EXPECT_EQ(ConfigJson(s.colors(0)), R"({"id":101,"next-hops":["spine-1","spine-0"]})");
  EXPECT_EQ(ConfigJson(s.routes(0)),
            R"({"destination":"nic-9","traffic-class":3,"prefix":"198.18.1.9/32","color":101,)"
            R"("backup-color":102,"job-id":"job-a"})");
  EXPECT_EQ(ConfigJson(s.weights(0)), R"({"name":"leaf-3","weights":{"spine-0":3,"spine-1":1}})");
  EXPECT_EQ(ConfigJson(s.alb_tables(0)),
            R"({"name":"leaf-3","buckets":["spine-0","spine-1","spine-0","spine-1"]})");
  EXPECT_EQ(ConfigJson(s.spray_rules(0)), R"({"traffic-class":3,"qp-first":100,"qp-last":200})");
  EXPECT_EQ(
      ConfigJson(s.thresholds(0)),
      R"({"interface":"ALL","priority":3,"ecn-kmin-bytes":"100000","ecn-kmax-bytes":)"
      R"("400000","ecn-pmax-percent":20,"pfc-xoff-bytes":"600000","pfc-xon-bytes":"500000"})");
}

TEST(GnmiConfig, GetResponseRoundTrips) {
  v1::DeviceState s = Canonical(FullState());
  ::gnmi::GetRequest req = MakeGetRequest(kAllParts, "leaf-0");
  ::gnmi::GetResponse resp;
  ASSERT_TRUE(EncodeGetResponse(req, s, 5, &resp).ok());
  v1::DeviceState back;
  back.set_device("leaf-0");
  back.set_generation(7);
  Status st = DecodeGetResponse(resp, &back);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(Same(back, s)) << back.DebugString();
}

TEST(GnmiConfig, NotificationRoundTrips) {
  v1::DeviceState s = Canonical(FullState());
  ::gnmi::GetResponse resp;
  *resp.add_notification() = EncodeNotification(s, kGnmiDefaultParts, "leaf-0", 9);
  EXPECT_EQ(resp.notification(0).timestamp(), 9);
  v1::DeviceState back;
  ASSERT_TRUE(DecodeGetResponse(resp, &back).ok());
  EXPECT_EQ(DiffParts(back, s, kGnmiDefaultParts), 0u);
  EXPECT_EQ(back.colors_size(), 0);  // Not requested.
}

TEST(GnmiConfig, GetFiltersByPathAndReportsMissingEntries) {
  v1::DeviceState s = Canonical(FullState());
  ::gnmi::GetRequest req;
  *req.add_path() = P("loom:/alb/groups/group[name=leaf-3]");
  req.set_encoding(::gnmi::JSON_IETF);
  ::gnmi::GetResponse resp;
  ASSERT_TRUE(EncodeGetResponse(req, s, 0, &resp).ok());
  ASSERT_EQ(resp.notification_size(), 1);
  ASSERT_EQ(resp.notification(0).update_size(), 1);

  *req.mutable_path(0) = P("loom:/alb/groups/group[name=nope]");
  EXPECT_EQ(EncodeGetResponse(req, s, 0, &resp).code(), StatusCode::kNotFound);
  *req.mutable_path(0) = P("loom:/qos");
  ASSERT_TRUE(EncodeGetResponse(req, s, 0, &resp).ok());
  EXPECT_EQ(resp.notification(0).update_size(), 2);
  *req.mutable_path(0) = P("/interfaces");
  EXPECT_EQ(EncodeGetResponse(req, s, 0, &resp).code(), StatusCode::kInvalidArgument);
  *req.mutable_path(0) = P("loom:/bogus");
  EXPECT_EQ(EncodeGetResponse(req, s, 0, &resp).code(), StatusCode::kInvalidArgument);
  req.set_encoding(::gnmi::PROTO);
  *req.mutable_path(0) = P("loom:/dlb");
  EXPECT_EQ(EncodeGetResponse(req, s, 0, &resp).code(), StatusCode::kUnimplemented);
}

TEST(GnmiConfig, DeletesAcceptMissingEntriesWildcardsAndContainers) {
  v1::DeviceState s = Canonical(FullState());
  ::gnmi::SetRequest req;
  *req.add_delete_() = P("loom:/alb/groups/group[name=never-there]");
  *req.add_delete_() = P("loom:/qos/thresholds/threshold[interface=*][priority=3]");
  *req.add_delete_() = P("loom:/colors/color");
  ASSERT_TRUE(ApplySetRequest(req, &s).ok());
  EXPECT_EQ(s.alb_tables_size(), 1);
  EXPECT_EQ(s.thresholds_size(), 0);
  EXPECT_EQ(s.colors_size(), 0);
  EXPECT_EQ(s.routes_size(), 1);
  ::gnmi::SetRequest all;
  *all.add_delete_() = P("loom:/");
  ASSERT_TRUE(ApplySetRequest(all, &s).ok());
  EXPECT_EQ(DiffParts(s, v1::DeviceState()), 0u);
}

TEST(GnmiConfig, UpdateMergesReplaceResets) {
  v1::DeviceState s = Canonical(FullState());
  ::gnmi::SetRequest up;
  auto* u = up.add_update();
  *u->mutable_path() = P("loom:/dlb/config");
  u->mutable_val()->set_json_ietf_val(R"({"loom:inactivity-interval-ns": 512000})");
  ASSERT_TRUE(ApplySetRequest(up, &s).ok());
  EXPECT_EQ(s.dlb().inactivity_interval_ns(), 512000u);
  EXPECT_EQ(s.dlb().mode(), v1::DLB_MODE_FLOWLET);
  EXPECT_EQ(s.dlb().load_weight_percent(), 50u);
  ASSERT_TRUE(ApplySetRequest(ReplaceReq("loom:/dlb", R"({"mode":"per-packet"})"), &s).ok());
  EXPECT_EQ(s.dlb().mode(), v1::DLB_MODE_PER_PACKET);
  EXPECT_EQ(s.dlb().load_weight_percent(), 0u);
  EXPECT_EQ(s.dlb().load_thresholds_percent_size(), 0);
}

TEST(GnmiConfig, PrefixSuppliesOriginAndElements) {
  v1::DeviceState s;
  ::gnmi::SetRequest req;
  *req.mutable_prefix() = P("leaf-0@loom:/alb/groups");
  auto* u = req.add_replace();
  *u->mutable_path() = P("group[name=g]/config");
  u->mutable_val()->set_json_val(R"({"buckets":["a","b"]})");
  ASSERT_TRUE(ApplySetRequest(req, &s).ok());
  ASSERT_EQ(s.alb_tables_size(), 1);
  EXPECT_EQ(s.alb_tables(0).group(), "g");
}

TEST(GnmiConfig, CanonicalMergesDuplicatesAndValidationFlagsConflicts) {
  v1::DeviceState s;
  for (int i = 0; i < 2; ++i) s.add_spray_rules()->set_traffic_class(3);
  EXPECT_TRUE(ValidatePart(s, Part::kSprayRules).ok());
  EXPECT_EQ(Canonical(s).spray_rules_size(), 1);
  s.mutable_spray_rules(1)->set_qp_last(9);
  Status st = ValidatePart(s, Part::kSprayRules);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("listed twice"), std::string::npos) << st.message();
}

// QP split: one destination and class, an unsplit route (0/0) and two parts
// (mask 1, values 0 and 1) with their own colors.
v1::DeviceState SplitState() {
  v1::DeviceState s;
  s.set_device("leaf-0");
  auto add = [&](uint32_t mask, uint32_t value, uint32_t color, uint32_t backup) {
    auto* r = s.add_routes();
    r->set_destination("nic-9");
    r->set_prefix("198.18.1.9/32");
    r->set_traffic_class(3);
    r->set_job_id("job-a");
    r->set_qp_mask(mask);
    r->set_qp_value(value);
    r->set_color(color);
    r->set_backup_color(backup);
  };
  // Out of key order on purpose.
  add(1, 1, 102, 101);
  add(0, 0, 103, 0);
  add(1, 0, 101, 102);
  return s;
}

TEST(GnmiConfig, QpSplitRoutesAreSeparateEntriesAndRoundTrip) {
  const v1::DeviceState want = SplitState();
  ASSERT_TRUE(ValidateState(want).ok()) << ValidateState(want).message();
  const v1::DeviceState canon = Canonical(want);
  ASSERT_EQ(canon.routes_size(), 3);  // Nothing merged.
  EXPECT_EQ(canon.routes(0).qp_mask(), 0u);
  EXPECT_EQ(canon.routes(1).qp_value(), 0u);
  EXPECT_EQ(canon.routes(1).color(), 101u);
  EXPECT_EQ(canon.routes(2).qp_value(), 1u);
  EXPECT_EQ(canon.routes(2).color(), 102u);

  // Set: the unsplit route keeps its pre-split path and JSON; the parts carry
  // qp-mask and qp-value as keys and leaves.
  ::gnmi::SetRequest req = EncodeSetRequest(nullptr, want, Mask(Part::kRoutes), "leaf-0");
  ASSERT_EQ(req.replace_size(), 3);
  EXPECT_EQ(telemetry::FormatPath(req.replace(0).path()),
            "/routes/route[destination=nic-9][traffic-class=3]/config");
  EXPECT_EQ(req.replace(0).val().json_ietf_val(),
            R"({"destination":"nic-9","traffic-class":3,"prefix":"198.18.1.9/32","color":103,)"
            R"("backup-color":0,"job-id":"job-a"})");
  EXPECT_EQ(telemetry::FormatPath(req.replace(1).path()),
            "/routes/route[destination=nic-9][qp-mask=1][qp-value=0][traffic-class=3]/config");
  EXPECT_EQ(telemetry::FormatPath(req.replace(2).path()),
            "/routes/route[destination=nic-9][qp-mask=1][qp-value=1][traffic-class=3]/config");
  EXPECT_EQ(req.replace(2).val().json_ietf_val(),
            R"({"destination":"nic-9","traffic-class":3,"qp-mask":1,"qp-value":1,)"
            R"("prefix":"198.18.1.9/32","color":102,"backup-color":101,"job-id":"job-a"})");
  v1::DeviceState dev;
  dev.set_device("leaf-0");
  Status st = ApplySetRequest(req, &dev);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(Same(dev, canon)) << dev.DebugString();

  // Get answers every part; the driver decodes the same state.
  ::gnmi::GetResponse resp;
  ASSERT_TRUE(EncodeGetResponse(MakeGetRequest(kAllParts, "leaf-0"), dev, 1, &resp).ok());
  v1::DeviceState back;
  back.set_device("leaf-0");
  st = DecodeGetResponse(resp, &back);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(Same(back, canon)) << back.DebugString();
  EXPECT_EQ(DiffParts(back, want), 0u);

  // A recolor of one part replaces only that part.
  v1::DeviceState recolor = want;
  recolor.mutable_routes(0)->set_color(104);  // Part 1/1.
  req = EncodeSetRequest(&dev, recolor, Mask(Part::kRoutes), "leaf-0");
  EXPECT_EQ(req.delete__size(), 0);
  ASSERT_EQ(req.replace_size(), 1);
  EXPECT_EQ(telemetry::FormatPath(req.replace(0).path()),
            "/routes/route[destination=nic-9][qp-mask=1][qp-value=1][traffic-class=3]/config");
  ASSERT_TRUE(ApplySetRequest(req, &dev).ok());
  EXPECT_EQ(DiffParts(dev, recolor), 0u);

  // Dropping a part deletes exactly it.
  v1::DeviceState fewer = recolor;
  fewer.mutable_routes()->DeleteSubrange(2, 1);  // Part 1/0.
  req = EncodeSetRequest(&dev, fewer, Mask(Part::kRoutes), "leaf-0");
  EXPECT_EQ(req.replace_size(), 0);
  ASSERT_EQ(req.delete__size(), 1);
  EXPECT_EQ(telemetry::FormatPath(req.delete_(0)),
            "/routes/route[destination=nic-9][qp-mask=1][qp-value=0][traffic-class=3]");
  ASSERT_TRUE(ApplySetRequest(req, &dev).ok());
  ASSERT_EQ(dev.routes_size(), 2);
  EXPECT_EQ(dev.routes(0).qp_mask(), 0u);
  EXPECT_EQ(dev.routes(1).qp_value(), 1u);
  EXPECT_EQ(dev.routes(1).color(), 104u);
}

TEST(GnmiConfig, RoutePathWithoutQpKeysNamesTheUnsplitRoute) {
  v1::DeviceState s = Canonical(SplitState());
  // Get: the pre-split path answers only the unsplit route; qp keys "*" every part.
  ::gnmi::GetRequest get;
  get.set_encoding(::gnmi::JSON_IETF);
  *get.add_path() = P("loom:/routes/route[destination=nic-9][traffic-class=3]");
  ::gnmi::GetResponse resp;
  ASSERT_TRUE(EncodeGetResponse(get, s, 0, &resp).ok());
  ASSERT_EQ(resp.notification(0).update_size(), 1);
  EXPECT_NE(resp.notification(0).update(0).val().json_ietf_val().find(R"("color":103)"),
            std::string::npos);
  *get.mutable_path(0) =
      P("loom:/routes/route[destination=nic-9][traffic-class=3][qp-mask=*][qp-value=*]");
  ASSERT_TRUE(EncodeGetResponse(get, s, 0, &resp).ok());
  EXPECT_EQ(resp.notification(0).update_size(), 3);
  *get.mutable_path(0) =
      P("loom:/routes/route[destination=nic-9][traffic-class=3][qp-mask=1][qp-value=1]");
  ASSERT_TRUE(EncodeGetResponse(get, s, 0, &resp).ok());
  EXPECT_EQ(resp.notification(0).update_size(), 1);
  *get.mutable_path(0) =
      P("loom:/routes/route[destination=nic-9][traffic-class=3][qp-mask=3][qp-value=1]");
  EXPECT_EQ(EncodeGetResponse(get, s, 0, &resp).code(), StatusCode::kNotFound);

  // Delete of the pre-split path removes only the unsplit route.
  ::gnmi::SetRequest del;
  *del.add_delete_() = P("loom:/routes/route[destination=nic-9][traffic-class=3]");
  ASSERT_TRUE(ApplySetRequest(del, &s).ok());
  ASSERT_EQ(s.routes_size(), 2);
  EXPECT_EQ(s.routes(0).qp_mask(), 1u);
  EXPECT_EQ(s.routes(1).qp_mask(), 1u);
  // Replace of the pre-split path writes the unsplit route (a pre-split client).
  ASSERT_TRUE(
      ApplySetRequest(ReplaceReq("loom:/routes/route[destination=nic-9][traffic-class=3]/config",
                                 R"({"color":7})"),
                      &s)
          .ok());
  ASSERT_EQ(s.routes_size(), 3);
  EXPECT_EQ(s.routes(0).qp_mask(), 0u);
  EXPECT_EQ(s.routes(0).color(), 7u);
  // Wildcards: every part of the destination.
  *del.mutable_delete_(0) =
      P("loom:/routes/route[destination=nic-9][traffic-class=*][qp-mask=*][qp-value=*]");
  ASSERT_TRUE(ApplySetRequest(del, &s).ok());
  EXPECT_EQ(s.routes_size(), 0);
  // An element without keys still addresses every route.
  s = Canonical(SplitState());
  *del.mutable_delete_(0) = P("loom:/routes/route");
  ASSERT_TRUE(ApplySetRequest(del, &s).ok());
  EXPECT_EQ(s.routes_size(), 0);
}

TEST(GnmiConfig, QpValueOutsideMaskIsRejectedNamingTheRoute) {
  v1::DeviceState s = SplitState();
  s.mutable_routes(0)->set_qp_value(2);  // Mask 1.
  Status st = ValidatePart(s, Part::kRoutes);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "route \"nic-9\" tc 3 qp 2/1: qp-value 2 has bits outside qp-mask 1");
  EXPECT_EQ(ValidateState(s).code(), StatusCode::kInvalidArgument);
  // Same key (destination, class, mask, value), different content: a conflict.
  v1::DeviceState dup = SplitState();
  *dup.add_routes() = dup.routes(0);
  dup.mutable_routes(3)->set_color(105);
  st = ValidatePart(dup, Part::kRoutes);
  EXPECT_NE(st.message().find("route \"nic-9\" tc 3 qp 1/1: listed twice"), std::string::npos)
      << st.message();
}

// Every validation rule, as a Set the target must reject with
// INVALID_ARGUMENT (and leave the state unchanged).
struct BadSet {
  const char* name;
  const char* path;
  const char* json;
  const char* reason;  // Substring of the error message.
};

class RejectsBadSet : public ::testing::TestWithParam<BadSet> {};

TEST_P(RejectsBadSet, WithInvalidArgumentAndNoChange) {
  const BadSet& b = GetParam();
  v1::DeviceState s = Canonical(FullState());
  v1::DeviceState before = s;
  ::gnmi::SetRequest req = ReplaceReq(b.path, b.json);
  // A valid operation in the same transaction must not be applied either.
  auto* ok = req.add_update();
  *ok->mutable_path() = P("loom:/alb/groups/group[name=fresh]/config");
  ok->mutable_val()->set_json_ietf_val(R"({"buckets":["spine-0"]})");
  CodecLimits limits;
  limits.max_alb_buckets = 8;
  Status st = ApplySetRequest(req, &s, limits);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find(b.reason), std::string::npos) << st.message();
  EXPECT_TRUE(Same(s, before));
}

INSTANTIATE_TEST_SUITE_P(
    GnmiConfig, RejectsBadSet,
    ::testing::Values(
        BadSet{"WrongOrigin", "openconfig:/dlb/config", R"({"mode":"flowlet"})", "origin"},
        BadSet{"UnknownContainer", "loom:/ecmp/config", "{}", "unknown path"},
        BadSet{"LeafPath", "loom:/dlb/config/mode", R"({"mode":"flowlet"})", "leaves"},
        BadSet{"MissingKey", "loom:/alb/groups/group/config", R"({"buckets":["a"]})", "every key"},
        BadSet{"WildcardKey", "loom:/alb/groups/group[name=*]/config", R"({"buckets":["a"]})",
               "every key"},
        BadSet{"UnknownKey", "loom:/alb/groups/group[id=g]/config", "{}", "unknown key"},
        BadSet{"KeyOnContainer", "loom:/alb[name=x]/groups/group[name=g]/config", "{}",
               "has no keys"},
        BadSet{"NotJson", "loom:/dlb/config", "{mode: flowlet", "not a JSON object"},
        BadSet{"JsonNotObject", "loom:/dlb/config", "[1,2]", "not a JSON object"},
        BadSet{"JsonTrailingGarbage", "loom:/dlb/config", R"({"mode":"flowlet"} x)",
               "not a JSON object"},
        BadSet{"JsonTrailingComma", "loom:/dlb/config", R"({"mode":"flowlet",})",
               "not a JSON object"},
        BadSet{"JsonDuplicateMember", "loom:/dlb/config", R"({"mode":"flowlet","mode":"static"})",
               "not a JSON object"},
        BadSet{"JsonSingleQuotes", "loom:/dlb/config", "{'mode':'flowlet'}", "not a JSON object"},
        BadSet{"JsonBadEscape", "loom:/dlb/config", R"({"mode":"flow\qlet"})", "not a JSON object"},
        BadSet{"JsonLoneSurrogate", "loom:/alb/groups/group[name=g]/config",
               R"({"buckets":["\ud800"]})", "not a JSON object"},
        BadSet{"JsonInvalidUtf8", "loom:/alb/groups/group[name=g]/config",
               "{\"buckets\":[\"a\xc3\x28\"]}", "not a JSON object"},
        BadSet{"JsonOverlongUtf8", "loom:/alb/groups/group[name=g]/config",
               "{\"buckets\":[\"\xc0\xaf\"]}", "not a JSON object"},
        BadSet{"JsonRawControlChar", "loom:/alb/groups/group[name=g]/config",
               "{\"buckets\":[\"a\tb\"]}", "not a JSON object"},
        BadSet{"JsonLeadingZero", "loom:/dlb/config",
               R"({"mode":"flowlet","load-weight-percent":07})", "not a JSON object"},
        BadSet{"JsonNumberOverflow", "loom:/dlb/config",
               R"({"mode":"flowlet","load-weight-percent":1e999})", "not a JSON object"},
        BadSet{"JsonNullMember", "loom:/dlb/config", R"({"mode":null})", "expected a string"},
        BadSet{"UnknownMember", "loom:/dlb/config", R"({"mode":"flowlet","colour":1})",
               "unknown member \"colour\""},
        BadSet{"DlbBadMode", "loom:/dlb/config", R"({"mode":"random"})", "random"},
        BadSet{"DlbMissingMode", "loom:/dlb/config", R"({"load-weight-percent":5})", "missing"},
        BadSet{"DlbInactivityTooLong", "loom:/dlb/config",
               R"({"mode":"flowlet","inactivity-interval-ns":"5000000000"})",
               "inactivity-interval-ns"},
        BadSet{"DlbInactivityNotNumber", "loom:/dlb/config",
               R"({"mode":"flowlet","inactivity-interval-ns":"soon"})", "64-bit"},
        BadSet{"DlbLoadWeight", "loom:/dlb/config",
               R"({"mode":"flowlet","load-weight-percent":101})", "load-weight-percent"},
        BadSet{"DlbLoadWeightFraction", "loom:/dlb/config",
               R"({"mode":"flowlet","load-weight-percent":1.5})", "integer"},
        BadSet{"DlbLoadWeightNegative", "loom:/dlb/config",
               R"({"mode":"flowlet","load-weight-percent":-1})", "integer"},
        BadSet{"DlbThresholdCount", "loom:/dlb/config",
               R"({"mode":"flowlet","load-thresholds-percent":[10,20]})", "need 0 or 7"},
        BadSet{"DlbThresholdOrder", "loom:/dlb/config",
               R"({"mode":"flowlet","load-thresholds-percent":[10,20,30,30,50,60,70]})",
               "ascending"},
        BadSet{"DlbThresholdAbove100", "loom:/dlb/config",
               R"({"mode":"flowlet","load-thresholds-percent":[10,20,30,40,50,60,170]})",
               "above 100"},
        BadSet{"DlbQueueOrder", "loom:/dlb/config",
               R"({"mode":"flowlet","queue-thresholds-bytes":["7","6","5","4","3","2","1"]})",
               "ascending"},
        BadSet{"AlbNoBuckets", "loom:/alb/groups/group[name=g]/config", R"({"buckets":[]})",
               "need 1..8"},
        BadSet{"AlbTooManyBuckets", "loom:/alb/groups/group[name=g]/config",
               R"({"buckets":["a","a","a","a","a","a","a","a","a"]})", "need 1..8"},
        BadSet{"AlbEmptyMember", "loom:/alb/groups/group[name=g]/config", R"({"buckets":["a",""]})",
               "bucket 1"},
        BadSet{"AlbBucketsNotStrings", "loom:/alb/groups/group[name=g]/config",
               R"({"buckets":[1,2]})", "list of strings"},
        BadSet{"AlbNameMismatch", "loom:/alb/groups/group[name=g]/config",
               R"({"name":"h","buckets":["a"]})", "differs from the path key"},
        BadSet{"WeightZero", "loom:/glb/destinations/destination[name=d]/config",
               R"({"weights":{"spine-0":0}})", "outside 1..65535"},
        BadSet{"WeightTooBig", "loom:/glb/destinations/destination[name=d]/config",
               R"({"weights":{"spine-0":70000}})", "outside 1..65535"},
        BadSet{"WeightsEmpty", "loom:/glb/destinations/destination[name=d]/config",
               R"({"weights":{}})", "empty"},
        BadSet{"WeightNotNumber", "loom:/glb/destinations/destination[name=d]/config",
               R"({"weights":{"spine-0":"x"}})", "not an integer"},
        BadSet{"ColorZero", "loom:/colors/color[id=0]/config", R"({"next-hops":[]})", "color id"},
        BadSet{"ColorIdNotNumber", "loom:/colors/color[id=red]/config", R"({"next-hops":[]})",
               "color id"},
        BadSet{"ColorDuplicateHop", "loom:/colors/color[id=5]/config", R"({"next-hops":["a","a"]})",
               "duplicate"},
        BadSet{"RouteNoColor", "loom:/routes/route[destination=n][traffic-class=1]/config",
               R"({"color":0})", "color must be"},
        BadSet{"RouteBackupSame", "loom:/routes/route[destination=n][traffic-class=1]/config",
               R"({"color":4,"backup-color":4})", "backup-color equals"},
        BadSet{"RouteClass", "loom:/routes/route[destination=n][traffic-class=9]/config",
               R"({"color":4})", "traffic-class above 7"},
        BadSet{"RoutePrefix", "loom:/routes/route[destination=n][traffic-class=1]/config",
               R"({"color":4,"prefix":"10.0.0.300/32"})", "not an IP prefix"},
        BadSet{"RoutePrefixLength", "loom:/routes/route[destination=n][traffic-class=1]/config",
               R"({"color":4,"prefix":"10.0.0.1/33"})", "not an IP prefix"},
        BadSet{"RouteQpValueOutsideMask",
               "loom:/routes/route[destination=n][traffic-class=1][qp-mask=3][qp-value=4]/config",
               R"({"color":4})", "route \"n\" tc 1 qp 4/3: qp-value 4 has bits outside qp-mask 3"},
        BadSet{"RouteQpMask24Bit",
               "loom:/routes/route[destination=n][traffic-class=1][qp-mask=16777216]"
               "[qp-value=0]/config",
               R"({"color":4})", "24-bit"},
        BadSet{"RouteQpKeyNotNumber",
               "loom:/routes/route[destination=n][traffic-class=1][qp-mask=odd][qp-value=1]/config",
               R"({"color":4})", "qp-mask \"odd\""},
        BadSet{"RouteQpLeafDiffersFromKey",
               "loom:/routes/route[destination=n][traffic-class=1]/config",
               R"({"color":4,"qp-mask":1,"qp-value":1})", "qp-mask: differs from the path key"},
        BadSet{"SprayClass", "loom:/spray/rules/rule[traffic-class=8][qp-first=0]/config", "{}",
               "traffic-class above 7"},
        BadSet{"SprayRange", "loom:/spray/rules/rule[traffic-class=3][qp-first=10]/config",
               R"({"qp-last":5})", "qp-first above qp-last"},
        BadSet{"SprayQp24Bit", "loom:/spray/rules/rule[traffic-class=3][qp-first=0]/config",
               R"({"qp-last":16777216})", "24-bit"},
        BadSet{"ThresholdPriority",
               "loom:/qos/thresholds/threshold[interface=ALL][priority=8]/config", "{}",
               "priority above 7"},
        BadSet{"ThresholdKminKmax",
               "loom:/qos/thresholds/threshold[interface=ALL][priority=3]/config",
               R"({"ecn-kmin-bytes":"10","ecn-kmax-bytes":"5"})", "ecn-kmin-bytes above"},
        BadSet{"ThresholdPmax", "loom:/qos/thresholds/threshold[interface=ALL][priority=3]/config",
               R"({"ecn-pmax-percent":101})", "ecn-pmax-percent"},
        BadSet{"ThresholdXonXoff",
               "loom:/qos/thresholds/threshold[interface=Ethernet0][priority=3]/config",
               R"({"pfc-xoff-bytes":"10","pfc-xon-bytes":"20"})", "pfc-xon-bytes above"}),
    [](const ::testing::TestParamInfo<BadSet>& i) { return std::string(i.param.name); });

// The JSON reader accepts what RFC 8259 allows: whitespace, escapes
// (including surrogate pairs), UTF-8, exponents, and members of other types
// only where the schema does not look (unknown members are still rejected).
TEST(GnmiConfig, JsonValuesDecodeAsRfc8259Says) {
  v1::DeviceState s;
  ::gnmi::SetRequest req = ReplaceReq(
      "loom:/alb/groups/group[name=x]/config",
      " {\n\t\"name\" : \"g\\u00e9\", \"buckets\":[\"sp\\u0069ne-0\", \"\\ud83d\\ude00\", "
      "\"caf\xc3\xa9\", \"a\\/b\\\\c\\\"\"]\r\n} ");
  req.mutable_replace(0)->mutable_path()->mutable_elem(2)->mutable_key()->at("name") = "g\xc3\xa9";
  auto* d = req.add_replace();
  *d->mutable_path() = P("loom:/dlb/config");
  d->mutable_val()->set_json_ietf_val(
      R"({"loom:mode":"flowlet","load-weight-percent":5e1,"inactivity-interval-ns":"256000"})");
  Status st = ApplySetRequest(req, &s);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(s.alb_tables_size(), 1);
  EXPECT_EQ(s.alb_tables(0).group(), "g\xc3\xa9");
  ASSERT_EQ(s.alb_tables(0).buckets_size(), 4);
  EXPECT_EQ(s.alb_tables(0).buckets(0), "spine-0");
  EXPECT_EQ(s.alb_tables(0).buckets(1), "\xf0\x9f\x98\x80");
  EXPECT_EQ(s.alb_tables(0).buckets(2), "caf\xc3\xa9");
  EXPECT_EQ(s.alb_tables(0).buckets(3), "a/b\\c\"");
  EXPECT_EQ(s.dlb().mode(), v1::DLB_MODE_FLOWLET);
  EXPECT_EQ(s.dlb().load_weight_percent(), 50u);
  EXPECT_EQ(s.dlb().inactivity_interval_ns(), 256000u);
  // What the codec writes, it reads back (escapes of control characters too).
  v1::DeviceState t;
  auto* a = t.add_alb_tables();
  a->set_group("g");
  a->add_buckets(std::string("tab\there \"q\" \x01 end"));
  ::gnmi::SetRequest back = EncodeSetRequest(nullptr, t, Mask(Part::kAlbTables), "leaf-0");
  v1::DeviceState u;
  st = ApplySetRequest(back, &u);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(u.alb_tables_size(), 1);
  EXPECT_EQ(u.alb_tables(0).buckets(0), a->buckets(0));
}

TEST(GnmiConfig, JsonNestingIsBounded) {
  v1::DeviceState s;
  const std::string ok =
      R"({"mode":"flowlet","x":)" + std::string(40, '[') + std::string(40, ']') + "}";
  Status st = ApplySetRequest(ReplaceReq("loom:/dlb/config", ok), &s);
  EXPECT_NE(st.message().find("unknown member \"x\""), std::string::npos) << st.message();
  const std::string deep =
      R"({"mode":"flowlet","x":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
  st = ApplySetRequest(ReplaceReq("loom:/dlb/config", deep), &s);
  EXPECT_NE(st.message().find("not a JSON object"), std::string::npos) << st.message();
}

TEST(GnmiConfig, NonJsonValueRejected) {
  v1::DeviceState s;
  ::gnmi::SetRequest req;
  auto* u = req.add_replace();
  *u->mutable_path() = P("loom:/dlb/config");
  u->mutable_val()->set_string_val("flowlet");
  Status st = ApplySetRequest(req, &s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("json_ietf_val"), std::string::npos);
}

TEST(GnmiConfig, ReplaceOfRootRejectedAndDeleteOfLeafRejected) {
  v1::DeviceState s;
  EXPECT_EQ(ApplySetRequest(ReplaceReq("loom:/", "{}"), &s).code(), StatusCode::kInvalidArgument);
  ::gnmi::SetRequest del;
  *del.add_delete_() = P("loom:/dlb/config/mode");
  EXPECT_EQ(ApplySetRequest(del, &s).code(), StatusCode::kInvalidArgument);
}

TEST(GnmiConfig, ValidatePartMatchesSetRules) {
  v1::DeviceState s = FullState();
  EXPECT_TRUE(ValidateState(s).ok());
  auto bad = [](auto mutate, Part part) {
    v1::DeviceState x = FullState();
    mutate(&x);
    Status st = ValidatePart(x, part);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << PartName(part);
    EXPECT_EQ(ValidateState(x).code(), StatusCode::kInvalidArgument);
  };
  bad([](v1::DeviceState* x) { x->mutable_colors(0)->set_color(0); }, Part::kColors);
  bad([](v1::DeviceState* x) { x->mutable_routes(0)->set_backup_color(101); }, Part::kRoutes);
  bad([](v1::DeviceState* x) { (*x->mutable_weights(0)->mutable_weights())["z"] = 0; },
      Part::kWeights);
  bad([](v1::DeviceState* x) { x->mutable_dlb()->set_load_weight_percent(200); }, Part::kDlb);
  bad([](v1::DeviceState* x) { x->mutable_dlb()->set_mode(v1::DLB_MODE_UNSPECIFIED); }, Part::kDlb);
  bad([](v1::DeviceState* x) { x->mutable_alb_tables(0)->clear_buckets(); }, Part::kAlbTables);
  bad([](v1::DeviceState* x) { x->mutable_spray_rules(0)->set_qp_last(1); }, Part::kSprayRules);
  bad([](v1::DeviceState* x) { x->mutable_thresholds(0)->set_interface("ALL"); },
      Part::kThresholds);
}

TEST(GnmiConfig, GarbageNeverCrashes) {
  std::mt19937 rng(1);
  const std::string alphabet = "{}[]\":,0123456789abcdefmodeloom-\\ ";
  for (int i = 0; i < 2000; ++i) {
    std::string json;
    int n = static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) json.push_back(alphabet[rng() % alphabet.size()]);
    v1::DeviceState s = FullState();
    for (const char* path : {"loom:/dlb/config", "loom:/alb/groups/group[name=g]/config",
                             "loom:/glb/destinations/destination[name=d]/config"}) {
      (void)ApplySetRequest(ReplaceReq(path, json), &s);
    }
  }
  SUCCEED();
}

}  // namespace
}  // namespace loom::southbound::gnmi
