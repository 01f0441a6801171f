// The Keys view: one tenant's API keys (prefix, label, scope, created, last used, revoked),
// issuing a key, and revoking one (asked first: whatever uses it gets 401 at once). A new key's
// secret is shown once, in a box the operator dismisses after copying it: it lives only in
// that box, never in storage, the address or another element, and the server never shows it
// again.

import { copyButton, h, toast } from "../dom.js";
import { admin } from "./admin_api.js";
import { askFirst, onSubmit, problemSlot, when } from "./admin_parts.js";

const SCOPES = ["chat", "admin"];

/** The start of a key as its owner sees it (`tly_<prefix>_<secret>`): enough to tell it apart. */
const shown = (key) => `tly_${key.prefix}_`;

export async function render(root, console, params) {
  const { tenants } = await admin.tenants(); // a chat key: 403, nothing shown
  const title = h("h2", { class: "adm-title", t: "opKeys" });
  if (!tenants.length) {
    const toTenants = h(
      "button",
      { type: "button", class: "btn btn-small", onclick: () => console.go("tenants") },
      h("span", { t: "opTenants" }),
    );
    root.replaceChildren(title, h("p", { class: "op-muted", t: "admNoTenants" }), toTenants);
    return;
  }
  const tenantId = tenants.some((t) => t.id === params.tenant) ? params.tenant : newest(tenants);
  const view = new KeysView(root, console, tenantId);
  root.replaceChildren(title, view.picker(tenants), view.issueForm(), view.secretSlot, view.table);
  await view.reload();
}

/** The tenant whose keys were made last (as `tally keys create` did), else the first. */
function newest(tenants) {
  const withKeys = tenants.filter((tenant) => tenant.last_key_created_at);
  withKeys.sort((a, b) => Date.parse(b.last_key_created_at) - Date.parse(a.last_key_created_at));
  return (withKeys[0] ?? tenants[0]).id;
}

class KeysView {
  constructor(root, console, tenantId) {
    this.console = console;
    this.tenantId = tenantId;
    this.rows = h("tbody");
    this.secretSlot = h("div", { class: "adm-secret-slot" });
    const heads = ["admPrefix", "admLabel", "admScope", "admCreated", "admLastUsed", "admRevoked"];
    this.table = h(
      "table",
      { class: "op-table", dataset: { testid: "key-table" } },
      h("thead", {}, h("tr", {}, ...[...heads, "admActions"].map((key) => h("th", { t: key })))),
      this.rows,
    );
  }

  /** The tenant whose keys are shown; choosing another goes there (`#/keys?tenant=`). */
  picker(tenants) {
    const select = h(
      "select",
      {
        dataset: { testid: "keys-tenant" },
        tAttrs: { "aria-label": "admTenant" },
        onchange: () => this.console.go("keys", { tenant: select.value }),
      },
      ...tenants.map((tenant) => h("option", { value: tenant.id }, tenant.id)),
    );
    select.value = this.tenantId;
    return h("div", { class: "op-toolbar" }, h("label", { t: "admTenant" }), select);
  }

  issueForm() {
    const labelInput = h("input", {
      maxlength: 200,
      autocomplete: "off",
      dataset: { testid: "key-label-input" },
      tAttrs: { placeholder: "admLabel", "aria-label": "admLabel" },
    });
    const scope = h(
      "select",
      { dataset: { testid: "key-scope" }, tAttrs: { "aria-label": "admScope" } },
      ...SCOPES.map((name) => h("option", { value: name, t: `admScope.${name}` })),
    );
    const problem = problemSlot("key-issue-error");
    const button = h(
      "button",
      { type: "submit", class: "btn btn-primary btn-small", dataset: { testid: "key-issue" } },
      h("span", { t: "admIssueKey" }),
    );
    const form = h("form", { class: "op-toolbar adm-form" }, labelInput, scope, button, problem);
    onSubmit(form, { button, problem, console: this.console }, async () => {
      const body = { label: labelInput.value.trim(), scope: scope.value };
      const { key } = await admin.issueKey(this.tenantId, body);
      form.reset();
      this.showSecret(key);
      await this.reload();
    });
    return form;
  }

  /** The secret, once: dismissed, it is gone from the page. */
  showSecret(secret) {
    const dismiss = h(
      "button",
      {
        type: "button",
        class: "btn btn-small btn-primary",
        dataset: { testid: "key-secret-dismiss" },
        onclick: () => this.secretSlot.replaceChildren(),
      },
      h("span", { t: "admSecretDismiss" }),
    );
    this.secretSlot.replaceChildren(
      h(
        "div",
        { class: "adm-secret", role: "alert", dataset: { testid: "key-secret-box" } },
        h("p", { class: "adm-secret-note", t: "admSecretOnce" }),
        h(
          "div",
          { class: "adm-secret-row" },
          h("code", { class: "adm-secret-key", dataset: { testid: "key-secret" } }, secret),
          copyButton(() => secret, { className: "btn btn-small" }),
          dismiss,
        ),
      ),
    );
    dismiss.scrollIntoView({ block: "nearest" });
  }

  async reload() {
    let keys;
    try {
      ({ keys } = await admin.keys(this.tenantId));
    } catch (err) {
      return this.console.fail(err);
    }
    if (!keys.length) {
      const empty = h("td", { colspan: 7, class: "op-muted", t: "admNoKeys" });
      this.rows.replaceChildren(h("tr", {}, empty));
      return;
    }
    this.rows.replaceChildren(...keys.map((key) => this.row(key)));
  }

  row(key) {
    const isRevoked = Boolean(key.revoked_at);
    const slot = h("div", { class: "adm-confirm-slot" });
    const revoke = h(
      "button",
      {
        type: "button",
        class: "btn btn-small",
        dataset: { testid: "key-revoke" },
        onclick: () =>
          askFirst(slot, ["admRevokeAsk", { prefix: shown(key) }], {
            labelKey: "admRevoke",
            testid: "key-revoke-confirm",
            onConfirm: () => this.revoke(key),
          }),
      },
      h("span", { t: "admRevoke" }),
    );
    return h(
      "tr",
      { class: isRevoked ? "is-disabled" : null, dataset: { testid: "key-row", keyId: key.id } },
      h("td", {}, h("code", { dataset: { testid: "key-prefix" } }, `${shown(key)}…`)),
      h("td", { dataset: { testid: "key-label" } }, key.label),
      h("td", {}, h("span", { class: "pill", t: `admScope.${key.scope}` })),
      h("td", {}, when(key.created_at)),
      h("td", { dataset: { testid: "key-last-used" } }, when(key.last_used_at)),
      h("td", { dataset: { testid: "key-revoked" } }, when(key.revoked_at)),
      h("td", { class: "adm-actions" }, isRevoked ? null : revoke, slot),
    );
  }

  async revoke(key) {
    try {
      await admin.revokeKey(key.id);
      toast(["admKeyRevoked", { prefix: shown(key) }]);
    } catch (err) {
      this.console.fail(err);
    }
    await this.reload();
  }
}
