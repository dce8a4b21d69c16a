// One engine step (Fabric::Impl::Step and what it runs); see fabric_impl.h.
#include "sim-fabric/fabric_impl.h"

namespace loom::sim {

// ============================================================================ step

void Fabric::Impl::Step() {
  unsteady = false;
  ff_valid = false;
  ProcessEvents();
  ApplyPendingRouting();
  if (now() >= next_wd_poll) WatchdogPoll();
  RunDirtyGates();
  Sources();
  QueuePass();
  FlowPass();
  PfcPass();
  streak = unsteady ? 0 : streak + 1;
}

void Fabric::Impl::RunDirtyGates() {
  // Gates: only the transfers whose gate delivered bytes last step (in transfer order).
  for (int ji : dirty_jobs) {
    Job& j = jobs[ji];
    j.any_dirty = false;
    const bool live = j.running && j.gated;
    for (size_t w = 0; w < j.gate_dirty.size(); ++w) {
      uint64_t bits = j.gate_dirty[w];
      j.gate_dirty[w] = 0;
      while (live && bits) {
        const int ti = static_cast<int>(w * 64) + __builtin_ctzll(bits);
        bits &= bits - 1;
        UpdateGate(j, ti);
      }
    }
  }
  dirty_jobs.clear();
}

void Fabric::Impl::ProcessEvents() {
  while (!events.empty() && events.top().t <= now()) {
    const Event e = events.top();
    events.pop();
    unsteady = true;
    switch (e.kind) {
      case kCnp: {
        // Feedback reaches the sender: a bare CNP (b == 0) or the next queued message.
        Qp& qp = qps[e.a];
        RateControl& rc = qp.Rc();
        rc.AdvanceTo(now());
        CcFeedback fb;
        if (e.b != 0) {
          // Feedback for an algorithm the QP no longer runs is dropped.
          if (e.b != qp.fb_gen || qp.fb_head >= qp.feedback.size()) break;
          fb = qp.feedback[qp.fb_head++];
          if (qp.fb_head == qp.feedback.size()) {
            qp.feedback.clear();
            qp.fb_head = 0;
          } else if (qp.fb_head >= 64 && 2 * qp.fb_head >= qp.feedback.size()) {
            // Always some in flight (an ACK per step): drop the consumed front.
            qp.feedback.erase(qp.feedback.begin(),
                              qp.feedback.begin() + static_cast<std::ptrdiff_t>(qp.fb_head));
            qp.fb_head = 0;
          }
        }
        Nic& n = nics[qp.src];
        const bool cnp = fb.kind == CcFeedback::Kind::kCnp;
        if (rc.OnFeedback(fb, now())) {
          if (cnp) {
            n.rp_handled += 1;
            ++qp.cnps;
          }
        } else if (cnp) {
          n.rp_ignored += 1;
        }
        break;
      }
      case kPfcFrame:
        OnPfcFrame(e.a, e.b);
        break;
      case kFault:
        RunFault(FaultSpec(faults[e.a]));  // a copy: RunFault may append to faults
        break;
      case kJobIter:
        StartIteration(e.a);
        break;
    }
  }
}

void Fabric::Impl::UpdateGate(Job& j, int ti) {
  Transfer& t = j.cur[ti];
  double allowed = t.t.bytes;
  if (!t.t.gates.empty()) {
    double m = kInf;
    for (int g : t.t.gates) m = std::min(m, j.cur[g].delivered);
    allowed = std::min(allowed, t.t.base + m);
  }
  const double per = allowed / static_cast<double>(t.qps.size());
  for (int id : t.qps) {
    Qp& qp = qps[id];
    qp.quota = per;
    if (!qp.active && qp.sent < per - kEps) ActivateQp(qp);
  }
}

void Fabric::Impl::UpdateGates(Job& j) {
  for (size_t ti = 0; ti < j.cur.size(); ++ti) UpdateGate(j, static_cast<int>(ti));
}

inline void Fabric::Impl::Deliver(Qp& qp) {
  double got = 0, marked = 0;
  const bool sprayed = qp.pfs.size() > 1;
  for (int pi : qp.pfs) {
    const PathFlow& pf = pfs[pi];
    got += pf.delivered;
    marked += pf.delivered * pf.marked_prob;
  }
  qp.step_got = got;
  qp.step_oos = 0;
  if (got <= 0) {
    if (!qp.in_flight.empty()) CreditDue(qp);
    return;
  }
  const double mtu = opt().mtu_bytes;
  Nic& dn = nics[qp.dst];
  double discarded = 0;
  if (sprayed && qp.spray_bps > 0) {
    // Consecutive packets on different paths overtake each other when the first one's
    // path is slower by more than their spacing: fluid queues plus packet-level jitter
    // where streams merge (reorder.h). Out-of-sequence packets are counted; what the
    // receiver does not keep is sent again.
    const size_t k = qp.pfs.size();
    sp_w.assign(qp.w.begin(), qp.w.end());
    sp_base.assign(k, 0.0);
    sp_jit.assign(k, reorder::PathJitter{});
    double queueing_ns = 0, base_lo = kInf, base_hi = 0;
    bool jitter = false;
    const TimeNs t = now();
    // The stream a sub-flow brings to each queue: its share of what the QP sends.
    const double sent = qp.step_bytes > 0 ? qp.step_bytes : BytesPerStep(qp.spray_bps, dt());
    for (size_t i = 0; i < k; ++i) {
      const PathFlow& pf = pfs[qp.pfs[i]];
      const double stream = sent * qp.w[i];
      double all_ns = 0;
      for (int h = 0; h < pf.n; ++h) {
        const Queue& q = queues[pf.h[h].q];
        const Port& pt = ports[pf.h[h].q / kPriorities];
        const double fluid_ns = q.q * 8e9 / std::max(1.0, pt.cap_bps);
        all_ns += fluid_ns;
        if (!(pf.private_hops & (1u << h))) continue;
        // A path's own delay: queueing and its links' propagation (paths of different
        // lengths or cable runs reorder too).
        sp_base[i] += fluid_ns + static_cast<double>(pt.delay);
        if (q.jit_t < t - dt() || q.jit_arr <= 0) continue;
        sp_jit[i].Add(reorder::StreamWait(q.jit, stream / q.jit_arr));
      }
      jitter |= sp_jit[i].p > 0;
      base_lo = std::min(base_lo, sp_base[i]);
      base_hi = std::max(base_hi, sp_base[i]);
      queueing_ns += qp.w[i] * all_ns;
    }
    const double spacing_ns = mtu * 8e9 / qp.spray_bps;
    // Equal quiet paths (no jitter, delays within a packet's spacing) cannot reorder.
    double p = jitter || base_hi - base_lo > spacing_ns
                   ? reorder::ReorderProbability(sp_w, sp_base, sp_jit, spacing_ns)
                   : 0.0;
    if (p < 1e-9) p = 0;  // rounding: neither counted nor a reason to leave steady state
    if (p > 0) {
      qp.step_oos = p * got / mtu;
      dn.oos += qp.step_oos;
      if (dn.reorder != ReorderMode::kTolerant) {
        const double rtt_ns = 2 * qp.path_latency_ns + queueing_ns;
        const double window = qp.spray_bps * rtt_ns / 8e9 / mtu;
        discarded = got * (1 - reorder::Goodput(dn.reorder, p, window));
      }
    }
  }
  // What arrived (wire bytes; marked packets raise CNPs even when discarded, as a NACK
  // carries the CNP bit) and what the QP keeps.
  const double arrived = got;
  if (discarded > 0) {
    unsteady = true;
    got -= discarded;
    dn.reorder_discarded += discarded;
    qp.sent = std::max(0.0, qp.sent - discarded);  // go-back-N resend
    if (!qp.active && qp.job >= 0 && qp.transfer >= 0 && jobs[qp.job].gated) {
      MarkTransfer(qp.job, qp.transfer);
    }
  }
  if (qp.credit_delay > 0) {
    qp.in_flight.push_back({now() + qp.credit_delay, got, arrived, marked});
    CreditDue(qp);
    return;
  }
  Credit(qp, got, arrived, marked);
}

inline void Fabric::Impl::CreditDue(Qp& qp) {
  // Credited in the step that contains the due instant (the engine reports a step's
  // arrivals at its end).
  while (!qp.in_flight.empty() && qp.in_flight.front().due < now() + dt()) {
    const Qp::Arrival a = qp.in_flight.front();
    qp.in_flight.pop_front();
    Credit(qp, a.bytes, a.arrived, a.marked);
  }
}

// Bytes reach the receiving NIC: `arrived` on the wire, `marked` of them ECN-marked, `got`
// of them kept (a go-back-N NIC discards what overtook): progress, completion, and the
// notification point.
inline void Fabric::Impl::Credit(Qp& qp, double got, double arrived, double marked) {
  const double mtu = opt().mtu_bytes;
  Nic& dn = nics[qp.dst];
  dn.rx += arrived;
  qp.delivered += got;
  qp.lifetime_delivered += got;
  TransferProgress(qp, got);
  if (qp.job < 0 && qp.finish_ns < 0 && qp.lifetime_delivered >= qp.total - kEps) {
    qp.finish_ns = std::max(qp.start_ns, now() + dt() - qp.pipeline_excess_ns);
  }
  if (marked <= 0 && !dn.np_every) return;
  // The receiver's notification point; its feedback returns over the path's latency.
  unsteady = true;
  if (marked > 0) dn.np_marked += marked / mtu;
  CcDelivery d;
  d.now = now();
  d.arrived = arrived;
  d.marked = marked;
  d.mtu = mtu;
  if (dn.np_rtt) d.rtt_ns = RoundTripNs(qp);
  CcFeedback fb[16];
  const NotificationPoint& np = dn.cc->notification_point();
  const int n =
      dn.dcqcn ? static_cast<const DcqcnNotificationPoint&>(np).OnDelivery(d, &qp.np, rng, fb, 16)
               : np.OnDelivery(d, &qp.np, rng, fb, 16);
  const bool sender_on = nics[qp.src].cc_on;
  for (int i = 0; i < n; ++i) {
    const bool cnp = fb[i].kind == CcFeedback::Kind::kCnp;
    if (cnp) dn.np_cnp_sent += 1;
    if (!sender_on) continue;
    // A bare CNP carries nothing; anything else waits in the QP's queue.
    const bool bare = cnp && fb[i].bytes == 0 && fb[i].rtt_ns == 0 && fb[i].ecn_fraction == 0;
    if (!bare) qp.feedback.push_back(fb[i]);
    Push(now() + qp.cnp_delay, kCnp, qp.id, bare ? 0 : qp.fb_gen);
  }
}

void Fabric::Impl::Sources() {
  const TimeNs t = now(), step = dt();
  const double intra_step = BytesPerStep(opt().intra_host_bps, step);
  size_t keep_nics = 0;
  for (size_t ni = 0; ni < active_nics.size(); ++ni) {
    const int nic_index = active_nics[ni];
    Nic& nic = nics[nic_index];
    Port& np = ports[nic.port];
    const bool nic_live = np.live;
    const Queue* nq = &queues[static_cast<size_t>(nic.port) * kPriorities];
    const bool rp_on = nic.cc_on;
    dem.clear();
    // One pass: drop finished QPs from the NIC's active list and collect the demands
    // of the others.
    size_t keep = 0;
    for (size_t k = 0; k < nic.active.size(); ++k) {
      const int id = nic.active[k];
      Qp& qp = qps[id];
      const bool busy = !qp.stopped && (qp.sent < qp.quota - kEps || qp.sent - qp.delivered > kEps);
      if (!busy) {
        qp.active = false;
        qp.send_bps = 0;
        qp.step_bytes = qp.step_got = 0;
        unsteady = true;
        continue;
      }
      nic.active[keep++] = id;
      qp.send_bps = 0;
      const double prev = qp.step_bytes;
      qp.step_bytes = 0;
      qp.demand_bps = 0;
      if (!qp.routed) Route(qp, false);
      const double left = qp.quota - qp.sent;
      if (left <= kEps) {
        if (prev != 0) unsteady = true;
        continue;
      }
      if (qp.local) {
        const double b = std::min(left, intra_step);
        qp.rate_cap_bps = opt().intra_host_bps;
        qp.demand_bps = b == intra_step ? qp.rate_cap_bps : b * 8e9 / static_cast<double>(step);
        qp.step_bytes = qp.step_got = b;
        if (b != prev && Changed(b, prev)) unsteady = true;
        qp.sent += b;
        qp.delivered += b;
        qp.lifetime_sent += b;
        qp.lifetime_delivered += b;
        TransferProgress(qp, b);
        if (qp.job < 0 && qp.finish_ns < 0 && qp.lifetime_delivered >= qp.total - kEps) {
          qp.finish_ns = t + step;
        }
        continue;
      }
      if (qp.pfs.empty()) {
        if (prev != 0) unsteady = true;
        continue;
      }
      if (nq[qp.prio].paused_until > t || !nic_live) {
        unsteady = true;  // a pause expires without an event
        continue;
      }
      double r;
      if (nic.dcqcn) {
        DcqcnRp& rc = qp.dcqcn_rp.rp();
        if (rc.next_event_ns() <= t) rc.AdvanceTo(t);
        r = rp_on ? rc.rate_bps() : std::min(nic.line_bps, np.cap_bps);
      } else {
        RateControl& rc = qp.Rc();
        if (rc.next_event_ns() <= t) rc.AdvanceTo(t);
        r = rp_on ? rc.rate_bps() : std::min(nic.line_bps, np.cap_bps);
      }
      if (qp.cap_bps > 0) r = std::min(r, qp.cap_bps);
      qp.rate_cap_bps = r;
      r = std::min(r, left * 8e9 / static_cast<double>(step));
      if (r > 0) {
        qp.demand_bps = r;
        dem.push_back({r, id, prev});
      } else if (prev != 0) {
        unsteady = true;
      }
    }
    nic.active.resize(keep);
    if (keep == 0) continue;
    active_nics[keep_nics++] = nic_index;
    if (dem.empty()) continue;
    nic.TxBusy(t, t + step);  // every demand is > 0: the NIC sends in this step
    const double line = std::min(nic.line_bps, np.cap_bps);
    double np_out = 0;
    // Water-filling: fair share of the line among QPs, each capped by its demand.
    if (dem.size() == 1) {
      if (dem[0].bps > line) dem[0].bps = line;
    } else {
      double sum = 0;
      for (const Demand& d : dem) sum += d.bps;
      if (sum > line) {
        std::sort(dem.begin(), dem.end(), [](const Demand& a, const Demand& b) {
          return a.bps != b.bps ? a.bps < b.bps : a.qp < b.qp;
        });
        double rem = line;
        for (size_t i = 0; i < dem.size(); ++i) {
          const double share = rem / static_cast<double>(dem.size() - i);
          dem[i].bps = std::min(dem[i].bps, share);
          rem -= dem[i].bps;
        }
      }
    }
    for (const Demand& d : dem) {
      Qp& qp = qps[d.qp];
      if (qp.dlb && t - qp.last_send >= qp.min_inactivity) Route(qp, false);  // flowlet boundary
      if (qp.spray_node >= 0 && t >= qp.next_spray) UpdateSprayWeights(qp);
      const double bytes = BytesPerStep(d.bps, step);
      qp.step_bytes = bytes;
      if (bytes != d.prev && Changed(bytes, d.prev)) unsteady = true;
      qp.last_send = t;
      qp.send_bps = d.bps;
      if (d.bps > 0) qp.spray_bps = d.bps;
      qp.sent += bytes;
      qp.lifetime_sent += bytes;
      nic.tx += bytes;
      // Packet spacing of this flow; a transfer's last (partial) step is no spacing.
      if (qp.sent < qp.total - kEps) nic.TxRate(d.bps);
      if (rp_on) {
        if (nic.dcqcn) {
          qp.dcqcn_rp.rp().OnBytesSent(bytes, t);
        } else {
          qp.Rc().OnBytesSent(bytes, t);
        }
      }
      // The NIC never queues (it sends at most its line rate and stops when
      // paused), so its egress hop is accounted here and bytes go straight to
      // the first switch.
      queues[nic.port * kPriorities + qp.prio].tx += bytes;
      np_out += bytes;
      if (qp.pfs.size() == 1) {
        Admit(pfs[qp.pfs[0]], 1, bytes * qp.w[0], qp);
      } else {
        for (size_t k = 0; k < qp.pfs.size(); ++k) {
          PathFlow& pf = pfs[qp.pfs[k]];
          Admit(pf, 1, bytes * qp.w[k], qp);
        }
      }
    }
    np.out_octets += np_out;
    ports[np.peer_port].in_octets += np_out;
    np.served_t = t;
    np.served = np_out;
  }
  active_nics.resize(keep_nics);
}

void Fabric::Impl::QueuePass() {
  const TimeNs t = now();
  active_q.Swap(next_q);
  next_q.n = 0;
  const int* list = active_q.v.data();
  const size_t count = active_q.n;
  for (size_t i = 0; i < count; ++i) {
    const int qi = list[i];
    Queue& q = queues[qi];
    q.active = false;
    const int port = qi / kPriorities, prio = qi % kPriorities;
    Port& pt = ports[port];
    const double total = q.q + q.arr;
    if (spray_jitter) {
      if (q.arr > 0) {
        // Packet-level waiting time of this step's merged arrivals (reorder.h).
        q.jit = reorder::QueueWait({q.arr, q.arr_sq, q.arr_c2, pt.cap_step},
                                   opt().mtu_bytes * 8e9 / std::max(1.0, pt.cap_bps));
        q.jit_arr = q.arr;
        q.jit_t = t;
      }
      q.arr_sq = q.arr_c2 = 0;
    }
    q.arr = 0;
    if (total <= 0) {
      q.s = 0;
      q.p = 0;
      q.q = 0;
      continue;
    }
    bool stormed = false;
    q.dropping = false;
    if (q.wd == WatchdogState::kStormed) {
      unsteady = true;
      const WatchdogAction action = nodes[pt.node].cfg.watchdog.action;
      stormed = action != WatchdogAction::kAlert;  // alert: detected, still paused
      q.dropping = action == WatchdogAction::kDrop;
    }
    double cap = pt.live ? pt.cap_step : 0;
    if (q.paused_until > t && !stormed) cap = 0;
    if (cap == 0) unsteady = true;
    if (q.dropping) cap = total;
    const double served = std::min(total, cap);
    q.s = served / total;
    q.q = total - served;
    if (q.dropping) {
      q.drop += served;
      pt.out_discards += served;
    } else if (served > 0) {
      q.tx += served;
      pt.out_octets += served;
      Port& peer = ports[pt.peer_port];
      if (pt.error_rate == 0) {
        peer.in_octets += served;  // served - served * 0
      } else {
        const double lost = served * pt.error_rate;
        peer.in_octets += served - lost;
        peer.in_errors += lost;
      }
      if (pt.served_t != t) {
        pt.served_t = t;
        pt.served = 0;
      }
      pt.served += served;
    }
    // The congestion point (RED/ECN by default) on the depth left after this step's
    // service.
    q.p = 0;
    if (q.q > 0) {
      CpQueue cq;
      cq.depth_bytes = q.q;
      cq.kmin = pt.kmin[prio];
      cq.kmax = pt.kmax[prio];
      cq.pmax = pt.pmax[prio];
      cq.ecn = (pt.ecn_mask & (1u << prio)) != 0;
      cq.capacity_bps = pt.cap_bps;
      const double p = cp == &red_ecn ? red_ecn.MarkProbability(cq) : cp->MarkProbability(cq);
      q.p = p;
      q.marked += served * p;
      if (q.q > q.wm) q.wm = q.q;
      if (p > 0) unsteady = true;
      if (q.q > kEps) {
        unsteady = true;  // a standing queue: not quiescent
        q.active = true;
        next_q.Push(qi);
      }
    }
  }
}

void Fabric::Impl::FlowPass() {
  size_t keep = 0;
  uint64_t updates = 0;
  for (size_t i = 0; i < active_qps.size(); ++i) {
    Qp& qp = qps[active_qps[i]];
    if (!qp.active) continue;
    active_qps[keep++] = qp.id;
    if (qp.local) continue;
    for (int pi : qp.pfs) {
      PathFlow& pf = pfs[pi];
      pf.delivered = 0;
      for (int h = pf.n - 1; h >= 1; --h) {
        Hop& hp = pf.h[h];
        const double x = hp.b + hp.in;
        hp.in = 0;
        if (x <= 0) continue;
        ++updates;
        const Queue& q = queues[hp.q];
        const double d = x * q.s;
        hp.b = x - d;
        if (d <= 0) continue;
        const Port& pt = ports[hp.q / kPriorities];
        if (hp.ing >= 0) ReleaseIngress(hp.ing, pt.node, d);
        if (hp.alb >= 0) alb_bytes[hp.alb] += d;
        if (q.dropping) {
          unsteady = true;
          qp.sent = std::max(0.0, qp.sent - d);
          continue;
        }
        double ok = d;
        if (pt.error_rate != 0) {
          unsteady = true;
          const double lost = d * pt.error_rate;
          if (lost > 0) qp.sent = std::max(0.0, qp.sent - lost);
          ok = d - lost;
        }
        if (h == pf.n - 1) {
          pf.delivered += ok;
        } else {
          Admit(pf, h + 1, ok, qp);
        }
      }
      if (pf.delivered > 0) {
        double survive = 1;
        for (int h = 0; h < pf.n; ++h) survive *= 1 - queues[pf.h[h].q].p;
        pf.marked_prob = 1 - survive;
      }
    }
    Deliver(qp);
  }
  active_qps.resize(keep);
  f->flow_hop_updates_ += updates;
}

void Fabric::Impl::SendPfc(int ii, int quanta) {
  const int port = ii / kPriorities, prio = ii % kPriorities;
  Ingress& in = ingress[ii];
  ++in.pfc_tx;
  const Port& pt = ports[port];
  Push(now() + pt.delay, kPfcFrame, pt.peer_port * kPriorities + prio, quanta);
}

void Fabric::Impl::OnPfcFrame(int qi, int quanta) {
  Queue& q = queues[qi];
  const TimeNs t = now();
  ++q.pfc_rx;
  q.last_pfc_rx = t;
  if (q.pause_start >= 0 && q.paused_until <= t) {
    q.pause_ns += static_cast<double>(q.paused_until - q.pause_start);
    q.pause_start = -1;
  }
  if (quanta > 0) {
    if (q.pause_start < 0) q.pause_start = t;
    const double cap = std::max(1.0, ports[qi / kPriorities].nominal_bps);
    q.paused_until = t + static_cast<TimeNs>(quanta * 512.0 * 1e9 / cap);
  } else {
    if (q.pause_start >= 0) q.pause_ns += static_cast<double>(t - q.pause_start);
    q.pause_start = -1;
    q.paused_until = t;
  }
}

void Fabric::Impl::PfcPass() {
  const TimeNs t = now();
  size_t keep = 0;
  int* list = active_ing.v.data();
  for (size_t i = 0; i < active_ing.n; ++i) {
    const int ii = list[i];
    Ingress& in = ingress[ii];
    const Port& pt = ports[ii / kPriorities];
    const int prio = ii % kPriorities;
    if (pt.sw && pt.pfc_on && (pt.lossless & (1u << prio))) {
      double xoff = pt.xoff, xon = pt.xon;
      if (pt.dyn_alpha > 0) {
        xoff = pt.dyn_alpha * std::max(0.0, pt.buffer - buf[pt.node]);
        xon = std::max(0.0, xoff - (pt.xoff - pt.xon));
      }
      if (!in.asserted) {
        if (in.bytes > xoff) {
          const PfcConfig& pfc = nodes[pt.node].cfg.pfc;
          in.asserted = true;
          in.assert_t = t;
          SendPfc(ii, pfc.quanta);
          in.next_refresh = t + pt.quanta_ns / 2;
        }
      } else if (in.bytes < xon) {
        in.asserted = false;
        in.tx_pause_ns += static_cast<double>(t - in.assert_t);
        SendPfc(ii, 0);
      } else if (t >= in.next_refresh) {
        SendPfc(ii, nodes[pt.node].cfg.pfc.quanta);
        in.next_refresh = t + pt.quanta_ns / 2;
      }
    }
    if (in.asserted) unsteady = true;
    if (in.bytes > kEps || in.asserted) {
      list[keep++] = ii;
    } else {
      in.active = false;
    }
  }
  active_ing.n = keep;
  // Storming NICs keep pausing their leaf.
  if (!storm_nics.empty()) unsteady = true;
  for (int ni : storm_nics) {
    Nic& nic = nics[ni];
    for (int prio = 0; prio < kPriorities; ++prio) {
      if (!(nic.storm_mask & (1u << prio))) continue;
      Ingress& in = ingress[nic.port * kPriorities + prio];
      const TimeNs quanta_ns =
          static_cast<TimeNs>(65535 * 512.0 * 1e9 / std::max(1.0, ports[nic.port].nominal_bps));
      if (!in.asserted || t >= in.next_refresh) {
        if (!in.asserted) {
          in.assert_t = t;
          nic.storm_events += 1;
        }
        in.asserted = true;
        SendPfc(nic.port * kPriorities + prio, 65535);
        in.next_refresh = t + quanta_ns / 2;
      }
    }
  }
}

void Fabric::Impl::WatchdogPoll() {
  const TimeNs t = now();
  next_wd_poll = kNever;
  for (Node& n : nodes) {
    if (!n.is_switch || !n.cfg.watchdog.enabled) continue;
    const WatchdogConfig& wd = n.cfg.watchdog;
    next_wd_poll = std::min(next_wd_poll, t + wd.poll_ns);
    for (int p : n.ports) {
      for (int prio = 0; prio < kPriorities; ++prio) {
        if (!(n.cfg.pfc.lossless_mask & (1u << prio))) continue;
        Queue& q = queues[p * kPriorities + prio];
        if (q.wd == WatchdogState::kOperational) {
          if (q.paused_until > t && q.q > kEps) {
            if (q.wd_since < 0) {
              q.wd_since = t;
            } else if (t - q.wd_since >= wd.detection_ns) {
              q.wd = WatchdogState::kStormed;
              ++q.wd_detected;
              if (q.q > kEps) ActivateQueue(p * kPriorities + prio);
            }
          } else {
            q.wd_since = -1;
          }
        } else if (t - q.last_pfc_rx >= wd.restoration_ns) {
          q.wd = WatchdogState::kOperational;
          ++q.wd_restored;
          q.wd_since = -1;
        }
      }
    }
  }
}

void Fabric::Impl::StartIteration(int ji) {
  Job& j = jobs[ji];
  if (j.st.start_ns < 0) j.st.start_ns = now();
  j.running = true;
  j.iter_start = now();
  j.cur.clear();
  j.pending = 0;
  j.gated = false;
  std::fill(j.gate_dirty.begin(), j.gate_dirty.end(), 0);
  for (size_t ti = 0; ti < j.tmpl.size(); ++ti) {
    Transfer tr;
    tr.t = j.tmpl[ti];
    tr.qps = j.tmpl_qps[ti];
    if (!tr.t.gates.empty()) j.gated = true;
    j.cur.push_back(tr);
  }
  for (size_t ti = 0; ti < j.cur.size(); ++ti) {
    Transfer& tr = j.cur[ti];
    const double per = tr.t.bytes / static_cast<double>(tr.qps.size());
    for (int id : tr.qps) {
      Qp& qp = qps[id];
      qp.transfer = static_cast<int>(ti);
      qp.total = per;
      qp.quota = per;
      qp.sent = qp.delivered = 0;
      qp.in_flight.clear();
      ActivateQp(qp);
    }
    if (tr.t.bytes <= 0)
      tr.done = true;
    else
      ++j.pending;
  }
  if (j.gated) UpdateGates(j);
  if (j.pending == 0) {
    j.running = false;
    j.st.collective_ns.push_back(0);
    ++j.st.iterations_done;
    if (j.spec.iterations > 0 && j.st.iterations_done >= j.spec.iterations) {
      j.st.done = true;
      j.st.end_ns = now();
    } else {
      Push(now() + std::max(dt(), j.spec.compute_gap_ns), kJobIter, ji, 0);
    }
  }
}

void Fabric::Impl::RunFault(const FaultSpec& fs) {
  switch (fs.kind) {
    case FaultKind::kLinkDown:
      (void)f->SetLinkUp(fs.target, false);
      break;
    case FaultKind::kLinkUp:
      (void)f->SetLinkUp(fs.target, true);
      break;
    case FaultKind::kLinkFlap: {
      (void)f->SetLinkUp(fs.target, false);
      FaultSpec up = fs;
      up.kind = FaultKind::kLinkUp;
      up.at_ns = now() + fs.period_ns;
      (void)f->ScheduleFault(up);
      if (fs.count > 1) {
        FaultSpec next = fs;
        next.count = fs.count - 1;
        next.at_ns = now() + 2 * fs.period_ns;
        (void)f->ScheduleFault(next);
      }
      break;
    }
    case FaultKind::kSwitchDown:
      (void)f->SetSwitchUp(fs.target, false);
      break;
    case FaultKind::kSwitchUp:
      (void)f->SetSwitchUp(fs.target, true);
      break;
    case FaultKind::kDegradeLink:
      (void)f->DegradeLink(fs.target, fs.capacity_factor, fs.error_rate);
      break;
    case FaultKind::kRestoreLink:
      (void)f->DegradeLink(fs.target, 1.0, 0);
      break;
    case FaultKind::kPfcStormStart:
      (void)f->SetPfcStorm(fs.target, fs.priority, true);
      break;
    case FaultKind::kPfcStormStop:
      (void)f->SetPfcStorm(fs.target, fs.priority, false);
      break;
  }
}

}  // namespace loom::sim
