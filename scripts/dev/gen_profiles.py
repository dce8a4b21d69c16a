#!/usr/bin/env python3
"""Writes telemetry/profiles/*.json (the shipped platform profiles) except
loom-fabric.json (the emulator's own catalogue, kept by hand).

The profiles are data: edit this generator (one place for the shared
OpenConfig rules) and re-run it, or edit the JSON directly for a local
override (LoomdConfig.profile_dirs). Every mapping carries its mark and
source; platforms.md is shared/reference/platforms.md.
"""
import json, os, sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "telemetry", "profiles")
PM = "platforms.md"

def leaf(match, canonical, **kw):
    d = {"match": match if isinstance(match, list) else [match], "canonical": canonical}
    d.update(kw)
    return d

def sig(signal, origin, path, mode, mark, source, leaves, target="", refresh=0):
    d = {"signal": signal, "origin": origin, "path": path, "mode": mode, "mark": mark,
         "source": source, "leaves": leaves}
    if target: d["target"] = target
    if refresh: d["refreshIntervalMs"] = refresh
    return d

IFC = "/interfaces/interface[name={if}]/state/counters/"
Q = "/qos/interfaces/interface[interface-id={if}]/output/queues/queue[name={q}]/state/"
PFC = "loom:/pfc/interfaces/interface[name={if}]/priorities/priority[id={p}]/"
OC_IF_LEAVES = ["in-octets", "out-octets", "in-pkts", "out-pkts", "in-discards", "out-discards",
                "in-errors", "out-errors", "carrier-transitions"]
SPEEDS = {"SPEED_10GB": "10000000000", "SPEED_25GB": "25000000000", "SPEED_40GB": "40000000000",
          "SPEED_50GB": "50000000000", "SPEED_100GB": "100000000000",
          "SPEED_200GB": "200000000000", "SPEED_400GB": "400000000000",
          "SPEED_800GB": "800000000000"}

def oc_signals(mark_if, src_if, mark_q, src_q, queue_extra=(), lldp=(None, None)):
    """OpenConfig interface, queue and LLDP signals (platforms.md §0)."""
    out = [
        sig("interface-counters", "", "/interfaces/interface[name=*]/state/counters", "SAMPLE",
            mark_if, src_if,
            [leaf("interfaces/interface[name={if}]/state/counters/" + l, IFC + l) for l in OC_IF_LEAVES]),
        sig("oper-status", "", "/interfaces/interface[name=*]/state/oper-status", "ON_CHANGE",
            mark_if, src_if,
            [leaf("interfaces/interface[name={if}]/state/oper-status",
                  "/interfaces/interface[name={if}]/state/oper-status")]),
        sig("port-speed", "", "/interfaces/interface[name=*]/ethernet/state/negotiated-port-speed",
            "ON_CHANGE", mark_if,
            "openconfig-if-ethernet.yang negotiated-port-speed (identity ETHERNET_SPEED); " + src_if,
            [leaf("interfaces/interface[name={if}]/ethernet/state/negotiated-port-speed",
                  "loom:/interfaces/interface[name={if}]/ethernet/state/operational-speed-bps",
                  enumMap=SPEEDS)]),
    ]
    qpath = "/qos/interfaces/interface[interface-id=*]/output/queues/queue[name=*]/state"
    qn = "qos/interfaces/interface[interface-id={if}]/output/queues/queue[name={q}]/state/"
    out.append(sig("queue-counters", "", qpath, "SAMPLE", mark_q, src_q,
                   [leaf(qn + l, Q + l) for l in ["transmit-pkts", "transmit-octets", "dropped-pkts"]]))
    out.append(sig("ecn-marks", "", qpath, "SAMPLE", mark_q, src_q,
                   [leaf(qn + "ecn-marked-pkts", Q + "ecn-marked-pkts")]))
    out.append(sig("queue-watermark", "", qpath, "SAMPLE", mark_q, src_q,
                   [leaf(qn + "max-queue-len", Q + "max-queue-len")]))
    for s in queue_extra:
        out.append(s)
    if lldp[0]:
        out.append(sig("lldp", "", "/lldp/interfaces/interface[name=*]/neighbors/neighbor[id=*]/state",
                       "ON_CHANGE", lldp[0], lldp[1],
                       [leaf("lldp/interfaces/interface[name={if}]/neighbors/neighbor[id={n}]/state/" + l,
                             "/lldp/interfaces/interface[name={if}]/neighbors/neighbor[id={n}]/state/" + l)
                        for l in ["system-name", "port-id", "chassis-id"]]))
    return out

