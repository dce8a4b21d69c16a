#!/usr/bin/python3
"""Interop: a real exabgp (4.2) peer sends Loom's speaker unusual and malformed
UPDATEs.

Loom (exabgp_probe_tool) listens on an ephemeral loopback port with two
passive sessions: `ebgp` (AS 65000 <- exabgp AS 65001 from 127.0.0.1) and
`ibgp` (AS 65000 <- exabgp AS 65000 from 127.0.0.2). exabgp dials both; the
test drives exabgp through its API (a helper process relays the API over a
loopback socket) and reads Loom's Adj-RIB-In, session state and counters
through the tool's `status` command. Checked:

- unknown optional transitive attributes (static routes from exabgp's config,
  `attribute [ code flags value ]`) are kept with their flags, and Loom's
  encoder sets Partial when it would pass them on (the speaker never
  re-advertises received routes; the tool shows the re-encoded block); an
  unknown optional non-transitive attribute is dropped;
- AS_SET in AS_PATH, ORIGIN EGP, MED, communities, large communities,
  extended communities (Color, link bandwidth), AIGP (raw on eBGP, `aigp` on
  iBGP), LOCAL_PREF on iBGP (exabgp never sends LOCAL_PREF on eBGP; Loom's
  decoder ignores it there, RFC 7606 §7.5, codec.cc);
- 800 prefixes in one UPDATE, IPv6 via MP_REACH/MP_UNREACH, withdrawals,
  End-of-RIB (IPv4 and IPv6), ROUTE-REFRESH from exabgp (Loom re-sends its
  Adj-RIB-Out), a Cease from exabgp;
- RFC 7606 treat-as-withdraw for malformed ORIGIN/AS_PATH/MED/communities
  (bad value, bad length, wrong flags, bad segment, segment overrun): route
  withdrawn, session stays Established, counters exact;
- attribute-discard for malformed AIGP and ATOMIC_AGGREGATE; malformed
  AGGREGATOR / AS4_AGGREGATOR (bad length, RFC 7606 §7.7) are known
  deviations: Loom keeps them verbatim (reported as XFAIL, not a failure;
  reported as XPASS once the speaker validates them);
- session reset with NOTIFICATION 3/2 (unrecognized well-known attribute)
  and 3/9 (malformed MP_REACH/MP_UNREACH), seen by exabgp on the wire and
  counted by Loom; exabgp reconnects and the session re-establishes.

Truncated messages and bad message lengths cannot be produced by exabgp (it
computes every length itself); malformed_peer_test.py sends them raw.

Exit 77 (skip) when exabgp is not installed (apt-get install -y exabgp).
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

LOOM_AS = 65000
EXA_AS = 65001
HERE = os.path.dirname(os.path.abspath(__file__))
EBGP = "neighbor 127.0.0.1 local-ip 127.0.0.1"
IBGP = "neighbor 127.0.0.1 local-ip 127.0.0.2"
NH = "198.18.0.2"
# 800 prefixes exabgp sends on the iBGP session in one UPDATE (3,200 bytes of NLRI).
MANY = [f"10.{40 + i // 256}.{i % 256}.0/24" for i in range(800)]


def wait_for(what, pred, timeout=30.0):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last: {last})")


class Loom:
    def __init__(self, tool, workdir):
        ebgp = (f"name=ebgp,local_as={LOOM_AS},peer_as={EXA_AS},addr=127.0.0.1,passive=1,hold=9,"
                "next_hop=198.18.0.1")
        ibgp = (f"name=ibgp,local_as={LOOM_AS},peer_as={LOOM_AS},addr=127.0.0.2,passive=1,hold=9,"
                "next_hop=198.18.0.1")
        self.err = open(os.path.join(workdir, "loom.log"), "w")
        self.proc = subprocess.Popen([tool, "--router-id", "10.0.0.1", "--listen-port", "0",
                                      "--peer", ebgp, "--peer", ibgp], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, text=True,
                                     bufsize=1)
        self.port = json.loads(self.proc.stdout.readline())["listen_port"]

    def cmd(self, line):
        assert self.proc.poll() is None, f"Loom's speaker exited ({self.proc.returncode})"
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def peer(self, name="ebgp"):
        return next(p for p in self.cmd("status")["peers"] if p["name"] == name)

    def rib(self, name="ebgp"):
        return {r["prefix"]: r for r in self.peer(name)["rib_in"]}

    def counters(self, name="ebgp"):
        return self.peer(name)["counters"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.write("quit\n")  # No answer: the tool exits.
            self.proc.stdin.flush()
            self.proc.wait(timeout=10)
        return self.proc.returncode


class Exabgp:
    """exabgp with its API relayed to us over a loopback socket."""

    def __init__(self, workdir, loom_port):
        self.workdir = workdir
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        relay_port = self.listener.getsockname()[1]
        self.conf = os.path.join(workdir, "exabgp.conf")
        relay = os.path.join(HERE, "exabgp_api_relay.py")
        many_routes = "\n".join(f"        route {p} next-hop {NH} med 7;" for p in MANY)
        api = """
    api {
        processes [ loomtest ];
        neighbor-changes;
        receive { parsed; update; notification; refresh; }
    }"""
        with open(self.conf, "w") as f:
            f.write(f"""
