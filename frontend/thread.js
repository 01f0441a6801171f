// The conversation pane: stored messages (window and, on request, the archived ones before it),
// the session summary between them, and live replies appended at the end.

import { api } from "./api.js";
import { h, icon } from "./dom.js";
import { formatDateTime, formatTime } from "./i18n.js";
import { ReplyView } from "./reply.js";
import { SummaryCard } from "./summary.js";

const PAGE = 100;
const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

// What each drawn user message said: its text and image parts, to send it again.
const sentParts = new WeakMap();

/** `{text, images}` of a user message element (images as `{type: "image", ...}` parts). */
export function messageParts(el) {
  return sentParts.get(el) ?? null;
}

export function userMessage({ id, turn_id: turnId, content, images = [], created_at: createdAt }) {
  const valid = images.filter(
    (image) => IMAGE_TYPES.has(image.media_type) && /^[A-Za-z0-9+/=]+$/.test(image.data),
  );
  const pictures = valid.map((image) =>
    h("img", {
      class: "msg-image",
      alt: "",
      src: `data:${image.media_type};base64,${image.data}`,
    }),
  );
  const time = createdAt ?? new Date().toISOString();
  const el = h(
    "article",
    {
      class: "msg msg-user",
      dataset: { testid: "user-message", id: id ?? "", turnId: turnId ?? "" },
    },
    h(
      "div",
      { class: "msg-body" },
      pictures.length ? h("div", { class: "msg-images" }, pictures) : null,
      content || !pictures.length ? h("div", { class: "bubble" }, content) : null,
      h(
        "div",
        { class: "msg-foot" },
        h("time", { datetime: time, title: formatDateTime(time) }, formatTime(time)),
      ),
    ),
  );
  sentParts.set(el, {
    text: content ?? "",
    images: valid.map(({ media_type: mediaType, data }) => ({
      type: "image",
      media_type: mediaType,
      data,
    })),
  });
  return el;
}

/**
 * Elements for stored messages; each reply carries the tool calls of its turn, and a turn that
 * failed shows how (code and cause), as it did live. `options.hasNewest`: the messages end with
 * the session's newest turn, which, failed, offers Retry (`options.onRetry`): an older failed
 * turn cannot be resumed once newer ones were answered.
 */
function drawMessages(messages, calls, options) {
  const byMessage = new Map();
  const byTurn = new Map();
  for (const call of calls) {
    const [map, key] =
      call.message_id != null ? [byMessage, call.message_id] : [byTurn, call.turn_id];
    if (!map.has(key)) map.set(key, []);
    map.get(key).push(call);
  }
  const newest = options.hasNewest ? messages.findLastIndex((m) => m.role === "user") : -1;
  const failed = new Map(); // turn id → its failed user message, shown on the turn's reply
  const elements = [];
  messages.forEach((message, index) => {
    if (message.role === "user") {
      const userEl = userMessage(message);
      elements.push(userEl);
      const next = messages[index + 1];
      const isAnswered = next?.role === "assistant" && next.turn_id === message.turn_id;
      const orphanCalls = byTurn.get(message.turn_id);
      const failure = message.failure ? { message, userEl, isNewest: index === newest } : null;
      if (!isAnswered && (orphanCalls || failure)) {
        // A turn that stored no reply: what its tools did, and how it failed.
        byTurn.delete(message.turn_id);
        const stub = { ...message, id: "", content: "", status: "failed" };
        const view = ReplyView.stored(stub, orphanCalls ?? [], options);
        if (failure) showFailure(view, failure, options);
        elements.push(view.el);
      } else if (failure) failed.set(message.turn_id, failure);
      return;
    }
    const own = [...(byMessage.get(message.id) ?? []), ...(byTurn.get(message.turn_id) ?? [])];
    byTurn.delete(message.turn_id);
    const view = ReplyView.stored(message, own, options);
    if (message.is_archived) view.el.classList.add("is-archived");
    const failure = failed.get(message.turn_id);
    if (failure) showFailure(view, failure, options); // the words kept before it failed
    elements.push(view.el);
  });
  return elements;
}

/** How a stored turn failed, on its reply; Retry resumes it with the key the server kept. */
function showFailure(view, { message, userEl, isNewest }, { onRetry }) {
  const retry =
    isNewest && message.retry_key && onRetry
      ? () =>
          onRetry({
            text: message.content,
            images: messageParts(userEl)?.images ?? [],
            key: message.retry_key,
            userEl,
            view,
          })
      : null;
  view.fail(message.failure, { isStopped: message.failure.code === "cancelled", onRetry: retry });
}

export class Thread {
  /**
   * `onSummaryState(state)`: the open session's summary card is "none", "shown" or "editing".
   * `onRetry({text, images, key, userEl, view})`: Retry pressed on a stored failed turn.
   */
  constructor(scroller, { onSummaryState = () => {}, onRetry = null } = {}) {
    this.scroller = scroller;
    this.inner = scroller.querySelector(".thread");
    this.session = null;
    this.summary = null;
    this.drawnWindowStart = 0; // the window start of the messages drawn
    // The latest draw begun; one still loading gives up when another begins. A session
    // refreshed meanwhile (updateSession, saveSummary) is the same draw.
    this.drawing = null;
    this.onSummaryState = onSummaryState;
    this.onRetry = onRetry;
  }

