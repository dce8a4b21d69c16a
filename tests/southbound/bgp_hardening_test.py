#!/usr/bin/python3
"""BGP session hardening of Loom's speaker (bgp_speaker_tool) against real
gobgpd and FRR bgpd, in network namespaces on 198.18.0.0/15:

  loom ns --198.18.250.0/31-- gobgp ns   (gobgpd, passive, auth-password)
          --198.18.252.0/31-- frr ns     (FRR bgpd, password + ttl-security hops 1)
          --198.18.251.0/31-- rtr ns --198.18.251.2/31-- far ns
                                         (FRR bgpd 2 hops away, ttl-security hops 2)

Checks:
- TCP MD5 (RFC 2385): the same password as gobgpd -> Established; a wrong
  one -> never Established, Loom counts connect failures and gobgpd's kernel
  counts TCPMD5Failure; FRR with `neighbor X password` -> Established, and
  with a wrong password -> never Established (FRR's kernel counts TCPMD5Failure).
- The speaker's listener carries the key too: a client dialing it without
  the key gets no answer, with the key it connects.
- GTSM (RFC 5082): FRR with ttl-security hops 1 on a direct link ->
  Established (Loom sends TTL 255); an FRR 2 hops away (sending TTL 255,
  arriving 254) is not accepted by Loom with ttl_security_hops 1 (Loom's
  kernel counts TCPMinTTLDrop) and is with ttl_security_hops 2.
- Max prefixes received: gobgpd announcing max_prefixes + 1 gets NOTIFICATION
  Cease / 1 with data AFI 1, SAFI 1, limit (gobgpd logs it); Loom drops the
  routes, counts it, stays down for the restart time, then redials.

Each run creates its own namespaces (per-run tag) and daemons and removes
them; runs killed before their cleanup are removed by the next run (state
files under /run/loom-frr-fabric, shared with tests/e2e/frr_fabric). Needs
root; exit 77 (skip) without gobgpd or FRR.
"""
import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e", "frr_fabric"))
import fabric  # noqa: E402  (run, cleanup_stale, _teardown, STATE_DIR)
sys.path.insert(0, HERE)
from peer_util import wait_for  # noqa: E402

LOOM_AS = 65000
PEER_AS = 65001
PASSWORD = "s3cret-Loom"
FRR_DIR = "/usr/lib/frr"

LOOM_GOBGP, GOBGP = "198.18.250.0", "198.18.250.1"
LOOM_FRR, FRR = "198.18.252.0", "198.18.252.1"
LOOM_RTR, RTR_LOOM, RTR_FAR, FAR = "198.18.251.0", "198.18.251.1", "198.18.251.2", "198.18.251.3"


def log(msg):
    print(msg, flush=True)


def tcp_ext(ns, name):
    """A TcpExt counter of the namespace's kernel (/proc/net/netstat)."""
    out = fabric.run(["ip", "netns", "exec", ns, "cat", "/proc/net/netstat"]).stdout.splitlines()
    for head, vals in zip(out[::2], out[1::2]):
        if head.startswith("TcpExt:"):
            d = dict(zip(head.split()[1:], vals.split()[1:]))
            return int(d.get(name, 0))
    return 0


