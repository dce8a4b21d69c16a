// loomctl: command-line client for loomd's loom.v1 gRPC API.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "api/loomctl/credentials.h"
#include "api/loomctl/table.h"
#include "api/loomctl/topology_export.h"
#include "common/file.h"
#include "common/flags.h"
#include "common/text.h"
#include "loom/v1/fabric_service.grpc.pb.h"
#include "loom/v1/scheduler_service.grpc.pb.h"

namespace {

namespace v1 = loom::v1;
using google::protobuf::util::TimeUtil;
using loom::loomctl::Table;

constexpr char kUsage[] =
    R"(usage: loomctl [--server HOST:PORT] [-o table|wide|json|yaml] [--timeout SECONDS] COMMAND

Talks to loomd's gRPC API (default server: $LOOM_SERVER or 127.0.0.1:50061).

Commands:
  topology show                       devices and link counts of the loaded topology
  topology export --format slurm|kueue|volcano [--health]
                                      the fabric for a scheduler: Slurm topology.conf
                                      (tree plugin), Kueue Topology + node labels, Volcano
                                      HyperNodes; --health marks nodes whose NIC link is
                                      down or whose leaf lost most uplinks
                                      (docs/scheduler-topology.md)
  links list [--device D] [--drained] links with admin/oper state and live telemetry
                                      (utilization and DLB quality band 0-7 per
                                      direction, lower->upper tier first; "?" = stale,
                                      a quality of "?" = unknown) and the LLDP check
  links get LINK_ID                   one link
  links drain LINK_ID --reason TEXT   take a link out of service
  links undrain LINK_ID               return a drained link to service
  jobs list [--tenant T]              registered jobs
  jobs get JOB_ID                     one job, with its assignment
  jobs why JOB_ID                     is the fabric slowing the job: the verdict and
                                      estimated slowdown, throughput from its NICs, the
                                      worst link and every problem link on its paths,
                                      the entropy audit and what Loom did about it
  jobs register FILE                  register a job from a JSON file (loom.v1.Job)
  jobs update FILE                    replace a job's spec from a JSON file
  jobs release JOB_ID                 release a job
  watch jobs [--from REV] [--tenant T]     stream job changes
  watch events [--from REV] [--subject S]  stream the event log (a stream cut for
                                           being slow or by a restart is resumed
                                           after the last revision printed)
  events [--from REV] [--subject S]   print the event log (from REV, default 1) and exit
  render DEVICE --vendor junos|nxos|sonic
                                      the switch's desired state as vendor configuration
  render DEVICE --adapter loom|sonic|openconfig
                                      the gNMI SetRequest that platform adapter would send,
                                      each block marked VALIDATED / SOURCED / UNVERIFIED,
                                      and what the platform cannot express
  device DEVICE                       a switch's desired vs applied state and sync status
  devices [DEVICE]                    every device's telemetry source: platform, address,
                                      connection, negotiated encoding and each signal's
                                      state (live / stale / unavailable, with the reason);
                                      with DEVICE, one line per signal
  plan                                the pending fabric-wide change (DLB, ALB,
                                      ECN/PFC thresholds, PFC watchdog): per device
                                      what changes, the canary, the rollout state and
                                      the desired-state revision it was built on
  apply REVISION                      approve mode: roll out the plan `loomctl plan`
                                      showed (refused when the desired state moved on)
  plan clear REVISION                 let a rolled-back (quarantined) change be tried
                                      again
  version                             loomctl's version (and whether loomd answers)
  completion bash                     a bash completion script
                                      (source <(loomctl completion bash))

Flags:
  -o, --output FORMAT  table (default), wide (tables with more columns where a
                       command has more: jobs list), json (protobuf JSON, every
                       field, empty lists as []), yaml (the same as YAML)
  --json               same as -o json
  --timeout SECONDS    per-call deadline (default 10; watch streams have none)
  --request-id ID      idempotency key for register/update/release/drain/undrain

Connection and credentials (flags, else environment, else the context of
$LOOMCONFIG or ~/.config/loom/config.json; docs/security.md):
  --server HOST:PORT   $LOOM_SERVER (default 127.0.0.1:50061)
  --ca FILE            $LOOM_CA: CA bundle to verify loomd's certificate (TLS)
  --cert FILE --key FILE
                       $LOOM_CERT, $LOOM_KEY: client certificate and key (mTLS)
  --token-file FILE    $LOOM_TOKEN_FILE (or the token itself in $LOOM_TOKEN):
                       bearer token (JWT) sent as "authorization: Bearer ..."
  --server-name NAME   $LOOM_SERVER_NAME: name to verify in loomd's certificate
  --context NAME       $LOOM_CONTEXT: the config file's context to use

Exit status: 0 success, 1 the server refused the request, 2 usage error,
3 loomd unreachable.
)";

struct Ctx {
  std::string server;
  loom::loomctl::Connection conn;
  bool json = false;  // -o json or -o yaml (ToJson prints YAML for the latter)
  bool wide = false;
  int timeout_s = 10;
  std::string request_id;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::FabricService::Stub> fabric;
  std::unique_ptr<v1::SchedulerService::Stub> scheduler;
};

// -o yaml: the same fields as -o json, as YAML (block style; strings quoted
// as JSON strings, which YAML 1.2 reads as they are).
bool g_yaml = false;

void YamlValue(const google::protobuf::Value& v, int indent, bool in_list, std::string* out);

std::string JsonQuote(const std::string& s) {
  google::protobuf::Value v;
  v.set_string_value(s);
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(v, &out);
  return out;
}

void YamlScalar(const google::protobuf::Value& v, std::string* out) {
  switch (v.kind_case()) {
    case google::protobuf::Value::kNullValue:
      *out += "null";
      break;
    case google::protobuf::Value::kBoolValue:
      *out += v.bool_value() ? "true" : "false";
      break;
    case google::protobuf::Value::kNumberValue: {
      std::string n;
      (void)google::protobuf::util::MessageToJsonString(v, &n);
      *out += n;
      break;
    }
    default:
      *out += JsonQuote(v.string_value());
  }
}

