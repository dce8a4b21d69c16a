#!/usr/bin/python3
"""A strict OpenConfig, JSON_IETF-only gNMI target for one switch.

Written against the public gNMI protos (proto/, generated at start-up by
gnmi_stubs.py), not Loom code, so Loom's collector can be tested against a
device that behaves like a plain OpenConfig switch: JSON_IETF values (RFC 7951:
module-qualified member names, 64-bit numbers as strings), one update per
container, no vendor origins. See README.md for the CLI and what is served.

Run with Debian's /usr/bin/python3 (python3-grpcio, python3-protobuf).
"""
import argparse
import json
import os
import signal
import sys
import threading
import time
from concurrent import futures

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gnmi_stubs  # noqa: E402

pb, pb_grpc = gnmi_stubs.load()

ON_CHANGE_CHECK_S = 0.1
DEFAULT_SAMPLE_NS = 1_000_000_000
MIN_SAMPLE_NS = 10_000_000
SPEEDS = {10: "SPEED_10GB", 25: "SPEED_25GB", 40: "SPEED_40GB", 50: "SPEED_50GB",
          100: "SPEED_100GB", 200: "SPEED_200GB", 400: "SPEED_400GB", 800: "SPEED_800GB"}


# ---------------------------------------------------------------- paths

def elems(*spec):
    """elems(("interfaces", {}), ("interface", {"name": "Ethernet0"})) as a list."""
    return [(name, dict(keys)) for name, keys in spec]


def path_text(origin, es):
    s = "".join("/" + n + "".join("[%s=%s]" % (k, v) for k, v in sorted(keys.items()))
                for n, keys in es)
    return (origin + ":" if origin else "") + (s or "/")


def from_proto(path):
    if path.elem:
        return [(e.name, dict(e.key)) for e in path.elem]
    return [(e, {}) for e in path.element]  # deprecated string elements (gNMI < 0.4)


def to_proto(es, target=""):
    p = pb.Path(target=target)
    for name, keys in es:
        p.elem.add(name=name, key=keys)
    return p


def elem_match(pattern, elem):
    pname, pkeys = pattern
    name, keys = elem
    if pname != "*" and pname != name:
        return False
    for k, v in pkeys.items():
        if k not in keys or (v != "*" and v != keys[k]):
            return False
    return True


def covers(pattern, es):
    """True when `pattern` (wildcards "*", "...", key "*") is `es` or an
    ancestor of it."""
    if not pattern:
        return True
    if pattern[0][0] == "...":
        return any(covers(pattern[1:], es[i:]) for i in range(len(es) + 1))
    return bool(es) and elem_match(pattern[0], es[0]) and covers(pattern[1:], es[1:])


# ---------------------------------------------------------------- the switch

class Switch:
    """The device state. Counters advance with the time between reads (only
    while the interface is UP), so nothing needs a ticking thread. Callers
    serialize access (GnmiService.lock)."""

    def __init__(self, args):
        self.interfaces = args.interfaces
        self.rates = args.rate_bps
        self.queues = args.queues
        self.lldp = args.lldp
        self.speed = args.speed_gbps
        self.packet_bytes = args.packet_bytes
        self.oper_status_file = args.oper_status_file
        self.start = time.monotonic()
        self._last = self.start
        self._octets = {i: 1_000_000 for i in self.interfaces}  # Counters start non-zero.
        self._oper_cache = (None, {})

    def oper_status(self):
        """Interface -> "UP"/"DOWN"/...; overrides come from --oper-status-file
        (re-read when it changes)."""
        over = {}
        if self.oper_status_file:
            try:
                st = os.stat(self.oper_status_file)
                key = (st.st_mtime_ns, st.st_size)
                if self._oper_cache[0] != key:
                    with open(self.oper_status_file) as f:
                        self._oper_cache = (key, json.load(f))
                over = self._oper_cache[1]
            except (OSError, ValueError):
                over = self._oper_cache[1]
        return {i: str(over.get(i, "UP")) for i in self.interfaces}

    def containers(self):
        """Every served container as (elems, json value); a leaf served on its
        own (oper-status) is a container whose value is a JSON scalar."""
        now = time.monotonic()
        t = now - self.start
        dt, self._last = now - self._last, now
        oper = self.oper_status()
        out = []
        for ifname in self.interfaces:
            up = oper[ifname] == "UP"
            if up:
                self._octets[ifname] += int(self.rates.get(ifname, 0) / 8 * dt)
            octets = self._octets[ifname]
            pkts = octets // self.packet_bytes
            base = elems(("interfaces", {}), ("interface", {"name": ifname}), ("state", {}))
            counters = {"in-octets": octets, "out-octets": octets, "in-pkts": pkts,
                        "out-pkts": pkts, "in-errors": 0, "out-errors": 0, "in-discards": 0,
                        "out-discards": 0}
            out.append((base + elems(("counters", {})),
                        {"openconfig-interfaces:" + k: str(v) for k, v in counters.items()}))
            out.append((base + elems(("oper-status", {})), oper[ifname]))
            out.append((elems(("interfaces", {}), ("interface", {"name": ifname}),
                              ("ethernet", {}), ("state", {}), ("negotiated-port-speed", {})),
                        "openconfig-if-ethernet:" + SPEEDS.get(self.speed, "SPEED_UNKNOWN")))
            for q in self.queues:
                # The interface's traffic, split evenly over its queues.
                q_octets = (octets - 1_000_000) // len(self.queues)
                q_pkts = q_octets // self.packet_bytes
                state = {"transmit-pkts": q_pkts, "transmit-octets": q_octets,
                         "dropped-pkts": 0, "ecn-marked-pkts": q_pkts // 1000,
                         # A per-interval watermark: a sawtooth in bytes.
                         "max-queue-len": (int(t * 1000) % 50) * 1024 if up else 0}
                out.append((elems(("qos", {}), ("interfaces", {}),
                                  ("interface", {"interface-id": ifname}), ("output", {}),
                                  ("queues", {}), ("queue", {"name": q}), ("state", {})),
                            {"openconfig-qos:" + k: str(v) for k, v in state.items()}))
            if ifname in self.lldp:
                system, port = self.lldp[ifname]
                out.append((elems(("lldp", {}), ("interfaces", {}), ("interface", {"name": ifname}),
                                  ("neighbors", {}), ("neighbor", {"id": "1"}), ("state", {})),
                            {"openconfig-lldp:id": "1", "openconfig-lldp:system-name": system,
                             "openconfig-lldp:port-id": port,
                             "openconfig-lldp:port-id-type": "INTERFACE_NAME"}))
        return out


