// The Fabric: names, construction and the public API (counters, configuration). The engine
// state is Fabric::Impl (fabric_impl.h); one step is in fabric_step.cc, quiescent jumps in
// fabric_fastforward.cc.
#include "sim-fabric/fabric.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "sim-fabric/fabric_impl.h"

namespace loom::sim {

const char* ForwardingModeName(ForwardingMode m) {
  switch (m) {
    case ForwardingMode::kStaticHash:
      return "static";
    case ForwardingMode::kDlbFlowlet:
      return "dlb-flowlet";
    case ForwardingMode::kDlbPerPacket:
      return "dlb-per-packet";
    case ForwardingMode::kAlb:
      return "alb";
    case ForwardingMode::kDlbAlb:
      return "dlb-alb";
  }
  return "?";
}

bool ParseForwardingMode(const std::string& s, ForwardingMode* m) {
  if (s == "static" || s == "hash" || s == "ecmp")
    *m = ForwardingMode::kStaticHash;
  else if (s == "dlb-flowlet" || s == "flowlet" || s == "dlb")
    *m = ForwardingMode::kDlbFlowlet;
  else if (s == "dlb-per-packet" || s == "per-packet" || s == "spray")
    *m = ForwardingMode::kDlbPerPacket;
  else if (s == "alb")
    *m = ForwardingMode::kAlb;
  else if (s == "dlb-alb" || s == "dlb+alb")
    *m = ForwardingMode::kDlbAlb;
  else
    return false;
  return true;
}

const char* CollectiveName(Collective c) {
  switch (c) {
    case Collective::kRingAllReduce:
      return "ring-allreduce";
    case Collective::kTreeAllReduce:
      return "tree-allreduce";
    case Collective::kAllGather:
      return "allgather";
    case Collective::kReduceScatter:
      return "reduce-scatter";
    case Collective::kAllToAll:
      return "alltoall";
    case Collective::kIncast:
      return "incast";
    case Collective::kPermutation:
      return "permutation";
    case Collective::kPointToPoint:
      return "p2p";
  }
  return "?";
}

bool ParseCollective(const std::string& s, Collective* c) {
  for (int i = 0; i <= static_cast<int>(Collective::kPointToPoint); ++i) {
    if (s == CollectiveName(static_cast<Collective>(i))) {
      *c = static_cast<Collective>(i);
      return true;
    }
  }
  return false;
}

bool ParseFaultKind(const std::string& s, FaultKind* k) {
  static const std::pair<const char*, FaultKind> kNames[] = {
      {"link-down", FaultKind::kLinkDown},         {"link-up", FaultKind::kLinkUp},
      {"link-flap", FaultKind::kLinkFlap},         {"switch-down", FaultKind::kSwitchDown},
      {"switch-up", FaultKind::kSwitchUp},         {"degrade-link", FaultKind::kDegradeLink},
      {"restore-link", FaultKind::kRestoreLink},   {"pfc-storm-start", FaultKind::kPfcStormStart},
      {"pfc-storm-stop", FaultKind::kPfcStormStop}};
  for (const auto& [n, kind] : kNames) {
    if (s == n) {
      *k = kind;
      return true;
    }
  }
  return false;
}

// ============================================================================ Fabric

Fabric::Fabric(const FabricOptions& opt) : opt_(opt) {}
Fabric::~Fabric() = default;

std::unique_ptr<Fabric> Fabric::Create(const loom::v1::Topology& topo, const FabricOptions& opt,
                                       std::string* error) {
  if (opt.step_ns <= 0) {
    *error = "step_ns must be positive";
    return nullptr;
  }
  std::unique_ptr<Fabric> fab(new Fabric(opt));
  fab->impl_ = std::make_unique<Impl>(fab.get());
  if (!fab->impl_->Build(topo, error)) return nullptr;
  const std::string bad = DcqcnParamsError(opt.dcqcn);
  if (!bad.empty()) {
    *error = "dcqcn: " + bad;
    return nullptr;
  }
  // The switch defaults must hold their lossless headroom (SetPfc checks the same).
  const Status st = fab->SetPfc("*", opt.switch_defaults.pfc);
  if (!st.ok()) {
    *error = "switch_defaults: " + st.message();
    return nullptr;
  }
  return fab;
}

void Fabric::Step() {
  impl_->Step();
  now_ += opt_.step_ns;
}

TimeNs Fabric::Advance(TimeNs limit) {
  if (!opt_.fast_forward || !impl_->TryFastForward(limit)) Step();
  return now_;
}

void Fabric::RunUntil(TimeNs t) {
  while (now_ < t) Advance(t);
}

bool Fabric::RunUntilJobsDone(TimeNs limit) {
  while (now_ < limit) {
    if (AllJobsDone()) return true;
    Advance(limit);
  }
  return AllJobsDone();
}

int Fabric::job_count() const { return static_cast<int>(impl_->jobs.size()); }
int Fabric::qp_count() const { return static_cast<int>(impl_->qps.size()); }

bool Fabric::AllJobsDone() const {
  for (const auto& j : impl_->jobs) {
    if (!j.st.done) return false;
  }
  return true;
}

JobStatus Fabric::GetJob(int job) const {
  if (job < 0 || job >= job_count()) return {};
  return impl_->jobs[job].st;
}

namespace {
// Resolves a GPU or NIC id to a NIC index.
int ResolveNic(const Fabric::Impl& im, const std::string& id, std::string* host) {
  auto g = im.gpu_nic.find(id);
  if (g != im.gpu_nic.end()) {
    if (host) *host = im.gpu_host.at(id);
    return g->second;
  }
  auto n = im.node_by_id.find(id);
  if (n != im.node_by_id.end() && im.nodes[n->second].nic >= 0) {
    const int nic = im.nodes[n->second].nic;
    if (host) *host = im.nics[nic].host.empty() ? id : im.nics[nic].host;
    return nic;
  }
  return -1;
}
}  // namespace

int Fabric::AddJob(const JobSpec& spec, std::string* error) {
  Impl& im = *impl_;
  im.Touch();
  Impl::Job j;
  j.spec = spec;
  j.st.id = spec.id;
  j.st.tenant = spec.tenant;
  if (spec.qps_per_connection < 1 || spec.priority < 0 || spec.priority >= kPriorities) {
    *error = "job " + spec.id + ": qps_per_connection >= 1 and priority 0..7 required";
    return -1;
  }
  for (const auto& r : spec.ranks) {
    std::string host;
    const int nic = ResolveNic(im, r, &host);
    if (nic < 0) {
      *error = "job " + spec.id + ": unknown GPU or NIC " + r;
      return -1;
    }
    j.rank_nic.push_back(nic);
    j.rank_host.push_back(host);
  }
  const int ji = static_cast<int>(im.jobs.size());
  j.tmpl = BuildCollective(spec.collective, static_cast<int>(spec.ranks.size()), spec.message_bytes,
                           SplitMix64(opt_.seed ^ (ji + 1)));
  for (const auto& t : j.tmpl) {
    std::vector<int> ids;
    for (int k = 0; k < spec.qps_per_connection; ++k) {
      Impl::Qp qp;
      qp.id = static_cast<int>(im.qps.size());
      qp.job = ji;
      qp.src = j.rank_nic[t.src];
      qp.dst = j.rank_nic[t.dst];
      qp.local = qp.src == qp.dst || j.rank_host[t.src] == j.rank_host[t.dst];
      qp.dest_qp = im.next_dest_qp++;
      qp.sport = static_cast<uint32_t>(49152 + (SplitMix64(opt_.seed * 31 + qp.dest_qp) % 16384));
      qp.prio = spec.priority;
      qp.color = spec.color;
      qp.cap_bps = spec.max_rate_bps > 0 ? spec.max_rate_bps / spec.qps_per_connection : 0;
      Impl::Nic& n = im.nics[qp.src];
      im.NewRp(qp);
      if (!qp.local) n.fabric_qps.push_back(qp.id);
      ids.push_back(qp.id);
      im.qps.push_back(std::move(qp));
    }
    j.tmpl_qps.push_back(ids);
  }
  j.dependents.assign(j.tmpl.size(), {});
  for (size_t ti = 0; ti < j.tmpl.size(); ++ti) {
    for (int g : j.tmpl[ti].gates) j.dependents[g].push_back(static_cast<int>(ti));
  }
  j.gate_dirty.assign((j.tmpl.size() + 63) / 64, 0);
  im.jobs.push_back(std::move(j));
  im.Push(std::max(now_, spec.start_ns), Impl::kJobIter, ji, 0);
  return ji;
}

int Fabric::AddFlow(const std::string& src, const std::string& dst, double bytes, int priority,
                    double max_rate_bps, uint32_t dest_qp, uint32_t color) {
  Impl& im = *impl_;
  im.Touch();
  const int s = ResolveNic(im, src, nullptr), d = ResolveNic(im, dst, nullptr);
  if (s < 0 || d < 0 || s == d) return -1;
  Impl::Qp qp;
  qp.id = static_cast<int>(im.qps.size());
  qp.src = s;
  qp.dst = d;
  qp.dest_qp = dest_qp ? dest_qp : im.next_dest_qp++;
  qp.sport = static_cast<uint32_t>(49152 + (SplitMix64(opt_.seed * 31 + qp.dest_qp) % 16384));
  qp.prio = std::clamp(priority, 0, kPriorities - 1);
  qp.color = color;
  qp.cap_bps = max_rate_bps;
  qp.total = qp.quota = bytes > 0 ? bytes : kInf;
  qp.start_ns = now_;
  im.NewRp(qp);
  im.nics[s].fabric_qps.push_back(qp.id);
  im.qps.push_back(std::move(qp));
  im.ActivateQp(im.qps.back());
  return im.qps.back().id;
}

void Fabric::StopFlow(int qp) {
  impl_->Touch();
  if (qp >= 0 && qp < qp_count()) impl_->qps[qp].stopped = true;
}

QpInfo Fabric::GetQp(int id) const {
  const Impl& im = *impl_;
  QpInfo info;
  if (id < 0 || id >= qp_count()) return info;
  const Impl::Qp& qp = im.qps[id];
  info.id = id;
  info.job = qp.job >= 0 ? im.jobs[qp.job].spec.id : "";
  info.src_nic = im.nodes[im.nics[qp.src].node].id;
  info.dst_nic = im.nodes[im.nics[qp.dst].node].id;
  info.dest_qp = qp.dest_qp;
  info.priority = qp.prio;
  info.rate_bps = qp.Rc().rate_bps();
  info.target_bps = qp.Rc().target_bps();
  info.alpha = qp.Rc().alpha();
  info.send_bps = qp.active ? qp.send_bps : 0;
  info.sent_bytes = qp.lifetime_sent;
  info.delivered_bytes = qp.lifetime_delivered;
  info.cnps = qp.cnps;
  info.start_ns = qp.start_ns;
  info.finish_ns = qp.finish_ns;
  if (qp.job < 0 && qp.total < kInf) {
    info.ideal_fct_ns =
        qp.total * 8e9 / std::max(1.0, im.nics[qp.src].line_bps) + qp.path_latency_ns;
  }
  info.subflows = static_cast<int>(qp.pfs.size());
  if (!qp.last_ports.empty()) {
    for (int p : qp.last_ports[0]) {
      info.path.push_back(im.nodes[im.ports[p].node].id + ":" + im.ports[p].iface);
    }
  }
  return info;
}

std::vector<QpInfo> Fabric::GetQps() const {
  std::vector<QpInfo> out;
  for (int i = 0; i < qp_count(); ++i) out.push_back(GetQp(i));
  return out;
}

// ---------------------------------------------------------------- faults

Status Fabric::SetLinkUp(const std::string& link_id, bool up) {
  Impl& im = *impl_;
  im.Touch();
  auto it = im.link_by_id.find(link_id);
  if (it == im.link_by_id.end()) return NotFound("no link " + link_id);
  const int pa = im.link_ports[it->second];
  for (int p : {pa, im.ports[pa].peer_port}) {
    if (im.ports[p].admin_up != up) ++im.ports[p].carrier;
    im.ports[p].admin_up = up;
  }
  im.RefreshLive();
  im.routing_dirty = true;
  return Status::Ok();
}

Status Fabric::SetSwitchUp(const std::string& device, bool up) {
  Impl& im = *impl_;
  im.Touch();
  auto it = im.node_by_id.find(device);
  if (it == im.node_by_id.end() || !im.nodes[it->second].is_switch) {
    return NotFound("no switch " + device);
  }
  Impl::Node& n = im.nodes[it->second];
  if (n.up != up) {
    for (int p : n.ports) {
      ++im.ports[p].carrier;
      ++im.ports[im.ports[p].peer_port].carrier;
    }
  }
  n.up = up;
  im.RefreshLive();
  im.routing_dirty = true;
  return Status::Ok();
}

Status Fabric::DegradeLink(const std::string& link_id, double factor, double error_rate) {
  Impl& im = *impl_;
  im.Touch();
  auto it = im.link_by_id.find(link_id);
  if (it == im.link_by_id.end()) return NotFound("no link " + link_id);
  if (factor <= 0 || factor > 1 || error_rate < 0 || error_rate >= 1) {
    return InvalidArgument("capacity_factor must be in (0,1], error_rate in [0,1)");
  }
  const int pa = im.link_ports[it->second];
  for (int p : {pa, im.ports[pa].peer_port}) {
    im.SetCap(im.ports[p], im.ports[p].nominal_bps * factor);
    im.ports[p].error_rate = error_rate;
  }
  return Status::Ok();
}

Status Fabric::SetPfcStorm(const std::string& nic, int priority, bool on) {
  Impl& im = *impl_;
  im.Touch();
  const int ni = ResolveNic(im, nic, nullptr);
  if (ni < 0) return NotFound("no NIC " + nic);
  if (priority < 0 || priority >= kPriorities) return InvalidArgument("priority must be 0..7");
  Impl::Nic& n = im.nics[ni];
  const uint8_t bit = static_cast<uint8_t>(1u << priority);
  if (on) {
    n.storm_mask |= bit;
    if (std::find(im.storm_nics.begin(), im.storm_nics.end(), ni) == im.storm_nics.end()) {
      im.storm_nics.push_back(ni);
    }
  } else if (n.storm_mask & bit) {
    n.storm_mask &= static_cast<uint8_t>(~bit);
    const int ii = n.port * kPriorities + priority;
    if (im.ingress[ii].asserted) {
      im.ingress[ii].asserted = false;
      im.ingress[ii].tx_pause_ns += static_cast<double>(now_ - im.ingress[ii].assert_t);
      im.SendPfc(ii, 0);
    }
    if (n.storm_mask == 0) {
      im.storm_nics.erase(std::find(im.storm_nics.begin(), im.storm_nics.end(), ni));
    }
  }
  return Status::Ok();
}

Status Fabric::ScheduleFault(const FaultSpec& spec) {
  Impl& im = *impl_;
  im.Touch();
  const bool link = spec.kind == FaultKind::kLinkDown || spec.kind == FaultKind::kLinkUp ||
                    spec.kind == FaultKind::kLinkFlap || spec.kind == FaultKind::kDegradeLink ||
                    spec.kind == FaultKind::kRestoreLink;
  if (link && !im.link_by_id.count(spec.target)) return NotFound("no link " + spec.target);
  if ((spec.kind == FaultKind::kSwitchDown || spec.kind == FaultKind::kSwitchUp) &&
      !im.node_by_id.count(spec.target)) {
    return NotFound("no switch " + spec.target);
  }
  if ((spec.kind == FaultKind::kPfcStormStart || spec.kind == FaultKind::kPfcStormStop) &&
      ResolveNic(im, spec.target, nullptr) < 0) {
    return NotFound("no NIC " + spec.target);
  }
  if (spec.kind == FaultKind::kLinkFlap && spec.period_ns <= 0) {
    return InvalidArgument("link-flap needs period_ns > 0");
  }
  im.faults.push_back(spec);
  im.Push(std::max(now_, spec.at_ns), Impl::kFault, static_cast<int>(im.faults.size()) - 1, 0);
  return Status::Ok();
}

// ---------------------------------------------------------------- counters

namespace {
uint64_t U(double x) { return x <= 0 ? 0 : static_cast<uint64_t>(x + 0.5); }
}  // namespace

#define LOOM_FIND_PORT(im, device, iface, pvar)                                \
  auto nit_ = (im).node_by_id.find(device);                                    \
  if (nit_ == (im).node_by_id.end()) return NotFound("no device " + (device)); \
  auto pit_ = (im).nodes[nit_->second].port_by_iface.find(iface);              \
  if (pit_ == (im).nodes[nit_->second].port_by_iface.end())                    \
    return NotFound("no interface " + (device) + ":" + (iface));               \
  const int pvar = pit_->second

Status Fabric::GetInterfaceCounters(const std::string& device, const std::string& iface,
                                    InterfaceCounters* out) const {
  const Impl& im = *impl_;
  LOOM_FIND_PORT(im, device, iface, p);
  const Impl::Port& pt = im.ports[p];
  const double mtu = opt_.mtu_bytes;
  out->in_octets = U(pt.in_octets);
  out->out_octets = U(pt.out_octets);
  out->in_pkts = U(pt.in_octets / mtu);
  out->out_pkts = U(pt.out_octets / mtu);
  out->in_discards = U(pt.in_discards / mtu);
  out->out_discards = U(pt.out_discards / mtu);
  out->in_errors = U(pt.in_errors / mtu);
  out->out_errors = 0;
  out->oper_up = im.PortLive(p);
  out->carrier_transitions = pt.carrier;
  out->capacity_bps = pt.cap_bps;
  return Status::Ok();
}

Status Fabric::GetQueueCounters(const std::string& device, const std::string& iface, int queue,
                                QueueCounters* out) const {
  const Impl& im = *impl_;
  if (queue < 0 || queue >= kPriorities) return InvalidArgument("queue must be 0..7");
  LOOM_FIND_PORT(im, device, iface, p);
  const Impl::Queue& q = im.queues[p * kPriorities + queue];
  const double mtu = opt_.mtu_bytes;
  out->transmit_octets = U(q.tx);
  out->transmit_pkts = U(q.tx / mtu);
  out->dropped_octets = U(q.drop);
  out->dropped_pkts = U(q.drop / mtu);
  out->ecn_marked_octets = U(q.marked);
  out->ecn_marked_pkts = U(q.marked / mtu);
  out->current_depth_bytes = U(q.q);
  out->watermark_bytes = U(q.wm);
  return Status::Ok();
}

Status Fabric::GetPfcCounters(const std::string& device, const std::string& iface, int prio,
                              PfcCounters* out) const {
  const Impl& im = *impl_;
  if (prio < 0 || prio >= kPriorities) return InvalidArgument("priority must be 0..7");
  LOOM_FIND_PORT(im, device, iface, p);
  const Impl::Queue& q = im.queues[p * kPriorities + prio];
  const Impl::Ingress& in = im.ingress[p * kPriorities + prio];
  out->rx_pkts = q.pfc_rx;
  out->tx_pkts = in.pfc_tx;
  double rx_ns = q.pause_ns;
  if (q.pause_start >= 0)
    rx_ns += static_cast<double>(std::min(now_, q.paused_until) - q.pause_start);
  double tx_ns = in.tx_pause_ns;
  if (in.asserted) tx_ns += static_cast<double>(now_ - in.assert_t);
  out->rx_pause_duration_us = U(rx_ns / 1e3);
  out->tx_pause_duration_us = U(tx_ns / 1e3);
  out->paused = q.paused_until > now_;
  out->xoff_sent = in.asserted;
  return Status::Ok();
}

Status Fabric::GetWatchdogCounters(const std::string& device, const std::string& iface, int queue,
                                   WatchdogCounters* out) const {
  const Impl& im = *impl_;
  if (queue < 0 || queue >= kPriorities) return InvalidArgument("queue must be 0..7");
  LOOM_FIND_PORT(im, device, iface, p);
  const Impl::Queue& q = im.queues[p * kPriorities + queue];
  out->state = q.wd;
  out->deadlock_detected = q.wd_detected;
  out->deadlock_restored = q.wd_restored;
  return Status::Ok();
}

Status Fabric::GetNicCounters(const std::string& nic, NicCounters* out) const {
  const Impl& im = *impl_;
  const int ni = ResolveNic(im, nic, nullptr);
  if (ni < 0) return NotFound("no NIC " + nic);
  const Impl::Nic& n = im.nics[ni];
  out->np_cnp_sent = U(n.np_cnp_sent);
  out->np_ecn_marked_roce_packets = U(n.np_marked);
  out->rp_cnp_handled = U(n.rp_handled);
  out->rp_cnp_ignored = U(n.rp_ignored);
  out->out_of_sequence = U(n.oos);
  out->reorder_discarded_bytes = U(n.reorder_discarded);
  out->tx_bytes = U(n.tx);
  out->rx_bytes = U(n.rx);
  out->tx_pause_storm_warning_events = U(n.storm_events);
  out->tx_bursts = n.tx_bursts;
  out->tx_idle_ns = static_cast<uint64_t>(n.tx_idle_ns);
  out->tx_max_spacing_ns =
      n.tx_min_rate_bps > 0 ? U(opt_.mtu_bytes * 8e9 / n.tx_min_rate_bps) : uint64_t{0};
  return Status::Ok();
}

namespace {
struct GroupRef {
  int node = -1, leaf = -1;
};
Status ResolveGroup(const Fabric::Impl& im, const std::string& device, const std::string& dest,
                    GroupRef* g) {
  auto n = im.node_by_id.find(device);
  if (n == im.node_by_id.end() || !im.nodes[n->second].is_switch) {
    return NotFound("no switch " + device);
  }
  auto d = im.node_by_id.find(dest);
  if (d == im.node_by_id.end() || im.nodes[d->second].leaf < 0) {
    return NotFound("no destination leaf " + dest);
  }
  g->node = n->second;
  g->leaf = im.nodes[d->second].leaf;
  return Status::Ok();
}
}  // namespace

Status Fabric::GetNicPeerCounters(const std::string& nic, std::vector<PeerCounters>* out) const {
  const Impl& im = *impl_;
  out->clear();
  const int ni = ResolveNic(im, nic, nullptr);
  if (ni < 0) return NotFound("no NIC " + nic);
  std::vector<std::pair<int, double>> by_dst;  // (destination NIC, bytes)
  for (int id : im.nics[ni].fabric_qps) {
    const Impl::Qp& qp = im.qps[id];
    by_dst.emplace_back(qp.dst, qp.lifetime_sent);
  }
  std::sort(by_dst.begin(), by_dst.end(),
            [&](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < by_dst.size();) {
    const int dst = by_dst[i].first;
    double bytes = 0;
    for (; i < by_dst.size() && by_dst[i].first == dst; ++i) bytes += by_dst[i].second;
    out->push_back({im.nodes[im.nics[dst].node].id, U(bytes)});
  }
  std::sort(out->begin(), out->end(),
            [](const PeerCounters& a, const PeerCounters& b) { return a.peer_nic < b.peer_nic; });
  return Status::Ok();
}

Status Fabric::GetAlbCounters(const std::string& device, const std::string& dest,
                              std::vector<AlbBucketCounters>* out) const {
  const Impl& im = *impl_;
  GroupRef g;
  Status s = ResolveGroup(im, device, dest, &g);
  if (!s.ok()) return s;
  out->clear();
  const Impl::GroupCfg* cfg = im.FindGroup(g.node, g.leaf);
  if (!cfg || cfg->alb.empty()) return NotFound("no ALB table on " + device + " for " + dest);
  for (size_t b = 0; b < cfg->alb.size(); ++b) {
    AlbBucketCounters c;
    c.member = im.ports[cfg->alb[b]].iface;
    c.bytes = U(im.alb_bytes[cfg->alb_base + b]);
    c.pkts = U(im.alb_bytes[cfg->alb_base + b] / opt_.mtu_bytes);
    out->push_back(c);
  }
  return Status::Ok();
}

std::vector<std::string> Fabric::Interfaces(const std::string& device) const {
  std::vector<std::string> out;
  auto it = impl_->node_by_id.find(device);
  if (it == impl_->node_by_id.end()) return out;
  for (int p : impl_->nodes[it->second].ports) out.push_back(impl_->ports[p].iface);
  return out;
}

std::vector<std::string> Fabric::Devices() const {
  std::vector<std::string> out;
  for (const auto& n : impl_->nodes) out.push_back(n.id);
  return out;
}

double Fabric::LinkUtilization(const std::string& device, const std::string& iface) const {
  auto it = impl_->node_by_id.find(device);
  if (it == impl_->node_by_id.end()) return 0;
  auto p = impl_->nodes[it->second].port_by_iface.find(iface);
  if (p == impl_->nodes[it->second].port_by_iface.end()) return 0;
  const Impl::Port& pt = impl_->ports[p->second];
  if (pt.served_t != now_ - opt_.step_ns) return 0;
  return pt.served / std::max(1.0, BytesPerStep(pt.cap_bps, opt_.step_ns));
}

// ---------------------------------------------------------------- config

namespace {
template <typename Fn>
Status ForSwitches(Fabric::Impl& im, const std::string& device, Fn fn);

// Applies `change` to the config of `device`'s switches, then checks the buffer can hold
// the lossless headroom it reserves, and that an explicit headroom is at least the
// minimum; on failure restores every config and says which field and by how much.
template <typename Change>
Status SetBufferConfig(Fabric::Impl& im, const std::string& device, Change change) {
  std::vector<std::pair<int, SwitchConfig>> saved;
  Status st = ForSwitches(im, device, [&](int n) {
    saved.emplace_back(n, im.nodes[n].cfg);
    change(im.nodes[n].cfg);
    im.ApplyPortThresholds(n);
  });
  if (!st.ok()) return st;
  std::string bad;
  for (const auto& [n, cfg] : saved) {
    const auto& node = im.nodes[n];
    for (int p : node.ports) {
      const auto& pt = im.ports[p];
      const double min = im.MinHeadroom(pt);
      if (bad.empty() && pt.pfc_on && pt.lossless && node.cfg.pfc.headroom_bytes > 0 &&
          node.cfg.pfc.headroom_bytes < min) {
        bad = "pfc headroom_bytes " +
              std::to_string(static_cast<int64_t>(node.cfg.pfc.headroom_bytes)) + " on " + node.id +
              " is below the minimum " + std::to_string(static_cast<int64_t>(std::ceil(min))) +
              " (2 x propagation delay and 2 engine steps at line rate + 2 MTU)";
      }
    }
    if (bad.empty() && node.cfg.buffer_bytes > 0 && node.reserved >= node.cfg.buffer_bytes) {
      bad = "buffer_bytes " + std::to_string(static_cast<int64_t>(node.cfg.buffer_bytes)) + " on " +
            node.id + " cannot hold the " +
            std::to_string(static_cast<int64_t>(std::ceil(node.reserved))) +
            " bytes of headroom its lossless ingress queues reserve";
    }
  }
  if (bad.empty()) return Status::Ok();
  for (const auto& [n, cfg] : saved) {
    im.nodes[n].cfg = cfg;
    im.ApplyPortThresholds(n);
  }
  return InvalidArgument(bad);
}

template <typename Fn>
Status ForSwitches(Fabric::Impl& im, const std::string& device, Fn fn) {
  if (device == "*") {
    for (size_t i = 0; i < im.nodes.size(); ++i) {
      if (im.nodes[i].is_switch) fn(static_cast<int>(i));
    }
    return Status::Ok();
  }
  auto it = im.node_by_id.find(device);
  if (it == im.node_by_id.end() || !im.nodes[it->second].is_switch) {
    return NotFound("no switch " + device);
  }
  fn(it->second);
  return Status::Ok();
}
}  // namespace

Status Fabric::SetForwardingMode(const std::string& device, ForwardingMode mode) {
  Impl& im = *impl_;
  im.Touch();
  im.routing_dirty = true;
  return ForSwitches(im, device, [&](int n) { im.nodes[n].cfg.mode = mode; });
}

Status Fabric::SetGroupMode(const std::string& device, const std::string& dest,
                            ForwardingMode mode) {
  Impl& im = *impl_;
  im.Touch();
  GroupRef g;
  Status s = ResolveGroup(im, device, dest, &g);
  if (!s.ok()) return s;
  auto& cfg = im.groups[im.GroupKey(g.node, g.leaf)];
  cfg.has_mode = true;
  cfg.mode = mode;
  im.routing_dirty = true;
  return Status::Ok();
}

Status Fabric::SetDlbProfile(const std::string& device, const DlbProfile& profile) {
  Impl& im = *impl_;
  im.Touch();
  if (profile.sample_ns <= 0 || profile.load_ewma_ns <= 0 || profile.inactivity_ns < 0 ||
      profile.load_weight < 0 || profile.load_weight > 1 || profile.queue_band_bytes <= 0) {
    return InvalidArgument("bad DLB profile");
  }
  return ForSwitches(im, device, [&](int n) { im.nodes[n].cfg.dlb = profile; });
}

Status Fabric::SetHashDestQp(const std::string& device, bool on) {
  Impl& im = *impl_;
  im.Touch();
  im.routing_dirty = true;
  return ForSwitches(im, device, [&](int n) { im.nodes[n].cfg.hash_dest_qp = on; });
}

Status Fabric::SetSprayPriorities(const std::string& device, uint8_t mask) {
  Impl& im = *impl_;
  im.Touch();
  im.routing_dirty = true;
  return ForSwitches(im, device, [&](int n) { im.nodes[n].cfg.spray_mask = mask; });
}

Status Fabric::SetAlbTable(const std::string& device, const std::string& dest,
                           const std::vector<std::string>& buckets) {
  Impl& im = *impl_;
  im.Touch();
  GroupRef g;
  Status s = ResolveGroup(im, device, dest, &g);
  if (!s.ok()) return s;
  if (buckets.empty()) return InvalidArgument("ALB table needs at least one bucket");
  std::vector<int> table;
  for (const auto& iface : buckets) {
    auto it = im.nodes[g.node].port_by_iface.find(iface);
    if (it == im.nodes[g.node].port_by_iface.end()) {
      return NotFound("no interface " + device + ":" + iface);
    }
    table.push_back(it->second);
  }
  auto& cfg = im.groups[im.GroupKey(g.node, g.leaf)];
  if (cfg.alb.size() != table.size()) {
    cfg.alb_base = static_cast<int>(im.alb_bytes.size());
    im.alb_bytes.resize(im.alb_bytes.size() + table.size(), 0.0);
    im.alb_seen.resize(im.alb_bytes.size(), -kNever);
  }
  cfg.alb = std::move(table);
  // A group in DLB + ALB mode (its own or its switch's) keeps it: the table is its shared
  // flowset table. Any other group becomes an ALB group.
  const ForwardingMode mode = cfg.has_mode ? cfg.mode : im.nodes[g.node].cfg.mode;
  if (mode != ForwardingMode::kDlbAlb) {
    cfg.has_mode = true;
    cfg.mode = ForwardingMode::kAlb;
  }
  im.routing_dirty = true;
  return Status::Ok();
}

Status Fabric::InitAlbTable(const std::string& device, const std::string& dest, int buckets) {
  Impl& im = *impl_;
  im.Touch();
  im.ApplyPendingRouting();
  std::vector<std::string> members = GroupMembers(device, dest);
  if (members.empty() || buckets < 1) return InvalidArgument("group has no live members");
  std::vector<std::string> table;
  for (int b = 0; b < buckets; ++b) table.push_back(members[b % members.size()]);
  return SetAlbTable(device, dest, table);
}

Status Fabric::SetEcmpWeights(const std::string& device, const std::string& dest,
                              const std::map<std::string, double>& weights) {
  Impl& im = *impl_;
  im.Touch();
  GroupRef g;
  Status s = ResolveGroup(im, device, dest, &g);
  if (!s.ok()) return s;
  std::map<int, double> w;
  for (const auto& [iface, weight] : weights) {
    auto it = im.nodes[g.node].port_by_iface.find(iface);
    if (it == im.nodes[g.node].port_by_iface.end()) {
      return NotFound("no interface " + device + ":" + iface);
    }
    if (weight < 0) return InvalidArgument("weights must be >= 0");
    w[it->second] = weight;
  }
  im.groups[im.GroupKey(g.node, g.leaf)].weights = std::move(w);
  im.routing_dirty = true;
  return Status::Ok();
}

Status Fabric::SetStaticRoute(const std::string& device, const std::string& dest_leaf,
                              const std::vector<std::string>& interfaces) {
  Impl& im = *impl_;
  im.Touch();
  GroupRef g;
  Status s = ResolveGroup(im, device, dest_leaf, &g);
  if (!s.ok()) return s;
  const int64_t key = im.GroupKey(g.node, g.leaf);
  if (interfaces.empty()) {
    im.static_routes.erase(key);
  } else {
    std::vector<int> ps;
    for (const auto& iface : interfaces) {
      auto it = im.nodes[g.node].port_by_iface.find(iface);
      if (it == im.nodes[g.node].port_by_iface.end()) {
        return NotFound("no interface " + device + ":" + iface);
      }
      if (!im.nodes[im.ports[it->second].peer_node].is_switch) {
        return InvalidArgument(device + ":" + iface + " does not lead to a switch");
      }
      ps.push_back(it->second);
    }
    im.static_routes[key] = std::move(ps);
  }
  im.routing_dirty = true;
  return Status::Ok();
}

void Fabric::SetUpDownRouting(bool on) {
  impl_->Touch();
  impl_->up_down = on;
  impl_->routing_dirty = true;
}

Status Fabric::SetColor(const std::string& device, uint32_t color, const ColorConfig& cfg) {
  Impl& im = *impl_;
  im.Touch();
  if (color == 0) return InvalidArgument("color 0 means uncolored");
  auto it = im.node_by_id.find(device);
  if (it == im.node_by_id.end() || !im.nodes[it->second].is_switch) {
    return NotFound("no switch " + device);
  }
  std::vector<int> ps;
  for (const auto& iface : cfg.interfaces) {
    auto p = im.nodes[it->second].port_by_iface.find(iface);
    if (p == im.nodes[it->second].port_by_iface.end()) {
      return NotFound("no interface " + device + ":" + iface);
    }
    ps.push_back(p->second);
  }
  im.nodes[it->second].colors[color] = {ps, cfg.backup_color};
  im.routing_dirty = true;
  return Status::Ok();
}

Status Fabric::RemoveColor(const std::string& device, uint32_t color) {
  Impl& im = *impl_;
  im.Touch();
  auto it = im.node_by_id.find(device);
  if (it == im.node_by_id.end()) return NotFound("no switch " + device);
  im.nodes[it->second].colors.erase(color);
  im.routing_dirty = true;
  return Status::Ok();
}

Status Fabric::SetJobColor(const std::string& job_id, uint32_t color) {
  Impl& im = *impl_;
  im.Touch();
  for (auto& j : im.jobs) {
    if (j.spec.id != job_id) continue;
    j.spec.color = color;
    for (const auto& ids : j.tmpl_qps) {
      for (int id : ids) im.qps[id].color = color;
    }
    im.routing_dirty = true;
    return Status::Ok();
  }
  return NotFound("no job " + job_id);
}

Status Fabric::SetRoute(const std::string& device, const std::string& dest_nic, uint32_t color,
                        uint32_t backup_color, int traffic_class, uint32_t qp_mask,
                        uint32_t qp_value) {
  Impl& im = *impl_;
  im.Touch();
  auto it = im.node_by_id.find(device);
  if (it == im.node_by_id.end() || !im.nodes[it->second].is_switch) {
    return NotFound("no switch " + device);
  }
  const int nic = ResolveNic(im, dest_nic, nullptr);
  if (nic < 0) return NotFound("no NIC " + dest_nic);
  if (color == 0) return InvalidArgument("route color must not be 0");
  if (traffic_class < -1 || traffic_class >= kPriorities) {
    return InvalidArgument("traffic_class must be -1 (any) or 0..7");
  }
  if ((qp_value & ~qp_mask) != 0) {
    return InvalidArgument("route to " + dest_nic + ": qp_value " + std::to_string(qp_value) +
                           " has bits outside qp_mask " + std::to_string(qp_mask));
  }
  auto& entries = im.nodes[it->second].routes[Impl::RouteKey(nic, traffic_class)];
  Impl::RouteEntry entry{qp_mask, qp_value, color, backup_color};
  auto same = std::find_if(entries.begin(), entries.end(), [&](const Impl::RouteEntry& e) {
    return e.qp_mask == qp_mask && e.qp_value == qp_value;
  });
  if (same != entries.end()) {
    *same = entry;
  } else {
    // Keep more specific masks first, then insertion order.
    auto pos = std::find_if(entries.begin(), entries.end(), [&](const Impl::RouteEntry& e) {
      return std::popcount(e.qp_mask) < std::popcount(qp_mask);
    });
    entries.insert(pos, entry);
  }
  im.routing_dirty = true;
  return Status::Ok();
}

Status Fabric::RemoveRoute(const std::string& device, const std::string& dest_nic,
                           int traffic_class, uint32_t qp_mask, uint32_t qp_value) {
  Impl& im = *impl_;
  im.Touch();
  auto it = im.node_by_id.find(device);
  if (it == im.node_by_id.end() || !im.nodes[it->second].is_switch) {
    return NotFound("no switch " + device);
  }
  const int nic = ResolveNic(im, dest_nic, nullptr);
  if (nic < 0) return NotFound("no NIC " + dest_nic);
  auto not_found = [&] {
    return NotFound("no route on " + device + " to " + dest_nic + " for traffic class " +
                    std::to_string(traffic_class) + " and QP mask/value " +
                    std::to_string(qp_mask) + "/" + std::to_string(qp_value));
  };
  auto& routes = im.nodes[it->second].routes;
  auto r = routes.find(Impl::RouteKey(nic, traffic_class));
  if (r == routes.end()) return not_found();
  auto& entries = r->second;
  auto same = std::find_if(entries.begin(), entries.end(), [&](const Impl::RouteEntry& e) {
    return e.qp_mask == qp_mask && e.qp_value == qp_value;
  });
  if (same == entries.end()) return not_found();
  entries.erase(same);
  if (entries.empty()) routes.erase(r);
  im.routing_dirty = true;
  return Status::Ok();
}

Status Fabric::ClearRoutes(const std::string& device) {
  Impl& im = *impl_;
  im.Touch();
  im.routing_dirty = true;
  return ForSwitches(im, device, [&](int n) { im.nodes[n].routes.clear(); });
}

size_t Fabric::RouteCount(const std::string& device) const {
  auto it = impl_->node_by_id.find(device);
  if (it == impl_->node_by_id.end()) return 0;
  size_t n = 0;
  for (const auto& [key, entries] : impl_->nodes[it->second].routes) n += entries.size();
  return n;
}

Status Fabric::SetEcn(const std::string& device, int priority, const EcnConfig& cfg) {
  Impl& im = *impl_;
  im.Touch();
  if (priority < 0 || priority >= kPriorities) return InvalidArgument("priority must be 0..7");
  if (cfg.pmax < 0 || cfg.pmax > 1 || (cfg.kmax_bytes > 0 && cfg.kmin_bytes > cfg.kmax_bytes)) {
    return InvalidArgument("need 0 <= pmax <= 1 and kmin <= kmax");
  }
  for (const auto& b : cfg.by_speed) {
    if (!(b.speed_bps > 0) || b.pmax < 0 || b.pmax > 1 || b.kmin_bytes < 0 ||
        b.kmin_bytes > b.kmax_bytes) {
      return InvalidArgument("ECN per speed: need speed > 0, 0 <= pmax <= 1, 0 <= kmin <= kmax");
    }
  }
  return ForSwitches(im, device, [&](int n) {
    im.nodes[n].cfg.ecn[priority] = cfg;
    im.ApplyPortThresholds(n);
  });
}

Status Fabric::SetPfc(const std::string& device, const PfcConfig& cfg) {
  Impl& im = *impl_;
  im.Touch();
  if (cfg.xon_bytes > 0 && cfg.xoff_bytes > 0 && cfg.xon_bytes > cfg.xoff_bytes) {
    return InvalidArgument("xon must not exceed xoff");
  }
  return SetBufferConfig(im, device, [&](SwitchConfig& c) { c.pfc = cfg; });
}

Status Fabric::SetBuffer(const std::string& device, double bytes) {
  Impl& im = *impl_;
  im.Touch();
  if (!(bytes > 0)) return InvalidArgument("buffer_bytes must be > 0");
  return SetBufferConfig(im, device, [&](SwitchConfig& c) { c.buffer_bytes = bytes; });
}

Status Fabric::GetBufferInfo(const std::string& device, BufferInfo* out) const {
  const Impl& im = *impl_;
  auto it = im.node_by_id.find(device);
  if (it == im.node_by_id.end() || !im.nodes[it->second].is_switch) {
    return NotFound("no switch " + device);
  }
  const auto& n = im.nodes[it->second];
  *out = {};
  out->reserved_bytes = n.reserved;
  for (int p : n.ports) {
    const auto& pt = im.ports[p];
    out->shared_bytes = pt.buffer;
    if (!pt.pfc_on || !pt.lossless) continue;
    out->lossless_queues += __builtin_popcount(pt.lossless);
    out->headroom_bytes = std::max(out->headroom_bytes, pt.headroom);
    out->min_headroom_bytes = std::max(out->min_headroom_bytes, im.MinHeadroom(pt));
  }
  out->buffer_bytes = out->shared_bytes + out->reserved_bytes;
  return Status::Ok();
}

Status Fabric::SetWatchdog(const std::string& device, const WatchdogConfig& cfg) {
  Impl& im = *impl_;
  im.Touch();
  if (cfg.enabled && (cfg.poll_ns <= 0 || cfg.detection_ns <= 0 || cfg.restoration_ns <= 0)) {
    return InvalidArgument("watchdog times must be positive");
  }
  Status s = ForSwitches(im, device, [&](int n) { im.nodes[n].cfg.watchdog = cfg; });
  im.ArmWatchdog();
  return s;
}

Status Fabric::SetNicReorder(const std::string& nic, ReorderMode mode) {
  Impl& im = *impl_;
  im.Touch();
  if (nic == "*") {
    for (auto& n : im.nics) n.reorder = mode;
    return Status::Ok();
  }
  const int ni = ResolveNic(im, nic, nullptr);
  if (ni < 0) return NotFound("no NIC " + nic);
  im.nics[static_cast<size_t>(ni)].reorder = mode;
  return Status::Ok();
}

Status Fabric::SetDcqcn(const std::string& nic, const DcqcnParams& params) {
  const std::string bad = DcqcnParamsError(params);
  if (!bad.empty()) return InvalidArgument("dcqcn: " + bad);
  Impl& im = *impl_;
  im.Touch();
  auto cc = std::make_shared<const DcqcnCongestionControl>(params);
  auto apply = [&](int ni) {
    im.nics[ni].params = params;
    im.ApplyCc(ni, cc);
  };
  if (nic == "*") {
    for (size_t i = 0; i < im.nics.size(); ++i) apply(static_cast<int>(i));
    return Status::Ok();
  }
  const int ni = ResolveNic(im, nic, nullptr);
  if (ni < 0) return NotFound("no NIC " + nic);
  apply(ni);
  return Status::Ok();
}

Status Fabric::SetCongestionControl(const std::string& nic,
                                    std::shared_ptr<const CongestionControl> cc) {
  if (!cc) return InvalidArgument("congestion control: none given");
  Impl& im = *impl_;
  im.Touch();
  if (nic == "*") {
    for (size_t i = 0; i < im.nics.size(); ++i) im.ApplyCc(static_cast<int>(i), cc);
    return Status::Ok();
  }
  const int ni = ResolveNic(im, nic, nullptr);
  if (ni < 0) return NotFound("no NIC " + nic);
  im.ApplyCc(ni, cc);
  return Status::Ok();
}

const SwitchConfig* Fabric::GetSwitchConfig(const std::string& device) const {
  auto it = impl_->node_by_id.find(device);
  if (it == impl_->node_by_id.end() || !impl_->nodes[it->second].is_switch) return nullptr;
  return &impl_->nodes[it->second].cfg;
}

uint64_t Fabric::FlowHash(const std::string& device, int qp) const {
  auto it = impl_->node_by_id.find(device);
  if (it == impl_->node_by_id.end() || qp < 0 || qp >= qp_count()) return 0;
  return impl_->Hash(it->second, impl_->qps[qp], 0);
}

std::vector<std::string> Fabric::GroupMembers(const std::string& device, const std::string& dest) {
  Impl& im = *impl_;
  im.Touch();
  std::vector<std::string> out;
  GroupRef g;
  if (!ResolveGroup(im, device, dest, &g).ok()) return out;
  if (im.dist.empty()) im.RecomputeDistances();
  im.ApplyPendingRouting();  // the members as the next step will use them
  for (int p : im.Group(g.node, g.leaf)) out.push_back(im.ports[p].iface);
  return out;
}

}  // namespace loom::sim
