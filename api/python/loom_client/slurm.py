"""Slurm's controller-side hooks for Loom: `loom-slurm-prolog` and `loom-slurm-epilog`.

Slurm runs `PrologSlurmctld` / `EpilogSlurmctld` once per job on the controller, as
SlurmctldUser, with the job's id and node list in their environment (SLURM_JOB_ID,
SLURM_JOB_NODELIST, SLURM_JOB_ACCOUNT, SLURM_JOB_PARTITION, SLURM_JOB_RESTART_COUNT,
SLURM_CLUSTER_NAME...) and nothing else of slurmctld's environment. The prolog registers the
job with Loom: its nodes are Loom hosts, its GPUs (the GRES indices `scontrol show job -d`
lists per node) are Loom GPU endpoints, found through Loom's topology; the tenant is the
job's account or partition; QP ranges and traffic class come from configuration. The
epilog releases it. See docs/slurm.md.

Slurm passes hooks no arguments, so the configuration (JSON) is read from
$LOOM_SLURM_CONFIG when a wrapper sets it, else /etc/loom/slurm-hooks.json.

Failure handling (`failure_mode`):
- "open": the job runs whatever Loom says (exit 0; the failure is logged);
- "closed": the prolog exits non-zero: Slurm requeues a batch job (and cancels an
  interactive allocation). A requeued job runs the prolog again; after `max_requeues`
  restarts (SLURM_JOB_RESTART_COUNT) the prolog holds the job (`scontrol hold`) before
  failing, so a Loom outage does not turn into an endless requeue loop: an operator
  releases held jobs once Loom is back (`scontrol release`).
"""
import json
import os
import re
import subprocess
import sys
import time

DEFAULT_CONFIG = "/etc/loom/slurm-hooks.json"

DEFAULTS = {
    "loom": "127.0.0.1:50061",   # loomd's gRPC address
    "timeout_s": 10.0,           # deadline of one call
    "retries": 2,                # retries of a call on UNAVAILABLE / DEADLINE_EXCEEDED
    "job_id": "slurm-{cluster}-{job_id}",  # Loom's job id for a Slurm job
    "tenant_from": "account",    # "account", "partition" or "user"
    "default_tenant": "",        # when the job has none of those ("" -> the partition)
    "node_hosts": {},            # Slurm node name -> Loom host (default: the same name)
    "qp_ranges": [],             # [[first, last], ...] RoCE destination QPs of every job
    "traffic_class": 0,
    "labels": {},                # extra labels on every job
    "no_gpus": "skip",           # a job without GPU GRES: "skip" or "all" (every GPU)
    "failure_mode": "open",      # "open" or "closed"
    "max_requeues": 3,           # closed: restarts of a job (any cause) before it is held
    "wait": "accepted",          # "accepted", "assigned" or "programmed"
    "wait_timeout_s": 60.0,      # for "assigned" / "programmed"
    "slurm_conf": "",            # SLURM_CONF for scontrol ("" -> scontrol's default)
    "scontrol": "scontrol",
    "log_file": "",              # "" -> stderr (slurmctld discards it)
    # loom-slurm-agent (slurm_agent.py): faults Loom cannot remediate -> Slurm actions.
    "fault_action": "report",    # "report" (log only) or "drain" (drain, then resume)
    "resume_after_s": 60.0,      # a cleared fault must stay clear this long
    "agent_state": "",           # the agent's position and faults ("" -> memory only)
    # Credentials (docs/security.md); files must be readable by SlurmctldUser.
    "ca": "",                    # PEM CA bundle: TLS to loomd, verifying its certificate
    "cert": "",                  # client certificate (mTLS) ...
    "key": "",                   # ... and its key
    "token_file": "",            # bearer token (JWT), re-read at each hook run
    "server_name": "",           # name to verify in loomd's certificate
}

# Exit codes (documented in docs/slurm.md).
EXIT_OK = 0
EXIT_FAILED = 1       # closed mode: Loom refused or could not be reached
EXIT_CONFIG = 2       # the hook's configuration or environment is wrong


class HookError(Exception):
    """A failure the hook reports (and, fail-closed, fails the job for)."""


