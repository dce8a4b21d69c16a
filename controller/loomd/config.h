// loomd configuration: a LoomdConfig JSON file, then command-line overrides,
// then defaults for what is still unset, then validation.
#ifndef LOOM_CONTROLLER_LOOMD_CONFIG_H_
#define LOOM_CONTROLLER_LOOMD_CONFIG_H_

#include <string>

#include "controller/core/adaptive_engine.h"
#include "loom/v1/config.pb.h"

namespace loom::loomd {

extern const char kUsage[];

enum class ConfigResult { kOk, kHelp, kVersion, kError };

// Fills `config` from argv. On kError `error` says what is wrong.
ConfigResult LoadConfig(int argc, char** argv, loom::v1::LoomdConfig* config, std::string* error);

// changeMode, changeSafety and fabricSettings against the topology; false
// with `error` naming the field.
bool ValidateChangeConfig(const loom::v1::LoomdConfig& config, const loom::v1::Topology& topology,
                          std::string* error);

// Splits "host:port" (or "[v6]:port"); false when malformed.
// The config's adaptive section as AdaptiveOptions, validated: "" or the
// error ("adaptive.alb_scan_interval_ms: 500 is below the 1000 ms minimum").
std::string AdaptiveOptionsFromConfig(const loom::v1::LoomdConfig& config,
                                      loom::controller::AdaptiveOptions* out);

bool SplitHostPort(const std::string& address, std::string* host, int* port);

}  // namespace loom::loomd

#endif  // LOOM_CONTROLLER_LOOMD_CONFIG_H_
