// ECN-before-PFC buffer threshold calculator.
//
// Pure functions after the buffer-settings analysis of the DCQCN paper (Zhu et
// al., SIGCOMM 2015, section "Buffer settings"): a switch with a shared buffer
// B, n ports and 8 priorities must reserve PFC headroom t_flight per port and
// priority; what is left bounds the PFC threshold, and ECN marking (Kmin) must
// start below the PFC threshold so that DCQCN reacts before PFC fires.
//
//   static PFC threshold (upper bound):  t_PFC <= (B - 8 n t_flight) / (8 n)
//   dynamic threshold (fraction beta of the free shared buffer, s bytes in use):
//                                        t_PFC  = beta (B - 8 n t_flight - s) / 8
//   worst case for ECN-before-PFC: all 8n ingress queues sit at t_ECN, s = 8 n t_ECN:
//                                        t_ECN < beta (B - 8 n t_flight) / (8 (n beta + 1))
//
// Headroom (t_flight) for one port/priority: what arrives after the pause is sent
// and before the upstream stops: 2 x bandwidth-delay product of the cable plus the
// upstream's response time and two maximum-size frames in flight.
#ifndef LOOM_SIM_FABRIC_THRESHOLDS_H_
#define LOOM_SIM_FABRIC_THRESHOLDS_H_

#include <string>

namespace loom::sim {

struct BufferSwitch {
  double buffer_bytes = 12e6;  // shared buffer B
  int ports = 32;              // n
  int priorities = 8;
  double port_bps = 40e9;
  double headroom_bytes = 0;  // t_flight; 0 = compute from the cable
  double cable_m = 300;       // for the headroom computation
  double mtu_bytes = 1500;
  double response_ns = 3840;  // upstream reaction time (bounded by 802.1Qbb)
  double beta = 8;            // dynamic threshold factor
};

struct BufferThresholds {
  double headroom_bytes = 0;           // t_flight used
  double static_pfc_max_bytes = 0;     // (B - 8 n t_flight) / (8 n)
  double dynamic_pfc_empty_bytes = 0;  // beta (B - 8 n t_flight) / 8, with s = 0
  double ecn_max_bytes_dynamic = 0;    // bound on t_ECN with dynamic thresholds
  bool paper_settings_ok = false;      // Kmin 5KB < both bounds
  std::string Explain() const;
};

// Headroom per port and priority for a link: 2 x (rate x cable delay) +
// rate x response time + 2 x MTU.
double PfcHeadroomBytes(double port_bps, double cable_m, double response_ns, double mtu_bytes);

BufferThresholds ComputeBufferThresholds(const BufferSwitch& sw, double kmin_bytes = 5e3);

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_THRESHOLDS_H_
