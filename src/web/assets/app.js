// casambi2mqtt web page (docs/web.md). Plain JavaScript, no build step, nothing from the internet.
// Every text that comes from the service (names) is put in the page with textContent, never as
// HTML, so a unit named "<script>" shows as that text.
//
// Big sites: a network's units are built only while it is open, a few at a time between frames,
// and a network starts closed when the site has many networks or it has many units. The bridge
// sends a big site's networks without their units: the page asks for a network's units when it
// is opened. The search box asks the bridge for the units whose names hold the text.
"use strict";

const TOKEN_KEY = "casambi2mqtt.token";
// A site with more networks than this, or a network with more units, starts with networks closed.
const OPEN_NETWORKS_AT_MOST = 3;
const OPEN_UNITS_AT_MOST = 100;
// Unit cards built per animation frame.
const CARDS_PER_FRAME = 80;
// Icons loading at once. An icon the bridge has not fetched yet waits for the API key's quota;
// a browser opens only a few connections to one host, and the rest are kept for the live
// stream and for commands.
const ICON_LOADS = 2;

const state = {
  bridge: null,
  networks: new Map(),
  control: false,
  received: Date.now(),
  query: "",
  // What the search found: units by network id, the networks whose names match, totals.
  found: new Map(),
  foundNetworks: new Set(),
  foundTotal: 0,
  searches: 0,
  // Networks the user opened or closed, by id: true = open.
  folded: new Map(),
  // Networks whose units are being asked for.
  loading: new Set(),
};

