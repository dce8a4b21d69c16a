// loom-nic-agent: serves a host's RDMA NIC counters (Linux sysfs) over gNMI
// for Loom's collector. See telemetry/nic_agent/nic_agent.h and the
// "loom-nic-agent" section of telemetry/README.md.
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "common/flags.h"
#include "common/log.h"
#include "telemetry/nic_agent/nic_agent.h"

namespace {

constexpr char kUsage[] =
    "usage: loom-nic-agent --listen HOST:PORT --nic DEVICE_ID=RDMADEV:PORT:NETDEV[:IFNAME] ...\n"
    "                      [--sysfs-root DIR] [--ready-file FILE] [--log-level LEVEL]\n"
    "Serves RDMA NIC counters read from sysfs over gNMI (Subscribe STREAM/ONCE, encoding\n"
    "PROTO) as Loom's telemetry catalogue; profile telemetry/profiles/host.json.\n"
    "  --listen HOST:PORT  gRPC listen address (port 0 = any free port)\n"
    "  --nic SPEC          one NIC, repeatable: DEVICE_ID (topology device id = gNMI\n"
    "                      target name) = RDMADEV (/sys/class/infiniband/<RDMADEV>) :\n"
    "                      PORT (its port number) : NETDEV (/sys/class/net/<NETDEV>) [:\n"
    "                      IFNAME (topology interface name, default NETDEV)]\n"
    "                      e.g. --nic host07-nic0=mlx5_0:1:ens1f0np0:eth0\n"
    "  --sysfs-root DIR    sysfs mount point (default /sys)\n"
    "  --ready-file FILE   once listening, write {\"port\": N} to FILE\n"
    "  --log-level LEVEL   debug, info (default), warn, error\n"
    "  --help              this text\n"
    "Stops on SIGINT/SIGTERM.\n";

bool WriteReadyFile(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return false;
  std::fprintf(f, "{\"port\": %d}\n", port);
  return std::fclose(f) == 0 && std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  // --nic repeats; Flags keeps one value per name, so take them out first.
  std::vector<std::string> nic_specs;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--nic") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "loom-nic-agent: --nic needs a value\n%s", kUsage);
        return 2;
      }
      nic_specs.push_back(argv[++i]);
    } else if (a.rfind("--nic=", 0) == 0) {
      nic_specs.push_back(a.substr(6));
    } else {
      rest.push_back(argv[i]);
    }
  }
  loom::Flags flags;
  std::string error;
  if (!flags.Parse(static_cast<int>(rest.size()), rest.data(), 1,
                   {"listen", "sysfs-root", "ready-file", "log-level"}, {"help"}, &error)) {
    std::fprintf(stderr, "loom-nic-agent: %s\n%s", error.c_str(), kUsage);
    return 2;
  }
  if (flags.Has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!flags.positional().empty() || !flags.Has("listen") || nic_specs.empty()) {
    std::fprintf(stderr, "loom-nic-agent: --listen and at least one --nic are required\n%s",
                 kUsage);
    return 2;
  }
  if (flags.Has("log-level")) {
    loom::LogLevel level;
    if (!loom::ParseLogLevel(flags.Get("log-level"), &level)) {
      std::fprintf(stderr, "loom-nic-agent: bad --log-level %s\n", flags.Get("log-level").c_str());
      return 2;
    }
    loom::SetLogLevel(level);
  }
  loom::telemetry::NicAgentOptions options;
  options.listen_address = flags.Get("listen");
  options.sysfs_root = flags.Get("sysfs-root", "/sys");
  for (const std::string& spec : nic_specs) {
    loom::telemetry::NicSpec nic;
    const loom::Status s = loom::telemetry::ParseNicSpec(spec, &nic);
    if (!s.ok()) {
      std::fprintf(stderr, "loom-nic-agent: %s\n", s.message().c_str());
      return 2;
    }
    options.nics.push_back(nic);
  }

  // SIGINT/SIGTERM are taken with sigwait on this thread: block them before
  // any thread starts so every gRPC and sampler thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  loom::telemetry::NicAgent agent(options);
  const loom::Status s = agent.Start();
  if (!s.ok()) {
    std::fprintf(stderr, "loom-nic-agent: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("loom-nic-agent listening on %s (port %d), %zu NICs\n",
              options.listen_address.c_str(), agent.port(), options.nics.size());
  std::fflush(stdout);
  if (flags.Has("ready-file") && !WriteReadyFile(flags.Get("ready-file"), agent.port())) {
    std::fprintf(stderr, "loom-nic-agent: cannot write %s\n", flags.Get("ready-file").c_str());
    return 1;
  }
  int sig = 0;
  sigwait(&signals, &sig);
  LOG_INFO("nic agent stopping").With("signal", sig);
  agent.Stop();
  const loom::telemetry::NicAgentStats st = agent.Stats();
  LOG_INFO("nic agent stopped")
      .With("samples", st.samples)
      .With("read_errors", st.read_errors)
      .With("notifications", st.notifications);
  return 0;
}
