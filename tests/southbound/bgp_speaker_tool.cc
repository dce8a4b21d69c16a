// A standalone Loom BGP speaker for the interop tests (gobgpd, malformed
// peer) and for manual experiments: flags and stdin commands as in
// speaker_tool.h (restart time 30 s unless a peer says otherwise); `status`
// shows each Adj-RIB-In route as prefix, color, stale, next hop, AIGP, link
// bandwidth, NNHN and unknown attribute types.
#include <sstream>
#include <string>

#include "southbound/bgp/speaker.h"
#include "tests/southbound/speaker_tool.h"

namespace bgp = loom::southbound::bgp;
using bgp::tool::Quote;

namespace {

std::string RouteJson(const bgp::Prefix& prefix, const bgp::ReceivedRoute& r, const bgp::Session&) {
  std::ostringstream o;
  o << "{\"prefix\":" << Quote(prefix.ToString()) << ",\"color\":" << r.attrs.Color()
    << ",\"stale\":" << (r.stale ? "true" : "false");
  if (r.attrs.next_hop) o << ",\"next_hop\":" << Quote(bgp::Ipv4ToString(*r.attrs.next_hop));
  if (r.attrs.aigp) o << ",\"aigp\":" << *r.attrs.aigp;
  if (auto lb = r.attrs.LinkBandwidth()) o << ",\"link_bandwidth\":" << *lb;
  if (r.attrs.nnhn) {
    o << ",\"nnhn\":{\"next_hop\":" << Quote(bgp::Ipv4ToString(r.attrs.nnhn->next_hop))
      << ",\"next_hop_id\":" << Quote(bgp::RouterIdToString(r.attrs.nnhn->next_hop_bgp_id))
      << ",\"next_next_hops\":[";
    for (size_t i = 0; i < r.attrs.nnhn->next_next_hop_bgp_ids.size(); ++i) {
      o << (i ? "," : "") << Quote(bgp::RouterIdToString(r.attrs.nnhn->next_next_hop_bgp_ids[i]));
    }
    o << "]}";
  }
  o << ",\"unknown_attrs\":[";
  for (size_t i = 0; i < r.attrs.unknown.size(); ++i) {
    o << (i ? "," : "") << unsigned{r.attrs.unknown[i].type};
  }
  o << "]}";
  return o.str();
}

}  // namespace

int main(int argc, char** argv) {
  bgp::tool::ToolOptions options;
  options.default_restart_time_s = 30;
  options.route_json = RouteJson;
  return bgp::tool::RunSpeakerTool(argc, argv, options);
}
