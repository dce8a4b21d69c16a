// BGP benchmark (prints figures; not a test):
// 1. UPDATE encode and decode rates (DPF-colored routes, full attributes).
// 2. Full-fabric recolor over loopback: Loom's speaker with one session per
//    leaf (64 leaves, each its own passive Speaker with a DpfReceiver), all
//    in one process on one io thread; time from SetRoutes for every leaf to
//    the last leaf's receiver holding the new colors.
// Usage: bench_bgp [leaves=64] [routes_per_leaf=64]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "southbound/bgp/speaker.h"

namespace bgp = loom::southbound::bgp;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

void CodecRates() {
  bgp::UpdateMessage u;
  u.attrs.origin = 0;
  u.attrs.has_as_path = true;
  u.attrs.as_path.push_back({bgp::AsSegmentType::kSequence, {65000}});
  u.attrs.next_hop = std::array<uint8_t, 4>{198, 18, 0, 1};
  u.attrs.ext_communities.push_back(bgp::ExtCommunity::Color(7));
  u.attrs.ext_communities.push_back(bgp::ExtCommunity::LinkBandwidth(65000, 5e9f));
  u.attrs.aigp = 0;
  u.attrs.large_communities.push_back({65000, 1, 3});
  bgp::Prefix p = *bgp::Prefix::Parse("198.18.0.0/32");
  u.nlri.push_back(p);
  bgp::CodecOptions o;
  const int n = 300000;
  auto t0 = Clock::now();
  size_t bytes = 0;
  std::vector<bgp::Bytes> msgs;
  for (int i = 0; i < n; ++i) {
    u.nlri[0].addr[2] = static_cast<uint8_t>(i);
    auto m = bgp::EncodeUpdate(u, o);
    bytes += m[0].size();
    if (i < 1000) msgs.push_back(std::move(m[0]));
  }
  double enc = Seconds(Clock::now() - t0);
  t0 = Clock::now();
  size_t ok = 0;
  for (int i = 0; i < n; ++i) {
    bgp::Message m;
    bgp::DecodeError e;
    ok += bgp::DecodeMessage(msgs[i % msgs.size()], o, &m, &e);
  }
  double dec = Seconds(Clock::now() - t0);
  std::printf("update encode: %.0f msgs/s (%d msgs, %zu bytes avg)\n", n / enc, n, bytes / n);
  std::printf("update decode: %.0f msgs/s (%zu ok)\n", n / dec, ok);
}

bool RunUntil(boost::asio::io_context& io, const std::function<bool()>& pred, int seconds) {
  auto deadline = Clock::now() + std::chrono::seconds(seconds);
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    io.restart();
    io.poll();
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int leaves = argc > 1 ? std::atoi(argv[1]) : 64;
  int routes_per_leaf = argc > 2 ? std::atoi(argv[2]) : 64;
  CodecRates();

  boost::asio::io_context io;
  struct Leaf {
    std::unique_ptr<bgp::Speaker> speaker;
    bgp::DpfReceiver rx;
  };
  std::vector<std::unique_ptr<Leaf>> fabric;
  bgp::Speaker loom(io, bgp::SpeakerConfig{0x0a000001, "127.0.0.1", -1, false});
  for (int i = 0; i < leaves; ++i) {
    auto leaf = std::make_unique<Leaf>();
    leaf->speaker = std::make_unique<bgp::Speaker>(
        io, bgp::SpeakerConfig{static_cast<uint32_t>(0x0b000000 + i), "127.0.0.1", 0, false});
    if (!leaf->speaker->Start().ok()) return 1;
    bgp::PeerConfig lp;
    lp.name = "loom";
    lp.local_as = 65100 + i;
    lp.peer_as = 65000;
    lp.passive = true;
    lp.fabric_color = 0;
    Leaf* raw = leaf.get();
    leaf->speaker->AddRouteListener(
        [raw](const bgp::Session& s, const bgp::Prefix& p, const bgp::PathAttributes* a) {
          raw->rx.Update(s.config().name, 0, "loom", p, a);
        });
    if (!leaf->speaker->AddPeer(lp).ok()) return 1;
    bgp::PeerConfig p;
    p.name = "leaf" + std::to_string(i);
    p.device = p.name;
    p.local_as = 65000;
    p.peer_as = 65100 + i;
    p.peer_port = leaf->speaker->listen_port();
    p.next_hop = "198.18.0.1";
    p.connect_retry = std::chrono::milliseconds(200);
    if (!loom.AddPeer(p).ok()) return 1;
    fabric.push_back(std::move(leaf));
  }
  auto established = [&] {
    for (const bgp::Session* s : loom.Sessions()) {
      if (s->state() != bgp::SessionState::kEstablished) return false;
    }
    return true;
  };
  if (!RunUntil(io, established, 30)) {
    std::printf("sessions did not establish\n");
    return 1;
  }
  auto routes_for = [&](int color) {
    std::vector<bgp::OriginatedRoute> rs;
    for (int r = 0; r < routes_per_leaf; ++r) {
      bgp::OriginatedRoute o;
      o.prefix = *bgp::Prefix::Parse("198.18.0.0/32");
      o.prefix.addr[2] = static_cast<uint8_t>(r / 256);
      o.prefix.addr[3] = static_cast<uint8_t>(r % 256);
      o.color = static_cast<uint32_t>(color + r % 4);
      o.backup_color = static_cast<uint32_t>(color + (r + 1) % 4);
      rs.push_back(o);
    }
    return rs;
  };
  auto converged = [&](int color) {
    for (auto& leaf : fabric) {
      auto tables = leaf->rx.Tables();
      if (static_cast<int>(tables.size()) != routes_per_leaf) return false;
      for (size_t r = 0; r < tables.size(); ++r) {
        uint32_t c = tables[r].preferred_color;
        if (c < static_cast<uint32_t>(color) || c >= static_cast<uint32_t>(color + 4)) return false;
      }
    }
    return true;
  };
  for (int round = 0; round < 4; ++round) {
    int color = 100 * (round + 1);
    auto t0 = Clock::now();
    for (int i = 0; i < leaves; ++i) loom.SetRoutes("leaf" + std::to_string(i), routes_for(color));
    auto queued = Clock::now();
    if (!RunUntil(
            io, [&] { return converged(color); }, 30)) {
      std::printf("recolor round %d did not converge\n", round);
      return 1;
    }
    auto t1 = Clock::now();
    std::printf(
        "full-fabric recolor %s: %d leaves x %d routes: UPDATEs built in %.2f ms, "
        "received by every leaf in %.2f ms\n",
        round == 0 ? "(initial)" : "", leaves, routes_per_leaf, Seconds(queued - t0) * 1e3,
        Seconds(t1 - t0) * 1e3);
  }
  return 0;
}