void YamlValue(const google::protobuf::Value& v, int indent, bool in_list, std::string* out) {
  const std::string pad(static_cast<size_t>(indent), ' ');
  if (v.has_struct_value()) {
    const auto& f = v.struct_value().fields();
    if (f.empty()) {
      *out += " {}";
      return;
    }
    std::vector<std::string> keys;
    for (const auto& [k, x] : f) keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    bool first = true;
    for (const auto& k : keys) {
      if (!(in_list && first)) *out += "\n" + pad;
      first = false;
      *out += k + ":";
      const auto& x = f.at(k);
      if (x.has_struct_value() || x.has_list_value()) {
        YamlValue(x, indent + 2, false, out);
      } else {
        *out += " ";
        YamlScalar(x, out);
      }
    }
    return;
  }
  if (v.has_list_value()) {
    if (v.list_value().values().empty()) {
      *out += " []";
      return;
    }
    for (const auto& x : v.list_value().values()) {
      *out += "\n" + pad + "- ";
      if (x.has_struct_value() && !x.struct_value().fields().empty()) {
        YamlValue(x, indent + 2, true, out);
      } else if (x.has_list_value()) {
        YamlValue(x, indent + 2, false, out);
      } else {
        YamlScalar(x, out);
      }
    }
    return;
  }
  *out += " ";
  YamlScalar(v, out);
}

std::string ToJson(const google::protobuf::Message& m, bool pretty = true) {
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = pretty && !g_yaml;
  // Empty lists print as [] and zero values as 0: a script sees every field.
  o.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  if (g_yaml) {
    google::protobuf::Value v;
    (void)google::protobuf::util::JsonStringToMessage(out, &v);
    std::string y;
    if (v.has_struct_value()) {
      YamlValue(v, 0, false, &y);
      if (!y.empty() && y[0] == '\n') y.erase(0, 1);
    } else {
      YamlScalar(v, &y);
    }
    return pretty ? y + "\n" : "---\n" + y;
  }
  if (!pretty) {
    while (!out.empty() && out.back() == '\n') out.pop_back();
  }
  return out;
}

void SetDeadline(grpc::ClientContext* c, const Ctx& ctx) {
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(ctx.timeout_s));
  loom::loomctl::AddCredentials(c, ctx.conn);
}

int Report(const grpc::Status& s, const Ctx& ctx) {
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
      s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    std::cerr << "loomctl: cannot reach loomd at " << ctx.server << ": " << s.error_message()
              << "\n         is loomd running? (set --server or LOOM_SERVER)\n";
    return 3;
  }
  std::cerr << "loomctl: " << loom::StatusCodeName(s.error_code()) << ": " << s.error_message()
            << "\n";
  return 1;
}

std::string Ts(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return "-";
  std::string s = TimeUtil::ToString(t);
  // Trim sub-second digits for tables.
  auto dot = s.find('.');
  if (dot != std::string::npos) s = s.substr(0, dot) + "Z";
  return s;
}

std::string Gbps(int64_t bps) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%gG", static_cast<double>(bps) / 1e9);
  return buf;
}

std::string Short(const std::string& enum_name, const std::string& prefix) {
  std::string s = enum_name.rfind(prefix, 0) == 0 ? enum_name.substr(prefix.size()) : enum_name;
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ReadJobFile(const std::string& path, v1::Job* job) {
  std::string text, error;
  if (!loom::ReadFileCapped(path, loom::kMaxJobFileBytes, "job file", &text, &error)) {
    std::cerr << "loomctl: " << error << "\n";
    return false;
  }
  auto st = google::protobuf::util::JsonStringToMessage(text, job);
  if (!st.ok()) {
    std::cerr << "loomctl: " << path << ": not a loom.v1.Job JSON document: " << st.message()
              << "\n";
    return false;
  }
  return true;
}

std::string Pct(double u) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f%%", u * 100);
  return buf;
}

// "UTIL" and "Q" cells for both directions: "a->b / b->a"; "-" without data,
// a trailing "?" when the figure is stale.
std::string DirCells(const v1::LinkStatus& l, bool quality) {
  if (l.directions().empty()) return "-";
  std::string out;
  for (const auto& d : l.directions()) {
    if (!out.empty()) out += "/";
    if (quality && d.quality_unknown()) {
      out += "?";  // Unknown: no fresh data (never shown as a band).
      continue;
    }
    out += quality ? std::to_string(d.quality()) : Pct(d.utilization());
    if (d.stale()) out += "?";
  }
  return out;
}

void PrintLinks(const google::protobuf::RepeatedPtrField<v1::LinkStatus>& links, const Ctx&) {
  Table t({"LINK", "CAPACITY", "ADMIN", "OPER", "UTIL UP/DOWN", "QUALITY", "QUEUE PEAK",
           "PFC PAUSE", "LLDP", "DRAIN REASON"});
  for (const auto& l : links) {
    uint64_t peak = 0;
    double pause = 0;
    for (const auto& d : l.directions()) {
      peak = std::max<uint64_t>(peak, d.queue_peak_bytes());
      pause = std::max(pause, d.pfc_pause_ratio());
    }
    t.Add({l.link().id(), Gbps(l.link().capacity_bps()),
           Short(v1::LinkAdminState_Name(l.admin_state()), "LINK_ADMIN_STATE_"),
           Short(v1::LinkOperState_Name(l.oper_state()), "LINK_OPER_STATE_"), DirCells(l, false),
           DirCells(l, true), l.directions().empty() ? "-" : std::to_string(peak / 1024) + "KiB",
           l.directions().empty() ? "-" : Pct(pause),
           Short(v1::LldpCheckState_Name(l.lldp()), "LLDP_CHECK_STATE_"), l.drain_reason()});
  }
  t.Print(std::cout);
}

std::string SignalStateText(v1::SignalState s) {
  return Short(v1::SignalState_Name(s), "SIGNAL_STATE_");
}

