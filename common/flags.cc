#include "common/flags.h"

#include <cerrno>
#include <cstdlib>

namespace loom {

bool Flags::Parse(int argc, char** argv, int first, const std::set<std::string>& value_flags,
                  const std::set<std::string>& bool_flags, std::string* error) {
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() < 3 || arg.rfind("--", 0) != 0) {
      if (arg == "-h") {
        values_["help"] = "true";
        continue;
      }
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (bool_flags.count(name)) {
      values_[name] = has_value ? value : "true";
    } else if (value_flags.count(name)) {
      if (!has_value) {
        if (i + 1 >= argc) {
          *error = "flag --" + name + " needs a value";
          return false;
        }
        value = argv[++i];
      }
      values_[name] = value;
    } else {
      *error = "unknown flag --" + name + " (see --help)";
      return false;
    }
  }
  return true;
}

std::string Flags::Get(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

bool Flags::GetInt(const std::string& name, int64_t def, int64_t* out, std::string* error) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    *out = def;
    return true;
  }
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (errno != 0 || end == it->second.c_str() || *end != '\0') {
    *error = "flag --" + name + ": \"" + it->second + "\" is not an integer";
    return false;
  }
  *out = v;
  return true;
}

bool Flags::GetDouble(const std::string& name, double def, double* out, std::string* error) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    *out = def;
    return true;
  }
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(it->second.c_str(), &end);
  if (errno != 0 || end == it->second.c_str() || *end != '\0') {
    *error = "flag --" + name + ": \"" + it->second + "\" is not a number";
    return false;
  }
  *out = v;
  return true;
}

bool ParseBitRate(const std::string& text, int64_t* bps) {
  if (text.empty()) return false;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || v <= 0) return false;
  std::string suffix(end);
  double mult = 1;
  if (suffix == "" || suffix == "bps") {
    mult = 1;
  } else if (suffix == "K" || suffix == "k") {
    mult = 1e3;
  } else if (suffix == "M" || suffix == "m") {
    mult = 1e6;
  } else if (suffix == "G" || suffix == "g") {
    mult = 1e9;
  } else if (suffix == "T" || suffix == "t") {
    mult = 1e12;
  } else {
    return false;
  }
  *bps = static_cast<int64_t>(v * mult);
  return true;
}

}  // namespace loom
