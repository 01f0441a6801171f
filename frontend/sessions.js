// The sidebar's session list: newest activity first, grouped by day, searchable by title,
// with rename and delete on each item.

import { api } from "./api.js";
import { h, icon, setAttrs, setText, toast } from "./dom.js";
import { dayGroup } from "./i18n.js";
import { PLATFORM_NAMES } from "./platforms.js";
import { path } from "./url.js";

const PAGE = 50;

/**
 * Replace `target` with a text input; Enter (or leaving it) saves, Escape cancels. Returns a
 * handle whose `cancel()` puts `target` back unsaved; `onClose()` runs once the input is gone.
 */
export function editInline(target, value, save, { label = "rename", onClose = () => {} } = {}) {
  const input = h("input", { class: "inline-input", type: "text", maxlength: 200 });
  setAttrs(input, { "aria-label": label });
  input.value = value;
  let isDone = false;
  const finish = async (shouldSave) => {
    if (isDone) return;
    isDone = true;
    const next = input.value.trim();
    input.replaceWith(target);
    onClose();
    if (shouldSave && next !== value) await save(next);
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.isComposing) finish(true);
    if (event.key === "Escape") finish(false);
  });
  input.addEventListener("blur", () => finish(true));
  target.replaceWith(input);
  input.focus();
  input.select();
  return { cancel: () => finish(false) };
}

export class SessionList {
  constructor(root, search, { onRenamed, onDeleted }) {
    this.root = root;
    this.search = search;
    this.onRenamed = onRenamed;
    this.onDeleted = onDeleted;
    this.sessions = [];
    this.total = 0;
    this.activeId = null;
    this.query = "";
    this.editor = null; // an item's open rename box: redrawing now would throw it away
    this.isStale = false; // a redraw was put off for the rename box
    this.armedId = null; // the session whose delete button waits for its confirming click
    let timer = 0;
    search.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        this.query = search.value.trim();
        this.refresh();
      }, 200);
    });
  }

  async refresh() {
    const query = this.query;
    const limit = Math.max(PAGE, this.sessions.length);
    const page = await api.listSessions({ limit, q: query });
    if (query !== this.query) return; // a newer search is on its way
    this.sessions = page.sessions;
    this.total = page.total;
    this.render();
  }

  async loadMore() {
    const page = await api.listSessions({
      limit: PAGE,
      offset: this.sessions.length,
      q: this.query,
    });
    const known = new Set(this.sessions.map((s) => s.id));
    this.sessions.push(...page.sessions.filter((s) => !known.has(s.id)));
    this.total = page.total;
    this.render();
  }

  setActive(id) {
    this.activeId = id;
    for (const item of this.root.querySelectorAll(".session-item")) {
      const isActive = item.dataset.id === id;
      item.classList.toggle("is-active", isActive);
      item.querySelector(".session-link").toggleAttribute("aria-current", isActive);
    }
  }

  render() {
    if (this.editor) {
      this.isStale = true;
      return;
    }
    this.isStale = false;
    if (this.sessions.length === 0) {
      this.root.replaceChildren(
        h("p", { class: "session-empty", t: this.query ? "noMatches" : "noSessions" }),
      );
      return;
    }
    const groups = new Map();
    for (const session of this.sessions) {
      const group = dayGroup(session.updated_at);
      if (!groups.has(group)) groups.set(group, []);
      groups.get(group).push(session);
    }
    const children = [];
    for (const [group, sessions] of groups) {
      children.push(
        h(
          "div",
          { class: "session-group" },
          h("div", { class: "group-label", t: group }),
          sessions.map((session) => this.item(session)),
        ),
      );
    }
    if (this.sessions.length < this.total) {
      children.push(
        h(
          "button",
          { type: "button", class: "btn-link load-more", onclick: () => this.loadMore() },
          h("span", { t: "loadMore" }),
        ),
      );
    }
    this.root.replaceChildren(...children);
    this.setActive(this.activeId);
  }

  item(session) {
    const title = h("span", { class: "session-title" });
    if (session.title) title.textContent = session.title;
    else setText(title, "untitled");
    const href = path`#/s/${session.id}`;
    const link = h("a", { class: "session-link", href, title: session.title || null }, title);
    // Sessions of a chat platform's bot carry its name as a badge.
    const platform = PLATFORM_NAMES[session.channel];
    if (platform) {
      // A bot's chat: read here, answered there.
      link.prepend(
        h("span", { class: "channel-badge", dataset: { testid: "channel-badge" } }, platform),
      );
    }
    const rename = h(
      "button",
      {
        type: "button",
        class: "icon-btn small",
        tAttrs: { title: "rename", "aria-label": "rename" },
      },
      icon("pencil"),
    );
    const remove = h(
      "button",
      {
        type: "button",
        class: "icon-btn small danger",
        tAttrs: { title: "delete", "aria-label": "delete" },
      },
      icon("trash"),
    );
    rename.addEventListener("click", () => {
      if (this.editor) return;
      const save = (next) => this.rename(session, next);
      this.editor = editInline(link, session.title, save, {
        onClose: () => {
          this.editor = null;
          if (this.isStale) this.render();
        },
      });
    });
    if (this.armedId === session.id) showArmed(remove);
    remove.addEventListener("click", () => this.confirmDelete(session));
    return h(
      "div",
      { class: "session-item", dataset: { id: session.id, testid: "session-item" } },
      link,
      h("div", { class: "session-actions" }, rename, remove),
    );
  }

  deleteButtons() {
    return this.root.querySelectorAll(".session-actions .danger");
  }

  async rename(session, title) {
    try {
      const updated = await api.renameSession(session.id, title);
      // By id: the list may have been fetched again since this item was drawn.
      this.sessions = this.sessions.map((s) => (s.id === updated.id ? updated : s));
      this.render();
      this.onRenamed(updated);
    } catch (err) {
      toast({ raw: `${err.code}: ${err.message}` }, { isError: true });
    }
  }

  /**
   * The first click arms the button, a second one within 3 s deletes. The armed state belongs
   * to the list, not to the button, so a redraw in between (a search, a turn ending
   * elsewhere) keeps it.
   */
  async confirmDelete(session) {
    if (this.armedId !== session.id) {
      this.armedId = session.id;
      for (const button of this.deleteButtons()) {
        if (button.closest(".session-item").dataset.id === session.id) showArmed(button);
        else showUnarmed(button);
      }
      clearTimeout(this.armTimer);
      this.armTimer = setTimeout(() => {
        this.armedId = null;
        for (const button of this.deleteButtons()) showUnarmed(button);
      }, 3000);
      return;
    }
    this.armedId = null;
    clearTimeout(this.armTimer);
    try {
      await api.deleteSession(session.id);
      this.sessions = this.sessions.filter((s) => s.id !== session.id);
      this.total -= 1;
      this.render();
      toast("deleted");
      this.onDeleted(session.id);
    } catch (err) {
      toast({ raw: `${err.code}: ${err.message}` }, { isError: true });
    }
  }
}

function showArmed(button) {
  button.classList.add("is-armed");
  button.replaceChildren(h("span", { t: "confirmDelete" }));
}

function showUnarmed(button) {
  if (!button.classList.contains("is-armed")) return;
  button.classList.remove("is-armed");
  button.replaceChildren(icon("trash"));
}
