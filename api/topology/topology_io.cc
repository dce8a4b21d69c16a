#include "api/topology/topology_io.h"

#include <google/protobuf/util/json_util.h>

#include <fstream>
#include <sstream>

#include "common/file.h"

namespace loom::topology {

using loom::v1::DeviceRole;

std::string_view RoleName(DeviceRole role) {
  switch (role) {
    case loom::v1::DEVICE_ROLE_LEAF:
      return "leaf";
    case loom::v1::DEVICE_ROLE_SPINE:
      return "spine";
    case loom::v1::DEVICE_ROLE_SUPER_SPINE:
      return "super-spine";
    case loom::v1::DEVICE_ROLE_HOST:
      return "host";
    case loom::v1::DEVICE_ROLE_NIC:
      return "nic";
    default:
      return "unknown";
  }
}

void OffsetToLineCol(std::string_view text, size_t pos, int* line, int* col) {
  *line = 1;
  *col = 1;
  for (size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++*line;
      *col = 1;
    } else {
      ++*col;
    }
  }
}

namespace {

// Finds the `occurrence`-th quoted `needle` in text; npos when absent.
size_t Locate(std::string_view text, const std::string& needle, int occurrence) {
  if (needle.empty()) return std::string_view::npos;
  std::string quoted = "\"" + needle + "\"";
  size_t pos = 0;
  for (int i = 0;; ++i) {
    pos = text.find(quoted, pos);
    if (pos == std::string_view::npos) return pos;
    if (i == occurrence) return pos;
    pos += quoted.size();
  }
}

}  // namespace

std::string FormatErrors(const std::vector<ValidationError>& errors, std::string_view source,
                         std::string_view text) {
  std::ostringstream out;
  for (const auto& e : errors) {
    if (!source.empty()) out << source << ":";
    size_t pos = text.empty() ? std::string_view::npos : Locate(text, e.locate, e.occurrence);
    if (pos != std::string_view::npos) {
      int line = 0, col = 0;
      OffsetToLineCol(text, pos, &line, &col);
      out << line << ":" << col << ":";
    }
    if (!source.empty() || pos != std::string_view::npos) out << " ";
    out << e.element << ": " << e.message << "\n";
  }
  std::string s = out.str();
  if (!s.empty()) s.pop_back();
  return s;
}

bool ParseTopologyJson(std::string_view json, std::string_view source, loom::v1::Topology* out,
                       std::string* error) {
  out->Clear();
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), out, options);
  if (!status.ok()) {
    *error = std::string(source) +
             ": not a valid loom.v1.Topology JSON document: " + std::string(status.message());
    return false;
  }
  auto errors = ValidateTopology(*out);
  if (!errors.empty()) {
    *error = std::to_string(errors.size()) + " topology error(s):\n" +
             FormatErrors(errors, source, json);
    return false;
  }
  return true;
}

bool LoadTopologyFile(const std::string& path, loom::v1::Topology* out, std::string* error) {
  std::string text;
  if (!loom::ReadFileCapped(path, loom::kMaxTopologyFileBytes, "topology file", &text, error)) {
    return false;
  }
  return ParseTopologyJson(text, path, out, error);
}

std::string TopologyToJson(const loom::v1::Topology& topo) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = false;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(topo, &out, options);
  return out;
}

}  // namespace loom::topology
