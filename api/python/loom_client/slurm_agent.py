"""loom-slurm-agent: turns faults Loom cannot remediate in the fabric into Slurm actions.

Loom emits a FAULT_BLAST_RADIUS event when a NIC port goes down, a leaf loses every
uplink or a storming NIC is quarantined, naming the hosts ("nodes") and jobs behind it,
and another when the fault clears. This agent follows Loom's event stream through the
Python client (resuming where it stopped: its position and the faults it knows are kept in
a state file) and, with `fault_action: "drain"`:

- drains the fault's nodes: `scontrol update nodename=... state=drain reason="loom: ..."`,
  leaving alone a node already drained or down for another reason (an admin's, a health
  check's);
- once the fault has cleared and stayed clear for `resume_after_s`, resumes each node that
  no other active fault covers — only if its drain reason is still Loom's own ("loom: ..."):
  a node an admin re-drained meanwhile stays drained.

Events already in Loom's log when the agent starts are replayed into its state without
acting; it then acts on the net result (drains for the faults still active, resume timers
for the cleared ones), so a replay never drains a node for a fault long over. A drain or
resume that fails (slurmctld unreachable) is tried again every few seconds.

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

from loom_client.slurm import HookError, Log, _scontrol, _slurm, connect, load_config

REASON_PREFIX = "loom: "
RETRY_S = 5.0
SAVE_EVERY_S = 10.0


class SlurmUnavailable(Exception):
    """Slurm could not be asked (the action is retried later)."""


class Agent:
    def __init__(self, cfg, log=None):
        self.cfg = cfg
        self.log = log or Log(cfg, "agent", None)
        self.path = cfg["agent_state"]
        # active: subject -> nodes; cleared: subject -> {nodes, at}; pending_drain: nodes
        # whose drain failed and is retried.
        self.state = {"revision": 0, "active": {}, "cleared": {}, "pending_drain": {}}
        if self.path and os.path.exists(self.path):
            try:
                with open(self.path) as f:
                    self.state.update(json.load(f))
            except (OSError, ValueError) as e:
                raise HookError("agent_state %s: unreadable: %s" % (self.path, e)) from None
        self.node_of = {host: node for node, host in cfg["node_hosts"].items()}
        self.saved_at = 0.0
        self.saved_revision = self.state["revision"]
        self.next_retry = 0.0

    def save(self, force=True):
        if not self.path:
            return
        now = time.monotonic()
        if not force and (now - self.saved_at < SAVE_EVERY_S or
                          self.state["revision"] == self.saved_revision):
            return
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.state, f)
        os.replace(tmp, self.path)
        self.saved_at = now
        self.saved_revision = self.state["revision"]

    def nodes(self, hosts):
        return sorted(self.node_of.get(h, h) for h in hosts if h)

    def node_status(self, node):
        """(state, reason) as sinfo reports them; (None, None) for a node Slurm lacks.
        Raises SlurmUnavailable when Slurm cannot answer."""
        try:
            out = _slurm(self.cfg, "sinfo", "-h", "-N", "-n", node, "-o", "%T|%E")
        except HookError as e:
            raise SlurmUnavailable(str(e)) from None
        line = out.strip().splitlines()[0] if out.strip() else ""
        if "|" not in line:
            return None, None  # sinfo answered, without this node
        state, reason = line.split("|", 1)
        return state.lower(), ("" if reason == "none" else reason)

    # -- events -------------------------------------------------------------------

    def handle(self, ev, act=True):
        """Takes a FAULT_BLAST_RADIUS event into the state; with `act`, drains at once."""
        attrs = dict(ev.attributes)
        subject = ev.subject
        nodes = self.nodes(attrs.get("nodes", "").split(","))
        if attrs.get("state") == "active":
            old = self.state["active"].get(subject, [])
            dropped = sorted(set(old) - set(nodes))
            if dropped:  # the fault no longer covers these: they may return
                self.state["cleared"][subject + " (narrowed)"] = {"nodes": dropped,
                                                                 "at": time.time()}
            self.state["cleared"].pop(subject, None)
            self.state["active"][subject] = nodes
            for n in nodes:
                self.state["pending_drain"][n] = REASON_PREFIX + ev.cause
            if act:
                self.log("info", "fault %s (event %d): %s; nodes %s; jobs %s" %
                         (subject, ev.revision, ev.cause, ",".join(nodes) or "none",
                          attrs.get("jobs", "") or "none"))
                self.drain_pending()
        elif attrs.get("state") == "cleared":
            was = self.state["active"].pop(subject, nodes)
            for n in was:
                self.state["pending_drain"].pop(n, None)
            self.state["cleared"][subject] = {"nodes": was, "at": time.time()}
            if act:
                self.log("info", "fault %s cleared (event %d): nodes %s resume after %ss "
                         "clear" % (subject, ev.revision, ",".join(was) or "none",
                                    self.cfg["resume_after_s"]))
        self.state["revision"] = ev.revision
        self.save()

    def drain_pending(self):
        for node, reason in list(self.state["pending_drain"].items()):
            try:
                self.drain(node, reason[:200])
            except SlurmUnavailable as e:
                self.log("warning", "could not drain %s yet (retrying): %s" % (node, e))
                continue
            del self.state["pending_drain"][node]
        self.save()

    def drain(self, node, reason):
        state, current = self.node_status(node)
        if state is None:
            self.log("warning", "node %s is not a Slurm node (map it in node_hosts)" % node)
            return
        if ("drain" in state or "down" in state) and not current.startswith(REASON_PREFIX):
            self.log("info", "node %s is already %s (%s): left as it is" %
                     (node, state, current or "no reason"))
            return
        if "drain" in state and current == reason:
            return  # already drained by us, for this
        if self.cfg["fault_action"] != "drain":
            self.log("info", "would drain %s: %s" % (node, reason))
            return
        try:
            _scontrol(self.cfg, "update", "nodename=" + node, "state=drain", "reason=" + reason)
        except HookError as e:
            raise SlurmUnavailable(str(e)) from None
        self.log("info", "drained %s: %s" % (node, reason))

    def resume_due(self, now=None):
        now = time.time() if now is None else now
        changed = False
        for subject, c in list(self.state["cleared"].items()):
            if now - c["at"] < float(self.cfg["resume_after_s"]):
                continue
            still = {n for nodes in self.state["active"].values() for n in nodes}
            left = []
            for node in c["nodes"]:
                if node in still:
                    self.log("info", "node %s stays drained: another fault covers it" % node)
                    continue
                try:
                    self.resume(node, subject)
                except SlurmUnavailable as e:
                    self.log("warning", "could not resume %s yet (retrying): %s" % (node, e))
                    left.append(node)
            if left:
                c["nodes"] = left
                c["at"] = now - float(self.cfg["resume_after_s"]) + RETRY_S
            else:
                del self.state["cleared"][subject]
            changed = True
        if changed:
            self.save()

    def resume(self, node, subject):
        state, reason = self.node_status(node)
        if state is None or "drain" not in state:
            return
        if not reason.startswith(REASON_PREFIX):
            self.log("info", "node %s stays drained: its reason is not Loom's (%s)" %
                     (node, reason))
            return
        if self.cfg["fault_action"] != "drain":
            self.log("info", "would resume %s" % node)
            return
        try:
            _scontrol(self.cfg, "update", "nodename=" + node, "state=resume")
        except HookError as e:
            raise SlurmUnavailable(str(e)) from None
        self.log("info", "resumed %s: fault %s stayed clear for %ss" %
                 (node, subject, self.cfg["resume_after_s"]))

    # -- main loop ----------------------------------------------------------------

    def run(self, stop=None, once=False):
        """Follows Loom's events until `stop` (a threading.Event) is set."""
        from loom.v1 import event_pb2
        from loom_client.client import LoomError
        stop = stop or threading.Event()
        events = queue.Queue()
        loom = connect(self.cfg, retries=1000000)
        try:
            caught_up_at = loom.list_jobs(page_size=1).revision
        except LoomError as e:
            self.log("error", "cannot reach Loom at %s: %s" % (self.cfg["loom"], e))
            loom.close()
            return 1
        start = self.state["revision"] + 1

        def follow(start):
            # Every event (not only faults): the position stays fresh, so a restart after
            # a quiet spell resumes inside Loom's retained history.
            while True:
                try:
                    for ev in loom.watch_events(start_revision=start, replay_only=once):
                        events.put(ev)
                        if stop.is_set():
                            return
                    events.put(None)
                    return
                except LoomError as e:
                    compacted = int(e.metadata.get("compacted_revision", "0") or 0)
                    if e.reason == "REVISION_COMPACTED" and compacted:
                        events.put(("compacted", start, compacted))
                        start = compacted + 1
                        continue
                    events.put(e)
                    return
        t = threading.Thread(target=follow, args=(start,), daemon=True)
        t.start()
        self.log("info", "following Loom at %s from revision %d (replaying to %d first)" %
                 (self.cfg["loom"], start, caught_up_at))
        replaying = start <= caught_up_at
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
                if isinstance(item, tuple):
                    self.log("warning", "revisions %d-%d were compacted away before the agent "
                             "read them: faults that began and ended there are missed" %
                             (item[1], item[2]))
                    continue
                if item is not False:
                    if item.type == event_pb2.EVENT_TYPE_FAULT_BLAST_RADIUS:
                        self.handle(item, act=not replaying)
                    else:
                        self.state["revision"] = item.revision
                        self.save(force=False)
                    if replaying and item.revision >= caught_up_at:
                        replaying = False
                        self.caught_up()
                if replaying:
                    continue
                self.resume_due()
                if self.state["pending_drain"] and time.monotonic() >= self.next_retry:
                    self.next_retry = time.monotonic() + RETRY_S
                    self.drain_pending()
            if replaying:
                self.caught_up()
                self.resume_due()
        finally:
            self.save()
            loom.close()
        return 0

    def caught_up(self):
        """After the replay: act on the net result."""
        self.log("info", "caught up at revision %d: %d active fault(s), %d cleared awaiting "
                 "resume" % (self.state["revision"], len(self.state["active"]),
                             len(self.state["cleared"])))
        self.drain_pending()


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
