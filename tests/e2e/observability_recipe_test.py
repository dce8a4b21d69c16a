#!/usr/bin/python3
"""deploy/observability/run.sh as a new user runs it: loomd on the fault scenario plus
Debian's Prometheus with Loom's rules. Checked: Prometheus loads every rule group, scrapes
loomd (up == 1), and the scenario's link failure at 15 s shows as the LoomLinkDown alert
(pending or firing) naming the link, while loomctl shows the remediation event."""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest
import urllib.request

from loomd_harness import free_port  # noqa: E402

ARGS = None




def get(url):
    return json.loads(urllib.request.urlopen(url, timeout=10).read().decode())


class ObservabilityRecipeTest(unittest.TestCase):
    def test_recipe_shows_a_remediation_as_an_alert(self):
        port = free_port()
        env = dict(os.environ, BUILD_DIR=ARGS.build_dir)
        proc = subprocess.Popen([os.path.join(ARGS.source_dir, "deploy/observability/run.sh"),
                                 "--prometheus-port", str(port)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        out = []
        try:
            grpc = None
            deadline = time.monotonic() + 60
            while grpc is None and time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                out.append(line)
                m = re.search(r"gRPC 127\.0\.0\.1:(\d+)", line)
                if m:
                    grpc = int(m.group(1))
            self.assertIsNotNone(grpc, "".join(out))
            base = "http://127.0.0.1:%d" % port
            alert, up, groups = None, None, []
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                try:
                    groups = get(base + "/api/v1/rules")["data"]["groups"]
                    up = get(base + "/api/v1/query?query=up")["data"]["result"]
                    alerts = get(base + "/api/v1/alerts")["data"]["alerts"]
                except OSError:
                    time.sleep(0.5)
                    continue
                alert = next((a for a in alerts if a["labels"]["alertname"] == "LoomLinkDown"),
                             None)
                if alert:
                    break
                time.sleep(1)
            self.assertGreaterEqual(len(groups), 5, groups)
            self.assertTrue(up and up[0]["value"][1] == "1", up)
            self.assertIsNotNone(alert, "LoomLinkDown never became pending or firing")
            self.assertIn(alert["state"], ("pending", "firing"))
            self.assertEqual(alert["labels"]["link"], "leaf0:Ethernet0--spine0:Ethernet0")
            self.assertIn("leaf0:Ethernet0--spine0:Ethernet0", alert["annotations"]["summary"])
            events = subprocess.run([ARGS.loomctl, "--server", "127.0.0.1:%d" % grpc, "events"],
                                    capture_output=True, text=True, timeout=20).stdout
            self.assertIn("took the link out of placement", events)
            print("LoomLinkDown %s: %s" % (alert["state"], alert["annotations"]["summary"]))
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for a in ("--source-dir", "--build-dir", "--loomctl"):
        parser.add_argument(a, required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
