// One assistant reply on the page: streamed text (rendered as Markdown), thinking, tool cards,
// notices, the compaction marker and the error that ended it. Stored replies are drawn with the
// same view.

import { copyButton, h, icon, setAttrs, setText } from "./dom.js";
import { errorBox, errorCode, errorMessage } from "./error_box.js";
import { formatTime, locale } from "./i18n.js";
import { renderMarkdown } from "./markdown.js";
import { ToolCard } from "./tool_card.js";

/** The innermost last element, where the next streamed word will appear. */
function caretTarget(el) {
  let target = el;
  while (
    target.lastElementChild &&
    !["BR", "BUTTON", "svg"].includes(target.lastElementChild.tagName)
  ) {
    target = target.lastElementChild;
  }
  return target;
}

let assistantName = "Tally"; // the tenant's persona.name, from GET /api/health

/** Who answers, as each reply is labelled: the caller's tenant's persona. */
export function setAssistantName(name) {
  if (typeof name === "string" && name.trim()) assistantName = name.trim();
}

export class ReplyView {
  /** `isDemo`: the demo provider answers, which the reply says plainly. */
  constructor({ isDemo = false } = {}) {
    this.parts = h("div", { class: "reply-parts" });
    this.badges = h("span", { class: "badges" });
    this.footer = h("div", { class: "msg-foot" });
    this.typing = h("div", { class: "typing", "aria-hidden": "true" }, h("i"), h("i"), h("i"));
    this.el = h(
      "article",
      { class: "msg msg-assistant", dataset: { testid: "assistant-message", status: "streaming" } },
      h("div", { class: "avatar", "aria-hidden": "true" }, [...assistantName][0].toUpperCase()),
      h(
        "div",
        { class: "msg-body" },
        h(
          "div",
          { class: "msg-head" },
          h("span", { class: "msg-name", dataset: { testid: "assistant-name" } }, assistantName),
          this.badges,
        ),
        this.parts,
        this.typing,
        this.footer,
      ),
    );
    if (isDemo) this.badges.append(h("span", { class: "badge badge-demo", t: "demoBadge" }));
    this.segment = null; // the text segment that deltas append to
    this.thinking = null;
    this.cards = new Map();
    this.texts = [];
    this.frame = 0;
    this.marker = null;
  }

  /** Draw a stored message (and the tool calls of its turn) as a finished reply. */
  static stored(message, toolConversations, options) {
    const view = new ReplyView(options);
    view.el.dataset.id = message.id;
    view.el.dataset.turnId = message.turn_id;
    if (message.compacted) view.compaction();
    if (message.thinking) view.thinkingText(message.thinking);
    for (const call of toolConversations) {
      view.toolCall(call);
      view.toolResult(call);
    }
    if (message.content) view.text(message.content);
    view.render();
    view.settle(message.status, message.created_at);
    return view;
  }

  thinkingText(text) {
    if (!this.thinking) {
      this.thinkingBody = h("div", { class: "thinking-body" });
      this.thinkingLabel = h("span", { t: "thinkingLive" });
      this.thinking = h(
        "details",
        { class: "thinking" },
        h("summary", {}, icon("spark"), this.thinkingLabel),
        this.thinkingBody,
      );
      this.parts.prepend(this.thinking);
    }
    this.thinkingBody.textContent += text;
  }

  /**
   * Mark the reply as answered from a compacted request: a divider above it, with the token
   * counts of the `compaction` event when there is one (a stored reply only has its flag).
   */
  compaction(data = null) {
    const number = new Intl.NumberFormat(locale());
    const counts =
      data &&
      h("span", {
        class: "compaction-tokens",
        dataset: { testid: "compaction-tokens" },
        t: [
          "compactedTokens",
          { before: number.format(data.tokens_before), after: number.format(data.tokens_after) },
        ],
      });
    const marker = h(
      "div",
      { class: "compaction-marker", role: "note", dataset: { testid: "compaction-marker" } },
      h(
        "span",
        { class: "compaction-label" },
        icon("layers"),
        h("span", { class: "compaction-text" }, h("span", { t: "compacted" }), counts),
      ),
    );
    if (data?.dropped_messages) {
      setAttrs(marker, { title: "compactedHintCount" }, { n: data.dropped_messages });
    } else setAttrs(marker, { title: "compactedHint" });
    this.marker?.remove();
    this.marker = marker;
    this.el.prepend(marker);
  }