NIC_UNSERVED = {"signal": "nic-roce",
                "reason": "no switch OS serves NIC RoCE/CNP counters: run loom-nic-agent on the hosts (profile host)"}
ALB_UNSERVED = {"signal": "alb-buckets",
                "reason": "no per-hash-bucket counters in the platform's public models (not found)"}

def write(p):
    path = os.path.join(OUT, p["name"] + ".json")
    with open(path, "w") as f:
        json.dump(p, f, indent=1, sort_keys=False)
        f.write("\n")

# ---- openconfig: a strict OpenConfig-only target ---------------------------
oc_src = PM + " §0 (openconfig-interfaces.yang)"
oc_q = PM + " §0 (openconfig-qos-interfaces.yang 2.2.0)"
write({
    "name": "openconfig",
    "description": "Any target that serves only the public OpenConfig models (no vendor origins).",
    "encodings": ["PROTO", "JSON_IETF", "JSON"],
    "rejectedOrigins": ["loom", "sonic-db", "eos_native", "cli"],
    "signals": oc_signals("SOURCED", oc_src, "SOURCED", oc_q,
                          lldp=("SOURCED", PM + " §0 (openconfig-lldp)")),
    "unserved": [
        {"signal": "queue-depth", "reason": "OpenConfig queues have no instantaneous occupancy leaf (only max-queue-len, avg-queue-len)"},
        {"signal": "pfc-counters", "reason": "OpenConfig has no per-priority PFC counters, only link-level in/out-mac-pause-frames (" + PM + " §0)"},
        {"signal": "pfc-pause-duration", "reason": "not in OpenConfig (" + PM + " §0)"},
        {"signal": "pfc-watchdog", "reason": "no PFC watchdog in OpenConfig (" + PM + " §0)"},
        NIC_UNSERVED, ALB_UNSERVED],
})

# ---- sonic -------------------------------------------------------------------
S1 = PM + " §1 (sonic-gnmi virtual_db.go; SONiC doc/system-telemetry/grpc_telemetry.md)"
SAI_IF = {"in-octets": "SAI_PORT_STAT_IF_IN_OCTETS", "out-octets": "SAI_PORT_STAT_IF_OUT_OCTETS",
          "in-pkts": "SAI_PORT_STAT_IF_IN_UCAST_PKTS", "out-pkts": "SAI_PORT_STAT_IF_OUT_UCAST_PKTS",
          "in-discards": "SAI_PORT_STAT_IF_IN_DISCARDS", "out-discards": "SAI_PORT_STAT_IF_OUT_DISCARDS",
          "in-errors": "SAI_PORT_STAT_IF_IN_ERRORS", "out-errors": "SAI_PORT_STAT_IF_OUT_ERRORS"}
def port_rule(field, canonical, **kw):
    return leaf(["COUNTERS/Ethernet*/{if}/" + field, "COUNTERS/{if}/" + field], canonical, **kw)
def queue_rule(field, canonical):
    return leaf(["COUNTERS/Ethernet*/Queues/{if}:{q}/" + field], canonical)
