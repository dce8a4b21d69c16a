#include "southbound/bgp/session.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"

#ifndef IPV6_MINHOPCOUNT
#define IPV6_MINHOPCOUNT 73  // linux/in6.h; not in every libc's netinet/in.h.
#endif

namespace loom::southbound::bgp {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {
// RFC 4271 §8.2.2: a large hold time while OpenSent.
constexpr uint16_t kOpenSentHoldS = 240;
// RFC 6608 FSM error subcodes.
constexpr uint8_t kFsmUnexpectedInOpenSent = 1;
constexpr uint8_t kFsmUnexpectedInOpenConfirm = 2;
constexpr uint8_t kFsmUnexpectedInEstablished = 3;
}  // namespace

bool SetTcpMd5Key(int fd, const asio::ip::address& peer, const std::string& key,
                  std::string* error) {
  struct tcp_md5sig md5;
  std::memset(&md5, 0, sizeof md5);
  if (key.size() > TCP_MD5SIG_MAXKEYLEN) {
    *error = "TCP MD5 key longer than " + std::to_string(TCP_MD5SIG_MAXKEYLEN) + " bytes";
    return false;
  }
  if (peer.is_v4()) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&md5.tcpm_addr);
    sin->sin_family = AF_INET;
    const auto b = peer.to_v4().to_bytes();
    std::memcpy(&sin->sin_addr, b.data(), b.size());
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&md5.tcpm_addr);
    sin6->sin6_family = AF_INET6;
    const auto b = peer.to_v6().to_bytes();
    std::memcpy(&sin6->sin6_addr, b.data(), b.size());
  }
  md5.tcpm_keylen = static_cast<uint16_t>(key.size());
  std::memcpy(md5.tcpm_key, key.data(), key.size());
  if (setsockopt(fd, IPPROTO_TCP, TCP_MD5SIG, &md5, sizeof md5) != 0) {
    // Removing a key that is not there is not an error.
    if (key.empty() && errno == ENOENT) return true;
    *error = std::string("setsockopt(TCP_MD5SIG): ") + std::strerror(errno);
    return false;
  }
  return true;
}

bool SetTtl(int fd, bool v6, int ttl, int min_ttl, std::string* error) {
  if (ttl > 0) {
    const int level = v6 ? IPPROTO_IPV6 : IPPROTO_IP;
    const int name = v6 ? IPV6_UNICAST_HOPS : IP_TTL;
    if (setsockopt(fd, level, name, &ttl, sizeof ttl) != 0) {
      *error = std::string(v6 ? "setsockopt(IPV6_UNICAST_HOPS): " : "setsockopt(IP_TTL): ") +
               std::strerror(errno);
      return false;
    }
  }
  if (min_ttl > 0) {
    const int level = v6 ? IPPROTO_IPV6 : IPPROTO_IP;
    const int name = v6 ? IPV6_MINHOPCOUNT : IP_MINTTL;
    if (setsockopt(fd, level, name, &min_ttl, sizeof min_ttl) != 0) {
      *error = std::string(v6 ? "setsockopt(IPV6_MINHOPCOUNT): " : "setsockopt(IP_MINTTL): ") +
               std::strerror(errno);
      return false;
    }
  }
  return true;
}

const char* SessionStateName(SessionState s) {
  switch (s) {
    case SessionState::kIdle:
      return "Idle";
    case SessionState::kConnect:
      return "Connect";
    case SessionState::kActive:
      return "Active";
    case SessionState::kOpenSent:
      return "OpenSent";
    case SessionState::kOpenConfirm:
      return "OpenConfirm";
    case SessionState::kEstablished:
      return "Established";
  }
  return "?";
}

Session::Session(asio::io_context& io, PeerConfig config, LocalIdentity identity,
                 SessionHandler* handler)
    : io_(io),
      config_(std::move(config)),
      identity_(identity),
      handler_(handler),
      connect_retry_timer_(io),
      hold_timer_(io),
      keepalive_timer_(io),
      idle_timer_(io),
      rng_(std::random_device{}()) {}

