"""loom-slurm-agent: turns faults Loom cannot remediate in the fabric into Slurm actions.

Loom emits a FAULT_BLAST_RADIUS event when a NIC port goes down, a leaf loses every
uplink or a storming NIC is quarantined, naming the hosts ("nodes") and jobs behind it,
and another when the fault clears. This agent follows those events through the Python
client (resuming where it stopped: its position and the faults it acted on are kept in a
state file) and, with `fault_action: "drain"`:

- drains the fault's nodes: `scontrol update nodename=... state=drain reason="loom: ..."`,
  leaving alone a node already drained or down for another reason (an admin's, a health
  check's);
- once the fault has cleared and stayed clear for `resume_after_s`, resumes each node that
  no other active fault covers — only if its drain reason is still Loom's own ("loom: ..."):
  a node an admin re-drained meanwhile stays drained.

With `fault_action: "report"` it only logs what it would do. It reads the hooks'
configuration file (docs/slurm.md): `loom`, `node_hosts`, `slurm_conf`, `scontrol`,
`log_file`, and `fault_action`, `resume_after_s`, `agent_state`.

    loom-slurm-agent [--config FILE] [--once]
"""
import argparse
import json
import os
import queue
import sys
import threading
import time

from loom_client.slurm import HookError, Log, _scontrol, load_config

REASON_PREFIX = "loom: "


