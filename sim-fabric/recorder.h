// Time-series recorder and report writers for loom-fabric.
//
// Samples a Fabric through its public counter interface (never its
// internals): per egress interface utilisation over the sample period, queue
// depth (all priorities) and pause state; per-QP DCQCN and send rates. Writes
// CSV files and two hand-written SVG pictures (link-utilisation heatmap,
// queue-depth plot). Triggered by the caller after each Fabric step (Sample()
// is cheap until a sample is due). Single-threaded, like the Fabric.
#ifndef LOOM_SIM_FABRIC_RECORDER_H_
#define LOOM_SIM_FABRIC_RECORDER_H_

#include <string>
#include <vector>

#include "sim-fabric/fabric.h"

namespace loom::sim {

class Recorder {
 public:
  // Records switch egress interfaces (NIC ports too when `include_nics`) and at
  // most `max_qps` QPs.
  Recorder(Fabric* fabric, TimeNs sample_ns, bool include_nics = false, int max_qps = 64);
  // Call after Fabric::Step(); takes a sample when one is due.
  void Sample();
  bool WriteLinksCsv(const std::string& path, std::string* error) const;
  bool WriteQpsCsv(const std::string& path, std::string* error) const;
  // Per-queue depth over time: rows for the queues (device, interface, priority) that are
  // not empty at a sample (a queue absent at a sample time was empty).
  bool WriteQueuesCsv(const std::string& path, std::string* error) const;
  bool WriteHeatmapSvg(const std::string& path, std::string* error) const;
  bool WriteQueueSvg(const std::string& path, std::string* error) const;
  int samples() const { return static_cast<int>(times_.size()); }

 private:
  struct Series {
    std::string device, iface;
    double last_octets = 0;
    std::vector<float> util, depth;
    std::vector<uint8_t> paused;
  };
  Fabric* fab_;
  TimeNs sample_ns_, next_ = 0, last_t_ = 0;
  int max_qps_;
  std::vector<TimeNs> times_;
  std::vector<Series> links_;
  struct QpRow {
    TimeNs t;
    int qp;
    std::string job;
    double rate, target, send, alpha;
  };
  std::vector<QpRow> qp_rows_;
  struct QueueRow {
    TimeNs t;
    int link, priority;
    float depth;
  };
  std::vector<QueueRow> queue_rows_;
};

}  // namespace loom::sim

#endif  // LOOM_SIM_FABRIC_RECORDER_H_
