#!/usr/bin/python3
"""Soak benchmark (issue 18 item 8): the real loomd under job churn with 100
watchers, a kill -9 and restart in the middle.

Preloads --jobs jobs (default 10,000; each --job-hosts hosts x --job-gpus GPUs,
default 1 or 2 hosts x 2 GPUs) on a 4,096-GPU rail fabric (512 hosts x 8, 32
spines), opens --watchers WatchEvents streams (default 100) of which --idle
(default 20) never read and --slow (default 10) read slowly, then churns for
--minutes (default 10): --writers concurrent clients (--rate writes/s in all,
default 100) update, release and register jobs, each call with a request_id and retried with it while loomd is
down. Halfway, loomd is killed with SIGKILL and restarted on the same database
and port; watchers reconnect and resume from the last revision they processed
(docs/watch.md), writers retry.

Prints RSS of loomd every --sample seconds, then: write latency (p50/p99/max,
with and without the restart window), events lost by live watchers (revisions
never delivered; goal 0; slow readers (20 ms per event while the churn runs)
must catch up after it), duplicates skipped after resumes, watchers cut
(RESOURCE_EXHAUSTED) and resumed, watches ended OUT_OF_RANGE, loomd's catch-up
and compaction counters, the database size, and acknowledged writes lost
(the final job set against what the writers were acknowledged; goal 0).
Not a test: it asserts nothing about timing; exits 1 only when events or
acknowledged writes were lost (or loomd failed).

usage: soak.py --loomd PATH --topogen PATH --proto-dir DIR [--minutes 10] ...
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from loomd_harness import free_port, generate_messages  # noqa: E402

pb = {}


def percentile(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


class Server:
    """loomd on fixed ports (a restart keeps them), killable."""

    def __init__(self, args, topology, directory):
        self.args = args
        self.topology = topology
        self.dir = directory
        self.grpc_port = free_port()
        self.metrics_port = free_port()
        self.address = "127.0.0.1:%d" % self.grpc_port
        self.proc = None
        self.log = open(os.path.join(directory, "loomd.log"), "a")
        config = {"slow_watcher_policy": args.policy}
        self.config = os.path.join(directory, "loomd.json")
        with open(self.config, "w") as f:
            json.dump(config, f)

    def start(self):
        ready = os.path.join(self.dir, "ready.json")
        if os.path.exists(ready):
            os.remove(ready)
        self.proc = subprocess.Popen(
            [self.args.loomd, "--topology", self.topology, "--config", self.config,
             "--db", os.path.join(self.dir, "loom.db"),
             "--grpc-listen", self.address,
             "--metrics-listen", "127.0.0.1:%d" % self.metrics_port,
             "--ready-file", ready, "--log-level", "warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while not os.path.exists(ready):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("loomd did not start; see " + self.log.name)
            time.sleep(0.05)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)

    def rss_mib(self):
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024.0
        except OSError:
            pass
        return float("nan")

    def metrics(self):
        out = {}
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port,
                                        timeout=10) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("#"):
                        continue
                    name = re.split(r"[{ ]", line, 1)[0]
                    out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
        except OSError:
            pass
        return out


def stub(channel, service, method, req_cls, resp_cls, stream=False):
    make = channel.unary_stream if stream else channel.unary_unary
    return make("/loom.v1.%s/%s" % (service, method),
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=resp_cls.FromString)


def error_info(err):
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            for any_ in pb["errors"].RpcStatus.FromString(value).details:
                if any_.type_url.endswith("/google.rpc.ErrorInfo"):
                    return pb["errors"].ErrorInfo.FromString(any_.value)
    return None


def varint(b, i):
    shift = value = 0
    while True:
        c = b[i]
        i += 1
        value |= (c & 0x7f) << shift
        if c < 0x80:
            return value, i
        shift += 7


def revision_of(raw):
    """Event.revision of a serialized WatchEventsResponse (field 1: event;
    its field 1: revision), without parsing the rest."""
    assert raw[0] == 0x0a
    _, i = varint(raw, 1)
    if raw[i] != 0x08:
        return 0
    return varint(raw, i + 1)[0]


def committed_revisions(server, start):
    """Every revision the log holds from `start` on (a replay of the history)."""
    f = pb["fabric"]
    channel = grpc.insecure_channel(server.address)
    watch = channel.unary_stream("/loom.v1.FabricService/WatchEvents",
                                 request_serializer=lambda m: m.SerializeToString(),
                                 response_deserializer=None)
    out = set()
    try:
        for raw in watch(f.WatchEventsRequest(start_revision=start, replay_only=True),
                         timeout=300):
            out.add(revision_of(raw))
    finally:
        channel.close()
    return out


class Watcher(threading.Thread):
    """A WatchEvents client following the resume protocol. Revisions it skips
    over are kept as gaps: the log may have revisions that were never committed
    (docs/watch.md), so whether a gap lost anything is settled at the end
    against the log itself. A resume past what it had (cut), or a re-list after
    compaction, counts as lost at once."""

    def __init__(self, server, start, slow_s, stop, churning):
        super().__init__(daemon=True)
        self.server, self.next, self.slow_s, self.stop = server, start, slow_s, stop
        self.churning = churning  # slow readers are slow only while this is set
        self.first = start
        self.lost = self.dups = self.cuts = self.out_of_range = self.reconnects = 0
        self.gaps = []  # (first, last) revisions skipped over in the stream
        self.received = 0
        self.call = None

    def run(self):
        f = pb["fabric"]
        while not self.stop.is_set():
            channel = grpc.insecure_channel(self.server.address)
            # Raw bytes: only the revision is decoded (a Python client cannot
            # parse ~100 x hundreds of events/s on the 2 cores loomd also uses).
            watch = channel.unary_stream("/loom.v1.FabricService/WatchEvents",
                                         request_serializer=lambda m: m.SerializeToString(),
                                         response_deserializer=None)
            try:
                self.call = watch(f.WatchEventsRequest(start_revision=self.next))
                for raw in self.call:
                    r = revision_of(raw)
                    if r < self.next:
                        self.dups += 1  # repeated after a resume: skipped
                        continue
                    if r > self.next:
                        self.gaps.append((self.next, r - 1))
                    self.next = r + 1
                    self.received += 1
                    if self.slow_s and self.churning.is_set():
                        time.sleep(self.slow_s)
                    if self.stop.is_set():
                        break
            except grpc.RpcError as e:
                code = e.code()
                info = error_info(e)
                if code == grpc.StatusCode.RESOURCE_EXHAUSTED and info:
                    self.cuts += 1
                    resume = int(info.metadata["resume_revision"])
                    if resume > self.next:
                        self.lost += resume - self.next
                    self.next = resume
                elif code == grpc.StatusCode.OUT_OF_RANGE:
                    # The protocol's re-list: what was compacted is lost to us.
                    self.out_of_range += 1
                    current = int(info.metadata.get("current_revision", "0")) if info else 0
                    if current >= self.next:
                        self.lost += current + 1 - self.next
                        self.next = current + 1
                elif code != grpc.StatusCode.CANCELLED or not self.stop.is_set():
                    self.reconnects += 1
                    time.sleep(0.2)
            finally:
                channel.close()


class Address:
    def __init__(self, address):
        self.address = address


def watcher_pool(conn, address, proto_dir, start_rev, n_live, n_slow):
    """Runs the live watchers in their own process (the writers' latency is
    then loomd's, not the GIL's). Messages: "churn-over" -> slow readers speed
    up; ("final", rev) -> wait (up to 120 s) until every watcher passed rev,
    answer with the figures and exit."""
    pb.update(generate_messages(proto_dir))
    server = Address(address)
    stop, churning = threading.Event(), threading.Event()
    churning.set()
    ws = [Watcher(server, start_rev, 0.02 if i < n_slow else 0, stop, churning)
          for i in range(n_live)]
    for w in ws:
        w.start()
    while True:
        msg = conn.recv()
        if msg == "churn-over":
            churning.clear()
        elif msg[0] == "final":
            final = msg[1]
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and any(w.next <= final for w in ws):
                time.sleep(0.2)
            behind = sum(1 for w in ws if w.next <= final)
            stop.set()
            for w in ws:
                if w.call is not None:
                    w.call.cancel()
            conn.send(dict(received=sum(w.received for w in ws), lost=sum(w.lost for w in ws),
                           dups=sum(w.dups for w in ws),
                           reconnects=sum(w.reconnects for w in ws),
                           cuts=sum(w.cuts for w in ws),
                           out_of_range=sum(w.out_of_range for w in ws), behind=behind,
                           gaps=[g for w in ws for g in w.gaps]))
            return


class IdleWatchers:
    """Streams that are opened and never read."""

    def __init__(self, server, n):
        self.server, self.n = server, n
        self.channels, self.calls = [], []

    def open(self):
        f = pb["fabric"]
        for _ in range(self.n):
            ch = grpc.insecure_channel(self.server.address)
            w = stub(ch, "FabricService", "WatchEvents", f.WatchEventsRequest,
                     f.WatchEventsResponse, stream=True)
            self.channels.append(ch)
            self.calls.append(w(f.WatchEventsRequest(start_revision=1)))

    def close(self):
        for c in self.calls:
            c.cancel()
        for ch in self.channels:
            ch.close()
        self.channels, self.calls = [], []


class Writers:
    def __init__(self, server, gpus, args):
        self.server, self.gpus, self.args = server, gpus, args
        self.lock = threading.Lock()
        self.live = set()       # acknowledged registered, not released
        self.latencies = []     # (start time, seconds)
        self.errors = {}
        self.counter = 0
        self.rng = random.Random(11)

    def job(self, job_id, gen=0):
        rng = random.Random(hash((job_id, gen)))
        hosts = rng.sample(range(len(self.gpus) // 8), rng.choice(self.args.job_hosts))
        j = pb["job"].Job(tenant="t%d" % (hash(job_id) % 7), job_id=job_id, traffic_class=3)
        for h in hosts:
            for g in rng.sample(range(8), self.args.job_gpus):
                j.endpoints.append(self.gpus[h * 8 + g])
        j.labels["gen"] = str(gen)
        j.labels["team"] = "soak"
        return j

    def call(self, channel_stubs, method, req):
        """Calls until acknowledged (retrying with the same request_id while
        loomd is down); returns the latency of the successful attempt chain."""
        t0 = time.monotonic()
        while True:
            try:
                channel_stubs[method](req, timeout=30)
                break
            except grpc.RpcError as e:
                code = e.code()
                if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                            grpc.StatusCode.CANCELLED):
                    time.sleep(0.05)
                    continue
                with self.lock:
                    key = "%s %s" % (method, code.name)
                    self.errors[key] = self.errors.get(key, 0) + 1
                return None
        dt = time.monotonic() - t0
        with self.lock:
            self.latencies.append((t0, dt))
        return dt

    def stubs(self):
        s = pb["sched"]
        ch = grpc.insecure_channel(self.server.address)
        return ch, {
            "RegisterJob": stub(ch, "SchedulerService", "RegisterJob", s.RegisterJobRequest,
                                s.RegisterJobResponse),
            "UpdateJob": stub(ch, "SchedulerService", "UpdateJob", s.UpdateJobRequest,
                              s.UpdateJobResponse),
            "ReleaseJob": stub(ch, "SchedulerService", "ReleaseJob", s.ReleaseJobRequest,
                               s.ReleaseJobResponse),
        }

    def next_id(self):
        with self.lock:
            self.counter += 1
            return self.counter

    def register(self, st, job_id):
        s = pb["sched"]
        req = s.RegisterJobRequest(job=self.job(job_id), request_id="reg-" + job_id)
        if self.call(st, "RegisterJob", req) is not None:
            with self.lock:
                self.live.add(job_id)

    def preload(self, n):
        ids = ["job-%06d" % self.next_id() for _ in range(n)]
        chunks = [ids[i::self.args.writers] for i in range(self.args.writers)]

        def run(chunk):
            ch, st = self.stubs()
            for job_id in chunk:
                self.register(st, job_id)
            ch.close()
        threads = [threading.Thread(target=run, args=(c,)) for c in chunks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def churn(self, stop, index):
        s = pb["sched"]
        ch, st = self.stubs()
        rng = random.Random(index)
        gen = 0
        period = self.args.writers / self.args.rate if self.args.rate > 0 else 0
        next_at = time.monotonic()
        while not stop.is_set():
            if period:
                next_at += period
                delay = next_at - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            with self.lock:
                victim = rng.choice(tuple(self.live)) if self.live else None
            op = rng.random()
            if victim and op < 0.5:
                gen += 1
                req = s.UpdateJobRequest(job=self.job(victim, gen),
                                         request_id="upd-%s-%d-%d" % (victim, index, gen))
                self.call(st, "UpdateJob", req)
            elif victim and op < 0.75:
                with self.lock:
                    if victim not in self.live:
                        continue
                    self.live.discard(victim)  # no other writer touches it now
                req = s.ReleaseJobRequest(job_id=victim, request_id="rel-" + victim)
                if self.call(st, "ReleaseJob", req) is None:
                    with self.lock:
                        self.live.add(victim)
            else:
                self.register(st, "job-%06d" % self.next_id())
        ch.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--loomd", required=True)
    p.add_argument("--topogen", required=True)
    p.add_argument("--proto-dir", required=True)
    p.add_argument("--topology", help="topology file (default: a generated 4,096-GPU rail)")
    p.add_argument("--jobs", type=int, default=10000)
    p.add_argument("--job-hosts", type=lambda v: [int(x) for x in v.split(",")],
                   default=[1, 2], help="hosts per job, chosen at random (default 1,2)")
    p.add_argument("--job-gpus", type=int, default=2, help="GPUs per host of a job (1..8)")
    p.add_argument("--watchers", type=int, default=100)
    p.add_argument("--idle", type=int, default=20)
    p.add_argument("--slow", type=int, default=10)
    p.add_argument("--writers", type=int, default=4)
    p.add_argument("--rate", type=float, default=100,
                   help="churn writes/s in all (0 = as fast as loomd answers)")
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--sample", type=float, default=15, help="RSS sample period, seconds")
    p.add_argument("--policy", default="catch-up", choices=["catch-up", "cut"])
    p.add_argument("--no-kill", action="store_true")
    args = p.parse_args()
    pb.update(generate_messages(args.proto_dir))

    work = tempfile.mkdtemp(prefix="loom-soak-")
    topology = args.topology
    if not topology:
        topology = os.path.join(work, "rail-4096.json")
        subprocess.check_call([args.topogen, "rail", "--hosts", "512", "--hosts-per-stripe",
                               "32", "--spines", "32", "-o", topology])
    with open(topology) as f:
        gpus = sorted(set(re.findall(r'"(host\d+-gpu\d+)"', f.read())))
    server = Server(args, topology, work)
    server.start()
    print("== soak: %d jobs (%s hosts x %d GPUs each), %d watchers (%d never read, %d slow), "
          "%d writers at %s writes/s, %.1f min, slow_watcher_policy=%s, kill -9 %s" %
          (args.jobs, "/".join(map(str, args.job_hosts)), args.job_gpus, args.watchers,
           args.idle, args.slow, args.writers, args.rate or "max", args.minutes, args.policy,
           "none" if args.no_kill else "at the half"), flush=True)
    writers = Writers(server, gpus, args)
    t0 = time.monotonic()
    writers.preload(args.jobs)
    pre_s = time.monotonic() - t0
    print("preload: %d jobs in %.1f s (%.0f/s, %d writers)" %
          (len(writers.live), pre_s, len(writers.live) / pre_s, args.writers), flush=True)
    writers.latencies.clear()

    s = pb["sched"]
    ch = grpc.insecure_channel(server.address)
    list_jobs = stub(ch, "SchedulerService", "ListJobs", s.ListJobsRequest, s.ListJobsResponse)
    start_rev = list_jobs(s.ListJobsRequest(page_size=1), timeout=30).revision + 1
    n_live = args.watchers - args.idle
    import multiprocessing
    ctx = multiprocessing.get_context("fork")
    parent_conn, child_conn = ctx.Pipe()
    pool = ctx.Process(target=watcher_pool, args=(child_conn, server.address, args.proto_dir,
                                                  start_rev, n_live, args.slow))
    pool.start()
    idle = IdleWatchers(server, args.idle)
    idle.open()

    stop_churn = threading.Event()
    churners = [threading.Thread(target=writers.churn, args=(stop_churn, i))
                for i in range(args.writers)]
    t_start = time.monotonic()
    for t in churners:
        t.start()
    duration = args.minutes * 60
    killed_at = None
    kill_window = (0, 0)
    next_sample = 0.0
    rss = []
    print("%8s %9s %10s %8s %9s" % ("t s", "rss MiB", "revision", "writes", "watchers"),
          flush=True)
    while True:
        now = time.monotonic() - t_start
        if now >= next_sample:
            m = server.metrics()
            r = server.rss_mib()
            rss.append((now, r))
            try:
                rev = list_jobs(s.ListJobsRequest(page_size=1), timeout=30).revision
            except grpc.RpcError:
                rev = 0
            print("%8.0f %9.1f %10d %8d %9d" % (now, r, rev, len(writers.latencies),
                                                m.get("loom_watchers", 0)), flush=True)
            next_sample += args.sample
        if not args.no_kill and killed_at is None and now >= duration / 2:
            killed_at = time.monotonic()
            server.kill()
            idle.close()
            print("kill -9 at %.0f s" % now, flush=True)
            server.start()
            kill_window = (killed_at, time.monotonic())
            print("restarted in %.2f s" % (kill_window[1] - kill_window[0]), flush=True)
            idle.open()
        if now >= duration:
            break
        time.sleep(0.5)
    stop_churn.set()
    for t in churners:
        t.join()
    parent_conn.send("churn-over")  # slow readers now read at full speed and must catch up
    # Let the watchers reach the newest revision, then stop them.
    final = list_jobs(s.ListJobsRequest(page_size=1), timeout=30).revision
    parent_conn.send(("final", final))
    w = parent_conn.recv()
    pool.join()
    behind = w["behind"]
    # Gaps: lost only where the log has the revision (the rest were never committed).
    existing = committed_revisions(server, start_rev)
    gap_revisions = sum(b - a + 1 for a, b in w["gaps"])
    gap_lost = sum(1 for a, b in w["gaps"] for r in range(a, b + 1) if r in existing)
    w["lost"] += gap_lost
    m = server.metrics()
    idle.close()

    # Acknowledged writes: every acknowledged live job exists, no released one does.
    jobs = set()
    token = ""
    while True:
        resp = list_jobs(s.ListJobsRequest(page_size=5000, page_token=token), timeout=60)
        jobs.update(j.job_id for j in resp.jobs)
        token = resp.next_page_token
        if not token:
            break
    ack_lost = len(writers.live - jobs)
    ghosts = len(jobs - writers.live)
    db_mib = sum(os.path.getsize(os.path.join(work, f)) for f in os.listdir(work)
                 if f.startswith("loom.db")) / 2**20
    server.stop()

    lat = [d for _, d in writers.latencies]
    lat_steady = [d for t, d in writers.latencies
                  if not (kill_window[0] - 30 <= t <= kill_window[1] + 5)]
    rss_v = [r for _, r in rss if r == r]
    print("writes: %d in %.0f s (%.0f/s); latency ms p50 %.2f p99 %.2f max %.0f; "
          "outside the restart window p99 %.2f" %
          (len(lat), duration, len(lat) / duration, 1e3 * percentile(lat, 0.5),
           1e3 * percentile(lat, 0.99), 1e3 * max(lat or [0]), 1e3 * percentile(lat_steady, 0.99)))
    if writers.errors:
        print("write errors:", writers.errors)
    print("rss MiB: first %.1f, max %.1f, last %.1f (goal: flat, under 1024)" %
          (rss_v[0], max(rss_v), rss_v[-1]))
    print("live watchers: %d (%d slow); events received %d; lost %d (goal 0); duplicates "
          "skipped after resume %d; reconnects %d; cut %d and resumed; out of range %d; "
          "still behind at the end %d" %
          (n_live, args.slow, w["received"], w["lost"], w["dups"], w["reconnects"], w["cuts"],
           w["out_of_range"], behind))
    print("revision gaps seen by watchers: %d revisions (never committed: %d; in the log: %d, "
          "counted as lost above); log revisions from %d: %d (%d..%d)" %
          (gap_revisions, gap_revisions - gap_lost, gap_lost, start_rev, len(existing),
           min(existing or [0]), max(existing or [0])))
    print("loomd (after the restart): catch-ups %d, cuts %d, compacted watches %d, events "
          "compacted %d, history in memory %.1f MiB, retained events %d" %
          (m.get("loom_watch_catchups_total", 0), m.get("loom_watch_cuts_total", 0),
           m.get("loom_watch_compacted_total", 0), m.get("loom_events_compacted_total", 0),
           m.get("loom_event_history_memory_bytes", 0) / 2**20,
           m.get("loom_event_history_retained", 0)))
    print("database: %.1f MiB; jobs %d; acknowledged writes lost %d (goal 0); released jobs "
          "present %d" % (db_mib, len(jobs), ack_lost, ghosts))
    shutil.rmtree(work, ignore_errors=True)
    return 1 if (w["lost"] or ack_lost or ghosts or behind) else 0


if __name__ == "__main__":
    sys.exit(main())
