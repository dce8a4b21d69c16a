#!/usr/bin/python3
"""Interop: Loom's BGP speaker (bgp_speaker_tool) against a real gobgpd.

Checks, reading gobgpd's RIB with `gobgp ... -j`:
- colored routes arrive with the right prefix, next hop, Color community
  (type 3, subtype 11), link bandwidth (type 0x40 subtype 4), AIGP (0 on the
  primary, worse on the backup advertisement), large community;
- DPF filtering: a route of another color is not sent on the colored session;
- a job release withdraws; a recolor replaces;
- NNHN: the NHC attribute (type 39, code 2) with the session via's BGP id and
  the next-next-hop ids, next hop = next-hop-self; a route whose NNHN does
  not list the session's via is not sent;
- restarting gobgpd re-establishes and Loom re-advertises;
- Loom as graceful-restart helper keeps gobgpd's routes as stale while
  gobgpd is down, and purges what gobgpd does not re-announce;
- Loom restarting (killed, restarted with --restarting): gobgpd keeps Loom's
  routes (stale) and, after Loom's End-of-RIB, drops what Loom did not
  re-originate.

gobgpd ignores loopback next hops, so Loom sets next hop 198.18.0.1
(next-hop-self from the benchmarking range). Exit 77 (skip) when gobgpd is not
installed.
"""
import argparse
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_util import wait_for  # noqa: E402

LOOM_AS = 65000
GOBGP_AS = 65001


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gobgp:
    def __init__(self, workdir, bgp_port, api_port):
        self.workdir = workdir
        self.bgp_port = bgp_port
        self.api_port = api_port
        self.proc = None
        self.conf = os.path.join(workdir, "gobgpd.toml")
        with open(self.conf, "w") as f:
            f.write(f"""
[global.config]
  as = {GOBGP_AS}
  router-id = "10.0.0.2"
  port = {bgp_port}
  local-address-list = ["127.0.0.1"]
[[neighbors]]
  [neighbors.config]
    neighbor-address = "127.0.0.1"
    peer-as = {LOOM_AS}
  [neighbors.transport.config]
    passive-mode = true
  [neighbors.timers.config]
    hold-time = 9
    keepalive-interval = 3
  [neighbors.graceful-restart.config]
    enabled = true
    restart-time = 30
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
    [neighbors.afi-safis.mp-graceful-restart.config]
      enabled = true
""")

    def start(self, restarting=False):
        log = open(os.path.join(self.workdir, "gobgpd.log"), "a")
        cmd = ["gobgpd", "-f", self.conf, "--api-hosts", f"127.0.0.1:{self.api_port}",
               "-l", "info"]
        if restarting:
            cmd.append("-r")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        wait_for("gobgpd API", lambda: self.cli("global", "-j") is not None)

    def kill(self):
        if self.proc:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def cli(self, *args):
        out = subprocess.run(["gobgp", "-p", str(self.api_port), *args], capture_output=True,
                             text=True, timeout=10)
        if out.returncode != 0:
            raise RuntimeError(out.stderr.strip())
        return out.stdout

    def rib(self):
        return json.loads(self.cli("global", "rib", "-j") or "{}")

    def adj_in(self):
        return json.loads(self.cli("neighbor", "127.0.0.1", "adj-in", "-j") or "{}")

    def established(self):
        out = json.loads(self.cli("neighbor", "-j"))
        return any(n.get("state", {}).get("session_state") == 6 for n in out)


