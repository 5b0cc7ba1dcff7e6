// AGENT-33 operator dashboard: plain browser JavaScript, no build step, no framework.
//
// Data comes from the gateway's API with the operator's bearer token (kept in sessionStorage):
// GET /v1/operator/status (the fleet), GET /v1/approvals?status=pending, POST
// /v1/approvals/{id}/approve|deny, GET /v1/mcp/sync/proposals and POST /v1/mcp/sync/apply (the
// discovered servers), and GET /v1/events, read with fetch() streaming rather than
// EventSource so the token travels in a header, never in a URL. Every value from the server is
// written with textContent, never as HTML. A token shows what it reaches: an approver, or an
// operator of one tenant, gets that tenant's approvals (and, as an operator, its events) with the
// gateway-wide panels hidden and the gateway's reason shown.
"use strict";

const TOKEN_KEY = "agent33.dashboard.token";
const MAX_EVENTS = 50;
const FLEET_EVENTS = new Set([
  "proxy.state",
  "proxy.breaker",
  "proxy.health",
  "proxy.tools",
  "fleet.reloaded",
  "tools.changed",
  "session.opened",
  "session.closed",
  "gateway.started",
]);
const APPROVAL_EVENTS = new Set(["approval.requested", "approval.approved", "approval.denied"]);
const CANDIDATE_EVENTS = new Set([
  "discovery.candidate_added",
  "discovery.candidate_removed",
  "fleet.reloaded",
]);
const SEVERITIES = ["critical", "high", "medium", "low", "info"];

const state = {
  token: sessionStorage.getItem(TOKEN_KEY),
  /** @type {AbortController | null} */
  stream: null,
  retryMs: 3000,
  status: null,
  statusAt: 0,
  approvals: [],
  /** Pending proposals from discovery, and the plugins running (null: discovery is off). */
  candidates: [],
  discovering: null,
  events: [],
  timers: new Map(),
  /** Whether this token reaches the fleet (the gateway-wide panels). */
  fleet: true,
  /** The approvals poll, for a token the event stream refuses. */
  poll: 0,
};
const POLL_MS = 5000;

const $ = (id) => document.getElementById(id);

/** Creates an element; children are nodes or strings (always inserted as text). */
function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

class AuthError extends Error {}
/** A 403 on a part this token does not reach (`optional: true`): the rest still works. */
class ScopeError extends Error {}

/**
 * Calls the API with the token; a 401 or 403 signs out with a message saying why. A decision
 * (`decision: true`) refused with 403 (no approver scope, the operator's own request, or no admin
 * scope to add a discovered server) is
 * reported instead: the token still serves the rest of the dashboard.
 */
async function api(path, { decision = false, optional = false, ...init } = {}) {
  const response = await fetch(path, {
    ...init,
    cache: "no-store",
    headers: { ...init.headers, Authorization: `Bearer ${state.token}` },
  });
  if (decision && response.status === 403) throw new Error(await errorMessage(response));
  if (optional && response.status === 403) throw new ScopeError(await errorMessage(response));
  if (response.status === 401 || response.status === 403) {
    const message = await errorMessage(response);
    signOut(
      response.status === 401
        ? "The gateway refused this token (401). Enter a valid one."
        : `This token may not use the dashboard: ${message}`,
    );
    throw new AuthError(message);
  }
  if (!response.ok) throw new Error(await errorMessage(response));
  return await response.json();
}

async function errorMessage(response) {
  const body = await response.json().catch(() => null);
  return body?.error?.message ?? `HTTP ${response.status}`;
}

/** Runs `fn` once, `ms` after the last of a burst of calls. */
function debounce(key, ms, fn) {
  clearTimeout(state.timers.get(key));
  state.timers.set(key, setTimeout(fn, ms));
}

// ---------------------------------------------------------------------------------------------
// Sign-in

function showLogin(message) {
  $("app").hidden = true;
  $("signout").hidden = true;
  $("login").hidden = false;
  const error = $("login-error");
  error.hidden = !message;
  error.textContent = message ?? "";
  $("token").focus();
}

function signOut(message) {
  state.stream?.abort();
  state.stream = null;
  clearInterval(state.poll);
  state.poll = 0;
  state.token = null;
  // The next token may reach less: nothing shown to this one stays on the page.
  Object.assign(state, { status: null, approvals: [], candidates: [], events: [] });
  for (const id of ["events", "approvals", "candidates"]) $(id).replaceChildren();
  $("fleet").tBodies[0].replaceChildren();
  $("events-empty").textContent = "Waiting for events…";
  $("events-empty").hidden = false;
  $("approvals-empty").textContent = "Nothing is waiting for a decision.";
  sessionStorage.removeItem(TOKEN_KEY);
  setLive("offline");
  showLogin(message);
}

