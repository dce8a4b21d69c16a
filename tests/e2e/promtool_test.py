#!/usr/bin/python3
"""Scrapes the real loomd's /metrics after some traffic and runs promtool on it."""
import argparse
import os
import subprocess
import sys
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomd_harness import Loomd  # noqa: E402

ARGS = None


class PromtoolTest(unittest.TestCase):
    def test_metrics_pass_promtool_and_count_requests(self):
        d = Loomd(ARGS.loomd, ARGS.topology)
        try:
            ctl = [ARGS.loomctl, "--server", d.grpc_address]
            subprocess.run(ctl + ["links", "list"], check=True, capture_output=True)
            bad = subprocess.run(ctl + ["jobs", "get", "missing"], capture_output=True)
            self.assertEqual(bad.returncode, 1)
            text = urllib.request.urlopen(d.metrics_url, timeout=10).read().decode()
            check = subprocess.run(["promtool", "check", "metrics"], input=text,
                                   capture_output=True, text=True)
            self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
            self.assertIn('loom_grpc_requests_total{code="NOT_FOUND",'
                          'method="/loom.v1.SchedulerService/GetJob"} 1', text)
            self.assertIn('method="/loom.v1.FabricService/ListLinks"', text)
            self.assertIn("loom_grpc_request_duration_seconds_bucket", text)
            self.assertIn("loom_store_write_seconds_count", text)
            self.assertIn("process_resident_memory_bytes", text)
            self.assertIn("loom_build_info{", text)
        finally:
            d.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--loomd", required=True)
    parser.add_argument("--loomctl", required=True)
    parser.add_argument("--topology", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
