// GnmiDriver: the southbound Driver that programs devices with gNMI Set.
//
// Role: for each device (a gNMI target address; target name = device id by
// default) it turns the full desired DeviceState into ONE SetRequest holding
// what differs from what the device last confirmed (schema and codec:
// southbound/gnmi/gnmi_config.h), then confirms with a Get of the parts the
// Set carried and reports `applied` from what the device returned (the other
// parts as last confirmed). Nothing differs -> no Set. The parts it owns are
// configurable: by default weights, dlb, alb_tables, spray_rules and
// thresholds; colors and routes only when asked (when BGP carries them the
// gNMI driver ignores them, and leaves them empty in `applied`).
//
// Per call:
// - The first call for a device (or after an outcome-unknown failure) reads
//   the device with Get first, so a restart does not re-send what the device
//   already runs.
// - Parts that fail local validation (validate_before_send) are reported as
//   INVALID_ARGUMENT and left as the device has them; the rest still goes.
// - A rejected Set (one transaction) fails every part it carried with the
//   target's gRPC status; a Set that the Get does not confirm fails the
//   differing parts with INTERNAL. Unreachable -> UNAVAILABLE (or
//   DEADLINE_EXCEEDED). Retries are the reconciler's job.
// - `applied.generation` is the desired generation once every owned part is
//   applied, else the last fully applied generation.
//
// Trigger: Apply()/Read() from the controller strand. Thread: both return at
// once; the work runs on the driver's own worker thread (RPC completions are
// posted to it from gRPC's callback threads) and `done` is invoked there.
// Calls for one device run one at a time in call order; devices run in
// parallel. Stop() (or the destructor) cancels RPCs in flight and completes
// every pending call.
#ifndef LOOM_SOUTHBOUND_GNMI_GNMI_DRIVER_H_
#define LOOM_SOUTHBOUND_GNMI_GNMI_DRIVER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/tls_channel.h"
#include "southbound/gnmi/gnmi_config.h"
#include "southbound/wire/driver.h"

namespace grpc {
class ClientContext;
}  // namespace grpc

namespace loom::southbound::gnmi {

struct GnmiDeviceConfig {
  std::string device;   // Device id (topology).
  std::string address;  // gNMI target "host:port".
  std::string target;   // gNMI Path.target; empty = device id.
  // Plaintext or TLS (common/tls_channel.h); devices at one address share a channel
  // only when their TLS settings are equal.
  TlsClientConfig tls = {};
  // gNMI "username"/"password" call metadata on every Get/Set when set.
  std::string username = {};
  std::string password = {};
};

struct GnmiDriverConfig {
  std::vector<GnmiDeviceConfig> devices;
  // Parts this driver programs. Add Part::kColors | Part::kRoutes when gNMI,
  // not BGP, carries colors and routes.
  PartMask parts = kGnmiDefaultParts;
  // Report non-empty parts outside `parts` as UNIMPLEMENTED failures
  // (default: ignore them; another driver programs them).
  bool report_unowned_parts = false;
  // Validate each part before sending (same rules as the targets).
  bool validate_before_send = true;
  CodecLimits limits;
  // Deadline of each Get / Set.
  int64_t rpc_timeout_ms = 5000;
};

class GnmiDriver final : public loom::southbound::Driver {
 public:
  explicit GnmiDriver(GnmiDriverConfig config);
  ~GnmiDriver() override;
  GnmiDriver(const GnmiDriver&) = delete;
  GnmiDriver& operator=(const GnmiDriver&) = delete;

  // Validates the configuration (device ids unique and non-empty, addresses
  // non-empty) and starts the worker thread. INVALID_ARGUMENT names the device.
  Status Start();
  // Cancels RPCs in flight, completes pending calls, joins. Idempotent.
  void Stop();

  std::string Name() const override { return "gnmi"; }
  bool Handles(const std::string& device) const override;
  void Apply(const loom::v1::DeviceState& desired, std::function<void(ApplyResult)> done) override;
  void Read(const std::string& device,
            std::function<void(Status, loom::v1::DeviceState)> done) override;

  // RPCs sent to a device so far (thread-safe).
  struct Counters {
    uint64_t sets = 0;
    uint64_t set_failures = 0;
    uint64_t gets = 0;
    uint64_t get_failures = 0;
  };
  Counters counters(const std::string& device) const;

 private:
  struct Device;
  struct Op;
  struct ApplyCtx;

  bool Post(std::function<void()> task);
  void WorkerLoop();
  // Worker thread only.
  void Enqueue(Device& d, Op op);
  void StartNext(Device& d);
  void RunApply(Device& d, Op op);
  void ContinueApply(Device& d, std::shared_ptr<ApplyCtx> c);
  void FinishApply(Device& d, std::shared_ptr<ApplyCtx> c);
  void RunRead(Device& d, Op op);
  // Get of `parts` (decoded and projected to them); updates what is known
  // of those parts.
  void CallGet(Device& d, PartMask parts, std::function<void(Status, loom::v1::DeviceState)> then);
  void CallSet(Device& d, ::gnmi::SetRequest request, std::function<void(Status)> then);
  // RPC bookkeeping (any thread).
  bool BeginRpc(grpc::ClientContext* ctx);
  void EndRpc(grpc::ClientContext* ctx);

  const GnmiDriverConfig config_;
  std::map<std::string, std::unique_ptr<Device>> devices_;  // Fixed after construction.

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::set<grpc::ClientContext*> rpcs_;  // In flight.
  bool started_ = false;
  bool stopping_ = false;
  bool exit_ = false;
  std::thread worker_;
};

}  // namespace loom::southbound::gnmi

#endif  // LOOM_SOUTHBOUND_GNMI_GNMI_DRIVER_H_
