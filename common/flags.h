// Minimal command-line parsing shared by Loom's binaries.
//
// Accepts "--name value", "--name=value" and boolean "--name". Positional
// arguments are kept in order. Unknown flags are an error the caller reports.
#ifndef LOOM_COMMON_FLAGS_H_
#define LOOM_COMMON_FLAGS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace loom {

class Flags {
 public:
  // `value_flags` take a value; `bool_flags` do not. Returns false and sets
  // `error` on an unknown flag or a missing value.
  bool Parse(int argc, char** argv, int first, const std::set<std::string>& value_flags,
             const std::set<std::string>& bool_flags, std::string* error);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& def = "") const;
  // Parses an integer value; false and `error` set when it is not one.
  bool GetInt(const std::string& name, int64_t def, int64_t* out, std::string* error) const;
  bool GetDouble(const std::string& name, double def, double* out, std::string* error) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// Parses "400G", "100g", "25M", "1T" or a plain number of bits per second.
bool ParseBitRate(const std::string& text, int64_t* bps);

}  // namespace loom

#endif  // LOOM_COMMON_FLAGS_H_