async function signIn(token) {
  state.token = token;
  const [fleet, approvals] = await Promise.allSettled([
    refreshStatus(true),
    refreshApprovals(true),
  ]);
  const failed = [fleet, approvals].find((r) =>
    r.status === "rejected" && !(r.reason instanceof ScopeError)
  );
  if (failed) {
    if (!(failed.reason instanceof AuthError)) {
      showLogin(`Cannot reach the gateway: ${failed.reason.message}`);
    }
    return;
  }
  if (fleet.status === "rejected" && approvals.status === "rejected") {
    signOut(`This token may not use the dashboard: ${fleet.reason.message}`);
    return;
  }
  // The token reaches one tenant's approvals only: the gateway says why the rest is hidden.
  state.fleet = fleet.status === "fulfilled";
  for (const node of document.querySelectorAll(".fleet-only")) node.hidden = !state.fleet;
  $("scope-note").hidden = state.fleet;
  $("scope-note-text").textContent = state.fleet ? "" : fleet.reason.message;
  if (approvals.status === "rejected") {
    $("approvals-empty").textContent = `Approvals are hidden: ${approvals.reason.message}`;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  $("login").hidden = true;
  $("app").hidden = false;
  $("signout").hidden = false;
  refreshCandidates().catch(report);
  streamEvents();
}

function report(error) {
  if (error instanceof AuthError) return;
  toast(error.message, true);
}

function toast(message, bad = false) {
  const node = $("toast");
  node.textContent = message;
  node.className = bad ? "toast tone-bad" : "toast";
  node.hidden = false;
  debounce("toast", 3500, () => (node.hidden = true));
}

// ---------------------------------------------------------------------------------------------
// Live events: fetch() streaming with a small SSE parser, reconnecting with the server's retry.

function setLive(mode) {
  const pill = $("live");
  pill.dataset.state = mode;
  $("live-text").textContent = {
    live: "Live",
    reconnecting: "Reconnecting…",
    polling: "Polling approvals",
  }[mode] ?? "Offline";
}

async function streamEvents() {
  state.stream?.abort();
  const controller = new AbortController();
  state.stream = controller;
  const { signal } = controller;
  while (!signal.aborted) {
    try {
      const response = await fetch("/v1/events", {
        headers: { Authorization: `Bearer ${state.token}`, Accept: "text/event-stream" },
        cache: "no-store",
        signal,
      });
      if (response.status === 403 && !state.fleet) {
        pollApprovals(await errorMessage(response));
        return;
      }
      if (response.status === 401 || response.status === 403) {
        signOut("The gateway refused this token for the event stream. Enter a valid one.");
        return;
      }
      if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buffer += value.replace(/\r\n?/g, "\n");
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          onFrame(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch {
      if (signal.aborted) return;
    }
    if (signal.aborted) return;
    setLive("reconnecting");
    await new Promise((resolve) => {
      const timer = setTimeout(resolve, state.retryMs);
      signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
    });
  }
}

/** Without the event stream (an approver's token), approvals are fetched every few seconds. */
function pollApprovals(reason) {
  setLive("polling");
  $("events-empty").textContent = `Events are hidden: ${reason}`;
  clearInterval(state.poll);
  state.poll = setInterval(() =>
    refreshApprovals().then(() => setLive("polling"), (error) => {
      if (!(error instanceof AuthError)) setLive("reconnecting");
      report(error);
    }), POLL_MS);
}

function onFrame(frame) {
  let type = "message";
  const data = [];
  for (const line of frame.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") type = value;
    else if (field === "data") data.push(value);
    else if (field === "retry" && /^\d+$/.test(value)) state.retryMs = Number(value);
  }
  if (data.length === 0) return;
  let event;
  try {
    event = JSON.parse(data.join("\n"));
  } catch {
    return;
  }
  if (type === "stream.open") {
    // (Re)connected: anything may have changed while we were away.
    setLive("live");
    refreshStatus().catch(report);
    refreshApprovals().catch(report);
    refreshCandidates().catch(report);
    return;
  }
  if (type === "stream.overflow") {
    addEvent({ type, dropped: event.dropped });
    refreshStatus().catch(report);
    refreshApprovals().catch(report);
    refreshCandidates().catch(report);
    return;
  }
  addEvent(event);
  if (FLEET_EVENTS.has(type)) debounce("status", 150, () => refreshStatus().catch(report));
  if (APPROVAL_EVENTS.has(type)) debounce("approvals", 100, () => refreshApprovals().catch(report));
  if (CANDIDATE_EVENTS.has(type)) {
    debounce("candidates", 150, () => refreshCandidates().catch(report));
  }
  if (type === "gateway.stopping") setLive("reconnecting");
}

// ---------------------------------------------------------------------------------------------
// Fleet

/** Reads the fleet; `probe` (at sign-in) throws ScopeError where the token does not reach it. */
async function refreshStatus(probe = false) {
  if (!probe && !state.fleet) return;
  state.status = await api("/v1/operator/status", { optional: probe });
  state.statusAt = Date.now();
  renderStatus();
}

const STATE_TONES = {
  READY: "tone-ok",
  DEGRADED: "tone-warn",
  STARTING: "tone-info",
  FAILED: "tone-bad",
  STOPPED: "",
};
const BREAKER_TONES = { CLOSED: "tone-ok subtle", HALF_OPEN: "tone-warn", OPEN: "tone-bad" };

function renderStatus() {
  const status = state.status;
  if (!status) return;
  const servers = [...status.servers].sort((a, b) => a.id.localeCompare(b.id));
  const ready = servers.filter((s) => s.state === "READY").length;
  const gw = status.gateway ?? {};
  setStat("stat-ready", `${ready} / ${servers.length}`, ready < servers.length);
  // The gateway's own tools plus every upstream's (a FAILED server's are hidden, so count 0).
  setStat("stat-tools", (gw.tools ?? 0) + servers.reduce((n, s) => n + (s.tools ?? 0), 0));
  setStat("stat-sessions", gw.sessions ?? "–");
  if (gw.gateway) {
    setStat("stat-gateway", `v${gw.gateway.version} · up ${duration(gw.gateway.uptimeSeconds)}`);
  }

  const showFindings = servers.some((s) => findingsOf(s) !== undefined);
  for (const th of document.querySelectorAll("th.col-findings")) th.hidden = !showFindings;

  const rows = servers.map((s) => {
    const tone = STATE_TONES[s.state] ?? "";
    const breaker = s.breaker ?? {};
    const health = s.health ?? {};
    const rowTone = s.state === "FAILED" || breaker.state === "OPEN"
      ? "row-bad"
      : s.state === "DEGRADED" || breaker.state === "HALF_OPEN"
      ? "row-warn"
      : undefined;
    const meta = [s.transport, s.serverInfo && `${s.serverInfo.name} ${s.serverInfo.version}`]
      .filter(Boolean).join(" · ");
    return h(
      "tr",
      { class: rowTone, dataset: { server: s.id, state: s.state, breaker: breaker.state } },
      h(
        "td",
        { class: "cell-server", "data-label": "Server" },
        h(
          "div",
          {},
          h("span", { class: "server-id" }, s.id),
          h("span", { class: "server-meta" }, meta),
        ),
      ),
      h(
        "td",
        { class: "cell-state", "data-label": "State" },
        h("span", { class: `badge ${tone}` }, s.state),
      ),
      h(
        "td",
        { class: "cell-breaker", "data-label": "Breaker" },
        h("span", { class: `badge ${BREAKER_TONES[breaker.state] ?? ""}` }, breakerLabel(breaker)),
      ),
      h(
        "td",
        { class: "cell-health", "data-label": "Last check" },
        health.checkedAt
          ? h(
            "span",
            {
              title: `${new Date(health.checkedAt).toISOString()}${
                health.error ? ` · ${health.error}` : ""
              }`,
            },
            h("span", { class: `health-dot ${health.ok ? "ok" : "bad"}` }),
            h("span", { dataset: { since: health.checkedAt } }, ago(health.checkedAt)),
          )
          : h("span", { class: "muted" }, "not yet"),
      ),
      h(
        "td",
        { class: "num", "data-label": "Latency" },
        health.latencyMs === undefined ? "–" : `${Math.round(health.latencyMs)} ms`,
      ),
      h("td", { class: "num cell-tools", "data-label": "Tools" }, s.tools ?? 0),
      h("td", { class: "num", "data-label": "Restarts" }, s.restarts ?? 0),
      h(
        "td",
        { class: "col-findings", "data-label": "Findings", hidden: !showFindings },
        renderFindings(findingsOf(s)),
      ),
      h(
        "td",
        { "data-label": "Last error" },
        s.lastError
          ? h("span", { class: "last-error", title: s.lastError }, s.lastError)
          : h("span", { class: "muted" }, "—"),
      ),
    );
  });
  $("fleet").tBodies[0].replaceChildren(...rows);
  $("fleet-empty").hidden = servers.length > 0;
  $("fleet-updated").textContent = "updated just now";
  $("fleet-updated").dataset.since = String(state.statusAt);
}

function breakerLabel(breaker) {
  if (!breaker.state) return "–";
  if (breaker.state === "OPEN" && breaker.retryAfterMs) {
    return `OPEN · retry ${duration(breaker.retryAfterMs / 1000)}`;
  }
  if (breaker.trips > 0 && breaker.state !== "OPEN") {
    return `${breaker.state} · ${plural(breaker.trips, "trip")}`;
  }
  return breaker.state;
}

function setStat(id, value, attention = false) {
  const node = $(id);
  node.textContent = String(value);
  node.classList.toggle("attention", attention);
}

/** Scanner findings, if the status has them: an array of findings, or counts by severity. */
function findingsOf(server) {
  const raw = server.findings ?? server.scan?.findings ?? server.scan;
  if (raw === undefined || raw === null) return undefined;
  const counts = {};
  const lines = [];
  if (Array.isArray(raw)) {
    for (const f of raw) {
      const severity = String(f?.severity ?? "info");
      counts[severity] = (counts[severity] ?? 0) + 1;
      lines.push(`${severity} ${f?.ruleId ?? f?.rule ?? ""}: ${f?.message ?? ""}`.trim());
    }
  } else if (typeof raw === "number") {
    counts.total = raw;
  } else if (typeof raw === "object") {
    const bySeverity = raw.bySeverity ?? raw.counts ?? raw;
    for (const [key, value] of Object.entries(bySeverity)) {
      if (typeof value === "number") counts[key] = value;
    }
  }
  return { counts, lines };
}

function renderFindings(findings) {
  if (!findings) return "";
  const entries = Object.entries(findings.counts).filter(([, n]) => n > 0)
    .sort(([a], [b]) => rank(a) - rank(b));
  if (entries.length === 0) return h("span", { class: "badge tone-ok subtle" }, "clean");
  const tone = (sev) =>
    sev === "critical" || sev === "high"
      ? "tone-bad"
      : sev === "medium"
      ? "tone-warn"
      : "tone-info";
  return h(
    "span",
    { class: "findings", title: findings.lines.join("\n") || undefined },
    entries.map(([sev, n]) => h("span", { class: `badge ${tone(sev)}` }, `${n} ${sev}`)),
  );
}

function rank(severity) {
  const i = SEVERITIES.indexOf(severity);
  return i < 0 ? SEVERITIES.length : i;
}

// ---------------------------------------------------------------------------------------------
// Approvals

async function refreshApprovals(probe = false) {
  const { approvals } = await api("/v1/approvals?status=pending", { optional: probe });
  state.approvals = approvals;
  renderApprovals();
}

function renderApprovals() {
  const items = state.approvals
    .slice()
    .sort((a, b) => a.createdAt - b.createdAt)
    .map((a) =>
      h(
        "li",
        { class: "approval", dataset: { approval: a.id, tool: a.tool } },
        h(
          "div",
          { class: "approval-head" },
          h("span", { class: "approval-tool" }, a.tool),
          h(
            "span",
            { class: `badge ${a.effect === "destructive" ? "tone-bad" : "tone-warn"}` },
            a.effect,
          ),
        ),
        h(
          "div",
          { class: "approval-who" },
          `${a.tenant} / ${a.subject}`,
          a.server ? ` · server ${a.server}` : "",
          " · expires ",
          h("span", { dataset: { until: a.expiresAt } }, until(a.expiresAt)),
        ),
        h("pre", {}, truncate(JSON.stringify(a.arguments ?? {}, null, 2), 600)),
        h(
          "div",
          { class: "approval-actions" },
          h("button", {
            class: "btn btn-deny",
            type: "button",
            "aria-label": `Deny ${a.tool}`,
            onclick: (e) => decide(a, "deny", e.currentTarget),
          }, "Deny"),
          h("button", {
            class: "btn btn-approve",
            type: "button",
            "aria-label": `Approve ${a.tool}`,
            onclick: (e) => decide(a, "approve", e.currentTarget),
          }, "Approve"),
        ),
      )
    );
  $("approvals").replaceChildren(...items);
  $("approvals-empty").hidden = items.length > 0;
  setStat("stat-approvals", items.length, items.length > 0);
}

async function decide(approval, action, button) {
  for (const b of button.parentElement.querySelectorAll("button")) b.disabled = true;
  try {
    await api(`/v1/approvals/${encodeURIComponent(approval.id)}/${action}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: "{}",
      decision: true,
    });
    toast(`${action === "approve" ? "Approved" : "Denied"} ${approval.tool}`);
  } catch (error) {
    report(error);
  }
  await refreshApprovals().catch(report);
}

// ---------------------------------------------------------------------------------------------
// Discovered servers: proposals from running discovery, accepted one at a time

async function refreshCandidates() {
  if (!state.fleet) return;
  const body = await api("/v1/mcp/sync/proposals", { decision: true });
  state.candidates = body.proposals.filter((p) => String(p.source).startsWith("discovery:"));
  state.discovering = body.discovery?.running ?? null;
  renderCandidates();
}

function renderCandidates() {
  $("candidates-running").textContent = state.discovering
    ? `running: ${state.discovering.join(", ")}`
    : "discovery is off (MCP_DISCOVERY)";
  const items = state.candidates.map((p) =>
    h(
      "li",
      { class: "approval", dataset: { proposal: p.id } },
      h(
        "div",
        { class: "approval-head" },
        h("span", { class: "approval-tool" }, p.server),
        h(
          "span",
          { class: `badge ${p.entry?.enabled === false ? "tone-warn" : "tone-ok"}` },
          p.entry?.enabled === false ? "added disabled" : "added enabled",
        ),
      ),
      h(
        "div",
        { class: "approval-who" },
        `${p.source} · ${p.name}`,
        p.entry?.url ? ` · ${p.entry.url}` : "",
      ),
      h("div", { class: "approval-who" }, p.reason),
      p.warning ? h("div", { class: "approval-who tone-warn" }, `Warning: ${p.warning}`) : "",
      // Exactly what the fleet file gets.
      h("pre", { class: "proposal-yaml" }, truncate(p.yaml ?? "", 2000)),
      h(
        "div",
        { class: "approval-actions" },
        h("button", {
          class: "btn btn-approve",
          type: "button",
          "aria-label": `Add ${p.server} to the fleet`,
          onclick: (e) => accept(p, e.currentTarget),
        }, "Add to fleet"),
      ),
    )
  );
  $("candidates").replaceChildren(...items);
  $("candidates-empty").hidden = items.length > 0;
}

async function accept(proposal, button) {
  button.disabled = true;
  try {
    await api("/v1/mcp/sync/apply", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      // The digest binds the click to this card: if the id now means another entry (a
      // rediscovered name, a shadowing announcement), the gateway refuses with 409.
      body: JSON.stringify({
        ids: [proposal.id],
        digests: { [proposal.id]: proposal.digest },
      }),
      decision: true,
    });
    toast(`Added ${proposal.server} to the fleet`);
  } catch (error) {
    report(error);
  }
  await refreshCandidates().catch(report);
}

// ---------------------------------------------------------------------------------------------
// Events

function addEvent(event) {
  state.events.unshift({ at: Date.now(), event });
  state.events.length = Math.min(state.events.length, MAX_EVENTS);
  const list = $("events");
  const node = renderEvent(state.events[0]);
  node.classList.add("fresh");
  list.prepend(node);
  while (list.children.length > MAX_EVENTS) list.lastElementChild.remove();
  $("events-empty").hidden = true;
}

function renderEvent({ at, event }) {
  const [text, tone] = describe(event);
  return h(
    "li",
    { class: "event", dataset: { type: event.type } },
    h("span", { class: "event-time", title: new Date(at).toISOString() }, clock(at)),
    h(
      "span",
      {},
      h("span", { class: `event-type ${tone}` }, event.type),
      h("span", { class: "event-text" }, text),
    ),
  );
}

/** One line per event type, and a tone for its colour. */
function describe(e) {
  const stateTone = (s) =>
    s === "READY" || s === "CLOSED"
      ? "tone-ok"
      : s === "FAILED" || s === "OPEN"
      ? "tone-bad"
      : s === "DEGRADED" || s === "HALF_OPEN"
      ? "tone-warn"
      : "tone-info";
  switch (e.type) {
    case "proxy.state":
      return [
        `${e.server}: ${e.from} → ${e.to}${e.reason ? ` — ${e.reason}` : ""}`,
        stateTone(e.to),
      ];
    case "proxy.breaker":
      return [
        `${e.server}: breaker ${e.from} → ${e.to}, ${plural(e.trips, "trip")}${
          e.retryAfterMs ? `, retry in ${duration(e.retryAfterMs / 1000)}` : ""
        }`,
        stateTone(e.to),
      ];
    case "proxy.health":
      return [
        `${e.server}: health ${e.ok ? "ok" : "failed"} in ${Math.round(e.latencyMs)} ms${
          e.error ? ` — ${e.error}` : ""
        }`,
        e.ok ? "" : "tone-warn",
      ];
    case "proxy.tools":
      return [`${e.server}: ${e.count} tools`, ""];
    case "proxy.tool_dropped":
      return [`${e.server}: dropped ${e.tool} — ${e.reason}`, "tone-warn"];
    case "tools.changed":
      return [`${e.count} tools in total`, ""];
    case "session.opened":
      return [`${e.transport} session for tenant ${e.tenant}`, ""];
    case "session.closed":
      return [`${e.transport} session closed`, ""];
    case "governance.decision":
      return [
        `${e.verdict} ${e.tool} for ${e.tenant}/${e.subject}${e.code ? ` (${e.code})` : ""}`,
        e.verdict === "allow" ? "" : e.verdict === "deny" ? "tone-bad" : "tone-warn",
      ];
    case "approval.requested":
      return [`${e.tool} for ${e.tenant}/${e.subject} needs approval`, "tone-warn"];
    case "approval.approved":
      return [`${e.tool} approved${e.by ? ` by ${e.by}` : ""}`, "tone-ok"];
    case "approval.denied":
      return [
        `${e.tool} denied${e.by ? ` by ${e.by}` : ""}${e.reason ? ` — ${e.reason}` : ""}`,
        "tone-bad",
      ];
    case "fleet.reloaded":
      return [
        `fleet reloaded: +${e.added.length} −${e.removed.length} ~${e.changed.length}`,
        "tone-info",
      ];
    case "policy.reloaded":
      return [`policy reloaded (${e.files.length} files)`, "tone-info"];
    case "discovery.candidate_added":
      return [`${e.plugin} found ${e.id} at ${e.url}`, "tone-info"];
    case "discovery.candidate_removed":
      return [`${e.plugin}: ${e.id} went away`, ""];
    case "discovery.source_error":
      return [e.reason, "tone-bad"];
    case "fleet.reload_failed":
    case "policy.reload_failed":
      return [e.reason, "tone-bad"];
    case "plugin.loaded":
      return [`${e.plugin} (${e.kind})`, ""];
    case "plugin.failed":
      return [`${e.path}: ${e.reason}`, "tone-bad"];
    case "gateway.started":
      return [`gateway started (${e.transport})`, "tone-ok"];
    case "gateway.stopping":
      return ["gateway stopping", "tone-warn"];
    case "stream.overflow":
      return [`${e.dropped} events dropped while this page was busy; state re-read`, "tone-warn"];
    default:
      return [truncate(JSON.stringify(e), 200), ""];
  }
}

// ---------------------------------------------------------------------------------------------
// Time formatting, refreshed every second

function duration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d`;
}

function ago(ms) {
  const seconds = (Date.now() - Number(ms)) / 1000;
  return seconds < 2 ? "just now" : `${duration(seconds)} ago`;
}

function until(ms) {
  const seconds = (Number(ms) - Date.now()) / 1000;
  return seconds <= 0 ? "now" : `in ${duration(seconds)}`;
}

function clock(ms) {
  return new Date(ms).toLocaleTimeString([], { hour12: false });
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function truncate(text, max) {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function tick() {
  for (const node of document.querySelectorAll("[data-since]")) {
    const label = ago(node.dataset.since);
    node.textContent = node.id === "fleet-updated" ? `updated ${label}` : label;
  }
  for (const node of document.querySelectorAll("[data-until]")) {
    node.textContent = until(node.dataset.until);
  }
}

// ---------------------------------------------------------------------------------------------

$("login-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = $("token").value.trim();
  if (token) signIn(token);
});
$("signout").addEventListener("click", () => signOut());
setInterval(tick, 1000);
if (state.token) signIn(state.token);
else showLogin();
