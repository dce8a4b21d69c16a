// loom-nic-agent: the host NIC-counter agent. Reads RDMA NIC counters from
// Linux sysfs and serves them over gNMI as Loom's catalogue (telemetry/
// README.md, "loom-nic-agent"; platform profile telemetry/profiles/
// host.json).
//
// What is read, per NIC (`<root>` = --sysfs-root, default /sys):
//   <root>/class/infiniband/<rdma>/ports/<port>/hw_counters/<mlx5 name>
//       -> loom:/nic/interfaces/interface[name=<if>]/roce/state/<mlx5 name>
//   <root>/class/net/<netdev>/statistics/{rx,tx}_{bytes,packets,dropped,errors}
//       -> /interfaces/interface[name=<if>]/state/counters/{in,out}-{octets,pkts,discards,errors}
//   <root>/class/net/<netdev>/operstate ("up" -> UP, "down" -> DOWN, else UNKNOWN)
//       -> /interfaces/interface[name=<if>]/state/oper-status
// Values are read at each sample. An absent file is not served (never a fake
// zero); an unreadable or garbled file is logged once per file, counted and
// skipped.
//
// gNMI served (wire subset telemetry/proto/gnmi): Capabilities (encoding
// PROTO); Subscribe STREAM (SAMPLE: sample_interval, 0 = 1 s, minimum
// 100 ms; ON_CHANGE: checked every 100 ms, a vanished leaf is sent as a
// delete; TARGET_DEFINED: SAMPLE for counters, ON_CHANGE for oper-status) and
// ONCE; updates_only honoured; sync_response after the initial data. The
// request's prefix.target selects the NIC by device id ("" or "*" = every NIC
// of the agent); each notification carries its device id in prefix.target,
// one notification per NIC and container (prefix = the container, one update
// per leaf, timestamp = the sample time in ns since the Unix epoch). Errors:
// an encoding other than PROTO or mode POLL -> UNIMPLEMENTED; a path outside
// the three served containers or an origin other than ""/openconfig/loom ->
// INVALID_ARGUMENT naming it; sample_interval below 100 ms ->
// INVALID_ARGUMENT; unknown target -> NOT_FOUND. The catalogue's NIC PFC
// path (loom:/pfc/...) and per-destination counters
// (loom:/nic/.../roce/peers/...), which the default NicSubscriptions() request but
// the agent cannot read from sysfs, are accepted and answered with no data, so a
// collector without the host profile still gets everything else.
#ifndef LOOM_TELEMETRY_NIC_AGENT_NIC_AGENT_H_
#define LOOM_TELEMETRY_NIC_AGENT_NIC_AGENT_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "gnmi/gnmi.pb.h"

namespace grpc {
class Server;
}

namespace loom::telemetry {

// One NIC the agent serves: --nic DEVICE_ID=RDMADEV:PORT:NETDEV[:IFNAME].
struct NicSpec {
  std::string device_id;    // Topology device id = gNMI target name.
  std::string rdma_device;  // /sys/class/infiniband/<rdma_device>
  int port = 1;             // .../ports/<port>
  std::string netdev;       // /sys/class/net/<netdev>
  std::string ifname;       // Topology interface name (default: netdev).
};

// Parses "DEVICE_ID=RDMADEV:PORT:NETDEV[:IFNAME]". Errors name the part.
Status ParseNicSpec(std::string_view text, NicSpec* out);

// The mlx5 hw_counters served (catalogue leaf = file name).
const std::vector<std::string>& RoceCounterNames();

// One value read from sysfs.
struct NicLeaf {
  enum Container { kCounters = 0, kOperStatus = 1, kRoce = 2 };
  Container container = kCounters;
  std::string name;  // Catalogue leaf name ("in-octets", "oper-status", "np_cnp_sent").
  uint64_t counter = 0;
  std::string text;  // oper-status only.
};

struct NicSample {
  TimeNs timestamp_ns = 0;      // Wall clock, ns since the Unix epoch.
  std::vector<NicLeaf> leaves;  // Present files only, in catalogue order.
};

// SysfsNicReader: role — reads one NIC's counter files. Trigger — Read(),
// called by the agent's sampling thread at each sample. Thread — the caller's;
// not thread-safe (one reader per NIC, used by one thread).
class SysfsNicReader {
 public:
  SysfsNicReader(std::string sysfs_root, NicSpec nic);
  NicSample Read();
  const NicSpec& nic() const { return nic_; }
  // Files that could not be read or parsed, counted at each failed read.
  uint64_t read_errors() const { return read_errors_; }

