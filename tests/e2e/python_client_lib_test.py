#!/usr/bin/python3
"""The Python client library (api/python, `loom_client`) as a scheduler installs and uses it:
`pip install` of the checkout's api/python into a fresh venv (Debian's python3-grpcio and
python3-protobuf through --system-site-packages; --no-index: nothing downloaded), then,
with that venv's python, against a real loomd: typed calls, idempotent retries with the
same request_id (also after kill -9 and a restart), LoomError carrying the gRPC code and the
field message, a call retried while loomd restarts, and a watch that resumes across a
kill -9 without losing or repeating a revision.

Run as `python_client_lib_test.py --loomd ... --source-dir ...`: it builds the venv and
re-runs itself inside it with --inside."""
import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomd_harness import client_venv_main  # noqa: E402

ARGS = None


class ClientLibraryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, os.path.join(ARGS.source_dir, "tests", "e2e"))
        from loomd_harness import Loomd  # noqa: E402
        cls.Loomd = Loomd
        cls.topology = os.path.join(ARGS.source_dir, "deploy/examples/topology-small.json")

    def start(self, directory=None, port=0):
        return self.Loomd(ARGS.loomd, self.topology, directory=directory, grpc_port=port)

    def job(self, job_id, labels=5):
        from loom.v1 import job_pb2
        j = job_pb2.Job(tenant="acme", job_id=job_id,
                        endpoints=["host000-gpu0", "host002-gpu0", "host001-gpu0",
                                   "host003-gpu0"])
        for i in range(labels):
            j.labels["k%d" % i] = "v%d" % i
        return j

    def test_installed_from_the_checkout_not_imported_from_it(self):
        import loom_client
        self.assertIn("site-packages", loom_client.__file__)
        self.assertNotIn(os.path.join(ARGS.source_dir, "api"), loom_client.__file__)

    def test_calls_errors_and_idempotent_retries(self):
        import grpc
        from loom_client import Client, LoomError
        loomd = self.start()
        try:
            with Client(loomd.grpc_address, timeout=10) as loom:
                topo = loom.get_topology()
                self.assertEqual(len(topo.links), 12)
                first = loom.register_job(self.job("lib-1"), request_id="reg-lib-1")
                self.assertEqual(first.job.status.state, 2)  # JOB_STATE_ASSIGNED
                again = loom.register_job(self.job("lib-1"), request_id="reg-lib-1")
                self.assertEqual(again, first)  # maps: compare messages, not bytes
                with self.assertRaises(LoomError) as e:
                    loom.register_job(self.job("lib-2"), request_id="reg-lib-1")
                self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn("request_id", e.exception.message)
                bad = self.job("lib-bad")
                del bad.endpoints[:]
                with self.assertRaises(LoomError) as e:
                    loom.register_job(bad)
                self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn("endpoints", e.exception.message)
                # The same, as a google.rpc.BadRequest detail naming the field.
                self.assertEqual(len(e.exception.field_violations), 1)
                field, description = e.exception.field_violations[0]
                self.assertTrue(e.exception.message.startswith(field + ": "), e.exception.message)
                self.assertIn("endpoints", field)
                self.assertTrue(description)
                with self.assertRaises(LoomError) as e:
                    loom.get_job("nope")
                self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)
                self.assertEqual([j.job_id for j in loom.all_jobs(page_size=1)], ["lib-1"])
                health = loom.get_job_health("lib-1")
                self.assertEqual(health.job_id, "lib-1")
                link = topo.links[0].id
                drained = loom.drain_link(link, "library test", request_id="drain-1")
                self.assertEqual(loom.drain_link(link, "library test",
                                                 request_id="drain-1").revision,
                                 drained.revision)
                self.assertEqual([l.link.id for l in loom.list_links(drained_only=True)],
                                 [link])
                loom.undrain_link(link)
                events = list(loom.watch_events(start_revision=1, replay_only=True))
                revs = [e.revision for e in events]
                self.assertEqual(revs, list(range(1, len(revs) + 1)))
                self.assertIn("lib-1", [e.subject for e in events])
                released = loom.release_job("lib-1", request_id="rel-lib-1")
                self.assertEqual(loom.release_job("lib-1", request_id="rel-lib-1"), released)
                with self.assertRaises(LoomError) as e:
                    loom.release_job("lib-1")  # a new request: the job is gone
                self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)
        finally:
            loomd.stop()

    def test_retries_and_watches_across_a_restart(self):
        from loom_client import Client
        loomd = self.start()
        port = int(loomd.grpc_address.rsplit(":", 1)[1])
        directory = loomd.dir
        received, errors = [], []
        loom = Client(loomd.grpc_address, timeout=5, retries=8, backoff=0.2)
        try:
            loom.register_job(self.job("before"), request_id="r-before")

            def follow():
                try:
                    for ev in loom.watch_events(start_revision=1):
                        received.append(ev.revision)
                        if ev.subject == "after":
                            return
                except Exception as e:  # noqa: BLE001 - reported by the test
                    errors.append(e)

            watcher = threading.Thread(target=follow, daemon=True)
            watcher.start()
            time.sleep(1.0)
            before_kill = len(received)
            self.assertGreater(before_kill, 0)
            loomd.proc.send_signal(signal.SIGKILL)
            loomd.proc.wait(timeout=10)
            loomd.stop(keep=True)  # closes its log; the directory (database) stays
            # A registration made while loomd is down succeeds once it is back.
            result = {}
            t = threading.Thread(target=lambda: result.update(
                r=loom.register_job(self.job("after"), request_id="r-after")), daemon=True)
            t.start()
            time.sleep(1.0)
            loomd = self.start(directory=directory, port=port)
            t.join(timeout=60)
            self.assertIn("r", result, "the retried registration never returned")
            self.assertEqual(result["r"].job.job_id, "after")
            # A retry of the registration made before the kill gets its first answer.
            self.assertEqual(loom.register_job(self.job("before"),
                                               request_id="r-before").job.job_id, "before")
            watcher.join(timeout=60)
            self.assertFalse(errors, errors)
            self.assertFalse(watcher.is_alive(), "the watch never saw the new job")
            self.assertEqual(received, list(range(1, received[-1] + 1)))
        finally:
            loom.close()
            loomd.stop()


if __name__ == "__main__":
    ARGS, rest = client_venv_main(__file__, "loom-pylib-")
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
