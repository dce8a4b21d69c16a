// One BGP session: the RFC 4271 finite state machine (Idle, Connect, Active,
// OpenSent, OpenConfirm, Established) on a Boost.Asio TCP socket, with the
// ConnectRetry, Hold and Keepalive timers (jitter 0.75-1.0), capability
// negotiation, NOTIFICATION handling and per-session counters.
//
// Role: transport and state only. Routes are the Speaker's business: the
// session hands decoded UPDATEs to its SessionHandler and sends the bytes the
// handler gives it.
// Triggers: Start()/Stop() from the owner, TCP events, timers.
// Thread: everything runs on the io_context the session was created with;
// that io_context must be run by exactly one thread (it is the strand), and
// every public method must be called from it.
#ifndef LOOM_SOUTHBOUND_BGP_SESSION_H_
#define LOOM_SOUTHBOUND_BGP_SESSION_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>

#include "southbound/bgp/asio.h"
#include "southbound/bgp/codec.h"

namespace loom::southbound::bgp {

enum class SessionState { kIdle, kConnect, kActive, kOpenSent, kOpenConfirm, kEstablished };
const char* SessionStateName(SessionState s);

// Per-peer configuration.
struct PeerConfig {
  // Unique name of the session (for example "leaf07/red").
  std::string name;
  // Device the session talks to (BgpDriver groups routes by device); may be
  // empty for sessions that get only global routes.
  std::string device;
  uint32_t local_as = 0;
  uint32_t peer_as = 0;
  // Peer address (IPv4 or IPv6 literal) and TCP port to dial or accept from.
  std::string peer_address = "127.0.0.1";
  uint16_t peer_port = 179;
  // Local address to bind when dialing (empty: any).
  std::string local_address;
  // Passive: never dial, only accept. Otherwise dial (and still accept).
  bool passive = false;
  uint16_t hold_time_s = 90;
  std::chrono::milliseconds connect_retry{120'000};
  // Delay before an automatic restart after the session fell to Idle.
  std::chrono::milliseconds idle_hold{1'000};
  // BGP-DPF fabric color of the session (0 = uncolored).
  uint32_t fabric_color = 0;
  // NEXT_HOP Loom puts on routes sent on this session (next-hop-self).
  std::string next_hop;
  // The neighbor device the session stands for (a spine id) when Loom
  // injects one path per next hop; link-bandwidth weights are keyed by it.
  std::string via;
  // IP TTL of the session's packets; 0 = the system default. eBGP uses 1
  // towards a directly connected peer and 255 for multihop. Set before the
  // connection is made (the SYN carries it too).
  int ttl = 0;
  // TCP MD5 signature (RFC 2385) key for the peer address, 1..80 bytes
  // (TCP_MD5SIG_MAXKEYLEN); empty = none. Set on the socket before connect
  // (and on the speaker's listener, keyed by the peer address). The session
  // never falls back to an unsigned connection: if the kernel refuses the
  // key, the dial fails.
  std::string md5_password;
  // GTSM (RFC 5082): the peer is at most this many hops away (1..254);
  // 0 = off. Sends with TTL (IPv6: hop limit) 255 whatever `ttl` says and
  // sets IP_MINTTL (IPV6_MINHOPCOUNT) = 256 - hops, so the kernel drops the
  // session's packets sent from further away.
  int ttl_security_hops = 0;
  // Most prefixes accepted from the peer per address family; one more and
  // the session is closed with Cease / Maximum Number of Prefixes Reached
  // (RFC 4486) and stays down for max_prefix_restart. 0 = no limit.
  uint32_t max_prefixes_received = 0;
  std::chrono::milliseconds max_prefix_restart{60'000};
  // Graceful restart (RFC 4724): advertise the capability, act as helper.
  bool graceful_restart = true;
  uint16_t restart_time_s = 120;
  // Advertise and accept IPv6 unicast.
  bool ipv6 = true;
};

// Counters of one session; kept across flaps.
struct SessionCounters {
  std::array<uint64_t, 6> messages_in{};  // Indexed by MessageType (1..5).
  std::array<uint64_t, 6> messages_out{};
  uint64_t prefixes_announced_in = 0;
  uint64_t prefixes_withdrawn_in = 0;
  uint64_t prefixes_announced_out = 0;
  uint64_t prefixes_withdrawn_out = 0;
  uint64_t treat_as_withdraw = 0;
  uint64_t attributes_discarded = 0;
  uint64_t end_of_rib_in = 0;
  std::array<uint64_t, 7> notifications_sent{};  // Indexed by error code (1..6).
  std::array<uint64_t, 7> notifications_received{};
  uint64_t established_transitions = 0;
  uint64_t flaps = 0;  // Established -> down.
  // Sessions closed because the peer sent more than max_prefixes_received.
  uint64_t max_prefix_teardowns = 0;
  // Dials that failed: refused, unreachable, or no answer before the
  // ConnectRetry timer (what a TCP MD5 password mismatch or a GTSM drop of
  // the SYN-ACK looks like from this side).
  uint64_t connect_failures = 0;
  // Connections closed because a socket option (MD5 key, TTL, minimum TTL)
  // could not be set.
  uint64_t socket_option_errors = 0;
};

// Socket options of the hardening above (Linux). Each returns false and
// fills `error` when the kernel refuses. `fd` is a TCP socket (or listener)
// of the peer's address family.
// TCP_MD5SIG for `peer` (an empty key removes the peer's key).
bool SetTcpMd5Key(int fd, const boost::asio::ip::address& peer, const std::string& key,
                  std::string* error);
// TTL (IPv6: unicast hops) and, when min_ttl > 0, IP_MINTTL (IPV6_MINHOPCOUNT).
bool SetTtl(int fd, bool v6, int ttl, int min_ttl, std::string* error);

class Session;

// Receives what a session learns. Called on the session's thread.
class SessionHandler {
 public:
  virtual ~SessionHandler() = default;
  virtual void OnEstablished(Session* s) = 0;
  // The session left Established (or never reached it). `graceful`: the
  // peer negotiated graceful restart and the session ended without a
  // NOTIFICATION, so its routes should be kept as stale (RFC 4724).
  virtual void OnDown(Session* s, bool was_established, bool graceful) = 0;
  virtual void OnUpdate(Session* s, const UpdateMessage& u) = 0;
  virtual void OnRouteRefresh(Session* s, const RouteRefreshMessage& rr) = 0;
};

// Identity and restart state the session advertises in its OPEN.
struct LocalIdentity {
  uint32_t router_id = 0;
  // Set when this speaker restarted and wants helpers to keep its routes
  // (R bit and F bit in the graceful restart capability).
  bool restarting = false;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(boost::asio::io_context& io, PeerConfig config, LocalIdentity identity,
          SessionHandler* handler);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // ManualStart (active or passive per config).
  void Start();
  // ManualStop: sends Cease/Administrative Shutdown when connected.
  void Stop();
  // Hands an accepted connection to the session. Returns false when the
  // session does not take it (for example already Established without
  // graceful restart); the caller closes it.
  bool Accept(boost::asio::ip::tcp::socket socket);
  // Queues an encoded message. Only in Established (others are dropped).
  // Messages queued by one handler go out together once it returns (one
  // write for all of them, after the caller has built every session's).
  void Send(Bytes msg);
  // Starts writing what Send queued now instead of after the handler (the
  // speaker calls it once every session of a SetRoutes has its UPDATEs).
  void WriteQueued();
  // Calls `cb` once everything queued so far is written to the socket (or
  // the session went down).
  void OnDrained(std::function<void()> cb);
  // Closes the connection without a NOTIFICATION and detaches the handler,
  // as a crash would (peers keep routes per graceful restart).
  void Abort();
  // Sends a NOTIFICATION and drops the session (used for admin resets).
  void Reset(uint8_t code, uint8_t subcode);
  // The peer sent more than max_prefixes_received prefixes of `afi`: sends
  // Cease / Maximum Number of Prefixes Reached with the RFC 4486 data (AFI,
  // SAFI, limit), drops the session (its routes go: no graceful restart),
  // counts it and stays Idle for max_prefix_restart before dialing again
  // (connections the peer makes meanwhile are refused).
  void CloseForMaxPrefixes(Afi afi, uint32_t limit);
  // Closed for too many prefixes and waiting out max_prefix_restart.
  bool held_down() const { return held_down_; }

  const PeerConfig& config() const { return config_; }
  SessionState state() const { return state_; }
  const SessionCounters& counters() const { return counters_; }
  // The speaker counts prefixes it sends.
  SessionCounters& mutable_counters() { return counters_; }
  const OpenMessage& peer_open() const { return peer_open_; }
  // Codec options negotiated with the peer (4-octet AS, eBGP).
  const CodecOptions& codec_options() const { return codec_; }
  // Negotiated hold time (0 = no keepalives).
  uint16_t hold_time_s() const { return hold_time_s_; }
  const std::string& last_error() const { return last_error_; }
  // The peer advertised graceful restart with at least one family.
  bool PeerSupportsGracefulRestart() const;
  // Restart time the peer advertised (seconds).
  uint16_t PeerRestartTime() const;
  // For tests: the local TCP endpoint after connect.
  std::optional<boost::asio::ip::tcp::endpoint> RemoteEndpoint() const;
  // Writes bytes without framing checks (tests inject raw messages).
  void SendRaw(Bytes bytes);

 private:
  void Transition(SessionState next);
  void Connect();
  void OnConnected(const boost::system::error_code& ec);
  void ConnectionUp();
  // Reads what the socket has (into rx_buf_) and handles every complete
  // message in it, in order.
  void Read();
  void HandleInput();
  void HandleMessage(ByteView msg);
  void HandleOpen(const OpenMessage& open);
  void SendOpen();
  void SendKeepalive();
  void SendNotification(uint8_t code, uint8_t subcode, const Bytes& data, const std::string& why);
  void Write(Bytes msg, MessageType type);
  void DoWrite();
  // Writes the queue once the current handler returns.
  void ScheduleWrite();
  // Tears down the connection. `notified`: a NOTIFICATION was sent or
  // received (no graceful restart retention).
  void Drop(const std::string& why, bool notified);
  void ArmConnectRetry();
  void ArmHold(uint16_t seconds);
  void ArmKeepalive();
  void ArmIdleRestart();
  // Applies ttl / GTSM (and, when dialing, the MD5 key) to socket_. False:
  // counted, logged, last_error_ set.
  bool SecureSocket(const boost::asio::ip::address& peer, bool dialing);
  void ConnectFailed(const std::string& why);
  std::chrono::milliseconds Jitter(std::chrono::milliseconds base);
  void RunDrainCallbacks();

  boost::asio::io_context& io_;
  PeerConfig config_;
  LocalIdentity identity_;
  SessionHandler* handler_;
  SessionState state_ = SessionState::kIdle;
  bool started_ = false;
  std::unique_ptr<boost::asio::ip::tcp::socket> socket_;
  uint64_t generation_ = 0;  // Bumped on every drop; stale callbacks check it.
  boost::asio::steady_timer connect_retry_timer_;
  boost::asio::steady_timer hold_timer_;
  boost::asio::steady_timer keepalive_timer_;
  boost::asio::steady_timer idle_timer_;
  // Received bytes; [rx_begin_, rx_end_) not handled yet.
  Bytes rx_buf_;
  size_t rx_begin_ = 0;
  size_t rx_end_ = 0;
  std::deque<Bytes> out_queue_;
  bool writing_ = false;
  bool write_scheduled_ = false;
  uint64_t queued_seq_ = 0;
  uint64_t written_seq_ = 0;
  std::deque<std::pair<uint64_t, std::function<void()>>> drain_callbacks_;
  OpenMessage peer_open_;
  CodecOptions codec_;
  uint16_t hold_time_s_ = 0;
  std::string last_error_;
  // Dial failures since the last successful connection (logs back off).
  uint64_t failed_dials_ = 0;
  // After CloseForMaxPrefixes: the next idle wait, and whether Loom is in it.
  std::optional<std::chrono::milliseconds> next_idle_hold_;
  bool held_down_ = false;
  SessionCounters counters_;
  std::mt19937 rng_;
};

}  // namespace loom::southbound::bgp

#endif  // LOOM_SOUTHBOUND_BGP_SESSION_H_
