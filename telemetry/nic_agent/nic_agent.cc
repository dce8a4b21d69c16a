#include "telemetry/nic_agent/nic_agent.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <limits>
#include <utility>

#include "common/log.h"
#include "gnmi/gnmi.grpc.pb.h"
#include "telemetry/path.h"

namespace loom::telemetry {
namespace {

// The served leaves, in catalogue order; a leaf's index is its id.
struct LeafDef {
  NicLeaf::Container container;
  const char* name;   // Catalogue leaf name.
  const char* sysfs;  // File name (statistics/ or hw_counters/), "" for operstate.
};
constexpr LeafDef kLeaves[] = {
    {NicLeaf::kCounters, "in-octets", "rx_bytes"},
    {NicLeaf::kCounters, "out-octets", "tx_bytes"},
    {NicLeaf::kCounters, "in-pkts", "rx_packets"},
    {NicLeaf::kCounters, "out-pkts", "tx_packets"},
    {NicLeaf::kCounters, "in-discards", "rx_dropped"},
    {NicLeaf::kCounters, "out-discards", "tx_dropped"},
    {NicLeaf::kCounters, "in-errors", "rx_errors"},
    {NicLeaf::kCounters, "out-errors", "tx_errors"},
    {NicLeaf::kOperStatus, "oper-status", ""},
    {NicLeaf::kRoce, "np_ecn_marked_roce_packets", "np_ecn_marked_roce_packets"},
    {NicLeaf::kRoce, "np_cnp_sent", "np_cnp_sent"},
    {NicLeaf::kRoce, "rp_cnp_handled", "rp_cnp_handled"},
    {NicLeaf::kRoce, "rp_cnp_ignored", "rp_cnp_ignored"},
    {NicLeaf::kRoce, "out_of_sequence", "out_of_sequence"},
    {NicLeaf::kRoce, "packet_seq_err", "packet_seq_err"},
    {NicLeaf::kRoce, "local_ack_timeout_err", "local_ack_timeout_err"},
};
constexpr int kLeafCount = static_cast<int>(sizeof(kLeaves) / sizeof(kLeaves[0]));
static_assert(kLeafCount <= 32, "leaf masks are 32 bits");

int LeafId(NicLeaf::Container c, const std::string& name) {
  for (int i = 0; i < kLeafCount; ++i) {
    if (kLeaves[i].container == c && name == kLeaves[i].name) return i;
  }
  return -1;
}

constexpr TimeNs kDefaultSampleNs = 1 * kNsPerSec;
constexpr TimeNs kMinSampleNs = 100 * kNsPerMs;

TimeNs SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TimeNs WallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void AddElem(gnmi::Path* p, const char* name, const char* key = nullptr,
             const std::string& value = "") {
  gnmi::PathElem* e = p->add_elem();
  e->set_name(name);
  if (key != nullptr) (*e->mutable_key())[key] = value;
}

// The container path of a leaf (no target).
gnmi::Path ContainerPath(NicLeaf::Container c, const std::string& ifname) {
  gnmi::Path p;
  if (c == NicLeaf::kRoce) {
    p.set_origin("loom");
    AddElem(&p, "nic");
    AddElem(&p, "interfaces");
    AddElem(&p, "interface", "name", ifname);
    AddElem(&p, "roce");
    AddElem(&p, "state");
    return p;
  }
  AddElem(&p, "interfaces");
  AddElem(&p, "interface", "name", ifname);
  AddElem(&p, "state");
  if (c == NicLeaf::kCounters) AddElem(&p, "counters");
  return p;
}

gnmi::Path LeafPath(int id, const std::string& ifname) {
  gnmi::Path p = ContainerPath(kLeaves[id].container, ifname);
  AddElem(&p, kLeaves[id].name);
  return p;
}

// A leaf of the catalogue's per-destination NIC counters, which the agent
// accepts but cannot serve (sysfs has no per-destination counters).
gnmi::Path PeerLeafPath() {
  gnmi::Path p;
  p.set_origin("loom");
  AddElem(&p, "nic");
  AddElem(&p, "interfaces");
  AddElem(&p, "interface", "name", "x");
  AddElem(&p, "roce");
  AddElem(&p, "peers");
  AddElem(&p, "peer", "nic", "x");
  AddElem(&p, "state");
  AddElem(&p, "tx-octets");
  return p;
}

// A leaf of the catalogue's NIC PFC container, which the agent accepts but
// cannot serve.
gnmi::Path PfcLeafPath() {
  gnmi::Path p;
  p.set_origin("loom");
  AddElem(&p, "pfc");
  AddElem(&p, "interfaces");
  AddElem(&p, "interface", "name", "x");
  AddElem(&p, "priorities");
  AddElem(&p, "priority", "id", "0");
  AddElem(&p, "state");
  AddElem(&p, "rx-pkts");
  return p;
}

// `path` as a pattern that also matches everything below it.
gnmi::Path SubtreePattern(gnmi::Path path) {
  path.clear_target();
  path.add_elem()->set_name("...");
  return path;
}

// Leaves (bit per id) of an interface `ifname` that `pattern` covers.
uint32_t LeafMask(const gnmi::Path& pattern, const std::string& ifname) {
  uint32_t mask = 0;
  for (int id = 0; id < kLeafCount; ++id) {
    if (PathMatches(pattern, LeafPath(id, ifname))) mask |= 1u << id;
  }
  return mask;
}

std::string Trim(std::string s) {
  const char* ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

std::string LeafText(const NicLeaf& l) {
  return l.container == NicLeaf::kOperStatus ? l.text : std::to_string(l.counter);
}

grpc::Status ToGrpc(const Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), s.message());
}

}  // namespace

