#!/usr/bin/python3
"""A non-C++ scheduler client: Debian's python3-grpcio talking to the real loomd.

Message classes are generated from api/proto with protoc --python_out at test
time; the RPCs are called through grpcio's generic channel methods, the way a
Python scheduler plugin would. Health and reflection are checked on the wire.
"""
import argparse
import os
import subprocess
import sys
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomd_harness import Loomd, generate_messages, unary  # noqa: E402

ARGS = None
pb = {}


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.loomd = Loomd(ARGS.loomd, ARGS.topology)
        cls.channel = grpc.insecure_channel(cls.loomd.grpc_address)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.loomd.stop()

    def job(self, job_id):
        j = pb["job"].Job(tenant="py-tenant", job_id=job_id,
                          endpoints=["host000-gpu0", "host002-gpu1"], traffic_class=3,
                          collective=pb["job"].COLLECTIVE_PATTERN_ALL_TO_ALL)
        j.qp_ranges.add(first=10, last=20)
        return j

    def test_register_get_list_release(self):
        s = pb["sched"]
        resp = unary(self.channel, "SchedulerService", "RegisterJob",
                     s.RegisterJobRequest(job=self.job("py-1"), request_id="py-req-1"),
                     s.RegisterJobResponse)
        self.assertEqual(resp.job.status.state, pb["job"].JOB_STATE_ASSIGNED)
        self.assertTrue(resp.job.status.assignment.routes, "TELB pins each destination")
        again = unary(self.channel, "SchedulerService", "RegisterJob",
                      s.RegisterJobRequest(job=self.job("py-1"), request_id="py-req-1"),
                      s.RegisterJobResponse)
        self.assertEqual(again, resp, "a retry with the same request id gets the same answer")
        got = unary(self.channel, "SchedulerService", "GetJob", s.GetJobRequest(job_id="py-1"),
                    s.GetJobResponse)
        self.assertEqual(got.job.tenant, "py-tenant")
        listed = unary(self.channel, "SchedulerService", "ListJobs",
                       s.ListJobsRequest(tenant="py-tenant"), s.ListJobsResponse)
        self.assertIn("py-1", [j.job_id for j in listed.jobs])
        rel = unary(self.channel, "SchedulerService", "ReleaseJob",
                    s.ReleaseJobRequest(job_id="py-1"), s.ReleaseJobResponse)
        self.assertEqual(rel.job.status.state, pb["job"].JOB_STATE_RELEASED)
        with self.assertRaises(grpc.RpcError) as err:
            unary(self.channel, "SchedulerService", "GetJob", s.GetJobRequest(job_id="py-1"),
                  s.GetJobResponse)
        self.assertEqual(err.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_invalid_argument_names_field(self):
        s = pb["sched"]
        j = self.job("py-bad")
        j.qp_ranges.add(first=15, last=30)
        with self.assertRaises(grpc.RpcError) as err:
            unary(self.channel, "SchedulerService", "RegisterJob", s.RegisterJobRequest(job=j),
                  s.RegisterJobResponse)
        self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("job.qp_ranges[1]", err.exception.details())

    def test_stated_traffic_matrix_is_the_prior(self):
        s = pb["sched"]
        j = pb["job"].Job(tenant="py-tenant", job_id="py-tm",
                          endpoints=["host000-gpu0", "host001-gpu0", "host002-gpu0",
                                     "host003-gpu0"],
                          traffic_class=3, collective=pb["job"].COLLECTIVE_PATTERN_PERMUTATION)
        # The real pairs: host000 <-> host002 and host001 <-> host003, across leaves.
        for a, b in (("host000-gpu0", "host002-gpu0"), ("host002-gpu0", "host000-gpu0"),
                     ("host001-gpu0", "host003-gpu0"), ("host003-gpu0", "host001-gpu0")):
            j.traffic.add(src=a, dst=b, weight=1.0)
        resp = unary(self.channel, "SchedulerService", "RegisterJob",
                     s.RegisterJobRequest(job=j), s.RegisterJobResponse)
        a = resp.job.status.assignment
        self.assertIn("demand: the scheduler's traffic matrix (4 entries)", a.reason)
        self.assertEqual(sorted(r.destination for r in a.routes),
                         ["host000-nic0", "host001-nic0", "host002-nic0", "host003-nic0"])
        unary(self.channel, "SchedulerService", "ReleaseJob",
              s.ReleaseJobRequest(job_id="py-tm"), s.ReleaseJobResponse)
        # An entry naming a GPU that is not the job's is refused, naming the entry.
        j.job_id = "py-tm-bad"
        j.traffic.add(src="host000-gpu0", dst="host003-gpu1", weight=1.0)
        with self.assertRaises(grpc.RpcError) as err:
            unary(self.channel, "SchedulerService", "RegisterJob", s.RegisterJobRequest(job=j),
                  s.RegisterJobResponse)
        self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("job.traffic[4].dst", err.exception.details())

    def test_drain_and_watch_events(self):
        f = pb["fabric"]
        link = "leaf1:Ethernet0--spine0:Ethernet1"
        d = unary(self.channel, "FabricService", "DrainLink",
                  f.DrainLinkRequest(link_id=link, reason="python test"), f.DrainLinkResponse)
        self.assertEqual(d.link.admin_state, f.LINK_ADMIN_STATE_DRAINED)
        watch = self.channel.unary_stream("/loom.v1.FabricService/WatchEvents",
                                          request_serializer=lambda m: m.SerializeToString(),
                                          response_deserializer=f.WatchEventsResponse.FromString)
        events = list(watch(f.WatchEventsRequest(start_revision=1, replay_only=True), timeout=10))
        drained = [e.event for e in events if e.event.type == pb["event"].EVENT_TYPE_LINK_DRAINED]
        self.assertTrue(any(e.subject == link and "python test" in e.cause for e in drained))
        revisions = [e.event.revision for e in events]
        self.assertEqual(revisions, sorted(revisions))

    def test_undecodable_body_is_invalid_argument_naming_the_type(self):
        # gRPC 1.51's callback server would answer UNIMPLEMENTED with no message.
        garbage = b"\xff\xff\xff\xff\x0f\x0a\x05abc"
        for service, method in [("SchedulerService", "RegisterJob"),
                                ("SchedulerService", "ReleaseJob"),
                                ("FabricService", "DrainLink"),
                                ("FabricService", "ListLinks")]:
            call = self.channel.unary_unary(f"/loom.v1.{service}/{method}",
                                            request_serializer=lambda b: b,
                                            response_deserializer=lambda b: b)
            with self.assertRaises(grpc.RpcError) as err:
                call(garbage, timeout=10)
            self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT, method)
            self.assertIn(f"not a valid loom.v1.{method}Request", err.exception.details())
        watch = self.channel.unary_stream("/loom.v1.FabricService/WatchEvents",
                                          request_serializer=lambda b: b,
                                          response_deserializer=lambda b: b)
        with self.assertRaises(grpc.RpcError) as err:
            list(watch(garbage, timeout=10))
        self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("loom.v1.WatchEventsRequest", err.exception.details())

    def test_oversized_inputs_are_refused_with_a_clipped_quote(self):
        f = pb["fabric"]
        link = "leaf1:Ethernet1--spine1:Ethernet1"
        # A 3 MiB drain reason: refused (1 KiB at most); the error quotes 64 bytes of it.
        with self.assertRaises(grpc.RpcError) as err:
            unary(self.channel, "FabricService", "DrainLink",
                  f.DrainLinkRequest(link_id=link, reason="x" * (3 << 20)), f.DrainLinkResponse)
        self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("reason: 3145728 bytes, at most 1024", err.exception.details())
        self.assertLess(len(err.exception.details()), 300)
        # Everyone can still list the links.
        links = unary(self.channel, "FabricService", "ListLinks", f.ListLinksRequest(),
                      f.ListLinksResponse)
        self.assertTrue(links.links)
        # 100,000 labels: refused (64 at most).
        j = self.job("py-labels")
        for i in range(100000):
            j.labels[f"k{i}"] = "v"
        with self.assertRaises(grpc.RpcError) as err:
            unary(self.channel, "SchedulerService", "RegisterJob",
                  pb["sched"].RegisterJobRequest(job=j), pb["sched"].RegisterJobResponse)
        self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("job.labels: 100000 labels, at most 64", err.exception.details())
        # A 1 MB job id is quoted clipped, not echoed.
        with self.assertRaises(grpc.RpcError) as err:
            unary(self.channel, "SchedulerService", "GetJob",
                  pb["sched"].GetJobRequest(job_id="j" * 1000000), pb["sched"].GetJobResponse)
        self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("(1000000 bytes)", err.exception.details())
        self.assertLess(len(err.exception.details()), 300)

    def test_health_and_reflection(self):
        check = self.channel.unary_unary("/grpc.health.v1.Health/Check",
                                         request_serializer=lambda b: b,
                                         response_deserializer=lambda b: b)
        # HealthCheckResponse{status: SERVING(1)} encodes as field 1 varint 1.
        self.assertEqual(check(b"", timeout=10), b"\x08\x01")
        svc = b"loom.v1.SchedulerService"
        self.assertEqual(check(b"\x0a" + bytes([len(svc)]) + svc, timeout=10), b"\x08\x01")
        refl = self.channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflectionInfo".replace(
                "ServerReflectionInfo", "ServerReflection/ServerReflectionInfo"),
            request_serializer=lambda b: b, response_deserializer=lambda b: b)
        # ServerReflectionRequest{list_services: ""} = field 7, length 0.
        answers = list(refl(iter([b"\x3a\x00"]), timeout=10))
        self.assertTrue(answers)
        self.assertIn(b"loom.v1.SchedulerService", answers[0])
        self.assertIn(b"loom.v1.FabricService", answers[0])

    def test_reflection_v1_as_a_v1_only_client_uses_it(self):
        """grpc.reflection.v1 (generated from Debian's grpc-proto): services listed,
        files resolved with their dependencies for services, methods and messages, the
        health service resolvable, unknown names answered NOT_FOUND, and the same files
        as v1alpha gives for the same symbol."""
        import tempfile
        from google.protobuf import descriptor_pb2
        out = tempfile.mkdtemp(prefix="loom-refl-")
        subprocess.check_call(["protoc", "-I", "/usr/share/grpc-proto", "--python_out", out,
                               "grpc/reflection/v1/reflection.proto",
                               "grpc/reflection/v1alpha/reflection.proto"])
        import importlib.util

        def load(name, path):  # not importable as grpc.*: that is grpcio's package
            spec = importlib.util.spec_from_file_location(name, os.path.join(out, path))
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod
        v1 = load("loom_test_reflection_v1", "grpc/reflection/v1/reflection_pb2.py")
        v1alpha = load("loom_test_reflection_v1alpha",
                       "grpc/reflection/v1alpha/reflection_pb2.py")

        def ask(version, mod, requests):
            call = self.channel.stream_stream(
                "/grpc.reflection.%s.ServerReflection/ServerReflectionInfo" % version,
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=mod.ServerReflectionResponse.FromString)
            return list(call(iter(requests), timeout=10))

        R = v1.ServerReflectionRequest
        answers = ask("v1", v1, [
            R(host="h", list_services=""),
            R(file_containing_symbol="loom.v1.SchedulerService"),
            R(file_containing_symbol="loom.v1.SchedulerService.RegisterJob"),
            R(file_containing_symbol="grpc.health.v1.Health"),
            R(file_by_filename="loom/v1/job.proto"),
            R(file_containing_symbol="loom.v1.NoSuchThing"),
        ])
        self.assertEqual(len(answers), 6)
        self.assertEqual(answers[0].valid_host, "h")
        names = {s.name for s in answers[0].list_services_response.service}
        self.assertLessEqual({"loom.v1.FabricService", "loom.v1.SchedulerService",
                              "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"},
                             names)

        def files(a):
            return [descriptor_pb2.FileDescriptorProto.FromString(b)
                    for b in a.file_descriptor_response.file_descriptor_proto]
        sched = files(answers[1])
        self.assertEqual(sched[0].name, "loom/v1/scheduler_service.proto")
        self.assertIn("SchedulerService", [s.name for s in sched[0].service])
        # Dependencies come along (job.proto), each file once per stream: the method's
        # answer (same file) carries nothing new.
        self.assertIn("loom/v1/job.proto", [f.name for f in sched])
        self.assertEqual(len(set(f.name for f in sched)), len(sched))
        health = files(answers[3])
        self.assertEqual(health[0].package, "grpc.health.v1")
        self.assertIn("Health", [s.name for s in health[0].service])
        self.assertEqual(answers[5].error_response.error_code, grpc.StatusCode.NOT_FOUND.value[0])
        self.assertIn("loom.v1.NoSuchThing", answers[5].error_response.error_message)
        # The same file as v1alpha serves for the symbol.
        alpha = ask("v1alpha", v1alpha, [v1alpha.ServerReflectionRequest(
            file_containing_symbol="loom.v1.SchedulerService")])
        alpha_first = descriptor_pb2.FileDescriptorProto.FromString(
            alpha[0].file_descriptor_response.file_descriptor_proto[0])
        self.assertEqual(alpha_first, sched[0])


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--loomd", required=True)
    parser.add_argument("--proto-dir", required=True)
    parser.add_argument("--topology", required=True)
    ARGS, rest = parser.parse_known_args()
    pb.update(generate_messages(ARGS.proto_dir))
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
