"""Certificates and JWTs for tests, made with the openssl command line."""
import base64
import json
import os
import subprocess


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

    def issue(self, name, cn, san, ca="ca", days=2, expired=False):
        """A certificate for `cn` with subjectAltName `san`, signed by `ca`; with `expired`,
        valid only for a day in 2020 (openssl ca -startdate/-enddate)."""
        key, csr, crt = self.p(name + "-key.pem"), self.p(name + ".csr"), self.p(name + ".pem")
        run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + cn,
            "-keyout", key, "-out", csr)
        ext = self.p(name + ".ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=%s\n" % san)
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
