// AdapterSetDriver: the southbound Driver that programs devices with gNMI Set
// through a platform adapter (set_adapter.h: "sonic", "openconfig", "loom").
//
// Role: for each device it encodes the full desired DeviceState with the
// device's adapter and sends the adapter's SetRequest as one unary Set (with
// a deadline, optional username/password metadata). Every Apply sends the
// whole request (adapters encode a full overwrite of Loom's entries; no diff
// against the last Set); an empty request sends nothing.
// What it reports:
// - Set accepted: `applied` = desired with every entry the adapter listed
//   as unexpressed (non-partial) removed (a named list entry, or the whole
//   part when the entry is "" or names nothing found), because the device does
//   not run what was not sent; one ApplyFailure per such entry, with the
//   adapter's code (UNIMPLEMENTED or INVALID_ARGUMENT) and reason, naming the
//   adapter and the entry. Partial entries (sent without some of their
//   meaning: rounding, a traffic class a static route cannot carry) are
//   logged, not failures, and stay in `applied` as desired.
//   `applied.generation` = desired generation when nothing failed, else the
//   last fully applied generation.
// - Set rejected or unreachable: one ApplyFailure{"device", gRPC status with
//   the target's message}; `applied` = the last successfully applied state
//   (even when the outcome is unknown, e.g. DEADLINE_EXCEEDED).
// Read:
// - adapters with capabilities().read_back: a Get (the adapter's
//   MakeGetRequest) decoded with ReadBack. Adapters rebuild only some parts
//   (SONiC: dlb and pfc_watchdog; routes carry no color) and render some
//   values differently (SONiC rounds the flowlet time to us), so the decoded
//   state is compared with a baseline: the read-back taken right after the
//   last accepted Set (or, when that Get failed, the first Read after it).
//   Same as the baseline -> the last applied state; otherwise the last
//   applied state with every differing field replaced by what the device
//   reports, so the reconciler sees the drift and re-applies.
// - otherwise ("openconfig"): the last applied state, Status OK (no drift
//   detection: the driver cannot see the device's configuration).
//
// Stale entries: each accepted request is remembered per device; the next
// one also deletes what it wrote and the new desired state no longer has
// (set_adapter.h AddStaleDeletes: Loom's replaced rows whole, fields an
// update wrote into rows Loom does not own leaf by leaf — or, when the
// device had a value there before Loom first wrote it, read with a Get
// before that first write, that value is written back). After a loomd
// restart the first Set cannot know what an earlier process wrote: rows of
// the old process that the new desired state lacks stay until they are
// deleted by hand (the loom adapter deletes each part's container first, so
// it has no such leftovers).
//
// Trigger: Apply()/Read() from the controller strand. Thread: both return at
// once; the work runs on the driver's own worker thread (RPC completions are
// posted to it from gRPC's callback threads) and `done` is invoked there,
// also when there is nothing to send. Only when the driver is not running
// (before Start(), after Stop()) is `done` invoked synchronously on the
// caller's thread, with UNAVAILABLE. Calls for one device run one at a time
// in call order; devices run in parallel. Stop() (or the destructor)
// cancels RPCs in flight, completes every pending call and joins.
#ifndef LOOM_SOUTHBOUND_GNMI_ADAPTER_DRIVER_H_
#define LOOM_SOUTHBOUND_GNMI_ADAPTER_DRIVER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/tls_channel.h"
#include "gnmi/gnmi.pb.h"
#include "loom/v1/topology.pb.h"
#include "southbound/gnmi/set_adapter.h"
#include "southbound/wire/driver.h"

namespace grpc {
class ClientContext;
}  // namespace grpc

