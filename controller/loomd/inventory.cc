#include "controller/loomd/inventory.h"

#include <fnmatch.h>

#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>

#include "common/tls_files.h"
#include "controller/loomd/config.h"
#include "southbound/bgp/prefix_plan.h"

namespace loom::loomd {
namespace {

// The device's gNMI TLS settings (config.proto GnmiTlsConfig): unset or
// insecure = plaintext; otherwise TLS with the files given.
loom::TlsClientConfig GnmiTlsOf(const v1::GnmiEndpoint& g) {
  loom::TlsClientConfig t;
  if (!g.has_tls() || g.tls().insecure()) return t;
  t.enabled = true;
  t.ca_path = g.tls().ca_path();
  t.cert_path = g.tls().cert_path();
  t.key_path = g.tls().key_path();
  t.server_name = g.tls().server_name();
  return t;
}

bool IsSwitch(v1::DeviceRole r) {
  return r == v1::DEVICE_ROLE_LEAF || r == v1::DEVICE_ROLE_SPINE ||
         r == v1::DEVICE_ROLE_SUPER_SPINE;
}

// Catalogue signals that do not apply to a role (never subscribed or listed).
bool AppliesTo(const std::string& signal, v1::DeviceRole role) {
  if (role == v1::DEVICE_ROLE_NIC) {
    return signal != "queue-counters" && signal != "ecn-marks" && signal != "queue-watermark" &&
           signal != "queue-depth" && signal != "pfc-watchdog" && signal != "alb-buckets";
  }
  return signal != "nic-roce";
}

// The first line of a secret reference: "env:VAR" or "file:PATH" (a trailing CR
// dropped). `bad_form` is the error for a reference of neither form.
bool ReadSecretRef(const std::string& ref, const std::string& bad_form, std::string* text,
                   std::string* error) {
  if (ref.rfind("env:", 0) == 0) {
    const char* v = std::getenv(ref.substr(4).c_str());
    if (v == nullptr) {
      *error = "environment variable " + ref.substr(4) + " is not set";
      return false;
    }
    *text = v;
    *text = text->substr(0, text->find('\n'));
  } else if (ref.rfind("file:", 0) == 0) {
    std::ifstream in(ref.substr(5));
    if (!in || !std::getline(in, *text)) {
      *error = "cannot read " + ref.substr(5);
      return false;
    }
  } else {
    *error = bad_form;
    return false;
  }
  if (!text->empty() && text->back() == '\r') text->pop_back();
  return true;
}

bool ReadCredentials(const std::string& ref, std::string* user, std::string* password,
                     std::string* error) {
  std::string text;
  if (!ReadSecretRef(ref, "must be env:VAR or file:PATH", &text, error)) return false;
  const size_t colon = text.find(':');
  if (colon == std::string::npos || colon == 0) {
    *error = "the secret must be user:password";
    return false;
  }
  *user = text.substr(0, colon);
  *password = text.substr(colon + 1);
  return true;
}

// A BGP session password from its reference: "env:VAR" or "file:PATH", the
// first line of either (a trailing CR is dropped).
bool ReadBgpPassword(const std::string& ref, std::string* password, std::string* error) {
  std::string text;
  if (!ReadSecretRef(ref,
                     "\"" + ref + "\" must be env:VAR or file:PATH (a reference, not the password)",
                     &text, error)) {
    return false;
  }
  if (text.empty()) {
    *error = "the password is empty";
    return false;
  }
  // Linux TCP_MD5SIG_MAXKEYLEN.
  if (text.size() > 80) {
    *error = "the password is " + std::to_string(text.size()) +
             " bytes; TCP MD5 keys are at most 80 (TCP_MD5SIG_MAXKEYLEN)";
    return false;
  }
  *password = text;
  return true;
}

}  // namespace

bool GlobMatch(const std::string& pattern, const std::string& text) {
  return fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

bool ResolveInventory(const v1::LoomdConfig& config, const v1::Topology& topology,
                      const telemetry::ProfileSet& profiles, Inventory* out, std::string* error) {
  std::map<std::string, v1::DeviceRole> roles;
  for (const auto& d : topology.devices()) roles[d.id()] = d.role();
  out->devices.clear();
  for (const auto& d : topology.devices()) out->devices[d.id()].set_id(d.id());
  // Legacy single-server and per-target fields.
  if (!config.telemetry_address().empty()) {
    for (const auto& d : topology.devices()) {
      if (!IsSwitch(d.role())) continue;
      auto* g = out->devices[d.id()].mutable_gnmi();
      g->set_address(config.telemetry_address());
      g->set_platform("loom-fabric");
    }
  }
  for (int i = 0; i < config.telemetry_targets_size(); ++i) {
    const auto& t = config.telemetry_targets(i);
    if (!roles.count(t.name())) {
      *error = "telemetry_targets[" + std::to_string(i) + "] (" + t.name() +
               "): not a device of the topology";
      return false;
    }
    auto* g = out->devices[t.name()].mutable_gnmi();
    g->set_address(t.address());
    if (g->platform().empty()) g->set_platform("loom-fabric");
  }
  for (int k = 0; k < config.device_defaults_size(); ++k) {
    const auto& def = config.device_defaults(k);
    if (!def.device().id().empty()) {
      *error = "device_defaults[" + std::to_string(k) + "].device.id: must be empty in defaults";
      return false;
    }
  }
  std::set<std::string> seen;
  for (int i = 0; i < config.devices_size(); ++i) {
    const auto& d = config.devices(i);
    const std::string where = "devices[" + std::to_string(i) + "] (" + d.id() + ")";
    if (d.id().empty()) {
      *error = "devices[" + std::to_string(i) + "].id: required";
      return false;
    }
    if (!roles.count(d.id())) {
      *error = where + ": not a device of the topology (the inventory lists topology devices only)";
      return false;
    }
    if (!seen.insert(d.id()).second) {
      *error = where + ": listed twice";
      return false;
    }
  }
  // Defaults in order, then the device's own entry.
  for (auto& [id, entry] : out->devices) {
    for (const auto& def : config.device_defaults()) {
      if (def.role() != v1::DEVICE_ROLE_UNSPECIFIED && def.role() != roles[id]) continue;
      if (!def.name_pattern().empty() && !GlobMatch(def.name_pattern(), id)) continue;
      entry.MergeFrom(def.device());
    }
    for (const auto& d : config.devices()) {
      if (d.id() == id) entry.MergeFrom(d);
    }
    entry.set_id(id);
    auto* g = entry.mutable_gnmi();
    // "{id}" in the address.
    std::string addr = g->address();
    for (size_t p = addr.find("{id}"); p != std::string::npos; p = addr.find("{id}")) {
      addr.replace(p, 4, id);
    }
    g->set_address(addr);
    const std::string where = "device " + id;
    if (!addr.empty()) {
      std::string host;
      int port = 0;
      if (!SplitHostPort(addr, &host, &port) || port == 0) {
        *error = where + ": gnmi.address \"" + addr + "\" is not host:port";
        return false;
      }
      if (g->platform().empty()) {
        *error = where +
                 ": gnmi.platform is required with an address (sonic, eos, junos, nxos, "
                 "cumulus, host, openconfig, loom-fabric)";
        return false;
      }
    }
    if (!g->platform().empty() && !profiles.profiles.count(g->platform())) {
      std::string known;
      for (const auto& [name, _] : profiles.profiles) known += (known.empty() ? "" : ", ") + name;
      *error =
          where + ": gnmi.platform \"" + g->platform() + "\" has no profile (known: " + known + ")";
      return false;
    }
    for (const auto& e : g->encodings()) {
      if (e != "PROTO" && e != "JSON_IETF" && e != "JSON") {
        *error = where + ": gnmi.encodings: unknown encoding \"" + e + "\"";
        return false;
      }
    }
    // gNMI TLS: insecure excludes the other fields; the files must parse
    // (a bad file is a configuration error now, not handshake failures later).
    const auto& tls = g->tls();
    if (g->has_tls() && tls.insecure() &&
        (!tls.ca_path().empty() || !tls.cert_path().empty() || !tls.key_path().empty() ||
         !tls.server_name().empty())) {
      *error = where +
               ": gnmi.tls.insecure: true (plaintext) cannot be combined with ca_path, "
               "cert_path, key_path or server_name (drop insecure to use TLS)";
      return false;
    }
    if (std::string e = loom::CheckTlsClientFiles(GnmiTlsOf(*g), "gnmi.tls."); !e.empty()) {
      *error = where + ": " + e;
      return false;
    }
    if (!entry.interface_aliases().empty()) {
      std::set<std::string> names;
      for (const auto& l : topology.links()) {
        for (const auto* e : {&l.a(), &l.b()}) {
          if (e->device() == id) names.insert(e->interface());
        }
      }
      for (const auto& [alias, name] : entry.interface_aliases()) {
        if (!names.count(name)) {
          *error = where + ": interface_aliases[" + alias + "]: \"" + name +
                   "\" is not an interface of the device in the topology";
          return false;
        }
      }
    }
    if (roles[id] != v1::DEVICE_ROLE_NIC && entry.has_nic()) {
      *error = where + ": nic capabilities on a device that is not a NIC";
      return false;
    }
  }
  return true;
}

bool BuildTelemetryTargets(const Inventory& inventory, const v1::Topology& topology,
                           const telemetry::ProfileSet& profiles, TimeNs sample_interval_ns,
                           std::vector<telemetry::TargetConfig>* out, std::string* error) {
  std::map<std::string, v1::DeviceRole> roles;
  for (const auto& d : topology.devices()) roles[d.id()] = d.role();
  out->clear();
  for (const auto& [id, entry] : inventory.devices) {
    const auto& g = entry.gnmi();
    if (g.address().empty()) continue;
    telemetry::TargetConfig t;
    t.name = id;
    t.address = g.address();
    // Only the signals that apply to the device's role.
    auto profile = std::make_shared<v1::TelemetryProfile>(profiles.profiles.at(g.platform()));
    const v1::DeviceRole role = roles[id];
    auto* sigs = profile->mutable_signals();
    for (int i = sigs->size() - 1; i >= 0; --i) {
      if (!AppliesTo(sigs->Get(i).signal(), role)) sigs->DeleteSubrange(i, 1);
    }
    auto* un = profile->mutable_unserved();
    for (int i = un->size() - 1; i >= 0; --i) {
      if (!AppliesTo(un->Get(i).signal(), role)) un->DeleteSubrange(i, 1);
    }
    t.profile = std::move(profile);
    for (const auto& sig : telemetry::CatalogueSignals()) {
      if (AppliesTo(sig, role)) t.signals.push_back(sig);
    }
    for (const auto& e : g.encodings()) t.encodings.push_back(e);
    t.request_target = g.target_name();
    t.sample_interval_ns =
        g.sample_interval_ms() > 0 ? g.sample_interval_ms() * kNsPerMs : sample_interval_ns;
    for (const auto& [alias, name] : entry.interface_aliases()) t.aliases[alias] = name;
    t.tls = GnmiTlsOf(g);
    if (!g.credentials_ref().empty()) {
      std::string e;
      if (!ReadCredentials(g.credentials_ref(), &t.username, &t.password, &e)) {
        *error = "device " + id + ": gnmi.credentials_ref: " + e;
        return false;
      }
    }
    out->push_back(std::move(t));
  }
  return true;
}

namespace {

bool ParseIpv4(const std::string& s, uint32_t* out) {
  unsigned a, b, c, d;
  char tail;
  if (std::sscanf(s.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) != 4) return false;
  if (a > 255 || b > 255 || c > 255 || d > 255) return false;
  *out = (a << 24) | (b << 16) | (c << 8) | d;
  return true;
}

}  // namespace

bool BuildSouthbound(const Inventory& inventory, const v1::Topology& topology, Southbound* out,
                     std::string* error) {
  *out = Southbound();
  std::map<std::string, std::set<std::string>> neighbours;
  for (const auto& l : topology.links()) {
    neighbours[l.a().device()].insert(l.b().device());
    neighbours[l.b().device()].insert(l.a().device());
  }
  // The plan's color for each (leaf, via).
  std::map<std::pair<std::string, std::string>, uint32_t> plan_color;
  for (const auto& cs : southbound::bgp::ColorSessions(topology)) {
    plan_color[{cs.leaf, cs.via}] = cs.color;
  }
  std::set<std::string> local_addresses;
  // gNMI Set sessions use the device's gnmi.tls and gnmi.credentials_ref, as
  // its telemetry does.
  auto set_security = [](const v1::InventoryDevice& entry, loom::TlsClientConfig* tls,
                         std::string* user, std::string* password, std::string* error) {
    *tls = GnmiTlsOf(entry.gnmi());
    if (entry.gnmi().credentials_ref().empty()) return true;
    std::string e;
    if (!ReadCredentials(entry.gnmi().credentials_ref(), user, password, &e)) {
      *error = "device " + entry.id() + ": gnmi.credentials_ref: " + e;
      return false;
    }
    return true;
  };
  for (const auto& [id, entry] : inventory.devices) {
    if (entry.route_budget().max_prefixes() > 0) {
      out->max_prefixes[id] = entry.route_budget().max_prefixes();
    }
    const bool has_bgp = entry.has_bgp();
    if (has_bgp) {
      const auto& b = entry.bgp();
      const std::string where = "device " + id + ": bgp";
      uint32_t rid = 0;
      if (b.local_as() == 0) {
        *error = where + ".local_as: required";
        return false;
      }
      if (!ParseIpv4(b.router_id(), &rid) || rid == 0) {
        *error = where + ".router_id: \"" + b.router_id() + "\" is not a dotted-quad identifier";
        return false;
      }
      if (out->router_id != 0 && out->router_id != rid) {
        *error = where + ".router_id: every session of Loom's must use the same router id";
        return false;
      }
      out->router_id = rid;
      std::string address = b.address();
      for (size_t p = address.find("{id}"); p != std::string::npos; p = address.find("{id}")) {
        address.replace(p, 4, id);
      }
      boost::system::error_code ec;
      boost::asio::ip::make_address(address, ec);
      if (address.empty() || ec) {
        *error = where + ".address: \"" + address + "\" is not an IP address";
        return false;
      }
      if (b.port() > 65535) {
        *error = where + ".port: " + std::to_string(b.port()) + " is not a TCP port";
        return false;
      }
      if (b.hold_time_s() == 1 || b.hold_time_s() == 2 || b.hold_time_s() > 65535) {
        *error = where + ".hold_time_s: must be 0 or 3..65535 (RFC 4271)";
        return false;
      }
      if (b.graceful_restart_s() > 4095) {
        *error = where + ".graceful_restart_s: at most 4095 (RFC 4724)";
        return false;
      }
      if (b.sessions_size() == 0) {
        *error = where + ".sessions: none (one per spine the device may send traffic through)";
        return false;
      }
      if (b.passive()) {
        *error = where +
                 ".passive: not supported yet (loomd dials its sessions; it does not "
                 "listen for BGP)";
        return false;
      }
      std::string md5_password;
      if (!b.md5_password_ref().empty()) {
        std::string e;
        if (!ReadBgpPassword(b.md5_password_ref(), &md5_password, &e)) {
          *error = where + ".md5_password_ref: " + e;
          return false;
        }
      }
      if (b.ttl_security_hops() > 254) {
        *error = where + ".ttl_security_hops: " + std::to_string(b.ttl_security_hops()) +
                 " is not 1..254 (0 = off)";
        return false;
      }
      if (b.ttl_security_hops() > 0 && b.multihop()) {
        *error = where +
                 ".ttl_security_hops and bgp.multihop: set one or the other (GTSM sends with TTL "
                 "255 and bounds the hops itself)";
        return false;
      }
      if (b.max_prefixes_restart_s() > 86400) {
        *error = where + ".max_prefixes_restart_s: at most 86400 (one day)";
        return false;
      }
      const bool v6 = boost::asio::ip::make_address(address, ec).is_v6();
      std::set<std::pair<uint32_t, std::string>> seen_sessions;
      uint32_t peer_as = b.peer_as();
      bool is_leaf = false;
      for (const auto& d : topology.devices()) {
        if (d.id() == id) is_leaf = d.role() == v1::DEVICE_ROLE_LEAF;
      }
      if (peer_as == 0 && !is_leaf) {
        *error = where + ".peer_as: required for a device that is not a leaf";
        return false;
      }
      if (peer_as == 0) peer_as = southbound::bgp::LeafAs(topology, id);
      for (int i = 0; i < b.sessions_size(); ++i) {
        const auto& cs = b.sessions(i);
        const std::string sw = where + ".sessions[" + std::to_string(i) + "]";
        if (!neighbours[id].count(cs.via())) {
          *error = sw + ": via " + cs.via() + " is not a neighbour of " + id;
          return false;
        }
        uint32_t color = cs.fabric_color();
        if (color == 0) {
          auto pc = plan_color.find({id, cs.via()});
          if (pc == plan_color.end()) {
            *error = sw + ": no plan color for via " + cs.via() + "; set fabric_color";
            return false;
          }
          color = pc->second;
        }
        uint32_t nh = 0;
        if (!ParseIpv4(cs.next_hop(), &nh)) {
          *error = sw + ".next_hop: \"" + cs.next_hop() + "\" is not an IPv4 address (" + cs.via() +
                   "'s address as " + id + " sees it)";
          return false;
        }
        if (!seen_sessions.insert({color, cs.via()}).second) {
          *error = sw + ": color " + std::to_string(color) + " via " + cs.via() +
                   " is listed twice (defaults and the device entry both add sessions)";
          return false;
        }
        if (cs.local_address().empty() && b.sessions_size() > 1) {
          *error = sw +
                   ".local_address: required when the device has several sessions (each needs "
                   "its own source address: the device tells its neighbors apart by address)";
          return false;
        }
        if (!cs.local_address().empty()) {
          const auto local = boost::asio::ip::make_address(cs.local_address(), ec);
          if (ec) {
            *error = sw + ".local_address: \"" + cs.local_address() + "\" is not an IP address";
            return false;
          }
          if (local.is_v6() != v6) {
            *error = sw + ".local_address: " + cs.local_address() +
                     " is not of the same address family as bgp.address " + address;
            return false;
          }
          if (!local_addresses.insert(cs.local_address() + "|" + address).second) {
            *error = sw + ".local_address: " + cs.local_address() + " is used twice towards " +
                     address + " (each session needs its own)";
            return false;
          }
        }
        southbound::bgp::PeerConfig p;
        p.name = id + "/" + std::to_string(color) + "/" + cs.via();
        p.device = id;
        p.local_as = b.local_as();
        p.peer_as = peer_as;
        p.peer_address = address;
        p.peer_port = static_cast<uint16_t>(b.port() == 0 ? 179 : b.port());
        p.local_address = cs.local_address();
        p.passive = b.passive();
        p.hold_time_s = static_cast<uint16_t>(b.hold_time_s() == 0 ? 9 : b.hold_time_s());
        p.connect_retry = std::chrono::milliseconds(2000);
        p.idle_hold = std::chrono::milliseconds(500);
        p.fabric_color = color;
        p.next_hop = cs.next_hop();
        p.via = cs.via();
        p.ttl = b.multihop() ? 255 : 1;
        p.md5_password = md5_password;
        p.ttl_security_hops = static_cast<int>(b.ttl_security_hops());
        p.max_prefixes_received = b.max_prefixes_received() == 0 ? 1000 : b.max_prefixes_received();
        p.max_prefix_restart =
            std::chrono::seconds(b.max_prefixes_restart_s() == 0 ? 60 : b.max_prefixes_restart_s());
        p.graceful_restart = true;
        p.restart_time_s =
            static_cast<uint16_t>(b.graceful_restart_s() == 0 ? 120 : b.graceful_restart_s());
        p.ipv6 = false;
        out->bgp_sessions.push_back(std::move(p));
      }
    }
    if (!entry.has_set()) continue;
    const auto& st = entry.set();
    const std::string where = "device " + id + ": set";
    std::string address = st.address().empty() ? entry.gnmi().address() : st.address();
    for (size_t p = address.find("{id}"); p != std::string::npos; p = address.find("{id}")) {
      address.replace(p, 4, id);
    }
    if (st.adapter() == "render-only") {
      out->render_only.push_back(id);
      continue;
    }
    if (st.adapter() != "loom" && st.adapter() != "sonic" && st.adapter() != "openconfig") {
      *error = where + ".adapter: \"" + st.adapter() +
               "\" is not an adapter (loom, sonic, openconfig, render-only)";
      return false;
    }
    std::string host;
    int port = 0;
    if (!SplitHostPort(address, &host, &port) || port == 0) {
      *error = where + ".address: \"" + address + "\" is not host:port (nor is gnmi.address)";
      return false;
    }
    if (st.adapter() != "loom") {
      southbound::gnmi::AdapterDeviceConfig a;
      a.device = id;
      a.address = address;
      a.adapter = st.adapter();
      a.target = entry.gnmi().target_name();
      // The address each spine is reached at: the BGP sessions' next hops.
      for (const auto& cs : entry.bgp().sessions()) {
        if (!cs.next_hop().empty()) a.next_hop_addresses[cs.via()] = cs.next_hop();
      }
      if (!set_security(entry, &a.tls, &a.username, &a.password, error)) return false;
      (has_bgp ? out->adapter_with_bgp : out->adapter_only).push_back(std::move(a));
      continue;
    }
    southbound::gnmi::GnmiDeviceConfig g{id, address, entry.gnmi().target_name()};
    if (!set_security(entry, &g.tls, &g.username, &g.password, error)) return false;
    (has_bgp ? out->set_with_bgp : out->set_only).push_back(std::move(g));
  }
  return true;
}

v1::ListDevicesResponse DeviceStatuses(const Inventory& inventory, const v1::Topology& topology,
                                       const std::vector<telemetry::TargetHealth>& health,
                                       TimeNs now_ns, bool embedded, const std::string& only) {
  std::map<std::string, const telemetry::TargetHealth*> by_name;
  for (const auto& h : health) by_name[h.name] = &h;
  v1::ListDevicesResponse resp;
  for (const auto& d : topology.devices()) {
    if (!only.empty() && d.id() != only) continue;
    if (d.role() == v1::DEVICE_ROLE_HOST) continue;  // Hosts have no links of their own.
    auto* out = resp.add_devices();
    out->set_id(d.id());
    out->set_role(d.role());
    auto it = inventory.devices.find(d.id());
    if (it != inventory.devices.end()) {
      out->set_platform(it->second.gnmi().platform());
      out->set_address(it->second.gnmi().address());
      out->set_max_prefixes(it->second.route_budget().max_prefixes());
      out->set_fib_size(it->second.route_budget().fib_size());
    }
    auto h = by_name.find(d.id());
    if (h == by_name.end()) {
      out->set_state(embedded ? "embedded" : "no source");
      if (embedded) {
        out->set_platform("loom-fabric (in-process)");
        continue;
      }
      // Nothing serves this device: every signal is unavailable, not stale.
      const std::string reason =
          d.role() == v1::DEVICE_ROLE_NIC
              ? "no host source: run loom-nic-agent on the host and give the NIC an inventory "
                "entry with gnmi.platform \"host\""
              : "no telemetry source: the inventory gives the device no gnmi.address";
      for (const auto& signal : telemetry::CatalogueSignals()) {
        if (!AppliesTo(signal, d.role())) continue;
        auto* so = out->add_signals();
        so->set_signal(signal);
        so->set_state(v1::SIGNAL_STATE_UNAVAILABLE);
        so->set_reason(reason);
        so->set_last_sample_age_ms(-1);
      }
      continue;
    }
    const telemetry::TargetHealth& th = *h->second;
    out->set_encoding(th.encoding);
    out->set_state(th.connected ? "connected" : th.connect_attempts > 1 ? "down" : "connecting");
    out->set_last_error(th.last_error);
    out->set_stream_errors(th.stream_errors);
    out->set_rejected_updates(th.rejected_updates);
    for (const auto& s : th.signals) {
      if (!AppliesTo(s.signal, d.role())) continue;
      auto* so = out->add_signals();
      so->set_signal(s.signal);
      switch (s.state) {
        case telemetry::SignalState::kPending:
          so->set_state(v1::SIGNAL_STATE_PENDING);
          break;
        case telemetry::SignalState::kLive:
          so->set_state(v1::SIGNAL_STATE_LIVE);
          break;
        case telemetry::SignalState::kStale:
          so->set_state(v1::SIGNAL_STATE_STALE);
          break;
        case telemetry::SignalState::kUnavailable:
          so->set_state(v1::SIGNAL_STATE_UNAVAILABLE);
          break;
      }
      so->set_reason(s.reason);
      so->set_mode(s.mode);
      so->set_mark(s.mark);
      so->set_refresh_interval_ms(static_cast<uint32_t>(s.effective_interval_ns / kNsPerMs));
      so->set_last_sample_age_ms(s.last_arrival_ns < 0 ? -1
                                                       : (now_ns - s.last_arrival_ns) / kNsPerMs);
      so->set_updates(s.updates);
      so->set_errors(s.rejects);
      so->set_retry_in_ms(s.retry_at_ns > now_ns ? (s.retry_at_ns - now_ns) / kNsPerMs : 0);
    }
  }
  return resp;
}

}  // namespace loom::loomd

namespace loom::loomd {

loom::te::DeviceLimitsMap DeviceLimitsOf(const Southbound& sb) {
  loom::te::DeviceLimitsMap out;
  std::set<std::string> bgp;
  for (const auto& p : sb.bgp_sessions) bgp.insert(p.device);
  std::set<std::string> with_set;
  auto from_adapter = [&](const std::string& device, const std::string& adapter_name) {
    with_set.insert(device);
    auto adapter = southbound::gnmi::MakeSetAdapter(adapter_name);
    if (!adapter) return;
    const auto& caps = adapter->capabilities();
    loom::te::DeviceLimits l;
    l.qp_split_routes = caps.qp_split_routes;
    l.dlb = caps.dlb_mode;
    l.spray = caps.spray_rules;
    l.alb = caps.alb_tables;
    l.glb_weights = caps.glb_weights || bgp.count(device) > 0;  // link bandwidth over BGP
    l.thresholds = caps.ecn_thresholds;
    l.pfc_watchdog = caps.pfc_watchdog;
    l.driver = (bgp.count(device) ? "bgp+gnmi:" : "gnmi:") + adapter_name;
    if (!l.qp_split_routes || !l.dlb || !l.spray || !l.alb || !l.glb_weights || !l.thresholds ||
        !l.pfc_watchdog) {
      out[device] = l;
    }
  };
  for (const auto* list : {&sb.set_with_bgp, &sb.set_only}) {
    for (const auto& g : *list) from_adapter(g.device, "loom");
  }
  for (const auto* list : {&sb.adapter_with_bgp, &sb.adapter_only}) {
    for (const auto& a : *list) from_adapter(a.device, a.adapter);
  }
  for (const auto& device : bgp) {
    if (with_set.count(device)) continue;
    loom::te::DeviceLimits l;  // BGP-DPF alone: one color per prefix, weights
    l.qp_split_routes = l.dlb = l.spray = l.alb = l.thresholds = l.pfc_watchdog = false;
    l.driver = "bgp";
    out[device] = l;
  }
  // Route budgets: a device without one keeps kDefaultRouteBudget.
  for (const auto& [device, max] : sb.max_prefixes) {
    if (max > 0) out[device].max_routes = max;
  }
  return out;
}

}  // namespace loom::loomd
