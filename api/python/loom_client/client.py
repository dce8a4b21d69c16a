"""loom_client.Client: typed wrappers of every loom.v1 RPC (see the package docstring)."""
import ipaddress
import json
import os
import time
import uuid

import grpc

from loom.v1 import error_details_pb2, fabric_service_pb2 as fs, scheduler_service_pb2 as ss

_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
_ERROR_INFO_URL = "type.googleapis.com/google.rpc.ErrorInfo"
_BAD_REQUEST_URL = "type.googleapis.com/google.rpc.BadRequest"


class LoomError(Exception):
    """A failed loom.v1 call: `code` (grpc.StatusCode), `message` (Loom's text, naming the
    field or object), `reason` and `metadata` (from an ErrorInfo detail, when loomd sent
    one: e.g. reason "REVISION_COMPACTED" with metadata["compacted_revision"]), and
    `field_violations`, (field, description) pairs from a BadRequest detail (every
    INVALID_ARGUMENT that names a field)."""

    def __init__(self, method, code, message, reason="", metadata=None, field_violations=()):
        super().__init__("%s: %s: %s" % (method, code.name, message))
        self.method = method
        self.code = code
        self.message = message
        self.reason = reason
        self.metadata = dict(metadata or {})
        self.field_violations = list(field_violations)

    @classmethod
    def from_rpc_error(cls, method, err):
        reason, metadata, violations = "", {}, []
        for key, value in (err.trailing_metadata() or ()):
            if key != "grpc-status-details-bin":
                continue
            status = error_details_pb2.RpcStatus.FromString(value)
            for any_detail in status.details:
                if any_detail.type_url == _ERROR_INFO_URL:
                    info = error_details_pb2.ErrorInfo.FromString(any_detail.value)
                    reason, metadata = info.reason, dict(info.metadata)
                elif any_detail.type_url == _BAD_REQUEST_URL:
                    bad = error_details_pb2.BadRequest.FromString(any_detail.value)
                    violations += [(v.field, v.description) for v in bad.field_violations]
        return cls(method, err.code(), err.details() or "", reason, metadata, violations)


def _read(path, what):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ValueError("%s: cannot read %s: %s" % (what, path, e.strerror)) from None


def _is_loopback(address):
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def connection_settings(address=None, context=None, environ=None):
    """What loomctl uses to reach loomd, for the Python client: arguments win, then the
    environment (LOOM_SERVER, LOOM_CA, LOOM_CERT, LOOM_KEY, LOOM_TOKEN, LOOM_TOKEN_FILE,
    LOOM_SERVER_NAME, LOOM_CONTEXT), then a context of $LOOMCONFIG or
    ~/.config/loom/config.json (docs/security.md). Returns Client keyword arguments."""
    env = os.environ if environ is None else environ
    out = {"address": address or env.get("LOOM_SERVER") or "",
           "ca": env.get("LOOM_CA") or None, "cert": env.get("LOOM_CERT") or None,
           "key": env.get("LOOM_KEY") or None, "token": env.get("LOOM_TOKEN") or None,
           "token_file": env.get("LOOM_TOKEN_FILE") or None,
           "server_name": env.get("LOOM_SERVER_NAME") or None}
    path = env.get("LOOMCONFIG") or os.path.join(env.get("HOME", "/nonexistent"), ".config",
                                                 "loom", "config.json")
    if os.path.exists(path) or env.get("LOOMCONFIG"):
        doc = json.loads(_read(path, "LOOMCONFIG"))
        want = context or env.get("LOOM_CONTEXT") or doc.get("currentContext") or ""
        ctx = next((c for c in doc.get("contexts", []) if not want or c.get("name") == want), None)
        if ctx is None and want:
            raise ValueError("%s: no context named %r" % (path, want))
        base = os.path.dirname(os.path.abspath(path))
        for key, field, is_path in (("address", "server", False), ("ca", "ca", True),
                                    ("cert", "cert", True), ("key", "key", True),
                                    ("token_file", "tokenFile", True),
                                    ("server_name", "serverName", False)):
            value = (ctx or {}).get(field)
            if value and not out[key]:
                out[key] = os.path.join(base, value) if is_path else value
    out["address"] = out["address"] or "127.0.0.1:50061"
    return out


