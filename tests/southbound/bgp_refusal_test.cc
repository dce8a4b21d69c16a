// A listening speaker refuses connections from addresses no session is
// configured for (closed on accept, no OPEN sent), and takes them from a
// configured address.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>

#include "southbound/bgp/speaker.h"

namespace loom::southbound::bgp {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

// Dials the speaker from `source`; returns what the first read saw: "open"
// (a BGP message arrived), "closed" (EOF / reset) or "timeout".
std::string DialFrom(asio::io_context& io, const char* source, uint16_t port) {
  tcp::socket c(io);
  c.open(tcp::v4());
  c.bind(tcp::endpoint(asio::ip::make_address(source), 0));
  std::string result;
  std::array<uint8_t, 4096> buf{};
  c.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port),
                  [&](const boost::system::error_code& ec) {
                    if (ec) {
                      result = "closed";
                      return;
                    }
                    c.async_read_some(asio::buffer(buf),
                                      [&](const boost::system::error_code& e, size_t n) {
                                        result = !e && n >= 19 && buf[18] == 1 ? "open" : "closed";
                                      });
                  });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (result.empty() && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(5));
  }
  return result.empty() ? "timeout" : result;
}

TEST(SpeakerRefusalTest, ConnectionsFromUnconfiguredAddressesAreClosedWithoutOpen) {
  asio::io_context io;
  Speaker sp(io, SpeakerConfig{0x0a000002, "127.0.0.1", 0, false});
  ASSERT_TRUE(sp.Start().ok());
  PeerConfig p;
  p.name = "leaf";
  p.local_as = 65000;
  p.peer_as = 65001;
  p.peer_address = "127.0.0.2";
  p.passive = true;
  p.next_hop = "198.18.0.1";
  ASSERT_TRUE(sp.AddPeer(p).ok());
  EXPECT_EQ(DialFrom(io, "127.0.0.3", sp.listen_port()), "closed");
  EXPECT_EQ(DialFrom(io, "127.0.0.1", sp.listen_port()), "closed");
  EXPECT_EQ(sp.FindSession("leaf")->counters().messages_out[1], 0u);
  // The configured address gets an OPEN.
  EXPECT_EQ(DialFrom(io, "127.0.0.2", sp.listen_port()), "open");
  sp.Shutdown();
}

}  // namespace
}  // namespace loom::southbound::bgp
