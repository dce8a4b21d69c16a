// A standalone Loom BGP speaker for the interop tests (gobgpd, malformed
// peer) and for manual experiments. Configured by flags, driven by one
// command per stdin line, answering one JSON line per command on stdout.
//
//   bgp_speaker_tool --router-id 10.0.0.1 [--listen-port N|-1] [--restarting]
//     --peer name=gobgp,local_as=65000,peer_as=65001,addr=127.0.0.1,port=1790,
//            passive=0,color=10,next_hop=198.18.0.1,hold=9,restart_time=30
//   stdin:  route PREFIX [color=X] [backup=Y] [lbw=VIA:BYTES_PER_S]
//                 [large=A:B:C] [nnhn=VIA:NH_ID[:NNH_ID...]]... [med=N]
//                 (nnhn: as OriginatedRoute::nnhn_by_via; a session whose
//                 via has no nnhn entry does not get the route)
//           withdraw PREFIX | ready | status | quit
//
// Thread: the speaker runs on its own io thread; stdin commands are posted
// to it and the main thread waits for the answer.
#include <cstdio>
#include <future>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

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
  while (std::getline(ss, item, sep)) out.push_back(item);
  return out;
}

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

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
      << ",\"last_error\":" << Quote(s->last_error()) << ",\"counters\":{";
    o << "\"updates_in\":" << c.messages_in[2] << ",\"updates_out\":" << c.messages_out[2]
      << ",\"keepalives_in\":" << c.messages_in[4] << ",\"opens_in\":" << c.messages_in[1]
      << ",\"notifications_in\":" << c.messages_in[3]
      << ",\"prefixes_announced_in\":" << c.prefixes_announced_in
      << ",\"prefixes_withdrawn_in\":" << c.prefixes_withdrawn_in
      << ",\"prefixes_announced_out\":" << c.prefixes_announced_out
      << ",\"prefixes_withdrawn_out\":" << c.prefixes_withdrawn_out
      << ",\"treat_as_withdraw\":" << c.treat_as_withdraw
      << ",\"attributes_discarded\":" << c.attributes_discarded
      << ",\"end_of_rib_in\":" << c.end_of_rib_in
      << ",\"established_transitions\":" << c.established_transitions << ",\"flaps\":" << c.flaps
      << ",\"notifications_sent\":{";
    bool f2 = true;
    for (size_t i = 1; i < c.notifications_sent.size(); ++i) {
      if (!c.notifications_sent[i]) continue;
      o << (f2 ? "" : ",") << "\"" << i << "\":" << c.notifications_sent[i];
      f2 = false;
    }
    o << "}},\"rib_in\":[";
    bool f3 = true;
    if (const auto* rib = sp.AdjRibIn(s->config().name)) {
      for (const auto& [prefix, r] : *rib) {
        o << (f3 ? "" : ",") << "{\"prefix\":" << Quote(prefix.ToString())
          << ",\"color\":" << r.attrs.Color() << ",\"stale\":" << (r.stale ? "true" : "false");
        if (r.attrs.next_hop) o << ",\"next_hop\":" << Quote(bgp::Ipv4ToString(*r.attrs.next_hop));
        if (r.attrs.aigp) o << ",\"aigp\":" << *r.attrs.aigp;
        if (auto lb = r.attrs.LinkBandwidth()) o << ",\"link_bandwidth\":" << *lb;
        if (r.attrs.nnhn) {
          o << ",\"nnhn\":{\"next_hop\":" << Quote(bgp::Ipv4ToString(r.attrs.nnhn->next_hop))
            << ",\"next_hop_id\":" << Quote(bgp::RouterIdToString(r.attrs.nnhn->next_hop_bgp_id))
            << ",\"next_next_hops\":[";
          for (size_t i = 0; i < r.attrs.nnhn->next_next_hop_bgp_ids.size(); ++i) {
            o << (i ? "," : "")
              << Quote(bgp::RouterIdToString(r.attrs.nnhn->next_next_hop_bgp_ids[i]));
          }
          o << "]}";
        }
        o << ",\"unknown_attrs\":[";
        for (size_t i = 0; i < r.attrs.unknown.size(); ++i) {
          o << (i ? "," : "") << unsigned{r.attrs.unknown[i].type};
        }
        o << "]}";
        f3 = false;
      }
    }
    o << "]}";
  }
  o << "]}";
  return o.str();
}

