// The long-term memory panel. It appears only when the server has a memory API
// (`GET /api/memory`); a 404 keeps it hidden.

import { api } from "./api.js";
import { autosize, h, icon, toast } from "./dom.js";

export class MemoryPanel {
  constructor(panel, openButton, backdrop) {
    this.panel = panel;
    this.openButton = openButton;
    this.backdrop = backdrop;
    this.list = panel.querySelector(".memory-list");
    this.search = panel.querySelector(".memory-search");
    this.editor = panel.querySelector(".memory-editor");
    this.content = "";
    openButton.addEventListener("click", () => this.open());
    panel.querySelector(".memory-close").addEventListener("click", () => this.close());
    panel.querySelector(".memory-edit").addEventListener("click", () => this.editRaw());
    let timer = 0;
    this.search.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => this.find(this.search.value.trim()), 200);
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

  show({ content = "", entries = [] }) {
    this.content = content;
    this.drawEntries([...entries].reverse()); // newest first
  }

  drawEntries(entries) {
    if (entries.length === 0) {
      this.list.replaceChildren(h("p", { class: "muted", t: "memoryEmpty" }));
      return;
    }
    this.list.replaceChildren(
      ...entries.map((entry) =>
        h(
          "div",
          { class: "memory-entry" },
          h(
            "div",
            { class: "memory-meta" },
            h("span", {}, entry.date ?? ""),
            h("span", { class: "pill" }, entry.source ?? ""),
            h(
              "button",
              {
                type: "button",
                class: "icon-btn small danger",
                tAttrs: { title: "delete", "aria-label": "delete" },
                onclick: () => this.remove(entry.id),
              },
              icon("trash"),
            ),
          ),
          h("p", {}, entry.content ?? ""),
          this.provenance(entry.provenance),
        ),
      ),
    );
  }

  /** Where a compacted entry came from: a link to its conversation. */
  provenance(origin) {
    if (!origin?.session_id) return null;
    const vars = { first: origin.first_message_id, last: origin.last_message_id };
    return h("a", {
      class: "memory-provenance",
      href: `#/s/${encodeURIComponent(origin.session_id)}`,
      t: ["memoryFrom", vars],
      onclick: () => this.close(),
    });
  }

  async open() {
    this.panel.hidden = false;
    this.backdrop.hidden = false;
    this.backdrop.onclick = () => this.close();
    await this.probe();
  }

  close() {
    this.panel.hidden = true;
    this.backdrop.hidden = true;
    this.editor.replaceChildren();
  }

  async find(query) {
    try {
      const result = query ? await api.memoryEntries(query) : await api.memory();
      this.drawEntries(result.entries ?? []);
    } catch (err) {
      toast({ raw: `${err.code}: ${err.message}` }, { isError: true });
    }
  }

  async remove(id) {
    try {
      await api.deleteMemoryEntry(id);
      await this.find(this.search.value.trim());
    } catch (err) {
      toast({ raw: `${err.code}: ${err.message}` }, { isError: true });
    }
  }

  editRaw() {
    const area = h("textarea", { class: "memory-text", rows: 10, spellcheck: "false" });
    area.value = this.content;
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
        await this.probe();
      } catch (err) {
        toast({ raw: `${err.code}: ${err.message}` }, { isError: true });
      }
    });
    area.addEventListener("input", () => autosize(area));
    this.editor.replaceChildren(form);
    area.focus();
  }
}
