// TELB policy engine: validation and evaluation of a PolicySet.
//
// Rules are evaluated in order and the first rule whose match holds for a job
// decides; `default_action` applies otherwise. Validation reports errors
// (the set is refused) and warnings (accepted, shown to the operator), each
// naming the rule or color. Pure code, no I/O besides LoadPolicyFile;
// thread-compatible. Validation is O(R^2 * M) for R rules of M match values;
// evaluation O(R * M) per job.
#ifndef LOOM_POLICY_POLICY_ENGINE_H_
#define LOOM_POLICY_POLICY_ENGINE_H_

#include <string>
#include <vector>

#include "api/topology/topology_index.h"
#include "loom/v1/job.pb.h"
#include "loom/v1/policy.pb.h"

namespace loom::policy {

// Largest PolicyAction.qp_split (parts per destination).
inline constexpr uint32_t kMaxQpSplit = 64;

struct Finding {
  enum class Severity { kError, kWarning };
  Severity severity = Severity::kError;
  // "rules[2] (\"tenant-a\")", "colors[0] (1)", "default_action".
  std::string element;
  std::string message;
};

// Checks the set against the topology: unique rule names and color ids;
// colors with known, distinct spine members; actions that only name defined
// colors; well-formed ranges; shadowed rules (never reachable: error);
// overlapping rules with different actions (warning); dedicated isolation
// that cannot be satisfied (error).
std::vector<Finding> ValidatePolicy(const loom::v1::PolicySet& set,
                                    const loom::topology::TopologyIndex& topo);

bool HasErrors(const std::vector<Finding>& findings);
std::string FormatFindings(const std::vector<Finding>& findings);

// Parses protobuf JSON of loom.v1.PolicySet (no validation).
bool ParsePolicyJson(const std::string& json, const std::string& source, loom::v1::PolicySet* out,
                     std::string* error);
bool LoadPolicyFile(const std::string& path, loom::v1::PolicySet* out, std::string* error);

// The outcome of evaluating a job.
struct Decision {
  // Index of the matching rule, -1 for the default action.
  int rule_index = -1;
  std::string rule_name;  // "default" for the default action
  loom::v1::PolicyAction action;
};

class PolicyEngine {
 public:
  // An empty set: every job gets the default action (shared, controller
  // chooses colors).
  PolicyEngine() = default;
  explicit PolicyEngine(loom::v1::PolicySet set) : set_(std::move(set)) {}

  const loom::v1::PolicySet& set() const { return set_; }
  Decision Evaluate(const loom::v1::Job& job) const;
  // True when `rule` matches `job`.
  static bool Matches(const loom::v1::PolicyMatch& match, const loom::v1::Job& job);

 private:
  loom::v1::PolicySet set_;
};

}  // namespace loom::policy

#endif  // LOOM_POLICY_POLICY_ENGINE_H_
