#include "tests/southbound/speaker_tool.h"

#include <array>
#include <chrono>
#include <future>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "common/log.h"

namespace loom::southbound::bgp::tool {

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

PeerConfig ParsePeer(std::map<std::string, std::string> kv, const ToolOptions& options) {
  auto get = [&kv](const std::string& k, const std::string& def) {
    return kv.count(k) ? kv[k] : def;
  };
  PeerConfig p;
  p.name = kv["name"];
  p.device = kv["device"];
  p.local_as = static_cast<uint32_t>(std::stoul(kv["local_as"]));
  p.peer_as = static_cast<uint32_t>(std::stoul(kv["peer_as"]));
  p.peer_address = get("addr", "127.0.0.1");
  p.peer_port = static_cast<uint16_t>(std::stoul(get("port", "179")));
  p.passive = kv["passive"] == "1";
  p.fabric_color = static_cast<uint32_t>(std::stoul(get("color", "0")));
  p.next_hop = kv["next_hop"];
  p.via = kv["via"];
  p.hold_time_s = static_cast<uint16_t>(std::stoul(get("hold", "9")));
  p.restart_time_s = static_cast<uint16_t>(
      std::stoul(get("restart_time", std::to_string(options.default_restart_time_s))));
  p.graceful_restart = get("gr", "1") == "1";
  p.connect_retry = std::chrono::milliseconds(std::stoul(get("connect_retry_ms", "500")));
  p.idle_hold = std::chrono::milliseconds(200);
  p.local_address = kv["local"];
  p.ttl = std::stoi(get("ttl", "0"));
  p.md5_password = kv["md5"];
  p.ttl_security_hops = std::stoi(get("gtsm", "0"));
  p.max_prefixes_received = static_cast<uint32_t>(std::stoul(get("max_prefixes", "0")));
  p.max_prefix_restart =
      std::chrono::milliseconds(std::stoul(get("max_prefix_restart_ms", "60000")));
  return p;
}

bool ParseRoute(const std::vector<std::string>& words, OriginatedRoute* r, std::string* err) {
  auto p = Prefix::Parse(words[1]);
  if (!p) {
    *err = "bad prefix";
    return false;
  }
  r->prefix = *p;
  for (size_t i = 2; i < words.size(); ++i) {
    auto eq = words[i].find('=');
    if (eq == std::string::npos) continue;
    std::string k = words[i].substr(0, eq), v = words[i].substr(eq + 1);
    if (k == "color") r->color = static_cast<uint32_t>(std::stoul(v));
    if (k == "backup") r->backup_color = static_cast<uint32_t>(std::stoul(v));
    if (k == "backup_aigp") r->backup_aigp = std::stoull(v);
    if (k == "med") r->med = static_cast<uint32_t>(std::stoul(v));
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
      NextNextHops n;
      n.next_hop_bgp_id = ParseRouterId(parts[1]).value_or(0);
      for (size_t j = 2; j < parts.size(); ++j) {
        n.next_next_hop_bgp_ids.push_back(ParseRouterId(parts[j]).value_or(0));
      }
      r->nnhn_by_via[parts[0]] = n;
    }
  }
  return true;
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

}  // namespace

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

