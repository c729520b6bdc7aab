// nl6 console: drives the same routes a script would (GET/POST /api/v1/profiling, /debug/pprof/*,
// /api/v1/devices, /api/v1/scenarios) and shows the server's own messages. Server text is only ever set
// with textContent, never parsed as HTML. No request leaves this origin.
"use strict";

const GATE = "/api/v1/profiling";
const FLAME = "/api/v1/profiling/flamegraph.svg";
const GATE_REFRESH_MS = 3000;
const FLEET_REFRESH_MS = 10000;
const FLAME_REFRESH_MS = 15000;
const MAX_DEVICE_ROWS = 200;
// Devices fetched per page: the API pages its list (a fleet can hold 30 000 devices).
const DEVICE_PAGE = 100;

const $ = (id) => document.getElementById(id);

function show(el, text, isError) {
  el.textContent = text;
  el.classList.toggle("error", !!isError);
  el.hidden = text === "";
}

// The gate's state in words: closed, open (pull-only), open, pushing to <address>.
function stateWords(d) {
  if (!d.enabled) return { text: "closed", cls: "closed" };
  if (!d.server_address) return { text: "open (pull-only)", cls: "open" };
  if (d.pushing) return { text: "open, pushing to " + d.server_address, cls: "open" };
  return { text: "open, push to " + d.server_address + " not running", cls: "warn" };
}

function renderGate(d) {
  const words = stateWords(d);
  const state = $("gate-state");
  state.textContent = words.text;
  state.className = words.cls;
  const rows = [];
  if (d.server_address || d.uploads || d.sdk_errors) {
    // Once a push stops its figures stay; last_push says whose they are.
    if (d.last_push) rows.push(["last push", d.last_push.address + " (stopped " + d.last_push.stopped_at + ")"]);
    rows.push(["uploads", String(d.uploads)]);
    rows.push(["last upload", d.last_upload_at || "never"]);
    rows.push(["sdk_errors", String(d.sdk_errors), d.sdk_errors > 0]);
  }
  if (d.last_error) rows.push(["last error", d.last_error, true]);
  if (d.revert_pending) rows.push(["reverts at", d.revert_at || "pending"]);
  if (d.startup_flag) rows.push(["startup flag", d.startup_flag]);
  const dl = $("gate-details");
  dl.replaceChildren();
  for (const [k, v, bad] of rows) {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = v;
    if (bad) dd.className = "bad";
    dl.append(dt, dd);
  }
}

// Reads a reply's error the way the server wrote it: JSON {"error": …} or plain text.
async function serverMessage(resp) {
  const text = await resp.text();
  try {
    const v = JSON.parse(text);
    if (v && typeof v.error === "string") return { message: v.error, data: v.data };
  } catch (_) { /* not JSON: the text as it is */ }
  return { message: text.trim() || resp.status + " " + resp.statusText };
}

let gateTimer = null;
async function refreshGate() {
  clearTimeout(gateTimer);
  try {
    const resp = await fetch(GATE, { cache: "no-store" });
    if (resp.ok) {
      const d = (await resp.json()).data;
      renderGate(d);
      // While pushing, each upload interval ends a CPU window: the flame graph follows it.
      if (d.pushing && Date.now() - lastFlameCheck > FLAME_REFRESH_MS) checkFlame();
      $("connection").textContent = "updated " + new Date().toLocaleTimeString();
    } else {
      $("connection").textContent = "GET " + GATE + ": " + (await serverMessage(resp)).message;
    }
  } catch (e) {
    $("connection").textContent = "cannot reach nl6: " + e.message;
  } finally {
    gateTimer = setTimeout(refreshGate, GATE_REFRESH_MS);
  }
}

