// End-to-end: the real loomd and loomctl binaries, on free ports, over gRPC.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "loom/v1/fabric_service.grpc.pb.h"
#include "loom/v1/scheduler_service.grpc.pb.h"
#include "tests/e2e/process.h"

namespace loom::testing {
namespace {

namespace v1 = loom::v1;

const std::string kTopology = std::string(LOOM_SOURCE_DIR) + "/deploy/examples/topology-small.json";
const std::string kLink = "leaf0:Ethernet0--spine0:Ethernet0";
const std::string kLink2 = "leaf1:Ethernet1--spine1:Ethernet1";

class Loomd {
 public:
  explicit Loomd(std::string dir) : dir_(std::move(dir)) {}

  // Starts loomd and waits until it serves. Returns false on failure.
  bool Start() {
    std::filesystem::remove(Ready());
    if (!proc_.Start(
            {LOOMD_PATH, "--topology", kTopology, "--db", dir_ + "/loom.db", "--grpc-listen",
             "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--ready-file", Ready()},
            dir_ + "/loomd.log")) {
      return false;
    }
    if (!WaitForFile(Ready(), 20000)) return false;
    std::smatch m;
    std::string ready = ReadFile(Ready());
    if (!std::regex_search(ready, m, std::regex(R"("grpc_port":(\d+))"))) return false;
    port_ = std::stoi(m[1]);
    channel_ = grpc::CreateChannel(Address(), grpc::InsecureChannelCredentials());
    fabric_ = v1::FabricService::NewStub(channel_);
    scheduler_ = v1::SchedulerService::NewStub(channel_);
    return true;
  }
  std::string Ready() const { return dir_ + "/ready.json"; }
  std::string Address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string Log() const { return ReadFile(dir_ + "/loomd.log"); }
  Process& proc() { return proc_; }
  v1::FabricService::Stub& fabric() { return *fabric_; }
  v1::SchedulerService::Stub& scheduler() { return *scheduler_; }
  CommandResult Ctl(const std::string& args) {
    return RunCommand(std::string(LOOMCTL_PATH) + " --server " + Address() + " " + args);
  }

 private:
  std::string dir_;
  Process proc_;
  int port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::FabricService::Stub> fabric_;
  std::unique_ptr<v1::SchedulerService::Stub> scheduler_;
};

class E2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "loom-e2e-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string WriteFile(const std::string& name, const std::string& content) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << content;
    return path;
  }

  static v1::RegisterJobRequest Job(const std::string& id, const std::string& request_id = "") {
    v1::RegisterJobRequest r;
    r.mutable_job()->set_tenant("acme");
    r.mutable_job()->set_job_id(id);
    r.mutable_job()->add_endpoints("host000-gpu0");
    r.mutable_job()->add_endpoints("host003-gpu1");
    auto* q = r.mutable_job()->add_qp_ranges();
    q->set_first(1000);
    q->set_last(1999);
    r.set_request_id(request_id);
    return r;
  }

  static std::unique_ptr<grpc::ClientContext> Ctx() {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return c;
  }

  // Starts loomd with `args` plus free ports and a ready file; returns the
  // loomctl command prefix for it ("" on failure, with the log in the test
  // output).
  std::string StartLoomd(Process& p, std::vector<std::string> args, const std::string& name) {
    const std::string ready_file = dir_ + "/" + name + ".ready.json";
    args.insert(args.begin(), LOOMD_PATH);
    for (const char* a :
         {"--grpc-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--ready-file"}) {
      args.push_back(a);
    }
    args.push_back(ready_file);
    const std::string log = dir_ + "/" + name + ".log";
    if (!p.Start(args, log) || !WaitForFile(ready_file, 20000)) {
      ADD_FAILURE() << ReadFile(log);
      return "";
    }
    std::smatch m;
    std::string ready = ReadFile(ready_file);
    if (!std::regex_search(ready, m, std::regex(R"("grpc_port":(\d+))"))) return "";
    return std::string(LOOMCTL_PATH) + " --server 127.0.0.1:" + m[1].str() + " ";
  }

  std::string dir_;
};

