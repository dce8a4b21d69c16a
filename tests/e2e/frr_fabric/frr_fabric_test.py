#!/usr/bin/python3
"""A real routed fabric driven by loomd: FRR 8.4 leaves and spines in network
namespaces (fabric.py), loomd peering with every leaf from its inventory.

1. The underlay alone (Loom stopped): every NIC pings every other NIC.
2. The FRR side of Loom's sessions, with gobgpd standing in for Loom (one
   gobgpd per color session, third-party next hop = the spine's address):
   the leaf installs the /32 through that spine, both colors give ECMP, and
   after kill -9 the leaf keeps the route for the graceful-restart time and
   then falls back to the underlay.
3. loomd: sessions from the inventory; a job between two leaves; the leaf's
   FIB holds Loom's /32 through the spine loomd chose and the per-spine
   counters show the traffic there; a drain of that spine's links moves it;
   after kill -9 (and after SIGTERM of a fresh loomd) forwarding is unchanged
   during the graceful-restart time, then the /32 is gone and traffic takes
   the underlay's ECMP, with no ping lost.

Needs root and `ip netns` (exit 77 = skipped otherwise) and FRR.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fabric as fabric_mod  # noqa: E402

ARGS = None
GR_S = 10  # graceful_restart_s Loom advertises (inventory)
SKIP = 77


def log(*a):
    print(*a, flush=True)


def wait_for(what, fn, timeout, interval=0.25):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("timed out (%ss) waiting for %s (last: %r)" % (timeout, what, last))


class BackgroundPing:
    """`ping -i 0.05` between two NICs for the duration of a block; counts losses."""

    def __init__(self, fab, src, dst, interval=0.05):
        self.fab, self.src, self.dst, self.interval = fab, src, dst, interval

    def __enter__(self):
        argv = self.fab.exec_argv(self.src, [
            "ping", "-n", "-q", "-i", str(self.interval), "-W", "1",
            "-I", self.fab.plan.nic_addr[self.src], self.fab.plan.nic_addr[self.dst]])
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        return self

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        out, _ = self.proc.communicate(timeout=10)
        tx = rx = 0
        for line in out.splitlines():
            if "packets transmitted" in line:
                parts = line.split(",")
                tx = int(parts[0].split()[0])
                rx = int(parts[1].split()[0])
        return tx, rx, out

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        return False


class Loomd:
    """loomd (and loomctl) inside the fabric's loom namespace."""

    def __init__(self, fab, workdir, config_path):
        self.fab = fab
        self.dir = workdir
        ready = os.path.join(workdir, "loomd.json")
        if os.path.exists(ready):
            os.unlink(ready)
        self.log_path = os.path.join(workdir, "loomd-%d.log" % int(time.time() * 1000))
        logf = open(self.log_path, "w")
        self.proc = subprocess.Popen(fab.exec_argv("loom", [
            ARGS.loomd, "--topology", ARGS.topology, "--config", config_path,
            "--db", os.path.join(workdir, "loom.db"), "--grpc-listen", "127.0.0.1:0",
            "--metrics-listen", "127.0.0.1:0", "--ready-file", ready]),
            stdout=logf, stderr=subprocess.STDOUT)
        logf.close()
        deadline = time.monotonic() + 30
        while not os.path.exists(ready):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("loomd did not start:\n" + self.read_log())
            time.sleep(0.05)
        time.sleep(0.05)
        with open(ready) as f:
            self.port = json.load(f)["grpc_port"]

    def read_log(self):
        try:
            with open(self.log_path) as f:
                return f.read()[-6000:]
        except OSError:
            return ""

    def ctl(self, *args, check=True):
        r = subprocess.run(self.fab.exec_argv("loom", [
            ARGS.loomctl, "--server", "127.0.0.1:%d" % self.port] + list(args)),
            capture_output=True, text=True, timeout=30)
        if check and r.returncode != 0:
            raise AssertionError("loomctl %s: exit %d: %s" % (" ".join(args), r.returncode,
                                                             r.stderr))
        return r.stdout

    def ctl_json(self, *args):
        return json.loads(self.ctl("--json", *args))

    def kill(self, sig):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)


class FrrRoutedFabricTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fab = fabric_mod.Fabric(ARGS.topology, log=log)
        cls.fab.__enter__()
        cls.dir = tempfile.mkdtemp(prefix="loom-frr-test-")
        try:
            cls.fab.wait_underlay(90)
        except BaseException:
            cls.tearDownClass()
            raise
        cls.p = cls.fab.plan
        log("fabric %s up: leaves %s, spines %s, NICs %s" % (
            cls.fab.tag, cls.p.leaves, cls.p.spines,
            ", ".join("%s=%s" % (n, a) for n, a in cls.p.nic_addr.items())))

    @classmethod
    def tearDownClass(cls):
        if os.environ.get("LOOM_FRR_KEEP_LOGS"):
            log("test files kept in", cls.dir)
        else:
            shutil.rmtree(cls.dir, ignore_errors=True)
        cls.fab.teardown()

    def tearDown(self):
        # Each test leaves the fabric as the underlay alone.
        self.fab.check_daemons()

    # -- helpers ----------------------------------------------------------------

    def pair(self):
        """A source NIC on the first leaf and a destination NIC on another leaf."""
        p = self.p
        src = next(n for n in p.nics if p.leaf_of.get(n) == p.leaves[0])
        dst = next(n for n in p.nics if p.leaf_of.get(n) == p.leaves[1])
        return src, dst

    def flood(self, src, dst, count=2000):
        """Pings `count` packets as fast as replies come; returns per-spine tx
        packet deltas on src's leaf."""
        leaf = self.p.leaf_of[src]
        before = self.fab.spine_counters(leaf)
        r = self.fab.ping(src, dst, count=count, flood=True, wait_s=2)
        after = self.fab.spine_counters(leaf)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(" 0% packet loss", r.stdout)
        delta = {s: (after[s][0] - before[s][0], after[s][1] - before[s][1]) for s in after}
        return before, after, delta

    def print_counters(self, title, leaf, before, after, delta):
        log("%s: %s per-spine tx counters (packets/bytes on the spine-facing ports)" % (
            title, leaf))
        for s in sorted(after):
            ports = [i for i, sp in self.p.spine_ports(leaf).items() if sp == s]
            log("  %-8s %-10s before %8d pkts %10d B   after %8d pkts %10d B   delta %7d pkts %9d B"
                % (s, ",".join(ports), before[s][0], before[s][1], after[s][0], after[s][1],
                   delta[s][0], delta[s][1]))

    def assert_took(self, delta, spine, count):
        """At least `count` packets left through `spine`, (almost) none through the others
        (BGP keepalives and ARP are the only other traffic on those ports)."""
        self.assertGreaterEqual(delta[spine][0], count, delta)
        for s, d in delta.items():
            if s != spine:
                self.assertLess(d[0], count // 20, delta)

    # -- 1. underlay ---------------------------------------------------------------

    def test_1_underlay_reaches_every_nic_without_loom(self):
        failed = []
        for a in self.p.nics:
            for b in self.p.nics:
                if a != b and self.fab.ping(a, b, count=1, wait_s=2).returncode != 0:
                    failed.append((a, b))
        self.assertEqual(failed, [])
        for leaf in self.p.leaves:
            for other in self.p.leaves:
                if other == leaf:
                    continue
                for agg in self.p.leaf_aggregates[other]:
                    self.assertEqual(len(self.fab.route_next_hops(leaf, agg)), len(self.p.spines))
        log("underlay: %d NIC pairs reach each other; each leaf has %d-way ECMP to the others"
            % (len(self.p.nics) * (len(self.p.nics) - 1), len(self.p.spines)))

    # -- 2. FRR side of Loom's sessions, Loom simulated by gobgpd -------------------------

    def test_2_frr_installs_injected_host_route_through_chosen_spine(self):
        if not shutil.which("gobgpd"):
            self.skipTest("gobgpd not installed")
        src, dst = self.pair()
        leaf = self.p.leaf_of[src]
        prefix = self.p.nic_addr[dst] + "/32"
        procs = []
        try:
            for i, spine in enumerate(self.p.spines):
                nh = self.p.spine_address_seen_by(leaf, spine)
                procs.append(self.start_gobgpd(leaf, spine, i))
                port = 50800 + (os.getpid() % 100) * 10 + i
                wait_for("gobgp session %s" % spine, lambda: self.fab.bgp_peers(leaf).get(
                    self.p.loom_source[spine]) == "Established", 30)
                subprocess.run(self.fab.exec_argv("loom", [
                    "gobgp", "-p", str(port), "global", "rib", "add", prefix, "nexthop", nh,
                    "-a", "ipv4"]), check=True, capture_output=True, timeout=10)
                want = sorted(self.p.spine_address_seen_by(leaf, s) for s in self.p.spines[:i + 1])
                wait_for("%s in %s's FIB via %s" % (prefix, leaf, want),
                         lambda: self.fab.route_next_hops(leaf, prefix) == want, 20)
                if i == 0:
                    b, a, d = self.flood(src, dst)
                    self.assert_took(d, spine, 2000)
                    # Not leaked to the spines (no-advertise): they keep the aggregate.
                    for s in self.p.spines:
                        self.assertEqual(self.fab.route_next_hops(s, prefix), [])
            t0 = time.monotonic()
            for pr in procs:
                pr.kill()
                pr.wait()
            self.check_graceful_restart_then_fallback(src, dst, leaf, prefix, GR_S, t0)
        finally:
            for pr in procs:
                if pr.poll() is None:
                    pr.kill()
                    pr.wait()
        self.fab.wait_loom_sessions(established=False, timeout=10)

    def start_gobgpd(self, leaf, spine, i):
        p = self.p
        conf = os.path.join(self.dir, "gobgpd-%s.toml" % spine)
        with open(conf, "w") as f:
            f.write("""[global.config]
  as = %d
  router-id = "%s"
  port = -1
[[neighbors]]
  [neighbors.config]
    neighbor-address = "%s"
    peer-as = %d
  [neighbors.transport.config]
    local-address = "%s"
  [neighbors.ebgp-multihop.config]
    enabled = true
    multihop-ttl = 255
  [neighbors.graceful-restart.config]
    enabled = true
    restart-time = %d
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
    [neighbors.afi-safis.mp-graceful-restart.config]
      enabled = true
""" % (p.loom_as, p.loom_source[spine], p.mgmt_leaf_ip[leaf], p.asn[leaf],
                p.loom_source[spine], GR_S))
        port = 50800 + (os.getpid() % 100) * 10 + i
        out = open(conf + ".log", "w")
        proc = subprocess.Popen(self.fab.exec_argv("loom", [
            "gobgpd", "-f", conf, "--api-hosts", "127.0.0.1:%d" % port]),
            stdout=out, stderr=subprocess.STDOUT)
        out.close()
        return proc

    def check_graceful_restart_then_fallback(self, src, dst, leaf, prefix, gr_s, t0):
        """Loom died at t0 (monotonic): the /32 stays (stale) for most of the GR
        time with forwarding unchanged, then is withdrawn and the underlay's
        ECMP aggregate carries the traffic; a background ping loses nothing."""
        before = self.fab.route_next_hops(leaf, prefix)
        self.assertTrue(before, "%s gone right after Loom died" % prefix)
        with BackgroundPing(self.fab, src, dst) as bg:
            while time.monotonic() - t0 < gr_s - 3:
                self.assertEqual(self.fab.route_next_hops(leaf, prefix), before,
                                 "route changed %.1fs after Loom died" % (time.monotonic() - t0))
                time.sleep(0.5)
            kept = time.monotonic() - t0
            wait_for("%s withdrawn from %s after GR" % (prefix, leaf),
                     lambda: self.fab.route_next_hops(leaf, prefix) == [], gr_s + 20)
            gone = time.monotonic() - t0
            time.sleep(2)  # traffic now on the aggregate
            tx, rx, out = bg.stop()
        agg = [a for a in self.p.leaf_aggregates[self.p.leaf_of[dst]]]
        ecmp = self.fab.route_next_hops(leaf, agg[0])
        log("GR: %s via %s kept >= %.1fs, gone after %.1fs; then %s via %s (ECMP); "
            "background ping %d/%d received" % (prefix, before, kept, gone, agg[0], ecmp, rx, tx))
        self.assertEqual(len(ecmp), len(self.p.spines))
        self.assertGreater(tx, 50, out)
        self.assertEqual(rx, tx, "packets lost while falling back:\n" + out)
        self.assertEqual(self.fab.ping(src, dst, count=3, wait_s=2).returncode, 0)

    # -- 3. loomd --------------------------------------------------------------------------

    def test_3_loomd_places_drains_and_restarts_gracefully(self):
        src, dst = self.pair()
        leaf = self.p.leaf_of[src]
        prefix = self.p.nic_addr[dst] + "/32"
        config = os.path.join(self.dir, "loomd-inventory.json")
        with open(config, "w") as f:
            json.dump(self.p.inventory(graceful_restart_s=GR_S), f, indent=1)
        loomd = Loomd(self.fab, self.dir, config)
        try:
            self.run_loomd_flow(loomd, src, dst, leaf, prefix)
        except BaseException:
            log("loomd log:\n" + loomd.read_log())
            log(self.fab.vtysh(leaf, "show bgp ipv4 unicast summary"))
            raise
        finally:
            if loomd.proc.poll() is None:
                loomd.kill(signal.SIGKILL)

    def dst_spine(self, job, dst_nic):
        for r in job["status"]["assignment"]["routes"]:
            if r["destination"] == dst_nic:
                return r["via"], r["color"]
        raise AssertionError("no route for %s in %s" % (dst_nic, job["status"]))

    def wait_leaf_route(self, loomd, leaf, prefix, spine):
        """Loom's desired route for prefix on leaf has spine's color, the
        leaf's FIB has the /32 through that spine, loomd says the leaf is in
        sync; returns loomd's device view."""
        nh = self.p.spine_address_seen_by(leaf, spine)
        wait_for("%s via %s (%s) in %s's FIB" % (prefix, spine, nh, leaf),
                 lambda: self.fab.route_next_hops(leaf, prefix) == [nh], 30)
        dev = wait_for("loomd: %s in sync" % leaf, lambda: (
            lambda d: d if d["sync"].get("inSync") else None)(loomd.ctl_json("device", leaf)), 30)
        return dev

    def run_loomd_flow(self, loomd, src, dst, leaf, prefix):
        p = self.p
        self.fab.wait_loom_sessions(established=True, timeout=60)
        dev = loomd.ctl_json("device", leaf)
        log("loomctl device %s: driver %s" % (leaf, dev["sync"].get("driver")))
        # Every leaf of the inventory has a real driver (BGP; no Set target here).
        for l in self.p.leaves:
            self.assertEqual(loomd.ctl_json("device", l)["sync"].get("driver"), "bgp", l)
        # The job: one GPU behind src's NIC, one behind dst's NIC.
        gpu = {g["nic"]: g["id"] for g in self.fab.topo.get("gpus", [])}
        job = os.path.join(self.dir, "job.json")
        with open(job, "w") as f:
            json.dump({"tenant": "acme", "jobId": "frr-job",
                       "endpoints": [gpu[src], gpu[dst]],
                       "collective": "COLLECTIVE_PATTERN_RING_ALLREDUCE"}, f)
        loomd.ctl("jobs", "register", job)
        j = loomd.ctl_json("jobs", "get", "frr-job")
        spine, color = self.dst_spine(j, dst)
        log("loomd placed %s -> %s via %s (color %d)" % (src, dst, spine, color))
        dev = self.wait_leaf_route(loomd, leaf, prefix, spine)
        # The fabric's NIC addresses are Loom's PrefixPlan addresses.
        routes = dev["desired"]["routes"]
        self.assertTrue(routes, dev)
        for r in routes:
            nic = r["destination"] if r["destination"] in p.nic_addr else None
            if nic:
                self.assertEqual(r["prefix"], p.nic_addr[nic] + "/32", r)
        mine = [r for r in routes if r["prefix"] == prefix]
        self.assertEqual([r["color"] for r in mine], [color], routes)
        log(self.fab.vtysh(leaf, "show bgp ipv4 unicast %s" % prefix))
        before, after, delta = self.flood(src, dst)
        self.print_counters("before drain (Loom chose %s)" % spine, leaf, before, after, delta)
        self.assert_took(delta, spine, 2000)

        # Drain every link of that spine: the job moves.
        for x in p.fabric_links:
            if x["spine"] == spine:
                loomd.ctl("links", "drain", x["id"], "--reason", "test")
        j = wait_for("job moved off %s" % spine, lambda: (
            lambda jj: jj if self.dst_spine(jj, dst)[0] != spine else None)(
                loomd.ctl_json("jobs", "get", "frr-job")), 30)
        spine2, color2 = self.dst_spine(j, dst)
        log("after drain of %s: %s -> %s via %s (color %d)" % (spine, src, dst, spine2, color2))
        self.wait_leaf_route(loomd, leaf, prefix, spine2)
        before, after, delta = self.flood(src, dst)
        self.print_counters("after drain of %s (Loom moved it to %s)" % (spine, spine2),
                            leaf, before, after, delta)
        self.assert_took(delta, spine2, 2000)

        # kill -9: graceful restart keeps forwarding, then the underlay takes over.
        t0 = time.monotonic()
        loomd.kill(signal.SIGKILL)
        log("loomd killed with SIGKILL")
        self.check_graceful_restart_then_fallback(src, dst, leaf, prefix, GR_S, t0)
        self.fab.wait_loom_sessions(established=False, timeout=10)

        # A fresh loomd (same database: the job and the drain survive) re-announces.
        inventory = os.path.join(self.dir, "loomd-inventory.json")
        loomd2 = Loomd(self.fab, self.dir, inventory)
        try:
            self.fab.wait_loom_sessions(established=True, timeout=60)
            self.wait_leaf_route(loomd2, leaf, prefix, spine2)
            log("fresh loomd re-announced %s via %s" % (prefix, spine2))
        except BaseException:
            log("second loomd log:\n" + loomd2.read_log())
            loomd2.kill(signal.SIGKILL)
            raise
        # kill -9 and an immediate restart (an upgrade): the restarted loomd
        # opens with R and F set (its database preserved the routes), so the
        # leaf keeps Loom's routes as stale until loomd's End-of-RIB instead of
        # flushing them when the new session comes up: the /32 never leaves
        # the FIB, and stays through spine2.
        nh2 = p.spine_address_seen_by(leaf, spine2)
        loomd2.kill(signal.SIGKILL)
        self.assertEqual(self.fab.route_next_hops(leaf, prefix), [nh2])
        loomd3 = Loomd(self.fab, self.dir, inventory)
        try:
            self.fab.wait_loom_sessions(established=True, timeout=60)
            seen = set()
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                seen.add(tuple(self.fab.route_next_hops(leaf, prefix)))
                if "sending End-of-RIB" in loomd3.read_log() and time.monotonic() > deadline - 10:
                    break
                time.sleep(0.05)
            self.assertIn("sending End-of-RIB", loomd3.read_log())
            self.assertEqual(seen, {(nh2,)}, "the /32 left %s's FIB during the restart" % leaf)
            nbr = self.fab.vtysh_json(leaf, "show bgp neighbors %s json" % p.loom_source[spine2])
            found = {}

            def walk(x):
                if isinstance(x, dict):
                    for k, v in x.items():
                        if k in ("rBit", "fBit", "remoteGrMode") and k not in found:
                            found[k] = v
                        walk(v)
                elif isinstance(x, list):
                    for v in x:
                        walk(v)
            walk(nbr)
            log("FRR's view of the restarted Loom's graceful restart: %s" % found)
            self.assertTrue(found.get("rBit"), json.dumps(nbr)[:3000])
            log("restart within the graceful-restart time: %s stayed via %s" % (prefix, spine2))
            # SIGTERM: forwarding holds for the restart time, then the underlay.
            t0 = time.monotonic()
            rc = loomd3.kill(signal.SIGTERM)
            log("loomd stopped with SIGTERM (exit %d, %.1fs)" % (rc, time.monotonic() - t0))
            self.assertEqual(rc, 0, loomd3.read_log())
            self.check_graceful_restart_then_fallback(src, dst, leaf, prefix, GR_S, t0)
        except BaseException:
            log("third loomd log:\n" + loomd3.read_log())
            raise
        finally:
            if loomd3.proc.poll() is None:
                loomd3.kill(signal.SIGKILL)
        # bgpWithdrawOnShutdown: SIGTERM sends a Cease; the leaf drops Loom's
        # /32 at once (not after the restart time) and the underlay carries on.
        withdraw = os.path.join(self.dir, "loomd-withdraw.json")
        with open(withdraw, "w") as f:
            json.dump(dict(p.inventory(graceful_restart_s=GR_S), bgpWithdrawOnShutdown=True), f)
        loomd4 = Loomd(self.fab, self.dir, withdraw)
        try:
            self.fab.wait_loom_sessions(established=True, timeout=60)
            self.wait_leaf_route(loomd4, leaf, prefix, spine2)
            t0 = time.monotonic()
            rc = loomd4.kill(signal.SIGTERM)
            self.assertEqual(rc, 0, loomd4.read_log())
            wait_for("%s withdrawn from %s at once" % (prefix, leaf),
                     lambda: self.fab.route_next_hops(leaf, prefix) == [], 3)
            gone = time.monotonic() - t0
            agg = self.p.leaf_aggregates[self.p.leaf_of[dst]][0]
            self.assertEqual(len(self.fab.route_next_hops(leaf, agg)), len(p.spines))
            self.assertEqual(self.fab.ping(src, dst, count=3, wait_s=2).returncode, 0)
            log("bgpWithdrawOnShutdown: %s gone %.1fs after SIGTERM (restart time %ds); "
                "underlay ECMP via %d spines" % (prefix, gone, GR_S, len(p.spines)))
        except BaseException:
            log("fourth loomd log:\n" + loomd4.read_log())
            raise
        finally:
            if loomd4.proc.poll() is None:
                loomd4.kill(signal.SIGKILL)


def can_run():
    if os.geteuid() != 0:
        return "not root"
    name = "loomchk%d" % os.getpid()
    r = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if r.returncode != 0:
        return "ip netns add failed: " + r.stderr.strip()
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    if not os.path.exists(os.path.join(fabric_mod.FRR_DIR, "bgpd")):
        return "FRR not installed (apt-get install frr)"
    if not shutil.which("ping"):
        return "ping not installed (apt-get install iputils-ping)"
    return None


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for a in ("--loomd", "--loomctl", "--topology"):
        parser.add_argument(a, required=True)
    ARGS, rest = parser.parse_known_args()
    why = can_run()
    if why:
        print("SKIP: " + why)
        sys.exit(SKIP)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))  # run teardown on ctest's kill
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
