#!/usr/bin/python3
"""loomd programs loom-fabric's platform personalities through Set adapters.

loom-fabric runs the small scenario with leaf0 as SONiC and leaf1 as a strict
OpenConfig target (sim-fabric/personality.h). loomd's inventory gives leaf0
`set: {adapter: sonic, address: <leaf0's personality port>}` and leaf1
`set: {adapter: openconfig, ...}`, with no BGP, and fabric-wide settings
(`fabricSettings`): DLB flowlet, ECN thresholds and the PFC watchdog on
leaf0, ECN thresholds on leaf1, which OpenConfig can express.

Checked:
- `loomctl device` shows both leaves in sync through `gnmi:sonic` and
  `gnmi:openconfig`. For SONiC, this includes the driver's read-back of
  CONFIG_DB.
- leaf0's CONFIG_DB (a gNMI Get from a client built from the public gnmi
  protos) holds the ARS, WRED, QUEUE and PFC_WD rows.
- The emulated switch runs them: the shared target's OPERATIONAL view.
- A broken payload from that independent client (a PFC_WD action outside
  the enum) is refused with INVALID_ARGUMENT naming the data path, and leaves
  CONFIG_DB unchanged.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "pygnmi"))
import grpc  # noqa: E402
import gnmi_stubs  # noqa: E402
from live_fabric_test import wait_file  # noqa: E402
from loomd_harness import start_process, stop_processes  # noqa: E402

ARGS = None


def path(pb, text):
    p = pb.Path()
    for name in [x for x in text.split("/") if x]:
        p.elem.add(name=name)
    return p


class PersonalitySetTest(unittest.TestCase):
    def test_loomd_programs_sonic_and_openconfig_personalities(self):
        pb, pb_grpc = gnmi_stubs.load()
        d = tempfile.mkdtemp(prefix="loom-pset-")
        procs = []
        try:
            fabric = start_process(
                [ARGS.fabric, ARGS.scenario, "--gnmi-listen", "127.0.0.1:0",
                 "--personality", "leaf0=sonic", "--personality", "leaf1=openconfig",
                 "--ready-file", os.path.join(d, "fabric.json")],
                os.path.join(d, "fabric.log"))
            procs.append(fabric)
            ready = wait_file(os.path.join(d, "fabric.json"), fabric)
            ports = {dev: v["port"] for dev, v in ready["gnmi_devices"].items()}
            cfg = {
                "topologyPath": ARGS.topology,
                "fabricSettings": [
                    {"role": "DEVICE_ROLE_LEAF",
                     "thresholds": [{"priority": 3, "ecnKminBytes": "40000",
                                     "ecnKmaxBytes": "160000", "ecnPmaxPercent": 15}]},
                    {"namePattern": "leaf0",
                     "dlb": {"mode": "DLB_MODE_FLOWLET", "inactivityIntervalNs": "300000"},
                     "pfcWatchdog": {"action": "PFC_WATCHDOG_ACTION_FORWARD",
                                     "detectionTimeMs": 300, "restorationTimeMs": 500}}],
                "devices": [
                    {"id": "leaf0", "set": {"adapter": "sonic",
                                            "address": "127.0.0.1:%d" % ports["leaf0"]}},
                    {"id": "leaf1", "set": {"adapter": "openconfig",
                                            "address": "127.0.0.1:%d" % ports["leaf1"]}}]}
            with open(os.path.join(d, "loomd.cfg.json"), "w") as f:
                json.dump(cfg, f)
            loomd = start_process([ARGS.loomd, "--config", os.path.join(d, "loomd.cfg.json"),
                                   "--db", os.path.join(d, "l.db"),
                                   "--grpc-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                                   "--ready-file", os.path.join(d, "loomd.json")],
                                  os.path.join(d, "loomd.log"))
            procs.append(loomd)
            port = wait_file(os.path.join(d, "loomd.json"), loomd)["grpc_port"]
            ctl = [ARGS.loomctl, "--server", "127.0.0.1:%d" % port]

            def device(name):
                out = subprocess.run(ctl + ["--json", "device", name], capture_output=True,
                                     text=True, timeout=20)
                self.assertEqual(out.returncode, 0, out.stderr)
                return json.loads(out.stdout)

            states, deadline = {}, time.monotonic() + 30
            while time.monotonic() < deadline:
                states = {n: device(n) for n in ("leaf0", "leaf1")}
                if all(s["sync"].get("inSync") and s["applied"].get("thresholds")
                       for s in states.values()):
                    break
                time.sleep(0.2)
            for name, adapter in (("leaf0", "gnmi:sonic"), ("leaf1", "gnmi:openconfig")):
                s = states[name]
                self.assertTrue(s["sync"].get("inSync"), s)
                self.assertEqual(s["sync"]["driver"], adapter, s)
                self.assertFalse(s["sync"].get("failures"), s)
            a0 = states["leaf0"]["applied"]
            self.assertEqual(a0["dlb"]["mode"], "DLB_MODE_FLOWLET", a0)
            self.assertEqual(a0["pfcWatchdog"]["action"], "PFC_WATCHDOG_ACTION_FORWARD", a0)
            print(subprocess.run(ctl + ["device", "leaf0"], capture_output=True, text=True).stdout)

            # leaf0's CONFIG_DB, read with the public gnmi protos.
            sonic = pb_grpc.gNMIStub(grpc.insecure_channel("127.0.0.1:%d" % ports["leaf0"]))

            def config_db():
                req = pb.GetRequest(prefix=pb.Path(origin="sonic-db"), encoding=pb.JSON_IETF)
                for t in ("ARS_OBJECT", "WRED_PROFILE", "QUEUE", "PFC_WD"):
                    req.path.append(path(pb, "/CONFIG_DB/localhost/" + t))
                resp = sonic.Get(req, timeout=10)
                return {n.update[0].path.elem[2].name: json.loads(n.update[0].val.json_ietf_val)
                        for n in resp.notification}

            db = config_db()
            self.assertEqual(db["ARS_OBJECT"]["loom"],
                             {"assign_mode": "per_flowlet_quality", "flowlet_idle_time": "300"})
            wred = list(db["WRED_PROFILE"].values())[0]
            self.assertEqual(wred["green_min_threshold"], "40000")
            self.assertEqual(wred["green_drop_probability"], "15")
            self.assertIn("Ethernet0|3", db["QUEUE"])
            self.assertEqual(db["PFC_WD"]["Ethernet0"]["action"], "forward")

            # What the emulated switch runs (the shared target's OPERATIONAL view).
            shared = pb_grpc.gNMIStub(grpc.insecure_channel("127.0.0.1:%d" % ready["gnmi_port"]))
            op = shared.Get(pb.GetRequest(prefix=pb.Path(origin="loom", target="leaf0"),
                                          path=[path(pb, "/dlb"), path(pb, "/qos/thresholds")],
                                          type=pb.GetRequest.OPERATIONAL, encoding=pb.JSON_IETF),
                            timeout=10)
            text = " ".join(u.val.json_ietf_val.decode() for n in op.notification
                            for u in n.update)
            self.assertIn("flowlet", text)
            self.assertIn("40000", text)

            # A broken payload from this client: refused, nothing changes.
            bad = pb.SetRequest(prefix=pb.Path(origin="sonic-db"))
            u = bad.update.add()
            u.path.CopyFrom(path(pb, "/CONFIG_DB/localhost/PFC_WD/Ethernet0"))
            u.val.json_ietf_val = json.dumps({"action": "explode"}).encode()
            with self.assertRaises(grpc.RpcError) as err:
                sonic.Set(bad, timeout=10)
            self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("PFC_WD_LIST[ifname='Ethernet0']/action", err.exception.details())
            self.assertEqual(config_db(), db)
            self.assertTrue(device("leaf0")["sync"].get("inSync"))
        finally:
            stop_processes(self, procs)
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for a in ("--loomd", "--loomctl", "--fabric", "--scenario", "--topology"):
        parser.add_argument(a, required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