TEST_F(E2eTest, AcknowledgedWritesSurviveSigkill) {
  Loomd d(dir_);
  ASSERT_TRUE(d.Start()) << d.Log();
  std::set<std::string> acked;
  for (int i = 0; i < 25; ++i) {
    v1::RegisterJobResponse resp;
    std::string id = "job-" + std::to_string(i);
    auto s = d.scheduler().RegisterJob(Ctx().get(), Job(id, "req-" + id), &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    acked.insert(id);
  }
  // One through loomctl too.
  std::string job_file = WriteFile("job.json", R"({"tenant": "beta", "jobId": "ctl-job",
      "endpoints": ["host001-gpu0", "host002-gpu0"], "trafficClass": 3})");
  auto reg = d.Ctl("jobs register " + job_file);
  ASSERT_EQ(reg.exit_code, 0) << reg.output;
  acked.insert("ctl-job");
  v1::ReleaseJobRequest rel;
  rel.set_job_id("job-3");
  v1::ReleaseJobResponse rel_resp;
  ASSERT_TRUE(d.scheduler().ReleaseJob(Ctx().get(), rel, &rel_resp).ok());
  acked.erase("job-3");
  v1::DrainLinkRequest drain;
  drain.set_link_id(kLink);
  drain.set_reason("optics swap");
  v1::DrainLinkResponse drain_resp;
  ASSERT_TRUE(d.fabric().DrainLink(Ctx().get(), drain, &drain_resp).ok());
  auto ctl_drain = d.Ctl("links drain " + kLink2 + " --reason 'flapping'");
  ASSERT_EQ(ctl_drain.exit_code, 0) << ctl_drain.output;

  // SIGKILL right after the last acknowledgement: no chance to flush anything.
  int status = d.proc().Stop(SIGKILL);
  ASSERT_TRUE(WIFSIGNALED(status));

  Loomd again(dir_);
  ASSERT_TRUE(again.Start()) << again.Log();
  v1::ListJobsResponse list;
  ASSERT_TRUE(again.scheduler().ListJobs(Ctx().get(), {}, &list).ok());
  std::set<std::string> found;
  for (const auto& j : list.jobs()) found.insert(j.job_id());
  EXPECT_EQ(found, acked);
  v1::ListLinksRequest ll;
  ll.set_drained_only(true);
  v1::ListLinksResponse links;
  ASSERT_TRUE(again.fabric().ListLinks(Ctx().get(), ll, &links).ok());
  ASSERT_EQ(links.links_size(), 2);
  std::set<std::string> drained{links.links(0).link().id(), links.links(1).link().id()};
  EXPECT_EQ(drained, (std::set<std::string>{kLink, kLink2}));
  // A retry of an acknowledged request after the crash gets the same answer.
  v1::RegisterJobResponse retry;
  auto s = again.scheduler().RegisterJob(Ctx().get(), Job("job-7", "req-job-7"), &retry);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(retry.job().job_id(), "job-7");
  EXPECT_GT(retry.job().status().revision(), 0u);
  auto list_ctl = again.Ctl("jobs list --tenant beta");
  EXPECT_EQ(list_ctl.exit_code, 0);
  EXPECT_NE(list_ctl.output.find("ctl-job"), std::string::npos) << list_ctl.output;
}