class Lab:
    def __init__(self):
        self.tag = "lh" + secrets.token_hex(3)
        self.dir = tempfile.mkdtemp(prefix="loom-bgp-hardening-")
        os.chmod(self.dir, 0o755)
        self.ns_names = {n: f"{self.tag}-{n}" for n in ("loom", "gobgp", "frr", "rtr", "far")}
        self.created = []
        self.procs = []
        self.state_path = os.path.join(fabric.STATE_DIR, self.tag + ".json")

    def ns(self, n):
        return self.ns_names[n]

    def save(self):
        os.makedirs(fabric.STATE_DIR, exist_ok=True)
        with open(self.state_path + ".tmp", "w") as f:
            json.dump({"tag": self.tag, "owner": os.getpid(), "dir": self.dir,
                       "namespaces": self.created, "pids": [p.pid for p in self.procs]}, f)
        os.replace(self.state_path + ".tmp", self.state_path)

    def ip(self, n, *args):
        return fabric.run(["ip", "-n", self.ns(n), *args])

    def exec_argv(self, n, argv):
        return ["ip", "netns", "exec", self.ns(n), *argv]

    def spawn(self, n, argv, logname, **kw):
        out = open(os.path.join(self.dir, logname), "a")
        p = subprocess.Popen(self.exec_argv(n, argv), stdout=kw.pop("stdout", out),
                             stderr=out, **kw)
        out.close()
        self.procs.append(p)
        self.save()
        return p

    def build(self):
        fabric.cleanup_stale(log)
        for n in self.ns_names:
            fabric.run(["ip", "netns", "add", self.ns(n)])
            self.created.append(self.ns(n))
            self.save()
            self.ip(n, "link", "set", "lo", "up")
        for a, b, a_ip, b_ip in (("loom", "gobgp", LOOM_GOBGP, GOBGP),
                                 ("loom", "frr", LOOM_FRR, FRR),
                                 ("loom", "rtr", LOOM_RTR, RTR_LOOM),
                                 ("rtr", "far", RTR_FAR, FAR)):
            fabric.run(["ip", "link", "add", "to-" + b, "netns", self.ns(a), "type", "veth",
                        "peer", "to-" + a, "netns", self.ns(b)])
            self.ip(a, "addr", "add", a_ip + "/31", "dev", "to-" + b)
            self.ip(b, "addr", "add", b_ip + "/31", "dev", "to-" + a)
            self.ip(a, "link", "set", "to-" + b, "up")
            self.ip(b, "link", "set", "to-" + a, "up")
        fabric.run(["ip", "netns", "exec", self.ns("rtr"), "sysctl", "-qw", "net.ipv4.ip_forward=1"])
        self.ip("loom", "route", "add", FAR + "/32", "via", RTR_LOOM)
        self.ip("far", "route", "add", LOOM_RTR + "/32", "via", RTR_FAR)

    def teardown(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        fabric._teardown(self.created, [p.pid for p in self.procs], None)
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if os.environ.get("LOOM_TEST_VERBOSE"):
            for f in sorted(os.listdir(self.dir)):
                if f.endswith(".log"):
                    print(f"--- {f}\n" + open(os.path.join(self.dir, f), errors="replace").read())
        shutil.rmtree(self.dir, ignore_errors=True)
        try:
            os.unlink(self.state_path)
        except OSError:
            pass


class Gobgp:
    def __init__(self, lab):
        self.lab = lab
        self.api = "127.0.0.1:50051"
        conf = os.path.join(lab.dir, "gobgpd.toml")
        with open(conf, "w") as f:
            f.write(f"""
[global.config]
  as = {PEER_AS}
  router-id = "{GOBGP}"
  local-address-list = ["{GOBGP}"]
[[neighbors]]
  [neighbors.config]
    neighbor-address = "{LOOM_GOBGP}"
    peer-as = {LOOM_AS}
    auth-password = "{PASSWORD}"
  [neighbors.transport.config]
    passive-mode = true
  [neighbors.timers.config]
    hold-time = 9
    keepalive-interval = 3
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
""")
        self.log = os.path.join(lab.dir, "gobgpd.log")
        lab.spawn("gobgp", ["gobgpd", "-f", conf, "--api-hosts", self.api, "-l", "debug",
                            "--log-plain"], "gobgpd.log")
        wait_for("gobgpd API", lambda: self.cli("global"))

    def cli(self, *args):
        out = subprocess.run(self.lab.exec_argv("gobgp", ["gobgp", "-u", "127.0.0.1", "-p",
                                                          "50051", *args]),
                             capture_output=True, text=True, timeout=10)
        if out.returncode != 0:
            raise RuntimeError(out.stderr.strip())
        return out.stdout

    def neighbor(self):
        return json.loads(self.cli("neighbor", LOOM_GOBGP, "-j"))

    def established(self):
        return self.neighbor().get("state", {}).get("session_state") == 6

    def notifications_received(self):
        return self.neighbor()["state"]["messages"]["received"].get("notification", 0)


def bgpd_conf(router_id, neighbor, hops, password):
    lines = ["frr defaults traditional", "hostname bgpd", "!",
             f"router bgp {PEER_AS}", f" bgp router-id {router_id}",
             " no bgp ebgp-requires-policy",
             f" neighbor {neighbor} remote-as {LOOM_AS}",
             f" neighbor {neighbor} ttl-security hops {hops}",
             f" neighbor {neighbor} passive",
             f" neighbor {neighbor} timers 3 9"]
    if password:
        lines.append(f" neighbor {neighbor} password {password}")
    return "\n".join(lines + ["!", ""])


def start_frr(lab, n, router_id, neighbor, hops, password):
    d = os.path.join(lab.dir, n)
    os.makedirs(d)
    shutil.chown(d, "frr", "frr")
    for daemon, text in (("zebra", "frr defaults traditional\nhostname zebra\n!\n"),
                         ("bgpd", bgpd_conf(router_id, neighbor, hops, password))):
        with open(os.path.join(d, daemon + ".conf"), "w") as f:
            f.write(text)
        shutil.chown(os.path.join(d, daemon + ".conf"), "frr", "frr")
    zsock = os.path.join(d, "zserv.api")
    common = ["-u", "frr", "-g", "frr", "--vty_socket", d, "-P", "0", "-z", zsock]
    lab.spawn(n, [os.path.join(FRR_DIR, "zebra"), *common, "-f", os.path.join(d, "zebra.conf"),
                  "-i", os.path.join(d, "zebra.pid")], f"{n}-zebra.log")
    wait_for(f"zebra in {n}", lambda: os.path.exists(zsock), timeout=10)
    lab.spawn(n, [os.path.join(FRR_DIR, "bgpd"), *common, "-f", os.path.join(d, "bgpd.conf"),
                  "-i", os.path.join(d, "bgpd.pid")], f"{n}-bgpd.log")

    def state():
        out = subprocess.run(["vtysh", "--vty_socket", d, "-c",
                              f"show bgp neighbors {neighbor} json"],
                             capture_output=True, text=True, timeout=10).stdout
        return json.loads(out or "{}").get(neighbor, {}).get("bgpState", "")
    wait_for(f"bgpd in {n}", state, timeout=10)
    return state


class Loom:
    """bgp_speaker_tool in the loom namespace, one peer."""

    def __init__(self, lab, tool, peer, listen_port=-1, name="loom"):
        self.proc = lab.spawn("loom", [tool, "--router-id", "198.18.255.1", "--listen-port",
                                       str(listen_port), "--peer", peer], name + ".log",
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.listen_port = json.loads(self.proc.stdout.readline())["listen_port"]

    def cmd(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def peer(self):
        return self.cmd("status")["peers"][0]

    def state(self):
        return self.peer()["state"]

    def quit(self):
        try:
            self.cmd("quit")
        except Exception:  # noqa: BLE001 - exits without answering
            pass
        self.proc.wait(timeout=10)


def peer_spec(addr, local, **kw):
    kv = dict(name="p", local_as=LOOM_AS, peer_as=PEER_AS, addr=addr, local=local, hold=9,
              connect_retry_ms=1000, gr=0)
    kv.update(kw)
    return ",".join(f"{k}={v}" for k, v in kv.items())


def stays_down(loom, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        assert loom.state() != "Established", loom.peer()
        time.sleep(0.2)


def md5_connect(ns_argv, port, key, timeout):
    """Dials 127.0.0.1:port from inside the namespace with (or without) a TCP
    MD5 key; True when connected."""
    code = f"""
import socket, struct, sys
s = socket.socket()
key = {key!r}.encode()
if key:
    sa = struct.pack("=H", socket.AF_INET) + struct.pack("!H4s", 0, socket.inet_aton("127.0.0.1"))
    sa = sa.ljust(128, b"\\0")
    s.setsockopt(socket.IPPROTO_TCP, 14,  # TCP_MD5SIG
                 sa + struct.pack("=BBHI", 0, 0, len(key), 0) + key.ljust(80, b"\\0"))
s.settimeout({timeout})
try:
    s.connect(("127.0.0.1", {port}))
    print("connected")
except OSError as e:
    print("failed", e)
"""
    out = subprocess.run(ns_argv + ["/usr/bin/python3", "-c", code], capture_output=True,
                         text=True, timeout=timeout + 10)
    return out.stdout.startswith("connected"), out.stdout + out.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    args = ap.parse_args()
    if not shutil.which("gobgpd") or not os.path.exists(os.path.join(FRR_DIR, "bgpd")):
        print("SKIP: gobgpd or FRR bgpd not installed")
        return 77
    if os.geteuid() != 0:
        print("SKIP: needs root (network namespaces)")
        return 77
    t0 = time.time()
    lab = Lab()
    try:
        lab.build()
        gobgp = Gobgp(lab)
        frr_state = start_frr(lab, "frr", FRR, LOOM_FRR, 1, PASSWORD)
        far_state = start_frr(lab, "far", FAR, LOOM_RTR, 2, None)

        log("step: TCP MD5, the same password as gobgpd -> Established")
        loom = Loom(lab, args.tool, peer_spec(GOBGP, LOOM_GOBGP, md5=PASSWORD), name="loom-md5")
        wait_for("Established with MD5",
                 lambda: loom.state() == "Established" and gobgp.established())
        loom.quit()

        log("step: TCP MD5, a wrong password -> not Established, counted on both sides")
        failures_before = tcp_ext(lab.ns("gobgp"), "TCPMD5Failure")
        loom = Loom(lab, args.tool, peer_spec(GOBGP, LOOM_GOBGP, md5="wrong-password"),
                    name="loom-md5-wrong")
        stays_down(loom, 4)
        p = loom.peer()
        assert p["counters"]["connect_failures"] >= 2, p
        assert "TCP MD5" in p["last_error"], p
        assert not gobgp.established()
        assert tcp_ext(lab.ns("gobgp"), "TCPMD5Failure") > failures_before
        loom.quit()

        log("step: the listener has the key: no key, no answer; with it, connected")
        loom = Loom(lab, args.tool, "name=l,local_as=65000,peer_as=65001,addr=127.0.0.1,"
                    f"passive=1,md5={PASSWORD}", listen_port=0, name="loom-listen")
        ok, out = md5_connect(lab.exec_argv("loom", []), loom.listen_port, "", 2)
        assert not ok, out
        ok, out = md5_connect(lab.exec_argv("loom", []), loom.listen_port, PASSWORD, 5)
        assert ok, out
        loom.quit()

        log("step: FRR, password + ttl-security hops 1 on both ends -> Established")
        loom = Loom(lab, args.tool, peer_spec(FRR, LOOM_FRR, md5=PASSWORD, gtsm=1),
                    name="loom-frr")
        wait_for("Established with FRR (MD5 + GTSM)",
                 lambda: loom.state() == "Established" and frr_state() == "Established")
        loom.quit()

        log("step: FRR with a wrong password -> not Established, FRR's kernel counts it")
        frr_failures_before = tcp_ext(lab.ns("frr"), "TCPMD5Failure")
        loom = Loom(lab, args.tool, peer_spec(FRR, LOOM_FRR, md5="wrong-password", gtsm=1),
                    name="loom-frr-wrong")
        stays_down(loom, 4)
        assert frr_state() != "Established"
        assert loom.peer()["counters"]["connect_failures"] >= 2, loom.peer()
        assert tcp_ext(lab.ns("frr"), "TCPMD5Failure") > frr_failures_before
        loom.quit()

        log("step: GTSM, FRR 2 hops away and ttl_security_hops 1 -> refused by Loom")
        drops_before = tcp_ext(lab.ns("loom"), "TCPMinTTLDrop")
        loom = Loom(lab, args.tool, peer_spec(FAR, LOOM_RTR, gtsm=1), name="loom-gtsm1")
        stays_down(loom, 4)
        p = loom.peer()
        assert p["counters"]["connect_failures"] >= 2, p
        assert tcp_ext(lab.ns("loom"), "TCPMinTTLDrop") > drops_before
        loom.quit()

        log("step: GTSM, the same FRR with ttl_security_hops 2 -> Established")
        loom = Loom(lab, args.tool, peer_spec(FAR, LOOM_RTR, gtsm=2), name="loom-gtsm2")
        wait_for("Established 2 hops away",
                 lambda: loom.state() == "Established" and far_state() == "Established")
        loom.quit()

        log("step: max prefixes: gobgpd sends 6 of at most 5 -> Cease/1, down, redial later")
        loom = Loom(lab, args.tool, peer_spec(GOBGP, LOOM_GOBGP, md5=PASSWORD, max_prefixes=5,
                                              max_prefix_restart_ms=3000),
                    name="loom-maxpfx")
        wait_for("Established", lambda: loom.state() == "Established" and gobgp.established())
        for i in range(5):
            gobgp.cli("global", "rib", "add", f"198.18.240.{i}/32", "nexthop", GOBGP, "-a", "ipv4")
        wait_for("5 prefixes at Loom", lambda: len(loom.peer()["rib_in"]) == 5)
        assert loom.state() == "Established"
        notes_before = gobgp.notifications_received()
        gobgp.cli("global", "rib", "add", "198.18.240.5/32", "nexthop", GOBGP, "-a", "ipv4")
        p = wait_for("teardown", lambda: (lambda p: p["counters"]["max_prefix_teardowns"] == 1
                                          and p)(loom.peer()))
        assert p["state"] != "Established" and p["counters"]["held_down"], p
        assert p["rib_in"] == [], p
        assert p["counters"]["notifications_sent"] == {"6": 1}, p
        wait_for("gobgpd received the notification",
                 lambda: gobgp.notifications_received() > notes_before)
        # gobgpd logs the NOTIFICATION: Cease (6) / 1, data (RFC 4486) AFI 1,
        # SAFI 1, limit 5.
        text = wait_for("gobgpd logs Cease/1", lambda: [
            line for line in open(gobgp.log, errors="replace")
            if 'msg="received notification"' in line and "Code=6 " in line and
            "Subcode=1 " in line])
        log("  gobgpd: " + text[-1].strip()[:300])
        assert 'Data="[0 1 1 0 0 0 5]"' in text[-1], text[-1]
        t_down = time.time()
        # Held down for the restart time (3 s): no redial before.
        while time.time() - t_down < 2.0:
            p = loom.peer()
            assert p["state"] == "Idle" and p["counters"]["held_down"], p
            time.sleep(0.2)
        # Then it dials again, gets 6 prefixes again and closes again.
        wait_for("redial after the restart time, closed again",
                 lambda: loom.peer()["counters"]["max_prefix_teardowns"] == 2, timeout=10)
        assert loom.peer()["counters"]["established_transitions"] == 2
        loom.quit()
        log(f"PASS ({time.time() - t0:.1f} s)")
        return 0
    finally:
        lab.teardown()


if __name__ == "__main__":
    sys.exit(main())
