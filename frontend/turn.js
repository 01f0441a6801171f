// One turn as the page sees it: the message sent to `POST /api/chat/send`, its streamed events
// drawn into a ReplyView, a stop that cancels it, and a retry that resumes it.

import { api, ApiError, newRequestId } from "./api.js";
import { contextReading } from "./gauge.js";
import { t } from "./i18n.js";
import { ReplyView } from "./reply.js";
import { userMessage } from "./thread.js";

const ABORT_AFTER_STOP_MS = 5000;

/**
 * What a `retry` event says: what failed (its `message` names the provider, its URL and the
 * cause; older servers send only the error code), or which provider is tried next. It never
 * guesses at a cause ("busy").
 */
export function retryNotice({ reason, provider, delay_s: delay, attempt, message }) {
  if (reason === "fallback") return ["fallingBack", { provider }];
  const when = { s: Math.ceil(delay), n: attempt };
  if (message) return ["retryingBecause", { message, ...when }];
  return ["retrying", { provider, reason, ...when }];
}

export class Turn {
  /**
   * `retryOf`: a failed turn sent again. It reuses that turn's Idempotency-Key, so the server
   * resumes the stored user message instead of adding a second one.
   */
  constructor({ sessionId, text, images = [], isDemo, retryOf = null }) {
    this.sessionId = sessionId;
    this.text = text;
    this.images = retryOf?.images ?? images; // image parts: {type: "image", media_type, data}
    this.key = retryOf?.key ?? newRequestId();
    this.userEl = retryOf?.userEl ?? userMessage({ content: text, images: this.images });
    this.view = new ReplyView({ isDemo });
    this.controller = new AbortController();
    this.turnId = null;
    this.isStarted = false; // the server has stored the user message
    this.isStopping = false;
    this.context = null; // {tokens, budget} of the request, once the turn completed
  }

  /**
   * Stream the reply until the turn ends. `onStarted` runs once the message is stored;
   * `onEvent(apply)` wraps each event's drawing (to keep the view scrolled); `onRetry(turn)`
   * is offered when the turn fails.
   */
  async run({ onStarted, onEvent, onRetry }) {
    this.userEl.classList.add("is-pending");
    this.userEl.classList.remove("is-unsent");
    this.onRetry = onRetry;
    let isEnded = false;
    try {
      const events = api.streamTurn({
        sessionId: this.sessionId,
        message: this.message,
        idempotencyKey: this.key,
        signal: this.controller.signal,
      });
      for await (const { event, data } of events) {
        onEvent(() => {
          isEnded = this.apply(event, data, onStarted) || isEnded;
        });
      }
      if (!isEnded) this.fail({ code: "stream_interrupted", message: t("interrupted") });
    } catch (err) {
      if (err.name === "AbortError") {
        this.fail({ code: "cancelled", message: "the turn was cancelled" });
      } else if (err instanceof ApiError) {
        this.fail({ code: err.code, message: err.message, retry_after: err.retryAfter });
      } else {
        this.fail({ code: "network_error", message: t("networkError") });
      }
    } finally {
      clearTimeout(this.abortTimer);
    }
  }

  /** The `message` of the send request: its text, or content parts when images go with it. */
  get message() {
    if (this.images.length === 0) return this.text;
    const text = this.text ? [{ type: "text", text: this.text }] : [];
    return [...text, ...this.images];
  }

  /** Draw one streamed event; true when it ended the turn. */
  apply(event, data, onStarted) {
    const { view } = this;
    switch (event) {
      case "turn.started":
        this.isStarted = true;
        this.turnId = data.turn_id;
        this.userEl.classList.remove("is-pending");
        Object.assign(this.userEl.dataset, { id: data.user_message_id, turnId: data.turn_id });
        view.el.dataset.turnId = data.turn_id;
        onStarted(this);
        return false;
      case "text.delta":
        view.text(data.text);
        return false;
      case "thinking.delta":
        view.thinkingText(data.text);
        return false;
      case "tool.call":
        view.toolCall(data);
        return false;
      case "tool.approval":
        view.toolApproval(data, (approved) =>
          api.decideToolCall(this.turnId, data.tool_call_id, approved),
        );
        return false;
      case "tool.result":
        view.toolResult(data);
        return false;
      case "retry":
        view.notice("retry", retryNotice(data));
        return false;
      case "compaction":
        view.compaction(data);
        return false;
      case "memory.degraded":
        view.notice("alert", ["memoryDegraded", { reason: data.reason }]).dataset.testid =
          "memory-degraded";
        return false;
      case "error":
        this.fail(data);
        return true;
      case "turn.completed":
        view.el.dataset.id = data.assistant_message_id;
        view.settle("complete");
        this.context = contextReading(data);
        return true;
      default:
        return false; // an event this page does not know yet
    }
  }

  fail(error) {
    const isKept = error.incomplete_message_id != null || Boolean(this.view.replyText);
    this.view.settle(isKept ? "incomplete" : "failed");
    this.userEl.classList.remove("is-pending");
    if (!this.isStarted) this.userEl.classList.add("is-unsent");
    const isStopped = this.isStopping || error.code === "cancelled";
    this.view.fail(error, { isStopped, onRetry: () => this.onRetry(this) });
  }

  /** Get ready to be sent again: the retry replaces a reply that kept nothing. */
  prepareRetry() {
    this.view.removeRetry();
    if (!this.view.replyText) this.view.el.remove();
  }

  /** Ask the server to cancel; if it cannot in time, dropping the stream cancels it too. */
  async stop() {
    if (this.isStopping) return;
    this.isStopping = true;
    this.abortTimer = setTimeout(() => this.controller.abort(), ABORT_AFTER_STOP_MS);
    try {
      const { cancelled } = await api.cancel(this.sessionId);
      if (!cancelled) this.controller.abort();
    } catch {
      this.controller.abort();
    }
  }
}
