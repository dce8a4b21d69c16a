// DCQCN reaction point (sender NIC, per QP) and its parameters.
//
// Implements the rate control of Zhu et al., "Congestion Control for
// Large-Scale RDMA Deployments" (SIGCOMM 2015), exactly and event by event:
//
//   On a CNP:            RT <- RC; RC <- RC * (1 - alpha/2); alpha <- (1-g)*alpha + g;
//                        t = b = 0; byte counter and both timers restart.
//   Every K ns w/o CNP:  alpha <- (1-g)*alpha.
//   Increase events:     timer every T ns (t += 1), byte counter every B bytes (b += 1).
//                        After incrementing the counter that fired:
//                          max(t,b) <  F            -> fast recovery: RC <- (RT+RC)/2
//                          min(t,b) >  F            -> hyper increase: RT += i*R_HAI,
//                                                      i = min(t,b) - F; RC <- (RT+RC)/2
//                          otherwise                -> additive increase: RT += R_AI;
//                                                      RC <- (RT+RC)/2
//                        (so F-1 halvings toward RT happen before additive increase, as in
//                        the ns-3 DCQCN model whose stage counter is incremented first.)
//   RT and RC are capped at line rate; RC never goes below min_rate_bps.
// Vendor-firmware extras: a CNP within min_cut_interval_ns of the last cut is ignored
// (rp_cnp_ignored) and a cut never takes RC below (1 - max_cut_fraction) * RC.
//
// Role: pure state machine, no I/O. Triggered by the engine (Fabric) when a CNP
// arrives, when bytes are sent and at step boundaries (AdvanceTo fires every timer
// due up to that instant, in time order). Single-threaded, owned by one QP.
#ifndef LOOM_SIM_FABRIC_DCQCN_H_
#define LOOM_SIM_FABRIC_DCQCN_H_

#include <cstdint>
#include <string>

#include "common/clock.h"

namespace loom::sim {

struct DcqcnParams {
  // Reaction point.
  double g = 1.0 / 256;
  TimeNs t_ns = 55 * kNsPerUs;     // rate-increase timer T
  double b_bytes = 10e6;           // byte counter B
  TimeNs k_ns = 55 * kNsPerUs;     // alpha-update timer K
  int f = 5;                       // fast-recovery threshold F
  double rai_bps = 40e6;           // additive increase R_AI
  double rhai_bps = 400e6;         // hyper increase R_HAI
  double min_rate_bps = 10e6;      // floor of RC
  double alpha_init = 1.0;         // alpha at QP creation
  TimeNs min_cut_interval_ns = 0;  // 0: every CNP cuts
  double max_cut_fraction = 1.0;   // 1: no limit; 0.5: a cut never below 50 % of RC
  // Notification point: at most one CNP per QP per interval (0: one per marked packet).
  TimeNs cnp_interval_ns = 50 * kNsPerUs;
  bool enabled = true;  // false: QPs always send at line rate
};

// The SIGCOMM'15 paper values: F=5, T=55us, B=10MB, K=55us, g=1/256, R_AI=40Mbps, N=50us.
// The paper does not fix R_HAI; we use 10 x R_AI.
DcqcnParams PaperDcqcnParams();
// A vendor-firmware-like set: F=1, T=300us, B=2MB, g=1/256, R_AI=5Mbps, R_HAI=50Mbps,
// min rate 10Mbps, at most one cut per 4us, a cut never below 50 % of RC, NP interval 4us.
DcqcnParams VendorDcqcnParams();
// "paper" or "vendor"; false on an unknown name.
bool DcqcnPresetByName(const std::string& name, DcqcnParams* out);

class DcqcnRp {
 public:
  DcqcnRp() = default;
  DcqcnRp(const DcqcnParams& p, double line_rate_bps, TimeNs now) { Reset(p, line_rate_bps, now); }
  // Back to line rate, alpha = alpha_init, timers start at `now`.
  void Reset(const DcqcnParams& p, double line_rate_bps, TimeNs now);
  // Applies new parameters (line rate kept); state is kept, timers re-armed from `now`.
  void SetParams(const DcqcnParams& p, TimeNs now);
  // Fires every timer event due at or before `now`, in time order.
  void AdvanceTo(TimeNs now);
  // A CNP arrives at `now` (call AdvanceTo(now) first). Returns false when ignored.
  bool OnCnp(TimeNs now);
  // `bytes` were sent at `now`; fires byte-counter increase events.
  void OnBytesSent(double bytes, TimeNs /*now*/) {
    byte_acc_ += bytes;
    if (byte_acc_ >= p_.b_bytes) ByteCounterEvents();
  }

  double rate_bps() const { return rc_; }
  double target_bps() const { return rt_; }
  double alpha() const { return alpha_; }
  int timer_count() const { return t_; }
  int byte_count() const { return b_; }
  double line_rate_bps() const { return line_; }
  void set_line_rate_bps(double bps);
  TimeNs next_event_ns() const { return next_t_ < next_k_ ? next_t_ : next_k_; }
  // The next rate-increase timer instant (T), and the bytes until the next byte-counter
  // (B) event: the only events that can change RC without a CNP (fast-forward horizon).
  TimeNs next_timer_ns() const { return next_t_; }
  double bytes_to_byte_event() const { return p_.b_bytes - byte_acc_; }
  const DcqcnParams& params() const { return p_; }

 private:
  void Increase();
  void ByteCounterEvents();
  // Increase() is a no-op here (RT + anything is capped at line, (RT + RC) / 2 == line).
  bool AtLineRate() const { return rc_ == line_ && rt_ == line_ && p_.min_rate_bps <= line_; }

  // State first (hot in the engine's step loop), parameters after.
  double rc_ = 0, byte_acc_ = 0;
  TimeNs next_t_ = 0, next_k_ = 0;
  double line_ = 0, rt_ = 0, alpha_ = 1;
  int t_ = 0, b_ = 0;
  TimeNs last_cut_ = INT64_MIN / 2;
  DcqcnParams p_;
};

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_DCQCN_H_