class Agent:
    def __init__(self, cfg, log=None):
        self.cfg = cfg
        self.log = log or Log(cfg, "agent", None)
        self.path = cfg["agent_state"]
        self.state = {"revision": 0, "active": {}, "cleared": {}}
        if self.path and os.path.exists(self.path):
            try:
                with open(self.path) as f:
                    self.state.update(json.load(f))
            except (OSError, ValueError) as e:
                raise HookError("agent_state %s: unreadable: %s" % (self.path, e)) from None
        hosts = cfg["node_hosts"]
        self.node_of = {host: node for node, host in hosts.items()}

    def save(self):
        if not self.path:
            return
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.state, f)
        os.replace(tmp, self.path)

    def nodes(self, hosts):
        return sorted(self.node_of.get(h, h) for h in hosts if h)

    def node_status(self, node):
        """(state, reason) as sinfo reports them; (None, None) for a node Slurm lacks."""
        env = dict(os.environ)
        if self.cfg["slurm_conf"]:
            env["SLURM_CONF"] = self.cfg["slurm_conf"]
        import subprocess
        sinfo = os.path.join(os.path.dirname(self.cfg["scontrol"]), "sinfo") \
            if os.sep in self.cfg["scontrol"] else "sinfo"
        r = subprocess.run([sinfo, "-h", "-N", "-n", node, "-o", "%T|%E"], env=env,
                           capture_output=True, text=True, timeout=30)
        line = r.stdout.strip().splitlines()[0] if r.stdout.strip() else ""
        if r.returncode != 0 or "|" not in line:
            return None, None
        state, reason = line.split("|", 1)
        return state.lower(), ("" if reason == "none" else reason)

    def handle(self, ev):
        attrs = dict(ev.attributes)
        subject = ev.subject
        nodes = self.nodes(attrs.get("nodes", "").split(","))
        if attrs.get("state") == "active":
            self.state["cleared"].pop(subject, None)
            self.state["active"][subject] = nodes
            self.drain(subject, nodes, ev.cause, attrs.get("jobs", ""))
        elif attrs.get("state") == "cleared":
            was = self.state["active"].pop(subject, nodes)
            self.state["cleared"][subject] = {"nodes": was, "at": time.time()}
            self.log("info", "fault %s cleared (event %d): nodes %s resume after %ss clear" %
                     (subject, ev.revision, ",".join(was) or "none",
                      self.cfg["resume_after_s"]))
        self.state["revision"] = ev.revision
        self.save()

    def drain(self, subject, nodes, cause, jobs):
        reason = (REASON_PREFIX + cause)[:200]
        for node in nodes:
            state, current = self.node_status(node)
            if state is None:
                self.log("warning", "fault %s: node %s is not a Slurm node (map it in "
                         "node_hosts)" % (subject, node))
                continue
            if ("drain" in state or "down" in state) and not current.startswith(REASON_PREFIX):
                self.log("info", "fault %s: node %s is already %s (%s): left as it is" %
                         (subject, node, state, current or "no reason"))
                continue
            if self.cfg["fault_action"] != "drain":
                self.log("info", "fault %s: would drain %s (jobs: %s)" %
                         (subject, node, jobs or "none"))
                continue
            try:
                _scontrol(self.cfg, "update", "nodename=" + node, "state=drain",
                          "reason=" + reason)
                self.log("info", "fault %s: drained %s (jobs: %s): %s" %
                         (subject, node, jobs or "none", reason))
            except HookError as e:
                self.log("error", "fault %s: could not drain %s: %s" % (subject, node, e))

    def resume_due(self, now=None):
        now = time.time() if now is None else now
        changed = False
        for subject, c in list(self.state["cleared"].items()):
            if now - c["at"] < float(self.cfg["resume_after_s"]):
                continue
            del self.state["cleared"][subject]
            changed = True
            still = {n for nodes in self.state["active"].values() for n in nodes}
            for node in c["nodes"]:
                if node in still:
                    self.log("info", "node %s stays drained: another fault covers it" % node)
                    continue
                state, reason = self.node_status(node)
                if state is None or "drain" not in state:
                    continue
                if not reason.startswith(REASON_PREFIX):
                    self.log("info", "node %s stays drained: its reason is not Loom's (%s)" %
                             (node, reason))
                    continue
                if self.cfg["fault_action"] != "drain":
                    self.log("info", "would resume %s" % node)
                    continue
                try:
                    _scontrol(self.cfg, "update", "nodename=" + node, "state=resume")
                    self.log("info", "resumed %s: fault %s stayed clear for %ss" %
                             (node, subject, self.cfg["resume_after_s"]))
                except HookError as e:
                    self.log("error", "could not resume %s: %s" % (node, e))
        if changed:
            self.save()

    def run(self, stop=None, once=False):
        """Follows Loom's events until `stop` (a threading.Event) is set."""
        from loom.v1 import event_pb2
        from loom_client.client import Client, LoomError
        stop = stop or threading.Event()
        events = queue.Queue()
        loom = Client(self.cfg["loom"], timeout=float(self.cfg["timeout_s"]), retries=1000000)

        def follow():
            try:
                start = self.state["revision"] + 1
                for ev in loom.watch_events(start_revision=start, types=[
                        event_pb2.EVENT_TYPE_FAULT_BLAST_RADIUS], replay_only=once):
                    events.put(ev)
                    if stop.is_set():
                        return
            except LoomError as e:
                events.put(e)
            events.put(None)
        t = threading.Thread(target=follow, daemon=True)
        t.start()
        self.log("info", "following Loom at %s from revision %d" %
                 (self.cfg["loom"], self.state["revision"] + 1))
        try:
            while not stop.is_set():
                try:
                    item = events.get(timeout=0.5)
                except queue.Empty:
                    item = False
                if item is None:
                    break
                if isinstance(item, Exception):
                    self.log("error", "watching Loom's events failed: %s" % item)
                    return 1
                if item is not False:
                    self.handle(item)
                self.resume_due()
        finally:
            loom.close()
        return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="loom-slurm-agent", description=(
        "Drains Slurm nodes behind faults Loom cannot remediate in the fabric and resumes "
        "them once the fault has cleared (docs/slurm.md)."))
    p.add_argument("--config", default=os.environ.get("LOOM_SLURM_CONFIG"),
                   help="the hooks' JSON configuration (default $LOOM_SLURM_CONFIG, "
                        "else /etc/loom/slurm-hooks.json)")
    p.add_argument("--once", action="store_true",
                   help="act on the events so far, then exit")
    args = p.parse_args(argv)
    try:
        cfg = load_config(args.config)
        agent = Agent(cfg)
    except HookError as e:
        sys.stderr.write("loom-slurm-agent: %s\n" % e)
        return 2
    try:
        return agent.run(once=args.once)
    except KeyboardInterrupt:
        return 0


def main_exit():
    sys.exit(main())
