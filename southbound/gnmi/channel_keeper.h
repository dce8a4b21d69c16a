// Keeps gRPC channels alive for the life of the process.
//
// gRPC 1.51 (Debian 12) runs callback-API completions on a shared
// "callback alternative" completion queue whose threads are torn down when
// the last channel using it is destroyed. A ClientContext holds a reference
// to its channel; when it is released on one of that queue's own threads
// (the callback's closure is destroyed there after it ran) and it held the
// channel's last reference, the queue shuts itself down from its own thread:
// the join fails (EDEADLK, ignored), the queue is freed while the thread still
// polls it, and the process aborts in grpc_cq_internal_unref
// (grpc/grpc#32584, fixed upstream by asserting the join). Seen in the wire
// loop tests when a driver was destroyed right before its target died.
// The gNMI Set drivers make one channel per device and live as long as
// loomd does, so keeping their channels costs nothing and avoids the race.
// Thread: any.
#ifndef LOOM_SOUTHBOUND_GNMI_CHANNEL_KEEPER_H_
#define LOOM_SOUTHBOUND_GNMI_CHANNEL_KEEPER_H_

#include <grpcpp/channel.h>

#include <memory>
#include <mutex>
#include <vector>

namespace loom::southbound::gnmi {

inline void KeepChannelForever(std::shared_ptr<grpc::Channel> channel) {
  static std::mutex mu;
  static auto* kept = new std::vector<std::shared_ptr<grpc::Channel>>();  // never destroyed
  std::lock_guard<std::mutex> lock(mu);
  kept->push_back(std::move(channel));
}

}  // namespace loom::southbound::gnmi

#endif  // LOOM_SOUTHBOUND_GNMI_CHANNEL_KEEPER_H_
