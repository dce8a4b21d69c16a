"""Certificates, JWTs and TLS handshakes for tests, made with the openssl command line.

Pki(dir): a CA and a second (untrusted) CA; issue() signs certificates (optionally
expired: `openssl ca -startdate/-enddate`, OpenSSL 3.0's x509 has no -not_after).
make_pki(dir): the fixed set the gNMI and metrics TLS tests use (see its docstring).
tls_handshake / client_speaks_tls11: the TLS-version checks with their control.
"""
import base64
import json
import os
import subprocess
import time


def run(*argv, **kw):
    return subprocess.run(list(argv), check=True, capture_output=True, text=True, **kw)


class Pki:
    """A CA, a second (untrusted) CA, loomd's server certificate and client
    certificates, all made with the openssl command line."""

    def __init__(self, d):
        self.d = d
        self.ca = self._ca("ca", "Loom Test CA")
        self.other_ca = self._ca("other-ca", "Someone Else's CA")

    def p(self, name):
        return os.path.join(self.d, name)

    def _ca(self, name, cn):
        run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=" + cn, "-keyout", self.p(name + "-key.pem"),
            "-out", self.p(name + ".pem"))
        return self.p(name + ".pem")

    def issue(self, name, cn, san, ca="ca", days=2, expired=False, ext_lines=()):
        """A certificate for `cn` with subjectAltName `san` (and `ext_lines`, e.g.
        "extendedKeyUsage=serverAuth"), signed by `ca`; with `expired`, valid only for a
        day in 2020."""
        key, csr, crt = self.p(name + "-key.pem"), self.p(name + ".csr"), self.p(name + ".pem")
        run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + cn,
            "-keyout", key, "-out", csr)
        ext = self.p(name + ".ext")
        with open(ext, "w") as f:
            f.write("".join(line + "\n" for line in
                            (["subjectAltName=%s" % san] if san else []) + list(ext_lines)))
        if not expired:
            run("openssl", "x509", "-req", "-in", csr, "-CA", self.p(ca + ".pem"),
                "-CAkey", self.p(ca + "-key.pem"), "-CAcreateserial", "-days", str(days),
                "-extfile", ext, "-out", crt)
            return crt, key
        cadir = self.p("ca-db")
        os.makedirs(cadir, exist_ok=True)
        open(os.path.join(cadir, "index.txt"), "w").close()
        with open(os.path.join(cadir, "serial"), "w") as f:
            f.write("1000\n")
        conf = self.p("ca.cnf")
        with open(conf, "w") as f:
            f.write("[ca]\ndefault_ca=d\n[d]\ndir=%s\ndatabase=$dir/index.txt\n"
                    "new_certs_dir=$dir\nserial=$dir/serial\ndefault_md=sha256\n"
                    "policy=p\ncopy_extensions=copy\n[p]\ncommonName=supplied\n" % cadir)
        run("openssl", "ca", "-batch", "-config", conf, "-cert", self.p(ca + ".pem"),
            "-keyfile", self.p(ca + "-key.pem"), "-startdate", "20200101000000Z",
            "-enddate", "20200102000000Z", "-extfile", ext, "-in", csr, "-out", crt)
        return crt, key


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_jwt(key_path, claims, alg="RS256"):
    """A JWT signed with openssl (RSA, SHA-256)."""
    head = b64url(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    body = b64url(json.dumps(claims).encode())
    signing_input = (head + "." + body).encode()
    if alg == "none":
        return head + "." + body + "."
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key_path], input=signing_input,
                         capture_output=True, check=True).stdout
    return head + "." + body + "." + b64url(sig)


def make_pki(d):
    """The certificates of the gNMI and metrics TLS tests, by name -> path:
    ca.pem / ca.key (the test CA), server.pem / server.key (SAN IP:127.0.0.1,
    DNS:localhost, DNS:gnmi.loom.test), client.pem / client.key (clientAuth, CN loomd),
    other-ca.pem / other-ca.key (a CA nobody trusts), other-server.pem / .key (signed by
    it, same SANs), expired.pem / expired.key (signed by ca, valid 2020-01-01..02),
    bad.pem (not PEM)."""
    os.makedirs(d, exist_ok=True)
    pki = Pki(d)
    san = "IP:127.0.0.1,DNS:localhost,DNS:gnmi.loom.test"
    server = ["basicConstraints=CA:FALSE", "extendedKeyUsage=serverAuth"]
    out = {"ca.pem": pki.ca, "ca.key": pki.p("ca-key.pem"), "other-ca.pem": pki.other_ca,
           "other-ca.key": pki.p("other-ca-key.pem")}
    for name, ca, cn, s, ext, expired in (
            ("server", "ca", "gnmi.loom.test", san, server, False),
            ("other-server", "other-ca", "gnmi.loom.test", san, server, False),
            ("client", "ca", "loomd", "", ["basicConstraints=CA:FALSE",
                                            "extendedKeyUsage=clientAuth"], False),
            ("expired", "ca", "expired", san, server, True)):
        crt, key = pki.issue(name, cn, s, ca=ca, ext_lines=ext, expired=expired)
        out[name + ".pem"], out[name + ".key"] = crt, key
    out["bad.pem"] = pki.p("bad.pem")
    with open(out["bad.pem"], "w") as f:
        f.write("this is not a certificate\n")
    return out


def tls_handshake(host, port, version, ca, cert=None, key=None):
    """(completed, output) of `openssl s_client` at `version` ("-tls1_1", "-tls1_2"),
    with security level 0 so that the client itself offers old versions and ciphers."""
    # ALPN h2: gRPC servers refuse handshakes without it; HTTP/1.1 servers ignore it.
    argv = ["openssl", "s_client", "-connect", "%s:%s" % (host, port), version, "-cipher",
            "DEFAULT@SECLEVEL=0", "-alpn", "h2", "-CAfile", ca]
    if cert:
        argv += ["-cert", cert, "-key", key]
    r = subprocess.run(argv, input=b"", capture_output=True, timeout=30)
    out = r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
    return r.returncode == 0 and "Cipher is (NONE)" not in out, out


def client_speaks_tls11(cert, key, ca, port):
    """The control of a "TLS 1.1 refused" check: this machine's openssl client completes
    a TLS 1.1 handshake with a server that allows it (an openssl s_server on `port`)."""
    server = subprocess.Popen(["openssl", "s_server", "-accept", "127.0.0.1:%d" % port,
                               "-cert", cert, "-key", key, "-tls1_1", "-cipher",
                               "ALL:@SECLEVEL=0", "-naccept", "1"],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            time.sleep(0.2)
            ok, _ = tls_handshake("127.0.0.1", port, "-tls1_1", ca)
            if ok:
                return True
        return False
    finally:
        server.kill()
        server.wait()
