#!/usr/bin/python3
"""The watch resume protocol over the real gRPC API (issue 18 item 3), with
Debian's python3-grpcio as the client.

- catch-up (default policy): a watcher with a small send buffer that reads
  slowly while jobs are written gets every revision exactly once, in order;
  loomd counts the catch-ups; a watcher that never reads does not stop others;
- cut: a watcher that stops reading is ended RESOURCE_EXHAUSTED with an
  ErrorInfo (google.rpc wire format in grpc-status-details-bin) naming
  resume_revision; resuming there (skipping what it saw) loses nothing;
- compaction: a watch from before the retained history gets OUT_OF_RANGE with
  compacted_revision; the client lists again (ListJobsResponse.revision) and
  watches from there; a start revision ahead of the log is OUT_OF_RANGE too.
"""
import argparse
import json
import os
import sys
import threading
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomd_harness import Loomd, generate_messages, unary  # noqa: E402

ARGS = None
pb = {}


def error_info(err):
    """The ErrorInfo loomd put in grpc-status-details-bin (None if absent)."""
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = pb["errors"].RpcStatus.FromString(value)
            assert status.code == err.code().value[0], (status.code, err.code())
            for any_ in status.details:
                if any_.type_url == "type.googleapis.com/google.rpc.ErrorInfo":
                    return pb["errors"].ErrorInfo.FromString(any_.value)
    return None


