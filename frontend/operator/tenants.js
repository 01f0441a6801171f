// The Tenants view: every tenant (id, name, created, active or disabled), a form that creates
// one, disabling and enabling (asked first: a disabled tenant's keys stop at once), and a
// panel with each tenant's settings (tenant_settings.js).

import { h, toast } from "../dom.js";
import { admin } from "./admin_api.js";
import { askFirst, onSubmit, problemSlot, when } from "./admin_parts.js";
import { SettingsCard } from "./tenant_settings.js";

export async function render(root, console, params) {
  // A chat key: 403, nothing shown. A tenant's admin key: its own tenant, without the
  // operator's controls (create, settings, disable), which would only be refused.
  const { tenants, is_operator: isOperator } = await admin.tenants();
  const view = new TenantsView(root, console, { isOperator });
  view.draw(tenants);
  if (isOperator && params.tenant && tenants.some((tenant) => tenant.id === params.tenant)) {
    await view.openSettings(params.tenant);
  }
}

class TenantsView {
  constructor(root, console, { isOperator }) {
    this.console = console;
    this.isOperator = isOperator;
    this.rows = h("tbody");
    this.settingsSlot = h("div", { class: "adm-settings-slot" });
    this.openId = null;
    root.replaceChildren(
      h("h2", { class: "adm-title", t: "opTenants" }),
      isOperator ? this.createForm() : null,
      h(
        "table",
        { class: "op-table", dataset: { testid: "tenant-table" } },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ...["admTenantId", "admName", "admCreated", "admStatus", "admActions"].map((key) =>
              h("th", { t: key }),
            ),
          ),
        ),
        this.rows,
      ),
      this.settingsSlot,
    );
  }

  createForm() {
    const id = h("input", {
      required: true,
      maxlength: 64,
      autocomplete: "off",
      spellcheck: "false",
      dataset: { testid: "tenant-id-input" },
      tAttrs: { placeholder: "admTenantIdHint", "aria-label": "admTenantId" },
    });
    const name = h("input", {
      maxlength: 200,
      autocomplete: "off",
      dataset: { testid: "tenant-name-input" },
      tAttrs: { placeholder: "admName", "aria-label": "admName" },
    });
    const problem = problemSlot("tenant-create-error");
    const button = h(
      "button",
      { type: "submit", class: "btn btn-primary btn-small", dataset: { testid: "tenant-create" } },
      h("span", { t: "admCreateTenant" }),
    );
    const form = h("form", { class: "op-toolbar adm-form" }, id, name, button, problem);
    onSubmit(form, { button, problem, console: this.console }, async () => {
      const body = { id: id.value.trim(), name: name.value.trim(), settings: {} };
      const tenant = await admin.createTenant(body);
      form.reset();
      toast(["admTenantCreated", { id: tenant.id }]);
      await this.reload();
    });
    return form;
  }

  async reload() {
    try {
      this.draw((await admin.tenants()).tenants);
    } catch (err) {
      this.console.fail(err);
    }
  }

  draw(tenants) {
    if (!tenants.length) {
      const empty = h("td", { colspan: 5, class: "op-muted", t: "admNoTenants" });
      this.rows.replaceChildren(h("tr", {}, empty));
      return;
    }
    this.rows.replaceChildren(...tenants.map((tenant) => this.row(tenant)));
  }

  row(tenant) {
    const isDisabled = Boolean(tenant.disabled_at);
    const slot = h("div", { class: "adm-confirm-slot" });
    const button = (labelKey, testid, onclick, extra = "") =>
      h(
        "button",
        { type: "button", class: `btn btn-small ${extra}`, dataset: { testid }, onclick },
        h("span", { t: labelKey }),
      );
    const toggle = () =>
      askFirst(slot, [isDisabled ? "admEnableAsk" : "admDisableAsk", { id: tenant.id }], {
        labelKey: isDisabled ? "admEnable" : "admDisable",
        testid: "tenant-toggle-confirm",
        isSafe: isDisabled,
        onConfirm: () => this.setDisabled(tenant.id, !isDisabled),
      });
    return h(
      "tr",
      {
        class: `${isDisabled ? "is-disabled" : ""} ${tenant.id === this.openId ? "is-open" : ""}`,
        dataset: { testid: "tenant-row", tenantId: tenant.id },
      },
      h("td", {}, h("code", { dataset: { testid: "tenant-id" } }, tenant.id)),
      h("td", { dataset: { testid: "tenant-name" } }, tenant.name),
      h("td", {}, when(tenant.created_at)),
      h(
        "td",
        {},
        h("span", {
          class: `pill adm-status ${isDisabled ? "is-off" : "is-on"}`,
          title: isDisabled ? when(tenant.disabled_at) : null,
          dataset: { testid: "tenant-status" },
          t: isDisabled ? "admDisabled" : "admActive",
        }),
      ),
      h(
        "td",
        { class: "adm-actions" },
        this.isOperator
          ? button("admSettings", "tenant-settings", () => this.openSettings(tenant.id))
          : null,
        button("opKeys", "tenant-keys", () => this.console.go("keys", { tenant: tenant.id })),
        button("opAudit", "tenant-audit", () => this.console.go("audit", { tenant: tenant.id })),
        this.isOperator
          ? button(isDisabled ? "admEnable" : "admDisable", "tenant-toggle", toggle)
          : null,
        slot,
      ),
    );
  }

  async setDisabled(tenantId, disabled) {
    try {
      await admin.setTenantDisabled(tenantId, disabled);
      toast([disabled ? "admTenantDisabled" : "admTenantEnabled", { id: tenantId }]);
    } catch (err) {
      this.console.fail(err);
    }
    await this.reload();
  }

  async openSettings(tenantId) {
    let body;
    try {
      body = await admin.tenantSettings(tenantId);
    } catch (err) {
      return this.console.fail(err);
    }
    this.openId = tenantId;
    for (const row of this.rows.querySelectorAll("tr[data-tenant-id]")) {
      row.classList.toggle("is-open", row.dataset.tenantId === tenantId);
    }
    const close = () => {
      this.openId = null;
      this.settingsSlot.replaceChildren();
      for (const row of this.rows.querySelectorAll("tr.is-open")) row.classList.remove("is-open");
    };
    this.settingsSlot.replaceChildren(new SettingsCard(tenantId, body, this.console, close).card);
  }
}
