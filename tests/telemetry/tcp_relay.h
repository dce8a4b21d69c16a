// A TCP relay on 127.0.0.1 for collector tests: forwards every accepted
// connection to a backend until Freeze(), after which it keeps the sockets open
// and moves no byte in either direction — a peer that hung, or a path that
// black-holes, without any FIN or RST reaching the client.
#ifndef LOOM_TESTS_TELEMETRY_TCP_RELAY_H_
#define LOOM_TESTS_TELEMETRY_TCP_RELAY_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace loom::telemetry::testing {

class TcpRelay {
 public:
  explicit TcpRelay(int backend_port) : backend_port_(backend_port) {}
  ~TcpRelay() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (auto [a, b] : pairs_) {
      ::close(a);
      ::close(b);
    }
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  // Listens on a free port. False on failure.
  bool Start() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (listen_fd_ < 0) return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listen_fd_, 16) != 0) {
      return false;
    }
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Loop(); });
    return true;
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  void Freeze() { frozen_ = true; }

 private:
  void Loop() {
    while (!stop_) {
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
      if (!frozen_) {
        for (auto [a, b] : pairs_) {
          fds.push_back({a, POLLIN, 0});
          fds.push_back({b, POLLIN, 0});
        }
      }
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN) Accept();
      for (size_t i = 1; i < fds.size() && !frozen_; ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const auto& p = pairs_[(i - 1) / 2];
        const int from = fds[i].fd;
        const int to = from == p.first ? p.second : p.first;
        char buf[65536];
        const ssize_t n = ::read(from, buf, sizeof(buf));
        if (n <= 0) {
          ::shutdown(to, SHUT_WR);
          continue;
        }
        for (ssize_t off = 0; off < n;) {
          const ssize_t w = ::write(to, buf + off, static_cast<size_t>(n - off));
          if (w <= 0) break;
          off += w;
        }
      }
    }
  }
  void Accept() {
    const int c = ::accept(listen_fd_, nullptr, nullptr);
    if (c < 0) return;
    const int b = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(backend_port_));
    if (b < 0 || ::connect(b, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(c);
      if (b >= 0) ::close(b);
      return;
    }
    pairs_.emplace_back(c, b);
  }

  const int backend_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> frozen_{false};
  std::vector<std::pair<int, int>> pairs_;  // client, backend (relay thread only)
  std::thread thread_;
};

}  // namespace loom::telemetry::testing

#endif  // LOOM_TESTS_TELEMETRY_TCP_RELAY_H_