std::string Millis(int64_t ms) {
  if (ms < 0) return "-";
  if (ms < 10'000) return std::to_string(ms) + "ms";
  return std::to_string(ms / 1000) + "s";
}

void PrintDevices(const v1::ListDevicesResponse& resp, bool one) {
  if (one && resp.devices_size() == 1) {
    const auto& d = resp.devices(0);
    std::cout << "device:    " << d.id() << "\n"
              << "role:      " << Short(v1::DeviceRole_Name(d.role()), "DEVICE_ROLE_") << "\n"
              << "platform:  " << (d.platform().empty() ? "-" : d.platform()) << "\n"
              << "address:   " << (d.address().empty() ? "-" : d.address()) << "\n"
              << "state:     " << d.state() << "\n"
              << "encoding:  " << (d.encoding().empty() ? "-" : d.encoding()) << "\n"
              << "errors:    " << d.stream_errors() << " stream, " << d.rejected_updates()
              << " rejected updates"
              << (d.last_error().empty() ? "" : " (last: " + d.last_error() + ")") << "\n"
              << "budget:    "
              << (d.max_prefixes() ? std::to_string(d.max_prefixes()) + " prefixes" : "unlimited")
              << (d.fib_size() ? ", FIB " + std::to_string(d.fib_size()) : "") << "\n\n";
    Table t({"SIGNAL", "STATE", "MODE", "REFRESH", "LAST SAMPLE", "UPDATES", "MAPPING", "REASON"});
    for (const auto& s : d.signals()) {
      std::string reason = s.reason();
      if (s.retry_in_ms() > 0) reason += " (retry in " + Millis(s.retry_in_ms()) + ")";
      t.Add({s.signal(), SignalStateText(s.state()), s.mode().empty() ? "-" : s.mode(),
             s.refresh_interval_ms() ? Millis(s.refresh_interval_ms()) : "-",
             s.last_sample_age_ms() < 0 ? "-" : Millis(s.last_sample_age_ms()) + " ago",
             std::to_string(s.updates()), s.mark().empty() ? "-" : s.mark(), reason});
    }
    t.Print(std::cout);
    return;
  }
  Table t({"DEVICE", "ROLE", "PLATFORM", "ADDRESS", "STATE", "ENCODING", "LIVE", "STALE",
           "UNAVAILABLE", "PENDING", "LAST ERROR"});
  Table why({"DEVICE", "SIGNAL", "STATE", "REASON"});
  for (const auto& d : resp.devices()) {
    int n[5] = {0, 0, 0, 0, 0};
    for (const auto& s : d.signals()) {
      ++n[s.state() >= 0 && s.state() <= 4 ? s.state() : 0];
      if (s.state() == v1::SIGNAL_STATE_UNAVAILABLE || s.state() == v1::SIGNAL_STATE_STALE) {
        why.Add({d.id(), s.signal(), SignalStateText(s.state()), s.reason()});
      }
    }
    const bool sig = d.signals_size() > 0;
    t.Add({d.id(), Short(v1::DeviceRole_Name(d.role()), "DEVICE_ROLE_"),
           d.platform().empty() ? "-" : d.platform(), d.address().empty() ? "-" : d.address(),
           d.state(), d.encoding().empty() ? "-" : d.encoding(),
           sig ? std::to_string(n[v1::SIGNAL_STATE_LIVE]) : "-",
           sig ? std::to_string(n[v1::SIGNAL_STATE_STALE]) : "-",
           sig ? std::to_string(n[v1::SIGNAL_STATE_UNAVAILABLE]) : "-",
           sig ? std::to_string(n[v1::SIGNAL_STATE_PENDING]) : "-", d.last_error()});
  }
  t.Print(std::cout);
  if (why.size() > 0) {
    std::cout << "\n";
    why.Print(std::cout);
  }
}

void PrintJobs(const google::protobuf::RepeatedPtrField<v1::Job>& jobs, bool wide) {
  std::vector<std::string> head{"JOB",   "TENANT", "ENDPOINTS", "TC",     "STATE",
                                "COLOR", "BACKUP", "REVISION",  "UPDATED"};
  // -o wide: where the job runs and how loaded its paths are predicted to be.
  if (wide) head.insert(head.end(), {"ROUTES", "SPINES", "PREDICTED", "POLICY RULE"});
  Table t(head);
  for (const auto& j : jobs) {
    const auto& a = j.status().assignment();
    bool assigned = j.status().has_assignment();
    std::vector<std::string> row{j.job_id(),
                                 j.tenant(),
                                 std::to_string(j.endpoints_size()),
                                 std::to_string(j.traffic_class()),
                                 Short(v1::JobState_Name(j.status().state()), "JOB_STATE_"),
                                 assigned ? std::to_string(a.primary_color()) : "-",
                                 assigned ? std::to_string(a.backup_color()) : "-",
                                 std::to_string(j.status().revision()),
                                 Ts(j.status().update_time())};
    if (wide) {
      std::string spines;
      for (const auto& sp : a.primary_spines()) spines += (spines.empty() ? "" : ",") + sp;
      char pred[32];
      std::snprintf(pred, sizeof(pred), "%.0f%%", a.predicted_max_utilization() * 100);
      row.insert(row.end(),
                 {std::to_string(a.routes_size()), spines.empty() ? "-" : spines,
                  assigned ? pred : "-", a.policy_rule().empty() ? "-" : a.policy_rule()});
    }
    t.Add(row);
  }
  t.Print(std::cout);
}

void PrintJob(const v1::Job& j) {
  std::cout << "job:        " << j.job_id() << "\n"
            << "tenant:     " << j.tenant() << "\n"
            << "state:      " << Short(v1::JobState_Name(j.status().state()), "JOB_STATE_") << "\n"
            << "message:    " << j.status().message() << "\n"
            << "endpoints:  " << j.endpoints_size() << "\n"
            << "class:      " << j.traffic_class() << "\n"
            << "collective: "
            << Short(v1::CollectivePattern_Name(j.collective()), "COLLECTIVE_PATTERN_") << "\n"
            << "revision:   " << j.status().revision() << "\n"
            << "created:    " << Ts(j.status().create_time()) << "\n"
            << "updated:    " << Ts(j.status().update_time()) << "\n";
  if (j.status().has_assignment()) {
    const auto& a = j.status().assignment();
    std::cout << "color:      " << a.primary_color() << " (backup " << a.backup_color() << ")\n"
              << "policy:     " << a.policy_rule() << "\n"
              << "reason:     " << a.reason() << "\n";
    if (a.routes_size() > 0) {
      std::cout << "\n";
      Table t({"DESTINATION", "VIA", "COLOR", "BACKUP VIA", "BACKUP COLOR", "WHY"});
      for (const auto& r : a.routes()) {
        // A QP part of a split destination: "nic (qp%4=1)".
        std::string dst = r.destination();
        if (r.qp_mask() != 0) {
          dst +=
              " (qp%" + std::to_string(r.qp_mask() + 1) + "=" + std::to_string(r.qp_value()) + ")";
        }
        // Sprayed where pinning cannot fit (or while the pairing is unknown).
        std::string via = r.via().empty() ? "-" : r.via();
        if (r.sprayed_at_size() > 0) {
          via += " (sprayed at " + r.sprayed_at(0) +
                 (r.sprayed_at_size() > 1 ? " +" + std::to_string(r.sprayed_at_size() - 1) : "") +
                 ")";
        }
        t.Add({dst, via, std::to_string(r.color()), r.backup_via().empty() ? "-" : r.backup_via(),
               std::to_string(r.backup_color()), r.reason()});
      }
      t.Print(std::cout);
    }
  }
}

std::string EventLine(const v1::Event& e) {
  std::ostringstream out;
  out << e.revision() << "  " << Ts(e.time()) << "  "
      << Short(v1::EventType_Name(e.type()), "EVENT_TYPE_") << "  " << e.subject();
  if (!e.cause().empty()) out << "  cause=\"" << e.cause() << "\"";
  if (!e.action().empty()) out << "  action=\"" << e.action() << "\"";
  if (!e.result().empty()) out << "  result=\"" << e.result() << "\"";
  if (!e.actor().empty()) out << "  actor=" << e.actor();
  return out.str();
}

int CmdTopology(Ctx& ctx, const std::vector<std::string>& args, const loom::Flags& flags) {
  if (args.empty() || (args[0] != "show" && args[0] != "export")) {
    std::cerr << "loomctl: usage: loomctl topology show | topology export --format "
                 "slurm|kueue|volcano [--health]\n";
    return 2;
  }
  grpc::ClientContext c;
  SetDeadline(&c, ctx);
  v1::GetTopologyResponse resp;
  auto s = ctx.fabric->GetTopology(&c, {}, &resp);
  if (!s.ok()) return Report(s, ctx);
  if (args[0] == "export") {
    if (!flags.Has("format")) {
      std::cerr << "loomctl: topology export needs --format slurm|kueue|volcano\n";
      return 2;
    }
    std::map<std::string, std::string> degraded;
    if (flags.Has("health")) {
      grpc::ClientContext lc;
      SetDeadline(&lc, ctx);
      v1::ListLinksResponse links;
      if (auto ls = ctx.fabric->ListLinks(&lc, {}, &links); !ls.ok()) return Report(ls, ctx);
      degraded = loom::loomctl::DegradedNodes(resp.topology(),
                                              {links.links().begin(), links.links().end()});
    }
    std::string out, error;
    if (!loom::loomctl::ExportTopology(resp.topology(), flags.Get("format"), degraded, &out,
                                       &error)) {
      std::cerr << "loomctl: " << error << "\n";
      return 2;
    }
    std::cout << out;
    return 0;
  }
  if (ctx.json) {
    std::cout << ToJson(resp.topology());
    return 0;
  }
  const auto& t = resp.topology();
  std::map<std::string, int> roles;
  for (const auto& d : t.devices()) roles[Short(v1::DeviceRole_Name(d.role()), "DEVICE_ROLE_")]++;
  std::cout << "topology: " << t.name() << "\n";
  for (const auto& [r, n] : roles) std::cout << "  " << r << ": " << n << "\n";
  std::cout << "  links: " << t.links_size() << "\n  gpus: " << t.gpus_size() << "\n\n";
  Table sw({"DEVICE", "ROLE", "POD", "RAIL", "ASN", "ROUTER-ID", "LINKS"});
  std::map<std::string, int> link_count;
  for (const auto& l : t.links()) {
    link_count[l.a().device()]++;
    link_count[l.b().device()]++;
  }
  for (const auto& d : t.devices()) {
    if (d.role() == v1::DEVICE_ROLE_HOST || d.role() == v1::DEVICE_ROLE_NIC) continue;
    sw.Add({d.id(), Short(v1::DeviceRole_Name(d.role()), "DEVICE_ROLE_"), d.pod(),
            d.has_rail() ? std::to_string(d.rail()) : "", std::to_string(d.asn()), d.router_id(),
            std::to_string(link_count[d.id()])});
  }
  sw.Print(std::cout);
  return 0;
}

int CmdDevices(Ctx& ctx, const std::vector<std::string>& args) {
  grpc::ClientContext c;
  SetDeadline(&c, ctx);
  v1::ListDevicesRequest req;
  if (!args.empty()) req.set_device(args[0]);
  v1::ListDevicesResponse resp;
  auto s = ctx.fabric->ListDevices(&c, req, &resp);
  if (!s.ok()) return Report(s, ctx);
  if (ctx.json) {
    std::cout << ToJson(resp);
  } else {
    PrintDevices(resp, !args.empty());
  }
  return 0;
}

void PrintPlan(const v1::ChangePlan& p) {
  std::cout << "revision:  " << p.revision() << "\n"
            << "mode:      " << p.mode() << "\n"
            << "state:     " << Short(v1::ChangeState_Name(p.state()), "CHANGE_STATE_") << "\n";
  if (p.rollout_revision() > 0 && p.rollout_revision() != p.revision()) {
    std::cout << "rolling out revision " << p.rollout_revision()
              << " (the desired state moved on since)\n";
  }
  if (p.quarantined_revision() > 0) {
    std::cout << "quarantined: revision " << p.quarantined_revision() << " (loomctl plan clear "
              << p.quarantined_revision() << ")\n";
  }
  if (!p.detail().empty()) std::cout << "detail:    " << p.detail() << "\n";
  if (p.devices().empty()) {
    std::cout << "no fabric-wide change pending\n";
    return;
  }
  for (const auto& d : p.devices()) {
    std::cout << "\n"
              << d.device() << (d.canary() ? "  [canary]" : "") << "  " << d.state() << "\n";
    for (const auto& c : d.changes()) std::cout << "  ~ " << c << "\n";
  }
}

int CmdPlan(Ctx& ctx, const std::string& cmd, const std::vector<std::string>& args) {
  grpc::ClientContext c;
  SetDeadline(&c, ctx);
  v1::ChangePlan plan;
  grpc::Status s;
  auto revision = [&](const std::string& text, uint64_t* out) {
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno != 0 || v == 0) return false;
    *out = v;
    return true;
  };
  if (cmd == "plan" && args.empty()) {
    v1::GetChangePlanResponse resp;
    s = ctx.fabric->GetChangePlan(&c, {}, &resp);
    plan = resp.plan();
  } else if (cmd == "plan" && args.size() == 2 && args[0] == "clear") {
    v1::ClearChangeQuarantineRequest req;
    uint64_t rev = 0;
    if (!revision(args[1], &rev)) {
      std::cerr << "loomctl: plan clear: REVISION must be a positive number\n";
      return 2;
    }
    req.set_revision(rev);
    v1::ClearChangeQuarantineResponse resp;
    s = ctx.fabric->ClearChangeQuarantine(&c, req, &resp);
    plan = resp.plan();
  } else if (cmd == "apply" && args.size() == 1) {
    v1::ApplyChangePlanRequest req;
    uint64_t rev = 0;
    if (!revision(args[0], &rev)) {
      std::cerr << "loomctl: apply: REVISION must be a positive number (see `loomctl plan`)\n";
      return 2;
    }
    req.set_revision(rev);
    v1::ApplyChangePlanResponse resp;
    s = ctx.fabric->ApplyChangePlan(&c, req, &resp);
    plan = resp.plan();
  } else {
    std::cerr << "loomctl: usage: loomctl plan | loomctl plan clear REVISION | loomctl apply "
                 "REVISION\n";
    return 2;
  }
  if (!s.ok()) return Report(s, ctx);
  if (ctx.json) {
    std::cout << ToJson(plan);
  } else {
    PrintPlan(plan);
  }
  return 0;
}

