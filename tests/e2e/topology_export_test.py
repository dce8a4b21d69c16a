#!/usr/bin/python3
"""`loomctl topology export` against a real loomd, and its Slurm output loaded by Debian's
real slurmctld (topology/tree plugin): every host of the topology file appears under exactly
one bottom-level switch — on the rail-optimized fabric one per rail group (the hosts whose
NICs share the same rail leaves), never under several leaves — and the switch tree has one
top. Kueue and Volcano output parsed as YAML and checked the same way. With --health,
draining a leaf's uplinks and a NIC link marks exactly the hosts behind them. Expected
groupings are computed here from the topology files, not taken from Loom."""
import argparse
import json
import os
import re
import subprocess
import sys
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomd_harness import Loomd  # noqa: E402
from slurm_harness import Slurm  # noqa: E402

ARGS = None


def expected_groups(topology_file):
    """Host groups by the set of leaves their NICs attach to, from the file."""
    with open(topology_file) as f:
        t = json.load(f)
    role = {d["id"]: d.get("role") for d in t["devices"]}
    host_of = {d["id"]: d.get("host", "") for d in t["devices"]}
    hosts = sorted(d["id"] for d in t["devices"] if d.get("role") == "DEVICE_ROLE_HOST")
    leaves = {h: set() for h in hosts}
    for l in t["links"]:
        for a, b in ((l["a"]["device"], l["b"]["device"]), (l["b"]["device"], l["a"]["device"])):
            if role.get(a) == "DEVICE_ROLE_NIC" and role.get(b) == "DEVICE_ROLE_LEAF":
                leaves[host_of[a]].add(b)
    groups = {}
    for h in hosts:
        groups.setdefault(frozenset(leaves[h]), set()).add(h)
    return hosts, sorted(groups.values(), key=sorted)


