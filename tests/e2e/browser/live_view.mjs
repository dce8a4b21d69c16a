// Drives Debian's chromium (puppeteer-core over the DevTools protocol) through
// loomd's live fabric view; called by tests/e2e/live_view_test.py.
//
//   node live_view.mjs --url http://127.0.0.1:PORT/ --links N --fail-link ID
//        --job ID --shots DIR [--chromium /usr/bin/chromium] [--timeout-s 90]
//
// Checks, in order: the page loads and draws exactly N links; the failed link
// turns "down" on the page and its event appears in the event log; clicking
// the job highlights its paths; no console error, page error or failed request
// at any point. Screenshots go to DIR. Prints one JSON line with what it saw;
// exits 1 with the reason on the first check that fails.
import fs from "node:fs";
import path from "node:path";
import puppeteer from "puppeteer-core";

function args() {
  const a = { chromium: "/usr/bin/chromium", "timeout-s": "90" };
  const v = process.argv.slice(2);
  for (let i = 0; i < v.length; i += 2) a[v[i].replace(/^--/, "")] = v[i + 1];
  for (const k of ["url", "links", "fail-link", "job", "shots"]) {
    if (!a[k]) throw new Error(`missing --${k}`);
  }
  return a;
}

const opt = args();
const deadline = Date.now() + 1000 * Number(opt["timeout-s"]);
const problems = [];  // console errors, page errors, failed requests
const seen = {};

function fail(why) {
  console.log(JSON.stringify({ ok: false, why, problems, seen }));
  process.exit(1);
}

async function waitFor(page, what, fn, arg) {
  const left = deadline - Date.now();
  if (left <= 0) fail(`timed out before: ${what}`);
  try {
    await page.waitForFunction(fn, { timeout: left, polling: 200 }, arg);
  } catch (e) {
    const state = await page.evaluate(() => JSON.stringify({
      updates: window.loomView && window.loomView.updates,
      errors: window.loomView && window.loomView.errors,
      lastError: window.loomView && window.loomView.lastError,
      status: document.getElementById("status").textContent,
    })).catch(() => "?");
    fail(`${what}: ${e.message}; page state ${state}`);
  }
}

fs.mkdirSync(opt.shots, { recursive: true });
const browser = await puppeteer.launch({
  executablePath: opt.chromium,
  headless: true,
  // Root in CI containers: chromium's sandbox needs user namespaces it may not get.
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1500, height: 1000 });
  page.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => {
    // Navigation away at the end aborts polls in flight; anything else counts.
    problems.push(`request failed: ${r.url()} ${r.failure() && r.failure().errorText}`);
  });
  page.on("response", (r) => {
    if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`);
  });

  const resp = await page.goto(opt.url, { waitUntil: "load" });
  if (!resp || resp.status() !== 200) fail(`page answered ${resp && resp.status()}`);
  await waitFor(page, "first update", () => window.loomView && window.loomView.updates >= 1);
  seen.linksDrawn = await page.$$eval("svg#topology line.link", (ls) => ls.length);
  if (seen.linksDrawn !== Number(opt.links)) {
    fail(`drew ${seen.linksDrawn} links, the topology has ${opt.links}`);
  }
  seen.devicesDrawn = await page.$$eval("svg#topology g.node", (ns) => ns.length);
  seen.linksUpBefore = await page.$$eval('line.link[data-state="up"]', (ls) => ls.length);
  await page.screenshot({ path: path.join(opt.shots, "1-loaded.png"), fullPage: true });

  // The emulator fails the link; the page must show it down and log the event.
  await waitFor(page, `link ${opt["fail-link"]} shown down`,
    (id) => {
      const l = document.querySelector(`line.link[data-link="${CSS.escape(id)}"]`);
      return l && l.getAttribute("data-state") === "down";
    }, opt["fail-link"]);
  await waitFor(page, `an event about ${opt["fail-link"]} in the log`,
    (id) => [...document.querySelectorAll("#events tbody tr")].some((r) => r.dataset.subject === id),
    opt["fail-link"]);
  seen.failEvents = await page.$$eval("#events tbody tr", (rows, id) =>
    rows.filter((r) => r.dataset.subject === id).map((r) => r.dataset.type), opt["fail-link"]);
  seen.downStroke = await page.$eval(`line.link[data-link="${opt["fail-link"]}"]`,
    (l) => getComputedStyle(l).stroke);
  await page.screenshot({ path: path.join(opt.shots, "2-link-down.png"), fullPage: true });

  // A job's paths light up when it is clicked.
  await waitFor(page, `job ${opt.job} listed`,
    (id) => !!document.querySelector(`#jobs li[data-job="${CSS.escape(id)}"]`), opt.job);
  await page.click(`#jobs li[data-job="${opt.job}"]`);
  await waitFor(page, "the job's paths highlighted",
    () => document.querySelectorAll("line.link.hl").length > 0 &&
      document.getElementById("topology").classList.contains("highlighting"));
  seen.highlighted = await page.$$eval("line.link.hl", (ls) => ls.map((l) => l.dataset.link));
  seen.jobInfo = await page.$eval("#jobInfo", (e) => e.textContent);
  await page.screenshot({ path: path.join(opt.shots, "3-job-paths.png"), fullPage: true });

  // Color by PFC: the legend and links repaint without errors.
  await page.select("#colorBy", "pfc");
  await new Promise((r) => setTimeout(r, 500));
  seen.status = await page.$eval("#status", (e) => e.textContent);
  seen.updates = await page.evaluate(() => window.loomView.updates);
  if (problems.length) fail("the page reported problems");
  console.log(JSON.stringify({ ok: true, seen, shots: fs.readdirSync(opt.shots) }));
} finally {
  await browser.close();
}