int CmdLinks(Ctx& ctx, const std::vector<std::string>& args, const loom::Flags& flags) {
  if (args.empty()) {
    std::cerr << "loomctl: usage: loomctl links list|get|drain|undrain ...\n";
    return 2;
  }
  grpc::ClientContext c;
  SetDeadline(&c, ctx);
  const std::string& sub = args[0];
  if (sub == "list") {
    v1::ListLinksRequest req;
    req.set_device(flags.Get("device"));
    req.set_drained_only(flags.Has("drained"));
    v1::ListLinksResponse resp;
    auto s = ctx.fabric->ListLinks(&c, req, &resp);
    if (!s.ok()) return Report(s, ctx);
    if (ctx.json) {
      std::cout << ToJson(resp);
    } else {
      PrintLinks(resp.links(), ctx);
    }
    return 0;
  }
  if (args.size() < 2) {
    std::cerr << "loomctl: links " << sub << " needs a LINK_ID\n";
    return 2;
  }
  v1::LinkStatus link;
  grpc::Status s;
  if (sub == "get") {
    v1::GetLinkRequest req;
    req.set_link_id(args[1]);
    v1::GetLinkResponse resp;
    s = ctx.fabric->GetLink(&c, req, &resp);
    link = resp.link();
  } else if (sub == "drain") {
    if (!flags.Has("reason")) {
      std::cerr << "loomctl: links drain needs --reason TEXT (kept in the event log)\n";
      return 2;
    }
    v1::DrainLinkRequest req;
    req.set_link_id(args[1]);
    req.set_reason(flags.Get("reason"));
    req.set_request_id(ctx.request_id);
    v1::DrainLinkResponse resp;
    s = ctx.fabric->DrainLink(&c, req, &resp);
    link = resp.link();
  } else if (sub == "undrain") {
    v1::UndrainLinkRequest req;
    req.set_link_id(args[1]);
    req.set_request_id(ctx.request_id);
    v1::UndrainLinkResponse resp;
    s = ctx.fabric->UndrainLink(&c, req, &resp);
    link = resp.link();
  } else {
    std::cerr << "loomctl: unknown links command \"" << sub << "\"\n";
    return 2;
  }
  if (!s.ok()) return Report(s, ctx);
  if (ctx.json) {
    std::cout << ToJson(link);
  } else {
    google::protobuf::RepeatedPtrField<v1::LinkStatus> one;
    *one.Add() = link;
    PrintLinks(one, ctx);
  }
  return 0;
}

