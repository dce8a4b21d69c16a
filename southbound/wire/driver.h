// The southbound driver interface: how the controller's reconciler programs a
// device, whatever the device is (a real switch over BGP or gNMI Set, a
// vendor config renderer, or the in-process emulator).
//
// Contract:
// - Apply() takes the full desired DeviceState of one device (not a diff);
//   a driver computes and sends what differs from what it last applied, so
//   calls are idempotent and safe to retry.
// - The result says what the device really runs now (`applied`), which parts
//   failed and why; the reconciler stores `applied`, detects drift and retries
//   failed parts with backoff.
// - Threading: a driver may be called from the controller strand only; it
//   must not block it. Drivers that do network I/O complete asynchronously
//   and invoke the callback from their own thread; the reconciler posts the
//   result back to its strand.
#ifndef LOOM_SOUTHBOUND_WIRE_DRIVER_H_
#define LOOM_SOUTHBOUND_WIRE_DRIVER_H_

#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "loom/v1/device_state.pb.h"

namespace loom::southbound {

// One part of the desired state that could not be applied.
struct ApplyFailure {
  // Which part: "colors", "routes", "weights", "dlb", "alb_tables",
  // "spray_rules", "thresholds", or "device" for the whole device.
  std::string part;
  Status status;
};

struct ApplyResult {
  // What the device runs after the call (generation = the desired generation
  // when everything applied).
  loom::v1::DeviceState applied;
  std::vector<ApplyFailure> failures;
  bool ok() const { return failures.empty(); }
};

class Driver {
 public:
  virtual ~Driver() = default;
  // Short name for logs and metrics ("bgp", "gnmi", "emulator", "render").
  virtual std::string Name() const = 0;
  // The name for one device it handles (a composite names the parts that
  // program that device: "bgp+gnmi", "bgp").
  virtual std::string NameFor(const std::string& /*device*/) const { return Name(); }
  // Devices this driver programs.
  virtual bool Handles(const std::string& device) const = 0;
  // Applies `desired` to its device; calls `done` exactly once.
  virtual void Apply(const loom::v1::DeviceState& desired,
                     std::function<void(ApplyResult)> done) = 0;
  // Reads back what the device runs now (for drift detection); calls `done`
  // exactly once. UNAVAILABLE when the device cannot be reached.
  virtual void Read(const std::string& device,
                    std::function<void(Status, loom::v1::DeviceState)> done) = 0;
};

}  // namespace loom::southbound

#endif  // LOOM_SOUTHBOUND_WIRE_DRIVER_H_
