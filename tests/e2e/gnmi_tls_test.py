#!/usr/bin/python3
"""loomd reading loom-fabric over gNMI with TLS, mutual TLS and credentials.

Certificates are made with openssl at test time (pki.py). loom-fabric A
serves TLS with the test CA's server certificate, requires client
certificates from that CA and a username/password; loom-fabric B serves an
expired certificate. One loomd, one inventory entry per device:
  leaf0, spine0, host002-nic0   TLS + client cert + credentials + server name: live
  spine1                        ca_path = an untrusted CA: not trusted
  leaf1                         wrong password: UNAUTHENTICATED
  host000-nic0                  server_name the certificate does not carry
  host000-nic1                  fabric B (expired server certificate)
  host001-nic0                  no client certificate (A requires one)
  host001-nic1                  plaintext (insecure: true) against the TLS target
The good devices' links carry live utilization over TLS; every bad one is
down with a reason naming TLS (or UNAUTHENTICATED) and loomd keeps serving.
Then loomd refuses to start on a bad PEM / missing file, naming the device and
field, and loom-fabric refuses a bad certificate.
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from loomd_harness import start_process, stop_processes  # noqa: E402
from pki import make_pki  # noqa: E402

ARGS = None
GOOD = ["leaf0", "spine0", "host002-nic0"]
UNTRUSTED_LINK = "leaf1:Ethernet1--spine1:Ethernet1"


def wait_file(path, proc, timeout=30):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise RuntimeError("process exited early (%s)" % path)
        if time.monotonic() > deadline:
            raise RuntimeError("timed out waiting for " + path)
        time.sleep(0.02)
    with open(path) as f:
        return json.load(f)


class GnmiTlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="loom-gnmi-tls-")
        cls.pki = make_pki(os.path.join(cls.dir, "pki"))
        cls.creds = os.path.join(cls.dir, "gnmi-creds")
        with open(cls.creds, "w") as f:
            f.write("loom:s3cret-gnmi\n")
        cls.wrong_creds = os.path.join(cls.dir, "gnmi-wrong-creds")
        with open(cls.wrong_creds, "w") as f:
            f.write("loom:not-the-password\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def fabric(self, procs, name, cert, key, extra=()):
        ready = os.path.join(self.dir, name + ".json")
        p = start_process([ARGS.fabric, ARGS.scenario, "--gnmi-listen", "127.0.0.1:0",
                           "--gnmi-tls-cert", cert, "--gnmi-tls-key", key,
                           "--ready-file", ready] + list(extra),
                          os.path.join(self.dir, name + ".log"))
        procs.append(p)
        return wait_file(ready, p)["gnmi_port"]

    def loomd(self, procs, devices, name="loomd", expect_exit=False):
        cfg = os.path.join(self.dir, name + ".cfg.json")
        with open(cfg, "w") as f:
            json.dump({"topologyPath": ARGS.topology, "telemetryIntervalMs": 100,
                       "devices": devices}, f)
        log = os.path.join(self.dir, name + ".log")
        p = start_process([ARGS.loomd, "--config", cfg, "--db", os.path.join(self.dir, name + ".db"),
                           "--grpc-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                           "--ready-file", os.path.join(self.dir, name + ".ready.json")], log)
        if not expect_exit:
            procs.append(p)
        return p, log

    def good_tls(self, port, **over):
        tls = {"caPath": self.pki["ca.pem"], "certPath": self.pki["client.pem"],
               "keyPath": self.pki["client.key"], "serverName": "gnmi.loom.test"}
        tls.update(over)
        return {"address": "127.0.0.1:%d" % port, "platform": "loom-fabric", "tls": tls,
                "credentialsRef": "file:" + self.creds}

    def test_telemetry_over_tls_and_every_refusal(self):
        procs = []
        try:
            a = self.fabric(procs, "fabric-a", self.pki["server.pem"], self.pki["server.key"],
                            ["--gnmi-tls-client-ca", self.pki["ca.pem"],
                             "--gnmi-credentials", self.creds])
            b = self.fabric(procs, "fabric-b", self.pki["expired.pem"], self.pki["expired.key"])
            devices = [{"id": d, "gnmi": self.good_tls(a)} for d in GOOD]
            devices.append({"id": "spine1", "gnmi": self.good_tls(a, caPath=self.pki["other-ca.pem"])})
            leaf1 = self.good_tls(a)
            leaf1["credentialsRef"] = "file:" + self.wrong_creds
            devices.append({"id": "leaf1", "gnmi": leaf1})
            devices.append({"id": "host000-nic0", "gnmi": self.good_tls(a, serverName="other.example")})
            devices.append({"id": "host000-nic1", "gnmi": self.good_tls(b)})
            no_client = self.good_tls(a)
            del no_client["tls"]["certPath"], no_client["tls"]["keyPath"]
            devices.append({"id": "host001-nic0", "gnmi": no_client})
            plain = self.good_tls(a)
            plain["tls"] = {"insecure": True}
            devices.append({"id": "host001-nic1", "gnmi": plain})
            loomd, _ = self.loomd(procs, devices)
            lr = wait_file(os.path.join(self.dir, "loomd.ready.json"), loomd)
            ctl = [ARGS.loomctl, "--server", "127.0.0.1:%d" % lr["grpc_port"]]

            def run_json(*args):
                out = subprocess.run(ctl + ["--json"] + list(args), capture_output=True,
                                     text=True, timeout=20)
                self.assertEqual(out.returncode, 0, out.stderr)
                return json.loads(out.stdout)

            def live_util():
                # Links with an end on a device read over TLS (the scenario takes
                # leaf0-spine0 down at 6 s, so not that one alone).
                best = 0.0
                for l in run_json("links", "list").get("links", []):
                    lid = l["link"]["id"]
                    if not any(lid.startswith(g + ":") or ("--" + g + ":") in lid
                               for g in ("leaf0", "spine0")):
                        continue
                    for dr in l.get("directions", []):
                        if not dr.get("stale"):
                            best = max(best, dr.get("utilization", 0))
                return best

            bad = {"spine1", "leaf1", "host000-nic0", "host000-nic1", "host001-nic0",
                   "host001-nic1"}
            devs, deadline = {}, time.monotonic() + 40
            while time.monotonic() < deadline:
                devs = {x["id"]: x for x in run_json("devices")["devices"]}
                if all(devs[g].get("state") == "connected" for g in GOOD) and \
                        all(devs[x].get("lastError") for x in bad) and live_util() > 0.01:
                    break
                time.sleep(0.3)
            for g in GOOD:
                self.assertEqual(devs[g].get("state"), "connected", devs[g])
            self.assertGreater(live_util(), 0.01, "no live utilization over TLS")
            err = {x: devs[x].get("lastError", "") for x in bad}
            print(json.dumps(err, indent=1))
            for x in bad:
                self.assertNotEqual(devs[x].get("state"), "connected", devs[x])
            # TLS failures name TLS (the collector's context) and the handshake.
            for x in ("spine1", "host000-nic0", "host000-nic1", "host001-nic0"):
                self.assertIn("TLS", err[x], x)
            self.assertIn("other-ca.pem", err["spine1"])
            for x in ("spine1", "host000-nic1"):  # untrusted CA, expired certificate
                self.assertIn("certificate verify failed", err[x], x)
            self.assertIn("Hostname Verification", err["host000-nic0"])
            self.assertIn("server name other.example", err["host000-nic0"])
            self.assertIn("UNAUTHENTICATED", err["leaf1"])
            self.assertNotIn("TLS", err["host001-nic1"])  # plaintext: no TLS context
            # The link between two refused devices has no data: stale.
            links = {l["link"]["id"]: l for l in run_json("links", "list").get("links", [])}
            untrusted = links[UNTRUSTED_LINK]
            print(json.dumps(untrusted)[:600])
            self.assertTrue(all(dr.get("stale", False) for dr in untrusted.get("directions", [])),
                            untrusted)
            self.assertIsNone(loomd.poll(), "loomd exited")
            with open(os.path.join(self.dir, "fabric-a.log")) as f:
                self.assertIn("wrong credentials", f.read())
        finally:
            stop_processes(self, procs)

    def test_bad_tls_files_refuse_to_start(self):
        procs = []
        try:
            cases = [
                ({"caPath": self.pki["bad.pem"]}, "device leaf0: gnmi.tls.ca_path: ",
                 "holds no PEM certificate"),
                ({"caPath": os.path.join(self.dir, "missing.pem")}, "device leaf0: gnmi.tls.ca_path: ",
                 "cannot read"),
                ({"certPath": self.pki["client.pem"]}, "device leaf0: gnmi.tls.key_path: ",
                 "required with"),
                ({"certPath": self.pki["client.pem"], "keyPath": self.pki["server.key"]},
                 "device leaf0: gnmi.tls.key_path: ", "does not match"),
                ({"insecure": True, "caPath": self.pki["ca.pem"]}, "device leaf0: gnmi.tls.insecure",
                 "cannot be combined"),
            ]
            for i, (tls, where, what) in enumerate(cases):
                p, log = self.loomd(procs, [{"id": "leaf0", "gnmi": {
                    "address": "127.0.0.1:1", "platform": "loom-fabric", "tls": tls}}],
                    name="bad%d" % i, expect_exit=True)
                self.assertEqual(p.wait(timeout=30), 2, tls)
                with open(log) as f:
                    text = f.read()
                self.assertIn(where, text, text)
                self.assertIn(what, text, text)
            # loom-fabric: a key that does not match the certificate.
            p = start_process([ARGS.fabric, ARGS.scenario, "--gnmi-listen", "127.0.0.1:0",
                               "--gnmi-tls-cert", self.pki["server.pem"],
                               "--gnmi-tls-key", self.pki["client.key"]],
                              os.path.join(self.dir, "fabric-bad.log"))
            self.assertEqual(p.wait(timeout=30), 2)
            with open(os.path.join(self.dir, "fabric-bad.log")) as f:
                self.assertIn("does not match", f.read())
        finally:
            stop_processes(self, procs)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--loomd", required=True)
    ap.add_argument("--loomctl", required=True)
    ap.add_argument("--fabric", required=True)
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--topology", required=True)
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest)
