// The Memory view: each tenant's long-term memory (GET /api/admin/memory-health): its scope,
// how many lines it holds, when the summarizer last finished, ok or degraded and why. Per
// tenant: view its lines (GET …/tenants/{id}/memory, a person's where memory is per person),
// and start a long operation (re-summarize its raw lines, export it) followed to its end.

import { h, setAttrs, setText } from "../dom.js";
import { formatDateTime } from "../i18n.js";
import { admin } from "./admin_api.js";
import { followOperation } from "./operations.js";

const COLUMNS = [
  "memHealthTenant",
  "memHealthScope",
  "memHealthLines",
  "memHealthLastCompaction",
  "memHealthStatus",
  "memHealthProblems",
];
const NUMBERS = { memHealthLines: "op-number" }; // the columns of numbers, aligned right
const ACTIONS = "memHealthActions";
const WIDTH = COLUMNS.length + 1; // and the actions
const SCOPES = { tenant: "memHealthScopeTenant", user: "memHealthScopeUser" };
const ENDED = new Set(["done", "failed"]);

export async function render(root, console_) {
  const [{ tenants }, operations] = await Promise.all([
    admin.memoryHealth(),
    admin
      .operations()
      .then((body) => body.operations)
      .catch((err) => {
        console_.fail(err); // the health still shows; only running operations are not followed
        return [];
      }),
  ]);
  const running = operations.filter((operation) => !ENDED.has(operation.state));
  const refresh = h(
    "button",
    {
      type: "button",
      class: "btn btn-small",
      dataset: { testid: "memory-health-refresh" },
      onclick: () => render(root, console_).catch((err) => console_.fail(err)),
    },
    h("span", { t: "memHealthRefresh" }),
  );
  const body = tenants.length
    ? tenants.flatMap((tenant) => tenantRows(tenant, console_, running))
    : [h("tr", {}, h("td", { colspan: WIDTH, class: "op-muted", t: "memHealthNone" }))];
  root.replaceChildren(
    h(
      "div",
      { class: "op-toolbar" },
      h(
        "div",
        { class: "usage-heading" },
        h("h2", { t: "memHealthTitle" }),
        h("p", { class: "op-muted", t: "memHealthIntro" }),
      ),
      refresh,
    ),
    h(
      "div",
      { class: "usage-table-wrap" },
      h(
        "table",
        { class: "op-table", dataset: { testid: "memory-health-table" } },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ...COLUMNS.map((key) => h("th", { scope: "col", class: NUMBERS[key], t: key })),
            h("th", { scope: "col" }, h("span", { class: "visually-hidden", t: ACTIONS })),
          ),
        ),
        h("tbody", {}, ...body),
      ),
    ),
  );
}

/** A tenant's row, and the row below it for its lines and its operations (hidden while it
 * shows neither). */
