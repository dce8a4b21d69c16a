#include "controller/te/placement.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "controller/te/demand.h"

namespace loom::te {

namespace v1 = loom::v1;

namespace {

// Patterns whose pairing the API does not fix: the model's pairs are a placeholder
// (permutation: i -> i+N/2) until the scheduler states a matrix or measurement shows
// one. Rings, trees, all-to-all, incast and pairs follow the endpoint order.
bool PairingUnknown(v1::CollectivePattern p) {
  return p == v1::COLLECTIVE_PATTERN_PERMUTATION || p == v1::COLLECTIVE_PATTERN_UNSPECIFIED;
}

// "%.0f%%" of u * 100 (std::to_chars with a precision formats as printf does).
std::string Percent(double u) {
  char buf[400];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf) - 1, u * 100, std::chars_format::fixed, 0);
  if (ec != std::errc()) return "?%";
  *end++ = '%';
  return std::string(buf, end);
}

// Key of a destination's part: the NIC id, plus "/value&mask" for a QP part.
std::string PartKey(const std::string& dst, uint32_t mask, uint32_t value) {
  if (mask == 0) return dst;
  return dst + "/" + std::to_string(value) + "&" + std::to_string(mask);
}

// Where part `value` of a destination was (-1: nowhere): the same part, or the part
// with the same number under the split it had before (whole = 0 parts, coarser or
// finer). Finer parts than before inherit only where their number existed, so a split
// that starts from a whole destination keeps part 0 in place and leaves the others free
// to spread; a split that ends keeps the whole destination where part 0 was.
int CurrentTop(const std::map<std::string, int>& current, const std::string& dst, uint32_t value) {
  if (current.empty()) return -1;
  for (uint32_t mask = 0; mask < loom::policy::kMaxQpSplit; mask = mask * 2 + 1) {
    if ((value & mask) != value) continue;
    if (auto it = current.find(PartKey(dst, mask, value)); it != current.end()) {
      return it->second;
    }
  }
  return -1;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

Placement::Placement(std::shared_ptr<const loom::topology::TopologyIndex> topo,
                     PlacementParams params)
    : topo_(std::move(topo)),
      params_(params),
      graph_(FabricGraph::Build(*topo_, {})),
      endpoints_(*topo_) {
  load_.assign(static_cast<size_t>(graph_.num_edges()), 0.0);
  IndexGraph();
  for (const auto& d : topo_->topology().devices()) {
    if ((d.role() == v1::DEVICE_ROLE_LEAF || d.role() == v1::DEVICE_ROLE_SPINE ||
         d.role() == v1::DEVICE_ROLE_SUPER_SPINE) &&
        switch_index_.emplace(d.id(), static_cast<int>(switches_.size())).second) {
      switches_.push_back(d.id());
    }
  }
  // Route budgets (2-tier): the index is built once a leaf is half-way to its
  // budget (Upsert) and kept with the jobs from then on, so neither every
  // registration pays for it on a fabric far from its budgets nor the first
  // leaf over its budget builds it for every job at once.
}

void Placement::IndexGraph() {
  top_by_name_.resize(static_cast<size_t>(graph_.num_tops()));
  for (int t = 0; t < graph_.num_tops(); ++t) top_by_name_[static_cast<size_t>(t)] = t;
  std::sort(top_by_name_.begin(), top_by_name_.end(),
            [&](int a, int b) { return graph_.top(a) < graph_.top(b); });
  leaf_routes_.resize(static_cast<size_t>(graph_.num_leaves()), 0);
  nic_leaf_.resize(static_cast<size_t>(endpoints_.num_nics()));
  for (int n = 0; n < endpoints_.num_nics(); ++n) {
    nic_leaf_[static_cast<size_t>(n)] = graph_.NicLeaf(endpoints_.nic_id(n));
  }
}

void Placement::SetPolicy(const v1::PolicySet& set) {
  policy_ = loom::policy::PolicyEngine(set);
  ++version_;
  MarkAllChanged();
  RecomputeDedication();
  for (auto& [id, rec] : jobs_) rec.decision = policy_.Evaluate(rec.job);
}

bool Placement::SetDownLinks(const std::set<std::string>& down) {
  if (down == down_) return false;
  down_ = down;
  graph_ = FabricGraph::Build(*topo_, down_);
  IndexGraph();
  const bool indexed = budget_index_.valid;
  budget_index_.valid = false;
  if (indexed && !graph_.three_tier()) BuildBudgetIndex();  // same units, new leaf indexes
  ++version_;
  MarkAllChanged();
  return true;
}

uint32_t Placement::ColorOf(const std::string& top) const {
  int t = graph_.TopIndex(top);
  return t < 0 ? 0 : kRouteColorBase + static_cast<uint32_t>(t);
}

std::vector<int> Placement::TopsOfColors(
    const google::protobuf::RepeatedField<uint32_t>& colors) const {
  std::set<int> tops;
  for (uint32_t c : colors) {
    for (const auto& def : policy_.set().colors()) {
      if (def.color() != c) continue;
      for (const auto& m : def.spines()) {
        auto gt = m.find('>');
        if (gt != std::string::npos) {
          int t = graph_.TopIndex(m.substr(gt + 1));
          if (t >= 0) tops.insert(t);
          continue;
        }
        int t = graph_.TopIndex(m);
        if (t >= 0) {
          tops.insert(t);
          continue;
        }
        // A pod spine in a 3-tier fabric stands for the super-spines of its plane.
        for (int li : topo_->LinksOf(m)) {
          const auto& l = topo_->topology().links(li);
          int up = graph_.TopIndex(l.a().device() == m ? l.b().device() : l.a().device());
          if (up >= 0) tops.insert(up);
        }
      }
    }
  }
  return {tops.begin(), tops.end()};
}

void Placement::RecomputeDedication() {
  dedicated_.clear();
  std::set<int> pinned;
  std::vector<std::string> floating;
  for (const auto& rule : policy_.set().rules()) {
    if (rule.action().isolation() != v1::ISOLATION_DEDICATED) continue;
    for (const auto& tenant : rule.match().tenants()) {
      if (rule.action().colors().empty()) {
        floating.push_back(tenant);
      } else {
        for (int t : TopsOfColors(rule.action().colors())) {
          dedicated_[tenant].insert(t);
          pinned.insert(t);
        }
      }
    }
  }
  std::sort(floating.begin(), floating.end());
  floating.erase(std::unique(floating.begin(), floating.end()), floating.end());
  std::vector<int> free;
  for (int t = 0; t < graph_.num_tops(); ++t) {
    if (!pinned.count(t)) free.push_back(t);
  }
  if (floating.empty() || free.empty()) return;
  // Equal shares; shared traffic keeps at least one top.
  size_t share = std::max<size_t>(1, (free.size() - 1) / floating.size());
  for (size_t i = 0; i < floating.size(); ++i) {
    for (size_t k = 0; k < share && i * share + k < free.size() - 1; ++k) {
      dedicated_[floating[i]].insert(free[i * share + k]);
    }
  }
}

std::vector<int> Placement::AllowedTops(const JobRec& rec) const {
  const auto& action = rec.decision.action;
  const std::string& tenant = rec.job.tenant();
  std::vector<int> allowed;
  if (auto it = dedicated_.find(tenant);
      it != dedicated_.end() && action.isolation() == v1::ISOLATION_DEDICATED) {
    allowed.assign(it->second.begin(), it->second.end());
  } else if (!action.colors().empty()) {
    allowed = TopsOfColors(action.colors());
  } else {
    for (int t = 0; t < graph_.num_tops(); ++t) allowed.push_back(t);
  }
  // Never cross another tenant's dedicated tops.
  std::vector<int> out;
  for (int t : allowed) {
    bool foreign = false;
    for (const auto& [other, tops] : dedicated_) {
      if (other != tenant && tops.count(t)) foreign = true;
    }
    if (!foreign) out.push_back(t);
  }
  return out;
}

std::string Placement::QpSplitBlocker() const {
  for (int l = 0; l < graph_.num_leaves(); ++l) {
    const DeviceLimits& lim = LimitsOf(limits_, graph_.leaf(l));
    if (!lim.qp_split_routes) {
      return graph_.leaf(l) + " cannot express routes split by destination QP (programmed by " +
             (lim.driver.empty() ? std::string("its driver") : lim.driver) + ")";
    }
  }
  return "";
}

void Placement::BuildUnits(JobRec& rec, const std::map<std::string, int>& current) const {
  rec.units.clear();
  // A measured matrix is placed NIC-bound: the NICs' measured send rates (the scale)
  // were what the fabric gave the job, and a matrix is measured exactly when the
  // fabric was not giving the job what it needed.
  const double scale = MeasuredDemand(rec.job.job_id()) ? 1.0 : DemandScale(rec.job.job_id());
  rec.modelled_scale = scale;
  rec.modelled_valid = false;  // ModelledNicRates computes it when asked
  // One unit per destination NIC (in id order) with the rates from each source leaf,
  // summed in source NIC id order; intra-leaf traffic has no fabric path.
  IndexedDemand d = JobDemandIndexed(rec.job, endpoints_, scale, MeasuredDemand(rec.job.job_id()));
  rec.demand_source = d.source;
  std::vector<int> leaf(d.nics.size());
  for (size_t k = 0; k < d.nics.size(); ++k) leaf[k] = nic_leaf_[static_cast<size_t>(d.nics[k])];
  std::vector<int> allowed = AllowedTops(rec);
  if (allowed.empty()) allowed = {-1};  // nothing allowed: no candidate matches
  bool all_tops = static_cast<int>(allowed.size()) == graph_.num_tops();
  for (size_t k = 0; all_tops && k < allowed.size(); ++k)
    all_tops = allowed[k] == static_cast<int>(k);
  std::vector<double> from_leaf(static_cast<size_t>(graph_.num_leaves()), 0.0);
  std::vector<int> touched;
  // QP split: `parts` units per destination, part k = destination QPs k modulo parts
  // (a value that is not a power of two up to kMaxQpSplit, which validation refuses,
  // counts as no split).
  uint32_t split = rec.decision.action.qp_split();
  bool auto_split = false;
  if (split == 0 && rec.job.qps_per_connection() > 1) {
    // The policy is silent: the job's own QP striping, up to the tops it may use.
    const uint32_t cap =
        std::min<uint32_t>({rec.job.qps_per_connection(), loom::policy::kMaxQpSplit,
                            static_cast<uint32_t>(std::max<size_t>(
                                1, all_tops ? graph_.num_tops() : allowed.size()))});
    split = 1;
    while (split * 2 <= cap) split *= 2;
    auto_split = split > 1;
  }
  uint32_t parts =
      split > 1 && split <= loom::policy::kMaxQpSplit && (split & (split - 1)) == 0 ? split : 1;
  rec.limits_note.clear();
  if (parts > 1) {
    // The split routes go on every leaf: one leaf that cannot carry them
    // means no split (the destination's traffic takes one color).
    if (std::string why = QpSplitBlocker(); !why.empty()) {
      rec.limits_note = "QP split " + std::to_string(parts) + " not applied: " + why;
      parts = 1;
    } else if (auto_split) {
      rec.limits_note = "QP split " + std::to_string(parts) + " from the job's " +
                        std::to_string(rec.job.qps_per_connection()) +
                        " QPs per connection (every leaf can route by destination QP)";
    }
  }
  rec.nic_leaves.clear();
  for (int l : leaf) {
    if (l >= 0) rec.nic_leaves.push_back(l);
  }
  std::sort(rec.nic_leaves.begin(), rec.nic_leaves.end());
  rec.nic_leaves.erase(std::unique(rec.nic_leaves.begin(), rec.nic_leaves.end()),
                       rec.nic_leaves.end());
  rec.spray_ok = rec.decision.action.spray_eligible();
  rec.spray_cost = 1.0;
  if (!rec.spray_ok && (!reorder_tolerant_.empty() || !selective_repeat_.empty()) &&
      !d.nics.empty()) {
    rec.spray_ok = true;
    bool any_sr = false;
    for (int n : d.nics) {
      const std::string& nic = endpoints_.nic_id(n);
      const bool sr = selective_repeat_.count(nic) > 0;
      any_sr |= sr;
      rec.spray_ok &= sr || reorder_tolerant_.count(nic) > 0;
    }
    if (rec.spray_ok && any_sr) rec.spray_cost = kSelectiveRepeatSprayCost;
  }
  if (rec.decision.action.spray_eligible()) {
    std::vector<std::string> no_spray;
    for (int l = 0; l < graph_.num_leaves(); ++l) {
      if (!LimitsOf(limits_, graph_.leaf(l)).spray) no_spray.push_back(graph_.leaf(l));
    }
    if (!no_spray.empty()) {
      rec.limits_note += std::string(rec.limits_note.empty() ? "" : "; ") +
                         "no selective spraying on " + Join(no_spray) +
                         " (their southbound cannot express spray rules)";
    }
  }
  for (size_t i = 0; i < d.pairs.size();) {
    const uint32_t dst = d.pairs[i].dst;
    const int dst_leaf = leaf[dst];
    touched.clear();
    for (; i < d.pairs.size() && d.pairs[i].dst == dst; ++i) {
      const int src = leaf[d.pairs[i].src];
      if (src < 0 || dst_leaf < 0 || src == dst_leaf) continue;
      double& sum = from_leaf[static_cast<size_t>(src)];
      if (sum == 0.0 && std::find(touched.begin(), touched.end(), src) == touched.end()) {
        touched.push_back(src);
      }
      sum += d.pairs[i].rate_bps;
    }
    if (touched.empty()) continue;
    std::sort(touched.begin(), touched.end());
    Unit u;
    u.job_id = rec.job.job_id();
    u.dst_nic = endpoints_.nic_id(d.nics[dst]);
    u.dst_leaf = dst_leaf;
    u.sources.reserve(touched.size());
    for (int l : touched) {
      u.sources.emplace_back(l, from_leaf[static_cast<size_t>(l)] / parts);
      from_leaf[static_cast<size_t>(l)] = 0.0;
    }
    if (!all_tops) u.allowed = allowed;  // empty: every top, in index order
    for (uint32_t k = 0; k < parts; ++k) {
      Unit part = k + 1 < parts ? u : std::move(u);
      part.qp_mask = parts - 1;
      part.qp_value = k;
      part.current = CurrentTop(current, part.dst_nic, k);
      rec.units.push_back(std::move(part));
    }
  }
}

void Placement::AddLoad(const JobRec& rec, double sign) {
  std::vector<int> edges;
  for (size_t u = 0; u < rec.units.size(); ++u) {
    if (u >= rec.top.size() || rec.top[u] < 0) continue;
    for (const auto& [src, rate] : rec.units[u].sources) {
      if (graph_.PathEdges(src, rec.units[u].dst_leaf, rec.top[u], &edges)) {
        for (int e : edges) load_[static_cast<size_t>(e)] += sign * rate;
      }
    }
  }
}

void Placement::UpdateMax() {
  max_utilization_ = 0;
  for (int e = 0; e < graph_.num_edges(); ++e) {
    if (graph_.capacity(e) > 0) {
      max_utilization_ =
          std::max(max_utilization_, load_[static_cast<size_t>(e)] / graph_.capacity(e));
    }
  }
  UpdateSpraying();
}

void Placement::SetSelectiveRepeatNics(std::set<std::string> nics) {
  selective_repeat_ = std::move(nics);
  ++version_;
  MarkAllChanged();
}

void Placement::SetReorderTolerantNics(std::set<std::string> nics) {
  reorder_tolerant_ = std::move(nics);
  ++version_;
  MarkAllChanged();
}

namespace {
// Endpoints, pattern and stated matrix: what a measurement or confirmation was about.
bool SameDemandInputs(const v1::Job& a, const v1::Job& b) {
  if (a.collective() != b.collective() || a.traffic_size() != b.traffic_size() ||
      !std::equal(a.endpoints().begin(), a.endpoints().end(), b.endpoints().begin(),
                  b.endpoints().end())) {
    return false;
  }
  for (int i = 0; i < a.traffic_size(); ++i) {
    const auto& x = a.traffic(i);
    const auto& y = b.traffic(i);
    if (x.src() != y.src() || x.dst() != y.dst() || x.weight() != y.weight()) return false;
  }
  return true;
}
// Routes a job whose pairing is a guess may add on its leaves beyond its predicted
// sources (BuildRouteTable).
constexpr size_t kFootprintRoutes = 16384;
// Spraying must lower the overloaded link's predicted utilization by this much.
constexpr double kSprayGain = 0.05;
// A job whose pairing is a guess is sprayed only where spraying costs its NICs less than
// this factor: whole flows pinned on a wrong guess meet at random (8 flows over 8
// uplinks load the busiest with 2-3 of them: 2-3x), selective repeat costs ~1.3x.
constexpr double kUnknownPairingMaxSprayCost = 1.5;
}  // namespace

// Why a job may be sprayed (for its reason).
std::string Placement::SprayWhy(const JobRec& rec) {
  if (rec.decision.action.spray_eligible()) return "the policy allows spraying";
  if (rec.spray_cost > 1.0) {
    return "the job's NICs keep out-of-order packets (selective repeat or out-of-order "
           "placement, inventory); the resends selective repeat pays are counted: its "
           "sprayed prediction is taken " +
           [&] {
             char buf[32];
             std::snprintf(buf, sizeof(buf), "%.2f", rec.spray_cost);
             return std::string(buf);
           }() +
           "x longer";
  }
  return "every NIC of the job tolerates reordering (inventory)";
}

void Placement::TrackSpraying(const std::string& id, JobRec& rec) {
  if (rec.spray_ok) {
    spray_ok_jobs_.insert(id);
    return;
  }
  // Never sprayed: its flags stay all zero (UpdateSpraying looks at spray_ok jobs only).
  spray_ok_jobs_.erase(id);
  rec.sprayed.assign(rec.units.size(), 0);
  rec.spray_note.clear();
}

void Placement::UpdateSpraying(bool every_job) {
  // Only jobs that may be sprayed can have sprayed units: the others' flags are kept
  // all zero when their units are built (TrackSpraying), so they are not visited.
  // `every_job` visits every job anyway (the reference the tests compare against).
  std::vector<std::pair<const std::string*, JobRec*>> sprayable;
  if (every_job) {
    sprayable.reserve(jobs_.size());
    for (auto& [id, rec] : jobs_) sprayable.emplace_back(&id, &rec);
  } else {
    sprayable.reserve(spray_ok_jobs_.size());
    for (const auto& id : spray_ok_jobs_) {
      auto it = jobs_.find(id);
      if (it != jobs_.end()) sprayable.emplace_back(&it->first, &it->second);
    }
  }
  // Their routes leave the budget index while their flags change, and come back after.
  for (auto& [idp, recp] : sprayable) IndexRoutes(*recp, -1);
  struct Reindex {
    const Placement* p;
    const std::vector<std::pair<const std::string*, JobRec*>>* jobs;
    ~Reindex() {
      for (auto& [idp, recp] : *jobs) p->IndexRoutes(*recp, +1);
    }
  } reindex{this, &sprayable};
  bool any = false;
  for (auto& [idp, recp] : sprayable) {
    JobRec& rec = *recp;
    any |= std::any_of(rec.sprayed.begin(), rec.sprayed.end(), [](char c) { return c != 0; });
    rec.sprayed.assign(rec.units.size(), 0);
    rec.spray_note.clear();
  }
  if (any) {
    ++version_;
    MarkAllChanged();
  }
  if (graph_.three_tier()) return;
  // Not known yet where the job's bytes go (the pattern's prior, not yet confirmed
  // by measurement): spraying fits any matrix, pinning only the right one.
  for (auto& [idp, recp] : sprayable) {
    const std::string& id = *idp;
    JobRec& rec = *recp;
    if (!rec.spray_ok || rec.demand_source != DemandSource::kPattern || confirmed_.count(id) ||
        !PairingUnknown(rec.job.collective()) || rec.spray_cost > kUnknownPairingMaxSprayCost) {
      continue;
    }
    size_t count = 0;
    for (size_t u = 0; u < rec.units.size() && u < rec.top.size(); ++u) {
      const Unit& unit = rec.units[u];
      if (rec.top[u] < 0 || unit.qp_mask != 0) continue;
      bool spray = true;
      for (const auto& [src, rate] : unit.sources) {
        if (src >= 0 && src != unit.dst_leaf) spray &= LimitsOf(limits_, graph_.leaf(src)).spray;
      }
      if (!spray) continue;
      rec.sprayed[u] = 1;
      ++count;
    }
    if (count == 0) continue;
    ++version_;
    MarkAllChanged();
    rec.spray_note = std::to_string(count) +
                     " destination(s) sprayed per packet: the job's pattern does not fix who "
                     "sends to whom, so its pairs are a guess until measured or stated, and "
                     "spraying fits any traffic matrix; " +
                     SprayWhy(rec);
  }
  if (max_utilization_ <= 1.0 + 1e-9 || sprayable.empty()) return;
  // Where pinning cannot fit: a leaf with a link predicted over capacity. For each job
  // that may be sprayed and each such leaf, spraying the job's units that leave (enter)
  // that leaf spreads them over the leaf's live uplinks (downlinks). The predicted
  // completion time of a job is taken as the busiest link its traffic crosses (fluid,
  // fair share); the job's units there are sprayed when that lowers the summed
  // predictions of the job and of every job sharing a link with the change by more
  // than kSprayGain. Greedy in job id order, each accepted change seen by the next.
  const int leaves = graph_.num_leaves(), tops = graph_.num_tops();
  std::vector<double> eff = load_;
  auto util = [&](int e, const std::vector<double>& l) {
    return e < 0 || graph_.capacity(e) <= 0 ? 0.0 : l[static_cast<size_t>(e)] / graph_.capacity(e);
  };
  std::vector<char> over_up(static_cast<size_t>(leaves), 0), over_down(over_up);
  for (int l = 0; l < leaves; ++l) {
    for (int t = 0; t < tops; ++t) {
      if (util(graph_.UpEdge(l, t), load_) > 1.0 + 1e-9) over_up[static_cast<size_t>(l)] = 1;
      if (util(graph_.DownEdge(l, t), load_) > 1.0 + 1e-9) over_down[static_cast<size_t>(l)] = 1;
    }
  }
  // Edges a unit's traffic from `src` crosses: pinned on `top`, or sprayed (an even
  // share over every top both src's uplink and the destination's downlink are live on).
  auto add_unit = [&](const Unit& u, int src, double rate, bool sprayed, int top,
                      std::map<int, double>* out) {
    if (src < 0 || src == u.dst_leaf) return;
    if (!sprayed) {
      (*out)[graph_.UpEdge(src, top)] += rate;
      (*out)[graph_.DownEdge(u.dst_leaf, top)] += rate;
      return;
    }
    std::vector<int> via;
    for (int t = 0; t < tops; ++t) {
      if (graph_.UpEdge(src, t) >= 0 && graph_.DownEdge(u.dst_leaf, t) >= 0) via.push_back(t);
    }
    for (int t : via) {
      (*out)[graph_.UpEdge(src, t)] += rate / static_cast<double>(via.size());
      (*out)[graph_.DownEdge(u.dst_leaf, t)] += rate / static_cast<double>(via.size());
    }
  };
  // A job's edges as placed now (sprayed units spread).
  auto job_edges = [&](const JobRec& rec, std::map<int, double>* out) {
    for (size_t u = 0; u < rec.units.size() && u < rec.top.size(); ++u) {
      if (rec.top[u] < 0) continue;
      for (const auto& [src, rate] : rec.units[u].sources) {
        add_unit(rec.units[u], src, rate, rec.sprayed[u] != 0, rec.top[u], out);
      }
    }
  };
  auto predicted = [&](const std::map<int, double>& edges, const std::vector<double>& l) {
    double t = 0;
    for (const auto& [e, rate] : edges) {
      if (e >= 0 && rate > 0) t = std::max(t, util(e, l));
    }
    return t;
  };
  for (auto& [idp, recp] : sprayable) {
    JobRec& rec = *recp;
    if (!rec.spray_ok || !rec.spray_note.empty()) continue;
    size_t count = 0;
    double worst_before = 0, worst_after = 0;
    for (int l = 0; l < leaves; ++l) {
      const bool up = over_up[static_cast<size_t>(l)], down = over_down[static_cast<size_t>(l)];
      if (!up && !down) continue;
      // The job's pinned units leaving / entering l.
      std::vector<size_t> cand;
      for (size_t u = 0; u < rec.units.size() && u < rec.top.size(); ++u) {
        const Unit& unit = rec.units[u];
        if (rec.top[u] < 0 || rec.sprayed[u] || unit.qp_mask != 0) continue;
        bool touches = down && unit.dst_leaf == l, spray = true;
        for (const auto& [src, rate] : unit.sources) {
          touches |= up && src == l;
          if (src >= 0 && src != unit.dst_leaf) spray &= LimitsOf(limits_, graph_.leaf(src)).spray;
        }
        if (touches && spray) cand.push_back(u);
      }
      if (cand.empty()) continue;
      std::map<int, double> before_j, delta;
      job_edges(rec, &before_j);
      for (size_t u : cand) {
        std::map<int, double> pin, spr;
        for (const auto& [src, rate] : rec.units[u].sources) {
          add_unit(rec.units[u], src, rate, false, rec.top[u], &pin);
          add_unit(rec.units[u], src, rate, true, rec.top[u], &spr);
        }
        for (const auto& [e, r] : pin) delta[e] -= r;
        for (const auto& [e, r] : spr) delta[e] += r;
      }
      std::vector<double> after = eff;
      for (const auto& [e, r] : delta) {
        if (e >= 0) after[static_cast<size_t>(e)] += r;
      }
      for (size_t u : cand) rec.sprayed[u] = 1;
      std::map<int, double> after_j;
      job_edges(rec, &after_j);
      for (size_t u : cand) rec.sprayed[u] = 0;
      // Selective-repeat NICs pay for the reordering: the job's sprayed prediction is
      // taken spray_cost times longer.
      double sum_before = predicted(before_j, eff),
             sum_after = predicted(after_j, after) * rec.spray_cost;
      const double j_before = sum_before, j_after = sum_after;
      for (const auto& [oid, other] : jobs_) {
        if (&other == &rec) continue;
        std::map<int, double> oe;
        job_edges(other, &oe);
        bool shares = false;
        for (const auto& [e, r] : delta) shares |= e >= 0 && r != 0 && oe.count(e) > 0;
        if (!shares) continue;
        sum_before += predicted(oe, eff);
        sum_after += predicted(oe, after);
      }
      if (sum_after >= sum_before * (1.0 - kSprayGain)) continue;
      for (size_t u : cand) rec.sprayed[u] = 1;
      eff = std::move(after);
      count += cand.size();
      worst_before = std::max(worst_before, j_before);
      worst_after = std::max(worst_after, j_after);
    }
    if (count == 0) continue;
    ++version_;
    MarkAllChanged();
    rec.spray_note =
        std::to_string(count) +
        " destination(s) sprayed per packet at their source leaves: pinning whole "
        "flows cannot fit there (the job's busiest link predicted at " +
        Percent(worst_before) + " pinned, " + Percent(worst_after) +
        " sprayed; the summed prediction of the job and of the jobs it shares links with "
        "drops by more than 5 %); " +
        SprayWhy(rec);
  }
}

std::string Placement::CheckIncrementalState() const {
  Placement full = *this;
  full.UpdateSpraying(/*every_job=*/true);
  for (const auto& [id, rec] : jobs_) {
    const JobRec& ref = full.jobs_.at(id);
    if (rec.sprayed != ref.sprayed) return "job " + id + ": sprayed units differ";
    if (rec.spray_note != ref.spray_note) {
      return "job " + id + ": spray note \"" + rec.spray_note + "\" vs \"" + ref.spray_note + "\"";
    }
    if ((spray_ok_jobs_.count(id) > 0) != rec.spray_ok) {
      return "job " + id + ": spray_ok not tracked";
    }
  }
  if (spray_ok_jobs_.size() > jobs_.size()) return "spray_ok_jobs_ names removed jobs";
  if (!graph_.three_tier()) {
    // The budget index, kept up to date, holds what one built afresh holds, and the
    // notes it gives are the whole table's.
    const bool was_valid = budget_index_.valid;
    Placement fresh = *this;  // no index, no table
    fresh.BuildBudgetIndex();
    fresh.BuildRouteTable();
    if (was_valid) {
      for (size_t l = 0; l < fresh.budget_index_.per_leaf.size(); ++l) {
        const auto& mine = budget_index_.per_leaf[l];
        const auto& ref = fresh.budget_index_.per_leaf[l];
        bool same = mine.size() == ref.size();
        for (auto a = mine.begin(), b = ref.begin(); same && a != mine.end(); ++a, ++b) {
          same = a->neg_rate == b->neg_rate && a->unit == b->unit &&
                 a->rec->job.job_id() == b->rec->job.job_id();
        }
        if (!same) return "budget index of leaf " + graph_.leaf(static_cast<int>(l)) + " differs";
      }
    }
    for (const auto& [id, rec] : jobs_) {
      auto it = fresh.table_.budget_note.find(id);
      const std::string want = it == fresh.table_.budget_note.end() ? "" : it->second;
      if (std::string got = IndexedBudgetNote(rec); got != want) {
        return "job " + id + ": budget note \"" + got + "\" vs the table's \"" + want + "\"";
      }
    }
  }
  return "";
}

v1::PathAssignment Placement::Upsert(const v1::Job& job) {
  std::map<std::string, int> current;
  if (auto it = jobs_.find(job.job_id()); it != jobs_.end()) {
    AddLoad(it->second, -1);
    CountRoutes(it->second, -1);
    IndexRoutes(it->second, -1);
    MarkChanged(it->second);
    for (size_t u = 0; u < it->second.units.size(); ++u) {
      const Unit& unit = it->second.units[u];
      current[PartKey(unit.dst_nic, unit.qp_mask, unit.qp_value)] = it->second.top[u];
    }
  } else {
    for (const auto& r : job.status().assignment().routes()) {
      current[PartKey(r.destination(), r.qp_mask(), r.qp_value())] = graph_.TopIndex(r.via());
    }
  }
  JobRec& rec = jobs_[job.job_id()];
  // A measurement of other endpoints or another stated matrix no longer applies.
  if (!rec.job.job_id().empty() && !SameDemandInputs(rec.job, job)) {
    measured_.erase(job.job_id());
    confirmed_.erase(job.job_id());
  }
  rec.job = job;
  rec.id_prefix = 0;
  for (size_t i = 0; i < 8; ++i) {
    const unsigned char c =
        i < job.job_id().size() ? static_cast<unsigned char>(job.job_id()[i]) : 0;
    rec.id_prefix = rec.id_prefix << 8 | c;
  }
  rec.decision = policy_.Evaluate(job);
  BuildUnits(rec, current);
  TrackSpraying(job.job_id(), rec);
  PlacementResult r =
      Place(graph_, rec.units, params_, PlacementMode::kIncremental, &load_, &workspace_);
  rec.top = std::move(r.top);
  rec.backup = std::move(r.backup);
  rec.reason = std::move(r.reason);
  AddLoad(rec, +1);
  CountRoutes(rec, +1);
  ++version_;
  MarkChanged(rec);
  UpdateMax();
  // After spraying was decided (a no-op for what it added).
  if (!budget_index_.valid && !graph_.three_tier() && NearRouteBudget(rec)) {
    BuildBudgetIndex();  // every job, this one included
  } else {
    IndexRoutes(rec, +1);
  }
  v1::PathAssignment a = MakeAssignment(rec);
  last_key_[job.job_id()] = RouteKey(a);
  return a;
}

bool Placement::SetDemandScale(const std::string& job_id, double scale) {
  scale = std::clamp(scale, 0.01, 1.0);
  double old = DemandScale(job_id);
  if (std::abs(scale - old) <= 0.2 * old) return false;
  scale_[job_id] = scale;
  return true;
}

double Placement::DemandScale(const std::string& job_id) const {
  auto it = scale_.find(job_id);
  return it == scale_.end() ? 1.0 : it->second;
}

std::map<std::string, double> Placement::ModelledNicRates(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return {};
  const JobRec& rec = it->second;
  if (!rec.modelled_valid) {
    // From the demand the units were built with (same scale), undone.
    // Per source NIC, summed in destination NIC id order (the pairs' order).
    IndexedDemand d =
        JobDemandIndexed(rec.job, endpoints_, rec.modelled_scale, MeasuredDemand(job_id));
    rec.modelled.clear();
    for (const auto& p : d.pairs) {
      rec.modelled[endpoints_.nic_id(d.nics[p.src])] += p.rate_bps / rec.modelled_scale;
    }
    rec.modelled_valid = true;
  }
  return rec.modelled;
}

bool Placement::SetMeasuredDemand(const std::string& job_id, std::vector<NicDemand> pairs) {
  auto it = measured_.find(job_id);
  if (pairs.empty()) {
    if (it == measured_.end()) return false;
    measured_.erase(it);
    return true;
  }
  measured_[job_id] = std::move(pairs);
  return true;
}

const std::vector<NicDemand>* Placement::MeasuredDemand(const std::string& job_id) const {
  auto it = measured_.find(job_id);
  return it == measured_.end() ? nullptr : &it->second;
}

std::vector<NicDemand> Placement::DemandInUse(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return {};
  IndexedDemand d = JobDemandIndexed(it->second.job, endpoints_, 1.0, MeasuredDemand(job_id));
  std::vector<NicDemand> out;
  out.reserve(d.pairs.size());
  for (const auto& p : d.pairs) {
    out.push_back({endpoints_.nic_id(d.nics[p.src]), endpoints_.nic_id(d.nics[p.dst]), p.rate_bps});
  }
  return out;
}

bool Placement::SetDemandConfirmed(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || !confirmed_.insert(job_id).second) return false;
  const JobRec& rec = it->second;
  // Only a job sprayed for its unknown pairing changes (it is pinned from now on).
  if (!rec.spray_ok || rec.demand_source != DemandSource::kPattern ||
      !PairingUnknown(rec.job.collective())) {
    return false;
  }
  ++version_;
  MarkAllChanged();
  UpdateSpraying();
  return true;
}

