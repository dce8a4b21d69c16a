#include "southbound/bgp/speaker.h"

#include <arpa/inet.h>

#include <set>
#include <unordered_map>

#include "common/log.h"

namespace loom::southbound::bgp {

namespace asio = boost::asio;
using asio::ip::tcp;

Speaker::Speaker(asio::io_context& io, SpeakerConfig config)
    : io_(io), config_(std::move(config)), alive_(std::make_shared<bool>(true)) {
  rib_ready_ = !config_.restarting;
}

Speaker::~Speaker() {
  *alive_ = false;
  // No NOTIFICATION: a restarting Loom relies on its peers' graceful
  // restart; Shutdown() is the orderly way out.
  for (auto& [name, p] : peers_) {
    p->session->Abort();
    if (p->stale_timer) p->stale_timer->cancel();
  }
  if (acceptor_) {
    boost::system::error_code ec;
    acceptor_->close(ec);
  }
}

Status Speaker::Start() {
  if (config_.listen_port < 0) return Status::Ok();
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(config_.listen_address, ec);
  if (ec) return InvalidArgument("listen_address: " + ec.message());
  tcp::endpoint ep(addr, static_cast<uint16_t>(config_.listen_port));
  acceptor_ = std::make_unique<tcp::acceptor>(io_);
  acceptor_->open(ep.protocol(), ec);
  if (!ec) acceptor_->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_->bind(ep, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Unavailable("bgp listen " + config_.listen_address + ": " + ec.message());
  listen_port_ = acceptor_->local_endpoint().port();
  for (const auto& [name, p] : peers_) {
    Status st = SetListenerKey(p->session->config(), false);
    if (!st.ok()) return st;
  }
  DoAccept();
  return Status::Ok();
}

void Speaker::Shutdown(bool for_restart) {
  for (auto& [name, p] : peers_) {
    if (for_restart) {
      p->session->Abort();
    } else {
      p->session->Stop();
    }
  }
  if (acceptor_) {
    boost::system::error_code ec;
    acceptor_->close(ec);
  }
}

void Speaker::DoAccept() {
  auto alive = alive_;
  acceptor_->async_accept([this, alive](const boost::system::error_code& ec, tcp::socket socket) {
    if (!*alive || ec == asio::error::operation_aborted) return;
    if (!ec) {
      boost::system::error_code e2;
      auto remote = socket.remote_endpoint(e2);
      bool taken = false;
      if (!e2) {
        // Sessions are identified by peer address; with several sessions on
        // one address the first that takes the connection wins.
        for (auto& [name, p] : peers_) {
          boost::system::error_code e3;
          auto peer_addr = asio::ip::make_address(p->session->config().peer_address, e3);
          if (e3 || peer_addr != remote.address()) continue;
          if (p->session->Accept(std::move(socket))) {
            taken = true;
            break;
          }
        }
      }
      if (!taken) {
        boost::system::error_code ignored;
        socket.close(ignored);
      }
    }
    if (acceptor_ && acceptor_->is_open()) DoAccept();
  });
}

Status Speaker::SetListenerKey(const PeerConfig& peer, bool remove) {
  if (!acceptor_ || !acceptor_->is_open() || peer.md5_password.empty()) return Status::Ok();
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(peer.peer_address, ec);
  if (ec) return InvalidArgument("peer_address: " + peer.peer_address);
  if (addr.is_v4() != acceptor_->local_endpoint().address().is_v4()) return Status::Ok();
  std::string error;
  if (!SetTcpMd5Key(acceptor_->native_handle(), addr, remove ? "" : peer.md5_password, &error)) {
    return Unavailable("bgp listener md5 key for " + peer.peer_address + ": " + error);
  }
  return Status::Ok();
}

Status Speaker::AddPeer(const PeerConfig& peer) {
  if (peer.name.empty()) return InvalidArgument("peer.name: empty");
  if (peers_.count(peer.name)) return InvalidArgument("peer.name: duplicate " + peer.name);
  if (peer.local_as == 0 || peer.peer_as == 0) return InvalidArgument("peer ASN must be > 0");
  if (peer.hold_time_s == 1 || peer.hold_time_s == 2) {
    return InvalidArgument("hold_time_s: must be 0 or >= 3");
  }
  boost::system::error_code ec;
  asio::ip::make_address(peer.peer_address, ec);
  if (ec) return InvalidArgument("peer_address: " + peer.peer_address);
  if (peer.md5_password.size() > 80) {
    return InvalidArgument("md5_password: longer than 80 bytes (TCP_MD5SIG_MAXKEYLEN)");
  }
  if (peer.ttl_security_hops < 0 || peer.ttl_security_hops > 254) {
    return InvalidArgument("ttl_security_hops: must be 0..254");
  }
  Status key = SetListenerKey(peer, false);
  if (!key.ok()) return key;
  auto p = std::make_unique<Peer>();
  p->export_ctx.local_as = peer.local_as;
  p->export_ctx.fabric_color = peer.fabric_color;
  p->export_ctx.ebgp = peer.local_as != peer.peer_as;
  p->export_ctx.via = peer.via;
  std::string nh = peer.next_hop.empty() ? peer.local_address : peer.next_hop;
  if (nh.empty()) nh = RouterIdToString(config_.router_id);
  auto nh4 = ParseIpv4(nh);
  if (nh4) {
    p->export_ctx.next_hop = *nh4;
    // IPv4-mapped IPv6 next hop for IPv6 routes.
    p->export_ctx.next_hop_v6.assign(16, 0);
    p->export_ctx.next_hop_v6[10] = 0xff;
    p->export_ctx.next_hop_v6[11] = 0xff;
    std::copy(nh4->begin(), nh4->end(), p->export_ctx.next_hop_v6.begin() + 12);
  } else {
    std::array<uint8_t, 16> v6;
    if (inet_pton(AF_INET6, nh.c_str(), v6.data()) != 1) {
      return InvalidArgument("next_hop: " + nh);
    }
    p->export_ctx.next_hop_v6.assign(v6.begin(), v6.end());
  }
  p->stale_timer = std::make_unique<asio::steady_timer>(io_);
  LocalIdentity id{config_.router_id, config_.restarting};
  p->session = std::make_shared<Session>(io_, peer, id, this);
  Session* s = p->session.get();
  peers_by_device_[peer.device].push_back(p.get());
  peers_[peer.name] = std::move(p);
  s->Start();
  return Status::Ok();
}

void Speaker::RemovePeer(const std::string& name) {
  auto it = peers_.find(name);
  if (it == peers_.end()) return;
  it->second->session->Stop();
  it->second->stale_timer->cancel();
  bool shared_key = false;  // Another session on the address keeps the key.
  for (const auto& [other, q] : peers_) {
    shared_key |= other != name &&
                  q->session->config().peer_address == it->second->session->config().peer_address;
  }
  if (!shared_key) {
    Status st = SetListenerKey(it->second->session->config(), true);
    if (!st.ok()) LOG_WARN("bgp: removing the listener md5 key").With("error", st.message());
  }
  for (const auto& [prefix, r] : it->second->adj_rib_in) {
    Notify(*it->second->session, prefix, nullptr);
  }
  auto dt = peers_by_device_.find(it->second->session->config().device);
  if (dt != peers_by_device_.end()) {
    std::erase(dt->second, it->second.get());
    if (dt->second.empty()) peers_by_device_.erase(dt);
  }
  peers_.erase(it);
}

Speaker::Peer* Speaker::PeerOf(const Session* s) {
  auto it = peers_.find(s->config().name);
  if (it == peers_.end() || it->second->session.get() != s) return nullptr;
  return it->second.get();
}

void Speaker::SetRoutes(const std::string& group, std::vector<OriginatedRoute> routes) {
  if (routes.empty()) {
    routes_.erase(group);
  } else {
    RouteGroup& g = routes_[group];
    g.routes = std::move(routes);
    g.class_of.clear();
    g.class_of.reserve(g.routes.size());
    std::unordered_map<std::string, uint32_t> class_ids;
    for (const OriginatedRoute& r : g.routes) {
      auto [it, added] =
          class_ids.try_emplace(ExportClassKey(r), static_cast<uint32_t>(class_ids.size()));
      g.class_of.push_back(it->second);
    }
    g.classes = static_cast<uint32_t>(class_ids.size());
  }
  // Every affected session's UPDATEs are built before any is written; the
  // writes start here, while the next SetRoutes is being built.
  std::vector<Peer*> peers = PeersOf(group);
  std::erase_if(peers,
                [](const Peer* p) { return p->session->state() != SessionState::kEstablished; });
  for (Peer* p : peers) SyncPeer(*p);
  for (Peer* p : peers) p->session->WriteQueued();
}

std::vector<Speaker::Peer*> Speaker::PeersOf(const std::string& group) {
  std::vector<Peer*> out;
  if (group.empty()) {
    out.reserve(peers_.size());
    for (auto& [name, p] : peers_) out.push_back(p.get());
  } else if (auto it = peers_by_device_.find(group); it != peers_by_device_.end()) {
    out = it->second;
  }
  return out;
}

const std::vector<OriginatedRoute>* Speaker::Routes(const std::string& group) const {
  auto it = routes_.find(group);
  return it == routes_.end() ? nullptr : &it->second.routes;
}

void Speaker::MarkRibReady() {
  rib_ready_ = true;
  for (auto& [name, p] : peers_) {
    if (p->session->state() == SessionState::kEstablished && !p->eor_sent) SendEndOfRib(*p);
  }
}

void Speaker::Flush(const std::string& group, std::function<void()> cb) {
  std::vector<Session*> sessions;
  for (Peer* p : PeersOf(group)) sessions.push_back(p->session.get());
  if (sessions.empty()) {
    asio::post(io_, std::move(cb));
    return;
  }
  auto remaining = std::make_shared<size_t>(sessions.size());
  auto shared_cb = std::make_shared<std::function<void()>>(std::move(cb));
  for (Session* s : sessions) {
    s->OnDrained([remaining, shared_cb] {
      if (--*remaining == 0) (*shared_cb)();
    });
  }
}

void Speaker::SyncPeer(Peer& p) {
  Session& s = *p.session;
  const CodecOptions& codec = s.codec_options();
  const bool ipv6 = s.peer_open().caps.mp_ipv6_unicast;
  // Distinct attribute sets of this session's export, by key (encoded
  // attributes + AFI); desired Adj-RIB-Out: prefix -> set.
  struct AttrSet {
    std::shared_ptr<const Bytes> key;
    PathAttributes attrs;
    std::vector<Prefix> announce;
  };
  std::vector<AttrSet> sets;
  std::map<Bytes, size_t> set_by_key;
  std::map<Prefix, size_t> desired;
  constexpr int kUnknown = -2, kNotExported = -1;
  auto add_group = [&](const std::string& group) {
    auto it = routes_.find(group);
    if (it == routes_.end()) return;
    const RouteGroup& g = it->second;
    std::vector<int> set_of_class(g.classes, kUnknown);
    for (size_t i = 0; i < g.routes.size(); ++i) {
      const OriginatedRoute& r = g.routes[i];
      if (r.prefix.afi == Afi::kIpv6 && !ipv6) continue;
      int& set = set_of_class[g.class_of[i]];
      if (set == kUnknown) {
        std::optional<PathAttributes> a = DpfExport(r, p.export_ctx);
        if (!a) {
          set = kNotExported;
        } else {
          Bytes key = EncodePathAttributes(*a, codec);
          key.push_back(static_cast<uint8_t>(r.prefix.afi));
          auto [kt, added] = set_by_key.try_emplace(std::move(key), sets.size());
          if (added) sets.push_back({std::make_shared<const Bytes>(kt->first), std::move(*a), {}});
          set = static_cast<int>(kt->second);
        }
      }
      if (set == kNotExported) continue;
      desired[r.prefix] = static_cast<size_t>(set);
    }
  };
  add_group("");
  if (!s.config().device.empty()) add_group(s.config().device);

  // Difference against what the session has (both maps are ordered).
  UpdateMessage withdraw;
  std::map<Prefix, std::shared_ptr<const Bytes>> out;
  auto old = p.adj_rib_out.begin();
  for (const auto& [prefix, set] : desired) {
    while (old != p.adj_rib_out.end() && old->first < prefix) {
      withdraw.withdrawn.push_back(old->first);
      ++old;
    }
    AttrSet& a = sets[set];
    const bool same = old != p.adj_rib_out.end() && old->first == prefix &&
                      (old->second == a.key || *old->second == *a.key);
    if (!same) a.announce.push_back(prefix);
    if (old != p.adj_rib_out.end() && old->first == prefix) ++old;
    out.emplace_hint(out.end(), prefix, a.key);
  }
  for (; old != p.adj_rib_out.end(); ++old) withdraw.withdrawn.push_back(old->first);

  SessionCounters& c = s.mutable_counters();
  if (!withdraw.withdrawn.empty()) {
    c.prefixes_withdrawn_out += withdraw.withdrawn.size();
    for (Bytes& m : EncodeUpdate(withdraw, codec)) s.Send(std::move(m));
  }
  for (const auto& [key, index] : set_by_key) {
    AttrSet& a = sets[index];
    if (a.announce.empty()) continue;
    UpdateMessage u;
    u.attrs = std::move(a.attrs);
    u.nlri = std::move(a.announce);
    c.prefixes_announced_out += u.nlri.size();
    for (Bytes& m : EncodeUpdate(u, codec)) s.Send(std::move(m));
  }
  p.adj_rib_out = std::move(out);
}

void Speaker::SendEndOfRib(Peer& p) {
  p.session->Send(EncodeEndOfRib(Afi::kIpv4));
  if (p.session->peer_open().caps.mp_ipv6_unicast && p.session->config().ipv6) {
    p.session->Send(EncodeEndOfRib(Afi::kIpv6));
  }
  p.eor_sent = true;
}

void Speaker::OnEstablished(Session* s) {
  Peer* p = PeerOf(s);
  if (!p) return;
  p->adj_rib_out.clear();
  p->eor_sent = false;
  // Restarted peer without graceful restart now: its stale routes go.
  if (!s->PeerSupportsGracefulRestart()) PurgeStale(*p, std::nullopt);
  SyncPeer(*p);
  if (rib_ready_) SendEndOfRib(*p);
}

void Speaker::OnDown(Session* s, bool was_established, bool graceful) {
  Peer* p = PeerOf(s);
  if (!p) return;
  p->adj_rib_out.clear();
  p->eor_sent = false;
  if (!was_established) return;
  if (graceful && !p->adj_rib_in.empty()) {
    // RFC 4724 helper: keep routes as stale for the peer's restart time.
    for (auto& [prefix, r] : p->adj_rib_in) r.stale = true;
    uint16_t restart_s = s->PeerRestartTime();
    LOG_INFO("bgp graceful restart helper: keeping stale routes")
        .With("peer", s->config().name)
        .With("routes", uint64_t{p->adj_rib_in.size()})
        .With("restart_time_s", unsigned{restart_s});
    p->stale_timer->expires_after(std::chrono::seconds(restart_s));
    auto alive = alive_;
    std::string name = s->config().name;
    p->stale_timer->async_wait([this, alive, name](const boost::system::error_code& ec) {
      if (ec || !*alive) return;
      auto it = peers_.find(name);
      if (it == peers_.end()) return;
      PurgeStale(*it->second, std::nullopt);
    });
    return;
  }
  auto routes = std::move(p->adj_rib_in);
  p->adj_rib_in.clear();
  p->rib_in_count = {};
  for (const auto& [prefix, r] : routes) Notify(*s, prefix, nullptr);
}

void Speaker::PurgeStale(Peer& p, std::optional<Afi> afi) {
  std::vector<Prefix> gone;
  for (auto it = p.adj_rib_in.begin(); it != p.adj_rib_in.end();) {
    if (it->second.stale && (!afi || it->first.afi == *afi)) {
      gone.push_back(it->first);
      --p.rib_in_count[static_cast<size_t>(it->first.afi)];
      it = p.adj_rib_in.erase(it);
    } else {
      ++it;
    }
  }
  for (const Prefix& prefix : gone) Notify(*p.session, prefix, nullptr);
  bool any_stale = false;
  for (const auto& [prefix, r] : p.adj_rib_in) any_stale |= r.stale;
  if (!any_stale) p.stale_timer->cancel();
}

void Speaker::EraseRibIn(Peer& p, std::map<Prefix, ReceivedRoute>::iterator it) {
  const Prefix prefix = it->first;
  --p.rib_in_count[static_cast<size_t>(prefix.afi)];
  p.adj_rib_in.erase(it);
  Notify(*p.session, prefix, nullptr);
}

void Speaker::OnUpdate(Session* s, const UpdateMessage& u) {
  Peer* p = PeerOf(s);
  if (!p) return;
  for (const Prefix& prefix : u.withdrawn) {
    if (auto it = p->adj_rib_in.find(prefix); it != p->adj_rib_in.end()) EraseRibIn(*p, it);
  }
  if (u.treat_as_withdraw) {
    for (const Prefix& prefix : u.nlri) {
      if (auto it = p->adj_rib_in.find(prefix); it != p->adj_rib_in.end()) EraseRibIn(*p, it);
    }
  } else {
    // max_prefixes_received: the prefixes this UPDATE adds, per AFI, are
    // checked before any is installed; over the limit, the session closes
    // (Cease/1) and its routes go.
    if (const uint32_t limit = s->config().max_prefixes_received; limit > 0) {
      std::array<size_t, 3> added{};
      for (const Prefix& prefix : u.nlri) {
        if (!p->adj_rib_in.count(prefix)) ++added[static_cast<size_t>(prefix.afi)];
      }
      for (Afi afi : {Afi::kIpv4, Afi::kIpv6}) {
        const auto i = static_cast<size_t>(afi);
        if (added[i] == 0 || p->rib_in_count[i] + added[i] <= limit) continue;
        if (u.nlri.size() > 1) {  // The same prefix twice in one UPDATE counts once.
          std::set<Prefix> distinct;
          for (const Prefix& prefix : u.nlri) {
            if (prefix.afi == afi && !p->adj_rib_in.count(prefix)) distinct.insert(prefix);
          }
          if (p->rib_in_count[i] + distinct.size() <= limit) continue;
        }
        s->CloseForMaxPrefixes(afi, limit);
        return;
      }
    }
    for (const Prefix& prefix : u.nlri) {
      auto [it, added] = p->adj_rib_in.try_emplace(prefix);
      if (added) ++p->rib_in_count[static_cast<size_t>(prefix.afi)];
      ReceivedRoute& r = it->second;
      r.attrs = u.attrs;
      r.stale = false;
      Notify(*s, prefix, &r.attrs);
    }
  }
  if (u.end_of_rib) PurgeStale(*p, u.end_of_rib);
}

void Speaker::OnRouteRefresh(Session* s, const RouteRefreshMessage&) {
  Peer* p = PeerOf(s);
  if (!p) return;
  p->adj_rib_out.clear();
  SyncPeer(*p);
}

void Speaker::Notify(const Session& s, const Prefix& prefix, const PathAttributes* attrs) {
  for (const RouteListener& l : listeners_) l(s, prefix, attrs);
}

void Speaker::AddRouteListener(RouteListener listener) {
  listeners_.push_back(std::move(listener));
}

std::vector<const Session*> Speaker::Sessions() const {
  std::vector<const Session*> out;
  for (const auto& [name, p] : peers_) out.push_back(p->session.get());
  return out;
}

std::vector<const Session*> Speaker::SessionsOf(const std::string& device) const {
  std::vector<const Session*> out;
  auto it = peers_by_device_.find(device);
  if (it == peers_by_device_.end()) return out;
  for (const Peer* p : it->second) out.push_back(p->session.get());
  return out;
}

const Session* Speaker::FindSession(const std::string& name) const {
  auto it = peers_.find(name);
  return it == peers_.end() ? nullptr : it->second->session.get();
}

const std::map<Prefix, ReceivedRoute>* Speaker::AdjRibIn(const std::string& name) const {
  auto it = peers_.find(name);
  return it == peers_.end() ? nullptr : &it->second->adj_rib_in;
}

std::vector<Prefix> Speaker::AdjRibOut(const std::string& name) const {
  std::vector<Prefix> out;
  auto it = peers_.find(name);
  if (it == peers_.end()) return out;
  for (const auto& [prefix, key] : it->second->adj_rib_out) out.push_back(prefix);
  return out;
}

}  // namespace loom::southbound::bgp
