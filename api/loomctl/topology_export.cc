#include "api/loomctl/topology_export.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

namespace loom::loomctl {

namespace v1 = loom::v1;

namespace {

bool IsSwitch(v1::DeviceRole r) {
  return r == v1::DEVICE_ROLE_LEAF || r == v1::DEVICE_ROLE_SPINE ||
         r == v1::DEVICE_ROLE_SUPER_SPINE;
}

// The fabric as the exporters see it: hosts grouped by the set of leaves their
// NICs attach to, groups by pod.
struct Grouping {
  struct Group {
    std::string name;
    std::vector<std::string> leaves;  // sorted
    std::vector<std::string> hosts;   // sorted
    std::string pod;                  // "" when its leaves span pods or have none
  };
  std::vector<Group> groups;  // ordered by first leaf
  std::vector<std::string> unattached;
  bool pods = false;
};

Grouping Group(const v1::Topology& topo) {
  std::map<std::string, const v1::Device*> dev;
  for (const auto& d : topo.devices()) dev[d.id()] = &d;
  std::map<std::string, std::set<std::string>> host_leaves;
  std::set<std::string> hosts;
  for (const auto& d : topo.devices()) {
    if (d.role() == v1::DEVICE_ROLE_HOST) hosts.insert(d.id());
  }
  for (const auto& l : topo.links()) {
    for (int side = 0; side < 2; ++side) {
      const auto& nic_end = side == 0 ? l.a() : l.b();
      const auto& other = side == 0 ? l.b() : l.a();
      auto n = dev.find(nic_end.device());
      auto o = dev.find(other.device());
      if (n == dev.end() || o == dev.end()) continue;
      if (n->second->role() != v1::DEVICE_ROLE_NIC || o->second->role() != v1::DEVICE_ROLE_LEAF) {
        continue;
      }
      if (!n->second->host().empty()) host_leaves[n->second->host()].insert(other.device());
    }
  }
  Grouping g;
  std::map<std::set<std::string>, size_t> index;
  for (const auto& h : hosts) {
    auto it = host_leaves.find(h);
    if (it == host_leaves.end() || it->second.empty()) {
      g.unattached.push_back(h);
      continue;
    }
    auto [pos, fresh] = index.emplace(it->second, g.groups.size());
    if (fresh) {
      Grouping::Group grp;
      grp.leaves.assign(it->second.begin(), it->second.end());
      std::set<std::string> pods;
      for (const auto& leaf : grp.leaves) pods.insert(dev.at(leaf)->pod());
      grp.pod = pods.size() == 1 ? *pods.begin() : "";
      g.pods |= !grp.pod.empty();
      g.groups.push_back(std::move(grp));
    }
    g.groups[pos->second].hosts.push_back(h);
  }
  std::sort(g.groups.begin(), g.groups.end(),
            [](const auto& a, const auto& b) { return a.leaves < b.leaves; });
  int multi = 0;
  for (auto& grp : g.groups) {
    grp.name = grp.leaves.size() == 1 ? grp.leaves[0] : "railgroup" + std::to_string(multi++);
  }
  return g;
}

// A Kubernetes label value / object name from an id: [a-z0-9.-] (names) or
// [A-Za-z0-9._-] (label values), other characters as '-', at most 63.
std::string K8sName(const std::string& id, bool lowercase) {
  std::string out;
  for (char c : id) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '.' || (!lowercase && c == '_')) {
      out += lowercase ? static_cast<char>(std::tolower(u)) : c;
    } else {
      out += '-';
    }
  }
  while (!out.empty() && !std::isalnum(static_cast<unsigned char>(out.front()))) out.erase(0, 1);
  while (!out.empty() && !std::isalnum(static_cast<unsigned char>(out.back()))) out.pop_back();
  if (out.size() > 63) out.resize(63);
  return out.empty() ? "x" : out;
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string Slurm(const v1::Topology& topo, const Grouping& g,
                  const std::map<std::string, std::string>& degraded) {
  std::ostringstream o;
  o << "# topology.conf for Slurm's topology/tree plugin, from Loom's topology \"" << topo.name()
    << "\"\n# (loomctl topology export --format slurm). Hosts with the same leaves form one "
       "switch entry;\n# every leaf reaches every spine, so the spines are the one top "
       "entry \"fabric\".\n";
  for (const auto& grp : g.groups) {
    if (grp.leaves.size() > 1) {
      o << "# " << grp.name << ": rail leaves " << SlurmHostlist(grp.leaves) << "\n";
    }
  }
  for (const auto& [host, why] : degraded) o << "# degraded: " << host << ": " << why << "\n";
  for (const auto& h : g.unattached) o << "# not attached to any leaf: " << h << "\n";
  std::map<std::string, std::vector<std::string>> by_pod;
  for (const auto& grp : g.groups) {
    o << "SwitchName=" << grp.name << " Nodes=" << SlurmHostlist(grp.hosts) << "\n";
    by_pod[g.pods ? "pod-" + (grp.pod.empty() ? std::string("mixed") : grp.pod) : ""].push_back(
        grp.name);
  }
  std::vector<std::string> top;
  for (const auto& [pod, names] : by_pod) {
    if (pod.empty()) {
      top.insert(top.end(), names.begin(), names.end());
      continue;
    }
    o << "SwitchName=" << pod << " Switches=" << SlurmHostlist(names) << "\n";
    top.push_back(pod);
  }
  if (!top.empty()) o << "SwitchName=fabric Switches=" << SlurmHostlist(top) << "\n";
  return o.str();
}

std::string Kueue(const v1::Topology& topo, const Grouping& g,
                  const std::map<std::string, std::string>& degraded) {
  std::ostringstream o;
  o << "# Kueue topology-aware scheduling, from Loom's topology \"" << topo.name()
    << "\" (loomctl topology export --format kueue):\n# a Topology object and the node "
       "labels its levels name. Apply with\n#   kubectl apply --server-side "
       "--field-manager=loom -f FILE\n";
  o << "apiVersion: kueue.x-k8s.io/v1alpha1\nkind: Topology\nmetadata:\n  name: "
    << K8sName("loom-" + topo.name(), true) << "\nspec:\n  levels:\n";
  if (g.pods) o << "  - nodeLabel: loom.io/pod\n";
  o << "  - nodeLabel: loom.io/leaf-group\n  - nodeLabel: kubernetes.io/hostname\n";
  for (const auto& grp : g.groups) {
    for (const auto& h : grp.hosts) {
      o << "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: " << h << "\n  labels:\n";
      if (g.pods) o << "    loom.io/pod: " << Quote(K8sName(grp.pod, false)) << "\n";
      o << "    loom.io/leaf-group: " << Quote(K8sName(grp.name, false)) << "\n";
      auto d = degraded.find(h);
      o << "    loom.io/fabric-health: " << (d == degraded.end() ? "\"ok\"" : "\"degraded\"")
        << "\n";
      if (d != degraded.end()) {
        o << "  annotations:\n    loom.io/fabric-health-reason: " << Quote(d->second) << "\n";
      }
    }
  }
  return o.str();
}

std::string Volcano(const v1::Topology& topo, const Grouping& g,
                    const std::map<std::string, std::string>& degraded) {
  std::ostringstream o;
  o << "# Volcano HyperNodes (topology.volcano.sh/v1alpha1), from Loom's topology \"" << topo.name()
    << "\"\n# (loomctl topology export --format volcano): tier 1 = hosts "
       "sharing leaves, then pods, then the fabric.\n";
  for (const auto& [host, why] : degraded) o << "# degraded: " << host << ": " << why << "\n";
  auto hypernode = [&](const std::string& name, int tier, const char* type,
                       const std::vector<std::string>& members) {
    o << "---\napiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata:\n  name: "
      << name << "\nspec:\n  tier: " << tier << "\n  members:\n";
    for (const auto& m : members) {
      o << "  - type: " << type << "\n    selector:\n      exactMatch:\n        name: " << m
        << "\n";
    }
  };
  std::map<std::string, std::vector<std::string>> by_pod;
  for (const auto& grp : g.groups) {
    const std::string name = K8sName(grp.name, true);
    hypernode(name, 1, "Node", grp.hosts);
    by_pod[g.pods ? K8sName("pod-" + (grp.pod.empty() ? std::string("mixed") : grp.pod), true) : ""]
        .push_back(name);
  }
  std::vector<std::string> top;
  for (const auto& [pod, names] : by_pod) {
    if (pod.empty()) {
      top.insert(top.end(), names.begin(), names.end());
      continue;
    }
    hypernode(pod, 2, "HyperNode", names);
    top.push_back(pod);
  }
  hypernode(K8sName("fabric-" + topo.name(), true), g.pods ? 3 : 2, "HyperNode", top);
  return o.str();
}

}  // namespace

