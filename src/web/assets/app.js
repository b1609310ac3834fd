// casambi2mqtt web page (docs/web.md). Plain JavaScript, no build step, nothing from the internet.
// Every text that comes from the service (names) is put in the page with textContent, never as
// HTML, so a unit named "<script>" shows as that text.
"use strict";

const TOKEN_KEY = "casambi2mqtt.token";
const state = { bridge: null, networks: new Map(), control: false, received: Date.now() };

// A token given as #token=… is kept for this browser and taken out of the address bar.
(function takeToken() {
  const m = location.hash.match(/^#token=(.+)$/);
  if (m) {
    localStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
})();

function authHeaders() {
  const token = localStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: "Bearer " + token } : {};
}

// el("div", {class: "x"}, child, "text") builds an element; strings become text nodes.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function ago(iso) {
  if (!iso) return "never";
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.floor(s / 60) + " min ago";
  return Math.floor(s / 3600) + " h ago";
}

function duration(s) {
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  return (d ? d + " d " : "") + (d || h ? h + " h " : "") + m + " min";
}

function showError(text) {
  const p = document.getElementById("error");
  p.textContent = text;
  p.hidden = !text;
}

async function send(body) {
  try {
    const r = await fetch("api/control", {
      method: "POST",
      headers: Object.assign({ "Content-Type": "application/json" }, authHeaders()),
      body: JSON.stringify(body),
    });
    if (r.ok) { showError(""); return; }
    const answer = await r.json().catch(() => ({}));
    showError("Refused: " + (answer.error || r.status));
  } catch (e) {
    showError("The bridge did not answer: " + e);
  }
}

// ---- rendering ------------------------------------------------------------------------------

function fact(label, value) {
  return el("li", {}, label + " ", el("b", {}, value));
}

function renderBridge() {
  const b = state.bridge;
  const box = document.getElementById("bridge");
  if (!b) return;
  const uptime = b.uptime_s + Math.round((Date.now() - state.received) / 1000);
  const list = el("ul", { class: "facts" },
    fact("version", b.version),
    fact("uptime", duration(uptime)),
    fact("MQTT", b.broker + " (" + b.protocol + ")"),
    el("li", {}, el("span", { class: "pill " + (b.mqtt_connected ? "ok" : "bad"), "data-mqtt": b.mqtt_connected },
      b.mqtt_connected ? "connected" : "not connected")),
    fact("REST", b.rest.last_minute + " / " + b.rest.limit + " per min"));
  const children = [el("h2", {}, "Bridge"), list];
  if (b.problems.length) children.push(problemList(b.problems));
  box.replaceChildren(...children);
}

function problemList(problems) {
  return el("ul", { class: "problems" }, ...problems.map((p) => el("li", {}, ago(p.at) + ": " + p.message)));
}

function range(label, min, max, value, onchange, attrs) {
  const input = el("input", Object.assign({ type: "range", min, max, value: value ?? min, disabled: !state.control,
    onchange: (e) => onchange(Number(e.target.value)) }, attrs || {}));
  return el("label", {}, label, input);
}

function unitCard(net, u) {
  const readings = [];
  if (u.brightness !== null && u.brightness !== undefined) readings.push(Math.round(u.brightness / 2.55) + " %");
  if (u.rgb) readings.push(el("span", {}, el("span", { class: "swatch", "data-rgb": u.rgb, style: null }), " colour"));
  if (u.color_temp) readings.push(u.color_temp + " K");
  if (u.occupancy !== null && u.occupancy !== undefined) readings.push(u.occupancy ? "occupied" : "vacant");
  if (u.illuminance !== null && u.illuminance !== undefined) readings.push(u.illuminance + " lx");
  if (u.battery !== null && u.battery !== undefined) readings.push("battery " + u.battery + " %");
  if (u.energy !== null && u.energy !== undefined) readings.push(u.energy + " kWh");
  const online = u.online !== false;
  const on = u.state === "ON";
  const toggle = u.offers.toggle
    ? el("button", { class: on ? "on" : "", disabled: !state.control, "data-toggle": u.id, "aria-pressed": on,
        onclick: () => send({ network: net.id, target: "unit", id: u.id, payload: "TOGGLE" }) }, on ? "On" : "Off")
    : el("span");
  const sliders = [];
  if (u.offers.brightness) {
    sliders.push(range("brightness", 0, 255, u.brightness, (v) =>
      send({ network: net.id, target: "unit", id: u.id, attr: "brightness", payload: v }), { "data-brightness": u.id }));
  }
  if (u.offers.color_temp) {
    const [lo, hi] = u.kelvin || [2200, 6500];
    sliders.push(range("temperature", lo, hi, u.color_temp, (v) =>
      send({ network: net.id, target: "unit", id: u.id, attr: "color_temp", payload: v }), { "data-kelvin": u.id }));
  }
  const card = el("div", { class: "unit" + (online ? "" : " offline"), "data-unit": u.id, "data-state": u.state },
    u.icon ? el("img", { src: u.icon, alt: "", loading: "lazy", onerror: (e) => e.target.replaceWith(el("span")) }) : el("span"),
    el("div", {}, el("div", { class: "name" }, u.name || "unit " + u.id),
      el("div", { class: "kind" }, (u.type || "unit") + (online ? "" : " · offline"))),
    toggle,
    el("div", { class: "readings" }, ...readings.map((r) => el("span", {}, r))),
    sliders.length ? el("div", { class: "sliders" }, ...sliders) : null);
  for (const s of card.querySelectorAll(".swatch")) s.style.background = s.getAttribute("data-rgb");
  return card;
}

function byName(a, b) {
  return String(a.name || "").localeCompare(String(b.name || "")) || a.id - b.id;
}