Session::~Session() {
  if (socket_) {
    boost::system::error_code ec;
    socket_->close(ec);
  }
}

void Session::Transition(SessionState next) {
  if (next == state_) return;
  LOG_DEBUG("bgp session state")
      .With("peer", config_.name)
      .With("from", SessionStateName(state_))
      .With("to", SessionStateName(next));
  state_ = next;
}

std::chrono::milliseconds Session::Jitter(std::chrono::milliseconds base) {
  std::uniform_real_distribution<double> d(0.75, 1.0);
  return std::chrono::milliseconds(
      static_cast<int64_t>(static_cast<double>(base.count()) * d(rng_)));
}

void Session::Start() {
  if (started_) return;
  started_ = true;
  held_down_ = false;
  next_idle_hold_.reset();
  if (state_ != SessionState::kIdle) return;
  if (config_.passive) {
    Transition(SessionState::kActive);
  } else {
    Connect();
  }
}

void Session::Stop() {
  if (!started_ && state_ == SessionState::kIdle) {
    handler_ = nullptr;
    return;
  }
  started_ = false;
  idle_timer_.cancel();
  connect_retry_timer_.cancel();
  if (socket_ && state_ >= SessionState::kOpenSent) {
    SendNotification(err::kCease, err::kCeaseAdminShutdown, {}, "administrative shutdown");
  } else {
    Drop("stopped", true);
  }
  handler_ = nullptr;
}

void Session::Abort() {
  started_ = false;
  handler_ = nullptr;
  idle_timer_.cancel();
  Drop("aborted", false);
}

void Session::CloseForMaxPrefixes(Afi afi, uint32_t limit) {
  if (!socket_ || state_ != SessionState::kEstablished) return;
  ++counters_.max_prefix_teardowns;
  const auto a = static_cast<uint16_t>(afi);
  // RFC 4486 §4: AFI (2 octets), SAFI (1), upper bound (4).
  Bytes data = {static_cast<uint8_t>(a >> 8),
                static_cast<uint8_t>(a),
                kSafiUnicast,
                static_cast<uint8_t>(limit >> 24),
                static_cast<uint8_t>(limit >> 16),
                static_cast<uint8_t>(limit >> 8),
                static_cast<uint8_t>(limit)};
  LOG_ERROR("bgp peer sent more prefixes than max_prefixes_received; closing the session")
      .With("peer", config_.name)
      .With("afi", unsigned{a})
      .With("limit", uint64_t{limit})
      .With("restart_ms", static_cast<int64_t>(config_.max_prefix_restart.count()));
  next_idle_hold_ = config_.max_prefix_restart;
  held_down_ = true;
  SendNotification(err::kCease, err::kCeaseMaxPrefixes, data,
                   "maximum number of prefixes reached (afi " + std::to_string(a) + ", limit " +
                       std::to_string(limit) + ")");
}

void Session::Reset(uint8_t code, uint8_t subcode) {
  if (socket_ && state_ >= SessionState::kOpenSent) {
    SendNotification(code, subcode, {}, "reset");
  }
}

void Session::Connect() {
  Transition(SessionState::kConnect);
  ++generation_;
  socket_ = std::make_unique<tcp::socket>(io_);
  boost::system::error_code ec;
  auto peer = asio::ip::make_address(config_.peer_address, ec);
  if (ec) {
    last_error_ = "bad peer address " + config_.peer_address;
    Transition(SessionState::kActive);
    ArmConnectRetry();
    return;
  }
  tcp::endpoint remote(peer, config_.peer_port);
  socket_->open(remote.protocol(), ec);
  if (!config_.local_address.empty() && !ec) {
    auto local = asio::ip::make_address(config_.local_address, ec);
    if (!ec) socket_->bind(tcp::endpoint(local, 0), ec);
  }
  ArmConnectRetry();
  // MD5 key, TTL and minimum TTL before the SYN: the handshake is signed
  // and GTSM-checked too. Never dial without them.
  if (!ec && !SecureSocket(peer, true)) {
    boost::system::error_code ignored;
    socket_->close(ignored);
    socket_.reset();
    ++generation_;
    Transition(SessionState::kActive);
    return;  // ConnectRetry redials.
  }
  auto self = shared_from_this();
  uint64_t gen = generation_;
  socket_->async_connect(remote, [self, gen](const boost::system::error_code& e) {
    if (gen != self->generation_) return;
    self->OnConnected(e);
  });
}

