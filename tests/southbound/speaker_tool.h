// The common core of the standalone Loom BGP speakers the interop tests drive
// (bgp_speaker_tool for gobgpd and the malformed peer, exabgp_probe_tool for
// exabgp): flags, one command per stdin line, one JSON line per answer.
//
//   TOOL --router-id 10.0.0.1 [--listen-port N|-1] [--restarting]
//     --peer name=P,local_as=A,peer_as=B[,addr=127.0.0.1][,port=179][,passive=0|1]
//            [,color=C][,next_hop=IP][,via=V][,device=D][,hold=9][,restart_time=S][,gr=0|1]
//            [,local=IP][,ttl=N][,md5=PASSWORD][,gtsm=HOPS][,max_prefixes=N]
//            [,max_prefix_restart_ms=MS][,connect_retry_ms=500]
//   stdin:  route PREFIX [color=X] [backup=Y] [backup_aigp=N] [lbw=VIA:BYTES_PER_S]
//                 [large=A:B:C] [nnhn=VIA:NH_ID[:NNH_ID...]]... [med=N]
//                 (nnhn: as OriginatedRoute::nnhn_by_via; a session whose via
//                 has no nnhn entry does not get the route)
//           withdraw PREFIX | ready | status | quit
//   stdout: one JSON line per command (first line: {"listen_port":N}).
//
// Thread: the speaker runs on its own io thread; stdin commands are posted to
// it and the main thread waits for the answer. `status` (StatusJson) runs on
// the io thread.
#ifndef LOOM_TESTS_SOUTHBOUND_SPEAKER_TOOL_H_
#define LOOM_TESTS_SOUTHBOUND_SPEAKER_TOOL_H_

#include <cstdint>
#include <functional>
#include <string>

#include "southbound/bgp/speaker.h"

namespace loom::southbound::bgp::tool {

// One Adj-RIB-In route of a session as a JSON object.
using RouteJson = std::function<std::string(const Prefix&, const ReceivedRoute&, const Session&)>;

struct ToolOptions {
  // Restart time advertised when a --peer has no restart_time.
  uint16_t default_restart_time_s = 120;
  // How `status` shows a received route.
  RouteJson route_json;
};

// Runs the tool; returns the process exit status (2: bad flags or peers).
int RunSpeakerTool(int argc, char** argv, const ToolOptions& options);

// "\"s\"" (no escaping: the tools print names, prefixes and hex only).
std::string Quote(const std::string& s);

// The answer of `status`: {"peers": [{"name", "state", "last_error",
// "counters": {updates_in, updates_out, keepalives_in, opens_in,
// notifications_in, messages_in/out and notifications_sent/received (maps
// type/code -> count), prefixes_announced/withdrawn_in/out,
// treat_as_withdraw, attributes_discarded, end_of_rib_in,
// established_transitions, flaps, max_prefix_teardowns, connect_failures,
// socket_option_errors, held_down}, "rib_in": [route_json...], "rib_out":
// [prefix...]}]}. Speaker thread.
std::string StatusJson(const Speaker& sp, const RouteJson& route_json);

}  // namespace loom::southbound::bgp::tool

#endif  // LOOM_TESTS_SOUTHBOUND_SPEAKER_TOOL_H_
