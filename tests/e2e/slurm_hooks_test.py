#!/usr/bin/python3
"""Slurm's PrologSlurmctld / EpilogSlurmctld hooks (issue 20 item 2) end to end, with real
Slurm from Debian: slurmctld and one slurmd per node, each node in a network namespace of its
own with two GPUs as GRES on dummy device files (tests/e2e/slurm_harness.py), munge, and a
real loomd. The hooks are the `loom-slurm-prolog` / `loom-slurm-epilog` programs that
`pip install ./api/python` installs (into a venv made here), run by slurmctld through
wrappers that point them at their configuration, as docs/slurm.md tells operators.

- sbatch -> the prolog registers the job with Loom: its nodes' allocated GPUs (the GRES
  indices Slurm chose) as endpoints, the tenant from the partition, QP ranges and traffic
  class from the configuration; Loom assigns it paths; scancel -> the epilog releases it;
- a job that completes is registered and released (Loom's event log);
- Loom down, fail-open: the job runs, the hook says so in its log;
- Loom down, fail-closed: the job never runs; Slurm requeues it, and after `max_requeues`
  restarts the prolog holds it (no endless requeue loop).

Run as `slurm_hooks_test.py --loomd ... --source-dir ...`.
"""
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
from loomd_harness import Loomd, client_venv_main, free_port  # noqa: E402
from pki import Pki  # noqa: E402
from slurm_harness import Slurm  # noqa: E402

ARGS = None
NODES = ["host000", "host002"]
DIAGNOSE = []  # callables whose text a timeout reports


def wait_for(what, cond, timeout=60, interval=0.3):
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what + "".join(
                "\n" + d() for d in DIAGNOSE))
        time.sleep(interval)


class SlurmHooksTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from loom_client import Client
        cls.dir = tempfile.mkdtemp(prefix="loom-slurm-hooks-")
        os.chmod(cls.dir, 0o755)
        # loomd serves mTLS with authorization: the hooks present slurmctld's certificate
        # (a scheduler for every tenant, and a viewer for the agent's fault events); the
        # test reads and cleans up as an admin.
        cls.pki = Pki(cls.dir)
        cls.pki.issue("server", "loomd", "DNS:loomd,IP:127.0.0.1")
        cls.pki.issue("slurmctld", "slurmctld", "DNS:slurmctld")
        cls.pki.issue("admin", "test-admin", "DNS:test-admin")
        p = cls.pki.p
        cls.loomd = Loomd(
            ARGS.loomd, os.path.join(ARGS.source_dir, "deploy", "examples", "topology-small.json"),
            config={"tls": {"certPath": p("server.pem"), "keyPath": p("server-key.pem"),
                            "caPath": p("ca.pem")},
                    "auth": {"bindings": [
                        {"subjects": ["cert:slurmctld"], "role": "scheduler", "tenants": ["*"]},
                        {"subjects": ["cert:test-admin"], "role": "admin"}]}})
        cls.loom = Client(cls.loomd.grpc_address, timeout=10, ca=p("ca.pem"),
                          cert=p("admin.pem"), key=p("admin-key.pem"))
        cls.config = os.path.join(cls.dir, "slurm-hooks.json")
        cls.hook_log = os.path.join(cls.dir, "hooks.log")
        bindir = os.path.dirname(sys.executable)
        wrappers = {}
        for hook in ("prolog", "epilog"):
            path = os.path.join(cls.dir, "loom-%s.sh" % hook)
            with open(path, "w") as f:
                f.write("#!/bin/sh\nLOOM_SLURM_CONFIG=%s exec %s\n" %
                        (cls.config, os.path.join(bindir, "loom-slurm-" + hook)))
            os.chmod(path, 0o755)
            wrappers[hook] = path
        cls.slurm = Slurm(NODES, compute=True, gpus=2, extra_conf=(
            "PrologSlurmctld=%s\nEpilogSlurmctld=%s\n" % (wrappers["prolog"],
                                                         wrappers["epilog"])))
        cls.write_config()
        DIAGNOSE.append(lambda: "--- hook log (tail):\n" + cls.hook_log_text(cls)[-3000:])
        DIAGNOSE.append(lambda: "--- slurmctld log (tail):\n" + cls.slurm.read_log()[-2000:])

    @classmethod
    def tearDownClass(cls):
        cls.slurm.stop()
        cls.loom.close()
        cls.loomd.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def write_config(cls, **overrides):
        p = cls.pki.p
        cfg = {"loom": cls.loomd.grpc_address, "timeout_s": 5, "retries": 1,
               "ca": p("ca.pem"), "cert": p("slurmctld.pem"), "key": p("slurmctld-key.pem"),
               "tenant_from": "partition", "qp_ranges": [[100, 163]], "traffic_class": 3,
               "slurm_conf": cls.slurm.conf, "log_file": cls.hook_log,
               "labels": {"scheduler": "slurm"}}
        cfg.update(overrides)
        with open(cls.config, "w") as f:
            json.dump(cfg, f)

    def setUp(self):
        self.write_config()
        # Each test starts with the nodes free (a previous test's job may still be ending).
        wait_for("the previous tests' jobs to end",
                 lambda: not self.slurm.run(["squeue", "-h"]).stdout.strip(), timeout=60)

    def sbatch(self, *args):
        out = self.slurm.run(["sbatch", "--parsable", "-o",
                              os.path.join(self.dir, "out.%j")] + list(args)).stdout
        return out.strip().split(";")[0]

    def job_fields(self, job_id):
        out = self.slurm.run(["scontrol", "show", "job", "-d", job_id], check=False).stdout
        return out, dict(re.findall(r"(\w+)=(\S*)", out))

    def loom_job(self, job_id):
        from loom_client import LoomError
        try:
            return self.loom.get_job(job_id).job
        except LoomError as e:
            if e.code.name == "NOT_FOUND":
                return None
            raise

    def hook_log_text(self):
        try:
            with open(self.hook_log) as f:
                return f.read()
        except OSError:
            return ""

    def test_sbatch_registers_the_job_and_scancel_releases_it(self):
        from loom.v1 import job_pb2
        # The prolog returns once Loom has assigned paths (this loomd programs no switch:
        # "programmed" would wait for nothing more).
        self.write_config(wait="assigned", failure_mode="closed")
        # A first job holds GPU 0 of both nodes: the job under test gets GPU 1 there.
        blocker = self.sbatch("-N2", "--gres=gpu:1", "--wrap", "sleep 120")
        wait_for("the first job to run",
                 lambda: self.job_fields(blocker)[1].get("JobState") == "RUNNING")
        sid = self.sbatch("-N2", "--gres=gpu:1", "--wrap", "sleep 120")
        lid = "slurm-loomtest-" + sid
        job = wait_for("Loom to have paths for " + lid,
                       lambda: (lambda j: j if j and j.status.state ==
                                job_pb2.JOB_STATE_ASSIGNED else None)(self.loom_job(lid)))
        # Endpoints: per node, the GPU index Slurm allocated there.
        text, _ = self.job_fields(sid)
        expected = []
        for nodes, idx in re.findall(r"Nodes=(\S+) .*?GRES=gpu:\d+\(IDX:(\d+)\)", text):
            for node in self.slurm.run(["scontrol", "show", "hostnames", nodes]).stdout.split():
                expected.append("%s-gpu%s" % (node, idx))
        self.assertEqual(sorted(expected), ["host000-gpu1", "host002-gpu1"], text)
        self.assertEqual(sorted(job.endpoints), sorted(expected))
        self.assertEqual(job.tenant, "all")  # the partition
        self.assertEqual([(r.first, r.last) for r in job.qp_ranges], [(100, 163)])
        self.assertEqual(job.traffic_class, 3)
        self.assertEqual(job.labels["slurm.job_id"], sid)
        self.assertEqual(job.labels["scheduler"], "slurm")
        self.assertGreater(len(job.status.assignment.routes), 0)
        wait_for("the job to run",
                 lambda: self.job_fields(sid)[1].get("JobState") == "RUNNING")
        log = [line for line in self.hook_log_text().splitlines()
               if "prolog job=%s:" % sid in line]
        self.assertTrue(any("registered " + lid in line for line in log), log)
        self.assertFalse([line for line in log if " error " in line], log)
        self.slurm.run(["scancel", sid, blocker])
        wait_for("the epilog to release " + lid, lambda: self.loom_job(lid) is None)
        self.assertIn("released " + lid, self.hook_log_text())

    def test_a_completed_job_is_registered_then_released(self):
        from loom.v1 import event_pb2
        start = self.loom.list_jobs().revision + 1
        sid = self.sbatch("-N1", "--gres=gpu:2", "--wrap", "true")
        lid = "slurm-loomtest-" + sid
        wait_for("the job to finish", lambda: self.job_fields(sid)[1].get("JobState") in
                 ("COMPLETED", None) and "released " + lid in self.hook_log_text())
        events = [ev for ev in self.loom.watch_events(start_revision=start, replay_only=True)
                  if ev.subject == lid]
        types = [ev.type for ev in events]
        self.assertIn(event_pb2.EVENT_TYPE_JOB_REGISTERED, types)
        self.assertIn(event_pb2.EVENT_TYPE_JOB_RELEASED, types)
        self.assertLess(types.index(event_pb2.EVENT_TYPE_JOB_REGISTERED),
                        types.index(event_pb2.EVENT_TYPE_JOB_RELEASED))
        self.assertIsNone(self.loom_job(lid))

    def test_loom_down_fail_open_lets_the_job_run(self):
        self.write_config(loom="127.0.0.1:%d" % free_port(), failure_mode="open")
        sid = self.sbatch("-N1", "--gres=gpu:1", "--wrap", "echo ran")
        out = os.path.join(self.dir, "out." + sid)
        def ran():
            try:
                with open(out) as f:
                    return "ran" in f.read()
            except OSError:
                return False
        wait_for("the job to run", ran)
        log = self.hook_log_text()
        self.assertRegex(log, r"prolog job=%s: .*UNAVAILABLE" % sid)
        self.assertIn("loom-slurm-prolog job=%s: fail-open" % sid, log)

    def test_loom_down_fail_closed_requeues_then_holds(self):
        self.write_config(loom="127.0.0.1:%d" % free_port(), failure_mode="closed",
                          max_requeues=1)
        sid = self.sbatch("-N1", "--gres=gpu:1", "--wrap", "echo ran")

        # First failure: Slurm requeues the job (eligible again in 2 minutes: Slurm's
        # requeue delay, cut short here with StartTime=now).
        def requeued():
            _, f = self.job_fields(sid)
            return f if f.get("JobState") == "PENDING" and f.get("Restarts") == "1" else None
        wait_for("Slurm to requeue the job", requeued, timeout=60)
        self.assertIn("Slurm requeues it (restart 0 of 1)", self.hook_log_text())
        self.slurm.run(["scontrol", "update", "jobid=" + sid, "StartTime=now"])

        def held():
            _, f = self.job_fields(sid)
            return f if (f.get("JobState") == "PENDING" and
                         f.get("Reason", "").startswith("JobHeld")) else None
        fields = wait_for("Slurm to hold the job", held, timeout=60)
        self.assertEqual(fields.get("JobState"), "PENDING")
        self.assertEqual(fields.get("Restarts"), "2")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "out." + sid)),
                         "a fail-closed job ran without Loom")
        self.assertIn("held; release it with `scontrol release %s`" % sid, self.hook_log_text())
        self.slurm.run(["scancel", sid])

    def test_fault_drains_the_nodes_then_resumes_only_loom_drained_ones(self):
        """sbatch -> Loom placement -> NIC ports fail in the emulator -> loom-slurm-agent
        drains the nodes -> the ports come back -> it resumes the node Loom drained, not
        the one an admin re-drained meanwhile."""
        from loom.v1 import event_pb2
        from loom_client import Client
        topo_path = os.path.join(ARGS.source_dir, "deploy", "examples", "topology-small.json")
        with open(topo_path) as f:
            topo = json.load(f)
        nic_links = {h: next(link["id"] for link in topo["links"]
                             if link["a"]["device"] == h + "-nic0") for h in NODES}
        down_s, up_s = 45, 60
        scenario = {
            "name": "nic-port-faults", "topologyFile": topo_path,
            "engine": {"stepNs": "2000", "seed": "3", "sampleNs": "1000000"},
            "switchModes": [{"device": "*", "mode": "static"}], "jobs": [],
            "faults": [{"atNs": str(t * 10**9), "kind": kind, "target": nic_links[h]}
                       for h in NODES for t, kind in ((down_s, "link-down"),
                                                      (up_s, "link-up"))]}
        scenario_path = os.path.join(self.dir, "scenario-nic-faults.json")
        with open(scenario_path, "w") as f:
            json.dump(scenario, f)
        loomd = Loomd(ARGS.loomd, topo_path, extra_args=["--emulate", scenario_path])
        started = time.monotonic()
        agent = None
        try:
            # This loomd (the embedded emulator) is plaintext on loopback, no auth.
            self.write_config(loom=loomd.grpc_address, ca="", cert="", key="",
                              fault_action="drain",
                              resume_after_s=2,
                              agent_state=os.path.join(self.dir, "agent-state.json"))
            sid = self.sbatch("-N2", "--gres=gpu:1", "--wrap", "sleep 300")
            lid = "slurm-loomtest-" + sid
            loom = Client(loomd.grpc_address)
            wait_for("the job in Loom", lambda: self.loom_job_at(loom, lid))
            self.assertLess(time.monotonic() - started, down_s,
                            "the job was registered after the faults began: too slow a machine")
            agent = subprocess.Popen(
                [os.path.join(os.path.dirname(sys.executable), "loom-slurm-agent"),
                 "--config", self.config], stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT)

            def reason(node):
                out = self.slurm.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T|%E"]).stdout
                return out.strip().split("|", 1)
            wait_for("the agent to drain both nodes", lambda: all(
                reason(n)[1].startswith("loom: NIC port down") for n in NODES), timeout=90)
            self.assertIn("drain", reason("host000")[0])
            # An admin takes over host002 while the fault lasts.
            self.slurm.run(["scontrol", "update", "nodename=host002", "state=drain",
                            "reason=admin: reseating the NIC"])
            wait_for("the agent to resume host000", lambda: "drain" not in
                     reason("host000")[0], timeout=90)
            self.assertGreaterEqual(time.monotonic() - started, up_s)
            state, why = reason("host002")
            self.assertIn("drain", state)
            self.assertEqual(why, "admin: reseating the NIC")
            log = self.hook_log_text()
            self.assertRegex(log, r"fault %s \(event \d+\): NIC port down.*jobs %s" %
                             (re.escape(nic_links["host000"]), lid))
            self.assertIn("drained host000: loom: NIC port down", log)
            self.assertIn("resumed host000", log)
            self.assertIn("node host002 stays drained: its reason is not Loom's", log)
            # Loom's side: the blast radius named the node and the job, then cleared.
            events = [ev for ev in loom.watch_events(start_revision=1, replay_only=True,
                      types=[event_pb2.EVENT_TYPE_FAULT_BLAST_RADIUS])
                      if ev.subject == nic_links["host000"]]
            self.assertEqual([ev.attributes["state"] for ev in events], ["active", "cleared"])
            self.assertEqual(events[0].attributes["nodes"], "host000")
            self.assertEqual(events[0].attributes["jobs"], lid)
            self.assertEqual(events[0].attributes["fault"], "nic-port-down")
            # A fresh agent (no state file) replays the whole log: both faults are over,
            # so it drains nothing (host002 stays as the admin left it).
            agent.terminate()
            agent.wait(timeout=10)
            agent = None
            mark = len(self.hook_log_text())
            # This loomd (the embedded emulator) is plaintext on loopback, no auth.
            self.write_config(loom=loomd.grpc_address, ca="", cert="", key="",
                              fault_action="drain",
                              resume_after_s=0,
                              agent_state=os.path.join(self.dir, "agent-state-2.json"))
            subprocess.run([os.path.join(os.path.dirname(sys.executable), "loom-slurm-agent"),
                            "--config", self.config, "--once"], timeout=60, check=True)
            replay = self.hook_log_text()[mark:]
            self.assertIn("0 active fault(s)", replay)
            self.assertNotRegex(replay, r"agent: drained ")
            self.assertNotIn("drain", reason("host000")[0])
            self.assertEqual(reason("host002")[1], "admin: reseating the NIC")
            sys.stderr.write("\n--- trace: Loom's events\n")
            for ev in loom.watch_events(start_revision=1, replay_only=True):
                if ev.subject in (lid, nic_links["host000"]):
                    sys.stderr.write("  %d %s %s: %s -> %s\n" % (
                        ev.revision, event_pb2.EventType.Name(ev.type), ev.subject,
                        ev.cause, ev.result))
            sys.stderr.write("--- trace: hooks and agent\n%s\n" % "".join(
                "  " + line + "\n" for line in log.splitlines()
                if "job=%s:" % sid in line or "agent" in line))
            loom.close()
        finally:
            if agent:
                agent.terminate()
                agent.wait(timeout=10)
            self.slurm.run(["scancel", "--full", "--signal=KILL", "-u", "root"], check=False)
            for n in NODES:
                self.slurm.run(["scontrol", "update", "nodename=" + n, "state=resume"],
                               check=False)
            loomd.stop()

    def loom_job_at(self, loom, job_id):
        from loom_client import LoomError
        try:
            return loom.get_job(job_id).job
        except LoomError as e:
            if e.code.name == "NOT_FOUND":
                return None
            raise

    def test_bad_configuration_is_named(self):
        from loom_client import slurm
        self.write_config(failure_mode="sometimes")
        with self.assertRaises(slurm.HookError) as cm:
            slurm.load_config(self.config)
        self.assertIn("failure_mode", str(cm.exception))
        self.assertIn("sometimes", str(cm.exception))
        env = {"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "host000"}
        import contextlib
        import io
        err = io.StringIO()
        with contextlib.redirect_stderr(err):  # a config it cannot read has no log file
            rc = slurm.prolog(env=dict(env, LOOM_SLURM_CONFIG=self.config))
        self.assertEqual(rc, slurm.EXIT_CONFIG)
        self.assertIn("failure_mode: 'sometimes' is not one of open, closed", err.getvalue())
        # Credentials the hook's user cannot read are named before anything is tried.
        self.write_config(key=os.path.join(self.dir, "missing-key.pem"))
        with self.assertRaises(slurm.HookError) as cm:
            slurm.load_config(self.config)
        self.assertIn("key:", str(cm.exception))
        self.assertIn("not readable", str(cm.exception))

    def test_without_credentials_loom_refuses_the_hook(self):
        """The hooks authenticate: loomd requires a client certificate (mTLS), so a hook
        configured without one does not get past the TLS handshake."""
        from loom_client import slurm
        self.write_config(ca=self.pki.p("ca.pem"), cert="", key="", failure_mode="closed")
        msgs = []
        cfg = slurm.load_config(self.config)
        cfg["log_file"] = ""
        with slurm.connect(cfg, retries=0) as loom:
            from loom_client import LoomError
            with self.assertRaises(LoomError) as cm:
                loom.list_jobs()
            msgs.append(str(cm.exception))
        self.assertIn("UNAVAILABLE", msgs[0])
        # The same hook with its certificate gets through.
        self.write_config()
        with slurm.connect(slurm.load_config(self.config), retries=0) as loom:
            loom.list_jobs()


if __name__ == "__main__":
    ARGS, rest = client_venv_main(__file__, "loom-slurm-venv-")
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
