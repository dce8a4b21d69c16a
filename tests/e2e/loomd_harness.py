"""Starts a real loomd on free ports for Python end-to-end tests."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    """A TCP port free on 127.0.0.1 right now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_file(path, proc, timeout=30):
    """The JSON a process writes to `path` once it is ready (RuntimeError when the
    process exits first or the time is up)."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise RuntimeError("process exited early (%s)" % path)
        if time.monotonic() > deadline:
            raise RuntimeError("timed out waiting for " + path)
        time.sleep(0.02)
    with open(path) as f:
        return json.load(f)


def generate_messages(proto_dir):
    """Generates Python message classes for the loom.v1 protos (protoc
    --python_out) and returns the loom.v1 package modules by short name."""
    out = tempfile.mkdtemp(prefix="loom-pyproto-")
    protos = [os.path.join("loom/v1", f)
              for f in sorted(os.listdir(os.path.join(proto_dir, "loom/v1")))
              if f.endswith(".proto")]
    subprocess.check_call(["protoc", "-I", proto_dir, "--python_out", out] + protos)
    sys.path.insert(0, out)
    from loom.v1 import event_pb2, fabric_service_pb2, job_pb2, scheduler_service_pb2  # noqa
    from loom.v1 import error_details_pb2  # noqa
    return dict(job=job_pb2, sched=scheduler_service_pb2, fabric=fabric_service_pb2,
                event=event_pb2, errors=error_details_pb2)


def build_client_venv(source_dir, prefix="loom-pylib-"):
    """A temp dir holding a venv (Debian's python3-grpcio / -protobuf visible) with the
    Python client pip-installed from a copy of the checkout's api/; returns (dir, python)."""
    work = tempfile.mkdtemp(prefix=prefix)
    os.chmod(work, 0o755)  # programs other daemons run live here (Slurm's hooks)
    shutil.copytree(os.path.join(source_dir, "api", "python"), os.path.join(work, "api", "python"),
                    ignore=shutil.ignore_patterns("loom", "build", "*.egg-info"))
    shutil.copytree(os.path.join(source_dir, "api", "proto"), os.path.join(work, "api", "proto"))
    venv = os.path.join(work, "venv")
    subprocess.check_call(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv])
    subprocess.check_call([os.path.join(venv, "bin", "pip"), "install", "--no-index",
                           "--no-build-isolation", "--quiet",
                           os.path.join(work, "api", "python")], cwd=work)
    return work, os.path.join(venv, "bin", "python")


def client_venv_main(test_file, prefix):
    """Command line of a test that runs with the Python client pip-installed: --loomd,
    --source-dir. Run plainly, it builds the venv, runs `test_file` inside it with --inside
    and exits with its status; inside, it returns (args, the rest for unittest)."""
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--loomd", required=True)
    p.add_argument("--source-dir", required=True)
    p.add_argument("--inside", action="store_true")
    args, rest = p.parse_known_args()
    args.loomd = os.path.abspath(args.loomd)
    args.source_dir = os.path.abspath(args.source_dir)
    if args.inside:
        return args, rest
    work, python = build_client_venv(args.source_dir, prefix)
    try:
        rc = subprocess.call([python, os.path.abspath(test_file), "--inside", "--loomd",
                              args.loomd, "--source-dir", args.source_dir] + rest, cwd=work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(rc)


def unary(channel, service, method, request, response_cls):
    """Calls loom.v1.<service>/<method> with grpcio's generic channel API."""
    call = channel.unary_unary("/loom.v1.%s/%s" % (service, method),
                               request_serializer=lambda m: m.SerializeToString(),
                               response_deserializer=response_cls.FromString)
    return call(request, timeout=10)


class Loomd:
    def __init__(self, loomd, topology, config=None, extra_args=(), directory=None,
                 grpc_port=0):
        """Starts loomd; `config` (a dict) is written as its --config file;
        `directory` reuses a previous run's directory (its database)."""
        self.dir = directory or tempfile.mkdtemp(prefix="loom-py-")
        self.ready = os.path.join(self.dir, "ready.json")
        if os.path.exists(self.ready):
            os.remove(self.ready)
        self.log = open(os.path.join(self.dir, "loomd.log"), "a")
        argv = [loomd, "--topology", topology, "--db", os.path.join(self.dir, "loom.db"),
                "--grpc-listen", "127.0.0.1:%d" % grpc_port, "--metrics-listen", "127.0.0.1:0",
                "--ready-file", self.ready]
        if config is not None:
            path = os.path.join(self.dir, "loomd.json")
            with open(path, "w") as f:
                json.dump(config, f)
            argv += ["--config", path]
        self.proc = subprocess.Popen(argv + list(extra_args),
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not os.path.exists(self.ready):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("loomd did not start:\n" + self.read_log())
            time.sleep(0.02)
        with open(self.ready) as f:
            info = json.load(f)
        self.grpc_address = "127.0.0.1:%d" % info["grpc_port"]
        self.metrics_url = "http://127.0.0.1:%d/metrics" % info["metrics_port"]

    def read_log(self):
        self.log.flush()
        with open(os.path.join(self.dir, "loomd.log")) as f:
            return f.read()

    def metric(self, name):
        """The sum of a metric's samples on /metrics (0 when absent)."""
        import urllib.request
        total = 0.0
        with urllib.request.urlopen(self.metrics_url, timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " ") or line.startswith(name + "{"):
                    total += float(line.rsplit(" ", 1)[1])
        return total

    def stop(self, keep=False):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)
        self.log.close()
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def start_process(argv, log_path):
    """Starts a process with stdout+stderr in `log_path` (closed when stopped)."""
    log = open(log_path, "w")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    proc.log_file = log
    return proc


def stop_processes(test, procs):
    """SIGTERMs every process, then asserts each exited cleanly (status 0)."""
    for p in procs:
        p.terminate()
    for p in procs:
        test.assertEqual(p.wait(timeout=20), 0)
        log = getattr(p, "log_file", None)
        if log:
            log.close()
