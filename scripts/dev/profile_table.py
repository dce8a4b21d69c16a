#!/usr/bin/env python3
"""Prints, per shipped telemetry profile, which signal is mapped from where and
with what mark (Markdown). docs/real-fabric.md embeds its output between the
PROFILE-TABLE markers; `--check FILE` fails when that copy is out of date."""
import glob
import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def table():
    out = []
    for f in sorted(glob.glob(os.path.join(ROOT, "telemetry", "profiles", "*.json"))):
        p = json.load(open(f))
        out.append("### `%s`\n" % p["name"])
        out.append(p.get("description", "") + "\n")
        enc = ", ".join(p.get("encodings", [])) or "PROTO"
        out.append("Encodings (preference): %s. Minimum SAMPLE interval: %s.\n" %
                   (enc, ("%d ms" % p["minSampleIntervalMs"]) if p.get("minSampleIntervalMs") else "none"))
        out.append("| signal | mark | mode | target / path | refresh | source |")
        out.append("|---|---|---|---|---|---|")
        for s in p["signals"]:
            path = (s["origin"] + ":" if s.get("origin") else "") + s["path"]
            if s.get("target"):
                path = s["target"] + " " + path
            out.append("| %s | %s | %s | `%s` | %s | %s |" % (
                s["signal"], s["mark"], s["mode"], path,
                ("%d ms" % s["refreshIntervalMs"]) if s.get("refreshIntervalMs") else "-",
                s["source"].replace("|", "\\|")))
        for u in p.get("unserved", []):
            out.append("| %s | unavailable | - | - | - | %s |" % (u["signal"], u["reason"].replace("|", "\\|")))
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    t = table()
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        text = open(sys.argv[2]).read()
        start, end = "<!-- PROFILE-TABLE -->\n", "<!-- /PROFILE-TABLE -->"
        body = text.split(start, 1)[1].split(end, 1)[0]
        if body.strip() != t.strip():
            print("%s: the profile table is out of date; run scripts/dev/profile_table.py" % sys.argv[2])
            sys.exit(1)
        print("profile table up to date")
        sys.exit(0)
    print(t)
