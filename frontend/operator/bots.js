// The Bots view: every tenant's chat bots as this server runs them (GET /api/health's
// `channels`): kind, mode, whether connected and leading, the last update and the last error.
// Restart stops a bot and starts it again (POST …/bots/{bot}/restart); its row shows the state
// the restart answered, then follows health until the bot is connected or fails again.

import { api } from "../api.js";
import { h, setText, toast } from "../dom.js";
import { formatDateTime } from "../i18n.js";
import { PLATFORM_NAMES } from "../platforms.js";
import { admin } from "./admin_api.js";

const WATCH_EVERY_MS = 1000;
const WATCH_FOR_MS = 60_000; // a bot that reconnects later shows so on the next refresh
const COLUMNS = [
  "botsTenant",
  "botsBot",
  "botsKind",
  "botsMode",
  "botsConnected",
  "botsLeading",
  "botsLastUpdate",
  "botsLastError",
];

export async function render(root, console_) {
  // Health is public and shows bots only to an admin: the tenants' list (which refuses anyone
  // else, so the console asks for a key) checks who asks, and names each bot's tenant.
  const [{ tenants }, { channels = [] }] = await Promise.all([
    admin.tenants(),
    api.health(),
  ]);
  const names = new Map(tenants.map((tenant) => [tenant.id, tenant.name]));
  const refresh = h(
    "button",
    {
      type: "button",
      class: "btn btn-small",
      dataset: { testid: "bots-refresh" },
      onclick: () => render(root, console_).catch((err) => console_.fail(err)),
    },
    h("span", { t: "botsRefresh" }),
  );
  const rows = channels.map((status) => botRow(status, names, console_));
  const body = rows.length
    ? rows
    : [h("tr", {}, h("td", { colspan: COLUMNS.length + 1, class: "op-muted", t: "botsNone" }))];
  root.replaceChildren(
    h(
      "div",
      { class: "op-toolbar" },
      h("div", { class: "usage-heading" }, h("h2", { t: "botsTitle" }), intro()),
      refresh,
    ),
    h(
      "div",
      { class: "usage-table-wrap" },
      h(
        "table",
        { class: "op-table", dataset: { testid: "bots-table" } },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ...COLUMNS.map((key) => h("th", { scope: "col", t: key })),
            h("th", { scope: "col" }, h("span", { class: "visually-hidden", t: "botsRestart" })),
          ),
        ),
        h("tbody", {}, ...body),
      ),
    ),
  );
}

function intro() {
  return h("p", { class: "op-muted", t: "botsIntro" });
}

/** A bot's row; its cells are drawn again from each new state. */
function botRow(status, names, console_) {
  const row = h("tr", {
    dataset: { testid: "bot-row", tenant: status.tenant_id, bot: status.bot },
  });
  const restart = h(
    "button",
    { type: "button", class: "btn btn-small", dataset: { testid: "bot-restart" } },
    h("span", { t: "botsRestart" }),
  );
  const actions = h("td", { class: "op-actions" }, restart);
  const show = (next) => {
    row.dataset.connected = String(next.connected);
    row.replaceChildren(...cells(next, names.get(next.tenant_id)), actions);
  };
  restart.addEventListener("click", async () => {
    restart.disabled = true;
    setText(restart.firstChild, "botsRestarting");
    try {
      const restarted = await admin.restartBot(status.tenant_id, status.bot);
      show(restarted);
      toast(["botsRestarted", { bot: status.bot }]);
      if (!restarted.connected && !restarted.last_error) await watch(status, row, show);
    } catch (err) {
      console_.fail(err);
    } finally {
      restart.disabled = false;
      setText(restart.firstChild, "botsRestart");
    }
  });
  show(status);
  return row;
}

/** Follow a bot that is still connecting, until it is connected or reports an error (or its
 * row has left the page). */
async function watch(status, row, show) {
  const until = Date.now() + WATCH_FOR_MS;
  const isSame = (other) => other.tenant_id === status.tenant_id && other.bot === status.bot;
  while (Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, WATCH_EVERY_MS));
    if (!row.isConnected) return;
    const current = (await api.health()).channels?.find(isSame);
    if (!current) return;
    show(current);
    if (current.connected || current.last_error) return;
  }
}

function cells(status, tenantName) {
  const named = tenantName && tenantName.toLowerCase() !== status.tenant_id.toLowerCase();
  return [
    h(
      "td",
      { dataset: { field: "tenant_id", value: status.tenant_id } },
      status.tenant_id,
      named ? h("span", { class: "op-muted bots-tenant-name" }, tenantName) : null,
    ),
    h("td", { dataset: { field: "bot" } }, status.bot),
    h(
      "td",
      { dataset: { field: "kind", value: status.kind } },
      PLATFORM_NAMES[status.kind] ?? status.kind,
    ),
    h("td", { dataset: { field: "mode" } }, status.mode),
    flag("connected", status.connected, status.connected ? "is-ok" : "is-bad"),
    flag("leading", status.leading, ""),
    h(
      "td",
      { dataset: { field: "last_update_at", value: status.last_update_at ?? "" } },
      status.last_update_at ? formatDateTime(status.last_update_at) : h("span", { t: "botsNever" }),
    ),
    lastError(status),
  ];
}

/** A yes/no cell; `data-value` is "true" or "false". */
function flag(field, isOn, className) {
  return h(
    "td",
    { dataset: { field, value: String(Boolean(isOn)) } },
    h("span", { class: `pill bots-flag ${className}`, t: isOn ? "botsYes" : "botsNo" }),
  );
}

function lastError(status) {
  const cell = h("td", { class: "bots-error", dataset: { field: "last_error" } });
  if (!status.last_error) {
    cell.textContent = "—";
    return cell;
  }
  cell.append(h("span", { class: "bots-error-text" }, status.last_error));
  if (status.last_error_at) {
    const at = status.last_error_at;
    cell.append(h("time", { class: "op-muted", datetime: at }, formatDateTime(at)));
  }
  return cell;
}
