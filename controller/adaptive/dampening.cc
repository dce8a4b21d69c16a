#include "controller/adaptive/dampening.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace loom::adaptive {
namespace {

std::string Num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f", x);
  return buf;
}

std::string Sec(TimeNs ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(ns) / kNsPerSec);
  return buf;
}

}  // namespace

std::string ValidateDampeningParams(const DampeningParams& p) {
  if (!(p.penalty_per_flap > 0)) return "penalty_per_flap: must be > 0";
  if (!(p.reuse_threshold > 0)) return "reuse_threshold: must be > 0";
  if (!(p.suppress_threshold > p.reuse_threshold)) {
    return "suppress_threshold: must be > reuse_threshold";
  }
  if (p.half_life_ns <= 0) return "half_life_ns: must be > 0";
  if (p.max_suppress_ns < p.half_life_ns) return "max_suppress_ns: must be >= half_life_ns";
  return "";
}

DampeningDecision Dampen(const DampeningState& previous, LinkEvent event, TimeNs now_ns,
                         const DampeningParams& params) {
  DampeningDecision d;
  DampeningState& s = d.state;
  s = previous;
  const TimeNs now = std::max(now_ns, previous.updated_ns);
  const double half = static_cast<double>(params.half_life_ns);
  s.penalty *= std::exp2(-static_cast<double>(now - previous.updated_ns) / half);
  if (s.penalty < 1e-9) s.penalty = 0;
  s.updated_ns = now;
  const double ceiling =
      params.reuse_threshold * std::exp2(static_cast<double>(params.max_suppress_ns) / half);

  std::string what;
  if (event == LinkEvent::kDown && s.up) {
    s.up = false;
    ++s.flaps;
    s.penalty = std::min(ceiling, s.penalty + params.penalty_per_flap);
    what = "flap " + std::to_string(s.flaps) + " (down), penalty " + Num(s.penalty);
  } else if (event == LinkEvent::kUp && !s.up) {
    s.up = true;
    what = "up, penalty " + Num(s.penalty);
  } else {
    what = "penalty " + Num(s.penalty);
  }

  if (!s.suppressed && s.penalty >= params.suppress_threshold) {
    s.suppressed = true;
    s.suppressed_since_ns = now;
    d.suppression_changed = true;
    d.reason = what + " >= suppress threshold " + Num(params.suppress_threshold) +
               ": link suppressed (flapping)";
  } else if (s.suppressed) {
    const bool decayed = s.penalty < params.reuse_threshold;
    const bool expired = now - s.suppressed_since_ns >= params.max_suppress_ns;
    if (decayed || expired) {
      s.suppressed = false;
      d.suppression_changed = true;
      d.reason = what +
                 (decayed ? " < reuse threshold " + Num(params.reuse_threshold)
                          : ", max suppress time " + Sec(params.max_suppress_ns) + " reached") +
                 ": link reused";
    } else {
      d.reason = what + ": still suppressed";
    }
  } else {
    d.reason = what + ": not suppressed";
  }
  if (s.suppressed) {
    const TimeNs by_decay =
        now + static_cast<TimeNs>(std::ceil(half * std::log2(s.penalty / params.reuse_threshold)));
    d.reuse_at_ns = std::min(by_decay, s.suppressed_since_ns + params.max_suppress_ns);
  }
  d.usable = s.up && !s.suppressed;
  return d;
}

}  // namespace loom::adaptive