// One API key serves every network: its latest count is the bridge's.
function restText(header) {
  const rest = state.bridge ? state.bridge.rest : header.rest;
  return rest.last_minute + " / " + rest.limit + " per min";
}

function renderNetwork(net) {
  const section = net.element || el("section", { class: "card network" });
  net.element = section;
  section.setAttribute("data-network", net.id);
  const h = net.header;
  const facts = el("ul", { class: "facts" },
    el("li", {}, el("span", { class: "pill " + h.connection, "data-connection": h.connection }, h.connection)),
    fact("gateway", h.gateway_online ? "online" : "offline"),
    fact("last event", ago(h.last_event)),
    fact("REST", restText(h)));
  const dim = el("div", { class: "dim" }, range("dim level", 0, 100,
    h.dim_level === null ? 100 : Math.round(h.dim_level * 100),
    (v) => send({ network: net.id, target: "network", payload: { dim_level: v / 100 } }), { "data-dim": net.id }));
  const scenes = [...net.scenes.values()].sort(byName).map((s) => {
    const active = h.active_scenes.includes(s.id);
    return el("button", { class: active ? "on" : "", disabled: !state.control, "data-scene": s.id, "aria-pressed": active,
      onclick: () => send({ network: net.id, target: "scene", id: s.id, payload: active ? "OFF" : "ON" }) }, s.name);
  });
  const groups = [...net.groups.values()].sort(byName).map((g) =>
    el("div", { class: "group", "data-group": g.id }, g.name + ": " + (g.state || "–") +
      (g.brightness !== null && g.brightness !== undefined ? " " + Math.round(g.brightness / 2.55) + " %" : "") +
      " (" + g.members.length + " units)"));
  const units = el("div", { class: "units" });
  net.unitCards = new Map();
  for (const u of [...net.units.values()].sort(byName)) {
    const card = unitCard(net, u);
    net.unitCards.set(u.id, card);
    units.append(card);
  }
  const children = [el("h2", {}, h.name), facts, dim];
  if (h.problems.length) children.push(problemList(h.problems));
  if (scenes.length) children.push(el("h3", {}, "Scenes"), el("div", { class: "chips" }, ...scenes));
  if (groups.length) children.push(el("h3", {}, "Groups"), ...groups);
  children.push(el("h3", {}, "Units (" + net.units.size + ")"), units);
  section.replaceChildren(...children);
  return section;
}

function networkFrom(model, old) {
  const { units, groups, scenes, ...header } = model;
  return {
    id: model.id,
    header,
    units: new Map(units.map((u) => [u.id, u])),
    groups: new Map(groups.map((g) => [g.id, g])),
    scenes: new Map(scenes.map((s) => [s.id, s])),
    element: old ? old.element : null,
  };
}

function renderAll() {
  renderBridge();
  const main = document.getElementById("networks");
  main.replaceChildren(...[...state.networks.values()].map(renderNetwork));
}

// ---- live stream ----------------------------------------------------------------------------

function setLive(text, cls) {
  const p = document.getElementById("live");
  p.textContent = text;
  p.className = "pill " + cls;
}

function connect() {
  const source = new EventSource("api/events");
  source.addEventListener("open", () => setLive("live", "live"));
  source.addEventListener("error", () => setLive("reconnecting…", "down"));
  source.addEventListener("snapshot", (e) => {
    const page = JSON.parse(e.data);
    state.bridge = page.bridge;
    state.received = Date.now();
    const old = state.networks;
    state.networks = new Map(page.networks.map((n) => [n.id, networkFrom(n, old.get(n.id))]));
    renderAll();
  });
  source.addEventListener("network", (e) => {
    const model = JSON.parse(e.data);
    const known = state.networks.has(model.id);
    const net = networkFrom(model, state.networks.get(model.id));
    state.networks.set(model.id, net);
    if (known) renderNetwork(net); else renderAll();
  });
  source.addEventListener("status", (e) => {
    const header = JSON.parse(e.data);
    const net = state.networks.get(header.id);
    if (!net) return;
    net.header = header;
    renderNetwork(net);
  });
  source.addEventListener("units", (e) => {
    const frame = JSON.parse(e.data);
    const net = state.networks.get(frame.network);
    if (!net) return;
    let added = false;
    for (const u of frame.units) {
      added = added || !net.units.has(u.id);
      net.units.set(u.id, u);
      const old = net.unitCards && net.unitCards.get(u.id);
      if (old) {
        const card = unitCard(net, u);
        old.replaceWith(card);
        net.unitCards.set(u.id, card);
      }
    }
    for (const g of frame.groups) net.groups.set(g.id, g);
    if (added || frame.groups.length) renderNetwork(net);
  });
  source.addEventListener("bridge", (e) => {
    state.bridge = JSON.parse(e.data);
    state.received = Date.now();
    renderBridge();
  });
}

async function checkAccess() {
  try {
    const r = await fetch("api/access", { headers: authHeaders() });
    const answer = await r.json();
    state.control = answer.control === true;
    const notice = document.getElementById("access");
    notice.textContent = state.control ? "" : answer.reason;
    notice.hidden = state.control;
  } catch (e) {
    state.control = false;
  }
}

// Times ("12 s ago", uptime) move on between frames.
setInterval(() => {
  renderBridge();
  for (const net of state.networks.values()) {
    const facts = net.element && net.element.querySelectorAll(".facts li b");
    if (facts && facts.length >= 3) {
      facts[1].textContent = ago(net.header.last_event);
      facts[2].textContent = restText(net.header);
    }
  }
}, 5000);

checkAccess().then(() => { renderAll(); connect(); });
