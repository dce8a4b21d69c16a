#include "telemetry/sink.h"

#include <utility>

#include "telemetry/path.h"

namespace loom::telemetry {

size_t CoalescingSink::OnNotification(const std::string& target, const gnmi::Notification& n,
                                      TimeNs arrival_ns) {
  // The session's device, whatever the prefix target says (trust rule: a
  // notification speaks for the device of the session it arrived on).
  const std::string& tgt = target;
  auto put = [&](const gnmi::Path& p, const gnmi::TypedValue* v) {
    gnmi::Path full = JoinPath(n.prefix(), p);
    full.clear_target();
    std::string text = FormatPath(full);
    std::string key = tgt + '\n' + text;
    PathValue& pv = pending_[key];
    if (pv.path.empty()) {
      pv.target = tgt;
      pv.path = std::move(text);
    }
    if (v != nullptr) {
      pv.value = *v;
    } else {
      pv.value.Clear();
    }
    pv.deleted = v == nullptr;
    pv.timestamp_ns = n.timestamp();
    pv.arrival_ns = arrival_ns;
  };
  std::lock_guard<std::mutex> lock(mu_);
  for (const gnmi::Path& d : n.delete_()) put(d, nullptr);
  for (const gnmi::Update& u : n.update()) put(u.path(), &u.val());
  updates_received_ += static_cast<uint64_t>(n.update_size() + n.delete__size());
  return 0;
}

std::vector<PathValue> CoalescingSink::TakeSnapshot() {
  std::unordered_map<std::string, PathValue> taken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    taken.swap(pending_);
  }
  std::vector<PathValue> out;
  out.reserve(taken.size());
  for (auto& [k, v] : taken) out.push_back(std::move(v));
  return out;
}

uint64_t CoalescingSink::updates_received() const {
  std::lock_guard<std::mutex> lock(mu_);
  return updates_received_;
}

}  // namespace loom::telemetry