std::string Num(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

void PrintJobHealth(const v1::GetJobHealthResponse& h) {
  std::printf("job %s  tenant %s  state %s\n", h.job_id().c_str(), h.tenant().c_str(),
              Short(v1::JobState_Name(h.state()), "JOB_STATE_").c_str());
  std::printf("verdict: %s\n", h.verdict().c_str());
  std::printf(
      "fabric slowdown: %.2fx  (predicted worst link %.0f%% of capacity, paths paused "
      "up to %.0f%% of the time, %d route(s) crossing a link out of placement)\n",
      h.fabric_slowdown(), h.predicted_max_utilization() * 100, h.max_pause_ratio() * 100,
      h.impaired_routes());
  if (h.throughput_available()) {
    std::printf("throughput: %.1f Gb/s of %.1f Gb/s line rate (%d of %d NICs measured)\n",
                h.achieved_bps() / 1e9, h.line_rate_bps() / 1e9, h.nics_measured(), h.nics());
  } else {
    std::printf("throughput: unavailable (no NIC of the job has fresh host counters)\n");
  }
  const auto& e = h.entropy();
  std::printf(
      "entropy: %d route(s); uplinks used %d of %d, spines %d of %d; %d uplink(s) "
      "shared needlessly; %d route(s) sprayed\n",
      e.routes(), e.uplinks_used(), e.uplinks_available(), e.spines_used(), e.spines_available(),
      e.needlessly_shared_uplinks(), e.sprayed_routes());
  if (h.has_worst_link() && !h.worst_link().link_id().empty()) {
    std::printf("worst link: %s %s->%s\n", h.worst_link().link_id().c_str(),
                h.worst_link().from_device().c_str(), h.worst_link().to_device().c_str());
  }
  if (h.problem_links_size() > 0) {
    Table t({"LINK", "FROM", "TO", "UTIL", "QUEUE", "ECN/S", "CNP/S", "PAUSED", "ROUTES", "NOTE"});
    for (const auto& l : h.problem_links()) {
      auto pct = [&](double v) { return l.stale() ? std::string("?") : Num("%.0f%%", v * 100); };
      t.Add({l.link_id(), l.from_device(), l.to_device(), pct(l.utilization()),
             l.stale() ? "?" : Num("%.0f", l.queue_bytes()),
             l.stale() ? "?" : Num("%.0f", l.ecn_marked_pps()),
             l.stale() ? "?" : Num("%.0f", l.cnp_pps()), pct(l.pfc_pause_ratio()),
             std::to_string(l.job_routes()),
             !l.out_of_placement().empty() ? l.out_of_placement()
             : l.stale()                   ? "stale telemetry"
                                           : ""});
    }
    t.Print(std::cout);
  } else {
    std::printf("problem links: none\n");
  }
  if (h.actions_size() > 0) {
    std::printf("what Loom did (newest first):\n");
    for (const auto& ev : h.actions()) {
      std::printf("  %llu  %s  %s: %s%s%s\n", static_cast<unsigned long long>(ev.revision()),
                  Short(v1::EventType_Name(ev.type()), "EVENT_TYPE_").c_str(), ev.subject().c_str(),
                  ev.cause().c_str(), ev.action().empty() ? "" : " -> ", ev.action().c_str());
    }
  } else {
    std::printf("what Loom did: nothing about this job or its links in the recent history\n");
  }
}

int CmdJobs(Ctx& ctx, const std::vector<std::string>& args, const loom::Flags& flags) {
  if (args.empty()) {
    std::cerr << "loomctl: usage: loomctl jobs list|get|register|update|release ...\n";
    return 2;
  }
  grpc::ClientContext c;
  SetDeadline(&c, ctx);
  const std::string& sub = args[0];
  if (sub == "list") {
    v1::ListJobsRequest req;
    req.set_tenant(flags.Get("tenant"));
    v1::ListJobsResponse resp;
    auto s = ctx.scheduler->ListJobs(&c, req, &resp);
    if (!s.ok()) return Report(s, ctx);
    if (ctx.json) {
      std::cout << ToJson(resp);
    } else {
      PrintJobs(resp.jobs(), ctx.wide);
    }
    return 0;
  }
  if (args.size() < 2) {
    std::cerr << "loomctl: jobs " << sub << " needs an argument\n";
    return 2;
  }
  if (sub == "why") {
    v1::GetJobHealthRequest req;
    req.set_job_id(args[1]);
    v1::GetJobHealthResponse resp;
    auto hs = ctx.scheduler->GetJobHealth(&c, req, &resp);
    if (!hs.ok()) return Report(hs, ctx);
    if (ctx.json) {
      std::cout << ToJson(resp);
    } else {
      PrintJobHealth(resp);
    }
    return 0;
  }
  v1::Job job;
  grpc::Status s;
  if (sub == "get") {
    v1::GetJobRequest req;
    req.set_job_id(args[1]);
    v1::GetJobResponse resp;
    s = ctx.scheduler->GetJob(&c, req, &resp);
    job = resp.job();
  } else if (sub == "register" || sub == "update") {
    v1::Job spec;
    if (!ReadJobFile(args[1], &spec)) return 2;
    if (sub == "register") {
      v1::RegisterJobRequest req;
      *req.mutable_job() = spec;
      req.set_request_id(ctx.request_id);
      v1::RegisterJobResponse resp;
      s = ctx.scheduler->RegisterJob(&c, req, &resp);
      job = resp.job();
    } else {
      v1::UpdateJobRequest req;
      *req.mutable_job() = spec;
      req.set_request_id(ctx.request_id);
      v1::UpdateJobResponse resp;
      s = ctx.scheduler->UpdateJob(&c, req, &resp);
      job = resp.job();
    }
  } else if (sub == "release") {
    v1::ReleaseJobRequest req;
    req.set_job_id(args[1]);
    req.set_request_id(ctx.request_id);
    v1::ReleaseJobResponse resp;
    s = ctx.scheduler->ReleaseJob(&c, req, &resp);
    job = resp.job();
  } else {
    std::cerr << "loomctl: unknown jobs command \"" << sub << "\"\n";
    return 2;
  }
  if (!s.ok()) return Report(s, ctx);
  if (ctx.json) {
    std::cout << ToJson(job);
  } else {
    PrintJob(job);
  }
  return 0;
}

int CmdWatch(Ctx& ctx, const std::vector<std::string>& args, const loom::Flags& flags,
             bool follow) {
  std::string what = follow ? (args.empty() ? "" : args[0]) : "events";
  int64_t from = 0;
  std::string error;
  if (!flags.GetInt("from", follow ? 0 : 1, &from, &error) || from < 0) {
    std::cerr << "loomctl: --from must be a revision number\n";
    return 2;
  }
  if (what != "jobs" && what != "events") {
    std::cerr << "loomctl: usage: loomctl watch jobs|events [--from REV]\n";
    return 2;
  }
  // `watch events` without --from: the 10 most recent events first (so the
  // stream never looks dead before the next one), after a header line.
  if (follow && what == "events" && !flags.Has("from")) {
    grpc::ClientContext lc;
    SetDeadline(&lc, ctx);
    v1::ListJobsRequest lreq;
    lreq.set_page_size(1);
    v1::ListJobsResponse lresp;
    if (auto ls = ctx.scheduler->ListJobs(&lc, lreq, &lresp); ls.ok()) {
      const uint64_t rev = lresp.revision();
      from = static_cast<int64_t>(rev > 10 ? rev - 9 : 1);
      if (!ctx.json) {
        std::cout << "# events from revision " << from << " (the latest is " << rev
                  << "), then as they happen; Ctrl-C to stop" << std::endl;
      }
    }
  }
  // Follows the resume protocol (docs/watch.md): a stream cut for being slow
  // (RESOURCE_EXHAUSTED) or broken by a restart (UNAVAILABLE) is resumed from
  // the revision after the last one printed, without printing any twice.
  uint64_t next = static_cast<uint64_t>(from);
  for (int attempt = 0;; ++attempt) {
    grpc::ClientContext c;
    if (!follow) {
      SetDeadline(&c, ctx);  // adds the credentials too
    } else {
      loom::loomctl::AddCredentials(&c, ctx.conn);
    }
    grpc::Status s;
    bool progressed = false;
    if (what == "jobs") {
      v1::WatchJobsRequest req;
      req.set_start_revision(next);
      req.set_tenant(flags.Get("tenant"));
      auto reader = ctx.scheduler->WatchJobs(&c, req);
      v1::WatchJobsResponse resp;
      while (reader->Read(&resp)) {
        if (next > 0 && resp.revision() < next) continue;  // seen before a resume
        next = resp.revision() + 1;
        progressed = true;
        if (ctx.json) {
          std::cout << ToJson(resp, false) << std::endl;
        } else {
          std::cout << resp.revision() << "  "
                    << Short(v1::JobChange_Name(resp.change()), "JOB_CHANGE_") << "  "
                    << resp.job().job_id() << "  tenant=" << resp.job().tenant() << "  state="
                    << Short(v1::JobState_Name(resp.job().status().state()), "JOB_STATE_")
                    << std::endl;
        }
      }
      s = reader->Finish();
    } else {
      v1::WatchEventsRequest req;
      req.set_start_revision(next);
      req.set_subject(flags.Get("subject"));
      req.set_replay_only(!follow);
      auto reader = ctx.fabric->WatchEvents(&c, req);
      v1::WatchEventsResponse resp;
      while (reader->Read(&resp)) {
        if (next > 0 && resp.event().revision() < next) continue;
        next = resp.event().revision() + 1;
        progressed = true;
        if (ctx.json) {
          std::cout << ToJson(resp.event(), false) << std::endl;
        } else {
          std::cout << EventLine(resp.event()) << std::endl;
        }
      }
      s = reader->Finish();
    }
    // A replay that finds nothing newer than --from is fine.
    if (s.ok() || s.error_code() == grpc::StatusCode::CANCELLED) return 0;
    const bool resumable = follow && (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ||
                                      s.error_code() == grpc::StatusCode::UNAVAILABLE);
    if (progressed) attempt = 0;
    if (!resumable || attempt >= 10 || next == 0) return Report(s, ctx);
    std::cerr << "loomctl: watch stream ended (" << s.error_message()
              << "); resuming from revision " << next << "\n";
    std::this_thread::sleep_for(std::chrono::milliseconds(200 << std::min(attempt, 5)));
  }
}

int CmdDevice(Ctx& ctx, const std::string& cmd, const std::vector<std::string>& args,
              const loom::Flags& flags) {
  if (args.empty()) {
    std::cerr << "loomctl: usage: loomctl " << cmd << " DEVICE"
              << (cmd == "render" ? " --vendor junos|nxos|sonic | --adapter loom|sonic|openconfig"
                                  : "")
              << "\n";
    return 2;
  }
  v1::GetDeviceStateRequest req;
  req.set_device(args[0]);
  if (cmd == "render") {
    std::string vendor = flags.Get("vendor");
    std::string adapter = flags.Get("adapter");
    if (!adapter.empty()) req.set_adapter(adapter);
    if (vendor.empty() && !adapter.empty()) {
      // Adapter preview only.
    } else if (vendor == "junos") {
      req.set_format(v1::CONFIG_FORMAT_JUNOS);
    } else if (vendor == "nxos") {
      req.set_format(v1::CONFIG_FORMAT_NXOS);
    } else if (vendor == "sonic") {
      req.set_format(v1::CONFIG_FORMAT_SONIC);
    } else {
      std::cerr << "loomctl: render needs --vendor junos, nxos or sonic, or --adapter loom, "
                   "sonic or openconfig\n";
      return 2;
    }
  }
  grpc::ClientContext c;
  SetDeadline(&c, ctx);
  v1::GetDeviceStateResponse resp;
  auto s = ctx.fabric->GetDeviceState(&c, req, &resp);
  if (!s.ok()) return Report(s, ctx);
  if (cmd == "render") {
    std::cout << resp.rendered();
    if (!resp.rendered().empty() && resp.rendered().back() != '\n') std::cout << "\n";
    return 0;
  }
  if (ctx.json) {
    std::cout << ToJson(resp);
    return 0;
  }
  const auto& sync = resp.sync();
  std::cout << "device:     " << args[0] << "\n"
            << "driver:     " << (sync.driver().empty() ? "(none)" : sync.driver()) << "\n"
            << "in sync:    " << (sync.in_sync() ? "yes" : "no") << " (desired generation "
            << sync.desired_generation() << ", applied " << sync.applied_generation() << ")\n"
            << "applies:    " << sync.applies() << ", drift repairs " << sync.drift_repairs()
            << "\n";
  if (!sync.last_error().empty()) std::cout << "last error: " << sync.last_error() << "\n";
  if (sync.shadow()) {
    std::string parts;
    for (const auto& p : sync.would_change()) parts += (parts.empty() ? "" : ", ") + p;
    std::cout << "mode:       shadow: nothing is programmed; Loom would change "
              << (parts.empty() ? "nothing" : parts) << " (`render --adapter` shows the Set)\n";
  }
  std::cout << "desired:    " << resp.desired().colors_size() << " color(s), "
            << resp.desired().routes_size() << " route(s), " << resp.desired().weights_size()
            << " weight set(s), " << resp.desired().alb_tables_size() << " ALB table(s)\n";
  return 0;
}

}  // namespace

