#!/usr/bin/python3
"""Malformed and unusual input: a raw-socket BGP peer against Loom's speaker.

The peer (this script) speaks BGP over a plain TCP socket so it can send what
real daemons refuse to produce. For each case it checks Loom's answer on the
wire (the right NOTIFICATION code/subcode, or none) and Loom's state and
counters through bgp_speaker_tool's `status` command:
- unknown optional transitive attributes are kept (and propagated), unknown
  optional non-transitive ones dropped;
- RFC 7606 treat-as-withdraw (bad ORIGIN, bad AS_PATH, bad attribute length,
  attribute overrunning the section, missing mandatory attribute): the route
  is withdrawn, the session stays Established, treat_as_withdraw counts;
- attribute-discard (malformed AIGP): the route stays without it;
- session resets: bad marker (1/1), bad length (1/2), bad type (1/3), bad
  OPEN version / peer AS / hold time (2/1, 2/2, 2/6), unrecognized well-known
  attribute (3/2), invalid NLRI (3/10), malformed MP_REACH (3/9), withdrawn
  length overrun (3/1), UPDATE before Established (5/x);
- Loom survives all of it and the next clean session establishes.
"""
import argparse
import json
import socket
import struct
import subprocess
import sys
import time

LOOM_AS = 65000
PEER_AS = 65001


def msg(mtype, body):
    return b"\xff" * 16 + struct.pack("!HB", 19 + len(body), mtype) + body


def attr(flags, code, value):
    return struct.pack("!BBB", flags, code, len(value)) + value


def update(withdrawn=b"", attrs=b"", nlri=b""):
    return msg(2, struct.pack("!H", len(withdrawn)) + withdrawn + struct.pack("!H", len(attrs)) +
               attrs + nlri)


def open_msg(asn=PEER_AS, hold=9, version=4, bgp_id=0x0a000063):
    caps = bytes([1, 4, 0, 1, 0, 1, 65, 4]) + struct.pack("!I", asn)
    return msg(1, struct.pack("!BHHIB", version, asn if asn < 65536 else 23456, hold, bgp_id,
                              len(caps) + 2) + bytes([2, len(caps)]) + caps)


ORIGIN = attr(0x40, 1, b"\x00")
AS_PATH = attr(0x40, 2, b"\x02\x01" + struct.pack("!I", PEER_AS))
NEXT_HOP = attr(0x40, 3, bytes([198, 18, 0, 2]))
BASE = ORIGIN + AS_PATH + NEXT_HOP
NLRI = bytes([24, 10, 1, 2])
PREFIX = "10.1.2.0/24"


class Tool:
    def __init__(self, path):
        peer = (f"name=raw,local_as={LOOM_AS},peer_as={PEER_AS},addr=127.0.0.1,passive=1,"
                "hold=9,next_hop=198.18.0.1")
        self.proc = subprocess.Popen([path, "--router-id", "10.0.0.1", "--listen-port", "0",
                                      "--peer", peer], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     bufsize=1)
        self.port = json.loads(self.proc.stdout.readline())["listen_port"]

    def cmd(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def peer(self):
        return self.cmd("status")["peers"][0]

    def close(self):
        self.cmd("quit")
        self.proc.wait(timeout=10)


def wait_for(what, pred, timeout=10.0):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last: {last})")


def read_msg(sock):
    """Returns (type, body) or None on EOF."""
    hdr = b""
    while len(hdr) < 19:
        chunk = sock.recv(19 - len(hdr))
        if not chunk:
            return None
        hdr += chunk
    length, mtype = struct.unpack("!HB", hdr[16:19])
    body = b""
    while len(body) < length - 19:
        chunk = sock.recv(length - 19 - len(body))
        if not chunk:
            return None
        body += chunk
    return mtype, body


def read_notification(sock):
    """Skips KEEPALIVE/UPDATE until a NOTIFICATION; returns (code, subcode)."""
    while True:
        m = read_msg(sock)
        if m is None:
            return None
        if m[0] == 3:
            return m[1][0], m[1][1]