TEST_F(E2eTest, InvalidRequestsNameTheField) {
  Loomd d(dir_);
  ASSERT_TRUE(d.Start()) << d.Log();
  v1::RegisterJobResponse resp;
  auto bad = Job("x");
  bad.mutable_job()->add_endpoints("host999-gpu0");
  auto s = d.scheduler().RegisterJob(Ctx().get(), bad, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("job.endpoints[2]"), std::string::npos) << s.error_message();
  bad = Job("x");
  bad.mutable_job()->clear_tenant();
  s = d.scheduler().RegisterJob(Ctx().get(), bad, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("job.tenant"), std::string::npos);
  bad = Job("x");
  auto* q = bad.mutable_job()->add_qp_ranges();
  q->set_first(1500);
  q->set_last(2500);
  s = d.scheduler().RegisterJob(Ctx().get(), bad, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("job.qp_ranges[1]"), std::string::npos);
  ASSERT_TRUE(d.scheduler().RegisterJob(Ctx().get(), Job("dup"), &resp).ok());
  s = d.scheduler().RegisterJob(Ctx().get(), Job("dup"), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  v1::GetJobRequest g;
  g.set_job_id("nope");
  v1::GetJobResponse gr;
  EXPECT_EQ(d.scheduler().GetJob(Ctx().get(), g, &gr).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::GetLinkRequest gl;
  gl.set_link_id("nope");
  v1::GetLinkResponse glr;
  EXPECT_EQ(d.fabric().GetLink(Ctx().get(), gl, &glr).error_code(), grpc::StatusCode::NOT_FOUND);
  // The process is still healthy afterwards.
  v1::ListJobsResponse list;
  EXPECT_TRUE(d.scheduler().ListJobs(Ctx().get(), {}, &list).ok());
}

TEST_F(E2eTest, WatchJobsResumesFromRevision) {
  Loomd d(dir_);
  ASSERT_TRUE(d.Start()) << d.Log();
  v1::RegisterJobResponse r1, r2, r3;
  ASSERT_TRUE(d.scheduler().RegisterJob(Ctx().get(), Job("a"), &r1).ok());
  ASSERT_TRUE(d.scheduler().RegisterJob(Ctx().get(), Job("b"), &r2).ok());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::WatchJobsRequest req;
  req.set_start_revision(r2.job().status().revision());
  auto reader = d.scheduler().WatchJobs(&ctx, req);
  v1::WatchJobsResponse ev;
  ASSERT_TRUE(reader->Read(&ev));
  EXPECT_EQ(ev.job().job_id(), "b");  // resumed: "a" is before the start revision
  EXPECT_EQ(ev.change(), v1::JOB_CHANGE_REGISTERED);
  ASSERT_TRUE(d.scheduler().RegisterJob(Ctx().get(), Job("c"), &r3).ok());
  ASSERT_TRUE(reader->Read(&ev));
  EXPECT_EQ(ev.job().job_id(), "c");
  EXPECT_EQ(ev.revision(), r3.job().status().revision());
  v1::ReleaseJobRequest rel;
  rel.set_job_id("a");
  v1::ReleaseJobResponse rr;
  ASSERT_TRUE(d.scheduler().ReleaseJob(Ctx().get(), rel, &rr).ok());
  ASSERT_TRUE(reader->Read(&ev));
  EXPECT_EQ(ev.change(), v1::JOB_CHANGE_RELEASED);
  EXPECT_EQ(ev.job().job_id(), "a");
  // Drains are not job changes and do not show up; the loomctl events view has them.
  ctx.TryCancel();
  reader->Finish();
  auto events = d.Ctl("events --from 1");
  EXPECT_EQ(events.exit_code, 0) << events.output;
  EXPECT_NE(events.output.find("job_released"), std::string::npos) << events.output;
}

TEST_F(E2eTest, SigtermShutsDownCleanlyWithOpenStream) {
  Loomd d(dir_);
  ASSERT_TRUE(d.Start()) << d.Log();
  grpc::ClientContext ctx;
  v1::WatchEventsRequest req;
  auto reader = d.fabric().WatchEvents(&ctx, req);
  int status = d.proc().Stop(SIGTERM);
  ASSERT_TRUE(WIFEXITED(status)) << d.Log();
  EXPECT_EQ(WEXITSTATUS(status), 0) << d.Log();
  v1::WatchEventsResponse ev;
  while (reader->Read(&ev)) {
  }
  EXPECT_FALSE(reader->Finish().ok());
  EXPECT_NE(d.Log().find("loomd stopped"), std::string::npos);
}

TEST_F(E2eTest, BadConfigurationExitsWithClearMessage) {
  // No topology.
  auto r = RunCommand(std::string(LOOMD_PATH) + " --db " + dir_ + "/x.db");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("no topology given"), std::string::npos) << r.output;
  // A topology with a broken link names the element and its position.
  std::string topo = ReadFile(kTopology);
  std::string bad = std::regex_replace(topo, std::regex("\"spine1\""), "\"spine7\"",
                                       std::regex_constants::format_first_only);
  std::string path = WriteFile("bad.json", bad);
  r = RunCommand(std::string(LOOMD_PATH) + " --topology " + path + " --db " + dir_ + "/x.db");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("bad.json:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("unknown device \"spine1\""), std::string::npos) << r.output;
  // Bad listen address, unknown flag, bad config file.
  r = RunCommand(std::string(LOOMD_PATH) + " --topology " + kTopology + " --grpc-listen nonsense");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("grpc_listen"), std::string::npos) << r.output;
  r = RunCommand(std::string(LOOMD_PATH) + " --frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--frobnicate"), std::string::npos);
  std::string cfg = WriteFile("cfg.json", R"({"grpcListen": 5})");
  r = RunCommand(std::string(LOOMD_PATH) + " --config " + cfg);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("not a valid LoomdConfig"), std::string::npos) << r.output;
  // Adaptive settings out of range name the field.
  cfg = WriteFile("adaptive.json", "{\"topologyPath\": \"" + kTopology +
                                       "\", \"adaptive\": {\"albScanIntervalMs\": 500}}");
  r = RunCommand(std::string(LOOMD_PATH) + " --config " + cfg + " --db " + dir_ + "/x.db");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("adaptive.alb_scan_interval_ms"), std::string::npos) << r.output;
  cfg = WriteFile("adaptive2.json", "{\"topologyPath\": \"" + kTopology +
                                        "\", \"adaptive\": {\"albTolerance\": 1.5}}");
  r = RunCommand(std::string(LOOMD_PATH) + " --config " + cfg + " --db " + dir_ + "/x.db");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("tolerance"), std::string::npos) << r.output;
  // Config values get the same ranges as the flags (they used to bypass them).
  cfg = WriteFile("ranges.json",
                  "{\"topologyPath\": \"" + kTopology + "\", \"telemetryIntervalMs\": 1000000000}");
  r = RunCommand(std::string(LOOMD_PATH) + " --config " + cfg + " --db " + dir_ + "/x.db");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("config.telemetry_interval_ms: 1e+09 is out of range 0..60000"),
            std::string::npos)
      << r.output;
  // An endless or huge input file is refused at its cap, not read into memory.
  r = RunCommand(std::string(LOOMD_PATH) + " --topology /dev/zero --db " + dir_ + "/x.db");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("/dev/zero: topology file larger than 256 MiB"), std::string::npos)
      << r.output;
  r = RunCommand(std::string(LOOMD_PATH) + " --config /dev/zero");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("/dev/zero: config file larger than 64 MiB"), std::string::npos)
      << r.output;
  // --help works and documents the flags.
  r = RunCommand(std::string(LOOMD_PATH) + " --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("--metrics-listen"), std::string::npos);
}

