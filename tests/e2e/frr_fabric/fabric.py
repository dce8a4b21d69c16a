#!/usr/bin/python3
"""A real routed fabric for Loom's tests: FRR 8.4 routers (zebra + bgpd) in
Linux network namespaces, veth links per topology link, one namespace per NIC.

Built from a loom.v1.Topology JSON (e.g. deploy/examples/topology-small.json):

- every spine and leaf is a namespace running its own zebra and bgpd, started
  directly (`ip netns exec NS /usr/lib/frr/zebra -f CONF -i PID -z ZSOCK
  --vty_socket DIR -P 0 --log file:LOG`), no watchfrr, no /etc/frr;
- every leaf-spine link is a veth pair named after the topology interfaces, a
  /31 from 198.19.0.0/17; eBGP underlay (each router its topology `asn`, else
  Loom's LeafAs rule), `maximum-paths 8`, `bgp bestpath as-path
  multipath-relax`, `no bgp ebgp-requires-policy`; each leaf announces the
  aggregate(s) of its NICs' addresses (e.g. 198.18.0.0/30), so hosts reach
  each other without Loom;
- every NIC is a namespace with one address, the one Loom's PrefixPlan gives it
  (NIC i of the topology = 198.18.0.0 + i, /32), behind its leaf (the leaf
  routes the /32 to the NIC's veth; the NIC routes 198.18.0.0/15 via the
  leaf's gateway address 198.19.255.x);
- a "loom" namespace holds Loom's per-color BGP source addresses
  (198.19.253.<spine index + 1>/32 on lo) with a veth to every leaf
  (198.19.254.0/24, /31 each). Each leaf peers with every source address over
  eBGP multihop (passive: Loom dials), marks what Loom sends `no-advertise`
  (it must not leak to the spines: Loom's /32 would win there by longest match
  and loop) and sends Loom nothing.

Only 198.18.0.0/15 (RFC 2544 benchmarking) and loopback addresses are used,
only inside the fabric's own namespaces. Names carry a per-run tag, so runs in
parallel do not collide. `Fabric` is a context manager; teardown (daemons,
namespaces, files) runs even on failure, and `cleanup_stale()` removes what a
killed run left behind (runs record their state under STATE_DIR).

Run as root with /usr/bin/python3. `python3 fabric.py --topology T up` builds
one by hand and prints how to reach it (see README.md).
"""
import argparse
import ipaddress
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

FRR_DIR = "/usr/lib/frr"
STATE_DIR = "/run/loom-frr-fabric"
BENCH = ipaddress.ip_network("198.18.0.0/15")
NIC_BASE = ipaddress.ip_address("198.18.0.0")
LINK_BASE = ipaddress.ip_address("198.19.0.0")        # leaf-spine /31s
LOOM_SRC_BASE = ipaddress.ip_address("198.19.253.0")  # Loom's source addresses
MGMT_BASE = ipaddress.ip_address("198.19.254.0")      # loom <-> leaf /31s
GW_BASE = ipaddress.ip_address("198.19.255.0")        # leaf gateway for its NICs
DEFAULT_LOOM_AS = 65534
MAX_NICS = 131072


class FabricError(RuntimeError):
    pass