bool Session::SecureSocket(const asio::ip::address& peer, bool dialing) {
  std::string error;
  const int fd = socket_->native_handle();
  bool ok = true;
  if (dialing && !config_.md5_password.empty()) {
    ok = SetTcpMd5Key(fd, peer, config_.md5_password, &error);
  }
  if (ok) {
    // GTSM: send at the maximum TTL, accept only from within `hops`.
    const int hops = config_.ttl_security_hops;
    ok = hops > 0 ? SetTtl(fd, peer.is_v6(), 255, 256 - hops, &error)
                  : SetTtl(fd, peer.is_v6(), config_.ttl, 0, &error);
  }
  if (ok) return true;
  ++counters_.socket_option_errors;
  last_error_ = error;
  LOG_ERROR("bgp session: cannot secure the socket; not connecting")
      .With("peer", config_.name)
      .With("error", error);
  return false;
}

void Session::ConnectFailed(const std::string& why) {
  ++counters_.connect_failures;
  ++failed_dials_;
  last_error_ = why;
  if (!config_.md5_password.empty() || config_.ttl_security_hops > 0) {
    last_error_ += config_.md5_password.empty()
                       ? " (GTSM is on: a peer further away than ttl_security_hops is dropped)"
                       : " (TCP MD5 is on: a password mismatch looks like this; the peer's "
                         "kernel counts TcpExt TCPMD5Failure)";
  }
  // The first failure in a row, then every power of two: a device that is
  // down does not flood the log.
  if ((failed_dials_ & (failed_dials_ - 1)) == 0) {
    LOG_WARN("bgp connect failed")
        .With("peer", config_.name)
        .With("failures_in_a_row", failed_dials_)
        .With("error", last_error_);
  }
}

void Session::OnConnected(const boost::system::error_code& ec) {
  if (state_ != SessionState::kConnect) return;
  if (ec) {
    ConnectFailed("connect: " + ec.message());
    boost::system::error_code ignored;
    socket_->close(ignored);
    socket_.reset();
    ++generation_;
    Transition(SessionState::kActive);
    return;  // ConnectRetry timer is running and will redial.
  }
  ConnectionUp();
}

bool Session::Accept(tcp::socket socket) {
  if (!started_ || held_down_) return false;
  switch (state_) {
    case SessionState::kIdle:
    case SessionState::kConnect:
    case SessionState::kActive:
      break;
    case SessionState::kOpenSent:
    case SessionState::kOpenConfirm:
      // Connection collision: keep the connection already in progress; the
      // peer's dial fails and it accepts ours (or retries).
      return false;
    case SessionState::kEstablished:
      // RFC 4724 §4.2: a new connection from a graceful-restart peer means
      // it restarted; drop the old one and keep its routes as stale.
      if (!PeerSupportsGracefulRestart()) return false;
      Drop("peer reconnected (graceful restart)", false);
      break;
  }
  idle_timer_.cancel();
  if (socket_) {
    boost::system::error_code ignored;
    socket_->close(ignored);
  }
  ++generation_;
  socket_ = std::make_unique<tcp::socket>(std::move(socket));
  boost::system::error_code ec;
  const auto remote = socket_->remote_endpoint(ec);
  if (ec || !SecureSocket(remote.address(), false)) {
    Drop(ec ? "accept: " + ec.message() : last_error_, true);
    return true;  // Closed here.
  }
  ConnectionUp();
  return true;
}

void Session::ConnectionUp() {
  connect_retry_timer_.cancel();
  failed_dials_ = 0;
  boost::system::error_code ec;
  socket_->set_option(tcp::no_delay(true), ec);
  SendOpen();
  Transition(SessionState::kOpenSent);
  ArmHold(kOpenSentHoldS);
  rx_begin_ = rx_end_ = 0;
  Read();
}

