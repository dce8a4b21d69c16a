#include "api/topology/topology_generate.h"

#include <cstdio>
#include <map>

namespace loom::topology {

using loom::v1::Device;
using loom::v1::DeviceRole;
using loom::v1::Topology;

namespace {

// Hands out interface names per device and builds the topology.
class Builder {
 public:
  explicit Builder(Topology* t) : t_(t) {}

  Device* AddSwitch(const std::string& id, DeviceRole role, uint32_t asn, const std::string& pod) {
    Device* d = t_->add_devices();
    d->set_id(id);
    d->set_role(role);
    d->set_asn(asn);
    d->set_pod(pod);
    ++switches_;
    d->set_router_id("10." + std::to_string((switches_ >> 16) & 255) + "." +
                     std::to_string((switches_ >> 8) & 255) + "." +
                     std::to_string(switches_ & 255));
    return d;
  }

  // Adds a host with its NICs and GPUs; returns the NIC ids.
  std::vector<std::string> AddHost(const std::string& id, const HostShape& shape,
                                   const std::string& pod, bool rail_nics = false) {
    Device* h = t_->add_devices();
    h->set_id(id);
    h->set_role(loom::v1::DEVICE_ROLE_HOST);
    h->set_pod(pod);
    std::vector<std::string> nics;
    for (int n = 0; n < shape.nics_per_host; ++n) {
      Device* nic = t_->add_devices();
      nic->set_id(id + "-nic" + std::to_string(n));
      nic->set_role(loom::v1::DEVICE_ROLE_NIC);
      nic->set_host(id);
      nic->set_pod(pod);
      nic->set_line_rate_bps(shape.nic_speed_bps);
      if (rail_nics) nic->set_rail(static_cast<uint32_t>(n));
      nics.push_back(nic->id());
    }
    for (int g = 0; g < shape.gpus_per_host; ++g) {
      auto* gpu = t_->add_gpus();
      gpu->set_id(id + "-gpu" + std::to_string(g));
      gpu->set_host(id);
      gpu->set_index(g);
      gpu->set_nic(nics[static_cast<size_t>(g) * shape.nics_per_host / shape.gpus_per_host]);
    }
    return nics;
  }

  void Link(const std::string& lo, const std::string& hi, int64_t bps, int64_t delay_ns) {
    std::string lo_if = NextInterface(lo), hi_if = NextInterface(hi);
    auto* l = t_->add_links();
    l->mutable_a()->set_device(lo);
    l->mutable_a()->set_interface(lo_if);
    l->mutable_b()->set_device(hi);
    l->mutable_b()->set_interface(hi_if);
    l->set_id(lo + ":" + lo_if + "--" + hi + ":" + hi_if);
    l->set_capacity_bps(bps);
    l->set_propagation_delay_ns(delay_ns);
  }

 private:
  std::string NextInterface(const std::string& dev) {
    int n = next_if_[dev]++;
    // NICs have one port per NIC device.
    if (dev.find("-nic") != std::string::npos) return "eth" + std::to_string(n);
    return "Ethernet" + std::to_string(n);
  }

  Topology* t_;
  std::map<std::string, int> next_if_;
  uint32_t switches_ = 0;
};

bool CheckHost(const HostShape& h, std::string* error) {
  if (h.gpus_per_host < 1 || h.nics_per_host < 1 || h.nics_per_host > h.gpus_per_host) {
    *error = "need 1 <= nics_per_host <= gpus_per_host";
    return false;
  }
  if (h.nic_speed_bps <= 0) {
    *error = "NIC speed must be positive";
    return false;
  }
  return true;
}

std::string HostId(int h) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "host%03d", h);
  return buf;
}

// 4-octet private ASNs for leaves exercise RFC 6793 handling.
constexpr uint32_t kSpineAsn = 65000;
constexpr uint32_t kLeafAsnBase = 4'200'000'000u;

}  // namespace

bool GenerateClos2(const Clos2Params& p, Topology* out, std::string* error) {
  if (!CheckHost(p.host, error)) return false;
  if (p.leaves < 1 || p.spines < 1 || p.hosts_per_leaf < 1 || p.links_per_spine < 1) {
    *error = "leaves, spines, hosts_per_leaf and links_per_spine must be >= 1";
    return false;
  }
  out->Clear();
  out->set_name(p.name);
  Builder b(out);
  for (int s = 0; s < p.spines; ++s) {
    b.AddSwitch("spine" + std::to_string(s), loom::v1::DEVICE_ROLE_SPINE, kSpineAsn, "");
  }
  int host = 0;
  for (int l = 0; l < p.leaves; ++l) {
    std::string leaf = "leaf" + std::to_string(l);
    b.AddSwitch(leaf, loom::v1::DEVICE_ROLE_LEAF, kLeafAsnBase + l, "");
    for (int s = 0; s < p.spines; ++s) {
      for (int k = 0; k < p.links_per_spine; ++k) {
        b.Link(leaf, "spine" + std::to_string(s), p.uplink_speed_bps, p.propagation_delay_ns);
      }
    }
    for (int h = 0; h < p.hosts_per_leaf; ++h, ++host) {
      for (const auto& nic : b.AddHost(HostId(host), p.host, "")) {
        b.Link(nic, leaf, p.host.nic_speed_bps, p.propagation_delay_ns);
      }
    }
  }
  return true;
}

