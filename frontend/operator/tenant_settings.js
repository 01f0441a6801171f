// One tenant's settings, edited field by field through GET/PATCH
// /api/admin/tenants/{id}/settings. A field shows its effective value and its origin: config.yaml,
// set here (through the API) or the default. A value set here can be changed or reset (PATCH
// null: back to the file's or the default); a value from the file is shown as the file has it,
// until overridden here; a field the API cannot set is read-only. A refused value (400
// invalid_settings) is shown next to its field, and nothing changes.

import { h, setText, toast } from "../dom.js";
import { admin } from "./admin_api.js";
import { problemSlot, showProblem } from "./admin_parts.js";

const ORIGIN_KEYS = { api: "admOriginApi", file: "admOriginFile", default: "admOriginDefault" };

/** One tenant's settings: a row per field, shown, or edited in place. */
export class SettingsCard {
  constructor(tenantId, body, console, onClose) {
    this.tenantId = tenantId;
    this.console = console;
    this.rows = h("tbody");
    this.card = h(
      "div",
      { class: "op-card adm-settings", dataset: { testid: "tenant-settings-panel", tenantId } },
      h(
        "div",
        { class: "adm-settings-head" },
        h("h3", { t: ["admSettingsOf", { id: tenantId }] }),
        h(
          "button",
          { type: "button", class: "btn btn-small", onclick: onClose },
          h("span", { t: "close" }),
        ),
      ),
      h("p", { class: "op-muted adm-intro", t: "admSettingsIntro" }),
      h("table", { class: "op-table adm-fields" }, this.rows),
    );
    this.draw(body.fields);
  }

  draw(fields) {
    this.rows.replaceChildren(...fields.map((field) => this.shown(field)));
  }

  /** A field as it is: its value, its origin, and what may be done with it. */
  shown(field) {
    const row = h("tr", { dataset: { testid: "setting-field", key: field.key } });
    const act = (labelKey, testid, onclick) =>
      h(
        "button",
        { type: "button", class: "btn btn-small", dataset: { testid }, onclick },
        h("span", { t: labelKey }),
      );
    const actions = h("td", { class: "adm-actions" });
    if (field.editable === false) {
      actions.append(
        h("span", { class: "op-muted", dataset: { testid: "setting-readonly" }, t: "admReadOnly" }),
      );
    } else if (field.origin === "file") {
      actions.append(act("admOverride", "setting-override", () => this.edit(row, field)));
    } else {
      actions.append(act("admChange", "setting-edit", () => this.edit(row, field)));
      if (field.origin === "api") {
        actions.append(act("admReset", "setting-reset", () => this.save(row, field, null)));
      }
    }
    const below =
      field.origin === "api" && field.file_value !== null
        ? h("div", {
            class: "op-muted adm-below",
            t: ["admFileSays", { value: plain(field.file_value) }],
          })
        : null;
    const value = h("span", { class: "adm-value", dataset: { testid: "setting-value" } });
    value.append(valueNode(field.value));
    row.append(
      label(field),
      h("td", {}, value, below, problemSlot("setting-error")),
      h("td", {}, origin(field)),
      actions,
    );
    return row;
  }

  /** The field as an input, with Save and Cancel. */
  edit(row, field) {
    const input = inputFor(field);
    const problem = problemSlot("setting-error");
    const save = h(
      "button",
      { type: "submit", class: "btn btn-primary btn-small", dataset: { testid: "setting-save" } },
      h("span", { t: "save" }),
    );
    const cancel = h(
      "button",
      { type: "button", class: "btn btn-small", onclick: () => row.replaceWith(this.shown(field)) },
      h("span", { t: "cancel" }),
    );
    const form = h("form", { class: "adm-edit" }, input, save, cancel);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const value = readInput(input, field);
      if (value === undefined) {
        setText(problem, "admEnterValue");
        problem.hidden = false;
        return;
      }
      this.save(row, field, value);
    });
    row.replaceChildren(label(field), h("td", { colspan: 3 }, form, problem));
    input.focus();
  }

  /** PATCH one value (null: back to the file's or the default); a refusal stays on its row. */
  async save(row, field, value) {
    const problem = row.querySelector("[data-testid=setting-error]");
    for (const button of row.querySelectorAll("button")) button.disabled = true;
    try {
      const body = await admin.changeTenantSetting(this.tenantId, field.key, value);
      this.draw(body.fields);
      toast(value === null ? "admSettingReset" : "admSettingSaved");
    } catch (err) {
      for (const button of row.querySelectorAll("button")) button.disabled = false;
      showProblem(problem, err, this.console);
    }
  }
}

function label(field) {
  return h(
    "th",
    { scope: "row" },
    h("div", { t: `admField.${field.key}` }),
    h("code", { class: "adm-key" }, field.key),
  );
}

function origin(field) {
  return h("span", {
    class: `pill adm-origin is-${field.origin}`,
    dataset: { testid: "setting-origin", origin: field.origin },
    t: ORIGIN_KEYS[field.origin] ?? field.origin,
  });
}

function plain(value) {
  return value === null ? "—" : String(value);
}

function valueNode(value) {
  if (value === null || value === undefined) return h("span", { t: "admNone" });
  if (typeof value === "boolean") return h("span", { t: value ? "admYes" : "admNo" });
  return String(value);
}

function inputFor(field) {
  const props = { dataset: { testid: "setting-input" }, "aria-label": field.key };
  if (field.kind === "bool" || field.kind === "choice") {
    const choices = field.kind === "bool" ? [true, false] : (field.choices ?? []);
    const select = h(
      "select",
      props,
      ...choices.map((choice) =>
        typeof choice === "boolean"
          ? h("option", { value: String(choice), t: choice ? "admYes" : "admNo" })
          : h("option", { value: String(choice) }, plain(choice)),
      ),
    );
    select.value = String(field.value);
    return select;
  }
  const input = h("input", { ...props, type: field.kind === "int" ? "number" : "text" });
  if (field.kind === "int") input.step = "1";
  input.value = field.value === null ? "" : String(field.value);
  return input;
}

/** The typed value of an input; undefined for an empty number (Reset drops a value). */
function readInput(input, field) {
  if (field.kind === "bool") return input.value === "true";
  if (field.kind === "choice") {
    return field.choices?.find((choice) => String(choice) === input.value) ?? input.value;
  }
  if (field.kind === "int") return input.value === "" ? undefined : Number(input.value);
  return input.value;
}
