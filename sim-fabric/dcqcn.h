// DCQCN reaction point (sender NIC, per QP) and its parameters.
//
// Two published variants, every rule a parameter (DcqcnParams):
//
// The SIGCOMM'15 paper (Zhu et al., "Congestion Control for Large-Scale RDMA
// Deployments"), event by event (clamp_target_rate, decrease_interval_ns 0,
// alpha_per_interval false, b_bytes > 0, hyper_increase_scaled):
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
//                        (so F-1 halvings toward RT happen before additive increase.)
//
// The Mellanox ("mlx") model of the HPCC packet-level simulator
// (alibaba-edu/High-Precision-Congestion-Control, simulation/src/point-to-point/model/
// rdma-hw.cc: cnp_received_mlx, UpdateAlphaMlx, CheckRateDecreaseMlx,
// RateIncEventTimerMlx), with decrease_interval_ns > 0 and alpha_per_interval:
//
//   A CNP only sets two "CNP arrived" bits. The first CNP of the QP sets alpha to 1,
//   RC = RT = first_cnp_rate_fraction x RC, and starts the alpha and decrease clocks.
//   Every K ns:          alpha <- (1-g)*alpha + g if a CNP arrived since the last tick,
//                        else (1-g)*alpha.
//   Every D ns (D = decrease_interval_ns, 1 ns after the alpha tick; after a rate timer
//   event due at the same instant): if a CNP arrived
//                        since the last check: RT <- RC unless clamp_target_rate is off
//                        and RC was not increased since the last cut; RC <- RC*(1-alpha/2);
//                        timer stage = 0; the rate timer restarts.
//   Timer every T ns:    stage < F -> fast recovery; stage == F -> additive increase;
//                        stage > F -> hyper increase RT += R_HAI (not scaled); then
//                        stage += 1. No byte counter (b_bytes = 0).
//
// In both: RT and RC are capped at line rate; RC never goes below min_rate_bps.
// Vendor-firmware extras: a CNP within min_cut_interval_ns of the last cut is ignored
// (rp_cnp_ignored) and a cut never takes RC below (1 - max_cut_fraction) * RC.
//
// Role: pure state machine, no I/O. Triggered by the engine (Fabric) when a CNP
// arrives, when bytes are sent and at step boundaries (AdvanceTo fires every timer
// due up to that instant, in time order). Single-threaded, owned by one QP.
#ifndef LOOM_SIM_FABRIC_DCQCN_H_
#define LOOM_SIM_FABRIC_DCQCN_H_

#include <cstdint>
#include <memory>
#include <string>

#include "common/clock.h"
#include "sim-fabric/congestion_control.h"

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
  // Which published rules (see the top of this file).
  // A cut sets RT <- RC every time (true: the paper, ns-3 CLAMP_TARGET_RATE 1); false: only
  // when RC was increased since the previous cut (ns-3 CLAMP_TARGET_RATE 0).
  bool clamp_target_rate = true;
  // 0: every CNP cuts at once (the paper). > 0: CNPs are collected and one cut is made per
  // interval in which any arrived (ns-3 RATE_DECREASE_INTERVAL).
  TimeNs decrease_interval_ns = 0;
  // false: alpha rises at each cut and decays every K without one (the paper); true: every
  // K, alpha rises if a CNP arrived in that period, else decays (ns-3 ALPHA_RESUME_INTERVAL
  // = K), and the alpha clock starts at the QP's first CNP.
  bool alpha_per_interval = false;
  // Hyper increase adds i x R_HAI with i = min(t, b) - F (the paper); false: R_HAI (ns-3).
  bool hyper_increase_scaled = true;
  // RC and RT on the QP's first CNP, as a fraction of RC (ns-3 RateOnFirstCnp; only with
  // alpha_per_interval, where the first CNP also sets alpha to 1).
  double first_cnp_rate_fraction = 1.0;
};

