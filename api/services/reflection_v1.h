// grpc.reflection.v1.ServerReflection over the generated descriptor pool, served
// beside the v1alpha service Debian's gRPC 1.51 provides (grpc++_reflection), for
// clients and generators that speak only v1 (grpcurl >= 1.9, grpcui, Postman,
// grpc-java's and grpc-go's newer tools).
//
// Answers list_services (the names given at construction), file_by_filename,
// file_containing_symbol (services, methods, messages, enums, fields),
// file_containing_extension and all_extension_numbers_of_type; file answers carry
// the file and its transitive dependencies, each file once per stream. Unknown
// names get an error_response (NOT_FOUND) on the stream, as the v1alpha service
// does. Runs on gRPC's callback threads; the pool is read-only.
#ifndef LOOM_API_SERVICES_REFLECTION_V1_H_
#define LOOM_API_SERVICES_REFLECTION_V1_H_

#include <string>
#include <vector>

#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace loom::api {

class ReflectionV1Service final : public grpc::reflection::v1::ServerReflection::CallbackService {
 public:
  explicit ReflectionV1Service(std::vector<std::string> services);

  grpc::ServerBidiReactor<grpc::reflection::v1::ServerReflectionRequest,
                          grpc::reflection::v1::ServerReflectionResponse>*
  ServerReflectionInfo(grpc::CallbackServerContext* context) override;

  // The answer to one request; `sent` holds the files already sent on the stream.
  grpc::reflection::v1::ServerReflectionResponse Answer(
      const grpc::reflection::v1::ServerReflectionRequest& req,
      std::vector<std::string>* sent) const;

 private:
  std::vector<std::string> services_;
};

}  // namespace loom::api

#endif  // LOOM_API_SERVICES_REFLECTION_V1_H_