def run(argv, check=True, timeout=30, capture=True):
    r = subprocess.run(argv, capture_output=capture, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise FabricError("%s: exit %d: %s" % (" ".join(argv), r.returncode,
                                               (r.stderr or "").strip()))
    return r


def check_bench(addr):
    """Every address the fabric configures must be in 198.18.0.0/15."""
    a = ipaddress.ip_interface(addr).ip if "/" in str(addr) else ipaddress.ip_address(addr)
    if a not in BENCH:
        raise FabricError("address %s outside 198.18.0.0/15" % addr)
    return str(addr)


def nic_address(index):
    """Loom's PrefixPlan rule (southbound/bgp/prefix_plan.cc): NIC i (role NIC,
    topology order, 0-based) owns 198.18.0.0/15 + i as a /32."""
    if index >= MAX_NICS:
        return None
    return str(NIC_BASE + index)


class Plan:
    """Names and addresses of one fabric, from the topology (no side effects)."""

    def __init__(self, topo, tag, loom_as=DEFAULT_LOOM_AS):
        self.topo = topo
        self.tag = tag
        self.loom_as = loom_as
        devs = topo["devices"]
        self.role = {d["id"]: d.get("role", "") for d in devs}
        self.spines = [d["id"] for d in devs if d.get("role") == "DEVICE_ROLE_SPINE"]
        self.leaves = [d["id"] for d in devs if d.get("role") == "DEVICE_ROLE_LEAF"]
        if any(d.get("role") == "DEVICE_ROLE_SUPER_SPINE" for d in devs):
            raise FabricError("3-tier topologies are not supported by this fabric builder")
        self.nics = [d["id"] for d in devs if d.get("role") == "DEVICE_ROLE_NIC"]
        self.asn = {}
        self.router_id = {}
        leaf_index = 0
        for d in devs:
            if d.get("role") == "DEVICE_ROLE_LEAF":
                # LeafAs(): the topology's asn, else 4200000000 + leaf index.
                self.asn[d["id"]] = int(d.get("asn") or 4200000000 + leaf_index)
                leaf_index += 1
            elif d.get("role") == "DEVICE_ROLE_SPINE":
                self.asn[d["id"]] = int(d.get("asn") or 65000)
            if d.get("role") in ("DEVICE_ROLE_SPINE", "DEVICE_ROLE_LEAF"):
                # A BGP identifier, not an address configured anywhere.
                self.router_id[d["id"]] = d.get("routerId") or str(
                    GW_BASE + 128 + len(self.router_id))
        self.nic_addr = {n: nic_address(i) for i, n in enumerate(self.nics)}
        # Namespaces: "<tag>-<device>" (tag is short and unique per run).
        self.ns = {x: "%s-%s" % (tag, x) for x in self.spines + self.leaves + self.nics}
        self.ns["loom"] = "%s-loom" % tag
        # Links.
        self.fabric_links = []  # dicts: id, leaf, spine, leaf_if, spine_if, leaf_ip, spine_ip
        self.nic_links = []     # dicts: nic, leaf, leaf_if, nic_if
        for link in topo.get("links", []):
            a, b = link["a"], link["b"]
            ra, rb = self.role.get(a["device"]), self.role.get(b["device"])
            if {ra, rb} == {"DEVICE_ROLE_LEAF", "DEVICE_ROLE_SPINE"}:
                leaf, spine = (a, b) if ra == "DEVICE_ROLE_LEAF" else (b, a)
                k = len(self.fabric_links)
                if k >= 16384:
                    raise FabricError("too many fabric links")
                self.fabric_links.append(dict(
                    id=link.get("id", ""), leaf=leaf["device"], spine=spine["device"],
                    leaf_if=leaf["interface"], spine_if=spine["interface"],
                    leaf_ip=check_bench(LINK_BASE + 2 * k),
                    spine_ip=check_bench(LINK_BASE + 2 * k + 1)))
            elif {ra, rb} == {"DEVICE_ROLE_LEAF", "DEVICE_ROLE_NIC"}:
                leaf, nic = (a, b) if ra == "DEVICE_ROLE_LEAF" else (b, a)
                if self.nic_addr.get(nic["device"]) is None:
                    continue
                self.nic_links.append(dict(nic=nic["device"], leaf=leaf["device"],
                                           leaf_if=leaf["interface"],
                                           nic_if=nic["interface"] or "eth0"))
        for x in self.fabric_links + self.nic_links:
            for k in ("leaf_if", "spine_if", "nic_if"):
                if k in x and len(x[k]) > 15:
                    raise FabricError("interface name %r longer than 15 characters" % x[k])
        if len(self.leaves) > 127 or len(self.spines) > 250:
            raise FabricError("too many leaves or spines for this address plan")
        self.leaf_of = {x["nic"]: x["leaf"] for x in self.nic_links}
        self.gateway = {l: check_bench(GW_BASE + i + 1) for i, l in enumerate(self.leaves)}
        self.mgmt_leaf_ip = {l: check_bench(MGMT_BASE + 2 * i) for i, l in enumerate(self.leaves)}
        self.mgmt_loom_ip = {l: check_bench(MGMT_BASE + 2 * i + 1)
                             for i, l in enumerate(self.leaves)}
        self.loom_source = {s: check_bench(LOOM_SRC_BASE + i + 1)
                            for i, s in enumerate(self.spines)}
        self.loom_router_id = check_bench(LOOM_SRC_BASE + 254)
        # Each leaf announces the smallest set of CIDR blocks covering its NICs.
        self.leaf_aggregates = {}
        for leaf in self.leaves:
            addrs = [ipaddress.ip_network(self.nic_addr[x["nic"]] + "/32")
                     for x in self.nic_links if x["leaf"] == leaf]
            aggs = [str(n) for n in ipaddress.collapse_addresses(addrs)]
            for a in aggs:
                if a.endswith("/32"):
                    raise FabricError(
                        "leaf %s's NICs do not form an aggregate shorter than /32 (%s): "
                        "Loom's /32s could not win by longest match" % (leaf, a))
            self.leaf_aggregates[leaf] = aggs

    def spine_address_seen_by(self, leaf, spine):
        """The spine's address on its (first) link with `leaf` (a session's next hop)."""
        for x in self.fabric_links:
            if x["leaf"] == leaf and x["spine"] == spine:
                return x["spine_ip"]
        return None

    def spine_ports(self, leaf):
        """Leaf interface -> spine, for the leaf's spine-facing veths."""
        return {x["leaf_if"]: x["spine"] for x in self.fabric_links if x["leaf"] == leaf}

    def inventory(self, graceful_restart_s=10, hold_time_s=9, extra=None):
        """loomd's --config (protobuf JSON of LoomdConfig): every leaf peers with
        Loom over BGP, one session per spine (Loom's source address for that
        color, next hop = the spine's address on that leaf's link)."""
        devices = []
        for leaf in self.leaves:
            sessions = []
            for spine in self.spines:
                nh = self.spine_address_seen_by(leaf, spine)
                if nh is None:
                    continue
                sessions.append({"via": spine, "localAddress": self.loom_source[spine],
                                 "nextHop": nh})
            devices.append({"id": leaf, "bgp": {
                "localAs": self.loom_as, "routerId": self.loom_router_id,
                "address": self.mgmt_leaf_ip[leaf], "peerAs": self.asn[leaf],
                "holdTimeS": hold_time_s, "gracefulRestartS": graceful_restart_s,
                "multihop": True, "sessions": sessions}})
        cfg = {"devices": devices}
        if extra:
            cfg.update(extra)
        return cfg


def zebra_conf(name):
    return "frr defaults traditional\nhostname %s\n!\n" % name


def bgpd_conf(plan, dev):
    out = ["frr defaults traditional", "hostname %s" % dev, "!"]
    asn = plan.asn[dev]
    if dev in plan.leaves:
        out += ["route-map LOOM-IN permit 10",
                " set community no-advertise additive",  # never re-announced to spines
                "exit", "route-map NOTHING deny 10", "exit", "!"]
    out += ["router bgp %d" % asn,
            " bgp router-id %s" % plan.router_id[dev],
            " no bgp ebgp-requires-policy",
            " no bgp network import-check",
            " bgp bestpath as-path multipath-relax"]
    peers = []
    if dev in plan.leaves:
        for x in plan.fabric_links:
            if x["leaf"] == dev:
                peers.append((x["spine_ip"], plan.asn[x["spine"]]))
    else:
        for x in plan.fabric_links:
            if x["spine"] == dev:
                peers.append((x["leaf_ip"], plan.asn[x["leaf"]]))
    for ip, remote in peers:
        out += [" neighbor %s remote-as %d" % (ip, remote),
                " neighbor %s timers 1 3" % ip,
                " neighbor %s timers connect 1" % ip]
    loom_peers = []
    if dev in plan.leaves:
        for spine in plan.spines:
            if plan.spine_address_seen_by(dev, spine) is None:
                continue
            ip = plan.loom_source[spine]
            loom_peers.append(ip)
            out += [" neighbor %s remote-as %d" % (ip, plan.loom_as),
                    " neighbor %s description loom-%s" % (ip, spine),
                    " neighbor %s ebgp-multihop 255" % ip,
                    " neighbor %s update-source %s" % (ip, plan.mgmt_leaf_ip[dev]),
                    " neighbor %s passive" % ip]
    out += [" !", " address-family ipv4 unicast", "  maximum-paths 8"]
    if dev in plan.leaves:
        for agg in plan.leaf_aggregates[dev]:
            out.append("  network %s" % agg)
        for ip in loom_peers:
            out += ["  neighbor %s route-map LOOM-IN in" % ip,
                    "  neighbor %s route-map NOTHING out" % ip]
    out += [" exit-address-family", "exit", "!", ""]
    return "\n".join(out)


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def cleanup_stale(log=print):
    """Removes the namespaces and daemons of runs whose owner process is gone
    (e.g. a test killed by ctest's timeout), from their state files."""
    if not os.path.isdir(STATE_DIR):
        return
    for f in os.listdir(STATE_DIR):
        path = os.path.join(STATE_DIR, f)
        try:
            with open(path) as fh:
                st = json.load(fh)
        except (OSError, ValueError):
            continue
        if _pid_alive(int(st.get("owner", 0))):
            continue
        log("fabric: cleaning up stale run %s (owner %s gone)" % (st.get("tag"), st.get("owner")))
        _teardown(st.get("namespaces", []), st.get("pids", []), st.get("dir"))
        try:
            os.unlink(path)
        except OSError:
            pass


def _ns_pids(ns):
    r = run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in r.stdout.split()] if r.returncode == 0 else []