// A token given as #token=… is kept for this browser and taken out of the address bar.
(function takeToken() {
  const m = location.hash.match(/^#token=(.+)$/);
  if (!m) return;
  history.replaceState(null, "", location.pathname + location.search);
  try {
    localStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
  } catch (e) {
    // A deferred script runs once the page is parsed: the notice is there.
    showError("The token in the link could not be read (it is not percent-encoded text); ask for a new link.");
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

function plural(n, word) {
  return n + " " + word + (n === 1 ? "" : "s");
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

// ---- the bridge ------------------------------------------------------------------------------

function fact(label, value) {
  return el("li", {}, label + " ", el("b", {}, value));
}

function protocolText(b) {
  const spoken = b.protocol_spoken ? "MQTT " + b.protocol_spoken : "not settled yet";
  return spoken + ", setting " + b.protocol;
}

function renderBridge() {
  const b = state.bridge;
  const box = document.getElementById("bridge");
  if (!b) return;
  const uptime = b.uptime_s + Math.round((Date.now() - state.received) / 1000);
  const list = el("ul", { class: "facts" },
    fact("version", b.version),
    fact("uptime", duration(uptime)),
    fact("MQTT", b.broker),
    fact("protocol", protocolText(b)),
    el("li", {}, el("span", { class: "pill " + (b.mqtt_connected ? "ok" : "bad"), "data-mqtt": b.mqtt_connected },
      b.mqtt_connected ? "connected" : "not connected")),
    fact("REST", b.rest.last_minute + " / " + b.rest.limit + " per min"));
  const children = [el("h2", {}, "Bridge"), list];
  if (b.problems.length) children.push(problemList(b.problems));
  box.replaceChildren(...children);
  renderComing();
}

// How many networks are still to come while the bridge starts.
function renderComing() {
  const b = state.bridge;
  const p = document.getElementById("coming");
  const parts = [];
  if (b && b.networks_to_come) parts.push(plural(b.networks_to_come, "network") + " still to come");
  if (b && b.logins_to_come) parts.push(plural(b.logins_to_come, "login") + " in progress");
  p.textContent = parts.length ? parts.join("; ") + " (the bridge reads them within its REST quota)." : "";
  p.hidden = !parts.length;
}

function problemList(problems) {
  return el("ul", { class: "problems" }, ...problems.map((p) => el("li", {}, ago(p.at) + ": " + p.message)));
}

// ---- units -----------------------------------------------------------------------------------

function range(label, min, max, value, onchange, attrs) {
  const input = el("input", Object.assign({ type: "range", min, max, value: value ?? min, disabled: !state.control,
    onchange: (e) => onchange(Number(e.target.value)) }, attrs || {}));
  return el("label", {}, label, input);
}

function known(v) {
  return v !== null && v !== undefined;
}

function unitCard(net, u) {
  const readings = [];
  if (known(u.brightness)) readings.push(Math.round(u.brightness / 2.55) + " %");
  if (u.rgb) readings.push(el("span", {}, el("span", { class: "swatch", "data-rgb": u.rgb }), " colour"));
  if (u.color_temp) readings.push(u.color_temp + " K");
  if (known(u.occupancy)) readings.push(u.occupancy ? "occupied" : "vacant");
  if (known(u.illuminance)) readings.push(u.illuminance + " lx");
  if (known(u.battery)) readings.push("battery " + Math.round(u.battery) + " %");
  if (known(u.energy)) readings.push(Number(u.energy).toFixed(2) + " kWh");
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
  // The page's own picture until the unit's icon comes.
  const icon = el("img", { src: "unit.svg", alt: "", width: 40, height: 40 });
  if (u.icon) queueIcon(icon, u.icon);
  const card = el("div", { class: "unit" + (online ? "" : " offline"), "data-unit": u.id, "data-state": u.state },
    icon,
    el("div", {}, el("div", { class: "name" }, u.name || "unit " + u.id),
      el("div", { class: "kind" }, (u.type || "unit") + (online ? "" : " · offline"))),
    toggle,
    el("div", { class: "readings" }, ...readings.map((r) => el("span", {}, r))),
    sliders.length ? el("div", { class: "sliders" }, ...sliders) : null);
  for (const s of card.querySelectorAll(".swatch")) s.style.background = s.getAttribute("data-rgb");
  return card;
}

const icons = { loading: 0, waiting: [], scheduled: false };

// Sets an icon's picture once fewer than ICON_LOADS are loading (after the running script has
// put its card in the page; an icon whose card left the page meanwhile is not loaded).
function queueIcon(img, src) {
  icons.waiting.push([img, src]);
  if (icons.scheduled) return;
  icons.scheduled = true;
  queueMicrotask(() => { icons.scheduled = false; pumpIcons(); });
}

function pumpIcons() {
  while (icons.loading < ICON_LOADS && icons.waiting.length) {
    const [img, src] = icons.waiting.shift();
    if (!img.isConnected) continue;
    icons.loading++;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      icons.loading--;
      pumpIcons();
    };
    img.addEventListener("load", finish, { once: true });
    img.addEventListener("error", finish, { once: true });
    img.src = src;
  }
}

function byName(a, b) {
  return String(a.name || "").localeCompare(String(b.name || ""), undefined, { numeric: true }) || a.id - b.id;
}

// The units of `net` the page shows now: all, or those the search found.
function shownUnits(net) {
  if (state.query) return [...(state.found.get(net.id) || [])].sort(byName);
  return [...net.units.values()].sort(byName);
}

// Builds the unit cards of an open network a few per frame; a newer call cancels an older one.
function renderUnits(net) {
  const box = net.unitBox;
  net.unitCards = new Map();
  const generation = (net.generation || 0) + 1;
  net.generation = generation;
  box.replaceChildren();
  const units = shownUnits(net);
  let next = 0;
  const step = () => {
    if (net.generation !== generation || !isOpen(net)) return;
    const frame = document.createDocumentFragment();
    for (const end = Math.min(units.length, next + CARDS_PER_FRAME); next < end; next++) {
      const card = unitCard(net, units[next]);
      net.unitCards.set(units[next].id, card);
      frame.append(card);
    }
    box.append(frame);
    if (next < units.length) requestAnimationFrame(step);
  };
  step();
}

// ---- networks --------------------------------------------------------------------------------

// One API key serves every network: its latest count is the bridge's.
function restText(header) {
  const rest = state.bridge ? state.bridge.rest : header.rest;
  return rest.last_minute + " / " + rest.limit + " per min";
}

function isOpen(net) {
  if (state.query) return true;
  if (state.folded.has(net.id)) return state.folded.get(net.id);
  return state.networks.size <= OPEN_NETWORKS_AT_MOST && net.count <= OPEN_UNITS_AT_MOST;
}

function networkVisible(net) {
  return !state.query || state.found.has(net.id) || state.foundNetworks.has(net.id);
}

// Asks the bridge for a network's units (a big site's networks come without them).
async function loadNetwork(id) {
  if (state.loading.has(id)) return;
  state.loading.add(id);
  try {
    const r = await fetch("api/networks/" + encodeURIComponent(id));
    if (!r.ok) return;
    const model = await r.json();
    const net = networkFrom(model, state.networks.get(id));
    state.networks.set(id, net);
    renderNetwork(net);
  } catch (e) {
    showError("The bridge did not answer: " + e);
  } finally {
    state.loading.delete(id);
  }
}

// The section of a network: its heading (always), its details and units (while open).
function renderNetwork(net) {
  const section = net.element || el("section", { class: "card network" });
  net.element = section;
  section.setAttribute("data-network", net.id);
  const h = net.header;
  const open = isOpen(net);
  section.hidden = !networkVisible(net);
  section.classList.toggle("closed", !open);
  const fold = el("button", { class: "fold", "aria-expanded": open, "data-fold": net.id,
    title: open ? "close" : "open", onclick: () => { state.folded.set(net.id, !open); renderNetwork(net); } },
    open ? "▾" : "▸");
  const heading = el("div", { class: "heading" }, fold, el("h2", {}, h.name),
    el("span", { class: "pill " + h.connection, "data-connection": h.connection }, h.connection),
    el("span", { class: "count" }, plural(net.count, "unit")));
  net.statusBox = el("div", { class: "details" });
  net.unitBox = el("div", { class: "units" });
  if (open && state.query) {
    // A search shows the units found under their network's heading, nothing else.
    section.replaceChildren(heading, net.unitBox);
    renderUnits(net);
  } else if (open) {
    renderStatus(net);
    section.replaceChildren(heading, net.statusBox, net.unitBox);
    if (net.full || state.query) {
      renderUnits(net);
    } else {
      net.unitBox.replaceChildren(el("p", { class: "found" }, "loading " + plural(net.count, "unit") + "…"));
      loadNetwork(net.id);
    }
  } else {
    net.generation = (net.generation || 0) + 1;
    net.unitCards = new Map();
    section.replaceChildren(heading);
  }
  return section;
}

// A network's own fields, scenes and groups (an open network's part above its units).
function renderStatus(net) {
  const h = net.header;
  const facts = el("ul", { class: "facts" },
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
      (known(g.brightness) ? " " + Math.round(g.brightness / 2.55) + " %" : "") +
      " (" + plural(g.members.length, "unit") + ")"));
  const children = [facts, dim];
  if (h.problems.length) children.push(problemList(h.problems));
  if (scenes.length) children.push(el("h3", {}, "Scenes"), el("div", { class: "chips" }, ...scenes));
  if (groups.length) children.push(el("h3", {}, "Groups"), ...groups);
  children.push(el("h3", {}, "Units (" + net.count + ")"));
  net.statusBox.replaceChildren(...children);
}

function networkFrom(model, old) {
  const { units, unit_count, groups, scenes, ...header } = model;
  return {
    id: model.id,
    header,
    // A big site's network comes without its units until the page asks for them.
    full: Array.isArray(units),
    units: new Map((units || []).map((u) => [u.id, u])),
    count: unit_count,
    groups: new Map(groups.map((g) => [g.id, g])),
    scenes: new Map(scenes.map((s) => [s.id, s])),
    element: old ? old.element : null,
  };
}

function renderAll() {
  renderBridge();
  const main = document.getElementById("networks");
  main.replaceChildren(...[...state.networks.values()].map(renderNetwork));
  renderFound();
}

// What the search found.
function renderFound() {
  const p = document.getElementById("found");
  if (!state.query) { p.hidden = true; return; }
  let nets = 0, units = 0;
  for (const net of state.networks.values()) {
    if (!networkVisible(net)) continue;
    nets++;
    units += shownUnits(net).length;
  }
  let text = plural(state.foundTotal, "unit") + " in " + plural(nets, "network") + " match";
  if (units < state.foundTotal) text += " (the first " + units + " shown)";
  p.textContent = text;
  p.hidden = false;
}

// Asks the bridge which units match the search; a newer search wins over an older answer.
async function runSearch(query) {
  const search = ++state.searches;
  if (!query) {
    state.query = "";
    renderAll();
    return;
  }
  try {
    const r = await fetch("api/units?q=" + encodeURIComponent(query));
    const answer = await r.json();
    if (search !== state.searches) return;
    state.query = query;
    state.found = new Map(answer.found.map((f) => [f.network, f.units]));
    state.foundNetworks = new Set(answer.networks);
    state.foundTotal = answer.total;
    renderAll();
  } catch (e) {
    showError("The bridge did not answer: " + e);
  }
}

// ---- live stream -----------------------------------------------------------------------------

function setLive(text, cls) {
  const p = document.getElementById("live");
  p.textContent = text;
  p.className = "pill " + cls;
}

// A browser reconnects a stream that broke by itself, but gives up on one refused with an error
// status (the bridge's 503 when too many pages are open): the page then tries again, spread out
// so that many refused pages do not come back together.
const RETRY_REFUSED_MS = 5000;

function connect() {
  const source = new EventSource("api/events");
  source.addEventListener("open", () => setLive("live", "live"));
  source.addEventListener("error", () => {
    setLive("reconnecting…", "down");
    if (source.readyState === EventSource.CLOSED) {
      setTimeout(connect, RETRY_REFUSED_MS + Math.random() * RETRY_REFUSED_MS);
    }
  });
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
    const old = state.networks.get(model.id);
    const net = networkFrom(model, old);
    const before = state.networks.size;
    state.networks.set(model.id, net);
    if (old) {
      renderNetwork(net);
    } else if (before === OPEN_NETWORKS_AT_MOST) {
      // The site just became one whose networks start closed.
      renderAll();
    } else {
      // A network read for the first time (the bridge is starting): added, the others kept.
      document.getElementById("networks").append(renderNetwork(net));
      renderFound();
    }
  });
  source.addEventListener("status", (e) => {
    const header = JSON.parse(e.data);
    const net = state.networks.get(header.id);
    if (!net) return;
    const changedConnection = net.header.connection !== header.connection;
    net.header = header;
    if (changedConnection || !net.statusBox || !isOpen(net)) {
      const pill = net.element && net.element.querySelector(".heading .pill");
      if (pill) { pill.textContent = header.connection; pill.className = "pill " + header.connection; pill.dataset.connection = header.connection; }
    }
    if (isOpen(net) && !state.query && net.statusBox) renderStatus(net);
  });
  source.addEventListener("units", (e) => {
    const frame = JSON.parse(e.data);
    const net = state.networks.get(frame.network);
    if (!net) return;
    let added = false;
    for (const u of frame.units) {
      if (net.full) {
        added = added || !net.units.has(u.id);
        net.units.set(u.id, u);
      }
      const old = net.unitCards && net.unitCards.get(u.id);
      if (old) {
        const card = unitCard(net, u);
        old.replaceWith(card);
        net.unitCards.set(u.id, card);
      }
    }
    for (const g of frame.groups) net.groups.set(g.id, g);
    if (net.full) net.count = net.units.size;
    if (added) renderNetwork(net);
    else if (frame.groups.length && isOpen(net) && !state.query && net.statusBox) renderStatus(net);
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

// The search box: filters as the user types, a moment after the last key.
(function search() {
  const input = document.getElementById("search");
  let timer = null;
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => runSearch(input.value.trim()), 150);
  });
})();

// Times ("12 s ago", uptime) move on between frames.
setInterval(() => {
  renderBridge();
  for (const net of state.networks.values()) {
    const facts = net.statusBox && net.element && net.element.contains(net.statusBox) && net.statusBox.querySelectorAll(".facts li b");
    if (facts && facts.length >= 3) {
      facts[1].textContent = ago(net.header.last_event);
      facts[2].textContent = restText(net.header);
    }
  }
}, 5000);

checkAccess().then(() => { renderAll(); connect(); });