void Placement::Remove(const std::string& job_id) {
  scale_.erase(job_id);
  measured_.erase(job_id);
  confirmed_.erase(job_id);
  last_key_.erase(job_id);
  spray_ok_jobs_.erase(job_id);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  AddLoad(it->second, -1);
  CountRoutes(it->second, -1);
  IndexRoutes(it->second, -1);
  MarkChanged(it->second);
  jobs_.erase(it);
  ++version_;
  UpdateMax();
}

void Placement::RestoreLoad(std::vector<double> load) {
  if (load.size() != load_.size()) return;  // the graph changed meanwhile
  load_ = std::move(load);
  ++version_;
  MarkAllChanged();
  UpdateMax();
}

std::map<std::string, v1::PathAssignment> Placement::Recompute(PlacementMode mode) {
  // Rebuild units (allowed tops may have changed with policy or failures),
  // keeping current tops as the starting point.
  std::vector<Unit> all;
  std::vector<std::pair<JobRec*, size_t>> owner;
  std::map<std::string, std::string> before;
  ++version_;
  MarkAllChanged();
  // Every unit is rebuilt, but most jobs keep their routes: the budget index (when
  // built) follows only the jobs whose routes differ, each job's entries before
  // compared with after. It is left alone meanwhile.
  const bool keep_index = budget_index_.valid && !graph_.three_tier();
  budget_index_.valid = false;
  std::vector<std::vector<std::pair<int, BudgetKey>>> index_before;
  if (keep_index) {
    index_before.reserve(jobs_.size());
    for (const auto& [id, rec] : jobs_) {
      auto& v = index_before.emplace_back();
      ForEachLeafRoute(rec, [&](int l, const BudgetKey& k) { v.emplace_back(l, k); });
    }
  }
  for (auto& [id, rec] : jobs_) {
    std::map<std::string, int> current;
    for (size_t u = 0; u < rec.units.size() && u < rec.top.size(); ++u) {
      const Unit& unit = rec.units[u];
      current[PartKey(unit.dst_nic, unit.qp_mask, unit.qp_value)] = rec.top[u];
    }
    // What the caller last got (spraying may have changed since, with other jobs).
    auto lk = last_key_.find(id);
    before[id] = lk != last_key_.end() ? lk->second : RouteKeyOf(rec);
    rec.decision = policy_.Evaluate(rec.job);
    BuildUnits(rec, current);
    TrackSpraying(id, rec);
    // Lent to the path engine, given back below.
    for (size_t u = 0; u < rec.units.size(); ++u) {
      all.push_back(std::move(rec.units[u]));
      owner.emplace_back(&rec, u);
    }
  }
  PlacementResult r = Place(graph_, all, params_, mode, nullptr, &workspace_);
  for (auto& [id, rec] : jobs_) {
    rec.top.assign(rec.units.size(), -1);
    rec.backup.assign(rec.units.size(), -1);
    rec.reason.assign(rec.units.size(), "");
  }
  for (size_t i = 0; i < all.size(); ++i) {
    auto [rec, u] = owner[i];
    rec->units[u] = std::move(all[i]);
    rec->top[u] = r.top[i];
    rec->backup[u] = r.backup[i];
    rec->reason[u] = std::move(r.reason[i]);
  }
  load_ = std::move(r.edge_load);
  leaf_routes_.assign(static_cast<size_t>(graph_.num_leaves()), 0);
  for (const auto& [id, rec] : jobs_) CountRoutes(rec, +1);
  ++version_;
  UpdateMax();
  if (keep_index) {
    budget_index_.valid = true;
    std::vector<std::pair<int, BudgetKey>> now;
    size_t i = 0;
    for (const auto& [id, rec] : jobs_) {
      const auto& was = index_before[i++];
      now.clear();
      ForEachLeafRoute(rec, [&](int l, const BudgetKey& k) { now.emplace_back(l, k); });
      const bool same = std::equal(
          was.begin(), was.end(), now.begin(), now.end(), [](const auto& a, const auto& b) {
            return a.first == b.first && a.second.neg_rate == b.second.neg_rate &&
                   a.second.unit == b.second.unit;
          });
      if (same) continue;
      for (const auto& [l, k] : was) budget_index_.per_leaf[static_cast<size_t>(l)].erase(k);
      for (const auto& [l, k] : now) budget_index_.per_leaf[static_cast<size_t>(l)].insert(k);
    }
  }
  std::map<std::string, v1::PathAssignment> changed;
  for (auto& [id, rec] : jobs_) {
    std::string key = RouteKeyOf(rec);
    if (key != before[id]) changed[id] = MakeAssignment(rec);
    last_key_[id] = std::move(key);
  }
  return changed;
}