class WatchResumeTest(unittest.TestCase):
    def setUp(self):
        self.loomd = None

    def tearDown(self):
        if self.loomd:
            self.loomd.stop()

    def start(self, config=None, extra_args=()):
        self.loomd = Loomd(ARGS.loomd, ARGS.topology, config=config, extra_args=extra_args)
        # Without BDP probing the client's HTTP/2 window stays at 64 KiB, so a
        # client that stops reading stops loomd's writes soon (with it, the
        # window grows to megabytes on loopback and hides loomd's own buffer).
        self.channel = grpc.insecure_channel(self.loomd.grpc_address,
                                             options=[("grpc.http2.bdp_probe", 0)])
        f, s = pb["fabric"], pb["sched"]
        self.watch_events = self.channel.unary_stream(
            "/loom.v1.FabricService/WatchEvents",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=f.WatchEventsResponse.FromString)
        self.watch_jobs = self.channel.unary_stream(
            "/loom.v1.SchedulerService/WatchJobs",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=s.WatchJobsResponse.FromString)

    def register(self, job_id, fat=True):
        s = pb["sched"]
        j = pb["job"].Job(tenant="w", job_id=job_id,
                          endpoints=["host000-gpu0", "host002-gpu1"], traffic_class=3)
        if fat:
            for i in range(40):  # ~8 KB per event: buffers fill quickly
                j.labels["label-%02d" % i] = "v" * 200
        return unary(self.channel, "SchedulerService", "RegisterJob",
                     s.RegisterJobRequest(job=j, request_id="req-" + job_id),
                     s.RegisterJobResponse)

    def release(self, job_id):
        s = pb["sched"]
        unary(self.channel, "SchedulerService", "ReleaseJob",
              s.ReleaseJobRequest(job_id=job_id), s.ReleaseJobResponse)

    def current_revision(self):
        s = pb["sched"]
        return unary(self.channel, "SchedulerService", "ListJobs", s.ListJobsRequest(),
                     s.ListJobsResponse).revision

    def test_slow_watcher_is_caught_up_without_loss(self):
        self.start(config={"watch_buffer_kib": 16, "event_cache_mib": 1})
        for i in range(40):
            self.register("pre-%d" % i)
        f = pb["fabric"]
        # A watcher that never reads, open during everything below.
        idle = self.watch_events(f.WatchEventsRequest(start_revision=1))
        seen = []
        stream = self.watch_events(f.WatchEventsRequest(start_revision=1), timeout=300)
        state = {"progress": time.monotonic(), "stop": False, "target": None}

        def write():
            try:
                for i in range(150):
                    self.register("w-%d" % i)
                    if i % 3 == 0:
                        self.release("w-%d" % i)
            finally:
                # The watcher may already have read the last write's event by
                # now: it is not waited for by reading on, but here, and the
                # stream is ended once it has it (or after two minutes).
                state["target"] = self.current_revision()
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline and not (seen and
                                                           seen[-1] >= state["target"]):
                    time.sleep(0.05)
                stream.cancel()
        writer = threading.Thread(target=write)
        caught_up = self.current_revision()

        def stall_report():
            # A stream that stops moving for 30 s: say where everything stands
            # (the test would otherwise sit silent until ctest's timeout).
            while not state["stop"]:
                time.sleep(1)
                if time.monotonic() - state["progress"] < 30:
                    continue
                state["progress"] = time.monotonic()
                report = {
                    "last_seen": seen[-1] if seen else None, "caught_up": caught_up,
                    "target": state["target"], "writer_alive": writer.is_alive(),
                    "writer_started": writer.ident is not None,
                    "current_revision": self.current_revision(),
                }
                for m in ("loom_watch_catchups_total", "loom_watchers",
                          "loom_watch_cuts_total"):
                    report[m] = self.loomd.metric(m)
                sys.stderr.write("slow-watcher stream stalled: %s\n" % json.dumps(report))
                sys.stderr.flush()
        threading.Thread(target=stall_report, daemon=True).start()
        paused = False
        try:
            for resp in stream:
                state["progress"] = time.monotonic()
                seen.append(resp.event.revision)
                if seen[-1] >= caught_up and writer.ident is None:
                    writer.start()  # the replay is done: the watcher is live
                elif seen[-1] >= caught_up + 20 and not paused:
                    # Stops reading for a while: the live feed fills its buffer
                    # and the watcher falls back to catching up from the history.
                    paused = True
                    while (writer.is_alive() and state["target"] is None and
                           self.loomd.metric("loom_watch_catchups_total") == 0):
                        time.sleep(0.05)
                elif len(seen) < 150:
                    time.sleep(0.005)  # slower than the writer
                if state["target"] is not None and seen[-1] >= state["target"]:
                    break
        except grpc.RpcError as e:
            # The writer ends the stream once the watcher has everything.
            self.assertEqual(e.code(), grpc.StatusCode.CANCELLED, e.details())
        state["stop"] = True
        if writer.ident is not None:
            writer.join()
        stream.cancel()
        idle.cancel()
        self.assertIsNotNone(state["target"])
        self.assertGreaterEqual(seen[-1], state["target"], "the watcher never caught up")
        self.assertEqual(seen, list(range(1, seen[-1] + 1)))
        self.assertGreaterEqual(seen[-1], 1 + 40 + 150 + 50)
        self.assertGreater(self.loomd.metric("loom_watch_catchups_total"), 0)

    def test_cut_policy_gives_a_resume_revision_that_loses_nothing(self):
        self.start(config={"watch_buffer_kib": 8, "slow_watcher_policy": "cut"})
        start = self.current_revision() + 1
        f = pb["fabric"]
        stream = self.watch_events(f.WatchEventsRequest(start_revision=0), timeout=60)
        # The first event arrives before the client stops reading.
        self.register("first")
        it = iter(stream)
        seen = [next(it).event.revision]
        for i in range(120):  # ~0.5 MB: more than gRPC's window and the buffer
            self.register("j-%d" % i)
        with self.assertRaises(grpc.RpcError) as cm:
            for resp in it:
                seen.append(resp.event.revision)
        err = cm.exception
        self.assertEqual(err.code(), grpc.StatusCode.RESOURCE_EXHAUSTED, err.details())
        info = error_info(err)
        self.assertIsNotNone(info, "no ErrorInfo in grpc-status-details-bin")
        self.assertEqual(info.reason, "WATCHER_TOO_SLOW")
        resume = int(info.metadata["resume_revision"])
        self.assertIn("start_revision=%d" % resume, err.details())
        self.assertLessEqual(resume, seen[-1] + 1)
        self.assertGreater(self.loomd.metric("loom_watch_cuts_total"), 0)
        last = self.current_revision()
        for resp in self.watch_events(
                f.WatchEventsRequest(start_revision=resume, replay_only=True), timeout=30):
            if resp.event.revision > seen[-1]:
                seen.append(resp.event.revision)
        self.assertEqual(seen[0], start)
        self.assertEqual(seen, list(range(start, last + 1)))

    def test_compacted_and_ahead_revisions_are_out_of_range(self):
        self.start(extra_args=["--event-retention", "20"])
        for i in range(40):
            self.register("c-%d" % i, fat=False)
        s = pb["sched"]
        with self.assertRaises(grpc.RpcError) as cm:
            list(self.watch_jobs(s.WatchJobsRequest(start_revision=1), timeout=10))
        err = cm.exception
        self.assertEqual(err.code(), grpc.StatusCode.OUT_OF_RANGE)
        info = error_info(err)
        self.assertEqual(info.reason, "REVISION_COMPACTED")
        self.assertEqual(info.domain, "loom.v1")
        current = self.current_revision()
        compacted = int(info.metadata["compacted_revision"])
        self.assertGreaterEqual(compacted, 20)
        self.assertLessEqual(compacted, current - 20)
        # The client lists again and watches from the listing's revision + 1.
        listing = unary(self.channel, "SchedulerService", "ListJobs", s.ListJobsRequest(),
                        s.ListJobsResponse)
        self.assertEqual(len(listing.jobs), 40)
        stream = self.watch_jobs(s.WatchJobsRequest(start_revision=listing.revision + 1),
                                 timeout=30)
        self.register("after", fat=False)
        first = next(iter(stream))
        self.assertEqual(first.job.job_id, "after")
        self.assertEqual(first.revision, listing.revision + 1)
        stream.cancel()
        with self.assertRaises(grpc.RpcError) as cm:
            list(self.watch_jobs(s.WatchJobsRequest(start_revision=current + 100), timeout=10))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.OUT_OF_RANGE)
        self.assertEqual(error_info(cm.exception).reason, "REVISION_AHEAD")
        self.assertGreater(self.loomd.metric("loom_watch_compacted_total"), 0)