TEST_F(E2eTest, PolicyFileIsValidatedAndInstalledAtStartup) {
  // Refused: an undefined color and a qp_split that is not a power of two, named.
  std::string bad = WriteFile("bad-policy.json", R"({
    "rules": [{"name": "split", "match": {"tenants": ["acme"]},
               "action": {"colors": [9], "qpSplit": 3}}]})");
  auto r = RunCommand(std::string(LOOMD_PATH) + " --topology " + kTopology + " --db " + dir_ +
                      "/p.db --policy " + bad);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("bad-policy.json refused"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rules[0] (\"split\")"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("qp_split 3 is not a power of two"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("color 9, which is not defined"), std::string::npos) << r.output;
  r = RunCommand(std::string(LOOMD_PATH) + " --topology " + kTopology + " --db " + dir_ +
                 "/p.db --policy " + dir_ + "/missing.json");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("missing.json"), std::string::npos) << r.output;
  // Installed: acme's jobs split by destination QP in two parts; loomctl shows the parts.
  std::string good = WriteFile("policy.json", R"({
    "rules": [{"name": "acme-split", "match": {"tenants": ["acme"]},
               "action": {"qpSplit": 2}}]})");
  Process p;
  const std::string ctl =
      StartLoomd(p, {"--topology", kTopology, "--db", dir_ + "/p.db", "--policy", good}, "p");
  ASSERT_FALSE(ctl.empty());
  std::string job = WriteFile("job.json", R"({"tenant": "acme", "jobId": "pair",
      "endpoints": ["host000-gpu0", "host002-gpu0"],
      "collective": "COLLECTIVE_PATTERN_POINT_TO_POINT", "trafficClass": 3})");
  auto reg = RunCommand(ctl + "jobs register " + job);
  ASSERT_EQ(reg.exit_code, 0) << reg.output;
  auto get = RunCommand(ctl + "jobs get pair");
  EXPECT_EQ(get.exit_code, 0) << get.output;
  EXPECT_NE(get.output.find("policy:     acme-split"), std::string::npos) << get.output;
  EXPECT_NE(get.output.find("host002-nic0 (qp%2=0)"), std::string::npos) << get.output;
  EXPECT_NE(get.output.find("host002-nic0 (qp%2=1)"), std::string::npos) << get.output;
  EXPECT_NE(get.output.find("split by destination QP modulo 2"), std::string::npos) << get.output;
  EXPECT_NE(ReadFile(dir_ + "/p.log").find("policy file installed"), std::string::npos);
  EXPECT_EQ(WEXITSTATUS(p.Stop(SIGINT)), 0);
}

