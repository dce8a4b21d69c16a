#include "api/services/metrics.h"

#include <dirent.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/metric_family.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/text.h"

namespace loom::api {

GrpcMetrics::GrpcMetrics(prometheus::Registry& registry, std::set<std::string> known_methods)
    : known_methods_(std::move(known_methods)),
      requests_(prometheus::BuildCounter()
                    .Name("loom_grpc_requests_total")
                    .Help("gRPC requests handled, by method and status code")
                    .Register(registry)),
      latency_(prometheus::BuildHistogram()
                   .Name("loom_grpc_request_duration_seconds")
                   .Help("gRPC request latency (for streams: the stream's lifetime), by method")
                   .Register(registry)) {}

void GrpcMetrics::Record(const std::string& method, int code, double seconds) {
  static const std::string kUnknown = "unknown";
  const std::string& m = known_methods_.count(method) ? method : kUnknown;
  requests_.Add({{"method", m}, {"code", loom::StatusCodeName(code)}}).Increment();
  static const prometheus::Histogram::BucketBoundaries kBuckets{
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  latency_.Add({{"method", m}}, kBuckets).Observe(seconds);
}

namespace {

class MetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(grpc::experimental::ServerRpcInfo* info, GrpcMetrics* metrics)
      : method_(info->method() ? info->method() : ""),
        metrics_(metrics),
        start_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      grpc::Status status = methods->GetSendStatus();
      double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      metrics_->Record(method_, status.error_code(), secs);
    }
    methods->Proceed();
  }

 private:
  std::string method_;
  GrpcMetrics* metrics_;
  std::chrono::steady_clock::time_point start_;
};

// Reads /proc/self/stat fields: utime, stime (clock ticks), vsize, rss (pages).
struct ProcStat {
  double cpu_seconds = 0;
  double virtual_bytes = 0;
  double resident_bytes = 0;
  double start_time_seconds = 0;
};

ProcStat ReadProcStat() {
  ProcStat ps;
  std::ifstream f("/proc/self/stat");
  std::string content((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto rparen = content.rfind(')');
  if (rparen == std::string::npos) return ps;
  std::istringstream in(content.substr(rparen + 2));
  std::vector<std::string> fields;
  std::string tok;
  while (in >> tok) fields.push_back(tok);
  // fields[0] is field 3 (state); utime=14, stime=15, starttime=22, vsize=23, rss=24.
  auto field = [&](int n) -> double {
    size_t idx = static_cast<size_t>(n - 3);
    return idx < fields.size() ? std::stod(fields[idx]) : 0.0;
  };
  double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  ps.cpu_seconds = (field(14) + field(15)) / ticks;
  ps.virtual_bytes = field(23);
  ps.resident_bytes = field(24) * static_cast<double>(sysconf(_SC_PAGESIZE));
  double boot = 0;
  std::ifstream st("/proc/stat");
  std::string line;
  while (std::getline(st, line)) {
    if (line.rfind("btime ", 0) == 0) boot = std::stod(line.substr(6));
  }
  ps.start_time_seconds = boot + field(22) / ticks;
  return ps;
}

double OpenFds() {
  double n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(d);
  }
  return n - 1;  // the directory stream itself
}

double MaxFds() {
  std::ifstream f("/proc/self/limits");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("Max open files", 0) == 0) {
      std::istringstream in(line.substr(14));
      std::string soft;
      in >> soft;
      return soft == "unlimited" ? 0 : std::stod(soft);
    }
  }
  return 0;
}

prometheus::MetricFamily Gauge(const std::string& name, const std::string& help, double v,
                               prometheus::MetricType type = prometheus::MetricType::Gauge) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = v;
  } else {
    m.gauge.value = v;
  }
  f.metric.push_back(m);
  return f;
}

class ProcessCollector : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    ProcStat ps = ReadProcStat();
    return {
        Gauge("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
              ps.cpu_seconds, prometheus::MetricType::Counter),
        Gauge("process_resident_memory_bytes", "Resident memory size in bytes.", ps.resident_bytes),
        Gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", ps.virtual_bytes),
        Gauge("process_start_time_seconds",
              "Start time of the process since unix epoch in seconds.", ps.start_time_seconds),
        Gauge("process_open_fds", "Number of open file descriptors.", OpenFds()),
        Gauge("process_max_fds", "Maximum number of open file descriptors.", MaxFds()),
    };
  }
};

}  // namespace

grpc::experimental::Interceptor* GrpcMetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new MetricsInterceptor(info, metrics_);
}

void RegisterProcessMetrics(prometheus::Registry& registry, const std::string& version,
                            const std::string& git_commit) {
  prometheus::BuildGauge()
      .Name("loom_build_info")
      .Help("Build information; the value is always 1")
      .Register(registry)
      .Add({{"version", version}, {"git_commit", git_commit}, {"compiler", __VERSION__}})
      .Set(1);
}

std::shared_ptr<prometheus::Collectable> MakeProcessCollector() {
  return std::make_shared<ProcessCollector>();
}

}  // namespace loom::api
