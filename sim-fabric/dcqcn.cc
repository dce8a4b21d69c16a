#include "sim-fabric/dcqcn.h"

#include <algorithm>
#include <cmath>

namespace loom::sim {

DcqcnParams PaperDcqcnParams() { return DcqcnParams{}; }

DcqcnParams VendorDcqcnParams() {
  DcqcnParams p;
  p.f = 1;
  p.t_ns = 300 * kNsPerUs;
  p.b_bytes = 2e6;
  p.k_ns = 55 * kNsPerUs;
  p.g = 1.0 / 256;
  p.rai_bps = 5e6;
  p.rhai_bps = 50e6;
  p.min_rate_bps = 10e6;
  p.min_cut_interval_ns = 4 * kNsPerUs;
  p.max_cut_fraction = 0.5;
  p.cnp_interval_ns = 4 * kNsPerUs;
  return p;
}

bool DcqcnPresetByName(const std::string& name, DcqcnParams* out) {
  if (name == "paper") {
    *out = PaperDcqcnParams();
    return true;
  }
  if (name == "vendor") {
    *out = VendorDcqcnParams();
    return true;
  }
  return false;
}

void DcqcnRp::Reset(const DcqcnParams& p, double line_rate_bps, TimeNs now) {
  p_ = p;
  line_ = line_rate_bps;
  rc_ = rt_ = line_rate_bps;
  alpha_ = p.alpha_init;
  t_ = b_ = 0;
  byte_acc_ = 0;
  next_t_ = now + p.t_ns;
  next_k_ = now + p.k_ns;
  last_cut_ = INT64_MIN / 2;
}

void DcqcnRp::SetParams(const DcqcnParams& p, TimeNs now) {
  p_ = p;
  next_t_ = now + p.t_ns;
  next_k_ = now + p.k_ns;
}

void DcqcnRp::set_line_rate_bps(double bps) {
  line_ = bps;
  rc_ = std::min(rc_, bps);
  rt_ = std::min(rt_, bps);
}

void DcqcnRp::AdvanceTo(TimeNs now) {
  if (AtLineRate()) {
    // RC == RT == line rate: an increase event only counts (Increase() would leave both
    // at line rate), so the timer events are counted in closed form; alpha decays by the
    // same multiplications, one per K period, as event by event.
    if (next_t_ <= now) {
      const TimeNs n = (now - next_t_) / p_.t_ns + 1;
      t_ += static_cast<int>(n);
      next_t_ += n * p_.t_ns;
    }
    if (next_k_ <= now) {
      const TimeNs n = (now - next_k_) / p_.k_ns + 1;
      next_k_ += n * p_.k_ns;
      double a = alpha_;
      const double decay = 1 - p_.g;
      if (a != 0) {
        for (TimeNs i = 0; i < n; ++i) a *= decay;
      }
      alpha_ = a;
    }
    return;
  }
  while (true) {
    const TimeNs next = std::min(next_t_, next_k_);
    if (next > now) return;
    if (next_k_ <= next_t_) {
      alpha_ *= (1 - p_.g);
      next_k_ += p_.k_ns;
    } else {
      ++t_;
      Increase();
      next_t_ += p_.t_ns;
    }
  }
}

bool DcqcnRp::OnCnp(TimeNs now) {
  if (p_.min_cut_interval_ns > 0 && now - last_cut_ < p_.min_cut_interval_ns) return false;
  last_cut_ = now;
  rt_ = rc_;
  double cut = rc_ * (1 - alpha_ / 2);
  cut = std::max(cut, rc_ * (1 - p_.max_cut_fraction));
  rc_ = std::max(cut, p_.min_rate_bps);
  alpha_ = (1 - p_.g) * alpha_ + p_.g;
  t_ = b_ = 0;
  byte_acc_ = 0;
  next_t_ = now + p_.t_ns;
  next_k_ = now + p_.k_ns;
  return true;
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
  const int hi = std::max(t_, b_), lo = std::min(t_, b_);
  if (hi < p_.f) {
    // Fast recovery: halve the distance to the target.
  } else if (lo > p_.f) {
    rt_ += (lo - p_.f) * p_.rhai_bps;
  } else {
    rt_ += p_.rai_bps;
  }
  rt_ = std::min(rt_, line_);
  rc_ = std::min((rt_ + rc_) / 2, line_);
  rc_ = std::max(rc_, p_.min_rate_bps);
}

}  // namespace loom::sim
