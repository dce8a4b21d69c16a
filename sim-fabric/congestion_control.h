// The emulator's congestion-control seam, the way ns-3 and htsim make congestion control
// pluggable: three parts, each behind an interface, so an algorithm other than DCQCN (a
// delay- or INT-based one) plugs in without touching the queue, hop or NIC code.
//
//   reaction point (RP)  RateControl, one per sending QP: the QP's allowed rate, moved by
//                        feedback, by its own timers and by the bytes it sends;
//   notification point   NotificationPoint, one per receiving NIC: turns what a QP's
//   (NP)                 bytes carried when they arrived (ECN marks, the path's round
//                        trip) into feedback for the sender (a CNP, an ACK with a delay
//                        sample), sent back over the path's return latency;
//   congestion point     CongestionPoint, one per fabric: how a switch egress queue
//   (CP)                 signals congestion on the bytes it serves (RED/ECN marking).
//
// A CongestionControl bundles the RP factory and the NP of one algorithm with its
// parameters; each NIC has one (FabricOptions::congestion_control, or DCQCN built from
// FabricOptions::dcqcn / Fabric::SetDcqcn). sim-fabric/dcqcn.h is the DCQCN
// implementation; tests/sim/congestion_control_test.cc plugs in a delay-based one.
//
// Threading: like the Fabric, single-threaded; the engine calls everything from its
// step. Implementations are pure state machines: no I/O, no clock of their own.
#ifndef LOOM_SIM_FABRIC_CONGESTION_CONTROL_H_
#define LOOM_SIM_FABRIC_CONGESTION_CONTROL_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "common/clock.h"

namespace loom::sim {

class Rng;

// Feedback from a receiver's notification point to a sender QP.
struct CcFeedback {
  enum class Kind : uint8_t {
    kCnp,  // congestion notification (RoCEv2 CNP)
    kAck,  // an acknowledgement carrying what the acknowledged bytes saw
  };
  Kind kind = Kind::kCnp;
  double bytes = 0;         // kAck: bytes acknowledged
  double rtt_ns = 0;        // kAck: round trip of the acknowledged bytes
  double ecn_fraction = 0;  // kAck: share of them that arrived ECN-marked
};

// Reaction point: one QP's sending rate.
class RateControl {
 public:
  virtual ~RateControl() = default;
  // Back to the initial state at line rate `line_bps`, clocks starting at `now`.
  virtual void Reset(double line_bps, TimeNs now) = 0;
  // Fires every timer due at or before `now`, in time order.
  virtual void AdvanceTo(TimeNs now) = 0;
  // The next instant AdvanceTo has something to do (kNever-like when none).
  virtual TimeNs next_event_ns() const = 0;
  // `bytes` were sent at `now`.
  virtual void OnBytesSent(double bytes, TimeNs now) = 0;
  // Feedback arrives at `now` (AdvanceTo(now) was called). False when it was ignored.
  virtual bool OnFeedback(const CcFeedback& fb, TimeNs now) = 0;
  // The rate the QP may send at.
  virtual double rate_bps() const = 0;
  virtual double line_rate_bps() const = 0;
  // Fast-forward: true while the rate cannot change before the next feedback; otherwise
  // the next instant and the bytes sent until it may (the engine does not jump past them).
  virtual bool Steady() const = 0;
  virtual TimeNs next_change_ns() const = 0;
  virtual double bytes_to_next_change() const = 0;
  // For QpInfo: the algorithm's target rate and its congestion estimate (DCQCN's RT and
  // alpha); NaN where the algorithm has none.
  virtual double target_bps() const { return std::numeric_limits<double>::quiet_NaN(); }
  virtual double alpha() const { return std::numeric_limits<double>::quiet_NaN(); }
};

// What a QP's bytes carried when they reached the receiver in one step.
struct CcDelivery {
  TimeNs now = 0;
  double arrived = 0;  // bytes on the wire (what the receiver saw, kept or not)
  double marked = 0;   // of them, ECN-marked
  double mtu = 4096;
  double rtt_ns = 0;  // base round trip plus the path's queueing (NotificationPoint::needs_rtt)
};

// A receiver's per-QP notification-point state.
struct NpQpState {
  TimeNs last_feedback = std::numeric_limits<TimeNs>::min() / 4;
  double mark_acc = 0;
};

// Notification point of a receiving NIC.
class NotificationPoint {
 public:
  virtual ~NotificationPoint() = default;
  // Whether unmarked deliveries need the call too (an ACK-clocked algorithm); false: the
  // engine calls OnDelivery only for steps whose bytes carry ECN marks.
  virtual bool every_delivery() const = 0;
  // Whether CcDelivery::rtt_ns must be filled (costs a walk of the path's queues).
  virtual bool needs_rtt() const = 0;
  // Fills up to `max_out` feedback messages for the sender; returns how many.
  virtual int OnDelivery(const CcDelivery& d, NpQpState* st, Rng& rng, CcFeedback* out,
                         int max_out) const = 0;
};

// One algorithm with its parameters: the reaction points it makes and its notification
// point.
class CongestionControl {
 public:
  virtual ~CongestionControl() = default;
  virtual std::string name() const = 0;
  // false: QPs send at line rate and no feedback is sent back (congestion control off).
  virtual bool enabled() const = 0;
  virtual std::unique_ptr<RateControl> NewRateControl(double line_bps, TimeNs now) const = 0;
  virtual const NotificationPoint& notification_point() const = 0;
  // Applies this algorithm's parameters to a reaction point it made (state kept where the
  // algorithm allows); false when `rc` is not one of its own (the caller replaces it).
  virtual bool Reconfigure(RateControl* rc, TimeNs now) const = 0;
};

// What an egress queue is, for its congestion point.
struct CpQueue {
  double depth_bytes = 0;  // left after the step's service
  double kmin = 0, kmax = 0, pmax = 0;
  bool ecn = false;  // ECN marking configured on this queue
  double capacity_bps = 0;
};

// Congestion point: the marking probability of the bytes a queue serves.
class CongestionPoint {
 public:
  virtual ~CongestionPoint() = default;
  virtual double MarkProbability(const CpQueue& q) const = 0;
};

// RED/ECN as switches configure it (WRED with ECN: Kmin, Kmax, Pmax; DCQCN's CP):
// 0 below Kmin, Pmax (depth - Kmin) / (Kmax - Kmin) up to Kmax, 1 above.
class RedEcnPoint final : public CongestionPoint {
 public:
  double MarkProbability(const CpQueue& q) const override {
    if (!q.ecn || q.depth_bytes <= q.kmin) return 0;
    if (q.depth_bytes >= q.kmax) return 1;
    return q.pmax * (q.depth_bytes - q.kmin) / (q.kmax - q.kmin);
  }
};

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_CONGESTION_CONTROL_H_
