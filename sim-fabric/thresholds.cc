#include "sim-fabric/thresholds.h"

#include <cstdio>

namespace loom::sim {

double PfcHeadroomBytes(double port_bps, double cable_m, double response_ns, double mtu_bytes) {
  const double bytes_per_ns = port_bps / 8e9;
  const double cable_ns = cable_m * 5.0;  // ~5 ns per meter of fiber
  return 2 * bytes_per_ns * cable_ns + bytes_per_ns * response_ns + 2 * mtu_bytes;
}

BufferThresholds ComputeBufferThresholds(const BufferSwitch& sw, double kmin_bytes) {
  BufferThresholds t;
  t.headroom_bytes = sw.headroom_bytes > 0
                         ? sw.headroom_bytes
                         : PfcHeadroomBytes(sw.port_bps, sw.cable_m, sw.response_ns, sw.mtu_bytes);
  const double queues = static_cast<double>(sw.priorities) * sw.ports;
  const double free = sw.buffer_bytes - queues * t.headroom_bytes;
  t.static_pfc_max_bytes = free / queues;
  t.dynamic_pfc_empty_bytes = sw.beta * free / sw.priorities;
  t.ecn_max_bytes_dynamic = sw.beta * free / (sw.priorities * (sw.ports * sw.beta + 1));
  t.paper_settings_ok = kmin_bytes < t.static_pfc_max_bytes && kmin_bytes < t.ecn_max_bytes_dynamic;
  return t;
}

std::string BufferThresholds::Explain() const {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "headroom %.1f KB/port/prio; static PFC threshold <= %.2f KB; dynamic PFC "
                "threshold (empty buffer) %.1f KB; ECN must start below %.2f KB",
                headroom_bytes / 1e3, static_pfc_max_bytes / 1e3, dynamic_pfc_empty_bytes / 1e3,
                ecn_max_bytes_dynamic / 1e3);
  return buf;
}

}  // namespace loom::sim