// ------------------------------------------------------------------ NicSpec

const std::vector<std::string>& RoceCounterNames() {
  static const std::vector<std::string>* names = [] {
    auto* v = new std::vector<std::string>;
    for (const LeafDef& d : kLeaves) {
      if (d.container == NicLeaf::kRoce) v->push_back(d.sysfs);
    }
    return v;
  }();
  return *names;
}

Status ParseNicSpec(std::string_view text, NicSpec* out) {
  const std::string usage = " (want DEVICE_ID=RDMADEV:PORT:NETDEV[:IFNAME])";
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    return InvalidArgument("--nic " + std::string(text) + ": missing '='" + usage);
  }
  NicSpec n;
  n.device_id = std::string(text.substr(0, eq));
  if (n.device_id.empty() || n.device_id == "*") {
    return InvalidArgument("--nic " + std::string(text) + ": empty or '*' DEVICE_ID" + usage);
  }
  std::vector<std::string> parts;
  std::string rest(text.substr(eq + 1));
  size_t start = 0;
  while (true) {
    const size_t colon = rest.find(':', start);
    parts.push_back(rest.substr(start, colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (parts.size() < 3 || parts.size() > 4) {
    return InvalidArgument("--nic " + std::string(text) + ": " + std::to_string(parts.size()) +
                           " ':'-separated fields" + usage);
  }
  for (const std::string& p : parts) {
    if (p.empty() || p.find('/') != std::string::npos || p == "." || p == "..") {
      return InvalidArgument("--nic " + std::string(text) + ": empty field or a field with '/'" +
                             usage);
    }
  }
  n.rdma_device = parts[0];
  char* end = nullptr;
  errno = 0;
  const long port = std::strtol(parts[1].c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || port < 1 || port > 255) {
    return InvalidArgument("--nic " + std::string(text) + ": PORT '" + parts[1] +
                           "' is not a port number (1..255)");
  }
  n.port = static_cast<int>(port);
  n.netdev = parts[2];
  n.ifname = parts.size() == 4 ? parts[3] : parts[2];
  *out = std::move(n);
  return Status::Ok();
}

// ------------------------------------------------------------------ SysfsNicReader

SysfsNicReader::SysfsNicReader(std::string sysfs_root, NicSpec nic)
    : root_(std::move(sysfs_root)), nic_(std::move(nic)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  roce_dir_ = root_ + "/class/infiniband/" + nic_.rdma_device + "/ports/" +
              std::to_string(nic_.port) + "/hw_counters/";
  net_dir_ = root_ + "/class/net/" + nic_.netdev + "/";
}

int SysfsNicReader::ReadFile(const std::string& path, std::string* out) {
  std::string reason;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return 0;
    reason = std::strerror(errno);
  } else {
    // sysfs attributes are one small page; read until EOF all the same.
    out->clear();
    char buf[4096];
    while (true) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n > 0) {
        out->append(buf, static_cast<size_t>(n));
        if (out->size() <= 64 * 1024) continue;
        reason = "file too large";
      } else if (n < 0) {
        if (errno == EINTR) continue;
        reason = std::strerror(errno);  // EIO from a port in reset, EISDIR, ...
      }
      break;
    }
    ::close(fd);
    if (reason.empty()) return 1;
  }
  ++read_errors_;
  if (logged_.insert(path).second) {
    LOG_WARN("nic agent: cannot read counter file (logged once)")
        .With("device", nic_.device_id)
        .With("file", path)
        .With("error", reason);
  }
  return -1;
}

