#!/usr/bin/python3
"""Writes the seed corpus for the BGP decoder fuzzer (committed output)."""
import os
import struct
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def msg(mtype, body):
    return b"\xff" * 16 + struct.pack("!HB", 19 + len(body), mtype) + body


def attr(flags, code, value):
    if len(value) > 255:
        return struct.pack("!BBH", flags | 0x10, code, len(value)) + value
    return struct.pack("!BBB", flags, code, len(value)) + value


def update(withdrawn=b"", attrs=b"", nlri=b""):
    return msg(2, struct.pack("!H", len(withdrawn)) + withdrawn +
               struct.pack("!H", len(attrs)) + attrs + nlri)


BASE = (attr(0x40, 1, b"\x00") + attr(0x40, 2, b"\x02\x01" + struct.pack("!I", 65001)) +
        attr(0x40, 3, bytes([198, 18, 0, 1])))
NLRI = bytes([24, 10, 1, 2])
COLOR = attr(0xC0, 16, bytes([3, 11, 0, 0, 0, 0, 0, 42]) + bytes([0x40, 4, 0xfd, 0xe8, 0x4e, 0x6e, 0x6b, 0x28]))
AIGP = attr(0x80, 26, bytes([1, 0, 11]) + struct.pack("!Q", 1000))
LARGE = attr(0xC0, 32, struct.pack("!III", 65000, 1, 3))
NHC = attr(0xC0, 39, struct.pack("!HB", 1, 4) + bytes([198, 18, 0, 1]) +
           struct.pack("!HHIII", 2, 12, 0x0a000001, 0x0a000002, 0x0a000003))
MP6 = attr(0x80, 14, struct.pack("!HBB", 2, 1, 16) + b"\x20\x01" + b"\x00" * 14 + b"\x00" +
           bytes([48, 0x20, 0x01, 0x0d, 0xb8, 0, 7]))
CAPS = (bytes([1, 4, 0, 1, 0, 1, 1, 4, 0, 2, 0, 1, 2, 0, 64, 6, 0x80, 120, 0, 1, 1, 0x80,
               65, 4]) + struct.pack("!I", 4200000001))
OPEN = msg(1, struct.pack("!BHHIB", 4, 23456, 90, 0x0a000001, len(CAPS) + 2) +
           bytes([2, len(CAPS)]) + CAPS)

SEEDS = {
    "open": OPEN,
    "keepalive": msg(4, b""),
    "notification": msg(3, bytes([6, 2])),
    "route_refresh": msg(5, bytes([0, 1, 0, 1])),
    "update_basic": update(attrs=BASE, nlri=NLRI),
    "update_dpf": update(attrs=BASE + COLOR + AIGP + LARGE + NHC, nlri=NLRI),
    "update_ipv6": update(attrs=BASE + MP6),
    "update_withdraw": update(withdrawn=NLRI),
    "eor_ipv4": update(),
    "eor_ipv6": update(attrs=attr(0x80, 15, bytes([0, 2, 1]))),
    "update_unknown_transitive": update(attrs=BASE + attr(0xC0, 99, b"\x01\x02"), nlri=NLRI),
    "update_bad_origin": update(attrs=attr(0x40, 1, b"\x07") + BASE[4:], nlri=NLRI),
    "update_bad_aspath": update(attrs=attr(0x40, 1, b"\x00") + attr(0x40, 2, b"\x02\x05\x00") +
                                attr(0x40, 3, bytes([198, 18, 0, 1])), nlri=NLRI),
    "update_attr_overrun": update(attrs=BASE + b"\xc0\x10\xff\x00", nlri=NLRI),
    "update_bad_nlri": update(attrs=BASE, nlri=bytes([40, 1, 2, 3, 4, 5])),
    "update_extended_len": update(attrs=BASE + attr(0xC0, 16, bytes([3, 11, 0, 0, 0, 0, 0, 1]) * 40),
                                  nlri=NLRI),
    "bad_marker": b"\x00" * 16 + struct.pack("!HB", 19, 4),
    "truncated": update(attrs=BASE, nlri=NLRI)[:-2],
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(SEEDS)} seeds to {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
