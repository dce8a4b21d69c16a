"""Starts a real Slurm controller (Debian's slurmctld 22.05) with its own munged in a temp
directory, for end-to-end tests of Loom's scheduler integration. Nothing is installed or
changed outside the directory; the daemons are stopped by stop()."""
import os
import shutil
import subprocess
import tempfile
import time

from loomd_harness import free_port


class Slurm:
    def __init__(self, nodes, topology_conf=None, extra_conf="", compute=False, gpus=0):
        """`nodes`: node names; `topology_conf`: its text, which turns on the topology/tree
        plugin. Without `compute` the nodes are names only (no slurmd: they stay down, enough
        for slurmctld's own views). With `compute` each node is a real slurmd in a network
        namespace of its own (one veth into a bridge; slurmctld on the bridge's address), with
        `gpus` GPUs as GRES on dummy device files, so jobs really run."""
        self.dir = tempfile.mkdtemp(prefix="loom-slurm-")
        os.chmod(self.dir, 0o755)  # munged wants its socket's directories searchable
        self.procs = []
        self.netns = []
        self.bridge = None
        try:
            self._start(nodes, topology_conf, extra_conf, compute, gpus)
        except BaseException:
            self.stop()
            raise

    def _start(self, nodes, topology_conf, extra_conf, compute, gpus):
        m = os.path.join(self.dir, "munge")
        os.makedirs(m, mode=0o700)
        os.makedirs(os.path.join(self.dir, "state"))
        with open(os.path.join(m, "munge.key"), "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(os.path.join(m, "munge.key"), 0o600)
        self.munge_socket = os.path.join(m, "munge.socket")
        self.procs.append(subprocess.Popen(
            ["munged", "-F", "--key-file", os.path.join(m, "munge.key"),
             "--socket", self.munge_socket, "--pid-file", os.path.join(m, "munged.pid"),
             "--log-file", os.path.join(m, "munged.log"), "--seed-file", os.path.join(m, "seed"),
             "--force"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 10
        while not os.path.exists(self.munge_socket):
            if time.monotonic() > deadline:
                raise RuntimeError("munged did not start")
            time.sleep(0.05)
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.log = os.path.join(self.dir, "slurmctld.log")
        port = free_port()
        ctld_host = "localhost"
        node_addr = {n: "127.0.0.1" for n in nodes}
        if compute:
            ctld_addr, node_addr = self._make_network(nodes)
            ctld_host = "localhost(%s)" % ctld_addr
        lines = [
            "ClusterName=loomtest", "SlurmctldHost=%s" % ctld_host, "SlurmctldPort=%d" % port,
            "SlurmdPort=%d" % free_port(), "SlurmUser=root", "AuthType=auth/munge",
            "AuthInfo=socket=%s" % self.munge_socket,
            "StateSaveLocation=%s" % os.path.join(self.dir, "state"),
            "SlurmctldPidFile=%s" % os.path.join(self.dir, "slurmctld.pid"),
            "SlurmctldLogFile=%s" % self.log, "SlurmctldDebug=info",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
            "SchedulerType=sched/backfill", "SelectType=select/cons_tres",
            "ReturnToService=2",
        ]
        if compute:
            lines += [
                "SlurmdSpoolDir=%s" % os.path.join(self.dir, "spool-%n"),
                "SlurmdPidFile=%s" % os.path.join(self.dir, "slurmd-%n.pid"),
                "SlurmdLogFile=%s" % os.path.join(self.dir, "slurmd-%n.log"),
                "SlurmdDebug=info", "GresTypes=gpu", "JobAcctGatherType=jobacct_gather/none",
                "DefMemPerCPU=100",  # jobs share a node (RealMemory=1000)
            ]
            gres = []
            for n in nodes:
                lines.append("NodeName=%s NodeAddr=%s CPUs=2 RealMemory=1000 %sState=UNKNOWN" %
                             (n, node_addr[n], "Gres=gpu:%d " % gpus if gpus else ""))
                if gpus:
                    devdir = os.path.join(self.dir, "dev", n)
                    os.makedirs(devdir)
                    for g in range(gpus):
                        open(os.path.join(devdir, "gpu%d" % g), "w").close()
                    gres.append("NodeName=%s Name=gpu File=%s/gpu[0-%d]" % (n, devdir, gpus - 1))
            with open(os.path.join(self.dir, "gres.conf"), "w") as f:
                f.write("\n".join(gres) + "\n")
        else:
            lines.append("NodeName=%s NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN" % ",".join(nodes))
        lines.append("PartitionName=all Nodes=ALL Default=YES State=UP")
        if topology_conf is not None:
            with open(os.path.join(self.dir, "topology.conf"), "w") as f:
                f.write(topology_conf)
            lines.append("TopologyPlugin=topology/tree")
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n" + extra_conf)
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.procs.append(subprocess.Popen(["slurmctld", "-D", "-i", "-f", self.conf],
                                           env=self.env, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 30
        while True:
            out = self.run(["scontrol", "ping"], check=False)
            if "is UP" in out.stdout:
                break
            if self.procs[-1].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("slurmctld did not start:\n" + self.read_log()[-3000:])
            time.sleep(0.2)
        if compute:
            for n, ns in zip(nodes, self.netns):
                os.makedirs(os.path.join(self.dir, "spool-" + n))
                # nsenter, not `ip netns exec`: that remounts /sys, hiding the cgroup
                # file systems slurmd needs.
                self.procs.append(subprocess.Popen(
                    ["nsenter", "--net=/run/netns/" + ns, "slurmd", "-D", "-N", n, "-f",
                     self.conf],
                    env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
            self.wait_nodes(nodes, "idle")

    def wait_nodes(self, nodes, state, timeout=60):
        """Waits until every node in `nodes` reports `state` (sinfo's short state)."""
        deadline = time.monotonic() + timeout
        while True:
            out = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False).stdout
            states = dict(line.split()[:2] for line in out.splitlines() if line.strip())
            if all(states.get(n, "").rstrip("*") == state for n in nodes):
                return
            if time.monotonic() > deadline:
                raise RuntimeError("nodes never became %s: %s" % (state, states))
            time.sleep(0.3)

    @staticmethod
    def _remove_stale_networks():
        """Namespaces and bridges left by a run that was killed (its pid is gone)."""
        def alive(pid):
            try:
                os.kill(int(pid), 0)
                return True
            except (OSError, ValueError):
                return False
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            name = line.split()[0] if line.split() else ""
            parts = name.split("-")
            if name.startswith("loom-slurm-") and len(parts) == 4 and not alive(parts[2]):
                for pid in subprocess.run(["ip", "netns", "pids", name], capture_output=True,
                                          text=True).stdout.split():
                    try:
                        os.kill(int(pid), 9)
                    except (OSError, ValueError):
                        pass
                subprocess.run(["ip", "netns", "del", name], capture_output=True)
        out = subprocess.run(["ip", "-o", "link", "show", "type", "bridge"],
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            name = line.split(":")[1].strip() if line.count(":") >= 2 else ""
            if name.startswith("lsbr") and name[4:].isdigit() and not alive(name[4:]):
                subprocess.run(["ip", "link", "del", name], capture_output=True)

    def _make_network(self, nodes):
        """A bridge with slurmctld's address and one namespace per node behind a veth."""
        self._remove_stale_networks()
        tag = str(os.getpid())
        net = 100 + os.getpid() % 100  # 198.19.100-199.0/24: not used by other tests
        self.bridge = "lsbr" + tag
        sh = lambda *a: subprocess.run(a, check=True, capture_output=True)  # noqa: E731
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", "198.19.%d.1/24" % net, "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        addrs = {}
        for i, n in enumerate(nodes):
            ns = "loom-slurm-%s-%d" % (tag, i)
            sh("ip", "netns", "add", ns)
            self.netns.append(ns)
            host_if, ns_if = "lsh%s%d" % (tag, i), "lsn%s%d" % (tag, i)
            sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if)
            sh("ip", "link", "set", ns_if, "netns", ns)
            sh("ip", "link", "set", host_if, "master", self.bridge)
            sh("ip", "link", "set", host_if, "up")
            addrs[n] = "198.19.%d.%d" % (net, 10 + i)
            sh("ip", "-n", ns, "addr", "add", addrs[n] + "/24", "dev", ns_if)
            sh("ip", "-n", ns, "link", "set", ns_if, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        return "198.19.%d.1" % net, addrs

    def run(self, argv, check=True):
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30,
                              check=check)

    def read_log(self):
        try:
            with open(self.log) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        for p in reversed(self.procs):
            p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
        for ns in self.netns:
            # slurmstepd (a job's steps) detaches from slurmd: whatever still runs in the
            # node's namespace goes too.
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                                  text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), 9)
                except (OSError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        if self.bridge:
            subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)