 private:
  // 1 = read, 0 = absent, -1 = error (logged once per file, counted).
  int ReadFile(const std::string& path, std::string* out);
  bool ReadCounter(const std::string& path, uint64_t* value);

  std::string root_;
  NicSpec nic_;
  std::string roce_dir_;
  std::string net_dir_;
  uint64_t read_errors_ = 0;
  std::set<std::string> logged_;  // Files whose error was logged.
};

struct NicAgentOptions {
  std::string listen_address = "127.0.0.1:0";  // Port 0 = any free port (see port()).
  std::string sysfs_root = "/sys";
  std::vector<NicSpec> nics;
  // How often ON_CHANGE subscriptions are checked.
  TimeNs on_change_check_ns = 100 * kNsPerMs;
  // Responses queued for one stream beyond which it is ended (slow client).
  size_t max_queued_responses = 65536;
};

struct NicAgentStats {
  uint64_t samples = 0;      // NIC reads.
  uint64_t read_errors = 0;  // Unreadable/garbled file reads.
  uint64_t notifications = 0;
  int open_streams = 0;
};

// NicAgent: role — the gNMI target of one host: owns a SysfsNicReader per
// NIC, the gRPC server (callback API) and the sampling thread. Trigger —
// Subscribe/Capabilities RPCs register streams; the sampling thread wakes at
// the next SAMPLE due time, every on_change_check_ns while an ON_CHANGE
// subscription exists, and when a stream is opened; it reads sysfs (outside
// the lock) and queues each stream's notifications. Thread — gRPC callback
// threads only validate and register (no I/O); all sysfs reads happen on the
// sampling thread. Lock order: agent mutex, then a stream's mutex. Writes are
// asynchronous (one in flight per stream), so the sampler never waits for a
// client. Stats() and Stop() may be called from any thread.
class NicAgent {
 public:
  explicit NicAgent(NicAgentOptions options);
  ~NicAgent();  // Stop()s.
  NicAgent(const NicAgent&) = delete;
  NicAgent& operator=(const NicAgent&) = delete;

  // Validates the NICs (non-empty unique device ids), binds and starts
  // serving and sampling.
  Status Start();
  // Ends every stream, stops the server and the sampling thread. Idempotent.
  void Stop();
  int port() const { return port_; }
  NicAgentStats Stats() const;

 private:
  class Service;
  class Stream;
  struct Subscription;
  struct StreamState;
  friend class Service;
  friend class Stream;

  // gRPC thread: validates `list`, registers the stream; the sampler sends
  // the initial data. Returns a non-OK status to end the RPC with.
  Status Open(Stream* stream, const gnmi::SubscriptionList& list);
  void Close(Stream* stream);
  void SamplerLoop();

  const NicAgentOptions options_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::vector<std::unique_ptr<SysfsNicReader>> readers_;  // Sampler thread only.

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<StreamState>> streams_;  // Registered subscriptions.
  bool wake_ = false;
  bool stopping_ = false;
  int open_ = 0;
  NicAgentStats stats_;
  std::thread sampler_;
};

}  // namespace loom::telemetry

#endif  // LOOM_TELEMETRY_NIC_AGENT_NIC_AGENT_H_