std::map<std::string, v1::PathAssignment> Placement::Rebalance(size_t max_jobs, Undo* undo) {
  *undo = Undo();
  undo->valid = true;
  undo->load = load_;
  auto save = [&](const std::string& id, const JobRec* rec) {
    if (rec && !undo->jobs.count(id)) undo->jobs.emplace(id, *rec);
    if (!undo->last_key.count(id)) {
      auto lk = last_key_.find(id);
      undo->last_key[id] = lk == last_key_.end() ? std::string() : lk->second;
    }
  };
  if (jobs_.size() <= max_jobs) {
    // Few jobs: the full re-placement moves at most that many.
    for (const auto& [id, rec] : jobs_) save(id, &rec);
    return Recompute(PlacementMode::kFull);
  }
  // Every placed unit, lent to the path engine from its current top and given back.
  std::vector<Unit> all;
  std::vector<std::pair<JobRec*, size_t>> owner;
  std::vector<uint32_t> group;
  std::vector<std::pair<const std::string*, JobRec*>> recs;
  recs.reserve(jobs_.size());
  for (auto& [id, rec] : jobs_) {
    const uint32_t j = static_cast<uint32_t>(recs.size());
    recs.emplace_back(&id, &rec);
    for (size_t u = 0; u < rec.units.size(); ++u) {
      Unit& unit = rec.units[u];
      unit.current = u < rec.top.size() ? rec.top[u] : -1;
      unit.pinned = false;
      all.push_back(std::move(unit));
      owner.emplace_back(&rec, u);
      group.push_back(j);
    }
  }
  PlacementResult r = loom::te::Rebalance(graph_, all, group, max_jobs, params_, &workspace_);
  std::vector<char> moved(recs.size(), 0);
  for (size_t i = 0; i < all.size(); ++i) {
    auto [rec, u] = owner[i];
    if (r.top[i] != all[i].current) moved[group[i]] = 1;
    rec->units[u] = std::move(all[i]);
  }
  // The moved jobs: saved, then given their new tops (route counts and the budget
  // index follow them).
  std::vector<size_t> moved_jobs;
  for (size_t j = 0; j < recs.size(); ++j) {
    if (!moved[j]) continue;
    moved_jobs.push_back(j);
    JobRec& rec = *recs[j].second;
    save(*recs[j].first, &rec);
    CountRoutes(rec, -1);
    IndexRoutes(rec, -1);
    MarkChanged(rec);
  }
  for (size_t i = 0; i < owner.size(); ++i) {
    if (!moved[group[i]]) continue;
    auto [rec, u] = owner[i];
    if (r.top[i] == rec->top[u]) continue;
    rec->top[u] = r.top[i];
    if (u < rec->backup.size()) rec->backup[u] = r.backup[i];
    if (u < rec->reason.size()) rec->reason[u] = std::move(r.reason[i]);
  }
  for (size_t j : moved_jobs) {
    JobRec& rec = *recs[j].second;
    CountRoutes(rec, +1);
    IndexRoutes(rec, +1);
    MarkChanged(rec);
  }
  // Jobs that may be sprayed can change with the load (UpdateSpraying).
  for (const auto& id : spray_ok_jobs_) save(id, nullptr);
  for (size_t j : moved_jobs) save(*recs[j].first, nullptr);
  if (!moved_jobs.empty()) {
    load_ = std::move(r.edge_load);
    ++version_;
    UpdateMax();
  }
  std::map<std::string, v1::PathAssignment> changed;
  for (const auto& [id, was] : undo->last_key) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    std::string key = RouteKeyOf(it->second);
    if (key == was) continue;
    changed[id] = MakeAssignment(it->second);
    last_key_[id] = std::move(key);
  }
  // Spray-eligible jobs whose flags UpdateSpraying changed are restored by it on RollBack
  // (their records are saved only when they moved).
  return changed;
}