bool SysfsNicReader::ReadCounter(const std::string& path, uint64_t* value) {
  std::string text;
  if (ReadFile(path, &text) != 1) return false;
  text = Trim(std::move(text));
  bool ok = !text.empty() && text.size() <= 20 &&
            text.find_first_not_of("0123456789") == std::string::npos;
  if (ok) {
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    ok = errno == 0 && *end == '\0';
    if (ok) *value = v;
  }
  if (!ok) {
    ++read_errors_;
    if (logged_.insert(path).second) {
      LOG_WARN("nic agent: counter file is not a decimal uint64 (logged once)")
          .With("device", nic_.device_id)
          .With("file", path)
          .With("content", text.substr(0, 64));
    }
  }
  return ok;
}

NicSample SysfsNicReader::Read() {
  NicSample s;
  s.timestamp_ns = WallNs();
  for (int id = 0; id < kLeafCount; ++id) {
    const LeafDef& d = kLeaves[id];
    NicLeaf leaf;
    leaf.container = d.container;
    leaf.name = d.name;
    if (d.container == NicLeaf::kOperStatus) {
      std::string text;
      if (ReadFile(net_dir_ + "operstate", &text) != 1) continue;
      text = Trim(std::move(text));
      leaf.text = text == "up" ? "UP" : text == "down" ? "DOWN" : "UNKNOWN";
    } else {
      const std::string path =
          d.container == NicLeaf::kRoce ? roce_dir_ + d.sysfs : net_dir_ + "statistics/" + d.sysfs;
      if (!ReadCounter(path, &leaf.counter)) continue;
    }
    s.leaves.push_back(std::move(leaf));
  }
  return s;
}

// ------------------------------------------------------------------ agent state

struct NicAgent::Subscription {
  std::string text;  // The path as requested (for logs).
  bool on_change = false;
  TimeNs interval_ns = 0;
  TimeNs next_due_ns = 0;  // Steady clock; SAMPLE only.
  // Per selected NIC (StreamState::nics order): the leaves covered.
  std::vector<uint32_t> masks;
  // ON_CHANGE: per selected NIC, the last value text sent per leaf id
  // ("" = not sent / absent).
  std::vector<std::vector<std::string>> last;
};

struct NicAgent::StreamState {
  Stream* stream = nullptr;
  std::vector<int> nics;  // Reader indexes.
  std::vector<Subscription> subs;
  bool once = false;
  bool updates_only = false;
  bool initial_pending = true;
};

// ------------------------------------------------------------------ Stream

