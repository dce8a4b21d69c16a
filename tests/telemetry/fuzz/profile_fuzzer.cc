// libFuzzer target for what a target can send Loom: the input is a gNMI JSON
// value (json_ietf_val) answering SONiC's COUNTERS/Ethernet* and an
// OpenConfig container; it goes through the JSON reader, flattening and the
// shipped sonic and openconfig profiles' translation. Property: no crash, no
// sanitizer report, and every produced update has a catalogue path. Built and
// run by run_path_fuzzer.sh (name "profile").
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "telemetry/path.h"
#include "telemetry/profile.h"

namespace {

loom::v1::TelemetryProfile Load(const char* name) {
  loom::v1::TelemetryProfile p;
  std::string error;
  if (!loom::telemetry::LoadProfileFile(
          std::string(LOOM_SOURCE_DIR) + "/telemetry/profiles/" + name + ".json", &p, &error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    std::abort();
  }
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const loom::v1::TelemetryProfile sonic = Load("sonic");
  static const loom::v1::TelemetryProfile oc = Load("openconfig");
  const std::string value(reinterpret_cast<const char*>(data), size);
  for (const auto* profile : {&sonic, &oc}) {
    loom::telemetry::ProfileTranslator tr(*profile, {{"etp1", "Ethernet0"}});
    std::vector<int> all;
    for (int i = 0; i < profile->signals_size(); ++i) all.push_back(i);
    gnmi::Notification n;
    n.set_timestamp(1);
    for (const char* path : {"COUNTERS/Ethernet*", "/interfaces/interface[name=Ethernet0]/state",
                             "PERIODIC_WATERMARKS"}) {
      gnmi::Update* u = n.add_update();
      if (!loom::telemetry::ParsePath(path, u->mutable_path()).ok()) std::abort();
      u->mutable_val()->set_json_ietf_val(value);
    }
    for (int i = 0; i < profile->key_maps_size(); ++i) tr.UpdateKeyMap(i, n);
    gnmi::Notification out;
    std::string err;
    tr.Translate(all, n, 1, &out, &err);
    for (const auto& u : out.update()) {
      if (u.path().elem_size() == 0) {
        std::fprintf(stderr, "translated update without a path\n");
        std::abort();
      }
    }
  }
  return 0;
}
