// gNMI Set platform adapters: a desired loom.v1.DeviceState translated into
// the SetRequest a switch OS really accepts, with what the platform can and
// cannot express said up front.
//
// One adapter per platform (one file each, beside this header):
// - "loom"        adapter_loom.cc: Loom's own `loom:` schema (gnmi_config.h),
//                 what loom-fabric's default personality speaks;
// - "sonic"       adapter_sonic.cc: CONFIG_DB through SONiC's gNMI server,
//                 origin `sonic-db`, paths /CONFIG_DB/localhost/<TABLE>/<key>
//                 (STATIC_ROUTE, ARS_*, PFC_WD, WRED_PROFILE + QUEUE);
// - "openconfig"  adapter_openconfig.cc: OpenConfig static routes (with
//                 wecmp-weight) and qos queue-management profiles; no model
//                 exists for DLB, ALB, spraying or the PFC watchdog.
// EOS and Junos have no adapter: platforms.md documents neither a native gNMI
// Set schema (EOS `cli` origin takes config lines whose syntax is NC; Junos
// gNMI Set is NC). EOS accepts origin `openconfig`, so the openconfig adapter
// is the candidate there, unverified.
//
// Every block of the output carries a Mark:
// - VALIDATED: the block's RFC 7951 document passes yanglint against the
//   public YANG modules of reference/yang (tests/southbound/gnmi/
//   set_adapter_test.cc runs it);
// - SOURCED: the path and fields are cited from platforms.md or a public
//   document (the block's `source`), but no model here can check them;
// - UNVERIFIED: neither.
// A DeviceState part (or entry) the adapter cannot express is listed in
// `unexpressed` with the reason; it is never silently dropped. Callers
// (placement, programming, drivers) read `capabilities()` first so they do
// not ask a device for what it cannot do.
//
// Role: pure translation, used by AdapterSetDriver (adapter_driver.h), by
// loomd's device limits (controller/te/device_limits.h), by GetDeviceState's preview (`loomctl
// render DEVICE
// --adapter sonic`) and by tests. Trigger: any caller. Thread: adapters are immutable after
// construction; every method is const and thread-safe. Costs are
// O(state size x log + topology links).
#ifndef LOOM_SOUTHBOUND_GNMI_SET_ADAPTER_H_
#define LOOM_SOUTHBOUND_GNMI_SET_ADAPTER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "gnmi/gnmi.pb.h"
#include "loom/v1/device_state.pb.h"
#include "loom/v1/topology.pb.h"