void Session::SendOpen() {
  OpenMessage open;
  open.my_as_field = config_.local_as > 0xffff ? kAsTrans : static_cast<uint16_t>(config_.local_as);
  open.hold_time_s = config_.hold_time_s;
  open.bgp_id = identity_.router_id;
  open.caps.four_octet_as = config_.local_as;
  open.caps.mp_ipv4_unicast = true;
  open.caps.mp_ipv6_unicast = config_.ipv6;
  open.caps.route_refresh = true;
  if (config_.graceful_restart) {
    GracefulRestartCap gr;
    gr.restart_state = identity_.restarting;
    gr.restart_time_s = config_.restart_time_s;
    gr.families.push_back({Afi::kIpv4, kSafiUnicast, identity_.restarting});
    if (config_.ipv6) gr.families.push_back({Afi::kIpv6, kSafiUnicast, identity_.restarting});
    open.caps.graceful_restart = gr;
  }
  Write(EncodeOpen(open), MessageType::kOpen);
}

void Session::SendKeepalive() { Write(EncodeKeepalive(), MessageType::kKeepalive); }

void Session::Send(Bytes msg) {
  if (state_ != SessionState::kEstablished) return;
  if (msg.size() > kHeaderSize) {
    MessageType type = static_cast<MessageType>(msg[18]);
    Write(std::move(msg), type);
  }
}

void Session::SendRaw(Bytes bytes) {
  if (!socket_) return;
  out_queue_.push_back(std::move(bytes));
  ++queued_seq_;
  DoWrite();
}

void Session::Write(Bytes msg, MessageType type) {
  if (!socket_) return;
  ++counters_.messages_out[static_cast<size_t>(type)];
  out_queue_.push_back(std::move(msg));
  ++queued_seq_;
  ScheduleWrite();
}

void Session::WriteQueued() { DoWrite(); }

void Session::ScheduleWrite() {
  if (write_scheduled_ || writing_) return;
  write_scheduled_ = true;
  auto self = shared_from_this();
  uint64_t gen = generation_;
  asio::post(io_, [self, gen] {
    if (gen != self->generation_) return;
    self->write_scheduled_ = false;
    self->DoWrite();
  });
}

void Session::DoWrite() {
  if (writing_ || out_queue_.empty() || !socket_) return;
  writing_ = true;
  // Coalesce queued messages into one write.
  auto buf = std::make_shared<Bytes>();
  size_t n = 0;
  while (!out_queue_.empty() && buf->size() < 64 * 1024) {
    buf->insert(buf->end(), out_queue_.front().begin(), out_queue_.front().end());
    out_queue_.pop_front();
    ++n;
  }
  auto self = shared_from_this();
  uint64_t gen = generation_;
  asio::async_write(*socket_, asio::buffer(*buf),
                    [self, gen, buf, n](const boost::system::error_code& ec, size_t) {
                      if (gen != self->generation_) return;
                      self->writing_ = false;
                      if (ec) {
                        self->Drop("write: " + ec.message(), false);
                        return;
                      }
                      self->written_seq_ += n;
                      self->RunDrainCallbacks();
                      self->DoWrite();
                    });
}

void Session::OnDrained(std::function<void()> cb) {
  if (written_seq_ >= queued_seq_) {
    asio::post(io_, std::move(cb));
    return;
  }
  drain_callbacks_.emplace_back(queued_seq_, std::move(cb));
}

void Session::RunDrainCallbacks() {
  while (!drain_callbacks_.empty() && drain_callbacks_.front().first <= written_seq_) {
    auto cb = std::move(drain_callbacks_.front().second);
    drain_callbacks_.pop_front();
    cb();
  }
}

