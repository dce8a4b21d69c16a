#!/usr/bin/python3
"""loomd watching switches that behave like real switch OSes, in one run.

loom-fabric runs the live-fault scenario (paced at real time) with platform
personalities: leaf0 answers as SONiC (COUNTERS_DB/APPL_DB targets, JSON
objects of string SAI counters, 1 s minimum sample interval, loom origin
rejected), spine0 as a strict OpenConfig target (PROTO), leaf1 as a
JSON_IETF-only OpenConfig target. spine1 is served by a gNMI target written in
Python from the public openconfig/gnmi protos (tests/e2e/pygnmi), which also
reports an LLDP neighbour that contradicts the topology.

loomd gets a device inventory naming each device's platform and address, and a
user profile directory whose "sonic" profile asks queue-depth on the loom
origin, which the SONiC personality rejects. Checked: every device connected
with the encoding Capabilities allowed; per-signal availability with reasons
(`loomctl devices`); the rejected subscription isolated, its signal
unavailable, retried no faster than its backoff; the contradicted link out of
placement with an event; the scenario's link fault (leaf0 SONiC - spine0
OpenConfig) seen as DOWN; events for unavailable signals; a SIGHUP reload that
keeps unchanged targets.
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
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_fabric_test import wait_file  # noqa: E402
from loomd_harness import start_process, stop_processes  # noqa: E402

ARGS = None
FAULT_LINK = "leaf0:Ethernet0--spine0:Ethernet0"
LLDP_BAD_LINK = "leaf1:Ethernet1--spine1:Ethernet1"
LLDP_GOOD_LINK = "leaf0:Ethernet1--spine1:Ethernet0"
HERE = os.path.dirname(os.path.abspath(__file__))


def metric(port, name, labels=None):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    total = None
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, value = line.rsplit(" ", 1)
        if head != name and not head.startswith(name + "{"):
            continue
        if labels and not all('%s="%s"' % kv in head for kv in labels.items()):
            continue
        total = (total or 0) + float(value)
    return total


class RealFabricTelemetryTest(unittest.TestCase):
    def test_sonic_openconfig_and_json_ietf_targets_in_one_run(self):
        d = tempfile.mkdtemp(prefix="loom-realfab-")
        procs = []
        try:
            fabric = start_process(
                [ARGS.fabric, ARGS.scenario, "--gnmi-listen", "127.0.0.1:0",
                 "--personality", "leaf0=sonic", "--personality", "spine0=openconfig",
                 "--personality", "leaf1=openconfig-json",
                 "--ready-file", os.path.join(d, "fabric.json")],
                os.path.join(d, "fabric.log"))
            procs.append(fabric)
            started = time.monotonic()
            ready = wait_file(os.path.join(d, "fabric.json"), fabric)
            ports = {dev: v["port"] for dev, v in ready["gnmi_devices"].items()}
            self.assertEqual(sorted(ports), ["leaf0", "leaf1", "spine0"])

            pytarget = start_process(
                ["/usr/bin/python3", os.path.join(HERE, "pygnmi", "oc_json_target.py"),
                 "--name", "spine1", "--interfaces", "Ethernet0,Ethernet1", "--rate-bps", "40G",
                 "--lldp", "Ethernet0=leaf0:Ethernet1,Ethernet1=leaf9.pod1.example:Ethernet1",
                 "--ready-file", os.path.join(d, "py.json")],
                os.path.join(d, "py.log"))
            procs.append(pytarget)
            py_port = wait_file(os.path.join(d, "py.json"), pytarget)["port"]

            # A user profile overriding the shipped "sonic": queue-depth on the
            # loom origin, which a SONiC target rejects.
            prof_dir = os.path.join(d, "profiles")
            os.mkdir(prof_dir)
            with open(os.path.join(ARGS.profiles, "sonic.json")) as f:
                sonic = json.load(f)
            for s in sonic["signals"]:
                if s["signal"] == "queue-depth":
                    s["origin"] = "loom"
            with open(os.path.join(prof_dir, "sonic.json"), "w") as f:
                json.dump(sonic, f)

            def config(with_python):
                devices = [
                    {"id": "leaf0", "gnmi": {"platform": "sonic",
                                             "address": "127.0.0.1:%d" % ports["leaf0"]}},
                    {"id": "spine0", "gnmi": {"platform": "openconfig",
                                              "address": "127.0.0.1:%d" % ports["spine0"]},
                     "routeBudget": {"maxPrefixes": 4096}},
                    {"id": "leaf1", "gnmi": {"platform": "openconfig",
                                             "address": "127.0.0.1:%d" % ports["leaf1"]}},
                ]
                if with_python:
                    devices.append({"id": "spine1", "gnmi": {"platform": "openconfig",
                                                             "address": "127.0.0.1:%d" % py_port}})
                return {"topologyPath": ARGS.topology, "telemetryIntervalMs": 200,
                        "profileDirs": [prof_dir], "devices": devices}

            cfg = os.path.join(d, "loomd.cfg.json")
            with open(cfg, "w") as f:
                json.dump(config(True), f)
            loomd = start_process([ARGS.loomd, "--config", cfg, "--db", os.path.join(d, "l.db"),
                                   "--grpc-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                                   "--ready-file", os.path.join(d, "loomd.json")],
                                  os.path.join(d, "loomd.log"))
            procs.append(loomd)
            lr = wait_file(os.path.join(d, "loomd.json"), loomd)
            ctl = [ARGS.loomctl, "--server", "127.0.0.1:%d" % lr["grpc_port"]]

            def devices():
                out = subprocess.run(ctl + ["--json", "devices"], capture_output=True, text=True,
                                     timeout=20)
                self.assertEqual(out.returncode, 0, out.stderr)
                return {x["id"]: x for x in json.loads(out.stdout)["devices"]}

            def sig(dev, name):
                for s in dev.get("signals", []):
                    if s["signal"] == name:
                        return s
                return {}

            def live(dev, name):
                return sig(dev, name).get("state") == "SIGNAL_STATE_LIVE"

            want = {"leaf0": "JSON_IETF", "spine0": "PROTO", "leaf1": "JSON_IETF",
                    "spine1": "JSON_IETF"}
            devs, deadline = {}, time.monotonic() + 40
            while time.monotonic() < deadline:
                devs = devices()
                if all(devs[k].get("state") == "connected" and live(devs[k], "interface-counters")
                       for k in want) and \
                        sig(devs["leaf0"], "queue-depth").get("state") == "SIGNAL_STATE_UNAVAILABLE":
                    break
                time.sleep(0.3)
            for k, enc in want.items():
                self.assertEqual(devs[k].get("state"), "connected", devs[k])
                self.assertEqual(devs[k].get("encoding"), enc, devs[k])
                self.assertTrue(live(devs[k], "interface-counters"), devs[k])
            self.assertEqual(devs["leaf0"]["platform"], "sonic")
            self.assertEqual(devs["spine0"].get("maxPrefixes"), 4096)
            # SONiC serves PFC counters; OpenConfig cannot (unavailable, saying why).
            self.assertTrue(live(devs["leaf0"], "pfc-counters"), devs["leaf0"])
            for k in ("spine0", "leaf1", "spine1"):
                s = sig(devs[k], "pfc-counters")
                self.assertEqual(s.get("state"), "SIGNAL_STATE_UNAVAILABLE", devs[k])
                self.assertIn("no per-priority PFC", s.get("reason", ""))
            # SONiC refreshes queue counters every 10 s: that is the effective interval.
            self.assertEqual(sig(devs["leaf0"], "queue-counters").get("refreshIntervalMs"), 10000)
            self.assertEqual(sig(devs["leaf0"], "interface-counters").get("refreshIntervalMs"), 1000)
            # The rejected subscription: isolated, unavailable with the target's words.
            qd = sig(devs["leaf0"], "queue-depth")
            self.assertIn("rejected by target: INVALID_ARGUMENT", qd.get("reason", ""), qd)
            self.assertGreater(int(qd.get("retryInMs", 0)), 10000, qd)
            # NICs have no source in this inventory.
            self.assertEqual(devs["host000-nic0"]["state"], "no source")
            print(subprocess.run(ctl + ["devices"], capture_output=True, text=True).stdout)
            print(subprocess.run(ctl + ["devices", "leaf0"], capture_output=True, text=True).stdout)

            # Links: quality judged from live data on the SONiC-OpenConfig link;
            # the LLDP contradiction keeps leaf1-spine1 out of placement.
            def links():
                out = subprocess.run(ctl + ["--json", "links", "list"], capture_output=True,
                                     text=True, timeout=20)
                self.assertEqual(out.returncode, 0, out.stderr)
                return {l["link"]["id"]: l for l in json.loads(out.stdout).get("links", [])}

            ls, deadline = {}, time.monotonic() + 20
            while time.monotonic() < deadline:
                ls = links()
                fl = ls[FAULT_LINK]
                if ls[LLDP_BAD_LINK].get("lldp") == "LLDP_CHECK_STATE_CONTRADICTED" and \
                        fl.get("directions") and \
                        not any(x.get("qualityUnknown") for x in fl["directions"]):
                    break
                time.sleep(0.3)
            self.assertEqual(ls[LLDP_BAD_LINK].get("lldp"), "LLDP_CHECK_STATE_CONTRADICTED",
                             ls[LLDP_BAD_LINK])
            self.assertIn("leaf9.pod1.example", ls[LLDP_BAD_LINK].get("lldpDetail", ""))
            self.assertEqual(ls[LLDP_GOOD_LINK].get("lldp"), "LLDP_CHECK_STATE_VERIFIED")
            self.assertFalse(any(x.get("qualityUnknown") for x in ls[FAULT_LINK]["directions"]),
                             ls[FAULT_LINK])
            # A link whose ends serve nothing in this run has an unknown quality, never "7".
            nic_link = [l for i, l in ls.items() if i.startswith("host000-nic0")][0]
            self.assertTrue(all(x.get("qualityUnknown") for x in nic_link.get("directions", [])),
                            nic_link)

            # The scenario's fault (6 s in) on the SONiC-OpenConfig link.
            down, deadline = False, time.monotonic() + 40
            while not down and time.monotonic() < deadline:
                down = links()[FAULT_LINK].get("operState") == "LINK_OPER_STATE_DOWN"
                time.sleep(0.1)
            self.assertTrue(down, "loomd never saw %s go down" % FAULT_LINK)
            print("fault seen %.1f s after the fabric started (fault at 6 s)" %
                  (time.monotonic() - started))
            events = subprocess.run(ctl + ["events"], capture_output=True, text=True,
                                    timeout=20).stdout
            self.assertIn("link_oper_changed", events)
            self.assertIn("lldp_check_changed", events)
            self.assertIn("took the link out of placement", events)
            self.assertIn("telemetry_signal_changed", events)
            self.assertIn("PFC storm detection is off", events)

            # Never faster than the backoff: the rejected path was tried once
            # (plus the splits that isolated it) in all this time.
            rejects = metric(lr["metrics_port"], "loom_telemetry_subscribe_rejects_total")
            self.assertIsNotNone(rejects)
            self.assertLessEqual(rejects, 3, "rejected subscriptions retried too often")
            self.assertGreaterEqual(
                metric(lr["metrics_port"], "loom_telemetry_signals",
                       {"signal": "pfc-counters", "state": "unavailable"}), 3)

            # SIGHUP: spine1 leaves the inventory; the others keep their streams.
            before = int(sig(devices()["leaf0"], "interface-counters").get("updates", 0))
            with open(cfg, "w") as f:
                json.dump(config(False), f)
            loomd.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and devices()["spine1"]["state"] != "no source":
                time.sleep(0.2)
            after = devices()
            self.assertEqual(after["spine1"]["state"], "no source")
            self.assertEqual(after["leaf0"]["state"], "connected")
            self.assertGreaterEqual(int(sig(after["leaf0"], "interface-counters").get("updates", 0)),
                                    before, "leaf0's stream was restarted by the reload")
            with open(os.path.join(d, "loomd.log")) as f:
                self.assertIn("kept=3", f.read())
        finally:
            stop_processes(self, procs)
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for a in ("--loomd", "--loomctl", "--fabric", "--scenario", "--topology", "--profiles"):
        parser.add_argument(a, required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
