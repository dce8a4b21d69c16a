#!/usr/bin/python3
"""deploy/systemd units: `systemd-analyze verify` clean (ExecStart pointed at the
built binaries) and loomd.service's hardening rated by `systemd-analyze security
--offline` at an exposure of 2.0 or lower ("OK"). Skipped (77) without systemd-analyze."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--units", required=True)
ap.add_argument("--loomd", required=True)
ap.add_argument("--nic-agent", required=True)
args = ap.parse_args()
if shutil.which("systemd-analyze") is None:
    print("systemd-analyze not found: skipped")
    sys.exit(77)
d = tempfile.mkdtemp(prefix="loom-units-")
failed = []
try:
    for name, binary in (("loomd.service", args.loomd),
                         ("loom-nic-agent.service", args.nic_agent)):
        text = open(os.path.join(args.units, name)).read()
        base = os.path.basename(binary)
        text = text.replace("/usr/local/bin/" + base, os.path.abspath(binary))
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(text)
        out = subprocess.run(["systemd-analyze", "verify", path], capture_output=True,
                             text=True)
        print("$ systemd-analyze verify %s\n%s%s" % (name, out.stdout, out.stderr))
        if out.returncode != 0 or (out.stdout + out.stderr).strip():
            failed.append("%s: verify: %s" % (name, (out.stdout + out.stderr).strip()))
    sec = subprocess.run(["systemd-analyze", "security", "--offline=yes",
                          os.path.join(d, "loomd.service")], capture_output=True, text=True)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", sec.stdout + sec.stderr)
    print(m.group(0) if m else sec.stdout[-500:] + sec.stderr[-500:])
    if not m or float(m.group(1)) > 2.0:
        failed.append("loomd.service: exposure %s (want <= 2.0)" % (m.group(1) if m else "?"))
finally:
    shutil.rmtree(d, ignore_errors=True)
if failed:
    print("FAIL:\n" + "\n".join(failed))
    sys.exit(1)
print("OK")
