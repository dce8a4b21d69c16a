// Helpers shared by the platform Set adapters (set_adapter.h): a small ordered
// JSON object writer, gNMI path building, and what the topology says about
// one device (interfaces per neighbor, every port). Internal to
// southbound/gnmi; pure and thread-safe.
#ifndef LOOM_SOUTHBOUND_GNMI_ADAPTER_UTIL_H_
#define LOOM_SOUTHBOUND_GNMI_ADAPTER_UTIL_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gnmi/gnmi.pb.h"
#include "loom/v1/topology.pb.h"
#include "southbound/gnmi/set_adapter.h"

namespace loom::southbound::gnmi::adapter {

// `s` as a JSON string literal.
std::string Quote(std::string_view s);

// Builds one JSON object with members in insertion order.
class JsonObject {
 public:
  JsonObject& Str(std::string_view key, std::string_view value);
  JsonObject& Num(std::string_view key, int64_t value);
  JsonObject& Bool(std::string_view key, bool value);
  // `json` is inserted as is (an object or array text).
  JsonObject& Raw(std::string_view key, std::string_view json);
  bool empty() const { return body_.empty(); }
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void Key(std::string_view key);
  std::string body_;
};

// "[a,b]" from already-encoded JSON values.
std::string Array(const std::vector<std::string>& items);

// A path from element names; "name[k=v][k2=v2]" is NOT parsed: keys are given.
struct Elem {
  std::string name;
  std::vector<std::pair<std::string, std::string>> keys;
};
::gnmi::Path MakePath(const std::vector<Elem>& elems);

// A gNMI update of `path` with a JSON_IETF value.
void AddJson(::gnmi::Update* u, const ::gnmi::Path& path, const std::string& json);

// What the topology says about one device.
class TopologyView {
 public:
  TopologyView(const loom::v1::Topology* topology, const std::string& device);
  bool known() const { return known_; }
  // Local interfaces towards `neighbor`, sorted; empty when not adjacent.
  std::vector<std::string> InterfacesTo(const std::string& neighbor) const;
  // Every interface of the device's links, sorted.
  const std::vector<std::string>& ports() const { return ports_; }
  // Interfaces towards other switches (ECMP / DLB members), sorted.
  const std::vector<std::string>& fabric_ports() const { return fabric_; }
  // Capacity of the link on `port`, bit/s (0 = unknown).
  int64_t PortCapacity(const std::string& port) const;
  // The leaf a NIC (or a GPU's NIC) attaches to; "" when unknown.
  std::string LeafOf(const std::string& endpoint) const;

 private:
  const loom::v1::Topology* topology_;
  bool known_ = false;
  std::map<std::string, std::vector<std::string>> by_neighbor_;
  std::map<std::string, int64_t> capacity_;
  std::vector<std::string> ports_, fabric_;
};

// Adds an Unexpressed entry.
void Refuse(AdapterOutput* out, std::string part, std::string entry, Status status,
            bool partial = false);

// Recovers the JSON text of an update's value (json_ietf_val or json_val).
std::string ValueJson(const ::gnmi::TypedValue& v);

}  // namespace loom::southbound::gnmi::adapter

#endif  // LOOM_SOUTHBOUND_GNMI_ADAPTER_UTIL_H_
