"""Python client of Loom's loom.v1 gRPC API.

    from loom_client import Client, LoomError
    from loom.v1 import job_pb2

    with Client("127.0.0.1:50061") as loom:
        job = job_pb2.Job(tenant="acme", job_id="train-1", endpoints=["host000-gpu0", ...])
        resp = loom.register_job(job)                 # retried safely: one request_id
        print(resp.job.status.assignment.reason)
        for ev in loom.watch_events(start_revision=1):  # resumes by itself
            print(ev.revision, ev.subject, ev.result)

Every call has a deadline (the client's `timeout`, or `timeout=` per call). Calls that
change state carry a `request_id` (generated when not given) and are retried with the same
id when loomd is unreachable or restarting (UNAVAILABLE, DEADLINE_EXCEEDED), so a retry of a
write that landed gets its first answer instead of doing it twice; reads are retried the
same way. Errors are raised as LoomError with the gRPC code, Loom's message (which names
the field) and the details loomd sent (ErrorInfo reasons and metadata). Watches follow the
resume protocol of docs/watch.md: a stream cut for being slow (RESOURCE_EXHAUSTED) or broken
by a restart (UNAVAILABLE) is reopened from the revision after the last one delivered, and
no revision is delivered twice; a start revision already compacted raises LoomError
(OUT_OF_RANGE, `compacted_revision` in its metadata).
"""
from loom_client.client import Client, LoomError, connection_settings  # noqa: F401

__all__ = ["Client", "LoomError", "connection_settings"]
