// The Audit log view: what administrators did, newest first (when, who, what, to which tenant
// and target, with the action's details), for every tenant or the one chosen (`#/audit?tenant=`),
// a page at a time: "Older" reads the entries before the last one shown (`before_id`).

import { h } from "../dom.js";
import { admin } from "./admin_api.js";
import { when } from "./admin_parts.js";

const PAGE_SIZE = 50;
const COLUMNS = ["admWhen", "admWho", "admAction", "admTenant", "admTarget", "admDetail"];

export async function render(root, console, params) {
  const tenantId = params.tenant || "";
  const [{ tenants }, first] = await Promise.all([
    admin.tenants(), // a chat key: 403, nothing shown
    page(tenantId, null),
  ]);
  const rows = h("tbody", { dataset: { testid: "audit-rows" } });
  const older = h(
    "button",
    { type: "button", class: "btn btn-small", dataset: { testid: "audit-older" } },
    h("span", { t: "admOlder" }),
  );
  let lastId = null;
  const show = (entries) => {
    rows.append(...entries.map(entryRow));
    lastId = entries.at(-1)?.id ?? lastId;
    older.hidden = entries.length < PAGE_SIZE;
  };
  older.addEventListener("click", async () => {
    older.disabled = true;
    try {
      show(await page(tenantId, lastId));
    } catch (err) {
      console.fail(err);
    } finally {
      older.disabled = false;
    }
  });
  root.replaceChildren(
    h("h2", { class: "adm-title", t: "opAudit" }),
    h(
      "div",
      { class: "op-toolbar" },
      h("label", { t: "admTenant" }),
      tenantFilter(tenants, tenantId, (next) => console.go("audit", next ? { tenant: next } : {})),
    ),
    h(
      "table",
      { class: "op-table adm-audit", dataset: { testid: "audit-table" } },
      h("thead", {}, h("tr", {}, ...COLUMNS.map((key) => h("th", { t: key })))),
      rows,
    ),
    h("div", { class: "adm-more" }, older),
  );
  if (first.length) show(first);
  else {
    rows.append(
      h("tr", {}, h("td", { colspan: COLUMNS.length, class: "op-muted", t: "admNoEntries" })),
    );
    older.hidden = true;
  }
}

/** The entries before `beforeId` (null: the newest), newest first. */
async function page(tenantId, beforeId) {
  return (await admin.audit({ limit: PAGE_SIZE, tenantId, beforeId })).entries;
}

function tenantFilter(tenants, tenantId, onChange) {
  const ids = tenants.map((tenant) => tenant.id);
  if (tenantId && !ids.includes(tenantId)) ids.push(tenantId); // a deleted tenant's entries
  const select = h(
    "select",
    {
      dataset: { testid: "audit-tenant" },
      tAttrs: { "aria-label": "admTenant" },
      onchange: () => onChange(select.value),
    },
    h("option", { value: "", t: "admAllTenants" }),
    ...ids.map((id) => h("option", { value: id }, id)),
  );
  select.value = tenantId;
  return select;
}

function entryRow(entry) {
  return h(
    "tr",
    { dataset: { testid: "audit-row", entryId: entry.id, action: entry.action } },
    h("td", { title: entry.created_at, dataset: { testid: "audit-when" } }, when(entry.created_at)),
    h("td", { dataset: { testid: "audit-actor" } }, entry.actor),
    h("td", {}, h("code", { dataset: { testid: "audit-action" } }, entry.action)),
    h("td", { dataset: { testid: "audit-tenant-id" } }, entry.tenant_id ?? "—"),
    h("td", {}, h("code", { dataset: { testid: "audit-target" } }, entry.target || "")),
    h("td", { class: "adm-detail", dataset: { testid: "audit-detail" } }, detailText(entry.detail)),
  );
}

/** `{"renamed": false, "settings": ["persona"], "reset": []}` as `settings: persona`: what is
 * empty or false says nothing, and a flag that is on reads as its name. */
function detailText(detail) {
  if (!detail || typeof detail !== "object") return detail ? String(detail) : "";
  const said = Object.entries(detail).filter(
    ([, value]) => value !== null && value !== false && value !== "" && value?.length !== 0,
  );
  return said
    .map(([key, value]) => {
      if (value === true) return key;
      if (Array.isArray(value)) return `${key}: ${value.join(", ")}`;
      return `${key}: ${typeof value === "object" ? JSON.stringify(value) : value}`;
    })
    .join(" · ");
}
