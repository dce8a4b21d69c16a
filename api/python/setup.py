"""loom-client: the Python client of Loom's loom.v1 gRPC API.

Installed from a checkout with `pip install ./api/python` (add `--no-build-isolation` where
the package index is unreachable: Debian's python3-setuptools builds it). The loom.v1
message classes are generated at build time from api/proto with protoc (Debian's
protobuf-compiler), into the `loom.v1` package beside `loom_client`. Runtime dependencies:
grpcio and protobuf (Debian's python3-grpcio and python3-protobuf)."""
import os
import shutil
import subprocess

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_ROOT = os.path.normpath(os.path.join(HERE, "..", "proto"))


def generate():
    out = os.path.join(HERE, "loom", "v1")
    shutil.rmtree(os.path.join(HERE, "loom"), ignore_errors=True)
    os.makedirs(out)
    protos = sorted(os.path.join("loom", "v1", f)
                    for f in os.listdir(os.path.join(PROTO_ROOT, "loom", "v1"))
                    if f.endswith(".proto"))
    protoc = shutil.which("protoc")
    if protoc is None:
        raise SystemExit("loom-client: protoc is needed to build (apt-get install protobuf-compiler)")
    subprocess.check_call([protoc, "-I", PROTO_ROOT, "--python_out", HERE] + protos)
    for d in (os.path.join(HERE, "loom"), out):
        with open(os.path.join(d, "__init__.py"), "w") as f:
            f.write('"""Generated from api/proto by setup.py (protoc --python_out)."""\n')


if os.path.isdir(PROTO_ROOT):
    generate()

setup(
    name="loom-client",
    version="0.1.0",
    description="Python client of Loom's loom.v1 gRPC API (schedulers, operators)",
    packages=["loom_client", "loom", "loom.v1"],
    python_requires=">=3.9",
    install_requires=["grpcio", "protobuf"],
    # Slurm's PrologSlurmctld / EpilogSlurmctld (docs/slurm.md).
    entry_points={"console_scripts": [
        "loom-slurm-prolog=loom_client.slurm:prolog_main",
        "loom-slurm-epilog=loom_client.slurm:epilog_main",
        "loom-slurm-agent=loom_client.slurm_agent:main_exit",
    ]},
)