void Placement::RollBack(Undo&& undo) {
  if (!undo.valid) return;
  for (auto& [id, saved] : undo.jobs) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    JobRec& rec = it->second;
    CountRoutes(rec, -1);
    IndexRoutes(rec, -1);
    MarkChanged(rec);
    rec = std::move(saved);
    TrackSpraying(id, rec);
    CountRoutes(rec, +1);
    IndexRoutes(rec, +1);
    MarkChanged(rec);
  }
  for (auto& [id, key] : undo.last_key) {
    if (!jobs_.count(id)) continue;
    if (key.empty()) {
      last_key_.erase(id);
    } else {
      last_key_[id] = std::move(key);
    }
  }
  if (undo.load.size() == load_.size()) load_ = std::move(undo.load);
  undo.valid = false;
  ++version_;
  UpdateMax();
}

void Placement::MarkChanged(const JobRec& rec) {
  if (changed_all_) return;
  // Spray rules list jobs on every leaf, and pod spines carry routes: every switch.
  if (graph_.three_tier() || rec.spray_ok || rec.decision.action.spray_eligible()) {
    changed_all_ = true;
    return;
  }
  if (changed_.size() != switches_.size()) changed_.assign(switches_.size(), 0);
  for (int l : rec.nic_leaves) {
    auto it = switch_index_.find(graph_.leaf(l));
    if (it != switch_index_.end()) changed_[static_cast<size_t>(it->second)] = 1;
  }
}