process loomtest {{
    run /usr/bin/python3 {relay} {relay_port};
    encoder json;
}}

neighbor 127.0.0.1 {{
    description "ebgp";
    router-id 10.0.0.2;
    local-address 127.0.0.1;
    local-as {EXA_AS};
    peer-as {LOOM_AS};
    connect {loom_port};
    hold-time 9;
    adj-rib-out false;
    group-updates true;
    capability {{ route-refresh; }}
    family {{ ipv4 unicast; ipv6 unicast; }}
    {api}
    static {{
        # Unknown optional transitive (99): kept.
        route 10.10.1.0/24 next-hop {NH} attribute [ 0x63 0xc0 0x01020304 ];
        # Unknown optional non-transitive (98): dropped.
        route 10.10.2.0/24 next-hop {NH} attribute [ 0x62 0x80 0x05 ];
        # Unknown optional transitive already Partial, with the extended
        # length flag on a 2-byte value (100): kept, re-encoded short.
        route 10.10.3.0/24 next-hop {NH} attribute [ 0x64 0xf0 0xaabb ];
    }}
}}

neighbor 127.0.0.1 {{
    description "ibgp";
    router-id 10.0.0.3;
    local-address 127.0.0.2;
    local-as {LOOM_AS};
    peer-as {LOOM_AS};
    connect {loom_port};
    hold-time 9;
    adj-rib-out false;
    capability {{ route-refresh; }}
    family {{ ipv4 unicast; ipv6 unicast; }}
    {api}
    static {{
        # Same attributes: sent grouped in one UPDATE at session start.
{many_routes}
    }}
}}
""")
        env = dict(os.environ)
        env.update({
            "exabgp_daemon_user": "root" if os.geteuid() == 0 else env.get("USER", "nobody"),
            "exabgp_daemon_drop": "false",
            "exabgp_daemon_daemonize": "false",
            "exabgp_tcp_bind": "",  # Do not listen: exabgp dials Loom.
            "exabgp_api_cli": "false",
            "exabgp_api_ack": "true",
            "exabgp_api_respawn": "false",
            "exabgp_log_destination": os.path.join(workdir, "exabgp.log"),
            "exabgp_log_level": "INFO",
            "exabgp_log_packets": "true",
            "exabgp_log_message": "true",
        })
        self.log = open(os.path.join(workdir, "exabgp.out"), "w")
        self.proc = subprocess.Popen(["exabgp", self.conf], stdout=self.log,
                                     stderr=subprocess.STDOUT, env=env)
        self.listener.settimeout(30)
        self.sock, _ = self.listener.accept()
        self.lock = threading.Lock()
        self.events = []  # JSON events from exabgp.
        self.acks = []  # "done" / "error".
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.sock.makefile("r"):
            line = line.strip()
            if not line:
                continue
            with self.lock:
                if line.startswith("{"):
                    try:
                        self.events.append(json.loads(line))
                    except ValueError:
                        pass
                else:
                    self.acks.append(line)

    def send(self, command):
        """Sends one API command and waits for exabgp's ack."""
        with self.lock:
            n = len(self.acks)
        self.sock.sendall((command + "\n").encode())
        ack = wait_for(f"exabgp ack for {command[:80]!r}",
                       lambda: self._ack_after(n), timeout=30)
        assert ack == "done", f"exabgp refused {command!r}: {ack}"

    def _ack_after(self, n):
        with self.lock:
            return self.acks[n] if len(self.acks) > n else None

    def mark(self):
        with self.lock:
            return len(self.events)

    def events_since(self, mark, mtype=None):
        with self.lock:
            evs = self.events[mark:]
        return [e for e in evs if mtype is None or e.get("type") == mtype]

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.listener.close()


