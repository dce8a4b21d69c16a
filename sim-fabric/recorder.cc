#include "sim-fabric/recorder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

namespace loom::sim {

Recorder::Recorder(Fabric* fabric, TimeNs sample_ns, bool include_nics, int max_qps)
    : fab_(fabric), sample_ns_(std::max<TimeNs>(sample_ns, fabric->step_ns())), max_qps_(max_qps) {
  for (const auto& dev : fab_->Devices()) {
    if (!include_nics && !fab_->GetSwitchConfig(dev)) continue;
    for (const auto& iface : fab_->Interfaces(dev)) {
      Series s;
      s.device = dev;
      s.iface = iface;
      links_.push_back(std::move(s));
    }
  }
  next_ = fab_->now() + sample_ns_;
  last_t_ = fab_->now();
}

void Recorder::Sample() {
  const TimeNs t = fab_->now();
  if (t < next_) return;
  next_ = t + sample_ns_;
  const double span = static_cast<double>(t - last_t_);
  last_t_ = t;
  times_.push_back(t);
  for (size_t li = 0; li < links_.size(); ++li) {
    auto& s = links_[li];
    InterfaceCounters ic;
    (void)fab_->GetInterfaceCounters(s.device, s.iface, &ic);
    const double bytes = static_cast<double>(ic.out_octets) - s.last_octets;
    s.last_octets = static_cast<double>(ic.out_octets);
    s.util.push_back(static_cast<float>(
        span > 0 && ic.capacity_bps > 0 ? bytes * 8e9 / (span * ic.capacity_bps) : 0));
    double depth = 0;
    bool paused = false;
    for (int q = 0; q < kPriorities; ++q) {
      QueueCounters qc;
      (void)fab_->GetQueueCounters(s.device, s.iface, q, &qc);
      depth += static_cast<double>(qc.current_depth_bytes);
      if (qc.current_depth_bytes > 0) {
        queue_rows_.push_back(
            {t, static_cast<int>(li), q, static_cast<float>(qc.current_depth_bytes)});
      }
      PfcCounters pc;
      (void)fab_->GetPfcCounters(s.device, s.iface, q, &pc);
      paused = paused || pc.paused;
    }
    s.depth.push_back(static_cast<float>(depth));
    s.paused.push_back(paused ? 1 : 0);
  }
  const int n = std::min(max_qps_, fab_->qp_count());
  for (int i = 0; i < n; ++i) {
    QpInfo q = fab_->GetQp(i);
    qp_rows_.push_back({t, i, q.job, q.rate_bps, q.target_bps, q.send_bps, q.alpha});
  }
}

namespace {
bool Open(const std::string& path, std::ofstream* out, std::string* error) {
  out->open(path);
  if (!*out) {
    *error = "cannot write " + path;
    return false;
  }
  return true;
}

// Blue (idle) -> yellow -> red (full).
std::string Heat(double u) {
  u = std::clamp(u, 0.0, 1.0);
  int r, g, b;
  if (u < 0.5) {
    const double k = u / 0.5;
    r = static_cast<int>(30 + k * 225);
    g = static_cast<int>(60 + k * 170);
    b = static_cast<int>(140 - k * 100);
  } else {
    const double k = (u - 0.5) / 0.5;
    r = 255;
    g = static_cast<int>(230 - k * 200);
    b = static_cast<int>(40 - k * 20);
  }
  char buf[16];
  std::snprintf(buf, sizeof(buf), "#%02x%02x%02x", r, g, b);
  return buf;
}
}  // namespace

bool Recorder::WriteLinksCsv(const std::string& path, std::string* error) const {
  std::ofstream out;
  if (!Open(path, &out, error)) return false;
  out << "time_us,device,interface,utilization,queue_bytes,paused\n";
  for (size_t i = 0; i < times_.size(); ++i) {
    for (const auto& s : links_) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.4f,%.0f,%d", s.util[i], s.depth[i], s.paused[i]);
      out << times_[i] / 1000.0 << ',' << s.device << ',' << s.iface << ',' << buf << '\n';
    }
  }
  return true;
}

bool Recorder::WriteQueuesCsv(const std::string& path, std::string* error) const {
  std::ofstream out;
  if (!Open(path, &out, error)) return false;
  out << "time_us,device,interface,priority,depth_bytes\n";
  for (const auto& r : queue_rows_) {
    const auto& s = links_[static_cast<size_t>(r.link)];
    out << r.t / 1000.0 << ',' << s.device << ',' << s.iface << ',' << r.priority << ','
        << static_cast<double>(r.depth) << '\n';
  }
  return true;
}

bool Recorder::WriteQpsCsv(const std::string& path, std::string* error) const {
  std::ofstream out;
  if (!Open(path, &out, error)) return false;
  out << "time_us,qp,job,rate_gbps,target_gbps,send_gbps,alpha\n";
  for (const auto& r : qp_rows_) {
    // An algorithm without a target rate or alpha (congestion_control.h) leaves them empty.
    char target[32] = "", alpha[32] = "", buf[128];
    if (!std::isnan(r.target)) std::snprintf(target, sizeof(target), "%.3f", r.target / 1e9);
    if (!std::isnan(r.alpha)) std::snprintf(alpha, sizeof(alpha), "%.5f", r.alpha);
    std::snprintf(buf, sizeof(buf), "%.3f,%s,%.3f,%s", r.rate / 1e9, target, r.send / 1e9, alpha);
    out << r.t / 1000.0 << ',' << r.qp << ',' << r.job << ',' << buf << '\n';
  }
  return true;
}

