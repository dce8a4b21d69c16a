#include "policy/policy_engine.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/file.h"

namespace loom::policy {

namespace v1 = loom::v1;

namespace {

using Ranges = google::protobuf::RepeatedPtrField<v1::NumberRange>;

std::string Q(const std::string& s) { return "\"" + s + "\""; }

std::string RuleName(const v1::PolicySet& set, int i) {
  return "rules[" + std::to_string(i) + "] (" + Q(set.rules(i).name()) + ")";
}

// Sorted, merged copy of ranges.
std::vector<std::pair<uint32_t, uint32_t>> Merge(const Ranges& ranges) {
  std::vector<std::pair<uint32_t, uint32_t>> v;
  for (const auto& r : ranges) v.emplace_back(r.first(), r.last());
  std::sort(v.begin(), v.end());
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const auto& r : v) {
    if (!out.empty() &&
        static_cast<uint64_t>(r.first) <= static_cast<uint64_t>(out.back().second) + 1) {
      out.back().second = std::max(out.back().second, r.second);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

// Every range of `inner` lies inside the union of `outer`.
bool RangesWithin(const Ranges& inner, const Ranges& outer) {
  auto o = Merge(outer);
  for (const auto& r : inner) {
    bool inside = std::any_of(o.begin(), o.end(), [&](const auto& x) {
      return x.first <= r.first() && r.last() <= x.second;
    });
    if (!inside) return false;
  }
  return true;
}

bool RangesIntersect(const Ranges& a, const Ranges& b) {
  for (const auto& x : a) {
    for (const auto& y : b) {
      if (x.first() <= y.last() && y.first() <= x.last()) return true;
    }
  }
  return false;
}

template <typename C>
bool Subset(const C& inner, const C& outer) {
  std::set<typename C::value_type> o(outer.begin(), outer.end());
  return std::all_of(inner.begin(), inner.end(), [&](const auto& v) { return o.count(v) > 0; });
}

template <typename C>
bool Intersect(const C& a, const C& b) {
  std::set<typename C::value_type> o(b.begin(), b.end());
  return std::any_of(a.begin(), a.end(), [&](const auto& v) { return o.count(v) > 0; });
}

// Every job that matches `b` also matches `a` (so a rule b after a is shadowed).
bool Covers(const v1::PolicyMatch& a, const v1::PolicyMatch& b) {
  auto list = [](const auto& ca, const auto& cb) {
    return ca.empty() || (!cb.empty() && Subset(cb, ca));
  };
  auto ranges = [](const Ranges& ra, const Ranges& rb) {
    return ra.empty() || (!rb.empty() && RangesWithin(rb, ra));
  };
  return list(a.tenants(), b.tenants()) && list(a.job_ids(), b.job_ids()) &&
         list(a.endpoints(), b.endpoints()) && ranges(a.qp_ranges(), b.qp_ranges()) &&
         ranges(a.udp_source_port_ranges(), b.udp_source_port_ranges()) &&
         list(a.traffic_classes(), b.traffic_classes()) && list(a.dscp(), b.dscp());
}

// Some job could match both.
bool Overlaps(const v1::PolicyMatch& a, const v1::PolicyMatch& b) {
  auto list = [](const auto& ca, const auto& cb) {
    return ca.empty() || cb.empty() || Intersect(ca, cb);
  };
  auto ranges = [](const Ranges& ra, const Ranges& rb) {
    return ra.empty() || rb.empty() || RangesIntersect(ra, rb);
  };
  return list(a.tenants(), b.tenants()) && list(a.job_ids(), b.job_ids()) &&
         list(a.endpoints(), b.endpoints()) && ranges(a.qp_ranges(), b.qp_ranges()) &&
         ranges(a.udp_source_port_ranges(), b.udp_source_port_ranges()) &&
         list(a.traffic_classes(), b.traffic_classes()) && list(a.dscp(), b.dscp());
}

void CheckRanges(const Ranges& ranges, uint32_t max, const std::string& el,
                 const std::string& field, std::vector<Finding>* out) {
  for (int i = 0; i < ranges.size(); ++i) {
    const auto& r = ranges[i];
    if (r.first() > r.last() || r.last() > max) {
      out->push_back({Finding::Severity::kError, el,
                      field + "[" + std::to_string(i) + "]: [" + std::to_string(r.first()) + ", " +
                          std::to_string(r.last()) + "] is not a range within 0.." +
                          std::to_string(max)});
    }
  }
}

}  // namespace

std::vector<Finding> ValidatePolicy(const v1::PolicySet& set,
                                    const loom::topology::TopologyIndex& topo) {
  std::vector<Finding> out;
  auto error = [&out](std::string el, std::string msg) {
    out.push_back({Finding::Severity::kError, std::move(el), std::move(msg)});
  };
  // Spine-like members: spines, or "spine>superspine" combinations.
  std::map<uint32_t, std::set<std::string>> colors;  // color -> member spines
  for (int i = 0; i < set.colors_size(); ++i) {
    const auto& c = set.colors(i);
    std::string el = "colors[" + std::to_string(i) + "] (" + std::to_string(c.color()) + ")";
    if (c.color() == 0) error(el, "color id 0 is reserved for \"uncolored\"");
    if (colors.count(c.color())) error(el, "duplicate color id " + std::to_string(c.color()));
    if (c.spines().empty()) error(el, "a color needs at least one spine");
    std::set<std::string> members;
    for (const auto& m : c.spines()) {
      std::string spine = m.substr(0, m.find('>'));
      const auto* d = topo.FindDevice(spine);
      if (!d || d->role() != v1::DEVICE_ROLE_SPINE) {
        error(el, "member " + Q(m) + " is not a spine of the topology");
        continue;
      }
      if (auto gt = m.find('>'); gt != std::string::npos) {
        const auto* ss = topo.FindDevice(m.substr(gt + 1));
        if (!ss || ss->role() != v1::DEVICE_ROLE_SUPER_SPINE) {
          error(el, "member " + Q(m) + " names no super-spine of the topology");
        }
      }
      if (!members.insert(m).second) error(el, "member " + Q(m) + " is listed twice");
    }
    colors[c.color()] = members;
  }
  auto check_action = [&](const v1::PolicyAction& a, const std::string& el) {
    for (uint32_t c : a.colors()) {
      if (!colors.count(c))
        error(el, "action names color " + std::to_string(c) + ", which is not defined");
    }
    if (a.backup_color() != 0 && !colors.count(a.backup_color())) {
      error(el, "backup_color " + std::to_string(a.backup_color()) + " is not defined");
    }
    if (a.backup_color() != 0 &&
        std::find(a.colors().begin(), a.colors().end(), a.backup_color()) != a.colors().end()) {
      error(el, "backup_color " + std::to_string(a.backup_color()) +
                    " is also a primary color; a backup must differ");
    }
    if (!v1::DlbMode_IsValid(a.dlb_mode())) error(el, "unknown dlb_mode");
    if (!v1::Isolation_IsValid(a.isolation())) error(el, "unknown isolation");
    const uint32_t q = a.qp_split();
    if (q > 1 && (q > kMaxQpSplit || (q & (q - 1)) != 0)) {
      error(el, "qp_split " + std::to_string(q) + " is not a power of two between 2 and " +
                    std::to_string(kMaxQpSplit) +
                    " (1 = no split, 0 = from the job's qps_per_connection)");
    }
  };
  std::set<std::string> names;
  for (int i = 0; i < set.rules_size(); ++i) {
    const auto& r = set.rules(i);
    std::string el = RuleName(set, i);
    if (r.name().empty()) error(el, "rule has no name");
    if (!r.name().empty() && !names.insert(r.name()).second) error(el, "duplicate rule name");
    check_action(r.action(), el);
    CheckRanges(r.match().qp_ranges(), 0xFFFFFF, el, "match.qp_ranges", &out);
    CheckRanges(r.match().udp_source_port_ranges(), 65535, el, "match.udp_source_port_ranges",
                &out);
    for (uint32_t tc : r.match().traffic_classes()) {
      if (tc > 7) error(el, "match.traffic_classes: " + std::to_string(tc) + " is not 0..7");
    }
    for (uint32_t d : r.match().dscp()) {
      if (d > 63) error(el, "match.dscp: " + std::to_string(d) + " is not 0..63");
    }
    for (const auto& ep : r.match().endpoints()) {
      if (topo.EndpointNic(ep).empty()) {
        error(el, "match.endpoints: " + Q(ep) + " is not a GPU or NIC of the topology");
      }
    }
  }
  check_action(set.default_action(), "default_action");

  // Shadowing and overlaps, through indexes instead of comparing every pair
  // (16k rules took 18 s that way).
  //  - Shadowing (an error) is exact. Rule a covers rule b only if every list a
  //    sets (tenants, job ids, traffic classes, endpoints) b sets too, with b's
  //    first value in it; rules are indexed by which of those lists they set and
  //    by the first such list's values, so b's candidates are the rules filed
  //    under a subset of b's lists and b's value: O(log n) lookups per rule for
  //    policies whose rules set any of the lists. Covers() confirms.
  //  - Overlaps (warnings, advisory) are reported for at most kOverlapChecks
  //    earlier candidates per rule and kOverlapWarnings warnings per rule: an
  //    overlap relation can have n^2 pairs (a rule for every tenant after a
  //    traffic-class rule), which no one reads.
  constexpr size_t kOverlapChecks = 256;
  constexpr int kOverlapWarnings = 3;
  auto first_keys = [](const v1::PolicyMatch& m) {
    std::array<std::string, 4> k;
    if (!m.tenants().empty()) k[0] = m.tenants(0);
    if (!m.job_ids().empty()) k[1] = m.job_ids(0);
    if (!m.traffic_classes().empty()) k[2] = std::to_string(m.traffic_classes(0));
    if (!m.endpoints().empty()) k[3] = m.endpoints(0);
    return k;
  };
  auto set_mask = [](const v1::PolicyMatch& m) {
    return (m.tenants().empty() ? 0 : 1) | (m.job_ids().empty() ? 0 : 2) |
           (m.traffic_classes().empty() ? 0 : 4) | (m.endpoints().empty() ? 0 : 8);
  };
  auto all_keys = [](const v1::PolicyMatch& m, int dim) {
    std::set<std::string> out;
    if (dim == 0) out.insert(m.tenants().begin(), m.tenants().end());
    if (dim == 1) out.insert(m.job_ids().begin(), m.job_ids().end());
    if (dim == 2) {
      for (uint32_t v : m.traffic_classes()) out.insert(std::to_string(v));
    }
    if (dim == 3) out.insert(m.endpoints().begin(), m.endpoints().end());
    return out;
  };
  // (mask, value of the mask's first list) -> rules in order; mask 0: no value.
  std::map<std::pair<int, std::string>, std::vector<int>> cover_index;
  // Overlap candidates: per list, rules by value and rules not setting it.
  std::array<std::map<std::string, std::vector<int>>, 4> by_value;
  std::array<std::vector<int>, 4> unset;
  std::vector<int> candidates;
  auto take = [&](const std::vector<int>& from) {
    const size_t n = std::min(from.size(), kOverlapChecks);
    candidates.insert(candidates.end(), from.begin(), from.begin() + static_cast<long>(n));
  };
  for (int j = 0; j < set.rules_size(); ++j) {
    const auto& bj = set.rules(j);
    const auto& b = bj.match();
    const int mask = set_mask(b);
    const auto keys = first_keys(b);
    // Shadowing: the earliest covering rule.
    int shadow_by = -1;
    for (int sub = mask;; sub = (sub - 1) & mask) {
      std::string key;
      for (int d = 0; d < 4; ++d) {
        if (sub & (1 << d)) {
          key = keys[static_cast<size_t>(d)];
          break;
        }
      }
      if (auto it = cover_index.find({sub, key}); it != cover_index.end()) {
        for (int i : it->second) {
          if (shadow_by >= 0 && i >= shadow_by) break;
          if (Covers(set.rules(i).match(), b)) {
            shadow_by = i;
            break;
          }
        }
      }
      if (sub == 0) break;
    }
    // Overlaps with earlier rules (before the shadowing one), bounded.
    candidates.clear();
    int dim = -1;
    for (int d = 0; d < 4; ++d) {
      if (mask & (1 << d)) {
        dim = d;
        break;
      }
    }
    if (dim >= 0) {
      take(unset[static_cast<size_t>(dim)]);
      for (const auto& k : all_keys(b, dim)) {
        if (auto it = by_value[static_cast<size_t>(dim)].find(k);
            it != by_value[static_cast<size_t>(dim)].end()) {
          take(it->second);
        }
      }
    } else {
      for (int i = 0; i < j && static_cast<size_t>(i) < kOverlapChecks; ++i) {
        candidates.push_back(i);
      }
    }
    std::sort(candidates.begin(), candidates.end());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
    if (candidates.size() > kOverlapChecks) candidates.resize(kOverlapChecks);
    int warned = 0;
    for (int i : candidates) {
      if (shadow_by >= 0 && i >= shadow_by) break;
      if (warned == kOverlapWarnings) break;
      const auto& a = set.rules(i);
      if (Overlaps(a.match(), b) &&
          !google::protobuf::util::MessageDifferencer::Equals(a.action(), bj.action())) {
        out.push_back({Finding::Severity::kWarning, RuleName(set, j),
                       "overlaps " + RuleName(set, i) +
                           " with a different action; for traffic both match, " + Q(a.name()) +
                           " wins (first match)" +
                           (++warned == kOverlapWarnings ? " (further overlaps not listed)" : "")});
      }
    }
    if (shadow_by >= 0) {
      error(RuleName(set, j), "is shadowed by " + RuleName(set, shadow_by) +
                                  ", which matches everything it matches; it can never apply");
    }
    // Index rule j for the later ones.
    int first_dim = -1;
    for (int d = 0; d < 4; ++d) {
      if (mask & (1 << d)) {
        first_dim = d;
        break;
      }
    }
    if (first_dim < 0) {
      cover_index[{0, ""}].push_back(j);
    } else {
      for (const auto& k : all_keys(b, first_dim)) cover_index[{mask, k}].push_back(j);
    }
    for (int d = 0; d < 4; ++d) {
      if (!(mask & (1 << d))) {
        unset[static_cast<size_t>(d)].push_back(j);
        continue;
      }
      for (const auto& k : all_keys(b, d)) by_value[static_cast<size_t>(d)][k].push_back(j);
    }
  }

  // Isolation: dedicated tenants need spines nobody else uses.
  std::set<std::string> all_spines;
  for (const auto& d : topo.topology().devices()) {
    if (d.role() == v1::DEVICE_ROLE_SPINE) all_spines.insert(d.id());
  }
  auto spines_of = [&](const v1::PolicyAction& a) {
    std::set<std::string> s;
    for (uint32_t c : a.colors()) {
      for (const auto& m : colors[c]) s.insert(m.substr(0, m.find('>')));
    }
    return s;
  };
  std::map<std::string, std::pair<int, std::set<std::string>>> dedicated;  // tenant -> rule, spines
  int floating_dedicated = 0;
  for (int i = 0; i < set.rules_size(); ++i) {
    const auto& r = set.rules(i);
    if (r.action().isolation() != v1::ISOLATION_DEDICATED) continue;
    if (r.match().tenants().empty()) {
      error(RuleName(set, i), "dedicated isolation needs match.tenants (whose spines are they?)");
      continue;
    }
    if (r.action().colors().empty()) ++floating_dedicated;
    for (const auto& t : r.match().tenants()) {
      auto s = spines_of(r.action());
      auto [it, inserted] = dedicated.emplace(t, std::make_pair(i, s));
      if (!inserted) it->second.second.insert(s.begin(), s.end());
    }
  }
  // Pinned dedicated spine sets of different tenants must be disjoint, and
  // no rule of another tenant may pin traffic onto them. Through a spine ->
  // dedicated tenants map: O(rules x spines of a rule), not tenants x rules.
  std::map<std::string, std::vector<std::string>> owners;  // spine -> dedicated tenants (sorted)
  for (const auto& [tenant, rs] : dedicated) {
    for (const auto& s : rs.second) owners[s].push_back(tenant);
  }
  for (const auto& [tenant, rs] : dedicated) {
    for (const auto& s : rs.second) {
      for (const auto& other : owners[s]) {
        if (other <= tenant) continue;
        error(RuleName(set, dedicated[other].first),
              "tenant " + Q(other) + " and tenant " + Q(tenant) + " (" + RuleName(set, rs.first) +
                  ") are both dedicated but share spine " + Q(s));
      }
    }
  }
  for (int i = 0; i < set.rules_size(); ++i) {
    const auto& r = set.rules(i);
    if (r.action().colors().empty()) continue;
    std::set<std::string> told;  // dedicated tenants this rule was reported against
    for (const auto& s : spines_of(r.action())) {
      auto it = owners.find(s);
      if (it == owners.end()) continue;
      for (const auto& tenant : it->second) {
        const bool same_tenant = r.match().tenants_size() > 0 &&
                                 std::all_of(r.match().tenants().begin(), r.match().tenants().end(),
                                             [&](const std::string& t) { return t == tenant; });
        if (same_tenant || !told.insert(tenant).second) continue;
        error(RuleName(set, i), "pins traffic of other tenants onto spine " + Q(s) +
                                    ", which is dedicated to tenant " + Q(tenant) + " by " +
                                    RuleName(set, dedicated[tenant].first));
      }
    }
  }
  std::set<std::string> pinned_dedicated;
  for (const auto& [t, rs] : dedicated) pinned_dedicated.insert(rs.second.begin(), rs.second.end());
  size_t free_spines = all_spines.size() - std::min(all_spines.size(), pinned_dedicated.size());
  // Each floating dedicated tenant needs a spine of its own, and shared
  // traffic needs at least one spine left.
  if (!dedicated.empty() && static_cast<size_t>(floating_dedicated) + 1 > free_spines) {
    error("rules", "dedicated isolation is unsatisfiable: " + std::to_string(floating_dedicated) +
                       " dedicated tenant(s) without pinned colors plus shared traffic need " +
                       std::to_string(floating_dedicated + 1) + " free spine(s), but only " +
                       std::to_string(free_spines) + " of " + std::to_string(all_spines.size()) +
                       " are not pinned to dedicated tenants");
  }
  return out;
}

bool HasErrors(const std::vector<Finding>& findings) {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& f) { return f.severity == Finding::Severity::kError; });
}

std::string FormatFindings(const std::vector<Finding>& findings) {
  std::ostringstream out;
  for (const auto& f : findings) {
    out << (f.severity == Finding::Severity::kError ? "error: " : "warning: ") << f.element << ": "
        << f.message << "\n";
  }
  std::string s = out.str();
  if (!s.empty()) s.pop_back();
  return s;
}

bool ParsePolicyJson(const std::string& json, const std::string& source, v1::PolicySet* out,
                     std::string* error) {
  out->Clear();
  auto st = google::protobuf::util::JsonStringToMessage(json, out);
  if (!st.ok()) {
    *error = source + ": not a valid loom.v1.PolicySet JSON document: " + std::string(st.message());
    return false;
  }
  return true;
}

bool LoadPolicyFile(const std::string& path, v1::PolicySet* out, std::string* error) {
  std::string text;
  if (!ReadFileCapped(path, kMaxConfigFileBytes, "policy file", &text, error)) return false;
  return ParsePolicyJson(text, path, out, error);
}

bool PolicyEngine::Matches(const v1::PolicyMatch& m, const v1::Job& job) {
  auto in = [](const auto& list, const auto& v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  if (!in(m.tenants(), job.tenant())) return false;
  if (!in(m.job_ids(), job.job_id())) return false;
  if (!in(m.traffic_classes(), job.traffic_class())) return false;
  if (!m.endpoints().empty() && !Subset(job.endpoints(), m.endpoints())) return false;
  if (!m.qp_ranges().empty() &&
      (job.qp_ranges().empty() || !RangesWithin(job.qp_ranges(), m.qp_ranges()))) {
    return false;
  }
  if (!m.udp_source_port_ranges().empty() &&
      (job.udp_source_port_ranges().empty() ||
       !RangesWithin(job.udp_source_port_ranges(), m.udp_source_port_ranges()))) {
    return false;
  }
  if (!m.dscp().empty()) {
    auto it = job.labels().find("dscp");
    if (it == job.labels().end()) return false;
    uint32_t dscp = 0;
    try {
      dscp = static_cast<uint32_t>(std::stoul(it->second));
    } catch (...) {
      return false;
    }
    if (!in(m.dscp(), dscp)) return false;
  }
  return true;
}

Decision PolicyEngine::Evaluate(const v1::Job& job) const {
  for (int i = 0; i < set_.rules_size(); ++i) {
    if (Matches(set_.rules(i).match(), job)) {
      return {i, set_.rules(i).name(), set_.rules(i).action()};
    }
  }
  Decision d;
  d.rule_name = "default";
  d.action = set_.default_action();
  return d;
}

}  // namespace loom::policy