void Session::Read() {
  constexpr size_t kReadSize = 16 * 1024;
  // Keep the unhandled tail (less than one message) at the front.
  if (rx_begin_ > 0) {
    std::copy(rx_buf_.begin() + static_cast<std::ptrdiff_t>(rx_begin_),
              rx_buf_.begin() + static_cast<std::ptrdiff_t>(rx_end_), rx_buf_.begin());
    rx_end_ -= rx_begin_;
    rx_begin_ = 0;
  }
  if (rx_buf_.size() < rx_end_ + kReadSize) rx_buf_.resize(rx_end_ + kReadSize);
  auto self = shared_from_this();
  uint64_t gen = generation_;
  socket_->async_read_some(asio::buffer(rx_buf_.data() + rx_end_, rx_buf_.size() - rx_end_),
                           [self, gen](const boost::system::error_code& ec, size_t n) {
                             if (gen != self->generation_) return;
                             if (ec) {
                               self->Drop("read: " + ec.message(), false);
                               return;
                             }
                             self->rx_end_ += n;
                             self->HandleInput();
                           });
}

void Session::HandleInput() {
  const uint64_t gen = generation_;
  while (true) {
    ByteView avail(rx_buf_.data() + rx_begin_, rx_end_ - rx_begin_);
    size_t len = 0;
    MessageType type;
    DecodeError error;
    HeaderStatus hs = ParseHeader(avail, &len, &type, &error);
    if (hs == HeaderStatus::kError) {
      SendNotification(error.code, error.subcode, error.data, error.reason);
      return;
    }
    if (hs == HeaderStatus::kNeedMore || avail.size() < len) break;
    rx_begin_ += len;
    HandleMessage(avail.first(len));
    // The handler may have dropped the session or taken a new connection.
    if (gen != generation_ || !socket_ || state_ == SessionState::kIdle) return;
  }
  Read();
}

void Session::HandleMessage(ByteView raw) {
  Message msg;
  DecodeError error;
  MessageType type = static_cast<MessageType>(raw[18]);
  ++counters_.messages_in[static_cast<size_t>(type)];
  if (!DecodeMessage(raw, codec_, &msg, &error)) {
    if (type == MessageType::kUpdate && state_ != SessionState::kEstablished) {
      SendNotification(err::kFsm,
                       state_ == SessionState::kOpenSent ? kFsmUnexpectedInOpenSent
                                                         : kFsmUnexpectedInOpenConfirm,
                       {}, "UPDATE before Established");
      return;
    }
    SendNotification(error.code, error.subcode, error.data, error.reason);
    return;
  }
  auto fsm_error = [this](const char* what) {
    uint8_t sub = state_ == SessionState::kOpenSent      ? kFsmUnexpectedInOpenSent
                  : state_ == SessionState::kOpenConfirm ? kFsmUnexpectedInOpenConfirm
                                                         : kFsmUnexpectedInEstablished;
    SendNotification(err::kFsm, sub, {}, what);
  };
  switch (msg.type) {
    case MessageType::kOpen:
      if (state_ != SessionState::kOpenSent) return fsm_error("unexpected OPEN");
      HandleOpen(msg.open);
      return;
    case MessageType::kKeepalive:
      if (state_ == SessionState::kOpenConfirm) {
        Transition(SessionState::kEstablished);
        ++counters_.established_transitions;
        if (hold_time_s_ > 0) ArmHold(hold_time_s_);
        LOG_INFO("bgp session established")
            .With("peer", config_.name)
            .With("peer_as", uint64_t{peer_open_.Asn()})
            .With("hold_s", unsigned{hold_time_s_});
        if (handler_) handler_->OnEstablished(this);
      } else if (state_ == SessionState::kEstablished) {
        if (hold_time_s_ > 0) ArmHold(hold_time_s_);
      } else {
        fsm_error("unexpected KEEPALIVE");
      }
      return;
    case MessageType::kUpdate: {
      if (state_ != SessionState::kEstablished) return fsm_error("UPDATE before Established");
      if (hold_time_s_ > 0) ArmHold(hold_time_s_);
      const UpdateMessage& u = msg.update;
      if (u.end_of_rib) {
        ++counters_.end_of_rib_in;
      } else if (u.treat_as_withdraw) {
        ++counters_.treat_as_withdraw;
        LOG_WARN("bgp treat-as-withdraw")
            .With("peer", config_.name)
            .With("reason", u.error)
            .With("prefixes", uint64_t{u.nlri.size()});
        counters_.prefixes_withdrawn_in += u.nlri.size() + u.withdrawn.size();
      } else {
        counters_.prefixes_announced_in += u.nlri.size();
        counters_.prefixes_withdrawn_in += u.withdrawn.size();
      }
      counters_.attributes_discarded += u.discarded_attributes.size();
      if (handler_) handler_->OnUpdate(this, u);
      return;
    }
    case MessageType::kNotification: {
      const NotificationMessage& n = msg.notification;
      if (n.code < counters_.notifications_received.size()) {
        ++counters_.notifications_received[n.code];
      }
      LOG_WARN("bgp notification received")
          .With("peer", config_.name)
          .With("code", unsigned{n.code})
          .With("subcode", unsigned{n.subcode});
      Drop("notification received " + std::to_string(n.code) + "/" + std::to_string(n.subcode),
           true);
      return;
    }
    case MessageType::kRouteRefresh:
      if (state_ != SessionState::kEstablished) return fsm_error("unexpected ROUTE-REFRESH");
      if (handler_) handler_->OnRouteRefresh(this, msg.route_refresh);
      return;
  }
}

