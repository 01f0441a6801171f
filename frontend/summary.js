// The session summary, editable in place. It stands in for the messages that left the
// model's memory window, so it is drawn between those and the window.

import { autosize, h, icon, toast } from "./dom.js";

export class SummaryCard {
  /** `save(text)` stores the summary and resolves with the updated session. */
  constructor(summary, save) {
    this.summary = summary;
    this.save = save;
    this.el = h("section", { class: "summary-card", dataset: { testid: "summary" } });
    this.show();
  }

  show() {
    const hasSummary = Boolean(this.summary.trim());
    this.el.classList.toggle("is-empty", !hasSummary);
    const edit = h(
      "button",
      {
        type: "button",
        class: "btn-link",
        dataset: { testid: "summary-edit" },
        onclick: () => this.edit(),
      },
      icon("pencil"),
      h("span", { t: hasSummary ? "summaryEdit" : "summaryAdd" }),
    );
    this.el.replaceChildren(
      h(
        "div",
        { class: "summary-head", tAttrs: hasSummary ? null : { title: "summaryEmpty" } },
        icon("note"),
        h("span", { class: "summary-title", t: "summaryTitle" }),
        hasSummary ? null : h("span", { class: "summary-none", t: "summaryNone" }),
        edit,
      ),
    );
    if (hasSummary) {
      this.el.append(
        h("p", { class: "summary-text", dataset: { testid: "summary-text" } }, this.summary),
      );
    }
  }

  edit() {
    const area = h("textarea", {
      class: "summary-input",
      rows: 3,
      dataset: { testid: "summary-input" },
      tAttrs: { "aria-label": "summaryTitle" },
    });
    area.value = this.summary;
    const saveButton = h(
      "button",
      { type: "submit", class: "btn btn-primary btn-small", dataset: { testid: "summary-save" } },
      h("span", { t: "save" }),
    );
    const form = h(
      "form",
      { class: "summary-form" },
      area,
      h(
        "div",
        { class: "summary-actions" },
        h(
          "button",
          { type: "button", class: "btn btn-small", onclick: () => this.show() },
          h("span", { t: "cancel" }),
        ),
        saveButton,
      ),
    );
    area.addEventListener("input", () => autosize(area));
    area.addEventListener("keydown", (event) => {
      if (event.key === "Escape") this.show();
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      saveButton.disabled = true;
      try {
        const session = await this.save(area.value);
        this.summary = session.summary;
        this.show();
        toast("summarySaved");
      } catch (err) {
        saveButton.disabled = false;
        toast({ raw: `${err.code ?? "error"}: ${err.message}` }, { isError: true });
      }
    });
    this.el.querySelector(".summary-text")?.remove();
    this.el.append(form);
    this.el.classList.remove("is-empty");
    this.el.querySelector(".summary-head .btn-link").hidden = true;
    autosize(area);
    area.focus();
  }
}
