"""Python gNMI stubs generated at run time from the vendored public protos.

load() compiles proto/gnmi/gnmi.proto and proto/gnmi_ext/gnmi_ext.proto (the
public openconfig/gnmi files, see README.md) into a temporary directory and
imports them. It uses protoc with Debian's grpc_python_plugin
(protobuf-compiler-grpc) when both exist, else python3 -m grpc_tools.protoc
(python3-grpc-tools). Nothing here comes from Loom's own gNMI subset.
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "proto")
PROTOS = ["gnmi/gnmi.proto", "gnmi_ext/gnmi_ext.proto"]
GRPC_PYTHON_PLUGIN = "/usr/bin/grpc_python_plugin"

_loaded = None


def _generate(out):
    protoc = shutil.which("protoc")
    if protoc and os.access(GRPC_PYTHON_PLUGIN, os.X_OK):
        cmd = [protoc, "-I", PROTO_DIR, "--python_out", out, "--grpc_python_out", out,
               "--plugin=protoc-gen-grpc_python=" + GRPC_PYTHON_PLUGIN] + PROTOS
        if subprocess.run(cmd, capture_output=True).returncode == 0:
            return
    # grpc_tools bundles protoc and the well-known types.
    import grpc_tools  # noqa: F401  (raises a clear ImportError when absent)
    from grpc_tools import protoc as grpc_protoc
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    args = ["grpc_tools.protoc", "-I", PROTO_DIR, "-I", include, "--python_out", out,
            "--grpc_python_out", out] + PROTOS
    if grpc_protoc.main(args) != 0:
        raise RuntimeError("cannot generate the gNMI Python stubs (protoc + %s or grpc_tools)"
                           % GRPC_PYTHON_PLUGIN)


def load():
    """Returns (gnmi_pb2, gnmi_pb2_grpc), generating them once per process."""
    global _loaded
    if _loaded is None:
        out = tempfile.mkdtemp(prefix="loom-pygnmi-")
        atexit.register(shutil.rmtree, out, True)
        _generate(out)
        sys.path.insert(0, out)
        from gnmi import gnmi_pb2, gnmi_pb2_grpc  # noqa: E402
        _loaded = (gnmi_pb2, gnmi_pb2_grpc)
    return _loaded