def load_config(path=None):
    path = path or DEFAULT_CONFIG
    try:
        with open(path) as f:
            raw = json.load(f)
    except OSError as e:
        raise HookError("config %s: cannot read: %s" % (path, e.strerror)) from None
    except ValueError as e:
        raise HookError("config %s: not JSON: %s" % (path, e)) from None
    if not isinstance(raw, dict):
        raise HookError("config %s: must be a JSON object" % path)
    unknown = sorted(set(raw) - set(DEFAULTS))
    if unknown:
        raise HookError("config %s: unknown key(s): %s" % (path, ", ".join(unknown)))
    cfg = dict(DEFAULTS)
    cfg.update(raw)
    choices = {"tenant_from": ("account", "partition", "user"), "no_gpus": ("skip", "all"),
               "failure_mode": ("open", "closed"),
               "wait": ("accepted", "assigned", "programmed"),
               "fault_action": ("report", "drain")}
    for key, allowed in choices.items():
        if cfg[key] not in allowed:
            raise HookError("config %s: %s: %r is not one of %s" %
                            (path, key, cfg[key], ", ".join(allowed)))
    for r in cfg["qp_ranges"]:
        if (not isinstance(r, list) or len(r) != 2 or not all(isinstance(x, int) for x in r)
                or not 0 <= r[0] <= r[1] < 2 ** 24):
            raise HookError("config %s: qp_ranges: %r is not [first, last] with "
                            "0 <= first <= last < 2^24" % (path, r))
    if not isinstance(cfg["max_requeues"], int) or cfg["max_requeues"] < 0:
        raise HookError("config %s: max_requeues: must be an integer >= 0" % path)
    numbers = {"timeout_s": (0.1, 3600), "wait_timeout_s": (0, 86400),
               "resume_after_s": (0, 86400 * 7), "retries": (0, 100),
               "traffic_class": (0, 7)}
    for key, (lo, hi) in numbers.items():
        v = cfg[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise HookError("config %s: %s: %r is not a number in [%s, %s]" %
                            (path, key, v, lo, hi))
    if key_types_bad(cfg):
        raise HookError("config %s: %s" % (path, key_types_bad(cfg)))
    if bool(cfg["cert"]) != bool(cfg["key"]):
        raise HookError("config %s: cert and key go together" % path)
    for key in ("ca", "cert", "key", "token_file"):
        if cfg[key] and not os.access(cfg[key], os.R_OK):
            raise HookError("config %s: %s: %s is not readable by this user (uid %d)" %
                            (path, key, cfg[key], os.getuid()))
    return cfg


def connect(cfg, **kwargs):
    """A loom_client.Client for the hooks' configuration (address and credentials)."""
    from loom_client.client import Client
    return Client(cfg["loom"], timeout=float(cfg["timeout_s"]), ca=cfg["ca"] or None,
                  cert=cfg["cert"] or None, key=cfg["key"] or None,
                  token_file=cfg["token_file"] or None,
                  server_name=cfg["server_name"] or None, **kwargs)


def key_types_bad(cfg):
    """What is wrong with the types of the string and map settings ("" when nothing)."""
    for key in ("loom", "job_id", "default_tenant", "slurm_conf", "scontrol", "log_file",
                "agent_state", "ca", "cert", "key", "token_file", "server_name"):
        if not isinstance(cfg[key], str):
            return "%s: must be a string" % key
    for key in ("node_hosts", "labels"):
        if not isinstance(cfg[key], dict):
            return "%s: must be an object" % key
    return ""


class Log:
    def __init__(self, cfg, hook, job):
        self.prefix = "loom-slurm-%s" % hook + ("" if job is None else " job=%s" % job)
        self.path = cfg.get("log_file") or ""

    def __call__(self, level, msg):
        line = "%s %s %s: %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%S"), level, self.prefix, msg)
        if self.path:
            try:
                with open(self.path, "a") as f:
                    f.write(line)
                return
            except OSError:
                pass
        sys.stderr.write(line)


