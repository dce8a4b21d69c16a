// A BGP speaker: a TCP listener (passive sessions), a set of Sessions, the
// routes Loom originates (per group: "" = every session, else the sessions of
// one device), per-session Adj-RIB-Out (DPF export + incremental diff into
// UPDATEs) and Adj-RIB-In (with graceful-restart helper stale handling).
//
// Role: route distribution over BGP for the BgpDriver, the benchmark and the
// emulator's leaves (which read the Adj-RIB-In through a RouteListener, e.g.
// into a DpfReceiver).
// Triggers: SetRoutes() from the owner; session events; timers.
// Thread: everything runs on the io_context given at construction, which must
// be run by one thread; all public methods must be called on it (use
// boost::asio::post from other threads).
#ifndef LOOM_SOUTHBOUND_BGP_SPEAKER_H_
#define LOOM_SOUTHBOUND_BGP_SPEAKER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "southbound/bgp/asio.h"
#include "southbound/bgp/dpf.h"
#include "southbound/bgp/session.h"

namespace loom::southbound::bgp {

struct SpeakerConfig {
  uint32_t router_id = 0;
  // Listener for incoming sessions; listen_port 0 = ephemeral, -1 = none.
  std::string listen_address = "127.0.0.1";
  int listen_port = 0;
  // This process restarted and asks peers (graceful-restart helpers) to keep
  // its routes: OPEN carries R and F bits, and End-of-RIB is held back until
  // MarkRibReady() so peers do not purge routes not yet re-originated.
  bool restarting = false;
};

// A route received from a peer.
struct ReceivedRoute {
  PathAttributes attrs;
  bool stale = false;  // Kept from before the peer restarted.
};

class Speaker : public SessionHandler {
 public:
  // Called for every Adj-RIB-In change; attrs == nullptr means withdrawn.
  using RouteListener = std::function<void(const Session& session, const Prefix& prefix,
                                           const PathAttributes* attrs)>;

  Speaker(boost::asio::io_context& io, SpeakerConfig config);
  ~Speaker() override;
  Speaker(const Speaker&) = delete;
  Speaker& operator=(const Speaker&) = delete;

  // Opens the listener (when configured).
  Status Start();
  // Sends Cease to every peer, closes the listener. With `for_restart`, the
  // sessions close without a NOTIFICATION instead, as a crash would: peers
  // that negotiated graceful restart keep Loom's routes (stale) for the
  // restart time Loom advertised, so forwarding survives a restart of Loom.
  void Shutdown(bool for_restart = false);
  uint16_t listen_port() const { return listen_port_; }
  const SpeakerConfig& config() const { return config_; }

  // Adds and starts a session. INVALID_ARGUMENT on a bad config or a
  // duplicate name. With a listener, the session's MD5 key is set on it for
  // the peer address (UNAVAILABLE when the kernel refuses). Connections
  // from addresses no session is configured for are closed on accept.
  Status AddPeer(const PeerConfig& peer);
  void RemovePeer(const std::string& name);

  // Replaces the routes originated for `group` and sends the difference to
  // the affected Established sessions.
  void SetRoutes(const std::string& group, std::vector<OriginatedRoute> routes);
  const std::vector<OriginatedRoute>* Routes(const std::string& group) const;
  // Restarting speaker: the RIB is complete, send End-of-RIB.
  void MarkRibReady();
  // Calls `cb` once everything queued on the sessions of `group` (all
  // sessions for "") has been written to the sockets.
  void Flush(const std::string& group, std::function<void()> cb);

  void AddRouteListener(RouteListener listener);

  // Introspection (speaker thread only).
  std::vector<const Session*> Sessions() const;
  // The sessions whose PeerConfig::device is `device`.
  std::vector<const Session*> SessionsOf(const std::string& device) const;
  const Session* FindSession(const std::string& name) const;
  const std::map<Prefix, ReceivedRoute>* AdjRibIn(const std::string& name) const;
  // Prefixes currently advertised to the session.
  std::vector<Prefix> AdjRibOut(const std::string& name) const;

  // SessionHandler.
  void OnEstablished(Session* s) override;
  void OnDown(Session* s, bool was_established, bool graceful) override;
  void OnUpdate(Session* s, const UpdateMessage& u) override;
  void OnRouteRefresh(Session* s, const RouteRefreshMessage& rr) override;

 private:
  struct Peer {
    std::shared_ptr<Session> session;
    ExportContext export_ctx;
    // Prefix -> key of the attributes sent (encoded attributes + AFI),
    // shared by the prefixes sent with the same attributes.
    std::map<Prefix, std::shared_ptr<const Bytes>> adj_rib_out;
    std::map<Prefix, ReceivedRoute> adj_rib_in;
    // Prefixes in adj_rib_in per AFI (index 1 IPv4, 2 IPv6), for
    // max_prefixes_received.
    std::array<size_t, 3> rib_in_count{};
    std::unique_ptr<boost::asio::steady_timer> stale_timer;
    bool eor_sent = false;
  };
  void DoAccept();
  // Installs the MD5 key of `peer` (empty: removes it) on the listener.
  Status SetListenerKey(const PeerConfig& peer, bool remove);
  // Erases one Adj-RIB-In route and tells the listeners.
  void EraseRibIn(Peer& p, std::map<Prefix, ReceivedRoute>::iterator it);
  Peer* PeerOf(const Session* s);
  // Computes the session's export and sends the difference: one DPF export
  // and attribute encoding per export class, the prefixes that share
  // attributes packed into the same UPDATEs. The session writes them once
  // the current handler returns (Session::Send), so all sessions synced by
  // one SetRoutes are built before any is written.
  void SyncPeer(Peer& p);
  void SendEndOfRib(Peer& p);
  void Notify(const Session& s, const Prefix& prefix, const PathAttributes* attrs);
  void PurgeStale(Peer& p, std::optional<Afi> afi);

  boost::asio::io_context& io_;
  SpeakerConfig config_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  uint16_t listen_port_ = 0;
  bool rib_ready_ = true;
  std::map<std::string, std::unique_ptr<Peer>> peers_;
  // Device -> its peers (in peers_), for per-device SetRoutes and Flush.
  std::map<std::string, std::vector<Peer*>> peers_by_device_;
  // Peers of `group` ("" = all).
  std::vector<Peer*> PeersOf(const std::string& group);
  struct RouteGroup {
    std::vector<OriginatedRoute> routes;
    // Per route, its export class (routes of a class get the same
    // attributes on any session: see ExportClassKey); classes = count.
    std::vector<uint32_t> class_of;
    uint32_t classes = 0;
  };
  std::map<std::string, RouteGroup> routes_;  // group -> routes
  std::vector<RouteListener> listeners_;
  std::shared_ptr<bool> alive_;
};

}  // namespace loom::southbound::bgp

#endif  // LOOM_SOUTHBOUND_BGP_SPEAKER_H_