std::string StatusJson(const Speaker& sp, const RouteJson& route_json) {
  std::ostringstream o;
  o << "{\"peers\":[";
  bool first = true;
  for (const Session* s : sp.Sessions()) {
    if (!first) o << ",";
    first = false;
    const SessionCounters& c = s->counters();
    o << "{\"name\":" << Quote(s->config().name)
      << ",\"state\":" << Quote(SessionStateName(s->state()))
      << ",\"last_error\":" << Quote(s->last_error()) << ",\"counters\":{"
      << "\"updates_in\":" << c.messages_in[2] << ",\"updates_out\":" << c.messages_out[2]
      << ",\"keepalives_in\":" << c.messages_in[4] << ",\"opens_in\":" << c.messages_in[1]
      << ",\"notifications_in\":" << c.messages_in[3]
      << ",\"messages_in\":" << CounterMap(c.messages_in)
      << ",\"messages_out\":" << CounterMap(c.messages_out)
      << ",\"prefixes_announced_in\":" << c.prefixes_announced_in
      << ",\"prefixes_withdrawn_in\":" << c.prefixes_withdrawn_in
      << ",\"prefixes_announced_out\":" << c.prefixes_announced_out
      << ",\"prefixes_withdrawn_out\":" << c.prefixes_withdrawn_out
      << ",\"treat_as_withdraw\":" << c.treat_as_withdraw
      << ",\"attributes_discarded\":" << c.attributes_discarded
      << ",\"end_of_rib_in\":" << c.end_of_rib_in
      << ",\"established_transitions\":" << c.established_transitions << ",\"flaps\":" << c.flaps
      << ",\"max_prefix_teardowns\":" << c.max_prefix_teardowns
      << ",\"connect_failures\":" << c.connect_failures
      << ",\"socket_option_errors\":" << c.socket_option_errors
      << ",\"held_down\":" << (s->held_down() ? "true" : "false")
      << ",\"notifications_sent\":" << CounterMap(c.notifications_sent)
      << ",\"notifications_received\":" << CounterMap(c.notifications_received) << "}";
    o << ",\"rib_in\":[";
    bool f2 = true;
    if (const auto* rib = sp.AdjRibIn(s->config().name)) {
      for (const auto& [prefix, r] : *rib) {
        o << (f2 ? "" : ",") << route_json(prefix, r, *s);
        f2 = false;
      }
    }
    o << "],\"rib_out\":[";
    bool f3 = true;
    for (const Prefix& p : sp.AdjRibOut(s->config().name)) {
      o << (f3 ? "" : ",") << Quote(p.ToString());
      f3 = false;
    }
    o << "]}";
  }
  o << "]}";
  return o.str();
}

int RunSpeakerTool(int argc, char** argv, const ToolOptions& options) {
  SpeakerConfig cfg;
  cfg.router_id = 0x0a000001;
  cfg.listen_port = -1;
  std::vector<PeerConfig> peers;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--router-id") {
      cfg.router_id = ParseRouterId(next()).value_or(0);
    } else if (a == "--listen-port") {
      cfg.listen_port = std::stoi(next());
    } else if (a == "--restarting") {
      cfg.restarting = true;
    } else if (a == "--peer") {
      peers.push_back(ParsePeer(ParseKv(next()), options));
    } else {
      std::cerr << "unknown flag " << a << "\n";
      return 2;
    }
  }
  loom::SetLogLevel(loom::LogLevel::kInfo);
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  Speaker speaker(io, cfg);
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
  std::map<Prefix, OriginatedRoute> routes;
  auto run = [&io](std::function<std::string()> fn) {
    std::promise<std::string> done;
    boost::asio::post(io, [&] { done.set_value(fn()); });
    return done.get_future().get();
  };
  auto push_routes = [&] {
    std::vector<OriginatedRoute> all;
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
    if (words[0] == "route" && words.size() >= 2) {
      OriginatedRoute r;
      std::string err;
      if (!ParseRoute(words, &r, &err)) {
        answer = "{\"error\":" + Quote(err) + "}";
      } else {
        routes[r.prefix] = r;
        answer = push_routes();
      }
    } else if (words[0] == "withdraw" && words.size() >= 2) {
      if (auto p = Prefix::Parse(words[1])) {
        routes.erase(*p);
        answer = push_routes();
      } else {
        answer = "{\"error\":\"bad prefix\"}";
      }
    } else if (words[0] == "ready") {
      answer = run([&] {
        speaker.MarkRibReady();
        return std::string("{\"ok\":true}");
      });
    } else if (words[0] == "status") {
      answer = run([&] { return StatusJson(speaker, options.route_json); });
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

}  // namespace loom::southbound::bgp::tool