write({
    "name": "sonic",
    "description": "SONiC's gNMI server (sonic-gnmi): Redis databases as targets (COUNTERS_DB, APPL_DB), JSON objects of string SAI counters, virtual paths for ports and queues, OID maps for the rest. Minimum SAMPLE interval 1 s; counters refresh at the flex-counter poll interval (ports 1 s, queues 10 s by default).",
    "encodings": ["JSON_IETF", "JSON"],
    "minSampleIntervalMs": 1000,
    "rejectedOrigins": ["loom"],
    "keyMaps": [
        {"name": "port_oid", "target": "COUNTERS_DB", "path": "COUNTERS_PORT_NAME_MAP", "invert": True,
         "mark": "SOURCED", "source": S1},
        {"name": "queue_oid", "target": "COUNTERS_DB", "path": "COUNTERS_QUEUE_NAME_MAP", "invert": True,
         "mark": "SOURCED", "source": PM + " §1 (doc/buffer-watermark/watermarks_HLD.md)"}],
    "signals": [
        sig("interface-counters", "", "COUNTERS/Ethernet*", "SAMPLE", "SOURCED", S1,
            [port_rule(sai, IFC + l) for l, sai in SAI_IF.items()], target="COUNTERS_DB", refresh=1000),
        sig("pfc-counters", "", "COUNTERS/Ethernet*", "SAMPLE", "SOURCED", S1 + ": SAI_PORT_STAT_PFC_<n>_{RX,TX}_PKTS on the port hash",
            [port_rule("SAI_PORT_STAT_PFC_{p}_RX_PKTS", PFC + "state/rx-pkts"),
             port_rule("SAI_PORT_STAT_PFC_{p}_TX_PKTS", PFC + "state/tx-pkts")],
            target="COUNTERS_DB", refresh=1000),
        sig("pfc-pause-duration", "", "COUNTERS/Ethernet*", "SAMPLE", "UNVERIFIED",
            "SAI port stats SAI_PORT_STAT_PFC_<n>_{RX,TX}_PAUSE_DURATION_US exist in SAI; whether SONiC's PORT_STAT flex counter polls them is not confirmed",
            [port_rule("SAI_PORT_STAT_PFC_{p}_RX_PAUSE_DURATION_US", PFC + "state/rx-pause-duration-us"),
             port_rule("SAI_PORT_STAT_PFC_{p}_TX_PAUSE_DURATION_US", PFC + "state/tx-pause-duration-us")],
            target="COUNTERS_DB", refresh=1000),
        sig("oper-status", "", "PORT_TABLE/Ethernet*", "ON_CHANGE", "UNVERIFIED",
            PM + " §1: APPL_DB PORT_TABLE oper_status (NC)",
            [leaf(["PORT_TABLE/Ethernet*/{if}/oper_status", "PORT_TABLE/{if}/oper_status"],
                  "/interfaces/interface[name={if}]/state/oper-status",
                  enumMap={"up": "UP", "down": "DOWN"})], target="APPL_DB"),
        sig("port-speed", "", "PORT_TABLE/Ethernet*", "ON_CHANGE", "UNVERIFIED",
            "APPL_DB PORT_TABLE speed (Mb/s) is the configured speed; a lane-degraded port may not show it",
            [leaf(["PORT_TABLE/Ethernet*/{if}/speed", "PORT_TABLE/{if}/speed"],
                  "loom:/interfaces/interface[name={if}]/ethernet/state/operational-speed-bps",
                  scale=1000000)], target="APPL_DB"),
        sig("queue-counters", "", "COUNTERS/Ethernet*/Queues", "SAMPLE", "SOURCED", S1 + ": COUNTERS/<port>/Queues",
            [queue_rule("SAI_QUEUE_STAT_PACKETS", Q + "transmit-pkts"),
             queue_rule("SAI_QUEUE_STAT_BYTES", Q + "transmit-octets"),
             queue_rule("SAI_QUEUE_STAT_DROPPED_PACKETS", Q + "dropped-pkts")],
            target="COUNTERS_DB", refresh=10000),
        sig("ecn-marks", "", "COUNTERS/Ethernet*/Queues", "SAMPLE", "SOURCED",
            PM + " §1 (doc/qos/ECN_and_WRED_statistics_HLD.md): needs `counterpoll wredqueue enable` (10 s)",
            [queue_rule("SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS", Q + "ecn-marked-pkts")],
            target="COUNTERS_DB", refresh=10000),
        sig("queue-depth", "", "COUNTERS/Ethernet*/Queues", "SAMPLE", "UNVERIFIED",
            "SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES on the queue hash: platform-dependent, not in SONiC's default QUEUE_STAT group",
            [queue_rule("SAI_QUEUE_STAT_CURR_OCCUPANCY_BYTES",
                        "loom:/qos/interfaces/interface[interface-id={if}]/output/queues/queue[name={q}]/state/current-queue-len")],
            target="COUNTERS_DB", refresh=10000),
        sig("queue-watermark", "", "PERIODIC_WATERMARKS", "SAMPLE", "UNVERIFIED",
            PM + " §1: PERIODIC_WATERMARKS keyed by queue OID, SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES; the whole-table subscription shape is not confirmed",
            [leaf("PERIODIC_WATERMARKS/{qoid}/SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES", Q + "max-queue-len",
                  keys={"qoid": {"map": "queue_oid", "split": ":", "into": ["if", "q"]}})],
            target="COUNTERS_DB", refresh=10000),
        sig("pfc-watchdog", "", "COUNTERS/Ethernet*/Pfcwd", "SAMPLE", "SOURCED",
            PM + " §1 (sonic-swss orchagent/pfcwdorch.cpp): COUNTERS/Ethernet*/Pfcwd per queue",
            [leaf("COUNTERS/Ethernet*/Pfcwd/{if}:{p}/PFC_WD_STATUS", PFC + "watchdog/state/status"),
             leaf("COUNTERS/Ethernet*/Pfcwd/{if}:{p}/PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED", PFC + "watchdog/state/deadlock-detected"),
             leaf("COUNTERS/Ethernet*/Pfcwd/{if}:{p}/PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED", PFC + "watchdog/state/deadlock-restored")],
            target="COUNTERS_DB", refresh=1000),
        sig("lldp", "", "LLDP_ENTRY_TABLE", "ON_CHANGE", "SOURCED",
            PM + " §1 (sonic-swss doc/swss-schema.md): APPL_DB LLDP_ENTRY_TABLE",
            [leaf("LLDP_ENTRY_TABLE/{if}/lldp_rem_sys_name", "/lldp/interfaces/interface[name={if}]/neighbors/neighbor[id=1]/state/system-name"),
             leaf("LLDP_ENTRY_TABLE/{if}/lldp_rem_port_id", "/lldp/interfaces/interface[name={if}]/neighbors/neighbor[id=1]/state/port-id"),
             leaf("LLDP_ENTRY_TABLE/{if}/lldp_rem_chassis_id", "/lldp/interfaces/interface[name={if}]/neighbors/neighbor[id=1]/state/chassis-id")],
            target="APPL_DB"),
    ],
    "unserved": [NIC_UNSERVED,
                 {"signal": "alb-buckets", "reason": "SONiC ARS (sonic-ars.yang) has no per-bucket counters in COUNTERS_DB (not found)"}],
})

