#!/usr/bin/env python3
"""Checks the dependency direction of DESIGN.md, on includes and on links.

1. Includes: every #include "x/..." in a module folder must name a folder that
   module may depend on. controller/loomd/ is the bootstrap and may include
   anything (it wires the emulator in); nothing else in controller/ may.
2. Links: the loom_controller library, and everything it links, must not link
   loom_simfabric (read from CMake's --graphviz output).
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# folder -> include prefixes it may use (its own folder is always allowed).
# "loom/v1/" and "gnmi/" are generated protobuf headers (api protos, telemetry wire types).
GENERATED = ["loom/v1/", "gnmi/", "sim-fabric/proto/"]
ALLOWED = {
    "common/": [],
    "api/topology/": ["common/"],
    "api/proto_util/": ["common/"],
    "api/loomctl/": ["common/", "api/"],
    "api/services/": ["common/", "api/", "controller/", "policy/", "southbound/render/",
                      "southbound/gnmi/set_adapter.h"],
    "policy/": ["common/", "api/topology/", "api/proto_util/"],
    "telemetry/": ["common/", "api/topology/", "api/proto_util/"],
    "southbound/": ["common/", "api/topology/", "api/proto_util/"],
    "controller/loomd/": None,  # bootstrap: anything
    "controller/": ["common/", "api/topology/", "api/proto_util/", "policy/", "telemetry/",
                    "southbound/"],
    # The emulator speaks the same wire protocols as real devices: it may use
    # the telemetry wire types (sink, path, subscription lists) and the
    # southbound wire implementations (driver interface, BGP, gNMI config
    # codec) — never the controller or policy.
    "sim-fabric/": ["common/", "api/topology/", "api/proto_util/", "telemetry/sink.h",
                    "telemetry/path.h",
                    "telemetry/profile.h",
                    "telemetry/collector.h", "southbound/wire/", "southbound/bgp/",
                    "southbound/gnmi/gnmi_config.h"],
}
PROJECT_DIRS = ("common/", "api/", "controller/", "policy/", "telemetry/", "southbound/",
                "sim-fabric/", "tests/")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def module_of(path):
    best = None
    for folder in ALLOWED:
        if path.startswith(folder) and (best is None or len(folder) > len(best)):
            best = folder
    return best


def check_includes():
    errors = []
    files = subprocess.check_output(["git", "ls-files", "*.cc", "*.h"], cwd=ROOT, text=True).split()
    for f in files:
        mod = module_of(f)
        if mod is None or ALLOWED[mod] is None:
            continue
        own = mod if mod != "controller/" else "controller/"
        with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                if not inc.startswith(PROJECT_DIRS) or any(inc.startswith(g) for g in GENERATED):
                    continue
                if inc.startswith(own) and not inc.startswith("controller/loomd/"):
                    continue
                if any(inc.startswith(a) for a in ALLOWED[mod]):
                    continue
                errors.append("%s:%d: %s may not include \"%s\" (allowed: %s)" % (
                    f, n, mod, inc, ", ".join([own] + ALLOWED[mod])))
    return errors, len(files)


def check_links(build_dir):
    out = os.path.join(build_dir, "graphviz")
    os.makedirs(out, exist_ok=True)
    subprocess.check_call(["cmake", "--graphviz=" + os.path.join(out, "deps.dot"), "."],
                          cwd=build_dir, stdout=subprocess.DEVNULL)
    dot = os.path.join(out, "deps.dot.loom_controller")
    if not os.path.exists(dot):
        return ["cmake --graphviz produced no graph for loom_controller"]
    with open(dot) as fh:
        text = fh.read()
    if "loom_simfabric" in text:
        return ["loom_controller links loom_simfabric (see %s)" % dot]
    return []


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    errors, n = check_includes()
    errors += check_links(os.path.abspath(args.build_dir))
    if errors:
        print("check-deps: dependency direction violated:", file=sys.stderr)
        for e in errors:
            print("  " + e, file=sys.stderr)
        return 1
    print("check-deps: %d files follow DESIGN.md's dependency direction; "
          "loom_controller does not link sim-fabric" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
