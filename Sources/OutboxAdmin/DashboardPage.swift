/// The operator's dashboard (`GET {prefix}/`): one self-contained HTML page with
/// inline CSS and vanilla JS, no external assets, so it works on a machine with no network.
/// It polls `{prefix}/status` and `{prefix}/operations?limit=100` every 2 s and drives the
/// admin API's write endpoints (retry, delete, clear failed, prune, flush, connectivity).
///
/// The page only makes same-origin requests (path-absolute URLs under the prefix), which is
/// what `AdminGate` lets through from a browser; it never puts data into `innerHTML`, so an
/// operation's URL or error text cannot inject markup. Stable ids and `data-` attributes
/// (`count-pending`, `data-op-id`, `btn-offline`, ...) are part of its contract with
/// `Tests/Scripts/dashboard_test.py`.
enum DashboardPage {
    /// The page for an admin API mounted at `prefix` (`/admin`, no trailing slash).
    static func html(prefix: String) -> String {
        template.replacingOccurrences(of: "__OUTBOX_ADMIN_PREFIX__", with: scriptStringLiteral(prefix))
    }

    /// `text` as a JavaScript string literal safe inside `<script>`: everything but a few
    /// plain path characters becomes `\uXXXX`, so neither a quote nor `</script>` in a
    /// configured prefix can end the literal or the element.
    static func scriptStringLiteral(_ text: String) -> String {
        var out = "\""
        for unit in text.utf16 {
            switch unit {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2F, 0x2D, 0x2E, 0x5F, 0x7E:
                out += String(UnicodeScalar(UInt8(unit)))
            default:
                let hex = String(unit, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            }
        }
        return out + "\""
    }

    // A raw string: the JS below uses backslashes and `${}` that Swift must leave alone.
    private static let template = #"""
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'">
<meta name="referrer" content="no-referrer">
<title>Outbox queue</title>
<style>
  :root {
    --bg: #f6f7f9; --card: #ffffff; --text: #1d2330; --muted: #6a7385; --line: #e2e5eb;
    --ok: #1f8a4c; --warn: #b86e00; --bad: #c62f2f; --accent: #2f5fd0; --info: #5b6bd6;
  }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
         background: var(--bg); color: var(--text); }
  header { display: flex; align-items: center; gap: 16px; flex-wrap: wrap; padding: 12px 20px;
           background: var(--card); border-bottom: 1px solid var(--line); }
  header h1 { font-size: 18px; margin: 0; }
  main { padding: 16px 20px 40px; max-width: 1400px; }
  section { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
            padding: 12px 16px; margin-bottom: 16px; }
  h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted);
       margin: 0 0 8px; }
  .muted { color: var(--muted); }
  .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
  .pill { display: inline-block; padding: 2px 10px; border-radius: 999px; font-weight: 600;
          font-size: 12px; border: 1px solid currentColor; }
  .pill.online, .pill.auto { color: var(--ok); }
  .pill.offline { color: var(--bad); }
  .pill.unknown { color: var(--muted); }
  .switch { display: inline-flex; border: 1px solid var(--line); border-radius: 6px; overflow: hidden; }
  .switch button { border: 0; border-radius: 0; margin: 0; }
  /* The current mode's button is disabled (nothing to switch to) but must stay legible. */
  .switch button[aria-pressed="true"] { background: var(--accent); color: #fff; opacity: 1; }
  button { font: inherit; padding: 5px 12px; border: 1px solid var(--line); border-radius: 6px;
           background: #fff; color: var(--text); cursor: pointer; }
  button:hover:not(:disabled) { border-color: var(--accent); }
  button:disabled { opacity: .45; cursor: default; }
  button.danger { color: var(--bad); }
  .counts { display: flex; gap: 12px; flex-wrap: wrap; }
  .count { min-width: 110px; padding: 8px 12px; border: 1px solid var(--line); border-radius: 6px; }
  .count .n { font-size: 22px; font-weight: 700; display: block; }
  .count.pending .n { color: var(--warn); }
  .count.inProgress .n { color: var(--info); }
  .count.completed .n { color: var(--ok); }
  .count.failed .n, .count.conflict .n { color: var(--bad); }
  .actions { display: flex; gap: 8px; flex-wrap: wrap; }
  ul.origins { list-style: none; margin: 0; padding: 0; }
  ul.origins li { display: flex; gap: 10px; align-items: baseline; padding: 4px 0;
                  border-top: 1px solid var(--line); flex-wrap: wrap; }
  ul.origins li:first-child { border-top: 0; }
  .error-text { color: var(--bad); }
  #banner { display: none; margin-bottom: 16px; padding: 8px 12px; border-radius: 6px;
            background: #fdecec; color: var(--bad); border: 1px solid #f3c4c4; }
  #banner.shown { display: block; }
  #notice { min-height: 1.45em; }
  table { width: 100%; border-collapse: collapse; }
  th, td { text-align: left; padding: 6px 8px; border-top: 1px solid var(--line); vertical-align: top; }
  th { font-size: 12px; color: var(--muted); font-weight: 600; border-top: 0; }
  td.url { word-break: break-all; max-width: 480px; }
  td.err { max-width: 320px; word-break: break-word; }
  td.row-actions { white-space: nowrap; }
  td.row-actions button { padding: 2px 8px; font-size: 12px; }
  .status { font-weight: 600; }
  .status.pending { color: var(--warn); }
  .status.inProgress { color: var(--info); }
  .status.completed { color: var(--ok); }
  .status.failed, .status.conflict { color: var(--bad); }
  #token-form { display: none; gap: 8px; align-items: center; }
  #token-form.shown { display: flex; }
</style>
</head>
<body>
<header>
  <h1>Outbox queue</h1>
  <span>Mode: <span id="connectivity" class="pill unknown" data-mode="">loading…</span></span>
  <span class="switch" role="group" aria-label="Connectivity mode">
    <button type="button" id="btn-auto" data-mode="auto" aria-pressed="false"
            title="Forward when the upstream answers, queue when it does not">Auto</button>
    <button type="button" id="btn-offline" data-mode="offline" aria-pressed="false"
            title="Forward nothing, queue every queueable request, replay nothing">Offline</button>
  </span>
  <span class="muted" id="meta"></span>
  <form id="token-form">
    <label for="token-input">Admin token</label>
    <input id="token-input" type="password" autocomplete="off">
    <button type="submit">Use</button>
  </form>
</header>
<main>
  <div id="banner" role="alert"></div>

  <section aria-labelledby="h-origins">
    <h2 id="h-origins">Upstreams</h2>
    <ul class="origins" id="origins"><li class="muted">loading…</li></ul>
  </section>

  <section aria-labelledby="h-counts">
    <h2 id="h-counts">Queue</h2>
    <div class="counts">
      <div class="count pending"><span class="n" id="count-pending">–</span>pending</div>
      <div class="count inProgress"><span class="n" id="count-inProgress">–</span>in progress</div>
      <div class="count completed"><span class="n" id="count-completed">–</span>completed</div>
      <div class="count failed"><span class="n" id="count-failed">–</span>failed</div>
      <div class="count conflict"><span class="n" id="count-conflict">–</span>conflict</div>
    </div>
    <p class="muted" id="oldest"></p>
  </section>

  <section aria-labelledby="h-actions">
    <h2 id="h-actions">Actions</h2>
    <div class="actions">
      <button type="button" id="btn-flush" title="Every lane tries now, ignoring backoff">Flush now</button>
      <button type="button" id="btn-clear-failed" class="danger">Clear failed</button>
      <button type="button" id="btn-prune" class="danger">Prune older than 24 h</button>
      <button type="button" id="btn-refresh">Refresh</button>
    </div>
    <p class="muted" id="notice" aria-live="polite"></p>
  </section>

  <section aria-labelledby="h-ops">
    <h2 id="h-ops">Operations <span class="muted" id="ops-summary"></span></h2>
    <table>
      <thead>
        <tr><th>id</th><th>method</th><th>url</th><th>status</th><th>age</th><th>retries</th><th>last error</th><th></th></tr>
      </thead>
      <tbody id="ops-body"></tbody>
    </table>
    <p class="muted" id="ops-empty">No operations.</p>
  </section>
</main>
<script>
"use strict";
(function () {
  const PREFIX = __OUTBOX_ADMIN_PREFIX__;
  const POLL_MS = 2000;
  const STATUSES = ["pending", "inProgress", "completed", "failed", "conflict"];
  const $ = (id) => document.getElementById(id);
  let token = sessionStorage.getItem("outbox-admin-token") || "";
  let timer = null;
  let refreshing = false;

  class AdminError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  // Every request goes to this origin: AdminGate refuses any other Origin, and the
  // Content-Type is set only when there is a body: the admin API takes JSON and nothing else.
  async function call(method, path, body) {
    const headers = { "Accept": "application/json" };
    if (token) headers["Authorization"] = "Bearer " + token;
    const init = { method: method, headers: headers, cache: "no-store", credentials: "same-origin" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(PREFIX + path, init);
    const text = await response.text();
    let doc = null;
    if (text) { try { doc = JSON.parse(text); } catch (e) { doc = null; } }
    if (!response.ok) {
      const detail = doc && doc.error ? doc.error.code + ": " + doc.error.message : "HTTP " + response.status;
      throw new AdminError(response.status, method + " " + PREFIX + path + " → " + detail);
    }
    return doc;
  }

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function showError(message) {
    const banner = $("banner");
    banner.textContent = message || "";
    banner.classList.toggle("shown", Boolean(message));
  }

  // Action outcomes live apart from the banner: the refresh that follows every action
  // clears the banner, and must not wipe out why the action failed.
  function notice(message, failed) {
    const node = $("notice");
    node.textContent = message;
    node.classList.toggle("error-text", Boolean(failed));
    node.classList.toggle("muted", !failed);
  }

  function duration(seconds) {
    if (seconds === null || seconds === undefined || !isFinite(seconds)) return "–";
    const s = Math.max(0, Math.floor(seconds));
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
    return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
  }

  function ageOf(iso) {
    const created = Date.parse(iso);
    return isNaN(created) ? null : (Date.now() - created) / 1000;
  }

  function renderStatus(status) {
    const mode = status.connectivity === "offline" ? "offline" : "auto";
    const pill = $("connectivity");
    pill.textContent = mode === "offline" ? "offline (forced)" : "auto";
    pill.className = "pill " + mode;
    pill.dataset.mode = mode;
    for (const id of ["btn-auto", "btn-offline"]) {
      const button = $(id);
      const pressed = button.dataset.mode === mode;
      button.setAttribute("aria-pressed", String(pressed));
      button.disabled = pressed;
    }

    const list = $("origins");
    list.replaceChildren();
    const origins = status.origins || [];
    if (origins.length === 0) list.append(el("li", { class: "muted" }, "No upstream seen yet."));
    for (const origin of origins) {
      const online = Boolean(origin.online);
      const item = el("li", { "data-origin": origin.origin, "data-online": String(online) });
      item.append(el("span", { class: "mono" }, origin.origin));
      item.append(el("span", { class: "pill " + (online ? "online" : "offline") }, online ? "online" : "offline"));
      item.append(el("span", { class: "muted" }, (origin.pending || 0) + " unfinished"));
      if (origin.lastError) item.append(el("span", { class: "error-text origin-error" }, origin.lastError));
      if (!online && origin.nextProbeAt) {
        const wait = -ageOf(origin.nextProbeAt);
        item.append(el("span", { class: "muted" }, wait >= 1 ? "next probe in " + duration(wait) : "probing"));
      }
      list.append(item);
    }

    const counts = status.counts || {};
    for (const name of STATUSES) $("count-" + name).textContent = String(counts[name] || 0);
    $("btn-clear-failed").disabled = !(counts.failed > 0);
    $("oldest").textContent = status.oldestPendingAgeSeconds === null || status.oldestPendingAgeSeconds === undefined
      ? "Nothing waiting."
      : "Oldest unfinished operation queued " + duration(status.oldestPendingAgeSeconds) + " ago.";
    $("meta").textContent = "version " + (status.version || "?") + " · up " + duration(status.uptimeSeconds)
      + " · updated " + new Date().toLocaleTimeString();
  }

  function renderOperations(page) {
    const operations = page.operations || [];
    const body = $("ops-body");
    body.replaceChildren();
    for (const op of operations) {
      const row = el("tr", { "data-op-id": op.id, "data-status": op.status });
      const id = el("td", { class: "mono", title: op.id }, String(op.id).slice(0, 8));
      row.append(id);
      row.append(el("td", { class: "mono" }, op.method));
      row.append(el("td", { class: "mono url" }, op.url));
      row.append(el("td", { class: "status " + op.status }, op.status));
      row.append(el("td", { title: op.createdAt || "" }, duration(ageOf(op.createdAt))));
      row.append(el("td", {}, (op.retryCount || 0) + " / " + (op.maxRetries ?? "?")));
      row.append(el("td", { class: "err error-text" }, op.lastError || ""));
      const actions = el("td", { class: "row-actions" });
      const retry = el("button", { type: "button", "data-action": "retry", "data-op-id": op.id }, "Retry");
      // The API retries failed, conflict and pending operations; the others have
      // nothing to retry.
      retry.disabled = !["failed", "conflict", "pending"].includes(op.status);
      const remove = el("button", { type: "button", class: "danger", "data-action": "delete", "data-op-id": op.id }, "Delete");
      actions.append(retry, " ", remove);
      row.append(actions);
      body.append(row);
    }
    $("ops-empty").style.display = operations.length === 0 ? "" : "none";
    $("ops-summary").textContent = operations.length === 0 ? ""
      : "(" + operations.length + (page.next ? ", first 100 in queue order" : "") + ")";
  }

  async function refresh() {
    if (refreshing) return;
    refreshing = true;
    clearTimeout(timer);
    try {
      const [status, page] = await Promise.all([call("GET", "/status"), call("GET", "/operations?limit=100")]);
      renderStatus(status);
      renderOperations(page);
      showError("");
    } catch (error) {
      if (error instanceof AdminError && error.status === 401) {
        $("token-form").classList.add("shown");
        showError("This proxy has an admin token: enter it above.");
      } else {
        showError(error instanceof AdminError ? error.message : "Cannot reach the proxy: " + error);
      }
    } finally {
      refreshing = false;
      timer = setTimeout(refresh, POLL_MS);
    }
  }

  // Runs one write, reports its outcome, then refreshes at once rather than at the next tick.
  async function act(label, method, path, body, describe) {
    try {
      const doc = await call(method, path, body);
      notice(describe ? describe(doc) : label + ": done", false);
    } catch (error) {
      notice(label + " failed: " + (error instanceof AdminError ? error.message : String(error)), true);
    }
    await refresh();
  }

  const removed = (doc) => "Removed " + (doc && typeof doc.removed === "number" ? doc.removed : 0) + " operation(s).";

  $("btn-offline").addEventListener("click", () =>
    act("Switch to offline", "PUT", "/connectivity", { mode: "offline" }, () => "Mode set to offline."));
  $("btn-auto").addEventListener("click", () =>
    act("Switch to auto", "PUT", "/connectivity", { mode: "auto" }, () => "Mode set to auto."));
  $("btn-flush").addEventListener("click", () =>
    act("Flush", "POST", "/flush", undefined, () => "Flush requested: every lane tries now."));
  $("btn-clear-failed").addEventListener("click", () => {
    if (confirm("Delete every failed operation?")) act("Clear failed", "DELETE", "/operations?status=failed", undefined, removed);
  });
  $("btn-prune").addEventListener("click", () => {
    if (confirm("Delete every operation created more than 24 hours ago, whatever its status?")) {
      act("Prune", "POST", "/prune?olderThanSeconds=86400", undefined, removed);
    }
  });
  $("btn-refresh").addEventListener("click", () => refresh());

  // One listener for all rows: the table is rebuilt on every poll.
  $("ops-body").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (!button || button.disabled) return;
    const id = button.dataset.opId;
    const path = "/operations/" + encodeURIComponent(id);
    button.disabled = true;
    if (button.dataset.action === "retry") {
      act("Retry " + id.slice(0, 8), "POST", path + "/retry", undefined, () => "Operation " + id.slice(0, 8) + " is pending again.");
    } else if (button.dataset.action === "delete") {
      act("Delete " + id.slice(0, 8), "DELETE", path, undefined, () => "Operation " + id.slice(0, 8) + " deleted.");
    }
  });

  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    token = $("token-input").value.trim();
    sessionStorage.setItem("outbox-admin-token", token);
    $("token-form").classList.remove("shown");
    refresh();
  });

  refresh();
})();
</script>
</body>
</html>
"""#
}