# ---- eos ---------------------------------------------------------------------
S2 = PM + " §2 (Arista openmgmt: the OpenConfig trees)"
write({
    "name": "eos",
    "description": "Arista EOS gNMI (management api gnmi): OpenConfig. Per-priority PFC and the watchdog are probably eos_native only (not confirmed) and are not mapped.",
    "encodings": ["PROTO", "JSON_IETF", "JSON"],
    "signals": oc_signals("SOURCED", S2, "UNVERIFIED", PM + " §2: which queue ECN and watermark leaves EOS fills is not confirmed",
                          lldp=("UNVERIFIED", PM + " §7: OC LLDP on EOS (NC)")),
    "unserved": [
        {"signal": "queue-depth", "reason": "no OpenConfig instantaneous queue length; EOS native path not confirmed"},
        {"signal": "pfc-counters", "reason": "EOS per-priority PFC counters: not confirmed (probably eos_native) (" + PM + " §2)"},
        {"signal": "pfc-pause-duration", "reason": "not confirmed on EOS (" + PM + " §2)"},
        {"signal": "pfc-watchdog", "reason": "EOS PFC watchdog state: not confirmed (" + PM + " §2)"},
        NIC_UNSERVED, ALB_UNSERVED],
})

# ---- junos -------------------------------------------------------------------
write({
    "name": "junos",
    "description": "Juniper Junos / Junos Evolved gRPC telemetry (OpenConfig sensors). Dial-in STREAM support is not confirmed (Juniper lists POLL and ONCE); every mapping is UNVERIFIED.",
    "encodings": ["PROTO", "JSON_IETF", "JSON"],
    "signals": oc_signals("UNVERIFIED", PM + " §3, §7: OC interface counters on Junos (NC)",
                          "UNVERIFIED", PM + " §7: Junos queue counters (NC)",
                          lldp=("UNVERIFIED", PM + " §3: LLDP sensor ON_CHANGE since 18.3R1, path NC")),
    "unserved": [
        {"signal": "queue-depth", "reason": "not confirmed on Junos (" + PM + " §7)"},
        {"signal": "pfc-counters", "reason": "not confirmed on Junos (" + PM + " §7)"},
        {"signal": "pfc-pause-duration", "reason": "not confirmed on Junos"},
        {"signal": "pfc-watchdog", "reason": "not confirmed on Junos (" + PM + " §7)"},
        NIC_UNSERVED, ALB_UNSERVED],
})

# ---- nxos --------------------------------------------------------------------
write({
    "name": "nxos",
    "description": "Cisco NX-OS (feature grpc + feature openconfig): OpenConfig paths; SAMPLE 1-604800 s (minimum 1 s). Device YANG (/System/...) paths are not mapped.",
    "encodings": ["PROTO", "JSON"],
    "minSampleIntervalMs": 1000,
    "signals": oc_signals("UNVERIFIED", PM + " §4, §7: OC on NX-OS (NC)",
                          "UNVERIFIED", PM + " §7: NX-OS queue counters (NC)",
                          lldp=("UNVERIFIED", PM + " §7 (NC)")),
    "unserved": [
        {"signal": "queue-depth", "reason": "not confirmed on NX-OS (" + PM + " §7)"},
        {"signal": "pfc-counters", "reason": "not confirmed on NX-OS (" + PM + " §7)"},
        {"signal": "pfc-pause-duration", "reason": "not confirmed on NX-OS"},
        {"signal": "pfc-watchdog", "reason": "not confirmed on NX-OS (" + PM + " §7)"},
        NIC_UNSERVED, ALB_UNSERVED],
})