def connect(tool, established=True, peer_open=None):
    deadline = time.time() + 10
    while True:
        # Loom may still be in Idle after the previous reset: wait for Active.
        if tool.peer()["state"] in ("Active", "Idle"):
            break
        if time.time() > deadline:
            raise AssertionError("Loom's session did not return to Active")
        time.sleep(0.05)
    s = socket.create_connection(("127.0.0.1", tool.port), timeout=5)
    s.sendall(peer_open or open_msg())
    if not established:
        return s
    m = read_msg(s)
    assert m and m[0] == 1, f"expected OPEN, got {m}"
    s.sendall(msg(4, b""))
    m = read_msg(s)
    assert m and m[0] == 4, f"expected KEEPALIVE, got {m}"
    wait_for("Established", lambda: tool.peer()["state"] == "Established")
    return s


def rib(tool):
    return {r["prefix"]: r for r in tool.peer()["rib_in"]}


def expect_reset(tool, name, payload, code, subcode, handshake=True, peer_open=None):
    before = tool.peer()["counters"]["notifications_sent"].get(str(code), 0)
    s = connect(tool, established=handshake, peer_open=peer_open)
    if payload is not None:
        s.sendall(payload)
    got = read_notification(s)
    s.close()
    assert got is not None and got[0] == code and (subcode is None or got[1] == subcode), (
        f"{name}: expected NOTIFICATION {code}/{subcode}, got {got}")
    p = wait_for(f"{name}: session down", lambda: (lambda p: p["state"] != "Established" and p)(
        tool.peer()))
    after = p["counters"]["notifications_sent"].get(str(code), 0)
    assert after == before + 1, f"{name}: notifications_sent[{code}] {before} -> {after}"
    print(f"ok: {name} -> NOTIFICATION {got[0]}/{got[1]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    args = ap.parse_args()
    tool = Tool(args.tool)
    try:
        s = connect(tool)
        # Unknown optional transitive (99) kept, unknown optional non-transitive (98) dropped.
        s.sendall(update(attrs=BASE + attr(0xC0, 99, b"\x01\x02") + attr(0x80, 98, b"\x05"),
                         nlri=NLRI))
        r = wait_for("route with unknown attribute", lambda: rib(tool).get(PREFIX))
        assert r["unknown_attrs"] == [99], r
        print("ok: unknown optional transitive kept, non-transitive dropped")

        withdraw_cases = [
            ("bad ORIGIN value", attr(0x40, 1, b"\x07") + AS_PATH + NEXT_HOP),
            ("AS_PATH segment overrun", ORIGIN + attr(0x40, 2, b"\x02\x05\x00\x00") + NEXT_HOP),
            ("AS_PATH bad segment type", ORIGIN + attr(0x40, 2, b"\x07\x01\x00\x00\xfd\xe9") +
             NEXT_HOP),
            ("bad ext-community length", BASE + attr(0xC0, 16, b"\x03\x0b\x00\x00\x00\x00\x01")),
            ("bad MED length", BASE + attr(0x80, 4, b"\x00\x01")),
            ("attribute overruns section", BASE + b"\xc0\x10\x40\x03\x0b"),
            ("missing NEXT_HOP", ORIGIN + AS_PATH),
            ("ORIGIN with wrong flags", attr(0xC0, 1, b"\x00") + AS_PATH + NEXT_HOP),
        ]
        for i, (name, attrs) in enumerate(withdraw_cases, start=1):
            s.sendall(update(attrs=BASE + attr(0xC0, 16, bytes([3, 11, 0, 0, 0, 0, 0, 5])),
                             nlri=NLRI))
            wait_for(f"{name}: route present", lambda: PREFIX in rib(tool))
            s.sendall(update(attrs=attrs, nlri=NLRI))
            wait_for(f"{name}: treat-as-withdraw", lambda: PREFIX not in rib(tool))
            p = tool.peer()
            assert p["state"] == "Established", (name, p)
            assert p["counters"]["treat_as_withdraw"] == i, (name, p["counters"])
            print(f"ok: {name} -> treat-as-withdraw, session stays Established")

        s.sendall(update(attrs=BASE + attr(0x80, 26, b"\x01\x00\x05"), nlri=NLRI))
        r = wait_for("malformed AIGP: route kept", lambda: rib(tool).get(PREFIX))
        assert "aigp" not in r, r
        assert tool.peer()["counters"]["attributes_discarded"] >= 1
        print("ok: malformed AIGP -> attribute discarded, route kept")
        counters = tool.peer()["counters"]
        assert counters["updates_in"] == 2 + 2 * len(withdraw_cases), counters

        # Resets on the same session: first one ends this connection.
        expect_reset_on = s
        expect_reset_on.sendall(b"\x00" * 16 + struct.pack("!HB", 19, 4))
        got = read_notification(expect_reset_on)
        assert got == (1, 1), got
        s.close()
        wait_for("routes dropped after reset", lambda: rib(tool) == {})
        print("ok: bad marker -> NOTIFICATION 1/1, routes dropped (no GR capability)")

        expect_reset(tool, "message length 18", b"\xff" * 16 + struct.pack("!HB", 18, 4), 1, 2)
        expect_reset(tool, "message length 5000", b"\xff" * 16 + struct.pack("!HB", 5000, 2), 1, 2)
        expect_reset(tool, "KEEPALIVE length 20", b"\xff" * 16 + struct.pack("!HB", 20, 4) + b"\0",
                     1, 2)
        expect_reset(tool, "bad message type", msg(9, b""), 1, 3)
        expect_reset(tool, "unrecognized well-known attribute",
                     update(attrs=BASE + attr(0x40, 77, b"\x00"), nlri=NLRI), 3, 2)
        expect_reset(tool, "NLRI prefix length 33", update(attrs=BASE, nlri=bytes([33, 1, 2, 3, 4,
                                                                                   5])), 3, 10)
        expect_reset(tool, "withdrawn length overrun",
                     msg(2, struct.pack("!H", 40) + b"\x00\x00"), 3, 1)
        expect_reset(tool, "truncated MP_REACH",
                     update(attrs=BASE + attr(0x80, 14, b"\x00\x02")), 3, 9)
        expect_reset(tool, "truncated OPEN", None, 1, 2, handshake=False,
                     peer_open=msg(1, b"\x04\xfd\xe9"))
        expect_reset(tool, "OPEN version 3", None, 2, 1, handshake=False,
                     peer_open=open_msg(version=3))
        expect_reset(tool, "OPEN wrong peer AS", None, 2, 2, handshake=False,
                     peer_open=open_msg(asn=65099))
        expect_reset(tool, "OPEN hold time 2", None, 2, 6, handshake=False,
                     peer_open=open_msg(hold=2))
        expect_reset(tool, "OPEN BGP identifier 0", None, 2, 3, handshake=False,
                     peer_open=open_msg(bgp_id=0))
        # UPDATE while OpenSent/OpenConfirm (before our KEEPALIVE).
        expect_reset(tool, "UPDATE before Established", update(attrs=BASE, nlri=NLRI), 5, None,
                     handshake=False)

        # A truncated message followed by EOF: no NOTIFICATION possible, no crash.
        s = connect(tool)
        s.sendall(update(attrs=BASE, nlri=NLRI)[:30])
        s.close()
        wait_for("session down after truncated message + EOF",
                 lambda: tool.peer()["state"] != "Established")
        print("ok: truncated message then EOF -> session down, no crash")

        # Loom is still healthy: a clean session establishes and takes routes.
        s = connect(tool)
        s.sendall(update(attrs=BASE, nlri=NLRI))
        wait_for("clean route", lambda: PREFIX in rib(tool))
        p = tool.peer()
        c = p["counters"]
        assert c["flaps"] == c["established_transitions"] - 1 == 10, c
        assert c["notifications_sent"] == {"1": 6, "2": 4, "3": 4, "5": 1}, c
        s.close()
        print("PASS")
        return 0
    finally:
        try:
            tool.close()
        except Exception:  # noqa: BLE001
            tool.proc.kill()


if __name__ == "__main__":
    sys.exit(main())
