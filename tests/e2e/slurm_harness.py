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
    def __init__(self, nodes, topology_conf=None, extra_conf=""):
        """`nodes`: node names (all served at 127.0.0.1); `topology_conf`: its text, which
        turns on the topology/tree plugin."""
        self.dir = tempfile.mkdtemp(prefix="loom-slurm-")
        self.procs = []
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
        lines = [
            "ClusterName=loomtest", "SlurmctldHost=localhost", "SlurmctldPort=%d" % port,
            "SlurmdPort=%d" % free_port(), "SlurmUser=root", "AuthType=auth/munge",
            "AuthInfo=socket=%s" % self.munge_socket,
            "StateSaveLocation=%s" % os.path.join(self.dir, "state"),
            "SlurmctldPidFile=%s" % os.path.join(self.dir, "slurmctld.pid"),
            "SlurmctldLogFile=%s" % self.log, "SlurmctldDebug=info",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none",
            "SchedulerType=sched/backfill", "SelectType=select/cons_tres",
            "ReturnToService=2",
            "NodeName=%s NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN" % ",".join(nodes),
            "PartitionName=all Nodes=ALL Default=YES State=UP",
        ]
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
        shutil.rmtree(self.dir, ignore_errors=True)