std::set<std::string> Placement::TakeChangedDevices() {
  std::set<std::string> out;
  for (size_t s = 0; s < switches_.size(); ++s) {
    if (changed_all_ || (s < changed_.size() && changed_[s])) out.insert(switches_[s]);
  }
  changed_all_ = false;
  changed_.assign(switches_.size(), 0);
  return out;
}

std::string Placement::RouteKeyOf(const JobRec& rec) const {
  // RouteKey(MakeAssignment(rec)) without the assignment.
  std::string key;
  for (size_t u = 0; u < rec.units.size(); ++u) {
    const Unit& unit = rec.units[u];
    const int t = u < rec.top.size() ? rec.top[u] : -1;
    const int b = u < rec.backup.size() ? rec.backup[u] : -1;
    key += PartKey(unit.dst_nic, unit.qp_mask, unit.qp_value);
    key += '>';
    if (t >= 0) key += graph_.top(t);
    key += '|';
    if (t >= 0 && b >= 0) key += graph_.top(b);
    if (t >= 0 && u < rec.sprayed.size() && rec.sprayed[u]) {
      for (const auto& [src, rate] : unit.sources) {
        (void)rate;
        if (src >= 0 && src != unit.dst_leaf) {
          key += '~';
          key += graph_.leaf(src);
        }
      }
    }
    key += ';';
  }
  return key;
}