// Stream: role — one Subscribe RPC. Trigger — gRPC read/write/cancel
// callbacks; Enqueue() from the sampling thread. Thread — gRPC callback
// threads and the sampler; its queue is guarded by its own mutex (taken after
// the agent's). One write in flight; deleted in OnDone after the agent has
// forgotten it.
class NicAgent::Stream final
    : public grpc::ServerBidiReactor<gnmi::SubscribeRequest, gnmi::SubscribeResponse> {
 public:
  explicit Stream(NicAgent* agent) : agent_(agent) { StartRead(&request_); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // Half-close: a STREAM subscription keeps streaming.
      if (!subscribed_) {
        Fail(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "stream closed before a SubscriptionList was sent"));
      }
      return;
    }
    if (subscribed_) {
      Fail(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        request_.has_poll()
                            ? "Poll received on a subscription whose mode is not POLL"
                            : "a SubscriptionList was already received on this stream"));
      return;
    }
    if (!request_.has_subscribe()) {
      Fail(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first SubscribeRequest must carry a SubscriptionList"));
      return;
    }
    subscribed_ = true;
    const Status s = agent_->Open(this, request_.subscribe());
    if (!s.ok()) {
      LOG_INFO("nic agent: subscribe rejected").With("error", s.message());
      Fail(ToGrpc(s));
      return;
    }
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok && !finish_pending_) {
      finish_pending_ = true;
      final_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "write failed");
      queue_.clear();
    }
    MaybeWriteLocked(lock);
  }

  void OnCancel() override { Fail(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")); }

  void OnDone() override {
    agent_->Close(this);
    delete this;
  }

  // Sampler (agent mutex held): queues `rs`; with `finish`, ends the RPC
  // with OK once they are written. False when the stream is ending.
  bool Enqueue(std::vector<gnmi::SubscribeResponse> rs, bool finish) {
    std::unique_lock<std::mutex> lock(mu_);
    if (finish_pending_) return false;
    for (gnmi::SubscribeResponse& r : rs) queue_.push_back(std::move(r));
    if (queue_.size() > agent_->options_.max_queued_responses) {
      LOG_WARN("nic agent: slow subscriber dropped");
      FinishLocked(lock, grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                      "subscriber too slow: response queue limit exceeded"));
      return false;
    }
    if (finish) {
      finish_pending_ = true;
      final_status_ = grpc::Status::OK;
    }
    MaybeWriteLocked(lock);
    return true;
  }

  void Fail(const grpc::Status& status) {
    std::unique_lock<std::mutex> lock(mu_);
    FinishLocked(lock, status);
  }

 private:
  // Ends the RPC with `status` (queued responses dropped when not OK).
  // Unlocks `lock`.
  void FinishLocked(std::unique_lock<std::mutex>& lock, const grpc::Status& status) {
    if (finish_pending_) return;
    finish_pending_ = true;
    final_status_ = status;
    if (!status.ok()) queue_.clear();
    MaybeWriteLocked(lock);
  }

  // Starts the next write, or Finish when drained and finishing. Returns with
  // `lock` released.
  void MaybeWriteLocked(std::unique_lock<std::mutex>& lock) {
    if (writing_ || finished_) {
      lock.unlock();
      return;
    }
    if (!queue_.empty()) {
      writing_ = true;
      current_ = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      StartWrite(&current_);
      return;
    }
    if (finish_pending_) {
      finished_ = true;
      const grpc::Status st = final_status_;
      lock.unlock();
      Finish(st);
      return;
    }
    lock.unlock();
  }

  NicAgent* const agent_;
  gnmi::SubscribeRequest request_;   // Read side only (one read in flight).
  bool subscribed_ = false;          // Read side only.
  gnmi::SubscribeResponse current_;  // The write in flight.

  std::mutex mu_;
  std::deque<gnmi::SubscribeResponse> queue_;
  bool writing_ = false;
  bool finish_pending_ = false;
  bool finished_ = false;
  grpc::Status final_status_;
};

// ------------------------------------------------------------------ Service

// Service: role — the gNMI service object. Trigger — gRPC. Thread — gRPC
// callback threads; Subscribe only creates a Stream.
class NicAgent::Service final : public gnmi::gNMI::CallbackService {
 public:
  explicit Service(NicAgent* agent) : agent_(agent) {}

  grpc::ServerUnaryReactor* Capabilities(grpc::CallbackServerContext* ctx,
                                         const gnmi::CapabilityRequest* /*req*/,
                                         gnmi::CapabilityResponse* resp) override {
    auto add = [&](const char* name, const char* org, const char* version) {
      gnmi::ModelData* m = resp->add_supported_models();
      m->set_name(name);
      m->set_organization(org);
      m->set_version(version);
    };
    add("openconfig-interfaces", "OpenConfig working group", "3.0.0");
    add("loom-nic", "Loom", "1.0.0");
    resp->add_supported_encodings(gnmi::PROTO);
    resp->set_gnmi_version("0.10.0");
    grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }

  grpc::ServerBidiReactor<gnmi::SubscribeRequest, gnmi::SubscribeResponse>* Subscribe(
      grpc::CallbackServerContext* /*ctx*/) override {
    {
      std::lock_guard<std::mutex> lock(agent_->mu_);
      ++agent_->open_;
    }
    return new Stream(agent_);
  }