def select(pattern, containers):
    """The (elems, value) updates `pattern` selects: whole containers it
    covers, or single members of a container it points into."""
    out = []
    for es, value in containers:
        if covers(pattern, es):
            out.append((es, value))
        elif isinstance(value, dict):
            for member, v in value.items():
                leaf = es + [(member.split(":", 1)[-1], {})]
                if covers(pattern, leaf):
                    out.append((leaf, v))
    return out


# ---------------------------------------------------------------- gNMI service

class Abort(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class Subscription:
    def __init__(self, pattern, text, on_change, interval_ns):
        self.pattern = pattern
        self.text = text
        self.on_change = on_change
        self.interval_ns = interval_ns
        self.next_due = 0.0
        self.last = {}  # ON_CHANGE: path text -> JSON text sent


class GnmiService(pb_grpc.gNMIServicer):
    def __init__(self, switch, name, reject_unknown_paths, flood=0, flood_file=None):
        self.switch = switch
        self.flood = flood
        self.flood_file = flood_file
        self.name = name
        self.reject_unknown_paths = reject_unknown_paths
        self.lock = threading.Lock()  # Switch state reads (the oper-status file cache).

    def Capabilities(self, request, context):
        models = [("openconfig-interfaces", "3.0.0"), ("openconfig-if-ethernet", "2.13.0"),
                  ("openconfig-qos", "0.11.0"), ("openconfig-lldp", "0.2.1")]
        return pb.CapabilityResponse(
            supported_models=[pb.ModelData(name=n, organization="OpenConfig working group",
                                           version=v) for n, v in models],
            supported_encodings=[pb.JSON_IETF], gNMI_version="0.10.0")

    def _containers(self):
        with self.lock:
            return self.switch.containers()

    def _parse(self, sl):
        """Validates a SubscriptionList; returns the target name and the
        subscriptions, or raises Abort."""
        if sl.mode == pb.SubscriptionList.POLL:
            raise Abort(grpc.StatusCode.UNIMPLEMENTED, "subscription mode POLL is not supported")
        if sl.encoding != pb.JSON_IETF:
            raise Abort(grpc.StatusCode.UNIMPLEMENTED,
                        "encoding %s is not supported; this target serves JSON_IETF only"
                        % pb.Encoding.Name(sl.encoding))
        target = sl.prefix.target
        if self.name and target not in ("", "*", self.name):
            raise Abort(grpc.StatusCode.NOT_FOUND,
                        "unknown target %r: this target is %r" % (target, self.name))
        if not sl.subscription:
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "SubscriptionList has no subscription")
        prefix = from_proto(sl.prefix)
        subs = []
        containers = self._containers()
        for i, s in enumerate(sl.subscription):
            origin = s.path.origin or sl.prefix.origin
            pattern = prefix + from_proto(s.path)
            text = path_text(origin, pattern)
            if origin not in ("", "openconfig"):
                raise Abort(grpc.StatusCode.INVALID_ARGUMENT,
                            "subscription[%d] path %s: origin %r is not supported; this target "
                            "serves OpenConfig only (origin \"\" or \"openconfig\")"
                            % (i, text, origin))
            if self.reject_unknown_paths and not select(pattern, containers):
                raise Abort(grpc.StatusCode.INVALID_ARGUMENT,
                            "subscription[%d] path %s: no such path on this target" % (i, text))
            interval = s.sample_interval or DEFAULT_SAMPLE_NS
            if s.mode == pb.ON_CHANGE:
                subs.append(Subscription(pattern, text, True, interval))
            elif s.mode in (pb.SAMPLE, pb.TARGET_DEFINED):
                # TARGET_DEFINED: SAMPLE (every leaf here may change at any time).
                subs.append(Subscription(pattern, text, False, max(interval, MIN_SAMPLE_NS)))
            else:
                raise Abort(grpc.StatusCode.INVALID_ARGUMENT,
                            "subscription[%d] path %s: unknown mode %d" % (i, text, s.mode))
        return (target if target not in ("", "*") else self.name), subs

    def _notification(self, target, updates):
        n = pb.Notification(timestamp=time.time_ns(), prefix=pb.Path(target=target))
        for es, value in updates:
            n.update.add(path=to_proto(es),
                         val=pb.TypedValue(json_ietf_val=json.dumps(value).encode()))
        return pb.SubscribeResponse(update=n)

    def Subscribe(self, request_iterator, context):
        try:
            first = next(request_iterator)
        except StopIteration:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          "stream closed before a SubscriptionList was sent")
        if not first.HasField("subscribe"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          "the first SubscribeRequest must carry a SubscriptionList")
        sl = first.subscribe
        try:
            target, subs = self._parse(sl)
        except Abort as a:
            print("oc_json_target: subscribe rejected: %s" % a.message, file=sys.stderr,
                  flush=True)
            context.abort(a.code, a.message)
        done = threading.Event()
        context.add_callback(done.set)

        # Initial data: everything each subscription selects, then sync.
        now = time.monotonic()
        containers = self._containers()
        initial = []
        seen = set()
        for s in subs:
            for es, value in select(s.pattern, containers):
                key = path_text("", es)
                if s.on_change:
                    s.last[key] = json.dumps(value)
                if key not in seen:
                    seen.add(key)
                    initial.append((es, value))
            s.next_due = now + s.interval_ns / 1e9
        if initial and not sl.updates_only:
            yield self._notification(target, initial)
        yield pb.SubscribeResponse(sync_response=True)
        if sl.mode == pb.SubscriptionList.ONCE:
            return

        next_check = now + ON_CHANGE_CHECK_S
        flooded = False
        while not done.is_set():
            if self.flood and not flooded and any(not s.on_change for s in subs) and \
                    (not self.flood_file or os.path.exists(self.flood_file)):
                # A burst: `flood` samples of every SAMPLE path back to back (real
                # counter values, as a device replaying a backlog would send).
                flooded = True
                sampled = [s for s in subs if not s.on_change]
                for _ in range(self.flood):
                    if done.is_set():
                        break
                    containers = self._containers()
                    updates = {}
                    for s in sampled:
                        for es, value in select(s.pattern, containers):
                            updates[path_text("", es)] = (es, value)
                    if updates:
                        yield self._notification(target, list(updates.values()))
                print("oc_json_target: flood of %d notifications sent" % self.flood,
                      file=sys.stderr, flush=True)
            wake = min([next_check if s.on_change else s.next_due for s in subs])
            delay = wake - time.monotonic()
            if delay > 0 and done.wait(delay):
                break
            now = time.monotonic()
            containers = None
            updates = {}
            check = now >= next_check
            for s in subs:
                if s.on_change and check:
                    containers = containers or self._containers()
                    for es, value in select(s.pattern, containers):
                        key = path_text("", es)
                        text = json.dumps(value)
                        if s.last.get(key) != text:
                            s.last[key] = text
                            updates[key] = (es, value)
                elif not s.on_change and now >= s.next_due:
                    containers = containers or self._containers()
                    for es, value in select(s.pattern, containers):
                        updates[path_text("", es)] = (es, value)
                    s.next_due += s.interval_ns / 1e9
                    if s.next_due <= now:
                        s.next_due = now + s.interval_ns / 1e9
            if check:
                next_check = now + ON_CHANGE_CHECK_S
            if updates:
                yield self._notification(target, list(updates.values()))