function tenantRows(tenant, console_, running) {
  const id = tenant.tenant_id;
  const row = h("tr", { dataset: { testid: "memory-health-row", tenant: id } });
  const lines = h("div", { class: "mem-lines-slot", dataset: { testid: "memory-view" } });
  const operations = h("div", { class: "mem-operations", dataset: { testid: "operations" } });
  const detail = h(
    "tr",
    { class: "mem-detail", dataset: { testid: "memory-health-detail", tenant: id } },
    h("td", { colspan: WIDTH }, lines, operations),
  );
  const fit = () => {
    detail.hidden = !lines.hasChildNodes() && !operations.hasChildNodes();
  };
  const actionsCell = h("td", { class: "op-actions" }, actions());
  const show = (health) => {
    row.dataset.status = health.status;
    row.replaceChildren(...cells(health), actionsCell);
  };

  function actions() {
    const view = button("memory-view-toggle", "memHealthView");
    view.setAttribute("aria-expanded", "false");
    view.addEventListener("click", () => toggleLines(view));
    const resummarize = button("memory-resummarize", "memHealthResummarize");
    const exporting = button("memory-export", "memHealthExport");
    const start = async (kind) => {
      resummarize.disabled = exporting.disabled = true;
      try {
        follow(await admin.startOperation(id, kind));
      } catch (err) {
        console_.fail(err);
        resummarize.disabled = exporting.disabled = false;
      }
    };
    const follow = (operation) => {
      resummarize.disabled = exporting.disabled = true;
      for (const ended of operations.querySelectorAll(".op-operation:not([data-state=running])")) {
        ended.remove(); // the latest operation's outcome is the one that matters
      }
      followOperation(operations, operation, {
        fail: (err) => console_.fail(err),
        onFinished: async () => {
          resummarize.disabled = exporting.disabled = false;
          await reread();
        },
      });
      fit();
    };
    resummarize.addEventListener("click", () => start("resummarize"));
    exporting.addEventListener("click", () => start("export"));
    for (const operation of running.filter((o) => o.tenant_id === id)) follow(operation);
    return h("div", { class: "mem-actions" }, view, resummarize, exporting);
  }

  let reads = 0; // the latest read of lines; an older one that answers late is dropped

  async function toggleLines(view) {
    reads += 1;
    const isOpen = view.getAttribute("aria-expanded") === "true";
    view.setAttribute("aria-expanded", String(!isOpen));
    setText(view.firstChild, isOpen ? "memHealthView" : "memHealthHide");
    lines.replaceChildren();
    fit();
    if (isOpen) return;
    // Memory kept per person: whose, asked first (GET …/memory names one person at a time).
    if (tenant.scope !== "user") return showLines("");
    const form = personForm((user) => showLines(user));
    lines.append(form);
    fit();
    form.querySelector("input").focus();
  }

  /** The tenant's lines (one person's, when `user` is given) below the form, if any. */
  async function showLines(user) {
    const read = ++reads;
    let entries;
    try {
      ({ entries } = await admin.tenantMemory(id, user));
    } catch (err) {
      return console_.fail(err);
    }
    if (read !== reads) return;
    lines.querySelector(".mem-lines, .mem-empty")?.remove();
    const list = entries.length
      ? h("ol", { class: "mem-lines", dataset: { testid: "memory-lines" } }, ...entries.map(line))
      : h("p", { class: "op-muted mem-empty", t: "memHealthEmpty" });
    lines.append(list);
    fit();
  }

  /** Read the tenant's health again (after an operation) and redraw its row. */
  async function reread() {
    try {
      const { tenants } = await admin.memoryHealth();
      const fresh = tenants.find((other) => other.tenant_id === id);
      if (fresh) show(fresh);
    } catch (err) {
      console_.fail(err);
    }
  }

  show(tenant);
  fit();
  return [row, detail];
}

function cells(health) {
  const isOk = health.status === "ok";
  return [
    h("td", { class: "mem-tenant", dataset: { field: "tenant_id" } }, health.tenant_id),
    h(
      "td",
      { dataset: { field: "scope", value: health.scope } },
      SCOPES[health.scope]
        ? h("span", { t: [SCOPES[health.scope], { n: health.memories ?? "" }] })
        : health.scope,
    ),
    h("td", { class: "op-number", dataset: { field: "lines", value: health.lines } }, health.lines),
    h(
      "td",
      { dataset: { field: "last_compaction_at", value: health.last_compaction_at ?? "" } },
      health.last_compaction_at ? formatDateTime(health.last_compaction_at) : "—",
    ),
    h(
      "td",
      { dataset: { field: "status", value: health.status } },
      h("span", {
        class: `pill bots-flag ${isOk ? "is-ok" : "is-bad"}`,
        t: isOk ? "memHealthOk" : "memHealthDegraded",
      }),
    ),
    h("td", { dataset: { field: "problems" } }, problems(health.problems ?? [])),
  ];
}

function problems(list) {
  if (!list.length) return "—";
  const items = list.map((problem) =>
    h(
      "li",
      { dataset: { testid: "memory-problem", code: problem.code } },
      h("span", { class: "mem-problem-reason" }, problem.reason),
      problem.session_id
        ? h("span", { class: "op-muted", t: ["memHealthSession", { id: problem.session_id }] })
        : null,
    ),
  );
  return h("ul", { class: "mem-problems" }, ...items);
}

/** One memory line: its text, then its date and what wrote it. */
function line(entry) {
  const meta = [entry.date, entry.source];
  return h(
    "li",
    {
      class: entry.is_current === false ? "is-replaced" : null,
      dataset: { testid: "memory-line", entryId: entry.id },
    },
    h("span", { class: "mem-line-text" }, entry.content ?? entry.text ?? ""),
    h("span", { class: "op-muted mem-line-meta" }, meta.filter(Boolean).join(" · ")),
  );
}

/** Where memory is kept per person: whose lines to show. */
function personForm(onShow) {
  const input = h("input", { type: "search", required: true, dataset: { testid: "memory-user" } });
  setAttrs(input, { "aria-label": "memHealthUser", placeholder: "memHealthUser" });
  const form = h(
    "form",
    { class: "mem-person" },
    input,
    h("button", { type: "submit", class: "btn btn-small" }, h("span", { t: "memHealthShow" })),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (input.value.trim()) onShow(input.value.trim());
  });
  return form;
}

function button(testid, labelKey) {
  return h(
    "button",
    { type: "button", class: "btn btn-small", dataset: { testid } },
    h("span", { t: labelKey }),
  );
}