std::string Placement::RouteKey(const v1::PathAssignment& a) {
  std::string key;
  for (const auto& r : a.routes()) {
    key +=
        PartKey(r.destination(), r.qp_mask(), r.qp_value()) + ">" + r.via() + "|" + r.backup_via();
    for (const auto& l : r.sprayed_at()) key += "~" + l;
    key += ";";
  }
  return key;
}

v1::PathAssignment Placement::AssignmentOf(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? v1::PathAssignment() : MakeAssignment(it->second);
}

v1::PathAssignment Placement::MakeAssignment(const JobRec& rec) const {
  v1::PathAssignment a;
  // Routes per top (primary, backup), reported in top name order.
  std::vector<int> uses(static_cast<size_t>(graph_.num_tops()), 0), backups(uses);
  double worst = 0;
  int unplaced = 0;
  std::vector<int> edges;
  for (size_t u = 0; u < rec.units.size(); ++u) {
    const Unit& unit = rec.units[u];
    auto* r = a.add_routes();
    r->set_destination(unit.dst_nic);
    r->set_qp_mask(unit.qp_mask);
    r->set_qp_value(unit.qp_value);
    r->set_reason(u < rec.reason.size() ? rec.reason[u] : "");
    int t = u < rec.top.size() ? rec.top[u] : -1;
    int b = u < rec.backup.size() ? rec.backup[u] : -1;
    if (t < 0) {
      ++unplaced;
      continue;
    }
    r->set_via(graph_.top(t));
    r->set_color(kRouteColorBase + static_cast<uint32_t>(t));
    uses[static_cast<size_t>(t)]++;
    if (b >= 0) {
      r->set_backup_via(graph_.top(b));
      r->set_backup_color(kRouteColorBase + static_cast<uint32_t>(b));
      backups[static_cast<size_t>(b)]++;
    }
    if (u < rec.sprayed.size() && rec.sprayed[u]) {
      for (const auto& [src, rate] : unit.sources) {
        (void)rate;
        if (src >= 0 && src != unit.dst_leaf) r->add_sprayed_at(graph_.leaf(src));
      }
    }
    for (const auto& [src, rate] : unit.sources) {
      (void)rate;
      if (!graph_.PathEdges(src, unit.dst_leaf, t, &edges)) continue;
      for (int e : edges) {
        if (graph_.capacity(e) > 0) {
          worst = std::max(worst, load_[static_cast<size_t>(e)] / graph_.capacity(e));
        }
      }
    }
  }
  std::vector<std::string> spines;
  std::string most, most_backup;
  int most_n = 0, most_backup_n = 0;
  for (int t : top_by_name_) {
    const int n = uses[static_cast<size_t>(t)], nb = backups[static_cast<size_t>(t)];
    if (n > 0) {
      spines.push_back(graph_.top(t));
      a.add_primary_spines(graph_.top(t));
      if (n > most_n) {
        most = graph_.top(t);
        most_n = n;
      }
    }
    if (nb > 0) {
      a.add_backup_spines(graph_.top(t));
      if (nb > most_backup_n) {
        most_backup = graph_.top(t);
        most_backup_n = nb;
      }
    }
  }
  const auto& action = rec.decision.action;
  if (!action.colors().empty()) {
    a.set_primary_color(action.colors(0));
  } else if (!most.empty()) {
    a.set_primary_color(ColorOf(most));
  }
  if (action.backup_color() != 0) {
    a.set_backup_color(action.backup_color());
  } else if (!most_backup.empty()) {
    a.set_backup_color(ColorOf(most_backup));
  }
  a.set_policy_rule(rec.decision.rule_name);
  a.set_predicted_max_utilization(worst);
  std::string reason = "policy " + rec.decision.rule_name;
  if (action.isolation() == v1::ISOLATION_DEDICATED) reason += " (dedicated spines)";
  if (rec.units.empty()) {
    reason += "; the job's traffic stays within its leaves (no spine path needed)";
  } else {
    const uint32_t parts = rec.units.front().qp_mask + 1;
    reason +=
        "; " + std::to_string(rec.units.size() - static_cast<size_t>(unplaced)) + " of " +
        std::to_string(rec.units.size()) +
        (parts > 1
             ? " destination part(s) (" + std::to_string(rec.units.size() / parts) +
                   " destination(s) split by destination QP modulo " + std::to_string(parts) + ")"
             : std::string(" destination(s)")) +
        " pinned over " + Join(spines) + "; predicted busiest link of the job at " + Percent(worst);
    if (unplaced > 0) {
      reason += "; " + std::to_string(unplaced) +
                (parts > 1 ? " destination part(s)" : std::string(" destination(s)")) +
                " have no live path within the allowed spines";
    }
  }
  if (!rec.units.empty()) {
    switch (rec.demand_source) {
      case DemandSource::kMeasured:
        reason += "; demand: measured (per-destination NIC counters)";
        break;
      case DemandSource::kStated:
        reason += "; demand: the scheduler's traffic matrix (" +
                  std::to_string(rec.job.traffic_size()) + " entries)";
        break;
      case DemandSource::kPattern:
        reason += "; demand: the collective pattern's model";
        break;
    }
  }
  if (!rec.spray_note.empty()) reason += "; " + rec.spray_note;
  if (!rec.limits_note.empty()) reason += "; " + rec.limits_note;
  if (std::string note = BudgetNote(rec.job.job_id()); !note.empty()) reason += "; " + note;
  a.set_reason(reason);
  return a;
}