// Positional arguments each command takes (command and subcommand included):
// anything beyond is refused, never silently ignored.
size_t MaxArgs(const std::vector<std::string>& pos) {
  const std::string cmd = pos[0];
  const std::string sub = pos.size() > 1 ? pos[1] : "";
  if (cmd == "topology" || cmd == "events" || cmd == "version") return cmd == "topology" ? 2 : 1;
  if (cmd == "links" || cmd == "jobs") return sub == "list" ? 2 : 3;
  if (cmd == "watch" || cmd == "devices" || cmd == "apply" || cmd == "device" || cmd == "render" ||
      cmd == "completion") {
    return 2;
  }
  if (cmd == "plan") return sub == "clear" ? 3 : 1;
  return pos.size();
}

constexpr char kBashCompletion[] =
    R"(# bash completion for loomctl: source <(loomctl completion bash)
_loomctl() {
  local cur prev words cword
  _init_completion 2>/dev/null || { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; }
  case "$prev" in
    -o|--output) COMPREPLY=($(compgen -W "table wide json yaml" -- "$cur")); return ;;
    --vendor) COMPREPLY=($(compgen -W "junos nxos sonic" -- "$cur")); return ;;
    --adapter) COMPREPLY=($(compgen -W "loom sonic openconfig" -- "$cur")); return ;;
    jobs) COMPREPLY=($(compgen -W "list get why register update release" -- "$cur")); return ;;
    links) COMPREPLY=($(compgen -W "list get drain undrain" -- "$cur")); return ;;
    watch) COMPREPLY=($(compgen -W "jobs events" -- "$cur")); return ;;
    topology) COMPREPLY=($(compgen -W "show export" -- "$cur")); return ;;
    --format) COMPREPLY=($(compgen -W "slurm kueue volcano" -- "$cur")); return ;;
    plan) COMPREPLY=($(compgen -W "clear" -- "$cur")); return ;;
    completion) COMPREPLY=($(compgen -W "bash" -- "$cur")); return ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "--server -o --output --json --timeout --request-id --device --drained --reason --tenant --from --subject --vendor --adapter --format --health --ca --cert --key --token-file --server-name --context --help" -- "$cur"))
  elif [[ $COMP_CWORD -eq 1 ]]; then
    COMPREPLY=($(compgen -W "topology links jobs watch events render device devices plan apply version completion" -- "$cur"))
  fi
}
complete -F _loomctl loomctl
)";

