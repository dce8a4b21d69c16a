// The "loom" platform adapter: Loom's own `loom:` schema (gnmi_config.h),
// spoken by loom-fabric's default personality. It wraps the codec: a full
// overwrite (EncodeSetRequest with no current state: each part's container
// deleted, every entry replaced), one block per part, marked SOURCED (the
// schema is documented in southbound/README.md and implemented by the
// emulator's target; no YANG module exists for it). Parts that fail the
// codec's validation are left out and reported; the PFC watchdog and
// disabled interfaces have no path in the schema and are reported too.
//
// Role, trigger, thread: see set_adapter.h (immutable, const methods).
#include <string>

#include "southbound/gnmi/adapter_util.h"
#include "southbound/gnmi/gnmi_config.h"
#include "southbound/gnmi/set_adapter.h"

namespace loom::southbound::gnmi {

namespace v1 = loom::v1;

namespace {

bool StartsWith(const ::gnmi::Path& path, const ::gnmi::Path& container) {
  if (path.elem_size() < container.elem_size()) return false;
  for (int i = 0; i < container.elem_size(); ++i)
    if (path.elem(i).name() != container.elem(i).name()) return false;
  return true;
}

class LoomAdapter final : public SetAdapter {
 public:
  LoomAdapter() {
    caps_.colored_routes = true;
    caps_.colored_routes_how = "loom /colors and /routes entries (color per route, backup color)";
    caps_.backup_colors = true;
    caps_.per_class_routes = true;
    caps_.qp_split_routes = true;
    caps_.glb_weights = true;
    caps_.dlb_mode = true;
    caps_.dlb_timers = true;
    caps_.dlb_quality_bands = true;
    caps_.alb_tables = true;
    caps_.spray_rules = true;
    caps_.ecn_thresholds = true;
    caps_.pfc_thresholds = true;
    caps_.pfc_watchdog = false;
    caps_.disable_interfaces = false;
    caps_.read_back = true;
  }

  std::string Name() const override { return "loom"; }
  const SetCapabilities& capabilities() const override { return caps_; }

  AdapterOutput Encode(const v1::DeviceState& desired, const AdapterContext& ctx) const override {
    AdapterOutput out;
    PartMask parts = 0;
    for (Part p : kEveryPart) {
      Status s = ValidatePart(desired, p);
      if (s.ok()) {
        parts |= Mask(p);
      } else {
        adapter::Refuse(&out, PartName(p), "", s);
      }
    }
    if (desired.has_pfc_watchdog()) {
      adapter::Refuse(&out, "pfc_watchdog", "",
                      Status(StatusCode::kUnimplemented,
                             "the loom schema has no PFC watchdog path (southbound/README.md)"));
    }
    for (const auto& i : desired.disabled_interfaces()) {
      adapter::Refuse(
          &out, "disabled_interfaces", i,
          Status(StatusCode::kUnimplemented, "the loom schema has no interface admin-state path"));
    }
    const std::string target = ctx.target.empty() ? desired.device() : ctx.target;
    out.request = EncodeSetRequest(nullptr, desired, parts, target);
    for (Part p : kEveryPart) {
      if (!(parts & Mask(p))) continue;
      SetBlock b;
      b.part = PartName(p);
      ::gnmi::Path container = PartPath(p);
      b.title = PathString(::gnmi::Path(), container);
      b.mark = Mark::kSourced;
      b.source =
          "loom schema, southbound/README.md \"gNMI Set: the loom schema\" (loom-fabric's "
          "target applies it with the same codec)";
      for (int i = 0; i < out.request.delete__size(); ++i)
        if (StartsWith(out.request.delete_(i), container)) b.deletes.push_back(i);
      for (int i = 0; i < out.request.replace_size(); ++i)
        if (StartsWith(out.request.replace(i).path(), container)) b.replaces.push_back(i);
      out.blocks.push_back(std::move(b));
    }
    return out;
  }

  ::gnmi::GetRequest MakeGetRequest(const AdapterContext& ctx) const override {
    return gnmi::MakeGetRequest(kAllParts, ctx.target);
  }

  Status ReadBack(const ::gnmi::GetResponse& response, const AdapterContext&,
                  v1::DeviceState* state) const override {
    return DecodeGetResponse(response, state);
  }

 private:
  SetCapabilities caps_;
};

}  // namespace

std::unique_ptr<SetAdapter> MakeLoomAdapter() { return std::make_unique<LoomAdapter>(); }

}  // namespace loom::southbound::gnmi