void Placement::CountRoutes(const JobRec& rec, int sign) {
  for (size_t u = 0; u < rec.units.size() && u < rec.top.size(); ++u) {
    if (rec.top[u] < 0) continue;
    for (const auto& [src, rate] : rec.units[u].sources) {
      (void)rate;
      if (src < 0 || src == rec.units[u].dst_leaf) continue;
      leaf_routes_[static_cast<size_t>(src)] += static_cast<uint32_t>(sign);
    }
  }
}

std::string Placement::BudgetNote(const std::string& job_id) const {
  if (table_.version != version_) {
    // Leaves are counted as units are placed: when none is above its budget,
    // nothing to say (a pod spine's budget is reported once the table is built).
    bool over = false;
    for (int l = 0; l < graph_.num_leaves() && !over; ++l) {
      const uint32_t budget = LimitsOf(limits_, graph_.leaf(l)).max_routes;
      over = budget > 0 && leaf_routes_[static_cast<size_t>(l)] > budget;
    }
    if (!over) return "";
    if (!graph_.three_tier()) {
      // The budget index answers for one job without building the whole table.
      auto it = jobs_.find(job_id);
      return it == jobs_.end() ? std::string() : IndexedBudgetNote(it->second);
    }
    BuildRouteTable();
  }
  auto it = table_.budget_note.find(job_id);
  return it == table_.budget_note.end() ? std::string() : it->second;
}

void Placement::BuildRouteTable() const {
  if (table_.version == version_) return;
  RouteTable t;
  t.version = version_;
  const size_t n = switches_.size();
  std::vector<int> leaf_switch(static_cast<size_t>(graph_.num_leaves()), -1);
  for (int l = 0; l < graph_.num_leaves(); ++l) {
    auto it = switch_index_.find(graph_.leaf(l));
    if (it != switch_index_.end()) leaf_switch[static_cast<size_t>(l)] = it->second;
  }
  auto switch_of = [&](const std::string& id) {
    auto it = switch_index_.find(id);
    return it == switch_index_.end() ? -1 : it->second;
  };
  // Color tables: on a leaf, color(t) -> first hop towards t; on a pod spine
  // (3-tier), color(t) -> t.
  t.colors.resize(n);
  std::vector<std::set<uint32_t>> spine_colors(graph_.three_tier() ? n : 0);
  for (int l = 0; l < graph_.num_leaves(); ++l) {
    const int ls = leaf_switch[static_cast<size_t>(l)];
    for (int top = 0; top < graph_.num_tops(); ++top) {
      std::string hop = graph_.FirstHop(l, top);
      if (hop.empty() || ls < 0) continue;
      const uint32_t color = kRouteColorBase + static_cast<uint32_t>(top);
      if (graph_.three_tier()) {
        const int hs = switch_of(hop);
        if (hs >= 0 && spine_colors[static_cast<size_t>(hs)].insert(color).second) {
          t.colors[static_cast<size_t>(hs)].emplace_back(color, graph_.top(top));
        }
      }
      t.colors[static_cast<size_t>(ls)].emplace_back(color, std::move(hop));
    }
  }
  // Routes per switch in (job id, unit) order, with the rate each carries there
  // (storage kept between builds: a build every push would otherwise allocate and
  // fault in the whole table again).
  auto& per = route_scratch_;
  per.resize(n);
  for (auto& v : per) v.clear();
  t.refs = std::move(table_.refs);
  t.refs.clear();
  t.spray_jobs.assign(n, {});
  std::set<std::pair<int, std::string>> spine_routes;  // (pod spine, destination part)
  for (const auto& [id, rec] : jobs_) {
    for (size_t u = 0; u < rec.units.size() && u < rec.top.size(); ++u) {
      const int top = rec.top[u];
      if (top < 0) continue;
      const Unit& unit = rec.units[u];
      if (u < rec.sprayed.size() && rec.sprayed[u]) {
        // No colored route: the leaf sprays the job's class over its live uplinks.
        for (const auto& [src, rate] : unit.sources) {
          (void)rate;
          if (src < 0 || src == unit.dst_leaf) continue;
          const int ls = leaf_switch[static_cast<size_t>(src)];
          if (ls < 0) continue;
          auto& v = t.spray_jobs[static_cast<size_t>(ls)];
          if (v.empty() || v.back() != &rec) v.push_back(&rec);
        }
        continue;
      }
      const RouteRef ref{&rec, static_cast<uint32_t>(u)};
      const bool footprint = !rec.spray_ok && rec.demand_source == DemandSource::kPattern &&
                             PairingUnknown(rec.job.collective()) &&
                             rec.units.size() * rec.nic_leaves.size() <= kFootprintRoutes;
      std::string dst_hop;
      if (graph_.three_tier()) dst_hop = graph_.FirstHop(unit.dst_leaf, top);
      // A job whose pairing is a guess (permutation, unspecified; not measured or
      // stated) gets the route on its other leaves too, carrying nothing predicted:
      // its real pairs still take the destination's color (destinations spread over
      // the tops) instead of hashing, until measurement shows them. First to go for a
      // route budget, and only for jobs of at most kFootprintRoutes such routes.
      // (A job that may be sprayed sprays what is not predicted instead: no route.)
      static const std::vector<int> kNoLeaves;
      for (int l : footprint ? rec.nic_leaves : kNoLeaves) {
        if (l == unit.dst_leaf) continue;
        bool source = false;
        for (const auto& [src, rate] : unit.sources) source |= src == l;
        const int ls = leaf_switch[static_cast<size_t>(l)];
        if (!source && ls >= 0) per[static_cast<size_t>(ls)].emplace_back(ref, 0.0);
      }
      for (const auto& [src, rate] : unit.sources) {
        if (src < 0 || src == unit.dst_leaf) continue;
        const int ls = leaf_switch[static_cast<size_t>(src)];
        if (ls >= 0) per[static_cast<size_t>(ls)].emplace_back(ref, rate);
        if (!graph_.three_tier()) continue;
        // Pod spines of other pods forward up on the route's color.
        std::string hop = graph_.FirstHop(src, top);
        if (hop.empty() || hop == dst_hop) continue;
        const int hs = switch_of(hop);
        if (hs >= 0 &&
            spine_routes.emplace(hs, PartKey(unit.dst_nic, unit.qp_mask, unit.qp_value)).second) {
          per[static_cast<size_t>(hs)].emplace_back(ref, rate);
        }
      }
    }
  }
  // Jobs that may be sprayed: their leaves spray their class (unpredicted traffic).
  for (const auto& [id, rec] : jobs_) {
    if (!rec.spray_ok) continue;
    for (int l : rec.nic_leaves) {
      const int ls = leaf_switch[static_cast<size_t>(l)];
      if (ls < 0) continue;
      auto& v = t.spray_jobs[static_cast<size_t>(ls)];
      if (std::find(v.begin(), v.end(), &rec) == v.end()) v.push_back(&rec);
    }
  }
  // Route budgets: keep the routes that carry the most traffic from the switch.
  std::map<std::string, std::map<std::string, size_t>> left_out;  // job -> switch -> routes
  t.begin.assign(n + 1, 0);
  for (size_t s = 0; s < n; ++s) {
    auto& v = per[s];
    const uint32_t budget = LimitsOf(limits_, switches_[s]).max_routes;
    if (budget > 0 && v.size() > budget) {
      ++t.over_budget;
      std::vector<uint32_t> order(v.size());
      for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(),
                       [&](uint32_t a, uint32_t b) { return v[a].second > v[b].second; });
      std::vector<char> keep(v.size(), 0);
      for (uint32_t i = 0; i < budget; ++i) keep[order[i]] = 1;
      size_t w = 0;
      for (size_t i = 0; i < v.size(); ++i) {
        if (keep[i]) {
          v[w++] = v[i];
        } else {
          ++t.dropped;
          left_out[v[i].first.rec->job.job_id()][switches_[s]]++;
        }
      }
      v.resize(w);
    }
    t.begin[s + 1] = t.begin[s] + static_cast<uint32_t>(v.size());
  }
  t.refs.reserve(t.begin[n]);
  for (auto& v : per) {
    for (const auto& [ref, rate] : v) t.refs.push_back(ref);
    v.clear();
  }
  for (const auto& [job, where] : left_out) t.budget_note[job] = FormatBudgetNote(where);
  table_ = std::move(t);
}

