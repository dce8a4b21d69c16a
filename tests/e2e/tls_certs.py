"""Test certificates made with the openssl command line at test time.

make_pki(dir) writes, in `dir`:
  ca.pem / ca.key            the test CA
  server.pem / server.key    signed by it; SAN IP:127.0.0.1, DNS:localhost, DNS:gnmi.loom.test
  client.pem / client.key    signed by it (clientAuth), CN loomd
  other-ca.pem / other-ca.key  a CA nobody trusts
  other-server.pem / .key    signed by other-ca (same SANs)
  expired.pem / expired.key  signed by ca, valid 2020-01-01 .. 2020-01-02 (`openssl ca`
                             with -startdate/-enddate: OpenSSL 3.0's x509 has no -not_after)
  bad.pem                    not PEM
and returns a dict name -> path.
"""
import os
import subprocess

SAN = "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:gnmi.loom.test"


def _run(args, cwd):
    out = subprocess.run(["openssl"] + args, cwd=cwd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("openssl %s: %s" % (" ".join(args), out.stderr))


def _ca(d, name, cn):
    _run(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
          "-keyout", name + ".key", "-out", name + ".pem", "-days", "2", "-subj", "/CN=" + cn,
          "-addext", "basicConstraints=critical,CA:TRUE",
          "-addext", "keyUsage=critical,keyCertSign,cRLSign"], d)


def _leaf(d, name, ca, cn, ext_lines):
    _run(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
          "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + cn], d)
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write("\n".join(ext_lines) + "\n")
    _run(["x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
          "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile", name + ".ext"], d)


def _expired(d):
    # `openssl ca` takes explicit start and end dates.
    os.makedirs(os.path.join(d, "ca-db"), exist_ok=True)
    open(os.path.join(d, "ca-db", "index.txt"), "w").close()
    with open(os.path.join(d, "ca-db", "serial"), "w") as f:
        f.write("1000\n")
    with open(os.path.join(d, "ca.cnf"), "w") as f:
        f.write("""[ca]
default_ca = test
[test]
dir = ./ca-db
database = $dir/index.txt
new_certs_dir = ./ca-db
serial = $dir/serial
default_md = sha256
policy = anything
copy_extensions = none
x509_extensions = server_ext
unique_subject = no
[anything]
commonName = supplied
[server_ext]
basicConstraints = CA:FALSE
extendedKeyUsage = serverAuth
%s
""" % SAN.replace("subjectAltName=", "subjectAltName = "))
    _run(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
          "-keyout", "expired.key", "-out", "expired.csr", "-subj", "/CN=expired"], d)
    _run(["ca", "-batch", "-config", "ca.cnf", "-cert", "ca.pem", "-keyfile", "ca.key",
          "-in", "expired.csr", "-out", "expired.pem", "-notext",
          "-startdate", "20200101000000Z", "-enddate", "20200102000000Z"], d)


def make_pki(d):
    os.makedirs(d, exist_ok=True)
    _ca(d, "ca", "Loom test CA")
    _ca(d, "other-ca", "Untrusted CA")
    server_ext = ["basicConstraints=CA:FALSE", "extendedKeyUsage=serverAuth", SAN]
    _leaf(d, "server", "ca", "gnmi.loom.test", server_ext)
    _leaf(d, "other-server", "other-ca", "gnmi.loom.test", server_ext)
    _leaf(d, "client", "ca", "loomd", ["basicConstraints=CA:FALSE",
                                      "extendedKeyUsage=clientAuth"])
    _expired(d)
    with open(os.path.join(d, "bad.pem"), "w") as f:
        f.write("this is not a certificate\n")
    names = ["ca.pem", "ca.key", "server.pem", "server.key", "client.pem", "client.key",
             "other-ca.pem", "other-ca.key", "other-server.pem", "other-server.key",
             "expired.pem", "expired.key", "bad.pem"]
    return {n: os.path.join(d, n) for n in names}


if __name__ == "__main__":
    import sys
    import tempfile
    print(make_pki(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()))