class Loom:
    def __init__(self, tool, workdir, gobgp_port):
        self.tool = tool
        self.workdir = workdir
        self.gobgp_port = gobgp_port
        self.proc = None

    def start(self, restarting=False):
        peer = (f"name=gobgp,local_as={LOOM_AS},peer_as={GOBGP_AS},addr=127.0.0.1,"
                f"port={self.gobgp_port},next_hop=198.18.0.1,color=10,via=spine1,hold=9,"
                "restart_time=30")
        cmd = [self.tool, "--router-id", "10.0.0.1", "--peer", peer]
        if restarting:
            cmd.append("--restarting")
        err = open(os.path.join(self.workdir, "loom.log"), "a")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=err, text=True, bufsize=1)
        json.loads(self.proc.stdout.readline())

    def cmd(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def peer(self):
        return self.cmd("status")["peers"][0]

    def kill(self):
        if self.proc:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def quit(self):
        if self.proc:
            try:
                self.cmd("quit")
            except Exception:  # noqa: BLE001 - exits without answering
                pass
            self.proc.wait(timeout=10)
            self.proc = None


def attrs_of(rib, prefix):
    paths = rib.get(prefix)
    if not paths:
        return None
    return {a["type"]: a for a in paths[0]["attrs"]}, paths[0]


def ext_comms(attrs):
    return attrs.get(16, {}).get("value", [])


def color_of(attrs):
    colors = [c["color"] for c in ext_comms(attrs) if c.get("type") == 3 and
              c.get("subtype") == 11]
    return colors[0] if colors else None


def aigp_of(attrs):
    tlvs = attrs.get(26, {}).get("value", [])
    return tlvs[0]["metric"] if tlvs else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    args = ap.parse_args()
    if not shutil.which("gobgpd") or not shutil.which("gobgp"):
        print("SKIP: gobgpd/gobgp not installed (apt-get install -y gobgpd)")
        return 77

    workdir = tempfile.mkdtemp(prefix="loom-gobgp-")
    gobgp = Gobgp(workdir, free_port(), free_port())
    loom = Loom(args.tool, workdir, gobgp.bgp_port)
    try:
        gobgp.start()
        loom.start()
        wait_for("session established",
                 lambda: loom.peer()["state"] == "Established" and gobgp.established())

        print("step: colored routes with link bandwidth, AIGP, large community")
        loom.cmd("route 198.18.1.7/32 color=10 backup=20 large=65000:1:3")
        loom.cmd("route 198.18.1.8/32 color=20 backup=10 lbw=spine1:1250000000")
        loom.cmd("route 198.18.1.9/32 color=30")  # Other color: never on this session.
        loom.cmd("route 198.18.1.10/32")  # Uncolored: sent.
        rib = wait_for("3 routes in gobgp", lambda: len(gobgp.rib()) == 3 and gobgp.rib())
        assert set(rib) == {"198.18.1.7/32", "198.18.1.8/32", "198.18.1.10/32"}, rib
        a, path = attrs_of(rib, "198.18.1.7/32")
        assert a[3]["nexthop"] == "198.18.0.1", a
        assert a[2]["as_paths"][0]["asns"] == [LOOM_AS], a
        assert color_of(a) == 10, a
        assert aigp_of(a) == 0, a
        assert a[32]["value"][0] == {"ASN": 65000, "LocalData1": 1, "LocalData2": 3}, a
        a, _ = attrs_of(rib, "198.18.1.8/32")
        assert color_of(a) == 10, a  # Advertised on the backup color's session.
        assert aigp_of(a) == 1000, a  # Worse than the primary's 0.
        lbw = [c for c in ext_comms(a) if c.get("type") == 64 and c.get("subtype") == 4]
        assert lbw and lbw[0]["bandwidth"] == 1250000000 and lbw[0]["asn"] == LOOM_AS, a
        a, _ = attrs_of(rib, "198.18.1.10/32")
        assert color_of(a) is None and 26 not in a, a
        assert gobgp.adj_in().keys() == rib.keys()

        print("step: job release withdraws")
        loom.cmd("withdraw 198.18.1.10/32")
        wait_for("withdrawal", lambda: "198.18.1.10/32" not in gobgp.rib())

        print("step: recolor replaces")
        loom.cmd("route 198.18.1.8/32 color=10 backup=20 lbw=spine1:2500000000")
        wait_for("recolored route", lambda: aigp_of(attrs_of(gobgp.rib(), "198.18.1.8/32")[0]) == 0)
        loom.cmd("route 198.18.1.7/32 color=30 backup=40")  # Moves off this session's color.
        wait_for("recolor away withdraws", lambda: "198.18.1.7/32" not in gobgp.rib())
        counters = loom.peer()["counters"]
        assert counters["prefixes_withdrawn_out"] == 2, counters

        print("step: NNHN per session via (NHC attribute 39, characteristic code 2)")
        loom.cmd("route 198.18.1.12/32 color=10 nnhn=spine1:10.0.0.21:10.0.0.31:10.0.0.32 "
                 "nnhn=spine2:10.0.0.22:10.0.0.31")
        # spine1 (this session's via) cannot reach 198.18.1.13's egress leaf: not sent.
        loom.cmd("route 198.18.1.13/32 color=10 nnhn=spine2:10.0.0.22:10.0.0.31")
        loom.cmd("route 198.18.1.14/32 color=10")  # Sent after 1.13: the UPDATEs went out.
        rib = wait_for("NNHN route", lambda: (lambda r: "198.18.1.14/32" in r and r)(gobgp.rib()))
        assert "198.18.1.13/32" not in rib, rib
        a, _ = attrs_of(rib, "198.18.1.12/32")
        assert 39 in a, a
        assert a[39]["flags"] & 0xC0 == 0xC0, a  # Optional, transitive.
        want = (bytes([0, 1, 4, 198, 18, 0, 1, 0, 2, 0, 12]) +  # AFI 1, NH = next-hop-self
                bytes([10, 0, 0, 21, 10, 0, 0, 31, 10, 0, 0, 32]))  # spine1, then NNH ids
        assert base64.b64decode(a[39]["value"]) == want, a[39]
        a, _ = attrs_of(rib, "198.18.1.14/32")
        assert 39 not in a, a
        for p in ("198.18.1.12/32", "198.18.1.13/32", "198.18.1.14/32"):
            loom.cmd(f"withdraw {p}")
        wait_for("NNHN routes withdrawn", lambda: set(gobgp.rib()) == {"198.18.1.8/32"})

        print("step: gobgpd originates a route to Loom")
        gobgp.cli("global", "rib", "add", "203.0.113.0/24", "nexthop", "198.18.0.2", "-a", "ipv4")
        wait_for("Loom receives gobgp route",
                 lambda: [r for r in loom.peer()["rib_in"] if r["prefix"] == "203.0.113.0/24"])

        print("step: gobgpd dies; Loom (GR helper) keeps its routes stale")
        gobgp.kill()
        wait_for("Loom sees session down", lambda: loom.peer()["state"] != "Established")
        rib_in = loom.peer()["rib_in"]
        assert rib_in and all(r["stale"] for r in rib_in), rib_in

        print("step: gobgpd restarts; Loom re-establishes, re-advertises, purges stale")
        gobgp.start(restarting=True)
        wait_for("re-established",
                 lambda: loom.peer()["state"] == "Established" and gobgp.established(),
                 timeout=30)
        wait_for("re-advertised", lambda: set(gobgp.rib()) == {"198.18.1.8/32"})
        wait_for("stale purged after gobgpd End-of-RIB", lambda: loom.peer()["rib_in"] == [],
                 timeout=40)
        assert loom.peer()["counters"]["flaps"] == 1

        print("step: Loom restarts; gobgpd keeps Loom's routes while it is away")
        loom.cmd("route 198.18.1.11/32 color=10")
        wait_for("two routes", lambda: len(gobgp.rib()) == 2)
        loom.kill()
        rib = wait_for("gobgpd marks Loom's routes stale",
                       lambda: (lambda r: all(p[0]["stale"] for p in r.values()) and r)(
                           gobgp.rib()))
        assert set(rib) == {"198.18.1.8/32", "198.18.1.11/32"}, rib
        loom.start(restarting=True)
        loom.cmd("route 198.18.1.8/32 color=10 backup=20")
        wait_for("Loom re-established", lambda: loom.peer()["state"] == "Established", timeout=30)
        # Until Loom's End-of-RIB, the route it did not re-originate stays.
        assert "198.18.1.11/32" in gobgp.rib()
        loom.cmd("ready")
        wait_for("stale route purged after Loom's End-of-RIB",
                 lambda: set(gobgp.rib()) == {"198.18.1.8/32"} and
                 not gobgp.rib()["198.18.1.8/32"][0]["stale"])
        print("PASS")
        return 0
    finally:
        loom.quit() if loom.proc else None
        gobgp.kill()
        for name in ("gobgpd.log", "loom.log"):
            path = os.path.join(workdir, name)
            if os.path.exists(path) and os.environ.get("LOOM_TEST_VERBOSE"):
                print(open(path).read())


if __name__ == "__main__":
    sys.exit(main())
