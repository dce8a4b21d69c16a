#!/usr/bin/python3
"""`loomctl jobs why` and loom_job_fabric_slowdown against loomd with the embedded
emulator running deploy/examples/scenario-faults.json (one job, a link of its
paths goes down at 15 s).

Checked after the fault: the answer names the job's state, a verdict that the
fabric slows it, a slowdown that follows the documented formula
(max(1, predicted worst-link utilization) / (1 - largest pause share)), the
problem links sorted worst first and all on the job's paths, throughput from
the emulated NICs' counters, an entropy audit consistent with itself, and the
link-down event among "what Loom did"; the job's slowdown series on /metrics
with the job_id and tenant labels; an unknown job is NOT_FOUND (exit 1); the
table form prints the verdict.
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
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from live_fabric_test import wait_file  # noqa: E402
from loomd_harness import start_process, stop_processes  # noqa: E402

ARGS = None
FAULT = "leaf0:Ethernet0--spine0:Ethernet0"


class JobHealthTest(unittest.TestCase):
    def test_jobs_why_after_a_link_failure(self):
        d = tempfile.mkdtemp(prefix="loom-why-")
        procs = []
        try:
            loomd = start_process([ARGS.loomd, "--emulate", ARGS.scenario, "--db",
                                   os.path.join(d, "l.db"), "--grpc-listen", "127.0.0.1:0",
                                   "--metrics-listen", "127.0.0.1:0", "--ready-file",
                                   os.path.join(d, "ready.json")], os.path.join(d, "loomd.log"))
            procs.append(loomd)
            lr = wait_file(os.path.join(d, "ready.json"), loomd)
            ctl = [ARGS.loomctl, "--server", "127.0.0.1:%d" % lr["grpc_port"]]

            def why(job):
                out = subprocess.run(ctl + ["--json", "jobs", "why", job], capture_output=True,
                                     text=True, timeout=20)
                return out.returncode, (json.loads(out.stdout) if out.returncode == 0 else
                                        out.stderr)

            jobs = json.loads(subprocess.run(ctl + ["--json", "jobs", "list"], check=True,
                                             capture_output=True, text=True).stdout)["jobs"]
            job = jobs[0]["jobId"]
            h, deadline = {}, time.monotonic() + 60
            while time.monotonic() < deadline:
                rc, h = why(job)
                self.assertEqual(rc, 0, h)
                if any(a.get("subject") == FAULT and a.get("type") == "EVENT_TYPE_LINK_OPER_CHANGED"
                       for a in h.get("actions", [])) and h.get("problemLinks"):
                    break
                time.sleep(0.5)
            print(json.dumps(h, indent=1)[:3000])
            self.assertEqual(h["jobId"], job)
            self.assertEqual(h["state"], "JOB_STATE_ASSIGNED")
            self.assertTrue(any(a.get("subject") == FAULT for a in h.get("actions", [])), h)
            # The documented formula, from the answer's own inputs.
            pred = h.get("predictedMaxUtilization", 0)
            pause = h.get("maxPauseRatio", 0)
            self.assertAlmostEqual(h["fabricSlowdown"], max(1.0, pred) / (1 - min(pause, 0.99)),
                                   places=6)
            # The scenario's ring alternates leaves at every step: 4 of its 8 flows go
            # leaf0 -> leaf1 at 400G each (1.6T) over leaf0's two 400G uplinks, one of them
            # failed: at least 2x demand over capacity, whatever the placement.
            self.assertGreaterEqual(h["fabricSlowdown"], 2.0, h)
            self.assertTrue(h.get("slowedByFabric"), h)
            self.assertIn("slowing this job", h["verdict"])
            # Problem links worst first (pause share, then ECN marks, then utilization),
            # each on the job's paths (it carries job routes or is one of its NIC links).
            probs = h["problemLinks"]
            keys = [(bool(l.get("outOfPlacement")), l.get("pfcPauseRatio", 0),
                     l.get("ecnMarkedPps", 0), l.get("utilization", 0)) for l in probs]
            self.assertEqual(keys, sorted(keys, reverse=True))
            self.assertEqual(h["worstLink"]["linkId"], probs[0]["linkId"])
            # The emulated NICs report counters: throughput is measured, within line rate.
            self.assertTrue(h.get("throughputAvailable"), h)
            self.assertGreater(h["achievedBps"], 0)
            self.assertLessEqual(h["achievedBps"], h["lineRateBps"] * 1.01)
            self.assertEqual(h["nicsMeasured"], h["nics"])
            e = h["entropy"]
            self.assertLessEqual(e.get("uplinksUsed", 0), e.get("uplinksAvailable", 0))
            self.assertLessEqual(e.get("spinesUsed", 0), e.get("spinesAvailable", 0))
            self.assertGreater(e["routes"], 0)

            # The Prometheus series for it.
            text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % lr["metrics_port"],
                                          timeout=10).read().decode()
            series = [l for l in text.splitlines()
                      if l.startswith("loom_job_fabric_slowdown{")]
            self.assertEqual(len(series), 1, series)
            self.assertIn('job_id="%s"' % job, series[0])
            self.assertIn('tenant="%s"' % h["tenant"], series[0])
            self.assertGreaterEqual(float(series[0].rsplit(" ", 1)[1]), 1.0)

            rc, err = why("no-such-job")
            self.assertEqual(rc, 1)
            self.assertIn("NOT_FOUND", err)
            table = subprocess.run(ctl + ["jobs", "why", job], capture_output=True, text=True,
                                   timeout=20)
            self.assertEqual(table.returncode, 0)
            self.assertIn("verdict:", table.stdout)
            self.assertIn("what Loom did", table.stdout)
            print(table.stdout)
        finally:
            stop_processes(self, procs)
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for a in ("--loomd", "--loomctl", "--scenario"):
        parser.add_argument(a, required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
