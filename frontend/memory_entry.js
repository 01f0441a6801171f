// One long-term memory entry in the memory panel: what it says, where it came from (its source
// kind and, for a summarizer's entry, the conversation and messages it distilled), and what can
// be done with it: edit its text in place, delete it, or revert the compaction that wrote it.

import { api } from "./api.js";
import { autosize, formActions, h, icon, submitButton, toast } from "./dom.js";
import { refusal } from "./error_box.js";
import { replaceEntry } from "./memory_text.js";
import { path } from "./url.js";

export class MemoryEntryView {
  /**
   * `titleOf(sessionId)`: a conversation's title if the page knows it; `onChanged()`: the
   * memory changed, redraw the list; `onReverted(sessionId)`: that conversation got its
   * messages back; `onOpenSession()`: the reader followed the link to the conversation.
   */
  constructor(entry, { titleOf, onChanged, onReverted, onOpenSession }) {
    this.entry = entry;
    this.onChanged = onChanged;
    this.onReverted = onReverted;
    this.content = h("p", { class: "memory-content", dataset: { testid: "memory-content" } });
    this.content.textContent = entry.content ?? "";
    this.slot = h("div", { class: "memory-slot" }); // a confirmation or an error
    this.el = h(
      "div",
      {
        class: `memory-entry${entry.is_current === false ? " is-replaced" : ""}`,
        dataset: { testid: "memory-entry", id: entry.id },
      },
      h(
        "div",
        { class: "memory-meta" },
        h("time", { datetime: entry.date ?? "" }, entry.date ?? ""),
        h(
          "span",
          { class: "pill memory-source", dataset: { testid: "memory-source" } },
          entry.source ?? "",
        ),
        Boolean(entry.origin) &&
          h(
            "span",
            { class: "pill memory-origin", dataset: { testid: "memory-origin" } },
            entry.origin,
          ),
        entry.is_current === false &&
          h("span", {
            class: "pill memory-replaced",
            dataset: { testid: "memory-replaced" },
            t: "memoryReplaced",
            tAttrs: { title: "memoryReplacedHint" },
          }),
        h(
          "span",
          { class: "memory-actions" },
          h(
            "button",
            {
              type: "button",
              class: "icon-btn small",
              dataset: { testid: "memory-edit-entry" },
              tAttrs: { title: "memoryEditEntry", "aria-label": "memoryEditEntry" },
              onclick: () => this.edit(),
            },
            icon("pencil"),
          ),
          h(
            "button",
            {
              type: "button",
              class: "icon-btn small danger",
              tAttrs: { title: "delete", "aria-label": "delete" },
              onclick: () => this.remove(),
            },
            icon("trash"),
          ),
        ),
      ),
      this.content,
      this.origin(titleOf, onOpenSession),
      this.slot,
    );
  }

  /** The reader is working on this entry: editing it, confirming a revert, or reading an error. */
  get isBusy() {
    return Boolean(this.form) || this.slot.childElementCount > 0;
  }

  /** Where a summarizer's entry came from: its conversation and messages, and a revert. */
  origin(titleOf, onOpenSession) {
    const origin = this.entry.provenance;
    if (!origin?.session_id) return null;
    const title = titleOf(origin.session_id);
    const vars = { first: origin.first_message_id, last: origin.last_message_id, title };
    const link = h(
      "a",
      {
        class: "memory-provenance",
        dataset: { testid: "memory-provenance" },
        href: path`#/s/${origin.session_id}`,
        onclick: () => onOpenSession(),
      },
      icon("chat"),
      h("span", { t: [title ? "memoryFromTitled" : "memoryFrom", vars] }),
    );
    this.revertButton = h(
      "button",
      {
        type: "button",
        class: "btn-link memory-revert",
        dataset: { testid: "memory-revert" },
        tAttrs: { title: "memoryRevertHint" },
        onclick: () => this.confirmRevert(),
      },
      icon("undo"),
      h("span", { t: "memoryRevert" }),
    );
    return h("div", { class: "memory-origin" }, link, this.revertButton);
  }

  confirmRevert() {
    const { first_message_id: first, last_message_id: last } = this.entry.provenance;
    const confirm = h(
      "button",
      {
        type: "button",
        class: "btn btn-small btn-danger",
        dataset: { testid: "memory-revert-confirm" },
        onclick: () => this.revert(confirm),
      },
      icon("undo"),
      h("span", { t: "memoryRevert" }),
    );
    this.revertButton.hidden = true;
    this.slot.replaceChildren(
      h(
        "div",
        { class: "memory-confirm", role: "group" },
        h("p", { t: ["memoryRevertConfirm", { first, last }] }),
        formActions(() => this.clearSlot(), confirm),
      ),
    );
    confirm.focus();
  }

  async revert(button) {
    button.disabled = true;
    try {
      const reverted = await api.revertMemoryEntry(this.entry.id);
      this.clearSlot();
      if (reverted.returned_to_window) {
        toast("memoryReverted");
        await Promise.all([this.onChanged(), this.onReverted(reverted.session_id)]);
      } else {
        toast("memoryRedistilled"); // its new line shows the next time the list is drawn
        await this.onChanged();
      }
    } catch (err) {
      this.showError("memoryRevertFailed", err);
    }
  }

  clearSlot() {
    this.slot.replaceChildren();
    if (this.revertButton) this.revertButton.hidden = false;
  }

  /** A refusal shown on the entry itself, with the server's code and message. */
  showError(titleKey, err) {
    if (this.revertButton) this.revertButton.hidden = false;
    this.slot.replaceChildren(refusal(titleKey, err));
  }

  async remove() {
    try {
      await api.deleteMemoryEntry(this.entry.id);
      await this.onChanged();
    } catch (err) {
      toast({ raw: `${err.code}: ${err.message}` }, { isError: true });
    }
  }

  /** Edit the entry's text in place; Enter saves, Escape cancels. */
  edit() {
    if (this.form) return;
    const area = h("textarea", {
      class: "memory-text memory-entry-input",
      rows: 2,
      dataset: { testid: "memory-entry-input" },
      tAttrs: { "aria-label": "memoryEntryLabel" },
    });
    area.value = this.entry.content ?? "";
    const save = submitButton("save", "memory-save");
    const form = h(
      "form",
      { class: "memory-entry-form" },
      area,
      formActions(() => this.stopEditing(), save),
    );
    area.addEventListener("input", () => {
      autosize(area);
      save.disabled = !area.value.trim();
    });
    area.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.stopPropagation(); // Escape closes the edit, not the panel
        this.stopEditing();
      } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault(); // an entry is one line
        form.requestSubmit();
      }
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      save.disabled = true;
      try {
        await this.save(area.value);
      } catch (err) {
        save.disabled = false;
        this.showError("memorySaveFailed", err);
      }
    });
    this.form = form;
    this.content.replaceWith(form);
    autosize(area);
    area.focus();
  }

  stopEditing() {
    this.form?.replaceWith(this.content);
    this.form = null;
  }

  /** Rewrite the entry's line in the current MEMORY.md text; every other line stays as read. */
  async save(text) {
    const current = await api.memory();
    const entry = current.entries.find((e) => e.id === this.entry.id);
    if (!entry) {
      await this.onChanged();
      toast("memoryEntryChanged", { isError: true });
      return;
    }
    await api.saveMemory(replaceEntry(current.content, entry, text));
    this.stopEditing();
    toast("memorySaved");
    await this.onChanged();
  }
}
