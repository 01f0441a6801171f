// The long-term memory panel. It appears only when the server has a memory API
// (`GET /api/memory`); a 404 keeps it hidden. Each entry is a MemoryEntryView.

import { api } from "./api.js";
import { autosize, h, toast } from "./dom.js";
import { MemoryEntryView } from "./memory_entry.js";

export class MemoryPanel {
  /**
   * `titleOf(sessionId)`: a conversation's title, if known; `onReverted(sessionId)`: a revert
   * gave that conversation its messages back.
   */
  constructor(panel, openButton, backdrop, { titleOf = () => null, onReverted = () => {} } = {}) {
    this.panel = panel;
    this.openButton = openButton;
    this.backdrop = backdrop;
    this.list = panel.querySelector(".memory-list");
    this.search = panel.querySelector(".memory-search");
    this.editor = panel.querySelector(".memory-editor");
    this.entryActions = {
      titleOf,
      onReverted,
      onChanged: () => this.refresh(),
      onOpenSession: () => this.close(),
    };
    this.views = []; // the MemoryEntryViews drawn, in order
    this.loads = 0; // the latest load wins: an older answer arriving late is dropped
    openButton.addEventListener("click", () => this.open());
    panel.querySelector(".memory-close").addEventListener("click", () => this.close());
    panel.querySelector(".memory-edit").addEventListener("click", () => this.editRaw());
    let timer = 0;
    this.search.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => this.refresh(), 200);
    });
  }

  /** Show the panel's button only if the server answers `GET /api/memory`. */
  async probe() {
    const load = ++this.loads;
    try {
      const memory = await api.memory();
      if (load === this.loads) this.show(memory);
      this.openButton.hidden = false;
    } catch {
      this.openButton.hidden = true; // 404: not built on this server; anything else: not usable
    }
  }

  show({ entries = [] }) {
    this.drawEntries([...entries].reverse()); // newest first
  }

  /**
   * Draw `entries`. An entry the reader is working on (an open edit, a confirmation, an error)
   * keeps its view, so a redraw for another entry's change does not throw that work away.
   */
  drawEntries(entries) {
    const busy = new Map(this.views.filter((v) => v.isBusy).map((v) => [v.entry.id, v]));
    this.views = entries.map(
      (entry) => busy.get(entry.id) ?? new MemoryEntryView(entry, this.entryActions),
    );
    if (this.views.length === 0) {
      this.list.replaceChildren(h("p", { class: "muted", t: "memoryEmpty" }));
      return;
    }
    this.list.replaceChildren(...this.views.map((view) => view.el));
  }

  async open() {
    this.panel.hidden = false;
    this.backdrop.hidden = false;
    this.backdrop.onclick = () => this.close();
    this.search.value = "";
    // What was drawn before may be stale: nothing to click until the fresh list is in.
    this.views = [];
    this.list.replaceChildren(h("p", { class: "muted", t: "loading" }));
    await this.probe();
  }

  close() {
    this.panel.hidden = true;
    this.backdrop.hidden = true;
    this.editor.replaceChildren();
  }

  /** Redraw the list: every entry, or those matching the search box (best first). */
  async refresh() {
    const query = this.search.value.trim();
    const load = ++this.loads;
    try {
      const found = query ? await api.memoryEntries(query) : await api.memory();
      if (load !== this.loads) return;
      if (query) this.drawEntries(found.entries ?? []);
      else this.show(found);
    } catch (err) {
      toast({ raw: `${err.code}: ${err.message}` }, { isError: true });
    }
  }

  async editRaw() {
    let content;
    try {
      ({ content } = await api.memory());
    } catch (err) {
      toast({ raw: `${err.code}: ${err.message}` }, { isError: true });
      return;
    }
    const area = h("textarea", { class: "memory-text", rows: 10, spellcheck: "false" });
    area.value = content;
    const form = h(
      "form",
      { class: "summary-form" },
      area,
      h(
        "div",
        { class: "summary-actions" },
        h(
          "button",
          { type: "button", class: "btn btn-small", onclick: () => this.editor.replaceChildren() },
          h("span", { t: "cancel" }),
        ),
        h(
          "button",
          { type: "submit", class: "btn btn-primary btn-small" },
          h("span", { t: "save" }),
        ),
      ),
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        await api.saveMemory(area.value);
        this.editor.replaceChildren();
        toast("memorySaved");
        await this.refresh();
      } catch (err) {
        toast({ raw: `${err.code}: ${err.message}` }, { isError: true });
      }
    });
    area.addEventListener("input", () => autosize(area));
    this.editor.replaceChildren(form);
    area.focus();
  }
}