def attrs_of(hexblock):
    """Parses an encoded path attribute block: {type: (flags, value bytes)}."""
    b = bytes.fromhex(hexblock)
    out = {}
    i = 0
    while i < len(b):
        flags, code = b[i], b[i + 1]
        if flags & 0x10:
            length = int.from_bytes(b[i + 2:i + 4], "big")
            i += 4
        else:
            length = b[i + 2]
            i += 3
        out[code] = (flags, b[i:i + length])
        i += length
    return out


def ok(msg):
    print(f"ok: {msg}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    args = ap.parse_args()
    if not shutil.which("exabgp"):
        print("SKIP: exabgp not installed (apt-get install -y exabgp)")
        return 77

    started = time.time()
    workdir = tempfile.mkdtemp(prefix="loom-exabgp-")
    loom = Loom(args.tool, workdir)
    exa = None
    try:
        exa = Exabgp(workdir, loom.port)
        wait_for("both sessions Established",
                 lambda: all(p["state"] == "Established" for p in loom.cmd("status")["peers"]),
                 timeout=15)
        ok("exabgp established eBGP and iBGP sessions with Loom")

        # --- 1. Static routes with unknown optional attributes + End-of-RIB.
        rib = wait_for("static routes", lambda: (lambda r: len(r) >= 3 and r)(loom.rib()))
        r1 = rib["10.10.1.0/24"]
        assert [(u["type"], u["flags"], u["value"]) for u in r1["unknown"]] == [
            (99, 0xC0, "01020304")], r1
        flags, value = attrs_of(r1["reencoded"])[99]
        assert flags == 0xE0 and value.hex() == "01020304", (hex(flags), value)
        ok("unknown optional transitive attribute kept; Partial set when re-encoded (0xc0->0xe0)")
        assert rib["10.10.2.0/24"]["unknown"] == [], rib["10.10.2.0/24"]
        assert rib["10.10.2.0/24"]["next_hop"] == NH
        ok("unknown optional non-transitive attribute dropped, route kept")
        r3 = rib["10.10.3.0/24"]
        assert [(u["type"], u["flags"]) for u in r3["unknown"]] == [(100, 0xF0)], r3
        assert attrs_of(r3["reencoded"])[100] == (0xE0, bytes.fromhex("aabb"))
        ok("extended-length flag on a short unknown attribute accepted; re-encoded 1-byte length")
        c = wait_for("End-of-RIB (IPv4 and IPv6)",
                     lambda: (lambda c: c["end_of_rib_in"] == 2 and c)(loom.counters()))
        assert c["prefixes_announced_in"] == 3 and c["treat_as_withdraw"] == 0, c
        ok("End-of-RIB for IPv4 and IPv6 counted")

        # --- 2. Unusual but valid attributes on eBGP.
        exa.send(f"{EBGP} announce route 10.20.0.0/24 next-hop {NH} origin egp "
                 "as-path [ 65001 65002 ( 65010 65011 ) ] med 50 community [ 65001:100 ] "
                 "large-community [ 65001:1:2 4200000000:3:4 ] "
                 "extended-community [ 0x030b00000000000a bandwidth:65001:125000000 ] "
                 "attribute [ 0x1a 0x80 0x01000b0000000000000014 ]")
        r = wait_for("10.20.0.0/24", lambda: loom.rib().get("10.20.0.0/24"))
        assert r["origin"] == 1, r
        assert r["as_path"] == [{"type": 2, "asns": [65001, 65002]},
                                {"type": 1, "asns": [65010, 65011]}], r["as_path"]
        assert r["med"] == 50 and "local_pref" not in r, r
        assert r["communities"] == [65001 << 16 | 100], r
        assert r["large_communities"] == [[65001, 1, 2], [4200000000, 3, 4]], r
        assert r["color"] == 10 and r["link_bandwidth"] == 125000000, r
        assert "030b00000000000a" in r["ext_communities"], r
        assert r["aigp"] == 20, r
        assert r["unknown"] == [], r
        ok("AS_SET, ORIGIN EGP, MED, community, large communities, Color 10, "
           "link bandwidth 1e9 bit/s, AIGP 20 decoded on eBGP")

        # --- 3. iBGP: LOCAL_PREF accepted, AIGP via exabgp's own encoder.
        exa.send(f"{IBGP} announce route 10.30.0.0/24 next-hop {NH} local-preference 300 aigp 7 "
                 "as-path [ ]")
        r = wait_for("iBGP route", lambda: loom.rib("ibgp").get("10.30.0.0/24"))
        assert r["local_pref"] == 300 and r["aigp"] == 7 and r["as_path"] == [], r
        assert "10.30.0.0/24" not in loom.rib("ebgp")
        ok("iBGP: LOCAL_PREF 300 and AIGP 7 kept, empty AS_PATH accepted")

        # --- 4. Many prefixes in one UPDATE (iBGP static routes, grouped).
        wait_for("800 prefixes on iBGP", lambda: set(MANY) <= set(loom.rib("ibgp")))
        c = wait_for("iBGP End-of-RIB", lambda: (lambda c: c["end_of_rib_in"] == 2 and c)(
            loom.counters("ibgp")))
        assert c["prefixes_announced_in"] == 800 + 1, c
        # 800 prefixes + 2 End-of-RIB markers (+ the LOCAL_PREF route above).
        assert c["messages_in"]["2"] == 1 + 2 + 1, c
        ok("800 prefixes in one UPDATE (3,200 bytes of NLRI)")

        # --- 5. IPv6 via MP_REACH, then MP_UNREACH.
        exa.send(f"{EBGP} announce route 2001:db8:1::/48 next-hop 2001:db8::2 "
                 "large-community [ 65001:6:6 ]")
        r = wait_for("IPv6 route", lambda: loom.rib().get("2001:db8:1::/48"))
        assert r["mp_next_hop"] == "20010db8000000000000000000000002", r
        assert r["large_communities"] == [[65001, 6, 6]], r
        ok("IPv6 prefix via MP_REACH_NLRI with its next hop")

        # --- 6. Withdrawals (IPv4 body, 800 at once, MP_UNREACH).
        before = loom.counters()
        exa.send(f"{EBGP} withdraw route 10.20.0.0/24")
        exa.send(f"{EBGP} withdraw route 2001:db8:1::/48 next-hop 2001:db8::2")
        wait_for("withdrawals", lambda: set(loom.rib()) == {"10.10.1.0/24", "10.10.2.0/24",
                                                          "10.10.3.0/24"})
        after = loom.counters()
        assert after["prefixes_withdrawn_in"] - before["prefixes_withdrawn_in"] == 2, after
        assert after["messages_in"]["2"] - before["messages_in"]["2"] == 2, after
        ibefore = loom.counters("ibgp")
        exa.send(f"{IBGP} withdraw attributes next-hop {NH} med 7 nlri " + " ".join(MANY))
        wait_for("800 withdrawn on iBGP", lambda: set(loom.rib("ibgp")) == {"10.30.0.0/24"})
        iafter = loom.counters("ibgp")
        assert iafter["prefixes_withdrawn_in"] - ibefore["prefixes_withdrawn_in"] == 800, iafter
        assert after["treat_as_withdraw"] == iafter["treat_as_withdraw"] == 0
        ok("withdrawals: IPv4, IPv6 via MP_UNREACH_NLRI, 800 prefixes "
           f"({iafter['messages_in']['2'] - ibefore['messages_in']['2']} UPDATEs from exabgp's API)")

        # --- 7. ROUTE-REFRESH: Loom re-sends its Adj-RIB-Out.
        m = exa.mark()
        loom.cmd("route 10.99.0.0/24")
        wait_for("exabgp receives Loom's route", lambda: [
            e for e in exa.events_since(m, "update") if "10.99.0.0/24" in json.dumps(e)])
        out_before = loom.counters()["prefixes_announced_out"]
        m = exa.mark()
        exa.send(f"{EBGP} announce route-refresh ipv4 unicast")
        wait_for("re-sent after ROUTE-REFRESH", lambda: [
            e for e in exa.events_since(m, "update") if "10.99.0.0/24" in json.dumps(e)])
        c = loom.counters()
        assert c["messages_in"].get("5") == 1, c
        assert c["prefixes_announced_out"] == out_before + 1, c
        ok("ROUTE-REFRESH from exabgp: Loom re-advertised 10.99.0.0/24")

        # --- 8. RFC 7606 treat-as-withdraw: session stays up.
        good = f"{EBGP} announce route 10.50.0.0/24 next-hop {NH} community [ 65001:1 ]"
        withdraw_cases = [
            ("ORIGIN value 5", "[ 0x01 0x40 0x05 ]"),
            ("ORIGIN with optional flag", "[ 0x01 0xc0 0x00 ]"),
            ("ORIGIN length 2", "[ 0x01 0x40 0x0000 ]"),
            ("AS_PATH segment type 7", "[ 0x02 0x40 0x07010000fde9 ]"),
            ("AS_PATH segment count overruns value", "[ 0x02 0x40 0x02050000fde9 ]"),
            ("AS_PATH truncated ASN", "[ 0x02 0x40 0x02010000fd ]"),
            ("MED length 2", "[ 0x04 0x80 0x0001 ]"),
            ("MED with transitive well-known flags", "[ 0x04 0x40 0x00000001 ]"),
            ("COMMUNITIES length 3", "[ 0x08 0xc0 0x000001 ]"),
            ("EXT COMMUNITIES length 7", "[ 0x10 0xc0 0x030b0000000001 ]"),
            ("LARGE COMMUNITIES length 11", "[ 0x20 0xc0 0x0000fde9000000010000ff ]"),
        ]
        base = loom.counters()
        for i, (name, attr) in enumerate(withdraw_cases, start=1):
            exa.send(good)
            wait_for(f"{name}: good route", lambda: "10.50.0.0/24" in loom.rib())
            exa.send(f"{EBGP} announce route 10.50.0.0/24 next-hop {NH} attribute {attr}")
            wait_for(f"{name}: treat-as-withdraw", lambda: "10.50.0.0/24" not in loom.rib())
            p = loom.peer()
            c = p["counters"]
            assert p["state"] == "Established", (name, p)
            assert c["treat_as_withdraw"] == base["treat_as_withdraw"] + i, (name, c)
            assert c["notifications_sent"] == {}, (name, c)
            ok(f"{name} -> treat-as-withdraw, session stays Established")
        c = loom.counters()
        assert c["prefixes_withdrawn_in"] - base["prefixes_withdrawn_in"] == len(withdraw_cases)
        assert c["flaps"] == 0 and c["established_transitions"] == 1, c

        # --- 9. Attribute discard: route kept without the attribute.
        # (name, attribute, rib field that must be absent, unknown type that
        # must not be kept, known deviation of the speaker).
        discard_cases = [
            ("AIGP TLV length 5", "[ 0x1a 0x80 0x0100050000 ]", "aigp", None, False),
            ("ATOMIC_AGGREGATE length 1", "[ 0x06 0x40 0x00 ]", "atomic_aggregate", None, False),
            # RFC 7606 §7.7: AGGREGATOR must be 8 bytes on a 4-octet-AS session.
            ("AGGREGATOR length 2", "[ 0x07 0xc0 0x0001 ]", None, 7, False),
            # RFC 7606 §7.7 / RFC 6793: AS4_AGGREGATOR must be 8 bytes.
            ("AS4_AGGREGATOR length 3", "[ 0x12 0xc0 0x000001 ]", None, 18, False),
        ]
        xfails = []
        for k, (name, attr, field, utype, known) in enumerate(discard_cases):
            before = loom.counters()
            prefix = f"10.60.{k}.0/24"
            exa.send(f"{EBGP} announce route {prefix} next-hop {NH} attribute {attr}")
            r = wait_for(f"{name}: route kept", lambda: loom.rib().get(prefix))
            after = loom.counters()
            assert after["treat_as_withdraw"] == before["treat_as_withdraw"], after
            assert field is None or field not in r, r
            kept = [u for u in r["unknown"] if u["type"] == utype]
            discarded = (after["attributes_discarded"] == before["attributes_discarded"] + 1
                         and not kept)
            if known and not discarded:
                xfails.append(name)
                enc = attrs_of(r["reencoded"]).get(utype)
                print(f"XFAIL (known speaker deviation): {name} -> not discarded, kept as "
                      f"{kept}" + (f"; Loom would propagate it as flags 0x{enc[0]:02x} value "
                                   f"{enc[1].hex()}" if enc else ""), flush=True)
                continue
            assert discarded, (name, r, after)
            if known:
                print(f"XPASS: {name} is now discarded; drop it from the known deviations")
            ok(f"{name} -> attribute discarded, route kept")

        # --- 10. Session resets with the right NOTIFICATION.
        reset_cases = [
            ("unrecognized well-known attribute 77", "[ 0x4d 0x40 0x00 ]", 3, 2),
            ("truncated MP_REACH_NLRI", "[ 0x0e 0x80 0x0002 ]", 3, 9),
            ("MP_REACH IPv6 next hop length 4",
             "[ 0x0e 0x80 0x00020104c61200020020010db8 ]", 3, 9),
            ("truncated MP_UNREACH_NLRI", "[ 0x0f 0x80 0x00 ]", 3, 9),
        ]
        for i, (name, attr, code, subcode) in enumerate(reset_cases, start=1):
            before = loom.counters()
            m = exa.mark()
            exa.send(f"{EBGP} announce route 10.70.0.0/24 next-hop {NH} attribute {attr}")
            notes = wait_for(f"{name}: exabgp receives NOTIFICATION", lambda: [
                e for e in exa.events_since(m, "notification")
                if e.get("neighbor", {}).get("direction") == "receive"])
            got = notes[0]["neighbor"]["notification"]
            assert (got["code"], got["subcode"]) == (code, subcode), (name, got)
            # exabgp reconnects at once (adj-rib-out false: the bad route is gone).
            p = wait_for(f"{name}: re-established", lambda: (lambda p: p["state"] == "Established"
                         and p["counters"]["established_transitions"] ==
                         before["established_transitions"] + 1 and p)(loom.peer()), timeout=15)
            c = p["counters"]
            assert c["notifications_sent"] == {str(code): i}, (name, c)
            assert c["flaps"] == i, (name, c)
            assert "10.70.0.0/24" not in loom.rib(), name
            # exabgp must see the new session up too before the next case's announce: an
            # announce it takes while its side is still coming up is never sent (seen once
            # under a loaded ctest -j2).
            wait_for(f"{name}: exabgp sees the session up again", lambda: [
                e for e in exa.events_since(m, "state")
                if e.get("neighbor", {}).get("state") == "up"], timeout=15)
            ok(f"{name} -> NOTIFICATION {code}/{subcode} (seen by exabgp), session re-established")
        # eBGP without graceful restart: every route of the old session is gone;
        # the iBGP session was untouched.
        assert set(loom.rib()) == set(), loom.rib()
        assert loom.peer("ibgp")["counters"]["flaps"] == 0
        assert "10.30.0.0/24" in loom.rib("ibgp")
        ok("routes of the reset eBGP session flushed; iBGP session untouched")

        # --- 11. Cease from exabgp on the iBGP session.
        exa.send(f"{IBGP} teardown 2")
        p = wait_for("iBGP Cease received", lambda: (lambda p: p["counters"][
            "notifications_received"].get("6") == 1 and p)(loom.peer("ibgp")))
        wait_for("iBGP routes flushed", lambda: loom.rib("ibgp") == {})
        wait_for("iBGP re-established", lambda: loom.peer("ibgp")["state"] == "Established",
                 timeout=15)
        c = loom.counters("ibgp")
        assert c["flaps"] == 1 and c["notifications_sent"] == {}, c
        ok("Cease (6/2) from exabgp: iBGP routes flushed, session re-established")

        # Loom is alive and still takes routes on both sessions.
        exa.send(f"{EBGP} announce route 10.80.0.0/24 next-hop {NH}")
        wait_for("clean route after resets", lambda: "10.80.0.0/24" in loom.rib())
        assert loom.close() == 0, "Loom's speaker did not exit cleanly"
        print(f"PASS ({time.time() - started:.1f} s)"
              + (f"; known deviations: {', '.join(xfails)}" if xfails else ""))
        return 0
    except BaseException:
        print(f"logs in {workdir}", file=sys.stderr)
        raise
    finally:
        if exa:
            exa.close()
        if loom.proc.poll() is None:
            loom.proc.kill()
            loom.proc.wait()


if __name__ == "__main__":
    sys.exit(main())
