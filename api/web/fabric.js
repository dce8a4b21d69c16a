// Loom's live fabric view: draws the topology tier by tier (super-spine,
// spine, leaf, NIC), colors links from /api/v1/links, marks devices by their
// sync status (/api/v1/devices), lists jobs (/api/v1/jobs) whose paths light
// up on hover or click (/api/v1/jobs/ID/health), and tails the event log
// (/api/v1/events). Polls every 2 s; read-only. No libraries.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const POLL_MS = 2000;
const JOBS_EVERY = 3;  // jobs are polled every third round
const MAX_EVENTS = 200;
const TIERS = [
  ["DEVICE_ROLE_SUPER_SPINE", "super-spine"],
  ["DEVICE_ROLE_SPINE", "spine"],
  ["DEVICE_ROLE_LEAF", "leaf"],
  ["DEVICE_ROLE_NIC", "NIC"],
];

// Exposed for tests and curious operators (window.loomView in the console).
const view = {
  updates: 0,        // completed poll rounds
  errors: 0,         // failed fetches
  lastError: "",
  revision: "0",     // newest event revision shown
  topology: null,
  linkState: {},     // link id -> "up" | "down" | "drained" | "unknown"
  selectedJob: "",
  highlighted: [],   // link ids of the highlighted job's paths
};
window.loomView = view;

const $ = (id) => document.getElementById(id);
const linkEls = new Map();   // link id -> <line>
const nodeEls = new Map();   // device id -> <g>
const linkData = new Map();  // link id -> LinkStatus JSON
const healthCache = new Map();  // job id -> {at, health}
let lastLinks = [];
let round = 0;