# ---------------------------------------------------------------- CLI

def parse_rate(text):
    text = str(text).strip()
    scale = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}.get(text[-1:].upper(), 1)
    if scale != 1:
        text = text[:-1]
    return float(text) * scale


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="A strict OpenConfig, JSON_IETF-only gNMI target serving one switch "
                    "(see tests/e2e/pygnmi/README.md).")
    ap.add_argument("--config", help="JSON file with any of the options below (keys as the "
                                     "long option names, '-' or '_'); flags override it")
    ap.add_argument("--listen-host", default=None, help="address to bind (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=None, help="port; 0 = a free port (default)")
    ap.add_argument("--ready-file", help='once listening, write {"port": N} here')
    ap.add_argument("--name", default=None,
                    help="the switch's target name; other prefix.target values get NOT_FOUND "
                         "(default: accept any target and echo it)")
    ap.add_argument("--interfaces", default=None,
                    help="comma-separated interface names (default Ethernet0)")
    ap.add_argument("--rate-bps", default=None,
                    help="traffic rate of every interface (e.g. 10G), or per interface "
                         "'Ethernet0=10G,Ethernet4=1G' (others 0); default 1G")
    ap.add_argument("--queues", default=None,
                    help="comma-separated output queue names per interface (default 3)")
    ap.add_argument("--lldp", default=None,
                    help="LLDP neighbours 'Ethernet0=spine0:Ethernet0,Ethernet4=spine1:Ethernet0'")
    ap.add_argument("--speed-gbps", type=int, default=None,
                    help="negotiated-port-speed of every interface in Gb/s (default 400)")
    ap.add_argument("--packet-bytes", type=int, default=None,
                    help="bytes per packet for the packet counters (default 4096)")
    ap.add_argument("--oper-status-file", default=None,
                    help='JSON {"Ethernet4": "DOWN"}, re-read when it changes; interfaces not '
                         'listed are UP')
    ap.add_argument("--flood", type=int, default=None,
                    help="once per stream with SAMPLE subscriptions, send this many samples "
                         "back to back (a burst), then go on as usual (default 0)")
    ap.add_argument("--flood-file", default=None,
                    help="start the --flood burst only once this file exists")
    ap.add_argument("--reject-unknown-paths", action="store_true", default=None,
                    help="answer a path that selects nothing with INVALID_ARGUMENT (default: "
                         "no data, as gNMI allows)")
    args = ap.parse_args(argv)
    defaults = {"listen_host": "127.0.0.1", "port": 0, "name": "", "interfaces": "Ethernet0",
                "rate_bps": "1G", "queues": "3", "lldp": "", "speed_gbps": 400,
                "packet_bytes": 4096, "reject_unknown_paths": False, "flood": 0,
                "flood_file": None}
    config = {}
    if args.config:
        with open(args.config) as f:
            config = {k.replace("-", "_"): v for k, v in json.load(f).items()}
        unknown = set(config) - set(vars(args))
        if unknown:
            ap.error("--config: unknown keys %s" % ", ".join(sorted(unknown)))
    for k, v in list(vars(args).items()):
        if v is None:
            setattr(args, k, config.get(k, defaults.get(k)))

    def split(v):
        return [x.strip() for x in v.split(",") if x.strip()] if isinstance(v, str) else list(v)

    args.interfaces = split(args.interfaces)
    args.queues = split(args.queues)
    if not args.interfaces or not args.queues:
        ap.error("--interfaces and --queues need at least one name")
    rates = args.rate_bps
    try:
        if isinstance(rates, dict):
            args.rate_bps = {k: parse_rate(v) for k, v in rates.items()}
        elif "=" in str(rates):
            args.rate_bps = {k.strip(): parse_rate(v) for k, v in
                             (item.split("=", 1) for item in split(rates))}
        else:
            r = parse_rate(rates)
            args.rate_bps = {i: r for i in args.interfaces}
    except ValueError:
        ap.error("--rate-bps: cannot parse %r" % (rates,))
    lldp = {}
    for item in split(args.lldp) if args.lldp else []:
        ifname, _, peer = item.partition("=")
        system, sep, port = peer.partition(":")
        if not sep or not ifname or not system or not port:
            ap.error("--lldp: %r is not IF=SYSTEM:PORT" % item)
        lldp[ifname] = (system, port)
    args.lldp = lldp
    return args


def main(argv):
    args = parse_args(argv)
    switch = Switch(args)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
    pb_grpc.add_gNMIServicer_to_server(
        GnmiService(switch, args.name, args.reject_unknown_paths, args.flood, args.flood_file),
        server)
    port = server.add_insecure_port("%s:%d" % (args.listen_host, args.port))
    if port == 0:
        print("oc_json_target: cannot listen on %s:%d" % (args.listen_host, args.port),
              file=sys.stderr)
        return 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server.start()
    print("oc_json_target: listening on %s:%d (%s, interfaces %s)"
          % (args.listen_host, port, args.name or "any target", ",".join(args.interfaces)),
          flush=True)
    if args.ready_file:
        tmp = args.ready_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"port": port}, f)
        os.rename(tmp, args.ready_file)
    while not stop.wait(0.5):
        pass
    server.stop(grace=0.5).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