  text(text) {
    if (!text) return;
    if (!this.segment) {
      this.segment = { source: "", el: h("div", { class: "md" }) };
      this.texts.push(this.segment);
      this.parts.append(this.segment.el);
      if (this.thinkingLabel) setText(this.thinkingLabel, "thinking");
    }
    this.segment.source += text;
    this.scheduleRender();
  }

  toolCall(call) {
    this.closeSegment();
    const card = new ToolCard(call);
    this.cards.set(call.tool_call_id, card);
    this.parts.append(card.el);
  }

  /** The call waits for approval; `sendDecision(approved)` posts the person's decision. */
  toolApproval(request, sendDecision) {
    let card = this.cards.get(request.tool_call_id);
    if (!card) {
      this.toolCall(request);
      card = this.cards.get(request.tool_call_id);
    }
    card.askApproval(request, sendDecision);
  }

  toolResult(result) {
    const card = this.cards.get(result.tool_call_id) ?? new ToolCard(result);
    if (!card.el.isConnected) this.parts.append(card.el);
    card.finish(result);
  }

  notice(iconName, spec) {
    const note = h("div", { class: "reply-notice" }, icon(iconName), h("span", { t: spec }));
    this.parts.append(note);
    return note;
  }

  closeSegment() {
    this.render({ hasCaret: false });
    this.segment = null;
  }

  scheduleRender() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => this.render({ hasCaret: true }));
  }

  /** Re-render the open text segment: Markdown is re-parsed from its source each frame. */
  render({ hasCaret = false } = {}) {
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
    if (!this.segment) return;
    this.segment.el.replaceChildren(renderMarkdown(this.segment.source));
    if (hasCaret) {
      caretTarget(this.segment.el).append(h("span", { class: "caret", "aria-hidden": "true" }));
    }
  }

  get replyText() {
    return this.texts
      .map((s) => s.source.trim())
      .filter(Boolean)
      .join("\n\n");
  }

  /** The reply is over: `complete`, `incomplete` (cut off, kept) or `failed` (nothing kept). */
  settle(status, createdAt = new Date().toISOString()) {
    this.closeSegment();
    for (const card of this.cards.values()) card.removeApproval(); // no one can answer now
    this.typing.remove();
    this.el.dataset.status = status;
    if (status === "incomplete") {
      this.badges.append(
        h("span", {
          class: "badge badge-incomplete",
          t: "incomplete",
          tAttrs: { title: "incompleteHint" },
          dataset: { testid: "incomplete-badge" },
        }),
      );
    }
    if (this.thinkingLabel) setText(this.thinkingLabel, "thinking");
    this.footer.replaceChildren(h("time", { datetime: createdAt }, formatTime(createdAt)));
    if (this.replyText) {
      this.footer.append(
        copyButton(() => this.replyText, { labelKey: "copyReply", className: "copy-btn ghost" }),
      );
    }
  }

  /** Show why the turn ended early; `onRetry` sends it again. */
  fail({ code, message, retry_after: retryAfter }, { isStopped = false, onRetry = null } = {}) {
    const retry =
      onRetry &&
      h(
        "button",
        { type: "button", class: "btn btn-small", dataset: { testid: "retry" }, onclick: onRetry },
        icon("retry"),
        h("span", { t: "retry" }),
      );
    const box = errorBox(
      {
        className: `turn-error${isStopped ? " is-stopped" : ""}`,
        testid: "turn-error",
        iconName: isStopped ? "info" : "alert",
      },
      isStopped ? "stoppedTitle" : "errorTitle",
      [
        isStopped ? null : errorMessage(message),
        errorCode(code),
        retryAfter ? h("span", { t: ["retryAfter", { s: Math.ceil(retryAfter) }] }) : null,
      ],
      retry,
    );
    this.parts.append(box);
    this.errorBox = box;
  }

  removeRetry() {
    this.errorBox?.querySelector("[data-testid=retry]")?.remove();
  }
}
