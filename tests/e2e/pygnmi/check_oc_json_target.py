#!/usr/bin/python3
"""Self-check of oc_json_target.py with a client built from the public protos.

Starts the target, then checks: Capabilities (JSON_IETF only); rejections
(another encoding -> UNIMPLEMENTED, a non-OpenConfig origin -> INVALID_ARGUMENT
naming the path, an unknown target -> NOT_FOUND); the JSON_IETF shape of
counters, oper-status, queues and LLDP under wildcard subscriptions; counters
increasing from one sample to the next; an ON_CHANGE oper-status update when
the --oper-status-file changes; ONCE ending with OK; SIGTERM stopping it.
Waits are bounded; nothing asserts timing. Exits non-zero on failure.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gnmi_stubs  # noqa: E402

pb, pb_grpc = gnmi_stubs.load()

FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)
    return cond


def wait_for(cond, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def path(text, origin=""):
    """'/a/b[k=v]/c' -> gnmi Path (values without '/' or ']')."""
    p = pb.Path(origin=origin)
    for part in [x for x in text.split("/") if x]:
        name, _, keys = part.partition("[")
        e = p.elem.add(name=name)
        for kv in keys.rstrip("]").split("][") if keys else []:
            k, _, v = kv.partition("=")
            e.key[k] = v
    return p


def text_of(p):
    return "/" + "/".join(e.name + "".join("[%s=%s]" % kv for kv in sorted(e.key.items()))
                          for e in p.elem)


def request(subs, target="leaf0", mode=None, encoding=None):
    sl = pb.SubscriptionList(prefix=pb.Path(target=target),
                             mode=pb.SubscriptionList.STREAM if mode is None else mode,
                             encoding=pb.JSON_IETF if encoding is None else encoding)
    for p, m, interval in subs:
        sl.subscription.add(path=p, mode=m, sample_interval=interval)
    return pb.SubscribeRequest(subscribe=sl)


class Stream:
    """A Subscribe call read on its own thread."""

    def __init__(self, stub, req):
        self.responses = []
        self.error = None
        self.done = False
        self.call = stub.Subscribe(iter([req]))
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            for r in self.call:
                self.responses.append(r)
        except grpc.RpcError as e:
            self.error = e
        self.done = True

    def synced(self):
        return any(r.HasField("sync_response") and r.sync_response for r in self.responses)

    def updates(self, start=0):
        """(notification, update) pairs from response `start` on."""
        out = []
        for r in self.responses[start:]:
            if r.HasField("update"):
                out.extend((r.update, u) for u in r.update.update)
        return out

    def cancel(self):
        self.call.cancel()
        self.thread.join(10)


def json_of(u):
    return json.loads(u.val.json_ietf_val.decode())


def main():
    work = tempfile.mkdtemp(prefix="loom-oc-json-")
    ready = os.path.join(work, "ready.json")
    oper = os.path.join(work, "oper.json")
    with open(oper, "w") as f:
        json.dump({}, f)
    log = open(os.path.join(work, "target.log"), "w")
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "oc_json_target.py"), "--port", "0",
         "--ready-file", ready, "--name", "leaf0", "--interfaces", "Ethernet0,Ethernet4",
         "--rate-bps", "8G", "--queues", "3,6",
         "--lldp", "Ethernet0=spine0:Ethernet0,Ethernet4=spine1:Ethernet0",
         "--oper-status-file", oper], stdout=log, stderr=subprocess.STDOUT)
    try:
        if not check(wait_for(lambda: os.path.exists(ready) or proc.poll() is not None)
                     and os.path.exists(ready), "target wrote its ready file"):
            return 1
        with open(ready) as f:
            port = json.load(f)["port"]
        channel = grpc.insecure_channel("127.0.0.1:%d" % port)
        stub = pb_grpc.gNMIStub(channel)
        run_checks(stub, oper)
        channel.close()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(20)
                check(rc == 0, "target exits 0 on SIGTERM (rc=%s)" % rc)
            except subprocess.TimeoutExpired:
                proc.kill()
                check(False, "target stops on SIGTERM")
        log.close()
        if FAILURES:
            with open(os.path.join(work, "target.log")) as f:
                sys.stdout.write("--- target log ---\n" + f.read())
        shutil.rmtree(work, ignore_errors=True)
    print("%d failure(s)" % len(FAILURES))
    return 1 if FAILURES else 0


COUNTERS = "/interfaces/interface[name=*]/state/counters"
OPER = "/interfaces/interface[name=*]/state/oper-status"
QUEUES = "/qos/interfaces/interface[interface-id=*]/output/queues/queue[name=*]/state"
LLDP = "/lldp/interfaces/interface[name=*]/neighbors/neighbor[id=*]/state"
COUNTER_LEAVES = {"in-octets", "out-octets", "in-pkts", "out-pkts", "in-errors", "out-errors",
                  "in-discards", "out-discards"}
QUEUE_LEAVES = {"transmit-pkts", "transmit-octets", "dropped-pkts", "ecn-marked-pkts",
                "max-queue-len"}


def expect_error(stub, req, code, mention, what):
    s = Stream(stub, req)
    wait_for(lambda: s.done)
    ok = s.error is not None and s.error.code() == code
    details = s.error.details() if s.error is not None else ""
    check(ok and mention in details and not s.responses,
          "%s -> %s naming %r (got %s: %s)" % (what, code.name, mention,
                                               s.error.code().name if s.error else "no error",
                                               details))


def run_checks(stub, oper_file):
    caps = stub.Capabilities(pb.CapabilityRequest(), timeout=10)
    check(list(caps.supported_encodings) == [pb.JSON_IETF], "Capabilities: JSON_IETF only")
    check("openconfig-interfaces" in [m.name for m in caps.supported_models],
          "Capabilities: openconfig-interfaces model")

    expect_error(stub, request([(path(COUNTERS), pb.SAMPLE, 10**8)], encoding=pb.PROTO),
                 grpc.StatusCode.UNIMPLEMENTED, "PROTO", "encoding PROTO")
    expect_error(stub, request([(path(COUNTERS), pb.SAMPLE, 10**8)], encoding=pb.JSON),
                 grpc.StatusCode.UNIMPLEMENTED, "JSON", "encoding JSON")
    expect_error(stub, request([(path(COUNTERS), pb.SAMPLE, 10**8),
                                (path("/nic/interfaces/interface[name=*]/roce/state", "loom"),
                                 pb.SAMPLE, 10**8)]),
                 grpc.StatusCode.INVALID_ARGUMENT, "loom:/nic/interfaces/interface[name=*]",
                 "origin loom (whole Subscribe fails)")
    expect_error(stub, request([(path(COUNTERS), pb.SAMPLE, 10**8)], target="leaf9"),
                 grpc.StatusCode.NOT_FOUND, "leaf9", "unknown target")

    s = Stream(stub, request([(path(COUNTERS), pb.SAMPLE, 10**8), (path(OPER), pb.ON_CHANGE, 0),
                              (path(QUEUES), pb.SAMPLE, 10**8), (path(LLDP), pb.ON_CHANGE, 0)]))
    if not check(wait_for(s.synced), "STREAM: sync_response after the initial data"):
        s.cancel()
        return
    sync_at = next(i for i, r in enumerate(s.responses) if r.HasField("sync_response"))
    initial = s.updates(0)
    by_path = {}
    for n, u in initial:
        by_path[text_of(u.path)] = (n, u)
    check(all(n.prefix.target == "leaf0" for n, _ in initial), "prefix.target = leaf0")
    check(all(n.timestamp > 1_600_000_000 * 10**9 for n, _ in initial),
          "timestamps in ns since the epoch")
    check(all(u.val.WhichOneof("value") == "json_ietf_val" for _, u in initial),
          "every value is json_ietf_val")
    octets = {}
    for ifname in ("Ethernet0", "Ethernet4"):
        key = "/interfaces/interface[name=%s]/state/counters" % ifname
        if not check(key in by_path, "one counters container update for " + ifname):
            continue
        v = json_of(by_path[key][1])
        check(isinstance(v, dict) and {k.split(":", 1)[1] for k in v} == COUNTER_LEAVES
              and all(k.startswith("openconfig-interfaces:") for k in v),
              "counters members are openconfig-interfaces:-qualified: %s" % sorted(v))
        check(all(isinstance(x, str) and x.isdigit() for x in v.values()),
              "counters are RFC 7951 strings of digits")
        octets[ifname] = int(v["openconfig-interfaces:in-octets"])
        key = "/interfaces/interface[name=%s]/state/oper-status" % ifname
        check(key in by_path and json_of(by_path[key][1]) == "UP", "oper-status UP " + ifname)
        for q in ("3", "6"):
            key = ("/qos/interfaces/interface[interface-id=%s]/output/queues/queue[name=%s]/state"
                   % (ifname, q))
            if check(key in by_path, "queue %s state of %s" % (q, ifname)):
                v = json_of(by_path[key][1])
                check({k.split(":", 1)[1] for k in v} == QUEUE_LEAVES
                      and all(k.startswith("openconfig-qos:") for k in v)
                      and all(x.isdigit() for x in v.values()), "queue members: %s" % sorted(v))
    lldp0 = "/lldp/interfaces/interface[name=Ethernet0]/neighbors/neighbor[id=1]/state"
    if check(lldp0 in by_path, "LLDP neighbour of Ethernet0"):
        v = json_of(by_path[lldp0][1])
        check(v.get("openconfig-lldp:system-name") == "spine0"
              and v.get("openconfig-lldp:port-id") == "Ethernet0", "LLDP neighbour state: %s" % v)
    check(not any("ethernet" in text_of(u.path) for _, u in initial),
          "nothing beyond the subscribed paths")

    # Later samples: counters grow at --rate-bps.
    def grew():
        for n, u in s.updates(sync_at + 1):
            if text_of(u.path) == "/interfaces/interface[name=Ethernet0]/state/counters":
                if int(json_of(u)["openconfig-interfaces:in-octets"]) > octets.get("Ethernet0", 0):
                    return True
        return False
    check(wait_for(grew), "in-octets of Ethernet0 increases in later samples")

    # ON_CHANGE oper-status follows --oper-status-file.
    mark = len(s.responses)
    with open(oper_file + ".tmp", "w") as f:
        json.dump({"Ethernet4": "DOWN"}, f)
    os.rename(oper_file + ".tmp", oper_file)

    def went_down():
        return any(text_of(u.path) == "/interfaces/interface[name=Ethernet4]/state/oper-status"
                   and json_of(u) == "DOWN" for _, u in s.updates(mark))
    check(wait_for(went_down), "ON_CHANGE: oper-status DOWN after the change")
    check(not s.done, "STREAM still open")
    s.cancel()

    # A leaf under a wildcard, and ONCE.
    once = Stream(stub, request([(path("/interfaces/interface[name=*]/state/counters/in-octets"),
                                  pb.SAMPLE, 0)], mode=pb.SubscriptionList.ONCE))
    check(wait_for(lambda: once.done) and once.error is None and once.synced(),
          "ONCE: data, sync_response, then OK")
    leaves = {text_of(u.path): json_of(u) for _, u in once.updates()}
    check(set(leaves) == {"/interfaces/interface[name=%s]/state/counters/in-octets" % i
                          for i in ("Ethernet0", "Ethernet4")}
          and all(isinstance(v, str) for v in leaves.values()),
          "a leaf subscription gets the leaf per interface: %s" % leaves)


if __name__ == "__main__":
    sys.exit(main())