def _slurm(cfg, program, *args):
    """Runs a Slurm command ("scontrol", "sinfo": beside the configured scontrol when that
    is a path) with the configured SLURM_CONF; its stdout, or HookError."""
    path = cfg["scontrol"]
    if program != "scontrol":
        path = os.path.join(os.path.dirname(path), program) if os.sep in path else program
    env = dict(os.environ)
    if cfg["slurm_conf"]:
        env["SLURM_CONF"] = cfg["slurm_conf"]
    try:
        r = subprocess.run([path] + list(args), env=env, capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise HookError("%s %s: %s" % (program, " ".join(args), e)) from None
    if r.returncode != 0:
        raise HookError("%s %s failed: %s" % (program, " ".join(args),
                                              (r.stderr or r.stdout).strip()[:300]))
    return r.stdout


def _scontrol(cfg, *args):
    return _slurm(cfg, "scontrol", *args)


def expand_hostlist(cfg, expr):
    """Slurm's hostlist expression (host[000-003,007]) as names, by scontrol itself."""
    return [h for h in _scontrol(cfg, "show", "hostnames", expr).split() if h]


_NODE_LINE = re.compile(r"^\s*Nodes=(\S+)\s.*?\bGRES=(\S*)", re.M)
_GPU_GRES = re.compile(r"(?:^|,)gpu(?::[^:(,]+)?:\d+\(IDX:([^)]*)\)")


def _indices(text):
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part or part == "N/A":
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def gpu_allocation(cfg, job_text):
    """{node: [GPU index, ...]} from `scontrol show job -d` (its per-node detail lines)."""
    alloc = {}
    for nodes, gres in _NODE_LINE.findall(job_text):
        idx = []
        for m in _GPU_GRES.finditer(gres):
            idx.extend(_indices(m.group(1)))
        for node in expand_hostlist(cfg, nodes):
            alloc.setdefault(node, []).extend(idx)
    return alloc


def loom_job_id(cfg, env):
    return cfg["job_id"].format(cluster=env.get("SLURM_CLUSTER_NAME", ""),
                                job_id=env["SLURM_JOB_ID"])


def _tenant(cfg, env):
    def val(name):
        v = env.get(name, "")
        return "" if v in ("", "(null)") else v
    t = val({"account": "SLURM_JOB_ACCOUNT", "partition": "SLURM_JOB_PARTITION",
             "user": "SLURM_JOB_USER"}[cfg["tenant_from"]])
    return t or cfg["default_tenant"] or val("SLURM_JOB_PARTITION")


def build_job(cfg, env, topology, job_text):
    """The loom.v1.Job for the Slurm job, or None when it has no GPUs and is skipped."""
    from loom.v1 import job_pb2
    nodes = expand_hostlist(cfg, env["SLURM_JOB_NODELIST"])
    alloc = gpu_allocation(cfg, job_text)
    by_host = {}
    for g in topology.gpus:
        by_host.setdefault(g.host, {})[g.index] = g.id
    endpoints = []
    any_gpu = any(alloc.get(n) for n in nodes)
    if not any_gpu and cfg["no_gpus"] == "skip":
        return None
    for node in nodes:
        if any_gpu and not alloc.get(node):
            continue  # a node of the allocation without GPUs (CPU-only): no endpoint
        host = cfg["node_hosts"].get(node, node)
        gpus = by_host.get(host)
        if gpus is None:
            raise HookError("node %s: Loom's topology has no host %r with GPUs (map it in "
                            "node_hosts)" % (node, host))
        indices = alloc.get(node) if any_gpu else sorted(gpus)
        for i in indices or ():
            if i not in gpus:
                raise HookError("node %s: GPU index %d is not in Loom's topology for host %s "
                                "(it has %s)" % (node, i, host, sorted(gpus)))
            endpoints.append(gpus[i])
    tenant = _tenant(cfg, env)
    if not tenant:
        raise HookError("the job has no %s and no default_tenant is configured" %
                        cfg["tenant_from"])
    job = job_pb2.Job(tenant=tenant, job_id=loom_job_id(cfg, env), endpoints=endpoints,
                      traffic_class=int(cfg["traffic_class"]))
    for first, last in cfg["qp_ranges"]:
        job.qp_ranges.add(first=first, last=last)
    labels = dict(cfg["labels"])
    labels.update({"slurm.job_id": env["SLURM_JOB_ID"],
                   "slurm.partition": env.get("SLURM_JOB_PARTITION", ""),
                   "slurm.user": env.get("SLURM_JOB_USER", "")})
    if env.get("SLURM_CLUSTER_NAME"):
        labels["slurm.cluster"] = env["SLURM_CLUSTER_NAME"]
    for k, v in labels.items():
        job.labels[k] = str(v)
    return job


def _wait(cfg, loom, job_id, log, topology):
    """Waits for the job to be assigned paths, or for the switches on them to be in sync."""
    from loom.v1 import job_pb2, topology_pb2
    switch_roles = {topology_pb2.DEVICE_ROLE_LEAF, topology_pb2.DEVICE_ROLE_SPINE,
                    topology_pb2.DEVICE_ROLE_SUPER_SPINE}
    switches = {d.id for d in topology.devices if d.role in switch_roles}
    ends = {link.id: (link.a.device, link.b.device) for link in topology.links}
    deadline = time.monotonic() + float(cfg["wait_timeout_s"])
    while True:
        job = loom.get_job(job_id).job
        if job.status.state == job_pb2.JOB_STATE_ASSIGNED:
            if cfg["wait"] == "assigned":
                return
            devices = set()
            for link in loom.get_job_health(job_id).path_links:
                devices.update(d for d in ends.get(link, ()) if d in switches)
            out = []
            for d in sorted(devices):
                sync = loom.get_device_state(d).sync
                # A switch Loom does not program (no southbound driver, or shadow mode)
                # is never "in sync": nothing to wait for there.
                if sync.driver and not sync.shadow and not sync.in_sync:
                    out.append(d)
            if not out:
                return
            waiting = "switches not yet in sync: " + ", ".join(out[:8])
        else:
            waiting = "no paths yet: " + (job.status.message or "pending")
        if time.monotonic() > deadline:
            raise HookError("waited %ss for Loom (%s)" % (cfg["wait_timeout_s"], waiting))
        log("info", "waiting: " + waiting)
        time.sleep(0.5)


def _requeue_bound(cfg, env, log):
    """Fail-closed: past max_requeues restarts, hold the job so it stops looping."""
    restarts = int(env.get("SLURM_JOB_RESTART_COUNT", "0") or 0)
    if restarts < cfg["max_requeues"]:
        log("error", "failing the job (fail-closed): Slurm requeues it (restart %d of %d)" %
            (restarts, cfg["max_requeues"]))
        return
    try:
        _scontrol(cfg, "hold", env["SLURM_JOB_ID"])
        log("error", "failing the job (fail-closed) after %d restarts: held; release it with "
            "`scontrol release %s` once Loom is back" % (restarts, env["SLURM_JOB_ID"]))
    except HookError as e:
        log("error", "could not hold the job after %d restarts: %s" % (restarts, e))


def _setup(hook, env, cfg, required, slurm_name):
    """The hook's configuration and log, or (None, None) when it cannot run (said in the
    log, or on stderr when the configuration itself is the problem)."""
    job_label = env.get("SLURM_JOB_ID", "?")
    try:
        cfg = cfg or load_config(env.get("LOOM_SLURM_CONFIG"))
    except HookError as e:
        Log({}, hook, job_label)("error", str(e))
        return None, None
    log = Log(cfg, hook, job_label)
    for var in required:
        if not env.get(var):
            log("error", "%s is not set: run this as Slurm's %s" % (var, slurm_name))
            return None, None
    return cfg, log


def prolog(env=None, cfg=None):
    """Runs the prolog; returns the exit code."""
    env = dict(os.environ if env is None else env)
    cfg, log = _setup("prolog", env, cfg, ("SLURM_JOB_ID", "SLURM_JOB_NODELIST"),
                      "PrologSlurmctld")
    if cfg is None:
        return EXIT_CONFIG
    from loom_client.client import LoomError
    try:
        job_text = _scontrol(cfg, "show", "job", "-d", env["SLURM_JOB_ID"])
        with connect(cfg, retries=int(cfg["retries"])) as loom:
            topology = loom.get_topology()
            job = build_job(cfg, env, topology, job_text)
            if job is None:
                log("info", "no GPUs allocated: not registered (no_gpus=skip)")
                return EXIT_OK
            # One request id per prolog run: a retry of this call is answered once.
            request_id = "%s-prolog-%s" % (job.job_id, env.get("SLURM_JOB_RESTART_COUNT", "0"))
            try:
                resp = loom.register_job(job, request_id=request_id)
            except LoomError as e:
                if e.code.name != "ALREADY_EXISTS":
                    raise
                # Requeued before the epilog released it: the same job, new placement.
                resp = loom.update_job(job, request_id=request_id + "-update")
            a = resp.job.status.assignment
            log("info", "registered %s (tenant %s, %d GPUs): %s" %
                (job.job_id, job.tenant, len(job.endpoints),
                 a.reason or resp.job.status.message or "pending"))
            if cfg["wait"] != "accepted":
                _wait(cfg, loom, job.job_id, log, topology)
        return EXIT_OK
    except (HookError, LoomError) as e:
        log("error", str(e))
    except Exception as e:  # noqa: BLE001 - a hook must answer Slurm, whatever went wrong
        log("error", "unexpected: %r" % e)
    if cfg["failure_mode"] == "open":
        log("warning", "fail-open: the job runs without Loom")
        return EXIT_OK
    _requeue_bound(cfg, env, log)
    return EXIT_FAILED


def epilog(env=None, cfg=None):
    """Runs the epilog (releases the job; a job Loom does not know is fine)."""
    env = dict(os.environ if env is None else env)
    cfg, log = _setup("epilog", env, cfg, ("SLURM_JOB_ID",), "EpilogSlurmctld")
    if cfg is None:
        return EXIT_CONFIG
    from loom_client.client import LoomError
    job_id = loom_job_id(cfg, env)
    try:
        with connect(cfg, retries=int(cfg["retries"])) as loom:
            loom.release_job(job_id, request_id="%s-epilog-%s" %
                             (job_id, env.get("SLURM_JOB_RESTART_COUNT", "0")))
        log("info", "released %s" % job_id)
    except LoomError as e:
        if e.code.name == "NOT_FOUND":
            log("info", "%s was not registered (nothing to release)" % job_id)
            return EXIT_OK
        # The job stays in Loom until released: say so loudly (the job itself is done).
        log("error", "could not release %s: %s (release it with `loomctl jobs release %s`)" %
            (job_id, e, job_id))
        return EXIT_FAILED
    return EXIT_OK


def prolog_main():
    sys.exit(prolog())


def epilog_main():
    sys.exit(epilog())