std::string Placement::FormatBudgetNote(const std::map<std::string, size_t>& where) const {
  if (where.empty()) return "";
  size_t total = 0;
  std::string devices;
  for (const auto& [sw, k] : where) {
    total += k;
    if (devices.size() < 200) {
      devices += (devices.empty() ? "" : ", ") + sw + " (budget " +
                 std::to_string(LimitsOf(limits_, sw).max_routes) + ")";
    } else if (devices.back() != '.') {
      devices += ", ...";
    }
  }
  return std::to_string(total) + " colored route(s) left out for route budgets on " +
         std::to_string(where.size()) + " switch(es): " + devices +
         "; that traffic takes the underlay's ECMP there";
}

template <typename F>
void Placement::ForEachLeafRoute(const JobRec& rec, F&& f) const {
  // BuildRouteTable's leaf routes (2-tier): per placed, pinned unit, a footprint
  // route (rate 0) on the job's other leaves when its pairing is a guess, and a
  // route with its rate on each source leaf.
  const bool footprint = !rec.spray_ok && rec.demand_source == DemandSource::kPattern &&
                         PairingUnknown(rec.job.collective()) &&
                         rec.units.size() * rec.nic_leaves.size() <= kFootprintRoutes;
  for (size_t u = 0; u < rec.units.size() && u < rec.top.size(); ++u) {
    if (rec.top[u] < 0 || (u < rec.sprayed.size() && rec.sprayed[u])) continue;
    const Unit& unit = rec.units[u];
    const uint32_t uu = static_cast<uint32_t>(u);
    if (footprint) {
      for (int l : rec.nic_leaves) {
        if (l == unit.dst_leaf) continue;
        bool source = false;
        for (const auto& [src, rate] : unit.sources) source |= src == l;
        if (!source) f(l, BudgetKey{-0.0, &rec, uu});
      }
    }
    for (const auto& [src, rate] : unit.sources) {
      if (src < 0 || src == unit.dst_leaf) continue;
      f(src, BudgetKey{-rate, &rec, uu});
    }
  }
}

void Placement::IndexRoutes(const JobRec& rec, int sign) const {
  if (!budget_index_.valid) return;
  ForEachLeafRoute(rec, [&](int l, const BudgetKey& k) {
    auto& tree = budget_index_.per_leaf[static_cast<size_t>(l)];
    if (sign > 0) {
      tree.insert(k);
    } else {
      tree.erase(k);
    }
  });
}

bool Placement::NearRouteBudget(const JobRec& rec) const {
  for (size_t u = 0; u < rec.units.size() && u < rec.top.size(); ++u) {
    if (rec.top[u] < 0) continue;
    for (const auto& [src, rate] : rec.units[u].sources) {
      (void)rate;
      if (src < 0 || src == rec.units[u].dst_leaf) continue;
      const uint32_t budget = LimitsOf(limits_, graph_.leaf(src)).max_routes;
      if (budget > 0 &&
          2 * static_cast<uint64_t>(leaf_routes_[static_cast<size_t>(src)]) > budget) {
        return true;
      }
    }
  }
  return false;
}

void Placement::BuildBudgetIndex() const {
  budget_index_.per_leaf.clear();
  budget_index_.per_leaf.resize(static_cast<size_t>(graph_.num_leaves()));
  budget_index_.valid = true;
  for (const auto& [id, rec] : jobs_) IndexRoutes(rec, +1);
}

std::string Placement::IndexedBudgetNote(const JobRec& rec) const {
  if (!budget_index_.valid) BuildBudgetIndex();
  std::map<std::string, size_t> where;
  ForEachLeafRoute(rec, [&](int l, const BudgetKey& k) {
    const std::string& sw = graph_.leaf(l);
    if (!switch_index_.count(sw)) return;
    const uint32_t budget = LimitsOf(limits_, sw).max_routes;
    const auto& tree = budget_index_.per_leaf[static_cast<size_t>(l)];
    if (budget == 0 || tree.size() <= budget) return;
    if (tree.order_of_key(k) >= budget) where[sw]++;
  });
  return FormatBudgetNote(where);
}

std::vector<std::string> Placement::DesiredDevices() const {
  std::vector<std::string> out;
  out.reserve(switch_index_.size());
  for (const auto& [id, s] : switch_index_) out.push_back(id);
  return out;
}

v1::DeviceState Placement::DesiredStateOf(const std::string& device) const {
  v1::DeviceState st;
  auto it = switch_index_.find(device);
  if (it == switch_index_.end()) return st;
  BuildRouteTable();
  const size_t s = static_cast<size_t>(it->second);
  st.set_device(device);
  for (const auto& [color, hop] : table_.colors[s]) {
    auto* c = st.add_colors();
    c->set_color(color);
    c->add_next_hops(hop);
  }
  st.mutable_routes()->Reserve(static_cast<int>(table_.begin[s + 1] - table_.begin[s]));
  for (uint32_t i = table_.begin[s]; i < table_.begin[s + 1]; ++i) {
    const JobRec& rec = *table_.refs[i].rec;
    const size_t u = table_.refs[i].unit;
    const Unit& unit = rec.units[u];
    auto* route = st.add_routes();
    route->set_destination(unit.dst_nic);
    route->set_color(kRouteColorBase + static_cast<uint32_t>(rec.top[u]));
    if (u < rec.backup.size() && rec.backup[u] >= 0) {
      route->set_backup_color(kRouteColorBase + static_cast<uint32_t>(rec.backup[u]));
    }
    route->set_job_id(rec.job.job_id());
    route->set_traffic_class(rec.job.traffic_class());
    route->set_qp_mask(unit.qp_mask);
    route->set_qp_value(unit.qp_value);
  }
  if (graph_.LeafIndex(device) >= 0 && LimitsOf(limits_, device).spray) {
    const auto& sprayed = table_.spray_jobs[s];
    for (const auto& [id, rec] : jobs_) {
      if (!rec.decision.action.spray_eligible() &&
          std::find(sprayed.begin(), sprayed.end(), &rec) == sprayed.end()) {
        continue;
      }
      auto* r = st.add_spray_rules();
      r->set_traffic_class(rec.job.traffic_class());
      if (rec.job.qp_ranges_size() == 1) {
        r->set_qp_first(rec.job.qp_ranges(0).first());
        r->set_qp_last(rec.job.qp_ranges(0).last());
      }
    }
  }
  return st;
}

std::map<std::string, v1::DeviceState> Placement::DesiredStates() const {
  std::map<std::string, v1::DeviceState> out;
  for (const auto& [id, s] : switch_index_) out.emplace_hint(out.end(), id, DesiredStateOf(id));
  return out;
}

Placement::RouteStats Placement::Routes() const {
  BuildRouteTable();
  RouteStats st;
  st.routes = table_.refs.size();
  st.dropped = table_.dropped;
  st.devices_over_budget = table_.over_budget;
  st.leaves = static_cast<size_t>(graph_.num_leaves());
  size_t on_leaves = 0;
  for (int l = 0; l < graph_.num_leaves(); ++l) {
    auto it = switch_index_.find(graph_.leaf(l));
    if (it == switch_index_.end()) continue;
    const size_t s = static_cast<size_t>(it->second);
    const size_t k = table_.begin[s + 1] - table_.begin[s];
    on_leaves += k;
    st.max_per_leaf = std::max(st.max_per_leaf, k);
    const uint32_t b = LimitsOf(limits_, graph_.leaf(l)).max_routes;
    if (b > 0 && (st.min_budget == 0 || b < st.min_budget)) st.min_budget = b;
  }
  st.mean_per_leaf = st.leaves ? static_cast<double>(on_leaves) / st.leaves : 0;
  st.table_bytes =
      table_.refs.capacity() * sizeof(RouteRef) + table_.begin.capacity() * sizeof(uint32_t);
  for (const auto& c : table_.colors) st.table_bytes += c.capacity() * 40;
  return st;
}

}  // namespace loom::te
