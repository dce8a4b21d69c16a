#include "sim-fabric/dcqcn.h"

#include <algorithm>
#include <cmath>

#include "sim-fabric/rng.h"

namespace loom::sim {

DcqcnParams PaperDcqcnParams() { return DcqcnParams{}; }

DcqcnParams Ns3MlxDcqcnParams() {
  // Source: shared/reference/packet-level/cfg_A_dcqcn.txt and cfg_B_dcqcn.txt (the HPCC
  // simulator's run configuration) and rdma-hw.cc (alibaba-edu/High-Precision-Congestion-
  // Control: RateOnFirstCnp default 1.0; ACK per packet with L2_ACK_INTERVAL 1, the CNP bit
  // set on the ACK of a marked packet).
  DcqcnParams p;
  p.f = 1;
  p.t_ns = 300 * kNsPerUs;
  p.b_bytes = 0;
  p.k_ns = 1 * kNsPerUs;
  p.g = 1.0 / 256;
  p.rai_bps = 20e6;
  p.rhai_bps = 200e6;
  p.min_rate_bps = 1e9;
  p.cnp_interval_ns = 0;
  p.clamp_target_rate = false;
  p.decrease_interval_ns = 4 * kNsPerUs;
  p.alpha_per_interval = true;
  p.hyper_increase_scaled = false;
  p.first_cnp_rate_fraction = 1.0;
  return p;
}

DcqcnParams VendorDcqcnParams() {
  // Source: shared/reference/dcqcn.md, "vendor firmware-like parameters (commonly
  // simulated)": F=1, T=300 us, B=2 MB, g=1/256, R_AI=5 Mb/s, R_HAI=50 Mb/s, at most one
  // cut per 4 us, a cut never below 50 % of RC. The event rules are the NIC model's (the
  // firmware the HPCC simulator's mlx model follows): CNPs collected and one cut per 4 us,
  // the target rate not clamped unless RC rose since the last cut, alpha per interval.
  DcqcnParams p;
  p.f = 1;
  p.t_ns = 300 * kNsPerUs;
  p.b_bytes = 2e6;
  p.k_ns = 55 * kNsPerUs;
  p.g = 1.0 / 256;
  p.rai_bps = 5e6;
  p.rhai_bps = 50e6;
  p.min_rate_bps = 10e6;
  p.max_cut_fraction = 0.5;
  p.cnp_interval_ns = 4 * kNsPerUs;
  p.decrease_interval_ns = 4 * kNsPerUs;
  p.clamp_target_rate = false;
  p.alpha_per_interval = true;
  return p;
}

std::string DcqcnParamsError(const DcqcnParams& p) {
  if (p.t_ns <= 0) return "t_ns (rate-increase timer) must be > 0";
  if (p.k_ns <= 0) return "k_ns (alpha interval) must be > 0";
  if (p.b_bytes < 0) return "b_bytes must be >= 0 (0: no byte counter)";
  if (p.f < 0) return "f must be >= 0";
  if (!(p.g > 0 && p.g <= 1)) return "g must be in (0, 1]";
  if (p.rai_bps < 0 || p.rhai_bps < 0) return "rai_bps and rhai_bps must be >= 0";
  if (p.min_rate_bps < 0) return "min_rate_bps must be >= 0";
  if (p.decrease_interval_ns < 0) return "decrease_interval_ns must be >= 0";
  if (p.cnp_interval_ns < 0) return "cnp_interval_ns must be >= 0";
  if (!(p.first_cnp_rate_fraction > 0 && p.first_cnp_rate_fraction <= 1)) {
    return "first_cnp_rate_fraction must be in (0, 1]";
  }
  if (!(p.max_cut_fraction > 0 && p.max_cut_fraction <= 1)) {
    return "max_cut_fraction must be in (0, 1]";
  }
  return "";
}

bool DcqcnPresetByName(const std::string& name, DcqcnParams* out) {
  if (name == "paper") {
    *out = PaperDcqcnParams();
    return true;
  }
  if (name == "ns3-mlx") {
    *out = Ns3MlxDcqcnParams();
    return true;
  }
  if (name == "vendor") {
    *out = VendorDcqcnParams();
    return true;
  }
  return false;
}

namespace {
constexpr TimeNs kNoEvent = INT64_MAX;

// x (1 - g)^n: multiplications for the few ticks of a step (the common case), pow beyond.
double Decayed(double alpha, double g, TimeNs n) {
  if (n <= 16) {
    for (TimeNs i = 0; i < n; ++i) alpha *= 1 - g;
    return alpha;
  }
  return alpha * std::pow(1 - g, static_cast<double>(n));
}
}  // namespace

void DcqcnRp::Reset(const DcqcnParams& p, double line_rate_bps, TimeNs now) {
  p_ = p;
  line_ = line_rate_bps;
  rc_ = rt_ = line_rate_bps;
  alpha_ = p.alpha_init;
  t_ = b_ = 0;
  byte_acc_ = 0;
  next_t_ = now + p.t_ns;
  // With alpha per interval the alpha clock starts at the first CNP.
  next_k_ = p.alpha_per_interval ? kNoEvent : now + p.k_ns;
  next_d_ = kNoEvent;
  dec_flag_ = alpha_flag_ = seen_cnp_ = false;
  last_cut_ = INT64_MIN / 2;
}

void DcqcnRp::SetParams(const DcqcnParams& p, TimeNs now) {
  p_ = p;
  next_t_ = now + p.t_ns;
  next_k_ = p.alpha_per_interval && !seen_cnp_ ? kNoEvent : now + p.k_ns;
  next_d_ = p.decrease_interval_ns > 0 && seen_cnp_ ? now + p.decrease_interval_ns : kNoEvent;
  if (p.decrease_interval_ns <= 0) dec_flag_ = false;
  if (!p.alpha_per_interval) alpha_flag_ = false;
  if (p.b_bytes <= 0) byte_acc_ = 0;
}

void DcqcnRp::set_line_rate_bps(double bps) {
  line_ = bps;
  rc_ = std::min(rc_, bps);
  rt_ = std::min(rt_, bps);
}

void DcqcnRp::AdvanceTo(TimeNs now) {
  if (AtLineRate() && !dec_flag_ && !alpha_flag_) {
    // RC == RT == line rate and nothing collected: an increase event only counts
    // (Increase() would leave both at line rate), so the timer events are counted in
    // closed form; alpha decays by one multiplication per K period.
    if (next_t_ <= now) {
      const TimeNs n = (now - next_t_) / p_.t_ns + 1;
      t_ += static_cast<int>(n);
      next_t_ += n * p_.t_ns;
    }
    if (next_k_ <= now) {
      const TimeNs n = (now - next_k_) / p_.k_ns + 1;
      next_k_ += n * p_.k_ns;
      const double decay = 1 - p_.g;
      if (p_.alpha_per_interval) {
        alpha_ = Decayed(alpha_, p_.g, n);
      } else {
        double a = alpha_;
        if (a != 0) {
          for (TimeNs i = 0; i < n; ++i) a *= decay;
        }
        alpha_ = a;
      }
    }
    if (next_d_ <= now)
      next_d_ += ((now - next_d_) / p_.decrease_interval_ns + 1) * p_.decrease_interval_ns;
    return;
  }
  // Events in time order; at equal instants alpha first, then the rate timer, then the
  // decrease check (ns-3 runs same-instant events in the order they were scheduled: the
  // decrease check is 1 ns after the alpha update, and the rate timer, re-armed at a cut,
  // lands on the decrease grid but was scheduled before that check).
  while (true) {
    const TimeNs next = std::min(next_k_, std::min(next_d_, next_t_));
    if (next > now) return;
    if (next_k_ == next) {
      if (p_.alpha_per_interval && alpha_flag_) {
        alpha_ = (1 - p_.g) * alpha_ + p_.g;
        alpha_flag_ = false;
        next_k_ += p_.k_ns;
        continue;
      }
      if (p_.alpha_per_interval) {
        // Pure decays (no CNP can arrive inside AdvanceTo) up to the next other event.
        const TimeNs lim = std::min(now, std::min(next_d_, next_t_));
        const TimeNs n = (lim - next_k_) / p_.k_ns + 1;
        alpha_ = Decayed(alpha_, p_.g, n);
        next_k_ += n * p_.k_ns;
      } else {
        alpha_ *= (1 - p_.g);
        next_k_ += p_.k_ns;
      }
      continue;
    }
    if (next_t_ == next) {
      if (p_.b_bytes > 0) {
        ++t_;
        Increase();
      } else {
        Increase();  // staged by the timer alone: the stage before this event
        ++t_;
      }
      next_t_ += p_.t_ns;
      continue;
    }
    if (dec_flag_) {
      Cut(next_d_);
      next_d_ += p_.decrease_interval_ns;
    } else {
      next_d_ += ((now - next_d_) / p_.decrease_interval_ns + 1) * p_.decrease_interval_ns;
    }
  }
}

bool DcqcnRp::OnCnp(TimeNs now) {
  if (p_.min_cut_interval_ns > 0 && now - last_cut_ < p_.min_cut_interval_ns) return false;
  const bool first = !seen_cnp_;
  seen_cnp_ = true;
  if (p_.alpha_per_interval) {
    alpha_flag_ = true;
    if (first) {
      alpha_ = 1;
      alpha_flag_ = false;
      next_k_ = now + p_.k_ns;
      rc_ = rt_ = std::max(p_.first_cnp_rate_fraction * rc_, p_.min_rate_bps);
    }
  }
  if (p_.decrease_interval_ns > 0) {
    dec_flag_ = true;
    if (first || next_d_ == kNoEvent) next_d_ = now + p_.decrease_interval_ns + 1;
    return true;
  }
  Cut(now);
  return true;
}

// One rate cut (a CNP at once, or the collected ones at a decrease check).
void DcqcnRp::Cut(TimeNs now) {
  last_cut_ = now;
  dec_flag_ = false;
  if (p_.clamp_target_rate || t_ > 0 || b_ > 0) rt_ = rc_;
  double cut = rc_ * (1 - alpha_ / 2);
  cut = std::max(cut, rc_ * (1 - p_.max_cut_fraction));
  rc_ = std::max(cut, p_.min_rate_bps);
  if (!p_.alpha_per_interval) {  // alpha rises at each cut, decays every K without one
    alpha_ = (1 - p_.g) * alpha_ + p_.g;
    next_k_ = now + p_.k_ns;
  }
  t_ = b_ = 0;
  byte_acc_ = 0;
  next_t_ = now + p_.t_ns;
}

void DcqcnRp::ByteCounterEvents() {
  if (AtLineRate()) {
    const double n = std::floor(byte_acc_ / p_.b_bytes);
    byte_acc_ -= n * p_.b_bytes;
    b_ += static_cast<int>(n);
    while (byte_acc_ >= p_.b_bytes) {  // rounding
      byte_acc_ -= p_.b_bytes;
      ++b_;
    }
    return;
  }
  while (byte_acc_ >= p_.b_bytes) {
    byte_acc_ -= p_.b_bytes;
    ++b_;
    Increase();
  }
}

void DcqcnRp::Increase() {
  if (p_.b_bytes <= 0) {
    // Timer alone (the NIC model): t_ is the stage before this event.
    if (t_ < p_.f) {
      // Fast recovery.
    } else if (t_ == p_.f) {
      rt_ += p_.rai_bps;
    } else {
      rt_ += (p_.hyper_increase_scaled ? (t_ - p_.f) : 1) * p_.rhai_bps;
    }
  } else {
    const int hi = std::max(t_, b_), lo = std::min(t_, b_);
    if (hi < p_.f) {
      // Fast recovery: halve the distance to the target.
    } else if (lo > p_.f) {
      rt_ += (p_.hyper_increase_scaled ? (lo - p_.f) : 1) * p_.rhai_bps;
    } else {
      rt_ += p_.rai_bps;
    }
  }
  rt_ = std::min(rt_, line_);
  rc_ = std::min((rt_ + rc_) / 2, line_);
  rc_ = std::max(rc_, p_.min_rate_bps);
}

int DcqcnNotificationPoint::OnDelivery(const CcDelivery& d, NpQpState* st, Rng& rng,
                                       CcFeedback* out, int max_out) const {
  if (d.marked <= 0 || max_out <= 0) return 0;
  const double pkts = d.arrived / d.mtu, mpkts = d.marked / d.mtu;
  int cnps = 0;
  if (interval_ <= 0) {
    st->mark_acc += mpkts;
    cnps = static_cast<int>(std::min(16.0, std::floor(st->mark_acc)));
    st->mark_acc -= std::floor(st->mark_acc);
  } else if (d.now - st->last_feedback >= interval_) {
    const double pm = std::min(1.0, d.marked / d.arrived);
    const double p_any = 1 - std::pow(1 - pm, pkts);
    if (rng.Uniform() < p_any) cnps = 1;
  }
  cnps = std::min(cnps, max_out);
  for (int i = 0; i < cnps; ++i) out[i] = CcFeedback{};
  if (cnps > 0) st->last_feedback = d.now;
  return cnps;
}

bool DcqcnCongestionControl::Reconfigure(RateControl* rc, TimeNs now) const {
  auto* d = dynamic_cast<DcqcnRateControl*>(rc);
  if (!d) return false;
  d->rp().SetParams(p_, now);
  return true;
}

}  // namespace loom::sim