async function postGate(body, label) {
  const duration = $("gate-duration").value.trim();
  if (duration) body.duration = duration;
  const msg = $("gate-message");
  const buttons = document.querySelectorAll(".controls button");
  buttons.forEach((b) => { b.disabled = true; });
  show(msg, label + "…", false);
  try {
    const resp = await fetch(GATE, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    if (resp.ok) {
      const d = (await resp.json()).data;
      renderGate(d);
      show(msg, "gate " + stateWords(d).text + (d.revert_at ? " until " + d.revert_at : ""), false);
    } else {
      const err = await serverMessage(resp);
      if (err.data) renderGate(err.data);
      show(msg, resp.status + ": " + err.message, true);
    }
  } catch (e) {
    show(msg, "cannot reach nl6: " + e.message, true);
  } finally {
    buttons.forEach((b) => { b.disabled = false; });
    refreshGate();
  }
}

let lastBlobUrl = null;

// Fetches a profile; on 200 saves it as `filename` (and keeps a link), otherwise shows the server's text.
async function takeProfile(button, url, filename, busyText) {
  const msg = $("profile-message");
  const link = $("profile-download");
  button.disabled = true;
  show(msg, busyText, false);
  try {
    const resp = await fetch(url, { cache: "no-store" });
    if (resp.status === 503) {
      // The gate is closed: this page has its own button for that, no need for the server's curl line.
      show(msg, "The profiling gate is closed, so profiles are not served. Press \u201copen pull-only\u201d " +
        "above (nothing is pushed), then take the profile again.", true);
      pointAt($("open-pull"));
      return false;
    }
    if (!resp.ok) {
      show(msg, resp.status + " " + resp.statusText + "\n" + (await resp.text()).trim(), true);
      return false;
    }
    const blob = await resp.blob();
    // One kept blob at a time: the previous download's memory is released.
    if (lastBlobUrl) URL.revokeObjectURL(lastBlobUrl);
    const href = URL.createObjectURL(blob);
    lastBlobUrl = href;
    const a = document.createElement("a");
    a.href = href;
    a.download = filename;
    a.textContent = "save " + filename + " again";
    link.replaceChildren(document.createTextNode(filename + " (" + blob.size + " bytes, " +
      new Date().toLocaleTimeString() + "): "), a);
    link.hidden = false;
    a.click();
    show(msg, "downloaded " + filename + "; open it with: go tool pprof " + filename, false);
    return true;
  } catch (e) {
    show(msg, "cannot reach nl6: " + e.message, true);
    return false;
  } finally {
    button.disabled = false;
  }
}

// Draws attention to one of the page's own controls (focus and a short highlight).
function pointAt(button) {
  button.focus();
  button.classList.add("attention");
  setTimeout(() => button.classList.remove("attention"), 4000);
}

// The flame graph's URL: the profile chosen (CPU or wall-clock), split into one tower per subsystem
// when the box is ticked; a cache-buster, since the URL stays the same from one profile to the next.
function flameUrl() {
  const kind = $("flame-kind").value === "wall" ? "profile=wall&" : "";
  return FLAME + "?" + kind + ($("flame-split").checked ? "by=subsystem&" : "") + "t=" + Date.now();
}

// The server keeps the last CPU and the last wall-clock profile with samples (an idle one does not
// replace it) and says where each came from in X-Nl6-Flame-Source, shown as the caption. Switching to a
// kind with no profile yet says so instead of keeping the other kind's picture.
async function showFlame() {
  const src = flameUrl();
  try {
    const resp = await fetch(src, { method: "HEAD", cache: "no-store" });
    if (!resp.ok) {
      if (!$("flame-panel").hidden) {
        $("flame-source").textContent = "no " + $("flame-kind").selectedOptions[0].text.split(" (")[0] +
          " profile yet: take one with the button above";
        $("flame-img").removeAttribute("src");
      }
      return;
    }
    $("flame-source").textContent = resp.headers.get("X-Nl6-Flame-Source") || "";
  } catch (_) { return; }
  $("flame-img").src = src;
  $("flame-link").href = src;
  $("flame-panel").hidden = false;
}

let lastFlameCheck = 0;
async function checkFlame() {
  lastFlameCheck = Date.now();
  await showFlame();
}

function cell(row, text, numeric) {
  const td = document.createElement("td");
  td.textContent = text == null ? "" : String(text);
  if (numeric) td.className = "num";
  row.append(td);
}

function uptime(seconds) {
  const s = Number(seconds) || 0;
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return h > 0 ? h + "h" + m + "m" : m > 0 ? m + "m" + (s % 60) + "s" : s + "s";
}

let devices = [];
let deviceTotal = 0;
let deviceOffset = 0;
function renderDevices() {
  // The server filters by name over the whole fleet (?name=PREFIX); the page holds only matches.
  const filter = $("device-filter").value.trim();
  const shown = devices;
  const body = $("devices-table").tBodies[0];
  body.replaceChildren();
  for (const d of shown.slice(0, MAX_DEVICE_ROWS)) {
    const tr = document.createElement("tr");
    const ifs = d.interfaces || [];
    const c = d.counters || {};
    cell(tr, d.name);
    cell(tr, d.snmp && d.snmp.address ? d.snmp.address + ":" + d.snmp.port : "-");
    cell(tr, uptime(d.uptime_seconds), true);
    cell(tr, ifs.filter((i) => i.oper_status === "up").length + "/" + ifs.length, true);
    cell(tr, c.sent, true);
    cell(tr, c.dropped, true);
    cell(tr, c.malformed, true);
    body.append(tr);
  }
  const paged = deviceTotal > devices.length;
  $("devices-count").textContent = deviceTotal + (deviceTotal === 1 ? " device" : " devices") +
    (filter ? " named " + filter + "…" : "") +
    (paged ? ", " + (deviceOffset + 1) + "–" + (deviceOffset + devices.length) + " on this page" : "") +
    (shown.length > MAX_DEVICE_ROWS ? ", first " + MAX_DEVICE_ROWS + " of " + shown.length + " shown" : "");
  $("devices-prev").hidden = $("devices-next").hidden = !paged && deviceOffset === 0;
  $("devices-prev").disabled = deviceOffset === 0;
  $("devices-next").disabled = deviceOffset + devices.length >= deviceTotal;
}

function renderScenarios(list) {
  const body = $("scenarios-table").tBodies[0];
  body.replaceChildren();
  for (const s of list) {
    const tr = document.createElement("tr");
    cell(tr, s.id, true);
    cell(tr, s.name);
    cell(tr, s.device);
    cell(tr, s.duration);
    cell(tr, s.state);
    cell(tr, s.started_at || "-");
    cell(tr, s.finished_at || "-");
    cell(tr, s.flaps, true);
    body.append(tr);
  }
  $("scenarios-empty").hidden = list.length > 0;
  $("scenarios-table").hidden = list.length === 0;
}

// The fleet panels appear only when the fleet's routes answer 200 (a server without a fleet answers 404).
let fleetTimer = null;
async function refreshFleet() {
  clearTimeout(fleetTimer);
  let present = false;
  try {
    const name = $("device-filter").value.trim();
    const resp = await fetch("/api/v1/devices?offset=" + deviceOffset + "&limit=" + DEVICE_PAGE +
      (name ? "&name=" + encodeURIComponent(name) : ""),
      { cache: "no-store" });
    if (resp.ok) {
      present = true;
      const page = await resp.json();
      devices = page.data || [];
      deviceTotal = page.total === undefined ? devices.length : page.total;
      renderDevices();
      const sc = await fetch("/api/v1/scenarios", { cache: "no-store" });
      if (sc.ok) renderScenarios((await sc.json()).data || []);
      $("scenarios-panel").hidden = !sc.ok;
    }
  } catch (_) { /* shown by the gate's connection line */ }
  $("devices-panel").hidden = !present;
  if (!present) $("scenarios-panel").hidden = true;
  if (present) fleetTimer = setTimeout(refreshFleet, FLEET_REFRESH_MS);
}

function init() {
  $("open-pull").addEventListener("click", () =>
    postGate({ enabled: true, server_address: "" }, "opening pull-only"));
  $("open-push").addEventListener("click", () => {
    const address = $("gate-address").value.trim();
    if (!address) {
      show($("gate-message"), "type a Pyroscope address first (e.g. http://pyroscope:4040)", true);
      $("gate-address").focus();
      return;
    }
    postGate({ enabled: true, server_address: address }, "opening, pushing to " + address);
  });
  $("close-gate").addEventListener("click", () => postGate({ enabled: false }, "closing"));
  $("heap-profile").addEventListener("click", (ev) =>
    takeProfile(ev.currentTarget, "/debug/pprof/heap", "heap.pb.gz", "taking a heap profile…"));
  $("cpu-profile").addEventListener("click", async (ev) => {
    const ok = await takeProfile(ev.currentTarget, "/debug/pprof/profile?seconds=5", "cpu.pb.gz",
      "profiling CPU for 5 s…");
    if (ok) { $("flame-kind").value = "cpu"; showFlame(); }
  });
  $("wall-profile").addEventListener("click", async (ev) => {
    const ok = await takeProfile(ev.currentTarget, "/debug/fgprof?seconds=5", "wall.pb.gz",
      "profiling wall-clock time (every thread, running or waiting) for 5 s…");
    if (ok) { $("flame-kind").value = "wall"; showFlame(); }
  });
  $("flame-kind").addEventListener("change", showFlame);
  $("flame-split").addEventListener("change", showFlame);
  $("device-filter").addEventListener("input", () => { deviceOffset = 0; refreshFleet(); });
  $("refresh-fleet").addEventListener("click", refreshFleet);
  const turn = (by) => { deviceOffset = Math.max(0, deviceOffset + by); refreshFleet(); };
  $("devices-prev").addEventListener("click", () => turn(-DEVICE_PAGE));
  $("devices-next").addEventListener("click", () => turn(DEVICE_PAGE));
  refreshGate();
  checkFlame();
  refreshFleet();
}

init();
