#!/usr/bin/python3
"""Checks Loom's Prometheus rules, their tests, the Alertmanager example and the runbooks.

Runs, with the real tools (Debian's promtool and amtool):
  1. promtool check rules deploy/prometheus/loom.rules.yml
  2. promtool test rules deploy/prometheus/tests/*.yml
  3. amtool check-config deploy/alertmanager/alertmanager.yml, and that severity=page and
     severity=ticket route to the loom-page and loom-ticket receivers
and checks, from the YAML (python3-yaml):
  4. every alert: a Loom-prefixed CamelCase name, severity page|ticket, summary, description,
     runbook_url == RUNBOOK_BASE + <alert>.md, and docs/runbooks/<alert>.md exists with the
     four sections and the same severity; listed in docs/runbooks/README.md and docs/alerts.md;
  5. every alert has a promtool test that expects it to fire (non-empty exp_alerts) and one
     that expects it quiet (empty exp_alerts); every recording rule has an exp_samples test;
  6. every loom_* metric in the rules is a family of docs/metrics.md (loom_job_fabric_slowdown,
     which comes with `loomctl jobs why`, excepted);
  7. every `loomctl ...` command in the runbooks exists in loomctl's usage text
     (api/loomctl/loomctl_main.cc; `loomctl jobs why` excepted, issue 19 item 1);
  8. every alert named in the Alertmanager config exists; no runbook without an alert.
Needs no built binary. Exit 0 when all pass, 1 otherwise (every problem is printed).

  /usr/bin/python3 tests/prometheus/rules_test.py --source-dir .
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys

import yaml

RUNBOOK_BASE = "https://github.com/loom-fabric/loom/blob/main/docs/runbooks/"
SEVERITIES = ("page", "ticket")
SECTIONS = ("## Meaning", "## Confirm", "## What Loom already did", "## What to do")
# Series or commands that come with issue 19 item 1 (`loomctl jobs why`), not built yet.
FUTURE_METRICS = {"loom_job_fabric_slowdown"}
FUTURE_COMMANDS = {"jobs why"}

errors = []


def fail(msg):
    errors.append(msg)
    print("FAIL: " + msg, flush=True)


def run(cmd, cwd):
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = p.stdout.strip()
    if out:
        print("  " + out.replace("\n", "\n  "), flush=True)
    return p.returncode, out


def load(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def metric_families(metrics_md):
    """Family names from the tables of docs/metrics.md (`loom_x`, `loom_a`, `loom_b`)."""
    text = open(metrics_md, encoding="utf-8").read()
    fams = set()
    for line in text.splitlines():
        if line.startswith("|"):
            first_cell = line.split("|")[1]
            fams.update(re.findall(r"`(loom_[a-z0-9_]+)`", first_cell))
    return fams


def loomctl_commands(main_cc):
    """Command words from loomctl's usage text: "links list", "events", "plan clear", ..."""
    text = open(main_cc, encoding="utf-8").read()
    m = re.search(r"Commands:\n(.*?)\nFlags:", text, re.S)
    if not m:
        fail("%s: no Commands: ... Flags: usage block" % main_cc)
        return set()
    cmds = set()
    for line in m.group(1).splitlines():
        if not line.startswith("  ") or line.startswith("   "):
            continue  # Continuation lines are indented further.
        words = []
        for w in re.split(r"\s{2,}", line.strip())[0].split():
            if not re.fullmatch(r"[a-z]+", w):
                break
            words.append(w)
        if words:
            cmds.add(" ".join(words))
    return cmds