void Session::HandleOpen(const OpenMessage& open) {
  if (open.Asn() != config_.peer_as) {
    Bytes data = {static_cast<uint8_t>(open.my_as_field >> 8),
                  static_cast<uint8_t>(open.my_as_field)};
    return SendNotification(err::kOpen, err::kOpenBadPeerAs, data, "bad peer AS");
  }
  if (!open.caps.four_octet_as && open.my_as_field == kAsTrans) {
    return SendNotification(err::kOpen, err::kOpenBadPeerAs, {}, "AS_TRANS without capability");
  }
  if (open.bgp_id == 0 || open.bgp_id == identity_.router_id) {
    return SendNotification(err::kOpen, err::kOpenBadBgpId, {}, "bad BGP identifier");
  }
  if (open.hold_time_s == 1 || open.hold_time_s == 2) {
    return SendNotification(err::kOpen, err::kOpenBadHoldTime, {}, "unacceptable hold time");
  }
  peer_open_ = open;
  codec_.four_octet_as = open.caps.four_octet_as.has_value();
  codec_.ebgp = config_.local_as != config_.peer_as;
  hold_time_s_ = std::min(open.hold_time_s, config_.hold_time_s);
  SendKeepalive();
  Transition(SessionState::kOpenConfirm);
  if (hold_time_s_ > 0) {
    ArmHold(hold_time_s_);
    ArmKeepalive();
  } else {
    hold_timer_.cancel();
  }
}

void Session::SendNotification(uint8_t code, uint8_t subcode, const Bytes& data,
                               const std::string& why) {
  if (socket_) {
    NotificationMessage n{code, subcode, data};
    Bytes bytes;
    // Messages still waiting for their write go first (not when a write is
    // under way: its bytes would interleave).
    if (!writing_) {
      for (const Bytes& m : out_queue_) bytes.insert(bytes.end(), m.begin(), m.end());
      written_seq_ += out_queue_.size();
      out_queue_.clear();
    }
    Bytes notification = EncodeNotification(n);
    bytes.insert(bytes.end(), notification.begin(), notification.end());
    // Written synchronously (it is small) so it leaves before the close.
    boost::system::error_code ec;
    asio::write(*socket_, asio::buffer(bytes), ec);
    ++counters_.messages_out[static_cast<size_t>(MessageType::kNotification)];
    if (code < counters_.notifications_sent.size()) ++counters_.notifications_sent[code];
  }
  LOG_WARN("bgp notification sent")
      .With("peer", config_.name)
      .With("code", unsigned{code})
      .With("subcode", unsigned{subcode})
      .With("reason", why);
  Drop("notification sent " + std::to_string(code) + "/" + std::to_string(subcode) + ": " + why,
       true);
}

