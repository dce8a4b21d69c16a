#!/usr/bin/python3
"""loomd's default run: the embedded emulator, programmed and watched live.

Starts the real loomd with --emulate, then checks through the API (Python
grpcio) that the scenario's jobs were registered and assigned, that live
telemetry reaches ListLinks (non-zero utilization on fabric links), and that
the metrics endpoint shows the links up.
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

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomd_harness import generate_messages, unary  # noqa: E402

ARGS = None
pb = {}


class EmbeddedEmulatorTest(unittest.TestCase):
    def test_jobs_assigned_and_live_utilization_visible(self):
        d = tempfile.mkdtemp(prefix="loom-emb-")
        ready = os.path.join(d, "ready.json")
        log = open(os.path.join(d, "loomd.log"), "w")
        proc = subprocess.Popen([ARGS.loomd, "--emulate", ARGS.scenario, "--db", os.path.join(d, "l.db"),
                                 "--grpc-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                                 "--ready-file", ready], stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while not os.path.exists(ready):
                self.assertIsNone(proc.poll(), "loomd exited")
                self.assertLess(time.monotonic(), deadline, "loomd did not start")
                time.sleep(0.05)
            with open(ready) as f:
                info = json.load(f)
            ch = grpc.insecure_channel("127.0.0.1:%d" % info["grpc_port"])
            s, f = pb["sched"], pb["fabric"]
            jobs = unary(ch, "SchedulerService", "ListJobs", s.ListJobsRequest(), s.ListJobsResponse)
            self.assertEqual([j.job_id for j in jobs.jobs], ["ring-small"])
            job = jobs.jobs[0]
            self.assertTrue(job.status.assignment.routes, "TELB pinned the job's destinations")
            self.assertTrue(all(r.via.startswith("spine") for r in job.status.assignment.routes))
            # Live telemetry: some leaf-spine direction carries traffic.
            busiest = 0.0
            deadline = time.monotonic() + 30
            while busiest <= 0.01 and time.monotonic() < deadline:
                links = unary(ch, "FabricService", "ListLinks", f.ListLinksRequest(device="spine0"),
                             f.ListLinksResponse)
                for l in links.links:
                    for dr in l.directions:
                        if not dr.stale:
                            busiest = max(busiest, dr.utilization)
                time.sleep(0.2)
            self.assertGreater(busiest, 0.01, "no live utilization on spine0's links")
            text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % info["metrics_port"],
                                          timeout=10).read().decode()
            self.assertIn('loom_links{state="up"} 12', text)
            self.assertIn("loom_link_utilization{", text)
            ch.close()
        finally:
            proc.terminate()
            self.assertEqual(proc.wait(timeout=20), 0)
            log.close()
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--loomd", required=True)
    parser.add_argument("--proto-dir", required=True)
    parser.add_argument("--scenario", required=True)
    ARGS, rest = parser.parse_known_args()
    pb.update(generate_messages(ARGS.proto_dir))
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
