// TestGnmiTarget: a real gNMI target (gRPC server on 127.0.0.1, port 0) for
// the driver tests. It serves one in-memory DeviceState per target name and
// applies Set/Get with the codec's device side (ApplySetRequest,
// EncodeGetResponse), so invalid Sets get the codec's gRPC status.
//
// Trigger: gRPC Set/Get. Thread: gRPC callback threads; state under a mutex,
// accessors are thread-safe. Test knobs: drop the next Sets (answer OK without
// applying, to exercise confirmation) and fail the next Sets with a code.
#ifndef LOOM_TESTS_SOUTHBOUND_GNMI_TEST_TARGET_H_
#define LOOM_TESTS_SOUTHBOUND_GNMI_TEST_TARGET_H_

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gnmi/gnmi.grpc.pb.h"
#include "southbound/gnmi/gnmi_config.h"

namespace loom::southbound::gnmi::testing {

class TestGnmiTarget final : public ::gnmi::gNMI::CallbackService {
 public:
  explicit TestGnmiTarget(CodecLimits limits = CodecLimits()) : limits_(limits) {}
  ~TestGnmiTarget() override { Shutdown(); }

  // Serves `names` (target names; a request with an empty target goes to the
  // first). Listens on 127.0.0.1:0. False when the server cannot start.
  bool Start(const std::vector<std::string>& names);
  void Shutdown();
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  loom::v1::DeviceState state(const std::string& name) const;
  void set_state(const std::string& name, const loom::v1::DeviceState& s);
  int sets(const std::string& name) const;
  int gets(const std::string& name) const;
  ::gnmi::SetRequest last_set(const std::string& name) const;
  // The next `n` Sets answer OK without changing anything.
  void DropNextSets(int n);
  // The next `n` Sets fail with `code`.
  void FailNextSets(int n, grpc::StatusCode code);

  grpc::ServerUnaryReactor* Set(grpc::CallbackServerContext* ctx, const ::gnmi::SetRequest* req,
                                ::gnmi::SetResponse* resp) override;
  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* ctx, const ::gnmi::GetRequest* req,
                                ::gnmi::GetResponse* resp) override;

 private:
  struct Device {
    loom::v1::DeviceState state;
    int sets = 0;
    int gets = 0;
    ::gnmi::SetRequest last_set;
  };
  // nullptr when `target` is unknown. mu_ held.
  Device* Find(const std::string& target);

  const CodecLimits limits_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  mutable std::mutex mu_;
  std::map<std::string, Device> devices_;
  std::string first_;
  int drop_sets_ = 0;
  int fail_sets_ = 0;
  grpc::StatusCode fail_code_ = grpc::StatusCode::UNAVAILABLE;
};

}  // namespace loom::southbound::gnmi::testing

#endif  // LOOM_TESTS_SOUTHBOUND_GNMI_TEST_TARGET_H_
