// The session summary, editable in place. It stands in for the messages that left the
// model's memory window, so it is drawn between those and the window. A session without a
// summary shows no card: the card appears once one exists (written by the summarizer, or by
// hand through `edit()`, which the chat header offers as "Add summary").

import { autosize, formActions, h, icon, submitButton, toast } from "./dom.js";

export class SummaryCard {
  /**
   * `save(text)` stores the summary and resolves with the updated session; `onState(state)`
   * hears "none" (no summary, no card), "shown" or "editing" whenever that changes.
   */
  constructor(summary, save, { onState = () => {} } = {}) {
    this.summary = summary;
    this.save = save;
    this.onState = onState;
    this.el = h("section", { class: "summary-card", dataset: { testid: "summary" } });
    this.show();
  }

  get isEditing() {
    return Boolean(this.el.querySelector("form"));
  }

  show() {
    const hasSummary = Boolean(this.summary.trim());
    this.el.hidden = !hasSummary;
    if (!hasSummary) {
      this.el.replaceChildren();
      this.onState("none");
      return;
    }
    const edit = h(
      "button",
      {
        type: "button",
        class: "btn-link",
        dataset: { testid: "summary-edit" },
        onclick: () => this.edit(),
      },
      icon("pencil"),
      h("span", { t: "summaryEdit" }),
    );
    this.el.replaceChildren(
      h(
        "div",
        { class: "summary-head" },
        icon("note"),
        h("span", { class: "summary-title", t: "summaryTitle" }),
        edit,
      ),
      h("p", { class: "summary-text", dataset: { testid: "summary-text" } }, this.summary),
    );
    this.onState("shown");
  }

  edit() {
    if (this.isEditing) return;
    const area = h("textarea", {
      class: "summary-input",
      rows: 3,
      dataset: { testid: "summary-input" },
      tAttrs: { "aria-label": "summaryTitle" },
    });
    area.value = this.summary;
    const saveButton = submitButton("save", "summary-save");
    const form = h(
      "form",
      { class: "summary-form" },
      area,
      formActions(() => this.show(), saveButton),
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
    this.el.replaceChildren(
      h(
        "div",
        { class: "summary-head" },
        icon("note"),
        h("span", { class: "summary-title", t: "summaryTitle" }),
      ),
      form,
    );
    this.el.hidden = false;
    this.onState("editing");
    autosize(area);
    area.focus();
    this.el.scrollIntoView({ block: "nearest" });
  }
}