class LoomctlResumeTest(unittest.TestCase):
    def test_loomctl_watch_resumes_across_a_kill_and_restart(self):
        import signal
        import socket
        import subprocess
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        loomd = Loomd(ARGS.loomd, ARGS.topology, grpc_port=port)
        out_path = os.path.join(loomd.dir, "watch.out")
        out = open(out_path, "w")
        err_path = os.path.join(loomd.dir, "watch.err")
        err = open(err_path, "w")
        watch = subprocess.Popen([ARGS.loomctl, "--server", loomd.grpc_address, "--json",
                                  "watch", "events", "--from", "1"], stdout=out, stderr=err)
        s = pb["sched"]
        try:
            channel = grpc.insecure_channel(loomd.grpc_address)
            for i in range(10):
                unary(channel, "SchedulerService", "RegisterJob",
                      s.RegisterJobRequest(job=pb["job"].Job(
                          tenant="w", job_id="a%d" % i,
                          endpoints=["host000-gpu0", "host002-gpu1"])), s.RegisterJobResponse)
            channel.close()
            # The watch must be following before the kill (on a loaded machine loomctl
            # can take seconds to start; connecting after the restart would be no resume).
            deadline = time.monotonic() + 30
            seen = 0
            while seen < 10 and time.monotonic() < deadline:
                out.flush()
                with open(out_path) as f:
                    seen = sum(1 for line in f if line.strip())
                time.sleep(0.05)
            self.assertGreaterEqual(seen, 10, "loomctl watch never printed the first events")
            loomd.proc.send_signal(signal.SIGKILL)
            loomd.proc.wait()
            loomd.log.close()
            loomd = Loomd(ARGS.loomd, ARGS.topology, directory=loomd.dir, grpc_port=port)
            channel = grpc.insecure_channel(loomd.grpc_address)
            for i in range(10):
                unary(channel, "SchedulerService", "RegisterJob",
                      s.RegisterJobRequest(job=pb["job"].Job(
                          tenant="w", job_id="b%d" % i,
                          endpoints=["host000-gpu0", "host002-gpu1"])), s.RegisterJobResponse)
            last = unary(channel, "SchedulerService", "ListJobs", s.ListJobsRequest(),
                         s.ListJobsResponse).revision
            channel.close()
            deadline = time.monotonic() + 20
            revisions = []
            while time.monotonic() < deadline:
                out.flush()
                with open(out_path) as f:
                    revisions = [int(json.loads(line)["revision"]) for line in f if line.strip()]
                if revisions and revisions[-1] >= last:
                    break
                time.sleep(0.1)
            # Every revision once, in order, through `last` (events of loomd's own,
            # such as device sync, may follow).
            self.assertGreaterEqual(revisions[-1] if revisions else 0, last)
            self.assertEqual(revisions, list(range(1, revisions[-1] + 1)))
            with open(err_path) as f:
                self.assertIn("resuming from revision", f.read())
        finally:
            watch.terminate()
            watch.wait(timeout=10)
            out.close()
            err.close()
            loomd.stop()


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--loomd", required=True)
    p.add_argument("--loomctl", required=True)
    p.add_argument("--proto-dir", required=True)
    p.add_argument("--topology", required=True)
    ARGS, rest = p.parse_known_args()
    pb.update(generate_messages(ARGS.proto_dir))
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