TEST_F(E2eTest, InventoryErrorsNameTheEntryAndTheShippedExampleLoads) {
  auto run = [&](const std::string& name, const std::string& extra) {
    std::string cfg = WriteFile(name, "{\"topologyPath\": \"" + kTopology + "\", " + extra + "}");
    return RunCommand(std::string(LOOMD_PATH) + " --config " + cfg + " --db " + dir_ + "/i.db");
  };
  auto r = run("i1.json", R"("devices": [{"id": "leaf9", "gnmi": {"platform": "sonic"}}])");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("devices[0] (leaf9): not a device of the topology"), std::string::npos)
      << r.output;
  r = run("i2.json", R"("devices": [{"id": "leaf0", "gnmi": {"address": "10.0.0.1:8080",
                                                              "platform": "frobos"}}])");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("device leaf0: gnmi.platform \"frobos\" has no profile (known: "),
            std::string::npos)
      << r.output;
  r = run("i3.json", R"("deviceDefaults": [{"role": "DEVICE_ROLE_SPINE",
                          "device": {"gnmi": {"address": "{id}:nope", "platform": "eos"}}}])");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("device spine0: gnmi.address \"spine0:nope\" is not host:port"),
            std::string::npos)
      << r.output;
  r = run("i4.json", R"("devices": [{"id": "leaf1", "interfaceAliases": {"etp9": "Ethernet99"}}])");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("interface_aliases[etp9]: \"Ethernet99\" is not an interface"),
            std::string::npos)
      << r.output;
  // Change safety and fabric settings: errors name the field.
  r = run("c1.json", R"("changeMode": "yolo")");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("changeMode: \"yolo\" is not a mode (auto, approve, shadow)"),
            std::string::npos)
      << r.output;
  r = run("c2.json", R"("changeSafety": {"canary": ["leaf7"]})");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("changeSafety.canary[0]: \"leaf7\" is not a device of the topology"),
            std::string::npos)
      << r.output;
  r = run("c3.json", R"("fabricSettings": [{"thresholds": [{"priority": 3,
      "ecnKminBytes": "400000", "ecnKmaxBytes": "100000"}]}])");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("fabricSettings[0].thresholds[0]: ecnKmaxBytes must not be below "
                          "ecnKminBytes"),
            std::string::npos)
      << r.output;
  r = run("c4.json", R"("changeSafety": {"maxUtilizationDrop": 1.5})");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("changeSafety.maxUtilizationDrop: must lie in 0..1"), std::string::npos)
      << r.output;
  // BGP and Set parts: errors name the device and the session.
  r = run("i6.json", R"("devices": [{"id": "leaf0", "bgp": {"localAs": 65000,
      "routerId": "198.18.255.1", "address": "198.18.0.1", "sessions": [
        {"via": "spine0", "nextHop": "198.18.1.1", "localAddress": "127.0.0.2"},
        {"via": "leaf1", "nextHop": "198.18.1.2", "localAddress": "127.0.0.3"}]}}])");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("device leaf0: bgp.sessions[1]: via leaf1 is not a neighbour of leaf0"),
            std::string::npos)
      << r.output;
  r = run("i7.json", R"("devices": [{"id": "leaf0", "bgp": {"localAs": 65000,
      "routerId": "198.18.255.1", "address": "198.18.0.1",
      "sessions": [{"via": "spine0", "nextHop": "spine0"}]}}])");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("bgp.sessions[0].next_hop: \"spine0\" is not an IPv4 address"),
            std::string::npos)
      << r.output;
  r = run("i9.json", R"("devices": [{"id": "leaf0", "bgp": {"localAs": 65000,
      "routerId": "198.18.255.1", "address": "198.18.0.1", "sessions": [
        {"via": "spine0", "nextHop": "198.18.1.1"}, {"via": "spine1", "nextHop": "198.18.1.5"}]}}])");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("bgp.sessions[0].local_address: required when the device has several"),
            std::string::npos)
      << r.output;
  r = run("i8.json", R"("devices": [{"id": "leaf0", "set": {"address": "127.0.0.1:1",
      "adapter": "frobos"}}])");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("device leaf0: set.adapter: \"frobos\""), std::string::npos) << r.output;
  // A broken user profile is refused, naming the file and the field.
  std::filesystem::create_directory(dir_ + "/prof");
  WriteFile("prof/sonic.json", R"({"name": "sonic", "signals": [{"signal": "pfc-storms",
      "path": "/x", "mode": "SAMPLE", "mark": "UNVERIFIED",
      "leaves": [{"match": ["x"], "canonical": "/y"}]}]})");
  r = run("i5.json", "\"profileDirs\": [\"" + dir_ + "/prof\"]");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(
      r.output.find("prof/sonic.json: signals[0] (pfc-storms).signal: not a catalogue signal"),
      std::string::npos)
      << r.output;
  // The shipped inventory example loads (its management names pointed at
  // closed loopback ports: no traffic leaves the machine); loomctl devices
  // lists the devices with their platforms.
  setenv("LOOM_GNMI_CREDENTIALS", "loom:secret", 1);
  std::string example =
      ReadFile(std::string(LOOM_SOURCE_DIR) + "/deploy/examples/loomd-inventory.json");
  example =
      std::regex_replace(example, std::regex(R"(\{id\}\.mgmt\.example\.net:\d+)"), "127.0.0.1:1");
  Process p;
  const std::string ctl = StartLoomd(p,
                                     {"--config", WriteFile("example.json", example), "--topology",
                                      kTopology, "--db", dir_ + "/inv.db"},
                                     "inv");
  ASSERT_FALSE(ctl.empty());
  auto devs = RunCommand(ctl + "devices");
  EXPECT_EQ(devs.exit_code, 0) << devs.output;
  EXPECT_NE(devs.output.find("127.0.0.1:1 "), std::string::npos) << devs.output;
  EXPECT_NE(devs.output.find("sonic"), std::string::npos) << devs.output;
  EXPECT_NE(devs.output.find("openconfig"), std::string::npos) << devs.output;
  EXPECT_NE(devs.output.find("no host source"), std::string::npos) << devs.output;
  EXPECT_EQ(WEXITSTATUS(p.Stop(SIGINT)), 0);
}

