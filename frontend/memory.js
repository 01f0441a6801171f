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
    try {
      this.show(await api.memory());
      this.openButton.hidden = false;
    } catch {
      this.openButton.hidden = true; // 404: not built on this server; anything else: not usable
    }
  }

  show({ entries = [] }) {
    this.drawEntries([...entries].reverse()); // newest first
  }

  drawEntries(entries) {
    if (entries.length === 0) {
      this.list.replaceChildren(h("p", { class: "muted", t: "memoryEmpty" }));
      return;
    }
    this.list.replaceChildren(
      ...entries.map((entry) => new MemoryEntryView(entry, this.entryActions).el),
    );
  }

  async open() {
    this.panel.hidden = false;
    this.backdrop.hidden = false;
    this.backdrop.onclick = () => this.close();
    this.search.value = "";
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
    try {
      if (query) this.drawEntries((await api.memoryEntries(query)).entries ?? []);
      else this.show(await api.memory());
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