def _teardown(namespaces, pids, workdir):
    existing = set(run(["ip", "netns", "list"], check=False).stdout.split())
    # Daemons we started, then anything still running inside our namespaces
    # (ping, iperf3 started by the test).
    for ns in namespaces:
        if ns in existing:
            pids = list(pids) + _ns_pids(ns)
    for p in set(pids):
        try:
            os.kill(p, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_pid_alive(p) for p in set(pids)):
        _reap()
        time.sleep(0.05)
    for p in set(pids):
        if _pid_alive(p):
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    _reap()
    for ns in namespaces:
        if ns in existing:
            run(["ip", "netns", "del", ns], check=False)
    if workdir and os.path.isdir(workdir):
        shutil.rmtree(workdir, ignore_errors=True)


def _reap():
    try:
        while True:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
    except ChildProcessError:
        pass


class Fabric:
    """The running fabric. Use as a context manager (teardown on exit)."""

    def __init__(self, topology_path, loom_as=DEFAULT_LOOM_AS, tag=None, log=print):
        with open(topology_path) as f:
            self.topo = json.load(f)
        self.tag = tag or "lf" + secrets.token_hex(3)
        self.plan = Plan(self.topo, self.tag, loom_as)
        self.log = log
        self.dir = None
        self.procs = []  # (name, Popen)
        self.created_ns = []
        self.state_path = os.path.join(STATE_DIR, self.tag + ".json")

    # --- lifecycle -----------------------------------------------------------

    def __enter__(self):
        try:
            self.build()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc):
        self.teardown()
        return False

    def _save_state(self):
        os.makedirs(STATE_DIR, exist_ok=True)
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"tag": self.tag, "owner": os.getpid(), "dir": self.dir,
                       "namespaces": self.created_ns,
                       "pids": [p.pid for _, p in self.procs]}, f)
        os.replace(tmp, self.state_path)

    def teardown(self):
        _teardown(self.created_ns, [p.pid for _, p in self.procs], None)
        for _, p in self.procs:
            try:
                p.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        self.procs = []
        self.created_ns = []
        if self.dir and os.environ.get("LOOM_FRR_KEEP_LOGS"):
            self.log("fabric: logs kept in %s" % self.dir)
        elif self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        try:
            os.unlink(self.state_path)
        except OSError:
            pass

    # --- building ------------------------------------------------------------

    def ns(self, dev):
        return self.plan.ns[dev]

    def ip(self, dev, *args, check=True):
        return run(["ip", "-n", self.ns(dev)] + list(args), check=check)

    def sysctl(self, dev, key, value):
        run(["ip", "netns", "exec", self.ns(dev), "sysctl", "-qw", "%s=%s" % (key, value)])

    def add_ns(self, dev):
        name = self.ns(dev)
        run(["ip", "netns", "add", name])
        self.created_ns.append(name)
        self._save_state()
        self.ip(dev, "link", "set", "lo", "up")

    def veth(self, dev_a, if_a, dev_b, if_b):
        run(["ip", "link", "add", if_a, "netns", self.ns(dev_a), "type", "veth",
             "peer", if_b, "netns", self.ns(dev_b)])
        self.ip(dev_a, "link", "set", if_a, "up")
        self.ip(dev_b, "link", "set", if_b, "up")

    def build(self):
        if not os.path.exists(os.path.join(FRR_DIR, "bgpd")):
            raise FabricError("FRR is not installed (%s/bgpd missing; apt-get install frr)"
                              % FRR_DIR)
        cleanup_stale(self.log)
        self.dir = tempfile.mkdtemp(prefix="loom-frr-%s-" % self.tag)
        os.chmod(self.dir, 0o755)
        self._save_state()
        p = self.plan
        for dev in p.spines + p.leaves + p.nics + ["loom"]:
            self.add_ns(dev)
        for dev in p.spines + p.leaves:
            self.sysctl(dev, "net.ipv4.ip_forward", 1)
            self.sysctl(dev, "net.ipv4.conf.all.rp_filter", 0)
            self.sysctl(dev, "net.ipv4.conf.default.rp_filter", 0)
            # L4 hash: different TCP/UDP flows may take different spines.
            self.sysctl(dev, "net.ipv4.fib_multipath_hash_policy", 1)
        for x in p.fabric_links:
            self.veth(x["leaf"], x["leaf_if"], x["spine"], x["spine_if"])
            self.ip(x["leaf"], "addr", "add", x["leaf_ip"] + "/31", "dev", x["leaf_if"])
            self.ip(x["spine"], "addr", "add", x["spine_ip"] + "/31", "dev", x["spine_if"])
        for x in p.nic_links:
            nic, leaf = x["nic"], x["leaf"]
            addr, gw = p.nic_addr[nic], p.gateway[leaf]
            self.veth(leaf, x["leaf_if"], nic, x["nic_if"])
            # The leaf's gateway address on each NIC-facing port (unnumbered
            # style), and a /32 to the NIC.
            self.ip(leaf, "addr", "add", gw + "/32", "dev", x["leaf_if"])
            self.ip(leaf, "route", "add", addr + "/32", "dev", x["leaf_if"], "src", gw)
            self.ip(nic, "addr", "add", addr + "/32", "dev", x["nic_if"])
            self.ip(nic, "route", "add", gw + "/32", "dev", x["nic_if"], "scope", "link")
            self.ip(nic, "route", "add", str(BENCH), "via", gw, "dev", x["nic_if"],
                    "src", addr)
        for leaf in p.leaves:
            for agg in p.leaf_aggregates[leaf]:
                self.ip(leaf, "route", "add", "blackhole", agg)
        # Loom's namespace: per-color source addresses on lo, a /31 to each leaf.
        for addr in p.loom_source.values():
            self.ip("loom", "addr", "add", addr + "/32", "dev", "lo")
        for leaf in p.leaves:
            self.veth("loom", leaf, leaf, "loom")
            self.ip("loom", "addr", "add", p.mgmt_loom_ip[leaf] + "/31", "dev", leaf)
            self.ip(leaf, "addr", "add", p.mgmt_leaf_ip[leaf] + "/31", "dev", "loom")
            for addr in p.loom_source.values():
                self.ip(leaf, "route", "add", addr + "/32", "via", p.mgmt_loom_ip[leaf])
        for dev in p.spines + p.leaves:
            self.start_frr(dev)

    def frr_dir(self, dev):
        return os.path.join(self.dir, dev)

    def start_frr(self, dev):
        d = self.frr_dir(dev)
        os.makedirs(d)
        shutil.chown(d, "frr", "frr")
        os.chmod(d, 0o755)
        for daemon, text in (("zebra", zebra_conf(dev)), ("bgpd", bgpd_conf(self.plan, dev))):
            conf = os.path.join(d, daemon + ".conf")
            with open(conf, "w") as f:
                f.write(text)
            shutil.chown(conf, "frr", "frr")
        zsock = os.path.join(d, "zserv.api")
        common = ["-u", "frr", "-g", "frr", "--vty_socket", d, "-P", "0", "-z", zsock]
        z = self._spawn(dev, "zebra", [os.path.join(FRR_DIR, "zebra")] + common + [
            "-f", os.path.join(d, "zebra.conf"), "-i", os.path.join(d, "zebra.pid"),
            "--log", "file:" + os.path.join(d, "zebra.log")])
        deadline = time.monotonic() + 10
        while not os.path.exists(zsock):
            if z.poll() is not None or time.monotonic() > deadline:
                raise FabricError("zebra of %s did not start: %s" % (dev, self.frr_log(dev, "zebra")))
            time.sleep(0.02)
        self._spawn(dev, "bgpd", [os.path.join(FRR_DIR, "bgpd")] + common + [
            "-f", os.path.join(d, "bgpd.conf"), "-i", os.path.join(d, "bgpd.pid"),
            "--log", "file:" + os.path.join(d, "bgpd.log")])

    def _spawn(self, dev, name, argv):
        out = open(os.path.join(self.frr_dir(dev), name + ".out"), "w")
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns(dev)] + argv,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        self.procs.append(("%s/%s" % (dev, name), proc))
        self._save_state()
        return proc

    def frr_log(self, dev, daemon):
        try:
            with open(os.path.join(self.frr_dir(dev), daemon + ".log")) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def check_daemons(self):
        dead = [n for n, p in self.procs if p.poll() is not None]
        if dead:
            raise FabricError("FRR daemons exited: %s" % ", ".join(dead))

    # --- inspection ----------------------------------------------------------

    def vtysh(self, dev, *commands):
        argv = ["vtysh", "--vty_socket", self.frr_dir(dev)]
        for c in commands:
            argv += ["-c", c]
        return run(argv, timeout=20).stdout

    def vtysh_json(self, dev, command):
        return json.loads(self.vtysh(dev, command) or "{}")

    def bgp_peers(self, dev):
        """Neighbor address -> state ("Established", ...)."""
        s = self.vtysh_json(dev, "show bgp ipv4 unicast summary json")
        return {ip: v.get("state", "") for ip, v in s.get("peers", {}).items()}

    def routes(self, dev, prefix=None):
        """The kernel FIB of the device's namespace (`ip -j route`)."""
        args = ["-j", "route", "show"] + ([prefix] if prefix else [])
        return json.loads(self.ip(dev, *args).stdout or "[]")

    def route_next_hops(self, dev, prefix):
        """Gateways of the kernel route for exactly `prefix` (sorted); [] when none."""
        for r in self.routes(dev, prefix):
            if r.get("dst") not in (prefix, prefix.split("/")[0]):
                continue
            if r.get("type") == "blackhole":
                return ["blackhole"]
            if "gateway" in r:
                return [r["gateway"]]
            return sorted(n["gateway"] for n in r.get("nexthops", []) if "gateway" in n)
        return []

    def counters(self, dev, ifname):
        """(tx_packets, tx_bytes) of an interface in the device's namespace."""
        j = json.loads(self.ip(dev, "-s", "-j", "link", "show", "dev", ifname).stdout)
        tx = j[0]["stats64"]["tx"]
        return tx["packets"], tx["bytes"]

    def spine_counters(self, leaf):
        """Spine -> (tx_packets, tx_bytes) on the leaf's spine-facing ports."""
        out = {}
        for ifname, spine in self.plan.spine_ports(leaf).items():
            pk, by = self.counters(leaf, ifname)
            a = out.get(spine, (0, 0))
            out[spine] = (a[0] + pk, a[1] + by)
        return out

    def exec_argv(self, dev, argv):
        return ["ip", "netns", "exec", self.ns(dev)] + list(argv)

    def ping(self, src_nic, dst_nic, count=1, wait_s=1, interval=None, flood=False):
        argv = ["ping", "-n", "-q", "-c", str(count), "-W", str(wait_s),
                "-I", self.plan.nic_addr[src_nic]]
        if flood:
            argv.append("-f")
        elif interval is not None:
            argv += ["-i", str(interval)]
        argv.append(self.plan.nic_addr[dst_nic])
        return run(self.exec_argv(src_nic, argv), check=False,
                   timeout=max(30, count * (interval or 1) + wait_s + 5))

    # --- waiting -------------------------------------------------------------

    def wait_underlay(self, timeout=60):
        """Waits until every underlay session is Established and every leaf has
        the other leaves' aggregates with one next hop per spine (ECMP)."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            self.check_daemons()
            ok = True
            for leaf in self.plan.leaves:
                want = {x["spine_ip"] for x in self.plan.fabric_links if x["leaf"] == leaf}
                peers = self.bgp_peers(leaf)
                if any(peers.get(ip) != "Established" for ip in want):
                    ok, last = False, "%s peers %s" % (leaf, peers)
                    break
                for other in self.plan.leaves:
                    if other == leaf:
                        continue
                    for agg in self.plan.leaf_aggregates[other]:
                        nh = self.route_next_hops(leaf, agg)
                        if sorted(nh) != sorted(want):
                            ok, last = False, "%s %s via %s (want %s)" % (leaf, agg, nh,
                                                                          sorted(want))
                            break
            if ok:
                return
            time.sleep(0.25)
        raise FabricError("underlay not up after %ds: %s" % (timeout, last))

    def wait_loom_sessions(self, established=True, timeout=60):
        """Waits until every leaf's sessions with Loom are (not) Established."""
        deadline = time.monotonic() + timeout
        last = {}
        while time.monotonic() < deadline:
            self.check_daemons()
            ok = True
            for leaf in self.plan.leaves:
                peers = self.bgp_peers(leaf)
                last[leaf] = {ip: peers.get(ip) for ip in self.plan.loom_source.values()}
                if any((st == "Established") != established for st in last[leaf].values()):
                    ok = False
            if ok:
                return
            time.sleep(0.25)
        raise FabricError("Loom sessions not %s after %ds: %s" % (
            "up" if established else "down", timeout, last))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topology", required=True)
    ap.add_argument("--inventory", help="write loomd's inventory (--config) here")
    ap.add_argument("command", choices=["up", "cleanup"])
    args = ap.parse_args()
    if args.command == "cleanup":
        cleanup_stale()
        return 0
    with Fabric(args.topology) as fab:
        fab.wait_underlay()
        print("fabric %s up; FRR files in %s" % (fab.tag, fab.dir))
        if args.inventory:
            with open(args.inventory, "w") as f:
                json.dump(fab.plan.inventory(), f, indent=1)
            print("inventory written to", args.inventory)
        for dev in fab.plan.spines + fab.plan.leaves:
            print("  vtysh --vty_socket %s   # %s" % (fab.frr_dir(dev), dev))
        for n in fab.plan.nics:
            print("  ip netns exec %s ...   # %s %s" % (fab.ns(n), n, fab.plan.nic_addr[n]))
        print("  ip netns exec %s ...   # Loom's side (loomd, loomctl)" % fab.ns("loom"))
        print("Ctrl-C tears it down.")
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    sys.exit(main())