bool GenerateRail(const RailParams& p, Topology* out, std::string* error) {
  if (!CheckHost(p.host, error)) return false;
  if (p.hosts < 1 || p.hosts_per_stripe < 1 || p.spines < 1 || p.links_per_spine < 1) {
    *error = "hosts, hosts_per_stripe, spines and links_per_spine must be >= 1";
    return false;
  }
  out->Clear();
  out->set_name(p.name);
  Builder b(out);
  const int rails = p.host.nics_per_host;
  const int stripes = (p.hosts + p.hosts_per_stripe - 1) / p.hosts_per_stripe;
  for (int s = 0; s < p.spines; ++s) {
    b.AddSwitch("spine" + std::to_string(s), loom::v1::DEVICE_ROLE_SPINE, kSpineAsn, "");
  }
  for (int st = 0; st < stripes; ++st) {
    for (int r = 0; r < rails; ++r) {
      std::string leaf = "leaf-s" + std::to_string(st) + "-r" + std::to_string(r);
      Device* d = b.AddSwitch(leaf, loom::v1::DEVICE_ROLE_LEAF,
                              kLeafAsnBase + static_cast<uint32_t>(st * rails + r), "");
      d->set_rail(static_cast<uint32_t>(r));
      for (int s = 0; s < p.spines; ++s) {
        for (int k = 0; k < p.links_per_spine; ++k) {
          b.Link(leaf, "spine" + std::to_string(s), p.uplink_speed_bps, p.propagation_delay_ns);
        }
      }
    }
  }
  for (int h = 0; h < p.hosts; ++h) {
    int st = h / p.hosts_per_stripe;
    auto nics = b.AddHost(HostId(h), p.host, "", /*rail_nics=*/true);
    for (int r = 0; r < rails; ++r) {
      b.Link(nics[static_cast<size_t>(r)], "leaf-s" + std::to_string(st) + "-r" + std::to_string(r),
             p.host.nic_speed_bps, p.propagation_delay_ns);
    }
  }
  return true;
}

bool GenerateClos3(const Clos3Params& p, Topology* out, std::string* error) {
  if (!CheckHost(p.host, error)) return false;
  if (p.pods < 1 || p.leaves_per_pod < 1 || p.spines_per_pod < 1 || p.super_spines < 1 ||
      p.hosts_per_leaf < 1) {
    *error = "pods, leaves_per_pod, spines_per_pod, super_spines, hosts_per_leaf must be >= 1";
    return false;
  }
  if (p.super_spines % p.spines_per_pod != 0) {
    *error = "super_spines must be a multiple of spines_per_pod (one plane per pod spine)";
    return false;
  }
  out->Clear();
  out->set_name(p.name);
  Builder b(out);
  const int per_plane = p.super_spines / p.spines_per_pod;
  for (int x = 0; x < p.super_spines; ++x) {
    b.AddSwitch("superspine" + std::to_string(x), loom::v1::DEVICE_ROLE_SUPER_SPINE, 64900, "");
  }
  int host = 0;
  for (int pod = 0; pod < p.pods; ++pod) {
    std::string pod_name = "pod" + std::to_string(pod);
    for (int s = 0; s < p.spines_per_pod; ++s) {
      std::string spine = pod_name + "-spine" + std::to_string(s);
      b.AddSwitch(spine, loom::v1::DEVICE_ROLE_SPINE, 65000 + static_cast<uint32_t>(pod), pod_name);
      for (int x = 0; x < per_plane; ++x) {
        b.Link(spine, "superspine" + std::to_string(s * per_plane + x), p.uplink_speed_bps,
               p.propagation_delay_ns);
      }
    }
    for (int l = 0; l < p.leaves_per_pod; ++l) {
      std::string leaf = pod_name + "-leaf" + std::to_string(l);
      b.AddSwitch(leaf, loom::v1::DEVICE_ROLE_LEAF,
                  kLeafAsnBase + static_cast<uint32_t>(pod * p.leaves_per_pod + l), pod_name);
      for (int s = 0; s < p.spines_per_pod; ++s) {
        b.Link(leaf, pod_name + "-spine" + std::to_string(s), p.uplink_speed_bps,
               p.propagation_delay_ns);
      }
      for (int h = 0; h < p.hosts_per_leaf; ++h, ++host) {
        for (const auto& nic : b.AddHost(HostId(host), p.host, pod_name)) {
          b.Link(nic, leaf, p.host.nic_speed_bps, p.propagation_delay_ns);
        }
      }
    }
  }
  return true;
}

}  // namespace loom::topology