def expand(hostlist, env):
    out = subprocess.run(["scontrol", "show", "hostnames", hostlist], env=env,
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


class TopologyExportTest(unittest.TestCase):
    def export(self, loomd, fmt, *extra):
        out = subprocess.run([ARGS.loomctl, "--server", loomd.grpc_address, "topology", "export",
                              "--format", fmt] + list(extra),
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout

    def check_slurm(self, topology_file):
        hosts, groups = expected_groups(topology_file)
        loomd = Loomd(ARGS.loomd, topology_file)
        try:
            conf = self.export(loomd, "slurm")
        finally:
            loomd.stop()
        slurm = Slurm(hosts, topology_conf=conf)
        try:
            shown = slurm.run(["scontrol", "show", "topology"]).stdout
            print(shown)
            bottom, top = [], []
            for line in shown.splitlines():
                f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
                if f.get("Level") == "0":
                    bottom.append(expand(f["Nodes"], slurm.env))
                elif "Switches" in f:
                    top.append(f)
            # Every host under exactly one bottom switch, grouped as the fabric is.
            seen = [h for b in bottom for h in b]
            self.assertEqual(sorted(seen), hosts)
            self.assertEqual(sorted(bottom, key=sorted), groups)
            # One switch reaches every node.
            self.assertTrue(any(expand(f["Nodes"], slurm.env) == set(hosts) for f in top), top)
            log = slurm.read_log()
            self.assertNotRegex(log, r"(?i)error:.*(topolog|switch)", log[-3000:])
        finally:
            slurm.stop()
        return groups

    def test_slurm_loads_the_clos(self):
        groups = self.check_slurm(os.path.join(ARGS.examples, "topology-small.json"))
        self.assertEqual(len(groups), 2)  # two leaves, two hosts each

    def test_slurm_loads_the_rail_fabric_one_entry_per_rail_group(self):
        groups = self.check_slurm(os.path.join(ARGS.examples, "topology-rail-64.json"))
        self.assertEqual(len(groups), 2)  # two stripes of 4 hosts, 8 rail leaves each

    def test_kueue_volcano_and_health(self):
        topo = os.path.join(ARGS.examples, "topology-small.json")
        hosts, groups = expected_groups(topo)
        loomd = Loomd(ARGS.loomd, topo)
        try:
            # Kueue: a Topology whose levels end at the hostname; one Node per host with
            # the label of its group (hosts of one group share it, groups differ).
            docs = list(yaml.safe_load_all(self.export(loomd, "kueue")))
            self.assertEqual(docs[0]["kind"], "Topology")
            levels = [l["nodeLabel"] for l in docs[0]["spec"]["levels"]]
            self.assertEqual(levels[-1], "kubernetes.io/hostname")
            nodes = {d["metadata"]["name"]: d["metadata"]["labels"] for d in docs[1:]}
            self.assertEqual(sorted(nodes), hosts)
            label = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")
            for labels in nodes.values():
                for k in levels[:-1]:
                    self.assertRegex(labels[k], label)
                self.assertEqual(labels["loom.io/fabric-health"], "ok")
            by_label = {}
            for h, labels in nodes.items():
                by_label.setdefault(labels["loom.io/leaf-group"], set()).add(h)
            self.assertEqual(sorted(by_label.values(), key=sorted), groups)
            # Volcano: tier-1 HyperNodes hold each host once; the top one holds them all.
            docs = [d for d in yaml.safe_load_all(self.export(loomd, "volcano")) if d]
            tier1 = [d for d in docs if d["spec"]["tier"] == 1]
            members = sorted(sorted(m["selector"]["exactMatch"]["name"]
                                    for m in d["spec"]["members"]) for d in tier1)
            self.assertEqual(members, [sorted(g) for g in groups])
            top = max(docs, key=lambda d: d["spec"]["tier"])
            self.assertEqual(sorted(m["selector"]["exactMatch"]["name"]
                                    for m in top["spec"]["members"]),
                             sorted(d["metadata"]["name"] for d in tier1))
            # Health: leaf0 loses both uplinks (drained), host003's first NIC link too.
            with open(topo) as f:
                t = json.load(f)
            leaf0_up = [l["id"] for l in t["links"]
                        if {l["a"]["device"], l["b"]["device"]} & {"leaf0"}
                        and {l["a"]["device"], l["b"]["device"]} & {"spine0", "spine1"}]
            nic = [l["id"] for l in t["links"] if l["a"]["device"] == "host003-nic0"
                   or l["b"]["device"] == "host003-nic0"]
            self.assertEqual(len(leaf0_up), 2)
            for link in leaf0_up + nic:
                subprocess.run([ARGS.loomctl, "--server", loomd.grpc_address, "links", "drain",
                                link, "--reason", "topology export test"], check=True,
                               capture_output=True, timeout=30)
            docs = list(yaml.safe_load_all(self.export(loomd, "kueue", "--health")))
            health = {d["metadata"]["name"]: d["metadata"]["labels"]["loom.io/fabric-health"]
                      for d in docs[1:]}
            leaf0_hosts = next(sorted(g) for g in groups if "host000" in g)
            expected = {h: ("degraded" if h in leaf0_hosts or h == "host003" else "ok")
                        for h in hosts}
            self.assertEqual(health, expected)
            reasons = {d["metadata"]["name"]: d["metadata"].get("annotations", {})
                       .get("loom.io/fabric-health-reason", "") for d in docs[1:]}
            self.assertIn("leaf0 lost 2 of 2 uplinks", reasons["host000"])
            self.assertIn(nic[0], reasons["host003"])
            slurm = self.export(loomd, "slurm", "--health")
            self.assertIn("# degraded: host003: NIC link %s is drained" % nic[0], slurm)
            bad = subprocess.run([ARGS.loomctl, "--server", loomd.grpc_address, "topology",
                                  "export", "--format", "dot"], capture_output=True, text=True)
            self.assertEqual(bad.returncode, 2)
            self.assertIn("not slurm, kueue or volcano", bad.stderr)
        finally:
            loomd.stop()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--loomd", required=True)
    p.add_argument("--loomctl", required=True)
    p.add_argument("--examples", required=True)
    ARGS, rest = p.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