std::string SlurmHostlist(std::vector<std::string> names) {
  // prefix -> width -> numbers
  std::map<std::string, std::map<size_t, std::set<uint64_t>>> numbered;
  std::vector<std::string> plain;
  for (const auto& n : names) {
    size_t i = n.size();
    while (i > 0 && std::isdigit(static_cast<unsigned char>(n[i - 1]))) --i;
    const size_t digits = n.size() - i;
    if (digits == 0 || digits > 18) {
      plain.push_back(n);
      continue;
    }
    numbered[n.substr(0, i)][digits].insert(std::stoull(n.substr(i)));
  }
  std::vector<std::string> parts = plain;
  for (const auto& [prefix, widths] : numbered) {
    for (const auto& [width, nums] : widths) {
      auto pad = [w = width](uint64_t v) {
        std::string s = std::to_string(v);
        return std::string(s.size() < w ? w - s.size() : 0, '0') + s;
      };
      if (nums.size() == 1) {
        parts.push_back(prefix + pad(*nums.begin()));
        continue;
      }
      std::string ranges;
      for (auto it = nums.begin(); it != nums.end();) {
        uint64_t first = *it, last = first;
        for (++it; it != nums.end() && *it == last + 1; ++it) last = *it;
        ranges += (ranges.empty() ? "" : ",") + pad(first) + (last > first ? "-" + pad(last) : "");
      }
      parts.push_back(prefix + "[" + ranges + "]");
    }
  }
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

std::map<std::string, std::string> DegradedNodes(const v1::Topology& topo,
                                                 const std::vector<v1::LinkStatus>& links) {
  std::map<std::string, const v1::Device*> dev;
  for (const auto& d : topo.devices()) dev[d.id()] = &d;
  auto role = [&](const std::string& id) {
    auto it = dev.find(id);
    return it == dev.end() ? v1::DEVICE_ROLE_UNSPECIFIED : it->second->role();
  };
  std::map<std::string, std::string> out;
  std::map<std::string, std::pair<int, int>> uplinks;  // leaf -> (lost, total)
  std::map<std::string, std::set<std::string>> leaf_hosts;
  for (const auto& ls : links) {
    const auto& l = ls.link();
    const bool lost = ls.oper_state() == v1::LINK_OPER_STATE_DOWN ||
                      ls.admin_state() == v1::LINK_ADMIN_STATE_DRAINED;
    for (int side = 0; side < 2; ++side) {
      const std::string& me = side == 0 ? l.a().device() : l.b().device();
      const std::string& peer = side == 0 ? l.b().device() : l.a().device();
      if (role(me) == v1::DEVICE_ROLE_NIC && role(peer) == v1::DEVICE_ROLE_LEAF) {
        const std::string& host = dev.at(me)->host();
        if (!host.empty()) leaf_hosts[peer].insert(host);
        if (lost && !host.empty() && !out.count(host)) {
          out[host] = "NIC link " + l.id() + " is " +
                      (ls.oper_state() == v1::LINK_OPER_STATE_DOWN ? "down" : "drained");
        }
      }
      if (role(me) == v1::DEVICE_ROLE_LEAF && IsSwitch(role(peer)) &&
          role(peer) != v1::DEVICE_ROLE_LEAF) {
        auto& u = uplinks[me];
        u.first += lost;
        u.second += 1;
      }
    }
  }
  for (const auto& [leaf, u] : uplinks) {
    if (2 * u.first <= u.second) continue;
    for (const auto& host : leaf_hosts[leaf]) {
      if (!out.count(host)) {
        out[host] = "leaf " + leaf + " lost " + std::to_string(u.first) + " of " +
                    std::to_string(u.second) + " uplinks";
      }
    }
  }
  return out;
}

bool ExportTopology(const v1::Topology& topo, const std::string& format,
                    const std::map<std::string, std::string>& degraded, std::string* out,
                    std::string* error) {
  if (format != "slurm" && format != "kueue" && format != "volcano") {
    *error = "--format: \"" + format.substr(0, 32) + "\" is not slurm, kueue or volcano";
    return false;
  }
  const Grouping g = Group(topo);
  if (g.groups.empty()) {
    *error = "topology \"" + topo.name() + "\" has no host attached to a leaf";
    return false;
  }
  *out = format == "slurm"   ? Slurm(topo, g, degraded)
         : format == "kueue" ? Kueue(topo, g, degraded)
                             : Volcano(topo, g, degraded);
  return true;
}

}  // namespace loom::loomctl
