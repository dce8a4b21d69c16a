#include "southbound/wire/device_state_util.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <string_view>
#include <tuple>

namespace loom::southbound {

namespace v1 = loom::v1;

namespace {

template <typename F, typename Less>
void SortField(F* field, Less less) {
  std::sort(field->begin(), field->end(), less);
}

std::string Serialize(const google::protobuf::Message& m) { return DeterministicBytes(m); }

}  // namespace

std::string DeterministicBytes(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  m.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

void Canonicalize(v1::DeviceState* s) {
  // An empty DLB profile and none program the same thing.
  if (s->has_dlb() && s->dlb().ByteSizeLong() == 0) s->clear_dlb();
  for (auto& c : *s->mutable_colors())
    std::sort(c.mutable_next_hops()->begin(), c.mutable_next_hops()->end());
  SortField(s->mutable_colors(),
            [](const auto& a, const auto& b) { return a.color() < b.color(); });
  // QP-split routes of one destination and class differ only in qp_mask/qp_value.
  auto route_key = [](const v1::ColoredRoute& r) {
    return std::make_tuple(std::string_view(r.destination()), r.traffic_class(), r.qp_mask(),
                           r.qp_value(), std::string_view(r.job_id()));
  };
  SortField(s->mutable_routes(),
            [&route_key](const auto& a, const auto& b) { return route_key(a) < route_key(b); });
  SortField(s->mutable_weights(),
            [](const auto& a, const auto& b) { return a.destination() < b.destination(); });
  SortField(s->mutable_alb_tables(),
            [](const auto& a, const auto& b) { return a.group() < b.group(); });
  SortField(s->mutable_spray_rules(), [](const auto& a, const auto& b) {
    return std::make_tuple(a.traffic_class(), a.qp_first(), a.qp_last()) <
           std::make_tuple(b.traffic_class(), b.qp_first(), b.qp_last());
  });
  SortField(s->mutable_thresholds(), [](const auto& a, const auto& b) {
    return std::make_tuple(a.interface(), a.priority()) <
           std::make_tuple(b.interface(), b.priority());
  });
  if (s->has_pfc_watchdog()) {
    auto* ifs = s->mutable_pfc_watchdog()->mutable_interfaces();
    std::sort(ifs->begin(), ifs->end());
  }
  for (auto& r : *s->mutable_next_hop_reach()) {
    std::sort(r.mutable_egress()->begin(), r.mutable_egress()->end());
    std::sort(r.mutable_beyond()->begin(), r.mutable_beyond()->end());
  }
  SortField(s->mutable_next_hop_reach(), [](const auto& a, const auto& b) {
    const std::string& ea = a.egress().empty() ? std::string() : a.egress(0);
    const std::string& eb = b.egress().empty() ? std::string() : b.egress(0);
    return std::make_tuple(a.next_hop(), ea) < std::make_tuple(b.next_hop(), eb);
  });
}

std::string ContentKey(const v1::DeviceState& s) {
  v1::DeviceState c = s;
  c.set_generation(0);
  Canonicalize(&c);
  return Serialize(c);
}

bool SameContent(const v1::DeviceState& a, const v1::DeviceState& b) {
  return ContentKey(a) == ContentKey(b);
}

std::vector<std::string> DifferingParts(const v1::DeviceState& a, const v1::DeviceState& b) {
  v1::DeviceState x = a, y = b;
  Canonicalize(&x);
  Canonicalize(&y);
  std::vector<std::string> out;
  auto diff = [&](const char* name, auto get) {
    v1::DeviceState px, py;
    get(x, &px);
    get(y, &py);
    if (Serialize(px) != Serialize(py)) out.push_back(name);
  };
  diff("colors",
       [](const v1::DeviceState& s, v1::DeviceState* o) { *o->mutable_colors() = s.colors(); });
  diff("routes",
       [](const v1::DeviceState& s, v1::DeviceState* o) { *o->mutable_routes() = s.routes(); });
  diff("weights",
       [](const v1::DeviceState& s, v1::DeviceState* o) { *o->mutable_weights() = s.weights(); });
  diff("dlb", [](const v1::DeviceState& s, v1::DeviceState* o) { *o->mutable_dlb() = s.dlb(); });
  diff("alb_tables", [](const v1::DeviceState& s, v1::DeviceState* o) {
    *o->mutable_alb_tables() = s.alb_tables();
  });
  diff("spray_rules", [](const v1::DeviceState& s, v1::DeviceState* o) {
    *o->mutable_spray_rules() = s.spray_rules();
  });
  diff("thresholds", [](const v1::DeviceState& s, v1::DeviceState* o) {
    *o->mutable_thresholds() = s.thresholds();
  });
  diff("pfc_watchdog", [](const v1::DeviceState& s, v1::DeviceState* o) {
    if (s.has_pfc_watchdog()) *o->mutable_pfc_watchdog() = s.pfc_watchdog();
  });
  diff("next_hop_reach", [](const v1::DeviceState& s, v1::DeviceState* o) {
    *o->mutable_next_hop_reach() = s.next_hop_reach();
  });
  return out;
}

}  // namespace loom::southbound
