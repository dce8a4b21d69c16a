#include "sim-fabric/reorder.h"

#include <algorithm>
#include <cmath>

namespace loom::sim::reorder {

Wait QueueWait(const QueueArrivals& a, double service_ns) {
  Wait w;
  if (a.bytes <= 0 || a.capacity <= 0 || a.sq_bytes <= 0 || service_ns <= 0) return w;
  const double rho = std::min(a.bytes / a.capacity, kMaxJitterRho);
  // Whitt's QNA hybrid superposition: nu is the effective number of streams.
  const double nu = a.bytes * a.bytes / a.sq_bytes;
  const double c2_streams = std::clamp(a.c2_bytes / a.bytes, 0.0, 1.0);
  const double x = 1 - rho;
  const double mix = 1 / (1 + 4 * x * x * std::max(0.0, nu - 1));
  const double ca2 = mix * c2_streams + (1 - mix);
  // Kingman: E[W] = t_s rho / (1 - rho) (c_a^2 + c_s^2) / 2 with fixed-size packets.
  const double mean_wait = service_ns * rho / x * ca2 / 2;
  w.rho = rho;
  w.ca2 = ca2;
  if (mean_wait <= 0 || rho <= 0) return w;
  w.p = rho;  // P(wait > 0) = rho (work conservation)
  w.mean_ns = mean_wait / rho;
  return w;
}

Wait StreamWait(const Wait& q, double share) {
  Wait w = q;
  w.p = q.p * (1 - std::clamp(share, 0.0, 1.0));
  if (w.p <= 0) w.mean_ns = 0;
  return w;
}

void PathJitter::Add(const Wait& w) {
  if (w.p <= 0 || w.mean_ns <= 0) return;
  const double total = p * mean_ns + w.p * w.mean_ns;
  p = 1 - (1 - p) * (1 - w.p);
  mean_ns = p > 0 ? total / p : 0;
}

namespace {

// P(X - Y > c), X and Y independent, each 0 or exponential.
double DiffExceeds(const PathJitter& x, const PathJitter& y, double c) {
  const double px = x.mean_ns > 0 ? x.p : 0, py = y.mean_ns > 0 ? y.p : 0;
  const double a = x.mean_ns, b = y.mean_ns;
  double prob = 0;
  // Both zero.
  prob += (1 - px) * (1 - py) * (c < 0 ? 1.0 : 0.0);
  // X exponential, Y zero: P(X > c).
  if (px > 0) prob += px * (1 - py) * (c < 0 ? 1.0 : std::exp(-c / a));
  // X zero, Y exponential: P(Y < -c).
  if (py > 0) prob += (1 - px) * py * (c < 0 ? 1 - std::exp(c / b) : 0.0);
  // Both exponential: the difference of two exponentials.
  if (px > 0 && py > 0) {
    const double both = c >= 0 ? a / (a + b) * std::exp(-c / a) : 1 - b / (a + b) * std::exp(c / b);
    prob += px * py * both;
  }
  return std::clamp(prob, 0.0, 1.0);
}

}  // namespace

double OvertakeProbability(double base_a_ns, const PathJitter& a, double base_b_ns,
                           const PathJitter& b, double spacing_ns) {
  return DiffExceeds(a, b, spacing_ns - (base_a_ns - base_b_ns));
}

double ReorderProbability(const std::vector<double>& w, const std::vector<double>& base_ns,
                          const std::vector<PathJitter>& jit, double spacing_ns) {
  const size_t n = std::min({w.size(), base_ns.size(), jit.size()});
  double p = 0;
  for (size_t a = 0; a < n; ++a) {
    if (w[a] <= 0) continue;
    for (size_t b = 0; b < n; ++b) {
      if (b == a || w[b] <= 0) continue;
      p += w[a] * w[b] * OvertakeProbability(base_ns[a], jit[a], base_ns[b], jit[b], spacing_ns);
    }
  }
  return std::clamp(p, 0.0, 1.0);
}

double Goodput(ReorderMode mode, double p, double window_packets) {
  p = std::clamp(p, 0.0, 1.0);
  switch (mode) {
    case ReorderMode::kTolerant:
      return 1;
    case ReorderMode::kSelectiveRepeat:
      return 1 / (1 + p);
    case ReorderMode::kGoBackN:
      break;
  }
  const double w = std::max(1.0, window_packets);
  // At least the packet at the gap gets through per round trip.
  return std::max((1 - p) / (1 + (w - 1) * p), 1 / w);
}

}  // namespace loom::sim::reorder