 private:
  NicAgent* const agent_;
};

// ------------------------------------------------------------------ NicAgent

NicAgent::NicAgent(NicAgentOptions options) : options_(std::move(options)) {}

NicAgent::~NicAgent() { Stop(); }

Status NicAgent::Start() {
  if (server_) return FailedPrecondition("nic agent already started");
  if (options_.nics.empty()) return InvalidArgument("nic agent: no --nic given");
  std::set<std::string> ids;
  for (const NicSpec& n : options_.nics) {
    if (n.device_id.empty() || n.device_id == "*") {
      return InvalidArgument("nic agent: empty or '*' device id");
    }
    if (!ids.insert(n.device_id).second) {
      return InvalidArgument("nic agent: duplicate device id " + n.device_id);
    }
  }
  for (const NicSpec& n : options_.nics) {
    readers_.push_back(std::make_unique<SysfsNicReader>(options_.sysfs_root, n));
  }
  service_ = std::make_unique<Service>(this);
  grpc::ServerBuilder b;
  b.AddListeningPort(options_.listen_address, grpc::InsecureServerCredentials(), &port_);
  b.RegisterService(service_.get());
  server_ = b.BuildAndStart();
  if (!server_ || port_ <= 0) {
    server_.reset();
    return Unavailable("nic agent: cannot listen on " + options_.listen_address);
  }
  sampler_ = std::thread([this] { SamplerLoop(); });
  LOG_INFO("nic agent listening")
      .With("address", options_.listen_address)
      .With("port", port_)
      .With("nics", static_cast<uint64_t>(options_.nics.size()));
  return Status::Ok();
}

void NicAgent::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || !server_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (sampler_.joinable()) sampler_.join();
  // Cancels every open stream (OnCancel -> Finish -> OnDone -> Close).
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  server_->Wait();
  server_.reset();
}

NicAgentStats NicAgent::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  NicAgentStats s = stats_;
  s.open_streams = open_;
  return s;
}

