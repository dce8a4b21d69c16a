#!/usr/bin/python3
"""loomd's metrics port over TLS with client certificates, basic auth and a bearer token.

Certificates are made with openssl at test time (pki.py). loomd serves
/metrics with metricsSecurity: TLS (server cert, client CA), a users file (a
plaintext and a {SHA256} entry) and a bearer token file.
  curl: no credentials / wrong password -> 401 + WWW-Authenticate; right ones
        (both users, the token) -> 200; plaintext HTTP, TLS 1.1 and a client
        without certificate are refused; loom_http_auth_failures_total counts.
  Prometheus (the real server): a job with basic_auth + tls_config is up == 1,
        one with the bearer token is up == 1, one without credentials is
        up == 0 with a 401 error.
  Rotation: the server certificate replaced by one from another CA is served
        to the next connection.
  Bad files refuse to start, naming the field.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from loomd_harness import free_port, start_process, stop_processes, wait_file  # noqa: E402
from pki import client_speaks_tls11, make_pki, tls_handshake  # noqa: E402

ARGS = None
PROMETHEUS = "/usr/bin/prometheus"


class MetricsTlsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="loom-metrics-tls-")
        self.pki = make_pki(os.path.join(self.dir, "pki"))
        # The served certificate is a copy (rotated below).
        self.cert = os.path.join(self.dir, "served.pem")
        self.key = os.path.join(self.dir, "served.key")
        shutil.copy(self.pki["server.pem"], self.cert)
        shutil.copy(self.pki["server.key"], self.key)
        self.users = os.path.join(self.dir, "users")
        with open(self.users, "w") as f:
            f.write("# metrics readers\nprometheus:scrape-pass\n\nops:{SHA256}%s\n" %
                    hashlib.sha256(b"ops-pass").hexdigest())
        self.token = os.path.join(self.dir, "token")
        with open(self.token, "w") as f:
            f.write("tok-0123456789abcdef\n")
        self.procs = []

    def tearDown(self):
        stop_processes(self, self.procs)
        shutil.rmtree(self.dir, ignore_errors=True)

    def start_loomd(self, security, name="loomd", expect_exit=False):
        cfg = os.path.join(self.dir, name + ".cfg.json")
        with open(cfg, "w") as f:
            json.dump({"topologyPath": ARGS.topology, "metricsSecurity": security}, f)
        log = os.path.join(self.dir, name + ".log")
        p = start_process([ARGS.loomd, "--config", cfg, "--db", os.path.join(self.dir, name + ".db"),
                           "--grpc-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                           "--ready-file", os.path.join(self.dir, name + ".ready.json")], log)
        if not expect_exit:
            self.procs.append(p)
        return p, log

    def curl(self, url, *extra, client_cert=True, ca=None, output="/dev/null"):
        args = ["curl", "-sS", "-o", output, "-D", "-", "-w", "%{http_code}", "--max-time", "10",
                "--cacert", ca or self.pki["ca.pem"]]
        if client_cert:
            args += ["--cert", self.pki["client.pem"], "--key", self.pki["client.key"]]
        out = subprocess.run(args + list(extra) + [url], capture_output=True, text=True)
        return out.returncode, out.stdout, out.stderr

    def test_tls_auth_curl_prometheus_rotation(self):
        loomd, _ = self.start_loomd({
            "tlsCertPath": self.cert, "tlsKeyPath": self.key,
            "tlsClientCaPath": self.pki["ca.pem"],
            "basicAuthUsersPath": self.users, "bearerTokenPath": self.token})
        port = wait_file(os.path.join(self.dir, "loomd.ready.json"), loomd)["metrics_port"]
        url = "https://127.0.0.1:%d/metrics" % port

        rc, head, err = self.curl(url)
        self.assertEqual(rc, 0, err)
        self.assertTrue(head.endswith("401"), head)
        self.assertIn('www-authenticate: Basic realm="loomd"', head.lower().replace(
            "basic realm", "Basic realm"))
        rc, head, _ = self.curl(url, "-u", "prometheus:wrong")
        self.assertTrue(head.endswith("401"), head)
        rc, head, _ = self.curl(url, "-H", "Authorization: Bearer wrong-token-0000000")
        self.assertTrue(head.endswith("401"), head)
        for creds in (["-u", "prometheus:scrape-pass"], ["-u", "ops:ops-pass"],
                      ["-H", "Authorization: Bearer tok-0123456789abcdef"]):
            rc, head, err = self.curl(url, *creds)
            self.assertEqual(rc, 0, err)
            self.assertTrue(head.endswith("200"), (creds, head))
        # The live view is behind the same credentials.
        rc, head, _ = self.curl("https://127.0.0.1:%d/api/v1/topology" % port)
        self.assertTrue(head.endswith("401"), head)
        # Refused: plaintext HTTP, TLS 1.1, no client certificate.
        out = subprocess.run(["curl", "-sS", "--max-time", "5", "-o", "/dev/null", "-w",
                              "%{http_code}", "http://127.0.0.1:%d/metrics" % port],
                             capture_output=True, text=True)
        self.assertNotEqual(out.stdout, "200", out)
        self.assertNotEqual(out.stdout, "401", out)
        ok, out = tls_handshake("127.0.0.1", port, "-tls1_1", self.pki["ca.pem"],
                                self.pki["client.pem"], self.pki["client.key"])
        self.assertFalse(ok, "TLS 1.1 accepted:\n" + out)
        self.assertTrue(client_speaks_tls11(self.pki["server.pem"], self.pki["server.key"],
                                            self.pki["ca.pem"], free_port()),
                        "the control: this openssl client cannot speak TLS 1.1 at all")
        rc, head, err = self.curl(url, "-u", "prometheus:scrape-pass", client_cert=False)
        self.assertFalse(rc == 0 and head.endswith("200"), "served without a client certificate")

        # The real Prometheus: with credentials up, without 401 and down.
        prom_port = free_port()
        ca, cc, ck = self.pki["ca.pem"], self.pki["client.pem"], self.pki["client.key"]
        pw = os.path.join(self.dir, "prom-pass")
        with open(pw, "w") as f:
            f.write("scrape-pass")
        tls = "    tls_config: {ca_file: %s, cert_file: %s, key_file: %s}\n" % (ca, cc, ck)
        target = "    static_configs: [{targets: ['127.0.0.1:%d']}]\n" % port
        with open(os.path.join(self.dir, "prometheus.yml"), "w") as f:
            f.write("global: {scrape_interval: 1s, scrape_timeout: 1s}\nscrape_configs:\n"
                    "  - job_name: loom-basic\n    scheme: https\n" + tls + target +
                    "    basic_auth: {username: prometheus, password_file: %s}\n" % pw +
                    "  - job_name: loom-bearer\n    scheme: https\n" + tls + target +
                    "    authorization: {credentials_file: %s}\n" % self.token +
                    "  - job_name: loom-none\n    scheme: https\n" + tls + target)
        prom = start_process([PROMETHEUS, "--config.file", os.path.join(self.dir, "prometheus.yml"),
                              "--storage.tsdb.path", os.path.join(self.dir, "tsdb"),
                              "--web.listen-address", "127.0.0.1:%d" % prom_port],
                             os.path.join(self.dir, "prometheus.log"))
        self.procs.append(prom)
        api = "http://127.0.0.1:%d/api/v1/" % prom_port

        def query(q):
            with urllib.request.urlopen(api + "query?" + urllib.parse.urlencode({"query": q}),
                                        timeout=5) as r:
                return {s["metric"]["job"]: s["value"][1]
                        for s in json.load(r)["data"]["result"]}

        up, deadline = {}, time.monotonic() + 40
        while time.monotonic() < deadline:
            try:
                up = query("up")
            except OSError:
                up = {}
            if len(up) == 3:
                break
            time.sleep(0.5)
        self.assertEqual(up, {"loom-basic": "1", "loom-bearer": "1", "loom-none": "0"})
        with urllib.request.urlopen(api + "targets", timeout=5) as r:
            targets = {t["labels"]["job"]: t for t in json.load(r)["data"]["activeTargets"]}
        self.assertIn("401", targets["loom-none"]["lastError"])
        print("prometheus: loom-none lastError:", targets["loom-none"]["lastError"])
        # A real series scraped over TLS with auth.
        self.assertTrue(query('loom_http_requests_total{job="loom-basic",handler="metrics"}'))

        # loomd counted the refusals.
        rc, _, _ = self.curl(url, "-u", "prometheus:scrape-pass", output=os.path.join(self.dir, "m"))
        with open(os.path.join(self.dir, "m")) as f:
            metrics = f.read()
        self.assertRegex(metrics, r'loom_http_auth_failures_total\{reason="missing"\} [1-9]')
        self.assertRegex(metrics, r'loom_http_auth_failures_total\{reason="wrong"\} [1-9]')
        self.assertRegex(metrics, r'loom_http_tls_handshake_failures_total [1-9]')

        # Rotation: another CA's certificate, served to the next connection.
        shutil.copy(self.pki["other-server.pem"], self.cert + ".new")
        shutil.copy(self.pki["other-server.key"], self.key + ".new")
        os.replace(self.key + ".new", self.key)
        os.replace(self.cert + ".new", self.cert)
        deadline, ok = time.monotonic() + 10, False
        while time.monotonic() < deadline and not ok:
            time.sleep(0.5)
            rc, head, _ = self.curl(url, "-u", "prometheus:scrape-pass",
                                    ca=self.pki["other-ca.pem"])
            ok = rc == 0 and head.endswith("200")
        self.assertTrue(ok, "the rotated certificate is not served")
        self.assertIsNone(loomd.poll())

    def test_bad_files_refuse_to_start(self):
        bad_users = os.path.join(self.dir, "bad-users")
        with open(bad_users, "w") as f:
            f.write("prometheus:ok\nno-colon-here\n")
        short = os.path.join(self.dir, "short-token")
        with open(short, "w") as f:
            f.write("abc\n")
        cases = [
            ({"tlsCertPath": self.cert}, "metrics_security.tls_key_path: required"),
            ({"tlsCertPath": self.pki["bad.pem"], "tlsKeyPath": self.key},
             "metrics_security.tls_cert_path: "),
            ({"tlsCertPath": self.cert, "tlsKeyPath": self.pki["client.key"]},
             "metrics_security.tls_key_path: the key in"),
            ({"basicAuthUsersPath": bad_users}, "metrics_security.basic_auth_users_path: line 2"),
            ({"basicAuthUsersPath": os.path.join(self.dir, "nope")},
             "metrics_security.basic_auth_users_path: cannot read"),
            ({"bearerTokenPath": short}, "metrics_security.bearer_token_path: "),
            ({"tlsClientCaPath": self.pki["ca.pem"]}, "metrics_security.tls_client_ca_path: needs"),
        ]
        for i, (sec, want) in enumerate(cases):
            p, log = self.start_loomd(sec, name="bad%d" % i, expect_exit=True)
            self.assertEqual(p.wait(timeout=30), 2, sec)
            p.log_file.close()
            with open(log) as f:
                text = f.read()
            self.assertIn(want, text, text)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--loomd", required=True)
    ap.add_argument("--topology", required=True)
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest)
