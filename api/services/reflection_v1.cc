#include "api/services/reflection_v1.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <algorithm>
#include <mutex>

#include "grpc/health/v1/health.pb.h"

namespace loom::api {

namespace rv1 = grpc::reflection::v1;
namespace pb = google::protobuf;

ReflectionV1Service::ReflectionV1Service(std::vector<std::string> services)
    : services_(std::move(services)) {
  // Linked in (and so registered in the generated pool) for health's sake.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
}

namespace {

void AddFile(const pb::FileDescriptor* file, std::vector<std::string>* sent,
             rv1::FileDescriptorResponse* out) {
  if (std::find(sent->begin(), sent->end(), file->name()) != sent->end()) return;
  sent->push_back(file->name());
  pb::FileDescriptorProto proto;
  file->CopyTo(&proto);
  out->add_file_descriptor_proto(proto.SerializeAsString());
  for (int i = 0; i < file->dependency_count(); ++i) AddFile(file->dependency(i), sent, out);
}

const pb::FileDescriptor* FileOfSymbol(const pb::DescriptorPool& pool, const std::string& name) {
  if (const auto* f = pool.FindFileContainingSymbol(name)) return f;
  // "pkg.Service.Method" resolves through the service.
  const size_t dot = name.rfind('.');
  if (dot != std::string::npos) {
    if (const auto* s = pool.FindServiceByName(name.substr(0, dot))) {
      if (s->FindMethodByName(name.substr(dot + 1))) return s->file();
    }
  }
  return nullptr;
}

void Fail(rv1::ServerReflectionResponse* resp, grpc::StatusCode code, const std::string& msg) {
  resp->mutable_error_response()->set_error_code(static_cast<int>(code));
  resp->mutable_error_response()->set_error_message(msg);
}

}  // namespace

rv1::ServerReflectionResponse ReflectionV1Service::Answer(const rv1::ServerReflectionRequest& req,
                                                          std::vector<std::string>* sent) const {
  const pb::DescriptorPool& pool = *pb::DescriptorPool::generated_pool();
  rv1::ServerReflectionResponse resp;
  resp.set_valid_host(req.host());
  *resp.mutable_original_request() = req;
  switch (req.message_request_case()) {
    case rv1::ServerReflectionRequest::kListServices:
      for (const auto& s : services_)
        resp.mutable_list_services_response()->add_service()->set_name(s);
      break;
    case rv1::ServerReflectionRequest::kFileByFilename:
      if (const auto* f = pool.FindFileByName(req.file_by_filename())) {
        AddFile(f, sent, resp.mutable_file_descriptor_response());
      } else {
        Fail(&resp, grpc::StatusCode::NOT_FOUND, "file not found: " + req.file_by_filename());
      }
      break;
    case rv1::ServerReflectionRequest::kFileContainingSymbol:
      if (const auto* f = FileOfSymbol(pool, req.file_containing_symbol())) {
        AddFile(f, sent, resp.mutable_file_descriptor_response());
      } else {
        Fail(&resp, grpc::StatusCode::NOT_FOUND,
             "symbol not found: " + req.file_containing_symbol());
      }
      break;
    case rv1::ServerReflectionRequest::kFileContainingExtension: {
      const auto& e = req.file_containing_extension();
      const auto* type = pool.FindMessageTypeByName(e.containing_type());
      const auto* ext = type ? pool.FindExtensionByNumber(type, e.extension_number()) : nullptr;
      if (ext) {
        AddFile(ext->file(), sent, resp.mutable_file_descriptor_response());
      } else {
        Fail(&resp, grpc::StatusCode::NOT_FOUND,
             "extension not found: " + e.containing_type() + " " +
                 std::to_string(e.extension_number()));
      }
      break;
    }
    case rv1::ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const auto* type = pool.FindMessageTypeByName(req.all_extension_numbers_of_type());
      if (!type) {
        Fail(&resp, grpc::StatusCode::NOT_FOUND,
             "type not found: " + req.all_extension_numbers_of_type());
        break;
      }
      std::vector<const pb::FieldDescriptor*> exts;
      pool.FindAllExtensions(type, &exts);
      auto* out = resp.mutable_all_extension_numbers_response();
      out->set_base_type_name(type->full_name());
      for (const auto* x : exts) out->add_extension_number(x->number());
      break;
    }
    default:
      Fail(&resp, grpc::StatusCode::INVALID_ARGUMENT, "no message_request set");
  }
  return resp;
}

namespace {

// One stream: read a request, write its answer, repeat; finish when the client
// closes its side.
class Reactor final
    : public grpc::ServerBidiReactor<rv1::ServerReflectionRequest, rv1::ServerReflectionResponse> {
 public:
  explicit Reactor(const ReflectionV1Service& service) : service_(service) { StartRead(&req_); }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    resp_ = service_.Answer(req_, &sent_);
    StartWrite(&resp_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::UNKNOWN, "write failed"));
      return;
    }
    StartRead(&req_);
  }
  void OnDone() override { delete this; }

 private:
  const ReflectionV1Service& service_;
  rv1::ServerReflectionRequest req_;
  rv1::ServerReflectionResponse resp_;
  std::vector<std::string> sent_;
};

}  // namespace

grpc::ServerBidiReactor<rv1::ServerReflectionRequest, rv1::ServerReflectionResponse>*
ReflectionV1Service::ServerReflectionInfo(grpc::CallbackServerContext*) {
  return new Reactor(*this);
}

}  // namespace loom::api
