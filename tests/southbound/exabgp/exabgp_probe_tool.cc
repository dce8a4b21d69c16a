// A Loom BGP speaker for the exabgp interop test: like bgp_speaker_tool, but
// `status` reports every decoded attribute of every Adj-RIB-In route (ORIGIN,
// AS_PATH segments, NEXT_HOP, MP next hop, MED, LOCAL_PREF, communities,
// extended and large communities, AIGP, unknown attributes with their flags)
// and the attribute block Loom would emit for it (`reencoded`, hex) so the
// test can check the Partial bit on propagated unknown transitive attributes.
//
//   exabgp_probe_tool --router-id 10.0.0.1 --listen-port 0
//     --peer name=ebgp,local_as=65000,peer_as=65001,addr=127.0.0.1,passive=1,hold=9
//   stdin:  route PREFIX [color=X] [med=N] | withdraw PREFIX | status | quit
//   stdout: one JSON line per command (first line: {"listen_port":N}).
//
// Thread: the speaker runs on its own io thread; commands are posted to it.
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "southbound/bgp/speaker.h"

namespace bgp = loom::southbound::bgp;

namespace {

std::map<std::string, std::string> ParseKv(const std::string& s) {
  std::map<std::string, std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto eq = item.find('=');
    if (eq != std::string::npos) out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return out;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

template <typename Container>
std::string Hex(const Container& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return Quote(out);
}

template <size_t N>
std::string CounterMap(const std::array<uint64_t, N>& a) {
  std::ostringstream o;
  o << "{";
  bool first = true;
  for (size_t i = 1; i < N; ++i) {
    if (!a[i]) continue;
    o << (first ? "" : ",") << "\"" << i << "\":" << a[i];
    first = false;
  }
  o << "}";
  return o.str();
}

std::string RouteJson(const bgp::Prefix& prefix, const bgp::ReceivedRoute& r,
                      const bgp::CodecOptions& codec) {
  const bgp::PathAttributes& a = r.attrs;
  std::ostringstream o;
  o << "{\"prefix\":" << Quote(prefix.ToString()) << ",\"stale\":" << (r.stale ? "true" : "false");
  if (a.origin) o << ",\"origin\":" << unsigned{*a.origin};
  o << ",\"as_path\":[";
  for (size_t i = 0; i < a.as_path.size(); ++i) {
    o << (i ? "," : "") << "{\"type\":" << static_cast<unsigned>(a.as_path[i].type)
      << ",\"asns\":[";
    for (size_t j = 0; j < a.as_path[i].asns.size(); ++j) {
      o << (j ? "," : "") << a.as_path[i].asns[j];
    }
    o << "]}";
  }
  o << "]";
  if (a.next_hop) o << ",\"next_hop\":" << Quote(bgp::Ipv4ToString(*a.next_hop));
  if (!a.mp_next_hop.empty()) o << ",\"mp_next_hop\":" << Hex(a.mp_next_hop);
  if (a.med) o << ",\"med\":" << *a.med;
  if (a.local_pref) o << ",\"local_pref\":" << *a.local_pref;
  if (a.atomic_aggregate) o << ",\"atomic_aggregate\":true";
  o << ",\"communities\":[";
  for (size_t i = 0; i < a.communities.size(); ++i) o << (i ? "," : "") << a.communities[i];
  o << "],\"ext_communities\":[";
  for (size_t i = 0; i < a.ext_communities.size(); ++i) {
    o << (i ? "," : "") << Hex(a.ext_communities[i].bytes);
  }
  o << "],\"large_communities\":[";
  for (size_t i = 0; i < a.large_communities.size(); ++i) {
    const bgp::LargeCommunity& c = a.large_communities[i];
    o << (i ? "," : "") << "[" << c.global_admin << "," << c.local1 << "," << c.local2 << "]";
  }
  o << "],\"color\":" << a.Color();
  if (auto lb = a.LinkBandwidth()) o << ",\"link_bandwidth\":" << *lb;
  if (a.aigp) o << ",\"aigp\":" << *a.aigp;
  o << ",\"unknown\":[";
  for (size_t i = 0; i < a.unknown.size(); ++i) {
    o << (i ? "," : "") << "{\"type\":" << unsigned{a.unknown[i].type}
      << ",\"flags\":" << unsigned{a.unknown[i].flags} << ",\"value\":" << Hex(a.unknown[i].value)
      << "}";
  }
  o << "],\"reencoded\":" << Hex(bgp::EncodePathAttributes(a, codec)) << "}";
  return o.str();
}

std::string StatusJson(const bgp::Speaker& sp) {
  std::ostringstream o;
  o << "{\"peers\":[";
  bool first = true;
  for (const bgp::Session* s : sp.Sessions()) {
    if (!first) o << ",";
    first = false;
    const bgp::SessionCounters& c = s->counters();
    o << "{\"name\":" << Quote(s->config().name)
      << ",\"state\":" << Quote(bgp::SessionStateName(s->state()))
      << ",\"last_error\":" << Quote(s->last_error()) << ",\"counters\":{"
      << "\"messages_in\":" << CounterMap(c.messages_in)
      << ",\"messages_out\":" << CounterMap(c.messages_out)
      << ",\"prefixes_announced_in\":" << c.prefixes_announced_in
      << ",\"prefixes_withdrawn_in\":" << c.prefixes_withdrawn_in
      << ",\"prefixes_announced_out\":" << c.prefixes_announced_out
      << ",\"prefixes_withdrawn_out\":" << c.prefixes_withdrawn_out
      << ",\"treat_as_withdraw\":" << c.treat_as_withdraw
      << ",\"attributes_discarded\":" << c.attributes_discarded
      << ",\"end_of_rib_in\":" << c.end_of_rib_in
      << ",\"established_transitions\":" << c.established_transitions << ",\"flaps\":" << c.flaps
      << ",\"notifications_sent\":" << CounterMap(c.notifications_sent)
      << ",\"notifications_received\":" << CounterMap(c.notifications_received) << "}";
    o << ",\"rib_in\":[";
    bool f2 = true;
    if (const auto* rib = sp.AdjRibIn(s->config().name)) {
      for (const auto& [prefix, r] : *rib) {
        o << (f2 ? "" : ",") << RouteJson(prefix, r, s->codec_options());
        f2 = false;
      }
    }
    o << "],\"rib_out\":[";
    bool f3 = true;
    for (const bgp::Prefix& p : sp.AdjRibOut(s->config().name)) {
      o << (f3 ? "" : ",") << Quote(p.ToString());
      f3 = false;
    }
    o << "]}";
  }
  o << "]}";
  return o.str();
}

}  // namespace

int main(int argc, char** argv) {
  bgp::SpeakerConfig cfg;
  cfg.router_id = 0x0a000001;
  cfg.listen_port = -1;
  std::vector<bgp::PeerConfig> peers;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--router-id") {
      cfg.router_id = bgp::ParseRouterId(next()).value_or(0);
    } else if (a == "--listen-port") {
      cfg.listen_port = std::stoi(next());
    } else if (a == "--peer") {
      auto kv = ParseKv(next());
      bgp::PeerConfig p;
      p.name = kv["name"];
      p.local_as = static_cast<uint32_t>(std::stoul(kv["local_as"]));
      p.peer_as = static_cast<uint32_t>(std::stoul(kv["peer_as"]));
      p.peer_address = kv.count("addr") ? kv["addr"] : "127.0.0.1";
      p.peer_port = static_cast<uint16_t>(std::stoul(kv.count("port") ? kv["port"] : "179"));
      p.passive = kv["passive"] == "1";
      p.fabric_color = static_cast<uint32_t>(std::stoul(kv.count("color") ? kv["color"] : "0"));
      p.next_hop = kv["next_hop"];
      p.hold_time_s = static_cast<uint16_t>(std::stoul(kv.count("hold") ? kv["hold"] : "9"));
      p.graceful_restart = kv.count("gr") ? kv["gr"] == "1" : true;
      p.connect_retry = std::chrono::milliseconds(500);
      p.idle_hold = std::chrono::milliseconds(200);
      peers.push_back(p);
    } else {
      std::cerr << "unknown flag " << a << "\n";
      return 2;
    }
  }
  loom::SetLogLevel(loom::LogLevel::kInfo);
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  bgp::Speaker speaker(io, cfg);
  loom::Status st = speaker.Start();
  if (!st.ok()) {
    std::cerr << st.message() << "\n";
    return 1;
  }
  for (const auto& p : peers) {
    st = speaker.AddPeer(p);
    if (!st.ok()) {
      std::cerr << st.message() << "\n";
      return 2;
    }
  }
  std::thread io_thread([&io] { io.run(); });
  std::map<bgp::Prefix, bgp::OriginatedRoute> routes;
  auto run = [&io](std::function<std::string()> fn) {
    std::promise<std::string> done;
    boost::asio::post(io, [&] { done.set_value(fn()); });
    return done.get_future().get();
  };
  auto push_routes = [&] {
    std::vector<bgp::OriginatedRoute> all;
    for (auto& [p, r] : routes) all.push_back(r);
    return run([&] {
      speaker.SetRoutes("", all);
      return std::string("{\"ok\":true}");
    });
  };
  std::cout << "{\"listen_port\":" << speaker.listen_port() << "}" << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    auto words = Split(line, ' ');
    if (words.empty()) continue;
    std::string answer;
    if ((words[0] == "route" || words[0] == "withdraw") && words.size() >= 2) {
      auto prefix = bgp::Prefix::Parse(words[1]);
      if (!prefix) {
        answer = "{\"error\":\"bad prefix\"}";
      } else if (words[0] == "withdraw") {
        routes.erase(*prefix);
        answer = push_routes();
      } else {
        bgp::OriginatedRoute r;
        r.prefix = *prefix;
        for (size_t i = 2; i < words.size(); ++i) {
          auto eq = words[i].find('=');
          if (eq == std::string::npos) continue;
          std::string k = words[i].substr(0, eq), v = words[i].substr(eq + 1);
          if (k == "color") r.color = static_cast<uint32_t>(std::stoul(v));
          if (k == "med") r.med = static_cast<uint32_t>(std::stoul(v));
        }
        routes[r.prefix] = r;
        answer = push_routes();
      }
    } else if (words[0] == "status") {
      answer = run([&] { return StatusJson(speaker); });
    } else if (words[0] == "quit") {
      run([&] {
        speaker.Shutdown();
        return std::string();
      });
      break;
    } else {
      answer = "{\"error\":\"unknown command\"}";
    }
    std::cout << answer << std::endl;
  }
  // Let the Cease go out, then stop.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  guard.reset();
  io.stop();
  io_thread.join();
  return 0;
}