class Client:
    """One channel to loomd. `timeout`: default deadline of a call, seconds; `retries`:
    attempts after the first on UNAVAILABLE / DEADLINE_EXCEEDED (with backoff from
    `backoff` seconds, doubling, at most 5 s).

    Security (docs/security.md): `ca` (PEM path) turns on TLS and verifies loomd's
    certificate; `cert` + `key` present a client certificate (mTLS); `token` or
    `token_file` sends a bearer token (JWT) with every call; `server_name` is the name to
    verify in loomd's certificate. Client.from_environment() takes them as loomctl does."""

    def __init__(self, address, timeout=10.0, retries=5, backoff=0.2, channel=None, ca=None,
                 cert=None, key=None, token=None, token_file=None, server_name=None):
        self.address = address
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        if bool(cert) != bool(key):
            raise ValueError("cert and key go together (client certificate and its key)")
        self._token_file = token_file if token is None else None
        self._token_mtime = None
        if token is None and token_file:
            token = self._read_token()
        self._metadata = (("authorization", "Bearer " + token),) if token else ()
        if channel is None:
            if ca or cert:
                creds = grpc.ssl_channel_credentials(
                    root_certificates=_read(ca, "ca") if ca else None,
                    private_key=_read(key, "key") if key else None,
                    certificate_chain=_read(cert, "cert") if cert else None)
                options = ((("grpc.ssl_target_name_override", server_name),)
                           if server_name else ())
                channel = grpc.secure_channel(address, creds, options=options)
            else:
                if token and not _is_loopback(address):
                    raise ValueError("refusing to send a bearer token in plaintext to %s "
                                     "(give ca= for TLS, or use a loopback address)" % address)
                channel = grpc.insecure_channel(address)
        self._channel = channel

    def _read_token(self):
        self._token_mtime = os.stat(self._token_file).st_mtime_ns
        token = _read(self._token_file, "token_file").decode().strip()
        if not token:
            raise ValueError("token_file: %s is empty" % self._token_file)
        return token

    def _call_metadata(self):
        """The call metadata; a token file is read again when it changed (short-lived
        tokens renewed on disk, as Kubernetes projects them)."""
        if self._token_file:
            try:
                if os.stat(self._token_file).st_mtime_ns != self._token_mtime:
                    self._metadata = (("authorization", "Bearer " + self._read_token()),)
            except (OSError, ValueError):
                pass  # keep the last token; the server says if it is no longer good
        return self._metadata

    @classmethod
    def from_environment(cls, address=None, context=None, **kwargs):
        """A client set up like loomctl: see connection_settings()."""
        settings = connection_settings(address, context)
        settings.update(kwargs)
        return cls(**settings)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- plumbing -------------------------------------------------------------------

    def _unary(self, service, method, request, response_cls, timeout):
        call = self._channel.unary_unary(
            "/loom.v1.%s/%s" % (service, method),
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_cls.FromString)
        delay = self.backoff
        for attempt in range(self.retries + 1):
            try:
                return call(request, timeout=self.timeout if timeout is None else timeout,
                            metadata=self._call_metadata())
            except grpc.RpcError as err:
                if err.code() not in _RETRYABLE or attempt == self.retries:
                    raise LoomError.from_rpc_error(method, err) from None
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
        raise AssertionError("unreachable")

    @staticmethod
    def _with_request_id(request, request_id):
        request.request_id = request_id or request.request_id or uuid.uuid4().hex
        return request

    def _watch(self, service, method, request, response_cls, revision_of):
        """Yields responses, reopening the stream from the revision after the last one
        yielded when it is cut (RESOURCE_EXHAUSTED) or broken (UNAVAILABLE)."""
        stream = self._channel.unary_stream(
            "/loom.v1.%s/%s" % (service, method),
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_cls.FromString)
        next_revision = request.start_revision
        delay = self.backoff
        failures = 0
        while True:
            req = type(request)()
            req.CopyFrom(request)
            req.start_revision = next_revision
            try:
                for resp in stream(req, metadata=self._call_metadata()):
                    rev = revision_of(resp)
                    if next_revision and rev < next_revision:
                        continue  # delivered before the stream was reopened
                    next_revision = rev + 1
                    failures = 0
                    delay = self.backoff
                    yield resp
                return  # a replay-only watch ended
            except grpc.RpcError as err:
                if err.code() not in (grpc.StatusCode.RESOURCE_EXHAUSTED,
                                      grpc.StatusCode.UNAVAILABLE) or failures >= self.retries:
                    raise LoomError.from_rpc_error(method, err) from None
                e = LoomError.from_rpc_error(method, err)
                resume = int(e.metadata.get("resume_revision", "0") or 0)
                if not next_revision and resume:
                    next_revision = resume
                failures += 1
            time.sleep(delay)
            delay = min(delay * 2, 5.0)

    # -- SchedulerService ---------------------------------------------------------

    def register_job(self, job, request_id="", timeout=None):
        """Registers `job` (a loom.v1.Job); returns RegisterJobResponse (the job with its
        paths). Retried with one request_id: a retry of a registration that landed gets
        the first answer."""
        req = self._with_request_id(ss.RegisterJobRequest(job=job), request_id)
        return self._unary("SchedulerService", "RegisterJob", req, ss.RegisterJobResponse,
                           timeout)

    def update_job(self, job, request_id="", timeout=None):
        req = self._with_request_id(ss.UpdateJobRequest(job=job), request_id)
        return self._unary("SchedulerService", "UpdateJob", req, ss.UpdateJobResponse, timeout)

    def release_job(self, job_id, request_id="", timeout=None):
        req = self._with_request_id(ss.ReleaseJobRequest(job_id=job_id), request_id)
        return self._unary("SchedulerService", "ReleaseJob", req, ss.ReleaseJobResponse,
                           timeout)

    def get_job(self, job_id, timeout=None):
        return self._unary("SchedulerService", "GetJob", ss.GetJobRequest(job_id=job_id),
                           ss.GetJobResponse, timeout)

    def list_jobs(self, tenant="", page_size=0, page_token="", timeout=None):
        req = ss.ListJobsRequest(tenant=tenant, page_size=page_size, page_token=page_token)
        return self._unary("SchedulerService", "ListJobs", req, ss.ListJobsResponse, timeout)

    def all_jobs(self, tenant="", page_size=500):
        """Every job (of `tenant`), page by page."""
        token = ""
        while True:
            page = self.list_jobs(tenant=tenant, page_size=page_size, page_token=token)
            yield from page.jobs
            token = page.next_page_token
            if not token:
                return

    def get_job_health(self, job_id, timeout=None):
        return self._unary("SchedulerService", "GetJobHealth",
                           ss.GetJobHealthRequest(job_id=job_id), ss.GetJobHealthResponse,
                           timeout)

    def watch_jobs(self, start_revision=0, tenant=""):
        """Yields WatchJobsResponse (revision, change, job) from `start_revision` (0: new
        changes only), resuming by itself."""
        req = ss.WatchJobsRequest(start_revision=start_revision, tenant=tenant)
        return self._watch("SchedulerService", "WatchJobs", req, ss.WatchJobsResponse,
                           lambda r: r.revision)

    # -- FabricService ------------------------------------------------------------

    def get_topology(self, timeout=None):
        return self._unary("FabricService", "GetTopology", fs.GetTopologyRequest(),
                           fs.GetTopologyResponse, timeout).topology

    def list_links(self, device="", drained_only=False, timeout=None):
        req = fs.ListLinksRequest(device=device, drained_only=drained_only)
        return self._unary("FabricService", "ListLinks", req, fs.ListLinksResponse,
                           timeout).links

    def get_link(self, link_id, timeout=None):
        return self._unary("FabricService", "GetLink", fs.GetLinkRequest(link_id=link_id),
                           fs.GetLinkResponse, timeout).link

    def drain_link(self, link_id, reason, request_id="", timeout=None):
        req = self._with_request_id(fs.DrainLinkRequest(link_id=link_id, reason=reason),
                                    request_id)
        return self._unary("FabricService", "DrainLink", req, fs.DrainLinkResponse, timeout)

    def undrain_link(self, link_id, request_id="", timeout=None):
        req = self._with_request_id(fs.UndrainLinkRequest(link_id=link_id), request_id)
        return self._unary("FabricService", "UndrainLink", req, fs.UndrainLinkResponse, timeout)

    def get_device_state(self, device, format=0, adapter="", timeout=None):
        req = fs.GetDeviceStateRequest(device=device, format=format, adapter=adapter)
        return self._unary("FabricService", "GetDeviceState", req, fs.GetDeviceStateResponse,
                           timeout)

    def list_devices(self, device="", timeout=None):
        return self._unary("FabricService", "ListDevices", fs.ListDevicesRequest(device=device),
                           fs.ListDevicesResponse, timeout).devices

    def get_change_plan(self, timeout=None):
        return self._unary("FabricService", "GetChangePlan", fs.GetChangePlanRequest(),
                           fs.GetChangePlanResponse, timeout)

    def apply_change_plan(self, revision, timeout=None):
        return self._unary("FabricService", "ApplyChangePlan",
                           fs.ApplyChangePlanRequest(revision=revision),
                           fs.ApplyChangePlanResponse, timeout)

    def clear_change_quarantine(self, revision, timeout=None):
        return self._unary("FabricService", "ClearChangeQuarantine",
                           fs.ClearChangeQuarantineRequest(revision=revision),
                           fs.ClearChangeQuarantineResponse, timeout)

    def watch_events(self, start_revision=0, types=(), subject="", replay_only=False):
        """Yields loom.v1.Event from `start_revision` (0: new events only), resuming by
        itself; with `replay_only` it ends after the history."""
        req = fs.WatchEventsRequest(start_revision=start_revision, types=list(types),
                                    subject=subject, replay_only=replay_only)
        for resp in self._watch("FabricService", "WatchEvents", req, fs.WatchEventsResponse,
                                lambda r: r.event.revision):
            yield resp.event