Status NicAgent::Open(Stream* stream, const gnmi::SubscriptionList& list) {
  if (list.mode() == gnmi::SubscriptionList::POLL) {
    return Status(StatusCode::kUnimplemented,
                  "subscription mode POLL is not supported (use STREAM or ONCE)");
  }
  if (list.encoding() != gnmi::PROTO) {
    return Status(StatusCode::kUnimplemented,
                  "encoding " + gnmi::Encoding_Name(list.encoding()) +
                      " is not supported; this target serves PROTO only");
  }
  if (list.subscription_size() == 0) {
    return InvalidArgument("SubscriptionList has no subscription");
  }
  auto st = std::make_unique<StreamState>();
  st->stream = stream;
  st->once = list.mode() == gnmi::SubscriptionList::ONCE;
  st->updates_only = list.updates_only();
  const std::string& target = list.prefix().target();
  for (size_t i = 0; i < options_.nics.size(); ++i) {
    if (target.empty() || target == "*" || target == options_.nics[i].device_id) {
      st->nics.push_back(static_cast<int>(i));
    }
  }
  if (st->nics.empty()) {
    return NotFound("unknown target \"" + target + "\": this agent serves " + [&] {
      std::string ids;
      for (const NicSpec& n : options_.nics) {
        ids += (ids.empty() ? "" : ", ") + n.device_id;
      }
      return ids;
    }());
  }
  const gnmi::Path pfc = PfcLeafPath();
  const gnmi::Path peer = PeerLeafPath();
  for (int i = 0; i < list.subscription_size(); ++i) {
    const gnmi::Subscription& s = list.subscription(i);
    const gnmi::Path joined = JoinPath(list.prefix(), s.path());
    const std::string text = FormatPath(joined);
    const std::string& origin = joined.origin();
    if (!IsOpenConfigOrigin(origin) && origin != "loom") {
      return InvalidArgument("subscription[" + std::to_string(i) + "] path " + text +
                             ": unknown origin \"" + origin +
                             "\" (this target serves \"\"/openconfig and loom)");
    }
    // Schema check: the path with every key value wildcarded must cover a
    // served leaf (or the accepted, unserved NIC PFC container).
    gnmi::Path schema = SubtreePattern(joined);
    for (gnmi::PathElem& e : *schema.mutable_elem()) {
      for (auto& kv : *e.mutable_key()) kv.second = "*";
    }
    const bool served = LeafMask(schema, "x") != 0;
    if (!served && !PathMatches(schema, pfc) && !PathMatches(schema, peer)) {
      return InvalidArgument("subscription[" + std::to_string(i) + "] path " + text +
                             ": unknown path; this target serves "
                             "/interfaces/interface[name=*]/state/counters, "
                             "/interfaces/interface[name=*]/state/oper-status and "
                             "loom:/nic/interfaces/interface[name=*]/roce/state");
    }
    Subscription sub;
    sub.text = text;
    TimeNs interval = static_cast<TimeNs>(
        std::min<uint64_t>(s.sample_interval(), std::numeric_limits<TimeNs>::max()));
    if (interval == 0) interval = kDefaultSampleNs;
    const gnmi::Path pattern = SubtreePattern(joined);
    std::vector<uint32_t> masks;
    for (int n : st->nics) masks.push_back(LeafMask(pattern, options_.nics[n].ifname));
    auto add = [&](bool on_change, uint32_t keep) {
      Subscription x = sub;
      x.on_change = on_change;
      x.interval_ns = interval;
      for (uint32_t m : masks) x.masks.push_back(m & keep);
      if (on_change) x.last.assign(st->nics.size(), std::vector<std::string>(kLeafCount));
      st->subs.push_back(std::move(x));
    };
    const uint32_t oper_bit = 1u << LeafId(NicLeaf::kOperStatus, "oper-status");
    switch (s.mode()) {
      case gnmi::ON_CHANGE:
        add(true, ~0u);
        break;
      case gnmi::SAMPLE:
        if (st->once) {
          add(false, ~0u);
          break;
        }
        if (interval < kMinSampleNs) {
          return InvalidArgument("subscription[" + std::to_string(i) + "] path " + text +
                                 ": sample_interval " + std::to_string(s.sample_interval()) +
                                 " ns is below the minimum of 100 ms (100000000 ns)");
        }
        add(false, ~0u);
        break;
      case gnmi::TARGET_DEFINED:
        interval = std::max(interval, kMinSampleNs);
        add(false, ~oper_bit);
        add(true, oper_bit);
        break;
      default:
        return InvalidArgument("subscription[" + std::to_string(i) + "] path " + text +
                               ": unknown mode " + std::to_string(s.mode()));
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Unavailable("nic agent is shutting down");
    streams_.push_back(std::move(st));
    wake_ = true;
  }
  cv_.notify_all();
  return Status::Ok();
}

void NicAgent::Close(Stream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.erase(
      std::remove_if(streams_.begin(), streams_.end(),
                     [&](const std::unique_ptr<StreamState>& s) { return s->stream == stream; }),
      streams_.end());
  --open_;
}

void NicAgent::SamplerLoop() {
  const size_t nnics = readers_.size();
  TimeNs next_check_ns = SteadyNs();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    TimeNs now = SteadyNs();
    TimeNs wake = now + 3600 * kNsPerSec;
    for (const auto& st : streams_) {
      if (st->initial_pending) wake = now;
      for (const Subscription& s : st->subs) {
        wake = std::min(wake, s.on_change ? next_check_ns : s.next_due_ns);
      }
    }
    if (wake > now) {
      const auto deadline = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(wake));
      cv_.wait_until(lock, deadline, [&] { return stopping_ || wake_; });
      wake_ = false;
      continue;
    }
    const bool check_due = now >= next_check_ns;
    // Which NICs are needed this round.
    std::vector<bool> need(nnics, false);
    for (const auto& st : streams_) {
      bool due = st->initial_pending;
      for (const Subscription& s : st->subs) {
        due = due || (s.on_change ? check_due : now >= s.next_due_ns);
      }
      if (due) {
        for (int n : st->nics) need[n] = true;
      }
    }
    lock.unlock();
    std::vector<NicSample> samples(nnics);
    uint64_t reads = 0;
    uint64_t errors = 0;
    for (size_t n = 0; n < nnics; ++n) {
      if (need[n]) {
        samples[n] = readers_[n]->Read();
        ++reads;
      }
      errors += readers_[n]->read_errors();
    }
    lock.lock();
    if (stopping_) break;
    stats_.samples += reads;
    stats_.read_errors = errors;
    if (check_due) {
      next_check_ns = now + options_.on_change_check_ns;
      if (next_check_ns <= SteadyNs()) next_check_ns = SteadyNs() + options_.on_change_check_ns;
    }

    std::vector<std::unique_ptr<StreamState>*> done;
    for (auto& stp : streams_) {
      StreamState& st = *stp;
      bool all_read = true;
      for (int n : st.nics) all_read = all_read && need[n];
      if (!all_read) continue;  // Registered while reading: next round.
      const bool initial = st.initial_pending;
      std::vector<gnmi::SubscribeResponse> out;
      for (size_t p = 0; p < st.nics.size(); ++p) {
        const int n = st.nics[p];
        const NicSample& sample = samples[n];
        const NicSpec& nic = options_.nics[n];
        uint32_t send = 0;
        std::vector<std::string> present(kLeafCount);
        for (const NicLeaf& l : sample.leaves) present[LeafId(l.container, l.name)] = LeafText(l);
        uint32_t deleted = 0;
        for (Subscription& s : st.subs) {
          const uint32_t mask = s.masks[p];
          if (initial) {
            if (!st.updates_only) send |= mask;
            if (s.on_change) {
              for (int id = 0; id < kLeafCount; ++id) {
                if (mask & (1u << id)) s.last[p][id] = present[id];
              }
            }
          } else if (s.on_change) {
            if (!check_due) continue;
            for (int id = 0; id < kLeafCount; ++id) {
              if (!(mask & (1u << id)) || s.last[p][id] == present[id]) continue;
              if (present[id].empty()) {
                deleted |= 1u << id;
              } else {
                send |= 1u << id;
              }
              s.last[p][id] = present[id];
            }
          } else if (now >= s.next_due_ns) {
            send |= mask;
          }
        }
        // One notification per container.
        for (int c = NicLeaf::kCounters; c <= NicLeaf::kRoce; ++c) {
          gnmi::Notification note;
          for (const NicLeaf& l : sample.leaves) {
            if (l.container != c) continue;
            if (!(send & (1u << LeafId(l.container, l.name)))) continue;
            gnmi::Update* u = note.add_update();
            u->mutable_path()->add_elem()->set_name(l.name);
            if (l.container == NicLeaf::kOperStatus) {
              u->mutable_val()->set_string_val(l.text);
            } else {
              u->mutable_val()->set_uint_val(l.counter);
            }
          }
          for (int id = 0; id < kLeafCount; ++id) {
            if ((deleted & (1u << id)) && kLeaves[id].container == c) {
              note.add_delete_()->add_elem()->set_name(kLeaves[id].name);
            }
          }
          if (note.update_size() == 0 && note.delete__size() == 0) continue;
          note.set_timestamp(sample.timestamp_ns);
          *note.mutable_prefix() = ContainerPath(static_cast<NicLeaf::Container>(c), nic.ifname);
          note.mutable_prefix()->set_target(nic.device_id);
          gnmi::SubscribeResponse r;
          *r.mutable_update() = std::move(note);
          out.push_back(std::move(r));
          ++stats_.notifications;
        }
      }
      for (Subscription& s : st.subs) {
        if (s.on_change) continue;
        if (initial || now >= s.next_due_ns) {
          s.next_due_ns = (initial ? now : s.next_due_ns) + s.interval_ns;
          if (s.next_due_ns <= now) s.next_due_ns = now + s.interval_ns;
        }
      }
      if (initial) {
        st.initial_pending = false;
        gnmi::SubscribeResponse sync;
        sync.set_sync_response(true);
        out.push_back(std::move(sync));
      }
      if (out.empty()) continue;
      const bool finish = initial && st.once;
      if (!st.stream->Enqueue(std::move(out), finish) || finish) done.push_back(&stp);
    }
    // Streams that are ending get no more ticks (they are removed in Close).
    for (auto* stp : done) (*stp)->subs.clear();
  }
}

}  // namespace loom::telemetry