namespace loom::southbound::gnmi {

struct AdapterDeviceConfig {
  std::string device;   // Device id (topology).
  std::string address;  // gNMI target "host:port".
  std::string adapter;  // "sonic", "openconfig", "loom" (MakeSetAdapter).
  // AdapterContext fields (set_adapter.h). target: empty = device id.
  std::map<std::string, std::string> next_hop_addresses;
  std::string target;
  std::string vrf = "default";
  std::string static_protocol_name = "DEFAULT";
  // Plaintext or TLS (common/tls_channel.h); devices at one address share a channel
  // only when their TLS settings are equal.
  TlsClientConfig tls;
  // gNMI "username"/"password" call metadata for this device; empty = the
  // driver-wide AdapterSetDriverConfig::username.
  std::string username;
  std::string password;
};

struct AdapterSetDriverConfig {
  std::vector<AdapterDeviceConfig> devices;
  // Interface names for the adapters (AdapterContext.topology). May be null
  // (entries that need it are then unexpressed). Replace with SetTopology().
  std::shared_ptr<const loom::v1::Topology> topology;
  // Deadline of each Set / Get.
  int64_t rpc_timeout_ms = 5000;
  // Sent as gRPC metadata "username" / "password" on every RPC when
  // `username` is not empty (SONiC gnmi server, gnmic convention), unless
  // the device sets its own. Over a plaintext channel they travel in clear:
  // use TLS (AdapterDeviceConfig::tls) off a trusted management network.
  std::string username;
  std::string password;
};

class AdapterSetDriver final : public loom::southbound::Driver {
 public:
  explicit AdapterSetDriver(AdapterSetDriverConfig config);
  ~AdapterSetDriver() override;
  AdapterSetDriver(const AdapterSetDriver&) = delete;
  AdapterSetDriver& operator=(const AdapterSetDriver&) = delete;

  // Validates the configuration (device ids unique and non-empty, addresses
  // non-empty, adapter names known) and starts the worker thread.
  // INVALID_ARGUMENT names the device.
  Status Start();
  // Cancels RPCs in flight, completes pending calls, joins. Idempotent.
  void Stop();

  // Topology used by the next encodes (thread-safe).
  void SetTopology(std::shared_ptr<const loom::v1::Topology> topology);

  std::string Name() const override { return "gnmi-set"; }
  // "gnmi:<adapter>" ("gnmi:sonic").
  std::string NameFor(const std::string& device) const override;
  bool Handles(const std::string& device) const override;
  void Apply(const loom::v1::DeviceState& desired, std::function<void(ApplyResult)> done) override;
  void Read(const std::string& device,
            std::function<void(Status, loom::v1::DeviceState)> done) override;

 private:
  struct Device;
  struct Op;

  bool Post(std::function<void()> task);
  void WorkerLoop();
  // Worker thread only.
  void Enqueue(Device& d, Op op);
  void StartNext(Device& d);
  void RunApply(Device& d, std::shared_ptr<Op> op);
  void RunRead(Device& d, std::shared_ptr<Op> op);
  // The device's context; `*hold` keeps its topology alive while it is used.
  AdapterContext Context(const Device& d, std::shared_ptr<const loom::v1::Topology>* hold) const;
  // Get + ReadBack on the worker; `then` gets the decoded state.
  void CallGet(Device& d, std::function<void(Status, loom::v1::DeviceState)> then);
  void CallSet(Device& d, ::gnmi::SetRequest request, std::function<void(Status)> then);
  void CallGetRaw(Device& d, const ::gnmi::GetRequest& request,
                  std::function<void(Status, ::gnmi::GetResponse)> then);
  // RunApply's second half: stale deletes, the Set, the read-back.
  void SendApply(Device& d, ::gnmi::SetRequest request, std::function<void(Status)> finish);
  void PrepareContext(const Device& d, grpc::ClientContext* ctx) const;
  // RPC bookkeeping (any thread).
  bool BeginRpc(grpc::ClientContext* ctx);
  void EndRpc(grpc::ClientContext* ctx);

  const AdapterSetDriverConfig config_;
  std::map<std::string, std::unique_ptr<Device>> devices_;  // Fixed after construction.

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<const loom::v1::Topology> topology_;  // mu_.
  std::deque<std::function<void()>> tasks_;
  std::set<grpc::ClientContext*> rpcs_;  // In flight.
  bool started_ = false;
  bool stopping_ = false;
  bool exit_ = false;
  std::thread worker_;
};

// `desired` with what `unexpressed` lists (non-partial) removed, and one
// ApplyFailure per such entry ("<adapter> cannot express <part> <entry>:
// <reason>"). Exposed for tests. Pure.
ApplyResult StripUnexpressed(const loom::v1::DeviceState& desired,
                             const std::vector<Unexpressed>& unexpressed,
                             const std::string& adapter);

}  // namespace loom::southbound::gnmi

#endif  // LOOM_SOUTHBOUND_GNMI_ADAPTER_DRIVER_H_
