// Link flap dampening, RFC 2439 style.
//
// What it computes. Per link, a penalty that grows by penalty_per_flap on
// every down transition and decays exponentially with half_life_ns:
//   penalty(t) = penalty(t0) x 2^(-(t - t0) / half_life)
// The link is suppressed (not usable for placement or weights) when the
// penalty reaches suppress_threshold, and reused when it decays below
// reuse_threshold or after max_suppress_ns of suppression, whichever comes
// first. The penalty is capped at reuse_threshold x 2^(max_suppress /
// half_life) (RFC 2439's ceiling) so the decay to reuse never takes longer
// than max_suppress. Usable = oper up and not suppressed. With the defaults
// one flap (1000) does not suppress, three quick flaps (about 3000) do, and
// the link comes back after it stays quiet about two half-lives.
//
// Pure: the caller keeps a DampeningState per link and feeds it events with
// their timestamps (time never goes backwards; an older timestamp is treated
// as "now" of the last update) or plain evaluations (LinkEvent::kNone) to
// learn about reuse. O(1) per call. No I/O, no clock, no threads.
#ifndef LOOM_CONTROLLER_ADAPTIVE_DAMPENING_H_
#define LOOM_CONTROLLER_ADAPTIVE_DAMPENING_H_

#include <string>

#include "common/clock.h"

namespace loom::adaptive {

struct DampeningParams {
  double penalty_per_flap = 1000;
  double suppress_threshold = 2000;
  double reuse_threshold = 750;
  TimeNs half_life_ns = 15 * kNsPerSec;
  TimeNs max_suppress_ns = 60 * kNsPerSec;
};

// Returns "" when valid, else the offending field and why.
std::string ValidateDampeningParams(const DampeningParams& p);

enum class LinkEvent { kNone, kDown, kUp };

struct DampeningState {
  double penalty = 0;
  TimeNs updated_ns = 0;
  bool up = true;
  bool suppressed = false;
  TimeNs suppressed_since_ns = 0;
  int flaps = 0;  // Down transitions seen.
};

struct DampeningDecision {
  DampeningState state;  // Pass to the next call.
  bool usable = true;
  bool suppression_changed = false;  // Suppressed or reused by this call.
  TimeNs reuse_at_ns = -1;           // Expected reuse time when suppressed.
  std::string reason;
};

DampeningDecision Dampen(const DampeningState& previous, LinkEvent event, TimeNs now_ns,
                         const DampeningParams& params);

}  // namespace loom::adaptive

#endif  // LOOM_CONTROLLER_ADAPTIVE_DAMPENING_H_
