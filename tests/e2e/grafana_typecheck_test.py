#!/usr/bin/python3
"""The Grafana dashboards' TypeScript source type-checks (tsc --noEmit, strict,
against @grafana/schema 10.4's Dashboard type and the panels' Options types), and
the committed JSON in deploy/grafana/dashboards is exactly what it generates."""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ARGS = None


class GrafanaTypecheckTest(unittest.TestCase):
    def setUp(self):
        self.dir = ARGS.grafana_dir
        self.tsc = os.path.join(self.dir, "node_modules", "typescript", "bin", "tsc")
        self.assertTrue(os.path.exists(self.tsc),
                        "%s/node_modules is missing: run scripts/install-deps.sh --test "
                        "(npm ci --prefix deploy/grafana)" % self.dir)

    def run_ok(self, argv, **kw):
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120, **kw)
        self.assertEqual(r.returncode, 0, "%s:\n%s%s" % (" ".join(argv), r.stdout, r.stderr))
        return r

    def test_tsc_strict_no_emit(self):
        self.run_ok(["node", self.tsc, "--noEmit", "-p", self.dir])

    def test_committed_json_is_what_the_source_generates(self):
        out = tempfile.mkdtemp(prefix="loom-grafana-build-")
        try:
            self.run_ok(["node", self.tsc, "-p", self.dir, "--outDir", out])
            env = dict(os.environ, NODE_PATH=os.path.join(self.dir, "node_modules"))
            self.run_ok(["node", os.path.join(out, "generate.js"), "--check", "--out",
                         os.path.join(self.dir, "dashboards")], env=env)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_dashboards_are_grafana_10_4_and_laid_out(self):
        files = sorted(glob.glob(os.path.join(self.dir, "dashboards", "*.json")))
        self.assertEqual(len(files), 3)
        uids = set()
        for path in files:
            with open(path) as f:
                d = json.load(f)
            name = os.path.basename(path)
            self.assertEqual(d["schemaVersion"], 39, name)
            self.assertNotIn(d["uid"], uids)
            uids.add(d["uid"])
            ids = [p["id"] for p in d["panels"]]
            self.assertEqual(len(ids), len(set(ids)), name + ": panel ids repeat")
            for p in d["panels"]:
                g = p["gridPos"]
                self.assertLessEqual(g["x"] + g["w"], 24, "%s: %s" % (name, p.get("title")))
                if p["type"] != "row":
                    self.assertTrue(p.get("title") and p.get("description"), name)
                    self.assertTrue(p.get("targets"), "%s: %s has no query" % (name, p["title"]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--grafana-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