int main(int argc, char** argv) {
  // -o FORMAT / -oFORMAT are --output FORMAT.
  std::vector<std::string> storage;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-o") {
      storage.push_back("--output");
    } else if (a.size() > 2 && a.rfind("-o", 0) == 0 && a[2] != '-') {
      storage.push_back("--output");
      storage.push_back(a.substr(2));
    } else {
      storage.push_back(a);
    }
  }
  std::vector<char*> args;
  for (auto& a : storage) args.push_back(a.data());
  argc = static_cast<int>(args.size());
  argv = args.data();
  loom::Flags flags;
  std::string error;
  if (!flags.Parse(argc, argv, 1,
                   {"server", "timeout", "device", "reason", "tenant", "from", "subject",
                    "request-id", "vendor", "adapter", "output", "format", "ca", "cert", "key",
                    "token-file", "server-name", "context"},
                   {"json", "help", "drained", "health"}, &error)) {
    std::cerr << "loomctl: " << error << "\n";
    return 2;
  }
  if (flags.Has("help") || flags.positional().empty()) {
    std::fputs(kUsage, flags.Has("help") ? stdout : stderr);
    return flags.Has("help") ? 0 : 2;
  }
  Ctx ctx;
  const std::string output = flags.Get("output", flags.Has("json") ? "json" : "table");
  if (output != "table" && output != "wide" && output != "json" && output != "yaml") {
    std::cerr << "loomctl: -o/--output must be table, wide, json or yaml (got \"" << output
              << "\")\n";
    return 2;
  }
  if (flags.Has("json") && output != "json") {
    std::cerr << "loomctl: --json and -o " << output << " contradict each other\n";
    return 2;
  }
  ctx.json = output == "json" || output == "yaml";
  ctx.wide = output == "wide";
  g_yaml = output == "yaml";
  const std::vector<std::string>& pos0 = flags.positional();
  if (pos0.size() > MaxArgs(pos0)) {
    std::cerr << "loomctl: unexpected argument \"" << pos0[MaxArgs(pos0)] << "\" for \"" << pos0[0]
              << (pos0.size() > 1 && MaxArgs(pos0) > 1 ? " " + pos0[1] : "") << "\" (see --help)\n";
    return 2;
  }
  if (pos0[0] == "completion") {
    if (pos0.size() != 2 || pos0[1] != "bash") {
      std::cerr << "loomctl: usage: loomctl completion bash\n";
      return 2;
    }
    std::fputs(kBashCompletion, stdout);
    return 0;
  }
  if (!loom::loomctl::ResolveConnection(flags, &ctx.conn, &error)) {
    std::cerr << "loomctl: " << error << "\n";
    return 2;
  }
  ctx.server = ctx.conn.server;
  ctx.request_id = flags.Get("request-id");
  int64_t t = 10;
  if (!flags.GetInt("timeout", 10, &t, &error) || t <= 0) {
    std::cerr << "loomctl: --timeout must be a positive number of seconds\n";
    return 2;
  }
  ctx.timeout_s = static_cast<int>(t);
  ctx.channel = loom::loomctl::MakeChannel(ctx.conn, &error);
  if (!ctx.channel) {
    std::cerr << "loomctl: " << error << "\n";
    return 2;
  }
  if (pos0[0] == "version") {
    const bool up = ctx.channel->WaitForConnected(std::chrono::system_clock::now() +
                                                  std::chrono::seconds(std::min<int64_t>(t, 2)));
    if (ctx.json) {
      google::protobuf::Struct v;
      (*v.mutable_fields())["client"].set_string_value(LOOM_VERSION);
      (*v.mutable_fields())["server"].set_string_value(ctx.server);
      (*v.mutable_fields())["serverReachable"].set_bool_value(up);
      std::cout << ToJson(v);
    } else {
      std::printf("loomctl %s\nserver %s: %s\n", LOOM_VERSION, ctx.server.c_str(),
                  up ? "reachable" : "not reachable");
    }
    return 0;
  }
  if (!ctx.channel->WaitForConnected(std::chrono::system_clock::now() +
                                     std::chrono::seconds(std::min<int64_t>(t, 5)))) {
    std::cerr << "loomctl: cannot reach loomd at " << ctx.server << " (no connection within "
              << std::min<int64_t>(t, 5)
              << "s)\n         is loomd running? (set --server or LOOM_SERVER)\n";
    return 3;
  }
  ctx.fabric = v1::FabricService::NewStub(ctx.channel);
  ctx.scheduler = v1::SchedulerService::NewStub(ctx.channel);
  std::vector<std::string> pos = flags.positional();
  std::string cmd = pos[0];
  std::vector<std::string> rest(pos.begin() + 1, pos.end());
  if (cmd == "topology") return CmdTopology(ctx, rest, flags);
  if (cmd == "links") return CmdLinks(ctx, rest, flags);
  if (cmd == "devices") return CmdDevices(ctx, rest);
  if (cmd == "plan" || cmd == "apply") return CmdPlan(ctx, cmd, rest);
  if (cmd == "jobs") return CmdJobs(ctx, rest, flags);
  if (cmd == "watch") return CmdWatch(ctx, rest, flags, /*follow=*/true);
  if (cmd == "events") return CmdWatch(ctx, rest, flags, /*follow=*/false);
  if (cmd == "render" || cmd == "device") return CmdDevice(ctx, cmd, rest, flags);
  std::cerr << "loomctl: unknown command \"" << cmd << "\" (see --help)\n";
  return 2;
}