# ---- cumulus -----------------------------------------------------------------
S5 = PM + " §5 (NVIDIA Cumulus Linux 5.16 gNMI streaming)"
write({
    "name": "cumulus",
    "description": "NVIDIA Cumulus Linux 5.13+ gNMI server (Subscribe only): OpenConfig interfaces, queues (with instant-queue-len) and LLDP; PFC per switch-priority.",
    "encodings": ["PROTO", "JSON"],
    "signals": oc_signals("SOURCED", S5, "SOURCED", S5,
        queue_extra=[
            sig("queue-depth", "", "/qos/interfaces/interface[interface-id=*]/output/queues/queue[name=*]/state",
                "SAMPLE", "SOURCED", S5 + ": instant-queue-len",
                [leaf("qos/interfaces/interface[interface-id={if}]/output/queues/queue[name={q}]/state/instant-queue-len",
                      "loom:/qos/interfaces/interface[interface-id={if}]/output/queues/queue[name={q}]/state/current-queue-len")]),
            sig("pfc-counters", "", "/qos/interfaces/interface[interface-id=*]/switch-priority[priority=*]/state/counters",
                "SAMPLE", "SOURCED", S5 + ": switch-priority in/out-pause-pkts",
                [leaf("qos/interfaces/interface[interface-id={if}]/switch-priority[priority={p}]/state/counters/in-pause-pkts", PFC + "state/rx-pkts"),
                 leaf("qos/interfaces/interface[interface-id={if}]/switch-priority[priority={p}]/state/counters/out-pause-pkts", PFC + "state/tx-pkts")])],
        lldp=("SOURCED", S5 + ": OC /lldp tree")),
    "unserved": [
        {"signal": "pfc-pause-duration", "reason": "Cumulus serves pause frame counts, not pause durations (" + PM + " §5)"},
        {"signal": "pfc-watchdog", "reason": "Cumulus PFC watchdog over gNMI: not confirmed (" + PM + " §5)"},
        NIC_UNSERVED, ALB_UNSERVED],
})

# ---- host (loom-nic-agent) ------------------------------------------------------
HS = "telemetry/nic_agent (loom-nic-agent): Linux sysfs /sys/class/infiniband/<dev>/ports/<n>/hw_counters (mlx5 counter names) and /sys/class/net/<if>/statistics"
write({
    "name": "host",
    "description": "loom-nic-agent on a GPU server: RDMA NIC hw_counters from sysfs, served over gNMI as Loom's catalogue. One agent serves every NIC of its host; the target name selects the NIC device id.",
    "encodings": ["PROTO"],
    "minSampleIntervalMs": 100,
    "signals": [
        sig("interface-counters", "", "/interfaces/interface[name=*]/state/counters", "SAMPLE", "SOURCED", HS,
            [leaf("interfaces/interface[name={if}]/state/counters/" + l, IFC + l)
             for l in ["in-octets", "out-octets", "in-pkts", "out-pkts", "in-discards", "out-discards", "in-errors", "out-errors"]]),
        sig("oper-status", "", "/interfaces/interface[name=*]/state/oper-status", "ON_CHANGE", "SOURCED",
            "telemetry/nic_agent (loom-nic-agent): /sys/class/net/<if>/operstate",
            [leaf("interfaces/interface[name={if}]/state/oper-status", "/interfaces/interface[name={if}]/state/oper-status")]),
        sig("nic-roce", "loom", "/nic/interfaces/interface[name=*]/roce/state", "SAMPLE", "SOURCED", HS,
            [leaf("nic/interfaces/interface[name={if}]/roce/state/" + l,
                  "loom:/nic/interfaces/interface[name={if}]/roce/state/" + l)
             for l in ["np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored",
                       "out_of_sequence", "packet_seq_err", "local_ack_timeout_err"]]),
    ],
    "unserved": [
        {"signal": "pfc-counters", "reason": "mlx5 per-priority pause counters are ethtool statistics, not sysfs; loom-nic-agent does not read them"},
        {"signal": "pfc-pause-duration", "reason": "ethtool statistics, not read by loom-nic-agent"}],
})
print("wrote profiles to", os.path.normpath(OUT))
