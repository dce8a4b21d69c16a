#!/usr/bin/python3
"""The live fabric view on loomd's metrics port, in a real browser: loomd runs the fault
scenario in its embedded emulator; Debian's chromium, driven over the DevTools protocol by
npm puppeteer-core (tests/e2e/browser/live_view.mjs), loads the page, which must draw the
scenario topology's links, show the link the scenario fails at 15 s as down with its event
in the log, highlight a job's paths on click, and log no console error. Screenshots are kept
in --shots. Also checked over plain HTTP: /metrics passes `promtool check metrics`' parser,
the page's JSON, and that the port is read-only and answers bad requests with clear errors."""
import argparse
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

ARGS = None
FAILED_LINK = "leaf0:Ethernet0--spine0:Ethernet0"  # scenario-faults.json: down at 15 s
DRAWN_ROLES = {"DEVICE_ROLE_LEAF", "DEVICE_ROLE_SPINE", "DEVICE_ROLE_SUPER_SPINE",
               "DEVICE_ROLE_NIC"}


def topology_links(scenario):
    """Links between drawn devices (not hosts), counted from the scenario's topology file."""
    with open(scenario) as f:
        sc = json.load(f)
    with open(os.path.join(os.path.dirname(scenario), sc["topologyFile"])) as f:
        topo = json.load(f)
    roles = {d["id"]: d.get("role") for d in topo["devices"]}
    return [l["id"] for l in topo["links"]
            if roles.get(l["a"]["device"]) in DRAWN_ROLES
            and roles.get(l["b"]["device"]) in DRAWN_ROLES]


class LiveViewTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="loom-live-view-")
        ready = os.path.join(cls.dir, "ready.json")
        cls.log = open(os.path.join(cls.dir, "loomd.log"), "w")
        cls.proc = subprocess.Popen(
            [ARGS.loomd, "--emulate", ARGS.scenario, "--db", os.path.join(cls.dir, "loom.db"),
             "--grpc-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
             "--ready-file", ready], stdout=cls.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not os.path.exists(ready):
            if cls.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("loomd did not start; log in " + cls.dir)
            time.sleep(0.05)
        with open(ready) as f:
            cls.port = json.load(f)["metrics_port"]
        cls.base = "http://127.0.0.1:%d" % cls.port

    @classmethod
    def tearDownClass(cls):
        # Shutdown within 5 s (issue 18) with connections idle, mid-request and
        # keep-alive open on the metrics port.
        socks = []
        for i in range(20):
            s = socket.create_connection(("127.0.0.1", cls.port), timeout=5)
            if i % 2:
                s.sendall(b"GET /api/v1/links HTTP/1.1\r\nHost: x\r\n")  # unfinished
            socks.append(s)
        t0 = time.monotonic()
        cls.proc.terminate()
        rc = cls.proc.wait(timeout=20)
        stop_s = time.monotonic() - t0
        for s in socks:
            s.close()
        print("loomd stopped in %.2f s with 20 open connections on the metrics port" % stop_s)
        cls.log.close()
        if rc != 0:
            with open(os.path.join(cls.dir, "loomd.log")) as f:
                print(f.read()[-4000:])
        shutil.rmtree(cls.dir, ignore_errors=True)
        assert rc == 0, "loomd exited %d" % rc
        assert stop_s < 5, "loomd took %.1f s to stop" % stop_s

    def request(self, method, path, headers=None, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, dict(r.getheaders()), data

    def test_1_page_and_json_over_http(self):
        status, headers, body = self.request("GET", "/")
        self.assertEqual(status, 200)
        self.assertTrue(headers["Content-Type"].startswith("text/html"), headers)
        self.assertIn("default-src 'self'", headers["Content-Security-Policy"])
        self.assertIn(b'src="fabric.js"', body)
        for asset, kind in (("/fabric.js", "text/javascript"), ("/fabric.css", "text/css")):
            status, headers, _ = self.request("GET", asset)
            self.assertEqual(status, 200, asset)
            self.assertTrue(headers["Content-Type"].startswith(kind), headers)
        topo = json.loads(self.request("GET", "/api/v1/topology")[2])
        with open(os.path.join(os.path.dirname(ARGS.scenario), "topology-small.json")) as f:
            self.assertEqual(len(topo["topology"]["links"]), len(json.load(f)["links"]))
        links = json.loads(self.request("GET", "/api/v1/links")[2])["links"]
        self.assertIn(FAILED_LINK, [l["link"]["id"] for l in links])
        # The reconciler knows a switch from the first desired-state push on.
        deadline = time.monotonic() + 15
        while True:
            devices = json.loads(self.request("GET", "/api/v1/devices")[2])["devices"]
            synced = [d for d in devices if d.get("sync", {}).get("driver")]
            if synced or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertTrue(synced, devices)  # the emulator's switches are programmed
        events = json.loads(self.request("GET", "/api/v1/events?limit=5")[2])
        self.assertLessEqual(len(events["events"]), 5)
        self.assertTrue(events["events"], events)
        newest = int(events["events"][-1]["revision"])
        self.assertEqual(int(events["revision"]), newest)
        later = json.loads(self.request("GET", "/api/v1/events?from=%d" % (newest + 1))[2])
        self.assertTrue(all(int(e["revision"]) > newest for e in later["events"]), later)
        health = json.loads(self.request("GET", "/api/v1/jobs/ring-small/health")[2])
        ids = [l["link"]["id"] for l in links]
        self.assertTrue(health["pathLinks"], health)
        self.assertLessEqual(set(health["pathLinks"]), set(ids))

    def test_2_metrics_in_prometheus_text_format(self):
        status, headers, body = self.request("GET", "/metrics")
        self.assertEqual(status, 200)
        self.assertTrue(headers["Content-Type"].startswith("text/plain; version=0.0.4"))
        text = body.decode()
        self.assertIn("\nloom_ready 1", text)
        self.assertIn("# TYPE loom_http_requests_total counter", text)
        self.assertIn("process_resident_memory_bytes", text)
        # Prometheus' own parser (promtool): lint findings are fine, a parse error is not.
        out = subprocess.run(["promtool", "check", "metrics"], input=body,
                             capture_output=True, timeout=30)
        self.assertNotIn(b"error while linting", out.stdout + out.stderr,
                         (out.stdout + out.stderr).decode()[:2000])

    def test_3_read_only_and_bad_requests(self):
        status, headers, body = self.request("POST", "/api/v1/links", body=b"{}")
        self.assertEqual(status, 405)
        self.assertEqual(headers.get("Allow"), "GET, HEAD")
        self.assertIn("read-only", json.loads(body)["error"])
        status, _, body = self.request("GET", "/no/such/page")
        self.assertEqual(status, 404)
        self.assertIn("/no/such/page", json.loads(body)["error"])
        status, _, body = self.request("GET", "/api/v1/events?limit=lots")
        self.assertEqual(status, 400)
        self.assertIn("limit", json.loads(body)["error"])
        status, _, body = self.request("GET", "/api/v1/jobs/no-such-job/health")
        self.assertEqual(status, 404)
        self.assertIn("no-such-job", json.loads(body)["error"])
        status, _, _ = self.request("GET", "/", headers={"X-Big": "x" * 100000})
        self.assertEqual(status, 400)
        status, headers, body = self.request("HEAD", "/metrics")
        self.assertEqual((status, body), (200, b""))
        self.assertGreater(int(headers["Content-Length"]), 0)
        # Over 64 open connections: the rest are closed at accept and counted; once
        # they are gone, the port serves again.
        held = [socket.create_connection(("127.0.0.1", self.port), timeout=5) for _ in range(70)]
        time.sleep(0.5)
        for c in held:
            c.close()
        time.sleep(0.2)
        # Still serving, and every request above was counted.
        text = self.request("GET", "/metrics")[2].decode()
        counted = {l.split(" ")[0] for l in text.splitlines()
                   if l.startswith("loom_http_requests_total{")}
        self.assertTrue(any('handler="method_not_allowed"' in c for c in counted), counted)
        self.assertTrue(any('handler="bad_request"' in c for c in counted), counted)
        refused = [l for l in text.splitlines()
                   if l.startswith("loom_http_connections_refused_total ")]
        self.assertTrue(refused and float(refused[0].split()[1]) >= 6, refused)

    def test_4_browser_sees_the_fabric_and_the_failure(self):
        driver = os.path.join(ARGS.browser_dir, "live_view.mjs")
        self.assertTrue(os.path.isdir(os.path.join(ARGS.browser_dir, "node_modules")),
                        "run scripts/install-deps.sh --test (npm ci --prefix tests/e2e/browser)")
        self.assertTrue(shutil.which(ARGS.chromium) or os.path.exists(ARGS.chromium),
                        "chromium missing: scripts/install-deps.sh --test installs it")
        shutil.rmtree(ARGS.shots, ignore_errors=True)
        expected = topology_links(ARGS.scenario)
        out = subprocess.run(
            ["node", driver, "--url", self.base + "/", "--links", str(len(expected)),
             "--fail-link", FAILED_LINK, "--job", "ring-small", "--shots", ARGS.shots,
             "--chromium", ARGS.chromium, "--timeout-s", "100"],
            capture_output=True, text=True, timeout=160)
        print(out.stdout.strip())
        if out.returncode != 0:
            print(out.stderr[-3000:], file=sys.stderr)
        self.assertEqual(out.returncode, 0, out.stdout[-2000:] + out.stderr[-2000:])
        result = json.loads(out.stdout.strip().splitlines()[-1])
        self.assertTrue(result["ok"])
        self.assertEqual(result["seen"]["linksDrawn"], len(expected))
        self.assertTrue(result["seen"]["highlighted"])
        self.assertLessEqual(set(result["seen"]["highlighted"]), set(expected))
        for shot in ("1-loaded.png", "2-link-down.png", "3-job-paths.png"):
            path = os.path.join(ARGS.shots, shot)
            self.assertGreater(os.path.getsize(path), 10000, path)
        print("screenshots: " + ARGS.shots)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--loomd", required=True)
    p.add_argument("--scenario", required=True)
    p.add_argument("--browser-dir", required=True)
    p.add_argument("--shots", required=True)
    p.add_argument("--chromium", default="/usr/bin/chromium")
    ARGS, rest = p.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
