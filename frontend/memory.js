// The long-term memory panel. It appears only when the server has a memory API
// (`GET /api/memory`); a 404 keeps it hidden. Each entry is a MemoryEntryView; lines of
// MEMORY.md that do not parse as entries are listed too, flagged, as the server keeps them.
// With memory kept per person it also links this browser with the person's bot chats
// (LinkPanel) and lists the lines waiting for their OK (PendingMemory).

import { api } from "./api.js";
import { h, toast } from "./dom.js";
import { LinkPanel } from "./link_panel.js";
import { MemoryEntryView } from "./memory_entry.js";
import { addEntryForm, editTextForm } from "./memory_forms.js";
import { PendingMemory } from "./pending_memory.js";

/** A line of MEMORY.md that is not an entry: shown as written, marked as not parsed. */
function invalidLine(text) {
  const content = h("p", { class: "memory-content", dataset: { testid: "memory-invalid-text" } });
  content.textContent = text;
  return h(
    "div",
    {
      class: "memory-entry is-invalid",
      dataset: { testid: "memory-invalid-line" },
      tAttrs: { title: "memoryNotParsedHint" },
    },
    h(
      "div",
      { class: "memory-meta" },
      h("span", { class: "pill memory-flag", t: "memoryNotParsed" }),
    ),
    content,
  );
}

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
    this.pending = new PendingMemory(
      panel.querySelector(".memory-pending"),
      openButton.querySelector(".pending-badge"),
      { onDecided: () => this.refresh() },
    );
    this.links = new LinkPanel(panel.querySelector(".memory-links"), {
      onChanged: () => Promise.all([this.refresh(), this.pending.refresh()]),
    });
    openButton.addEventListener("click", () => this.open());
    panel.querySelector(".memory-close").addEventListener("click", () => this.close());
    const refresh = () => this.refresh();
    panel.querySelector(".memory-edit").addEventListener("click", () => {
      editTextForm(this.editor, { onSaved: refresh });
    });
    panel.querySelector(".memory-add").addEventListener("click", () => {
      addEntryForm(this.editor, { onAdded: refresh });
    });
    let timer = 0;
    this.search.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => this.refresh(), 200);
    });
  }

  /** Follow the tenant's memory policy (`GET /api/health`): per person, asking first or not. */
  configure({ memory_scope: scope, confirm_writes: isConfirming }) {
    this.links.configure(scope === "user");
    this.pending.configure(scope === "user" && Boolean(isConfirming));
  }

  /** A turn ended: it may have proposed lines to remember. */
  turnEnded() {
    this.pending.refresh();
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

  /** The whole memory: lines that need fixing first, then the entries, newest first. */
  show({ entries = [], invalid_lines: invalidLines = [] }) {
    this.drawEntries([...entries].reverse(), invalidLines);
  }

  /**
   * Draw `entries` (and `invalidLines`). An entry the reader is working on (an open edit, a
   * confirmation, an error) keeps its view, so a redraw for another entry's change does not
   * throw that work away.
   */
  drawEntries(entries, invalidLines = []) {
    const busy = new Map(this.views.filter((v) => v.isBusy).map((v) => [v.entry.id, v]));
    this.views = entries.map(
      (entry) => busy.get(entry.id) ?? new MemoryEntryView(entry, this.entryActions),
    );
    const lines = invalidLines.map(invalidLine);
    if (this.views.length === 0 && lines.length === 0) {
      this.list.replaceChildren(h("p", { class: "muted", t: "memoryEmpty" }));
      return;
    }
    this.list.replaceChildren(...lines, ...this.views.map((view) => view.el));
  }

  async open() {
    this.panel.hidden = false;
    this.backdrop.hidden = false;
    this.backdrop.onclick = () => this.close();
    this.search.value = "";
    // What was drawn before may be stale: nothing to click until the fresh list is in.
    this.views = [];
    this.list.replaceChildren(h("p", { class: "muted", t: "loading" }));
    await Promise.all([this.probe(), this.pending.refresh(), this.links.opened()]);
  }

  close() {
    this.panel.hidden = true;
    this.backdrop.hidden = true;
    this.editor.replaceChildren();
    this.links.closed();
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
}