void Session::Drop(const std::string& why, bool notified) {
  bool was_established = state_ == SessionState::kEstablished;
  bool graceful = !notified && was_established && PeerSupportsGracefulRestart();
  last_error_ = why;
  ++generation_;
  if (socket_) {
    boost::system::error_code ec;
    socket_->shutdown(tcp::socket::shutdown_both, ec);
    socket_->close(ec);
    socket_.reset();
  }
  hold_timer_.cancel();
  keepalive_timer_.cancel();
  connect_retry_timer_.cancel();
  out_queue_.clear();
  writing_ = false;
  write_scheduled_ = false;
  written_seq_ = queued_seq_;
  RunDrainCallbacks();
  Transition(SessionState::kIdle);
  if (was_established) {
    ++counters_.flaps;
    LOG_INFO("bgp session down").With("peer", config_.name).With("reason", why);
  }
  if (handler_) handler_->OnDown(this, was_established, graceful);
  if (started_) ArmIdleRestart();
}

void Session::ArmConnectRetry() {
  connect_retry_timer_.expires_after(Jitter(config_.connect_retry));
  auto self = shared_from_this();
  connect_retry_timer_.async_wait([self](const boost::system::error_code& ec) {
    if (ec || !self->started_) return;
    if (self->state_ == SessionState::kConnect || self->state_ == SessionState::kActive) {
      if (self->state_ == SessionState::kConnect && self->socket_) {
        self->ConnectFailed("connect: no answer within the ConnectRetry time");
      }
      if (self->config_.passive) {
        self->ArmConnectRetry();
      } else {
        if (self->socket_) {
          boost::system::error_code ignored;
          self->socket_->close(ignored);
        }
        self->Connect();
      }
    }
  });
}

void Session::ArmHold(uint16_t seconds) {
  hold_timer_.expires_after(std::chrono::seconds(seconds));
  auto self = shared_from_this();
  uint64_t gen = generation_;
  hold_timer_.async_wait([self, gen](const boost::system::error_code& ec) {
    if (ec || gen != self->generation_) return;
    self->SendNotification(err::kHoldTimerExpired, 0, {}, "hold timer expired");
  });
}

void Session::ArmKeepalive() {
  auto interval = std::chrono::milliseconds(std::max<int64_t>(1000, hold_time_s_ * 1000 / 3));
  keepalive_timer_.expires_after(Jitter(interval));
  auto self = shared_from_this();
  uint64_t gen = generation_;
  keepalive_timer_.async_wait([self, gen](const boost::system::error_code& ec) {
    if (ec || gen != self->generation_) return;
    if (self->state_ == SessionState::kOpenConfirm || self->state_ == SessionState::kEstablished) {
      self->SendKeepalive();
      self->ArmKeepalive();
    }
  });
}

void Session::ArmIdleRestart() {
  idle_timer_.expires_after(next_idle_hold_ ? *next_idle_hold_ : Jitter(config_.idle_hold));
  next_idle_hold_.reset();
  auto self = shared_from_this();
  idle_timer_.async_wait([self](const boost::system::error_code& ec) {
    if (ec) return;
    self->held_down_ = false;
    if (!self->started_ || self->state_ != SessionState::kIdle) return;
    if (self->config_.passive) {
      self->Transition(SessionState::kActive);
    } else {
      self->Connect();
    }
  });
}

bool Session::PeerSupportsGracefulRestart() const {
  return config_.graceful_restart && peer_open_.caps.graceful_restart.has_value();
}

uint16_t Session::PeerRestartTime() const {
  return peer_open_.caps.graceful_restart ? peer_open_.caps.graceful_restart->restart_time_s : 0;
}

std::optional<tcp::endpoint> Session::RemoteEndpoint() const {
  if (!socket_) return std::nullopt;
  boost::system::error_code ec;
  auto ep = socket_->remote_endpoint(ec);
  if (ec) return std::nullopt;
  return ep;
}

}  // namespace loom::southbound::bgp