// The SIGCOMM'15 paper values: F=5, T=55us, B=10MB, K=55us, g=1/256, R_AI=40Mbps, N=50us.
// The paper does not fix R_HAI; we use 10 x R_AI.
DcqcnParams PaperDcqcnParams();
// A vendor-firmware-like set (shared/reference/dcqcn.md): F=1, T=300us, B=2MB, g=1/256,
// R_AI=5Mbps, R_HAI=50Mbps, min rate 10Mbps, a cut never below 50 % of RC, NP interval
// 4us; the NIC model's rules (one collected cut per 4us, target not clamped unless RC rose
// since the last cut, alpha per 55us interval).
DcqcnParams VendorDcqcnParams();
// The HPCC packet-level simulator's "dcqcn" configuration (its mlx NIC model, the
// reference runs in shared/reference/packet-level/cfg_*_dcqcn.txt): RP_TIMER 300 us,
// FAST_RECOVERY_TIMES 1, RATE_AI 20 Mb/s, RATE_HAI 200 Mb/s, MIN_RATE 1000 Mb/s,
// EWMA_GAIN 1/256, ALPHA_RESUME_INTERVAL 1 us, RATE_DECREASE_INTERVAL 4 us,
// CLAMP_TARGET_RATE 0, RateOnFirstCnp 1.0, no byte counter, and a CNP with the ACK of
// every marked packet (L2_ACK_INTERVAL 1: NP interval 0).
DcqcnParams Ns3MlxDcqcnParams();
// Empty when `p` is usable; else what is wrong with it (a field name and the rule).
std::string DcqcnParamsError(const DcqcnParams& p);
// "paper", "ns3-mlx" or "vendor"; false on an unknown name.
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
    if (p_.b_bytes <= 0) return;
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
  TimeNs next_event_ns() const {
    TimeNs n = next_t_ < next_k_ ? next_t_ : next_k_;
    return n < next_d_ ? n : next_d_;
  }
  // The next instant RC can change without a new CNP (the rate-increase timer T, or a
  // collected CNP's cut), and the bytes until the next byte-counter (B) event: the
  // fast-forward horizon.
  TimeNs next_timer_ns() const { return dec_flag_ && next_d_ < next_t_ ? next_d_ : next_t_; }
  double bytes_to_byte_event() const { return p_.b_bytes > 0 ? p_.b_bytes - byte_acc_ : 1e300; }
  // A collected CNP has not been acted on yet (decrease_interval_ns > 0).
  bool cut_pending() const { return dec_flag_; }
  const DcqcnParams& params() const { return p_; }

 private:
  void Increase();
  void ByteCounterEvents();
  // One rate cut: a CNP at once, or the collected ones at a decrease check.
  void Cut(TimeNs now);
  // Increase() is a no-op here (RT + anything is capped at line, (RT + RC) / 2 == line).
  bool AtLineRate() const { return rc_ == line_ && rt_ == line_ && p_.min_rate_bps <= line_; }

  // State first (hot in the engine's step loop), parameters after.
  double rc_ = 0, byte_acc_ = 0;
  TimeNs next_t_ = 0, next_k_ = 0;
  double line_ = 0, rt_ = 0, alpha_ = 1;
  int t_ = 0, b_ = 0;
  TimeNs last_cut_ = INT64_MIN / 2;
  // Collected-CNP model: the next decrease check, the "CNP arrived" bits, the first CNP.
  TimeNs next_d_ = INT64_MAX;
  bool dec_flag_ = false, alpha_flag_ = false, seen_cnp_ = false;
  DcqcnParams p_;
};

// DCQCN behind the congestion-control seam (congestion_control.h).

// Reaction point: a DcqcnRp; CNPs are the feedback it acts on.
class DcqcnRateControl final : public RateControl {
 public:
  DcqcnRateControl(const DcqcnParams& p, double line_bps, TimeNs now) : rp_(p, line_bps, now) {}
  void Reset(double line_bps, TimeNs now) override { rp_.Reset(rp_.params(), line_bps, now); }
  void AdvanceTo(TimeNs now) override { rp_.AdvanceTo(now); }
  TimeNs next_event_ns() const override { return rp_.next_event_ns(); }
  void OnBytesSent(double bytes, TimeNs now) override { rp_.OnBytesSent(bytes, now); }
  bool OnFeedback(const CcFeedback& fb, TimeNs now) override {
    return fb.kind == CcFeedback::Kind::kCnp && rp_.OnCnp(now);
  }
  double rate_bps() const override { return rp_.rate_bps(); }
  double line_rate_bps() const override { return rp_.line_rate_bps(); }
  // RC == RT == line rate with no collected CNP pending: increase events only count.
  bool Steady() const override {
    return !(rp_.rate_bps() < rp_.line_rate_bps() || rp_.cut_pending());
  }
  TimeNs next_change_ns() const override { return rp_.next_timer_ns(); }
  double bytes_to_next_change() const override { return rp_.bytes_to_byte_event(); }
  double target_bps() const override { return rp_.target_bps(); }
  double alpha() const override { return rp_.alpha(); }
  DcqcnRp& rp() { return rp_; }

 private:
  DcqcnRp rp_;
};

// Notification point: a CNP when the QP's CNP interval has passed and a packet of what
// arrived was marked (drawn with the fabric's generator), or one CNP per marked packet
// when the interval is 0 (at most 16 per step).
class DcqcnNotificationPoint final : public NotificationPoint {
 public:
  explicit DcqcnNotificationPoint(TimeNs cnp_interval_ns) : interval_(cnp_interval_ns) {}
  bool every_delivery() const override { return false; }
  bool needs_rtt() const override { return false; }
  int OnDelivery(const CcDelivery& d, NpQpState* st, Rng& rng, CcFeedback* out,
                 int max_out) const override;

 private:
  TimeNs interval_;
};

class DcqcnCongestionControl final : public CongestionControl {
 public:
  explicit DcqcnCongestionControl(const DcqcnParams& p) : p_(p), np_(p.cnp_interval_ns) {}
  std::string name() const override { return "dcqcn"; }
  bool enabled() const override { return p_.enabled; }
  std::unique_ptr<RateControl> NewRateControl(double line_bps, TimeNs now) const override {
    return std::make_unique<DcqcnRateControl>(p_, line_bps, now);
  }
  const NotificationPoint& notification_point() const override { return np_; }
  bool Reconfigure(RateControl* rc, TimeNs now) const override;
  const DcqcnParams& params() const { return p_; }

 private:
  DcqcnParams p_;
  DcqcnNotificationPoint np_;
};

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_DCQCN_H_