async function getJson(path) {
  const r = await fetch(path, { cache: "no-store" });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status} ${body.error || ""}`.trim());
  return body;
}

function naturalCompare(a, b) {
  return a.localeCompare(b, undefined, { numeric: true });
}

function el(tag, attrs, parent) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

function text(tag, content, cls) {
  const e = document.createElement(tag);
  e.textContent = content;
  if (cls) e.className = cls;
  return e;
}

// ---- drawing ---------------------------------------------------------------

function drawTopology(topo) {
  const svg = $("topology");
  svg.replaceChildren();
  linkEls.clear();
  nodeEls.clear();
  const byRole = new Map(TIERS.map(([role]) => [role, []]));
  for (const d of topo.devices || []) {
    if (byRole.has(d.role)) byRole.get(d.role).push(d.id);
  }
  for (const ids of byRole.values()) ids.sort(naturalCompare);
  // NICs ordered by their leaf, so their links do not cross.
  const leafOf = new Map();
  for (const l of topo.links || []) {
    leafOf.set(l.a.device, leafOf.get(l.a.device) || l.b.device);
    leafOf.set(l.b.device, leafOf.get(l.b.device) || l.a.device);
  }
  const leaves = byRole.get("DEVICE_ROLE_LEAF");
  const leafIndex = new Map(leaves.map((id, i) => [id, i]));
  byRole.get("DEVICE_ROLE_NIC").sort((x, y) =>
    ((leafIndex.get(leafOf.get(x)) ?? 0) - (leafIndex.get(leafOf.get(y)) ?? 0)) ||
    naturalCompare(x, y));
  const tiers = TIERS.filter(([role]) => byRole.get(role).length > 0);
  // As wide as the widest switch tier needs (NICs pack in under their leaves as dots):
  // a 64-leaf fabric with 512 NICs stays readable.
  const widest = Math.max(1, ...tiers.filter(([r]) => r !== "DEVICE_ROLE_NIC")
    .map(([r]) => byRole.get(r).length));
  const width = Math.max(900, 26 * widest);
  const rowH = 130;
  const height = 40 + rowH * tiers.length;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const pos = new Map();
  tiers.forEach(([role, label], t) => {
    const ids = byRole.get(role);
    const y = 40 + t * rowH + rowH / 2 - 30;
    el("text", { x: 8, y: y - 18, class: "tier-label" }, svg).textContent =
      `${label} (${ids.length})`;
    ids.forEach((id, i) => {
      pos.set(id, { x: 60 + ((width - 120) * (i + 0.5)) / ids.length, y, role });
    });
  });
  const linkLayer = el("g", { class: "links" }, svg);
  const nodeLayer = el("g", { class: "nodes" }, svg);
  for (const l of topo.links || []) {
    const a = pos.get(l.a.device), b = pos.get(l.b.device);
    if (!a || !b) continue;  // hosts, or a role not drawn
    const nic = a.role === "DEVICE_ROLE_NIC" || b.role === "DEVICE_ROLE_NIC";
    const line = el("line", {
      x1: a.x, y1: a.y, x2: b.x, y2: b.y,
      class: nic ? "link nic" : "link",
      "data-link": l.id, "data-state": "unknown",
    }, linkLayer);
    line.addEventListener("mouseenter", () => showLink(l.id));
    linkEls.set(l.id, line);
  }
  // Labels only where they fit (7 px per character); hover names every device.
  const spacing = (role) => (width - 120) / Math.max(1, byRole.get(role).length);
  const small = byRole.get("DEVICE_ROLE_NIC").length > 64;
  for (const [id, p] of pos) {
    const g = el("g", { class: "node", "data-device": id, "data-sync": "none" }, nodeLayer);
    el("title", {}, g).textContent = id;
    const fits = spacing(p.role) >= 7 * id.length + 8;
    if (p.role === "DEVICE_ROLE_NIC") {
      el("circle", { cx: p.x, cy: p.y, r: small ? 3 : 6 }, g);
      if (fits) el("text", { x: p.x, y: p.y + 20 }, g).textContent = id;
    } else {
      const w = Math.max(8, Math.min(68, spacing(p.role) - 4));
      el("rect", { x: p.x - w / 2, y: p.y - 12, width: w, height: 24, rx: Math.min(5, w / 4) }, g);
      if (w >= 7 * Math.min(id.length, 10)) {
        el("text", { x: p.x, y: p.y + 4 }, g).textContent =
          id.length <= 10 || fits ? id : id.slice(0, 9) + "…";
      }
    }
    g.addEventListener("mouseenter", () => showDevice(id));
    nodeEls.set(id, g);
  }
  applyNicVisibility();
}

function applyNicVisibility() {
  const show = $("showNics").checked;
  for (const [, line] of linkEls) {
    if (line.classList.contains("nic")) line.style.display = show ? "" : "none";
  }
}

function colorFor(value, mode) {
  // Green -> amber -> red over each mode's scale.
  let t;
  if (mode === "util") t = value / 0.9;
  else if (mode === "pfc") t = value > 0 ? 0.35 + value / 0.2 : 0;
  else t = value > 0 ? 0.35 + Math.log10(1 + value) / 5 : 0;
  t = Math.max(0, Math.min(1, t));
  const hue = 120 * (1 - t);
  return `hsl(${hue}, 75%, 48%)`;
}

function linkValue(ls, mode) {
  let v = 0;
  for (const d of ls.directions || []) {
    if (d.stale) continue;
    const x = mode === "util" ? d.utilization : mode === "pfc" ? d.pfcPauseRatio : d.ecnMarkedPps;
    v = Math.max(v, Number(x) || 0);
  }
  return v;
}

function stateOf(ls) {
  if (ls.adminState === "LINK_ADMIN_STATE_DRAINED") return "drained";
  if (ls.operState === "LINK_OPER_STATE_DOWN") return "down";
  if (ls.operState === "LINK_OPER_STATE_UP") return "up";
  return "unknown";
}

function paintLinks(links) {
  lastLinks = links;
  const mode = $("colorBy").value;
  const states = {};
  for (const ls of links) {
    const id = ls.link.id;
    linkData.set(id, ls);
    const state = stateOf(ls);
    states[id] = state;
    const line = linkEls.get(id);
    if (!line) continue;
    line.setAttribute("data-state", state);
    line.setAttribute("stroke", colorFor(linkValue(ls, mode), mode));
  }
  view.linkState = states;
}

function paintLegend() {
  const mode = $("colorBy").value;
  const stops = mode === "util" ? [[0, "0 %"], [0.45, "50 %"], [0.9, "≥ 90 %"]]
    : mode === "pfc" ? [[0, "not paused"], [0.02, "paused"], [0.2, "≥ 20 % paused"]]
      : [[0, "no marks"], [100, "100/s"], [100000, "≥ 100k/s"]];
  const legend = $("legend");
  legend.replaceChildren();
  for (const [v, label] of stops) {
    const s = text("span", label);
    s.style.setProperty("--c", colorFor(v, mode));
    legend.appendChild(s);
  }
  for (const [label, c] of [["down", "#f85149"], ["drained", "#8b949e"], ["no telemetry", "#444c56"]]) {
    const s = text("span", label);
    s.style.setProperty("--c", c);
    legend.appendChild(s);
  }
}

function pct(x) { return `${(100 * (Number(x) || 0)).toFixed(1)} %`; }

function showLink(id) {
  const ls = linkData.get(id);
  if (!ls) return;
  const lines = [`${id}  ${stateOf(ls)}${ls.drainReason ? ` (drained: ${ls.drainReason})` : ""}`];
  for (const d of ls.directions || []) {
    lines.push(`${d.fromDevice} → ${d.toDevice}: util ${pct(d.utilization)}, ` +
      `ECN ${Math.round(d.ecnMarkedPps)}/s, PFC paused ${pct(d.pfcPauseRatio)}, ` +
      `quality ${d.qualityUnknown ? "unknown" : d.quality}${d.stale ? ", STALE" : ""}` +
      `${d.pfcStormed ? ", PFC STORM" : ""}`);
  }
  if (!(ls.directions || []).length) lines.push("no telemetry");
  $("linkInfo").textContent = lines.join("\n");
}

const devices = new Map();

function showDevice(id) {
  const d = devices.get(id);
  const lines = [id];
  if (d && d.sync) {
    const s = d.sync;
    lines.push(`southbound: ${s.driver || "none"}; ${s.inSync ? "in sync" : "out of sync"} ` +
      `(desired gen ${s.desiredGeneration}, applied ${s.appliedGeneration})` +
      `${s.shadow ? ", shadow mode" : ""}${s.lastError ? `; last error: ${s.lastError}` : ""}`);
  }
  if (d && d.telemetry) {
    lines.push(`telemetry: ${d.telemetry.state}${d.telemetry.lastError ? ` (${d.telemetry.lastError})` : ""}`);
  }
  $("linkInfo").textContent = lines.join("\n");
}

function syncClass(s) {
  if (!s || !s.driver) return "none";
  if (s.shadow) return "shadow";
  if (s.consecutiveFailures > 0) return "failing";
  return s.inSync ? "in-sync" : "pending";
}

function paintDevices(list) {
  devices.clear();
  const body = $("devices").tBodies[0];
  body.replaceChildren();
  let inSync = 0, programmed = 0;
  for (const d of list) {
    devices.set(d.id, d);
    const cls = syncClass(d.sync);
    if (cls !== "none") programmed++;
    if (cls === "in-sync" || cls === "shadow") inSync++;
    const g = nodeEls.get(d.id);
    if (g) {
      g.setAttribute("data-sync", cls);
      const tstate = d.telemetry ? d.telemetry.state : "";
      g.setAttribute("data-telemetry", tstate === "down" || tstate === "connecting" ? "down" : "ok");
    }
    if (!d.sync && !(d.telemetry && d.telemetry.platform)) continue;  // NICs without a source
    const tr = document.createElement("tr");
    tr.appendChild(text("td", d.id));
    const label = { "in-sync": "in sync", pending: "applying", failing: "failing",
      shadow: "shadow", none: "—" }[cls];
    tr.appendChild(text("td", label,
      cls === "in-sync" ? "ok" : cls === "failing" ? "bad" : cls === "pending" ? "warn" : "muted"));
    const t = d.telemetry ? d.telemetry.state : "—";
    tr.appendChild(text("td", t,
      t === "connected" || t === "embedded" ? "ok" : t === "no source" ? "muted" : "warn"));
    body.appendChild(tr);
  }
  $("syncSummary").textContent = `${inSync}/${programmed} in sync`;
}

// ---- jobs ------------------------------------------------------------------

async function jobHealth(id) {
  const c = healthCache.get(id);
  if (c && Date.now() - c.at < POLL_MS) return c.health;
  const health = await getJson(`/api/v1/jobs/${encodeURIComponent(id)}/health`);
  healthCache.set(id, { at: Date.now(), health });
  return health;
}

async function highlight(id) {
  const svg = $("topology");
  for (const line of linkEls.values()) line.classList.remove("hl");
  if (!id) {
    svg.classList.remove("highlighting");
    view.highlighted = [];
    return;
  }
  let h;
  try {
    h = await jobHealth(id);
  } catch (e) {
    noteError(e);
    return;
  }
  const ids = h.pathLinks || [];
  for (const l of ids) {
    const line = linkEls.get(l);
    if (line) line.classList.add("hl");
  }
  svg.classList.add("highlighting");
  view.highlighted = ids;
  const lines = [`${h.jobId} (${h.tenant}): ${h.verdict}`,
    `slowdown ×${Number(h.fabricSlowdown || 1).toFixed(2)}, max PFC pause ${pct(h.maxPauseRatio)}, ` +
    `predicted max utilization ${pct(h.predictedMaxUtilization)}, ${ids.length} links on its paths`];
  if (h.worstLink && h.worstLink.linkId) {
    lines.push(`worst link: ${h.worstLink.linkId} ${h.worstLink.direction || ""}`);
  }
  if (h.throughputAvailable) {
    lines.push(`throughput ${(h.achievedBps / 1e9).toFixed(1)} of ${(h.lineRateBps / 1e9).toFixed(1)} Gb/s`);
  }
  $("jobInfo").textContent = lines.join("\n");
}

function paintJobs(resp) {
  const ul = $("jobs");
  ul.replaceChildren();
  const jobs = resp.jobs || [];
  $("jobCount").textContent = `${jobs.length}${resp.nextPageToken ? "+" : ""}`;
  for (const j of jobs) {
    const li = document.createElement("li");
    li.dataset.job = j.jobId;
    li.appendChild(text("span", j.jobId));
    li.appendChild(text("span", ` ${j.tenant} `, "tenant"));
    const st = ((j.status || {}).state || "").replace("JOB_STATE_", "").toLowerCase();
    li.appendChild(text("span", st, "state"));
    if (j.jobId === view.selectedJob) li.classList.add("selected");
    li.addEventListener("mouseenter", () => { if (!view.selectedJob) highlight(j.jobId); });
    li.addEventListener("mouseleave", () => { if (!view.selectedJob) highlight(""); });
    li.addEventListener("click", () => {
      view.selectedJob = view.selectedJob === j.jobId ? "" : j.jobId;
      for (const x of ul.children) x.classList.toggle("selected", x.dataset.job === view.selectedJob);
      highlight(view.selectedJob);
    });
    ul.appendChild(li);
  }
}

// ---- events ----------------------------------------------------------------

function shortType(t) { return (t || "").replace("EVENT_TYPE_", "").toLowerCase(); }

function paintEvents(resp) {
  const body = $("events").tBodies[0];
  for (const e of resp.events || []) {
    const tr = document.createElement("tr");
    tr.className = `sev-${e.severity}`;
    tr.dataset.revision = e.revision;
    tr.dataset.type = e.type;
    tr.dataset.subject = e.subject;
    tr.appendChild(text("td", e.revision));
    tr.appendChild(text("td", e.time ? new Date(e.time).toLocaleTimeString() : ""));
    tr.appendChild(text("td", shortType(e.type)));
    tr.appendChild(text("td", e.subject));
    tr.appendChild(text("td", [e.cause, e.action, e.result].filter(Boolean).join(" — ")));
    body.insertBefore(tr, body.firstChild);
    view.revision = e.revision;
  }
  while (body.rows.length > MAX_EVENTS) body.deleteRow(body.rows.length - 1);
  $("eventHead").textContent = `up to revision ${resp.revision}`;
}

// ---- polling ---------------------------------------------------------------

function noteError(e) {
  view.errors++;
  view.lastError = String(e.message || e);
  const s = $("status");
  s.textContent = `cannot reach loomd: ${view.lastError}`;
  s.classList.add("error");
}

async function poll() {
  try {
    if (!view.topology) {
      view.topology = (await getJson("/api/v1/topology")).topology;
      drawTopology(view.topology);
    }
    const from = view.revision === "0" ? "" : `?from=${BigInt(view.revision) + 1n}`;
    const [links, devs, events] = await Promise.all([
      getJson("/api/v1/links"), getJson("/api/v1/devices"), getJson(`/api/v1/events${from}`)]);
    paintLinks(links.links || []);
    paintDevices(devs.devices || []);
    paintEvents(events);
    if (round % JOBS_EVERY === 0) paintJobs(await getJson("/api/v1/jobs"));
    if (view.selectedJob) {
      healthCache.delete(view.selectedJob);
      await highlight(view.selectedJob);
    }
    round++;
    view.updates++;
    const s = $("status");
    s.classList.remove("error");
    const down = Object.values(view.linkState).filter((x) => x === "down").length;
    s.textContent = `${view.topology.name || "fabric"}: ${linkEls.size} links drawn, ` +
      `${down} down · revision ${view.revision} · updated ${new Date().toLocaleTimeString()}`;
  } catch (e) {
    noteError(e);
  }
  setTimeout(poll, POLL_MS);
}

$("colorBy").addEventListener("change", () => { paintLinks(lastLinks); paintLegend(); });
$("showNics").addEventListener("change", applyNicVisibility);
paintLegend();
poll();
