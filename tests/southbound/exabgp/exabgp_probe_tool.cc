// A Loom BGP speaker for the exabgp interop test: flags and stdin commands as
// in tests/southbound/speaker_tool.h (like bgp_speaker_tool), but `status`
// reports every decoded attribute of every Adj-RIB-In route (ORIGIN,
// AS_PATH segments, NEXT_HOP, MP next hop, MED, LOCAL_PREF, communities,
// extended and large communities, AIGP, unknown attributes with their flags)
// and the attribute block Loom would emit for it (`reencoded`, hex) so the
// test can check the Partial bit on propagated unknown transitive attributes.
//
//   exabgp_probe_tool --router-id 10.0.0.1 --listen-port 0
//     --peer name=ebgp,local_as=65000,peer_as=65001,addr=127.0.0.1,passive=1,hold=9
#include <sstream>
#include <string>

#include "southbound/bgp/speaker.h"
#include "tests/southbound/speaker_tool.h"

namespace bgp = loom::southbound::bgp;
using bgp::tool::Quote;

namespace {

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

std::string RouteJson(const bgp::Prefix& prefix, const bgp::ReceivedRoute& r,
                      const bgp::Session& session) {
  const bgp::CodecOptions& codec = session.codec_options();
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

}  // namespace

int main(int argc, char** argv) {
  bgp::tool::ToolOptions options;
  options.route_json = RouteJson;
  return bgp::tool::RunSpeakerTool(argc, argv, options);
}
