#!/usr/bin/python3
"""loomctl as SREs expect it: -o json|yaml|wide|table on a real loomd, YAML equal to the
JSON (parsed by python3-yaml), empty lists printed as empty lists, stray arguments refused,
`version`, `completion bash` (valid bash), `watch events` printing a header and the recent
events before following."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomd_harness import Loomd  # noqa: E402

ARGS = None


class LoomctlCliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Loomd(ARGS.loomd, ARGS.topology)
        cls.ctl = [ARGS.loomctl, "--server", cls.d.grpc_address]

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def run_ctl(self, *args, rc=0):
        out = subprocess.run(self.ctl + list(args), capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, rc, (args, out.stdout, out.stderr))
        return out

    def test_1_empty_lists_and_formats(self):
        j = json.loads(self.run_ctl("-o", "json", "jobs", "list").stdout)
        self.assertEqual(j["jobs"], [])
        y = yaml.safe_load(self.run_ctl("-o", "yaml", "jobs", "list").stdout)
        self.assertEqual(y["jobs"], [])
        self.assertEqual(set(y), set(j))  # every field, in both (revision moves on)
        # A big nested, static answer: YAML and JSON carry exactly the same data.
        tj = json.loads(self.run_ctl("--json", "topology", "show").stdout)
        ty = yaml.safe_load(self.run_ctl("-oyaml", "topology", "show").stdout)
        self.assertGreater(len(json.dumps(tj)), 2000)
        self.assertEqual(ty, tj)
        lj = json.loads(self.run_ctl("--json", "links", "list").stdout)
        ly = yaml.safe_load(self.run_ctl("-oyaml", "links", "list").stdout)
        self.assertGreater(len(lj["links"]), 10)
        self.assertEqual([l["link"] for l in ly["links"]], [l["link"] for l in lj["links"]])
        self.run_ctl("-o", "bogus", "jobs", "list", rc=2)
        self.run_ctl("--json", "-o", "yaml", "jobs", "list", rc=2)

    def test_2_wide_and_register(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write(open(ARGS.job).read())
        self.run_ctl("jobs", "register", f.name)
        os.unlink(f.name)
        table = self.run_ctl("jobs", "list").stdout
        wide = self.run_ctl("-o", "wide", "jobs", "list").stdout
        self.assertNotIn("SPINES", table)
        self.assertIn("SPINES", wide)
        self.assertIn("PREDICTED", wide)
        self.assertEqual(len(table.splitlines()), len(wide.splitlines()))

    def test_3_stray_arguments_refused(self):
        for args in (["jobs", "list", "extra"], ["topology", "show", "x"], ["events", "x"],
                     ["links", "get", "a", "b"], ["version", "x"]):
            out = self.run_ctl(*args, rc=2)
            self.assertIn("unexpected argument", out.stderr)

    def test_4_version_and_completion(self):
        v = self.run_ctl("version").stdout
        self.assertIn("loomctl ", v)
        self.assertIn("reachable", v)
        vj = json.loads(self.run_ctl("-o", "json", "version").stdout)
        self.assertTrue(vj["serverReachable"])
        script = self.run_ctl("completion", "bash").stdout
        self.assertIn("complete -F _loomctl loomctl", script)
        check = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stderr)
        self.run_ctl("completion", "zsh", rc=2)

    def test_5_watch_events_shows_recent_first(self):
        p = subprocess.Popen(self.ctl + ["watch", "events"], stdout=subprocess.PIPE, text=True)
        try:
            first = p.stdout.readline()
            self.assertTrue(first.startswith("# events from revision"), first)
            second = p.stdout.readline()  # a past event, printed before any new one
            self.assertRegex(second, r"^\d+\s")
        finally:
            p.terminate()
            p.wait(timeout=10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for a in ("--loomd", "--loomctl", "--topology", "--job"):
        parser.add_argument(a, required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
