// Building the engine from a topology (fabric_impl.h): nodes, ports, NICs, the queues and
// their ECN/PFC thresholds per port speed, reserved PFC headroom, the PFC watchdog clock.
#include <algorithm>
#include <cmath>
#include <string>

#include "sim-fabric/fabric_impl.h"

namespace loom::sim {

bool Fabric::Impl::Build(const loom::v1::Topology& t, std::string* error) {
  topo = t;
  for (const auto& d : t.devices()) {
    if (d.role() == loom::v1::DEVICE_ROLE_HOST) continue;
    Node n;
    n.id = d.id();
    n.role = d.role();
    n.is_switch = d.role() != loom::v1::DEVICE_ROLE_NIC;
    n.cfg = opt().switch_defaults;
    n.hash_seed = SplitMix64(opt().seed ^ SplitMix64(nodes.size() + 17));
    node_by_id[n.id] = static_cast<int>(nodes.size());
    if (!n.is_switch) {
      Nic nic;
      nic.node = static_cast<int>(nodes.size());
      nic.host = d.host();
      nic.line_bps = static_cast<double>(d.line_rate_bps());
      nic.params = opt().dcqcn;
      SetNicCc(nic, opt().congestion_control
                        ? opt().congestion_control
                        : std::make_shared<const DcqcnCongestionControl>(opt().dcqcn));
      nic.reorder = opt().nic_reorder;
      n.nic = static_cast<int>(nics.size());
      nics.push_back(nic);
    }
    nodes.push_back(std::move(n));
  }
  for (int li = 0; li < t.links_size(); ++li) {
    const auto& l = t.links(li);
    auto a = node_by_id.find(l.a().device()), b = node_by_id.find(l.b().device());
    if (a == node_by_id.end() || b == node_by_id.end()) {
      *error = "link " + l.id() + " names an unknown device";
      return false;
    }
    link_by_id[l.id()] = li;
    const int pa = static_cast<int>(ports.size()), pb = pa + 1;
    for (int side = 0; side < 2; ++side) {
      Port p;
      p.node = side == 0 ? a->second : b->second;
      p.peer_node = side == 0 ? b->second : a->second;
      p.peer_port = side == 0 ? pb : pa;
      p.link = li;
      p.iface = side == 0 ? l.a().interface() : l.b().interface();
      p.nominal_bps = p.cap_bps = static_cast<double>(l.capacity_bps());
      p.delay = l.propagation_delay_ns();
      nodes[p.node].ports.push_back(static_cast<int>(ports.size()));
      nodes[p.node].port_by_iface[p.iface] = static_cast<int>(ports.size());
      ports.push_back(p);
    }
    link_ports.push_back(pa);
  }
  for (auto& nic : nics) {
    Node& n = nodes[nic.node];
    if (n.ports.size() != 1) {
      *error = "NIC " + n.id + " must have exactly one link";
      return false;
    }
    nic.port = n.ports[0];
    nic.leaf_node = ports[nic.port].peer_node;
    if (nic.line_bps <= 0 || nic.line_bps > ports[nic.port].cap_bps) {
      nic.line_bps = ports[nic.port].cap_bps;
    }
    if (nodes[nic.leaf_node].leaf < 0) {
      nodes[nic.leaf_node].leaf = static_cast<int>(leaves.size());
      leaves.push_back(nic.leaf_node);
    }
  }
  for (const auto& g : t.gpus()) {
    auto it = node_by_id.find(g.nic());
    if (it == node_by_id.end() || nodes[it->second].nic < 0) {
      *error = "GPU " + g.id() + " names an unknown NIC";
      return false;
    }
    gpu_nic[g.id()] = nodes[it->second].nic;
    gpu_host[g.id()] = g.host();
  }
  buf.assign(nodes.size(), 0.0);
  RefreshLive();
  queues.resize(ports.size() * kPriorities);
  ingress.resize(ports.size() * kPriorities);
  active_q.Reset(queues.size());
  next_q.Reset(queues.size());
  active_ing.Reset(ingress.size());
  for (size_t n = 0; n < nodes.size(); ++n) ApplyPortThresholds(static_cast<int>(n));
  ArmWatchdog();
  return true;
}

void Fabric::Impl::ApplyPortThresholds(int node) {
  Node& n = nodes[node];
  for (int p : n.ports) {
    Port& pt = ports[p];
    const double speed = pt.nominal_bps / 100e9;
    double max_kmax = 0;
    for (int pr = 0; pr < kPriorities; ++pr) {
      const EcnConfig& e = n.cfg.ecn[pr];
      pt.ecn_on[pr] = n.is_switch && e.enabled;
      pt.kmin[pr] = e.kmin_bytes > 0 ? e.kmin_bytes : 100e3 * speed;
      pt.kmax[pr] = e.kmax_bytes > 0 ? e.kmax_bytes : 400e3 * speed;
      pt.pmax[pr] = e.pmax;
      for (const auto& b : e.by_speed) {
        if (b.speed_bps != pt.nominal_bps) continue;
        pt.kmin[pr] = b.kmin_bytes;
        pt.kmax[pr] = b.kmax_bytes;
        pt.pmax[pr] = b.pmax;
      }
      if (pt.ecn_on[pr]) max_kmax = std::max(max_kmax, pt.kmax[pr]);
    }
    const PfcConfig& c = n.cfg.pfc;
    pt.sw = n.is_switch;
    pt.pfc_on = c.enabled;
    pt.lossless = c.lossless_mask;
    pt.dyn_alpha = c.dynamic_alpha;
    pt.lossy_alpha = n.cfg.lossy_alpha;
    if (max_kmax == 0) max_kmax = 400e3 * speed;
    pt.xoff = c.xoff_bytes > 0 ? c.xoff_bytes : 1.25 * max_kmax;
    pt.xon = c.xon_bytes > 0 ? c.xon_bytes : std::max(0.0, pt.xoff - 4 * opt().mtu_bytes);
    pt.headroom = c.headroom_bytes > 0 ? c.headroom_bytes : MinHeadroom(pt);
    pt.quanta_ns = static_cast<TimeNs>(c.quanta * 512.0 * 1e9 / std::max(1.0, pt.nominal_bps));
    pt.ecn_mask = 0;
    for (int pr = 0; pr < kPriorities; ++pr) {
      if (pt.ecn_on[pr]) pt.ecn_mask |= static_cast<uint8_t>(1u << pr);
    }
    SetCap(pt, pt.cap_bps);
  }
  // Headroom is reserved per lossless ingress queue out of the buffer; the rest is the
  // shared pool that dynamic thresholds divide and the lossy classes use.
  n.reserved = 0;
  for (int p : n.ports) {
    const Port& pt = ports[p];
    if (!n.is_switch || !pt.pfc_on) continue;
    n.reserved += pt.headroom * static_cast<double>(__builtin_popcount(pt.lossless));
  }
  const double total = n.cfg.buffer_bytes > 0 ? n.cfg.buffer_bytes : n.reserved + 64e6;
  for (int p : n.ports) ports[p].buffer = std::max(0.0, total - n.reserved);
}

void Fabric::Impl::ArmWatchdog() {
  next_wd_poll = kNever;
  for (const Node& n : nodes) {
    if (n.is_switch && n.cfg.watchdog.enabled) {
      next_wd_poll = std::min(next_wd_poll, now() + n.cfg.watchdog.poll_ns);
    }
  }
}

}  // namespace loom::sim
