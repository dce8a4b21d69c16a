"""Starts a real loomd on free ports for Python end-to-end tests."""
import json
import os
import shutil
import subprocess
import tempfile
import time


class Loomd:
    def __init__(self, loomd, topology):
        self.dir = tempfile.mkdtemp(prefix="loom-py-")
        self.ready = os.path.join(self.dir, "ready.json")
        self.log = open(os.path.join(self.dir, "loomd.log"), "w")
        self.proc = subprocess.Popen(
            [loomd, "--topology", topology, "--db", os.path.join(self.dir, "loom.db"),
             "--grpc-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
             "--ready-file", self.ready],
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

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
