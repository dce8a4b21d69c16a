// bench_gnmi_codec: CPU cost of the gNMI Set codec steps one device change
// goes through (both ends), for the recolor of bench_wire: a leaf with 8
// colors and 63 colored routes whose colors all change. Thread CPU time, so
// the figures do not depend on other load on the machine.
//
//   bench_gnmi_codec [--routes 63] [--iterations 2000]
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "southbound/gnmi/gnmi_config.h"

namespace {

namespace sg = loom::southbound::gnmi;
namespace v1 = loom::v1;

double CpuUs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

v1::DeviceState Leaf(int routes, int shift) {
  v1::DeviceState s;
  s.set_device("leaf7");
  for (int c = 0; c < 8; ++c) {
    auto* g = s.add_colors();
    g->set_color(65536 + static_cast<uint32_t>(c));
    g->add_next_hops("spine" + std::to_string(c));
  }
  for (int k = 0; k < routes; ++k) {
    auto* r = s.add_routes();
    r->set_destination("nic" + std::to_string(k));
    r->set_prefix("198.18." + std::to_string(k / 256) + "." + std::to_string(k % 256) + "/32");
    const int c = (k + shift) % 8;
    r->set_color(65536 + static_cast<uint32_t>(c));
    r->set_backup_color(65536 + static_cast<uint32_t>((c + 1) % 8));
    r->set_traffic_class(4);
    r->set_job_id("bench");
  }
  return s;
}

void Time(const char* what, int n, const std::function<void()>& fn) {
  fn();  // Warm.
  const double t0 = CpuUs();
  for (int i = 0; i < n; ++i) fn();
  std::printf("  %-52s %8.1f us\n", what, (CpuUs() - t0) / n);
}

}  // namespace

int main(int argc, char** argv) {
  int routes = 63, n = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--routes") routes = std::atoi(argv[i + 1]);
    if (f == "--iterations") n = std::atoi(argv[i + 1]);
  }
  const sg::PartMask parts = sg::Mask(sg::Part::kColors) | sg::Mask(sg::Part::kRoutes);
  const v1::DeviceState before = sg::Canonical(Leaf(routes, 0));
  const v1::DeviceState after = sg::Canonical(Leaf(routes, 1));
  ::gnmi::SetRequest set = sg::EncodeSetRequest(&before, after, parts, "leaf7");
  ::gnmi::GetRequest get = sg::MakeGetRequest(sg::Mask(sg::Part::kRoutes), "leaf7");
  ::gnmi::GetResponse get_resp;
  if (!sg::EncodeGetResponse(get, after, 0, &get_resp).ok()) return 1;
  std::printf("bench_gnmi_codec: %d routes, %d replaces per Set, CPU per call:\n", routes,
              set.replace_size());
  Time("Canonical(desired)", n, [&] { (void)sg::Canonical(Leaf(routes, 1)); });
  Time("ValidateState(desired)", n, [&] { (void)sg::ValidateState(after, parts); });
  Time("DiffParts(known, desired)", n, [&] { (void)sg::DiffParts(before, after, parts); });
  Time("EncodeSetRequest(known -> desired)", n,
       [&] { (void)sg::EncodeSetRequest(&before, after, parts, "leaf7"); });
  Time("ApplySetRequest (target)", n, [&] {
    v1::DeviceState s = before;
    (void)sg::ApplySetRequest(set, &s);
  });
  Time("EncodeGetResponse of /routes (target)", n, [&] {
    ::gnmi::GetResponse r;
    (void)sg::EncodeGetResponse(get, after, 0, &r);
  });
  Time("DecodeGetResponse of /routes", n, [&] {
    v1::DeviceState s;
    (void)sg::DecodeGetResponse(get_resp, &s);
  });
  return 0;
}
