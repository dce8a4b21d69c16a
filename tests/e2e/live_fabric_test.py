#!/usr/bin/python3
"""loomd watching a running loom-fabric over real gNMI, as it would real switches.

Starts `loom-fabric` (the emulator as a gNMI target, paced at real time) and
loomd with --telemetry-address pointing at it; `loomctl links` must show live
utilization and quality. The scenario takes a link down 6 s in: the time from
that fault to loomd reporting the link DOWN is printed (counter/state change in
the emulator -> controller link state, over gNMI).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomd_harness import start_process, stop_processes  # noqa: E402

ARGS = None
LINK = "leaf0:Ethernet0--spine0:Ethernet0"


def wait_file(path, proc, timeout=30):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise RuntimeError("process exited early")
        if time.monotonic() > deadline:
            raise RuntimeError("timed out waiting for " + path)
        time.sleep(0.02)
    with open(path) as f:
        return json.load(f)


class LiveFabricTest(unittest.TestCase):
    def test_loomctl_links_shows_live_utilization_and_link_down(self):
        d = tempfile.mkdtemp(prefix="loom-live-")
        procs = []
        try:
            fabric = start_process([ARGS.fabric, ARGS.scenario, "--gnmi-listen", "127.0.0.1:0",
                                    "--ready-file", os.path.join(d, "fabric.json")],
                                   os.path.join(d, "fabric.log"))
            procs.append(fabric)
            started = time.monotonic()  # virtual time ~ wall time from here (real-time pacing)
            gnmi = wait_file(os.path.join(d, "fabric.json"), fabric)["gnmi_port"]
            loomd = start_process([ARGS.loomd, "--topology", ARGS.topology,
                                   "--db", os.path.join(d, "l.db"),
                                   "--grpc-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                                   "--telemetry-address", "127.0.0.1:%d" % gnmi,
                                   "--telemetry-interval-ms", "100",
                                   "--ready-file", os.path.join(d, "loomd.json")],
                                  os.path.join(d, "loomd.log"))
            procs.append(loomd)
            port = wait_file(os.path.join(d, "loomd.json"), loomd)["grpc_port"]
            ctl = [ARGS.loomctl, "--server", "127.0.0.1:%d" % port]

            def links():
                out = subprocess.run(ctl + ["--json", "links", "list"], capture_output=True,
                                     text=True, timeout=20)
                self.assertEqual(out.returncode, 0, out.stderr)
                return json.loads(out.stdout).get("links", [])

            busiest, deadline = 0.0, time.monotonic() + 30
            while busiest <= 0.01 and time.monotonic() < deadline:
                for l in links():
                    for dr in l.get("directions", []):
                        if not dr.get("stale"):
                            busiest = max(busiest, dr.get("utilization", 0))
                time.sleep(0.2)
            self.assertGreater(busiest, 0.01, "no live utilization seen by loomd")
            table = subprocess.run(ctl + ["links", "list", "--device", "spine0"], capture_output=True,
                                   text=True, timeout=20).stdout
            print(table)
            self.assertIn("UTIL UP/DOWN", table)
            self.assertIn(" up ", table)

            # The scenario takes LINK down at 6 s of (real-time) virtual time.
            down_at, deadline = None, time.monotonic() + 40
            while down_at is None and time.monotonic() < deadline:
                for l in links():
                    if l["link"]["id"] == LINK and l.get("operState") == "LINK_OPER_STATE_DOWN":
                        down_at = time.monotonic()
                time.sleep(0.02)
            self.assertIsNotNone(down_at, "loomd never saw the link go down")
            print("fault-to-controller latency: %.0f ms (fault at 6.0 s of emulator time; "
                  "includes real-time pacing error)" % ((down_at - started - 6.0) * 1000))
            events = subprocess.run(ctl + ["events"], capture_output=True, text=True,
                                    timeout=20).stdout
            self.assertIn("link_oper_changed", events)
            self.assertIn(LINK, events)
        finally:
            stop_processes(self, procs)
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for a in ("--loomd", "--loomctl", "--fabric", "--scenario", "--topology"):
        parser.add_argument(a, required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