// `loomctl render DEVICE --adapter sonic` previews the SONiC CONFIG_DB Set
// with the next hops the inventory gives (BGP session via -> next hop), with
// a mark per block. The BGP peer is a closed loopback port: nothing leaves
// the machine.
TEST_F(E2eTest, AdapterPreviewUsesTheInventorysNextHops) {
  std::string cfg = WriteFile("sb.json", "{\"topologyPath\": \"" + kTopology + "\", " + R"(
    "devices": [{"id": "leaf0", "bgp": {"localAs": 65000, "routerId": "198.18.255.1",
      "address": "127.0.0.1", "port": 1, "sessions": [
        {"via": "spine0", "nextHop": "198.19.0.1", "localAddress": "127.0.0.2"},
        {"via": "spine1", "nextHop": "198.19.0.3", "localAddress": "127.0.0.3"}]},
      "set": {"address": "127.0.0.1:1", "adapter": "sonic"},
      "routeBudget": {"maxPrefixes": 1000}},
     {"id": "leaf1", "set": {"address": "127.0.0.1:1", "adapter": "openconfig"}}]})");
  // A policy asking for QP split, which neither platform can carry.
  std::string policy = WriteFile("split.json", R"({"defaultAction": {"qpSplit": 2}})");
  Process p;
  const std::string ctl =
      StartLoomd(p, {"--config", cfg, "--db", dir_ + "/sb.db", "--policy", policy}, "sb");
  ASSERT_FALSE(ctl.empty());
  std::string job = WriteFile("job.json", R"({"tenant": "acme", "jobId": "pair",
      "endpoints": ["host000-gpu0", "host002-gpu0"],
      "collective": "COLLECTIVE_PATTERN_POINT_TO_POINT", "trafficClass": 3})");
  auto reg = RunCommand(ctl + "jobs register " + job);
  ASSERT_EQ(reg.exit_code, 0) << reg.output;
  auto got = RunCommand(ctl + "jobs get pair");
  EXPECT_NE(got.output.find("QP split 2 not applied: leaf0 cannot express routes split by "
                            "destination QP (programmed by bgp+gnmi:sonic)"),
            std::string::npos)
      << got.output;
  auto render = RunCommand(ctl + "render leaf0 --adapter sonic");
  EXPECT_EQ(render.exit_code, 0) << render.output;
  EXPECT_NE(render.output.find("STATIC_ROUTE"), std::string::npos) << render.output;
  EXPECT_NE(render.output.find("VALIDATED"), std::string::npos) << render.output;
  EXPECT_TRUE(render.output.find("198.19.0.1") != std::string::npos ||
              render.output.find("198.19.0.3") != std::string::npos)
      << render.output;
  // Real drivers: BGP beside the SONiC Set adapter on leaf0, the OpenConfig
  // Set adapter alone on leaf1 (its target is a closed port: not in sync).
  auto dev = RunCommand(ctl + "device leaf0");
  EXPECT_NE(dev.output.find("bgp+gnmi:sonic"), std::string::npos) << dev.output;
  dev = RunCommand(ctl + "device leaf1");
  EXPECT_NE(dev.output.find("gnmi:openconfig"), std::string::npos) << dev.output;
  EXPECT_EQ(WEXITSTATUS(p.Stop(SIGINT)), 0);
}