  get isNearBottom() {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight < 120;
  }

  scrollToBottom() {
    this.scroller.scrollTop = this.scroller.scrollHeight;
  }

  /** Keep following the reply only while the reader is at the bottom. */
  follow(wasNearBottom) {
    if (wasNearBottom) this.scrollToBottom();
  }

  loading() {
    this.drawing = null;
    this.session = null;
    this.summary = null;
    this.drawnWindowStart = 0;
    this.inner.replaceChildren(h("div", { class: "thread-loading", t: "loading" }));
  }

  empty(onSuggestion) {
    this.drawing = null;
    this.session = null;
    this.summary = null;
    this.drawnWindowStart = 0; // a new chat: its window starts at its first message
    const suggestions = ["suggest1", "suggest2", "suggest3"].map((key) =>
      h(
        "button",
        {
          type: "button",
          class: "suggestion",
          onclick: (e) => onSuggestion(e.currentTarget.textContent),
        },
        h("span", { t: key }),
      ),
    );
    this.inner.replaceChildren(
      h(
        "div",
        { class: "empty-state", dataset: { testid: "empty-state" } },
        h("div", { class: "empty-mark", "aria-hidden": "true" }, "T"),
        h("h2", { t: "emptyTitle" }),
        h("p", { class: "muted", t: "emptySubtitle" }),
        h("div", { class: "suggestions" }, suggestions),
      ),
    );
  }

  /**
   * Draw a session: its window, the summary, and a way to reach archived messages. With
   * `isBusy`, a redraw is given up when it turns true while the messages load (a turn began:
   * messages loaded before it would take its message and reply off the page).
   */
  async show(session, { isDemo, isBusy = () => false }) {
    const drawing = {};
    this.drawing = drawing;
    this.session = session;
    this.options = { isDemo, onRetry: this.onRetry };
    const [page, tools] = await Promise.all([
      api.messages(session.id, { limit: PAGE }),
      api.toolConversations(session.id).catch(() => ({ tool_conversations: [] })),
    ]);
    if (this.drawing !== drawing) return false; // another draw (or session) began meanwhile
    if (isBusy()) return false;
    this.calls = tools.tool_conversations;
    this.oldestId = page.messages[0]?.id ?? null;
    this.earlier = h("div", { class: "earlier" });
    this.archived = h("div", { class: "archived", hidden: true });
    this.summary = new SummaryCard(session.summary, (text) => this.saveSummary(text), {
      onState: (state) => this.onSummaryState(state),
    });
    this.window = h(
      "div",
      { class: "window" },
      drawMessages(page.messages, this.calls, { ...this.options, hasNewest: true }),
    );
    this.inner.replaceChildren(this.earlier, this.archived, this.summary.el, this.window);
    this.drawnWindowStart = session.window_start_id; // what the page shows, until redrawn
    await this.offerEarlier(page.has_more, session.window_start_id);
    this.scrollToBottom();
    return true;
  }

  async saveSummary(text) {
    const session = await api.setSummary(this.session.id, text);
    this.session = session;
    return session;
  }

  /** Write a summary by hand (the session has none, so its card is not shown yet). */
  editSummary() {
    this.summary?.edit();
  }

  /** Refresh the summary after a turn (compaction may have written or rewritten it). */
  updateSession(session) {
    if (!this.session || session.id !== this.session.id) return;
    this.session = session;
    if (!this.summary.isEditing && this.summary.summary !== session.summary) {
      this.summary.summary = session.summary;
      this.summary.show();
    }
  }

  async offerEarlier(hasMore, windowStartId) {
    let isAvailable = hasMore;
    if (!isAvailable && windowStartId > 0) {
      const probe = await api.messages(this.session.id, {
        includeArchived: true,
        limit: 1,
        beforeId: this.oldestId ?? windowStartId,
      });
      isAvailable = probe.messages.length > 0;
    }
    this.earlier.replaceChildren();
    if (!isAvailable) return;
    const button = h(
      "button",
      { type: "button", class: "btn btn-small earlier-btn", dataset: { testid: "show-earlier" } },
      icon("chevronUp"),
      h("span", { t: "showEarlier" }),
    );
    button.addEventListener("click", () => this.loadEarlier(button));
    this.earlier.append(button);
  }

  async loadEarlier(button) {
    button.disabled = true;
    const page = await api.messages(this.session.id, {
      includeArchived: true,
      limit: PAGE,
      beforeId: this.oldestId ?? this.session.window_start_id,
    });
    const before = this.scroller.scrollHeight - this.scroller.scrollTop;
    const archived = page.messages.filter((m) => m.is_archived);
    const inWindow = page.messages.filter((m) => !m.is_archived);
    if (archived.length) {
      if (this.archived.hidden) {
        this.archived.hidden = false;
        this.archived.append(h("div", { class: "divider" }, h("span", { t: "earlierDivider" })));
      }
      this.archived.firstElementChild.after(...drawMessages(archived, this.calls, this.options));
    }
    if (inWindow.length) this.window.prepend(...drawMessages(inWindow, this.calls, this.options));
    this.oldestId = page.messages[0]?.id ?? this.oldestId;
    this.scroller.scrollTop = this.scroller.scrollHeight - before;
    await this.offerEarlier(page.has_more, 0);
  }

  append(el) {
    const container = this.window ?? this.inner;
    container.append(el);
  }
}
