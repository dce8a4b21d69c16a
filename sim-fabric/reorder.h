// Packet reordering of per-packet spraying in a fluid model, and what it costs a
// receiving NIC.
//
// The fluid engine gives each path its mean queueing delay (fluid queue / capacity).
// Packets also wait behind each other at packet level: where several streams merge,
// arrivals are random and a queue of a few packets comes and goes even when the fluid
// queue is empty. Two consecutive packets of one sprayed QP that take different paths
// arrive out of order when the first one's path delay exceeds the second's by more than
// the spacing between them. This file turns the engine's per-queue arrival statistics
// into that probability, and the probability into goodput for each receiver behaviour.
//
// Model (sources noted beside each formula in reorder.cc):
//   Merged arrivals at a queue (Whitt, "The Queueing Network Analyzer", Bell System
//   Technical Journal 62(9), 1983, the hybrid superposition approximation):
//     c_a^2 = w * sum_i (lambda_i / lambda) c_i^2 + (1 - w),
//     w = 1 / (1 + 4 (1 - rho)^2 (nu - 1)),   nu = 1 / sum_i (lambda_i / lambda)^2.
//   A stream is one path flow at that hop: paced (c^2 = 0) unless it is a sub-flow of a
//   randomly sprayed QP with weight s (each packet takes it with probability s: a
//   Bernoulli thinning, c^2 = 1 - s).
//   Waiting time of a packet (Kingman's heavy-traffic approximation for G/G/1, fixed
//   packet size so c_s^2 = 0): E[W] = t_s * rho / (1 - rho) * (c_a^2 + c_s^2) / 2; a
//   packet waits with probability rho, and given that it waits W is exponential.
//   A packet of a stream that brings share f of the queue's traffic waits behind the
//   others only (its own packets are spaced by its link): P(wait) and E[W] are scaled by
//   (1 - f). A single paced stream never waits, whatever its rate.
//   rho is capped at kMaxJitterRho: the fluid queue carries the standing backlog of an
//   overloaded queue; the jitter term is the packet-level fluctuation around it.
//   A path's jitter: the sum of its hops' waits (hops every sub-flow of the QP shares are
//   left out: a FIFO queue keeps order), approximated as 0 with probability
//   prod(1 - p_h), else exponential with the mean that keeps E[sum] exact.
//   Overtaking: packet n on path a, packet n+1 sent `spacing` later on path b; out of
//   order when D_a - D_b > spacing (D = fluid delay + jitter). Each packet picks its path
//   independently with the spray weights, so the per-packet reorder probability is
//   sum_{a != b} w_a w_b P(D_a - D_b > spacing).
//   Receivers (p = per-packet reorder probability, W = packets in flight in one round
//   trip):
//     go-back-N (RoCE without out-of-order placement: the first out-of-sequence packet
//     draws a NAK, every packet until the resend arrives is discarded): the go-back-N
//     ARQ efficiency (1 - p) / (1 + (W - 1) p) (Bertsekas & Gallager, "Data Networks",
//     2nd ed., sec. 2.4.2, with the reorder event in place of a frame error);
//     selective repeat (a NAK per gap, the missing packet resent, the late original kept:
//     IRN, Mittal et al., SIGCOMM 2018): one duplicate per event, 1 / (1 + p);
//     tolerant (out-of-order placement): 1.
//
// Pure functions, no state; the engine (fabric_step.cc) calls them per step for every
// sprayed QP (the receiver counts out-of-sequence packets whatever it does with them; what
// they cost depends on the receiver).
#ifndef LOOM_SIM_FABRIC_REORDER_H_
#define LOOM_SIM_FABRIC_REORDER_H_

#include <vector>

#include "sim-fabric/types.h"

namespace loom::sim::reorder {

inline constexpr double kMaxJitterRho = 0.95;

// Arrival statistics of one queue over one step.
struct QueueArrivals {
  double bytes = 0;     // sum of the streams' bytes
  double sq_bytes = 0;  // sum of bytes_i^2
  double c2_bytes = 0;  // sum of bytes_i * c_i^2
  double capacity = 0;  // bytes the queue can serve in the step
};

// Packet-level waiting time at one queue.
struct Wait {
  double p = 0;        // probability a packet waits at all
  double mean_ns = 0;  // mean wait given that it waits
  double rho = 0;      // utilization the wait was computed at (capped)
  double ca2 = 0;      // squared coefficient of variation of the merged arrivals
};

// The queue's waiting time for a packet of the merged stream; `service_ns` = one MTU at
// the queue's rate.
Wait QueueWait(const QueueArrivals& a, double service_ns);

// The wait of a packet of a stream that brings `share` (0..1) of the queue's bytes.
Wait StreamWait(const Wait& q, double share);

// The sum of independent hop waits as one zero-or-exponential delay.
struct PathJitter {
  double p = 0;        // probability the path delays the packet at all
  double mean_ns = 0;  // mean delay given that it does
  void Add(const Wait& w);
};

// P(base_a + J_a - base_b - J_b > spacing_ns) for independent zero-or-exponential J.
double OvertakeProbability(double base_a_ns, const PathJitter& a, double base_b_ns,
                           const PathJitter& b, double spacing_ns);

// Per-packet reorder probability of a QP sprayed over paths with weights `w` (sum 1),
// fluid delays `base_ns` and jitters `jit`, sending one packet every `spacing_ns`.
double ReorderProbability(const std::vector<double>& w, const std::vector<double>& base_ns,
                          const std::vector<PathJitter>& jit, double spacing_ns);

// Fraction of the arriving bytes a receiver keeps as goodput.
double Goodput(ReorderMode mode, double p, double window_packets);

}  // namespace loom::sim::reorder

#endif  // LOOM_SIM_FABRIC_REORDER_H_