bool Recorder::WriteHeatmapSvg(const std::string& path, std::string* error) const {
  std::ofstream out;
  if (!Open(path, &out, error)) return false;
  // Rows: interfaces that carried traffic (busiest first, at most 200).
  std::vector<std::pair<double, int>> rows;
  for (size_t i = 0; i < links_.size(); ++i) {
    double sum = 0;
    for (float u : links_[i].util) sum += u;
    if (sum > 0) rows.push_back({-sum, static_cast<int>(i)});
  }
  std::sort(rows.begin(), rows.end());
  if (rows.size() > 200) rows.resize(200);
  std::sort(rows.begin(), rows.end(), [](auto a, auto b) { return a.second < b.second; });
  const int cols = std::min<int>(static_cast<int>(times_.size()), 400);
  const double per_col =
      times_.empty() ? 1 : static_cast<double>(times_.size()) / std::max(1, cols);
  const int cw = 2, rh = 8, left = 220, top = 40;
  const int w = left + cols * cw + 80, h = top + static_cast<int>(rows.size()) * rh + 50;
  out << "<svg xmlns='http://www.w3.org/2000/svg' width='" << w << "' height='" << h
      << "' font-family='monospace' font-size='8'>\n<rect width='100%' height='100%' "
         "fill='white'/>\n"
      << "<text x='10' y='20' font-size='14'>Link utilisation over time (egress, busiest "
      << rows.size() << " interfaces)</text>\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    const Series& s = links_[rows[r].second];
    const int y = top + static_cast<int>(r) * rh;
    out << "<text x='" << left - 4 << "' y='" << y + rh - 1 << "' text-anchor='end'>" << s.device
        << ":" << s.iface << "</text>\n";
    for (int c = 0; c < cols; ++c) {
      const size_t a = static_cast<size_t>(c * per_col),
                   b = std::max(a + 1, static_cast<size_t>((c + 1) * per_col));
      double u = 0;
      for (size_t k = a; k < b && k < s.util.size(); ++k) u += s.util[k];
      u /= static_cast<double>(b - a);
      out << "<rect x='" << left + c * cw << "' y='" << y << "' width='" << cw << "' height='" << rh
          << "' fill='" << Heat(u) << "'/>";
    }
    out << "\n";
  }
  const int ly = top + static_cast<int>(rows.size()) * rh + 15;
  const double end_us = times_.empty() ? 0 : times_.back() / 1000.0;
  out << "<text x='" << left << "' y='" << ly << "'>0 us</text><text x='" << left + cols * cw
      << "' y='" << ly << "' text-anchor='end'>" << end_us << " us</text>\n";
  for (int i = 0; i <= 10; ++i) {
    out << "<rect x='" << left + i * 20 << "' y='" << ly + 8 << "' width='20' height='8' fill='"
        << Heat(i / 10.0) << "'/>";
  }
  out << "<text x='" << left + 230 << "' y='" << ly + 16 << "'>0% .. 100% utilisation</text>\n";
  out << "</svg>\n";
  return true;
}

bool Recorder::WriteQueueSvg(const std::string& path, std::string* error) const {
  std::ofstream out;
  if (!Open(path, &out, error)) return false;
  std::vector<std::pair<double, int>> top;
  double ymax = 1;
  for (size_t i = 0; i < links_.size(); ++i) {
    double m = 0;
    for (float d : links_[i].depth) m = std::max(m, static_cast<double>(d));
    if (m > 0) top.push_back({-m, static_cast<int>(i)});
    ymax = std::max(ymax, m);
  }
  std::sort(top.begin(), top.end());
  if (top.size() > 8) top.resize(8);
  const int w = 900, h = 420, left = 80, right = 260, pt = 40, pb = 40;
  const double pw = w - left - right, ph = h - pt - pb;
  const double tmax = times_.empty() ? 1 : static_cast<double>(times_.back());
  static const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                  "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
  out << "<svg xmlns='http://www.w3.org/2000/svg' width='" << w << "' height='" << h
      << "' font-family='monospace' font-size='10'>\n<rect width='100%' height='100%' "
         "fill='white'/>\n<text x='10' y='20' font-size='14'>Queue depth (deepest "
      << top.size() << " egress queues)</text>\n"
      << "<line x1='" << left << "' y1='" << pt + ph << "' x2='" << left + pw << "' y2='" << pt + ph
      << "' stroke='black'/><line x1='" << left << "' y1='" << pt << "' x2='" << left << "' y2='"
      << pt + ph << "' stroke='black'/>\n";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.0f KB", ymax / 1e3);
  out << "<text x='" << left - 4 << "' y='" << pt + 4 << "' text-anchor='end'>" << buf
      << "</text><text x='" << left - 4 << "' y='" << pt + ph << "' text-anchor='end'>0</text>\n"
      << "<text x='" << left + pw << "' y='" << pt + ph + 15 << "' text-anchor='end'>"
      << tmax / 1000.0 << " us</text>\n";
  for (size_t k = 0; k < top.size(); ++k) {
    const Series& s = links_[top[k].second];
    out << "<polyline fill='none' stroke='" << kColors[k] << "' points='";
    const size_t stride = std::max<size_t>(1, times_.size() / 800);
    for (size_t i = 0; i < times_.size(); i += stride) {
      const double x = left + pw * static_cast<double>(times_[i]) / tmax;
      const double y = pt + ph - ph * s.depth[i] / ymax;
      std::snprintf(buf, sizeof(buf), "%.1f,%.1f ", x, y);
      out << buf;
    }
    out << "'/>\n<text x='" << left + pw + 10 << "' y='" << pt + 12 * (k + 1) << "' fill='"
        << kColors[k] << "'>" << s.device << ":" << s.iface << "</text>\n";
  }
  out << "</svg>\n";
  return true;
}

}  // namespace loom::sim
