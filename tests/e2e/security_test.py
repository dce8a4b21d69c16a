#!/usr/bin/python3
"""The API's security end to end (issue 21): TLS and mTLS with certificates made by
openssl at test time, identities from client certificates and JWTs (signed by openssl),
roles and tenant scopes, denials (PERMISSION_DENIED naming the permission, counted,
audited, in the event log), the audit log, tenant-scoped watches, TLS 1.2 minimum,
certificate reload without dropping streams, the non-loopback refusal, and loomctl and
the Python client's credentials (flags, environment, config file).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomd_harness import Loomd, free_port, generate_messages  # noqa: E402
from pki import Pki, b64url, client_speaks_tls11, make_jwt, tls_handshake  # noqa: E402

ARGS = None
pb = {}


def run(*argv, **kw):
    return subprocess.run(list(argv), check=True, capture_output=True, text=True, **kw)


class SecurityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="loom-sec-")
        pki = cls.pki = Pki(cls.tmp)
        cls.server_crt, cls.server_key = pki.issue("server", "loomd", "DNS:loomd,IP:127.0.0.1")
        cls.certs = {}
        for name in ("sched-a", "sched-b", "viewer1", "ops1", "viewer-a"):
            cls.certs[name] = pki.issue(name, name, "DNS:" + name)
        cls.certs["expired"] = pki.issue("expired", "sched-a-old", "DNS:sched-a", expired=True)
        cls.certs["untrusted"] = pki.issue("untrusted", "sched-a", "DNS:sched-a", ca="other-ca")
        # A CN that names the operator on a certificate whose DNS name is someone else's,
        # and the reverse: bindings match the certificate's one name (URI, else DNS SAN,
        # else CN).
        cls.certs["cn-ops1"] = pki.issue("cn-ops1", "ops1", "DNS:build42")
        cls.certs["dns-ops1"] = pki.issue("dns-ops1", "build43", "DNS:ops1")
        # The JWT issuer's key pair, and a key nobody trusts.
        cls.jwt_key = pki.p("jwt-key.pem")
        run("openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
            "-out", cls.jwt_key)
        run("openssl", "pkey", "-in", cls.jwt_key, "-pubout", "-out", pki.p("jwt-pub.pem"))
        # An EC key listed first: an RS256 token is still verified by the RSA key.
        run("openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-out", pki.p("jwt-ec-key.pem"))
        run("openssl", "pkey", "-in", pki.p("jwt-ec-key.pem"), "-pubout", "-out",
            pki.p("jwt-ec-pub.pem"))
        cls.rogue_key = pki.p("rogue-key.pem")
        run("openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
            "-out", cls.rogue_key)
        # Served from copies, so the reload test can replace them.
        cls.live_crt, cls.live_key = pki.p("live.pem"), pki.p("live-key.pem")
        shutil.copy(cls.server_crt, cls.live_crt)
        shutil.copy(cls.server_key, cls.live_key)
        cls.audit = os.path.join(cls.tmp, "audit.log")
        config = {
            "tls": {"certPath": cls.live_crt, "keyPath": cls.live_key, "caPath": pki.ca,
                    "clientAuth": "optional", "refreshIntervalS": 1},
            "auth": {
                "bindings": [
                    {"subjects": ["cert:sched-a"], "role": "scheduler", "tenants": ["tenant-a"]},
                    {"subjects": ["cert:sched-b"], "role": "scheduler", "tenants": ["tenant-b"]},
                    {"subjects": ["cert:viewer1"], "role": "viewer"},
                    {"subjects": ["cert:viewer-a"], "role": "viewer", "tenants": ["tenant-a"]},
                    {"subjects": ["cert:ops1"], "role": "operator"},
                    {"subjects": ["ci:deployer"], "role": "admin"},
                ],
                "jwt": [{"name": "ci", "issuer": "https://issuer.test", "audience": "loom",
                         "publicKeyPaths": [pki.p("jwt-ec-pub.pem"), pki.p("jwt-pub.pem")]}],
                "auditLogPath": cls.audit,
            },
        }
        cls.loomd = Loomd(ARGS.loomd, ARGS.topology, config=config)
        cls.addr = cls.loomd.grpc_address

    @classmethod
    def tearDownClass(cls):
        cls.loomd.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # -- helpers ------------------------------------------------------------------

    def channel(self, who=None, ca=None):
        ca = ca or self.pki.ca
        with open(ca, "rb") as f:
            root = f.read()
        key = chain = None
        if who:
            crt, k = self.certs[who]
            with open(crt, "rb") as f:
                chain = f.read()
            with open(k, "rb") as f:
                key = f.read()
        creds = grpc.ssl_channel_credentials(root, key, chain)
        return grpc.secure_channel(self.addr, creds)

    def call(self, ch, service, method, req, resp_cls, token=None):
        c = ch.unary_unary("/loom.v1.%s/%s" % (service, method),
                           request_serializer=lambda m: m.SerializeToString(),
                           response_deserializer=resp_cls.FromString)
        md = (("authorization", "Bearer " + token),) if token else None
        return c(req, timeout=10, metadata=md)

    def job(self, job_id, tenant):
        j = pb["job"].Job(tenant=tenant, job_id=job_id,
                          endpoints=["host000-gpu0", "host002-gpu1"], traffic_class=3,
                          collective=pb["job"].COLLECTIVE_PATTERN_ALL_TO_ALL)
        j.qp_ranges.add(first=10, last=20)
        return j

    def register(self, who, job_id, tenant):
        s = pb["sched"]
        with self.channel(who) as ch:
            return self.call(ch, "SchedulerService", "RegisterJob",
                             s.RegisterJobRequest(job=self.job(job_id, tenant)),
                             s.RegisterJobResponse)

    def denied(self, fn):
        with self.assertRaises(grpc.RpcError) as err:
            fn()
        return err.exception

    def audit_records(self):
        with open(self.audit) as f:
            return [json.loads(line) for line in f if line.strip()]

    def events(self, ch, start=1):
        f = pb["fabric"]
        stream = ch.unary_stream("/loom.v1.FabricService/WatchEvents",
                                 request_serializer=lambda m: m.SerializeToString(),
                                 response_deserializer=f.WatchEventsResponse.FromString)
        return [r.event for r in stream(f.WatchEventsRequest(start_revision=start,
                                                             replay_only=True), timeout=10)]

    def loomctl(self, *args, env=None, check=True):
        e = dict(os.environ)
        for k in list(e):
            if k.startswith("LOOM"):
                del e[k]
        e["HOME"] = self.tmp
        e.update(env or {})
        r = subprocess.run([ARGS.loomctl, "--server", self.addr] + list(args), env=e,
                           capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            self.fail("loomctl %s: exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout,
                                                     r.stderr))
        return r

    def token(self, _key=None, **over):
        claims = {"iss": "https://issuer.test", "aud": ["other", "loom"], "sub": "deployer",
                  "exp": int(time.time()) + 300, "iat": int(time.time())}
        claims.update(over)
        return make_jwt(_key or self.jwt_key, {k: v for k, v in claims.items() if v is not None})

    # -- tests --------------------------------------------------------------------

    def test_mtls_scheduler_registers_and_cross_tenant_release_is_denied_and_audited(self):
        r = self.register("sched-a", "sec-a1", "tenant-a")
        self.assertEqual(r.job.tenant, "tenant-a")
        s = pb["sched"]
        before = self.loomd.metric("loom_api_denied_total")
        with self.channel("sched-b") as ch:
            err = self.denied(lambda: self.call(ch, "SchedulerService", "ReleaseJob",
                                                s.ReleaseJobRequest(job_id="sec-a1"),
                                                s.ReleaseJobResponse))
            self.assertEqual(err.code(), grpc.StatusCode.PERMISSION_DENIED)
            self.assertIn("jobs.write", err.details())
            self.assertIn("tenant-a", err.details())
            # Registering into another tenant is refused the same way.
            err = self.denied(lambda: self.call(ch, "SchedulerService", "RegisterJob",
                                                s.RegisterJobRequest(
                                                    job=self.job("sec-b-bad", "tenant-a")),
                                                s.RegisterJobResponse))
            self.assertEqual(err.code(), grpc.StatusCode.PERMISSION_DENIED)
            # Reading another tenant's job is refused; its own list is empty of them.
            err = self.denied(lambda: self.call(ch, "SchedulerService", "GetJob",
                                                s.GetJobRequest(job_id="sec-a1"),
                                                s.GetJobResponse))
            self.assertEqual(err.code(), grpc.StatusCode.PERMISSION_DENIED)
            listed = self.call(ch, "SchedulerService", "ListJobs", s.ListJobsRequest(),
                               s.ListJobsResponse)
            self.assertNotIn("sec-a1", [j.job_id for j in listed.jobs])
        self.assertGreaterEqual(self.loomd.metric("loom_api_denied_total"), before + 3)
        # The job is still there.
        with self.channel("sched-a") as ch:
            got = self.call(ch, "SchedulerService", "GetJob", s.GetJobRequest(job_id="sec-a1"),
                            s.GetJobResponse)
            self.assertEqual(got.job.job_id, "sec-a1")
        # Audit log: the registration (ok) and the denied release, with who and from where.
        recs = self.audit_records()
        reg = [r for r in recs if r["method"] == "RegisterJob" and r.get("subject") == "sec-a1"]
        self.assertTrue(reg and reg[0]["identity"] == "cert:sched-a" and reg[0]["result"] == "ok",
                        recs)
        self.assertIn("127.0.0.1", reg[0]["peer"])
        rel = [r for r in recs if r["method"] == "ReleaseJob" and r.get("subject") == "sec-a1"]
        self.assertTrue(rel and rel[0]["identity"] == "cert:sched-b" and
                        rel[0]["result"] == "denied" and "jobs.write" in rel[0]["message"], recs)
        # Event log: the registration names its actor; the denial is an ACCESS_DENIED event.
        with self.channel("viewer1") as ch:
            evs = self.events(ch)
        regs = [e for e in evs if e.type == pb["event"].EVENT_TYPE_JOB_REGISTERED and
                e.subject == "sec-a1"]
        self.assertEqual(regs[0].actor, "cert:sched-a")
        self.assertIn("127.0.0.1", regs[0].peer)
        denials = [e for e in evs if e.type == pb["event"].EVENT_TYPE_ACCESS_DENIED and
                   e.actor == "cert:sched-b" and e.subject == "sec-a1"]
        self.assertTrue(denials, [(e.type, e.subject, e.actor) for e in evs])
        self.assertIn("jobs.write", denials[0].result)

    def test_viewer_cannot_drain_operator_can_and_loomctl_shows_the_actor(self):
        link = "leaf0:Ethernet0--spine0:Ethernet0"
        with self.channel("viewer1") as ch:
            topo = self.call(ch, "FabricService", "GetTopology",
                             pb["fabric"].GetTopologyRequest(),
                             pb["fabric"].GetTopologyResponse)
            link = topo.topology.links[-1].id
        crt, key = self.certs["viewer1"]
        r = self.loomctl("--ca", self.pki.ca, "--cert", crt, "--key", key, "links", "drain", link,
                         "--reason", "viewer tries", check=False)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("PERMISSION_DENIED", r.stderr)
        self.assertIn("links.drain", r.stderr)
        crt, key = self.certs["ops1"]
        self.loomctl("--ca", self.pki.ca, "--cert", crt, "--key", key, "links", "drain", link,
                     "--reason", "optics swap")
        r = self.loomctl("--ca", self.pki.ca, "--cert", crt, "--key", key, "events")
        drained = [ln for ln in r.stdout.splitlines() if "link_drained" in ln and link in ln]
        self.assertTrue(drained and "actor=cert:ops1" in drained[-1], r.stdout)
        self.loomctl("--ca", self.pki.ca, "--cert", crt, "--key", key, "links", "undrain", link)
        recs = [x for x in self.audit_records() if x["method"] == "DrainLink"]
        self.assertEqual([(x["identity"], x["result"]) for x in recs],
                         [("cert:viewer1", "denied"), ("cert:ops1", "ok")])

    def test_untrusted_expired_and_missing_credentials_are_refused(self):
        s = pb["sched"]
        for who in ("expired", "untrusted"):
            with self.channel(who) as ch:
                err = self.denied(lambda: self.call(ch, "SchedulerService", "ListJobs",
                                                    s.ListJobsRequest(), s.ListJobsResponse))
                self.assertEqual(err.code(), grpc.StatusCode.UNAVAILABLE, (who, err.details()))
        with self.channel(None) as ch:  # TLS, no certificate, no token
            err = self.denied(lambda: self.call(ch, "SchedulerService", "ListJobs",
                                                s.ListJobsRequest(), s.ListJobsResponse))
            self.assertEqual(err.code(), grpc.StatusCode.UNAUTHENTICATED)
            self.assertIn("no client certificate and no bearer token", err.details())
        # Plaintext to a TLS port gets nowhere.
        with grpc.insecure_channel(self.addr) as ch:
            err = self.denied(lambda: self.call(ch, "SchedulerService", "ListJobs",
                                                s.ListJobsRequest(), s.ListJobsResponse))
            self.assertEqual(err.code(), grpc.StatusCode.UNAVAILABLE)
        # The server's certificate is verified by clients: another CA is not trusted.
        with self.channel("sched-a", ca=self.pki.other_ca) as ch:
            err = self.denied(lambda: self.call(ch, "SchedulerService", "ListJobs",
                                                s.ListJobsRequest(), s.ListJobsResponse))
            self.assertEqual(err.code(), grpc.StatusCode.UNAVAILABLE)

    def hs256_with_public_key(self):
        import hashlib
        import hmac
        head = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        body = b64url(json.dumps({"iss": "https://issuer.test", "aud": "loom", "sub": "deployer",
                                  "exp": int(time.time()) + 300}).encode())
        with open(self.pki.p("jwt-pub.pem"), "rb") as f:
            secret = f.read()
        sig = hmac.new(secret, (head + "." + body).encode(), hashlib.sha256).digest()
        return head + "." + body + "." + b64url(sig)

    def test_certificate_bindings_match_the_certificates_one_name(self):
        f = pb["fabric"]
        with self.channel("cn-ops1") as ch:  # CN ops1, DNS build42: it is cert:build42
            err = self.denied(lambda: self.call(ch, "FabricService", "ListLinks",
                                                f.ListLinksRequest(), f.ListLinksResponse))
            self.assertEqual(err.code(), grpc.StatusCode.PERMISSION_DENIED)
            self.assertIn("cert:build42 has no role", err.details())
        with self.channel("dns-ops1") as ch:  # DNS ops1: the operator
            self.call(ch, "FabricService", "ListLinks", f.ListLinksRequest(),
                      f.ListLinksResponse)

    def test_cross_tenant_update_and_request_ids_per_identity(self):
        s = pb["sched"]
        self.register("sched-a", "sec-upd", "tenant-a")
        with self.channel("sched-b") as ch:
            for tenant in ("tenant-a", "tenant-b"):  # someone else's job, or moving it
                err = self.denied(lambda: self.call(
                    ch, "SchedulerService", "UpdateJob",
                    s.UpdateJobRequest(job=self.job("sec-upd", tenant)), s.UpdateJobResponse))
                self.assertEqual(err.code(), grpc.StatusCode.PERMISSION_DENIED, tenant)
            # B uses the request id A's next registration will use: A is not blocked.
            self.call(ch, "SchedulerService", "RegisterJob",
                      s.RegisterJobRequest(job=self.job("sec-rid-b", "tenant-b"),
                                           request_id="slurm-7-prolog-0"),
                      s.RegisterJobResponse)
        with self.channel("sched-a") as ch:
            r = self.call(ch, "SchedulerService", "RegisterJob",
                          s.RegisterJobRequest(job=self.job("sec-rid-a", "tenant-a"),
                                               request_id="slurm-7-prolog-0"),
                          s.RegisterJobResponse)
            self.assertEqual(r.job.job_id, "sec-rid-a")
            again = self.call(ch, "SchedulerService", "RegisterJob",
                              s.RegisterJobRequest(job=self.job("sec-rid-a", "tenant-a"),
                                                   request_id="slurm-7-prolog-0"),
                              s.RegisterJobResponse)
            self.assertEqual(again, r, "a retry by the same identity is replayed")

    def test_unauthenticated_refusals_reach_the_event_log(self):
        s = pb["sched"]
        with self.channel(None) as ch:
            self.denied(lambda: self.call(ch, "SchedulerService", "ReleaseJob",
                                          s.ReleaseJobRequest(job_id="sec-unauth"),
                                          s.ReleaseJobResponse))
        with self.channel("viewer1") as ch:
            evs = [e for e in self.events(ch) if e.type == pb["event"].EVENT_TYPE_ACCESS_DENIED
                   and e.subject == "sec-unauth"]
        self.assertTrue(evs)
        self.assertEqual(evs[0].actor, "unauthenticated")
        self.assertIn("no client certificate and no bearer token", evs[0].result)

    def test_bearer_tokens(self):
        s = pb["sched"]
        with self.channel(None) as ch:
            ok = self.call(ch, "SchedulerService", "RegisterJob",
                           s.RegisterJobRequest(job=self.job("sec-jwt", "tenant-z")),
                           s.RegisterJobResponse, token=self.token())
            self.assertEqual(ok.job.job_id, "sec-jwt")
            cases = {
                "expired": self.token(exp=int(time.time()) - 3600),
                "audience": self.token(aud="someone-else"),
                "issuer": self.token(iss="https://evil.test"),
                "no exp": self.token(exp=None),
                "signature": self.token(_key=self.rogue_key),
                "alg none": make_jwt(None, {"iss": "https://issuer.test", "aud": "loom",
                                            "sub": "deployer", "exp": int(time.time()) + 300},
                                     alg="none"),
                "garbage": "not.a.jwt",
                "bad characters": self.token() + "+/=",
                # Algorithm confusion: HS256 with the issuer's public key as the secret.
                "HS256 with the public key": self.hs256_with_public_key(),
            }
            for what, tok in cases.items():
                err = self.denied(lambda: self.call(ch, "SchedulerService", "ListJobs",
                                                    s.ListJobsRequest(), s.ListJobsResponse,
                                                    token=tok))
                self.assertEqual(err.code(), grpc.StatusCode.UNAUTHENTICATED, what)
                self.assertIn("bearer token", err.details(), what)
            # A valid token for an identity bound to no role: authenticated, not authorized.
            err = self.denied(lambda: self.call(ch, "SchedulerService", "ListJobs",
                                                s.ListJobsRequest(), s.ListJobsResponse,
                                                token=self.token(sub="intern")))
            self.assertEqual(err.code(), grpc.StatusCode.PERMISSION_DENIED)
            self.assertIn("ci:intern has no role", err.details())
        recs = [r for r in self.audit_records() if r.get("subject") == "sec-jwt"]
        self.assertEqual(recs[0]["identity"], "ci:deployer")

    def test_tenant_scoped_watchers_see_only_their_tenants(self):
        self.register("sched-a", "sec-wa", "tenant-a")
        self.register("sched-b", "sec-wb", "tenant-b")
        s = pb["sched"]
        for who in ("sched-a", "viewer-a"):
            with self.channel(who) as ch:
                evs = self.events(ch)
                self.assertTrue(evs, who)
                self.assertEqual({e.job.tenant for e in evs}, {"tenant-a"}, who)
                self.assertIn("sec-wa", {e.subject for e in evs})
                stream = ch.unary_stream("/loom.v1.SchedulerService/WatchJobs",
                                         request_serializer=lambda m: m.SerializeToString(),
                                         response_deserializer=s.WatchJobsResponse.FromString)
                got = [r.job.tenant for r in stream(s.WatchJobsRequest(start_revision=1,
                                                                       replay_only=True),
                                                    timeout=10)]
                self.assertTrue(got)
                self.assertEqual(set(got), {"tenant-a"})
                err = self.denied(lambda: list(stream(s.WatchJobsRequest(
                    start_revision=1, replay_only=True, tenant="tenant-b"), timeout=10)))
                self.assertEqual(err.code(), grpc.StatusCode.PERMISSION_DENIED)
        with self.channel("viewer-a") as ch:  # a tenant-scoped viewer: no fabric views
            err = self.denied(lambda: self.call(ch, "FabricService", "ListLinks",
                                                pb["fabric"].ListLinksRequest(),
                                                pb["fabric"].ListLinksResponse))
            self.assertEqual(err.code(), grpc.StatusCode.PERMISSION_DENIED)
            self.assertIn("links.read", err.details())
        with self.channel("viewer1") as ch:  # the fabric-wide viewer sees both
            tenants = {e.job.tenant for e in self.events(ch) if e.subject.startswith("sec-w")}
            self.assertEqual(tenants, {"tenant-a", "tenant-b"})

    def test_tls_1_1_is_refused_1_2_accepted(self):
        host, port = self.addr.rsplit(":", 1)
        ok, out = tls_handshake(host, port, "-tls1_2", self.pki.ca)
        self.assertTrue(ok, out)
        ok, out = tls_handshake(host, port, "-tls1_1", self.pki.ca)
        self.assertFalse(ok, out)
        # The control: this client does complete TLS 1.1 with a server that allows it.
        self.assertTrue(client_speaks_tls11(self.server_crt, self.server_key, self.pki.ca,
                                            free_port()))

    def test_certificate_reload_keeps_open_streams(self):
        f = pb["fabric"]
        with self.channel("viewer1") as ch:
            stream = ch.unary_stream("/loom.v1.FabricService/WatchEvents",
                                     request_serializer=lambda m: m.SerializeToString(),
                                     response_deserializer=f.WatchEventsResponse.FromString)
            it = stream(f.WatchEventsRequest(start_revision=0))
            seen = []
            def read():
                try:
                    for r in it:
                        seen.append(r.event)
                except grpc.RpcError:
                    pass  # cancelled at the end
            t = threading.Thread(target=read, daemon=True)
            t.start()
            time.sleep(0.5)
            # Renew the server certificate (a new one, another CN) in place.
            crt, key = self.pki.issue("renewed", "loomd-renewed", "DNS:loomd,IP:127.0.0.1")
            shutil.copy(key, self.live_key + ".new")
            shutil.copy(crt, self.live_crt + ".new")
            os.replace(self.live_key + ".new", self.live_key)
            os.replace(self.live_crt + ".new", self.live_crt)
            host, port = self.addr.rsplit(":", 1)
            deadline = time.monotonic() + 20
            subject = ""
            while time.monotonic() < deadline:
                r = subprocess.run(["openssl", "s_client", "-connect", "%s:%s" % (host, port),
                                    "-alpn", "h2", "-CAfile", self.pki.ca], input=b"",
                                   capture_output=True, timeout=30)
                subject = [ln for ln in r.stdout.decode(errors="replace").splitlines()
                           if ln.startswith("subject=")]
                if subject and "loomd-renewed" in subject[0]:
                    break
                time.sleep(0.5)
            self.assertTrue(subject and "loomd-renewed" in subject[0], subject)
            # New connections work with the renewed certificate, and the old stream still
            # delivers: a registration after the renewal reaches it.
            self.register("sched-a", "sec-after-renewal", "tenant-a")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and "sec-after-renewal" not in {
                    e.subject for e in seen}:
                time.sleep(0.1)
            self.assertIn("sec-after-renewal", {e.subject for e in seen})
            it.cancel()

    def test_loomctl_and_python_client_take_credentials_from_env_and_config_file(self):
        crt, key = self.certs["viewer1"]
        r = self.loomctl("jobs", "list", env={"LOOM_CA": self.pki.ca, "LOOM_CERT": crt,
                                              "LOOM_KEY": key})
        self.assertEqual(r.returncode, 0)
        cfgdir = os.path.join(self.tmp, "cfg")
        os.makedirs(cfgdir, exist_ok=True)
        shutil.copy(self.pki.ca, os.path.join(cfgdir, "ca.pem"))
        tokfile = os.path.join(cfgdir, "token")
        with open(tokfile, "w") as fh:
            fh.write(self.token() + "\n")
        conf = os.path.join(cfgdir, "config.json")
        with open(conf, "w") as fh:
            json.dump({"currentContext": "test", "contexts": [
                {"name": "test", "server": self.addr, "ca": "ca.pem", "tokenFile": "token",
                 "serverName": "loomd"}]}, fh)
        r = self.loomctl("jobs", "list", env={"LOOMCONFIG": conf})
        self.assertEqual(r.returncode, 0)
        # Without credentials loomctl is told why.
        r = self.loomctl("jobs", "list", env={"LOOM_CA": self.pki.ca}, check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("UNAUTHENTICATED", r.stderr)
        # A token in plaintext to a non-loopback address is refused by the client.
        r = self.loomctl("--server", "192.0.2.1:50061", "jobs", "list",
                         env={"LOOM_TOKEN": "x"}, check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("plaintext", r.stderr)
        # The Python client (api/python), from the same config file.
        code = ("import sys; sys.path.insert(0, %r); from loom_client.client import Client;"
                "c = Client.from_environment(); print(len(c.list_jobs().jobs))" %
                os.path.join(ARGS.source_dir, "api", "python"))
        env = dict(os.environ, LOOMCONFIG=conf, PYTHONPATH=os.pathsep.join(sys.path))
        out = subprocess.run(["/usr/bin/python3", "-c", code], env=env, capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)


class BlastRadiusScopeTest(unittest.TestCase):
    """A fault's blast radius reaches a tenant-scoped watcher only for its jobs: the
    embedded emulator fails host000's NIC port under two tenants' jobs."""

    def test_scoped_watcher_sees_only_its_jobs_in_a_fault(self):
        d = tempfile.mkdtemp(prefix="loom-sec-br-")
        try:
            pki = Pki(d)
            pki.issue("server", "loomd", "IP:127.0.0.1")
            certs = {n: pki.issue(n, n, "DNS:" + n) for n in ("sched-a", "sched-b", "viewer1")}
            with open(ARGS.topology) as f:
                topo = json.load(f)
            nic_link = next(link["id"] for link in topo["links"]
                            if link["a"]["device"] == "host000-nic0")
            down_s = 12
            scenario = {"name": "nic-port-fault", "topologyFile": os.path.abspath(ARGS.topology),
                        "engine": {"stepNs": "2000", "seed": "3", "sampleNs": "1000000"},
                        "switchModes": [{"device": "*", "mode": "static"}], "jobs": [],
                        "faults": [{"atNs": str(down_s * 10**9), "kind": "link-down",
                                    "target": nic_link}]}
            spath = os.path.join(d, "scenario.json")
            with open(spath, "w") as f:
                json.dump(scenario, f)
            config = {"tls": {"certPath": pki.p("server.pem"), "keyPath": pki.p("server-key.pem"),
                              "caPath": pki.ca},
                      "auth": {"bindings": [
                          {"subjects": ["cert:sched-a"], "role": "scheduler",
                           "tenants": ["tenant-a"]},
                          {"subjects": ["cert:sched-b"], "role": "scheduler",
                           "tenants": ["tenant-b"]},
                          {"subjects": ["cert:viewer1"], "role": "viewer"}]}}
            loomd = Loomd(ARGS.loomd, ARGS.topology, config=config,
                          extra_args=["--emulate", spath])
            started = time.monotonic()
            try:
                def channel(who):
                    def rd(path):
                        with open(path, "rb") as f:
                            return f.read()
                    crt, key = certs[who]
                    return grpc.secure_channel(loomd.grpc_address, grpc.ssl_channel_credentials(
                        rd(pki.ca), rd(key), rd(crt)))
                s, f = pb["sched"], pb["fabric"]
                for who, job_id, tenant, eps in (
                        ("sched-a", "br-a", "tenant-a", ["host000-gpu0", "host002-gpu0"]),
                        ("sched-b", "br-b", "tenant-b", ["host000-gpu1", "host003-gpu0"])):
                    j = pb["job"].Job(tenant=tenant, job_id=job_id, endpoints=eps,
                                      collective=pb["job"].COLLECTIVE_PATTERN_ALL_TO_ALL)
                    with channel(who) as ch:
                        ch.unary_unary("/loom.v1.SchedulerService/RegisterJob",
                                       request_serializer=lambda m: m.SerializeToString(),
                                       response_deserializer=s.RegisterJobResponse.FromString)(
                            s.RegisterJobRequest(job=j), timeout=10)
                self.assertLess(time.monotonic() - started, down_s,
                                "registered after the fault: too slow a machine")

                def radius(who):
                    with channel(who) as ch:
                        stream = ch.unary_stream(
                            "/loom.v1.FabricService/WatchEvents",
                            request_serializer=lambda m: m.SerializeToString(),
                            response_deserializer=f.WatchEventsResponse.FromString)
                        return [r.event for r in stream(f.WatchEventsRequest(
                            start_revision=1, replay_only=True,
                            types=[pb["event"].EVENT_TYPE_FAULT_BLAST_RADIUS]), timeout=10)]
                deadline = time.monotonic() + down_s + 60
                while time.monotonic() < deadline and not radius("viewer1"):
                    time.sleep(0.5)
                whole = radius("viewer1")
                self.assertTrue(whole, "no blast-radius event:\n" + loomd.read_log()[-3000:])
                self.assertEqual(whole[0].attributes["jobs"], "br-a,br-b")
                for who, mine, other in (("sched-a", "br-a", "br-b"), ("sched-b", "br-b", "br-a")):
                    evs = radius(who)
                    self.assertEqual(len(evs), 1, who)
                    self.assertEqual(evs[0].attributes["jobs"], mine, who)
                    self.assertNotIn(other, str(evs[0]), who)
                    self.assertNotIn("tenant-" + other[-1], str(evs[0]), who)
                    self.assertIn("host000", evs[0].attributes["nodes"], who)
                    # The job's health view ("what Loom did") shows the fault the same way.
                    with channel(who) as ch:
                        health = ch.unary_unary(
                            "/loom.v1.SchedulerService/GetJobHealth",
                            request_serializer=lambda m: m.SerializeToString(),
                            response_deserializer=s.GetJobHealthResponse.FromString)(
                            s.GetJobHealthRequest(job_id=mine), timeout=10)
                    if who == "sched-a":  # br-a's paths cross the failed NIC link
                        self.assertTrue([a for a in health.actions if a.type ==
                                         pb["event"].EVENT_TYPE_FAULT_BLAST_RADIUS], health)
                    self.assertNotIn(other, str(health), who)
            finally:
                loomd.stop()
        finally:
            shutil.rmtree(d, ignore_errors=True)


class ListenTest(unittest.TestCase):
    def test_non_loopback_without_tls_is_refused_unless_insecure(self):
        d = tempfile.mkdtemp(prefix="loom-sec-listen-")
        try:
            r = subprocess.run([ARGS.loomd, "--topology", ARGS.topology, "--db",
                                os.path.join(d, "db"), "--grpc-listen", "0.0.0.0:0",
                                "--metrics-listen", "127.0.0.1:0"], capture_output=True,
                               text=True, timeout=30)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("grpc_listen", r.stderr)
            self.assertIn("--insecure", r.stderr)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        d = tempfile.mkdtemp(prefix="loom-sec-listen-")
        ready = os.path.join(d, "ready.json")
        p = subprocess.Popen([ARGS.loomd, "--topology", ARGS.topology, "--db",
                              os.path.join(d, "db"), "--grpc-listen", "0.0.0.0:0",
                              "--metrics-listen", "127.0.0.1:0", "--insecure", "--ready-file",
                              ready], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 20
            while not os.path.exists(ready) and time.monotonic() < deadline and p.poll() is None:
                time.sleep(0.05)
            self.assertTrue(os.path.exists(ready), "loomd --insecure did not start")
        finally:
            p.terminate()
            out = p.communicate(timeout=20)[0]
            shutil.rmtree(d, ignore_errors=True)
        self.assertIn("plaintext on a non-loopback address", out)

    def test_non_loopback_tls_without_auth_or_client_certificates_is_refused(self):
        d = tempfile.mkdtemp(prefix="loom-sec-listen-")
        try:
            pki = Pki(d)
            crt, key = pki.issue("s", "loomd", "IP:127.0.0.1")
            for tls, ok in (({"certPath": crt, "keyPath": key}, False),
                            ({"certPath": crt, "keyPath": key, "caPath": pki.ca,
                              "clientAuth": "optional"}, False),
                            ({"certPath": crt, "keyPath": key, "caPath": pki.ca}, True)):
                path = os.path.join(d, "c.json")
                with open(path, "w") as f:
                    json.dump({"tls": tls, "grpcListen": "0.0.0.0:0",
                               "metricsListen": "127.0.0.1:0", "readyFile": os.path.join(
                                   d, "ready")}, f)
                p = subprocess.Popen([ARGS.loomd, "--topology", ARGS.topology, "--config", path,
                                      "--db", os.path.join(d, "db")], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
                try:
                    deadline = time.monotonic() + 20
                    while (p.poll() is None and not os.path.exists(os.path.join(d, "ready"))
                           and time.monotonic() < deadline):
                        time.sleep(0.05)
                    if ok:
                        self.assertIsNone(p.poll(), tls)
                    else:
                        self.assertEqual(p.wait(timeout=20), 2, tls)
                finally:
                    if p.poll() is None:
                        p.terminate()
                    out = p.communicate(timeout=20)[0]
                    if os.path.exists(os.path.join(d, "ready")):
                        os.remove(os.path.join(d, "ready"))
                if not ok:
                    self.assertIn("neither \"auth\" nor required client certificates", out)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_bad_tls_and_auth_config_is_named(self):
        d = tempfile.mkdtemp(prefix="loom-sec-cfg-")
        try:
            pki = Pki(d)
            crt, key = pki.issue("s", "loomd", "IP:127.0.0.1")
            _, other_key = pki.issue("o", "other", "IP:127.0.0.1")
            cases = [
                ({"tls": {"certPath": crt, "keyPath": other_key}}, "tls.key_path"),
                ({"tls": {"certPath": crt, "keyPath": key, "clientAuth": "require"}},
                 "tls.ca_path"),
                ({"tls": {"certPath": os.path.join(d, "missing.pem"), "keyPath": key}},
                 "tls.cert_path"),
                ({"auth": {"bindings": [{"subjects": ["cert:x"], "role": "root"}]}},
                 "auth.bindings[0].role"),
                ({"auth": {"bindings": [{"subjects": ["cert:x"], "role": "scheduler"}]}},
                 "auth.bindings[0].tenants"),
                ({"auth": {"jwt": [{"name": "k", "issuer": "i", "audience": "a",
                                    "publicKeyPaths": [crt]}]}},
                 "auth.jwt[0].public_key_paths[0]"),
            ]
            for cfg, field in cases:
                path = os.path.join(d, "c.json")
                with open(path, "w") as f:
                    json.dump(cfg, f)
                r = subprocess.run([ARGS.loomd, "--topology", ARGS.topology, "--config", path,
                                    "--db", os.path.join(d, "db")], capture_output=True,
                                   text=True, timeout=30)
                self.assertEqual(r.returncode, 2, (field, r.stderr))
                self.assertIn(field, r.stderr)
        finally:
            shutil.rmtree(d, ignore_errors=True)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--loomd", required=True)
    p.add_argument("--loomctl", required=True)
    p.add_argument("--proto-dir", required=True)
    p.add_argument("--topology", required=True)
    p.add_argument("--source-dir", required=True)
    ARGS, rest = p.parse_known_args()
    pb.update(generate_messages(ARGS.proto_dir))
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
