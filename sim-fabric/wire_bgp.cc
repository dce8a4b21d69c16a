#include "sim-fabric/wire_bgp.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "common/log.h"

namespace loom::sim {

namespace v1 = loom::v1;
namespace bgp = loom::southbound::bgp;

struct WireBgpLeaves::Leaf {
  std::string id;
  boost::asio::io_context* io = nullptr;  // Of the leaf's receive thread.
  std::unique_ptr<bgp::Speaker> speaker;
  bgp::DpfReceiver rx;
  // prefix -> session -> traffic class (-1 = any) of the route received there.
  std::map<bgp::Prefix, std::map<std::string, int>> tc;
  bool dirty = false;
  std::chrono::steady_clock::time_point first_change, last_change;
  std::unique_ptr<boost::asio::steady_timer> flush_timer;
};

namespace {
// A leaf rebuilds its BGP-learned state once its sessions went quiet (no
// route change for kQuiet) or kMaxDelay after the first change of a burst,
// whichever comes first: a recolor reaches a leaf as UPDATEs on each of its
// sessions, read by separate handlers interleaved with other leaves'.
constexpr auto kQuiet = std::chrono::microseconds(1000);
constexpr auto kMaxDelay = std::chrono::microseconds(10000);
}  // namespace

WireBgpLeaves::WireBgpLeaves(const v1::Topology& topo, WireConfig* config, WireBgpOptions options)
    : topo_(topo), plan_(topo), config_(config), options_(std::move(options)) {}

WireBgpLeaves::~WireBgpLeaves() { Stop(); }

Status WireBgpLeaves::Start() {
  if (started_) return FailedPrecondition("bgp leaves already started");
  const int threads = std::max(1, options_.receive_threads);
  for (int i = 0; i < threads; ++i) groups_.push_back(std::make_unique<Group>());
  int index = 0;
  for (const auto& d : topo_.devices()) {
    if (d.role() != v1::DEVICE_ROLE_LEAF) continue;
    Group& g = *groups_[static_cast<size_t>(index % threads)];
    auto leaf = std::make_unique<Leaf>();
    leaf->id = d.id();
    leaf->io = &g.io;
    bgp::SpeakerConfig sc;
    const std::string rid = d.router_id().empty() ? "" : d.router_id();
    sc.router_id = bgp::ParseRouterId(rid).value_or(0x0b000000u + static_cast<uint32_t>(index));
    sc.listen_address = options_.listen_address;
    sc.listen_port = options_.first_port > 0 ? options_.first_port + index : 0;
    if (sc.listen_port > 65535) return InvalidArgument("bgp port range beyond 65535");
    leaf->speaker = std::make_unique<bgp::Speaker>(g.io, sc);
    Status s = leaf->speaker->Start();
    if (!s.ok()) {
      return Unavailable("bgp leaf " + d.id() + ": cannot listen on " + sc.listen_address + ":" +
                         std::to_string(sc.listen_port) + ": " + s.message());
    }
    for (const bgp::PeerConfig& p : bgp::LeafPeers(topo_, d.id(), options_.sessions)) {
      Status ps = leaf->speaker->AddPeer(p);
      if (!ps.ok()) return ps;
    }
    Leaf* raw = leaf.get();
    leaf->speaker->AddRouteListener(
        [this, raw](const bgp::Session& s, const bgp::Prefix& p, const bgp::PathAttributes* a) {
          OnRoute(*raw, s, p, a);
        });
    ports_[d.id()] = leaf->speaker->listen_port();
    g.leaves.push_back(raw);
    leaves_.push_back(std::move(leaf));
    ++index;
  }
  started_ = true;
  for (auto& g : groups_) {
    CountSessions(*g);
    Group* raw = g.get();
    g->thread = std::thread([raw] { raw->io.run(); });
  }
  return Status::Ok();
}

void WireBgpLeaves::Stop() {
  if (!started_) return;
  started_ = false;
  for (auto& g : groups_) {
    Group* raw = g.get();
    boost::asio::post(raw->io, [raw] {
      for (Leaf* l : raw->leaves) l->speaker->Shutdown();
      // Let the Cease notifications go out, then stop.
      auto t = std::make_shared<boost::asio::steady_timer>(raw->io, std::chrono::milliseconds(50));
      t->async_wait([raw, t](const boost::system::error_code&) { raw->io.stop(); });
    });
  }
  for (auto& g : groups_) {
    if (g->thread.joinable()) g->thread.join();
  }
  leaves_.clear();
  groups_.clear();
}

int WireBgpLeaves::established() const {
  int n = 0;
  for (const auto& g : groups_) n += g->established.load();
  return n;
}

void WireBgpLeaves::CountSessions(Group& g) {
  int n = 0;
  for (const Leaf* l : g.leaves) {
    for (const bgp::Session* s : l->speaker->Sessions()) {
      n += s->state() == bgp::SessionState::kEstablished;
    }
  }
  g.established.store(n);
  auto t = std::make_shared<boost::asio::steady_timer>(g.io, std::chrono::milliseconds(20));
  t->async_wait([this, &g, t](const boost::system::error_code& ec) {
    if (!ec && started_) CountSessions(g);
  });
}

void WireBgpLeaves::OnRoute(Leaf& leaf, const bgp::Session& session, const bgp::Prefix& prefix,
                            const bgp::PathAttributes* attrs) {
  updates_.fetch_add(1);
  const bgp::PeerConfig& c = session.config();
  leaf.rx.Update(c.name, c.fabric_color, c.via, prefix, attrs);
  if (attrs == nullptr) {
    auto it = leaf.tc.find(prefix);
    if (it != leaf.tc.end()) {
      it->second.erase(c.name);
      if (it->second.empty()) leaf.tc.erase(it);
    }
  } else {
    int tc = -1;
    for (const bgp::LargeCommunity& lc : attrs->large_communities) {
      if (lc.local1 == 1 && lc.local2 < 8) tc = static_cast<int>(lc.local2);
    }
    leaf.tc[prefix][c.name] = tc;
  }
  // Coalesce the burst (see kQuiet): program the leaf once it is in.
  leaf.last_change = std::chrono::steady_clock::now();
  if (!leaf.dirty) {
    leaf.dirty = true;
    leaf.first_change = leaf.last_change;
    if (!leaf.flush_timer) {
      leaf.flush_timer = std::make_unique<boost::asio::steady_timer>(*leaf.io);
    }
    leaf.flush_timer->expires_at(leaf.last_change + kQuiet);
    leaf.flush_timer->async_wait([this, &leaf](const boost::system::error_code& ec) {
      if (!ec) OnFlushTimer(leaf);
    });
  }
}

void WireBgpLeaves::OnFlushTimer(Leaf& leaf) {
  const auto deadline =
      std::min(leaf.last_change + std::chrono::steady_clock::duration(kQuiet),
               leaf.first_change + std::chrono::steady_clock::duration(kMaxDelay));
  if (std::chrono::steady_clock::now() < deadline) {
    leaf.flush_timer->expires_at(deadline);
    leaf.flush_timer->async_wait([this, &leaf](const boost::system::error_code& ec) {
      if (!ec) OnFlushTimer(leaf);
    });
    return;
  }
  Flush(leaf);
}

void WireBgpLeaves::Flush(Leaf& leaf) {
  leaf.dirty = false;
  v1::DeviceState learned;
  learned.set_device(leaf.id);
  std::map<uint32_t, std::set<std::string>> hops;  // color -> neighbors
  for (const bgp::DpfReceiver::Table& t : leaf.rx.Tables()) {
    const std::string nic = plan_.NicOf(t.prefix);
    if (nic.empty()) continue;
    std::map<std::string, double> weight;  // neighbor -> link bandwidth
    bool has_bw = false;
    auto note = [&](const bgp::DpfReceiver::Member& m) {
      if (m.neighbor.empty()) return;
      weight[m.neighbor] = std::max(weight[m.neighbor], m.weight);
      has_bw |= m.weight != 1.0;
    };
    for (const auto& ce : t.colors) {
      for (const auto& m : ce.members) {
        hops[ce.color].insert(m.neighbor);
        note(m);
      }
    }
    for (const auto& m : t.uncolored) note(m);
    if (!t.colors.empty()) {
      v1::ColoredRoute* r = learned.add_routes();
      r->set_destination(nic);
      r->set_prefix(t.prefix.ToString());
      r->set_color(t.colors[0].color);
      if (t.colors.size() > 1) r->set_backup_color(t.colors[1].color);
      int tc = -1;
      auto it = leaf.tc.find(t.prefix);
      if (it != leaf.tc.end()) {
        for (const auto& m : t.colors[0].members) {
          auto jt = it->second.find(m.session);
          if (jt != it->second.end()) tc = jt->second;
        }
      }
      // -1 (any class) travels as uint32 max; InProcessDriver casts it back.
      r->set_traffic_class(static_cast<uint32_t>(tc));
    }
    if (has_bw && !weight.empty()) {
      double mx = 0;
      for (const auto& [n, w] : weight) mx = std::max(mx, w);
      v1::WeightSet* ws = learned.add_weights();
      ws->set_destination(nic);
      for (const auto& [n, w] : weight) {
        const double scaled = mx > 0 ? 65535.0 * w / mx : 1.0;
        (*ws->mutable_weights())[n] = std::max<uint32_t>(1, static_cast<uint32_t>(scaled + 0.5));
      }
    }
  }
  for (const auto& [color, ns] : hops) {
    v1::ColorGroup* g = learned.add_colors();
    g->set_color(color);
    for (const std::string& n : ns) {
      if (!n.empty()) g->add_next_hops(n);
    }
  }
  config_->SetLearned(leaf.id, std::move(learned));
}

}  // namespace loom::sim