TEST_F(E2eTest, ConfigFileIsReadAndFlagsOverrideIt) {
  std::string cfg =
      WriteFile("cfg.json", "{\"topologyPath\": \"" + kTopology + "\", \"databasePath\": \"" +
                                dir_ + "/cfg.db\", \"grpcListen\": \"127.0.0.1:1\"}");
  Process p;
  ASSERT_TRUE(p.Start({LOOMD_PATH, "--config", cfg, "--grpc-listen", "127.0.0.1:0",
                       "--metrics-listen", "127.0.0.1:0", "--ready-file", dir_ + "/r.json"},
                      dir_ + "/cfg.log"));
  ASSERT_TRUE(WaitForFile(dir_ + "/r.json", 20000)) << ReadFile(dir_ + "/cfg.log");
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/cfg.db"));
  EXPECT_EQ(WEXITSTATUS(p.Stop(SIGINT)), 0);
}

TEST_F(E2eTest, LoomctlTablesJsonAndUnreachable) {
  Loomd d(dir_);
  ASSERT_TRUE(d.Start()) << d.Log();
  auto topo = d.Ctl("topology show");
  EXPECT_EQ(topo.exit_code, 0);
  EXPECT_NE(topo.output.find("topology: small"), std::string::npos) << topo.output;
  auto links = d.Ctl("--json links list --device spine0");
  EXPECT_EQ(links.exit_code, 0);
  EXPECT_NE(links.output.find("\"links\""), std::string::npos) << links.output;
  auto get = d.Ctl("links get nope");
  EXPECT_EQ(get.exit_code, 1);
  EXPECT_NE(get.output.find("NOT_FOUND"), std::string::npos) << get.output;
  auto drain = d.Ctl("links drain " + kLink);
  EXPECT_EQ(drain.exit_code, 2);  // --reason is required
  auto job = d.Ctl("jobs get nope");
  EXPECT_EQ(job.exit_code, 1);
  auto down = RunCommand(std::string(LOOMCTL_PATH) + " --server 127.0.0.1:1 --timeout 1 jobs list");
  EXPECT_EQ(down.exit_code, 3);
  EXPECT_NE(down.output.find("cannot reach loomd at 127.0.0.1:1"), std::string::npos)
      << down.output;
}

}  // namespace
}  // namespace loom::testing
