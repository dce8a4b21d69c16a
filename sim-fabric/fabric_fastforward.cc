// Quiescent fast-forward (Fabric::Impl::TryFastForward, QuiescentHorizon, ApplyJump); see
// fabric_impl.h.
#include "sim-fabric/fabric_impl.h"

namespace loom::sim {

// ============================================================================ fast-forward
//
// Quiescent fast-forward. After enough consecutive steps in which nothing but linear
// progress happened (no event, no reroute, no activation, no QP rate change, no standing
// queue, no ECN mark, no pause, no drop, no loss, no PFC assertion, no storm) — one more
// than the longest active path's hop count, since bytes advance one hop per step and every
// queue serves all it holds, so that everything in flight was sent in those steps — the step
// pipeline is stationary: every hop carries what its QP sends, every queue serves all it
// receives, and the next step differs from the last one only by counters growing. The
// horizon is the number of further steps over which that stays true: bounded by the next
// event (CNP, PFC frame, fault, iteration start), the watchdog poll, the caller's limit,
// max_jump_ns, a DCQCN increase that would change a rate (RC below line rate: timer T or
// byte counter B), a spray re-weighting, a transfer completing, and each QP's quota
// trajectory (a gated transfer's quota grows with its gate's delivery rate; the QP's
// demand must stay its rate cap, or stay exactly its quota-limited amount). Both are
// piecewise linear and concave in the step count, so checking the ends of the jump
// suffices. The jump then adds n x (last step's amount) to every counter stepping would
// have touched, in the same QP order, and runs the DCQCN timers to the last skipped step.

namespace {
constexpr int kFfMinStreak = 3;    // clean steps before a check (and path hops + 1 per QP)
constexpr int64_t kFfMinJump = 3;  // shorter horizons are stepped
constexpr int kFfMaxBackoff = 64;  // steps between failed checks, at most
}  // namespace

bool Fabric::Impl::TryFastForward(TimeNs limit) {
  const TimeNs t = now(), step = dt();
  if (t >= limit || routing_dirty) return false;
  TimeNs event_t = next_wd_poll;
  if (!events.empty()) event_t = std::min(event_t, events.top().t);
  const TimeNs bound = std::min(limit, event_t);
  if (bound <= t) return false;
  // Steps at t, t+step, ..., all before `bound` (an event at te runs in the first step
  // with now >= te; RunUntil(limit) stops at the first step time >= limit).
  // (Clamped so that a limit near the TimeNs maximum cannot overflow.)
  const int64_t n_bound = (std::min(bound - t, kNever) + step - 1) / step;
  FastForwardStats& st = f->ff_stats_;
  const int64_t max_steps = opt().max_jump_ns / step;
  if (active_qps.empty() && next_q.n == 0 && active_ing.n == 0 && storm_nics.empty() &&
      dirty_jobs.empty()) {
    // Idle: those steps would do nothing at all.
    f->now_ += n_bound * step;
    ++st.idle_jumps;
    st.skipped_steps += static_cast<uint64_t>(n_bound);
    return true;
  }
  if (max_steps < 1) return false;
  if (ff_valid && t < ff_valid_until) {
    // Still inside the quiescent stretch found by the last check (nothing ran since).
    ApplyJump(std::min({n_bound, max_steps, (ff_valid_until - t) / step}));
    return true;
  }
  ff_valid = false;
  if (streak < kFfMinStreak || t < ff_retry_at) return false;
  // The horizon is computed up to the next event (not the caller's limit nor the maximum
  // jump), so that later calls can continue the stretch without a new check.
  const int64_t n_event = (event_t - t + step - 1) / step;
  if (std::min(n_event, max_steps) < kFfMinJump) return false;
  ++st.checks;
  RunDirtyGates();  // what the next step would do first (no event, reroute or poll is due)
  int settle = 0;
  const int64_t n = QuiescentHorizon(std::min<int64_t>(n_event, int64_t{1} << 40), &settle);
  if (n < kFfMinJump) {
    if (settle > 0) {
      ff_retry_at = t + settle * step;
    } else {
      ff_retry_at = t + ff_backoff * step;
      ff_backoff = std::min(2 * ff_backoff, kFfMaxBackoff);
    }
    return false;
  }
  ff_backoff = 1;
  ff_valid = true;
  ff_valid_until = t + n * step;
  ApplyJump(std::min({n, n_bound, max_steps}));
  return true;
}

int64_t Fabric::Impl::QuiescentHorizon(int64_t n_max, int* settle) {
  const TimeNs t = now(), step = dt();
  int need_streak = 0;
  double nmax = static_cast<double>(n_max);
  auto steps_until = [&](TimeNs at) {
    return at <= t ? 0.0 : std::ceil(static_cast<double>(at - t) / static_cast<double>(step));
  };
  // Bytes delivered per step by every transfer of the running jobs.
  for (Job& j : jobs) {
    if (j.running) j.rate.assign(j.cur.size(), 0.0);
  }
  auto transfer_of = [&](const Qp& qp) -> int {
    if (qp.job < 0) return -1;
    const Job& j = jobs[qp.job];
    if (!j.running || qp.transfer < 0 || qp.transfer >= static_cast<int>(j.cur.size())) return -1;
    return qp.transfer;
  };
  for (int id : active_qps) {
    const Qp& qp = qps[id];
    if (!qp.active) return 0;
    const int ti = transfer_of(qp);
    if (ti >= 0) jobs[qp.job].rate[ti] += qp.step_got;
  }
  struct Term {
    double a, b;  // quota left before step k of the jump: a + b k
  };
  Term terms[16];
  for (int id : active_qps) {
    const Qp& qp = qps[id];
    const double beta = qp.step_bytes;
    if (!qp.local) {
      if (qp.pfs.empty()) continue;              // unreachable: stays so until a reroute
      if (Changed(qp.step_got, beta)) return 0;  // pipeline not stationary
      for (int pi : qp.pfs) need_streak = std::max(need_streak, pfs[pi].n + 1);
      if (qp.credit_delay > 0) {
        // Arrivals in flight must all be the steady ones.
        need_streak = std::max(need_streak, static_cast<int>(qp.in_flight.size()) + 2 +
                                                static_cast<int>(qp.credit_delay / dt()));
      }
      if (qp.spray_node >= 0) nmax = std::min(nmax, steps_until(qp.next_spray));
      if (beta > 0 && nics[qp.src].cc_on && !qp.Rc().Steady()) {
        // The rate may change at the reaction point's next timer or byte-counter event:
        // stop before either.
        nmax = std::min(nmax, steps_until(qp.Rc().next_change_ns()));
        nmax = std::min(nmax, std::ceil(qp.Rc().bytes_to_next_change() / beta) - 1);
      }
    }
    // Quota trajectory: min over the transfer's size and each gate's delivered + base.
    int nt = 0;
    const int ti = transfer_of(qp);
    if (ti >= 0) {
      const Job& j = jobs[qp.job];
      const Transfer& tr = j.cur[ti];
      const double nq = static_cast<double>(tr.qps.size());
      if (tr.t.gates.size() + 1 > std::size(terms)) return 0;
      terms[nt++] = {tr.t.bytes / nq - qp.sent, -beta};
      for (int g : tr.t.gates) {
        terms[nt++] = {(tr.t.base + j.cur[g].delivered) / nq - qp.sent, j.rate[g] / nq - beta};
      }
    } else {
      terms[nt++] = {qp.quota - qp.sent, -beta};
    }
    double left0 = kInf;
    for (int i = 0; i < nt; ++i) left0 = std::min(left0, terms[i].a);
    // Steps k = 0..n-1 keep a + b k >= c: n <= floor((a - c) / -b) + 1.
    auto keep_above = [&](double c) {
      for (int i = 0; i < nt; ++i) {
        if (terms[i].a < c) return false;
        if (terms[i].b < 0) nmax = std::min(nmax, std::floor((terms[i].a - c) / -terms[i].b) + 1);
      }
      return true;
    };
    if (beta <= 0) {
      // Busy but not sending (waiting for its gate): the quota must not move.
      if (left0 > kEps) return 0;
      for (int i = 0; i < nt; ++i) {
        if (terms[i].a <= kEps && terms[i].b > 0) return 0;
      }
      continue;
    }
    if (!Changed(qp.demand_bps, qp.rate_cap_bps)) {
      // Rate-capped (DCQCN RC, line, application cap or NVLink): the quota must stay above.
      if (!keep_above(BytesPerStep(qp.rate_cap_bps, step) * (1 + 1e-9))) return 0;
    } else {
      // Quota-limited: what is left must stay exactly what the QP asked for last step.
      if (Changed(left0, BytesPerStep(qp.demand_bps, step))) return 0;
      for (int i = 0; i < nt; ++i) {
        if (terms[i].a <= left0 * (1 + 1e-12) && std::abs(terms[i].b) > 1e-9 * beta) return 0;
      }
      if (!keep_above(left0 * (1 - 1e-12))) return 0;
    }
  }
  // Bytes sent before the streak may still be in flight on a longer path: check again once
  // the streak covers it.
  if (need_streak > streak) {
    *settle = need_streak - streak;
    return 0;
  }
  // No transfer completes inside the jump (completion is an event of the next step).
  for (const Job& j : jobs) {
    if (!j.running) continue;
    for (size_t ti = 0; ti < j.cur.size(); ++ti) {
      if (j.rate[ti] <= 0 || j.cur[ti].done) continue;
      nmax = std::min(
          nmax, std::floor((j.cur[ti].t.bytes - 1e-3 - j.cur[ti].delivered) / j.rate[ti]) - 2);
    }
  }
  return nmax < 0 ? 0 : static_cast<int64_t>(nmax);
}

void Fabric::Impl::ApplyJump(int64_t n) {
  const TimeNs step = dt(), t0 = now(), t_last = t0 + (n - 1) * step;
  const double steps = static_cast<double>(n);
  uint64_t hops = 0;
  auto served = [&](Port& pt, double bytes) {
    pt.out_octets += bytes;
    ports[pt.peer_port].in_octets += bytes;
    if (pt.served_t == t0 - step) pt.served_t = t_last;  // LinkUtilization: the last step
  };
  for (int id : active_qps) {
    Qp& qp = qps[id];
    const double sent = steps * qp.step_bytes, got = steps * qp.step_got;
    if (sent <= 0 && got <= 0) continue;
    qp.sent += sent;
    qp.lifetime_sent += sent;
    if (qp.local) {
      qp.delivered += sent;
      qp.lifetime_delivered += sent;
      TransferProgress(qp, sent);
      continue;
    }
    if (sent > 0) {
      Nic& nic = nics[qp.src];
      nic.tx += sent;
      // The NIC sent in the step before the jump too (quiescent: same amounts), so this
      // continues its burst; a jump never contains a transfer's last step.
      nic.TxBusy(t0, t0 + n * step);
      nic.TxRate(qp.send_bps);
      qp.last_send = t_last;
      if (nic.cc_on) {
        qp.Rc().OnBytesSent(sent, t_last);
        qp.Rc().AdvanceTo(t_last);
      }
      queues[nic.port * kPriorities + qp.prio].tx += sent;
      served(ports[nic.port], sent);
      for (size_t k = 0; k < qp.pfs.size(); ++k) {
        const PathFlow& pf = pfs[qp.pfs[k]];
        const double bytes = sent * qp.w[k];
        for (int h = 1; h < pf.n; ++h) {
          const Hop& hp = pf.h[h];
          queues[hp.q].tx += bytes;
          served(ports[hp.q / kPriorities], bytes);
          if (hp.alb >= 0) {
            alb_bytes[hp.alb] += bytes;
            if (bytes > 0) alb_seen[hp.alb] = t_last;
          }
        }
        hops += static_cast<uint64_t>(pf.n - 1);
      }
    }
    if (got > 0) {
      // Quiescent: every arrival in flight carries the same bytes, so as many are credited
      // during the jump as arrive; the ones in flight move with the clock.
      for (auto& a : qp.in_flight) a.due += n * step;
      qp.delivered += got;
      qp.lifetime_delivered += got;
      nics[qp.dst].rx += got;
      nics[qp.dst].oos += steps * qp.step_oos;  // a tolerant receiver's reordering
      TransferProgress(qp, got);
    }
  }
  FastForwardStats& st = f->ff_stats_;
  ++st.jumps;
  st.skipped_steps += static_cast<uint64_t>(n);
  st.skipped_flow_hop_updates += hops * static_cast<uint64_t>(n);
  f->now_ += n * step;
}

}  // namespace loom::sim