bool ParseRoute(const std::vector<std::string>& words, bgp::OriginatedRoute* r, std::string* err) {
  auto p = bgp::Prefix::Parse(words[1]);
  if (!p) {
    *err = "bad prefix";
    return false;
  }
  r->prefix = *p;
  for (size_t i = 2; i < words.size(); ++i) {
    auto eq = words[i].find('=');
    if (eq == std::string::npos) continue;
    std::string k = words[i].substr(0, eq), v = words[i].substr(eq + 1);
    if (k == "color") r->color = std::stoul(v);
    if (k == "backup") r->backup_color = std::stoul(v);
    if (k == "backup_aigp") r->backup_aigp = std::stoull(v);
    if (k == "med") r->med = std::stoul(v);
    if (k == "lbw") {
      auto parts = Split(v, ':');
      if (parts.size() == 2) r->bandwidth_by_via[parts[0]] = std::stof(parts[1]);
    }
    if (k == "large") {
      auto parts = Split(v, ':');
      if (parts.size() == 3) {
        r->large_communities.push_back({static_cast<uint32_t>(std::stoul(parts[0])),
                                        static_cast<uint32_t>(std::stoul(parts[1])),
                                        static_cast<uint32_t>(std::stoul(parts[2]))});
      }
    }
    if (k == "nnhn") {
      auto parts = Split(v, ':');
      if (parts.size() < 2) {
        *err = "nnhn=VIA:NH_ID[:NNH_ID...]";
        return false;
      }
      bgp::NextNextHops n;
      n.next_hop_bgp_id = bgp::ParseRouterId(parts[1]).value_or(0);
      for (size_t j = 2; j < parts.size(); ++j) {
        n.next_next_hop_bgp_ids.push_back(bgp::ParseRouterId(parts[j]).value_or(0));
      }
      r->nnhn_by_via[parts[0]] = n;
    }
  }
  return true;
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
    } else if (a == "--restarting") {
      cfg.restarting = true;
    } else if (a == "--peer") {
      auto kv = ParseKv(next());
      bgp::PeerConfig p;
      p.name = kv["name"];
      p.device = kv.count("device") ? kv["device"] : "";
      p.local_as = std::stoul(kv["local_as"]);
      p.peer_as = std::stoul(kv["peer_as"]);
      p.peer_address = kv.count("addr") ? kv["addr"] : "127.0.0.1";
      p.peer_port = static_cast<uint16_t>(std::stoul(kv.count("port") ? kv["port"] : "179"));
      p.passive = kv["passive"] == "1";
      p.fabric_color = std::stoul(kv.count("color") ? kv["color"] : "0");
      p.next_hop = kv["next_hop"];
      p.via = kv["via"];
      p.hold_time_s = static_cast<uint16_t>(std::stoul(kv.count("hold") ? kv["hold"] : "9"));
      p.restart_time_s =
          static_cast<uint16_t>(std::stoul(kv.count("restart_time") ? kv["restart_time"] : "30"));
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
  std::cout << "{\"listen_port\":" << speaker.listen_port() << "}" << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    auto words = Split(line, ' ');
    if (words.empty()) continue;
    std::string answer;
    if (words[0] == "route" && words.size() >= 2) {
      bgp::OriginatedRoute r;
      std::string err;
      if (!ParseRoute(words, &r, &err)) {
        answer = "{\"error\":" + Quote(err) + "}";
      } else {
        routes[r.prefix] = r;
        std::vector<bgp::OriginatedRoute> all;
        for (auto& [p, rr] : routes) all.push_back(rr);
        answer = run([&] {
          speaker.SetRoutes("", all);
          return std::string("{\"ok\":true}");
        });
      }
    } else if (words[0] == "withdraw" && words.size() >= 2) {
      if (auto p = bgp::Prefix::Parse(words[1])) routes.erase(*p);
      std::vector<bgp::OriginatedRoute> all;
      for (auto& [p, rr] : routes) all.push_back(rr);
      answer = run([&] {
        speaker.SetRoutes("", all);
        return std::string("{\"ok\":true}");
      });
    } else if (words[0] == "ready") {
      answer = run([&] {
        speaker.MarkRibReady();
        return std::string("{\"ok\":true}");
      });
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
