#!/usr/bin/python3
"""Closed loop over the wire: loomd programs a running loom-fabric (separate
process) over BGP-DPF (colors, colored routes) and gNMI Set, and watches it
over gNMI telemetry — the way it runs against real switches.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_fabric_test import wait_file  # noqa: E402
from loomd_harness import start_process, stop_processes  # noqa: E402

ARGS = None


class WireLoopTest(unittest.TestCase):
    def test_loomd_programs_loom_fabric_over_bgp_and_gnmi(self):
        self.run_loop(None)

    def test_qp_split_routes_go_over_gnmi_and_the_rest_over_bgp(self):
        # acme's job split by destination QP in two parts: BGP-DPF cannot carry the
        # parts, so loomd writes them with gNMI Set; the leaf runs what Loom wants.
        state = self.run_loop({"rules": [{"name": "acme-split",
                                          "match": {"tenants": ["acme"]},
                                          "action": {"qpSplit": 2}}]})
        parts = [r for r in state["applied"]["routes"] if r.get("qpMask") == 1]
        self.assertEqual(len(parts), len(state["desired"]["routes"]), state["applied"])
        self.assertEqual(sorted({r.get("qpValue", 0) for r in parts}), [0, 1])

    def test_shadow_mode_programs_nothing_and_reports_what_would_change(self):
        # change_mode shadow: loomd computes the placement and reads leaf0 back,
        # but sends nothing: the emulator's leaf runs none of Loom's routes, and
        # `loomctl device` says what Loom would change (not an alarm).
        state = self.run_loop(None, shadow=True)
        sync = state["sync"]
        self.assertTrue(sync.get("shadow"), sync)
        self.assertIn("routes", sync.get("wouldChange", []), sync)
        self.assertEqual(state.get("applied", {}).get("routes", []), [], state.get("applied"))
        self.assertTrue(state["desired"].get("routes"), state["desired"])

    def test_approve_mode_plan_apply_canary_and_rollback(self):
        # change_mode approve against loom-fabric over the wire (gNMI Set for
        # the thresholds, gNMI telemetry for the canary check) with a 4:1
        # incast running: fabric-wide ECN/PFC settings wait for `loomctl
        # apply`; a stale plan is refused; a good change passes the canary
        # (leaf1, the incast's egress leaf) and reaches leaf0; a bad one
        # (ECN off, PFC xoff 20 KB) makes leaf1 pause its spines, is rolled
        # back there and quarantined, and leaf0 never runs it.
        d = tempfile.mkdtemp(prefix="loom-change-")
        procs = []
        try:
            fabric = start_process([ARGS.fabric, ARGS.incast_scenario,
                                    "--gnmi-listen", "127.0.0.1:0", "--bgp-listen", "127.0.0.1:0",
                                    "--ready-file", os.path.join(d, "fabric.json")],
                                   os.path.join(d, "fabric.log"))
            procs.append(fabric)
            wait_file(os.path.join(d, "fabric.json"), fabric)
            config = os.path.join(d, "config.json")

            def write_config(kmin, kmax, xoff):
                with open(config, "w") as f:
                    json.dump({"changeMode": "approve",
                               "changeSafety": {"canary": ["leaf1"], "canaryWaitMs": 3000},
                               "adaptive": {"disableDlbTuning": True, "disableAlb": True},
                               "fabricSettings": [{
                                   "role": "DEVICE_ROLE_LEAF",
                                   "thresholds": [{"priority": 3, "ecnKminBytes": str(kmin),
                                                   "ecnKmaxBytes": str(kmax),
                                                   "ecnPmaxPercent": 20,
                                                   "pfcXoffBytes": str(xoff),
                                                   "pfcXonBytes": str(xoff // 2)}]}]}, f)

            write_config(400000, 1600000, 4000000)
            loomd = start_process([ARGS.loomd, "--topology", ARGS.topology, "--config", config,
                                   "--fabric-ready-file", os.path.join(d, "fabric.json"),
                                   "--db", os.path.join(d, "l.db"),
                                   "--grpc-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                                   "--ready-file", os.path.join(d, "loomd.json")],
                                  os.path.join(d, "loomd.log"))
            procs.append(loomd)
            port = wait_file(os.path.join(d, "loomd.json"), loomd)["grpc_port"]
            ctl = [ARGS.loomctl, "--server", "127.0.0.1:%d" % port]

            def run(*args):
                return subprocess.run(ctl + list(args), capture_output=True, text=True, timeout=20)

            def plan():
                r = run("--json", "plan")
                self.assertEqual(r.returncode, 0, r.stderr)
                return json.loads(r.stdout)

            def kmin_on(device):
                r = run("--json", "device", device)
                self.assertEqual(r.returncode, 0, r.stderr)
                th = json.loads(r.stdout).get("applied", {}).get("thresholds", [])
                return int(th[0].get("ecnKminBytes", 0)) if th else 0

            def wait_state(state, timeout=40):
                p, deadline = {}, time.monotonic() + timeout
                while time.monotonic() < deadline:
                    p = plan()
                    if p.get("state") == state:
                        return p
                    time.sleep(0.3)
                self.fail("plan never reached %s: %s" % (state, p))

            first = wait_state("CHANGE_STATE_AWAITING_APPROVAL")
            self.assertEqual([x["device"] for x in first["devices"]], ["leaf0", "leaf1"], first)
            self.assertIn("thresholds[* priority 3]: set", first["devices"][0]["changes"][0])
            print(run("plan").stdout)
            time.sleep(1)
            self.assertEqual(kmin_on("leaf0"), 0, "approve mode: nothing before `loomctl apply`")

            # The operator reviewed revision N; the desired state then moved on.
            write_config(300000, 1600000, 4000000)
            loomd.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 20
            while plan()["revision"] == first["revision"] and time.monotonic() < deadline:
                time.sleep(0.2)
            stale = run("apply", first["revision"])
            self.assertEqual(stale.returncode, 1, stale.stdout + stale.stderr)
            self.assertIn("stale plan", stale.stderr)
            good = plan()
            ok = run("apply", good["revision"])
            self.assertEqual(ok.returncode, 0, ok.stderr)
            self.assertIn("[canary]", ok.stdout)
            wait_state("CHANGE_STATE_IN_SYNC")
            self.assertEqual(kmin_on("leaf0"), 300000)
            self.assertEqual(kmin_on("leaf1"), 300000)

            # A bad change: the canary degrades and it is rolled back.
            write_config(40000000, 60000000, 20000)
            loomd.send_signal(signal.SIGHUP)
            bad = wait_state("CHANGE_STATE_AWAITING_APPROVAL")
            r = run("apply", bad["revision"])
            self.assertEqual(r.returncode, 0, r.stderr)
            q = wait_state("CHANGE_STATE_QUARANTINED", timeout=60)
            text = run("plan").stdout
            print(text)
            self.assertEqual(q["quarantinedRevision"], bad["revision"])
            self.assertRegex(q["detail"], "PFC pause fraction|utilization")
            self.assertEqual(kmin_on("leaf1"), 300000, "the canary runs the good settings again")
            self.assertEqual(kmin_on("leaf0"), 300000, "leaf0 never got the bad change")
            again = run("apply", bad["revision"])
            self.assertEqual(again.returncode, 1)
            self.assertIn("quarantined", again.stderr)
            events = run("events", "--subject", "change/%s" % bad["revision"]).stdout
            self.assertIn("rolled back on leaf1", events)
            cleared = run("plan", "clear", bad["revision"])
            self.assertEqual(cleared.returncode, 0, cleared.stderr)
            self.assertEqual(plan()["state"], "CHANGE_STATE_AWAITING_APPROVAL")
        finally:
            stop_processes(self, procs)
            shutil.rmtree(d, ignore_errors=True)

    def run_loop(self, policy, shadow=False):
        d = tempfile.mkdtemp(prefix="loom-wire-")
        procs = []
        try:
            fabric = start_process([ARGS.fabric, ARGS.scenario, "--gnmi-listen", "127.0.0.1:0",
                                    "--bgp-listen", "127.0.0.1:0",
                                    "--ready-file", os.path.join(d, "fabric.json")],
                                   os.path.join(d, "fabric.log"))
            procs.append(fabric)
            ready = wait_file(os.path.join(d, "fabric.json"), fabric)
            self.assertEqual(sorted(ready["bgp"]), ["leaf0", "leaf1"])
            extra = []
            if shadow:
                with open(os.path.join(d, "shadow.json"), "w") as f:
                    json.dump({"changeMode": "shadow"}, f)
                extra += ["--config", os.path.join(d, "shadow.json")]
            if policy is not None:
                with open(os.path.join(d, "policy.json"), "w") as f:
                    json.dump(policy, f)
                extra = ["--policy", os.path.join(d, "policy.json")]
            loomd = start_process([ARGS.loomd, "--topology", ARGS.topology,
                                   "--fabric-ready-file", os.path.join(d, "fabric.json"),
                                   "--db", os.path.join(d, "l.db"),
                                   "--grpc-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                                   "--ready-file", os.path.join(d, "loomd.json")] + extra,
                                  os.path.join(d, "loomd.log"))
            procs.append(loomd)
            port = wait_file(os.path.join(d, "loomd.json"), loomd)["grpc_port"]
            ctl = [ARGS.loomctl, "--server", "127.0.0.1:%d" % port]
            job = os.path.join(d, "job.json")
            with open(job, "w") as f:
                json.dump({"tenant": "acme", "jobId": "ring",
                           "endpoints": ["host000-gpu0", "host002-gpu0", "host001-gpu0",
                                         "host003-gpu0"],
                           "collective": "COLLECTIVE_PATTERN_RING_ALLREDUCE"}, f)
            r = subprocess.run(ctl + ["jobs", "register", job], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)

            def device(name):
                out = subprocess.run(ctl + ["--json", "device", name], capture_output=True,
                                     text=True, timeout=20)
                self.assertEqual(out.returncode, 0, out.stderr)
                return json.loads(out.stdout)

            state, deadline = {}, time.monotonic() + 30
            while time.monotonic() < deadline:
                state = device("leaf0")
                if shadow and "routes" in state["sync"].get("wouldChange", []):
                    text = subprocess.run(ctl + ["device", "leaf0"], capture_output=True,
                                          text=True, timeout=20).stdout
                    print(text)
                    self.assertIn("mode:       shadow: nothing is programmed", text)
                    return state
                if state["sync"].get("inSync") and state["desired"].get("routes"):
                    break
                time.sleep(0.2)
            self.assertFalse(shadow, "shadow mode never reported what it would change: %s" % state)
            sync = state["sync"]
            self.assertTrue(sync.get("inSync"), state)
            self.assertEqual(sync["driver"], "bgp+gnmi")
            # What the leaf runs (read back over BGP/gNMI) is what Loom wants:
            # colored routes with the planned NIC prefixes.
            routes = state["applied"]["routes"]
            self.assertEqual(len(routes), len(state["desired"]["routes"]))
            self.assertTrue(all(r["prefix"].startswith("198.18.") for r in routes), routes)
            self.assertTrue(all(r["color"] >= 65536 for r in routes), routes)
            # NNHN data: every spine of leaf0 reaches the remote leaf; BGP carries it.
            reach = state["desired"].get("nextHopReach", [])
            self.assertTrue(reach and all(r.get("egress") for r in reach), state["desired"])
            self.assertEqual(state["applied"].get("nextHopReach"), reach)
            return state
        finally:
            stop_processes(self, procs)
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for a in ("--loomd", "--loomctl", "--fabric", "--scenario", "--incast-scenario",
              "--topology"):
        parser.add_argument(a, required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
