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

gNMI Set over TLS (test_set_programming_over_tls): a second loomd programs
fabric A with `set: {adapter: loom}` (the loom-schema GnmiDriver; fabric A's
--personality targets stay plaintext, so the platform adapters cannot be
exercised over TLS here) and fabricSettings thresholds on every switch:
  leaf0   mTLS + credentials: in sync, applied thresholds = desired, and an
          independent gNMI Get (Python, same mTLS + credentials) of fabric A's
          OPERATIONAL view shows leaf0 runs them
  leaf1   ca_path = the untrusted CA: not in sync, error names the handshake
  spine0  wrong password: not in sync, lastError "UNAUTHENTICATED: wrong username or password"
          (UNAUTHENTICATED: code 16 in the Set driver's log)
loomd keeps running and a plaintext client is refused by fabric A.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "pygnmi"))
from loomd_harness import start_process, stop_processes, wait_file  # noqa: E402
from pki import make_pki  # noqa: E402

ARGS = None
GOOD = ["leaf0", "spine0", "host002-nic0"]
UNTRUSTED_LINK = "leaf1:Ethernet1--spine1:Ethernet1"


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

    def loomd(self, procs, devices, name="loomd", expect_exit=False, extra_cfg=None):
        cfg = os.path.join(self.dir, name + ".cfg.json")
        with open(cfg, "w") as f:
            json.dump(dict({"topologyPath": ARGS.topology, "telemetryIntervalMs": 100,
                            "devices": devices}, **(extra_cfg or {})), f)
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

    def test_set_programming_over_tls(self):
        import grpc
        import gnmi_stubs
        pb, pb_grpc = gnmi_stubs.load()
        procs = []
        try:
            a = self.fabric(procs, "set-fabric", self.pki["server.pem"], self.pki["server.key"],
                            ["--gnmi-tls-client-ca", self.pki["ca.pem"],
                             "--gnmi-credentials", self.creds])
            loom_set = {"adapter": "loom"}  # address: gnmi.address
            spine0 = self.good_tls(a)
            spine0["credentialsRef"] = "file:" + self.wrong_creds
            devices = [
                {"id": "leaf0", "gnmi": self.good_tls(a), "set": loom_set},
                {"id": "leaf1", "gnmi": self.good_tls(a, caPath=self.pki["other-ca.pem"]),
                 "set": loom_set},
                {"id": "spine0", "gnmi": spine0, "set": loom_set}]
            kmin = {"DEVICE_ROLE_LEAF": "40000", "DEVICE_ROLE_SPINE": "48000"}
            settings = [{"role": role, "thresholds": [
                {"priority": 3, "ecnKminBytes": k, "ecnKmaxBytes": "160000",
                 "ecnPmaxPercent": 15}]} for role, k in kmin.items()]
            loomd, _ = self.loomd(procs, devices, name="set-loomd",
                                  extra_cfg={"fabricSettings": settings})
            lr = wait_file(os.path.join(self.dir, "set-loomd.ready.json"), loomd)
            ctl = [ARGS.loomctl, "--server", "127.0.0.1:%d" % lr["grpc_port"]]

            def device(name):
                out = subprocess.run(ctl + ["--json", "device", name], capture_output=True,
                                     text=True, timeout=20)
                self.assertEqual(out.returncode, 0, out.stderr)
                return json.loads(out.stdout)

            def done(st):
                return (st["leaf0"]["sync"].get("inSync") and
                        st["leaf0"]["applied"].get("thresholds") and
                        all(st[x]["sync"].get("lastError") for x in ("leaf1", "spine0")))

            st, deadline = {}, time.monotonic() + 20
            while time.monotonic() < deadline:
                st = {n: device(n) for n in ("leaf0", "leaf1", "spine0")}
                if done(st):
                    break
                time.sleep(0.2)
            print(json.dumps({n: s["sync"] for n, s in st.items()}, indent=1))
            good = st["leaf0"]
            self.assertTrue(good["sync"].get("inSync"), good)
            self.assertEqual(good["sync"]["driver"], "gnmi", good)
            self.assertFalse(good["sync"].get("lastError"), good)
            self.assertFalse(good["sync"].get("failures"), good)
            self.assertTrue(good["desired"].get("thresholds"), good)
            self.assertEqual(good["applied"]["thresholds"], good["desired"]["thresholds"])
            self.assertEqual(good["applied"]["thresholds"][0]["ecnKminBytes"], "40000")
            for x in ("leaf1", "spine0"):
                self.assertFalse(st[x]["sync"].get("inSync"), st[x])
                self.assertTrue(st[x]["desired"].get("thresholds"), st[x])
                self.assertFalse(st[x]["applied"].get("thresholds"), st[x])
            # The Set driver's lastError names the code and, for a failed connection,
            # how it was made (as the collector's telemetry errors do): the handshake
            # failure names TLS and the CA; the credentials refusal is the target's
            # UNAUTHENTICATED (its code, 16, also in the Set driver's log: its read of
            # the device before the Set, "gnmi get failed", is what is refused).
            bad_ca = st["leaf1"]["sync"].get("lastError", "")
            self.assertIn("Tls handshake failed", bad_ca)
            self.assertIn("certificate verify failed", bad_ca)
            self.assertIn("UNAVAILABLE", bad_ca)
            self.assertIn("[connection over TLS (CA ", bad_ca)
            bad_pw = st["spine0"]["sync"].get("lastError", "")
            self.assertIn("UNAUTHENTICATED: wrong username or password", bad_pw)
            with open(os.path.join(self.dir, "set-loomd.log")) as f:
                refused = [line for line in f if re.search(
                    r'msg="gnmi (get|set) failed" device=spine0 code=16 ', line)]
            self.assertTrue(refused, "no UNAUTHENTICATED gnmi get/set for spine0 in loomd's log")
            self.assertIsNone(loomd.poll(), "loomd exited")

            # What fabric A runs, read by an independent client over the same mTLS
            # with credentials; a plaintext client gets nothing.
            def read(name):
                with open(self.pki[name], "rb") as f:
                    return f.read()
            creds = grpc.ssl_channel_credentials(read("ca.pem"), read("client.key"),
                                                 read("client.pem"))
            chan = grpc.secure_channel("127.0.0.1:%d" % a, creds, options=[
                ("grpc.ssl_target_name_override", "gnmi.loom.test")])
            stub = pb_grpc.gNMIStub(chan)
            meta = [("username", "loom"), ("password", "s3cret-gnmi")]

            def operational(dev):
                p = pb.Path()
                p.elem.add(name="qos")
                p.elem.add(name="thresholds")
                resp = stub.Get(pb.GetRequest(prefix=pb.Path(origin="loom", target=dev), path=[p],
                                              type=pb.GetRequest.OPERATIONAL,
                                              encoding=pb.JSON_IETF), timeout=10, metadata=meta)
                return " ".join(u.val.json_ietf_val.decode() for n in resp.notification
                                for u in n.update)
            leaf0_runs, spine0_runs = operational("leaf0"), operational("spine0")
            print("leaf0 runs:", leaf0_runs[:300])
            self.assertIn("40000", leaf0_runs)
            self.assertNotIn("48000", spine0_runs)  # its Set never got through
            chan.close()
            plain = pb_grpc.gNMIStub(grpc.insecure_channel("127.0.0.1:%d" % a))
            with self.assertRaises(grpc.RpcError):
                plain.Get(pb.GetRequest(prefix=pb.Path(origin="loom", target="leaf0")),
                          timeout=5, metadata=meta)
            self.assertTrue(device("leaf0")["sync"].get("inSync"))
            self.assertIsNone(loomd.poll(), "loomd exited")
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