def check_tools(src, rules, tests, am):
    for tool in ("promtool", "amtool"):
        if not shutil.which(tool):
            fail("%s not found: run scripts/install-deps.sh --test" % tool)
    if errors:
        return
    rc, _ = run(["promtool", "check", "rules", rules], src)
    if rc != 0:
        fail("promtool check rules %s: exit %d" % (rules, rc))
    if not tests:
        fail("no promtool tests in deploy/prometheus/tests/")
    else:
        rc, _ = run(["promtool", "test", "rules"] + tests, src)
        if rc != 0:
            fail("promtool test rules: exit %d" % rc)
    rc, _ = run(["amtool", "check-config", am], src)
    if rc != 0:
        fail("amtool check-config %s: exit %d" % (am, rc))
    for sev in SEVERITIES:
        rc, out = run(["amtool", "config", "routes", "test", "--config.file=" + am,
                       "severity=" + sev, "alertname=LoomRoutingCheck"], src)
        got = out.splitlines()[-1].strip() if out else ""
        if rc != 0 or got != "loom-" + sev:
            fail("severity=%s routes to %r, want loom-%s" % (sev, got, sev))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source-dir", required=True, help="the Loom source tree")
    args = ap.parse_args()
    src = os.path.abspath(args.source_dir)
    rules_path = os.path.join(src, "deploy/prometheus/loom.rules.yml")
    tests = sorted(glob.glob(os.path.join(src, "deploy/prometheus/tests/*.yml")))
    am_path = os.path.join(src, "deploy/alertmanager/alertmanager.yml")
    runbooks = os.path.join(src, "docs/runbooks")

    check_tools(src, rules_path, tests, am_path)

    rules = load(rules_path)
    alerts, records = {}, set()
    for g in rules.get("groups", []):
        for r in g.get("rules", []):
            if "alert" in r:
                if r["alert"] in alerts:
                    fail("alert %s defined twice" % r["alert"])
                alerts[r["alert"]] = r
            else:
                records.add(r["record"])
    print("rules: %d alerts, %d recording rule names" % (len(alerts), len(records)), flush=True)
    if not alerts:
        fail("no alerts in %s" % rules_path)

    fires, quiet, sampled = set(), set(), set()
    for t in tests:
        for case in load(t).get("tests", []) or []:
            for a in case.get("alert_rule_test", []) or []:
                (fires if a.get("exp_alerts") else quiet).add(a["alertname"])
            for e in case.get("promql_expr_test", []) or []:
                if e.get("exp_samples"):
                    sampled.update(re.findall(r"loom:[a-z0-9_:]+", e["expr"]))

    readme = open(os.path.join(runbooks, "README.md"), encoding="utf-8").read() \
        if os.path.exists(os.path.join(runbooks, "README.md")) else ""
    if not readme:
        fail("docs/runbooks/README.md missing")
    if RUNBOOK_BASE not in readme:
        fail("docs/runbooks/README.md does not document the runbook base URL " + RUNBOOK_BASE)
    alerts_md_path = os.path.join(src, "docs/alerts.md")
    alerts_md = open(alerts_md_path, encoding="utf-8").read() \
        if os.path.exists(alerts_md_path) else ""
    if not alerts_md:
        fail("docs/alerts.md missing")
    commands = loomctl_commands(os.path.join(src, "api/loomctl/loomctl_main.cc"))

    for name, r in sorted(alerts.items()):
        if not re.fullmatch(r"Loom[A-Z][A-Za-z0-9]+", name):
            fail("%s: alert names are CamelCase with the prefix Loom" % name)
        sev = (r.get("labels") or {}).get("severity")
        if sev not in SEVERITIES:
            fail("%s: severity %r, want one of %s" % (name, sev, "|".join(SEVERITIES)))
        ann = r.get("annotations") or {}
        for key in ("summary", "description", "runbook_url"):
            if not ann.get(key):
                fail("%s: no %s annotation" % (name, key))
        if ann.get("runbook_url") != RUNBOOK_BASE + name + ".md":
            fail("%s: runbook_url %r, want %s%s.md" % (name, ann.get("runbook_url"),
                                                       RUNBOOK_BASE, name))
        rb = os.path.join(runbooks, name + ".md")
        if not os.path.exists(rb):
            fail("%s: no runbook docs/runbooks/%s.md" % (name, name))
        else:
            text = open(rb, encoding="utf-8").read()
            for s in SECTIONS:
                if s not in text:
                    fail("docs/runbooks/%s.md: no section %r" % (name, s))
            m = re.search(r"\*\*Severity:\*\* (\w+)", text)
            if not m or m.group(1) != sev:
                fail("docs/runbooks/%s.md: severity line says %r, the rule %r" % (
                    name, m.group(1) if m else None, sev))
        if "(%s.md)" % name not in readme:
            fail("%s: not linked from docs/runbooks/README.md" % name)
        if "`%s`" % name not in alerts_md:
            fail("%s: not listed in docs/alerts.md" % name)
        if name not in fires:
            fail("%s: no promtool test expects it to fire" % name)
        if name not in quiet:
            fail("%s: no promtool test expects it to stay quiet" % name)

    for rec in sorted(records):
        if rec not in sampled:
            fail("recording rule %s: no promql_expr_test with exp_samples" % rec)

    # Metrics the rules use are families of docs/metrics.md.
    fams = metric_families(os.path.join(src, "docs/metrics.md"))
    used = set()
    for g in rules.get("groups", []):
        for r in g.get("rules", []):
            used.update(re.findall(r"(?<![:\w])loom_[a-z0-9_]+", r["expr"]))
    for m in sorted(used):
        base = re.sub(r"_(bucket|sum|count)$", "", m)
        if m not in fams and base not in fams and m not in FUTURE_METRICS:
            fail("rules use %s, which docs/metrics.md does not list" % m)

    # Runbooks: one per alert, and their loomctl commands exist.
    for rb in sorted(glob.glob(os.path.join(runbooks, "*.md"))):
        name = os.path.basename(rb)[:-3]
        if name == "README":
            continue
        if name not in alerts:
            fail("docs/runbooks/%s.md: no alert of that name" % name)
        text = open(rb, encoding="utf-8").read()
        # Commands in code blocks and `code spans` only (prose may say "loomctl has no ...").
        code = "\n".join(re.findall(r"```.*?```", text, re.S) +
                         re.findall(r"`[^`\n]+`", re.sub(r"```.*?```", "", text, flags=re.S)))
        for cmd in re.findall(r"loomctl((?: --json| --(?:server|timeout|request-id) \S+)*)((?: [a-z]+){1,2})", code):
            words = cmd[1].split()
            if " ".join(words) in FUTURE_COMMANDS:
                continue
            if not any(" ".join(words[:n]) in commands for n in (2, 1)):
                fail("docs/runbooks/%s.md: `loomctl%s` is not a loomctl command" % (
                    name, cmd[1]))

    # Alertmanager: the alert names it routes or inhibits on exist.
    am_text = open(am_path, encoding="utf-8").read()
    for line in am_text.splitlines():
        if "alertname" not in line or line.lstrip().startswith("#"):
            continue
        for ref in re.findall(r"Loom[A-Z][A-Za-z0-9]+", line):
            if ref not in alerts:
                fail("alertmanager.yml names %s, which is not an alert" % ref)

    if errors:
        print("\n%d problem(s)" % len(errors))
        return 1
    print("\nOK: %d alerts (%s), %d recording rules, %d test files, runbooks, Alertmanager" % (
        len(alerts), ", ".join("%d %s" % (sum(1 for r in alerts.values()
                                              if r["labels"]["severity"] == s), s)
                               for s in SEVERITIES), len(records), len(tests)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