namespace loom::southbound::gnmi {

enum class Mark { kValidated, kSourced, kUnverified };
// "VALIDATED", "SOURCED", "UNVERIFIED".
const char* MarkName(Mark mark);

// What a platform can express. Fields are what DeviceState asks for.
struct SetCapabilities {
  // Colors + colored routes, and how (e.g. "static route per prefix, ECMP
  // over the color's next hops").
  bool colored_routes = false;
  std::string colored_routes_how;
  // A backup color taken when the primary has no live member.
  bool backup_colors = false;
  // Different colors per traffic class of one destination.
  bool per_class_routes = false;
  // Routes split by destination QP (policy qp_split). No real OS can.
  bool qp_split_routes = false;
  // GLB weights (weighted ECMP per destination).
  bool glb_weights = false;
  // DLB mode and timers (flowlet inactivity), and the quality-band knobs
  // (load weight, load/queue thresholds).
  bool dlb_mode = false;
  bool dlb_timers = false;
  bool dlb_quality_bands = false;
  bool alb_tables = false;
  bool spray_rules = false;
  // ECN (kmin, kmax, pmax) and PFC (xoff, xon) thresholds.
  bool ecn_thresholds = false;
  bool pfc_thresholds = false;
  bool pfc_watchdog = false;
  // Interfaces shut by Loom (DeviceState.disabled_interfaces).
  bool disable_interfaces = false;
  // Get can be decoded back into DeviceState (which parts: ReadBack()).
  bool read_back = false;
};

// Device facts the topology does not hold.
struct AdapterContext {
  // Topology: interface names of the device's links (next hops, "every
  // port", DLB members). May be null: then entries that need it are
  // unexpressed.
  const loom::v1::Topology* topology = nullptr;
  // Neighbor device id -> IP address the device forwards to (the far end of
  // their link; the inventory's BgpColorSession.next_hop of that via).
  std::map<std::string, std::string> next_hop_addresses;
  // gNMI Path.target (SONiC: ignored, the DB is in the path); empty = device id.
  std::string target;
  // VRF / network instance of the routes.
  std::string vrf = "default";
  // OpenConfig static protocol instance name.
  std::string static_protocol_name = "DEFAULT";
};

// One list entry of an RFC 7951 document: `list_path` names the members from
// the module-qualified top ({"sonic-pfcwd:sonic-pfcwd", "PFC_WD",
// "PFC_WD_LIST"}), `entry_json` is the entry object. YangDocument() nests
// and merges them.
struct YangEntry {
  std::vector<std::string> list_path;
  std::string entry_json;
};

// One group of Set operations that belong together (one table entry, one
// config container), with its mark.
struct SetBlock {
  std::string part;   // DeviceState part: "routes", "dlb", "pfc_watchdog", ...
  std::string title;  // "STATIC_ROUTE default|198.18.0.9/32"
  Mark mark = Mark::kUnverified;
  std::string source;  // What the mark rests on (document, YANG module).
  std::string note;    // What is assumed ("queue named by priority: NC").
  // Indices into SetRequest.delete / .replace / .update.
  std::vector<int> deletes, replaces, updates;
  // The block as RFC 7951 list entries, typed as the YANG model says, for
  // yanglint (VALIDATED blocks). Empty when no model here applies.
  std::vector<YangEntry> yang;
};

// A DeviceState part (or one entry of it) the adapter did not send, or sent
// without some of its meaning (`partial`), and why.
struct Unexpressed {
  std::string part;
  std::string entry;  // "" = the whole part.
  Status status;      // UNIMPLEMENTED (no model) or INVALID_ARGUMENT (value).
  bool partial = false;
};

struct AdapterOutput {
  ::gnmi::SetRequest request;
  std::vector<SetBlock> blocks;
  std::vector<Unexpressed> unexpressed;
  // Entries the YANG document needs for leafrefs but the adapter does not
  // send (SONiC PORT rows of the ports it references). Empty when none.
  std::vector<YangEntry> yang_context;
  // The first refusal whose status is not UNIMPLEMENTED-by-capability, for
  // callers that want one error (OK when every part is expressed).
  Status FirstError() const;
};

class SetAdapter {
 public:
  virtual ~SetAdapter() = default;
  // "loom", "sonic", "openconfig".
  virtual std::string Name() const = 0;
  virtual const SetCapabilities& capabilities() const = 0;
  // The SetRequest that makes the device run `desired` for every part the
  // platform can express (a full overwrite of Loom's entries: the
  // platform's own entries outside Loom's names are left alone).
  virtual AdapterOutput Encode(const loom::v1::DeviceState& desired,
                               const AdapterContext& ctx) const = 0;
  // The Get that reads back what Encode programs.
  virtual ::gnmi::GetRequest MakeGetRequest(const AdapterContext& ctx) const = 0;
  // Parts of DeviceState rebuilt from a GetResponse (device kept, other
  // fields cleared). What cannot be rebuilt (a static route's color) is
  // said in the adapter's file; UNIMPLEMENTED when nothing can.
  virtual Status ReadBack(const ::gnmi::GetResponse& response, const AdapterContext& ctx,
                          loom::v1::DeviceState* state) const = 0;
};

std::unique_ptr<SetAdapter> MakeLoomAdapter();
std::unique_ptr<SetAdapter> MakeSonicAdapter();
std::unique_ptr<SetAdapter> MakeOpenConfigAdapter();
// By name ("loom", "sonic", "openconfig"); nullptr otherwise ("render-only"
// sends nothing and has no adapter).
std::unique_ptr<SetAdapter> MakeSetAdapter(std::string_view name);

// Deletes what `previous` (the last SetRequest the device accepted from the
// same adapter and context) programmed and `next` no longer does, added to
// `next`: an entry `previous` replaced (Loom's own row or container) and
// `next` neither replaces nor updates is deleted whole; a member an update
// wrote into an entry Loom does not own (a QUEUE row's wred_profile, an
// OpenConfig queue's profile binding) that `next` no longer writes is
// deleted leaf by leaf. Returns the number of deletes added. Requests with
// different prefixes are not compared (0).
//
// `pristine` (optional): what the device had in the entries Loom updates
// before Loom first wrote them (path -> member -> JSON value, read with a
// Get). A stale member the device had before is restored (an update with
// its old value) instead of deleted; a member it did not have is deleted.
using PristineValues = std::map<std::string, std::map<std::string, std::string>>;
int AddStaleDeletes(const ::gnmi::SetRequest& previous, ::gnmi::SetRequest* next,
                    const PristineValues* pristine = nullptr);
// The Get that reads what `request`'s updates will overwrite, for the
// entries not yet in `known` (empty paths = nothing to read).
::gnmi::GetRequest PristineGetRequest(const ::gnmi::SetRequest& request,
                                      const std::set<std::string>& known);
// Records a Get response into `pristine`: every requested entry becomes
// known (absent = the device had no such entry: its members are deleted
// when stale).
void RecordPristine(const ::gnmi::GetRequest& request, const ::gnmi::GetResponse& response,
                    PristineValues* pristine, std::set<std::string>* known);

// Human-readable preview: every block with its mark, source and the JSON of
// its operations, then what is not expressed. Deterministic.
std::string FormatPreview(const SetAdapter& adapter, const AdapterOutput& out);
// The YANG document of every block (plus the context entries) merged into
// one RFC 7951 object, for `yanglint -t config`. "{}" when no block has one.
std::string YangDocument(const AdapterOutput& out);
// "/a/b[k=v]/c" with origin prefix "origin:" when set (for previews and tests).
std::string PathString(const ::gnmi::Path& prefix, const ::gnmi::Path& path);

}  // namespace loom::southbound::gnmi

#endif  // LOOM_SOUTHBOUND_GNMI_SET_ADAPTER_H_
