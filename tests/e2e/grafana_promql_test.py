#!/usr/bin/python3
"""Every PromQL query of every Grafana dashboard, against a real Prometheus.

Starts, on free loopback ports:
  * loomd A with the embedded emulator running tests/e2e/data/scenario-dashboards.json
    (a link down, a degraded link, a PFC storm from a NIC; ECN and CNPs all along),
    with a link drained and some API calls (one NOT_FOUND) made through loomctl;
  * loomd B on the same topology without the emulator, programming leaf0 over BGP to a
    closed port (sessions down, leaf0 out of sync, apply failures) and watching the
    switches over gNMI: loom-fabric serves them all (live targets: ages), leaf0's target
    is a closed port (a target down). B exports the southbound and gNMI-target families
    that --emulate cannot have;
  * Debian's prometheus scraping both every second.
Then evaluates every target expr of deploy/grafana/dashboards/*.json with
/api/v1/query (template variables from their own label_values() queries on the live
data; $__rate_interval, $__interval and $__range as concrete durations): each must
parse and return at least one series, except queries on the families in
NOT_EXPORTED_YET, which must parse and return nothing. Also checks that every panel,
target and variable uses the provisioned datasource uid and that every metric family
a query names is in docs/metrics.md.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loomd_harness import start_process  # noqa: E402

from loomd_harness import free_port  # noqa: E402

ARGS = None

DATASOURCE_UID = "loom-prometheus"

# Families the dashboards query that loomd does not export yet. Queries on them
# must parse and return no series; everything else must return data. When loomd
# starts exporting one, this test fails until it is removed from here.
NOT_EXPORTED_YET = set()  # families a dashboard may query before loomd exports them

# Grafana's interval variables, as Grafana would set them for a short range
# over a 1 s scrape (rate windows must hold several samples).
DURATIONS = {"$__rate_interval": "15s", "$__interval": "5s", "$__range": "5m",
             "${__rate_interval}": "15s", "${__interval}": "5s", "${__range}": "5m"}

# PromQL words that look like metric names but are not.
PROMQL_WORDS = {
    "sum", "max", "min", "avg", "count", "topk", "bottomk", "by", "without", "rate",
    "increase", "irate", "histogram_quantile", "label_replace", "time", "on", "ignoring",
    "group_left", "group_right", "and", "or", "unless", "offset", "bool", "le",
    "label_values", "vector", "scalar", "abs", "clamp_min", "clamp_max", "delta", "deriv",
}




def wait_file(path, proc, timeout=30):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise RuntimeError("process exited early (%s)" % path)
        if time.monotonic() > deadline:
            raise RuntimeError("timed out waiting for " + path)
        time.sleep(0.05)
    time.sleep(0.05)  # written whole by then
    with open(path) as f:
        return json.load(f)


def metric_names(expr):
    """Metric names an expression selects (identifiers outside braces, strings and
    by/without lists that are not PromQL words)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)      # strings
    e = re.sub(r"\{[^}]*\}", "{}", e)                  # label matchers
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\[[^\]]*\]", "", e)                   # range selectors
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        w = m.group(0)
        nxt = e[m.end():].lstrip()[:1]
        if w in PROMQL_WORDS or nxt == "(" or w.startswith("$"):
            continue
        names.add(w)
    return names


def family(name):
    for suffix in ("_bucket", "_count", "_sum"):
        if name.endswith(suffix) and name.startswith("loom_"):
            return name[: -len(suffix)]
    return name


class Prometheus:
    def __init__(self, url):
        self.url = url

    def query(self, expr):
        data = urllib.parse.urlencode({"query": expr}).encode()
        req = urllib.request.Request(self.url + "/api/v1/query", data=data)
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                return json.loads(r.read().decode())
        except urllib.error.HTTPError as e:  # 400 on a parse error, with a JSON body
            return json.loads(e.read().decode())


class GrafanaPromqlTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="loom-grafana-")
        self.procs = []

    def tearDown(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            p.log_file.close()
        if os.environ.get("LOOM_KEEP_TEST_DIR"):
            print("kept", self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def start(self, name, argv):
        p = start_process(argv, os.path.join(self.dir, name + ".log"))
        self.procs.append(p)
        return p

    def log(self, name):
        with open(os.path.join(self.dir, name + ".log")) as f:
            return f.read()[-4000:]

    def loomctl(self, grpc_port, *args, ok=True):
        r = subprocess.run([ARGS.loomctl, "--server", "127.0.0.1:%d" % grpc_port] + list(args),
                           capture_output=True, text=True, timeout=20)
        if ok:
            self.assertEqual(r.returncode, 0, "loomctl %s: %s" % (" ".join(args), r.stderr))
        return r

    def test_every_panel_query_returns_series(self):
        t0 = time.monotonic()
        d = self.dir
        # loomd A: the embedded emulator with faults.
        a = self.start("loomd-a", [ARGS.loomd, "--emulate", ARGS.scenario, "--db", os.path.join(d, "a.db"),
                                   "--grpc-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                                   "--ready-file", os.path.join(d, "a.json")])
        # loom-fabric serving the topology's switches over gNMI, for loomd B.
        fab = self.start("fabric", [ARGS.fabric, ARGS.fabric_scenario, "--gnmi-listen", "127.0.0.1:0",
                                    "--ready-file", os.path.join(d, "fabric.json")])
        gnmi_port = wait_file(os.path.join(d, "fabric.json"), fab)["gnmi_port"]
        # loomd B: leaf0 programmed over BGP (a closed port) with its gNMI target at a
        # closed port; the other switches watched through loom-fabric.
        cfg = {"devices": [{"id": "leaf0",
                            "bgp": {"localAs": 65000, "routerId": "198.18.255.1", "address": "127.0.0.1",
                                    "port": 1, "sessions": [
                                        {"via": "spine0", "nextHop": "198.19.0.1", "localAddress": "127.0.0.2"},
                                        {"via": "spine1", "nextHop": "198.19.0.3", "localAddress": "127.0.0.3"}]},
                            "gnmi": {"address": "127.0.0.1:1", "platform": "loom-fabric"}}]}
        with open(os.path.join(d, "b-config.json"), "w") as f:
            json.dump(cfg, f)
        b = self.start("loomd-b", [ARGS.loomd, "--topology", ARGS.topology, "--config", os.path.join(d, "b-config.json"),
                                   "--db", os.path.join(d, "b.db"), "--telemetry-address", "127.0.0.1:%d" % gnmi_port,
                                   "--grpc-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                                   "--ready-file", os.path.join(d, "b.json")])
        ra = wait_file(os.path.join(d, "a.json"), a)
        rb = wait_file(os.path.join(d, "b.json"), b)

        # Operator actions the dashboards show: a drain, API calls, one refused.
        self.loomctl(ra["grpc_port"], "links", "drain", "leaf1:Ethernet1--spine1:Ethernet1", "--reason", "dashboard test")
        self.loomctl(ra["grpc_port"], "links", "list")
        self.loomctl(ra["grpc_port"], "jobs", "list")
        self.assertEqual(self.loomctl(ra["grpc_port"], "jobs", "get", "missing", ok=False).returncode, 1)
        self.loomctl(rb["grpc_port"], "jobs", "register", ARGS.job)

        prom_port = free_port()
        with open(os.path.join(d, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: loomd\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d', '127.0.0.1:%d']\n"
                    % (ra["metrics_port"], rb["metrics_port"]))
        prom = self.start("prometheus", [ARGS.prometheus, "--config.file", os.path.join(d, "prometheus.yml"),
                                         "--storage.tsdb.path", os.path.join(d, "tsdb"),
                                         "--web.listen-address", "127.0.0.1:%d" % prom_port])
        p = Prometheus("http://127.0.0.1:%d" % prom_port)

        # Wait for both targets to have been scraped a few times and for the faults
        # (storm origin, out-of-placement causes, B's session state) to be in the TSDB.
        ready = {
            "scrapes": 'min(count_over_time(up{job="loomd"}[1m])) >= 8 and min(up{job="loomd"}) == 1',
            "storm": "loom_pfc_storm_origin",
            "causes": 'count(count by (cause) (loom_link_out_of_placement)) >= 3',
            "bgp": "loom_bgp_session_up",
            "age": "loom_telemetry_last_update_age_seconds",
            "not found": 'loom_grpc_requests_total{code="NOT_FOUND"}',
        }
        deadline = time.monotonic() + 45
        pending = dict(ready)
        while pending and time.monotonic() < deadline:
            self.assertIsNone(prom.poll(), "prometheus exited:\n" + self.log("prometheus"))
            for k, expr in list(pending.items()):
                try:
                    r = p.query(expr)
                except OSError:
                    break  # not listening yet
                if r.get("status") == "success" and r["data"]["result"]:
                    del pending[k]
            time.sleep(0.5)
        self.assertFalse(pending, "never in Prometheus: %s\nloomd A:\n%s\nloomd B:\n%s"
                         % (pending, self.log("loomd-a"), self.log("loomd-b")))
        print("data ready after %.1f s" % (time.monotonic() - t0))

        with open(ARGS.metrics_doc) as f:
            docs = f.read()
        files = sorted(glob.glob(os.path.join(ARGS.dashboards, "*.json")))
        self.assertEqual(len(files), 3, files)
        failures, checked, with_data, expected_empty = [], 0, 0, 0
        for path in files:
            with open(path) as f:
                dash = json.load(f)
            name = os.path.basename(path)
            # Template variables: label_values(selector, label) on the live data.
            values = {}
            for v in dash.get("templating", {}).get("list", []):
                if (v.get("datasource") or {}).get("uid") != DATASOURCE_UID:
                    failures.append("%s: variable %s: datasource is not %s" % (name, v["name"], DATASOURCE_UID))
                query = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
                m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\)\s*", query)
                self.assertIsNotNone(m, "%s: variable %s: unsupported query %r" % (name, v["name"], query))
                selector = self.substitute(m.group(1), values)
                r = p.query(selector)
                fams = {family(n) for n in metric_names(selector)}
                if r.get("status") != "success":
                    failures.append("%s: variable %s: %s: %s" % (name, v["name"], query, r.get("error")))
                    continue
                found = sorted({s["metric"].get(m.group(2)) for s in r["data"]["result"]} - {None})
                if fams & NOT_EXPORTED_YET:
                    if found:
                        failures.append("%s: variable %s: %s now has data: remove it from NOT_EXPORTED_YET"
                                        % (name, v["name"], fams & NOT_EXPORTED_YET))
                    values[v["name"]] = v.get("allValue") or ".*"
                elif not found:
                    failures.append("%s: variable %s: no values from %s" % (name, v["name"], query))
                else:
                    values[v["name"]] = found[0]

            for panel in self.panels(dash):
                title = panel.get("title", "")
                if (panel.get("datasource") or {}).get("uid") != DATASOURCE_UID:
                    failures.append("%s: panel %r: datasource is not %s" % (name, title, DATASOURCE_UID))
                for t in panel.get("targets", []):
                    if (t.get("datasource") or {}).get("uid") != DATASOURCE_UID:
                        failures.append("%s: panel %r target %s: datasource is not %s"
                                        % (name, title, t.get("refId"), DATASOURCE_UID))
                    expr = self.substitute(t["expr"], values)
                    checked += 1
                    fams = {family(n) for n in metric_names(expr)}
                    for f in sorted(fams):
                        if f not in NOT_EXPORTED_YET and not f.startswith("process_") and "`%s`" % f not in docs:
                            failures.append("%s: panel %r: %s is not in docs/metrics.md\n    %s" % (name, title, f, expr))
                    r = p.query(expr)
                    if r.get("status") != "success":
                        failures.append("%s: panel %r: query failed: %s\n    %s" % (name, title, r.get("error"), expr))
                        continue
                    n = len(r["data"]["result"])
                    if fams & NOT_EXPORTED_YET:
                        expected_empty += 1
                        if n:
                            failures.append("%s: panel %r: %s now has data: remove it from NOT_EXPORTED_YET\n    %s"
                                            % (name, title, fams & NOT_EXPORTED_YET, expr))
                    elif n == 0:
                        failures.append("%s: panel %r: no series\n    %s" % (name, title, expr))
                    else:
                        with_data += 1
        print("dashboards: %d; queries checked: %d; returned series: %d; expected empty "
              "(not exported yet: %s): %d; %.1f s in all"
              % (len(files), checked, with_data, ", ".join(sorted(NOT_EXPORTED_YET)), expected_empty,
                 time.monotonic() - t0))
        self.assertFalse(failures, "\n" + "\n".join(failures))

        # The provisioned datasource carries the uid the dashboards use.
        with open(ARGS.datasource) as f:
            ds = f.read()
        self.assertRegex(ds, r"(?m)^\s*uid:\s*%s\s*$" % DATASOURCE_UID)
        self.assertRegex(ds, r"(?m)^\s*type:\s*prometheus\s*$")

    @staticmethod
    def panels(dash):
        for pnl in dash.get("panels", []):
            if pnl.get("type") == "row":
                yield from pnl.get("panels", [])
            else:
                yield pnl

    @staticmethod
    def substitute(expr, values):
        for k, v in DURATIONS.items():
            expr = expr.replace(k, v)
        for k, v in values.items():
            expr = expr.replace("${%s}" % k, v).replace("$" + k, v)
        if "$" in re.sub(r'"\$1"', "", expr):
            raise AssertionError("unsubstituted variable in " + expr)
        return expr


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for a in ("--loomd", "--loomctl", "--fabric", "--scenario", "--fabric-scenario", "--topology", "--job",
              "--dashboards", "--datasource", "--metrics-doc"):
        parser.add_argument(a, required=True)
    parser.add_argument("--prometheus", default="/usr/bin/prometheus")
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
